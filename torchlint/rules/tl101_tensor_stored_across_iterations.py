from __future__ import annotations

import re

from torchlint.analysis import (
    ATTACHMENT_TOKENS, DETACHING_METHODS, STORES, STORING_METHODS, Context, call_name, dotted_name, empties_container, empty_container, key_within, mentioned_keys, storage_key,
)
from torchlint.lazy import cst
from torchlint.fix import Fix, detach_fix
from torchlint.rule import Rule

TENSOR_BUFFER_FACTORIES = frozenset({"torch.zeros", "torch.empty", "torch.ones", "torch.full", "torch.tensor"})


class TensorStoredAcrossIterations(Rule):
    """
    ## What it does
    Finds tensors still attached to the autograd graph (model outputs, losses and anything
    computed from them) that a loop stores into a container outliving the iteration:
    `xs.append(v)`, `xs.extend(...)`, `xs.insert(i, v)`, `xs += [v]`, `d[k] = v`.

    ## Why is this bad?
    A stored tensor keeps its `grad_fn`, and through it the whole autograd graph of the
    iteration that produced it: every intermediate activation when no `backward()` ran, and
    still the graph nodes plus the tensor itself after `backward()`. Memory grows linearly
    with the number of iterations until the process runs out. Measured on a 3-layer MLP
    (batch 64, fp32, CPU): +262,144 bytes per stored loss without backward; with backward the
    loss storage and 10 graph nodes per iteration stay alive.

    Store `v.detach()` instead (add `.cpu()` to move it off the device): it keeps the values
    without the graph and without a device synchronisation. `v.item()` gives a Python number
    but synchronises the device every step.

    ## Known problems
    Not reported when the container is returned or yielded by the function and no enclosing
    loop backpropagates on every iteration (a `forward()` that collects feature maps and
    returns them needs their graph; so may the caller of `return sum(losses) / len(losses)`,
    an attached mean that keeps every graph for one `backward()`). A number made from the
    container (`return sum(l.item() for l in losses)`, `[l.item() for l in losses]`,
    `torch.stack(losses).mean().item()`) is not the container: it hands no graph on, and
    the list held every iteration's graph until the loop ended for nothing. Not reported either
    when it is rebuilt or cleared inside the loop, when it
    feeds a `backward()` in the same function (or, for `self.x`, in another method), when the
    graph-carrying entry was replaced by a detached copy first (`out["loss"] =
    out["loss"].detach()`), under `torch.no_grad()` / `torch.inference_mode()`, or in
    Lightning `validation_step` / `test_step` / `predict_step`. Per-step functions count as
    loop bodies (a `training_step` appending to `self.outputs`), and calls of functions and
    methods of this file are followed (a helper that returns the loss, a dict or a tuple
    holding it); values from calls into other files count as detached, unless the function
    backpropagates them. A call that hands an attached tensor to a method of an object of
    another module of the project which appends it to a list of the instance
    (`history.log(loss)` with `self.values.append(value)`) is reported at the call, when the
    object outlives the iteration; methods registered as module hooks are per-step code, and
    a forward hook's output is attached where the module also backpropagates or registers
    backward hooks (Grad-CAM), unless another hook pops what it pushes. A dict or list slot
    with a literal key (`stats["loss"] = loss`) holds one value, overwritten each step: it
    does not grow and is not reported. A write into a tensor buffer of the instance in
    per-step code (`self.queue[:n] = z` with `register_buffer("queue", ...)`) is: the buffer's
    history records the write (`CopySlices`), so every step's graph stays reachable from it.
    """

    CODE = "TL101"
    NAME = "tensor-stored-across-iterations"
    MESSAGE = "`{stmt}` stores a tensor attached to the autograd graph, keeping every iteration's graph alive"
    FIX = (
        "store `{value}.detach()` (add `.cpu()` to free device memory), or `{value}.item()` "
        "for a Python number (syncs the device every step)"
    )
    AUTOFIX = (
        "Safe when the container is a local of the function and the stored value a variable: "
        "stores `v.detach()` (each graph-attached element of a stored list, tuple or dict "
        "literal). Unsafe otherwise (a container that outlives the function, a stored call result "
        "that might not be a tensor)."
    )
    TOKENS = ATTACHMENT_TOKENS
    CLAIM = "live tensor memory grows linearly with iterations for the bad loop and stays flat for the fixed one"

    INVALID = [
        """\
losses = []
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    losses.append(loss)  # expect: TL101
""",
        """\
history = {}
for step, batch in enumerate(loader):
    out = model(**batch)
    history[step] = out.loss  # expect: TL101
""",
        """\
class Forecaster(LightningModule):
    def step(self, x, y):
        out = self(x)
        if self.predicting:
            loss = None
        else:
            loss = self.loss(out, y)
        return {"loss": loss, "n": len(x)}, out

    def training_step(self, batch, batch_idx):
        log, out = self.step(*batch)
        self.training_step_outputs.append(log)  # expect: TL101
        return log
""",
        """\
losses = torch.zeros(steps)
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    losses[i % steps] = loss  # expect: TL101
""",
        """\
def mean_loss(model, loader):
    losses = []
    for x, y in loader:
        losses.append(F.mse_loss(model(x), y))  # expect: TL101
    return sum(loss.item() for loss in losses) / len(losses)
""",
        """\
class SplitLearner:
    def _val_step_label_side(self, batch, activations):  # a framework calls it for every batch
        self.model.eval()
        pred = self.model(activations)
        loss = self.criterion(pred, batch.y)
        self.val_loss.append(loss)  # expect: TL101
""",
        """\
class ActivationsAndGradients:  # Grad-CAM: activations forward, gradients backward
    def __init__(self, model, layer):
        self.model, self.activations, self.gradients = model, [], []
        layer.register_forward_hook(self.save_activation)
        layer.register_full_backward_hook(self.save_gradient)

    def save_activation(self, module, input, output):
        activation = output
        if self.reshape is not None:
            activation = self.reshape(activation)
        self.activations.append(activation.cpu())  # expect: TL101

    def save_gradient(self, module, grad_input, grad_output):
        self.gradients.append(grad_output[0].cpu())
""",
        """\
class SwAV(pl.LightningModule):
    def __init__(self, size, dim):
        super().__init__()
        self.projector = nn.Linear(dim, dim)
        self.register_buffer("queue", torch.zeros(size, dim))

    def training_step(self, batch, batch_idx):
        z = self.projector(batch)
        n = z.size(0)
        self.queue[n:] = self.queue[:-n].clone()
        self.queue[:n] = z  # expect: TL101
        return self.loss(z)
""",
        """\
def optimize(params, loss_function, steps):
    optimizer = torch.optim.Adam(params)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        losses.append(loss_function(*params))  # expect: TL101
        losses[-1].backward()
        optimizer.step()
    return [loss.item() for loss in losses]
""",
        """\
for episode in range(episodes):
    values = []
    for _ in range(rollout_steps):  # a rollout: every step's graph is kept, then thrown away
        logits, value = model(state)
        values.append(value.squeeze())  # expect: TL101
        state = env.step(logits.argmax(-1).cpu())
    values = torch.cat(values).detach()
    loss = ppo_loss(model, states, values)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
    ]
    VALID = [
        """\
losses = []
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    losses.append(loss.detach())
""",
        """\
def forward(self, x):
    features = []
    for block in self.blocks:
        x = block(x)
        features.append(x)
    return features
""",
        """\
preds = []
for x in loader:
    with torch.no_grad():
        out = model(x)
    preds.append(out)
""",
        """\
outputs = []
for i, batch in enumerate(loader):
    optimizer.zero_grad()
    output = module.training_step(batch, i)
    output["loss"].backward()
    optimizer.step()
    output["loss"] = output["loss"].detach()
    outputs.append(output)
""",
        """\
losses = torch.zeros(steps)
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    losses[i % steps] = loss.detach()
""",
        """\
def forward(self, x):
    out = torch.zeros(x.size(0), self.steps, self.hidden)
    h = x
    for t in range(self.steps):
        h = self.cell(h)
        out[:, t] = h
    return out
""",
        """\
def chunked_loss(model, chunks, y):
    losses = []
    for x in chunks:
        losses.append(F.mse_loss(model(x), y))
    return sum(losses) / len(losses)
""",
        """\
class SplitLearner:
    def _val_step_label_side(self, batch, activations):
        self.model.eval()
        with torch.no_grad():
            loss = self.criterion(self.model(activations), batch.y)
        self.val_loss.append(loss)

    def get_eval_batch(self, index):  # builds a batch: not a step
        batch = self.dataset[index]
        self.served.append(batch)
        return batch
""",
        """\
class GuidedBackprop:  # the backward hook pops what the forward hook pushes
    def __init__(self, model):
        self.outputs = []
        for module in model.modules():
            module.register_forward_hook(self.push)
            module.register_full_backward_hook(self.pop)

    def push(self, module, inputs, output):
        self.outputs.append(output)

    def pop(self, module, grad_in, grad_out):
        forward_output = self.outputs[-1]
        del self.outputs[-1]
        return (forward_output.clamp(min=0) * grad_out[0],)
""",
        """\
class FeatureExtractor:  # no backward anywhere: the hooked forward may run under no_grad
    def __init__(self, model, layer):
        self.features = []
        layer.register_forward_hook(self.save)

    def save(self, module, inputs, output):
        self.features.append(output)
""",
        """\
class MoCo(nn.Module):
    def __init__(self, size, dim):
        super().__init__()
        self.register_buffer("queue", torch.zeros(size, dim))
        self.stats = {}

    def forward(self, x):
        keys = self.key_encoder(x)
        self.queue[: keys.size(0)] = keys.detach()  # the buffer gets data, not the graph
        self.stats["last"] = keys  # a dict slot: one value, overwritten
        return keys
""",
        """\
def unrolled_loss(params, loss_function, steps):
    losses = []
    for _ in range(steps):
        losses.append(loss_function(*params))
    total = sum(losses)  # one backward() over all of them: the graphs are needed
    total.backward()
""",
        """\
for episode in range(episodes):
    log_probs = []
    for _ in range(rollout_steps):  # REINFORCE: the stored graphs are what backward needs
        dist = Categorical(logits=policy(state))
        action = dist.sample()
        log_probs.append(dist.log_prob(action))
        state = env.step(action.item())
    loss = -(torch.stack(log_probs) * returns).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
        """\
class AffinityNet(nn.Module):
    def __init__(self, backbone):
        super().__init__()
        self.backbone = backbone
        self.head = nn.Conv2d(448, 448, 1)
        self.features = []
        self.backbone[15].register_forward_hook(self.keep)
        self.optimizer = torch.optim.Adam(self.parameters())

    def keep(self, module, inputs, output):
        self.features.append(output)

    def forward(self, x):
        self.backbone(x)
        out = self.head(torch.cat(self.features, 1))
        self.features.clear()  # read and emptied by every pass that fills it
        return out

    def train_step(self, x, y):
        self.optimizer.zero_grad()
        loss = (self(x) - y).pow(2).mean()
        loss.backward()
        self.optimizer.step()
""",
        """\
class Probe(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])])
        self.activations = []

    def forward(self, x):
        self.activations = []  # holds one pass's per-layer outputs, no more
        for layer in self.layers:
            x = layer(x)
            self.activations.append(x)
        return x
""",
        """\
def rollout_loss(model, state, targets):
    model.train()
    latents = []
    loss = 0
    for t in range(targets.size(1)):  # time steps of one training step
        z = model.z_network(state)
        latents.append(z)
        state = model.predictor(state, z)
        loss = loss + F.mse_loss(state, targets[:, t])
    return loss
""",
        """\
class Client:
    def train(self, net, net_fd, loader, optimizer_fd):
        losses = []
        for x, domain in loader:
            output, z = net(x)
            df_loss = 0
            if not self.flag:
                pred = net_fd(z.detach())
                df_loss = self.adv_loss(pred, 1 - domain) / 2
                df_loss.backward()
                optimizer_fd.step()
                df_loss = df_loss.detach().item()  # the number replaces the tensor in the same block
            losses.append(df_loss)
        return sum(losses) / len(losses)
""",
        """\
def perplexity(scorer, input_ids, attention_mask, labels):
    logits = scorer(input_ids, attention_mask=attention_mask).logits
    lengths = attention_mask.sum(dim=1) - 1
    losses = []
    for i in range(logits.shape[0]):  # the samples of one batch, one forward pass
        losses.append(F.cross_entropy(logits[i, :lengths[i]], labels[i, 1:lengths[i] + 1]))
    return np.exp(torch.stack(losses).cpu().detach().numpy())
""",
    ]

    KEPT_MESSAGE = (
        "`{stmt}` hands a tensor attached to the autograd graph to `{callee}`, which keeps it "
        "(`{kept}`), keeping every iteration's graph alive"
    )

    def visit_Expr(self, node, ctx: Context) -> None:
        call = node.value
        if not ctx.loops or type(call) is not cst.Call:
            return
        index = STORING_METHODS.get(call.func.attr.value) if type(call.func) is cst.Attribute else None
        if index is None:
            self._check_kept(node, call, ctx)
            return
        positional = [arg.value for arg in call.args if arg.keyword is None]
        if len(positional) <= index:
            return
        self._check(node, call.func.value, positional[index], ctx)

    def visit_AugAssign(self, node, ctx: Context) -> None:
        # xs += [v] (the sum of tensors, `total += loss`, is TL102's)
        if not ctx.loops or type(node.operator) is not cst.AddAssign:
            return
        if type(node.value) not in (cst.List, cst.Tuple):
            return
        self._check(node, node.target, node.value, ctx)

    def visit_Assign(self, node, ctx: Context) -> None:
        # d[k] = v, only into a container known to be a dict or list (a tensor slice write is
        # a different thing)
        if not ctx.loops or len(node.targets) != 1:
            return
        target = node.targets[0].target
        if type(target) is cst.Tuple:
            # `losses[i], stats[i] = step(closure)` with `losses[i - 1].backward()` in the loop
            for element in target.elements:
                key = storage_key(element.value) if type(element.value) is cst.Subscript else None
                if key is not None and self._backward_of_element(key, ctx.loop) \
                        and self.analysis.is_python_container(key, ctx):
                    self._check(node, element.value.value, node.value, ctx)
                    return
            return
        if type(target) is not cst.Subscript:
            return
        key = storage_key(target)
        if key is None:
            return
        if self.analysis.is_python_container(key, ctx):
            if _constant_slot(target):
                return  # `stats["loss"] = loss`: one slot, overwritten every step; it does not grow
        elif not self._is_metrics_buffer(key, ctx) and not self._is_instance_buffer(key, ctx):
            return
        self._check(node, target.value, node.value, ctx)

    def _check_kept(self, node, call, ctx: Context) -> None:
        """``history.log(loss)`` with ``history`` an instance of a class of another module whose
        ``log`` appends its argument to a list of the instance."""
        report_kept_argument(self, node, call, ctx, STORES, self.KEPT_MESSAGE, self._fix)

    def _is_metrics_buffer(self, key: str, ctx: Context) -> bool:
        """``losses = torch.zeros(n)`` before a loop that backpropagates on every iteration, then
        ``losses[i] = loss``: the write records the step's graph in the buffer's history
        (``CopySlices``), so the buffer keeps every step's graph. A tensor filled inside a
        forward pass (``out[:, t] = h``) is not this: no backward runs between the writes."""
        analysis = self.analysis
        binding = analysis.lookup(key, ctx)
        if binding is None or binding.kind != "assign" or binding.element or type(binding.value) is not cst.Call:
            return False
        if (analysis.qualified_name(binding.value.func) or "") not in TENSOR_BUFFER_FACTORIES:
            return False
        loop = ctx.loop
        return (loop is not None and loop.implicit is None and not loop.contains(binding.ctx.order)
                and analysis.loop_always_backpropagates(loop))

    def _is_instance_buffer(self, key: str, ctx: Context) -> bool:
        """``self.queue[:, :n] = z`` in per-step code, ``self.queue`` a tensor of the instance
        (``register_buffer("queue", torch.zeros(...))``, ``self.queue = torch.zeros(...)``): the
        write puts the step's graph into the buffer's history (``CopySlices``), and the buffer
        lives on, so every step's graph stays reachable through it."""
        loop = ctx.loop
        if loop is None or loop.implicit is None or not key.startswith("self.") or key.count(".") != 1:
            return False
        analysis = self.analysis
        class_scope = ctx.scope.class_scope
        if class_scope is None:
            return False
        attribute = key[5:]
        if analysis.may_contain("register_buffer") and re.search(
                r"register_buffer\(\s*['\"]%s['\"]" % re.escape(attribute), analysis.module.code_for_node(class_scope.node)):
            return True
        binding = analysis.lookup(key, ctx)
        return (binding is not None and binding.kind == "assign" and not binding.element
                and type(binding.value) is cst.Call
                and (analysis.qualified_name(binding.value.func) or "") in TENSOR_BUFFER_FACTORIES)

    def _check(self, node, container, value, ctx: Context) -> None:
        analysis = self.analysis
        key = storage_key(container)
        if key is None:
            return
        loop = ctx.loop
        latest = self._backward_of_element(key, loop)
        if not (latest or analysis.is_attached(value, ctx)) or self._slot_detached(value, ctx):
            return
        if loop.implicit is not None and not analysis.outlives_call(key, ctx):
            return  # a per-step function's local: gone when the call returns
        if loop.implicit is not None and key.startswith("self.") and analysis.kept_at_calls(ctx.scope, "stores"):
            return  # `recorder.add(output)` is reported at the call, where `.detach()` belongs
        if analysis.resets_in_loop(key, loop) or analysis.cleared_in_loop(key, loop):
            return  # rebuilt or emptied every iteration: nothing outlives it
        if loop.implicit is not None and analysis.consumed_elsewhere(key, ctx):
            return  # a stack another hook pops: one entry per layer in flight
        if loop.implicit is not None and loop.implicit.startswith("registered as") and self._emptied_by_reader(key, ctx):
            return  # a forward hook's features, read and cleared by the method that runs the model
        if self._within_one_step(key, loop, ctx):
            return  # a time-step or per-layer unroll of one step: its graph is that step's
        scope = ctx.scope
        if scope.kind == "function" and key in analysis.returned_keys(scope) and not any(
            analysis.loop_always_backpropagates(outer) for outer in ctx.loops
        ):
            # the caller receives the container and may need the graph (feature maps from a
            # forward); after backward() in the loop, the graph is spent and only leaks
            return
        if not latest and analysis.reaches_backward(key, ctx) and not self._detached_after(key, loop):
            return  # collected for one backward() over all of them
        self.report(node, self.MESSAGE.format(stmt=self.code(node, 60)), self._fix(value),
                    autofix=detach_fix(analysis, [value], ctx, key))

    def _emptied_by_reader(self, key: str, ctx: Context) -> bool:
        """Does a method of the hook's class other than an epoch-level one empty the container
        (``self.features.clear()``, ``self.features = []``): the method that runs the model,
        reads what the hooks collected and clears it for the next pass?"""
        class_scope = ctx.scope.class_scope
        if class_scope is None or not key.startswith("self."):
            return False
        analysis = self.analysis
        for method in analysis.scopes.values():
            if method.kind != "function" or method.class_scope is not class_scope or method is ctx.scope \
                    or method.name == "__init__" or "epoch" in method.name.lower():
                continue
            # read, then emptied, and not mentioned again: nothing is left when the method returns
            # (a reset at the start of the call, as Grad-CAM's, leaves the last pass's graph behind)
            mentions = [(stmt, stmt_ctx) for stmt, stmt_ctx in method.statements if stmt_ctx.scope is method
                        and type(stmt).__name__ not in ("If", "For", "While", "With", "Try")
                        and any(key_within(mention, key) for mention in mentioned_keys(stmt))]
            if len(mentions) >= 2 and self._empties(mentions[-1][0], key) \
                    and not any(self._empties(stmt, key) for stmt, _ in mentions[:-1]):
                return True
        return False

    @staticmethod
    def _empties(stmt, key: str) -> bool:
        """``xs = []`` / ``xs.clear()`` / ``del xs[:]``: the container ``key`` empty afterwards."""
        if type(stmt) is cst.Assign and any(storage_key(target.target) == key for target in stmt.targets):
            return empty_container(stmt.value)
        return empties_container(stmt, key)

    def _within_one_step(self, key: str, loop, ctx: Context) -> bool:
        """Is the loop an unroll inside one step (time steps, layers) whose container lives for
        one call: a local of the function, or ``self.x = []`` on every call before the loop;
        the loop neither goes over batches nor backpropagates, and the function hands its graph
        on (returns attached values, or backpropagates after the loop) or cuts it where it reads
        the container? Then what it stores is part of the step's own graph, freed with it."""
        analysis = self.analysis
        scope = ctx.scope
        if loop is None or loop.implicit is not None or scope.kind != "function" or loop.scope is not scope:
            return False
        if analysis.header_names_steps(loop) or analysis.loop_backpropagates(loop):
            return False
        if any(outer.implicit is None and outer is not loop and analysis.is_step_loop(outer) for outer in ctx.loops):
            return False
        name = key.partition("[")[0]
        bindings = scope.bindings.get(name, ())
        if name.startswith("self.") and scope.class_scope is not None:
            bindings = [binding for binding in scope.class_scope.bindings.get(name, ()) if binding.ctx.scope is scope]
        fresh = [binding for binding in bindings if binding.kind == "assign" and binding.ctx.order < loop.start
                 and not binding.ctx.visible_loops and binding.ctx.guard is None and empty_container(binding.value)]
        if not fresh:
            return False
        if key.startswith("self."):
            pass  # bound afresh by every call, before the loop
        elif "." in key or analysis.outlives_call(key, ctx) or any(binding.kind in ("param", "global") for binding in bindings):
            return False
        if key in analysis.returned_keys(scope):
            return False
        # the graph handed on (returned, or backpropagated after the loop), or cut where the
        # container is read (`np.exp(torch.stack(losses).detach().numpy())`): either way, one call's
        return analysis.returns_attached(scope) is not None or analysis.backpropagates(scope) \
            or self._detached_after(key, loop, explicitly=True)

    def _detached_after(self, key: str, loop, explicitly: bool = False) -> bool:
        """Is every use of the container after the loop, up to its next binding, cut from the
        graph (``values = torch.cat(values).detach()``)? Then no backward() ever reaches what the
        loop stored (a rollout's values, kept whole for the length of the rollout). With
        ``explicitly``, each use must cut it with a call (``.detach()``, ``.numpy()``, ``.item()``),
        not only read it as a truth value or a length."""
        if loop is None or loop.implicit is not None:
            return False
        analysis = self.analysis
        scope = loop.scope
        end = max((ctx.order for _, ctx in analysis.statements_in_loop(loop)), default=loop.start)
        used = False
        for stmt, ctx in scope.statements:
            if ctx.order <= end or ctx.scope is not scope or type(stmt).__name__ in ("For", "While", "If", "With", "Try"):
                continue
            read = stmt.value if type(stmt) in (cst.Assign, cst.AugAssign, cst.AnnAssign) else stmt
            if read is None:
                continue
            mentioned = {mention.partition(".")[0].partition("[")[0] for mention in mentioned_keys(read)}
            if key not in mentioned:
                continue
            attached = {mention.partition(".")[0].partition("[")[0] for mention in mentioned_keys(read, skip_detached=True)}
            targets = {t for target in getattr(stmt, "targets", ()) for t in mentioned_keys(target.target)}
            if key in attached:
                return False
            if explicitly and not any(call_name(call) in DETACHING_METHODS for call in analysis.calls_in(stmt)):
                return False
            used = True
            if key in targets:
                break  # bound again: what follows is another value
        return used

    def _backward_of_element(self, key: str, loop) -> bool:
        """Does the loop call ``backward()`` on an element of the container it stores into
        (``losses[-1].backward()``, ``losses[i - 1].backward()``)? Then what it stores is
        attached, whatever made it (a loss function handed in as a parameter), and every
        element the loop is done with keeps a spent graph."""
        analysis = self.analysis
        if loop is None or loop.implicit is not None or not analysis.may_contain("].backward("):
            return False
        for stmt, _ in analysis.statements_in_loop(loop):
            for call in analysis.calls_in(stmt):
                func = call.func
                if type(func) is cst.Attribute and func.attr.value == "backward" and type(func.value) is cst.Subscript \
                        and storage_key(func.value) == key:
                    return True
        return False

    def _slot_detached(self, value, ctx: Context) -> bool:
        """``output['loss'] = output['loss'].detach()`` earlier in the iteration, before
        ``outputs.append(output)``: the author replaced the graph-carrying entry by a detached
        copy of itself."""
        analysis = self.analysis
        key = dotted_name(value)
        loop = ctx.loop
        if key is None or loop is None:
            return False
        binding = analysis.lookup(key, ctx)
        start = binding.ctx.order if binding is not None and loop.contains(binding.ctx.order) else loop.start
        for stmt, stmt_ctx in analysis.statements_in_loop(loop):
            if not start < stmt_ctx.order < ctx.order or type(stmt) is not cst.Assign or len(stmt.targets) != 1:
                continue
            target = stmt.targets[0].target
            if (type(target) is cst.Subscript and storage_key(target) == key
                    and key in mentioned_keys(stmt.value) and not analysis.is_attached(stmt.value, stmt_ctx)):
                return True
        return False

    def _fix(self, value) -> str:
        if type(value) in (cst.Name, cst.Attribute, cst.Subscript, cst.Call):
            return self.FIX.format(value=self.operand(value))
        return "detach the tensors before storing them (`.detach()`, plus `.cpu()` to free device memory)"


def _constant_slot(target) -> bool:
    """``d["loss"]`` / ``d[0]``: a subscript by one literal key."""
    elements = target.slice
    return len(elements) == 1 and type(elements[0].slice) is cst.Index and type(
        elements[0].slice.value) in (cst.SimpleString, cst.Integer)


def report_kept_argument(rule: Rule, node, call, ctx: Context, how: str, message: str, help_for) -> None:
    """Report the first graph-attached argument of ``call`` that the callee, a function of
    another module, keeps beyond the iteration in the way ``how`` (TL101 for stores, TL102
    for sums). The fix detaches it, unsafe: the keeper is another module's object."""
    for argument, kept, callee in rule.analysis.kept_across_iterations(call, ctx, how):
        fix = detach_fix(rule.analysis, [argument], ctx, "")
        rule.report(
            node,
            message.format(stmt=rule.code(node, 60), callee=callee_name(callee), kept=rule.code(kept, 50)),
            help_for(argument),
            autofix=Fix.unsafe(fix.message, *fix.changes) if fix is not None else None,
        )
        return


def callee_name(callee) -> str:
    """``AverageMeter.update`` for a method, ``record`` for a function."""
    parent = callee.parent
    return f"{parent.name}.{callee.name}" if parent is not None and parent.kind == "class" else callee.name
