"""Fixes: what a rule proposes, how the engine turns it into text edits, how edits are applied.

A rule proposes a fix by passing ``autofix=Fix.safe(message, change, ...)`` (or ``Fix.unsafe``)
to ``Rule.report``. A change names libcst nodes of the analysed tree, never offsets:

- ``Replace(node, code)``: the node's source becomes ``code``;
- ``InsertBefore(statement, code)`` / ``InsertAfter(statement, code)``: new lines (``code`` may
  span several) at the statement's indentation, before its first line or after its last;
- ``Delete(statement)``: the statement's lines go (with their trailing comment);
- ``Move(statement, after)``: the statement's lines go and reappear after the statement
  ``after`` (at its indentation); with ``leave_pass``, one alone in its block leaves ``pass``;
- ``Wrap(first, last, header)``: the statements ``first`` .. ``last`` of one block move one
  level in under ``header`` (``with torch.no_grad():``).

The engine resolves changes against the node positions it computes anyway (``resolve``). A
change that cannot be made safely as text (a statement sharing its line with another after a
``;``, a block holding a triple-quoted string that re-indenting would alter) makes the whole fix
unavailable: the finding is reported without one rather than with a guess. ``apply_fixes``
applies one pass of non-overlapping edits; ``torchlint.fixer`` iterates passes on files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

SAFE, UNSAFE = "safe", "unsafe"
APPLICABILITIES = (SAFE, UNSAFE)


@dataclass(frozen=True, slots=True)
class Edit:
    """Replace the text from (line, column) up to (end_line, end_column) by ``content``;
    1-based lines and columns in characters, the end exclusive (ruff's Edit)."""

    content: str
    line: int
    column: int
    end_line: int
    end_column: int

    def as_dict(self) -> dict:
        return {
            "content": self.content,
            "location": {"row": self.line, "column": self.column},
            "end_location": {"row": self.end_line, "column": self.end_column},
        }

    @classmethod
    def from_dict(cls, data: dict) -> Edit:
        return cls(data["content"], data["location"]["row"], data["location"]["column"],
                   data["end_location"]["row"], data["end_location"]["column"])


@dataclass(frozen=True, slots=True)
class Fix:
    """What a rule proposes: an applicability, a message, and either node-anchored ``changes``
    (as the rule builds it) or resolved text ``edits`` (as violations carry it)."""

    applicability: str
    message: str
    changes: tuple = ()
    edits: tuple[Edit, ...] = ()

    @classmethod
    def safe(cls, message: str, *changes: Any) -> Fix:
        return cls(SAFE, message, tuple(changes))

    @classmethod
    def unsafe(cls, message: str, *changes: Any) -> Fix:
        return cls(UNSAFE, message, tuple(changes))

    @property
    def is_safe(self) -> bool:
        return self.applicability == SAFE

    def as_dict(self) -> dict:
        return {"applicability": self.applicability, "message": self.message,
                "edits": [edit.as_dict() for edit in self.edits]}

    @classmethod
    def from_dict(cls, data: dict) -> Fix:
        return cls(data["applicability"], data["message"], (),
                   tuple(Edit.from_dict(edit) for edit in data["edits"]))


@dataclass(frozen=True, slots=True)
class Replace:
    node: Any
    code: str


@dataclass(frozen=True, slots=True)
class InsertBefore:
    statement: Any
    code: str


@dataclass(frozen=True, slots=True)
class InsertAfter:
    statement: Any
    code: str


@dataclass(frozen=True, slots=True)
class Delete:
    statement: Any


@dataclass(frozen=True, slots=True)
class Move:
    statement: Any
    after: Any
    # a statement alone in its block leaves `pass` behind (`finally: pass`) instead of making the
    # fix unavailable; only where the block running nothing is what the move means
    leave_pass: bool = False


@dataclass(frozen=True, slots=True)
class Wrap:
    first: Any
    last: Any
    header: str
    # a statement that may end a block opened by the same header right above ``first``: when it
    # ends on the line before ``first``, one level deeper, the statements join that block
    # instead of opening a second one (`with torch.no_grad():` twice in a row)
    join: Any = None


class Unresolvable(Exception):
    """A change that cannot be made as a sound text edit; the finding keeps no fix."""


_LINE_BREAK_RE = re.compile(r"\r\n|\r|\n")


class SourceText:
    """The lines of a source text with their line breaks, for turning positions into edits."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines: list[str] = []
        self.breaks: list[str] = []
        start = 0
        for match in _LINE_BREAK_RE.finditer(text):
            self.lines.append(text[start:match.start()])
            self.breaks.append(match.group())
            start = match.end()
        self.lines.append(text[start:])
        self.breaks.append("")
        self.newline = self.breaks[0] or "\n"
        self.starts = []
        offset = 0
        for line, brk in zip(self.lines, self.breaks):
            self.starts.append(offset)
            offset += len(line) + len(brk)

    def offset(self, line: int, column: int) -> int:
        """String offset of a 1-based line and column."""
        if line > len(self.lines):
            return len(self.text)
        return self.starts[line - 1] + column - 1

    def indent_unit(self) -> str:
        """The file's indentation step: a tab for tab-indented files, else four spaces."""
        for line in self.lines:
            if line[:1] == "\t":
                return "\t"
        return "    "


def _rest_is_blank(rest: str) -> bool:
    """Nothing but whitespace or a comment after a statement on its line."""
    stripped = rest.strip()
    return not stripped or stripped.startswith("#")


def _statement_lines(source: SourceText, span) -> tuple[int, int, str]:
    """(first line, last line, indentation) of a statement that has its lines to itself."""
    first, last = span.start.line, span.end.line
    prefix = source.lines[first - 1][:span.start.column]
    if prefix.strip():
        raise Unresolvable("the statement does not start its line")
    if not _rest_is_blank(source.lines[last - 1][span.end.column:]):
        raise Unresolvable("another statement follows on the same line")
    return first, last, prefix


def _block_text(code: str, indent: str, newline: str, unit: str = "    ") -> str:
    """``code`` (lines indented by four spaces a level) as lines at ``indent``, each level of
    its own indentation in the file's unit."""
    out = []
    for line in code.split("\n"):
        stripped = line.lstrip(" ")
        levels = (len(line) - len(stripped)) // 4
        out.append((indent + unit * levels + stripped if stripped.strip() else "") + newline)
    return "".join(out)


def _after_lines(source: SourceText, last: int, content: str) -> Edit:
    """An edit inserting whole lines after line ``last``."""
    if last < len(source.lines) and source.breaks[last - 1]:
        return Edit(content, last + 1, 1, last + 1, 1)
    # the last line of a file without a final line break
    end = len(source.lines[last - 1]) + 1
    return Edit(source.newline + content.removesuffix(source.newline), last, end, last, end)


def _indent_width(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _code_line(source: SourceText, start: int, step: int) -> str | None:
    """The nearest line from ``start`` (1-based) in direction ``step`` holding code."""
    index = start
    while 1 <= index <= len(source.lines):
        stripped = source.lines[index - 1].strip()
        if stripped and not stripped.startswith("#"):
            return source.lines[index - 1]
        index += step
    return None


def _only_statement(source: SourceText, first: int, last: int, indent: str) -> bool:
    """Whether the statement on lines first..last is alone in its block (removing it would
    leave the block empty). Read off the indentation of the code lines around it; a wrong
    answer either way is caught: a needless refusal, or a result that does not parse."""
    before = _code_line(source, first - 1, -1)
    after = _code_line(source, last + 1, 1)
    starts_block = before is not None and _indent_width(before) < len(indent)
    ends_block = after is None or _indent_width(after) < len(indent)
    return starts_block and ends_block


def _joins(source: SourceText, span, first: int, indent: str, header: str) -> bool:
    """Does the statement at ``span`` end on the line before ``first``, one level deeper than
    ``indent`` and alone there, as the last statement of a block whose header (the nearest code
    line above it at ``indent``) is ``header`` itself?"""
    if span.end.line != first - 1:
        return False
    line = source.lines[span.end.line - 1]
    own = line[:len(line) - len(line.lstrip(" \t"))]
    if own != indent + source.indent_unit() or not _rest_is_blank(line[span.end.column:]):
        return False
    if source.lines[span.start.line - 1][:span.start.column] != own:
        return False
    for number in range(span.start.line - 1, 0, -1):
        above = source.lines[number - 1]
        stripped = above.strip()
        if not stripped or stripped.startswith("#") or not above.startswith(indent):
            continue
        if len(above) - len(above.lstrip(" \t")) == len(indent):
            return stripped == header
    return False


def _delete_lines(source: SourceText, first: int, last: int) -> Edit:
    if last < len(source.lines) and source.breaks[last - 1]:
        return Edit("", first, 1, last + 1, 1)
    if first == 1:
        return Edit("", 1, 1, last, len(source.lines[last - 1]) + 1)
    # the final line of a file without a final line break: take the break before it instead
    previous = first - 1
    return Edit("", previous, len(source.lines[previous - 1]) + 1, last, len(source.lines[last - 1]) + 1)


def _replace_lines(source: SourceText, first: int, last: int, line: str) -> Edit:
    """Lines first..last replaced by ``line`` (keeping the last line's break)."""
    return Edit(line, first, 1, last, len(source.lines[last - 1]) + 1)


def _decorated_start(node: Any, positions) -> Any:
    """A decorated definition starts at its first decorator."""
    decorators = getattr(node, "decorators", None)
    if decorators:
        start = positions[decorators[0]].start
        return type(positions[node])(start, positions[node].end)
    return positions[node]


def _lines_of(source: SourceText, first: int, last: int) -> list[str]:
    return source.lines[first - 1:last]


_TRIPLE_QUOTE_RE = re.compile(r"'''|\"\"\"")


def _reindent(lines: list[str], old: str, new: str) -> list[str]:
    """Lines moved from indentation ``old`` to ``new``; blank lines stay blank."""
    result = []
    for line in lines:
        if not line.strip():
            result.append("")
        elif line.startswith(old):
            result.append(new + line[len(old):])
        elif line[:1] in (" ", "\t") or not old:
            raise Unresolvable("inconsistent indentation")
        else:  # a continuation line at column 0 (inside brackets): leave it
            result.append(line)
    return result


def resolve(fix: Fix, positions, text: str | SourceText) -> Fix:
    """The fix with its changes turned into text edits (raises Unresolvable)."""
    source = text if isinstance(text, SourceText) else SourceText(text)
    edits: list[Edit] = []
    nl = source.newline
    for change in fix.changes:
        kind = type(change)
        if kind is Replace:
            span = positions[change.node]
            edits.append(Edit(change.code, span.start.line, span.start.column + 1,
                              span.end.line, span.end.column + 1))
        elif kind is InsertBefore:
            first, _, indent = _statement_lines(source, _decorated_start(change.statement, positions))
            edits.append(Edit(_block_text(change.code, indent, nl, source.indent_unit()), first, 1, first, 1))
        elif kind is InsertAfter:
            span = _decorated_start(change.statement, positions)
            _, last, indent = _statement_lines(source, span)
            edits.append(_after_lines(source, last, _block_text(change.code, indent, nl, source.indent_unit())))
        elif kind is Delete:
            first, last, indent = _statement_lines(source, _decorated_start(change.statement, positions))
            if _only_statement(source, first, last, indent):
                raise Unresolvable("the block would be left empty")
            edits.append(_delete_lines(source, first, last))
        elif kind is Move:
            first, last, indent = _statement_lines(source, _decorated_start(change.statement, positions))
            alone = _only_statement(source, first, last, indent)
            if alone and not change.leave_pass:
                raise Unresolvable("the block would be left empty")
            _, after_last, after_indent = _statement_lines(source, _decorated_start(change.after, positions))
            lines = _lines_of(source, first, last)
            if len(lines) > 1 and _TRIPLE_QUOTE_RE.search("\n".join(lines)):
                raise Unresolvable("a multi-line string would be re-indented")
            moved = _reindent(lines, indent, after_indent)
            if alone:
                edits.append(_replace_lines(source, first, last, indent + "pass"))
            else:
                edits.append(_delete_lines(source, first, last))
            edits.append(_after_lines(source, after_last, "".join(line + nl for line in moved)))
        elif kind is Wrap:
            first, _, indent = _statement_lines(source, _decorated_start(change.first, positions))
            _, last, _ = _statement_lines(source, positions[change.last])
            lines = _lines_of(source, first, last)
            if _TRIPLE_QUOTE_RE.search("\n".join(lines)):
                raise Unresolvable("a multi-line string would be re-indented")
            inner = _reindent(lines, indent, indent + source.indent_unit())
            content = indent + change.header + nl + "".join(line + nl for line in inner)
            if change.join is not None and _joins(source, positions[change.join], first, indent, change.header):
                content = "".join(line + nl for line in inner)  # re-indented into the block above
            if last < len(source.lines) and source.breaks[last - 1]:
                edits.append(Edit(content, first, 1, last + 1, 1))
            else:
                edits.append(Edit(content.removesuffix(nl), first, 1, last, len(source.lines[last - 1]) + 1))
        else:
            raise TypeError(f"unknown change {change!r}")
    if _overlapping([_span(source, edit) for edit in edits]):
        raise Unresolvable("the fix's own edits overlap")
    return Fix(fix.applicability, fix.message, (), tuple(edits))


def resolve_or_none(fix: Fix, positions, source: SourceText) -> Fix | None:
    """The resolved fix, or None when it cannot be made soundly as text (the finding then says
    so: it is reported without a fix)."""
    try:
        return resolve(fix, positions, source)
    except (Unresolvable, KeyError):  # KeyError: a node that is not in the module's tree
        return None


def _span(source: SourceText, edit: Edit) -> tuple[int, int]:
    return source.offset(edit.line, edit.column), source.offset(edit.end_line, edit.end_column)


def _overlapping(spans: list[tuple[int, int]]) -> bool:
    ordered = sorted(spans)
    return any(a[1] > b[0] or (a[0] == b[0]) for a, b in zip(ordered, ordered[1:]))


def _conflict(first: list[tuple[int, int]], second: list[tuple[int, int]]) -> bool:
    """Edits of two fixes that touch (an insertion where another edit starts or ends is
    ambiguous about order, so it counts): the second waits for the next pass."""
    return any(a0 <= b1 and b0 <= a1 for a0, a1 in first for b0, b1 in second)


def select_fixes(fixes: list[Fix], text: str | SourceText) -> list[Fix]:
    """The fixes of one pass: in order of position, each one that conflicts with none taken."""
    source = text if isinstance(text, SourceText) else SourceText(text)
    taken: list[tuple[Fix, list[tuple[int, int]]]] = []
    spans = sorted(((fix, [_span(source, edit) for edit in fix.edits]) for fix in fixes if fix.edits),
                   key=lambda item: min(item[1]))
    for fix, fix_spans in spans:
        if any(_conflict(fix_spans, other) for _, other in taken):
            continue
        taken.append((fix, fix_spans))
    return [fix for fix, _ in taken]


def apply_fixes(text: str, fixes: list[Fix]) -> str:
    """``text`` with the (non-conflicting) edits of ``fixes`` applied."""
    source = SourceText(text)
    spans = sorted(((_span(source, edit), edit.content) for fix in fixes for edit in fix.edits), reverse=True)
    result = text
    for (start, end), content in spans:
        result = result[:start] + content + result[end:]
    return result


# --- helpers for rules ---------------------------------------------------------------------------

def move_after_loop(statement: Any, ctx: Any, message: str) -> Fix | None:
    """An unsafe fix moving a per-iteration statement after its innermost loop, or None when
    the loop is implicit (a function run once per step: there is no "after")."""
    loop = ctx.loops[-1] if ctx.loops else None
    if loop is None or loop.implicit is not None or ctx.guard is not None:
        return None  # (under `if rank == 0:` the move would run it on every process)
    # alone in a `finally:` or `with` block of the loop, it leaves `pass` there
    return Fix.unsafe(message, Move(statement, loop.node, leave_pass=True))


def torch_name(analysis: Any) -> str | None:
    """The name the module imports ``torch`` under (``torch`` first), or None: a fix must not
    write ``torch.no_grad()`` into a file where ``torch`` is not bound."""
    imports = analysis.imports
    if imports.get("torch") == "torch":
        return "torch"
    return next((alias for alias, name in sorted(imports.items()) if name == "torch"), None)


def source_of(analysis: Any, node: Any) -> str:
    """The exact source of an expression (unlike ``Rule.code``, never shortened)."""
    return analysis.module.code_for_node(node)


def statement_of_call(analysis: Any, call: Any, scope: Any) -> Any | None:
    """The statement of ``scope`` whose own expressions hold ``call``."""
    for stmt, _ in scope.statements:
        if any(found is call for found in analysis.calls_in(stmt)):
            return stmt
    return None


_VARIABLE_TYPES = ("Name", "Attribute", "Subscript")


def detach_fix(analysis: Any, values: list, ctx: Any, container: str) -> Fix | None:
    """Store or add ``v.detach()`` instead of each graph-attached ``v`` of ``values`` (the
    elements of a list, tuple or dict literal one by one). Safe when the container is a local
    of the function and every value is a variable (a tensor by every reading); unsafe when the
    container outlives the function (another method may backpropagate through it) or a value
    is a call (it might return something without ``.detach()``, a model's output object)."""
    from torchlint.lazy import cst

    targets = []
    for value in values:
        if type(value) in (cst.List, cst.Tuple):
            targets += [element.value for element in value.elements
                        if type(element) is cst.Element and analysis.is_attached(element.value, ctx)]
        elif type(value) is cst.Dict:
            targets += [element.value for element in value.elements
                        if type(element) is cst.DictElement and analysis.is_attached(element.value, ctx)]
        elif analysis.is_attached(value, ctx):
            targets.append(value)
    if not targets:
        return None
    changes = []
    for value in targets:
        text = source_of(analysis, value)
        if type(value).__name__ not in (*_VARIABLE_TYPES, "Call"):
            text = f"({text})"
        changes.append(Replace(value, f"{text}.detach()"))
    binding = analysis.lookup(container, ctx) if "." not in container else None
    local = binding is not None and ctx.scope.kind == "function" and binding.ctx.scope is ctx.scope
    variables = all(type(value).__name__ in _VARIABLE_TYPES for value in targets)
    shown = ", ".join(f"`{source_of(analysis, value)}`" for value in targets[:3])
    message = f"Detach {shown} before keeping it"
    return Fix(SAFE if local and variables else UNSAFE, message, tuple(changes))


def torch_reference(analysis: Any) -> tuple[str, tuple] | None:
    """(name, extra changes) for writing ``torch.no_grad()`` and the like in a fix: the name the
    module imports torch under, or ``torch`` with an ``import torch`` added after the module's
    leading imports when the file uses torch only through ``from torch import ...``. None when
    neither is possible (no leading imports to put it after, ``torch`` bound to something else)."""
    from torchlint.lazy import cst

    name = torch_name(analysis)
    if name is not None:
        return name, ()
    if "torch" in analysis.imports or analysis.module_scope.bindings.get("torch"):
        return None
    if not any(value == "torch" or value.startswith("torch.") for value in analysis.imports.values()):
        return None  # a file that never imports from torch: not ours to add it
    last = _leading_imports_end(analysis)
    if last is None:
        return None
    return "torch", (InsertAfter(last, "import torch"),)


def _leading_imports_end(analysis: Any) -> Any | None:
    """The last statement of the imports the module opens with (after its docstring), or None."""
    from torchlint.lazy import cst

    last = None
    for index, statement in enumerate(analysis.module.body):
        if type(statement) is not cst.SimpleStatementLine:
            break
        small = statement.body
        if index == 0 and len(small) == 1 and type(small[0]) is cst.Expr and type(small[0].value) in (
                cst.SimpleString, cst.ConcatenatedString):
            continue  # the module docstring
        if not all(type(each) in (cst.Import, cst.ImportFrom) for each in small):
            break
        last = statement
    return last


def import_reference(analysis: Any, module: str, attribute: str, ctx: Any) -> tuple[str, tuple] | None:
    """(code, extra changes) naming ``module.attribute`` (``copy.deepcopy``) at ``ctx``: through an
    import in force there (``from copy import deepcopy``, ``import copy as cp``), or as
    ``module.attribute`` with an ``import module`` added after the module's leading imports when
    nothing in the file binds the name ``module`` (at the top, after the docstring, when the file
    does not open with imports). None when neither is possible."""
    imports = analysis.imports
    for alias, full in sorted(imports.items()):
        if full == f"{module}.{attribute}" and _imported_here(analysis, alias, ctx):
            return alias, ()
    for alias, full in sorted(imports.items()):
        if full == module and _imported_here(analysis, alias, ctx):
            return f"{alias}.{attribute}", ()
    scopes = [analysis.module_scope, *analysis.scopes.values()]
    if module in imports or any(scope.bindings.get(module) for scope in scopes):
        return None  # the name is taken (or imported where this code cannot see it)
    last = _leading_imports_end(analysis)
    if last is not None:
        return f"{module}.{attribute}", (InsertAfter(last, f"import {module}"),)
    first = _first_code_statement(analysis)
    if first is None:
        return None
    return f"{module}.{attribute}", (InsertBefore(first, f"import {module}"),)


def _first_code_statement(analysis: Any) -> Any | None:
    """The module's first statement after its docstring (a line's first simple statement)."""
    from torchlint.lazy import cst

    for index, statement in enumerate(analysis.module.body):
        if type(statement) is cst.SimpleStatementLine:
            small = statement.body
            if index == 0 and len(small) == 1 and type(small[0]) is cst.Expr and type(small[0].value) in (
                    cst.SimpleString, cst.ConcatenatedString):
                continue  # the module docstring
            return small[0]
        return statement
    return None


def _imported_here(analysis: Any, alias: str, ctx: Any) -> bool:
    binding = analysis.lookup(alias, ctx)
    return binding is not None and binding.kind == "import"


# Factories whose values do not depend on where or in which dtype they are made: asking for the
# device or dtype in the call gives the very values the copy had (safe). Others draw random
# numbers from another generator or round differently in the new dtype (unsafe).
SAME_VALUE_FACTORIES = frozenset({
    "zeros", "ones", "empty", "eye", "empty_strided", "zeros_like", "ones_like", "empty_like",
    "tril_indices", "triu_indices",
})
# the same values when only the device changes; a dtype change rounds the given values anew
# (`torch.full((2,), 0.1).double()` holds float32's 0.1, `dtype=torch.float64` the float64 one)
SAME_VALUE_ON_DEVICE = frozenset({"full", "full_like", "tensor"})
OTHER_VALUE_FACTORIES = frozenset({
    "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "arange", "linspace",
    "logspace",
})
DTYPE_METHODS = {"double": "float64", "float": "float32", "half": "float16", "bfloat16": "bfloat16"}
_DTYPES = frozenset({
    "float64", "float32", "float16", "bfloat16", "double", "float", "half", "int64", "int32", "int16", "int8",
    "uint8", "long", "int", "short", "bool", "complex64", "complex128", "cfloat", "cdouble",
})
_DEVICE_WORD_RE = re.compile(r"device|^dev$|gpu|cuda|rank", re.I)
_DEVICE_STRING_RE = re.compile(r"^[rbuRBU]*['\"](?:cuda|cpu|mps|xpu|npu|hpu|meta)[:'\"]")


def _is_dtype(analysis: Any, expr: Any) -> bool:
    """``torch.float64`` (however torch is imported)."""
    qualified = analysis.qualified_name(expr) or ""
    return qualified.startswith("torch.") and qualified[6:] in _DTYPES


def _is_device(analysis: Any, expr: Any) -> bool:
    """``device``, ``self.device``, ``x.device``, ``"cuda:0"``, ``torch.device(...)``: a device
    and nothing else (``.to(other)`` with a tensor also changes the dtype)."""
    from torchlint.analysis import dotted_name, last_part
    from torchlint.lazy import cst

    if type(expr) is cst.SimpleString:
        return bool(_DEVICE_STRING_RE.match(expr.value))
    if type(expr) is cst.Call:
        return (analysis.qualified_name(expr.func) or "") == "torch.device"
    key = dotted_name(expr)
    word = last_part(key) if key is not None else ""
    return bool(_DEVICE_WORD_RE.search(word)) and "dtype" not in word.lower() and not _is_dtype(analysis, expr)


def _move_arguments(analysis: Any, move: Any, torch: str | None) -> dict[str, str] | None:
    """``{"device": code, "dtype": code}`` for a single simple move (``.cuda()``, ``.double()``,
    ``.to(device)``, ``.to(device, torch.float64)``, ``.to(dtype=...)``), None for anything else
    (``.cuda(1)``, ``.to(other_tensor)``, ``non_blocking=``)."""
    from torchlint.lazy import cst

    name = move.func.attr.value
    if name == "cuda":
        return {"device": '"cuda"'} if not move.args else None
    if name in DTYPE_METHODS:
        return {"dtype": f"{torch}.{DTYPE_METHODS[name]}"} if not move.args and torch else None
    if name != "to" or not move.args:
        return None
    found: dict[str, str] = {}
    positional = [arg.value for arg in move.args if arg.keyword is None]
    if any(arg.star for arg in move.args) or len(positional) > 2:
        return None
    for index, value in enumerate(positional):
        if index == 0 and _is_device(analysis, value):
            found["device"] = source_of(analysis, value)
        elif _is_dtype(analysis, value) and "dtype" not in found:
            found["dtype"] = source_of(analysis, value)
        else:
            return None  # a tensor to match, or something unknown
    for arg in move.args:
        if arg.keyword is None:
            continue
        word = arg.keyword.value
        if word not in ("device", "dtype") or word in found:
            return None  # non_blocking, copy, memory_format: not a factory argument
        if word == "dtype" and not _is_dtype(analysis, arg.value):
            return None
        found[word] = source_of(analysis, arg.value)
    return found or None


def factory_made_there(analysis: Any, factory: Any, move: Any) -> tuple[str, bool] | None:
    """(code, safe) of the torch factory call ``factory`` given the device / dtype the single move
    ``move`` (``.cuda()``, ``.to(device)``, ``.double()``) copies its result to, so the tensor is
    made there directly. None when the factory is not a torch one taking ``device=`` / ``dtype=``,
    the move is not that simple, the factory already names another device or dtype, passes
    ``**kwargs``, or spans several lines. Safe when the factory's values cannot depend on where it
    runs (``zeros``, ``eye``; ``full`` and ``torch.tensor`` moved to a device only); unsafe for
    random factories (another generator draws other numbers) and values rounded anew in the new
    dtype."""
    from torchlint.analysis import keyword_argument, last_part

    qualified = analysis.qualified_name(factory.func) or ""
    kind = last_part(qualified)
    if not qualified.startswith("torch.") or qualified.count(".") != 1:
        return None
    if kind not in SAME_VALUE_FACTORIES | SAME_VALUE_ON_DEVICE | OTHER_VALUE_FACTORIES:
        return None
    moved = _move_arguments(analysis, move, torch_name(analysis))
    if moved is None:
        return None
    added = []
    for word, code in moved.items():
        present = keyword_argument(factory, word)
        if present is None:
            added.append((word, code))
        elif source_of(analysis, present) != code:
            return None  # made on one device (or dtype) and moved to another: not ours to merge
    code = with_keywords(analysis, factory, added)
    if code is None:
        return None
    safe = kind in SAME_VALUE_FACTORIES or (kind in SAME_VALUE_ON_DEVICE and "dtype" not in moved)
    return code, safe


def with_keywords(analysis: Any, call: Any, keywords: list[tuple[str, str]]) -> str | None:
    """The source of ``call`` with the keyword arguments ``(name, code)`` added after its own;
    None when there is nothing to add, or the call passes ``*args`` / ``**kwargs`` (which may
    hold the same keyword) or spans several lines (where the new argument would go is a matter
    of layout, not ours to guess)."""
    from torchlint.lazy import cst

    if not keywords or any(arg.star for arg in call.args) or "\n" in source_of(analysis, call):
        return None
    equal = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    args = [*call.args, *(cst.Arg(keyword=cst.Name(word), value=cst.parse_expression(code), equal=equal)
                          for word, code in keywords)]
    return source_of(analysis, call.with_changes(args=args))
