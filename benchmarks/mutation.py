"""Mutation recall harness: inject one known bug into real code and check torchlint reports it.

For every rule there is a mutation operator that finds *sites* in real code where the correct
pattern is written (``losses.append(loss.item())``, ``with torch.no_grad():`` around an
evaluation loop, ``optimizer.zero_grad()`` in a training loop, ...) and produces a *mutant*: a
copy of the file with exactly that site broken (``losses.append(loss)``, the context removed,
the ``zero_grad()`` deleted, ...). Each mutant is linted in memory with torchlint's engine, and
so is the unmodified file; a mutant is *detected* when the mutant has a finding of the expected
rule at the expected place (see ``benchmarks/mutation.md`` for each operator's place) that the
original file does not have at the corresponding line.

Run from the project root with the project's environment:

    python benchmarks/mutation.py                         # $TORCHLINT_CORPUS and /work/corpus/c
    python benchmarks/mutation.py /work/corpus/a /work/corpus/c --json mutants.json
    python benchmarks/mutation.py --rules TL101,TL102 --show-missed TL101
    python benchmarks/mutation.py --max-per-rule 50 --seed 1

Nothing here depends on torchlint internals beyond ``torchlint.engine.lint_source``, the rule
registry and the configuration helpers the CLI uses, so it measures whatever torchlint is
installed.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field

# ----------------------------------------------------------------------------- source helpers

LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


class Source:
    """A file's text with ast positions (1-based lines, UTF-8 byte columns) turned into character
    offsets, and the edit / line-mapping arithmetic every operator needs."""

    def __init__(self, path: str, text: str, tree: ast.Module) -> None:
        self.path = path
        self.text = text
        self.tree = tree
        self.lines = LINE_RE.findall(text)
        self.starts = []
        offset = 0
        for line in self.lines:
            self.starts.append(offset)
            offset += len(line)
        self.starts.append(offset)  # position of a virtual line after the last one

    # positions ------------------------------------------------------------------------------
    def line_text(self, line: int) -> str:
        """Line ``line`` without its line break."""
        if not 1 <= line <= len(self.lines):
            return ""
        return self.lines[line - 1].rstrip("\r\n")

    def pos(self, line: int, col_bytes: int) -> int:
        if line > len(self.lines):
            return len(self.text)
        raw = self.lines[line - 1]
        if raw.isascii():
            return self.starts[line - 1] + col_bytes
        return self.starts[line - 1] + len(raw.encode("utf-8")[:col_bytes].decode("utf-8", "replace"))

    def start(self, node) -> int:
        return self.pos(node.lineno, node.col_offset)

    def end(self, node) -> int:
        return self.pos(node.end_lineno, node.end_col_offset)

    def line_start(self, line: int) -> int:
        return self.starts[min(max(line, 1), len(self.lines) + 1) - 1]

    def line_end(self, line: int) -> int:
        """Position of the line break of ``line`` (end of its content)."""
        return self.line_start(line) + len(self.line_text(line))

    def segment(self, node) -> str:
        return self.text[self.start(node):self.end(node)]

    def line_of(self, pos: int) -> int:
        import bisect

        return bisect.bisect_right(self.starts, pos, 0, len(self.lines)) or 1

    def indent(self, line: int) -> str:
        text = self.line_text(line)
        return text[: len(text) - len(text.lstrip(" \t"))]

    def stmt_alone(self, node) -> bool:
        """The statement occupies its lines alone (no `a; b`, no `if x: stmt`)."""
        first = self.line_text(node.lineno)
        if first[: len(first) - len(first.lstrip(" \t"))].encode("utf-8").__len__() != node.col_offset:
            return False
        rest = self.text[self.end(node):self.line_end(node.end_lineno)].strip()
        return rest == "" or rest.startswith("#")

    # edits ------------------------------------------------------------------------------------
    @staticmethod
    def apply(text: str, edits) -> str:
        for start, end, replacement in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
            text = text[:start] + replacement + text[end:]
        return text

    def mut_line(self, edits, pos: int) -> int:
        """The mutant's line of what sits at original position ``pos`` (text inserted at ``pos``
        by an edit not in ``edits`` included)."""
        line = self.line_of(pos)
        for start, end, replacement in edits:
            if end <= pos:  # before pos, or inserted at pos
                line += replacement.count("\n") - self.text.count("\n", start, end)
            elif start < pos < end:
                return self.line_of(start) + sum(
                    r.count("\n") - self.text.count("\n", s, e) for s, e, r in edits if e <= start)
        return line

    def map_line(self, edits, line: int) -> int:
        """Original line -> mutant line."""
        return self.mut_line(edits, self.line_start(line))


# ----------------------------------------------------------------------------- ast helpers

LOOPS = (ast.For, ast.AsyncFor, ast.While)
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def annotate_parents(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            child._parent = node  # type: ignore[attr-defined]


def ancestors(node):
    node = getattr(node, "_parent", None)
    while node is not None:
        yield node
        node = getattr(node, "_parent", None)


def enclosing_loops(node) -> list:
    """Loops around ``node`` inside its own function, innermost first (a node in a loop's
    ``iter``/``orelse`` is not counted as in that loop's body)."""
    loops = []
    child = node
    for parent in ancestors(node):
        if isinstance(parent, SCOPES):
            break
        if isinstance(parent, LOOPS) and child in parent.body:
            loops.append(parent)
        child = parent
    return loops


def runs_once(loop) -> bool:
    """A loop whose body ends every iteration with ``break`` / ``return`` / ``raise`` runs its body
    at most once: nothing accumulates across its iterations, so it is no site."""
    return any(isinstance(stmt, (ast.Break, ast.Return, ast.Raise)) for stmt in loop.body)


def enclosing_function(node):
    for parent in ancestors(node):
        if isinstance(parent, FUNCTIONS):
            return parent
        if isinstance(parent, (ast.ClassDef, ast.Lambda)):
            return None
    return None


def walk_scope(node):
    """``node`` and its descendants, not entering nested functions, lambdas or classes."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        for child in ast.iter_child_nodes(current):
            if not isinstance(child, SCOPES):
                stack.append(child)


def dotted(node) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def call_name(call) -> str:
    """Last part of a call's callee: ``loss.backward()`` -> ``backward``."""
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def receiver_text(call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return dotted(func.value) or ""
    return ""


GRAD_OFF_NAMES = {"no_grad", "inference_mode"}


def is_grad_off(expr) -> bool:
    """``torch.no_grad()``, ``torch.inference_mode()``, ``torch.set_grad_enabled(False)``
    (also without the call, as a decorator)."""
    if isinstance(expr, ast.Call):
        name = call_name(expr)
        if name in GRAD_OFF_NAMES:
            if name == "inference_mode" and expr.args and isinstance(expr.args[0], ast.Constant) \
                    and expr.args[0].value is False:
                return False
            return not expr.keywords or name == "inference_mode"
        if name == "set_grad_enabled":
            return bool(expr.args) and isinstance(expr.args[0], ast.Constant) and expr.args[0].value is False
        return False
    name = dotted(expr) or ""
    return name.rsplit(".", 1)[-1] in GRAD_OFF_NAMES


def under_grad_off(node) -> bool:
    for parent in ancestors(node):
        if isinstance(parent, (ast.With, ast.AsyncWith)) and any(is_grad_off(i.context_expr) for i in parent.items):
            return True
        if isinstance(parent, FUNCTIONS) and any(is_grad_off(d) for d in parent.decorator_list):
            return True
        if isinstance(parent, ast.ClassDef):
            return False
    return False


def is_backward_call(node) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
        and node.func.attr in ("backward", "manual_backward")


OPTIMIZER_RE = re.compile(r"(^|_)(opt|optim|optimizer|optimiser|optimizers|scaler)(_|\d|s?$)|optim", re.I)


def is_step_call(node) -> bool:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "step"):
        return False
    receiver = dotted(node.func.value) or ""
    last = receiver.rsplit(".", 1)[-1]
    return bool(OPTIMIZER_RE.search(last))


def is_zero_grad_stmt(stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and call_name(stmt.value) == "zero_grad"


def clears_grads(node) -> bool:
    """Any other way of clearing gradients: a ``zero_grad`` call, ``p.grad = None``, ``.grad.zero_()``."""
    if isinstance(node, ast.Call) and "zero_grad" in call_name(node):
        return True
    if isinstance(node, ast.Call) and call_name(node) in ("zero_", "detach_") and isinstance(node.func, ast.Attribute) \
            and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "grad":
        return True
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Attribute) and t.attr == "grad" for t in node.targets)
    return False


# Names that say "this is a loss or a model output" (the operand of a removed .item()/.detach()).
LOSS_RE = re.compile(
    r"loss|logit|^outs?$|^outs?_|_outs?$|output|^preds?$|^preds?_|pred$|prediction|y_?hat|recon|elbo|nll|"
    r"(^|_)kl($|_)|energy|log_?probs?|logp|entropy|^mse", re.I)
NOT_LOSS_RE = re.compile(r"acc|correct|count|num_|^n_|len|size|shape|time|lr$|step|epoch|idx|index", re.I)
DETACHING_METHODS = {"item", "detach", "numpy", "tolist", "detach_"}


def identifiers(expr) -> list[str]:
    names = []
    for node in ast.walk(expr):
        if isinstance(node, ast.Name):
            names.append(node.id)
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
    return names


def root_name(expr) -> str:
    while True:
        if isinstance(expr, ast.Attribute):
            expr = expr.value
        elif isinstance(expr, ast.Call):
            expr = expr.func
        elif isinstance(expr, ast.Subscript):
            expr = expr.value
        elif isinstance(expr, ast.BinOp):
            expr = expr.left
        elif isinstance(expr, ast.UnaryOp):
            expr = expr.operand
        else:
            return expr.id if isinstance(expr, ast.Name) else ""


def looks_like_loss(expr) -> bool:
    """The operand names a loss or a model output (and is no comparison, count or metric)."""
    if any(isinstance(node, (ast.Compare, ast.BoolOp, ast.Lambda, ast.JoinedStr)) for node in ast.walk(expr)):
        return False
    names = identifiers(expr)
    if any(name in ("argmax", "argmin", "eq", "ne", "len", "numel", "data", "grad", "no_grad") for name in names):
        return False
    root = root_name(expr)
    if NOT_LOSS_RE.search(root) and not LOSS_RE.search(root):
        return False
    return any(LOSS_RE.search(n) for n in names)


def detaching_nodes(expr) -> list:
    """Calls and attributes in ``expr`` that take a value off the graph."""
    found = []
    for node in ast.walk(expr):
        if isinstance(node, ast.Call):
            name = call_name(node)
            if isinstance(node.func, ast.Attribute) and name in DETACHING_METHODS:
                found.append(node)
            elif isinstance(node.func, ast.Name) and name in ("float", "int", "bool", "list"):
                found.append(node)
        elif isinstance(node, ast.Attribute) and node.attr == "data":
            found.append(node)
    return found


def removal(src: Source, node):
    """(edits, receiver) removing one detaching call: ``E.item()`` -> ``E``, ``E.detach()`` -> ``E``,
    ``float(E)`` -> ``E`` (parenthesised when needed), or None."""
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Attribute) and node.func.attr in ("item", "detach"):
        if node.args or node.keywords:
            return None
        inner = node.func.value
        return [(src.end(inner), src.end(node), "")], inner
    if isinstance(node.func, ast.Name) and node.func.id == "float":
        if len(node.args) != 1 or node.keywords:
            return None
        inner = node.args[0]
        simple = isinstance(inner, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))
        return [(src.start(node), src.start(inner), "" if simple else "("),
                (src.end(inner), src.end(node), "" if simple else ")")], inner
    return None


def module_imports(tree, module: str) -> bool:
    for stmt in tree.body:
        if isinstance(stmt, ast.Import) and any(a.name == module and a.asname is None for a in stmt.names):
            return True
    return False


def top_insertion(src: Source, statement: str):
    """Edit inserting ``statement`` as a module-level line after the docstring and any
    ``from __future__`` imports."""
    body = src.tree.body
    index = 0
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        index = 1
    while index < len(body) and isinstance(body[index], ast.ImportFrom) and body[index].module == "__future__":
        index += 1
    if index < len(body):
        stmt = body[index]
        first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
        pos = src.line_start(first)
    elif body:
        pos = src.line_start(body[-1].end_lineno + 1)
        if pos == len(src.text) and src.text and not src.text.endswith("\n"):
            return (pos, pos, "\n" + statement + "\n")
    else:
        pos = 0
    return (pos, pos, statement + "\n")


def span_lines(node) -> list[int]:
    return list(range(node.lineno, node.end_lineno + 1))


# ----------------------------------------------------------------------------- sites

@dataclass
class Site:
    rule: str
    operator: str
    path: str
    line: int  # original line of the site
    description: str
    edits: list  # (start, end, replacement) on the original text
    accept: list  # mutant lines where the finding may be (each ±1 unless exact)
    scope: list = field(default_factory=list)  # mutant lines where an original finding masks the mutant
    tolerance: int = 1


def site(src: Source, rule, operator, node_line, description, edits, accept, scope=None, tolerance=1) -> Site:
    accept = sorted(set(accept))
    return Site(rule, operator, src.path, node_line, description, edits, accept,
                sorted(set(scope)) if scope else accept, tolerance)


def short(text: str, limit: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# TL101 ------------------------------------------------------------------------------------------

def sites_tl101(src: Source):
    for node in ast.walk(src.tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append"
                and len(node.args) == 1 and not node.keywords):
            continue
        stmt = getattr(node, "_parent", None)
        if not isinstance(stmt, ast.Expr):
            continue
        loops = enclosing_loops(stmt)
        if not loops or runs_once(loops[0]) or under_grad_off(stmt):
            continue
        container = dotted(node.func.value)
        if container is not None and _rebound_in(loops[0], container):
            continue  # a fresh container per iteration
        arg = node.args[0]
        if any(isinstance(n, (ast.Compare, ast.BoolOp)) for n in ast.walk(arg)) or "requires_grad" in identifiers(arg):
            continue  # a comparison is no graph; `.detach().requires_grad_()` is a deliberate cut
        dropped = drop_detaching(src, arg)
        if dropped is None:
            continue
        edits, what = dropped
        yield site(src, "TL101", "append-drop-" + what.strip(".()"), stmt.lineno,
                   f"removed {what} from `{short(src.segment(stmt))}`", edits, [stmt.lineno])


def drop_detaching(src, expr):
    """(edits, "what") that remove the one detaching call in ``expr`` (``.item()``,
    ``.detach()``, ``float()``) when what it detaches is named like a loss or an output; None
    when there is not exactly one, or it is something else."""
    detaching = detaching_nodes(expr)
    if len(detaching) != 1:
        return None
    removed = removal(src, detaching[0])
    if removed is None or not looks_like_loss(removed[1]):
        return None
    func = detaching[0].func
    return removed[0], "float()" if isinstance(func, ast.Name) else f".{func.attr}()"


def _rebound_in(loop, name: str) -> bool:
    """``name = ...`` (a fresh container) inside the loop's body."""
    for stmt in loop.body:
        for node in walk_scope(stmt):
            if isinstance(node, ast.Assign) and any(dotted(t) == name for t in node.targets):
                return True
            if isinstance(node, (ast.AnnAssign,)) and dotted(node.target) == name:
                return True
    return False


# TL102 ------------------------------------------------------------------------------------------

def sites_tl102(src: Source):
    for node in ast.walk(src.tree):
        if isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Add, ast.Sub)):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.BinOp) \
                and isinstance(node.value.op, ast.Add) and ast.dump(node.value.left) == ast.dump(node.targets[0]):
            target, value = node.targets[0], node.value.right
        else:
            continue
        if not isinstance(target, (ast.Name, ast.Attribute, ast.Subscript)):
            continue
        loops = enclosing_loops(node)
        if not loops or runs_once(loops[0]) or under_grad_off(node):
            continue
        if isinstance(target, ast.Name) and _assigned_fresh_in(loops[0], target.id, node):
            continue
        if any(isinstance(n, (ast.Compare, ast.BoolOp)) for n in ast.walk(value)):
            continue
        dropped = drop_detaching(src, value)
        if dropped is None:
            continue
        edits, what = dropped
        yield site(src, "TL102", "accumulate-drop-" + what.strip(".()"), node.lineno,
                   f"removed {what} from `{short(src.segment(node))}`", edits, [node.lineno])


def _assigned_fresh_in(loop, name: str, besides) -> bool:
    for stmt in loop.body:
        for node in walk_scope(stmt):
            if node is besides:
                continue
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                value = node.value
                if not (isinstance(value, ast.BinOp) and isinstance(value.left, ast.Name) and value.left.id == name):
                    return True
    return False


# TL103 ------------------------------------------------------------------------------------------

DETACH_HELPER_RE = re.compile(r"detach|repackage", re.I)


def _is_detach_value(value, names: set[str]) -> bool:
    """``h.detach()``, ``h.data``, ``tuple(v.detach() for v in h)``, ``repackage_hidden(h)``,
    ``(h.detach(), c.detach())``, where the operands are ``names``."""
    if isinstance(value, ast.Call):
        name = call_name(value)
        if isinstance(value.func, ast.Attribute) and name in ("detach", "detach_"):
            return dotted(value.func.value) in names
        if DETACH_HELPER_RE.search(name):
            return any(dotted(a) in names or (isinstance(a, (ast.Tuple, ast.List)) and
                       all(dotted(e) in names for e in a.elts)) for a in value.args) \
                or (not value.args and name != "detach")
        if name in ("tuple", "list") and len(value.args) == 1 and isinstance(value.args[0], (ast.GeneratorExp, ast.ListComp)):
            gen = value.args[0]
            return any(isinstance(n, ast.Call) and call_name(n) == "detach" for n in ast.walk(gen.elt)) \
                and dotted(gen.generators[0].iter) in names
        return False
    if isinstance(value, (ast.ListComp, ast.GeneratorExp)):
        return any(isinstance(n, ast.Call) and call_name(n) == "detach" for n in ast.walk(value.elt)) \
            and dotted(value.generators[0].iter) in names
    if isinstance(value, (ast.Tuple, ast.List)):
        return bool(value.elts) and all(_is_detach_value(e, names) for e in value.elts)
    if isinstance(value, ast.Attribute) and value.attr == "data":
        return dotted(value.value) in names
    return False


def _target_names(target) -> set[str]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return {n for e in target.elts for n in _target_names(e)}
    name = dotted(target)
    return {name} if name else set()


def sites_tl103(src: Source):
    for stmt in ast.walk(src.tree):
        if isinstance(stmt, ast.Assign):
            names = {n for t in stmt.targets for n in _target_names(t)}
            if not names or not _is_detach_value(stmt.value, names):
                continue
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            name = call_name(call)
            if isinstance(call.func, ast.Attribute) and name == "detach_":
                names = {dotted(call.func.value)} - {None}
            elif DETACH_HELPER_RE.search(name) and name not in ("detach", "detach_"):
                names = {dotted(a) for a in call.args} - {None}
                if not names and isinstance(call.func, ast.Attribute):
                    names = {"self." + "*"}  # a module's own state helper (model.detach_hidden())
            else:
                continue
            if not names:
                continue
        else:
            continue
        loops = enclosing_loops(stmt)
        if not loops or runs_once(loops[0]) or under_grad_off(stmt) or not src.stmt_alone(stmt):
            continue
        loop = loops[0]
        body_nodes = [n for s in loop.body for n in walk_scope(s)]
        if not any(is_backward_call(n) for n in body_nodes):
            continue
        # The state is carried: re-bound in the loop from a call that reads it
        # (`out, h = rnn(x, h)`), or kept by the module a state helper resets.
        fed = "self.*" in names
        for node in body_nodes:
            if isinstance(node, ast.Assign) and node is not stmt and isinstance(node.value, ast.Call) \
                    and {n for t in node.targets for n in _target_names(t)} & names:
                call = node.value
                args = list(call.args) + [k.value for k in call.keywords]
                if any(dotted(sub) in names for arg in args for sub in ast.walk(arg)):
                    fed = True
        if not fed:
            continue
        edits = [(src.start(stmt), src.end(stmt), "pass" + "\n" * (stmt.end_lineno - stmt.lineno))]
        lines = span_lines(loop)
        yield site(src, "TL103", "delete-detach", stmt.lineno,
                   f"deleted `{short(src.segment(stmt))}`", edits, lines, tolerance=0)


# TL201 / TL301: removing a grad-disabling context ------------------------------------------------

WITH_HEADER_RE = re.compile(r"^\s*(async\s+)?with\s.*:\s*(#.*)?$")


def remove_with(src: Source, node):
    """Edits removing the grad-disabling item of a ``with`` (dedenting the body when it was the
    only item); None when the shape is not handled. Line numbers do not change."""
    items = node.items
    index = next((i for i, item in enumerate(items) if is_grad_off(item.context_expr)), None)
    if index is None or items[index].optional_vars is not None:
        return None
    if len(items) > 1:
        item = items[index]
        if index + 1 < len(items):
            return [(src.start(item.context_expr), src.start(items[index + 1].context_expr), "")]
        return [(src.end(items[index - 1].optional_vars or items[index - 1].context_expr), src.end(item.context_expr), "")]
    if node.body[0].lineno <= node.lineno or items[0].context_expr.end_lineno != node.lineno:
        return None
    if not WITH_HEADER_RE.match(src.line_text(node.lineno)):
        return None
    outer = src.indent(node.lineno)
    inner = src.indent(node.body[0].lineno)
    if not inner.startswith(outer) or len(inner) <= len(outer):
        return None
    edits = [(src.line_start(node.lineno), src.line_end(node.lineno), "")]
    for line in range(node.body[0].lineno, node.end_lineno + 1):
        if src.line_text(line).startswith(inner):
            start = src.line_start(line)
            edits.append((start, start + len(inner), outer))
    return edits


def remove_decorator(src: Source, function):
    for decorator in function.decorator_list:
        if is_grad_off(decorator):
            text = src.line_text(decorator.lineno).strip()
            if decorator.lineno != decorator.end_lineno or not text.startswith("@"):
                return None
            if src.text[src.end(decorator):src.line_end(decorator.lineno)].strip() not in ("",) and \
                    not src.text[src.end(decorator):src.line_end(decorator.lineno)].strip().startswith("#"):
                return None
            return [(src.line_start(decorator.lineno), src.line_end(decorator.lineno), "")]
    return None


EVAL_WORDS = {"evaluate", "validate", "validation", "test", "predict", "infer", "inference"}
NOT_A_FORWARD = {
    "range", "len", "enumerate", "zip", "print", "append", "extend", "item", "to", "cpu", "cuda", "numpy",
    "tolist", "size", "update", "format", "isinstance", "list", "dict", "tuple", "set", "str", "int", "float",
    "sum", "max", "min", "abs", "sorted", "detach", "view", "reshape", "squeeze", "unsqueeze", "cat", "stack",
    "argmax", "eq", "mean", "keys", "values", "items", "get", "join", "next", "iter", "getattr", "setattr",
    "hasattr", "type", "round", "log", "info", "debug", "warning", "write", "add_scalar", "set_postfix", "tqdm",
    "zeros", "ones", "empty", "arange", "tensor", "zeros_like", "ones_like", "clone", "float", "long", "sort",
    "topk", "nonzero", "numel", "any", "all", "split", "chunk", "permute", "transpose", "contiguous", "expand",
    "repeat", "flatten", "fill_", "copy_", "pop", "insert", "add", "assert_close", "allclose", "isclose",
}


def function_words(name: str) -> set[str]:
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower().split("_")
    return {w for w in words if w}


def eval_scope(function, before_line: int | None) -> bool:
    """Evaluation code as TL201 documents it: after a ``.eval()`` (with no ``.train()`` in between)
    or in a function named like evaluation."""
    switches = []
    for node in walk_scope(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("eval", "train") \
                and (before_line is None or node.lineno < before_line):
            if node.func.attr == "train" and node.args and isinstance(node.args[0], ast.Constant) \
                    and node.args[0].value is False:
                switches.append((node.lineno, "eval"))
            elif node.func.attr == "eval" and not node.args:
                switches.append((node.lineno, "eval"))
            elif node.func.attr == "train":
                switches.append((node.lineno, "train"))
    switches.sort()
    if before_line is None:
        if any(kind == "eval" for _, kind in switches):
            return True
    elif switches and switches[-1][1] == "eval":
        return True
    return bool(function_words(function.name) & EVAL_WORDS) and not any(kind == "train" for _, kind in switches)


def forward_loop(body) -> ast.AST | None:
    """A loop in ``body`` that calls something that may be a forward pass."""
    for stmt in body:
        for node in walk_scope(stmt):
            if isinstance(node, LOOPS) or isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.DictComp)):
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Call) and call_name(sub) not in NOT_A_FORWARD and call_name(sub):
                        return node
    return None


def sites_tl201(src: Source):
    for node in ast.walk(src.tree):
        if isinstance(node, ast.With) and any(is_grad_off(i.context_expr) for i in node.items):
            function = enclosing_function(node)
            if function is None or under_grad_off(node) or not eval_scope(function, node.lineno):
                continue
            if forward_loop(node.body) is None:
                continue
            edits = remove_with(src, node)
            if not edits:
                continue
            lines = list(range(node.body[0].lineno, node.end_lineno + 1))
            yield site(src, "TL201", "remove-no-grad-with", node.lineno,
                       f"removed `{short(src.line_text(node.lineno).strip())}`", edits, lines,
                       span_lines(function), tolerance=0)
        elif isinstance(node, FUNCTIONS) and any(is_grad_off(d) for d in node.decorator_list):
            if under_grad_off(node):
                continue
            loop = forward_loop(node.body)
            if loop is None or not eval_scope(node, loop.lineno):
                continue
            edits = remove_decorator(src, node)
            if not edits:
                continue
            lines = list(range(node.lineno, node.end_lineno + 1))
            yield site(src, "TL201", "remove-no-grad-decorator", node.lineno,
                       f"removed the no-grad decorator of `{node.name}`", edits, lines, tolerance=0)


INPLACE_METHODS = {
    "add_", "sub_", "mul_", "div_", "copy_", "clamp_", "zero_", "fill_", "normal_", "uniform_", "addcmul_",
    "addcdiv_", "lerp_", "mul_", "clamp_min_", "clamp_max_", "neg_", "set_", "renorm_", "data_",
}
PARAM_ITER_RE = re.compile(r"parameters\(|params|param_groups|\.weight|\.bias", re.I)


def parameter_names(src: Source) -> set[str]:
    """Targets assigned an ``nn.Parameter(...)`` or a tensor created with ``requires_grad=True``."""
    cached = getattr(src, "_parameter_names", None)
    if cached is not None:
        return cached
    names = set()
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            call = node.value
            if call_name(call) == "Parameter" or any(
                    k.arg == "requires_grad" and isinstance(k.value, ast.Constant) and k.value.value is True
                    for k in call.keywords):
                for target in node.targets:
                    if dotted(target):
                        names.add(dotted(target))
    src._parameter_names = names  # type: ignore[attr-defined]
    return names


def _param_like(src: Source, target, within) -> bool:
    name = dotted(target)
    if name is None or any(part in ("data", "grad") for part in name.split(".")):
        return False
    if name in parameter_names(src):
        return True
    if not isinstance(target, ast.Name):
        return False
    for parent in ancestors(target):
        if isinstance(parent, (ast.For, ast.AsyncFor)) and name in _target_names(parent.target):
            return bool(PARAM_ITER_RE.search(src.segment(parent.iter)))
        if isinstance(parent, SCOPES):
            break
    return False


def inplace_param_updates(src: Source, body, within) -> list:
    found = []
    for stmt in body:
        for node in walk_scope(stmt):
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute) \
                    and node.value.func.attr in INPLACE_METHODS:
                if _param_like(src, node.value.func.value, within):
                    found.append(node)
            elif isinstance(node, ast.AugAssign) and _param_like(src, node.target, within):
                found.append(node)
    return found


def sites_tl301(src: Source):
    for node in ast.walk(src.tree):
        if isinstance(node, ast.With) and any(is_grad_off(i.context_expr) for i in node.items):
            if under_grad_off(node):
                continue
            updates = inplace_param_updates(src, node.body, node)
            if not updates:
                continue
            edits = remove_with(src, node)
            operator = "remove-no-grad-with"
        elif isinstance(node, FUNCTIONS) and any(is_grad_off(d) for d in node.decorator_list):
            if under_grad_off(node):
                continue
            updates = inplace_param_updates(src, node.body, node)
            if not updates:
                continue
            edits = remove_decorator(src, node)
            operator = "remove-no-grad-decorator"
        else:
            continue
        if not edits:
            continue
        first = updates[0]
        yield site(src, "TL301", operator, first.lineno,
                   f"removed no-grad around `{short(src.segment(first))}`"
                   + (f" (+{len(updates) - 1} more updates)" if len(updates) > 1 else ""),
                   edits, [u.lineno for u in updates])


# TL401 / TL402: a call inserted at the top of a training loop ------------------------------------

def training_loops(src: Source):
    """Innermost loops (in their function) whose body calls ``backward`` or ``optimizer.step``."""
    seen = set()
    for node in ast.walk(src.tree):
        if is_backward_call(node) or is_step_call(node):
            loops = enclosing_loops(node)
            if loops and id(loops[0]) not in seen and not runs_once(loops[0]):
                seen.add(id(loops[0]))
                yield loops[0]


def _insert_at_loop_top(src: Source, loop, statement: str, module: str, rule: str, operator: str):
    first = loop.body[0]
    if first.lineno <= loop.lineno or not src.stmt_alone(first):
        return None
    if isinstance(first, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and first.decorator_list:
        return None
    edits = []
    if not module_imports(src.tree, module):
        edits.append(top_insertion(src, f"import {module}"))
    pos = src.line_start(first.lineno)
    line = src.mut_line(edits, pos)
    edits.append((pos, pos, src.indent(first.lineno) + statement + "\n"))
    header = src.map_line(edits, loop.lineno)
    return site(src, rule, operator, loop.lineno,
                f"inserted `{statement}` at the top of the loop `{short(src.line_text(loop.lineno).strip(), 50)}`",
                edits, [line], tolerance=0 if header == line - 1 else 1)


def sites_tl401(src: Source):
    for loop in training_loops(src):
        found = _insert_at_loop_top(src, loop, "torch.cuda.empty_cache()", "torch", "TL401", "insert-empty-cache")
        if found:
            yield found


def sites_tl402(src: Source):
    for loop in training_loops(src):
        found = _insert_at_loop_top(src, loop, "gc.collect()", "gc", "TL402", "insert-gc-collect")
        if found:
            yield found


# TL501 / TL502 ----------------------------------------------------------------------------------

def _loop_calls(loop):
    nodes = [n for s in loop.body for n in walk_scope(s)]
    return nodes


def sites_tl501(src: Source):
    for stmt in ast.walk(src.tree):
        if not is_zero_grad_stmt(stmt):
            continue
        loops = enclosing_loops(stmt)
        if not loops or runs_once(loops[0]) or not src.stmt_alone(stmt):
            continue
        loop = loops[0]
        nodes = _loop_calls(loop)
        backward = [n for n in nodes if is_backward_call(n)]
        steps = [n for n in nodes if is_step_call(n)]
        if not backward or not steps:
            continue
        if any(clears_grads(n) for n in nodes if n is not stmt.value):
            continue  # another clearing stays: deleting this one is no bug
        edits = [(src.start(stmt), src.end(stmt), "pass" + "\n" * (stmt.end_lineno - stmt.lineno))]
        accept = [loop.lineno] + [n.lineno for n in backward + steps]
        yield site(src, "TL501", "delete-zero-grad", stmt.lineno, f"deleted `{short(src.segment(stmt))}`", edits, accept)


def _contains(stmt, predicate) -> bool:
    return any(predicate(n) for n in walk_scope(stmt))


def _steps(step, zero_grad) -> bool:
    """Does ``step`` step what ``zero_grad`` clears? Any step when a model's gradients are
    cleared; the same optimizer (``opt.step()``, ``scaler.step(opt)``) when an optimizer's are."""
    cleared = receiver_text(zero_grad)
    if not OPTIMIZER_RE.search(cleared.rsplit(".", 1)[-1]):
        return True
    return receiver_text(step) == cleared or any(dotted(a) == cleared for a in step.args)


def sites_tl502(src: Source):
    for node in ast.walk(src.tree):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if not isinstance(block, list) or not block or not isinstance(block[0], ast.stmt):
                continue
            for i, stmt in enumerate(block):
                if not is_zero_grad_stmt(stmt) or not enclosing_loops(stmt) or not src.stmt_alone(stmt):
                    continue
                backward = next((j for j in range(i + 1, len(block))
                                 if isinstance(block[j], ast.Expr) and _contains(block[j], is_backward_call)), None)
                if backward is None or any(_contains(block[j], clears_grads) for j in range(i + 1, backward + 1)):
                    continue
                step = next((j for j in range(backward + 1, len(block))
                             if _contains(block[j], lambda n: is_step_call(n) and _steps(n, stmt.value))), None)
                if step is None or not src.stmt_alone(block[backward]):
                    continue
                back = block[backward]
                cut = (src.line_start(stmt.lineno), src.line_start(stmt.end_lineno + 1))
                moved = src.text[cut[0]:cut[1]]
                if not moved.endswith("\n"):
                    continue
                delete = (cut[0], cut[1], "")
                pos = src.line_start(back.end_lineno + 1)
                line = src.mut_line([delete], pos)
                yield site(src, "TL502", "move-zero-grad-after-backward", stmt.lineno,
                           f"moved `{short(src.segment(stmt))}` to after `{short(src.segment(back), 40)}`",
                           [delete, (pos, pos, moved)], [line])


# TL302 ------------------------------------------------------------------------------------------

OUTPUT_SAVING = {"sigmoid", "tanh", "exp", "softmax", "log_softmax", "relu", "sqrt", "rsqrt", "reciprocal"}
OUTPUT_SAVING_PREFIXES = {"torch", "F", "torch.nn.functional", "nn.functional", "functional"}


def _saving_op(value, name: str) -> bool:
    if not isinstance(value, ast.Call) or any(k.arg == "inplace" for k in value.keywords):
        return False
    op = call_name(value)
    if op not in OUTPUT_SAVING or not isinstance(value.func, ast.Attribute):
        return False
    receiver = dotted(value.func.value)
    if receiver in OUTPUT_SAVING_PREFIXES:
        return bool(value.args)
    return receiver is not None and receiver != "self"  # x.sigmoid()


def _attached_input(call, function, stmt) -> bool:
    """The op's input is computed in the function (a call, or a name bound before from a call),
    not a bare parameter of the function, which TL302 documents as out of its sight."""
    operand = call.args[0] if call.args and dotted(call.func.value) in OUTPUT_SAVING_PREFIXES else call.func.value
    if any(isinstance(n, ast.Call) for n in ast.walk(operand)):
        return True
    name = dotted(operand)
    if name is None:
        return False
    for node in walk_scope(function):
        if isinstance(node, ast.Assign) and node.lineno < stmt.lineno and isinstance(node.value, (ast.Call, ast.BinOp)) \
                and any(dotted(t) == name for t in node.targets):
            return True
    return False


def sites_tl302(src: Source):
    for function in ast.walk(src.tree):
        if not isinstance(function, FUNCTIONS) or function.name not in ("forward", "training_step"):
            continue
        for node in walk_scope(function):
            for block_name in ("body", "orelse"):
                block = getattr(node, block_name, None)
                if not isinstance(block, list) or not block or not isinstance(block[0], ast.stmt):
                    continue
                for i, stmt in enumerate(block):
                    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                            and isinstance(stmt.targets[0], ast.Name) and _saving_op(stmt.value, stmt.targets[0].id)):
                        continue
                    name = stmt.targets[0].id
                    if not _attached_input(stmt.value, function, stmt):
                        continue
                    for later in block[i + 1:]:
                        if (isinstance(later, ast.Assign) and len(later.targets) == 1
                                and isinstance(later.targets[0], ast.Name) and later.targets[0].id == name
                                and isinstance(later.value, ast.BinOp)
                                and isinstance(later.value.op, (ast.Add, ast.Sub, ast.Mult, ast.Div))
                                and isinstance(later.value.left, ast.Name) and later.value.left.id == name
                                and name not in {n.id for n in ast.walk(later.value.right) if isinstance(n, ast.Name)}
                                and src.stmt_alone(later)):
                            returned = any(isinstance(r, ast.Return) and r.value is not None
                                           and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(r.value))
                                           for r in walk_scope(function))
                            if not returned:
                                break
                            op = {ast.Add: "+=", ast.Sub: "-=", ast.Mult: "*=", ast.Div: "/="}[type(later.value.op)]
                            right = src.segment(later.value.right)
                            edits = [(src.start(later), src.end(later), f"{name} {op} {right}")]
                            yield site(src, "TL302", "rebind-to-augassign", later.lineno,
                                       f"`{short(src.segment(later))}` -> `{name} {op} ...` after "
                                       f"`{short(src.segment(stmt), 40)}`", edits, [later.lineno])
                            break
                        if any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
                               for n in ast.walk(later)):
                            break


# torch.nn layers whose weight requires grad: they save their input for the weight's gradient.
INPUT_SAVING_LAYERS = {
    "Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
    "LayerNorm", "GroupNorm", "RMSNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
}
NN_PREFIXES = {"nn", "torch.nn"}


def _input_saving_attributes(cls) -> tuple[set[str], set[str]]:
    """``self.x`` attributes a class's ``__init__`` binds to a ``torch.nn`` layer with weights
    (not ``affine=False`` / ``elementwise_affine=False``), and to ``nn.Parameter(...)``."""
    layers, parameters = set(), set()
    for method in cls.body:
        if not (isinstance(method, FUNCTIONS) and method.name == "__init__"):
            continue
        for node in walk_scope(method):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call)):
                continue
            target = dotted(node.targets[0])
            func = dotted(node.value.func) or ""
            prefix, _, name = func.rpartition(".")
            if not (target and target.startswith("self.") and target.count(".") == 1 and prefix in NN_PREFIXES):
                continue
            if name == "Parameter":
                parameters.add(target)
            elif name in INPUT_SAVING_LAYERS and not any(
                    k.arg in ("affine", "elementwise_affine") for k in node.value.keywords):
                layers.add(target)
    return layers, parameters


def _saves_input(expr, name: str, layers: set[str], parameters: set[str]) -> bool:
    """Does ``expr`` run an op that saves the tensor ``name`` holds: ``self.norm(name)`` for a
    layer with weights, ``name * self.gamma`` / ``name @ self.w`` for a parameter?"""
    for node in ast.walk(expr):
        if isinstance(node, ast.Call) and dotted(node.func) in layers and any(
                isinstance(arg, ast.Name) and arg.id == name for arg in node.args):
            return True
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.MatMult)):
            sides = [dotted(node.left), dotted(node.right)]
            if name in sides and any(side in parameters for side in sides):
                return True
    return False


def sites_tl302_inputs(src: Source):
    """In a module's ``forward``: ``x = x + e`` where ``e`` runs an op that saves ``x`` as an
    input (a ``torch.nn`` layer with weights bound in ``__init__`` called on ``x``, or ``x``
    times an ``nn.Parameter``), and ``x`` is returned. Mutant: ``x += e``, which changes the
    saved ``x`` in place before backward (measured: backward raises)."""
    for cls in ast.walk(src.tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        layers, parameters = _input_saving_attributes(cls)
        if not layers and not parameters:
            continue
        for function in cls.body:
            if not (isinstance(function, FUNCTIONS) and function.name == "forward"):
                continue
            for later in walk_scope(function):
                if not (isinstance(later, ast.Assign) and len(later.targets) == 1
                        and isinstance(later.targets[0], ast.Name) and isinstance(later.value, ast.BinOp)
                        and isinstance(later.value.op, ast.Add) and src.stmt_alone(later)):
                    continue
                name = later.targets[0].id
                left, right = later.value.left, later.value.right
                if not (isinstance(left, ast.Name) and left.id == name) or not _saves_input(right, name, layers, parameters):
                    continue
                if not any(isinstance(r, ast.Return) and r.value is not None
                           and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(r.value))
                           for r in walk_scope(function)):
                    continue
                edits = [(src.start(later), src.end(later), f"{name} += {src.segment(right)}")]
                yield site(src, "TL302", "saved-input-to-augassign", later.lineno,
                           f"`{short(src.segment(later))}` -> `{name} += ...`", edits, [later.lineno])


def sites_tl302_all(src: Source):
    yield from sites_tl302(src)
    yield from sites_tl302_inputs(src)


# TL202 / TL204 / TL305 (second wave) ---------------------------------------------------------------------

def _mode_call(stmt, mode: str) -> str | None:
    """The receiver of ``X.train()`` / ``X.train(True)`` (mode "train") or ``X.eval()`` (mode
    "eval") when the statement is that call alone."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr == mode):
        return None
    args = stmt.value.args
    if mode == "eval" and args:
        return None
    if mode == "train" and args and not (isinstance(args[0], ast.Constant) and args[0].value is True):
        return None
    return dotted(stmt.value.func.value)


def sites_tl202(src: Source):
    """Delete the only ``model.train()`` of a loop that steps an optimizer and also calls
    ``model.eval()`` itself: the mode is then never restored after the first validation."""
    for loop in ast.walk(src.tree):
        if not isinstance(loop, LOOPS) or runs_once(loop):
            continue
        nodes = [n for s in loop.body for n in walk_scope(s)]
        if not any(is_step_call(n) for n in nodes):
            continue
        statements = [n for n in nodes if isinstance(n, ast.stmt)]
        for stmt in statements:
            model = _mode_call(stmt, "train")
            if model is None or not src.stmt_alone(stmt):
                continue
            evals = [e for e in statements if _mode_call(e, "eval") == model]
            others = [n for n in nodes if isinstance(n, ast.Call) and call_name(n) == "train"
                      and receiver_text(n) == model and n is not stmt.value]
            if not evals or others:
                continue  # no validation in this loop, or another .train() still restores
            edits = [(src.start(stmt), src.end(stmt), "pass" + "\n" * (stmt.end_lineno - stmt.lineno))]
            yield site(src, "TL202", "delete-train-call", stmt.lineno,
                       f"deleted `{short(src.segment(stmt))}` from a loop that calls `{model}.eval()`",
                       edits, [src.map_line(edits, e.lineno) for e in evals])


def sites_tl204(src: Source):
    """Delete ``model.eval()`` before a ``with torch.no_grad():`` block of the same block that
    calls ``model``: inference then runs in whatever mode the model was left in."""
    for node in ast.walk(src.tree):
        for name in ("body", "orelse"):
            block = getattr(node, name, None)
            if not isinstance(block, list) or not block or not isinstance(block[0], ast.stmt):
                continue
            for i, stmt in enumerate(block):
                model = _mode_call(stmt, "eval")
                if model is None or not src.stmt_alone(stmt):
                    continue
                for later in block[i + 1:]:
                    if isinstance(later, ast.Expr) and _mode_call(later, "train") == model:
                        break
                    if not (isinstance(later, (ast.With, ast.AsyncWith))
                            and any(is_grad_off(item.context_expr) for item in later.items)):
                        continue
                    calls = [n for n in walk_scope(later) if isinstance(n, ast.Call) and dotted(n.func) == model]
                    if not calls:
                        continue
                    edits = [(src.start(stmt), src.end(stmt), "pass" + "\n" * (stmt.end_lineno - stmt.lineno))]
                    yield site(src, "TL204", "delete-eval-before-no-grad", stmt.lineno,
                               f"deleted `{short(src.segment(stmt))}` before `{short(src.line_text(later.lineno).strip(), 40)}`",
                               edits, [src.map_line(edits, call.lineno) for call in calls])
                    break


def _changes_data(node) -> bool:
    """``X.data.op_(...)``, ``X.data -= ...``, ``X.data = ...``, ``X.data[i] = ...``."""
    def is_data(expr):
        while isinstance(expr, ast.Subscript):
            expr = expr.value
        return isinstance(expr, ast.Attribute) and expr.attr == "data"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_") \
            and not node.func.attr.startswith("_") and is_data(node.func.value):
        return True
    if isinstance(node, ast.AugAssign):
        return is_data(node.target)
    if isinstance(node, ast.Assign):
        return any(is_data(t) for t in node.targets)
    return False


def _forward_uses(statements) -> set[str]:
    """Names the statements before ``backward()`` compute with: plain names, and the modules
    they call (``model`` for ``model(x)``, ``self.net`` for ``self.net.forward(x)``)."""
    used = set()
    for stmt in statements:
        for node in walk_scope(stmt):
            if isinstance(node, ast.Name):
                used.add(node.id)
            elif isinstance(node, ast.Call):
                func = node.func.value if isinstance(node.func, ast.Attribute) and node.func.attr == "forward" else node.func
                name = dotted(func)
                if name is not None:
                    used.add(name)
    return used


def _data_owner(change, stmt) -> str | None:
    """What a ``.data`` change belongs to: the tensor's name, or for the loop variable of ``for p
    in M.parameters()`` / ``named_parameters()`` inside ``stmt``, the module ``M``."""
    if isinstance(change, ast.Call):
        target = change.func.value
    elif isinstance(change, ast.AugAssign):
        target = change.target
    else:
        target = next(t for t in change.targets if isinstance(t, (ast.Attribute, ast.Subscript)))
    while isinstance(target, ast.Subscript):
        target = target.value
    tensor = dotted(target.value) if isinstance(target, ast.Attribute) else None
    if tensor is None:
        return None
    for node in walk_scope(stmt):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and call_name(node.iter) in (
                "parameters", "named_parameters"):
            names = {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
            if tensor in names:
                return receiver_text(node.iter)
    return tensor


def sites_tl305(src: Source):
    """Move a statement that changes parameters through ``.data`` after ``backward()`` (a
    manual SGD step, weight clipping, a noise injection) to just before that ``backward()``,
    in the same block of a loop body."""
    for loop in ast.walk(src.tree):
        if not isinstance(loop, LOOPS) or runs_once(loop):
            continue
        block = loop.body
        backward = next((i for i, s in enumerate(block)
                         if isinstance(s, ast.Expr) and _contains(s, is_backward_call)), None)
        if backward is None or not src.stmt_alone(block[backward]):
            continue
        used = _forward_uses(block[:backward])
        for stmt in block[backward + 1:]:
            changes = [n for n in walk_scope(stmt) if _changes_data(n) and _data_owner(n, stmt) in used]
            if not changes or not src.stmt_alone(stmt) or _contains(stmt, is_backward_call):
                continue
            cut = (src.line_start(stmt.lineno), src.line_start(stmt.end_lineno + 1))
            moved = src.text[cut[0]:cut[1]]
            if not moved.endswith("\n"):
                continue
            back = block[backward]
            pos = src.line_start(back.lineno)
            delete = (cut[0], cut[1], "")
            first = src.mut_line([delete], pos)
            accept = [first + n.lineno - stmt.lineno for n in changes]
            yield site(src, "TL305", "move-data-change-before-backward", stmt.lineno,
                       f"moved `{short(src.segment(stmt), 50)}` before `{short(src.segment(back), 40)}`",
                       [delete, (pos, pos, moved)], accept)
            break  # one mutant per loop


# TL503 / TL504 / TL303 ------------------------------------------------------------------------

SCALER_RE = re.compile(r"scaler", re.I)
CLIP_NAMES = {"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm"}
TRAINING_CALL_RE = re.compile(r"(^|_)(train|fit|finetune)(_|$)", re.I)


def _is_scaler(expr) -> bool:
    name = dotted(expr) or ""
    return bool(SCALER_RE.search(name.rsplit(".", 1)[-1]))


def _is_scaled_backward(node) -> bool:
    """``S.scale(loss).backward(...)`` with S named like a scaler."""
    if not is_backward_call(node):
        return False
    inner = node.func.value
    return isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "scale" \
        and _is_scaler(inner.func.value)


def _is_torch_clip(node) -> bool:
    """``torch.nn.utils.clip_grad_norm_(...)`` / ``nn.utils...`` / the imported function, with a
    finite ``max_norm`` (``float("inf")`` measures, it does not clip)."""
    if not isinstance(node, ast.Call) or call_name(node) not in CLIP_NAMES:
        return False
    func = node.func
    if isinstance(func, ast.Attribute) and not (dotted(func.value) or "").endswith("utils"):
        return False  # accelerator.clip_grad_norm_ unscales by itself
    return "inf" not in ast.unparse(node.args[1] if len(node.args) > 1 else ast.Constant(1.0))


def _scaler_stmt(stmt, method: str):
    """The call when ``stmt`` is the statement ``S.<method>(...)`` with S named like a scaler."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and call_name(stmt.value) == method \
            and isinstance(stmt.value.func, ast.Attribute) and _is_scaler(stmt.value.func.value):
        return stmt.value
    return None


def _delete(src: Source, stmt):
    return [(src.start(stmt), src.end(stmt), "pass" + "\n" * (stmt.end_lineno - stmt.lineno))]


def sites_tl503(src: Source):
    functions = [f for f in ast.walk(src.tree) if isinstance(f, FUNCTIONS)]
    for function in functions:
        nodes = list(walk_scope(function))
        scaled = [n for n in nodes if _is_scaled_backward(n)]
        if not scaled:
            continue
        first = min(n.lineno for n in scaled)
        for stmt in nodes:
            if not isinstance(stmt, ast.stmt) or not src.stmt_alone(stmt):
                continue
            # delete `scaler.unscale_(opt)` that precedes a clip: the clip then sees scaled gradients
            unscale = _scaler_stmt(stmt, "unscale_")
            if unscale is not None and stmt.lineno > first:
                clips = [n for n in nodes if _is_torch_clip(n) and n.lineno > stmt.end_lineno]
                others = [n for n in nodes if isinstance(n, ast.Call) and "unscale" in call_name(n) and n is not unscale]
                if clips and not others:
                    clip = min(clips, key=lambda n: n.lineno)
                    yield site(src, "TL503", "delete-unscale", stmt.lineno,
                               f"deleted `{short(src.segment(stmt))}` before `{short(src.segment(clip), 40)}`",
                               _delete(src, stmt), span_lines(clip))
            # `scaler.step(opt)` -> `opt.step()`: the step applies scaled gradients
            step = _scaler_stmt(stmt, "step")
            if step is not None and stmt.lineno > first and len(step.args) == 1 and not step.keywords:
                optimizer = src.segment(step.args[0])
                yield site(src, "TL503", "scaler-step-to-optimizer-step", stmt.lineno,
                           f"`{short(src.segment(stmt))}` -> `{short(optimizer, 40)}.step()`",
                           [(src.start(step), src.end(step), f"{optimizer}.step()")], span_lines(stmt))
    # delete the only `scaler.update()` of a scaler that is stepped: the next step raises
    updates = [s for s in ast.walk(src.tree) if isinstance(s, ast.stmt) and _scaler_stmt(s, "update") is not None]
    for stmt in updates:
        receiver = receiver_text(stmt.value)
        if not src.stmt_alone(stmt) or sum(receiver_text(s.value) == receiver for s in updates) != 1:
            continue
        steps = [n for n in ast.walk(src.tree) if isinstance(n, ast.Call) and call_name(n) == "step"
                 and receiver_text(n) == receiver and len(n.args) == 1]
        if steps and any(_is_scaled_backward(n) for n in ast.walk(src.tree)):
            yield site(src, "TL503", "delete-update", stmt.lineno, f"deleted `{short(src.segment(stmt))}`",
                       _delete(src, stmt), [line for n in steps for line in span_lines(n)])


def _trains(node) -> bool:
    """A call that changes weights: backward, an optimizer step, a training routine."""
    if not isinstance(node, ast.Call):
        return False
    if is_backward_call(node) or is_step_call(node):
        return True
    name = call_name(node)
    if isinstance(node.func, ast.Name) and re.search(r"optimi[sz]e|minimize", name, re.I) and node.args:
        return True
    return bool(TRAINING_CALL_RE.search(name)) and bool(node.args) and not (
        name == "train" and isinstance(node.func, ast.Attribute) and len(node.args) < 2)


def _snapshot_copy(value):
    """(kind, the edit's span, replacement text getter) for ``deepcopy(X.state_dict())`` and
    ``{k: v.clone() for k, v in X.state_dict().items()}``."""
    if isinstance(value, ast.Call) and call_name(value) == "deepcopy" and len(value.args) == 1:
        inner = value.args[0]
        if isinstance(inner, ast.Call) and call_name(inner) == "state_dict":
            return "drop-deepcopy", value, inner
    if isinstance(value, ast.DictComp) and isinstance(value.value, ast.Call) and call_name(value.value) == "clone" \
            and len(value.generators) == 1 and "state_dict" in ast.unparse(value.generators[0].iter):
        return "drop-clone", value.value, value.value.func.value
    return None


def sites_tl504(src: Source):
    for stmt in ast.walk(src.tree):
        if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
            continue
        target = dotted(stmt.targets[0])
        found = _snapshot_copy(stmt.value)
        function = enclosing_function(stmt)
        if target is None or found is None or function is None:
            continue
        operator, span, inner = found
        # the mutation is a bug only if training can run between the snapshot and a later read
        loops = enclosing_loops(stmt)
        nodes = list(walk_scope(function))
        reads = [n for n in nodes if dotted(n) == target and isinstance(getattr(n, "ctx", None), ast.Load)
                 and n.lineno > stmt.end_lineno]
        if not reads and target.startswith("self."):
            reads = [n for n in ast.walk(src.tree) if isinstance(n, ast.Call) and call_name(n) == "load_state_dict"
                     and n.args and dotted(n.args[0]) == target and enclosing_function(n) is not function]
            if not reads:
                continue
            trained = True
        else:
            outer = loops[-1] if loops else None
            trained = any(
                _trains(n) and (
                    (stmt.end_lineno < n.lineno < read.lineno)
                    or (outer is not None and outer.lineno <= n.lineno <= outer.end_lineno < read.lineno))
                for read in reads for n in nodes)
        if not trained:
            continue
        edit = (src.start(span), src.end(span), src.segment(inner))
        yield site(src, "TL504", operator, stmt.lineno, f"`{short(src.segment(stmt))}` -> no copy",
                   [edit], span_lines(stmt))


def sites_tl303(src: Source):
    for function in ast.walk(src.tree):
        if not isinstance(function, FUNCTIONS):
            continue
        nodes = list(walk_scope(function))
        for stmt in nodes:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
                continue
            call = stmt.value
            keywords = {k.arg: k for k in getattr(call, "keywords", [])}
            if not isinstance(call, ast.Call) or "device" not in keywords or "requires_grad" not in keywords \
                    or not (dotted(call.func) or "").startswith("torch."):
                continue
            name = stmt.targets[0].id
            used = any(
                (isinstance(n, ast.Attribute) and n.attr == "grad" and dotted(n.value) == name)
                or (isinstance(n, ast.Call) and "optim" in (dotted(n.func) or "")
                    and any(isinstance(a, ast.Name) and a.id == name for arg in n.args for a in ast.walk(arg)))
                for n in nodes)
            if not used:
                continue
            device = keywords["device"]
            # the keyword node spans `device=D`; remove it with the comma that separates it
            start, end = src.start(device), src.end(device.value)
            before = src.text[:start].rstrip()
            if before.endswith(","):
                start = len(before) - 1
            else:
                after = src.text[end:]
                end += len(after) - len(after.lstrip(", \t"))
            edits = [(start, end, ""), (src.end(call), src.end(call), f".to({src.segment(device.value)})")]
            yield site(src, "TL303", "requires-grad-then-to-device", stmt.lineno,
                       f"`{short(src.segment(stmt))}`: device= moved to `.to(...)` after the factory", edits,
                       span_lines(stmt))


# TL104 / TL404 ----------------------------------------------------------------------------------

def _view_of_part(expr) -> bool:
    """``out[:, -1]``, ``x[0, 1:]``, ``h.narrow(...)`` / ``.select(...)`` / ``.diagonal()``,
    optionally followed by ``.detach()``: a basic-index view of part of a tensor, by syntax."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "detach":
        expr = expr.func.value
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        return expr.func.attr in ("narrow", "select", "diagonal")
    if not isinstance(expr, ast.Subscript) or not isinstance(expr.slice, ast.Tuple):
        return False  # x[0] may index a list: only multi-axis indexes are tensors by syntax
    for element in expr.slice.elts:
        if isinstance(element, ast.Slice):
            continue
        if isinstance(element, ast.UnaryOp) and isinstance(element.op, ast.USub):
            element = element.operand
        if not (isinstance(element, ast.Constant) and (element.value is None or isinstance(element.value, int))):
            return False  # a tensor or list index: advanced indexing copies
    return True


def sites_tl104(src: Source):
    """``xs.append(out[:, -1].detach().clone())`` (or ``.cpu()``, a copy for a device tensor) in a
    loop -> drop the copy (detached, or under no_grad: an attached slice is TL101's finding)."""
    for node in ast.walk(src.tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append"
                and len(node.args) == 1 and not node.keywords):
            continue
        stmt = getattr(node, "_parent", None)
        arg = node.args[0]
        if not isinstance(stmt, ast.Expr) or not (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute)
                                                  and arg.func.attr in ("clone", "cpu")
                                                  and not arg.args and not arg.keywords):
            continue
        loops = enclosing_loops(stmt)
        if not loops or runs_once(loops[0]):
            continue
        view = arg.func.value
        detached = "detach" in {n.func.attr for n in ast.walk(view) if isinstance(n, ast.Call)
                                and isinstance(n.func, ast.Attribute)}
        if not _view_of_part(view) or not (detached or under_grad_off(stmt)):
            continue
        container = dotted(node.func.value)
        if container is not None and _rebound_in(loops[0], container):
            continue  # a fresh container per iteration
        edits = [(src.end(view), src.end(arg), "")]
        copy = arg.func.attr
        yield site(src, "TL104", f"append-drop-{copy}", stmt.lineno,
                   f"removed .{copy}() from `{short(src.segment(stmt))}`", edits, [stmt.lineno])


DEVICE_ARG_RE = re.compile(r"device|^dev$|gpu|cuda|rank", re.I)


def _hoisted_move(value):
    """(moved expression, the ``.to(device)`` / ``.cuda()`` text) for ``torch.f(...).to(device)``."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
        return None
    if value.func.attr == "cuda" and not value.keywords and not value.args:
        inner = value.func.value
    elif value.func.attr == "to" and len(value.args) == 1 and not value.keywords:
        target = dotted(value.args[0]) or ""
        if not DEVICE_ARG_RE.search(target.rpartition(".")[2]) or "cpu" in target.lower():
            return None
        inner = value.func.value
    else:
        return None
    function = dotted(inner.func) if isinstance(inner, ast.Call) else None
    if not function or not function.startswith("torch.") or function.startswith("torch.nn.") \
            or not function.rpartition(".")[2][:1].islower():
        return None  # a tensor by evidence: a torch function's result (not a module)
    return inner, value


def _changed_in_place(loop, name: str) -> bool:
    """``name += v``, ``name[i] = v`` or ``name.add_(v)`` in the loop's body."""
    for node in (n for stmt in loop.body for n in walk_scope(stmt)):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return True
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and dotted(node.value) == name:
            return True
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_")
                and not node.func.attr.startswith("_") and dotted(node.func.value) == name):
            return True
    return False


def sites_tl404(src: Source):
    """``w = torch.f(...).to(device)`` before a training loop that reads ``w`` -> make ``w`` on the
    host and move it at its first use inside the loop, every step."""
    scopes = [src.tree] + [node for node in ast.walk(src.tree) if isinstance(node, FUNCTIONS)]
    loops = list(training_loops(src))
    for scope in scopes:
        for loop in loops:
            if (enclosing_function(loop) or src.tree) is not scope:
                continue
            for stmt in scope.body:
                if stmt.lineno >= loop.lineno:
                    break
                if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
                    continue
                found = _hoisted_move(stmt.value)
                name = stmt.targets[0].id
                if found is None or _rebound_in(loop, name) or _changed_in_place(loop, name):
                    continue  # a tensor the loop changes must be copied again: no bug to plant
                inner, moved = found
                uses = sorted((n for s in loop.body for n in walk_scope(s)
                               if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)),
                              key=lambda n: (n.lineno, n.col_offset))
                if not uses:
                    continue
                use = uses[0]
                # `.to(\n    device\n)` goes in on one line: only the removal shifts lines
                suffix = " ".join(src.segment(moved)[len(src.segment(inner)):].split())
                removal = (src.end(inner), src.end(moved), "")
                edits = [removal, (src.end(use), src.end(use), suffix)]
                yield site(src, "TL404", "move-into-loop", use.lineno,
                           f"moved `{short(suffix, 30)}` of `{name}` from line {stmt.lineno} into the loop",
                           edits, [src.mut_line([removal], src.start(use))])


OPERATORS = {
    "TL101": sites_tl101,
    "TL102": sites_tl102,
    "TL103": sites_tl103,
    "TL201": sites_tl201,
    "TL301": sites_tl301,
    "TL302": sites_tl302_all,
    "TL202": sites_tl202,
    "TL204": sites_tl204,
    "TL305": sites_tl305,
    "TL401": sites_tl401,
    "TL402": sites_tl402,
    "TL501": sites_tl501,
    "TL502": sites_tl502,
    "TL503": sites_tl503,
    "TL504": sites_tl504,
    "TL303": sites_tl303,
    "TL104": sites_tl104,
    "TL404": sites_tl404,
}
NOT_COVERED = {
    "TL403": "no operator: a reusable-buffer site cannot be recognised generically (see mutation.md)",
    "TL304": "no operator: no __getitem__ in the corpora copies stored data before changing it in place (see mutation.md)",
}


# ----------------------------------------------------------------------------- files

def _excluded_dirs() -> tuple[str, ...]:
    try:
        from torchlint.config import DEFAULT_EXCLUDE

        return tuple(DEFAULT_EXCLUDE)
    except ImportError:
        return (".git", ".tox", ".nox", "venv", ".venv", "build", "dist", "__pycache__", "*.egg-info")


def collect(roots: list[str]) -> list[str]:
    """Python files under ``roots``, skipping the directories torchlint excludes by default
    (``build/``: several corpus packages carry a stale ``build/lib`` copy of themselves)."""
    import fnmatch

    excluded = _excluded_dirs()
    files = []
    for root in roots:
        if os.path.isfile(root):
            files.append(root)
            continue
        for directory, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not any(fnmatch.fnmatch(d, pattern) for pattern in excluded))
            files.extend(os.path.join(directory, n) for n in sorted(names) if n.endswith(".py"))
    return files


TORCH_IMPORT_RE = re.compile(r"^\s*(import\s+torch\b|from\s+torch\b)", re.M)


def load(path: str) -> Source | None:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        try:
            from torchlint.engine import decode_source

            text = decode_source(data)
        except Exception:
            text = data.decode("utf-8")
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return None
    annotate_parents(tree)
    return Source(path, text, tree)


def find_sites(path: str, rules: tuple[str, ...]) -> list[Site]:
    """Every site of the operators of ``rules`` in one file; only PyTorch files (that import
    torch) have sites: d2l's mxnet / tensorflow / jax editions have `backward()` too."""
    src = load(path)
    if src is None or not TORCH_IMPORT_RE.search(src.text):
        return []
    found = []
    for rule in rules:
        try:
            found.extend(OPERATORS[rule](src))
        except (RecursionError, ValueError):
            continue
    return found


# ----------------------------------------------------------------------------- linting

_JOB: dict = {}


def _init(job: dict) -> None:
    _JOB.update(job)


def _sites_chunk(paths: list[str]) -> list[Site]:
    out = []
    for path in paths:
        out.extend(find_sites(path, _JOB["operators"]))
    return out


def _findings(text: str, path: str):
    from torchlint.engine import lint_source

    return [(v.line, v.code, v.message) for v in lint_source(text, path, _JOB["rules"], _JOB["options"])]


RULE_CRASH_RE = re.compile(r"internal error in (TL\d{3})")


def _lint_original(path: str):
    """(path, findings) of the unmodified file, or (path, reason) when it cannot be used."""
    src = load(path)
    if src is None:
        return path, "cannot read or parse the original"
    try:
        found = _findings(src.text, path)
    except Exception as error:  # noqa: BLE001 - a crash is a result, not the end of the run
        return path, f"crash on the original: {type(error).__name__}: {error}"
    bad = [message for _, code, message in found if code == "TL000" and not RULE_CRASH_RE.match(message)]
    return path, ("original is TL000: " + bad[0]) if bad else found


def _check_mutants(item) -> list[dict]:
    """Lint some mutants of one file; ``original`` holds the unmodified file's findings."""
    path, original, mutants = item
    if isinstance(original, str):
        return [dict(m, status="invalid", detected=False, said=[original]) for m in mutants]
    src = load(path)
    if src is None:
        return [dict(m, status="invalid", detected=False, said=["cannot read the original"]) for m in mutants]
    return [_check_mutant(src, original, mutant) for mutant in mutants]


def _check_mutant(src: Source, original, mutant: dict) -> dict:
    rule = mutant["rule"]
    edits = [tuple(e) for e in mutant["edits"]]
    text = Source.apply(src.text, edits)
    result = dict(mutant)
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        return dict(result, status="invalid", detected=False, said=[f"mutant does not parse: {error}"])
    started = time.perf_counter()
    try:
        found = _findings(text, src.path)
    except Exception as error:  # noqa: BLE001
        return dict(result, status="invalid", detected=False, said=[f"crash: {type(error).__name__}: {error}"])
    result["lint_s"] = round(time.perf_counter() - started, 4)
    # A crash of another rule (TL000 "internal error in TLxxx") costs only that rule's findings;
    # a crash of the expected rule, or a file torchlint cannot parse, makes the mutant invalid.
    fatal = [(l, c, m) for l, c, m in found if c == "TL000" and (
        not RULE_CRASH_RE.match(m) or RULE_CRASH_RE.match(m).group(1) == rule)]
    if fatal:
        return dict(result, status="invalid", detected=False, said=[f"{c}:{l} {m}" for l, c, m in fatal])
    # original findings, moved to the mutant's lines
    before = {(src.map_line(edits, line), code) for line, code, _ in original}
    new = [(line, code, message) for line, code, message in found if (line, code) not in before]
    tol = mutant["tolerance"]
    near = {line + d for line in mutant["accept"] for d in range(-tol, tol + 1)}
    scope = {line + d for line in mutant["scope"] for d in range(-tol, tol + 1)}
    hit = [f for f in new if f[1] == rule and f[0] in near]
    if hit:
        status = "detected"
    elif any(code == rule and line in scope for line, code in before):
        status = "masked"  # the original already reports this rule here: nothing new can appear
    else:
        status = "missed"
    lo, hi = min(mutant["accept"]) - 3, max(mutant["accept"]) + 3
    said = [f"{code}:{line} {message}" for line, code, message in found if lo <= line <= hi or (line, code, message) in new]
    result.update(status=status, detected=status == "detected", said=said, new=[f"{c}:{l}" for l, c, _ in new])
    return result


def _originals_chunk(paths: list[str]) -> list:
    return [_lint_original(path) for path in paths]


def _map(function, chunks, jobs: int):
    if jobs <= 1 or len(chunks) <= 1:
        for chunk in chunks:
            yield function(chunk)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    context = multiprocessing.get_context("fork") if sys.platform.startswith("linux") else None
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_init, initargs=(dict(_JOB),)) as pool:
        futures = [pool.submit(function, chunk) for chunk in chunks]
        for future in as_completed(futures):
            yield future.result()


MUTANTS_PER_TASK = 4


def chunked(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)]


# ----------------------------------------------------------------------------- main

def default_roots() -> list[str]:
    roots = []
    env = os.environ.get("TORCHLINT_CORPUS")
    if env:
        roots.append(env)
    if os.path.isdir("/work/corpus/c") and "/work/corpus/c" not in roots:
        roots.append("/work/corpus/c")
    return roots


def rule_selection(config: str | None, codes: list[str]):
    from torchlint.config import Layer, Settings, load_settings, select_rules
    from torchlint.rules import all_rules

    settings = load_settings([], config) if config else Settings(root=os.getcwd())
    selection = select_rules(all_rules(), settings, Layer(extend_select=codes))
    return selection.rules, settings.options


def sample(sites: list[dict], limit: int, seed: int) -> list[dict]:
    sites = sorted(sites, key=lambda s: (s["path"], s["line"], s["operator"], s["description"]))
    if limit and len(sites) > limit:
        sites = random.Random(seed).sample(sites, limit)
        sites.sort(key=lambda s: (s["path"], s["line"], s["operator"]))
    return sites


def display_path(path: str, roots: list[str]) -> str:
    for root in roots:
        parent = os.path.dirname(os.path.abspath(root).rstrip("/"))
        absolute = os.path.abspath(path)
        if absolute.startswith(parent + os.sep):
            return os.path.relpath(absolute, parent)
    return path


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for n, row in enumerate(rows):
        out.append("| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))) + " |")
        if n == 0:
            out.append("|" + "|".join("-" * (w + 2) if i == 0 else "-" * (w + 1) + ":" for i, w in enumerate(widths)) + "|")
    return "\n".join(out)


def show_missed(results: list[dict], rule: str, roots: list[str], context: int) -> None:
    missed = [r for r in results if r["rule"] == rule and r["status"] == "missed"]
    print(f"\n## {len(missed)} missed {rule} mutants\n")
    cache: dict[str, Source | None] = {}
    for result in missed:
        src = cache.setdefault(result["path"], load(result["path"]))
        print(f"--- {display_path(result['path'], roots)}:{result['line']}  [{result['operator']}] {result['description']}")
        if src is not None:
            edits = [tuple(e) for e in result["edits"]]
            lines = LINE_RE.findall(Source.apply(src.text, edits))
            accept = result["accept"]
            center = result["accept"][0] if len(accept) < 4 else src.map_line(edits, result["line"])
            marked = set(accept)
            for number in range(max(1, center - context), min(len(lines), center + context) + 1):
                mark = ">" if number in marked else " "
                print(f"  {mark}{number:5d} {lines[number - 1].rstrip()}")
        if result.get("said"):
            for line in result["said"][:6]:
                print(f"    torchlint: {short(line, 150)}")
        else:
            print("    torchlint: nothing nearby")
        print()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("roots", nargs="*", help="corpus roots (default: $TORCHLINT_CORPUS and /work/corpus/c)")
    parser.add_argument("--max-per-rule", type=int, default=200, metavar="N",
                        help="mutants per rule, sampled deterministically (0: all sites; default 200)")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    parser.add_argument("--rules", help="comma-separated rule codes to mutate (default: all with an operator)")
    parser.add_argument("--json", metavar="OUT", help="write per-mutant results to OUT")
    parser.add_argument("--show-missed", action="append", default=[], metavar="RULE",
                        help="print the missed mutants of RULE with context (repeatable, or ALL)")
    parser.add_argument("--context", type=int, default=4, help="lines of context for --show-missed (default 4)")
    parser.add_argument("-j", "--jobs", type=int, default=None, help="worker processes (default: all cores)")
    parser.add_argument("--config", help="torchlint configuration file (default: torchlint's defaults)")
    args = parser.parse_args(argv)

    roots = args.roots or default_roots()
    if not roots:
        parser.error("no corpus: pass roots or set TORCHLINT_CORPUS")
    missing = [r for r in roots if not os.path.exists(r)]
    if missing:
        parser.error(f"not found: {', '.join(missing)}")
    codes = sorted(OPERATORS) if not args.rules else [c.strip().upper() for c in args.rules.split(",") if c.strip()]
    unknown = [c for c in codes if c not in OPERATORS]
    if unknown:
        parser.error(f"no operator for {', '.join(unknown)} (operators: {', '.join(sorted(OPERATORS))})")
    jobs = args.jobs or max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)

    started = time.perf_counter()
    rules, options = rule_selection(args.config, codes)
    _JOB.update(operators=tuple(codes), rules=rules, options=options)

    files = collect(roots)
    sites: list[dict] = []
    for chunk_sites in _map(_sites_chunk, chunked(files, 16), jobs):
        sites.extend(asdict(s) for s in chunk_sites)
    found_s = time.perf_counter() - started
    by_rule: dict[str, list[dict]] = defaultdict(list)
    for s in sites:
        by_rule[s["rule"]].append(s)
    chosen = []
    for code in codes:
        for n, s in enumerate(sample(by_rule[code], args.max_per_rule, args.seed)):
            chosen.append(dict(s, id=f"{code}-{n:03d}"))

    per_file: dict[str, list[dict]] = defaultdict(list)
    for mutant in chosen:
        per_file[mutant["path"]].append(mutant)
    # The originals once per file, then the mutants in small tasks (a file can take seconds to
    # lint and draw dozens of mutants), the biggest files first so the pool does not end on one.
    by_size = sorted(per_file, key=lambda path: -os.path.getsize(path))
    originals = {}
    for chunk in _map(_originals_chunk, chunked(by_size, 1), jobs):
        originals.update(chunk)
    tasks = [(path, originals[path], group) for path in by_size
             for group in chunked(per_file[path], MUTANTS_PER_TASK)]
    results: list[dict] = []
    for chunk_results in _map(_check_mutants, tasks, jobs):
        results.extend(chunk_results)
    results.sort(key=lambda r: r["id"])
    elapsed = time.perf_counter() - started

    rows = [["rule", "sites", "mutants", "masked", "invalid", "detected", "missed", "recall"]]
    summary = {}
    for code in codes:
        mine = [r for r in results if r["rule"] == code]
        count = lambda status: sum(r["status"] == status for r in mine)  # noqa: E731
        scored = count("detected") + count("missed")
        recall = 100.0 * count("detected") / scored if scored else None
        summary[code] = dict(sites=len(by_rule[code]), mutants=len(mine), masked=count("masked"),
                             invalid=count("invalid"), detected=count("detected"), missed=count("missed"),
                             recall=None if recall is None else round(recall, 1))
        rows.append([code, str(len(by_rule[code])), str(len(mine)), str(count("masked")), str(count("invalid")),
                     str(count("detected")), str(count("missed")), "-" if recall is None else f"{recall:.1f}%"])
    total_detected = sum(v["detected"] for v in summary.values())
    total_scored = total_detected + sum(v["missed"] for v in summary.values())
    rows.append(["all", str(len(sites)), str(len(results)), str(sum(v["masked"] for v in summary.values())),
                 str(sum(v["invalid"] for v in summary.values())), str(total_detected),
                 str(total_scored - total_detected),
                 f"{100.0 * total_detected / total_scored:.1f}%" if total_scored else "-"])
    print(f"torchlint mutation recall: {len(files)} files in {', '.join(roots)}; "
          f"max {args.max_per_rule} mutants per rule, seed {args.seed}; "
          f"{elapsed:.0f} s ({found_s:.0f} s finding sites), {jobs} jobs")
    print()
    print(table(rows))
    for code, reason in NOT_COVERED.items():
        print(f"\n{code}: {reason}")

    for rule in args.show_missed:
        targets = codes if rule.upper() == "ALL" else [rule.upper()]
        for target in targets:
            show_missed(results, target, roots, args.context)

    if args.json:
        from torchlint import __version__

        for r in results:
            r["file"] = display_path(r["path"], roots)
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"torchlint": __version__, "roots": roots, "max_per_rule": args.max_per_rule,
                       "seed": args.seed, "elapsed_s": round(elapsed, 1), "summary": summary,
                       "mutants": [{k: v for k, v in r.items() if k != "edits"} for r in results]},
                      handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
