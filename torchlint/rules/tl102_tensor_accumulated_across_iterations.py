from __future__ import annotations

from torchlint.analysis import ACCUMULATES, ATTACHMENT_TOKENS, Context, dotted_name, key_within, mentioned_keys, storage_key
from torchlint.lazy import cst
from torchlint.fix import detach_fix
from torchlint.rule import Rule
from torchlint.rules.tl101_tensor_stored_across_iterations import report_kept_argument

CONCATENATING_FUNCTIONS = frozenset({"cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack"})


class TensorAccumulatedAcrossIterations(Rule):
    """
    ## What it does
    Finds running sums and concatenations that a loop grows with a tensor still attached to
    the autograd graph: `total += loss`, `total = total + loss`, `total.add_(loss)`,
    `acc = torch.cat((acc, out))`, where the accumulator lives across iterations.

    ## Why is this bad?
    Adding a graph-attached tensor makes the accumulator part of the graph too, and each
    iteration chains its graph onto the previous ones. Without `backward()` (an evaluation
    loop) every iteration's activations stay alive: +196,608 bytes per iteration on a 3-layer
    MLP (batch 64, fp32). With `backward()` every step's graph nodes stay chained to the
    accumulator (host memory grows by kilobytes per step) until it is freed. This is the
    `total_loss += loss` example of the PyTorch FAQ.

    Accumulate `loss.item()` (a Python number; synchronises the device) or `loss.detach()`
    (a tensor without the graph; no synchronisation).

    ## Known problems
    Summing several losses for one `backward()` is correct and not reported: an accumulator
    that reaches a `backward()` in the same function, or that the function returns without
    detaching (the caller may backpropagate it). An accumulator reset inside a loop that
    backpropagates every step holds only a few graph nodes since the last reset and is not
    reported either; the same reset in a loop without `backward()` still holds whole graphs.
    Running sums kept per name (`totals[name] += loss`), moving averages (`ema = 0.98 * ema +
    0.02 * loss`) and sums inside methods of a metric object the loop calls (`meter.update(loss)`
    doing `self.sum += value`, the class in this module or another of the project) are
    accumulators too, reported at the call, where `.item()` belongs; a
    loop that hands the loss to an optimizer wrapper (`optim.step(loss)`) backpropagates.
    Nothing is reported under `torch.no_grad()` / `torch.inference_mode()` or in Lightning
    `validation_step` / `test_step` / `predict_step`.
    """

    CODE = "TL102"
    NAME = "tensor-accumulated-across-iterations"
    MESSAGE = "`{stmt}` accumulates a tensor attached to the autograd graph, chaining every iteration's graph onto `{acc}`"
    FIX = "accumulate `{value}.item()` (a Python number) or `{value}.detach()` (a tensor without the graph)"
    AUTOFIX = (
        "Safe when the accumulator is a local of the function and the added value a variable: "
        "adds `v.detach()`. Unsafe otherwise."
    )
    TOKENS = ATTACHMENT_TOKENS
    CLAIM = "the bad loop retains memory or graph nodes in proportion to its iterations; the fixed one retains none"

    INVALID = [
        """\
total = torch.zeros(())
for x, y in loader:
    loss = criterion(model(x), y)
    total.add_(loss)  # expect: TL102
print(total.item() / len(loader))
""",
        """\
total_loss = 0.0
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    total_loss += loss  # expect: TL102
print(total_loss / len(loader))
""",
        """\
outputs = None
for x in loader:
    out = model(x)
    outputs = out if outputs is None else torch.cat((outputs, out))  # expect: TL102
""",
        """\
class Metric:
    def __init__(self):
        self.sum = torch.tensor(0.0)

    def update(self, value):
        self.sum += value  # reported at the call, where `.item()` belongs

def train_epoch(model, loader, optimizer):
    train_loss = Metric()
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        train_loss.update(loss)  # expect: TL102
        loss.backward()
        optimizer.step()
""",
        """\
class Solver:
    def train_one_epoch(self, loader):
        totals = defaultdict(float)
        for batch in loader:
            losses = self.train_one_batch(batch)
            for name, value in losses.items():
                totals[name] += value  # expect: TL102
        return totals

    def train_one_batch(self, batch):
        self.optimizer.zero_grad()
        loss, parts = self.loss_fn(self.model(batch.x), batch.y)
        loss.backward()
        self.optimizer.step()
        return parts
""",
        """\
losses = []
for minibatch in batch.split(64):
    dist = policy(minibatch.obs)
    loss = -(dist.log_prob(minibatch.act) * minibatch.adv).mean()
    optim.step(loss)  # a wrapper: backward, step and zero_grad inside
    total += loss  # expect: TL102
""",
        """\
loss_ema = None
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    if loss_ema is None:
        loss_ema = loss
    else:
        loss_ema = 0.98 * loss_ema + 0.02 * loss  # expect: TL102
    if loss_ema < threshold:
        break
""",
        """\
class TrainManager:
    def train(self, batches):
        epoch_loss = 0
        for batch in batches:
            batch_loss = self._train_batch(batch)
            epoch_loss += batch_loss  # expect: TL102
        return epoch_loss / len(batches)

    def _train_batch(self, batch):
        batch_loss = self.model.get_loss_for_batch(batch)  # a model of another file
        norm_batch_loss = batch_loss / batch.ntokens
        norm_batch_loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        return norm_batch_loss
""",
        """\
class Classifier(LightningModule):
    def training_step(self, batch, batch_idx):
        loss = F.cross_entropy(self(batch[0]), batch[1])
        self.epoch_loss = self.epoch_loss + loss  # expect: TL102
        return loss

    def on_train_epoch_end(self):
        self.log("epoch_loss", self.epoch_loss)
        self.epoch_loss = 0.0
""",
        """\
class BaseLearner:
    def __train_loop__(self, train_loader, epochs, progress_bar=True):
        for epoch in range(epochs):
            self.running_loss = torch.zeros(1)
            progress = tqdm(enumerate(train_loader)) if progress_bar else enumerate(train_loader)
            for i, batch in progress:
                self.__train_func__(batch)
            print(self.running_loss.item() / (i + 1))

    def __train_func__(self, batch):
        self.model.train()


class Learner(BaseLearner):
    def __train_func__(self, batch):
        super().__train_func__(batch)
        self.optimizer.zero_grad()
        loss = F.cross_entropy(self.model(batch[0]), batch[1])
        loss.backward()
        self.optimizer.step()
        self.running_loss.add_(loss.cpu())  # expect: TL102
""",
    ]
    VALID = [
        """\
total = torch.zeros(())
for x, y in loader:
    loss = criterion(model(x), y)
    total.add_(loss.detach())
    mask = torch.zeros_like(loss)
    mask.add_(loss)  # a fresh tensor every iteration
print(total.item() / len(loader))
""",
        """\
total_loss = 0.0
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    total_loss += loss.item()
print(total_loss / len(loader))
""",
        """\
total = 0
for head, target in zip(heads, targets):
    total = total + criterion(head(features), target)
total.backward()
""",
        """\
def compute_loss(model, batches):
    loss = 0
    for x, y in batches:
        loss += F.cross_entropy(model(x), y)
    return loss / len(batches)
""",
        """\
running = {"loss": 0.0, "reward": 0.0}
for step, batch in enumerate(loader):
    loss, reward = model(batch)
    (loss / accumulation).backward()
    running["loss"] += loss
    running["reward"] += reward
    if (step + 1) % accumulation == 0:
        optimizer.step()
        optimizer.zero_grad()
        log(running)
        running = {key: 0.0 for key in running}
""",
        """\
class AverageMeter:
    def update(self, val, n=1):
        if isinstance(val, torch.Tensor):
            val = val.detach().item()
        self.sum += val * n

def train_epoch(model, loader, optimizer):
    meter = AverageMeter()
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        meter.update(loss, len(x))
        loss.backward()
        optimizer.step()
""",
        """\
loss_ema = None
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    loss_ema = loss.item() if loss_ema is None else 0.98 * loss_ema + 0.02 * loss.item()
""",
        """\
running_mfu = -1.0
for x, y in loader:
    loss = model(x, y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    mfu = model.estimate_mfu(batch_size, dt)  # a number the model computes about itself
    running_mfu = mfu if running_mfu == -1.0 else 0.9 * running_mfu + 0.1 * mfu
""",
        """\
def compute_loss(self, preds, target):  # one step's deep-supervision heads, summed for backward
    loss = 0
    for weight, prediction in zip(self.weights, preds):
        loss += weight * self.criterion(prediction, target)
    self.loss = loss
""",
        """\
for samples, targets in loader:
    outputs = model(samples)
    if cosub:
        first, second = outputs.chunk(2)
        loss = 0.5 * criterion(first, targets)  # started afresh in the same block
        loss = loss + 0.5 * criterion(second, targets)
    else:
        loss = criterion(outputs, targets)
    optimizer.zero_grad()
    loss_scaler(loss, optimizer, clip_grad=1.0, parameters=model.parameters())  # backward and step
    log(loss.item())
""",
        """\
def train(model, loader, eval_loader, accelerator, optimizer):
    for step in range(100):
        for batch in loader:
            logits, preds, loss = model(**batch)
            loss = loss / 4
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            if step % 10 == 0:
                model.eval()
                log = {"val_loss": 0}
                for batch in eval_loader:
                    with torch.inference_mode():
                        logits, preds, loss = model(**batch)
                    loss = loss.detach()
                    if accelerator.num_processes > 1:
                        loss = torch.mean(accelerator.gather_for_metrics(loss))
                    log["val_loss"] += loss
                model.train()
""",
        """\
kept = 0
for x, y in loader:
    loss, kept_size = criterion(model, x, y)  # the loss and how many samples it kept
    kept += kept_size
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
        """\
class LocationAttention(nn.Module):
    def __init__(self, query_dim, attention_dim):
        super().__init__()
        self.query = nn.Linear(query_dim, attention_dim)
        self.location = nn.Conv1d(1, attention_dim, 31, padding=15)
        self.v = nn.Linear(attention_dim, 1)

    def init_states(self, memory):  # the decoder calls it at the start of every utterance
        self.cum_attn = torch.zeros(memory.size(0), memory.size(1), device=memory.device)

    def forward(self, query, memory):
        energies = self.v(torch.tanh(self.query(query).unsqueeze(1) + self.location(self.cum_attn.unsqueeze(1))))
        weights = F.softmax(energies.squeeze(-1), dim=1)
        self.cum_attn = self.cum_attn + weights  # the utterance's own state, read by the next step
        return torch.bmm(weights.unsqueeze(1), memory).squeeze(1)
""",
        """\
class AverageMeter:
    def __init__(self):
        self.sum, self.count = 0.0, 0

    def update(self, value, n=1):
        self.sum += value * n
        self.count += n


def ramp_up(epoch, length=10):
    return float(np.clip(epoch / length, 0.0, 1.0))


class SemiLoss:
    def __init__(self, weight):
        self.weight = weight

    def __call__(self, outputs, targets, epoch):
        return F.cross_entropy(outputs, targets), self.weight * ramp_up(epoch)


def train(loader, model, optimizer, criterion, epoch):
    weights = AverageMeter()
    for x, y in loader:
        loss, w = criterion(model(x), y, epoch)
        weights.update(w, x.size(0))  # the ramp-up weight: a float
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def main(loader, model, optimizer, epochs):
    train_criterion = SemiLoss(75.0)
    for epoch in range(epochs):
        train(loader, model, optimizer, train_criterion, epoch)
""",
    ]

    def visit_AugAssign(self, node, ctx: Context) -> None:
        if not ctx.loops or type(node.operator) not in (cst.AddAssign, cst.SubtractAssign):
            return
        if type(node.value) in (cst.List, cst.Tuple):
            return  # list extension: TL101's
        # total += loss, and running sums kept per name: totals[name] += loss
        key = storage_key(node.target) if type(node.target) is cst.Subscript else dotted_name(node.target)
        if key is None:
            return
        self._check(node, key, node.value, ctx)

    KEPT_MESSAGE = (
        "`{stmt}` hands a tensor attached to the autograd graph to `{callee}`, which adds it into "
        "a running total (`{kept}`), chaining every iteration's graph onto it"
    )

    def visit_Expr(self, node, ctx: Context) -> None:
        """``total.add_(loss)``, ``stats.device_stat("loss").add_(loss)``: the in-place spelling;
        ``meter.update(loss)`` of a metric class of another module that sums what it gets."""
        call = node.value
        if not ctx.loops or type(call) is not cst.Call:
            return
        if type(call.func) is not cst.Attribute \
                or call.func.attr.value not in ("add_", "sub_") or not call.args or call.args[0].keyword is not None:
            self._check_kept(node, call, ctx)
            return
        receiver = call.func.value
        key = dotted_name(receiver)
        if key is None:
            if type(receiver) is not cst.Call:
                return
            key = self.code(receiver, 200)  # an accumulator an object hands out: it outlives the step
        self._check(node, key, [call.args[0].value], ctx)

    def _check_kept(self, node, call, ctx: Context) -> None:
        """``meter.update(loss)`` with ``meter`` an instance of a class of another module whose
        ``update`` adds its argument into a running total of the instance."""
        report_kept_argument(self, node, call, ctx, ACCUMULATES, self.KEPT_MESSAGE,
                             lambda argument: self.FIX.format(value=self.operand(argument)))

    def visit_Assign(self, node, ctx: Context) -> None:
        if not ctx.loops or len(node.targets) != 1:
            return
        key = dotted_name(node.targets[0].target)
        if key is None:
            return
        added = self._added_to(key, node.value)
        if added:
            self._check(node, key, added, ctx)

    def _added_to(self, key: str, value) -> list:
        """What ``value`` adds to the accumulator ``key``: ``key + a - b`` -> [a, b],
        ``torch.cat((key, a))`` -> [a]; [] when ``value`` does not extend ``key``."""
        if type(value) is cst.IfExp:  # out if acc is None else torch.cat((acc, out))
            return self._added_to(key, value.body) + self._added_to(key, value.orelse)
        if type(value) is cst.BinaryOperation and type(value.operator) in (cst.Add, cst.Subtract):
            terms = _sum_terms(value)
            if any(dotted_name(term) == key for term in terms):
                return [term for term in terms if dotted_name(term) != key]
            # a moving average: `ema = beta * ema + (1 - beta) * loss`
            scaled = [term for term in terms if _scales(term, key)]
            if scaled:
                return [term for term in terms if not any(term is other for other in scaled)]
            return []
        if type(value) is cst.Call:
            name = self.analysis.qualified_name(value.func) or ""
            if name.startswith("torch.") and name.rpartition(".")[2] in CONCATENATING_FUNCTIONS and value.args:
                sequence = value.args[0].value
                if type(sequence) in (cst.List, cst.Tuple):
                    items = [element.value for element in sequence.elements]
                    if any(dotted_name(item) == key for item in items):
                        return [item for item in items if dotted_name(item) != key]
        return []

    def _earlier_in_block(self, reset, node, ctx: Context) -> bool:
        """Is the fresh binding ``reset`` an earlier statement of the block holding ``node``
        (``loss = 0.25 * c(a)`` then ``loss = loss + 0.25 * c(b)`` under one ``if``)?"""
        found = self.analysis.straight_line(node, ctx)
        if found is None:
            return False
        sequence, index = found
        return any(item is reset.stmt for item in sequence[:index])

    def _over_terms(self, loop) -> bool:
        """A loop over the terms of one step (heads' outputs, loss weights): it makes no step,
        holds no loop, and backpropagates nothing itself."""
        analysis = self.analysis
        return not analysis.is_step_loop(loop) and not any(
            type(stmt) in (cst.For, cst.While) or analysis.statement_backpropagates(stmt, ctx)
            for stmt, ctx in analysis.statements_in_loop(loop)
        )

    def _started_before(self, key: str, loop, ctx: Context) -> bool:
        """Is the accumulator a local given a fresh value by the loop's function just before the
        loop, on every path (``loss = 0``)?"""
        if "." in key or "[" in key:
            return False
        before = [binding for binding in loop.scope.bindings.get(key, ()) if binding.ctx.order < loop.start]
        return bool(before) and before[-1].kind == "assign" and before[-1].ctx.guard is None \
            and len(before[-1].ctx.loops) == len(ctx.loops) - 1

    def _model_state(self, key: str, ctx: Context) -> bool:
        """``self.cum_attn = self.cum_attn + weights`` in a module's forward computation, read back
        by the module's own computation and restarted by one of its methods for every sequence:
        state the forward pass needs, not a running total of the training."""
        analysis = self.analysis
        class_scope = ctx.scope.class_scope
        if class_scope is None or not analysis.is_module_class(class_scope.node.name):
            return False
        if not analysis.restarted_by_own_method(key, ctx):
            return False
        # read where it is not being added to: the computation uses it
        return any(
            any(key_within(used, key)
                for used in mentioned_keys(stmt.value if type(stmt) in (cst.Assign, cst.AugAssign) else stmt))
            and not any(storage_key(target.target) == key for target in getattr(stmt, "targets", ()))
            and not (type(stmt) is cst.AugAssign and storage_key(stmt.target) == key)
            for method in analysis.scopes.values() if method.kind == "function" and method.class_scope is class_scope
            for stmt, stmt_ctx in method.statements
            if stmt_ctx.scope is method and type(stmt).__name__ not in ("If", "For", "While", "With", "Try", "FunctionDef", "ClassDef")
        )

    def _check(self, node, key: str, added, ctx: Context) -> None:
        analysis = self.analysis
        terms = added if isinstance(added, list) else [added]
        attached = next((term for term in terms if analysis.is_attached(term, ctx)), None)
        if attached is None:
            return
        loop = ctx.loop
        if loop.implicit is not None and "(" not in key and not analysis.outlives_call(key, ctx):
            return  # a per-step function's local: gone when the call returns
        if loop.implicit is not None and key.startswith("self.") and analysis.kept_at_calls(ctx.scope, "accumulates"):
            return  # `meter.update(loss)` is reported at the call, where `.item()` belongs
        if loop.implicit is not None and self._model_state(key, ctx):
            return  # a model's own state over one sequence (cumulative attention), restarted by its reset method
        # (`if ema is None: ema = loss` / `else: ema = beta * ema + ...` starts the sum, it does not reset it)
        resets = [reset for reset in analysis.resets_in_loop(key, loop)
                  if not analysis.exclusive_branches(reset.stmt, node, ctx.scope)]
        if any(reset.ctx.order < ctx.order and len(reset.ctx.loops) == len(ctx.loops)
               and (reset.ctx.guard is None or self._earlier_in_block(reset, node, ctx))
               for reset in resets):
            return  # started afresh every iteration: the sum spans one iteration only
        if loop.implicit is None and self._over_terms(loop) and self._started_before(key, loop, ctx):
            return  # `loss = 0` then a loop over the heads' outputs: one step's terms, summed for its backward
        if resets and analysis.loop_backpropagates(loop):
            return  # reset after optimizer steps: holds a few graph nodes, on purpose
        if analysis.reaches_backward(key, ctx):
            return  # several losses summed for one backward()
        if ctx.scope.kind == "function" and key in analysis.returned_keys(ctx.scope) and not any(
            analysis.loop_always_backpropagates(outer) for outer in ctx.loops
        ):
            return  # the caller gets the graph and may backpropagate it
        self.report(
            node,
            self.MESSAGE.format(stmt=self.code(node, 60), acc=key),
            self.FIX.format(value=self.operand(attached)),
            autofix=detach_fix(analysis, terms, ctx, key),
        )


def _sum_terms(expr) -> list:
    """Operands of a chain of + and -: ``a + b - c`` -> [a, b, c]."""
    if type(expr) is cst.BinaryOperation and type(expr.operator) in (cst.Add, cst.Subtract):
        return _sum_terms(expr.left) + _sum_terms(expr.right)
    return [expr]



def _scales(term, key: str) -> bool:
    """Is ``term`` the accumulator ``key`` times a factor: ``beta * ema``, ``ema * 0.9``?"""
    return (type(term) is cst.BinaryOperation and type(term.operator) in (cst.Multiply, cst.Divide)
            and key in (dotted_name(term.left), dotted_name(term.right)))
