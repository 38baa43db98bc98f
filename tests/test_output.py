"""Text people act on (full / concise), GitLab Code Quality, JUnit XML, and the progress line."""

from __future__ import annotations

import io
import json
import sys
import xml.etree.ElementTree as ElementTree

import pytest
from cli_support import cli, toy_rules, write  # noqa: F401 - fixtures are used by name

import torchlint.progress
from torchlint.formatters import full_report, gitlab, junit
from torchlint.progress import Progress, wanted
from torchlint.violation import Violation

pytestmark = pytest.mark.usefixtures("toy_rules")

SOURCE = "import os\n\nif x:\n\tprint(1, 2)\nmore = 1\n"


def test_full_shows_the_line_the_range_underlined_and_the_help(cli, tmp_path):
    write(tmp_path, "a.py", SOURCE)
    result = cli("--output-format", "full", "a.py")
    assert result.code == 1
    assert result.out == (
        "a.py:4:2: TL901 `print(...)` called\n"
        "  |\n"
        "3 | if x:\n"
        "4 |     print(1, 2)\n"
        "  |     ^^^^^^^^^^^ TL901\n"
        "5 | more = 1\n"
        "  |\n"
        "  = help: remove the call\n"
    )


def test_full_multiline_range_and_unreadable_source():
    lines = ["print(", "  1,", "  2,", "  3,", "  4,", "  5,", ")"]
    found = Violation("-", 1, 1, "TL901", "print-call", "m", 7, 2)
    text = full_report([found], sources={"-": "\n".join(lines) + "\n"})
    assert "1 | print(\n  | ^^^^^^ TL901\n" in text and "4 |   3,\n. | ...\n" in text and "help" not in text
    gone = Violation("missing.py", 1, 1, "TL901", "print-call", "m", 1, 2, help="h")
    assert full_report([gone]) == "missing.py:1:1: TL901 m\n  = help: h\n"


def test_text_is_concise_off_a_terminal_and_format_is_an_alias(cli, tmp_path):
    write(tmp_path, "a.py", SOURCE)
    expected = "a.py:4:2: TL901 `print(...)` called\n"
    assert cli("a.py").out == expected  # captured stdout is no terminal
    assert cli("--format", "concise", "a.py").out == expected
    assert cli("--output-format", "text", "a.py").out == expected


def test_text_is_full_on_a_terminal_but_not_in_ci(cli, tmp_path, monkeypatch):
    write(tmp_path, "a.py", SOURCE)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    cli("a.py")
    assert "  = help: remove the call" in terminal.getvalue()
    monkeypatch.setenv("CI", "true")
    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    cli("a.py")
    assert terminal.getvalue() == "a.py:4:2: TL901 `print(...)` called\n"


def test_gitlab_code_quality(cli, tmp_path):
    write(tmp_path, "a.py", "print(1)\nprint(1)\n")
    write(tmp_path, "sub/b.py", "print(1)\n")
    report = cli("--format", "gitlab", ".").json()
    assert [(issue["location"]["path"], issue["location"]["lines"]["begin"]) for issue in report] == [
        ("a.py", 1), ("a.py", 2), ("sub/b.py", 1)]
    assert {issue["check_name"] for issue in report} == {"TL901"}
    assert {issue["severity"] for issue in report} == {"major"}
    assert report[0]["description"] == "TL901 `print(...)` called"
    fingerprints = [issue["fingerprint"] for issue in report]
    assert len(set(fingerprints)) == 3  # identical findings in one file still differ
    # A line inserted above keeps the fingerprints: GitLab sees no new finding
    write(tmp_path, "a.py", "import os\nprint(1)\nprint(1)\n")
    assert [issue["fingerprint"] for issue in cli("--format", "gitlab", ".").json()] == fingerprints


def test_gitlab_notebook_and_invalid_file():
    found = [Violation("nb.ipynb", 2, 1, "TL101", "n", "m", 2, 3, cell=4),
             Violation("x.py", 1, 1, "TL000", "invalid-file", "syntax error", 1, 1)]
    first, second = json.loads(gitlab(found))
    assert first["description"] == "TL101 cell 4: m" and first["location"]["path"] == "nb.ipynb"
    assert second["severity"] == "critical"


def test_junit_is_xml_with_one_failure_per_finding(cli, tmp_path):
    write(tmp_path, "a.py", "print(1)\nprint(2)\n")
    write(tmp_path, "b.py", "print(3)\n")
    root = ElementTree.fromstring(cli("--format", "junit", ".").out)
    assert (root.tag, root.get("tests"), root.get("failures")) == ("testsuites", "3", "3")
    suites = root.findall("testsuite")
    assert [(suite.get("name"), len(suite.findall("testcase"))) for suite in suites] == [("a.py", 2), ("b.py", 1)]
    failure = suites[0].find("testcase/failure")
    assert failure.get("message") == "`print(...)` called"
    assert failure.text == "line 1, column 1: `print(...)` called\nhelp: remove the call"


def test_junit_without_findings_and_with_characters_xml_cannot_hold(cli, tmp_path):
    write(tmp_path, "ok.py", "x = 1\n")
    root = ElementTree.fromstring(cli("--format", "junit", "ok.py").out)
    assert (root.get("tests"), root.get("failures")) == ("1", "0")
    odd = Violation("a\x1b.py", 1, 1, "TL901", "print-call", 'say "<hi>" & \x00', 1, 2)
    failure = ElementTree.fromstring(junit([odd])).find("testsuite/testcase/failure")
    assert failure.get("message") == 'say "<hi>" & \\x00'


# --- progress ---------------------------------------------------------------------------------

class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_line_appears_after_the_delay_and_is_erased():
    stream, clock = Terminal(), Clock()
    progress = Progress(10, stream, clock)
    progress.advance()
    assert stream.getvalue() == ""  # a short run shows nothing
    clock.now += 2.5
    progress.advance()
    assert stream.getvalue() == "\rtorchlint: 2/10 files (20%), 0.8 files/s, about 10 s left\033[K"
    clock.now += 0.05
    progress.advance()  # too soon to redraw
    assert stream.getvalue().count("\r") == 1
    progress.close()
    assert stream.getvalue().endswith("\r\033[K")


def test_progress_wanted_only_on_a_terminal_outside_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    assert wanted(Terminal())
    assert not wanted(io.StringIO())  # a pipe or file
    assert not wanted(Terminal(), quiet=True)
    monkeypatch.setenv("CI", "true")
    assert not wanted(Terminal())
    monkeypatch.setenv("CI", "false")
    assert wanted(Terminal())


def test_cli_draws_progress_on_a_terminal_stderr_only(cli, tmp_path, monkeypatch):
    for number in range(5):
        write(tmp_path, f"m{number}.py", "print(1)\n")
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(torchlint.progress, "DELAY", 0.0)
    monkeypatch.setattr(torchlint.progress, "INTERVAL", 0.0)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    cli("-j", "1", "--no-cache", ".")
    shown = terminal.getvalue()
    assert "\rtorchlint: 5/5 files (100%)" in shown and "\r\033[K" in shown
    assert shown.index("\r\033[K") < shown.index("Found 5 problems")  # erased before the summary
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    cli("-q", "--no-cache", ".")
    assert terminal.getvalue() == ""
