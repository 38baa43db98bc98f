"""Issue 12, parsing side: deep code, compile-time errors, suppression comments and hostile names.
One file's trouble never touches another file's results, and never a traceback or a crash."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchlint import engine
from torchlint.engine import MAX_NESTING, lint_source, nesting_depth
from torchlint.flake8_plugin import Plugin
from torchlint.formatters import render, text_line
from torchlint.rules import default_rules
from torchlint.violation import Violation

REPO = Path(__file__).resolve().parent.parent
FINDING = "import torch\nlosses = []\nfor x in data:\n    loss = model(x)\n    losses.append(loss)\n    loss.backward()\n"
FINDING_LINE = 5


def lint(text: str, **kwargs) -> list[tuple[int, str, str]]:
    return [(v.line, v.code, v.message) for v in lint_source(text, "f.py", default_rules(), **kwargs)]


def codes(text: str, **kwargs) -> list[tuple[int, str]]:
    return [(line, code) for line, code, _ in lint(text, **kwargs)]


def plus_chain(n: int) -> str:
    return "x = " + " + ".join(["a"] * n) + "\n"


def and_chain(n: int) -> str:
    return "x = " + " and ".join(["a"] * n) + "\n"


def elifs(n: int) -> str:
    return "if a:\n    pass\n" + "".join(f"elif a{i}:\n    pass\n" for i in range(n))


def strings(n: int) -> str:
    return "x = (\n" + "\n".join(['"s"'] * n) + ")\n"


def calls(n: int) -> str:
    return "x = a" + ".b()" * n + "\n"


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "torchlint", "--no-cache", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, env=env)


# 1. Long chains crashed libcst's native parser (a segmentation fault, no output at all).

@pytest.mark.parametrize("deep", [plus_chain(8000), and_chain(9000)], ids=["plus", "and"])
def test_long_chain_is_tl000_and_the_other_files_still_lint(tmp_path, deep):
    (tmp_path / "deep.py").write_text(FINDING + deep)
    (tmp_path / "ok.py").write_text(FINDING)
    result = run_cli("-j1", "deep.py", "ok.py", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("deep.py:1:1: TL000 too deeply nested for the parser"), lines
    assert lines[1].startswith(f"ok.py:{FINDING_LINE}:5: TL101"), lines


def test_long_chain_from_stdin_and_flake8_plugin(tmp_path):
    deep = FINDING + plus_chain(8000)
    result = subprocess.run([sys.executable, "-m", "torchlint", "--stdin-filename", "s.py", "-"],
                            input=deep, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert "s.py:1:1: TL000 too deeply nested" in result.stdout, (result.returncode, result.stderr)
    found = list(Plugin(None, "deep.py", deep.splitlines(keepends=True)).run())
    assert [message.split()[0] for _, _, message, _ in found] == ["TL000"]


def test_ordinary_deep_code_still_lints():
    assert codes(FINDING + plus_chain(300)) == [(FINDING_LINE, "TL101")]
    assert codes(FINDING + and_chain(MAX_NESTING - 10)) == [(FINDING_LINE, "TL101")]


def test_nesting_depth_measures_each_kind_of_nesting():
    assert nesting_depth(plus_chain(300)) == 300
    assert nesting_depth(elifs(500)) == 503
    assert nesting_depth(calls(200)) == 401
    assert nesting_depth("x = [" + ", ".join(["-1"] * 5000) + "]\n") == 3  # wide is not deep
    assert nesting_depth('x = """' + "-" * 5000 + '"""\n') == 1  # text in strings does not count


def test_more_than_200_nested_brackets_is_tl000_with_cpythons_message():
    for text in ["x = " + "(" * 1000 + "a" + ")" * 1000 + "\n",
                 FINDING + "x = " + "[" * 250 + "]" * 250 + "\n"]:
        found = lint(text, prefilter=False)
        assert [(code, message) for _, code, message in found] == [
            ("TL000", "syntax error: too many nested parentheses")]


# 2. RecursionError while positioning findings in moderately long valid code.

@pytest.mark.parametrize("tail", [elifs(315), elifs(500), strings(400), calls(200)],
                         ids=["elif315", "elif500", "strings400", "calls200"])
def test_deep_valid_code_keeps_its_finding(tail):
    limit = sys.getrecursionlimit()
    assert codes(FINDING + tail) == [(FINDING_LINE, "TL101")]
    assert sys.getrecursionlimit() == limit  # the raised limit never leaks


def test_output_identical_for_one_and_two_jobs_with_deep_files(tmp_path):
    tails = {"elif315": elifs(315), "elif500": elifs(500), "elif1200": elifs(1200),
             "strings400": strings(400), "calls200": calls(200), "plus8000": plus_chain(8000)}
    for name, tail in tails.items():
        (tmp_path / f"{name}.py").write_text(FINDING + tail)
    for index in range(4):
        (tmp_path / f"ok{index}.py").write_text(FINDING)
    serial = run_cli("-j1", ".", cwd=tmp_path)
    parallel = run_cli("-j2", ".", cwd=tmp_path)
    assert serial.returncode == parallel.returncode == 1, (serial.stderr, parallel.stderr)
    assert serial.stdout == parallel.stdout
    by_file = {line.split(":")[0]: line.split()[1] for line in serial.stdout.splitlines()}
    assert by_file == {"calls200.py": "TL101", "elif315.py": "TL101", "elif500.py": "TL101",
                       "elif1200.py": "TL000", "plus8000.py": "TL000", "strings400.py": "TL101",
                       "ok0.py": "TL101", "ok1.py": "TL101", "ok2.py": "TL101", "ok3.py": "TL101"}


def test_an_exception_whose_str_fails_is_still_one_tl000(monkeypatch):
    class Unprintable(Exception):
        def __str__(self):
            raise RecursionError

    def explode(*args):
        raise Unprintable

    monkeypatch.setattr(engine, "_position", explode)
    assert lint(FINDING) == [(1, "TL000", "internal error while computing positions: Unprintable")]


# 3. Code CPython refuses at compile time, beyond the grammar.

@pytest.mark.parametrize("body, message", [
    ("return 1\n", "'return' outside function"),
    ("yield 1\n", "'yield' outside function"),
    ("nonlocal q\n", "nonlocal declaration not allowed at module level"),
    ("def f(a, a):\n    pass\n", "duplicate argument 'a' in function definition"),
    ("for y in z:\n    pass\nbreak\n", "'break' outside loop"),
    ("while z:\n    pass\nelse:\n    continue\n", "'continue' not properly in loop"),
    ("def g():\n    await h()\n", "'await' outside async function"),
    ("def g():\n    x = 1\n    global x\n", "name 'x' is assigned to before global declaration"),
    ("def g():\n    nonlocal q\n", "no binding for nonlocal 'q' found"),
])
@pytest.mark.parametrize("prefilter", [True, False])
def test_compile_time_errors_are_tl000(tmp_path, body, message, prefilter):
    marker = tmp_path / "ran"
    text = f"open({str(marker)!r}, 'w').close()\n" + FINDING + body
    found = lint(text, prefilter=prefilter)
    assert [(code, text) for _, code, text in found] == [("TL000", f"syntax error: {message}")]
    assert not marker.exists()  # compiled, never run
    assert [code for _, code in codes(body)] == ["TL000"]  # no torch token: only syntax-checked


def test_a_late_future_import_is_tl000_and_an_early_one_is_not():
    late = lint(FINDING + "from __future__ import annotations\n", prefilter=False)
    assert [(code, text) for _, code, text in late] == [
        ("TL000", "syntax error: from __future__ imports must occur at the beginning of the file")]
    early = lint('"""Docstring."""\nfrom __future__ import annotations\n' + FINDING, prefilter=False)
    assert [code for _, code, _ in early] == ["TL101"]


# 4. `# noqa` after characters str.splitlines() splits on but Python does not.

@pytest.mark.parametrize("separator", ["\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"])
def test_noqa_lines_are_the_parsers_lines(separator):
    head = f"# a{separator}b{separator}c\n"
    suppressed = head + FINDING.replace("losses.append(loss)\n", "losses.append(loss)  # noqa: TL101\n")
    assert codes(suppressed) == []
    on_the_line_before = head + FINDING.replace("    loss = model(x)\n", "    loss = model(x)  # noqa\n")
    assert codes(on_the_line_before) == [(FINDING_LINE + 1, "TL101")]


# 5. `# torchlint: skip-file` only in a comment.

def test_skip_file_in_a_string_does_not_skip():
    assert codes('x = "# torchlint: skip-file"\n' + FINDING) == [(FINDING_LINE + 1, "TL101")]
    assert codes('x = """\n# torchlint: skip-file\n"""\n' + FINDING) == [(FINDING_LINE + 3, "TL101")]
    assert codes("# torchlint: skip-file\n" + FINDING) == []
    assert codes(FINDING + "x = 1  # torchlint: skip-file\n") == []


# 6. flake8 --disable-noqa.

def test_flake8_disable_noqa_reports_suppressed_findings(tmp_path):
    pytest.importorskip("flake8")
    source = FINDING.replace("losses.append(loss)\n", "losses.append(loss)  # noqa: TL101\n")
    (tmp_path / "a.py").write_text(source)
    (tmp_path / "b.py").write_text("# torchlint: skip-file\n" + FINDING)

    def flake8(*args: str) -> list[str]:
        result = subprocess.run([sys.executable, "-m", "flake8", "--select", "TL", "-j1", *args, "a.py", "b.py"],
                                cwd=tmp_path, capture_output=True, text=True, timeout=120)
        return [line.split(": ")[0] + " " + line.split()[1] for line in result.stdout.splitlines()]

    assert flake8() == []
    assert flake8("--disable-noqa") == [f"a.py:{FINDING_LINE}:5 TL101", f"b.py:{FINDING_LINE + 1}:5 TL101"]


# 7. Escape sequences in file names and code cannot rewrite the terminal.

def test_text_output_escapes_control_characters():
    violation = Violation(path="evil\x1b[2J\x9b.py", line=1, column=1, code="TL101", name="n",
                          message="`a\x07b\r` stored", end_line=1, end_column=2)
    for colour in (False, True):
        line = text_line(violation, colour)
        assert not any(ord(c) < 32 and c != "\x1b" or 0x7F <= ord(c) <= 0x9F for c in line)
        assert "evil\\x1b[2J\\x9b.py:1:1:" in line and "`a\\x07b\\x0d` stored" in line
    assert text_line(violation).count("\x1b") == 0
    json_out = json.loads(render([violation], "json", []))  # json keeps the exact text
    assert json_out[0]["path"] == violation.path


# 8. SARIF with a file name that is not valid UTF-8.

def test_sarif_with_a_non_utf8_file_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name = os.fsdecode(b"bad\xff name.py")
    violation = Violation(path=name, line=1, column=1, code="TL101", name="n", message="m",
                          end_line=1, end_column=2)
    outside = Violation(path=os.fsdecode(b"/tmp/x\xfe/y.py"), line=1, column=1, code="TL101", name="n",
                        message="m", end_line=1, end_column=2)
    log = json.loads(render([violation, outside], "sarif", default_rules()))
    uris = [result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for result in log["runs"][0]["results"]]
    assert uris == ["bad%FF%20name.py", "file:///tmp/x%FE/y.py"]
    assert text_line(violation).startswith("bad\\xff name.py:1:1:")


def test_a_cookie_naming_an_import_time_codec_lints_the_utf8_text():
    """`# -*- coding: future_fstrings -*-` names a codec a package registers when imported; the
    bytes are UTF-8 source, which is what torchlint lints (FCGF's trainer has this cookie)."""
    source = (
        "# -*- coding: future_fstrings -*-\n"
        "import torch\n"
        "losses = []\n"
        "for x, y in loader:\n"
        "    loss = criterion(model(x), y)\n"
        "    losses.append(loss)\n"
    ).encode()
    assert engine.decode_source(source).startswith("# -*- coding: future_fstrings")
    with pytest.raises(engine.SourceError, match="unknown encoding"):
        engine.decode_source(source.replace(b"import torch", b"import torch  # \xff"))
    with pytest.raises(engine.SourceError, match="unknown encoding: uft-8"):  # a typo stays TL000
        engine.decode_source(source.replace(b"future_fstrings", b"uft-8"))
