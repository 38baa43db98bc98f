"""`torchlint [paths...]` and `torchlint verify ...`.

Exit codes: 0 nothing found, 1 findings (TL000 included), 2 usage or configuration error or a
missing path. Nothing heavy is imported here: libcst only when a file has to be parsed, torch
never (the verifier is imported only for `torchlint verify`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from torchlint import __version__

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
# Kept here so that --version/--help import nothing more.
FORMATS = ("text", "full", "concise", "json", "sarif", "github", "gitlab", "junit")
TEXT_FORMATS = ("text", "full", "concise")  # text: full on a terminal, concise otherwise


class UsageError(Exception):
    pass


class OutputError(Exception):
    """The report could not be written (a full disk, a closed stdout): the environment's fault."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchlint",
        description="Find PyTorch memory and autograd mistakes. "
                    "`torchlint verify --help` for the runtime verifier, "
                    "`torchlint server --help` for the language server.",
    )
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="files or directories to lint (default: the current directory); "
                             "`-` reads source from stdin. After `--`, every argument is a path, "
                             "even one that starts with `-`")
    selection = parser.add_argument_group("rule selection (comma-separated code prefixes, or ALL)")
    selection.add_argument("--select", action="append", metavar="CODES",
                           help="run exactly these rules (replaces the configured selection)")
    selection.add_argument("--extend-select", action="append", default=[], metavar="CODES",
                           help="run these rules in addition")
    selection.add_argument("--ignore", action="append", default=[], metavar="CODES",
                           help="do not report these codes")
    output = parser.add_argument_group("output")
    output.add_argument("--output-format", "--format", dest="format", choices=FORMATS, default="text",
                        help="output format (default: text, which is `full` on a terminal, with the code and "
                             "a fix hint for each finding, and one `concise` line a finding otherwise)")
    output.add_argument("-o", "--output-file", metavar="FILE", help="write the report to FILE instead of stdout")
    output.add_argument("--statistics", action="store_true", help="print the number of findings per code instead")
    output.add_argument("-q", "--quiet", action="store_true", help="no summary line or progress on stderr")
    output.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    info = parser.add_argument_group("information")
    info.add_argument("--explain", metavar="CODE", help="print a rule's documentation and exit")
    info.add_argument("--list-rules", action="store_true", help="list every rule and exit")
    info.add_argument("--version", action="version", version=f"torchlint {__version__}")
    files = parser.add_argument_group("files and configuration")
    files.add_argument("--config", metavar="FILE", help="read settings from FILE instead of the nearest pyproject.toml")
    files.add_argument("--files-from", metavar="FILE", help="also lint the paths listed in FILE, one a line (`-`: stdin)")
    files.add_argument("--stdin-filename", metavar="NAME", help="name to report source read from stdin under")
    files.add_argument("--force-exclude", action="store_true",
                       help="apply exclude patterns to files named explicitly too (useful with pre-commit)")
    files.add_argument("--no-respect-gitignore", action="store_true",
                       help="also walk into what .gitignore, .git/info/exclude and git's global "
                            "excludes file ignore (explicit files are linted either way)")
    files.add_argument("--max-file-size", type=_size, default=None, metavar="BYTES",
                       help="a larger file is not read and gets TL000 (default: 4M; suffixes K, M, G)")
    files.add_argument("--pre-commit", action="store_true",
                       help="as the pre-commit hook runs it: the file names must follow `--`, so that "
                            "a file named like an option is never taken for one")
    speed = parser.add_argument_group("speed")
    speed.add_argument("-j", "--jobs", type=_positive_int, metavar="N",
                       help="worker processes (default: all cores; capped at the number of cores and of files)")
    speed.add_argument("--no-cache", action="store_true", help="neither read nor write .torchlint_cache")
    speed.add_argument("--no-prefilter", action="store_true", help="debug: parse every file, even without rule tokens")
    from torchlint.fix_cli import add_arguments as add_fix_arguments

    add_fix_arguments(parser)  # --fix, --unsafe-fixes, --diff, --show-fixes, --add-noqa
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    number, unit = text.strip().upper().removesuffix("B").removesuffix("I"), 1
    if number[-1:] in units:
        number, unit = number[:-1], units[number[-1]]
    try:
        value = int(number) * unit
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (bytes, or a number with K, M or G)") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1 byte")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "verify":
            return _verify(argv[1:])
        if argv and argv[0] == "server":  # language server (torchlint/lsp): imports pygls only there
            from torchlint.lsp import main as server_main

            return server_main(argv[1:])
        return _lint(argv)
    except SystemExit as exit_:  # argparse: --help, --version, usage errors
        return exit_.code if isinstance(exit_.code, int) else EXIT_ERROR
    except UsageError as error:
        return _fail(str(error))
    except KeyboardInterrupt:  # workers are already stopped; nothing is reported
        return _fail("interrupted, no report written", 130)
    except BrokenPipeError:  # `torchlint | head`: the reader went away
        _silence_stdout()
        return EXIT_FINDINGS
    except OutputError as error:
        _silence_stdout()  # what is still buffered would fail again at exit
        return _fail(f"cannot write output: {error}")
    except Exception as error:  # no traceback ever reaches the user
        from torchlint.config import ConfigError

        if isinstance(error, ConfigError):
            return _fail(str(error))
        if isinstance(error, OSError):  # out of file descriptors, processes, memory: not a bug
            where = f"{error.filename}: " if error.filename else ""
            return _fail(f"{where}{error.strerror or error}")
        return _fail(f"internal error: {type(error).__name__}: {error}")


def run() -> None:
    raise SystemExit(main())


def _fail(message: str, code: int = EXIT_ERROR) -> int:
    _stop_progress()
    print(f"torchlint: error: {message}", file=sys.stderr)
    return code


def _silence_stdout() -> None:
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # AttributeError: no stdout at all
        pass


def _verify(argv: list[str]) -> int:
    try:
        from torchlint.verify.cli import main as verify_main
    except ModuleNotFoundError as error:
        if error.name == "torch":
            return _fail("torchlint verify needs torch: pip install 'torchlint[verify]'")
        if error.name and error.name.startswith("torchlint.verify"):
            return _fail("torchlint verify is not available in this installation")
        raise
    return verify_main(argv)


def _lint(argv: list[str]) -> int:
    if "--pre-commit" in argv and "--" not in argv:  # before argparse reads a file name as an option
        raise UsageError("--pre-commit: the hook's args must end with `--` (as in `args: [--force-exclude, --]`), "
                         "so that a file named like an option is never taken for one")
    args = build_parser().parse_args(argv)
    if args.statistics and args.format not in (*TEXT_FORMATS, "json"):
        raise UsageError(f"--statistics prints text or json, not {args.format}: drop --statistics or "
                         "use --format text or json")
    if args.output_file:
        check_output_path(args.output_file, "--output-file")
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")

    from torchlint.rules import all_rules, rules_by_code

    rules = all_rules()
    if args.list_rules:
        return _list_rules(rules, args.format)
    if args.explain:
        return _explain(args.explain, rules_by_code())

    from torchlint.config import ConfigResolver, Layer, Settings, ignored_for, select_rules, split_codes
    from torchlint.files import collect_files, read_path_list
    from torchlint.runner import DEFAULT_MAX_FILE_SIZE, Job, RunResult, lint_stdin

    paths = list(args.paths)
    from_stdin = paths == ["-"] or (not paths and args.stdin_filename is not None and not args.files_from)
    if "-" in paths and not from_stdin:
        raise UsageError("`-` (source from stdin) must be the only path")
    if from_stdin and args.files_from is not None:
        raise UsageError("--files-from cannot be combined with source read from stdin (`-`)")
    listed = _read_files_from(args.files_from, read_path_list) if args.files_from is not None else []
    if not paths and args.files_from is None:
        paths = ["."]
    stdin_name = args.stdin_filename or "-"

    # Each file gets the configuration that applies to it (--config, else the nearest
    # pyproject.toml with [tool.torchlint] above the file), whatever else is in the run.
    resolver = ConfigResolver(args.config)
    cli_layer = Layer(
        select=[code for text in args.select for code in split_codes(text)] if args.select else None,
        extend_select=[code for text in args.extend_select for code in split_codes(text)],
        ignore=[code for text in args.ignore for code in split_codes(text)],
    )
    selection = select_rules(rules, resolver.fixed or Settings(root="."), cli_layer)  # bad codes fail before any work
    if cli_layer.select is not None:  # --select replaces every configured selection
        require_rules(selection, None, args)

    from torchlint import fix_cli

    if fix_cli.wanted(args):
        return fix_cli.run(args, rules, resolver, cli_layer, from_stdin, stdin_name, paths, listed)
    if from_stdin:
        settings = resolver.for_path(stdin_name)
        selection = select_rules(rules, settings, cli_layer)
        require_rules(selection, settings, args)
        data = sys.stdin.buffer.read()
        args.stdin_sources = {stdin_name: data}
        if args.force_exclude and _excluded(stdin_name, settings):
            result = RunResult([], 0)  # like ruff: an excluded file passes through unlinted
        else:
            job = Job(selection.rules, settings.options, prefilter=not args.no_prefilter,
                      max_file_size=args.max_file_size or DEFAULT_MAX_FILE_SIZE)
            result = lint_stdin(data, stdin_name, job, ignored_for(stdin_name, selection, settings))
    else:
        from torchlint.files import PathError

        try:
            collected = collect_files(paths, resolver.for_directory, args.force_exclude, listed,
                                      respect_gitignore=not args.no_respect_gitignore)
        except PathError as error:
            raise UsageError(str(error)) from None
        for given in collected.missing:  # reported, the rest linted, and the run exits 2
            print(f"torchlint: error: {given}: no such file or directory (listed in --files-from)", file=sys.stderr)
        result = _lint_collected(collected, resolver, rules, cli_layer, args)

    _write_report(args, result, rules)
    if not from_stdin and collected.missing:
        return EXIT_ERROR
    if result.violations and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_OK


def _lint_collected(collected, resolver, rules, cli_layer, args):
    """Lint the files of each configuration together; paths that could not be read get TL000."""
    from functools import partial

    from torchlint.config import ignored_for, select_rules
    from torchlint.engine import invalid_file
    from torchlint.runner import DEFAULT_MAX_FILE_SIZE, Job, RunResult, default_jobs, lint_files

    groups: dict[int, tuple] = {}  # id(settings) -> (settings, selection, files)

    def group(path: str) -> tuple:
        settings = resolver.for_path(path)
        if id(settings) not in groups:
            groups[id(settings)] = (settings, select_rules(rules, settings, cli_layer), [])
            require_rules(groups[id(settings)][1], settings, args)
        return groups[id(settings)]

    for path in collected.files:
        group(path)[2].append(path)
    violations = []
    for path, reason in collected.problems:
        settings, selection, _ = group(path)
        if invalid_file(path, reason).code not in ignored_for(path, selection, settings):
            violations.append(invalid_file(path, reason))
    checked = len(collected.problems)
    progress = _start_progress(args, len(collected.files))
    for settings, selection, files in list(groups.values()):
        if not files:
            continue
        job = Job(selection.rules, settings.options, prefilter=not args.no_prefilter,
                  max_file_size=args.max_file_size or DEFAULT_MAX_FILE_SIZE)
        cache = None
        if not args.no_cache:
            from torchlint.cache import Cache, configuration_key

            cache = Cache(configuration_key(selection.codes, settings.options, job.prefilter))
        part = lint_files(files, job, cache, args.jobs or default_jobs(),
                          partial(ignored_for, selection=selection, settings=settings), progress)
        violations += part.violations
        checked += part.files_checked
    _stop_progress()
    return RunResult(sorted(violations), checked)


# --- the progress line (torchlint.progress) ---------------------------------------------------

_progress = None  # the line being drawn, so that an error or Ctrl-C erases it before its message


def _start_progress(args, total: int):
    """``advance`` of a progress line on stderr for a person at a terminal, else None."""
    global _progress
    from torchlint.progress import Progress, wanted

    _progress = Progress(total) if total and wanted(sys.stderr, args.quiet) else None
    return _progress.advance if _progress is not None else None


def _stop_progress() -> None:
    global _progress
    if _progress is not None:
        _progress.close()
        _progress = None


def require_rules(selection, settings, args) -> None:
    """A `select` that leaves no rule to run is a configuration error, not a clean result.

    (Ignoring every rule without a `select` stays allowed: a subproject may switch torchlint off.)
    """
    if selection.rules:
        return
    if args.select:
        origin = "--select " + ",".join(repr(text) for text in args.select)
    elif settings is not None and settings.file_layer.select is not None:
        origin = f"{settings.source or 'the configuration'}: select"
    else:
        return
    raise UsageError(f"no rules to run: {origin} selects none "
                     "(TL000 alone is not a rule; `torchlint --list-rules` lists the codes)")


def _excluded(path: str, settings) -> bool:
    from torchlint.files import _Excluder

    return _Excluder(settings.exclude, settings.root).with_parents(path)


def check_output_path(path: str, option: str) -> None:
    """Fail before the work, not after it, when the report could not be written to ``path``."""
    import os

    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        problem = "is a directory"
    elif not os.path.isdir(directory):
        problem = f"directory {os.path.dirname(path) or '.'} does not exist"
    elif os.path.exists(path) and not os.access(path, os.W_OK):
        problem = "not writable"
    elif not os.path.exists(path) and not os.access(directory, os.W_OK | os.X_OK):
        problem = f"directory {os.path.dirname(path) or '.'} is not writable"
    else:
        return
    raise UsageError(f"{option} {path}: {problem}")


def _read_files_from(source: str, parse) -> list[str]:
    if source == "-":
        return parse(sys.stdin)
    try:
        with open(source, encoding="utf-8") as handle:
            return parse(handle)
    except OSError as error:
        raise UsageError(f"--files-from {source}: {error.strerror or error}") from None


def _write_report(args, result, rules) -> None:
    from torchlint.formatters import full_report, render, statistics, summary, use_colour

    stream = sys.stdout
    if args.output_file:
        try:
            stream = open(args.output_file, "w", encoding="utf-8", newline="\n")
        except OSError as error:
            raise UsageError(f"--output-file {args.output_file}: {error.strerror or error}") from None
    elif stream is None:  # started with stdout closed (`torchlint >&-`)
        raise OutputError("stdout is closed")
    try:
        if args.statistics:
            stream.write(statistics(result.violations, args.format))
        else:
            colour = args.format in TEXT_FORMATS and not args.output_file and use_colour(stream)
            output_format = _text_format(args, stream)
            if output_format == "full":  # shows code: source read from stdin is not on disk
                stream.write(full_report(result.violations, colour, getattr(args, "stdin_sources", None)))
            else:
                stream.write(render(result.violations, output_format, rules, colour,
                                    unsafe_fixes=getattr(args, "unsafe_fixes", False)))
        stream.flush()
    except BrokenPipeError:
        raise
    except OSError as error:  # a full disk, a closed descriptor
        where = f"{args.output_file}: " if args.output_file else ""
        raise OutputError(f"{where}{error.strerror or error}") from None
    finally:
        if stream is not sys.stdout:
            try:
                stream.close()
            except OSError:
                pass
    if args.format in TEXT_FORMATS and not args.quiet:
        print(summary(result.violations, result.files_checked), file=sys.stderr)
        from torchlint.formatters import fix_summary

        fixable = fix_summary(result.violations, getattr(args, "unsafe_fixes", False))
        if fixable:
            print(fixable, file=sys.stderr)


def _text_format(args, stream) -> str:
    """``text`` is ``full`` on a terminal and ``concise`` in a pipe, a file or CI."""
    if args.format != "text":
        return args.format
    from torchlint.progress import in_ci

    isatty = getattr(stream, "isatty", None)
    return "full" if not args.output_file and isatty and isatty() and not in_ci() else "concise"


def _list_rules(rules, output_format: str) -> int:
    rows = [
        {"code": rule.CODE, "name": rule.NAME, "default": "on" if rule.ENABLED_BY_DEFAULT else "off",
         "summary": rule.summary()}
        for rule in rules
    ]
    if output_format == "json":
        import json

        print(json.dumps(rows, indent=2))
        return EXIT_OK
    width = max((len(row["name"]) for row in rows), default=0)
    for row in rows:
        print(f"{row['code']}  {row['name']:<{width}}  {row['default']:<3}  {row['summary']}")
    return EXIT_OK


def _explain(code: str, by_code: dict) -> int:
    from torchlint.docs import explain, explain_invalid_file
    from torchlint.violation import INVALID_FILE_CODE

    code = code.strip().upper()
    if code == INVALID_FILE_CODE:
        print(explain_invalid_file(), end="")
        return EXIT_OK
    if code not in by_code:
        raise UsageError(f"unknown rule code {code!r} (known codes: {', '.join([INVALID_FILE_CODE, *by_code])})")
    print(explain(by_code[code]), end="")
    return EXIT_OK
