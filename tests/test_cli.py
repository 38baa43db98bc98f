"""The command-line contract: exit codes, options, configuration, files, suppression, TL000,
decoding, stdin, cache and parallel runs. Most tests run `main()` in-process on toy rules
(tests/cli_support.py) whose findings are fully predictable; a few run real subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import torchlint.runner
from cli_support import (  # noqa: F401 - fixtures are used by name
    REPO, Exploding, PassStatement, PrintCall, bad_samples, cli, run_torchlint, toy_rules, write,
)
from torchlint.cache import _source_fingerprint
from torchlint.cli import main
from torchlint.formatters import use_colour

pytestmark = pytest.mark.usefixtures("toy_rules")

PRINTS = "x = 1\nprint(x)\n"


def findings(result) -> list[tuple[str, int, int, str]]:
    return [(item["path"], item["line"], item["column"], item["code"]) for item in result.json()]


# --- exit codes and text output ----------------------------------------------------------------

def test_clean_tree_exits_zero(cli, tmp_path):
    write(tmp_path, "clean.py", "x = 1\n")
    result = cli()
    assert result.code == 0
    assert result.out == ""
    assert result.err.strip() == "No problems found (1 file checked)."


def test_findings_exit_one_in_flake8_shape(cli, tmp_path):
    write(tmp_path, "pkg/a.py", PRINTS)
    write(tmp_path, "pkg/b.py", "print(1)\nprint(2)\n")
    result = cli("pkg")
    assert result.code == 1
    assert result.lines == [
        "pkg/a.py:2:1: TL901 `print(...)` called",
        "pkg/b.py:1:1: TL901 `print(...)` called",
        "pkg/b.py:2:1: TL901 `print(...)` called",
    ]
    assert result.err.strip() == "Found 3 problems in 2 files (2 files checked)."


def test_exit_zero_and_missing_path(cli, tmp_path):
    write(tmp_path, "a.py", PRINTS)
    assert cli("--exit-zero", "a.py").code == 0
    missing = cli("a.py", "nope.py")
    assert missing.code == 2
    assert missing.err.strip() == "torchlint: error: nope.py: no such file or directory"


def test_usage_errors_exit_two_without_traceback(cli):
    for args in (["--format", "xml"], ["--jobs", "0"], ["--no-such-option"]):
        result = cli(*args)
        assert result.code == 2, args
        assert "Traceback" not in result.err


def test_internal_error_is_one_line(cli, tmp_path, monkeypatch):
    write(tmp_path, "a.py", PRINTS)

    def broken(*args, **kwargs):
        raise ValueError("disk on fire")

    monkeypatch.setattr(torchlint.runner, "lint_files", broken)
    result = cli("a.py")
    assert result.code == 2
    assert result.err == "torchlint: error: internal error: ValueError: disk on fire\n"


def test_colour_only_on_a_tty_without_no_color(monkeypatch):
    class Terminal:
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_colour(Terminal())
    assert not use_colour(open(os.devnull, "w"))
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_colour(Terminal())


def test_version_and_module_entry_point(tmp_path):
    result = run_torchlint("--version", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.strip() == f"torchlint {torchlint.__version__}"


# --- formats and reports -----------------------------------------------------------------------

def test_every_format(cli, tmp_path):
    write(tmp_path, "a.py", PRINTS)
    as_json = cli("--format", "json", "a.py")
    assert as_json.code == 1
    assert findings(as_json) == [("a.py", 2, 1, "TL901")]
    sarif = cli("--format", "sarif", "a.py")
    assert sarif.code == 1
    assert json.loads(sarif.out)["runs"][0]["results"][0]["ruleId"] == "TL901"
    github = cli("--format", "github", "a.py")
    assert github.lines == [
        "::warning file=a.py,line=2,col=1,endLine=2,endColumn=9,title=TL901::`print(...)` called"
    ]
    assert as_json.err == sarif.err == github.err == ""  # machine formats print nothing else


def test_output_file(cli, tmp_path):
    write(tmp_path, "a.py", PRINTS)
    result = cli("--format", "json", "--output-file", "report.json", "a.py")
    assert result.code == 1
    assert result.out == ""
    assert [item["code"] for item in json.loads((tmp_path / "report.json").read_text())] == ["TL901"]


def test_statistics(cli, tmp_path):
    write(tmp_path, "a.py", "print(1)\nprint(2)\npass\n")
    result = cli("--statistics", "--extend-select", "TL902")
    assert result.code == 1
    assert result.lines == ["     2  TL901  print-call", "     1  TL902  pass-statement"]
    as_json = cli("--statistics", "--extend-select", "TL902", "--format", "json")
    assert as_json.json() == [
        {"code": "TL901", "name": "print-call", "count": 2},
        {"code": "TL902", "name": "pass-statement", "count": 1},
    ]


def test_explain(cli):
    result = cli("--explain", "tl901")
    assert result.code == 0
    text = result.out
    assert text.startswith("# TL901 print-call\n")
    assert "Default: on." in text
    for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert heading in text
    assert "```python\nprint(1)  # expect: TL901\n```" in text
    assert "nothing at all" in text  # the claim
    assert "Default: off" in cli("--explain", "TL902").out
    assert cli("--explain", "TL000").code == 0
    unknown = cli("--explain", "TL999")
    assert unknown.code == 2
    assert "TL999" in unknown.err


def test_list_rules(cli):
    result = cli("--list-rules")
    assert result.code == 0
    assert [line.split()[:3] for line in result.lines] == [
        ["TL901", "print-call", "on"], ["TL902", "pass-statement", "off"], ["TL903", "exploding", "off"],
    ]
    assert [row["code"] for row in cli("--list-rules", "--format", "json").json()] == ["TL901", "TL902", "TL903"]


# --- selection and configuration ---------------------------------------------------------------

SELECTION_SOURCE = "print(1)\npass\n"


@pytest.mark.parametrize(("args", "codes"), [
    ((), ["TL901"]),  # TL902 is off by default
    (("--extend-select", "TL902"), ["TL901", "TL902"]),
    (("--select", "TL902"), ["TL902"]),
    (("--select", "TL90", "--ignore", "TL903"), ["TL901", "TL902"]),
    (("--select", "TL901,TL902"), ["TL901", "TL902"]),
    (("--select", "ALL", "--ignore", "TL901,TL903"), ["TL902"]),
    (("--ignore", "TL901"), []),
])
def test_selection(cli, tmp_path, args, codes):
    write(tmp_path, "a.py", SELECTION_SOURCE)
    result = cli("--format", "json", *args)
    assert [item["code"] for item in result.json()] == codes


def test_unknown_code_on_command_line(cli, tmp_path):
    result = cli("--select", "TL9999")
    assert result.code == 2
    assert "unknown rule code 'TL9999'" in result.err


def config(tmp_path, body: str) -> None:
    write(tmp_path, "pyproject.toml", "[project]\nname = 'x'\n\n[tool.torchlint]\n" + textwrap.dedent(body))


def test_config_file_selection_and_cli_override(cli, tmp_path):
    write(tmp_path, "src/a.py", SELECTION_SOURCE)
    config(tmp_path, 'extend-select = ["TL902"]\nignore = ["TL901"]\n')
    assert [item["code"] for item in cli("--format", "json", "src").json()] == ["TL902"]
    # --select on the command line replaces the file's whole selection.
    assert [item["code"] for item in cli("--format", "json", "--select", "TL901", "src").json()] == ["TL901"]


def test_config_is_found_by_walking_up_from_the_paths(cli, tmp_path, monkeypatch):
    project = tmp_path / "project"
    write(project, "pkg/a.py", "pass\n")
    config(project, 'select = ["TL902"]\n')
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    monkeypatch.chdir(outside)
    code = main(["--format", "json", "--no-cache", str(project / "pkg")])
    assert code == 1


@pytest.mark.parametrize(("body", "named"), [
    ('selekt = ["TL901"]\n', "'selekt'"),
    ('select = ["TL9"]\nignore = ["TL777"]\n', "'TL777'"),
    ('select = "TL901"\n', "select"),
    ('[tool.torchlint.per-file-ignores]\n"tests/*" = ["XX1"]\n', "'XX1'"),
    ('eval-function-words = [1]\n', "eval-function-words"),
])
def test_config_errors_name_the_key(cli, tmp_path, body, named):
    write(tmp_path, "a.py", "x = 1\n")
    config(tmp_path, body)
    result = cli("a.py")
    assert result.code == 2
    assert result.err.startswith("torchlint: error: ")
    assert named in result.err
    assert str(tmp_path / "pyproject.toml") in result.err
    assert result.err.count("\n") == 1


def test_invalid_toml_and_explicit_config(cli, tmp_path):
    write(tmp_path, "a.py", SELECTION_SOURCE)
    write(tmp_path, "pyproject.toml", "[tool.torchlint\n")
    assert "invalid TOML" in cli("a.py").err
    write(tmp_path, "lint.toml", 'select = ["TL902"]\n')
    result = cli("--config", "lint.toml", "--format", "json", "a.py")
    assert [item["code"] for item in result.json()] == ["TL902"]
    assert cli("--config", "missing.toml", "a.py").code == 2


def test_eval_function_words_reach_the_rules(cli, tmp_path, monkeypatch):
    seen = []
    original = PrintCall.visit_Expr

    def spy(self, node, ctx):
        seen.append(self.options.get("eval-function-words"))
        original(self, node, ctx)

    monkeypatch.setattr(PrintCall, "visit_Expr", spy)
    write(tmp_path, "a.py", PRINTS)
    config(tmp_path, 'eval-function-words = ["score", "probe"]\n')
    cli("--no-cache", "a.py")
    assert seen == [["score", "probe"]]


def test_per_file_ignores(cli, tmp_path):
    write(tmp_path, "src/a.py", SELECTION_SOURCE)
    write(tmp_path, "tests/test_a.py", SELECTION_SOURCE)
    write(tmp_path, "tests/conftest.py", SELECTION_SOURCE)
    config(tmp_path, """
        extend-select = ["TL902"]
        [tool.torchlint.per-file-ignores]
        "tests/*" = ["TL901"]
        "conftest.py" = ["TL9"]
    """)
    result = cli("--format", "json")
    assert [(item["path"], item["code"]) for item in result.json()] == [
        ("src/a.py", "TL901"), ("src/a.py", "TL902"), ("tests/test_a.py", "TL902"),
    ]


def test_exclude_and_explicit_files(cli, tmp_path):
    write(tmp_path, "src/a.py", PRINTS)
    write(tmp_path, "src/generated/g.py", PRINTS)
    write(tmp_path, "legacy/old.py", PRINTS)
    config(tmp_path, 'extend-exclude = ["src/generated", "legacy"]\n')
    assert [item["path"] for item in cli("--format", "json").json()] == ["src/a.py"]
    # A file named on the command line is linted anyway, unless --force-exclude.
    assert [item["path"] for item in cli("--format", "json", "legacy/old.py").json()] == ["legacy/old.py"]
    assert cli("--format", "json", "--force-exclude", "legacy/old.py").json() == []


def test_default_skips(cli, tmp_path):
    write(tmp_path, "pkg/a.py", PRINTS)
    for skipped in (".git/x.py", ".venv/lib/x.py", "venv/x.py", "env/pyvenv.cfg", "env/lib/x.py",
                    "build/x.py", "dist/x.py", "pkg/__pycache__/x.py", "node_modules/x.py",
                    "pkg.egg-info/x.py", ".tox/x.py", ".mypy_cache/x.py", "notes.txt"):
        write(tmp_path, skipped, PRINTS)
    assert [item["path"] for item in cli("--format", "json").json()] == ["pkg/a.py"]
    # `exclude` replaces the defaults.
    config(tmp_path, 'exclude = [".git", "venv", ".venv", "node_modules", "*.egg-info", ".tox", ".mypy_cache", "__pycache__"]\n')
    assert [item["path"] for item in cli("--format", "json").json()] == ["build/x.py", "dist/x.py", "pkg/a.py"]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_symlinked_directories_are_not_followed(cli, tmp_path):
    write(tmp_path, "pkg/a.py", PRINTS)
    os.symlink(tmp_path / "pkg", tmp_path / "pkg" / "loop")  # pkg/loop -> pkg
    os.symlink(tmp_path, tmp_path / "pkg" / "up")  # pkg/up -> the root
    result = cli("--format", "json")
    assert [item["path"] for item in result.json()] == ["pkg/a.py"]


# --- suppression -------------------------------------------------------------------------------

def test_noqa_and_skip_file(cli, tmp_path):
    write(tmp_path, "a.py", textwrap.dedent("""\
        print(1)  # noqa
        print(2)  # noqa: TL901
        print(3)  # noqa:TL9
        print(4)  # noqa: E501
        print(5)  # NOQA: E501, TL901
        print(6)
    """))
    write(tmp_path, "b.py", "# torchlint: skip-file\nprint(1)\n")
    result = cli("--format", "json")
    assert [(item["path"], item["line"]) for item in result.json()] == [("a.py", 4), ("a.py", 6)]


# --- files that cannot be analysed -------------------------------------------------------------

def test_tl000_for_broken_files_and_the_run_goes_on(cli, tmp_path):
    write(tmp_path, "1_undecodable.py", b"print(1)\nx = '\xff\xfe'\n")
    write(tmp_path, "2_unparseable.py", "print(1)\n\ndef f(:\n    pass\n")
    os.symlink(tmp_path / "gone.py", tmp_path / "3_unreadable.py")
    write(tmp_path, "4_fine.py", PRINTS)
    result = cli("--format", "json", "1_undecodable.py", "2_unparseable.py", "3_unreadable.py", "4_fine.py")
    assert result.code == 1
    rows = result.json()
    assert [(row["path"], row["code"]) for row in rows] == [
        ("1_undecodable.py", "TL000"), ("2_unparseable.py", "TL000"), ("3_unreadable.py", "TL000"),
        ("4_fine.py", "TL901"),
    ]
    assert "decode" in rows[0]["message"] and rows[0]["line"] == 2
    assert "syntax error" in rows[1]["message"] and rows[1]["line"] >= 3  # libcst may point past it
    assert "cannot read" in rows[2]["message"]
    assert all(row["name"] == "invalid-file" for row in rows[:3])


def test_tl000_can_only_be_ignored(cli, tmp_path):
    write(tmp_path, "a.py", "pass\nprint(1\n")
    assert [row["code"] for row in cli("--format", "json", "--select", "TL902").json()] == ["TL000"]
    assert cli("--format", "json", "--ignore", "TL000").json() == []


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_internal_errors_become_tl000(cli, tmp_path, monkeypatch, jobs):
    for index in range(6):
        write(tmp_path, f"f{index}.py", PRINTS)
    # A rule failing inside the engine ...
    result = cli("--format", "json", "--no-cache", "-j", jobs, "--extend-select", "TL903")
    assert {(row["code"], row["message"]) for row in result.json()} >= {
        ("TL000", "internal error in TL903: RuntimeError: boom"), ("TL901", "`print(...)` called")}
    # ... and anything escaping the engine for one file.
    real = torchlint.runner.lint_source

    def flaky(data, path, *args, **kwargs):
        if path.endswith("f3.py"):
            raise MemoryError("too big")
        return real(data, path, *args, **kwargs)

    monkeypatch.setattr(torchlint.runner, "lint_source", flaky)
    rows = cli("--format", "json", "--no-cache", "-j", jobs).json()
    assert [(row["path"], row["code"]) for row in rows] == [
        ("f0.py", "TL901"), ("f1.py", "TL901"), ("f2.py", "TL901"), ("f3.py", "TL000"),
        ("f4.py", "TL901"), ("f5.py", "TL901"),
    ]
    assert rows[3]["message"] == "internal error: MemoryError: too big"


# --- decoding and positions --------------------------------------------------------------------

def test_latin1_cookie_bom_and_crlf_positions(cli, tmp_path):
    latin1 = "# -*- coding: latin-1 -*-\nx = 'é'; print(x)\n".encode("latin-1")
    write(tmp_path, "latin1.py", latin1)
    write(tmp_path, "bom.py", "\ufeffprint(1)\ny = 'é'; print(y)\n".encode("utf-8"))
    write(tmp_path, "crlf.py", b"x = 1\r\n\r\nif x:\r\n    print(x)\r\nprint(2)\r\n")
    rows = cli("--format", "json").json()
    assert [(row["path"], row["line"], row["column"], row["end_column"]) for row in rows] == [
        ("bom.py", 1, 1, 9), ("bom.py", 2, 10, 18),
        ("crlf.py", 4, 5, 13), ("crlf.py", 5, 1, 9),
        ("latin1.py", 2, 10, 18),
    ]


def test_modern_syntax_is_not_tl000(tmp_path):
    write(tmp_path, "modern.py", textwrap.dedent("""\
        type Pair[T] = tuple[T, T]

        def first[T](pair: Pair[T]) -> T:
            match pair:
                case (a, _) if a:
                    return a
                case _:
                    raise ValueError(f"{pair!r:>{10}}")

        class Box[T: (int, str)]:
            def get[**P, *Ts](self) -> T: ...

        async def stream(loader):
            async with loader as source:
                async for batch in source:
                    yield [x async for x in batch]
        """))
    # Real rules and no prefilter, so the file is certainly parsed.
    result = run_torchlint("--format", "json", "--no-cache", "--no-prefilter", "modern.py", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout) == []


# --- file lists and stdin ----------------------------------------------------------------------

def test_files_from_stdin_and_file(cli, tmp_path):
    write(tmp_path, "a.py", PRINTS)
    write(tmp_path, "b.py", PRINTS)
    write(tmp_path, "c.py", PRINTS)
    result = cli("--format", "json", "--files-from", "-", stdin="a.py\n\nc.py\n")
    assert [row["path"] for row in result.json()] == ["a.py", "c.py"]
    write(tmp_path, "list.txt", "b.py\n")
    assert [row["path"] for row in cli("--format", "json", "--files-from", "list.txt").json()] == ["b.py"]
    missing = cli("--files-from", "-", stdin="a.py\ngone.py\n")
    assert missing.code == 2 and "gone.py" in missing.err


def test_stdin_filename(cli, tmp_path):
    config(tmp_path, '[tool.torchlint.per-file-ignores]\n"tests/*" = ["TL901"]\n')
    result = cli("--format", "json", "--stdin-filename", "src/model.py", "-", stdin="x = 1\nprint(x)\n")
    assert result.code == 1
    assert findings(result) == [("src/model.py", 2, 1, "TL901")]
    ignored = cli("--stdin-filename", "tests/test_model.py", "-", stdin="print(1)\n")
    assert ignored.code == 0
    assert cli("-", "a.py").code == 2
    assert cli("--files-from", "-", "-", stdin="a.py\n").code == 2


# --- cache ---------------------------------------------------------------------------------------

def test_cache_hit_miss_and_invalidation(cli, tmp_path, lint_calls):
    write(tmp_path, "pyproject.toml", "[project]\nname = 'x'\n")  # the project root holds the cache
    write(tmp_path, "a.py", PRINTS)
    write(tmp_path, "b.py", "x = 1\n")
    cold = cli("--format", "json", "-j", "1")
    assert sorted(lint_calls) == ["a.py", "b.py"]
    assert (tmp_path / ".torchlint_cache" / ".gitignore").read_text().splitlines()[-1] == "*"

    lint_calls.clear()
    warm = cli("--format", "json", "-j", "1")
    assert lint_calls == []
    assert warm.out == cold.out and warm.code == cold.code == 1

    write(tmp_path, "b.py", "print(2)\n")  # content change: only b.py is linted again
    changed = cli("--format", "json", "-j", "1")
    assert lint_calls == ["b.py"]
    assert [row["path"] for row in changed.json()] == ["a.py", "b.py"]

    lint_calls.clear()
    os.utime(tmp_path / "a.py", (1, 1))  # mtime moved, content the same: hashed, not linted
    assert cli("--format", "json", "-j", "1").out == changed.out
    assert lint_calls == []

    cli("--format", "json", "-j", "1", "--extend-select", "TL902")  # configuration change
    assert sorted(lint_calls) == ["a.py", "b.py"]

    lint_calls.clear()
    config(tmp_path, 'eval-function-words = ["probe"]\n')  # options are part of the key too
    cli("-j", "1")
    assert sorted(lint_calls) == ["a.py", "b.py"]


def test_corrupt_cache_is_ignored_and_no_cache_bypasses(cli, tmp_path, lint_calls):
    write(tmp_path, "pyproject.toml", "[project]\nname = 'x'\n")  # the project root holds the cache
    write(tmp_path, "a.py", PRINTS)
    first = cli("--format", "json", "-j", "1")
    cache_dir = tmp_path / ".torchlint_cache"
    for index in cache_dir.glob("*.json"):
        index.write_text('{"' + str(tmp_path / "a.py") + '": [1, 2, "x", [["garbage"]]]')
    lint_calls.clear()
    assert cli("--format", "json", "-j", "1").out == first.out
    assert lint_calls == ["a.py"]
    for index in cache_dir.glob("*.json"):
        index.write_bytes(b"\x00not json")
    assert cli("--format", "json", "-j", "1").out == first.out

    other = tmp_path / "other"
    write(other, "a.py", PRINTS)
    lint_calls.clear()
    cli("--no-cache", "other")
    cli("--no-cache", "other")
    assert lint_calls == ["other/a.py", "other/a.py"]


def test_warm_run_does_not_import_libcst(tmp_path):
    for name, source, _ in bad_samples():
        write(tmp_path, f"src/{name}", source)
    write(tmp_path, "pyproject.toml", "[project]\nname = 'sample'\n")
    probe = (
        "import sys\nfrom torchlint.cli import main\n"
        "code = main(['--format', 'json', '-j', '1', 'src'])\n"
        "print(code, 'libcst' in sys.modules, 'torch' in sys.modules, file=sys.stderr)\n"
    )
    for _attempt in range(3):
        # torchlint's own source is part of the cache key: retry if someone edited it meanwhile.
        before = _source_fingerprint()
        cold, warm = (
            subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True)
            for _ in range(2)
        )
        if _source_fingerprint() == before:
            break
        shutil.rmtree(tmp_path / ".torchlint_cache")
    assert cold.stderr.split() == ["1", "True", "False"]  # cold: parsed, so libcst was needed
    assert warm.stderr.split() == ["1", "False", "False"]
    assert warm.stdout == cold.stdout and json.loads(warm.stdout)


# --- parallel ------------------------------------------------------------------------------------

def test_parallel_output_equals_serial(cli, tmp_path, monkeypatch):
    used_pool = []
    real_pool = torchlint.runner._pool_outcomes

    def spy(*args, **kwargs):
        used_pool.append(True)
        return real_pool(*args, **kwargs)

    monkeypatch.setattr(torchlint.runner, "_pool_outcomes", spy)
    for index in range(12):
        write(tmp_path, f"pkg/m{index:02}.py", "pass\n" * (index % 3) + PRINTS * (index % 4))
    write(tmp_path, "pkg/broken.py", "print(1\n")
    serial = cli("--no-cache", "-j", "1", "--extend-select", "TL902")
    assert not used_pool
    parallel = cli("--no-cache", "-j", "2", "--extend-select", "TL902")
    assert used_pool
    assert parallel.out == serial.out and parallel.code == serial.code == 1
    assert len(serial.lines) > 12


# --- subcommand and import weight -----------------------------------------------------------------

def test_verify_is_dispatched(cli, monkeypatch):
    calls = []
    fake = type(sys)("torchlint.verify.cli")
    fake.main = lambda argv: calls.append(argv) or 7
    monkeypatch.setitem(sys.modules, "torchlint.verify.cli", fake)
    assert cli("verify", "--device", "cpu").code == 7
    assert calls == [["--device", "cpu"]]


def test_verify_missing_is_one_line_error(cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "torchlint.verify.cli", None)
    result = cli("verify")
    assert result.code == 2
    assert result.err == "torchlint: error: torchlint verify is not available in this installation\n"


def test_import_cli_is_light(tmp_path):
    probe = (
        "import sys, torchlint.cli\n"
        "print(sorted(m for m in ('libcst', 'torch', 'matplotlib', 'numpy', 'torchlint.rules') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert result.stdout.strip() == "[]", result.stderr


def test_readme_configuration_example_is_valid(tmp_path, monkeypatch):
    from cli_support import REAL_RULES
    from torchlint.config import Layer, load_settings, select_rules

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Configuration", 1)[1]
    example = section.split("```toml\n", 1)[1].split("```", 1)[0]
    assert "[tool.torchlint]" in example and "per-file-ignores" in example
    write(tmp_path, "pyproject.toml", example)
    settings = load_settings([str(tmp_path)])
    selection = select_rules(REAL_RULES(), settings, Layer())
    assert selection.rules and selection.per_file_ignores
