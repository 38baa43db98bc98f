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
    where = f"{path}:{violation.line}:{violation.column}:"
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
    return f"::{level} {rendered}::{_escape_data(violation.message + _fix_note(violation))}"


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
            "message": {"text": violation.message},
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
