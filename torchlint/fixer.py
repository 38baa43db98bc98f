"""Fix files: lint, apply the non-overlapping fixes of one pass, re-lint, until nothing changes.

Never damages a file: the fixed text must parse (else the file is left as it was, with one
message saying why), and it is written to a temporary file in the same directory that replaces
the original by rename, with the original's encoding (cookie and BOM), line endings,
permissions and final line break.
"""

from __future__ import annotations

import ast
import difflib
import io
import os
import tempfile
import tokenize
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

from torchlint.engine import SourceError, decode_source, lint_source
from torchlint.fix import SAFE, Fix, apply_fixes, select_fixes
from torchlint.violation import INVALID_FILE_CODE, Violation

MAX_PASSES = 10  # bounded: fixes that keep producing new fixable findings stop here


@dataclass
class FixResult:
    path: str
    original: str
    fixed: str
    applied: list[Violation] = field(default_factory=list)  # findings fixed (as first found)
    remaining: list[Violation] = field(default_factory=list)  # findings after the fixes
    refused: str | None = None  # why the file was left untouched

    @property
    def changed(self) -> bool:
        return self.fixed != self.original


def allowed(fix: Fix | None, unsafe: bool) -> bool:
    return fix is not None and bool(fix.edits) and (unsafe or fix.applicability == SAFE)


def parses(text: str, path: str = "<fixed>") -> str | None:
    """None when ``text`` parses, else the reason."""
    from torchlint.engine import parse

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(text, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        except SyntaxError as error:
            return f"{error.msg} (line {error.lineno})"
        except (ValueError, RecursionError, MemoryError) as error:
            return str(error) or type(error).__name__
    try:
        parse(text)
    except SourceError as error:
        return error.reason
    return None


def fix_text(text: str, path: str, rules, options: dict | None = None, unsafe: bool = False,
             ignored: frozenset[str] = frozenset(), prefilter: bool = True) -> FixResult:
    """Fix one Python source text to a fixed point (at most MAX_PASSES passes); for a notebook,
    ``text`` is its code cells joined (see ``fix_notebook``)."""

    def lint(source: str) -> list[Violation]:
        return [v for v in lint_source(source, path, rules, options, prefilter, notebook=False)
                if v.code not in ignored]

    result = FixResult(path, text, text)
    current = text
    violations = lint(current)
    if any(violation.code == INVALID_FILE_CODE for violation in violations):
        result.remaining = violations
        return result
    for _ in range(MAX_PASSES):
        candidates = [violation for violation in violations if allowed(violation.fix, unsafe)]
        chosen = select_fixes([violation.fix for violation in candidates], current)
        if not chosen:
            break
        new = apply_fixes(current, chosen)
        problem = parses(new, path)
        if problem is not None:
            # one of this pass's fixes is unsound here: keep those that parse on their own
            chosen = [fix for fix in chosen if parses(apply_fixes(current, [fix]), path) is None]
            new = apply_fixes(current, chosen)
            if not chosen or parses(new, path) is not None:
                result.refused = f"the fixes would not parse ({problem}); file left unchanged"
                result.fixed, result.applied = text, []
                result.remaining = lint(text)
                return result
        if new == current:
            break
        chosen_ids = {id(fix) for fix in chosen}
        result.applied += [violation for violation in candidates if id(violation.fix) in chosen_ids]
        current = new
        violations = lint(current)
        if any(violation.code == INVALID_FILE_CODE for violation in violations):
            result.refused = "the fixed file could not be analysed; file left unchanged"
            result.fixed, result.applied = text, []
            result.remaining = lint(text)
            return result
    result.fixed = current
    result.remaining = violations
    return result


# --- files on disk ---------------------------------------------------------------------------

@dataclass
class Decoded:
    text: str
    encoding: str
    bom: bool


def decode(data: bytes) -> Decoded:
    text = decode_source(data)  # raises SourceError; strips a BOM
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        encoding = "utf-8"
    bom = data.startswith(b"\xef\xbb\xbf")
    if encoding == "utf-8-sig":
        encoding = "utf-8"
    return Decoded(text, encoding, bom)


def encode(text: str, decoded: Decoded) -> bytes:
    data = text.encode(decoded.encoding)
    return b"\xef\xbb\xbf" + data if decoded.bom else data


def write_atomically(path: str, data: bytes) -> None:
    """Replace ``path``'s content by ``data`` through a temporary file in its directory and a
    rename, keeping its permissions; a symbolic link keeps pointing at the file it named."""
    target = os.path.realpath(path)
    mode = os.stat(target).st_mode & 0o7777
    directory = os.path.dirname(target) or "."
    handle, temporary = tempfile.mkstemp(prefix=".torchlint-fix-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def unified_diff(path: str, before: str, after: str) -> str:
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 fromfile=path, tofile=path)
    out = []
    for line in lines:
        out.append(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def fix_file(path: str, rules, options: dict | None, unsafe: bool, ignored: frozenset[str],
             write: bool, prefilter: bool = True, max_size: int | None = None) -> FixResult:
    """Fix the file at ``path`` (written back only when ``write``)."""
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError as error:
        result = FixResult(path, "", "")
        result.refused = f"cannot read: {error.strerror or error}"
        return result
    if max_size is not None and len(data) > max_size:
        from torchlint.runner import too_large

        result = FixResult(path, "", "")
        result.remaining = [v for v in [too_large(path, len(data), max_size)] if v.code not in ignored]
        return result
    from torchlint.notebook import is_notebook

    if is_notebook(path):
        return fix_notebook(path, data, rules, options, unsafe, ignored, write, prefilter)
    try:
        decoded = decode(data)
    except SourceError as error:
        result = FixResult(path, "", "")
        result.remaining = [v for v in lint_source(data, path, rules, options, prefilter) if v.code not in ignored]
        result.refused = None if result.remaining else error.reason
        return result
    result = fix_text(decoded.text, path, rules, options, unsafe, ignored, prefilter)
    if result.changed and write:
        try:
            new_data = encode(result.fixed, decoded)
        except UnicodeEncodeError:
            result.refused = f"the fixed text cannot be encoded as {decoded.encoding}; file left unchanged"
            result.fixed = result.original
            return result
        try:
            write_atomically(path, new_data)
        except OSError as error:
            result.refused = f"cannot write: {error.strerror or error}; file left unchanged"
            result.fixed = result.original
    return result


def fix_notebook(path: str, data: bytes, rules, options: dict | None, unsafe: bool, ignored: frozenset[str],
                 write: bool, prefilter: bool = True) -> FixResult:
    """Fix a notebook's code cells, joined as the linter sees them, and write the fixed code back
    into the cells' sources: outputs, metadata and the file's layout stay as they were. The
    result's texts are the notebook file's (a diff shows the JSON lines that change) and its
    findings name their cells."""
    from torchlint.notebook import NotebookError, load, place

    try:
        notebook = load(data)
    except NotebookError as error:
        result = FixResult(path, "", "")
        result.remaining = [v for v in lint_source(data, path, rules, options, prefilter) if v.code not in ignored]
        result.refused = None if result.remaining else error.reason
        return result
    original = data.decode("utf-8")
    if not notebook.is_python or not notebook.cells:
        return FixResult(path, original, original)
    joined = fix_text(notebook.source, path, rules, options, unsafe, ignored, prefilter)
    result = FixResult(path, original, original)
    result.refused = joined.refused
    result.applied = [place(notebook, violation) for violation in joined.applied]
    result.remaining = [place(notebook, violation) for violation in joined.remaining]
    if joined.fixed == joined.original or joined.refused is not None:
        return result
    fixed = notebook.rebuild(joined.fixed)
    try:
        load(fixed)
    except NotebookError as error:  # never write a notebook that would not load
        result.refused = f"the fixed notebook would not load ({error.reason}); file left unchanged"
        return result
    result.fixed = fixed
    if write:
        try:
            write_atomically(path, fixed.encode("utf-8"))
        except OSError as error:
            result.refused = f"cannot write: {error.strerror or error}; file left unchanged"
            result.fixed = result.original
    return result


def fixable_counts(violations: Sequence[Violation]) -> tuple[int, int]:
    """(findings with a safe fix, findings with only an unsafe one)."""
    safe = sum(1 for v in violations if v.fix is not None and v.fix.edits and v.fix.applicability == SAFE)
    unsafe = sum(1 for v in violations if v.fix is not None and v.fix.edits and v.fix.applicability != SAFE)
    return safe, unsafe
