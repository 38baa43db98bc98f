"""The single walk over a module's statements: scopes, loops, grad mode, bindings, container
stores and imports; name lookup."""

from __future__ import annotations

import re

from collections import defaultdict
from torchlint.lazy import cst
from torchlint.analysis.vocabulary import CONTAINER_WRITES, GradMode, LIGHTNING_NO_GRAD_HOOKS, _CONVENTIONAL_ROOTS
from torchlint.analysis.syntax import (
    _literal_grad_mode, _merge, dotted_name, is_test_file, iter_expression_nodes, last_part, storage_key)
from torchlint.analysis.scopes import Binding, Context, Loop, Scope

# Context managers and decorators of a project that likely set the grad mode.
GRAD_WRAPPER_RE = re.compile(r"grad|training_mode|train_mode|eval_mode|inference", re.I)
# Bases of a class that is a plain module, nothing a framework drives.
PLAIN_MODULE_BASES = frozenset({"nn.Module", "torch.nn.Module", "Module"})


_VISIT_METHODS: dict[type, tuple[str, ...]] = {}


def _visit_methods(rule_class: type) -> tuple[str, ...]:
    """The rule class's ``visit_*`` method names, in ``dir`` order (``dir`` per file and rule
    cost more than some rules)."""
    names = _VISIT_METHODS.get(rule_class)
    if names is None:
        names = _VISIT_METHODS[rule_class] = tuple(name for name in dir(rule_class) if name.startswith("visit_"))
    return names


class ModuleWalk:
    """The walk and its records; the query mixins of the package build on them."""

    def __init__(self, module, path: str = "<unknown>", source: str | None = None) -> None:
        self.module = module
        self.path = path
        # The file's text, when the caller has it: a substring test answers "can this module
        # contain X at all?" far faster than walking its expressions.
        self.source = source
        self._contains: dict[str, bool] = {}  # may_contain's answers
        # for a module another one imports: (sha256, mtime_ns, size) of the file as read
        self.digest: tuple[str, int, int] | None = None
        self.project_dependencies: dict[str, tuple] = {}  # project modules its answers read
        self.imports: dict[str, str] = {}
        self.statements_by_type: dict[str, list[tuple[object, Context]]] = defaultdict(list)
        self.scopes: dict[int, Scope] = {}  # id(FunctionDef/ClassDef) -> Scope
        self.loops: dict[int, Loop] = {}  # id(For/While) -> Loop
        self.local_classes: dict[str, object] = {}
        self._order = 0
        self._attached_memo: dict[int, bool] = {}
        self.star_imports: list[str] = []  # modules whose names `from m import *` brings in
        self._guard_end: dict[int, int] = {}  # id(If) -> the order of its last statement
        # calls taken as attached under a hypothesis (see ``attached_if_calls_are``)
        self._assumed_attached_calls: frozenset[int] = frozenset()
        self._store_ctx: dict[int, Context] = {}  # id(value written into a container) -> its context
        self._module_memo: dict[int, bool] = {}
        self._callers_memo: dict[tuple[str, bool], bool] = {}
        self._calls_memo: dict[int, list] = {}
        self._mutated_memo: dict[int, tuple] = {}  # id(statement) -> (statement, mutated_operands)
        self._grad_leaf_memo: dict[int, bool] = {}
        self._switches: dict | None = None
        self._sequences_memo: dict[int, dict] = {}
        self._branch_parents: dict[int, tuple[list, list, int]] = {}
        self._hypothesis = None  # the function whose summary assumes module/attached arguments
        self._tensor_hypothesis = None  # the function whose summary assumes attached tensor arguments
        self.module_scope = Scope(module, "module", None, None, GradMode.ENABLED)
        self._collect_top_level_imports(module.body)
        self._walk_block(module.body, self.module_scope, (), GradMode.ENABLED, None, False)
        self.module_scope.owner = self
        for scope in self.scopes.values():
            scope.owner = self
        self.install_implicit_loops()

    # ------------------------------------------------------------------ rules

    def run(self, rule) -> None:
        """Call the rule's ``visit_<StatementType>(node, ctx)`` methods on every statement, and
        its ``check_module_scope(scope)`` once (module-level code is a scope like a function's:
        scripts and notebooks)."""
        check_module = getattr(rule, "check_module_scope", None)
        if check_module is not None:
            check_module(self.module_scope)
        for attribute in _visit_methods(type(rule)):
            statements = self.statements_by_type.get(attribute[6:])
            if statements:
                handler = getattr(rule, attribute)
                for node, ctx in statements:
                    handler(node, ctx)

    def may_contain(self, text: str) -> bool:
        """False only when the module's source certainly does not contain ``text``."""
        if self.source is None:
            return True
        found = self._contains.get(text)
        if found is None:
            found = self._contains[text] = text in self.source
        return found

    @property
    def is_test_module(self) -> bool:
        """A test module (see ``is_test_file``), not an inference script that happens to be
        named ``test_image.py``: a file named like a test must use a test framework or define
        ``test_`` functions without doing anything when run."""
        if not is_test_file(self.path):
            return False
        parts = re.split(r"[\\/]", self.path)
        if self.source is None or parts[-1] == "conftest.py" or any(part in ("tests", "test") for part in parts[:-1]):
            return True
        if "pytest" in self.source or "unittest" in self.source:
            return True
        return re.search(r"^def test_\w*\(", self.source, re.M) is not None and "__main__" not in self.source \
            and "parse_args" not in self.source

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
        base = dotted_name(node.module) if node.module is not None else ""
        prefix = "." * len(node.relative) + (base or "")
        if isinstance(node.names, cst.ImportStar):
            if prefix not in self.star_imports:
                self.star_imports.append(prefix)  # a package's `from .base import *`
            return bound
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
                if type(target.target) is cst.Subscript:
                    key = storage_key(target.target)
                    if key is not None:
                        scope.stores[key].append(stmt.value)
                        self._store_ctx[id(stmt.value)] = ctx
                else:
                    self._bind_target(target.target, "assign", stmt.value, (), stmt, ctx)
        elif kind is cst.AnnAssign:
            if stmt.value is not None:
                self._bind_target(stmt.target, "assign", stmt.value, (), stmt, ctx)
        elif kind is cst.AugAssign:
            self._bind_target(stmt.target, "augassign", stmt, (), stmt, ctx)
        elif kind is cst.Expr:
            call = stmt.value
            if type(call) is cst.Call:
                func = call.func
                if type(func) is cst.Attribute and func.attr.value in CONTAINER_WRITES and call.args:
                    key = storage_key(func.value)
                    if key is not None:
                        scope.stores[key].extend(arg.value for arg in call.args)
                        for arg in call.args:
                            self._store_ctx[id(arg.value)] = ctx
                return self._statement_grad_switch(call, grad)
        elif kind in (cst.Import, cst.ImportFrom):
            for local in self._record_import(stmt):
                self._bind(local, "import", None, (), stmt, ctx)
        return grad

    def _statement_grad_switch(self, call, grad: GradMode) -> GradMode:
        """``torch.set_grad_enabled(False)`` as a statement switches grad mode from here on, and
        so does entering a grad-disabling context by hand (``torch.no_grad().__enter__()``)."""
        func = call.func
        if type(func) is cst.Attribute and func.attr.value == "__enter__" and type(func.value) is cst.Call:
            entered = self.qualified_name(func.value.func)
            if entered in ("torch.no_grad", "torch.inference_mode"):
                return GradMode.DISABLED
            if entered == "torch.set_grad_enabled" and func.value.args:
                return _literal_grad_mode(func.value.args[0].value)
            return grad
        name = self.qualified_name(func)
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
            self._guard_end[id(stmt)] = self._order
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
        if scope.kind == "class" and node.name.value in LIGHTNING_NO_GRAD_HOOKS and not self._uses_skorch() \
                and not self._plain_module_class(scope.node):
            body_grad = GradMode.DISABLED  # Lightning runs these hooks under no_grad (skorch does not)
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

    def _plain_module_class(self, class_node) -> bool:
        """A class deriving from ``nn.Module`` alone, in a file that does not import Lightning: its
        ``validation_step`` is a method its own code calls, not a Lightning hook."""
        if any(name.split(".")[0] in ("lightning", "pytorch_lightning") for name in self.imports.values()):
            return False
        return bool(class_node.bases) and all(dotted_name(base.value) in PLAIN_MODULE_BASES for base in class_node.bases)

    def _uses_skorch(self) -> bool:
        """skorch's ``NeuralNet.validation_step`` runs with grad enabled unless it disables it."""
        return any(name == "skorch" or name.startswith("skorch.") for name in self.imports.values())

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
        if call is not None and grad is GradMode.ENABLED and GRAD_WRAPPER_RE.search(tail):
            # a project's own switch (poutyne's `_set_training_mode(False)`, `maybe_no_grad(...)`,
            # `torch_grad(enabled)`): it may turn autograd off, so rules stay quiet inside
            return GradMode.UNKNOWN
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

    def reaching_bindings(self, key: str, ctx: Context) -> list[Binding]:
        """The bindings of ``key`` that may be in force at ``ctx``: ``lookup``'s, and earlier ones
        of the same function on the other arms of an ``if`` (``if a: loss = f(x)`` /
        ``else: loss = None`` both reach the statement after the ``if``)."""
        latest = self.lookup(key, ctx)
        if latest is None or latest.ctx.scope is not ctx.scope:
            return [latest] if latest is not None else []
        bindings = ctx.scope.bindings.get(key, ())
        index = next(i for i, binding in enumerate(bindings) if binding is latest)
        found = [latest]
        scope = ctx.scope
        while index > 0:
            earlier = bindings[index - 1]
            skipped = self._may_be_skipped(found[-1], ctx)
            if skipped and earlier.ctx.guard is found[-1].ctx.guard and earlier.ctx.loops == found[-1].ctx.loops:
                index -= 1  # earlier in the same block as the binding that replaced it: never reaches past it
                continue
            if not (skipped or all(self.exclusive_branches(earlier.stmt, other.stmt, scope) for other in found)):
                break
            index -= 1
            found.append(earlier)
        return found

    def _may_be_skipped(self, binding: Binding, ctx: Context) -> bool:
        """Is ``binding`` under an ``if`` without ``else`` that ``ctx`` is past (``if t is not
        None: x = t(x)`` then a use of ``x``): the binding before it reaches the use too."""
        guard = binding.ctx.guard
        if type(guard) is not cst.If or guard.orelse is not None or _tests_tensor(guard.test, binding.key):
            return False  # (`if isinstance(v, torch.Tensor): v = v.item()`: the other path holds no tensor)
        end = self._guard_end.get(id(guard))
        return end is not None and ctx.order > end

    def bindings_in(self, key: str, scope: Scope) -> list[Binding]:
        return scope.bindings.get(key, [])


def _tests_tensor(test, key: str) -> bool:
    """Does an ``if`` test ask whether ``key`` is a tensor: ``isinstance(key, torch.Tensor)``,
    ``torch.is_tensor(key)``, ``hasattr(key, "item")``?"""
    for node in iter_expression_nodes(test):
        if type(node) is not cst.Call or not node.args or dotted_name(node.args[0].value) != key:
            continue
        name = dotted_name(node.func) or ""
        if name in ("isinstance", "hasattr", "torch.is_tensor", "is_tensor", "th.is_tensor"):
            return True
    return False
