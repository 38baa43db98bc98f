"""`# noqa` comments as fixes: TL001 (a noqa naming a TL code that no longer fires on its line,
fixed by removing the code) and `--add-noqa` (suppress every finding that cannot be fixed now).

Only real comments count (found with the tokenizer, not in strings), and only TL codes are ever
touched: `# noqa: E501, TL101` keeps its E501 whatever happens to TL101.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Sequence

from torchlint.fix import SAFE, Edit, Fix
from torchlint.violation import INVALID_FILE_CODE, Violation

UNUSED_NOQA_CODE = "TL001"
# `# noqa: CODE[, CODE...]` in a comment; group "codes" spans the list (flake8's grammar).
_NOQA_RE = re.compile(r"#\s*noqa:\s?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*)", re.I)
_CODE_RE = re.compile(r"[A-Z]+[0-9]+", re.I)
_TL_RE = re.compile(r"TL\d+$")


def noqa_comments(text: str) -> dict[int, tuple[int, str]]:
    """Line -> (column of the comment, comment text) for every comment holding a noqa."""
    found = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT and "noqa" in token.string.lower():
                found[token.start[0]] = (token.start[1], token.string)
    except (tokenize.TokenError, SyntaxError):
        return {}
    return found


def rules_named_in_noqa(text: str, running: Sequence) -> tuple:
    """The rules, beyond ``running``, whose codes the file's noqa comments name: TL001 needs
    their findings to tell a used suppression from a stale one."""
    if "noqa" not in text.lower():
        return ()
    from torchlint.rules import all_rules

    listed = set()
    for _, comment in noqa_comments(text).values():
        match = _NOQA_RE.search(comment)
        if match is not None:
            listed.update(code.upper() for code in _CODE_RE.findall(match.group("codes")) if _TL_RE.match(code.upper()))
    have = {rule.CODE for rule in running}
    return tuple(rule for rule in all_rules()
                 if rule.CODE not in have and rule.CODE != UNUSED_NOQA_CODE
                 and any(rule.CODE.startswith(code) for code in listed))


def unused_noqa(text: str, path: str, found: Sequence[Violation], rules: Sequence) -> list[Violation]:
    """TL001 findings: each TL code of a ``# noqa: ...`` comment that suppresses none of
    ``found`` (the findings before noqa was applied) on its line, for codes of rules that ran
    (a noqa for a rule switched off in this run may still be needed)."""
    if "noqa" not in text.lower() or "tl" not in text.lower():
        return []
    ran = [rule.CODE for rule in rules if rule.CODE != UNUSED_NOQA_CODE]
    by_line: dict[int, set[str]] = {}
    for violation in found:
        by_line.setdefault(violation.line, set()).add(violation.code)
    results = []
    for line, (column, comment) in sorted(noqa_comments(text).items()):
        match = _NOQA_RE.search(comment)
        if match is None:
            continue
        for code_match in _CODE_RE.finditer(match.group("codes")):
            listed = code_match.group().upper()
            if not _TL_RE.match(listed) or listed in (UNUSED_NOQA_CODE, INVALID_FILE_CODE):
                continue
            if not any(code.startswith(listed) for code in ran):
                continue  # names no rule of this run: cannot tell
            if any(code.startswith(listed) for code in by_line.get(line, ())):
                continue  # it suppresses something
            start = column + match.start("codes") + code_match.start()
            results.append(Violation(
                path=path, line=line, column=start + 1, code=UNUSED_NOQA_CODE, name="unused-noqa",
                message=f"`# noqa` names `{listed}`, which torchlint does not report on this line",
                end_line=line, end_column=start + len(listed) + 1,
                help=f"remove `{listed}` from the comment",
                fix=_removal(text, line, column, comment, match, code_match, listed),
            ))
    return results


def _removal(text: str, line: int, column: int, comment: str, match, code_match, listed: str) -> Fix:
    """The edit removing one code from the comment; the whole ``# noqa: ...`` when it is the
    only one (and the comment with its leading spaces when nothing else is in it)."""
    codes = match.group("codes")
    others = [c for c in _CODE_RE.findall(codes) if c.upper() != listed]
    message = f"Remove `{listed}` from the `# noqa` comment"
    if others:
        kept = ", ".join(others)
        start, end = column + match.start("codes"), column + match.end("codes")
        return Fix(SAFE, message, (), (Edit(kept, line, start + 1, line, end + 1),))
    source_line = text.splitlines()[line - 1] if line <= len(text.splitlines()) else ""
    start, end = column + match.start(), column + match.end()
    prefix, rest = comment[:match.start()], comment[match.end():]
    if prefix.strip("# \t") == "" and rest.strip() == "":
        # the comment is nothing but the noqa: remove it with the spaces before it
        start = len(source_line[:column].rstrip())
        end = column + len(comment)
    elif rest.strip() == "":
        start = column + len(prefix.rstrip())  # `# expect: X  # noqa: TL101`: drop the noqa part
    elif prefix.strip("# \t") == "":
        end += len(rest) - len(rest.lstrip())  # `# noqa: TL101  # why`: the next comment moves up
    return Fix(SAFE, message, (), (Edit("", line, start + 1, line, end + 1),))


# --- --add-noqa ----------------------------------------------------------------------------------

def _lines_inside_strings(text: str) -> set[int]:
    """Lines whose end lies inside a multi-line string (a comment there would change it)."""
    inside = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.STRING and token.end[0] > token.start[0]:
                inside.update(range(token.start[0], token.end[0]))
    except (tokenize.TokenError, SyntaxError):
        return set(range(1, text.count("\n") + 2))
    return inside


def add_noqa(text: str, violations: Sequence[Violation]) -> tuple[str, int]:
    """``text`` with ``# noqa: CODES`` added for ``violations`` (merged into an existing noqa
    comment), and how many codes were added."""
    from torchlint.fix import SourceText

    wanted: dict[int, list[str]] = {}
    for violation in violations:
        if violation.code in (INVALID_FILE_CODE, UNUSED_NOQA_CODE):
            continue
        codes = wanted.setdefault(violation.line, [])
        if violation.code not in codes:
            codes.append(violation.code)
    if not wanted:
        return text, 0
    source = SourceText(text)
    skip = _lines_inside_strings(text)
    comments = noqa_comments(text)
    lines = list(source.lines)
    added = 0
    for line, codes in wanted.items():
        if line in skip or not 1 <= line <= len(lines) or lines[line - 1].rstrip().endswith("\\"):
            continue
        current = lines[line - 1]
        if line in comments:
            column, comment = comments[line]
            match = _NOQA_RE.search(comment)
            if match is None:  # a bare `# noqa` already silences everything
                continue
            present = {code.upper() for code in _CODE_RE.findall(match.group("codes"))}
            new = [code for code in codes if code not in present]
            if not new:
                continue
            end = column + match.end("codes")
            lines[line - 1] = current[:end] + ", " + ", ".join(new) + current[end:]
            added += len(new)
        else:
            lines[line - 1] = current.rstrip() + "  # noqa: " + ", ".join(codes)
            added += len(codes)
    return "".join(line + brk for line, brk in zip(lines, source.breaks)), added


def add_noqa_text(text: str, path: str, rules, options, ignored: frozenset[str], unsafe: bool):
    """A FixResult whose ``fixed`` text silences every finding no fix can remove now."""
    from torchlint.engine import lint_source
    from torchlint.fixer import FixResult, allowed, parses

    result = FixResult(path, text, text)
    violations = [v for v in lint_source(text, path, rules, options) if v.code not in ignored]
    if any(violation.code == INVALID_FILE_CODE for violation in violations):
        result.remaining = violations
        return result
    unfixable = [violation for violation in violations if not allowed(violation.fix, unsafe)]
    new, added = add_noqa(text, unfixable)
    if added and parses(new, path) is not None:
        result.refused = "adding noqa comments would break the file; file left unchanged"
        result.remaining = violations
        return result
    result.fixed = new
    result.added = added
    result.remaining = [v for v in lint_source(new, path, rules, options) if v.code not in ignored]
    return result


def add_noqa_to_file(path: str, rules, options, ignored: frozenset[str], unsafe: bool, prefilter: bool = True):
    from torchlint.engine import SourceError
    from torchlint.fixer import FixResult, decode, encode, write_atomically

    try:
        with open(path, "rb") as stream:
            data = stream.read()
        decoded = decode(data)
    except (OSError, SourceError) as error:
        result = FixResult(path, "", "")
        result.refused = f"cannot read: {getattr(error, 'strerror', None) or getattr(error, 'reason', error)}"
        return result
    result = add_noqa_text(decoded.text, path, rules, options, ignored, unsafe)
    if result.changed:
        try:
            write_atomically(path, encode(result.fixed, decoded))
        except (OSError, UnicodeEncodeError) as error:
            result.refused = f"cannot write: {getattr(error, 'strerror', None) or error}; file left unchanged"
            result.fixed = result.original
    return result
