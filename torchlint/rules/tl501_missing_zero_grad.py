from __future__ import annotations

from torchlint.analysis import Context, Loop, dotted_name, key_within, model_roles, name_words
from torchlint.lazy import cst
from torchlint.fix import Fix, InsertBefore, source_of
from torchlint.rule import Rule


class MissingZeroGrad(Rule):
    """
    ## What it does
    Finds optimizer steps (`optimizer.step()`, `scaler.step(optimizer)`) in a loop that calls
    `backward()` but never clears the gradients inside the loop: no `optimizer.zero_grad()`,
    `model.zero_grad()`, `p.grad = None`, `p.grad.zero_()` or helper named like `zero_grad`
    anywhere in the loop body. A single `zero_grad()` before the loop does not count.

    ## Why is this bad?
    `backward()` adds into `.grad`; it never overwrites it. Without clearing, the gradient
    applied at step k is the sum of the gradients of all k steps so far, so every update is
    larger than intended and points towards old batches: the training silently diverges or
    crawls. This is a correctness bug, not a memory leak: the `.grad` tensors are allocated
    once and memory stays flat. Measured on a 2-layer MLP trained with SGD (lr 0.01): the
    applied gradient equals the running sum of every step's own gradient (relative error 0),
    and its norm grew 4.7× in 8 steps and 39× in 200, while the fixed loop's stayed flat
    (0.55 to 0.60 over 8 steps); live memory flat in both.

    ## Known problems
    Gradient accumulation is correct and not reported: any clearing anywhere in the loop
    (at the start, at the end of the iteration, under `if (i + 1) % k == 0:`, in a nested
    loop over the parameters or optimizers) counts, except one that only runs under an
    unrelated `if` while the step runs on every iteration (`if self.scheduler:
    optimizer.zero_grad()`): that is reported, unless the other arm of the `if` clears too.
    A helper handed the networks it clears (`self.zero_grad([self.netG_A, self.netG_B])`) covers
    them. Only a `zero_grad()` of another optimizer that is known to be a different object
    (`opt_d.zero_grad()` when stepping `opt_g`, both built in the function) does not.
    Helpers of this file are followed: a `backward()` or a clearing inside a function the loop
    calls counts, and a per-step function (`train_step(batch)`, called by the loop in `fit`)
    is checked with its caller's loop, whose clearings around the call count too; helpers in
    other files are not followed. A function that is one training step by itself
    (`agent.learn(batch)`, `gan.step(data)`: `backward()` then the step, called by a loop in
    another file) is reported when nothing in its file ever clears that optimizer's
    gradients. Optimizers are
    recognised by name (`optimizer`, `opt_g`, `self.actor.optimizer`) or construction
    (`torch.optim.*`, `*Optimizer(...)`), so `scheduler.step()`, `env.step(action)` and
    `ema.step()` are never steps; neither is `optimizer.step(closure)` (the closure clears
    and recomputes the gradients), nor a loop whose iterations each step a different
    optimizer (`for opt in optimizers: opt.step()`): its enclosing loop is checked instead.
    With an enabled `GradScaler`, `scaler.step()` unscales the gradients in place, which
    shrinks the leftovers of earlier steps by the scale factor (65536 at first) and hides
    most of the effect; the finding stands, since the same loop is fully wrong as soon as the
    scaler is disabled (bf16 or fp32 runs). A model's `zero_grad()` does not clear an
    optimizer of another role by their names (`d_model.zero_grad()` before
    `scaler.step(g_optimizer)`: generator/discriminator, actor/critic), when the optimizer's
    construction does not say which model it updates. A step on one branch of an `if` whose
    other branch alone clears (`if amp: optimizer.zero_grad(); ...` / `else: loss.backward();
    optimizer.step()`) is reported: that branch never clears.
    """

    CODE = "TL501"
    NAME = "missing-zero-grad"
    MESSAGE = (
        "`{step}` applies gradients that are never cleared in this loop, "
        "so every step adds up all previous steps' gradients"
    )
    FIX = "call `{optimizer}.zero_grad()` once per step (before `backward()` or after `step()`), inside the loop"
    STEP_FUNCTION_MESSAGE = (
        "`{step}` ends a training step (`{function}`) that never clears the gradients, and nothing "
        "in this file does: every call adds its gradients to those of all earlier calls"
    )
    STEP_FUNCTION_FIX = "call `{optimizer}.zero_grad()` in `{function}` before its `backward()`"
    CONDITIONAL_MESSAGE = (
        "`{step}` runs on every iteration but the gradients are cleared only when `{test}`, "
        "so the other iterations add up all previous steps' gradients"
    )
    BRANCH_MESSAGE = (
        "`{step}` runs on a branch that never clears the gradients (only the other branch of the `if` "
        "calls `zero_grad()`), so on this branch every step adds up all previous steps' gradients"
    )
    BRANCH_FIX = "call `{optimizer}.zero_grad()` on this branch too, or once before the `if`"
    CONDITIONAL_FIX = "call `{optimizer}.zero_grad()` on every iteration, outside that `if`"
    AUTOFIX = (
        "Safe: inserts `optimizer.zero_grad()` before the loop's first `backward()`, when both it "
        "and the step run on every iteration. No fix for a conditional step (it may be gradient "
        "accumulation)."
    )
    TOKENS = ("backward",)
    CLAIM = (
        "the gradient the bad loop applies at step k equals the sum of all k steps' own gradients "
        "and its norm keeps growing, with flat memory; the fixed loop applies each step's own gradient"
    )

    INVALID = [
        """\
class Agent:
    def __init__(self, net):
        self.net = net
        self.optimizer = torch.optim.Adam(net.parameters())

    def learn(self, batch):  # called once per batch by a loop in another file
        x, y = batch
        loss = F.mse_loss(self.net(x), y)
        loss.backward()
        self.optimizer.step()  # expect: TL501
        return loss.item()
""",
        """\
optimizerD = torch.optim.Adam(netD.parameters())
optimizerG = torch.optim.Adam(netG.parameters())
for real in loader:
    errD = criterion(netD(real), ones) + criterion(netD(netG(z).detach()), zeros)
    errD.backward()
    optimizerD.step()  # expect: TL501
    netG.zero_grad()
    criterion(netD(netG(z)), ones).backward()
    optimizerG.step()
""",
        """\
optimizer.zero_grad()
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()  # expect: TL501
""",
        """\
for x, y in loader:
    with torch.autocast("cuda"):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)  # expect: TL501
    scaler.update()
""",
        """\
class Trainer:
    def train_one_step(self, batch):
        loss = self.model(**batch).loss
        loss.backward()
        self.optimizer.step()  # expect: TL501
        if self.scheduler:
            self.scheduler.step()
            self.optimizer.zero_grad()

    def fit(self, loader):
        for batch in loader:
            self.train_one_step(batch)
""",
        """\
def train(g_model, d_model, g_optimizer, d_optimizer, loader, scaler):
    for lr, gt in loader:
        d_model.zero_grad(set_to_none=True)  # the discriminator's: not what g_optimizer steps
        g_loss = adversarial(d_model(g_model(lr)), gt)
        scaler.scale(g_loss).backward()
        scaler.step(g_optimizer)  # expect: TL501
        scaler.update()
        d_model.zero_grad(set_to_none=True)
        d_loss = discriminate(d_model, g_model(lr).detach(), gt)
        scaler.scale(d_loss).backward()
        scaler.step(d_optimizer)
        scaler.update()
""",
        """\
def train_one_epoch(model, criterion, loader, optimizer, scaler, amp):
    for samples, targets in loader:
        losses = criterion(model(samples), targets)
        if amp:
            optimizer.zero_grad()
            scaler.scale(losses).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            losses.backward()
            optimizer.step()  # expect: TL501
""",
    ]
    VALID = [
        """\
class Agent:
    def __init__(self, net):
        self.net = net
        self.optimizer = torch.optim.Adam(net.parameters())

    def reset_gradients(self):  # the driving loop calls it before each learn()
        self.optimizer.zero_grad()

    def learn(self, batch):
        loss = F.mse_loss(self.net(batch[0]), batch[1])
        loss.backward()
        self.optimizer.step()
""",
        """\
optimizer = torch.optim.SGD(model.module.parameters(), lr=0.1)
for x, y in loader:
    model.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
""",
        """\
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
""",
        """\
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accumulation_steps
    loss.backward()
    if (i + 1) % accumulation_steps == 0:
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
""",
        """\
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    if use_set_to_none:
        optimizer.zero_grad(set_to_none=True)
    else:
        optimizer.zero_grad(set_to_none=False)
""",
        """\
for step in range(num_steps):
    action = policy(obs)
    obs, reward, done, info = env.step(action)
    loss = -reward * action.log_prob
    loss.backward()
    scheduler.step()
""",
        """\
def train(netG, netD, optimizerG, optimizerD, loader):
    for real, z in loader:
        netD.zero_grad()
        discriminator_loss(netD, real, netG(z).detach()).backward()
        optimizerD.step()
        netG.zero_grad()  # the generator's own gradients
        generator_loss(netD(netG(z))).backward()
        optimizerG.step()
""",
        """\
def train_one_epoch(model, criterion, loader, optimizer, scaler, amp):
    for samples, targets in loader:
        losses = criterion(model(samples), targets)
        optimizer.zero_grad()  # before the `if`: both branches start from cleared gradients
        if amp:
            scaler.scale(losses).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            losses.backward()
            optimizer.step()
""",
        """\
class CycleGAN(BaseModel):  # BaseModel.zero_grad(nets) sets each net's param.grad to None
    def optimize_parameters(self):
        for _ in range(self.generator_steps):
            self.forward()
            self.zero_grad([self.netG_A, self.netG_B])
            self.backward_G()
            self.optimizer_G.step()
        self.zero_grad(self.netD)
        self.backward_D()
        self.optimizer_D.step()
""",
    ]

    def visit_Expr(self, node, ctx: Context) -> None:
        call = node.value
        if type(call) is not cst.Call:
            return
        if not ctx.loops:
            self._check_step_function(node, call, ctx)
            return
        analysis = self.analysis
        optimizer = analysis.stepped_optimizer(call, ctx)
        if optimizer is None:
            return
        loop = self._training_loop(optimizer, ctx)
        if loop is None:
            return  # backward() runs in a helper (or not at all): out of sight
        clearings = [
            clear_ctx for receiver, clear_ctx in analysis.loop_gradient_clearings(loop)
            if self._clears(receiver, clear_ctx, optimizer, ctx)
        ]
        name = self.code(optimizer, 40)
        if not clearings:
            self.report(node, self.MESSAGE.format(step=self.code(call, 60)), self.FIX.format(optimizer=name),
                        autofix=self._autofix(optimizer, loop, ctx))
            return
        statements = [stmt for stmt, stmt_ctx in analysis.statements_in_loop(loop)
                      if any(stmt_ctx is clear_ctx for clear_ctx in clearings)]
        if statements and all(analysis.exclusive_branches(stmt, node, ctx.scope) for stmt in statements):
            # `if amp: opt.zero_grad(); scaler...` / `else: loss.backward(); opt.step()`
            self.report(node, self.BRANCH_MESSAGE.format(step=self.code(call, 60)), self.BRANCH_FIX.format(optimizer=name),
                        autofix=None)
            return
        guard = self._only_conditional(clearings, loop, ctx)
        if guard is not None:
            self.report(node, self.CONDITIONAL_MESSAGE.format(step=self.code(call, 60), test=self.code(guard.test, 40)),
                        self.CONDITIONAL_FIX.format(optimizer=name))

    def _check_step_function(self, node, call, ctx: Context) -> None:
        """A function that is one training step by itself (``agent.learn(batch)``, ``gan.step(data)``):
        it backpropagates and steps an optimizer, nothing in this file calls it (the loop that
        does is elsewhere) and nothing in this file ever clears that optimizer's gradients, so
        every call adds its gradients to all the earlier calls' ones."""
        scope = ctx.scope
        analysis = self.analysis
        if scope.kind != "function" or ctx.guard is not None or analysis.is_test_module:
            return
        if not STEP_FUNCTION_WORDS.intersection(word.lower() for word in name_words(scope.name)):
            return
        optimizer = analysis.stepped_optimizer(call, ctx)
        if optimizer is None or analysis.callers_of(scope) or not analysis.backpropagates(scope):
            return
        if not any(analysis.statement_backpropagates(stmt, stmt_ctx) and stmt_ctx.order < ctx.order
                   for stmt, stmt_ctx in scope.statements if stmt_ctx.scope is scope):
            return  # the backward() is not before this step in the function
        for kind in CLEARING_STATEMENTS:
            for stmt, stmt_ctx in analysis.statements_by_type.get(kind, ()):
                if any(self._clears(receiver, stmt_ctx, optimizer, ctx) for receiver in analysis.gradient_clearings(stmt)):
                    return
        name = self.code(optimizer, 40)
        self.report(node, self.STEP_FUNCTION_MESSAGE.format(step=self.code(call, 60), function=scope.name),
                    self.STEP_FUNCTION_FIX.format(optimizer=name, function=scope.name))

    def _autofix(self, optimizer, loop: Loop, ctx: Context) -> Fix | None:
        """``optimizer.zero_grad()`` inserted before the loop's first ``backward()``, when the
        step and that ``backward()`` both run on every iteration of the loop itself. A step under
        an ``if`` may be gradient accumulation: clearing before every backward would break it."""
        analysis = self.analysis
        if ctx.loop is not loop or not analysis.runs_every_iteration(ctx):
            return None
        for stmt, stmt_ctx in analysis.statements_in_loop(loop):
            if not isinstance(stmt, cst.BaseSmallStatement) or not analysis.statement_backpropagates(stmt, stmt_ctx):
                continue
            if stmt_ctx.loop is not loop or not analysis.runs_every_iteration(stmt_ctx):
                return None  # the first backward is conditional or in an inner loop
            call = f"{source_of(analysis, optimizer)}.zero_grad()"
            return Fix.safe(f"Insert `{call}` before `{self.code(stmt, 40)}`", InsertBefore(stmt, call))
        return None

    def _only_conditional(self, clearings: list[Context], loop: Loop, ctx: Context):
        """The ``if`` of the clearing when the step runs on every iteration but every clearing
        sits under one ``if`` of the loop's body that is not a gradient-accumulation test
        (``if self.scheduler: opt.zero_grad()``), so iterations where it is false add up their
        gradients; None otherwise (clearings on both arms of the ``if`` cover every pass)."""
        analysis = self.analysis
        if ctx.loop is not loop or not analysis.runs_every_iteration(ctx):
            return None
        guards = {id(clear_ctx.guard): clear_ctx.guard for clear_ctx in clearings}
        if len(guards) != 1 or any(clear_ctx.loop is not loop for clear_ctx in clearings):
            return None
        guard = next(iter(guards.values()))
        if type(guard) is not cst.If or analysis.is_accumulation_test(guard.test, clearings[0]):
            return None
        statements = [stmt for stmt, stmt_ctx in analysis.statements_in_loop(loop)
                      if any(stmt_ctx is clear_ctx for clear_ctx in clearings)]
        if any(analysis.exclusive_branches(first, second, loop.scope)
               for first in statements for second in statements if first is not second):
            return None
        return guard

    def _training_loop(self, optimizer, ctx: Context) -> Loop | None:
        """The innermost loop around the step that backpropagates and keeps the same optimizer
        from one iteration to the next (``for opt in optimizers:`` steps a different one each
        time: its enclosing loop is the one that repeats the steps)."""
        key = dotted_name(optimizer if type(optimizer) is not cst.Subscript else optimizer.value)
        bindings = self.analysis.bindings_in(key, ctx.scope) if key is not None else ()
        for loop in reversed(ctx.loops):
            if any(binding.ctx.order == loop.start or binding.ctx.loop is loop for binding in bindings):
                continue  # the loop binds (rebuilds or iterates over) the optimizer itself
            if self.analysis.loop_backpropagates(loop):
                return loop
            return None  # the step's loop does not backpropagate: a helper does
        return None

    def _clears(self, receiver, receiver_ctx: Context, optimizer, ctx: Context) -> bool:
        if receiver is None:
            return True  # p.grad = None, zero_grads(model), set_to_none=...: assume it covers
        analysis = self.analysis
        if not analysis.is_optimizer(receiver, receiver_ctx):
            # model.zero_grad(): it covers the optimizer unless that one plainly belongs to
            # another model (netG.zero_grad() does not clear what optimizerD steps)
            owner = self._optimizer_owner(optimizer, ctx)
            cleared = dotted_name(receiver)
            if owner is None and cleared is not None:
                # `d_model.zero_grad()` before `scaler.step(g_optimizer)`: names of two roles
                stepped, clearing = model_roles(dotted_name(optimizer)), model_roles(cleared)
                return not (stepped and clearing and stepped.isdisjoint(clearing))
            return owner is None or cleared is None or key_within(owner, cleared) or key_within(cleared, owner)
        return not analysis.distinct_optimizers(receiver, receiver_ctx, optimizer, ctx)

    def _optimizer_owner(self, optimizer, ctx: Context) -> str | None:
        """The model whose parameters the optimizer updates, when the code says so: built from
        ``netD.parameters()`` (``optimizerD = Adam(netD.parameters())``), or kept as that model's
        attribute (``self.discriminator.optimizer``)."""
        key = dotted_name(optimizer)
        if key is None:
            return None
        owners = self.analysis.optimized_modules(optimizer, ctx)
        if len(owners) == 1:
            return owners.pop()
        if "." in key and key.rpartition(".")[2] in OPTIMIZER_ATTRIBUTES:
            owner = key.rpartition(".")[0]
            return owner if owner != "self" else None
        return None


# Names of functions that make one training step per call.
STEP_FUNCTION_WORDS = frozenset({"step", "train", "training", "update", "learn", "optimize", "optimise", "iteration", "batch"})
CLEARING_STATEMENTS = ("Expr", "Assign", "AnnAssign", "Del", "AugAssign", "Return")
OPTIMIZER_ATTRIBUTES = frozenset({"optimizer", "optim", "opt", "optimiser"})
