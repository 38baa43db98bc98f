"""Lint one source text: decode, prefilter, parse once, analyse once, run every rule, position.

Everything that touches libcst goes through ``torchlint.lazy.cst`` so that importing this module
is cheap; libcst is imported the first time a file actually has to be parsed.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Sequence
from functools import lru_cache

from torchlint.lazy import cst
from torchlint.rule import Report, Rule
from torchlint.violation import INVALID_FILE_CODE, INVALID_FILE_NAME, Violation

SKIP_FILE_RE = re.compile(r"#\s*torchlint\s*:\s*skip-file\b", re.I)
# flake8's noqa grammar: "# noqa" alone suppresses everything on the line, "# noqa: A1, B2"
# suppresses the listed codes (and codes they prefix).
NOQA_RE = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]*(?:[,\s]+[A-Z]+[0-9]*)*))?", re.I)


class SourceError(Exception):
    """A file that cannot be read, decoded or parsed."""

    def __init__(self, reason: str, line: int = 1, column: int = 1) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line
        self.column = column


def decode_source(data: bytes) -> str:
    """Decode as the interpreter does: BOM, PEP 263 coding cookie, else UTF-8."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        raise SourceError(f"cannot decode: {error}") from None
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as error:
        line = data[: getattr(error, "start", 0)].count(b"\n") + 1
        raise SourceError(f"cannot decode as {encoding}: {error.reason if hasattr(error, 'reason') else error}", line) from None
    return text[1:] if text.startswith("\ufeff") else text


def invalid_file(path: str, reason: str, line: int = 1, column: int = 1) -> Violation:
    return Violation(
        path=path, line=line, column=column, code=INVALID_FILE_CODE, name=INVALID_FILE_NAME,
        message=reason, end_line=line, end_column=column,
    )


@lru_cache(maxsize=64)
def needed_tokens(rules: tuple[type[Rule], ...]) -> tuple[str, ...]:
    return tuple(sorted({token for rule in rules for token in rule.TOKENS}))


def may_match(text: str, rules: Sequence[type[Rule]]) -> bool:
    """Cheap substring prefilter: can any enabled rule possibly match this text?"""
    return any(token in text for token in needed_tokens(tuple(rules)))


# Other deep-learning frameworks: a file importing one and never mentioning torch is not
# PyTorch code.
OTHER_FRAMEWORKS = frozenset({
    "mxnet", "tensorflow", "keras", "jax", "flax", "haiku", "paddle", "mindspore", "chainer",
    "oneflow", "megengine", "theano", "cntk", "caffe", "dynet", "gluonnlp", "gluoncv", "tf_keras",
})
IMPORTED_ROOT_RE = re.compile(r"^[ \t]*(?:from[ \t]+([A-Za-z_]\w*)|import[ \t]+([A-Za-z_]\w*))", re.M)


def may_use_pytorch(text: str) -> bool:
    """False for a file that cannot be PyTorch code: it never mentions torch and imports
    another deep-learning framework (MXNet, TensorFlow, JAX ...) instead. Every rule is about
    PyTorch, so such a file is only syntax-checked."""
    if "torch" in text:
        return True
    return not any(
        (match.group(1) or match.group(2)) in OTHER_FRAMEWORKS for match in IMPORTED_ROOT_RE.finditer(text)
    )


def parse(text: str):
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        raise _syntax_error(text, error) from None
    except (RecursionError, MemoryError):
        raise SourceError("file too deeply nested to parse") from None


def _syntax_error(text: str, libcst_error) -> SourceError:
    """Python's own message and position when the interpreter agrees the file is invalid (libcst
    sometimes points a line past the error); libcst's when only libcst rejects it."""
    try:
        compile(text, "<file>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:
        return SourceError(f"syntax error: {error.msg}", error.lineno or 1, error.offset or 1)
    except (ValueError, RecursionError, MemoryError):
        pass
    message = str(libcst_error.message).strip().splitlines()[0] if libcst_error.message else "invalid syntax"
    return SourceError(f"syntax error: {message}", libcst_error.raw_line, libcst_error.raw_column + 1)


def check_syntax(text: str) -> None:
    """Raise SourceError for a file the prefilter lets skip, exactly as parsing it would: the
    interpreter's compiler first (cheap), libcst only when that rejects the file (which may be
    valid syntax of a newer Python than the running one)."""
    try:
        compile(text, "<file>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        return
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    parse(text)


def lint_source(
    source: str | bytes,
    path: str,
    rules: Sequence[type[Rule]],
    options: dict | None = None,
    prefilter: bool = True,
) -> list[Violation]:
    """All findings of ``rules`` in one file's source, sorted, ``# noqa`` applied."""
    try:
        text = decode_source(source) if isinstance(source, bytes) else source
    except SourceError as error:
        return [invalid_file(path, error.reason, error.line, error.column)]
    if SKIP_FILE_RE.search(text):
        return []
    if not rules:
        return []
    if (prefilter and not may_match(text, rules)) or not may_use_pytorch(text):
        # No rule can match, but an unparseable file is still reported (TL000), the same as
        # without the prefilter.
        try:
            check_syntax(text)
        except SourceError as error:
            return [invalid_file(path, error.reason, error.line, error.column)]
        return []
    try:
        module = parse(text)
    except SourceError as error:
        return [invalid_file(path, error.reason, error.line, error.column)]

    from torchlint.analysis import Analysis

    reports: list[Report] = []
    failures: list[Violation] = []
    try:
        analysis = Analysis(module, path, text)
    except RecursionError:
        return [invalid_file(path, "file too deeply nested to analyse")]
    except Exception as error:  # an analysis bug must not take down the run
        return [invalid_file(path, f"internal error while analysing: {type(error).__name__}: {error}")]
    for rule_class in rules:
        before = len(reports)
        try:
            rule = rule_class(analysis, reports, options)
            analysis.run(rule)
        except Exception as error:  # one rule failing on one file is reported, not fatal
            del reports[before:]
            failures.append(invalid_file(
                path, f"internal error in {rule_class.CODE}: {type(error).__name__}: {error}"))
    violations = failures + _position(reports, module, path)
    return sorted(_without_noqa(violations, text))


def _position(reports: list[Report], module, path: str) -> list[Violation]:
    if not reports:
        return []
    # Positions for every node cost about two parses; only files with findings pay for them.
    wrapper = cst.MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(cst.metadata.PositionProvider)
    seen: set[tuple[int, int, str]] = set()
    violations = []
    for report in reports:
        span = positions[report.node]
        key = (span.start.line, span.start.column, report.rule.CODE)
        if key in seen:
            continue
        seen.add(key)
        violations.append(Violation(
            path=path, line=span.start.line, column=span.start.column + 1,
            code=report.rule.CODE, name=report.rule.NAME, message=report.message,
            end_line=span.end.line, end_column=span.end.column + 1, help=report.fix,
        ))
    return violations


def _without_noqa(violations: list[Violation], text: str) -> list[Violation]:
    if not violations or "noqa" not in text.lower():
        return violations
    lines = text.splitlines()
    kept = []
    for violation in violations:
        line = lines[violation.line - 1] if 0 < violation.line <= len(lines) else ""
        if not _suppressed(line, violation.code):
            kept.append(violation)
    return kept


def _suppressed(line: str, code: str) -> bool:
    for match in NOQA_RE.finditer(line):
        codes = match.group("codes")
        if not codes:
            return True
        if any(code.startswith(listed.upper()) for listed in re.split(r"[,\s]+", codes) if listed):
            return True
    return False


def lint_file(path: str, rules: Sequence[type[Rule]], options: dict | None = None,
              prefilter: bool = True) -> list[Violation]:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        return [invalid_file(path, f"cannot read: {error.strerror or error}")]
    return lint_source(data, path, rules, options, prefilter)
