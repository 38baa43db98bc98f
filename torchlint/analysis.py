"""The shared analysis of one module, built in a single walk over its statements.

Rules ask, the analysis answers. The walk records every statement with its context (scope, the
loops around it, grad mode, whether it runs conditionally inside its loop) and every name binding.
Everything costlier than that (is this expression still attached to the autograd graph? is this
container returned? does this loop backpropagate?) is computed lazily, only when a rule asks,
and memoised. Expressions are only looked into on demand: a walk over every node would cost as
much as the parse itself.
"""

from __future__ import annotations

import enum
import re
from collections import defaultdict
from collections.abc import Iterator

from torchlint.lazy import cst


class GradMode(enum.Enum):
    ENABLED = "enabled"
    DISABLED = "disabled"  # no_grad, inference_mode, set_grad_enabled(False), Lightning eval hooks
    UNKNOWN = "unknown"  # set_grad_enabled(<expression>): rules stay quiet


# Substrings a file must contain for any value in it to count as graph-attached. Rules whose
# findings need an attached value use these as their prefilter tokens.
ATTACHMENT_TOKENS = (
    "torch", "nn.", "F.", "backward", "Module", "Model", "Net", "Loss",
    "model", "net", "criterion", "loss", "classifier", "encoder", "decoder", "generator",
    "discriminator", "backbone", "critic", "actor", "head", "teacher", "student",
)

# Names that conventionally hold a module or a loss function: calling them is a forward pass.
CONVENTIONAL_MODULE_RE = re.compile(
    r"^(?!_*(?:get|build|create|load|make|init|initialize|save|setup|set|prepare|wrap|unwrap|"
    r"train|eval|evaluate|compile|export|freeze|unfreeze|copy|update|convert|print|log|register|"
    r"replace|patch|resolve|fetch|download|reset|is|has|to|from|apply|check|find|select|"
    r"construct|instantiate|default)_)"
    r"_*(?:\w+_)?(?:model|net|network|criterion|loss_fn|loss_func|loss_function|lossfn|"
    r"classifier|encoder|decoder|generator|discriminator|backbone|critic|actor|head|teacher|"
    r"student)$|^net[A-Z]\w*$"
)
# Imported (not locally defined) classes whose name says they build a module.
MODULE_CLASS_RE = re.compile(r"(?:Model|Net|Network|Module|Loss|Encoder|Decoder|Classifier)$")
LIGHTNING_NO_GRAD_HOOKS = frozenset({"validation_step", "test_step", "predict_step"})

DETACHING_METHODS = frozenset({"item", "tolist", "detach", "detach_", "numpy", "__len__"})
NON_DIFFERENTIABLE_METHODS = frozenset({
    "argmax", "argmin", "argsort", "eq", "ne", "lt", "le", "gt", "ge", "long", "int", "bool",
    "byte", "char", "short", "nonzero", "size", "dim", "numel", "element_size", "isnan",
    "isinf", "isfinite", "all", "any", "equal", "data_ptr", "stride", "is_contiguous",
    "get_device", "count_nonzero", "unique", "keys", "nelement", "ndimension", "type",
})
NON_GRAPH_ATTRIBUTES = frozenset({
    "shape", "dtype", "device", "data", "grad", "requires_grad", "ndim", "is_cuda", "is_leaf",
    "grad_fn", "layout", "names", "itemsize", "nbytes",
})
TORCH_NON_DIFFERENTIABLE = frozenset({
    "argmax", "argmin", "argsort", "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf",
    "isfinite", "numel", "is_tensor", "equal", "allclose", "isclose", "unique", "bucketize",
    "searchsorted", "count_nonzero", "nonzero", "tensor", "from_numpy", "zeros", "ones", "empty",
    "full", "rand", "randn", "randint", "randperm", "arange", "linspace", "logspace", "eye",
    "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
    "randint_like", "no_grad", "inference_mode", "enable_grad", "set_grad_enabled", "device",
    "manual_seed", "is_grad_enabled", "save", "load",
})
# torch functions returning (values, indices): the indices carry no graph.
TORCH_VALUES_INDICES = frozenset({"max", "min", "sort", "topk", "kthvalue", "mode", "median"})
PASS_THROUGH_BUILTINS = frozenset({"sum", "max", "min", "abs", "list", "tuple", "sorted", "reversed", "dict"})
LOSS_FUNCTIONAL_RE = re.compile(r"(?:_loss|cross_entropy|kl_div|nll_loss|binary_cross_entropy\w*|_embedding)$")
MODULE_PASS_THROUGH_METHODS = frozenset({
    "to", "cuda", "cpu", "eval", "train", "half", "float", "double", "bfloat16",
    "requires_grad_", "to_empty", "share_memory",
})
BACKWARD_FUNCTIONS = frozenset({"backward", "manual_backward"})

_NEUTRAL_FIELDS = frozenset({
    "lpar", "rpar", "comma", "semicolon", "leading_lines", "lines_after_decorators", "header",
    "footer", "newline", "equal", "colon", "operator", "dot", "star", "whitespace_before",
    "whitespace_after", "lbracket", "rbracket", "lbrace", "rbrace", "asynchronous",
    "trailing_whitespace", "default_comma", "star_tok", "arrow",
})
_FIELDS_BY_TYPE: dict[type, tuple[str, ...]] = {}


def child_nodes(node) -> Iterator:
    """Direct children of a libcst node that can hold code (whitespace and punctuation skipped)."""
    fields = _FIELDS_BY_TYPE.get(type(node))
    if fields is None:
        fields = tuple(
            name for name in type(node).__dataclass_fields__
            if name not in _NEUTRAL_FIELDS and not name.startswith("whitespace")
        )
        _FIELDS_BY_TYPE[type(node)] = fields
    for name in fields:
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            yield value
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, cst.CSTNode):
                    yield item


def iter_expression_nodes(node) -> Iterator:
    """Every node under ``node`` (itself included), not entering lambdas' bodies."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if type(current) is cst.Lambda:
            continue
        stack.extend(child_nodes(current))


def dotted_name(node) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is not cst.Name:
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def storage_key(node) -> str | None:
    """The name that owns a container expression: ``metrics["loss"]`` -> ``metrics``."""
    while type(node) is cst.Subscript:
        node = node.value
    return dotted_name(node)


def last_part(name: str) -> str:
    return name.rpartition(".")[2]


def call_arguments(call) -> list:
    return [arg.value for arg in call.args if not arg.keyword and not arg.star]


def keyword_argument(call, keyword: str):
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    return None


class Scope:
    """A module, class or function body."""

    __slots__ = ("node", "kind", "parent", "class_scope", "grad", "bindings", "statements", "name", "_memo")

    def __init__(self, node, kind: str, parent: Scope | None, class_scope: Scope | None, grad: GradMode) -> None:
        self.node = node
        self.kind = kind  # "module", "class" or "function"
        self.parent = parent
        self.class_scope = class_scope
        self.grad = grad
        self.bindings: dict[str, list[Binding]] = defaultdict(list)
        self.statements: list[tuple[object, Context]] = []
        self.name = node.name.value if kind != "module" else "<module>"
        self._memo: dict = {}


class Loop:
    """A for or while statement; ``start``/``end`` bound the orders of the statements inside."""

    __slots__ = ("node", "scope", "start", "end", "_memo")

    def __init__(self, node, scope: Scope, start: int) -> None:
        self.node = node
        self.scope = scope
        self.start = start
        self.end = start
        self._memo: dict = {}

    def contains(self, order: int) -> bool:
        return self.start < order <= self.end


class Context:
    """Where a statement sits. ``guard`` is the innermost conditional (if / except / case)
    between the statement and its innermost loop: None means it runs on every iteration."""

    __slots__ = ("scope", "loops", "grad", "guard", "order", "in_finally")

    def __init__(self, scope: Scope, loops: tuple[Loop, ...], grad: GradMode, guard, order: int,
                 in_finally: bool = False) -> None:
        self.scope = scope
        self.loops = loops
        self.grad = grad
        self.guard = guard
        self.order = order
        self.in_finally = in_finally

    @property
    def loop(self) -> Loop | None:
        return self.loops[-1] if self.loops else None


class Binding:
    """``key`` (a name or dotted attribute such as ``self.hidden``) bound by a statement.

    ``element`` is the index path inside an unpacking target: ``out, (h, c) = ...`` binds ``c``
    with element (1, 1)."""

    __slots__ = ("key", "kind", "value", "element", "stmt", "ctx")

    def __init__(self, key: str, kind: str, value, element: tuple[int, ...], stmt, ctx: Context) -> None:
        self.key = key
        self.kind = kind  # assign, augassign, for, with, param, import, def, class
        self.value = value
        self.element = element
        self.stmt = stmt
        self.ctx = ctx

    @property
    def order(self) -> int:
        return self.ctx.order


class Analysis:
    def __init__(self, module, path: str = "<unknown>") -> None:
        self.module = module
        self.path = path
        self.imports: dict[str, str] = {}
        self.statements_by_type: dict[str, list[tuple[object, Context]]] = defaultdict(list)
        self.scopes: dict[int, Scope] = {}  # id(FunctionDef/ClassDef) -> Scope
        self.loops: dict[int, Loop] = {}  # id(For/While) -> Loop
        self.local_classes: dict[str, object] = {}
        self._order = 0
        self._attached_memo: dict[int, bool] = {}
        self._module_memo: dict[int, bool] = {}
        self._callers_memo: dict[tuple[str, bool], bool] = {}
        self._calls_memo: dict[int, list] = {}
        self.module_scope = Scope(module, "module", None, None, GradMode.ENABLED)
        self._collect_top_level_imports(module.body)
        self._walk_block(module.body, self.module_scope, (), GradMode.ENABLED, None, False)

    # ------------------------------------------------------------------ rules

    def run(self, rule) -> None:
        """Call the rule's ``visit_<StatementType>(node, ctx)`` methods on every statement."""
        for attribute in dir(type(rule)):
            if attribute.startswith("visit_"):
                handler = getattr(rule, attribute)
                for node, ctx in self.statements_by_type.get(attribute[6:], ()):
                    handler(node, ctx)

    def code(self, node, limit: int = 80) -> str:
        text = " ".join(self.module.code_for_node(node).split())
        return text if len(text) <= limit else text[: limit - 1] + "…"

    # ------------------------------------------------------------------ the walk

    def _collect_top_level_imports(self, statements) -> None:
        for stmt in statements:
            if type(stmt) is cst.SimpleStatementLine:
                for small in stmt.body:
                    if type(small) in (cst.Import, cst.ImportFrom):
                        self._record_import(small)
            elif type(stmt) in (cst.If, cst.Try):
                self._collect_top_level_imports(stmt.body.body)
                for handler in getattr(stmt, "handlers", ()):
                    self._collect_top_level_imports(handler.body.body)
                orelse = stmt.orelse
                while orelse is not None:
                    self._collect_top_level_imports(orelse.body.body)
                    orelse = getattr(orelse, "orelse", None)

    def _record_import(self, node) -> list[str]:
        bound = []
        if type(node) is cst.Import:
            for alias in node.names:
                full = dotted_name(alias.name)
                if full is None:
                    continue
                if alias.asname is not None:
                    local = dotted_name(alias.asname.name)
                    if local:
                        self.imports[local] = full
                        bound.append(local)
                else:
                    root = full.partition(".")[0]
                    self.imports[root] = root
                    bound.append(root)
            return bound
        if isinstance(node.names, cst.ImportStar):
            return bound
        base = dotted_name(node.module) if node.module is not None else ""
        prefix = "." * len(node.relative) + (base or "")
        for alias in node.names:
            name = dotted_name(alias.name)
            if name is None:
                continue
            local = dotted_name(alias.asname.name) if alias.asname is not None else name
            if local:
                self.imports[local] = f"{prefix}.{name}" if prefix and not prefix.endswith(".") else prefix + name
                bound.append(local)
        return bound

    def _context(self, stmt, scope: Scope, loops, grad, guard, in_finally) -> Context:
        self._order += 1
        ctx = Context(scope, loops, grad, guard, self._order, in_finally)
        self.statements_by_type[type(stmt).__name__].append((stmt, ctx))
        scope.statements.append((stmt, ctx))
        return ctx

    def _walk_block(self, statements, scope, loops, grad, guard, in_finally) -> GradMode:
        """Walk a statement list; returns the grad mode in force after it (the statement form
        ``torch.set_grad_enabled(False)`` changes it for the statements that follow)."""
        for stmt in statements:
            kind = type(stmt)
            if kind is cst.SimpleStatementLine:
                for small in stmt.body:
                    grad = self._small_statement(small, scope, loops, grad, guard, in_finally)
            else:
                grad = self._compound_statement(stmt, scope, loops, grad, guard, in_finally)
        return grad

    def _walk_suite(self, suite, scope, loops, grad, guard, in_finally) -> GradMode:
        if type(suite) is cst.SimpleStatementSuite:
            for small in suite.body:
                grad = self._small_statement(small, scope, loops, grad, guard, in_finally)
            return grad
        return self._walk_block(suite.body, scope, loops, grad, guard, in_finally)

    def _small_statement(self, stmt, scope, loops, grad, guard, in_finally) -> GradMode:
        ctx = self._context(stmt, scope, loops, grad, guard, in_finally)
        kind = type(stmt)
        if kind is cst.Assign:
            for target in stmt.targets:
                self._bind_target(target.target, "assign", stmt.value, (), stmt, ctx)
        elif kind is cst.AnnAssign:
            if stmt.value is not None:
                self._bind_target(stmt.target, "assign", stmt.value, (), stmt, ctx)
        elif kind is cst.AugAssign:
            self._bind_target(stmt.target, "augassign", stmt, (), stmt, ctx)
        elif kind is cst.Expr:
            if type(stmt.value) is cst.Call:
                return self._statement_grad_switch(stmt.value, grad)
        elif kind in (cst.Import, cst.ImportFrom):
            for local in self._record_import(stmt):
                self._bind(local, "import", None, (), stmt, ctx)
        return grad

    def _statement_grad_switch(self, call, grad: GradMode) -> GradMode:
        """``torch.set_grad_enabled(False)`` as a statement switches grad mode from here on."""
        name = self.qualified_name(call.func)
        if name != "torch.set_grad_enabled" or not call.args:
            return grad
        return _literal_grad_mode(call.args[0].value)

    def _compound_statement(self, stmt, scope, loops, grad, guard, in_finally) -> GradMode:
        kind = type(stmt)
        if kind is cst.FunctionDef:
            self._function(stmt, scope, loops, grad, guard, in_finally)
        elif kind is cst.ClassDef:
            ctx = self._context(stmt, scope, loops, grad, guard, in_finally)
            self._bind(stmt.name.value, "class", stmt, (), stmt, ctx)
            if scope.kind == "module":
                self.local_classes[stmt.name.value] = stmt
            class_scope = Scope(stmt, "class", scope, None, grad)
            self.scopes[id(stmt)] = class_scope
            self._walk_suite(stmt.body, class_scope, (), grad, None, False)
        elif kind in (cst.For, cst.While):
            ctx = self._context(stmt, scope, loops, grad, guard, in_finally)
            if kind is cst.For:
                self._bind_target(stmt.target, "for", stmt.iter, (), stmt, ctx)
            loop = Loop(stmt, scope, ctx.order)
            self.loops[id(stmt)] = loop
            after = self._walk_suite(stmt.body, scope, loops + (loop,), grad, None, False)
            loop.end = self._order
            if stmt.orelse is not None:
                after = self._walk_suite(stmt.orelse.body, scope, loops, after, stmt.orelse, in_finally)
            return _merge(grad, after)
        elif kind is cst.If:
            self._context(stmt, scope, loops, grad, guard, in_finally)
            after = self._walk_suite(stmt.body, scope, loops, grad, stmt, in_finally)
            orelse, other = stmt.orelse, grad
            if type(orelse) is cst.If:
                other = self._compound_statement(orelse, scope, loops, grad, stmt, in_finally)
            elif orelse is not None:
                other = self._walk_suite(orelse.body, scope, loops, grad, stmt, in_finally)
            return _merge(after, other)
        elif kind is cst.With:
            ctx = self._context(stmt, scope, loops, grad, guard, in_finally)
            inner = grad
            for item in stmt.items:
                inner = self._with_item_grad(item.item, inner)
                if item.asname is not None:
                    self._bind_target(item.asname.name, "with", item.item, (), stmt, ctx)
            self._walk_suite(stmt.body, scope, loops, inner, guard, in_finally)
        elif kind in (cst.Try, cst.TryStar):
            self._context(stmt, scope, loops, grad, guard, in_finally)
            after = self._walk_suite(stmt.body, scope, loops, grad, guard, in_finally)
            for handler in stmt.handlers:
                handler_ctx = self._context(handler, scope, loops, grad, handler, in_finally)
                if handler.name is not None:
                    self._bind_target(handler.name.name, "except", None, (), handler, handler_ctx)
                self._walk_suite(handler.body, scope, loops, grad, handler, in_finally)
            if stmt.orelse is not None:
                after = self._walk_suite(stmt.orelse.body, scope, loops, after, guard, in_finally)
            if stmt.finalbody is not None:
                after = self._walk_suite(stmt.finalbody.body, scope, loops, after, guard, True)
            return _merge(grad, after)
        elif kind is cst.Match:
            self._context(stmt, scope, loops, grad, guard, in_finally)
            for case in stmt.cases:
                self._walk_suite(case.body, scope, loops, grad, case, in_finally)
        else:  # statements a newer libcst adds: record them, walk nothing
            self._context(stmt, scope, loops, grad, guard, in_finally)
        return grad

    def _function(self, node, scope, loops, grad, guard, in_finally) -> None:
        ctx = self._context(node, scope, loops, grad, guard, in_finally)
        self._bind(node.name.value, "def", node, (), node, ctx)
        class_scope = scope if scope.kind == "class" else scope.class_scope
        body_grad = GradMode.ENABLED
        if scope.kind == "class" and node.name.value in LIGHTNING_NO_GRAD_HOOKS:
            body_grad = GradMode.DISABLED  # Lightning runs these hooks under no_grad
        for decorator in node.decorators:
            body_grad = self._with_item_grad(decorator.decorator, body_grad)
        function_scope = Scope(node, "function", scope, class_scope, body_grad)
        self.scopes[id(node)] = function_scope
        params = node.params
        param_ctx = Context(function_scope, (), body_grad, None, ctx.order)
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            self._bind(param.name.value, "param", None, (), node, param_ctx)
        for param in (params.star_arg, params.star_kwarg):
            if isinstance(param, cst.Param):
                self._bind(param.name.value, "param", None, (), node, param_ctx)
        self._walk_suite(node.body, function_scope, (), body_grad, None, False)

    def _with_item_grad(self, expr, grad: GradMode) -> GradMode:
        """Grad mode inside ``with expr:`` (or under decorator ``@expr``)."""
        call = expr if type(expr) is cst.Call else None
        target = call.func if call is not None else expr
        name = self.qualified_name(target) or dotted_name(target) or ""
        tail = last_part(name)
        if name == "torch.set_grad_enabled" and call is not None and call.args:
            return _literal_grad_mode(call.args[0].value)
        if name == "torch.inference_mode" and call is not None and call.args:
            mode = _literal_grad_mode(call.args[0].value)  # inference_mode(False) keeps autograd on
            return {GradMode.ENABLED: GradMode.DISABLED, GradMode.DISABLED: grad}.get(mode, GradMode.UNKNOWN)
        if tail.endswith("no_grad") or tail.endswith("inference_mode"):
            return GradMode.DISABLED
        if name == "torch.enable_grad":
            return GradMode.ENABLED
        return grad

    def _bind_target(self, target, kind, value, element, stmt, ctx) -> None:
        target_type = type(target)
        if target_type in (cst.Tuple, cst.List):
            for index, item in enumerate(target.elements):
                inner = item.value
                if type(item) is cst.StarredElement:
                    self._bind_target(inner, kind, value, element + (-1,), stmt, ctx)
                else:
                    self._bind_target(inner, kind, value, element + (index,), stmt, ctx)
            return
        if target_type is cst.StarredElement:
            self._bind_target(target.value, kind, value, element + (-1,), stmt, ctx)
            return
        key = dotted_name(target)
        if key is not None:
            self._bind(key, kind, value, element, stmt, ctx)

    def _bind(self, key, kind, value, element, stmt, ctx: Context) -> None:
        binding = Binding(key, kind, value, element, stmt, ctx)
        ctx.scope.bindings[key].append(binding)
        if key.startswith("self.") and ctx.scope.class_scope is not None:
            ctx.scope.class_scope.bindings[key].append(binding)

    # ------------------------------------------------------------------ names

    def qualified_name(self, node) -> str | None:
        """``torch.nn.functional.relu`` for ``F.relu`` (after ``import torch.nn.functional as F``).

        Unimported ``torch`` / ``nn`` / ``F`` prefixes are taken at their conventional meaning."""
        name = dotted_name(node)
        if name is None:
            return None
        root, _, rest = name.partition(".")
        resolved = self.imports.get(root) or _CONVENTIONAL_ROOTS.get(root)
        if resolved is None:
            return None
        return f"{resolved}.{rest}" if rest else resolved

    def lookup(self, key: str, ctx: Context) -> Binding | None:
        """The binding of ``key`` in force at ``ctx``: the latest earlier one in the statement's own
        scope, else the latest anywhere in the class (for ``self.x``), enclosing functions or module."""
        scope = ctx.scope
        latest = None
        for binding in scope.bindings.get(key, ()):
            if binding.ctx.order < ctx.order:
                latest = binding
            else:
                break
        if latest is not None:
            return latest
        if key.startswith("self.") and scope.class_scope is not None:
            found = scope.class_scope.bindings.get(key)
            if found:
                return found[-1]
        outer = scope.parent
        while outer is not None:
            if outer.kind != "class":
                found = outer.bindings.get(key)
                if found:
                    return found[-1]
            outer = outer.parent
        return None

    def bindings_in(self, key: str, scope: Scope) -> list[Binding]:
        return scope.bindings.get(key, [])

    # ------------------------------------------------------------------ grad mode

    def grad_enabled(self, ctx: Context) -> bool:
        """Autograd records at ``ctx``: not under no_grad, and the function is not one that every
        caller in this module calls with grad disabled."""
        if ctx.grad is not GradMode.ENABLED:
            return False
        scope = ctx.scope
        return not (scope.kind == "function" and self.all_calls_grad_disabled(scope))

    def all_calls_grad_disabled(self, scope: Scope) -> bool:
        """True when the function has callers in this module and every one of them runs with
        grad disabled (e.g. ``evaluate()`` only ever called inside ``with torch.no_grad():``)."""
        name = scope.name
        is_method = scope.parent is not None and scope.parent.kind == "class"
        memo_key = (name, is_method)
        if memo_key in self._callers_memo:
            return self._callers_memo[memo_key]
        self._callers_memo[memo_key] = False  # recursion guard
        found = False
        disabled = True
        for stmt_list in self.statements_by_type.values():
            for stmt, ctx in stmt_list:
                for call in self.calls_in(stmt):
                    func = call.func
                    if is_method:
                        hit = type(func) is cst.Attribute and func.attr.value == name
                    else:
                        hit = type(func) is cst.Name and func.value == name
                    if not hit:
                        continue
                    found = True
                    if ctx.scope is scope:  # recursion says nothing about callers
                        continue
                    if ctx.grad is GradMode.ENABLED and not (
                        ctx.scope.kind == "function" and self.all_calls_grad_disabled(ctx.scope)
                    ):
                        disabled = False
        result = found and disabled
        self._callers_memo[memo_key] = result
        return result

    # ------------------------------------------------------------------ expressions

    def own_expressions(self, stmt) -> list:
        """The expressions that belong to a statement itself, not to the blocks it contains."""
        kind = type(stmt)
        if kind is cst.For:
            return [stmt.target, stmt.iter]
        if kind in (cst.While, cst.If):
            return [stmt.test]
        if kind is cst.With:
            return [item for item in stmt.items]
        if kind is cst.FunctionDef:
            return [*stmt.decorators, stmt.params]
        if kind is cst.ClassDef:
            return [*stmt.decorators, *stmt.bases, *stmt.keywords]
        if kind is cst.Match:
            return [stmt.subject]
        if kind is cst.ExceptHandler:
            return [stmt.type] if stmt.type is not None else []
        if kind in (cst.Try, cst.TryStar):
            return []
        return [stmt]

    def calls_in(self, stmt) -> list:
        """Every call in a statement's own expressions (memoised per statement)."""
        cached = self._calls_memo.get(id(stmt))
        if cached is None:
            cached = [
                node
                for expr in self.own_expressions(stmt)
                for node in iter_expression_nodes(expr)
                if type(node) is cst.Call
            ]
            self._calls_memo[id(stmt)] = cached
        return cached

    def statements_in_loop(self, loop: Loop) -> Iterator[tuple[object, Context]]:
        """Statements of the loop's body (nested loops included, nested functions excluded)."""
        for stmt, ctx in loop.scope.statements:
            if ctx.order > loop.end:
                break
            if ctx.order > loop.start:
                yield stmt, ctx

    def loop_calls(self, loop: Loop, method: str) -> bool:
        """Does any statement in the loop call something named ``method`` (``x.method()`` or
        ``method(...)``/``obj.method(...)``)? Memoised per loop."""
        key = ("calls", method)
        if key not in loop._memo:
            loop._memo[key] = any(
                _call_name(call) == method
                for stmt, _ in self.statements_in_loop(loop)
                for call in self.calls_in(stmt)
            )
        return loop._memo[key]

    def resets_in_loop(self, key: str, loop: Loop) -> list[Binding]:
        """Bindings inside the loop's body that give ``key`` a fresh value (``xs = []``), as
        opposed to extending the old one (``xs += [v]``, ``total = total + loss``)."""
        return [
            binding for binding in loop.scope.bindings.get(key, ())
            if loop.contains(binding.ctx.order) and binding.kind != "augassign"
            and not (binding.kind == "assign" and key in mentioned_keys(binding.value))
        ]

    def cleared_in_loop(self, key: str, loop: Loop) -> bool:
        """Is the container emptied inside the loop (``xs.clear()``, ``del xs[:]``)?"""
        for stmt, _ in self.statements_in_loop(loop):
            if type(stmt) is cst.Del and any(
                storage_key(target.target) == key for target in _del_targets(stmt)
            ):
                return True
            if type(stmt) is cst.Expr and type(stmt.value) is cst.Call:
                func = stmt.value.func
                if type(func) is cst.Attribute and func.attr.value == "clear" and dotted_name(func.value) == key:
                    return True
        return False

    def loop_backpropagates(self, loop: Loop) -> bool:
        return any(self.loop_calls(loop, name) for name in BACKWARD_FUNCTIONS)

    def returned_expressions(self, scope: Scope) -> list:
        """Values of the scope's return / yield statements and yield expressions."""
        if "returned" not in scope._memo:
            values = []
            for stmt, ctx in scope.statements:
                if ctx.scope is not scope:
                    continue
                if type(stmt) is cst.Return and stmt.value is not None:
                    values.append(stmt.value)
                for expr in self.own_expressions(stmt):
                    for node in iter_expression_nodes(expr):
                        if type(node) is cst.Yield and node.value is not None:
                            value = node.value
                            values.append(value.item if type(value) is cst.From else value)
            scope._memo["returned"] = values
        return scope._memo["returned"]

    def escapes_by_return(self, key: str, scope: Scope) -> bool:
        """Is ``key`` part of what the function returns or yields?"""
        return any(key in mentioned_keys(value) for value in self.returned_expressions(scope))

    def returned_attached(self, key: str, scope: Scope) -> bool:
        """Does the function return ``key`` without detaching it (``return total``, ``return total / n``)?"""
        return any(key in mentioned_keys(value, skip_detached=True) for value in self.returned_expressions(scope))

    def backpropagated_keys(self, scope: Scope) -> frozenset[str]:
        """Names whose value reaches a ``backward()`` in this scope: the roots (``loss.backward()``,
        ``accelerator.backward(loss)``, ``scaler.scale(loss).backward()``) and, transitively, the
        names their bindings were computed from (``loss = total / n`` puts ``total`` in)."""
        if "backprop" in scope._memo:
            return scope._memo["backprop"]
        pending: list[str] = []
        for stmt, ctx in scope.statements:
            if ctx.scope is not scope:
                continue
            for call in self.calls_in(stmt):
                name = _call_name(call)
                if name in BACKWARD_FUNCTIONS:
                    # loss.backward(), accelerator.backward(loss), scaler.scale(loss).backward()
                    roots = call_arguments(call)[:1]
                    if type(call.func) is cst.Attribute:
                        roots.append(call.func.value)
                elif name == "grad" and self.qualified_name(call.func) == "torch.autograd.grad":
                    roots = call_arguments(call)[:1]
                else:
                    continue
                for root in roots:
                    pending.extend(mentioned_keys(root, skip_detached=True))
        reached: set[str] = set()
        while pending:
            key = pending.pop()
            if key in reached:
                continue
            reached.add(key)
            for binding in scope.bindings.get(key, ()):
                if binding.kind == "assign" and binding.value is not None:
                    pending.extend(mentioned_keys(binding.value, skip_detached=True))
                elif binding.kind == "augassign":
                    pending.extend(mentioned_keys(binding.value.value, skip_detached=True))
        result = frozenset(reached)
        scope._memo["backprop"] = result
        return result

    # ------------------------------------------------------------------ graph attachment

    def is_attached(self, expr, ctx: Context) -> bool:
        """Is ``expr`` at ``ctx`` a tensor still attached to the autograd graph?

        Sources: forward passes (calls of modules, losses, conventional ``model``/``criterion``
        names), functional losses and names that are backpropagated. Arithmetic, indexing and
        non-detaching methods propagate; ``.item()``, ``.detach()``, ``float()``, comparisons and
        anything computed with grad disabled do not. Unknown calls are not tensors."""
        if ctx.grad is not GradMode.ENABLED:
            return False
        return self._attached(expr, ctx) and self.grad_enabled(ctx)

    def _attached(self, expr, ctx: Context) -> bool:
        kind = type(expr)
        if kind is cst.Name:
            binding = self.lookup(expr.value, ctx)
            return binding is not None and self._binding_attached(binding)
        if kind is cst.Attribute:
            if expr.attr.value in NON_GRAPH_ATTRIBUTES:
                return False
            key = dotted_name(expr)
            if key is not None:
                binding = self.lookup(key, ctx)
                if binding is not None:
                    return self._binding_attached(binding)
            return self._attached(expr.value, ctx)  # out.loss, out.logits
        if kind is cst.Subscript:
            return self._attached(expr.value, ctx)
        if kind is cst.Call:
            return self._call_attached(expr, ctx)
        if kind is cst.BinaryOperation:
            return self._attached(expr.left, ctx) or self._attached(expr.right, ctx)
        if kind is cst.UnaryOperation:
            return type(expr.operator) is not cst.Not and self._attached(expr.expression, ctx)
        if kind in (cst.Tuple, cst.List, cst.Set):
            return any(self._attached(element.value, ctx) for element in expr.elements)
        if kind is cst.Dict:
            return any(self._attached(element.value, ctx) for element in expr.elements)
        if kind is cst.IfExp:
            return self._attached(expr.body, ctx) or self._attached(expr.orelse, ctx)
        if kind is cst.BooleanOperation:
            return self._attached(expr.left, ctx) or self._attached(expr.right, ctx)
        if kind is cst.NamedExpr:
            return self._attached(expr.value, ctx)
        return False

    def _binding_attached(self, binding: Binding) -> bool:
        memo = self._attached_memo
        key = id(binding)
        if key in memo:
            return memo[key]
        memo[key] = False  # cycles resolve to "not attached"
        result = self._compute_binding_attached(binding)
        memo[key] = result
        return result

    def _compute_binding_attached(self, binding: Binding) -> bool:
        ctx = binding.ctx
        if ctx.grad is not GradMode.ENABLED:
            return False
        kind = binding.kind
        if kind == "assign":
            value = self._element_of(binding.value, binding.element)
            if value is None:
                return False
            if self._attached(value, ctx):
                return True
            return type(value) is cst.Call and self._backpropagated(binding)
        if kind == "augassign":
            if self._attached(binding.value.value, ctx):
                return True
            previous = self.lookup(binding.key, ctx)
            return previous is not None and self._binding_attached(previous)
        if kind == "for":
            iterable = binding.value
            if type(iterable) is cst.Call and type(iterable.func) is cst.Name and iterable.func.value == "enumerate":
                if binding.element[:1] == (0,):
                    return False
                arguments = call_arguments(iterable)
                return bool(arguments) and self._attached(arguments[0], ctx)
            return self._attached(iterable, ctx)
        if kind == "param":
            return self._backpropagated(binding)
        return False

    def _backpropagated(self, binding: Binding) -> bool:
        return binding.key in self.backpropagated_keys(binding.ctx.scope)

    def _element_of(self, value, element: tuple[int, ...]):
        """The sub-expression an unpacking target receives, or the whole value when unknown;
        None when it is known to carry no graph (the indices of ``torch.max(x, 1)``)."""
        for index in element:
            if type(value) in (cst.Tuple, cst.List) and index >= 0 and all(
                type(item) is cst.Element for item in value.elements
            ) and index < len(value.elements):
                value = value.elements[index].value
                continue
            if index == 1 and type(value) is cst.Call:
                name = self.qualified_name(value.func) or ""
                method = value.func.attr.value if type(value.func) is cst.Attribute else ""
                if (name.startswith("torch.") and last_part(name) in TORCH_VALUES_INDICES) or (
                    method in TORCH_VALUES_INDICES and len(value.args) >= 1
                ):
                    return None
            return value
        return value

    def _call_attached(self, call, ctx: Context) -> bool:
        func = call.func
        qualified = self.qualified_name(func)
        if qualified is not None and qualified.startswith("torch."):
            return self._torch_call_attached(qualified, call, ctx)
        if type(func) is cst.Attribute:
            method = func.attr.value
            if method in DETACHING_METHODS or method in NON_DIFFERENTIABLE_METHODS:
                return False
            if self._attached(func.value, ctx):
                return True  # a non-detaching tensor method: .cpu(), .to(), .mean(), .view() ...
            if method == "forward" and self.is_module(func.value, ctx):
                return True
        elif type(func) is cst.Name:
            name = func.value
            if name in PASS_THROUGH_BUILTINS and name not in self.imports:
                return any(self._attached(arg.value, ctx) for arg in call.args)
        return self.is_module(func, ctx)

    def _torch_call_attached(self, qualified: str, call, ctx: Context) -> bool:
        name = last_part(qualified)
        if qualified.startswith("torch.nn.functional."):
            if LOSS_FUNCTIONAL_RE.search(name):
                return True
        elif qualified.startswith("torch.nn.") and name[:1].isupper():
            return False  # constructing a module
        if name in TORCH_NON_DIFFERENTIABLE:
            return False
        return any(self._attached(arg.value, ctx) for arg in call.args)

    def is_module(self, expr, ctx: Context) -> bool:
        """Is ``expr`` a module or loss function, so that calling it runs a forward pass?"""
        kind = type(expr)
        if kind is cst.Subscript:  # self.blocks[i](x)
            return self.is_module(expr.value, ctx)
        key = dotted_name(expr)
        if key is None:
            return False
        if CONVENTIONAL_MODULE_RE.match(last_part(key)):
            return True
        binding = self.lookup(key, ctx)
        if binding is None:
            return False
        memo = self._module_memo
        if id(binding) not in memo:
            memo[id(binding)] = False
            memo[id(binding)] = self._binding_is_module(binding)
        return memo[id(binding)]

    def _binding_is_module(self, binding: Binding) -> bool:
        if binding.kind == "param":
            return False
        if binding.kind != "assign" or binding.element:
            return False
        value = binding.value
        # Net().to(device).eval() is still the module
        while type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value in MODULE_PASS_THROUGH_METHODS:
            value = value.func.value
        if type(value) is not cst.Call:
            return type(value) in (cst.Name, cst.Attribute) and self.is_module(value, binding.ctx)
        return self.is_module_class(value.func) or (
            self.qualified_name(value.func) == "torch.compile" and bool(value.args)
            and self.is_module(value.args[0].value, binding.ctx)
        )

    def is_module_class(self, expr) -> bool:
        """Does calling ``expr`` construct a module: ``nn.Linear``, a local ``nn.Module`` subclass,
        an imported class named like ``ResNetModel`` / ``FocalLoss``?"""
        qualified = self.qualified_name(expr)
        if qualified is not None:
            if qualified.startswith("torch.nn.") and last_part(qualified)[:1].isupper():
                return True
        name = dotted_name(expr)
        if name is None:
            return False
        tail = last_part(name)
        if "." not in name and name in self.local_classes:
            return self._local_class_is_module(name, set())
        return bool(tail[:1].isupper() and MODULE_CLASS_RE.search(tail))

    def _local_class_is_module(self, name: str, seen: set[str]) -> bool:
        if name in seen:
            return False
        seen.add(name)
        node = self.local_classes[name]
        for base in node.bases:
            base_name = dotted_name(base.value)
            if base_name is None:
                continue
            if "." not in base_name and base_name in self.local_classes:
                if self._local_class_is_module(base_name, seen):
                    return True
                continue
            qualified = self.qualified_name(base.value) or base_name
            if qualified.startswith("torch.nn.") or MODULE_CLASS_RE.search(last_part(base_name)):
                return True
        return False


_CONVENTIONAL_ROOTS = {"torch": "torch", "nn": "torch.nn", "F": "torch.nn.functional"}


def _literal_grad_mode(expr) -> GradMode:
    if type(expr) is cst.Name and expr.value in ("True", "False"):
        return GradMode.ENABLED if expr.value == "True" else GradMode.DISABLED
    return GradMode.UNKNOWN


def _merge(first: GradMode, second: GradMode) -> GradMode:
    return first if first is second else GradMode.UNKNOWN


def _del_targets(stmt) -> list:
    target = stmt.target
    if type(target) in (cst.Tuple, cst.List):
        return [element for element in target.elements]
    return [cst.Element(value=target)]


def _call_name(call) -> str | None:
    func = call.func
    if type(func) is cst.Attribute:
        return func.attr.value
    if type(func) is cst.Name:
        return func.value
    return None


def mentioned_keys(expr, skip_detached: bool = False) -> set[str]:
    """Names and dotted attributes an expression reads. With ``skip_detached``, what sits under
    ``.item()`` / ``.detach()`` / ``float()`` ... is left out: it carries no graph."""
    found: set[str] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.Name:
            found.add(node.value)
            continue
        if kind is cst.Attribute:
            key = dotted_name(node)
            if key is not None:
                found.add(key)
                found.add(key.partition(".")[0])
                continue
        if skip_detached and kind is cst.Call:
            func = node.func
            if type(func) is cst.Attribute and func.attr.value in DETACHING_METHODS:
                continue
            if type(func) is cst.Name and func.value in ("float", "int", "bool", "str", "len"):
                continue
        if kind is cst.Lambda:
            continue
        stack.extend(child_nodes(node))
    return found
