"""`torchlint --fix / --diff / --add-noqa`: the fixing side of the lint command (ruff's flags).

- ``--fix`` applies the safe fixes and rewrites the files; ``--unsafe-fixes`` adds the unsafe
  ones; the findings left are reported as usual and decide the exit code.
- ``--diff`` prints the unified diff ``--fix`` would apply and changes nothing; exit 1 when
  there is something to fix, else 0.
- ``--show-fixes`` lists the findings that were fixed.
- ``--add-noqa`` appends ``# noqa: CODE`` to every reported line that cannot be fixed now.
- Source from stdin (``-``): the fixed source goes to stdout, the report to stderr.
"""

from __future__ import annotations

import sys

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def add_arguments(parser) -> None:
    fixing = parser.add_argument_group("fixing")
    fixing.add_argument("--fix", action="store_true", help="apply the safe fixes and rewrite the files")
    fixing.add_argument("--unsafe-fixes", action="store_true",
                        help="also apply (with --fix) or show (without) the fixes that may change behaviour")
    fixing.add_argument("--diff", action="store_true",
                        help="print the unified diff of what --fix would change, change nothing; "
                             "exit 1 when there is something to fix")
    fixing.add_argument("--show-fixes", action="store_true", help="list the findings that were fixed")
    fixing.add_argument("--add-noqa", action="store_true",
                        help="append `# noqa: CODE` to every reported line that cannot be fixed now")


def wanted(args) -> bool:
    return bool(args.fix or args.diff or args.add_noqa)


def check_arguments(args) -> str | None:
    if args.add_noqa and (args.fix or args.diff):
        return "--add-noqa cannot be combined with --fix or --diff"
    if args.statistics and wanted(args):
        return "--statistics cannot be combined with --fix, --diff or --add-noqa"
    return None


def run(args, rules, resolver, cli_layer, from_stdin: bool, stdin_name: str, paths, listed) -> int:
    """Fix (or diff, or add noqa to) the files the lint command would lint."""
    from torchlint.cli import UsageError, _excluded, require_rules
    from torchlint.config import ignored_for, select_rules
    from torchlint.fixer import fix_file, fix_text, decode
    from torchlint.runner import DEFAULT_MAX_FILE_SIZE

    problem = check_arguments(args)
    if problem:
        raise UsageError(problem)
    max_size = args.max_file_size or DEFAULT_MAX_FILE_SIZE
    results = []
    missing = []
    checked = 0
    if from_stdin:
        settings = resolver.for_path(stdin_name)
        selection = select_rules(rules, settings, cli_layer)
        require_rules(selection, settings, args)
        data = sys.stdin.buffer.read()
        if args.force_exclude and _excluded(stdin_name, settings):
            sys.stdout.buffer.write(data)
            return EXIT_OK
        result = _fix_stdin(data, stdin_name, selection, settings, args, fix_text, decode,
                            ignored_for(stdin_name, selection, settings))
        results.append(result)
        checked = 1
    else:
        from torchlint.files import PathError, collect_files

        try:
            collected = collect_files(paths, resolver.for_directory, args.force_exclude, listed)
        except PathError as error:
            raise UsageError(str(error)) from None
        missing = collected.missing
        for given in missing:
            print(f"torchlint: error: {given}: no such file or directory (listed in --files-from)", file=sys.stderr)
        for path in collected.files:
            settings = resolver.for_path(path)
            selection = select_rules(rules, settings, cli_layer)
            require_rules(selection, settings, args)
            ignored = ignored_for(path, selection, settings)
            if args.add_noqa:
                from torchlint.fix_noqa import add_noqa_to_file

                results.append(add_noqa_to_file(path, selection.rules, settings.options, ignored,
                                                args.unsafe_fixes, not args.no_prefilter))
            else:
                results.append(fix_file(path, selection.rules, settings.options, args.unsafe_fixes, ignored,
                                        write=bool(args.fix and not args.diff), prefilter=not args.no_prefilter,
                                        max_size=max_size))
        checked = len(collected.files)
    return _report(args, results, rules, checked, from_stdin, bool(missing))


def _fix_stdin(data, name, selection, settings, args, fix_text, decode, ignored):
    from torchlint.engine import SourceError, lint_source
    from torchlint.fixer import FixResult

    try:
        decoded = decode(data)
    except SourceError:
        result = FixResult(name, "", "")
        result.remaining = [v for v in lint_source(data, name, selection.rules, settings.options) if v.code not in ignored]
        result.passthrough = data
        return result
    if args.add_noqa:
        from torchlint.fix_noqa import add_noqa_text

        result = add_noqa_text(decoded.text, name, selection.rules, settings.options, ignored, args.unsafe_fixes)
    else:
        result = fix_text(decoded.text, name, selection.rules, settings.options, args.unsafe_fixes, ignored,
                          not args.no_prefilter)
    result.passthrough = None
    result.decoded = decoded
    return result


def _report(args, results, rules, checked: int, from_stdin: bool, missing: bool) -> int:
    from torchlint.cli import _write_report
    from torchlint.fixer import encode, unified_diff
    from torchlint.formatters import escape_controls
    from torchlint.runner import RunResult

    refused = [result for result in results if result.refused]
    for result in refused:
        print(f"torchlint: error: {escape_controls(result.path)}: {result.refused}", file=sys.stderr)
    remaining = sorted(violation for result in results for violation in result.remaining)
    applied = [violation for result in results for violation in result.applied]
    if args.diff:
        out = "".join(unified_diff(result.path, result.original, result.fixed) for result in results if result.changed)
        sys.stdout.write(out)
        sys.stdout.flush()
        if not args.quiet:
            count = len(applied)
            files = sum(1 for result in results if result.changed)
            print(f"Would fix {count} problem{'s' * (count != 1)} in {files} file{'s' * (files != 1)}.",
                  file=sys.stderr)
        if refused or missing:
            return EXIT_ERROR
        return EXIT_FINDINGS if applied else EXIT_OK
    if from_stdin:
        result = results[0]
        if getattr(result, "passthrough", None) is not None:
            sys.stdout.buffer.write(result.passthrough)
        else:
            sys.stdout.buffer.write(encode(result.fixed, result.decoded))
        sys.stdout.flush()
        if args.output_file:
            _write_report(args, RunResult(remaining, checked), rules)
        else:  # stdout carries the fixed source: the report goes to stderr
            from torchlint.formatters import render, summary

            sys.stderr.write(render(remaining, args.format, rules, unsafe_fixes=args.unsafe_fixes))
            if args.format == "text" and not args.quiet:
                print(summary(remaining, checked), file=sys.stderr)
    else:
        _write_report(args, RunResult(remaining, checked), rules)
    if not args.quiet:
        if args.add_noqa:
            added = sum(getattr(result, "added", 0) for result in results)
            print(f"Added {added} noqa directive{'s' * (added != 1)}.", file=sys.stderr)
        else:
            print(f"Fixed {len(applied)} problem{'s' * (len(applied) != 1)}.", file=sys.stderr)
    if args.show_fixes and applied:
        print(show_fixes(applied), file=sys.stderr, end="")
    if refused or missing:
        return EXIT_ERROR
    if remaining and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_OK


def show_fixes(applied) -> str:
    from collections import Counter

    from torchlint.formatters import escape_controls

    counts = Counter((violation.path, violation.code, violation.fix.message) for violation in applied)
    lines = ["Fixed:"]
    for (path, code, message), count in sorted(counts.items()):
        lines.append(f"  {escape_controls(path)}: {count} x {code} ({message})")
    return "\n".join(lines) + "\n"
