"""Jupyter notebooks: code cells joined into one module, IPython syntax masked, positions mapped
back to cells, and edits of the joined source written back into the notebook's JSON.

The joined source is every code cell's lines, in order, one module (the kernel runs cells in one
namespace, so module level is one scope, as in a script). A line of IPython syntax (``%magic``,
``!shell``, ``x = !ls``, ``obj?``) becomes ``pass`` (or ``x = None``) at the same indentation,
and a cell magic's cell (``%%bash``, ``%%writefile`` ...) becomes blank lines, except for the
magics whose body is Python (``%%time``, ``%%capture`` ...), where only the magic line is masked.
Masking keeps every other line and column where it was, so a position in the joined source is a
position in a cell: ``locate`` maps it back. ``rebuild`` turns an edited joined source (a fix)
back into the notebook's text, rewriting only the ``source`` of the cells whose code changed.

For ``--fix``: ``notebook = load(data)``, fix ``notebook.source`` as any module (its positions are
joined-source positions; ``locate``/``locate_offset`` give the cell's), then write
``notebook.rebuild(fixed_source)`` (a ``str``, UTF-8, the file's BOM kept) back to the file.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

NOTEBOOK_SUFFIX = ".ipynb"
# Cell magics whose body is Python the kernel runs: only their first line is masked.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "memit"})
_LINE_BREAK_RE = re.compile(r"\r\n|\r|\n")  # the parser's line breaks (engine.LINE_BREAK_RE)
_HELP_RE = re.compile(r"^\s*(?:\?{1,2}[\w.*%]+|%?[\w.*]+\?{1,2}|\?{1,2})\s*$")
_ASSIGNED_ESCAPE_RE = re.compile(
    r"^(\s*)([A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*)\s*=\s*[%!]")
# IPython runs these without `%` (automagic, and its shell aliases): `cd ..`, `ls -l data/`.
_AUTOMAGIC_RE = re.compile(
    r"^\s*(?:cd|ls|ll|pwd|pip|conda|mamba|mkdir|rmdir|rm|mv|cp|cat|less|more|man|clear|env|"
    r"load_ext|reload_ext|matplotlib|run|time|timeit|who|whos|history|tensorboard)\s+\S")
# A cell runs on its own, so a `from __future__` import may open any cell, not only the first.
_FUTURE_RE = re.compile(r"^\s*from\s+__future__\s+import\s+[\w\s,]+(?:#.*)?$")


def is_notebook(path: str) -> bool:
    return path.lower().endswith(NOTEBOOK_SUFFIX)


class NotebookError(Exception):
    """Not a notebook torchlint can read: the reason, and where in the file when known."""

    def __init__(self, reason: str, line: int = 1, column: int = 1) -> None:
        super().__init__(reason)
        self.reason, self.line, self.column = reason, line, column


@dataclass
class Cell:
    number: int  # 1-based, among all cells (markdown and raw included), as Jupyter shows them
    index: int  # position in the notebook's cell list
    start: int  # 1-based line of its first line in the joined source
    lines: list[str]  # its source lines as written, without line breaks
    masked: list[str]  # the same lines as they appear in the joined source
    trailing_newline: bool
    newline: str = "\n"

    @property
    def end(self) -> int:
        """1-based joined line just after the cell."""
        return self.start + len(self.lines)


@dataclass
class Notebook:
    text: str  # the file as read (decoded, without a BOM)
    document: dict
    cells: list[Cell] = field(default_factory=list)  # code cells only
    is_python: bool = True
    bom: str = ""  # "\ufeff" when the file started with one; rebuild() keeps it

    @property
    def source(self) -> str:
        """The joined, masked Python source that is linted."""
        return "".join(line + "\n" for cell in self.cells for line in cell.masked)

    def locate(self, line: int) -> tuple[int, int]:
        """(cell number, line in the cell) of a 1-based line of the joined source. A line past
        the end (a position at end of file) is the last line of the last cell."""
        cells = [cell for cell in self.cells if cell.lines]
        if not cells:
            return 1, 1
        position = bisect.bisect_right([cell.start for cell in cells], line) - 1
        cell = cells[max(position, 0)]
        return cell.number, min(max(line - cell.start + 1, 1), len(cell.lines))

    def locate_offset(self, offset: int) -> tuple[int, int, int]:
        """(cell number, 1-based line in the cell, 1-based column) of a character offset into
        ``source``."""
        before = self.source[:offset]
        line = before.count("\n") + 1
        column = offset - (before.rfind("\n") + 1) + 1
        return (*self.locate(line), column)

    def rebuild(self, new_source: str) -> str:
        """The notebook's text with ``new_source`` (an edited ``source``) written back into the
        cells. Each line of the new source goes to the cell its original line came from (an
        inserted line to the cell of the line it replaces or follows); masked lines left as they
        were get their IPython text back. Only the ``source`` of cells whose code changed is
        rewritten, in the layout the file already uses; everything else stays byte for byte."""
        import difflib

        old = [line for cell in self.cells for line in cell.masked]
        owners = [(position, row) for position, cell in enumerate(self.cells) for row in range(len(cell.lines))]
        new = _LINE_BREAK_RE.split(new_source)
        if new and new[-1] == "":
            new.pop()
        placed: list[list[str]] = [[] for _ in self.cells]
        if not self.cells:
            return self.bom + self.text
        matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            for offset, j in enumerate(range(j1, j2)):
                if tag == "equal":
                    position, row = owners[i1 + offset]
                    placed[position].append(self.cells[position].lines[row])
                    continue
                if i2 > i1:  # replaced: the line takes the cell of the old line in its place
                    position = owners[i1 + min(offset, i2 - i1 - 1)][0]
                elif i1 > 0:  # inserted: into the cell of the line before
                    position = owners[i1 - 1][0]
                else:
                    position = owners[0][0] if owners else 0
                placed[position].append(new[j])
        changes = {}
        for cell, lines in zip(self.cells, placed):
            if lines != cell.lines:
                text = cell.newline.join(lines)
                if lines and cell.trailing_newline:
                    text += cell.newline
                changes[cell.index] = text
        if not changes:
            return self.bom + self.text
        return self.bom + _splice_sources(self.text, changes)


def load(data: str | bytes) -> Notebook:
    """The notebook in ``data`` (nbformat 4 JSON); NotebookError says why it is not one."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            line = data[: error.start].count(b"\n") + 1
            raise NotebookError(f"invalid notebook: not valid UTF-8 (byte {error.start})", line) from None
    else:
        text = data
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    text = text[len(bom):]
    if not text.strip():  # an empty file (often a placeholder): no cells, nothing to lint
        text = '{"cells": []}'
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise NotebookError(f"invalid notebook: not valid JSON: {error.msg}", error.lineno, error.colno) from None
    except RecursionError:
        raise NotebookError("invalid notebook: JSON nested too deeply") from None
    if not isinstance(document, dict) or not isinstance(document.get("cells"), list):
        if isinstance(document, dict) and "worksheets" in document:
            raise NotebookError("invalid notebook: nbformat 3 notebooks are not supported "
                                "(`jupyter nbconvert --to notebook` upgrades them to nbformat 4)")
        raise NotebookError("invalid notebook: no `cells` list (not an nbformat 4 notebook)")
    notebook = Notebook(text, document, is_python=_is_python(document), bom=bom)
    line = 1
    for index, raw in enumerate(document["cells"]):
        number = index + 1
        if not isinstance(raw, dict) or not isinstance(raw.get("cell_type"), str):
            raise NotebookError(f"invalid notebook: cell {number} has no `cell_type`")
        if raw["cell_type"] != "code":
            continue
        source = raw.get("source", "")
        if isinstance(source, list) and all(isinstance(part, str) for part in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise NotebookError(f"invalid notebook: cell {number}: `source` must be a string or a list of strings")
        lines = _LINE_BREAK_RE.split(source)
        trailing = lines[-1] == "" and len(lines) > 1
        if lines[-1] == "":
            lines.pop()
        cell = Cell(number, index, line, lines, mask(lines), trailing, "\r\n" if "\r\n" in source else "\n")
        notebook.cells.append(cell)
        line = cell.end
    if "await" in text:
        _mask_top_level_await(notebook)
    return notebook


def _mask_top_level_await(notebook: Notebook) -> None:
    """IPython runs ``await`` outside a function (autoawait): in each cell that does, the
    keyword becomes ``_ or `` (``x = await f()`` reads ``x = _ or f()``: valid wherever the
    ``await`` was, statement start included, and every column kept), so the interpreter's
    "'await' outside function" is not reported for it."""
    import ast

    for cell in notebook.cells:
        text = "".join(line + "\n" for line in cell.masked)
        if "await" not in text:
            continue
        try:
            tree = compile(text, "<cell>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in _top_level_awaits(tree):
            row = node.lineno - 1
            line = cell.masked[row]
            column = len(line.encode("utf-8")[: node.col_offset].decode("utf-8", "replace"))
            if line.startswith("await", column):
                cell.masked[row] = line[:column] + "_ or " + line[column + 5:]


def _top_level_awaits(tree) -> list:
    """``await`` expressions outside any function or class body."""
    import ast

    found, stack = [], [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(child, ast.Await):
                found.append(child)
            stack.append(child)
    return found


def _is_python(document: dict) -> bool:
    """False for a notebook whose kernel is another language (R, Julia ...); unknown is Python."""
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        return True
    for table, key in (("language_info", "name"), ("kernelspec", "language")):
        value = metadata.get(table, {}).get(key) if isinstance(metadata.get(table), dict) else None
        if isinstance(value, str) and value:
            return value.lower() in ("python", "python3", "ipython", "ipython3")
    return True


def mask(lines: Sequence[str]) -> list[str]:
    """The cell's lines with IPython syntax replaced by Python of the same indentation; only
    lines where a statement starts (outside brackets, strings and continuations) are read as
    IPython syntax."""
    masked = list(lines)
    first = next((row for row, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].startswith("%%"):
        name = lines[first][2:].split(maxsplit=1)[0] if lines[first][2:].strip() else ""
        if name not in PYTHON_CELL_MAGICS:  # %%bash, %%writefile, %%html ...: not Python
            return ["" for _ in lines]
        masked[first] = ""
    scanner = _Scanner()
    continued = False  # the previous line was IPython syntax ending in a backslash
    for row, line in enumerate(masked):
        if continued:
            continued = line.rstrip().endswith("\\")
            masked[row] = ""
            continue
        if scanner.at_statement_start and _is_ipython(line):
            continued = line.rstrip().endswith("\\")
            masked[row] = _placeholder(line)
            continue
        scanner.feed(line)
    return masked


def _is_ipython(line: str) -> bool:
    stripped = line.lstrip()
    if stripped[:1] in ("%", "!"):
        return not stripped.startswith("!=")
    if _HELP_RE.match(line) and "?" in line:
        return True
    if _FUTURE_RE.match(line):
        return True
    if _AUTOMAGIC_RE.match(line):  # `ls -l x` is automagic; `ls = 3` or `cat = f(` is Python
        return _automagic(stripped)
    return bool(_ASSIGNED_ESCAPE_RE.match(line))


def _automagic(stripped: str) -> bool:
    """Is a line that starts with an automagic's name a shell-like call, not Python? Python
    there is an assignment (``history = []``), an expression on that name, a statement that
    goes on to the next lines (``cat = cs.Category(``), or any line that compiles."""
    rest = stripped.split(maxsplit=1)[1] if len(stripped.split(maxsplit=1)) > 1 else ""
    if re.match(r"(?:[-+*/%@&|^]|//|<<|>>|\*\*)?=(?!=)", rest):
        return False
    scanner = _Scanner()
    scanner.feed(stripped)
    return scanner.at_statement_start and not _compiles(stripped)


def _compiles(line: str) -> bool:
    try:
        compile(line, "<cell>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def _placeholder(line: str) -> str:
    indent = line[: len(line) - len(line.lstrip())]
    assigned = _ASSIGNED_ESCAPE_RE.match(line)
    if assigned:  # `files = !ls`: the name stays bound
        return f"{indent}{assigned.group(2)} = None"
    return f"{indent}pass"


class _Scanner:
    """Just enough of Python's tokenizer to know where statements start: open brackets,
    triple-quoted strings and backslash continuations carried from line to line."""

    def __init__(self) -> None:
        self.depth = 0
        self.triple: str | None = None  # the closing quotes of an open triple-quoted string
        self.continued = False

    @property
    def at_statement_start(self) -> bool:
        return self.depth == 0 and self.triple is None and not self.continued

    def feed(self, line: str) -> None:
        position, length = 0, len(line)
        self.continued = False
        while position < length:
            if self.triple is not None:
                end = _find_closing(line, position, self.triple)
                if end < 0:
                    return
                position, self.triple = end + 3, None
                continue
            char = line[position]
            if char == "#":
                return
            if char in "\"'":
                if line.startswith(char * 3, position):
                    self.triple = char * 3
                    position += 3
                    continue
                end = _find_closing(line, position + 1, char)
                position = length if end < 0 else end + 1
                continue
            if char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth = max(self.depth - 1, 0)
            elif char == "\\" and position == length - 1:
                self.continued = True
            position += 1


def _find_closing(line: str, position: int, quote: str) -> int:
    while True:
        end = line.find(quote, position)
        if end < 0:
            return -1
        backslashes = len(line[position:end]) - len(line[position:end].rstrip("\\"))
        if backslashes % 2 == 0:
            return end
        position = end + 1


# Writing back: the file's own text, with only the changed cells' `source` values replaced.

def _splice_sources(text: str, changes: dict[int, str]) -> str:
    spans = _source_spans(text)
    ensure_ascii = text.isascii() and "\\u" in text
    pieces, last = [], 0
    for index in sorted(changes):
        if index not in spans:  # a cell with no `source` key: nothing to splice into
            continue
        start, end = spans[index]
        pieces.append(text[last:start])
        pieces.append(_encode_source(changes[index], text[start:end], ensure_ascii))
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def _encode_source(source: str, old: str, ensure_ascii: bool) -> str:
    """``source`` as a JSON value laid out like ``old``: a string, or nbformat's list of lines
    (one a row at the indentation ``old`` uses, or on one line when ``old`` was)."""
    if not old.startswith("["):
        return json.dumps(source, ensure_ascii=ensure_ascii)
    parts = [json.dumps(part, ensure_ascii=ensure_ascii) for part in source.splitlines(keepends=True)]
    if not parts:
        return "[]"
    layout = re.match(r"\[(\r?\n)([ \t]*)", old)
    if layout is None:
        return "[" + ", ".join(parts) + "]"
    newline, indent = layout.groups()
    closing = re.search(r"(\r?\n)([ \t]*)\]$", old)
    close_indent = closing.group(2) if closing else indent[: max(len(indent) - 1, 0)]
    return "[" + newline + ("," + newline).join(indent + part for part in parts) + newline + close_indent + "]"


_DECODER = json.JSONDecoder()
_WHITESPACE = re.compile(r"[ \t\n\r]*")


def _source_spans(text: str) -> dict[int, tuple[int, int]]:
    """Cell index -> (start, end) of its ``source`` value in the notebook's text."""
    position = _WHITESPACE.match(text, 0).end()
    members, _ = _object_members(text, position)
    if "cells" not in members:
        return {}
    position = members["cells"][0] + 1  # after the `[`
    spans: dict[int, tuple[int, int]] = {}
    index = 0
    while True:
        position = _WHITESPACE.match(text, position).end()
        if text[position] == "]":
            return spans
        if text[position] == ",":
            position = _WHITESPACE.match(text, position + 1).end()
        cell, position = _object_members(text, position)
        if "source" in cell:
            spans[index] = cell["source"]
        index += 1


def _object_members(text: str, position: int) -> tuple[dict[str, tuple[int, int]], int]:
    """The spans of an object's values by key (the last of duplicate keys, as json.loads
    keeps), and the position after the object. ``text[position]`` is its ``{``."""
    from json.decoder import scanstring

    members: dict[str, tuple[int, int]] = {}
    position += 1
    while True:
        position = _WHITESPACE.match(text, position).end()
        if text[position] == "}":
            return members, position + 1
        if text[position] == ",":
            position = _WHITESPACE.match(text, position + 1).end()
        key, position = scanstring(text, position + 1)
        position = _WHITESPACE.match(text, position).end() + 1  # the `:`
        start = _WHITESPACE.match(text, position).end()
        _, end = _DECODER.raw_decode(text, start)
        members[key] = (start, end)
        position = end


# Linting: the engine lints the joined source; findings are moved into their cells.

def lint_notebook(data: str | bytes, path: str, lint) -> list:
    """Findings of ``lint(source)`` (the engine on the joined source) placed in their cells. A
    file that is not a notebook is one TL000 finding; a notebook of another language has none."""
    from torchlint.engine import invalid_file

    try:
        notebook = load(data)
    except NotebookError as error:
        return [invalid_file(path, error.reason, error.line, error.column)]
    if not notebook.is_python or not notebook.cells:
        return []
    return [place(notebook, violation) for violation in lint(notebook.source)]


def place(notebook: Notebook, violation):
    """A finding on the joined source, with its line in its cell and ``cell`` set."""
    from dataclasses import replace

    cell, line = notebook.locate(violation.line)
    end_cell, end_line = notebook.locate(violation.end_line)
    end_column = violation.end_column
    if end_cell != cell or violation.end_line < violation.line:  # runs into the next cell: cut at this one's end
        owner = next(item for item in notebook.cells if item.number == cell)
        end_line = len(owner.lines)
        end_column = len(owner.lines[-1]) + 1 if owner.lines else 1
    return replace(violation, line=line, end_line=end_line, end_column=end_column, cell=cell)
