"""What a call's literal arguments decide inside the function it runs: ``run_epoch(loader,
train=False)`` never reaches the ``backward()`` under ``if train:``.

Arguments the call fixes to a literal (by position, keyword or an unpassed default) are put into
the ``if`` tests around a statement of the callee; a test that then evaluates to the branch not
taken means the statement does not run for this call. Anything not literal is unknown, and
unknown means "may run"."""

from __future__ import annotations

import ast
import re

from torchlint.analysis.scopes import Scope
from torchlint.lazy import cst

_UNKNOWN = object()


class ArgumentQueries:
    def may_run_for(self, call, callee: Scope, inner_call, ctx=None) -> bool:
        """Can ``inner_call`` (a call in ``callee``'s own statements) run when ``call`` runs
        ``callee``? False only when a test around it is decided against it by the call's
        literal arguments, or (given the call's context ``ctx``) by a literal the caller gave
        an attribute of the instance just before calling one of its methods
        (``self.state = "valid"`` … ``self._fit_batch(b)`` … ``if self.state == "train":``)."""
        statement = _statement_of(inner_call, callee, self)
        if statement is None:
            return True
        constants = constant_arguments(call, callee)
        conditions = self.branch_conditions(statement, callee)
        if ctx is not None and conditions and type(call.func) is cst.Attribute \
                and type(call.func.value) is cst.Name and call.func.value.value == "self":
            for text, _ in conditions:
                for key in _SELF_ATTRIBUTE_RE.findall(text):
                    binding = self.lookup(key, ctx)
                    if binding is not None and binding.ctx.scope is ctx.scope and binding.kind == "assign" \
                            and not binding.element and binding.value is not None:
                        value = _literal(binding.value)
                        if value is not _UNKNOWN:
                            constants[key] = value
        return not any(_falsified(text, positive, constants) for text, positive in conditions)


def _literal(expr):
    """The value of a literal argument (``False``, ``None``, ``0``, ``"val"``), else ``_UNKNOWN``."""
    kind = type(expr)
    if kind is cst.Name and expr.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[expr.value]
    if kind in (cst.Integer, cst.SimpleString):
        try:
            return ast.literal_eval(expr.value)
        except (ValueError, SyntaxError):
            return _UNKNOWN
    return _UNKNOWN


def constant_arguments(call, callee) -> dict:
    """Parameters of ``callee`` that the call fixes to a literal, by position, keyword or an
    unpassed default."""
    params = callee.node.params
    positional = [*params.posonly_params, *params.params]
    if callee.parent is not None and callee.parent.kind == "class" and type(call.func) is cst.Attribute:
        positional = positional[1:]  # self / cls
    values = {}
    for param in [*positional, *params.kwonly_params]:
        if param.default is not None:
            values[param.name.value] = _literal(param.default)
    index = 0
    for arg in call.args:
        if arg.star:
            break
        if arg.keyword is not None:
            values[arg.keyword.value] = _literal(arg.value)
        elif index < len(positional):
            values[positional[index].name.value] = _literal(arg.value)
            index += 1
    return {name: value for name, value in values.items() if value is not _UNKNOWN}


def _falsified(test: str, positive: bool, constants: dict) -> bool:
    """Does the branch condition (``test`` must be ``positive``) fail for these constants?"""
    if not constants:
        return False
    try:
        value = _evaluate(ast.parse(test, mode="eval").body, constants)
    except (SyntaxError, ValueError, RecursionError):
        return False
    return value is not _UNKNOWN and bool(value) is not positive


def _evaluate(node, constants: dict):
    kind = type(node)
    if kind is ast.Constant:
        return node.value
    if kind is ast.Name:
        return constants.get(node.id, _UNKNOWN)
    if kind is ast.Attribute:
        dotted = _dotted(node)
        return constants.get(dotted, _UNKNOWN) if dotted is not None else _UNKNOWN
    if kind is ast.UnaryOp and type(node.op) is ast.Not:
        value = _evaluate(node.operand, constants)
        return _UNKNOWN if value is _UNKNOWN else not value
    if kind is ast.BoolOp:
        values = [_evaluate(item, constants) for item in node.values]
        if type(node.op) is ast.And:
            if any(value is not _UNKNOWN and not value for value in values):
                return False
            return _UNKNOWN if _UNKNOWN in values else all(values)
        if any(value is not _UNKNOWN and value for value in values):
            return True
        return _UNKNOWN if _UNKNOWN in values else any(values)
    if kind is ast.Compare and len(node.ops) == 1:
        left, right = _evaluate(node.left, constants), _evaluate(node.comparators[0], constants)
        if left is _UNKNOWN or right is _UNKNOWN:
            return _UNKNOWN
        op = type(node.ops[0])
        try:
            if op is ast.Eq:
                return left == right
            if op is ast.NotEq:
                return left != right
            if op is ast.Is:
                return left is right
            if op is ast.IsNot:
                return left is not right
        except Exception:  # noqa: BLE001 - comparing literals cannot fail, but never crash a lint
            return _UNKNOWN
    return _UNKNOWN


_SELF_ATTRIBUTE_RE = re.compile(r"\bself(?:\.\w+)+")


def _dotted(node) -> str | None:
    parts = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is not ast.Name:
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _statement_of(call, scope, analysis):
    """The statement of ``scope`` whose own expressions hold ``call``."""
    index = scope._memo.get("call_statements")
    if index is None:
        index = scope._memo["call_statements"] = {
            id(inner): stmt for stmt, ctx in scope.statements if ctx.scope is scope for inner in analysis.calls_in(stmt)
        }
    return index.get(id(call))


def passed_arguments(call, callee, bound: bool | None = None) -> dict:
    """The argument expressions a call passes to ``callee``'s parameters, by position or
    keyword (``{"model": <net>}`` for ``validate(net, loader)`` of ``def validate(model,
    loader)``); parameters left to their defaults or hidden behind ``*args`` are absent."""
    params = callee.node.params
    positional = [*params.posonly_params, *params.params]
    if bound is None:  # `obj.method(x)`; `Class(x)` runs `__init__` bound (say so with `bound`)
        bound = callee.parent is not None and callee.parent.kind == "class" and type(call.func) is cst.Attribute
    if bound:
        positional = positional[1:]  # self / cls
    passed = {}
    index = 0
    for arg in call.args:
        if arg.star:
            if arg.star == "*":
                index = len(positional)  # later positions are unknown
            continue
        if arg.keyword is not None:
            passed[arg.keyword.value] = arg.value
        elif index < len(positional):
            passed[positional[index].name.value] = arg.value
            index += 1
    return passed
