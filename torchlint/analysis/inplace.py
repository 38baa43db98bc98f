"""In-place mutation: which tensors a statement changes in place, and which are leaves that
require grad."""

from __future__ import annotations

from collections import defaultdict
from torchlint.lazy import cst
from torchlint.analysis.vocabulary import BACKWARD_FUNCTIONS, PARAMETERISED_LAYERS, PARAMETER_CLASSES
from torchlint.analysis.syntax import _call_chain, _parameters_owner, _requires_grad_flag, call_arguments, call_name, dotted_name, is_inplace_method, iter_expression_nodes, last_part, storage_base, strip_pass_through, strip_views
from torchlint.analysis.scopes import Binding, Context, Scope
from torchlint.analysis.syntax import keyword_argument
from torchlint.analysis.arguments import passed_arguments


class InPlaceQueries:
    # ------------------------------------------------------------------ in-place mutation

    def mutated_operands(self, stmt) -> list:
        """The tensors a statement modifies in place: receivers of in-place methods in the
        statement's own call chain (``w.add_(1)``, ``w[0].zero_()``, ``y = x.mul_(2).add_(1)``;
        calls buried in other calls' arguments are not looked into, which keeps this a cheap
        statement-level check), first arguments of ``torch.<op>_`` functions
        (``torch.relu_(y)``; ``torch.nn.init.*_`` are not included), the base of an item
        assignment (``w[i] = v`` gives ``w``) and the target of an augmented assignment.
        Memoised per statement: the four in-place rules each ask for every statement."""
        memo = self._mutated_memo
        known = memo.get(id(stmt))
        if known is not None and known[0] is stmt:  # (the statement is kept: its id stays its own)
            return list(known[1])
        operands = self._find_mutated_operands(stmt)
        memo[id(stmt)] = (stmt, operands)
        return list(operands)

    def _find_mutated_operands(self, stmt) -> list:
        operands = []
        kind = type(stmt)
        if kind is cst.AugAssign:
            target = stmt.target
            operands.append(storage_base(target) if type(target) is cst.Subscript else target)
        elif kind is cst.Assign:
            operands.extend(storage_base(t.target) for t in stmt.targets if type(t.target) is cst.Subscript)
        value = getattr(stmt, "value", None) if kind in (cst.Expr, cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Return) else None
        for call in _call_chain(value):
            func = call.func
            if type(func) is not cst.Attribute or not is_inplace_method(func.attr.value):
                continue
            qualified = self.qualified_name(func) or ""
            if not qualified.startswith("torch."):
                operands.append(func.value)  # w.add_(1), also for an imported `w`
            elif qualified.count(".") == 1 and call_arguments(call):
                operands.append(call_arguments(call)[0])  # torch.relu_(y); not torch.nn.init.*_
        for call in _call_chain(value):  # torch.arange(n, out=w): written in place
            out = keyword_argument(call, "out") if call.args else None
            if out is not None and type(out) is not cst.Tuple and (self.qualified_name(call.func) or "").startswith("torch."):
                operands.append(out)
        return operands

    # ------------------------------------------------------------------ leaves that require grad

    def is_grad_leaf(self, expr, ctx: Context) -> bool:
        """Is ``expr`` at ``ctx`` a leaf tensor that requires grad, or a view of one (``w[0]``,
        ``w.view(-1)``)? In-place ops on those raise outside ``no_grad``.

        Leaves: ``nn.Parameter(...)`` (any spelling; ``self.w`` when the class assigns one to it),
        ``torch.*(..., requires_grad=True)``, ``x.requires_grad_()`` as a call or an earlier
        statement, ``layer.weight`` / ``layer.bias`` of a ``torch.nn`` layer or of a model's
        submodule (``model.emb.weight``), the loop variable over
        ``m.parameters()`` / ``m.named_parameters()`` / an optimizer's ``group["params"]``. Not
        ``w.data``, ``w.grad``, ``w.detach()``, anything computed from a leaf, nor anything the
        module switches ``requires_grad`` off for (``ema.requires_grad_(False)``, any flag not
        literally True)."""
        expr = strip_views(expr)
        if expr is None:
            return False
        if type(expr) is cst.Call:
            return self._creates_grad_leaf(expr, ctx)
        key = dotted_name(expr)
        if key is None or self._grad_switched_off(key):
            return False
        if any(self._binding_grad_leaf(binding) for binding in self._visible_bindings(key, ctx)):
            return True
        if type(expr) is cst.Attribute and expr.attr.value in ("weight", "bias"):
            # model.fc.weight: a torch layer, or a submodule of a model (`model.emb`)
            return self._is_parameterised_layer(expr.value, ctx) or self._is_submodule(expr.value, ctx)
        return self._grad_switched_on(key, ctx) or self._loop_variable_with_grad(key, ctx)

    def _loop_variable_with_grad(self, key: str, ctx: Context) -> bool:
        """``for param in params: param -= lr * param.grad``: a loop variable whose ``.grad`` the
        loop reads is a leaf that requires grad (only such tensors get a ``.grad``)."""
        if "." in key or ctx.scope.class_scope is not None:
            return False  # an optimizer class's step(): its caller may hold no_grad (d2l's Trainer)
        binding = self.lookup(key, ctx)
        if binding is None or binding.kind != "for" or binding.element:
            return False
        memo = ctx.scope._memo.setdefault("grad_read_keys", None)
        if memo is None:
            memo = ctx.scope._memo["grad_read_keys"] = frozenset(
                dotted_name(node.value)
                for stmt, stmt_ctx in ctx.scope.statements if stmt_ctx.scope is ctx.scope
                for expr in self.own_expressions(stmt) for node in iter_expression_nodes(expr)
                if type(node) is cst.Attribute and node.attr.value == "grad"
            )
        return key in memo

    def _visible_bindings(self, key: str, ctx: Context) -> list[Binding]:
        """The binding of ``key`` at ``ctx`` in its own scope; for ``self.x`` without one, every
        assignment to it in the class (``self.weight = nn.Parameter(...)`` in ``__init__``)."""
        scope = ctx.scope
        latest = None
        for binding in scope.bindings.get(key, ()):
            if binding.ctx.order >= ctx.order:
                break
            latest = binding
        if latest is not None:
            return [latest]
        if key.startswith("self.") and scope.class_scope is not None:
            return [b for b in scope.class_scope.bindings.get(key, ()) if b.kind == "assign"]
        binding = self.lookup(key, ctx)
        return [binding] if binding is not None else []

    def _binding_grad_leaf(self, binding: Binding) -> bool:
        memo = self._grad_leaf_memo
        if id(binding) not in memo:
            memo[id(binding)] = False  # cycles resolve to "not a leaf"
            memo[id(binding)] = self._compute_binding_grad_leaf(binding)
        return memo[id(binding)]

    def _compute_binding_grad_leaf(self, binding: Binding) -> bool:
        kind = binding.kind
        if kind == "augassign":  # updated in place: still the same leaf
            return any(self._binding_grad_leaf(b) for b in self._visible_bindings(binding.key, binding.ctx))
        if kind == "for":
            return self._iterates_parameters(binding.value, binding.element, binding.ctx)
        value = self.bound_value(binding)
        if type(value) is cst.Call and strip_views(value) is value:
            return self._creates_grad_leaf(value, binding.ctx)
        if type(value) is cst.Call:  # b = self.conv.bias.view(3, -1): a view of the leaf
            return self.is_grad_leaf(value, binding.ctx)
        if type(value) in (cst.Name, cst.Attribute):  # w = self.weight
            return self.is_grad_leaf(value, binding.ctx)
        return False

    def _creates_grad_leaf(self, call, ctx: Context) -> bool:
        func = call.func
        if type(func) is cst.Attribute and func.attr.value == "requires_grad_":
            # a tensor outside the graph becomes a leaf; an attached one stays a non-leaf
            return _requires_grad_flag(call, 0, True) is True and not self.is_attached(func.value, ctx)
        qualified = self.qualified_name(func)
        if qualified is None:
            return False
        if qualified in PARAMETER_CLASSES:
            return _requires_grad_flag(call, 1, True) is True
        if qualified.startswith("torch.") and not qualified.startswith("torch.nn."):
            return _requires_grad_flag(call, None, False) is True  # torch.zeros(..., requires_grad=True)
        return False

    def _iterates_parameters(self, iterable, element: tuple[int, ...], ctx: Context) -> bool:
        """Does a loop target at ``element`` of ``for ... in iterable`` receive parameters?"""
        if type(iterable) is cst.Subscript:  # for p in group["params"], group from .param_groups
            index = iterable.slice[0].slice if len(iterable.slice) == 1 else None
            if element or type(index) is not cst.Index or type(index.value) is not cst.SimpleString:
                return False
            if index.value.value[1:-1] != "params":
                return False
            key = dotted_name(iterable.value)
            binding = self.lookup(key, ctx) if key else None
            if binding is not None and binding.kind == "param":
                return True  # update_slow(self, group): a param group handed in
            return (binding is not None and binding.kind == "for" and not binding.element
                    and type(binding.value) is cst.Attribute and binding.value.attr.value == "param_groups")
        if type(iterable) is not cst.Call:
            return False
        func, arguments = iterable.func, call_arguments(iterable)
        if type(func) is cst.Attribute and func.attr.value in ("parameters", "named_parameters"):
            if element != (() if func.attr.value == "parameters" else (1,)):
                return False
            owner = dotted_name(func.value)
            return owner is None or not self._grad_switched_off(owner)
        name = dotted_name(func)
        if name in ("list", "tuple", "reversed", "sorted") and arguments:
            return self._iterates_parameters(arguments[0], element, ctx)
        if name == "filter" and len(arguments) == 2:
            return self._iterates_parameters(arguments[1], element, ctx)
        if name in ("chain", "itertools.chain") and arguments:
            return all(self._iterates_parameters(argument, element, ctx) for argument in arguments)
        if name == "enumerate" and arguments and element[:1] == (1,):
            return self._iterates_parameters(arguments[0], element[1:], ctx)
        if name == "zip" and element and 0 <= element[0] < len(arguments):
            return self._iterates_parameters(arguments[element[0]], element[1:], ctx)
        return False

    def _is_parameterised_layer(self, expr, ctx: Context) -> bool:
        key = dotted_name(expr)
        if key is None:
            return False
        for binding in self._visible_bindings(key, ctx):
            value = binding.value
            if binding.kind == "assign" and not binding.element and type(value) is cst.Call:
                qualified = self.qualified_name(value.func) or ""
                if qualified.startswith("torch.nn.") and last_part(qualified) in PARAMETERISED_LAYERS:
                    return True
            if binding.kind == "for" and self._iterates_modules(binding.value, binding.element, binding.ctx):
                return True  # for conv in head.convs: conv.bias
        return False

    def _is_submodule(self, expr, ctx: Context) -> bool:
        """``model.emb`` in ``model.emb.weight``: an attribute of a model is a layer, whose
        ``weight`` and ``bias`` are parameters (``self.x`` inside a module: only with evidence)."""
        if type(expr) is not cst.Attribute:
            return False
        owner = expr.value
        if type(owner) is cst.Name and owner.value == "self":
            return False  # self.conv.weight: the class's own layers, known from __init__ or not at all
        return self.is_module(owner, ctx)

    def _grad_switched_off(self, key: str) -> bool:
        """Does the module set ``requires_grad`` to anything but a literal True on ``key`` or on
        what contains it (``ema.requires_grad_(False)`` covers ``ema.fc.weight``)? Flow-
        insensitive on purpose: a frozen copy is usually frozen once, far from its updates."""
        switches = self._requires_grad_switches()
        parts = key.split(".")
        return any(
            not enabled
            for end in range(1, len(parts) + 1)
            for _, enabled in switches.get(".".join(parts[:end]), ())
        )

    def _grad_switched_on(self, key: str, ctx: Context) -> bool:
        """``x.requires_grad_()`` / ``x.requires_grad = True`` earlier in the same scope, on a
        value that was not already part of a graph."""
        bindings = self._visible_bindings(key, ctx)
        for switch_ctx, enabled in self._requires_grad_switches().get(key, ()):
            if not enabled or switch_ctx.scope is not ctx.scope or switch_ctx.order >= ctx.order:
                continue
            if not any(b.ctx.scope is ctx.scope and b.ctx.order > switch_ctx.order for b in bindings) and not any(
                self._binding_attached(b) for b in bindings
            ):
                return True
        return False

    def _requires_grad_switches(self) -> dict[str, list[tuple[Context, bool]]]:
        """Every ``k.requires_grad_(flag)`` / ``k.requires_grad = flag`` statement, by ``k``. A
        parameter loop variable switched off also switches off its owner: ``for p in
        ema.parameters(): p.requires_grad = False`` records ``ema``."""
        if self._switches is not None:
            return self._switches
        switches: dict[str, list[tuple[Context, bool]]] = defaultdict(list)
        for stmt, ctx in self.statements_by_type.get("Expr", ()):
            value = stmt.value
            if type(value) is cst.Call and call_name(value) == "requires_grad_" and type(value.func) is cst.Attribute:
                key = dotted_name(strip_pass_through(value.func.value))
                if key is not None:
                    switches[key].append((ctx, _requires_grad_flag(value, 0, True) is True))
        for stmt, ctx in self.statements_by_type.get("Assign", ()):
            for target in stmt.targets:
                target = target.target
                if type(target) is cst.Attribute and target.attr.value == "requires_grad":
                    key = dotted_name(target.value)
                    enabled = type(stmt.value) is cst.Name and stmt.value.value == "True"
                elif type(stmt.value) is cst.Call and call_name(stmt.value) == "requires_grad_":
                    key = dotted_name(target)  # ema = deepcopy(model).requires_grad_(False)
                    enabled = _requires_grad_flag(stmt.value, 0, True) is True
                else:
                    continue
                if key is not None:
                    switches[key].append((ctx, enabled))
        for key, entries in list(switches.items()):
            for ctx, enabled in entries:
                binding = self.lookup(key, ctx) if not enabled and "." not in key else None
                # (`for n, p in self.named_parameters(): if n.startswith(prefix): p.requires_grad
                # = False` freezes some parameters, not the owner)
                if binding is not None and binding.kind == "for" and ctx.guard is None:
                    owner = _parameters_owner(binding.value)
                    if owner is not None:
                        switches[owner].append((ctx, False))
        self._switches = switches
        self._helper_switches(switches)
        return switches

    def _helper_switches(self, switches) -> None:
        """``toggle_grad(model_tgt, False)`` / CycleGAN's ``set_requires_grad(nets, False)``: a
        function of this module that switches ``requires_grad`` of every parameter of one of its
        parameters to another of its parameters (``for p in model.parameters():
        p.requires_grad_(flag)``) switches, at each call, the module the call hands it, as the
        call's literal says."""
        if self.source is not None and "requires_grad" not in self.source:
            return
        for stmt, ctx in [*self.statements_by_type.get("Expr", ()), *self.statements_by_type.get("Assign", ())]:
            scope = ctx.scope
            if scope.kind != "function":
                continue
            if type(stmt) is cst.Expr and type(stmt.value) is cst.Call and call_name(stmt.value) == "requires_grad_" \
                    and type(stmt.value.func) is cst.Attribute and call_arguments(stmt.value):
                switched, flag = stmt.value.func.value, call_arguments(stmt.value)[0]  # p.requires_grad_(flag)
            elif type(stmt) is cst.Assign and len(stmt.targets) == 1 and type(stmt.targets[0].target) is cst.Attribute \
                    and stmt.targets[0].target.attr.value == "requires_grad":
                switched, flag = stmt.targets[0].target.value, stmt.value  # p.requires_grad = flag
            else:
                continue
            params = [param.name.value for param in (*scope.node.params.posonly_params, *scope.node.params.params)]
            if type(switched) is not cst.Name or type(flag) is not cst.Name or flag.value not in params:
                continue
            binding = self.lookup(switched.value, ctx)
            owner = _parameters_owner(binding.value) if binding is not None and binding.kind == "for" else None
            listed = False
            if owner is not None and owner not in params:
                # `for net in nets: for p in net.parameters(): ...`: the nets handed over
                outer = self.lookup(owner, binding.ctx)
                if outer is None or outer.kind != "for" or outer.element or type(outer.value) is not cst.Name:
                    continue
                owner, listed = outer.value.value, True
            if owner not in params:
                continue
            for call, call_ctx in self.callers_of(scope):
                passed = passed_arguments(call, scope)
                module, literal = passed.get(owner), passed.get(flag.value)
                if module is None or type(literal) is not cst.Name or literal.value not in ("True", "False"):
                    continue
                modules = [element.value for element in module.elements] \
                    if listed and type(module) in (cst.List, cst.Tuple) else [module]
                for each in modules:
                    key = dotted_name(each)
                    if key is not None:
                        switches[key].append((call_ctx, literal.value == "True"))

    def last_backward_order(self, scope: Scope) -> int:
        """Order of the last statement of the scope that calls ``backward()`` (or
        ``torch.autograd.grad``); 0 when none does."""
        if "last_backward" not in scope._memo:
            last = 0
            for stmt, ctx in scope.statements:
                if ctx.scope is scope and any(
                    call_name(call) in BACKWARD_FUNCTIONS
                    or self.qualified_name(call.func) == "torch.autograd.grad"
                    for call in self.calls_in(stmt)
                ):
                    last = ctx.order
            scope._memo["last_backward"] = last
        return scope._memo["last_backward"]



def parameters_owner(iterable, element: tuple[int, ...]) -> str | None:
    """The module whose parameters a loop target at ``element`` of ``for ... in iterable``
    receives: ``model`` for ``for p in model.parameters()``, ``for n, p in
    model.named_parameters()``, ``for a, b in zip(m1.parameters(), m2.parameters())`` (``m2``
    for ``b``), through ``list`` / ``enumerate`` / ``filter``; None when the loop does not go
    over one module's parameters (an optimizer's ``group["params"]``, a plain list)."""
    if type(iterable) is not cst.Call:
        return None
    func, arguments = iterable.func, call_arguments(iterable)
    if type(func) is cst.Attribute and func.attr.value in ("parameters", "named_parameters"):
        if element != (() if func.attr.value == "parameters" else (1,)):
            return None
        return dotted_name(func.value)
    name = dotted_name(func)
    if name in ("list", "tuple", "reversed", "sorted") and arguments:
        return parameters_owner(arguments[0], element)
    if name == "filter" and len(arguments) == 2:
        return parameters_owner(arguments[1], element)
    if name == "enumerate" and arguments and element[:1] == (1,):
        return parameters_owner(arguments[0], element[1:])
    if name == "zip" and element and 0 <= element[0] < len(arguments):
        return parameters_owner(arguments[element[0]], element[1:])
    return None


# Tensor methods that return a copy on another device or dtype (not a view). `.float()` and
# `.cpu()` are left out: on the float32 CPU tensor a factory makes by default they return the
# tensor itself, which stays a leaf.
COPYING_MOVES = frozenset({"cuda", "to", "double", "half", "bfloat16", "type", "xpu", "npu", "mps", "musa"})


class MovedLeafQueries:
    def moved_grad_leaf(self, value, ctx: Context):
        """The moving call when ``value`` is a tensor created with ``requires_grad=True`` (or
        ``.requires_grad_()``) and then copied to a device or dtype in the same expression:
        ``torch.randn(3, requires_grad=True).cuda()``, ``.to(device)``, ``.double()``. The
        result is not a leaf: ``backward()`` fills the ``.grad`` of the discarded original."""
        if type(value) is not cst.Call or type(value.func) is not cst.Attribute:
            return None
        if value.func.attr.value not in COPYING_MOVES:
            return None
        inner = value.func.value
        while type(inner) is cst.Call and type(inner.func) is cst.Attribute and inner.func.attr.value in COPYING_MOVES | {"float"}:
            inner = inner.func.value
        if type(inner) is cst.Name:  # w = Variable(x, requires_grad=True); then w = w.cuda()
            binding = self.lookup(inner.value, ctx)
            if binding is None or binding.kind != "assign" or binding.element or binding.ctx.scope is not ctx.scope:
                return None
            created = binding.value
            if type(created) is not cst.Call or self.moved_grad_leaf(created, binding.ctx) is not None:
                return None
            if keyword_argument(created, "device") is not None:
                return None
            if self._creates_grad_leaf(created, binding.ctx) or (
                    call_name(created) == "Variable" and _requires_grad_flag(created, None, False) is True):
                return value
            return None
        if type(inner) is not cst.Call:
            return None
        device = keyword_argument(inner, "device")
        if device is not None and value.func.attr.value == "to" and len(value.args) == 1 \
                and self.code(value.args[0].value) == self.code(device):
            return None  # created on that device already: `.to()` returns the same leaf
        if self._creates_grad_leaf(inner, ctx) or (
                call_name(inner) == "Variable" and _requires_grad_flag(inner, None, False) is True):
            return value
        return None
