from __future__ import annotations

from torchlint.analysis import Context, call_name, dotted_name, iter_expression_nodes, last_part, mentioned_keys, name_words, strip_pass_through
from torchlint.lazy import cst
from torchlint.fix import Fix, Replace, import_reference, source_of
from torchlint.rule import Rule

# Words of a name that keeps a model as a snapshot: `best_model = model` aliases the live one.
SNAPSHOT_WORDS = frozenset({"best", "snapshot", "checkpoint", "ckpt"})


class StateDictSnapshotAliasesModel(Rule):
    """
    ## What it does
    Finds `best = model.state_dict()` (or `optimizer.state_dict()`, `self.best_state = ...`,
    a `.copy()` or `dict(...)` of one, a dict literal holding one, the state dict of an
    unwrapped model: `getattr(model, "module", model)`, `accelerator.unwrap_model(model)`,
    `model.module.state_dict() if ddp else model.state_dict()`) kept as a snapshot while the
    weights go on changing: training (an optimizer step, `backward()`, a call such as
    `train(model, ...)`, or `load_state_dict` of other weights) can run between the snapshot
    and a later use of it, such as `model.load_state_dict(best)` after the epoch loop. Also
    `best_model = model` inside the epoch loop (a name saying best, snapshot or checkpoint
    given the live module itself) read after more training.

    ## Why is this bad?
    `state_dict()` returns the module's own parameter and buffer tensors (detached, but the
    same storage), and an optimizer's state dict holds its live state tensors. Training
    updates them in place, so the "snapshot" follows the live weights: the best epoch's
    weights are lost and `load_state_dict(best)` restores the current ones. Nothing raises.
    Measured on a 2-layer MLP trained with SGD: an early-stopping `best_state` moved by up to
    0.71 (largest element change) after it was taken, and a reset to an `initial =
    model.state_dict()` after fine-tuning left the weights 0.52 (L2) away from the initial
    ones; `copy.deepcopy` snapshots stayed bit-for-bit as taken.

    ## Known problems
    For `self.x = model.state_dict()` restored in another method of the class (or in a later
    call of the same callback hook, `on_epoch_end` restoring what an earlier epoch kept), the snapshot
    is reported when its name or an `if` around it says "best", or it is taken in a callback
    hook (`on_epoch_end`: the framework trains between the calls), or when the class itself
    trains or loads other weights into the model after the snapshot (an EMA swap); a class that only replaces weights
    (`module.weight.data = ...` swaps the storage and leaves the snapshot intact) is left
    alone. An optimizer's state dict taken before its first step is not reported: its per-
    parameter state does not exist yet, so the snapshot shares nothing.
    Not reported: `copy.deepcopy(model.state_dict())`, `{k: v.clone() ...}`,
    `{k: v.detach().cpu().clone() ...}` and `{k: v.cpu() ...}` snapshots (on a GPU `.cpu()`
    copies; on a CPU-only run it does not), a state dict saved or returned before any more
    training (`torch.save(model.state_dict(), path)`, `sd = model.state_dict(); torch.save(sd,
    path)`, also when each branch of an `if` / `else` takes it before the save), and one taken
    after training ends, nor one whose later reads take only its keys and its tensors'
    shapes (`set(sd.keys())`, `sd[k].shape`, `len(sd)`). A `self.best_*` snapshot kept by a callback hook
    is reported even when the class never restores it: a trainer in another file does. A snapshot stored into a
    container (`history[epoch] = model.state_dict()`) is not followed.
    """

    CODE = "TL504"
    NAME = "state-dict-snapshot-aliases-model"
    MESSAGE = (
        "`{target}` keeps `{call}`'s live tensors, not a copy: the training that follows changes "
        "this snapshot too, so restoring it later restores nothing"
    )
    MODULE_MESSAGE = (
        "`{target}` is `{model}` itself, not a copy: the training that follows changes it too, so "
        "the best model kept is the last one"
    )
    MODULE_FIX = "keep a copy: `copy.deepcopy({model})` (or snapshot `{model}.state_dict()` with `copy.deepcopy`)"
    FIX = "snapshot a copy: `copy.deepcopy({call})` or `{{k: v.detach().clone() for k, v in {call}.items()}}`"
    AUTOFIX = (
        "Unsafe: wraps the `state_dict()` call in `copy.deepcopy(...)` (adding `import copy` after "
        "the file's imports when it lacks one). The snapshot then keeps the values it was taken "
        "with, at the price of one more copy of the weights on their device, which a model that "
        "barely fits may not have room for (`{k: v.detach().cpu().clone() ...}` keeps it on the host)."
    )
    TOKENS = ("state_dict", "best")
    CLAIM = (
        "a state_dict() snapshot changes with every later optimizer step; a deepcopy snapshot stays "
        "exactly as taken"
    )

    INVALID = [
        """\
class EarlyStopping(Callback):
    def on_epoch_end(self, epoch, logs=None):
        current = logs["val_loss"]
        if current < self.best:
            self.best, self.wait = current, 0
            self.state_dict = self.model.state_dict()  # expect: TL504
        else:
            self.wait += 1
            if self.wait >= self.patience:
                self.model.load_state_dict(self.state_dict)  # a later call: epochs trained since
""",
        """\
class ModelCheckpoint(Callback):
    def on_epoch_end(self, epoch, logs=None):
        if logs["val_loss"] < self.best:
            self.best = logs["val_loss"]
            self.best_state_dict = self.model.state_dict()  # expect: TL504
""",
        """\
best_loss = float("inf")
for epoch in range(epochs):
    train_one_epoch(model, loader, optimizer)
    val_loss = evaluate(model, val_loader)
    if val_loss < best_loss:
        best_loss = val_loss
        best_state = model.state_dict()  # expect: TL504
model.load_state_dict(best_state)
""",
        """\
def fine_tune(model, optimizer, loader):
    initial = model.state_dict()  # expect: TL504
    for x, y in loader:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    drift = sum((model.state_dict()[k] - initial[k]).norm() for k in initial)
    return drift
""",
        """\
class EarlyStopping:
    def step(self, model, score):
        if score > self.best_score:
            self.best_score = score
            self.best_weights = model.state_dict()  # expect: TL504

    def restore(self, model):
        model.load_state_dict(self.best_weights)
""",
        """\
best_auc, best_model = 0.0, model  # a default: the last model if nothing improves
for epoch in range(epochs):
    train_one_epoch(model, loader, optimizer)
    auc = evaluate(model, val_loader)
    if auc > best_auc:
        best_auc = auc
        best_model = model  # expect: TL504
test(best_model, test_loader)
""",
        """\
best_acc = 0.0
for epoch in range(epochs):
    train_one_epoch(model, loader, optimizer)
    acc = evaluate(model, val_loader)
    if acc > best_acc:
        best_acc = acc
        best_state = getattr(model, "module", model).state_dict()  # expect: TL504
model.load_state_dict(best_state)
""",
        """\
def fit(self, loader, val_loader, epochs):
    best = None
    for epoch in range(epochs):
        self.train_epoch(loader)
        if self.validate(val_loader) < self.best_loss:
            best = self.accelerator.unwrap_model(self.model).state_dict()  # expect: TL504
    self.model.load_state_dict(best)
""",
        """\
def train(model, loader, optimizer, ema_dict, ema_w, rank):
    for x, y in loader:
        if rank == 0:
            start = model.state_dict()  # expect: TL504
            for k in ema_dict:
                loss = torch.nn.functional.mse_loss(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                ema_dict[k] = ema_w * ema_dict[k] + (1 - ema_w) * start[k]
""",
        """\
def load_pretrained(model, path, delete_keys):
    checkpoint = torch.load(path)
    current = model.state_dict()  # expect: TL504
    for k in delete_keys:
        print(f"dropping {k}: {checkpoint[k].shape} in the file, {current[k].shape} in the model")
        del checkpoint[k]
    model.load_state_dict(checkpoint, strict=False)
    model.load_state_dict(current)
""",
    ]
    VALID = [
        """\
for epoch in range(epochs):
    train_one_epoch(model, loader, optimizer)
    if epoch % save_every == 0:
        if isinstance(model, DistributedDataParallel):
            weights = model.module.state_dict()
        else:
            weights = model.state_dict()
        torch.save({"model": weights, "epoch": epoch}, f"epoch_{epoch}.pt")
""",
        """\
class ModelCheckpoint(Callback):
    def on_epoch_end(self, epoch, logs=None):
        if logs["val_loss"] < self.best:
            self.best = logs["val_loss"]
            self.best_state_dict = copy.deepcopy(self.model.state_dict())
            torch.save(self.model.state_dict(), self.path)
""",
        """\
best_loss = float("inf")
for epoch in range(epochs):
    train_one_epoch(model, loader, optimizer)
    val_loss = evaluate(model, val_loader)
    if val_loss < best_loss:
        best_loss = val_loss
        best_state = copy.deepcopy(model.state_dict())
model.load_state_dict(best_state)
""",
        """\
for epoch in range(epochs):
    train_one_epoch(model, loader, optimizer)
    val_loss = evaluate(model, val_loader)
    if val_loss < best_loss:
        best_loss = val_loss
        best_state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
        torch.save(model.state_dict(), "best.pt")
model.load_state_dict(best_state)
""",
        """\
for epoch in range(epochs):
    train_one_epoch(model, loader, optimizer)
    checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}
    torch.save(checkpoint, f"checkpoint_{epoch}.pt")
""",
        """\
def fit(model, optimizer, loader, epochs):
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            F.mse_loss(model(x), y).backward()
            optimizer.step()
    final_state = model.state_dict()
    torch.save(final_state, "final.pt")
    return final_state
""",
        """\
for epoch in range(epochs):
    train_one_epoch(model, loader, optimizer)
    last_state = model.state_dict()
torch.save(last_state, "last.pt")
""",
        """\
best_auc = 0.0
for epoch in range(epochs):
    train_one_epoch(model, loader, optimizer)
    auc = evaluate(model, val_loader)
    if auc > best_auc:
        best_auc = auc
        best_model = copy.deepcopy(model)
test(best_model, test_loader)
""",
        """\
for fold in range(folds):
    model = build_model()
    train(model, fold)
    best_model = model  # each fold's model is a new object
    results.append(evaluate(best_model, fold))
""",
        """\
def train(model, loader, optimizer, ema_dict, ema_w, rank):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if rank == 0:
            new_dict = model.state_dict()  # read at once, every pass: no training in between
            for k, v in ema_dict.items():
                ema_dict[k] = ema_w * ema_dict[k] + (1 - ema_w) * new_dict[k]
""",
        """\
def load_pretrained(model, path, delete_keys):
    checkpoint = torch.load(path)
    current = model.state_dict()  # only its keys and shapes are read
    for k in delete_keys:
        print(f"dropping {k}: {checkpoint[k].shape} in the file, {current[k].shape} in the model")
        del checkpoint[k]
    model.load_state_dict(checkpoint, strict=False)
    print("mismatched keys:", set(checkpoint.keys()) ^ set(current.keys()), len(current))
""",
    ]

    def visit_Assign(self, node, ctx: Context) -> None:
        if len(node.targets) == 1:
            self._check(node, node.targets[0].target, node.value, ctx)

    def visit_AnnAssign(self, node, ctx: Context) -> None:
        if node.value is not None:
            self._check(node, node.target, node.value, ctx)

    def _check(self, node, target, value, ctx: Context) -> None:
        key = dotted_name(target)
        if key is None:
            return  # tuple targets, containers (history[epoch] = ...): not followed
        call = self.analysis.aliasing_state_dict(value, ctx)
        if call is None:
            self._check_module_alias(node, target, key, value, ctx)
            return
        owner_expr = strip_pass_through(call.func.value)
        owner = dotted_name(owner_expr)
        if owner is not None and self._fresh_optimizer(owner_expr, owner, ctx):
            return  # no step yet: the optimizer has no per-parameter state to share
        if self._used_after_training(key, owner, node, ctx) or self._restored_elsewhere(key, owner, node, ctx):
            self.report(node, self.MESSAGE.format(target=self.code(target, 40), call=self.code(call, 50)),
                        self.FIX.format(call=self.code(call, 50)), autofix=self._autofix(call, ctx))

    def _check_module_alias(self, node, target, key: str, value, ctx: Context) -> None:
        """``best_model = model`` when validation improves: a second name for the live module,
        which the epochs that follow go on training."""
        module = strip_pass_through(value)
        if not ctx.loops or type(module) not in (cst.Name, cst.Attribute) \
                or not SNAPSHOT_WORDS & set(name_words(last_part(key))):
            return  # (`best_model = model` before the epoch loop is a default, not a snapshot)
        owner = dotted_name(module)
        if owner is None or not self.analysis.is_module(module, ctx):
            return
        if self._used_after_training(key, owner, node, ctx):
            model = self.code(module, 40)
            self.report(node, self.MODULE_MESSAGE.format(target=self.code(target, 40), model=model),
                        self.MODULE_FIX.format(model=model), autofix=self._autofix(module, ctx))

    def _autofix(self, call, ctx: Context) -> Fix | None:
        """``copy.deepcopy(model.state_dict())`` in place of the call (``import copy`` added when the
        file lacks it). Only the ``state_dict()`` call is copied: a dict literal around it may
        hold objects (a loader, a config) that must not be copied."""
        reference = import_reference(self.analysis, "copy", "deepcopy", ctx)
        if reference is None:
            return None
        deepcopy, extra = reference
        code = f"{deepcopy}({source_of(self.analysis, call)})"
        return Fix.unsafe(f"Snapshot a copy: `{deepcopy}({self.code(call, 40)})`", Replace(call, code), *extra)

    def _used_after_training(self, key: str, owner: str | None, node, ctx: Context) -> bool:
        """Is the snapshot read somewhere in the function after the weights may have changed
        since it was taken?"""
        analysis = self.analysis
        statements = [(stmt, stmt_ctx) for stmt, stmt_ctx in ctx.scope.statements if stmt_ctx.scope is ctx.scope]
        for use, use_ctx in statements:
            if use is node or not self._reads(use, key):
                continue
            latest = analysis.lookup(key, use_ctx)
            if latest is not None and latest.stmt is not node and latest.ctx.scope is ctx.scope:
                # rebound on every path to the use: after the snapshot, or earlier in the use's
                # own pass through a loop around both (`if epoch == 50: states = {...}; save(states)`)
                shared = [loop for loop in ctx.visible_loops if loop.contains(use_ctx.order)]
                since = shared[-1].start if shared and use_ctx.order < ctx.order else ctx.order
                if latest.order > since and self._encloses(latest.stmt, latest.ctx, use, use_ctx):
                    continue
            if self._rebound_on_every_branch(key, node, ctx, use, use_ctx):
                continue
            window = self._window(node, ctx, use, use_ctx)
            if window is None:
                continue
            rebindings = [binding for binding in ctx.scope.bindings.get(key, ())
                          if binding.stmt is not node and binding.ctx.scope is ctx.scope]
            replaced = [binding.order for binding in ctx.scope.bindings.get(owner or "", ())
                        if binding.ctx.scope is ctx.scope and binding.order > ctx.order]
            if any(window(stmt_ctx.order) and analysis.changes_weights(stmt, stmt_ctx, keep=key, owner=owner)
                   and not self._retaken_after(stmt, stmt_ctx, use_ctx, rebindings)
                   and not any(order < stmt_ctx.order for order in replaced)  # another object by then
                   for stmt, stmt_ctx in statements if stmt is not use):
                return True
        return False

    def _rebound_on_every_branch(self, key: str, node, ctx: Context, use, use_ctx: Context) -> bool:
        """Does every branch of the ``if`` that holds the snapshot take one, in the same loop pass
        before the use that follows the ``if`` (``if a: sd = x.state_dict() else: sd =
        y.state_dict()``, then ``torch.save(sd, path)``)? Then the use never sees an older one."""
        if use_ctx.order < ctx.order or use_ctx.visible_loops[-1:] != ctx.visible_loops[-1:]:
            return False
        branches = self.analysis.branch_conditions
        used, taken = branches(use, ctx.scope), branches(node, ctx.scope)
        shared = 0
        while shared < min(len(used), len(taken)) and used[shared] == taken[shared]:
            shared += 1
        if len(taken) != shared + 1 or (len(used) > shared and used[shared][0] == taken[-1][0]):
            return False  # not the innermost `if` of the snapshot, or the use sits in one of its branches
        prefix, test = taken[:shared], taken[-1][0]
        sides = {
            conditions[shared:]
            for binding in ctx.scope.bindings.get(key, ())
            if binding.ctx.scope is ctx.scope and binding.order < use_ctx.order
            and binding.ctx.visible_loops[-1:] == ctx.visible_loops[-1:]
            for conditions in (branches(binding.stmt, ctx.scope),) if conditions[:shared] == prefix
        }
        return ((test, True),) in sides and ((test, False),) in sides

    def _fresh_optimizer(self, owner_expr, owner: str, ctx: Context) -> bool:
        """Is the owner an optimizer bound earlier in the same function, with nothing that
        could step it between its binding and the snapshot (and no loop around the snapshot
        that the binding is outside of)?"""
        analysis = self.analysis
        if not analysis.is_optimizer(owner_expr, ctx):
            return False
        binding = analysis.lookup(owner, ctx)
        if binding is None or binding.ctx.scope is not ctx.scope or binding.kind not in ("assign", "with"):
            return False
        if any(not loop.contains(binding.order) for loop in ctx.visible_loops):
            return False
        return not any(
            binding.order < stmt_ctx.order < ctx.order and analysis.changes_weights(stmt, stmt_ctx)
            for stmt, stmt_ctx in ctx.scope.statements if stmt_ctx.scope is ctx.scope
        )

    def _retaken_after(self, event, event_ctx: Context, use_ctx: Context, rebindings) -> bool:
        """Is the snapshot taken afresh after the training and before the use, on every path
        through the training (``state = opt.state_dict()`` again right after an initialising
        ``opt.step()`` in the same branch)?"""
        return any(
            event_ctx.order < binding.order < use_ctx.order and binding.ctx.visible_loops == event_ctx.visible_loops
            and self._encloses(binding.stmt, binding.ctx, event, event_ctx, after=True)
            for binding in rebindings
        )

    def _window(self, node, ctx: Context, use, use_ctx: Context):
        """A test on statement orders: can that statement run after the snapshot's last
        assignment and before the use? None when the use cannot see the snapshot."""
        start, end = ctx.order, use_ctx.order
        # for / while only: a local snapshot does not outlive one call of a per-step function
        loops = ctx.visible_loops
        exited = [loop for loop in loops if not loop.contains(end)]
        shared = [loop for loop in loops if loop.contains(end)]
        if end < start and not shared:
            return None

        def conditional(loop) -> bool:
            """Can an iteration of ``loop`` reach the use without retaking the snapshot?"""
            if end > start and loop.contains(end) and self._same_branch(node, ctx, use, use_ctx):
                return False  # the use runs only in passes that took the snapshot before it
            return ctx.guard is not None or loops[-1] is not loop

        def window(order: int) -> bool:
            if order == start:
                return False
            if start < order < end:
                return True  # straight from the snapshot to the use
            if exited and end > start and conditional(exited[0]) and exited[0].start < order <= exited[0].end:
                return True  # a conditional snapshot may be older than the loop's last pass
            if shared:
                loop = shared[-1]
                if conditional(loop) and loop.start < order <= loop.end:
                    return True  # iterations that skip the snapshot run before the use
                if end < start and ((start < order <= loop.end) or (loop.start < order < end)):
                    return True  # the next iteration: the rest of the body, then its start
            return False

        return window

    def _same_branch(self, node, ctx: Context, use, use_ctx: Context) -> bool:
        """Are the snapshot and the use in the same loop body, and does every ``if`` that decides
        whether the snapshot is taken also enclose the use (``if args.output_dir: checkpoint =
        {...}; save(checkpoint)``)?"""
        loops, use_loops = ctx.visible_loops, use_ctx.visible_loops
        if use_loops[-1:] != loops[-1:]:
            # the use in a loop of its own after the snapshot (`for k in ema: ema[k] = ... sd[k]`)
            if use_loops[:len(loops)] != loops or not all(loop.start > ctx.order for loop in use_loops[len(loops):]):
                return False
        return self._encloses(node, ctx, use, use_ctx)

    def _encloses(self, stmt, ctx: Context, use, use_ctx: Context, after: bool = False) -> bool:
        """Does every pass through ``use`` run ``stmt`` too (first, or with ``after`` next): ``stmt``
        sits in no loop that the use is outside of, and under no ``if`` that does not also
        enclose the use?"""
        if not after and not all(loop.contains(use_ctx.order) for loop in ctx.visible_loops):
            return False
        taken = self.analysis.branch_conditions(stmt, ctx.scope)
        return self.analysis.branch_conditions(use, ctx.scope)[:len(taken)] == taken

    def _reads(self, stmt, key: str) -> bool:
        """Does the statement read the snapshot's tensors (not only its keys or shapes:
        ``set(sd.keys())``, ``sd[k].shape``, ``len(sd)``, ``k in sd``)?"""
        kind = type(stmt)
        if kind in (cst.Assign, cst.AnnAssign, cst.AugAssign):
            expressions = [stmt.value] if stmt.value is not None else []
        else:
            expressions = self.analysis.own_expressions(stmt)
        return any(key in mentioned_keys(expr) and not _only_layout_read(expr, key)
                   for expr in expressions if expr is not None)

    def _restored_elsewhere(self, key: str, owner: str | None, node, ctx: Context) -> bool:
        """``self.best = model.state_dict()`` and ``model.load_state_dict(self.best)`` in another
        method of the class: the training between the two calls is out of sight."""
        class_scope = ctx.scope.class_scope
        if not key.startswith("self.") or key.count(".") != 1 or class_scope is None:
            return False  # self.best, not self.model.optimizer_state_dict (stored on another object)
        analysis = self.analysis
        methods = [scope for scope in analysis.scopes.values()
                   if scope.class_scope is class_scope and scope.kind == "function"]
        hook = ctx.scope.name.startswith("on_")  # a callback runs again after more training
        restored = any(
            type(call.func) is cst.Attribute and call.func.attr.value == "load_state_dict" and call.args
            and key in mentioned_keys(call.args[0].value)
            for scope in methods if scope is not ctx.scope or hook
            for stmt, _ in scope.statements
            for call in analysis.calls_in(stmt)
        )
        if not restored:
            # `self.best_state_dict = ...` kept by a callback hook: what it is kept for is
            # restoring it after training went on (by the trainer, in another file)
            return hook and "best" in key.lower()
        # an early-stopping snapshot (a "best" name or test, a callback hook `on_*`): the framework
        # trains between the calls; otherwise the class must train itself (weights replaced with
        # `.data = ...` leave the snapshot intact)
        tests = " ".join(text for text, _ in analysis.branch_conditions(node, ctx.scope))
        if "best" in (key + tests).lower() or ctx.scope.name.startswith("on_"):
            return True
        if any(stmt_ctx.order > ctx.order and analysis.changes_weights(stmt, stmt_ctx, keep=key, owner=owner)
               for stmt, stmt_ctx in ctx.scope.statements if stmt_ctx.scope is ctx.scope):
            return True  # the method itself changes them after the snapshot (an EMA swap)
        return any(
            analysis.changes_weights(stmt, stmt_ctx)
            for scope in methods for stmt, stmt_ctx in scope.statements
            if not any(call_name(call) == "load_state_dict" for call in analysis.calls_in(stmt))
        )


# What a state dict tells without its tensors' values: its keys and their tensors' layout.
LAYOUT_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim", "is_cuda"})
LAYOUT_METHODS = frozenset({"keys", "size", "numel", "dim"})


def _only_layout_read(expr, key: str) -> bool:
    """Does ``expr`` use the name ``key`` only for its keys and its tensors' shapes, dtypes and
    devices (``set(sd.keys())``, ``sd[k].shape``, ``len(sd)``, ``k in sd``), which an aliasing
    snapshot still reports right?"""
    if "." in key:
        return False
    uses = 0
    layout = set()
    for node in iter_expression_nodes(expr):
        kind = type(node)
        if kind is cst.Name and node.value == key:
            uses += 1
        elif kind is cst.Attribute:
            receiver = node.value.value if type(node.value) is cst.Subscript else node.value
            if type(receiver) is cst.Name and receiver.value == key and (
                    node.attr.value in LAYOUT_ATTRIBUTES
                    or node.attr.value in LAYOUT_METHODS and (type(node.value) is cst.Subscript or node.attr.value == "keys")):
                layout.add(id(receiver))
        elif kind is cst.Call and dotted_name(node.func) == "len" and len(node.args) == 1 \
                and type(node.args[0].value) is cst.Name and node.args[0].value.value == key:
            layout.add(id(node.args[0].value))
        elif kind is cst.Comparison:
            for target in node.comparisons:
                if type(target.operator) in (cst.In, cst.NotIn) and type(target.comparator) is cst.Name \
                        and target.comparator.value == key:
                    layout.add(id(target.comparator))
    return uses > 0 and uses == len(layout)
