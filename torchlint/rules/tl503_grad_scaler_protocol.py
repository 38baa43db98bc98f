from __future__ import annotations

import re

from torchlint.analysis import BACKWARD_FUNCTIONS, Context, call_name, dotted_name, last_part, periodic_test
from torchlint.lazy import cst
from torchlint.fix import Fix, InsertAfter, InsertBefore, Replace, source_of
from torchlint.rule import Rule

_BOOKKEEPING_RE = re.compile(r"save|load|checkpoint|state|log", re.I)


class GradScalerProtocol(Rule):
    """
    ## What it does
    Finds mixed-precision training code that breaks `GradScaler`'s protocol after
    `scaler.scale(loss).backward()`: gradients clipped (`clip_grad_norm_`, `clip_grad_value_`)
    before `scaler.unscale_(optimizer)`, `optimizer.step()` called instead of
    `scaler.step(optimizer)` (also after `unscale_`), or `scaler.step(optimizer)` with no `scaler.update()`
    (or with its only `update()` under an every-N-steps test such as `if step % 100 == 0:`
    while the step runs on every iteration).

    ## Why is this bad?
    `scaler.scale(loss)` multiplies the loss, and so every gradient, by the loss scale
    (65536 at first). Clipping before `unscale_` compares that scaled norm with `max_norm`, so
    the clip shrinks every update by about the scale factor: measured on a 2-layer MLP
    (SGD, `max_norm=1.0`), 8 steps moved the weights by 4.7e-6 against 0.30 in the documented
    order (64,000 times less). `optimizer.step()` applies the scaled gradients as they are: the first update is
    65536 times too large. Even after `scaler.unscale_(optimizer)`, a plain `optimizer.step()`
    applies the gradients of a step that overflowed, which `scaler.step()` would have skipped:
    measured with float16 autocast on CPU, the weights were NaN after the first step (with
    `scaler.step()` they stayed finite while the scale backed off). Without `scaler.update()`, the
    second `scaler.step()` raises "step() has already been called since the last update()",
    and the scale never backs off after an overflow.

    ## Known problems
    The documented order is left alone: `unscale_` before the clip (anywhere before it in the
    function, or in the function that calls the clipping helper), gradient accumulation with
    the step under `if (i + 1) % k == 0:`, and several optimizers or scalers. A plain
    `optimizer.step()` is reported only when the same function never calls
    `scaler.step(optimizer)` (that is the unscaled branch of `if scaler: ... else: ...`), and
    not when the scaled `backward()` sits on the other arm of an `if` with the same test
    (`if scaler is not None:` / `else: loss.backward()`) or the scaler is `None` or
    `GradScaler(enabled=False)`. With Adam-like optimizers, which normalise the gradient,
    the scaled step is nearly the right size; the protocol is still broken (overflowed steps
    are applied and the scale never adapts), so it is reported all the same. Framework methods that unscale themselves
    (`accelerator.clip_grad_norm_`) are not clipping here, nor is
    `clip_grad_norm_(params, float("inf"))`, which only measures the norm. A `scaler.update()` anywhere in
    the file for a scaler of the same name counts, even in another function.
    """

    CODE = "TL503"
    NAME = "grad-scaler-protocol"
    MESSAGE = (
        "`{clip}` clips the gradients of a `GradScaler`-scaled loss before `{scaler}.unscale_()`, "
        "so it compares gradients multiplied by the loss scale with the threshold"
    )
    FIX = "call `{scaler}.unscale_({optimizer})` right before clipping, then `{scaler}.step({optimizer})`"
    STEP_MESSAGE = (
        "`{step}` applies the gradients of `{scaler}.scale(...).backward()` still multiplied by the "
        "loss scale (65536 at first), and does not skip steps whose gradients overflowed"
    )
    UNSCALED_STEP_MESSAGE = (
        "`{step}` after `{scaler}.unscale_()` applies the gradients even when they overflowed: "
        "`{scaler}.step()` would skip that step, this one writes inf/NaN into the weights"
    )
    STEP_FIX = "call `{scaler}.step({optimizer})` and then `{scaler}.update()` instead of `{step}`"
    UPDATE_MESSAGE = (
        "`{step}` is never followed by `{scaler}.update()`: the next `{scaler}.step()` raises and the "
        "loss scale never adapts"
    )
    PERIODIC_UPDATE_MESSAGE = (
        "`{step}` runs every iteration but `{scaler}.update()` only under `{test}`: the next "
        "`{scaler}.step()` before an update raises, and the loss scale adapts only every N steps"
    )
    UPDATE_FIX = "call `{scaler}.update()` once per iteration, right after `{step}`"
    AUTOFIX = (
        "Safe, each the documented protocol: inserts `scaler.unscale_(optimizer)` right before the "
        "clip (when the function's `scaler.step()` of that one optimizer follows it on every pass, so "
        "`unscale_` runs once per step); replaces `optimizer.step()` by `scaler.step(optimizer)` "
        "(adding `scaler.update()` after it when the file never updates the scaler), when the scaled "
        "`backward()` runs on every pass through the step; inserts `scaler.update()` after a "
        "`scaler.step()` that lacks one (as written the second step raised). No fix for a clip or a "
        "step on a path where the scaler may not be in use, or a clip outside an accumulation `if`."
    )
    TOKENS = ("scaler", "Scaler", ".scale(")
    CLAIM = (
        "clipping before unscale_ shrinks the update by the loss scale; optimizer.step() after a scaled "
        "backward makes it the loss scale times larger, and after unscale_ writes overflowed gradients "
        "into the weights; without update() the second step raises"
    )

    INVALID = [
        """\
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # expect: TL503
    scaler.step(optimizer)
    scaler.update()
""",
        """\
def train_step(model, optimizer, scaler, x, y):
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = F.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    optimizer.step()  # expect: TL503
""",
        """\
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)  # expect: TL503
""",
        """\
class Trainer:
    def step(self, loss):
        self.scaler.scale(loss).backward()
        if self.max_norm:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)  # expect: TL503
        self.scaler.step(self.optimizer)
        self.scaler.update()
""",
        """\
for step, batch in enumerate(loader):
    optimizer.zero_grad()
    scaler.scale(model(batch).mean()).backward()
    scaler.step(optimizer)  # expect: TL503
    if step % 100 == 0:
        scaler.update()  # only every 100 steps: the second step() raises
""",
    ]
    VALID = [
        """\
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
""",
        """\
for i, (x, y) in enumerate(loader):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y) / accum_steps
    scaler.scale(loss).backward()
    if (i + 1) % accum_steps == 0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
""",
        """\
def train_step(model, optimizer, scaler, loss, max_norm):
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
    else:
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
""",
        """\
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss_d = d_loss(netD, netG, x)
    scaler_d.scale(loss_d).backward()
    scaler_d.step(opt_d)
    scaler_d.update()
    with torch.autocast("cuda", dtype=torch.float16):
        loss_g = g_loss(netD, netG, x)
    scaler_g.scale(loss_g).backward()
    scaler_g.step(opt_g)
    scaler_g.update()
""",
        """\
def optimizer_step(self):
    self.scaler.unscale_(self.optimizer)
    torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=10.0)
    self.scaler.step(self.optimizer)
    self.scaler.update()
    self.optimizer.zero_grad()
""",
        """\
if use_amp:
    scaler.scale(loss).backward()
else:
    loss.backward()
accelerator.clip_grad_norm_(model.parameters(), 1.0)
if use_amp:
    scaler.step(optimizer)
    scaler.update()
else:
    optimizer.step()
""",
        """\
for step, batch in enumerate(loader):
    scaler.scale(model(batch).mean() / accumulation).backward()
    if (step + 1) % accumulation == 0:
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
""",
        """\
for step, batch in enumerate(loader):
    optimizer.zero_grad()
    scaler.scale(model(batch).mean()).backward()
    scaler.step(optimizer)
    scaler.update()
    if step % 1000 == 0 and scaler.get_scale() < 1.0:
        scaler.update(2.0)  # a manual bump on top of the per-step update
""",
    ]

    def visit_Expr(self, node, ctx: Context) -> None:
        self._check(node, ctx)

    def visit_Assign(self, node, ctx: Context) -> None:
        self._check(node, ctx)

    def visit_AnnAssign(self, node, ctx: Context) -> None:
        self._check(node, ctx)

    def _check(self, node, ctx: Context) -> None:
        analysis = self.analysis
        for call in analysis.calls_in(node):
            if analysis.is_gradient_clipping(call, ctx):
                self._check_clipping(node, call, ctx)
            elif type(call.func) is cst.Attribute and call.func.attr.value == "step":
                optimizer = analysis.stepped_optimizer(call, ctx)
                if optimizer is None:
                    continue
                if analysis.is_grad_scaler(call.func.value, ctx):
                    self._check_update(node, call, optimizer, ctx)
                elif optimizer is call.func.value:
                    self._check_plain_step(node, call, optimizer, ctx)

    def _scaled_backward_before(self, node, ctx: Context):
        """(scaler, context) of a scaled ``backward()`` whose gradients ``node`` sees: earlier in
        the function, in every loop around ``node``, not on the other arm of an ``if`` with the
        same test, and not followed by a plain ``backward()`` that can run after it (a second
        training loop after an AMP one); None when there is none."""
        analysis = self.analysis
        scaled = analysis.scaled_backwards(ctx.scope)
        if not scaled:
            return None
        plain = [
            stmt for stmt, stmt_ctx in ctx.scope.statements
            if stmt_ctx.scope is ctx.scope and stmt_ctx.order < ctx.order
            and all(analysis.scaled_backward_scaler(call, stmt_ctx) is None for call in analysis.calls_in(stmt))
            and any(call_name(call) in BACKWARD_FUNCTIONS for call in analysis.calls_in(stmt))
        ]
        orders = {id(stmt): stmt_ctx.order for stmt, stmt_ctx in ctx.scope.statements}
        for stmt, stmt_ctx, scaler in reversed(scaled):
            if stmt_ctx.order >= ctx.order or analysis.exclusive_branches(stmt, node, ctx.scope):
                continue
            if not all(loop.contains(stmt_ctx.order) for loop in ctx.visible_loops):
                continue
            if any(orders[id(other)] > stmt_ctx.order and not analysis.exclusive_branches(other, stmt, ctx.scope)
                   for other in plain):
                continue  # a later plain backward made the gradients
            if not analysis.scaler_disabled(scaler, stmt_ctx):
                return scaler, stmt_ctx
        return None

    def _check_clipping(self, node, call, ctx: Context) -> None:
        analysis = self.analysis
        found = self._scaled_backward_before(node, ctx)
        start = found[1].order if found is not None else None
        scaler = found[0] if found is not None else self._scaler_step_after(node, ctx)
        if scaler is None:
            return  # no sign that these gradients are scaled
        if start is None:
            # a helper that clips and then calls scaler.step(): the caller may have unscaled
            if any(self._unscales_between(caller_ctx.scope, None, caller_ctx.order)
                   for _, caller_ctx in analysis.callers_of(ctx.scope)):
                return
        if self._unscales_between(ctx.scope, start, ctx.order):
            return
        name = self.code(scaler, 40)
        optimizer = self._stepped_by(scaler, ctx) or "optimizer"
        self.report(node, self.MESSAGE.format(clip=self.code(call.func, 40) + "(...)", scaler=name),
                    self.FIX.format(scaler=name, optimizer=optimizer),
                    autofix=self._unscale_fix(node, scaler, found[1] if found is not None else None, ctx))

    def _unscale_fix(self, node, scaler, backward_ctx: Context | None, ctx: Context) -> Fix | None:
        """``scaler.unscale_(optimizer)`` inserted right before the clip. Sound only when every
        pass through the clip is followed by the ``scaler.step()`` (and its ``update()``) before
        the next one, so ``unscale_`` runs once per step (a second call raises): the step is in
        the same function and loop, after the clip, under no test the clip is not under (a step
        under an accumulation ``if`` with the clip outside it gets no fix); the scaled
        ``backward()`` runs whenever the clip does (a clip shared with an unscaled branch gets
        none); the scaler steps one optimizer there, and this is the function's first clip."""
        analysis = self.analysis
        scope = ctx.scope
        conditions = analysis.branch_conditions(node, scope)
        if backward_ctx is not None:
            backward = next(stmt for stmt, stmt_ctx in scope.statements if stmt_ctx is backward_ctx)
            taken = analysis.branch_conditions(backward, scope)
            if conditions[:len(taken)] != taken or backward_ctx.loops != ctx.loops:
                return None  # the scaled backward does not run on every pass through the clip
        start = backward_ctx.order if backward_ctx is not None else 0
        if any(start < stmt_ctx.order < ctx.order and stmt_ctx.scope is scope
               and any(analysis.is_gradient_clipping(call, stmt_ctx) for call in analysis.calls_in(stmt))
               for stmt, stmt_ctx in scope.statements):
            return None  # an earlier clip gets the unscale_ (this one is fine after it)
        steps = self._scaler_step_statements(dotted_name(scaler), scope)
        if len({dotted_name(optimizer) for _, _, optimizer in steps}) != 1:
            return None  # several optimizers (or one the analysis cannot name): which to unscale?
        stmt, stmt_ctx, optimizer = steps[0]
        step_conditions = analysis.branch_conditions(stmt, scope)
        if stmt_ctx.order < ctx.order or stmt_ctx.loops != ctx.loops or conditions[:len(step_conditions)] != step_conditions:
            return None
        if self._unscales_between(scope, ctx.order, stmt_ctx.order + 1):
            return None  # unscale_ after the clip: a second one before it would raise
        call = f"{source_of(analysis, scaler)}.unscale_({source_of(analysis, optimizer)})"
        return Fix.safe(f"Insert `{call}` before the clip", InsertBefore(node, call))

    def _scaler_step_statements(self, key: str | None, scope) -> list:
        """(statement, context, optimizer) of every ``<key>.step(optimizer)`` in the function's
        own body."""
        analysis = self.analysis
        return [
            (stmt, stmt_ctx, optimizer)
            for stmt, stmt_ctx in scope.statements if stmt_ctx.scope is scope
            for call in analysis.calls_in(stmt)
            if type(call.func) is cst.Attribute and call.func.attr.value == "step" and dotted_name(call.func.value) == key
            for optimizer in (analysis.stepped_optimizer(call, stmt_ctx),) if optimizer is not None
        ]

    def _scaler_step_after(self, node, ctx: Context):
        """The scaler of a ``scaler.step(optimizer)`` later in the same function."""
        analysis = self.analysis
        for stmt, stmt_ctx in ctx.scope.statements:
            if stmt_ctx.order <= ctx.order or stmt_ctx.scope is not ctx.scope:
                continue
            if analysis.exclusive_branches(stmt, node, ctx.scope):
                continue  # `if scaler is None: clip; step() else: ... scaler.step()`
            for call in analysis.calls_in(stmt):
                func = call.func
                if (type(func) is cst.Attribute and func.attr.value == "step" and analysis.is_grad_scaler(func.value, stmt_ctx)
                        and analysis.stepped_optimizer(call, stmt_ctx) is not None
                        and not analysis.scaler_disabled(func.value, stmt_ctx)):
                    return func.value
        return None

    def _unscales_between(self, scope, start: int | None, end: int) -> bool:
        """Does the function unscale (``scaler.unscale_(opt)``, any call named like ``unscale``,
        directly or in a helper of this file) between the orders ``start`` and ``end``?"""
        analysis = self.analysis
        for stmt, stmt_ctx in scope.statements:
            if stmt_ctx.scope is not scope or stmt_ctx.order >= end or (start is not None and stmt_ctx.order <= start):
                continue
            for call in analysis.calls_in(stmt):
                if "unscale" in (dotted_name(call.func) or "").lower():
                    return True
                if analysis.call_reaches(call, stmt_ctx, "unscale"):
                    return True
        return False

    def _stepped_by(self, scaler, ctx: Context) -> str | None:
        analysis = self.analysis
        key = dotted_name(scaler)
        for stmt, stmt_ctx in ctx.scope.statements:
            for call in analysis.calls_in(stmt):
                func = call.func
                if type(func) is cst.Attribute and func.attr.value == "step" and dotted_name(func.value) == key:
                    optimizer = analysis.stepped_optimizer(call, stmt_ctx)
                    if optimizer is not None:
                        return self.code(optimizer, 40)
        return None

    def _check_plain_step(self, node, call, optimizer, ctx: Context) -> None:
        found = self._scaled_backward_before(node, ctx)
        if found is None:
            return
        scaler, backward_ctx = found
        key = dotted_name(optimizer)
        if key is None or self._scaler_steps(ctx.scope, key):
            return  # `scaler.step(optimizer)` elsewhere in the function: this is the unscaled branch
        name = self.code(scaler, 40)
        step = self.code(call, 50)
        message = self.STEP_MESSAGE
        if self._unscales_between(ctx.scope, backward_ctx.order, ctx.order):
            message = self.UNSCALED_STEP_MESSAGE  # the size is right, the overflow check is gone
        self.report(node, message.format(step=step, scaler=name),
                    self.STEP_FIX.format(scaler=name, optimizer=self.code(optimizer, 40), step=step),
                    autofix=self._step_fix(node, call, scaler, optimizer, backward_ctx, ctx))

    def _step_fix(self, node, call, scaler, optimizer, backward_ctx: Context, ctx: Context) -> Fix | None:
        """``scaler.step(optimizer)`` in place of ``optimizer.step()``, with ``scaler.update()``
        after it when the file never updates that scaler. Only for a statement that is the bare
        step, in the scaled ``backward()``'s loop and under every test it is under (a scaler
        that may be ``None`` on the step's path gets no fix)."""
        analysis = self.analysis
        if type(node) is not cst.Expr or node.value is not call or call.args:
            return None
        backward = next(stmt for stmt, stmt_ctx in ctx.scope.statements if stmt_ctx is backward_ctx)
        taken = analysis.branch_conditions(backward, ctx.scope)
        if analysis.branch_conditions(node, ctx.scope)[:len(taken)] != taken or backward_ctx.loops != ctx.loops:
            return None
        name = source_of(analysis, scaler)
        changes = [Replace(call, f"{name}.step({source_of(analysis, optimizer)})")]
        if not self._updated(scaler):
            if self._steps_in(ctx.scope) != 1:
                return None  # an update() between two optimizers' steps would unscale the second wrongly
            changes.append(InsertAfter(node, f"{name}.update()"))
        return Fix.safe(f"Call `{self.code(scaler, 30)}.step({self.code(optimizer, 30)})` instead of `{self.code(call, 40)}`",
                        *changes)

    def _steps_in(self, scope) -> int:
        """How many optimizer steps (plain or through a scaler) the function's own body makes."""
        analysis = self.analysis
        return sum(analysis.stepped_optimizer(call, stmt_ctx) is not None
                   for stmt, stmt_ctx in scope.statements if stmt_ctx.scope is scope
                   for call in analysis.calls_in(stmt))

    def _updated(self, scaler) -> bool:
        """Does the file ``update()`` this scaler anywhere (by the same name)?"""
        key = dotted_name(scaler)
        updated = self.analysis.scaler_updates()
        return key in updated or any(last_part(other) == last_part(key or "") for other in updated if other)

    def _scaler_steps(self, scope, optimizer_key: str) -> bool:
        analysis = self.analysis
        for stmt, stmt_ctx in scope.statements:
            for call in analysis.calls_in(stmt):
                func = call.func
                if type(func) is cst.Attribute and func.attr.value == "step" and analysis.is_grad_scaler(func.value, stmt_ctx):
                    stepped = analysis.stepped_optimizer(call, stmt_ctx)
                    if stepped is not None and dotted_name(stepped) == optimizer_key:
                        return True
        return False

    def _check_update(self, node, call, optimizer, ctx: Context) -> None:
        analysis = self.analysis
        scaler = call.func.value
        key = dotted_name(scaler)
        if key is None or analysis.scaler_disabled(scaler, ctx):
            return
        if self._updated(scaler):
            periodic = self._update_only_every_n_steps(key, node, ctx)
            if periodic is not None:
                self.report(node, self.PERIODIC_UPDATE_MESSAGE.format(
                    step=self.code(call, 50), scaler=self.code(scaler, 40), test=self.code(periodic, 40)),
                    self.UPDATE_FIX.format(scaler=self.code(scaler, 40), step=self.code(call, 50)))
            return
        if self._scaler_escapes(key, ctx):
            return  # handed to a helper that may update it
        step = self.code(call, 50)
        name = self.code(scaler, 40)
        autofix = None
        if type(node) is cst.Expr and node.value is call and self._steps_in(ctx.scope) == 1:
            # safe: as written, the second step raised
            autofix = Fix.safe(f"Insert `{name}.update()` after `{step}`",
                               InsertAfter(node, f"{source_of(analysis, scaler)}.update()"))
        self.report(node, self.UPDATE_MESSAGE.format(step=step, scaler=name), self.UPDATE_FIX.format(scaler=name, step=step),
                    autofix=autofix)

    def _update_only_every_n_steps(self, key: str, node, ctx: Context):
        """The ``if step % n == 0:`` test that every ``key.update()`` of the step's loop sits
        under while the step itself runs on every iteration (None otherwise): the second
        ``step()`` before an ``update()`` raises."""
        analysis = self.analysis
        loop = ctx.loop
        if loop is None or loop.implicit is not None:
            return None
        scope = ctx.scope
        step_tests = {id(test) for test, _ in analysis.branch_tests(node, scope)}
        periodic = None
        found = False
        for stmt, stmt_ctx in scope.statements:
            if stmt_ctx.scope is not scope or not loop.contains(stmt_ctx.order):
                continue
            if not any(type(call.func) is cst.Attribute and call.func.attr.value == "update"
                       and dotted_name(call.func.value) == key for call in analysis.calls_in(stmt)):
                continue
            found = True
            test = next((test for test, positive in analysis.branch_tests(stmt, scope)
                         if positive and id(test) not in step_tests and periodic_test(test)), None)
            if test is None:
                return None  # updated on every pass (or under the step's own test)
            periodic = periodic or test
        return periodic if found else None

    def _scaler_escapes(self, key: str, ctx: Context) -> bool:
        """Is the scaler passed to a function that may update it: one of another file, or one of
        this file that calls some ``.update()``?"""
        analysis = self.analysis
        for stmt, stmt_ctx in ctx.scope.statements:
            for call in analysis.calls_in(stmt):
                if not any(dotted_name(arg.value) == key for arg in call.args):
                    continue
                if _BOOKKEEPING_RE.search(call_name(call) or ""):
                    continue  # checkpointer.save(model, optimizer, scaler): saved, not updated
                callee = analysis.called_function(call, stmt_ctx)
                if callee is None or analysis.reaches_call(callee, "update"):
                    return True
        return False
