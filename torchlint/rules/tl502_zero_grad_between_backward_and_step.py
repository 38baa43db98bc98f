from __future__ import annotations

from torchlint.analysis import BACKWARD_FUNCTIONS, Context, dotted_name, iter_expression_nodes, model_roles, name_words
from torchlint.lazy import cst
from torchlint.fix import Fix, Move, statement_of_call
from torchlint.rule import Rule


class ZeroGradBetweenBackwardAndStep(Rule):
    """
    ## What it does
    Finds `zero_grad()` calls that run after `backward()` and before the optimizer's `step()`
    in the same straight-line sequence of statements: `loss.backward(); optimizer.zero_grad();
    optimizer.step()`.

    ## Why is this bad?
    `zero_grad()` throws away the gradients `backward()` just computed, so the following
    `step()` applies nothing: with the default `set_to_none=True` the gradients are `None` and
    the optimizer skips every parameter; with `set_to_none=False` the gradients are zeros and
    only weight decay moves the parameters. The model never trains, and nothing raises.
    Measured on a 2-layer MLP (SGD with momentum and weight decay, 8 steps): the parameters
    are bit-for-bit identical before and after the loop; the fixed loop moves them by 0.46
    (L2 norm of the change).

    ## Known problems
    Only reported when every pass through the `zero_grad()` has a `backward()` before it and
    the `step()` after it: all three in one sequence of statements (the bodies of `with` and
    `try` are part of it, and an `if` / `else` counts as a `backward()` when each arm runs one,
    as apex's `with amp.scale_loss(...)` on one arm and `loss.backward()` on the other), or
    `zero_grad()` and `step()` together in an `if` branch that
    follows the `backward()` (the `if (i + 1) % k == 0:` of gradient accumulation). Left
    alone: a `zero_grad()` in an `except` handler or in an `if` branch without the step (skipping
    a bad batch), one followed by `continue` or by another `backward()` before the step, and
    a `backward()` inside a nested loop or an `if` (it might not run).
    `opt_g.zero_grad()` does not clear `opt_d`'s gradients, so it is not reported between
    `loss_d.backward()` and `opt_d.step()`. `model.zero_grad()` is reported when the stepped
    optimizer was built from that model's parameters, or when it is the only optimizer the
    function steps.

    Gradient accumulation, by window: a `zero_grad()` under the same update-step test as the
    step (`if is_update_step(i):` on both sides) but before this micro-batch's `backward()`,
    or at the top of a loop over micro-batches whose step comes after the loop, clears what
    the earlier micro-batches accumulated (a loop that can `break`, retrying a step, is left
    alone; a test that does not say "boundary", `if optimizer:`, is not such a window).
    Gradient accumulation: a `zero_grad()` that runs on every iteration of a loop (or of a
    per-step hook such as `training_step`) that backpropagates on every iteration, while the
    step of that optimizer runs only under an accumulation test (`if (i + 1) % k == 0:`, a
    name with "accum" in it), clears the accumulated gradients before every step: only the
    last micro-batch is applied. Steps guarded by anything else (skipping non-finite losses)
    are left alone. With Hugging Face Accelerate the accumulation is implicit: inside
    `with accelerator.accumulate(model):` the prepared optimizer's `step()` and `zero_grad()`
    act only on the micro-step that synchronises, so a `zero_grad()` before the block's
    `backward()` clears the earlier micro-steps' gradients on exactly that micro-step
    (measured with Accelerate 1.15 on CPU, 4 micro-batches, SGD lr 1: the weights moved 1.0,
    the last micro-batch's share, instead of 2.5). Call it after the step, as Accelerate's
    documentation does, and on the optimizer: a model's `zero_grad()` in the block is not
    skipped and clears every micro-step (measured the same way: 1.0 instead of 2.5).

    A GAN's (or an actor-critic's) training step: a discriminator's or critic's optimizer
    (named so: `discr_optim`, `optimizer_D`, `critic_optimizer`) cleared only right after its
    own step, while an earlier update of the same step (the generator's) backpropagates first
    and nothing clears the discriminator between. The generator's loss runs through the
    discriminator, so its `backward()` leaves discriminator gradients that the
    discriminator's next step applies on top of its own. Left alone when the step turns the
    discriminator's `requires_grad` off for the generator's update, or with Lightning's
    `toggle_optimizer`.
    """

    CODE = "TL502"
    NAME = "zero-grad-between-backward-and-step"
    MESSAGE = "`{zero_grad}` runs after `backward()` and before `{step}`, so the step applies no gradients"
    FIX = "call `{zero_grad}` before `backward()` (at the start of the iteration) or after `{step}`"
    ACCUMULATION_MESSAGE = (
        "`{zero_grad}` runs on every iteration but `{step}` only when `{guard}`, so the gradients "
        "accumulated over the other iterations are cleared before the step"
    )
    WINDOW_MESSAGE = (
        "`{zero_grad}` clears the gradients before this micro-batch's `backward()`, and `{step}` runs "
        "{where}: the gradients accumulated over the earlier micro-batches never reach the step"
    )
    WINDOW_FIX = "clear the gradients right after `{step}` instead (or at the start of each accumulation window)"
    LATE_MESSAGE = (
        "`{zero_grad}` clears the discriminator's gradients only after its step, so the generator's "
        "`{backward}`, which runs through the discriminator, leaves gradients there that its next step applies"
    )
    LATE_FIX = "call `{zero_grad}` right before the discriminator's own `backward()`, not after its step"
    ACCELERATE_MESSAGE = (
        "`{zero_grad}` runs before `backward()` in every micro-step of `{block}`: on the micro-step "
        "that steps, it clears the gradients the earlier micro-steps accumulated"
    )
    ACCELERATE_MODEL_MESSAGE = (
        "`{zero_grad}` clears the model's gradients on every micro-step of `{block}`: Accelerate skips "
        "only the prepared optimizer's `zero_grad()`, so no gradients accumulate"
    )
    ACCELERATE_MODEL_FIX = "call the prepared optimizer's `zero_grad()` instead of the model's"
    ACCELERATE_FIX = "call `{zero_grad}` after the optimizer step (Accelerate skips it on micro-steps that do not step)"
    ACCUMULATION_FIX = "move `{zero_grad}` into the same `if` as the step, right after it"
    AUTOFIX = (
        "Safe: moves the `zero_grad()` to right after the step's statement."
    )
    TOKENS = ("zero_grad",)
    CLAIM = "the bad loop leaves every parameter unchanged; the fixed loop changes them"

    INVALID = [
        """\
for batch in loader:
    with accelerator.accumulate(policy):
        loss = compute_loss(policy, batch)
        accelerator.backward(loss)
        optimizer.step()
        policy.zero_grad(set_to_none=True)  # expect: TL502
""",
        """\
for batch in loader:
    with accelerator.accumulate(model):
        optimizer.zero_grad()  # expect: TL502
        loss = model(**batch).loss
        accelerator.backward(loss)
        optimizer.step()
""",
        """\
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.zero_grad()  # expect: TL502
    optimizer.step()
""",
        """\
def training_step(model, optimizer, scaler, batch):
    with torch.autocast("cuda"):
        loss = model(**batch).loss
    scaler.scale(loss).backward()
    model.zero_grad()  # expect: TL502
    scaler.step(optimizer)
    scaler.update()
""",
        """\
for i, (x, y) in enumerate(loader):
    optimizer.zero_grad()  # expect: TL502
    loss = criterion(model(x), y) / accum_steps
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
""",
        """\
for step, batch in enumerate(loader):
    loss = criterion(model(batch.x), batch.y) / accumulation
    if is_update_step(step):
        optimizer.zero_grad()  # expect: TL502
    scaler.scale(loss).backward()
    if is_update_step(step):
        scaler.step(optimizer)
        scaler.update()
""",
        """\
class Trainer:
    def train_loop(self, batch_list):
        for batch in batch_list:  # micro-batches of one update
            self.optimizer.zero_grad(set_to_none=True)  # expect: TL502
            loss = self.model(batch).mean()
            loss.backward()
        self.optimizer.step()
""",
        """\
class GANTrainer:
    def train_step(self, real):
        g_loss = self.gan(real, return_generator_loss=True)  # runs through the discriminator
        g_loss.backward()
        self.optim.step()
        self.optim.zero_grad()
        d_loss = self.gan(real, return_discriminator_loss=True)
        d_loss.backward()
        self.discr_optim.step()
        self.discr_optim.zero_grad()  # expect: TL502
""",
        """\
for step, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accumulation
    if fp16:
        with amp.scale_loss(loss, optimizer) as scaled_loss:
            scaled_loss.backward()
    else:
        loss.backward()
    if (step + 1) % accumulation == 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.zero_grad()  # expect: TL502
        optimizer.step()
""",
    ]
    VALID = [
        """\
for batch in loader:
    with accelerator.accumulate(model_a, model_b):
        accelerator.backward(model_a(**batch).loss)
        optimizer_a.step()
        optimizer_a.zero_grad()  # after its own step; model_b's backward follows
        accelerator.backward(model_b(**batch).loss)
        optimizer_b.step()
        optimizer_b.zero_grad()
""",
        """\
class GANTrainer:
    def train_step(self, real):
        g_loss = self.gan(real, return_generator_loss=True)
        g_loss.backward()
        self.optim.step()
        self.optim.zero_grad()
        self.discr_optim.zero_grad()  # cleared before its own backward: the generator's gradients go
        d_loss = self.gan(real, return_discriminator_loss=True)
        d_loss.backward()
        self.discr_optim.step()
        self.discr_optim.zero_grad()
""",
        """\
for real, z in loader:
    for p in netD.parameters():
        p.requires_grad = False  # the generator's backward leaves the discriminator alone
    g_loss = -netD(netG(z)).mean()
    g_loss.backward()
    optimizerG.step()
    optimizerG.zero_grad()
    for p in netD.parameters():
        p.requires_grad = True
    d_loss = netD(netG(z).detach()).mean() - netD(real).mean()
    d_loss.backward()
    optimizerD.step()
    optimizerD.zero_grad()
""",
        """\
for batch in loader:
    with accelerator.accumulate(model):
        loss = model(**batch).loss
        accelerator.backward(loss)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
""",
        """\
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum_steps
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """\
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    if torch.isfinite(loss):
        optimizer.step()
""",
        """\
for i, (real, _) in enumerate(loader):
    optimizer_D.zero_grad()
    fake = generator(torch.randn(real.size(0), latent_dim))
    d_loss = -discriminator(real).mean() + discriminator(fake).mean()
    d_loss.backward()
    optimizer_D.step()
    optimizer_G.zero_grad()
    if i % n_critic == 0:
        g_loss = -discriminator(generator(torch.randn(real.size(0), latent_dim))).mean()
        g_loss.backward()
        optimizer_G.step()
""",
        """\
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
""",
        """\
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    if not torch.isfinite(loss):
        optimizer.zero_grad()
        continue
    optimizer.step()
    optimizer.zero_grad()
""",
        """\
for real, noise in loader:
    loss_d = bce(disc(real), ones) + bce(disc(gen(noise).detach()), zeros)
    loss_d.backward()
    opt_g.zero_grad()
    opt_d.step()
""",
        """\
for step, batch in enumerate(loader):
    if step % accumulation == 0:  # the start of a window
        optimizer.zero_grad()
    loss = criterion(model(batch.x), batch.y) / accumulation
    loss.backward()
    if (step + 1) % accumulation == 0:  # its end
        optimizer.step()
""",
        """\
for attempt in range(3):  # retrying one step: each attempt starts afresh
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    if torch.isfinite(loss):
        break
optimizer.step()
""",
    ]

    def visit_Expr(self, node, ctx: Context) -> None:
        call = node.value
        if type(call) is not cst.Call or type(call.func) is not cst.Attribute or call.func.attr.value != "zero_grad":
            return
        accumulated = self._accumulation_step(call.func.value, ctx)
        if accumulated is not None:
            text = self.code(call, 50)
            self.report(node, self.ACCUMULATION_MESSAGE.format(
                zero_grad=text, step=self.code(accumulated[0], 50), guard=self.code(accumulated[1].test, 40)),
                self.ACCUMULATION_FIX.format(zero_grad=text), autofix=self._autofix(node, accumulated[0], ctx))
            return
        found = self._same_test_step(call.func.value, ctx) or self._step_after_loop(call.func.value, ctx)
        if found is not None:
            step, where = found
            text = self.code(call, 50)
            # no fix: the right place depends on the other clearings around the step
            self.report(node, self.WINDOW_MESSAGE.format(zero_grad=text, step=self.code(step, 50), where=where),
                        self.WINDOW_FIX.format(zero_grad=text, step=self.code(step, 50)))
            return
        found = self._cleared_only_after_step(node, call.func.value, ctx)
        if found is not None:
            text = self.code(call, 50)
            self.report(node, self.LATE_MESSAGE.format(zero_grad=text, backward=self.code(found, 50)),
                        self.LATE_FIX.format(zero_grad=text))
            return
        found = self._accumulate_block(node, ctx)
        if found is not None:
            block, model_clearing = found
            text = self.code(call, 50)
            message = self.ACCELERATE_MODEL_MESSAGE if model_clearing else self.ACCELERATE_MESSAGE
            fix = self.ACCELERATE_MODEL_FIX if model_clearing else self.ACCELERATE_FIX
            self.report(node, message.format(zero_grad=text, block=self.code(block, 40)), fix.format(zero_grad=text))
            return
        found = self.analysis.straight_line(node, ctx)
        if found is None:
            return
        sequence, index = found
        if not self._after_backward(self._before(sequence, index), ctx):
            return
        step = self._next_step(node, call.func.value, sequence[index + 1:], ctx)
        if step is None:
            return
        text = self.code(call, 50)
        step_text = self.code(step, 50)
        self.report(node, self.MESSAGE.format(zero_grad=text, step=step_text),
                    self.FIX.format(zero_grad=text, step=step_text), autofix=self._autofix(node, step, ctx))

    def _cleared_only_after_step(self, node, receiver, ctx: Context):
        """The ``backward()`` of another update whose gradients reach this optimizer's next
        step: a discriminator's (or critic's) optimizer cleared only right after its own step,
        in a training step that first updates the generator through the discriminator
        (``g_loss.backward(); opt.step(); opt.zero_grad()`` … ``d_loss.backward();
        d_opt.step(); d_opt.zero_grad()``). The generator's loss runs through the
        discriminator, so every step's generator backward leaves discriminator gradients
        that nothing clears before the discriminator's step applies them. Left alone when the
        step turns the discriminator's ``requires_grad`` off for the generator's update."""
        analysis = self.analysis
        key = dotted_name(receiver)
        if key is None or not model_roles(key) & {"discriminator", "critic"} or not ctx.loops:
            return None
        found = analysis.straight_line(node, ctx)
        if found is None:
            return None
        sequence, index = found
        previous = next((item for item in reversed(sequence[:index])
                         if self._steps(item, ctx) or self._backpropagates(item, not isinstance(item, cst.BaseSmallStatement))), None)
        if previous is None or not any(dotted_name(optimizer) == key for optimizer in self._stepped(previous, ctx)):
            return None  # not "cleared right after its own step"
        for loop in reversed(ctx.loops):
            statements = [(stmt, stmt_ctx) for stmt, stmt_ctx in analysis.statements_in_loop(loop)
                          if isinstance(stmt, cst.BaseSmallStatement)]
            own_step = next((stmt_ctx.order for stmt, stmt_ctx in statements for optimizer in self._stepped(stmt, stmt_ctx)
                             if dotted_name(optimizer) == key), None)
            other_steps = [stmt_ctx.order for stmt, stmt_ctx in statements if stmt_ctx.order < (own_step or 0)
                           and any(dotted_name(optimizer) != key and not model_roles(dotted_name(optimizer)) & {"discriminator", "critic"}
                                   for optimizer in self._stepped(stmt, stmt_ctx))]
            if own_step is None or not other_steps:
                continue
            other_step = max(other_steps)
            if any(stmt_ctx.order < own_step and self._clears_key(stmt, key) for stmt, stmt_ctx in statements):
                return None  # cleared again before its own backward
            backward = next((stmt for stmt, stmt_ctx in statements
                             if stmt_ctx.order < other_step and self._backpropagates(stmt, False)), None)
            if backward is None or "requires_grad" in analysis.module.code_for_node(loop.node) \
                    or analysis.may_contain("toggle_optimizer"):
                return None
            return backward
        return None

    def _stepped(self, item, ctx: Context) -> list:
        opaque = not isinstance(item, cst.BaseSmallStatement)
        return [optimizer for call in self._calls(item, opaque)
                for optimizer in (self.analysis.stepped_optimizer(call, ctx),) if optimizer is not None]

    def _clears_key(self, stmt, key: str) -> bool:
        return any(type(call.func) is cst.Attribute and call.func.attr.value == "zero_grad"
                   and dotted_name(call.func.value) == key for call in self.analysis.calls_in(stmt))

    def _accumulate_block(self, node, ctx: Context):
        """The ``accelerator.accumulate(model)`` call of a ``with`` block in which this
        ``zero_grad()`` runs before the block's ``backward()`` and an optimizer step follows it.
        Accelerate runs the prepared optimizer's ``step()`` and ``zero_grad()`` only on the
        micro-step that synchronises, so a clearing at the top of the block wipes what the
        earlier micro-steps accumulated right before the last ``backward()``; a model's own
        ``zero_grad()`` is not skipped at all and clears them on every micro-step."""
        analysis = self.analysis
        if not analysis.may_contain(".accumulate("):
            return None
        for with_stmt, with_ctx in analysis.statements_by_type.get("With", ()):
            if with_ctx.scope is not ctx.scope:
                continue
            item = next((item.item for item in with_stmt.items if type(item.item) is cst.Call
                         and type(item.item.func) is cst.Attribute and item.item.func.attr.value == "accumulate"), None)
            if item is None:
                continue
            inside = {id(each) for each in iter_expression_nodes(with_stmt.body)}
            if id(node) not in inside:
                continue
            receiver = node.value.func.value
            if ctx.guard is None and not analysis.is_optimizer(receiver, ctx) and any(
                analysis.statement_backpropagates(stmt, stmt_ctx)
                for stmt, stmt_ctx in ctx.scope.statements if id(stmt) in inside
            ) and any(
                analysis.stepped_optimizer(inner, stmt_ctx) is not None
                for stmt, stmt_ctx in ctx.scope.statements if id(stmt) in inside for inner in analysis.calls_in(stmt)
            ):
                return item, True  # model.zero_grad(): Accelerate does not skip it, so it clears every micro-step
            backward = step = None
            for stmt, stmt_ctx in ctx.scope.statements:
                if id(stmt) not in inside:
                    continue
                stepped = [optimizer for inner in analysis.calls_in(stmt)
                           for optimizer in (analysis.stepped_optimizer(inner, stmt_ctx),) if optimizer is not None]
                if stmt_ctx.order < ctx.order:
                    if any(self._clears(receiver, optimizer, stmt_ctx) for optimizer in stepped):
                        return None  # cleared after its own step: the documented order
                    continue
                if stmt_ctx.order == ctx.order:
                    continue
                if backward is None and analysis.statement_backpropagates(stmt, stmt_ctx):
                    backward = stmt_ctx.order
                elif backward is not None and any(self._clears(receiver, optimizer, stmt_ctx) for optimizer in stepped):
                    step = stmt_ctx.order
                    break
            return (item, False) if step is not None else None
        return None

    def _same_test_step(self, receiver, ctx: Context):
        """(step call, where) when the ``zero_grad()`` runs under ``if T:`` before this
        iteration's ``backward()``, and the step of an optimizer it clears runs after that
        ``backward()`` under another ``if`` with the same test ``T`` (OneTrainer's
        ``if self.__is_update_step(progress):`` on both sides): on the iteration that steps, the
        gradients the other iterations accumulated are cleared right before the last
        micro-batch's ``backward()``. (``if i % k == 0: zero_grad()`` at the start of a window
        and ``if (i + 1) % k == 0: step()`` at its end are two different tests: correct.)"""
        analysis = self.analysis
        loop, guard = ctx.loop, ctx.guard
        if loop is None or type(guard) is not cst.If or not analysis.loop_always_backpropagates(loop):
            return None
        if not self._boundary_test(guard.test, ctx):
            return None  # `if args.use_optimizer:` holds on every iteration or on none
        test = self.code(guard.test, 10_000)
        backward = None
        for stmt, stmt_ctx in analysis.statements_in_loop(loop):
            if stmt_ctx.order <= ctx.order or stmt_ctx.loop is not loop:
                continue
            if backward is None:
                if stmt_ctx.guard is None and analysis.statement_backpropagates(stmt, stmt_ctx):
                    backward = stmt_ctx.order
                continue
            other = stmt_ctx.guard
            if type(other) is not cst.If or other is guard or self.code(other.test, 10_000) != test:
                continue
            for inner in analysis.calls_in(stmt):
                optimizer = analysis.stepped_optimizer(inner, stmt_ctx)
                if optimizer is not None and self._clears(receiver, optimizer, stmt_ctx):
                    return inner, f"under the same `if {self.code(guard.test, 40)}:` after this iteration's `backward()`"
        return None

    def _boundary_test(self, test, ctx: Context) -> bool:
        """Does an ``if`` test say "this iteration ends an accumulation window": an
        accumulation test (``(i + 1) % k == 0``, a name with "accum" or "sync"), or a name saying
        update or step (``self.__is_update_step(progress)``, ``should_step``)?"""
        if self.analysis.is_accumulation_test(test, ctx):
            return True
        for node in iter_expression_nodes(test):
            name = node.attr.value if type(node) is cst.Attribute else node.value if type(node) is cst.Name else None
            if name is not None and {"update", "step"} & set(name_words(name)):
                return True
        return False

    def _step_after_loop(self, receiver, ctx: Context):
        """(step call, where) when the ``zero_grad()`` runs on every pass of a loop over
        micro-batches that each backpropagate, and the step of an optimizer it clears comes
        after that loop (``for batch in batch_list: opt.zero_grad(); loss =
        self.train_single(batch)``, then ``opt.step()``): only the last micro-batch's gradients
        reach the step. A loop that can ``break`` (retrying a step) is left alone."""
        analysis = self.analysis
        loop = ctx.loop
        if loop is None or loop.implicit is not None or not analysis.runs_every_iteration(ctx) \
                or not analysis.loop_always_backpropagates(loop):
            return None
        if any(type(node) is cst.Break for node in iter_expression_nodes(loop.node.body)):
            return None
        outer = ctx.loops[:-1]
        for stmt, stmt_ctx in loop.scope.statements:
            if stmt_ctx.order <= loop.end or stmt_ctx.scope is not loop.scope or stmt_ctx.loops != outer:
                continue
            calls = analysis.calls_in(stmt)
            if any(type(call.func) is cst.Attribute and call.func.attr.value == "zero_grad" for call in calls) \
                    or analysis.statement_backpropagates(stmt, stmt_ctx):
                return None  # cleared or recomputed before any step
            for inner in calls:
                optimizer = analysis.stepped_optimizer(inner, stmt_ctx)
                if optimizer is not None and self._clears(receiver, optimizer, stmt_ctx):
                    return inner, "after the loop"
        return None

    def _autofix(self, node, step, ctx: Context) -> Fix | None:
        """Move the ``zero_grad()`` to right after the step's statement: the step then applies
        the gradients backward() made, and the next backward() starts from cleared ones."""
        stmt = statement_of_call(self.analysis, step, ctx.scope)
        if stmt is None:
            return None
        return Fix.safe(f"Move `{self.code(node, 40)}` after `{self.code(stmt, 40)}`", Move(node, stmt))

    def _accumulation_step(self, receiver, ctx: Context):
        """(step call, its ``if``) when the ``zero_grad()`` runs on every iteration of a loop
        that backpropagates on every iteration, while the step of an optimizer it clears runs
        only under a gradient-accumulation test (``if (i + 1) % accum_steps == 0:``)."""
        analysis = self.analysis
        loop = ctx.loop
        if loop is None or not analysis.runs_every_iteration(ctx) or not analysis.loop_always_backpropagates(loop):
            return None
        for stmt, stmt_ctx in analysis.statements_in_loop(loop):
            guard = stmt_ctx.guard
            if stmt_ctx.loop is not loop or type(guard) is not cst.If or not analysis.is_accumulation_test(guard.test, stmt_ctx):
                continue
            for call in analysis.calls_in(stmt):
                optimizer = analysis.stepped_optimizer(call, stmt_ctx)
                if optimizer is not None and self._clears(receiver, optimizer, stmt_ctx):
                    if self._backpropagates_inside(guard, loop):
                        return None  # a GAN's generator step every n_critic: its own backward is there
                    return call, guard
        return None

    def _backpropagates_inside(self, guard, loop) -> bool:
        """Does the ``if`` block of the step call ``backward()`` itself (directly or through a
        helper)? Then the gradients it steps with are made there, not accumulated outside."""
        analysis = self.analysis
        inside = {id(node) for node in iter_expression_nodes(guard.body)}
        return any(
            id(stmt) in inside and analysis.statement_backpropagates(stmt, stmt_ctx)
            for stmt, stmt_ctx in analysis.statements_in_loop(loop)
        )

    def _before(self, sequence: list, index: int) -> list:
        """What runs before ``sequence[index]`` on every path to it, nearest last: the earlier
        statements of its sequence, and when that is an ``if`` branch, what precedes the ``if``."""
        parts = [sequence[:index]]
        parent = self.analysis.branch_parent(sequence)
        while parent is not None:
            sequence, index = parent
            parts.append(sequence[:index])
            parent = self.analysis.branch_parent(sequence)
        return [item for part in reversed(parts) for item in part]

    def _after_backward(self, before: list, ctx: Context) -> bool:
        """Is the last gradient event before the ``zero_grad()`` an unconditional ``backward()``
        (not an optimizer step, nor something conditional that might step or backpropagate)?"""
        for item in reversed(before):
            opaque = not isinstance(item, cst.BaseSmallStatement)
            if self._steps(item, ctx):
                return False  # zero_grad() after a step: the normal place
            if self._backpropagates(item, opaque):
                return not opaque or self._certainly_backpropagates(item)
        return False

    def _certainly_backpropagates(self, item) -> bool:
        """Does the compound statement run a ``backward()`` whichever way it goes: a ``with``
        whose body backpropagates (apex's ``with amp.scale_loss(loss, opt) as scaled:``), an
        ``if`` / ``else`` whose every branch does (``scaled.backward()`` or ``loss.backward()``)?"""
        kind = type(item)
        if isinstance(item, cst.BaseSmallStatement):
            return self._backpropagates(item, False)
        if kind is cst.SimpleStatementLine:
            return any(self._certainly_backpropagates(small) for small in item.body)
        if kind is cst.With:
            return any(self._certainly_backpropagates(inner) for inner in item.body.body)
        if kind is cst.If:
            if item.orelse is None:
                return False
            branches = [item.body.body, [item.orelse] if type(item.orelse) is cst.If else item.orelse.body.body]
            return all(any(self._certainly_backpropagates(inner) for inner in branch) for branch in branches)
        return False

    def _next_step(self, zero_grad_stmt, receiver, after: list, ctx: Context):
        """The unconditional step of an optimizer the ``zero_grad()`` clears, before any other
        ``backward()``; None when there is none or something conditional intervenes."""
        for item in after:
            opaque = not isinstance(item, cst.BaseSmallStatement)
            if self._backpropagates(item, opaque):
                return None  # gradients recomputed before the step
            if type(item) in (cst.Continue, cst.Break, cst.Return, cst.Raise):
                return None
            for call in self._calls(item, opaque):
                optimizer = self.analysis.stepped_optimizer(call, ctx)
                if optimizer is None or not self._clears(receiver, optimizer, ctx):
                    continue
                return None if opaque else call
        return None

    def _clears(self, receiver, optimizer, ctx: Context) -> bool:
        """Does ``receiver.zero_grad()`` certainly clear the gradients ``optimizer`` steps with?"""
        analysis = self.analysis
        receiver_key, optimizer_key = dotted_name(receiver), dotted_name(optimizer)
        if receiver_key is None or optimizer_key is None:
            return False
        if analysis.is_optimizer(receiver, ctx):
            return receiver_key == optimizer_key
        if analysis.optimizer_constructions(optimizer, ctx):  # Adam(model.parameters()) is cleared by model.zero_grad()
            return analysis.optimizes(optimizer, ctx, receiver_key)
        return self._steps_one_optimizer(ctx)

    def _steps_one_optimizer(self, ctx: Context) -> bool:
        analysis = self.analysis
        stepped = set()
        for stmt, stmt_ctx in ctx.scope.statements:
            for call in analysis.calls_in(stmt):
                optimizer = analysis.stepped_optimizer(call, stmt_ctx)
                if optimizer is not None:
                    stepped.add(self.code(optimizer))
        return len(stepped) == 1

    def _steps(self, item, ctx: Context) -> bool:
        opaque = not isinstance(item, cst.BaseSmallStatement)
        return any(self.analysis.stepped_optimizer(call, ctx) is not None for call in self._calls(item, opaque))

    def _backpropagates(self, item, opaque: bool) -> bool:
        return any(type(call.func) in (cst.Attribute, cst.Name) and _name(call) in BACKWARD_FUNCTIONS
                   for call in self._calls(item, opaque))

    def _calls(self, item, opaque: bool) -> list:
        return self.analysis.calls_within(item) if opaque else self.analysis.calls_in(item)



def _name(call) -> str:
    func = call.func
    return func.attr.value if type(func) is cst.Attribute else func.value
