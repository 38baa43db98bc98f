"""Renderers for the one violation type: text, json, sarif, github, and statistics."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from torchlint import __version__
from torchlint.violation import INVALID_FILE_CODE, INVALID_FILE_NAME, Violation

if TYPE_CHECKING:
    from torchlint.rule import Rule

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INVALID_FILE_HELP = (
    "The file could not be read, decoded or parsed, or torchlint failed on it internally, so "
    "none of its code was checked. The message says why; fix the file (or report the internal "
    "error) to get it checked."
)

_BOLD, _RED, _CYAN, _RESET = "\033[1m", "\033[31m", "\033[36m", "\033[0m"


def use_colour(stream) -> bool:
    """Colour only for a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("NO_COLOR")


def render(violations: Sequence[Violation], output_format: str, rules: Sequence[type[Rule]],
           colour: bool = False, unsafe_fixes: bool = False) -> str:
    if output_format == "full":
        return full_report(violations, colour)
    if output_format in ("gitlab", "junit"):
        return gitlab(violations) if output_format == "gitlab" else junit(violations)
    if output_format == "json":
        return json.dumps([violation.as_dict() for violation in violations], indent=2) + "\n"
    if output_format == "sarif":
        return json.dumps(sarif(violations, rules), indent=2) + "\n"
    if output_format == "github":
        return "".join(github_line(violation) + "\n" for violation in violations)
    return "".join(text_line(violation, colour, unsafe_fixes) + "\n" for violation in violations)


def text_line(violation: Violation, colour: bool = False, unsafe_fixes: bool = False) -> str:
    """``path:line:column: CODE message``, the shape flake8, ruff and editor matchers use. Control
    characters in the path and message (a linted file's name and code) are escaped, so they
    cannot move the cursor or rewrite the terminal."""
    path, message = escape_controls(violation.path), escape_controls(violation.message)
    cell = f"cell {violation.cell}:" if violation.cell is not None else ""  # ruff's notebook form
    where = f"{path}:{cell}{violation.line}:{violation.column}:"
    mark = " [*]" if fixable(violation, unsafe_fixes) else ""  # ruff's mark of a fix --fix applies
    if not colour:
        return f"{where} {violation.code}{mark} {message}"
    return f"{_BOLD}{where}{_RESET} {_BOLD}{_RED}{violation.code}{_RESET}{mark} {message}"


# C0 controls, DEL and C1 controls (U+0080-U+009F; U+009B is a one-character CSI), plus lone
# surrogates (a file name that is not valid UTF-8), which the terminal cannot show either.
_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def escape_controls(text: str) -> str:
    """``\x1b`` for ESC and the like: what ``repr`` would show, without the quotes."""
    return _CONTROL_RE.sub(_escape_control, text)


def _escape_control(match: re.Match) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8, as os.fsdecode escapes it
        code -= 0xDC00
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def summary(violations: Sequence[Violation], files_checked: int) -> str:
    checked = _count(files_checked, "file") + " checked"
    if not violations:
        return f"No problems found ({checked})."
    files = len({violation.path for violation in violations})
    return f"Found {_count(len(violations), 'problem')} in {_count(files, 'file')} ({checked})."


# --- fixes (torchlint.fix) -----------------------------------------------------------------------

def fixable(violation: Violation, unsafe_fixes: bool = False) -> bool:
    """Whether ``--fix`` (with ``--unsafe-fixes`` when given) would fix the finding."""
    fix = violation.fix
    return fix is not None and bool(fix.edits) and (unsafe_fixes or fix.applicability == "safe")


def fix_summary(violations: Sequence[Violation], unsafe_fixes: bool = False) -> str:
    """ruff's second summary line: how many findings the fix flags would fix, or ''."""
    safe = sum(1 for violation in violations if fixable(violation))
    unsafe = sum(1 for violation in violations if fixable(violation, True)) - safe
    if unsafe_fixes:
        total = safe + unsafe
        return f"[*] {total} fixable with the `--fix --unsafe-fixes` options." if total else ""
    if safe and unsafe:
        return (f"[*] {safe} fixable with the `--fix` option "
                f"({unsafe} hidden fix{'es' * (unsafe != 1)} can be enabled with the `--unsafe-fixes` option).")
    if safe:
        return f"[*] {safe} fixable with the `--fix` option."
    if unsafe:
        return f"No fixes available ({unsafe} hidden fix{'es' * (unsafe != 1)} can be enabled with the `--unsafe-fixes` option)."
    return ""


def _fix_note(violation: Violation) -> str:
    fix = violation.fix
    if fix is None or not fix.edits:
        return ""
    flag = "--fix" if fix.applicability == "safe" else "--fix --unsafe-fixes"
    return f" (fix available with {flag}: {fix.message})"


def _sarif_fixes(violation: Violation) -> list[dict]:
    fix = violation.fix
    if fix is None or not fix.edits:
        return []
    replacements = [{
        "deletedRegion": {"startLine": edit.line, "startColumn": edit.column,
                          "endLine": edit.end_line, "endColumn": edit.end_column},
        "insertedContent": {"text": edit.content},
    } for edit in fix.edits]
    return [{
        "description": {"text": f"{fix.message} ({fix.applicability})"},
        "artifactChanges": [{"artifactLocation": _artifact(violation.path), "replacements": replacements}],
    }]


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def statistics(violations: Sequence[Violation], output_format: str) -> str:
    """Findings per code, most frequent first."""
    counts = Counter((violation.code, violation.name) for violation in violations)
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    if output_format == "json":
        return json.dumps([{"code": code, "name": name, "count": count} for (code, name), count in rows],
                          indent=2) + "\n"
    return "".join(f"{count:>6}  {code}  {name}\n" for (code, name), count in rows)


# GitHub workflow commands: https://docs.github.com/actions/reference/workflow-commands-for-github-actions
def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_line(violation: Violation) -> str:
    level = "error" if violation.code == INVALID_FILE_CODE else "warning"
    properties = {
        "file": violation.path.replace(os.sep, "/"),
        "line": violation.line,
        "col": violation.column,
        "endLine": violation.end_line,
        "endColumn": violation.end_column,
        "title": violation.code,
    }
    rendered = ",".join(f"{key}={_escape_property(str(value))}" for key, value in properties.items())
    return f"::{level} {rendered}::{_escape_data(_with_cell(violation) + _fix_note(violation))}"


def _with_cell(violation: Violation) -> str:
    """The message, prefixed with the notebook cell that the line numbers count in."""
    return violation.message if violation.cell is None else f"cell {violation.cell}: {violation.message}"


def sarif(violations: Sequence[Violation], rules: Sequence[type[Rule]]) -> dict:
    """A SARIF 2.1.0 log with one run; every rule is described, whether it fired or not."""
    descriptors = [_invalid_file_descriptor()] + [_descriptor(rule) for rule in rules]
    index = {descriptor["id"]: position for position, descriptor in enumerate(descriptors)}
    results = []
    for violation in violations:
        result = {
            "ruleId": violation.code,
            "ruleIndex": index.get(violation.code, 0),
            "level": "error" if violation.code == INVALID_FILE_CODE else "warning",
            "message": {"text": _with_cell(violation)},
            "locations": [{"physicalLocation": {
                "artifactLocation": _artifact(violation.path),
                "region": {
                    "startLine": violation.line,
                    "startColumn": violation.column,
                    "endLine": violation.end_line,
                    "endColumn": violation.end_column,
                },
            }}],
        }
        if violation.cell is not None:  # the region's lines count in this cell of the notebook
            result["properties"] = {"cell": violation.cell}
        if violation.code not in index:  # a code from a rule outside this run's catalogue
            del result["ruleIndex"]
        if _sarif_fixes(violation):
            result["fixes"] = _sarif_fixes(violation)
        results.append(result)
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "torchlint",
                "version": __version__,
                "semanticVersion": __version__,
                # No informationUri: the project has no published home page yet, and a package
                # index page under this name would point at whoever registers it.
                "rules": descriptors,
            }},
            # Our columns count characters, not SARIF's default UTF-16 code units.
            "columnKind": "unicodeCodePoints",
            "originalUriBaseIds": {"%SRCROOT%": {"uri": _directory_uri(os.getcwd())}},
            "results": results,
        }],
    }


def _descriptor(rule: type[Rule]) -> dict:
    from torchlint.docs import explain, what_it_does

    help_text = explain(rule)
    return {
        "id": rule.CODE,
        "name": rule.NAME,
        "shortDescription": {"text": rule.summary()},
        "fullDescription": {"text": what_it_does(rule)},
        "help": {"text": help_text, "markdown": help_text},
        "defaultConfiguration": {"level": "warning", "enabled": bool(rule.ENABLED_BY_DEFAULT)},
        "properties": {
            "tags": ["pytorch", "memory"],
            "enabledByDefault": bool(rule.ENABLED_BY_DEFAULT),
            "message": rule.MESSAGE,
            "fix": rule.FIX,
            "claim": rule.CLAIM,
        },
    }


def _invalid_file_descriptor() -> dict:
    return {
        "id": INVALID_FILE_CODE,
        "name": INVALID_FILE_NAME,
        "shortDescription": {"text": "File could not be analysed"},
        "fullDescription": {"text": INVALID_FILE_HELP},
        "help": {"text": INVALID_FILE_HELP, "markdown": INVALID_FILE_HELP},
        "defaultConfiguration": {"level": "error", "enabled": True},
        "properties": {"tags": ["torchlint"], "enabledByDefault": True},
    }


def _artifact(path: str) -> dict:
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute, os.getcwd()) if not _outside_cwd(absolute) else None
    if relative is None:
        return {"uri": _file_uri(absolute)}
    return {"uri": _quote_path(relative), "uriBaseId": "%SRCROOT%"}


def _quote_path(path: str) -> str:
    """Percent-encode a path's raw bytes: a file name that is not valid UTF-8 (decoded by
    Python with surrogate escapes) becomes %XX for its bytes instead of failing to encode."""
    from urllib.parse import quote

    return quote(os.fsencode(path.replace(os.sep, "/")), safe="/")


def _file_uri(absolute: str) -> str:
    """``file://`` URI of an absolute path, percent-encoded byte for byte."""
    try:
        return _directory_uri(absolute).rstrip("/")
    except (UnicodeEncodeError, ValueError):
        from pathlib import PurePath

        posix = PurePath(absolute).as_posix()
        return "file://" + ("/" if not posix.startswith("/") else "") + _quote_path(posix)


def _outside_cwd(absolute: str) -> bool:
    try:
        return os.path.commonpath([absolute, os.getcwd()]) != os.getcwd()
    except ValueError:  # another drive
        return True


def _directory_uri(path: str) -> str:
    from pathlib import Path

    return Path(path).as_uri().rstrip("/") + "/"


# --- full text: the finding, the code with the range underlined, and how to fix it -----------

_SNIPPET_CONTEXT = 1  # lines shown before and after the reported ones
_SNIPPET_MAX_LINES = 4  # reported lines shown at most; a longer range is cut with "..."


def full_report(violations: Sequence[Violation], colour: bool = False,
                sources: dict[str, str] | None = None) -> str:
    """ruff's ``full`` output: each finding's line, then its code with the reported range
    underlined, then ``= help:`` with the fix in words. Source is read from the files (a
    notebook's cell from the notebook); ``sources`` gives text that is not on disk (stdin)."""
    lines_of = _SourceLines(sources or {})
    blocks = []
    for violation in violations:
        block = [text_line(violation, colour)]
        shown = _snippet(violation, lines_of(violation), colour)
        block += shown
        indent = " " * (len(_strip_ansi(shown[0])) - 1 if shown else 2)  # `=` under the gutter's `|`
        if violation.help:
            block.append(f"{indent}= {_BOLD + _CYAN if colour else ''}help{_RESET if colour else ''}: "
                         f"{escape_controls(violation.help)}")
        blocks.append("\n".join(block) + "\n")
    return "\n".join(blocks)


def _strip_ansi(text: str) -> str:
    return re.sub("\033\\[[0-9;]*m", "", text)


class _SourceLines:
    """Lines of each file (or notebook cell), read once; None where they cannot be had."""

    def __init__(self, sources: dict[str, str]) -> None:
        self.sources = sources
        self.files: dict[str, object] = {}

    def __call__(self, violation: Violation) -> list[str] | None:
        path = violation.path
        if path not in self.files:
            self.files[path] = self._read(path)
        found = self.files[path]
        if violation.cell is None:
            return found if isinstance(found, list) else None  # (not a notebook read as one)
        if hasattr(found, "cells"):
            return next((cell.lines for cell in found.cells if cell.number == violation.cell), None)
        return None

    def _read(self, path: str):
        from torchlint.engine import SourceError, decode_source, source_lines
        from torchlint.files import read_source

        try:
            data = self.sources[path] if path in self.sources else read_source(path)
            if path.lower().endswith(".ipynb"):
                from torchlint.notebook import NotebookError, load

                try:
                    return load(data)
                except NotebookError:
                    return None
            text = decode_source(data) if isinstance(data, bytes) else data
        except (OSError, SourceError, ValueError):
            return None
        lines = source_lines(text)
        return lines[:-1] if len(lines) > 1 and lines[-1] == "" else lines  # no line after the last break


def _snippet(violation: Violation, lines: list[str] | None, colour: bool) -> list[str]:
    if not lines or not 0 < violation.line <= len(lines) or violation.code == INVALID_FILE_CODE and not (
            violation.line > 1 or violation.column > 1):
        return []
    last = min(max(violation.end_line, violation.line), len(lines), violation.line + _SNIPPET_MAX_LINES - 1)
    first_shown = max(1, violation.line - _SNIPPET_CONTEXT)
    last_shown = min(len(lines), last + _SNIPPET_CONTEXT)
    width = len(str(last_shown))
    blue, reset = (_BOLD + _CYAN, _RESET) if colour else ("", "")
    gutter = f"{blue}{' ' * width} |{reset}"
    shown = [gutter]
    for number in range(first_shown, last_shown + 1):
        text = escape_controls(lines[number - 1].expandtabs(4))
        shown.append(f"{blue}{number:>{width}} |{reset} {text}".rstrip())
        if number == violation.line:
            source = lines[number - 1]
            start = len(source[: violation.column - 1].expandtabs(4))
            if violation.end_line == violation.line:
                end = len(source[: max(violation.end_column - 1, violation.column)].expandtabs(4))
            else:
                end = len(source.expandtabs(4))
            marks = "^" * max(end - start, 1)
            red = (_BOLD + _RED, _RESET) if colour else ("", "")
            shown.append(f"{gutter} {' ' * start}{red[0]}{marks} {violation.code}{red[1]}")
        if number == last and last < min(violation.end_line, len(lines)):
            shown.append(f"{blue}{'.' * width} |{reset} ...")
            break
    shown.append(gutter)
    return shown


# --- GitLab Code Quality and JUnit XML --------------------------------------------------------

def gitlab(violations: Sequence[Violation]) -> str:
    """A GitLab Code Quality report (https://docs.gitlab.com/ci/testing/code_quality/): paths
    relative to the working directory (the project root in a CI job). The fingerprint, which
    GitLab uses to tell new findings from old, hashes the path, code and message and a counter
    among identical ones, not the line, so a finding keeps it when code above it moves."""
    import hashlib

    seen: Counter = Counter()
    issues = []
    for violation in violations:
        path = _relative_path(violation.path)
        identity = (path, violation.code, violation.message, violation.cell)
        seen[identity] += 1
        fingerprint = hashlib.sha256(
            json.dumps([*identity, seen[identity]], ensure_ascii=False).encode("utf-8", "surrogateescape")
        ).hexdigest()[:32]
        issues.append({
            "description": f"{violation.code} {_with_cell(violation)}",
            "check_name": violation.code,
            "fingerprint": fingerprint,
            "severity": "critical" if violation.code == INVALID_FILE_CODE else "major",
            "location": {"path": path, "lines": {"begin": violation.line, "end": violation.end_line}},
        })
    return json.dumps(issues, indent=2) + "\n"


def _relative_path(path: str) -> str:
    absolute = os.path.abspath(path)
    if _outside_cwd(absolute):
        return absolute.replace(os.sep, "/")
    return os.path.relpath(absolute).replace(os.sep, "/")


_XML_INVALID_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml(text: str, attribute: bool = True) -> str:
    """Text for an XML attribute or element: characters XML cannot hold escaped as ``\\xNN``."""
    from xml.sax.saxutils import escape

    text = _XML_INVALID_RE.sub(_escape_control, text)
    return escape(text, {'"': "&quot;", "\n": "&#10;", "\r": "&#13;", "\t": "&#9;"} if attribute else {})


def junit(violations: Sequence[Violation]) -> str:
    """JUnit XML, as CI systems read test reports: one test suite per file with findings, one
    failed test case per finding; no findings is one passing test case."""
    by_path: dict[str, list[Violation]] = {}
    for violation in violations:
        by_path.setdefault(violation.path, []).append(violation)
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuites name="torchlint" tests="{max(len(violations), 1)}" failures="{len(violations)}" errors="0">']
    if not violations:
        out += ['  <testsuite name="torchlint" tests="1" failures="0" errors="0">',
                '    <testcase name="No problems found" classname="torchlint"/>',
                "  </testsuite>"]
    for path, found in by_path.items():
        name = _xml(path)
        out.append(f'  <testsuite name="{name}" tests="{len(found)}" failures="{len(found)}" errors="0">')
        for violation in found:
            where = f"cell {violation.cell}, " if violation.cell is not None else ""
            where += f"line {violation.line}, column {violation.column}"
            out.append(f'    <testcase name="{_xml(violation.code)} {_xml(violation.name)}" classname="{name}" '
                       f'file="{name}" line="{violation.line}">')
            body = f"{where}: {violation.message}" + (f"\nhelp: {violation.help}" if violation.help else "")
            out.append(f'      <failure message="{_xml(violation.message)}" type="{_xml(violation.code)}">'
                       f"{_xml(body, attribute=False)}</failure>")
            out.append("    </testcase>")
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"
