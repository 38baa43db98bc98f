"""Graph attachment: which values are still attached to the autograd graph, what reaches a
`backward()` and what a function returns."""

from __future__ import annotations


from torchlint.lazy import cst
from torchlint.analysis.arguments import passed_arguments
from torchlint.analysis.vocabulary import COUNT_WORDS, name_words, NOT_FORWARD_METHOD_RE, BACKWARD_FUNCTIONS, DETACHING_METHODS, GradMode, LOSS_FUNCTIONAL_RE, NON_DIFFERENTIABLE_METHODS, NON_GRAPH_ATTRIBUTES, PASS_THROUGH_BUILTINS, TORCH_NON_DIFFERENTIABLE, TORCH_VALUES_INDICES
from torchlint.analysis.syntax import _tensor_operand_keys, call_arguments, empty_container, parameter_node, call_name, dotted_name, iter_expression_nodes, last_part, mentioned_keys, training_test
from torchlint.analysis.scopes import Binding, Context, Scope


# A loss's bookkeeping, not a loss function: `loss_meter(...)`, `loss_history(...)`.
LOSS_BOOKKEEPING_WORDS = frozenset({
    "meter", "meters", "history", "log", "logger", "tracker", "avg", "average", "record", "records",
    "str", "name", "names", "weight", "weights", "scale", "scaler", "value", "values", "item", "items",
    "list", "dict", "sum", "total", "hist", "buffer", "plot", "print", "fmt", "format",
})


# Expressions that compute a tensor: a literal or a name bound before is not what backward() took.
BACKPROPAGATED_VALUE_TYPES = ("Call", "UnaryOperation", "BinaryOperation", "Subscript", "Attribute")
LOSS_CALL_WORDS = frozenset({"loss", "losses", "nll", "elbo", "objective", "forward"})


class AttachmentQueries:
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

    def backward_roots(self, scope: Scope) -> frozenset[str]:
        """Names that a ``backward()`` in this scope is called on directly: ``loss.backward()``,
        ``accelerator.backward(loss)``, ``scaler.scale(loss).backward()``,
        ``torch.autograd.grad(loss, ...)``. Such a name certainly holds a graph-attached tensor."""
        if "roots" in scope._memo:
            return scope._memo["roots"]
        roots: set[str] = set()
        sites: dict[str, list] = {}  # a name backpropagated directly -> the contexts where it is
        scope._memo["root sites"] = sites
        if not (self.may_contain("backward") or self.may_contain("autograd") or self.may_contain(".step(")
                or self.may_contain("scaler(")):
            scope._memo["roots"] = frozenset()
            return scope._memo["roots"]
        for stmt, stmt_ctx in scope.statements:
            for call in self.calls_in(stmt):
                name = call_name(call)
                positional = call_arguments(call)
                if (name == "step" or "scaler" in (name or "").lower()) and self.steps_on_a_loss(call, stmt_ctx):
                    operand = positional[0]  # self.optim.step(loss): the wrapper backpropagates it
                elif name in BACKWARD_FUNCTIONS:
                    # accelerator.backward(loss) / self.manual_backward(loss): the argument;
                    # loss.backward() / scaler.scale(loss).backward(): the receiver
                    if positional:
                        operand = positional[0]
                    elif type(call.func) is cst.Attribute:
                        operand = call.func.value
                    else:
                        continue
                elif name == "grad" and positional and self.qualified_name(call.func) == "torch.autograd.grad":
                    operand = positional[0]
                else:
                    continue
                for key in _tensor_operand_keys(operand):
                    roots.add(key)
                    sites.setdefault(key, []).append(stmt_ctx)
        # `loss = torch.mean(losses); loss.backward()`: the per-sample losses hold the graph too
        pending = list(roots)
        while pending:
            for binding in scope.bindings.get(pending.pop(), ()):
                source = _reduced_source(binding.value) if binding.kind == "assign" and not binding.element else None
                if source is not None and source not in roots:
                    roots.add(source)
                    pending.append(source)
        result = frozenset(roots)
        scope._memo["roots"] = result
        return result

    def backpropagated_keys(self, scope: Scope) -> frozenset[str]:
        """Names whose value reaches a ``backward()`` in this scope: the roots and, transitively,
        the names their bindings were computed from (``loss = total / n`` puts ``total`` in)."""
        if "backprop" not in scope._memo:
            scope._memo["backprop"] = self._sources_closure(self.backward_roots(scope), scope)
        return scope._memo["backprop"]

    def in_eval_branch(self, stmt, ctx: Context) -> bool:
        """Is ``stmt`` on the evaluation side of its innermost ``if`` on a module's ``training``
        flag (the body of ``if not self.training:``, the else of ``if self.training:``)?"""
        guard = ctx.guard
        if type(guard) is not cst.If:
            return False
        negated = training_test(guard.test)
        if negated is None:
            return False
        body = guard.body.body
        in_body = any(
            line is stmt or (type(line) is cst.SimpleStatementLine and any(small is stmt for small in line.body))
            for line in body
        )
        return in_body == negated

    def returned_keys(self, scope: Scope) -> frozenset[str]:
        """Names whose undetached value reaches a return or yield of the function, directly
        (``return feats``) or through other bindings (``out = torch.cat(feats); return out``)."""
        if "returned_keys" not in scope._memo:
            roots = set()
            for value in self.returned_expressions(scope):
                roots.update(mentioned_keys(value, skip_detached=True))
            scope._memo["returned_keys"] = self._sources_closure(roots, scope)
        return scope._memo["returned_keys"]

    def reaches_backward(self, key: str, ctx: Context) -> bool:
        """Does ``key`` feed a backward() in its function, or, for ``self.x``, in any method of
        the class (a meta-learning strategy that stores losses and differentiates them later)?"""
        if key in self.backpropagated_keys(ctx.scope):
            return True
        class_scope = ctx.scope.class_scope
        if not key.startswith("self."):
            # a global, or an attribute of a shared object (`policy.saved_log_probs`): a
            # backward() in another function of the module may consume it (REINFORCE)
            binding = self.lookup(key.partition(".")[0], ctx)
            if "." in key or (binding is not None and binding.ctx.scope is self.module_scope):
                return any(
                    key in self.backpropagated_keys(scope)
                    for scope in self.scopes.values() if scope.kind == "function" and scope is not ctx.scope
                )
            return False
        if class_scope is None:
            return False
        return any(
            key in self.backpropagated_keys(method)
            for method in self.scopes.values()
            if method.kind == "function" and method.class_scope is class_scope
        )

    def _sources_closure(self, roots, scope: Scope) -> frozenset[str]:
        pending = list(roots)
        reached: set[str] = set()
        while pending:
            key = pending.pop()
            if key in reached:
                continue
            reached.add(key)
            for binding in scope.bindings.get(key, ()):
                if binding.kind in ("assign", "for") and binding.value is not None:
                    pending.extend(mentioned_keys(binding.value, skip_detached=True))
                elif binding.kind == "augassign":
                    pending.extend(mentioned_keys(binding.value.value, skip_detached=True))
            for value in scope.stores.get(key, ()):
                pending.extend(mentioned_keys(value, skip_detached=True))
        return frozenset(reached)

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

    def attached_if_calls_are(self, calls, expr, ctx: Context) -> bool:
        """``is_attached`` under the hypothesis that ``calls`` return attached values: a forward
        pass through an object torchlint cannot type (``self.q.sample_and_log_prob(n)``)."""
        saved = self._assumed_attached_calls, self._attached_memo
        self._assumed_attached_calls, self._attached_memo = frozenset(id(call) for call in calls), {}
        try:
            return self.is_attached(expr, ctx)
        finally:
            self._assumed_attached_calls, self._attached_memo = saved

    def _attached(self, expr, ctx: Context) -> bool:
        kind = type(expr)
        if kind is cst.Name:
            return any(self._binding_attached(binding) for binding in self.reaching_bindings(expr.value, ctx))
        if kind is cst.Attribute:
            if expr.attr.value in NON_GRAPH_ATTRIBUTES:
                return False
            key = dotted_name(expr)
            if key is not None:
                bindings = self.reaching_bindings(key, ctx)
                if bindings:
                    return any(self._binding_attached(binding) for binding in bindings)
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
            # `loss if isinstance(loss, float) else loss.item()`: the test says which arm is a number
            body = None if _is_number_test(expr.test, expr.body) else expr.body
            orelse = None if _is_number_test(expr.test, expr.orelse, negated=True) else expr.orelse
            return (body is not None and self._attached(body, ctx)) or (orelse is not None and self._attached(orelse, ctx))
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
            if binding.element and value is binding.value and type(value) is cst.Call:
                callee = self.called_function(value, ctx) or self._called_instance_method(value, ctx)
                if callee is not None:  # loss, metrics = self.get_batch_loss_metrics(...)
                    return self.returned_element_attached(callee, binding.element[0], value, ctx) or (
                        self.binding_backpropagated(binding))
                words = name_words(last_part(binding.key))
                if words and words[-1].lower() in COUNT_WORDS:
                    return False  # `loss, filtered_size = criterion(...)`: the count beside the loss
            if self._attached(value, ctx):
                return True
            if empty_container(value) and self._container_holds_attached(binding):
                return True
            # backward() is called on this name: the value is attached, whatever computed it
            # (``loss = -F.logsigmoid(r).mean()`` of rewards from a call torchlint cannot read)
            if type(value).__name__ in BACKPROPAGATED_VALUE_TYPES and self.binding_backpropagated(binding):
                return True
            # `batch_loss = self.model.get_loss_for_batch(batch)`, scaled and then backpropagated:
            # a call that says it computes a loss, whose value reaches a backward()
            return type(value) is cst.Call and bool(LOSS_CALL_WORDS & set(name_words(call_name(value) or ""))) \
                and binding.key in self.backpropagated_keys(binding.ctx.scope)
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
            if self._tensor_hypothesis is not None and binding.ctx.scope is self._tensor_hypothesis:
                return binding.key not in ("self", "cls")
            return self.binding_backpropagated(binding) or self.argument_attached(binding) or self.forward_hook_tensor(binding)
        return False

    def _container_holds_attached(self, binding: Binding) -> bool:
        """``chunks = []`` filled by ``chunks.append(model(x))`` (or ``d[k] = out``) in the same
        function: the list carries the graph into ``torch.cat(chunks)`` and whatever it is
        returned or stored into."""
        contexts = self._store_ctx
        return any(
            id(value) in contexts and self._attached(value, contexts[id(value)])
            for value in binding.ctx.scope.stores.get(binding.key, ())
        )

    def binding_backpropagated(self, binding: Binding) -> bool:
        """Is the value this binding gives its name the one a ``backward()`` runs on? Where the
        name is backpropagated directly, the binding must reach one of those calls (the training
        step's ``loss`` says nothing of an evaluation loop's ``loss = loss.detach()``)."""
        scope = binding.ctx.scope
        if binding.key not in self.backward_roots(scope):
            return False
        sites = scope._memo.get("root sites", {}).get(binding.key)
        if not sites:
            return True  # backpropagated through what it was reduced into
        for site in sites:
            if site.order <= binding.ctx.order:
                # only the next pass of a loop around both can bring the binding to the call,
                # unless the pass binds the name afresh before the call (in that loop's body, or
                # in the inner loop that makes the call: an epoch's training batches rebind `loss`)
                loops = [loop for loop in site.visible_loops if loop.contains(binding.ctx.order)]
                if loops and not any(
                        loops[-1].contains(earlier.ctx.order) and earlier.ctx.order < site.order
                        and earlier.ctx.loop in (loops[-1], site.loop) and earlier.ctx.guard is None
                        for earlier in scope.bindings.get(binding.key, ())):
                    return True
                continue
            if any(reaching is binding for reaching in self.reaching_bindings(binding.key, site)):
                return True
        return False

    @staticmethod
    def parameter_default(binding: Binding | None):
        """The default value of the function parameter ``binding`` binds, or None."""
        if binding is None or binding.kind != "param" or type(binding.stmt) is not cst.FunctionDef:
            return None
        param = parameter_node(binding)
        return param.default if param is not None else None

    def bound_value(self, binding: Binding):
        """The expression an assignment gives its target (the matching element when the target
        unpacks a tuple); None when it is not an assignment or the element is unknown."""
        if binding.kind != "assign" or binding.value is None:
            return None
        value = self._element_of(binding.value, binding.element)
        if value is None or (binding.element and value is binding.value):
            return None
        return value

    def _called_instance_method(self, call, ctx: Context):
        """The ``__call__`` of a class of this module that the call runs on an instance of it
        (``criterion = SemiLoss()``, then ``criterion(logits, targets)``), or None."""
        if type(call.func) not in (cst.Name, cst.Attribute):
            return None
        class_scope = self.instance_class(call.func, ctx, foreign=False)
        binding = self.lookup(call.func.value, ctx) if class_scope is None and type(call.func) is cst.Name else None
        if binding is not None and binding.kind == "param" and binding.ctx.scope.kind == "function":
            # `train(..., criterion, ...)` whose every caller hands it `train_criterion = SemiLoss()`
            function = binding.ctx.scope
            found = set()
            for caller, caller_ctx in self.callers_of(function):
                argument = passed_arguments(caller, function).get(binding.key)
                handed = self.instance_class(argument, caller_ctx, foreign=False) \
                    if type(argument) in (cst.Name, cst.Attribute) else None
                found.add(id(handed) if handed is not None else None)
                class_scope = handed
            if len(found) != 1 or None in found:
                class_scope = None
        if class_scope is None or self._local_class_is_module(class_scope.name, set()):
            return None  # (a module's call runs its forward, with hooks)
        return self.method_of(class_scope, "__call__", set(), foreign=False)

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
        if id(call) in self._assumed_attached_calls:
            return True
        func = call.func
        qualified = self.qualified_name(func)
        if qualified is not None and qualified.startswith("torch."):
            return self._torch_call_attached(qualified, call, ctx)
        if "state_dict" in (dotted_name(func) or ""):
            return False  # `get_full_optimizer_state_dict(model, opt)`: weights' values, detached
        if type(func) is cst.Attribute:
            method = func.attr.value
            if method in DETACHING_METHODS or method in NON_DIFFERENTIABLE_METHODS:
                return False
            if self._attached(func.value, ctx):
                return True  # a non-detaching tensor method: .cpu(), .to(), .mean(), .view() ...
            if method == "forward" and self.is_module(func.value, ctx):
                return True
            if self._module_method_in_training(func, ctx):
                return True
        elif type(func) is cst.Name:
            name = func.value
            if name in PASS_THROUGH_BUILTINS and name not in self.imports:
                return any(self._attached(arg.value, ctx) for arg in call.args)
        return self.is_module(func, ctx) or self.call_returns_attached(call, ctx) or self._loss_call_attached(call, ctx)

    def _loss_call_attached(self, call, ctx: Context) -> bool:
        """``self.loss(prediction, y)``, ``self.criterion_fn(out, t)``: a callable named like a loss,
        applied to an attached value, returns an attached loss."""
        key = dotted_name(call.func)
        if key is None:
            return False
        words = set(name_words(last_part(key)))
        if not words & {"loss", "criterion"} or words & LOSS_BOOKKEEPING_WORDS:
            return False
        return any(self._attached(arg.value, ctx) for arg in call.args)

    def _module_method_in_training(self, func, ctx: Context) -> bool:
        """``policy.evaluate_actions(obs)``, ``self.model.calculate_loss(batch)``: a computing
        method of a module (not its API: ``parameters()``, ``get_*``, ``generate`` ...), called
        in a loop that backpropagates. Outside training loops such methods mostly return
        numbers or run without grad (``model.encode(...)``), so they do not count there."""
        receiver = func.value
        if type(receiver) is cst.Name and receiver.value == "self":
            return False
        if NOT_FORWARD_METHOD_RE.match(func.attr.value):
            return False
        loop = ctx.loop
        if loop is None:
            return False
        training = self.loop_backpropagates(loop) or (
            loop.implicit is not None  # a helper the training loop calls: `loss = self.loss(x)`
            and any(caller.loop is not None and self.loop_backpropagates(caller.loop) for _, caller in loop.callers)
        )
        return training and self.is_module(receiver, ctx)

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


REDUCTIONS = frozenset({"mean", "sum", "nanmean", "nansum"})


def _reduced_source(value) -> str | None:
    """``x`` when ``value`` is ``x.mean()``, ``torch.sum(x)``, ``x.sum() / n`` or ``0.5 * x``: a
    value computed from the one tensor ``x`` alone."""
    kind = type(value)
    if kind is cst.BinaryOperation and type(value.operator) in (cst.Divide, cst.Multiply):
        literal = (cst.Integer, cst.Float)
        if type(value.right) in literal or type(value.right) is cst.Call and call_name(value.right) == "len":
            return _reduced_source(value.left) or (value.left.value if type(value.left) is cst.Name else None)
        if type(value.left) in literal:
            return _reduced_source(value.right) or (value.right.value if type(value.right) is cst.Name else None)
        return None
    if kind is not cst.Call or type(value.func) is not cst.Attribute or value.func.attr.value not in REDUCTIONS:
        return None
    receiver = value.func.value
    if type(receiver) is cst.Name and receiver.value == "torch":
        arguments = call_arguments(value)
        return arguments[0].value if arguments and type(arguments[0]) is cst.Name else None
    return receiver.value if type(receiver) is cst.Name and receiver.value != "self" else None


NUMBER_TYPES = frozenset({"float", "int", "numbers.Number", "Number", "numbers.Real", "Real"})


def _is_number_test(test, value, negated: bool = False) -> bool:
    """Is ``test`` ``isinstance(value, float)`` (or ``not isinstance(...)`` for ``negated``,
    the ``else`` arm): on that arm ``value`` is a Python number?"""
    if negated:
        if type(test) is not cst.UnaryOperation or type(test.operator) is not cst.Not:
            return False
        test = test.expression
    if type(test) is not cst.Call or dotted_name(test.func) != "isinstance" or len(test.args) != 2:
        return False
    key = dotted_name(value)
    if key is None or dotted_name(test.args[0].value) != key:
        return False
    kinds = test.args[1].value
    names = [dotted_name(element.value) for element in kinds.elements] if type(kinds) is cst.Tuple else [dotted_name(kinds)]
    return bool(names) and all(name in NUMBER_TYPES for name in names)
