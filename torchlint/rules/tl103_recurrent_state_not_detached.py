from __future__ import annotations

import re

from torchlint.analysis import (
    BACKWARD_FUNCTIONS,
    DETACHING_METHODS,
    key_node,
    strip_pass_through,
    NON_DIFFERENTIABLE_METHODS,
    NON_GRAPH_ATTRIBUTES,
    TORCH_NON_DIFFERENTIABLE,
    Context,
    Loop,
    Scope,
    call_name,
    child_nodes,
    dotted_name,
    iter_expression_nodes,
    last_part,
    mentioned_keys,
)
from torchlint.lazy import cst
from torchlint.fix import Fix, InsertBefore, Replace, torch_name
from torchlint.rule import Rule

# Callees that produce a recurrent state when the analysis does not already know them as modules.
RECURRENT_CALLEE_RE = re.compile(
    r"(?i)^(?!_*(?:get|build|create|load|make|init|update|set|reset|save|copy|wrap)_)"
    r"\w*(?:rnn|lstm|gru|cell|recurrent|model|net|encoder|decoder|policy)s?\d*$"
)
# Helpers not defined in the module whose name says they cut the history (`repackage_hidden`).
DETACHING_HELPER_RE = re.compile(r"(?i)detach|repackage")
FRESH_METHODS = frozenset({"new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"})
COMPREHENSIONS = ("GeneratorExp", "ListComp", "SetComp")
DETACH, FRESH = "detach", "fresh"
# `training_step` runs once per batch, each followed by a backward() (Lightning, HF Trainer): the
# loop that drives it lives in the framework. State re-bound in these hooks is reset per batch.
FRAMEWORK_TRAINING_STEPS = frozenset({"training_step"})
PER_BATCH_HOOKS = frozenset({
    "on_train_batch_start", "on_train_batch_end", "on_before_backward", "on_after_backward",
    "on_before_optimizer_step", "on_before_zero_grad", "optimizer_step", "optimizer_zero_grad",
})


class RecurrentStateNotDetached(Rule):
    """
    ## What it does
    Finds a recurrent state carried from one training iteration to the next and fed back into
    the call that produces it — `out, hidden = rnn(x, hidden)`, `out, (h, c) = lstm(x, (h, c))`,
    `h = cell(x, h)`, or a module that stores `self.hidden` and feeds it back on its next call —
    in a loop that calls `backward()` every iteration, when the loop never re-binds the state to
    a detached value (`h = h.detach()`, `h.detach_()`, `h = h.data`,
    `tuple(v.detach() for v in h)`, a `repackage_hidden`-style helper).

    ## Why is this bad?
    The new state is computed from the old one, so its graph reaches back into every earlier
    iteration. The second `backward()` then walks into the previous iteration's graph, whose
    saved tensors the first `backward()` already freed, and raises "Trying to backward through
    the graph a second time" (measured on an LSTM language model and on a stateful
    `self.hidden` module: both fail on step 2). Adding `backward(retain_graph=True)` silences
    that error but keeps every iteration's graph alive and backpropagates through all of them
    again on every step: on a GRUCell(16, 128) with batch 64, live memory grows by 233,472
    bytes and 16 graph nodes per step, and allocations grow quadratically (117 at 2 steps,
    3,008 at 16), while the early steps' gradients are counted once per later step. With an
    optimizer step between the backward() calls, the third backward() raises "modified by an
    inplace operation" instead: the old graph saved the weights the step changed. Truncated
    backpropagation through time detaches the state once per iteration.

    ## Known problems
    A bare `h.detach()` whose result is discarded is a no-op and does not count as detaching.
    Not reported: loops without `backward()` (generation, evaluation, a time-step loop inside
    `forward()`), one `backward()` after a loop over the whole sequence, a state re-initialised
    in the loop (`hidden = model.init_hidden()`, also on every arm of an `if` or earlier in the
    branch that feeds it), a per-step function's local or parameter (a decoder unrolled over
    one utterance inside `train_batch()`: each call starts afresh; a module handed in and
    rebound, `teacher = freeze(teacher)`), code under `torch.no_grad()`, and a
    `self.hidden` module with any method that detaches the state. The `self.hidden` form is
    reported when a loop in the same file trains an instance of the module without resetting
    it, or in a `training_step` (which the framework calls once per batch, each time with a
    backward) unless a per-batch hook such as `on_train_batch_start` resets it; a library
    module whose training loop lives elsewhere is not reported.
    Helpers defined elsewhere are trusted by their name (`detach`, `repackage`).
    """

    CODE = "TL103"
    NAME = "recurrent-state-not-detached"
    MESSAGE = (
        "`{stmt}` feeds {states} back into the call that produced {them} without detaching, "
        "so each `backward()` reaches into the previous iterations' graph"
    )
    FIX = (
        "cut the history once per iteration before feeding the state back: `{state} = {state}.detach()` "
        "(a tuple of tensors: `{state} = tuple(v.detach() for v in {state})`)"
    )
    AUTOFIX = (
        "Unsafe: detaches each carried state at the top of the loop body (`h = h.detach()`; a "
        "state that may be a tuple or None gets a line handling both), and drops "
        "`retain_graph=True` from the loop's only `backward()`. No fix for a state carried across "
        "calls of a per-step function (no loop in sight)."
    )
    TOKENS = ("backward", "training_step")
    CLAIM = (
        "the bad loop raises \"Trying to backward through the graph a second time\" on its second step, "
        "and with `retain_graph=True` its live memory grows linearly; the fixed loop stays flat"
    )

    INVALID = [
        """\
hidden = model.init_hidden(batch_size)
for x, y in batches:
    optimizer.zero_grad()
    output, hidden = model(x, hidden)  # expect: TL103
    loss = criterion(output, y)
    loss.backward()
    optimizer.step()
""",
        """\
h = torch.zeros(batch, hidden_size)
cell = nn.GRUCell(input_size, hidden_size)
for x, y in stream:
    h = cell(x, h)  # expect: TL103
    h.detach()  # the result is discarded: a no-op
    loss = F.mse_loss(head(h), y)
    loss.backward(retain_graph=True)
    optimizer.step()
""",
        """\
class StatefulLM(pl.LightningModule):
    def training_step(self, batch, batch_idx):
        x, y = batch
        logits, self.hidden = self.model(x, self.hidden)  # expect: TL103
        return F.cross_entropy(logits, y)
""",
    ]
    VALID = [
        """\
hidden = model.init_hidden(batch_size)
for x, y in batches:
    optimizer.zero_grad()
    hidden = repackage_hidden(hidden)
    output, hidden = model(x, hidden)
    loss = criterion(output, y)
    loss.backward()
    optimizer.step()
""",
        """\
for x, y in batches:
    hidden = model.init_hidden(batch_size)
    output, hidden = model(x, hidden)
    criterion(output, y).backward()
    optimizer.step()
""",
        """\
h, c = init_state()
for t in range(seq_len):
    out, (h, c) = lstm(inputs[t], (h, c))
    loss = loss + criterion(out, targets[t])
loss.backward()
""",
        """\
h = torch.zeros(batch, hidden_size)
for x, y in stream:
    h.detach_()
    h = cell(x, h)
    F.mse_loss(head(h), y).backward()
""",
        """\
def train_batch(texts, mels, encoder, decoder, optimizer, multi_gpu=False):
    optimizer.zero_grad()
    memory = encoder(texts)
    if multi_gpu:
        h = decoder.module.init_hidden(texts.size(0))
    else:
        h = decoder.init_hidden(texts.size(0))
    loss = 0
    for t in range(mels.size(1)):  # one utterance's unrolled decoder, backpropagated once
        out, h = decoder(mels[:, t], h, memory)
        loss = loss + F.l1_loss(out, mels[:, t])
    loss.backward()
    optimizer.step()

for epoch in range(epochs):
    for texts, mels in loader:
        train_batch(texts, mels, encoder, decoder, optimizer)
""",
        """\
for z, labels in loader:
    g_loss = -discriminator(generator(z)).mean()
    if diversity_weight > 0:
        fakes = generator(torch.randn_like(z))  # drawn afresh every step
        if use_jpeg:
            fakes = jpeg_decoder(fakes)
        g_loss = g_loss + diversity_weight * fakes.std()
    optimizer.zero_grad()
    g_loss.backward()
    optimizer.step()
""",
        """\
def freeze_net(net):
    for param in net.parameters():
        param.requires_grad = False
    net.eval()
    return net

def distill(edge_net_0, student, loader):
    edge_net_0 = freeze_net(edge_net_0)  # the same module, handed in by every call
    optimizer = torch.optim.Adam(student.parameters())
    for x, y in loader:
        with torch.no_grad():
            soft_targets = edge_net_0(x).softmax(-1)
        loss = F.kl_div(student(x).log_softmax(-1), soft_targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item(), student

for epoch in range(epochs):
    last_loss, student = distill(edge_net_0, student, loader)
""",
    ]

    # ------------------------------------------------------------------ visiting

    def visit_Assign(self, node, ctx: Context) -> None:
        if not ctx.loops and ctx.scope.class_scope is None:
            return  # neither carried across a loop nor stored on a module
        call = _feeding_call(node.value)
        if call is None or not call.args:
            return
        ordered = [key for target in node.targets for key in _target_keys(target.target)]
        targets = set(ordered)
        if not targets:
            return
        if not ctx.loops and not any(key.startswith("self.") for key in targets | _self_arguments(call)):
            return  # outside a loop only a state stored on the module is carried
        fed = set()
        for arg in call.args:
            fed |= self._live_keys(arg.value, ctx)
        found = self._states(targets, fed, node, ctx)
        states = [key for key in dict.fromkeys(ordered) if key in found] + sorted(found - targets)
        # a model refitted and fed back (`mll, model = fit(data, model.state_dict())` in a
        # Bayesian-optimisation loop) is an object, not a recurrent tensor state
        states = [key for key in states if not self.analysis.is_module(key_node(key), ctx)]
        if not states:
            return
        if not self._produces_state(call, ctx) or not self.analysis.grad_enabled(ctx):
            return
        training_loops = [loop for loop in reversed(ctx.loops) if self.analysis.loop_backpropagates(loop)]
        for loop in training_loops:
            carried = [key for key in states if self._carried_through(key, loop, targets, node, ctx)]
            if carried:
                self._report(node, carried, loop, self._autofix(node, carried, loop, ctx))
                return
        if training_loops:
            return  # the loop that trains here detaches or resets the state
        stored = [key for key in states if key.startswith("self.")]
        if stored and ctx.scope.class_scope is not None:
            self._check_stored_state(node, stored, targets, ctx)

    def _states(self, targets: set[str], fed: set[str], node, ctx: Context) -> set[str]:
        """Keys the call both reads and (re)binds: directly, or through an alias bound right after
        it in the same scope (``out, new = rnn(x, h)`` then ``h = new``)."""
        states = targets & fed
        for key in fed - targets:
            if not (key.startswith("self.") or "." not in key):
                continue
            for binding in ctx.scope.bindings.get(key, ()):
                if binding.ctx.order <= ctx.order or binding.kind != "assign":
                    continue
                if ctx.loop is not None and not ctx.loop.contains(binding.ctx.order):
                    continue
                value = binding.value
                if type(value) in (cst.Name, cst.Attribute) and dotted_name(value) in targets:
                    states.add(key)
                    break
        return states

    def _produces_state(self, call, ctx: Context) -> bool:
        func = call.func
        if type(func) is cst.Attribute and func.attr.value == "forward":
            func = func.value
        while type(func) is cst.Subscript:  # self.cells[i](x, h)
            func = func.value
        if self.analysis.is_module(func, ctx):
            return True
        name = dotted_name(func)
        return name is not None and bool(RECURRENT_CALLEE_RE.search(last_part(name)))

    def _autofix(self, node, states: list[str], loop: Loop, ctx: Context) -> Fix | None:
        """Unsafe (the gradient no longer flows into earlier iterations, which is the point):
        detach each carried state at the top of the loop's body, element by element for the
        parts of an unpacked tuple. A state that may hold a tuple (``out, hidden = lstm(...)``)
        or None (before its first step) gets a line that handles both."""
        body = getattr(loop.node, "body", None)
        if loop.implicit is not None or type(body) is not cst.IndentedBlock or not body.body:
            return None
        torch = torch_name(self.analysis)
        kinds = {}
        for target in node.targets:
            _state_shapes(target.target, kinds, top=True)
        lines = []
        for key in states:
            maybe_none = any(type(binding.value) is cst.Name and binding.value.value == "None"
                             or binding.kind == "param" for binding in ctx.scope.bindings.get(key, ()))
            if kinds.get(key, "unknown") == "tensor":
                value = f"{key}.detach()"
            elif torch is None:
                return None
            else:
                value = (f"{key}.detach() if isinstance({key}, {torch}.Tensor) "
                         f"else tuple(part.detach() for part in {key})")
            if maybe_none:
                lines += [f"if {key} is not None:", f"    {key} = {value}"]
            else:
                lines.append(f"{key} = {value}")
        names = ", ".join(f"`{key}`" for key in states)
        changes = [InsertBefore(body.body[0], "\n".join(lines))]
        message = f"Detach {names} at the top of every iteration"
        retained = self._retain_graph_argument(loop)
        if retained is not None:
            # the only backward() of the loop kept its graph for the next iteration's sake
            call, arg = retained
            rest = [self.analysis.module.code_for_node(other.with_changes(comma=cst.MaybeSentinel.DEFAULT))
                    for other in call.args if other is not arg]
            changes.append(Replace(call, f"{self.analysis.module.code_for_node(call.func)}({', '.join(rest)})"))
            message += " and drop `retain_graph=True`"
        return Fix.unsafe(message, *changes)

    def _retain_graph_argument(self, loop: Loop):
        """(call, argument) of ``retain_graph=True`` when it is on the loop's only ``backward()``."""
        calls = [call for stmt, _ in self.analysis.statements_in_loop(loop) for call in self.analysis.calls_in(stmt)
                 if call_name(call) in BACKWARD_FUNCTIONS]
        if len(calls) != 1:
            return None
        arg = next((arg for arg in calls[0].args if arg.keyword is not None and arg.keyword.value == "retain_graph"
                    and type(arg.value) is cst.Name and arg.value.value == "True"), None)
        return (calls[0], arg) if arg is not None else None

    def _report(self, node, states: list[str], loop: Loop | None, autofix: Fix | None = None) -> None:
        names = ", ".join(f"`{key}`" for key in states)
        message = self.MESSAGE.format(
            stmt=self.code(node, 60), states=names, them="it" if len(states) == 1 else "them",
        )
        if len(states) == 1:
            fix = self.FIX.format(state=states[0])
        else:
            fix = ("cut the history once per iteration before feeding the state back: "
                   f"`{', '.join(states)} = {', '.join(key + '.detach()' for key in states)}`")
        if loop is None:
            message += " across training steps"
            fix += " (in a method such as `detach_state()` that the training loop calls every step)"
        elif self._retains_graph(loop):
            message += "; `retain_graph=True` only hides the error while memory grows every step"
        self.report(node, message, fix, autofix=autofix)

    def _retains_graph(self, loop: Loop) -> bool:
        for stmt, _ in self.analysis.statements_in_loop(loop):
            for call in self.analysis.calls_in(stmt):
                if call_name(call) in BACKWARD_FUNCTIONS:
                    for arg in call.args:
                        if arg.keyword is not None and arg.keyword.value == "retain_graph" and not (
                            type(arg.value) is cst.Name and arg.value.value in ("False", "None")
                        ):
                            return True
        return False

    # ------------------------------------------------------------------ a state carried across a loop

    def _carried_through(self, key: str, loop: Loop, targets: set[str], feed, ctx: Context) -> bool:
        """Does ``key`` enter the loop from outside and reach the next iteration undetached?"""
        analysis = self.analysis
        if loop.implicit is not None and not analysis.outlives_call(key, ctx):
            return False  # a per-step function's local or parameter: each call starts afresh
        bindings = loop.scope.bindings.get(key, ())
        if any(b.kind == "for" and b.stmt is loop.node for b in bindings):
            return False  # the loop's own target: a new value on every iteration
        inside = [b for b in bindings if loop.contains(b.ctx.order) and b.stmt is not feed]
        if not (inside or any(b.ctx.order < loop.start for b in bindings) or self._bound_outside(key, loop.scope)):
            return False  # never bound before the feed reads it: not a state this code carries
        if any(self._cuts_history(binding, key, targets, loop, feed, ctx) for binding in inside):
            return False
        for stmt, stmt_ctx in analysis.statements_in_loop(loop):
            for call in analysis.calls_in(stmt):
                if self._detaches_in_place(call, stmt, key, stmt_ctx):
                    return False
                if key.startswith("self.") and self._resets_through_method(call, key, ctx):
                    return False
        return True

    def _bound_outside(self, key: str, scope: Scope) -> bool:
        """A parameter, a module global, an attribute set in another method of the class."""
        if key.startswith("self."):
            class_scope = scope.class_scope
            return class_scope is not None and any(
                b.ctx.scope is not scope for b in class_scope.bindings.get(key, ())
            )
        if any(b.kind == "param" for b in scope.bindings.get(key, ())):
            return True
        outer = scope.parent
        while outer is not None:
            if outer.kind != "class" and outer.bindings.get(key):
                return True
            outer = outer.parent
        return False

    def _cuts_history(self, binding, key: str, targets: set[str], loop: Loop, feed, feed_ctx: Context) -> bool:
        """Does this re-binding of the state detach it (anywhere) or start it afresh (on every
        iteration, before the feed in the feed's own branch, or together with a ``backward()``)?"""
        if binding.kind != "assign":
            return binding.kind in ("for", "with")
        value = binding.value
        related = ({key} | targets) - {"self"}
        if self._live_keys(value, binding.ctx) & related:
            return False  # h = cell(x, h), h = h * mask, h = new_h: the history continues
        if self._live_keys(value, binding.ctx, values=True) & related:
            return True  # h = h.detach(), h = repackage_hidden(h), h = new_h.data
        guard = binding.ctx.guard
        if guard is None:
            return True  # re-initialised on every pass
        if (guard is feed_ctx.guard and binding.ctx.order < feed_ctx.order
                and binding.ctx.loops == feed_ctx.loops and _same_branch(guard, binding.stmt, feed)):
            return True  # `if flag: s = sim(a, b); s = mask(g, s)`: fresh whenever the feed runs
        if self._runs_before(binding, feed, feed_ctx):
            return True  # `if lam > 0: x2 = G(z2)` then, inside, `if jpeg: x2 = decode(x2)`
        # `if done: loss.backward(); h = init()` restarts together with the backward it needs
        return any(
            stmt_ctx.guard is guard and any(call_name(c) in BACKWARD_FUNCTIONS for c in self.analysis.calls_in(stmt))
            for stmt, stmt_ctx in self.analysis.statements_in_loop(loop)
        )

    def _runs_before(self, binding, feed, feed_ctx: Context) -> bool:
        """Does the binding run earlier in every pass that runs the feed: before it, in the
        same loops or outer ones, under the same ``if`` branches or fewer?"""
        binding_ctx = binding.ctx
        depth = len(binding_ctx.loops)
        if binding_ctx.order >= feed_ctx.order or binding_ctx.scope is not feed_ctx.scope \
                or list(binding_ctx.loops) != list(feed_ctx.loops)[:depth]:
            return False
        scope = feed_ctx.scope
        binding_path = self.analysis.branch_tests(binding.stmt, scope)
        feed_path = self.analysis.branch_tests(feed, scope)
        return len(binding_path) <= len(feed_path) and all(
            first[0] is second[0] and first[1] == second[1] for first, second in zip(binding_path, feed_path))

    def _detaches_in_place(self, call, stmt, key: str, ctx: Context) -> bool:
        """``h.detach_()``, ``for v in h: v.detach_()``, ``[v.detach_() for v in h]``, or an
        in-place helper ``detach_hidden(h)`` whose result may be discarded."""
        func = call.func
        if type(func) is cst.Attribute and func.attr.value == "detach_":
            if key in mentioned_keys(func.value):
                return True
            receiver = dotted_name(func.value)
            if receiver is None:
                return False
            binding = self.analysis.lookup(receiver, ctx)
            if binding is not None and binding.kind == "for" and key in mentioned_keys(binding.value):
                return True
            return any(  # [v.detach_() for v in h]
                type(node).__name__ in COMPREHENSIONS and receiver in _target_keys(node.for_in.target)
                and key in mentioned_keys(node.for_in.iter)
                for expr in self.analysis.own_expressions(stmt) for node in iter_expression_nodes(expr)
            )
        if not any(key in mentioned_keys(arg.value) for arg in call.args):
            return False
        helper = self.analysis.called_function(call, ctx)
        if helper is not None:
            return any(call_name(c) == "detach_" for s, _ in helper.statements for c in self.analysis.calls_in(s))
        name = dotted_name(func)
        return name is not None and bool(DETACHING_HELPER_RE.search(last_part(name)))

    def _resets_through_method(self, call, key: str, ctx: Context) -> bool:
        """``self.reset_hidden()`` / ``self.detach_state()`` called in the loop re-binds ``self.x``."""
        func = call.func
        if type(func) is not cst.Attribute or dotted_name(func.value) != "self":
            return False
        class_scope = ctx.scope.class_scope
        method = self.analysis.method_of(class_scope, func.attr.value, set()) if class_scope is not None else None
        return method is not None and method is not ctx.scope and any(
            b.ctx.scope is method for b in class_scope.bindings.get(key, ())
        )

    # ------------------------------------------------------------------ a state stored on a module

    def _check_stored_state(self, node, states: list[str], targets: set[str], ctx: Context) -> None:
        """``out, self.hidden = self.lstm(x, self.hidden)`` in a method: the state lives across calls.
        Reported when a backpropagating loop in this file calls the method on an instance and
        nothing detaches or resets the state."""
        class_scope = ctx.scope.class_scope
        method = ctx.scope
        if method.kind != "function" or method.parent is not class_scope:
            return
        carried = []
        for key in states:
            bindings = [b for b in class_scope.bindings.get(key, ()) if b.stmt is not node]
            if any(self._stored_state_cut(b, key, targets, method) for b in bindings):
                continue
            if self._detached_in_class(key, class_scope):
                continue
            carried.append(key)
        if not carried:
            return
        resetting = {
            b.ctx.scope.name for key in carried for b in class_scope.bindings.get(key, ())
            if b.ctx.scope is not method and b.ctx.scope.name != "__init__"
        }
        if method.name in FRAMEWORK_TRAINING_STEPS:
            if not resetting & PER_BATCH_HOOKS:
                self._report(node, carried, None)
        elif self._driving_loop(class_scope.node.name.value, method.name, carried, resetting):
            self._report(node, carried, None)

    def _stored_state_cut(self, binding, key: str, targets: set[str], method: Scope) -> bool:
        if binding.kind != "assign":
            return False
        related = ({key} | targets) - {"self"}
        value = binding.value
        if self._live_keys(value, binding.ctx) & related:
            return False
        if self._live_keys(value, binding.ctx, values=True) & related:
            return True  # detached somewhere in the class
        # a fresh state at the start of every call of the same method
        return binding.ctx.scope is method and not binding.ctx.visible_loops and binding.ctx.guard is None

    def _detached_in_class(self, key: str, class_scope: Scope) -> bool:
        for stmt, stmt_ctx in self.analysis.statements_by_type.get("Expr", ()):
            if stmt_ctx.scope.class_scope is not class_scope:
                continue
            for call in self.analysis.calls_in(stmt):
                if self._detaches_in_place(call, stmt, key, stmt_ctx):
                    return True
        return False

    def _driving_loop(self, class_name: str, method: str, keys: list[str], resetting: set[str]) -> bool:
        """A backpropagating loop that calls ``method`` on an instance of the class and neither
        resets the state (a resetting method, ``model.hidden = ...``) nor rebuilds the instance."""
        analysis = self.analysis
        attributes = {key[len("self."):] for key in keys}
        for loop in analysis.loops.values():
            if not analysis.loop_backpropagates(loop):
                continue
            instances, resets = set(), False
            for stmt, ctx in analysis.statements_in_loop(loop):
                for call in analysis.calls_in(stmt):
                    instance = self._instance_called(call, class_name, method, ctx)
                    if instance is not None and analysis.grad_enabled(ctx):
                        instances.add(instance)
            if not instances:
                continue
            for stmt, ctx in analysis.statements_in_loop(loop):
                for call in analysis.calls_in(stmt):
                    func = call.func
                    if type(func) is cst.Attribute and func.attr.value in resetting and dotted_name(func.value) in instances:
                        resets = True
                if type(stmt) is cst.Assign:
                    for target in stmt.targets:
                        for bound in _target_keys(target.target):
                            owner, _, attribute = bound.rpartition(".")
                            if bound in instances or (owner in instances and attribute in attributes):
                                resets = True
            if not resets:
                return True
        return False

    def _instance_called(self, call, class_name: str, method: str, ctx: Context) -> str | None:
        """The key of the instance of ``class_name`` whose ``method`` this call runs, if any."""
        func = call.func
        if type(func) is cst.Attribute and func.attr.value == method:
            receiver = func.value
        elif method in ("forward", "__call__"):
            receiver = func
        else:
            return None
        key = dotted_name(receiver)
        if key is None:
            return None
        binding = self.analysis.lookup(key, ctx)
        if binding is None or binding.kind != "assign" or binding.element:
            return None
        value = binding.value
        value = strip_pass_through(value)
        if type(value) is cst.Call and dotted_name(value.func) == class_name:
            return key
        return None

    # ------------------------------------------------------------------ what carries the graph

    def _live_keys(self, expr, ctx: Context, values: bool = False) -> set[str]:
        """Keys whose graph ``expr`` carries: like ``mentioned_keys`` but leaving out what sits
        under ``.detach()`` / ``.data`` / a detaching helper, fresh values (``torch.zeros_like``,
        ``.shape``) and the iterable of a comprehension whose elements are all detached. With
        ``values``, the keys whose values it keeps, with or without their graph."""
        found: set[str] = set()
        stack = [expr]
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind is cst.Name:
                found.add(node.value)
            elif kind is cst.Attribute:
                attribute = node.attr.value
                if attribute == "data" and values:
                    stack.append(node.value)
                    continue
                if attribute in NON_GRAPH_ATTRIBUTES:
                    continue
                key = dotted_name(node)
                if key is None:
                    stack.append(node.value)
                else:
                    found.update((key, key.partition(".")[0]))
            elif kind is cst.Call:
                cut = self._cuts_graph(node, ctx)
                if cut is None or (cut == DETACH and values):
                    stack.extend(child_nodes(node))
            elif kind.__name__ in COMPREHENSIONS and not values:
                stack.extend(self._comprehension_live(node, ctx))
            elif kind is not cst.Lambda:
                stack.extend(child_nodes(node))
        return found

    def _comprehension_live(self, node, ctx: Context) -> list:
        """``tuple(v.detach() for v in h)`` carries nothing of ``h``; ``[cell(x, v) for v in h]`` does."""
        loop_names = set()
        clause = node.for_in
        iterables = []
        while clause is not None:
            loop_names.update(_target_keys(clause.target))
            iterables.append(clause.iter)
            clause = clause.inner_for_in
        element_live = self._live_keys(node.elt, ctx)
        if element_live & loop_names:
            return iterables + [node.elt]
        return [node.elt]

    def _cuts_graph(self, call, ctx: Context) -> str | None:
        """DETACH when the call keeps its input's values without their graph, FRESH when it
        makes a new value (``torch.zeros_like(h)``, ``h.size()``), None when the graph flows."""
        func = call.func
        if type(func) is cst.Attribute:
            method = func.attr.value
            if method in DETACHING_METHODS:
                return DETACH
            if method in NON_DIFFERENTIABLE_METHODS or method in FRESH_METHODS:
                return FRESH
        elif type(func) is cst.Name and func.value in ("float", "int", "bool", "str", "len", "isinstance"):
            return FRESH
        qualified = self.analysis.qualified_name(func) or ""
        if qualified.startswith("torch.") and last_part(qualified) in TORCH_NON_DIFFERENTIABLE:
            return FRESH
        # apply_to_collection(h, Tensor, lambda t: t.detach()), tree_map(torch.Tensor.detach, h)
        for arg in call.args:
            value = arg.value
            if type(value) is cst.Attribute and value.attr.value in ("detach", "detach_"):
                return DETACH
            if type(value) is cst.Lambda and type(value.body) is cst.Call and call_name(value.body) in ("detach", "detach_"):
                return DETACH
        return DETACH if self._detaching_helper(call, ctx) else None

    def _detaching_helper(self, call, ctx: Context) -> bool:
        """A helper whose result is detached: one defined here whose every return drops its
        parameters' graph (``return h.detach()`` / ``tuple(repackage(v) for v in h)``), or an
        unknown one named like ``repackage_hidden`` / ``detach_state``."""
        scope = self.analysis.called_function(call, ctx)
        if scope is None:
            name = dotted_name(call.func)
            return name is not None and bool(DETACHING_HELPER_RE.search(last_part(name)))
        memo = scope._memo
        if "tl103_detaches" not in memo:
            memo["tl103_detaches"] = True  # a recursive call inside the helper detaches too
            memo["tl103_detaches"] = self._returns_detached(scope)
        return memo["tl103_detaches"]

    def _returns_detached(self, scope: Scope) -> bool:
        returned = self.analysis.returned_expressions(scope)
        if not returned:
            return False
        tainted = {key for key, bindings in scope.bindings.items() if any(b.kind == "param" for b in bindings)}
        tainted.discard("self")
        changed = True
        while changed:  # names computed from the parameters carry their graph
            changed = False
            for key, bindings in scope.bindings.items():
                if key in tainted:
                    continue
                for binding in bindings:
                    if binding.kind in ("assign", "for") and self._live_keys(binding.value, binding.ctx) & tainted:
                        tainted.add(key)
                        changed = True
                        break
        ctx = scope.statements[0][1] if scope.statements else None
        return all(not (self._live_keys(value, ctx) & tainted) for value in returned)


def _same_branch(guard, stmt, feed) -> bool:
    """Are ``stmt`` and the feed in the same branch of ``guard`` (an ``if`` and its ``else``
    share the guard node; a handler or a ``case`` is a branch of its own)?"""
    if type(guard) is not cst.If:
        return True
    in_body = {id(node) for node in iter_expression_nodes(guard.body)}
    return (id(stmt) in in_body) == (id(feed) in in_body)


def _feeding_call(value):
    """The call whose result is bound: ``rnn(x, h)`` or ``rnn(x, h)[1]``."""
    if type(value) is cst.Subscript:
        value = value.value
    return value if type(value) is cst.Call else None


def _self_arguments(call) -> set[str]:
    """``self.x`` arguments, bare or in a tuple: ``rnn(x, self.h)``, ``lstm(x, (self.h, self.c))``."""
    keys = set()
    for arg in call.args:
        values = [element.value for element in arg.value.elements] if type(arg.value) is cst.Tuple else [arg.value]
        keys.update(key for key in map(dotted_name, values) if key is not None and key.startswith("self."))
    return keys


def _state_shapes(target, kinds: dict, top: bool) -> None:
    """What each key of an assignment target holds, for the fix: ``h = cell(x, h)`` and the
    parts of a nested tuple ``out, (h, c) = lstm(...)`` are tensors; a direct element of the
    top-level unpacking (``out, hidden = model(...)``) may be a tensor or a tuple of them."""
    if type(target) in (cst.Tuple, cst.List):
        for element in target.elements:
            inner = element.value
            if type(inner) in (cst.Tuple, cst.List):
                _state_shapes(inner, kinds, top=False)
            elif (key := dotted_name(inner)) is not None:
                kinds[key] = "unknown" if top else "tensor"
        return
    key = dotted_name(target)
    if key is not None:
        kinds[key] = "tensor"


def _target_keys(target) -> list[str]:
    """Names and dotted attributes an assignment target binds, in order (unpacking flattened)."""
    if type(target) in (cst.Tuple, cst.List):
        return [key for element in target.elements for key in _target_keys(element.value)]
    if type(target) is cst.StarredElement:
        return _target_keys(target.value)
    key = dotted_name(target)
    return [key] if key is not None else []
