from __future__ import annotations

import re

from torchlint.analysis import (
    Context, GradMode, dotted_name, iter_expression_nodes, keyword_argument, last_part, mentioned_keys, name_words,
)
from torchlint.analysis.arguments import passed_arguments
from torchlint.lazy import cst
from torchlint.rule import Rule
from torchlint.rules.tl201_eval_without_no_grad import LOSS_NAME_RE
from torchlint.rules.tl202_train_mode_not_restored import ModeSwitches, _same_model, _switch_of

# Methods that return the same module: `Net().to(device)` is still in training mode.
SAME_MODULE_METHODS = frozenset({"to", "cuda", "cpu", "half", "float", "double", "bfloat16", "requires_grad_", "share_memory"})
MAX_CALLER_DEPTH = 2
# Keywords by which a call chooses the mode itself (`model(x, training=False)`).
MODE_KEYWORDS = frozenset({"training", "train", "is_training", "is_train", "deterministic"})
# Layers that compute differently in training mode (dropout; batch norm; transformer layers,
# which hold dropout).
MODE_LAYER_RE = re.compile(r"Dropout|BatchNorm|^dropout$|Transformer\w*Layer|^Transformer$|MultiheadAttention")


class InferenceWithoutEvalMode(Rule):
    """
    ## What it does
    Finds forward passes run with autograd off (`torch.no_grad()`, `torch.inference_mode()`,
    a decorated prediction function) on a model still in training mode. The model is one this
    file builds with a module class (`model = Net()`, `self.net = nn.Sequential(...)`,
    through `.to(device)` and the like) or receives as an argument from a caller in this
    file that built one (also a parameter not named like a model, `scorer`, that every
    caller fills with one), and that is certainly in training mode at the call: the last mode
    switch before it in the same function (itself or through a helper of this file) is a
    `.train()` followed by training (`backward()`, an optimizer step); or there is none, and
    the file only ever switches the model to `.train()` for training (a `train()` function
    calls `model.train()`, no function calls `model.eval()`); or nothing in the file switches
    it at all and it was built here with a module class (a model starts in training mode). A
    `.train()` with no training after it is deliberate (Monte-Carlo dropout) and not
    reported. Also reported: a model switched back with `.train()` (or `.train(was_training)`)
    after the call, with no switch of it before the call in the function and no training
    after it: that `.train()` restores a mode the function never left, so the `.eval()` that
    should open the bracket is missing (unless a caller in this file switches the model to
    `.eval()` before calling). Switches include `with model_eval_mode(model):`-style context
    managers, `policy.set_training_mode(False)`, `[model[key].eval() for key in model]`, and
    switches of a wrapper built from the model (`self.model_ddp = DDP(self.model)`). A model built here and never switched is reported only when it has a layer
    whose output depends on the mode: dropout, batch norm, transformer layers, RNNs built
    with `dropout=`, seen in the construction or in the classes of this file it builds (a
    model of plain linear layers computes the same in both modes); calling `.train()` on a
    model is taken as its author's word that the mode matters.

    ## Why is this bad?
    `no_grad` only stops autograd from recording; it does not change what the layers
    compute. A module starts in training mode, so inference keeps dropout active (the same
    input gives different outputs on every call) and batch norm normalises each batch with
    its own statistics and overwrites the running statistics it learnt. Measured on CPU
    with a small classifier (dropout 0.5, batch norm): two identical calls under `no_grad`
    gave outputs whose largest element differed by at least 1.2 (0 after `.eval()`), and
    every prediction batch moved the learnt batch-norm running mean by at least 0.05.

    ## Known problems
    Off by default: whether a model is in training mode at a call depends on code in other
    files and on frameworks (a trainer that calls `.eval()` before its validation hook), so
    only models whose whole story is in one file are judged. Not reported: models loaded by
    factories (`from_pretrained` returns a model in eval mode; `torch.load` keeps the saved
    mode; `build_model(cfg)` is unknown), models switched to `.eval()` anywhere in the file
    but not before the call in its own function (the order of calls is unknown), calls
    inside `nn.Module` methods (a frozen backbone in `forward` follows its parent's mode) or
    inside hooks a framework calls, unless the function itself switches the model (a
    module's `fit` that calls `self.net.train()` and trains), arguments whose callers are in
    other files, and forward passes without grad inside a training step (the loop around
    them, or a per-step function outside its loops, backpropagates in its own body: features
    cached for gradient accumulation, a teacher's or target network's outputs, where
    training mode may be intended). Models whose layers compute the same in both modes are
    still reported when the file calls `.train()` on them (their author's word that the mode
    matters): on real code most false reports are such models (see
    `benchmarks/triage/gaps9b.md`).
    """

    CODE = "TL204"
    NAME = "inference-without-eval-mode"
    MESSAGE = (
        "`{call}` runs `{model}` with autograd off while `{model}` is in training mode: dropout stays "
        "active and batch norm uses and updates batch statistics"
    )
    FIX = "call `{model}.eval()` before inference (and `{model}.train()` before training resumes)"
    TOKENS = ("no_grad", "inference_mode", "set_grad_enabled")
    ENABLED_BY_DEFAULT = False
    CLAIM = (
        "two identical inference calls under `no_grad` on a training-mode model give different outputs "
        "(max abs difference > 1e-3) and change the batch-norm running mean; after `.eval()` they match exactly"
    )

    INVALID = [
        """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Dropout(0.5), nn.Linear(256, 10))

    def forward(self, x):
        return self.body(x)

model = Net()
model.load_state_dict(torch.load("weights.pt"))
predictions = []
with torch.no_grad():
    for x in loader:
        predictions.append(model(x).argmax(1))  # expect: TL204
""",
        """\
@torch.no_grad()
def predict(model, loader):
    return [model(x).softmax(-1) for x in loader]  # expect: TL204

classifier = nn.Sequential(nn.Conv2d(3, 16, 3), nn.BatchNorm2d(16), nn.Flatten(), nn.LazyLinear(10)).to(device)
train(classifier, train_loader)
probabilities = predict(classifier, test_loader)
""",
        """\
net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Dropout(0.2), nn.Linear(256, 10))
for epoch in range(epochs):
    net.train()
    for x, y in train_loader:
        optimizer.zero_grad()
        F.cross_entropy(net(x), y).backward()
        optimizer.step()
with torch.no_grad():
    correct = sum((net(x).argmax(1) == y).sum().item() for x, y in test_loader)  # expect: TL204
""",
        """\
class Trainer:
    def _eval_step(self, x, y):
        with torch.no_grad():
            loss = self.loss_fn(self.model(x), y)  # expect: TL204
        self.model.train()  # restores a mode nothing here left
        return loss.item()
""",
        """\
class BayesianRegressor(nn.Module):
    def fit(self, loader, val_x, val_y, epochs):
        optimizer = torch.optim.Adam(self.parameters())
        self.backbone.train()
        for epoch in range(epochs):
            for x, y in loader:
                optimizer.zero_grad()
                F.mse_loss(self.backbone(x), y).backward()
                optimizer.step()
            with torch.no_grad():
                val_loss = F.mse_loss(self.backbone(val_x), val_y)  # expect: TL204
""",
        """\
class LinkPredictor(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(2 * d, 1)
        self.dropout = nn.Dropout(0.5)

    def forward(self, a, b):
        return self.lin(self.dropout(torch.cat([a, b], -1)))


def train(model, scorer, loader, optimizer):
    model.train()
    scorer.train()
    for x, pairs in loader:
        h = model(x)
        loss = -scorer(h[pairs[0]], h[pairs[1]]).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


@torch.no_grad()
def test(model, scorer, x, pairs):
    model.eval()
    h = model(x)
    return scorer(h[pairs[0]], h[pairs[1]])  # expect: TL204


def main(model, x, pairs, loader):
    scorer = LinkPredictor(64)
    optimizer = torch.optim.Adam(list(model.parameters()) + list(scorer.parameters()))
    train(model, scorer, loader, optimizer)
    return test(model, scorer, x, pairs)
""",
    ]
    VALID = [
        """\
def validate(model, loader):
    with torch.no_grad():
        correct = sum((model(x).argmax(1) == y).sum().item() for x, y in loader)
    model.train()  # the caller switched it to eval
    return correct

for epoch in range(epochs):
    train_one_epoch(model, train_loader, optimizer)
    model.eval()
    accuracy = validate(model, val_loader)
""",
        """\
class Trainer:
    def __init__(self, model, rank):
        self.model = model
        self.model_ddp = DistributedDataParallel(self.model, device_ids=[rank])

    def train_epoch(self, loader, optimizer):
        self.model.train()
        for x, y in loader:
            optimizer.zero_grad()
            F.mse_loss(self.model_ddp(x), y).backward()
            optimizer.step()

    def validate(self, loader):
        self.model_ddp.eval()  # switches the module it wraps
        with torch.no_grad():
            losses = [F.mse_loss(self.model(x), y).item() for x, y in loader]
        self.model_ddp.train()
        return sum(losses) / len(losses)
""",
        """\
class ActorCritic:
    def update(self, batch):
        self.value_net.train()
        self.target_net.train()
        value_loss = F.mse_loss(self.value_net(batch.obs), batch.returns)
        self.value_optimizer.zero_grad()
        value_loss.backward()
        self.value_optimizer.step()
        with torch.no_grad():  # a target network inside the update step
            baseline = self.target_net(batch.next_obs)
        actor_loss = -(self.policy_net(batch.obs) * (batch.returns - baseline)).mean()
        self.actor_optimizer.zero_grad()
        actor_loss.backward()
        self.actor_optimizer.step()
""",
        """\
model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Dropout(0.5), nn.Linear(256, 10))
with torch.no_grad(), model_eval_mode(model):
    predictions = [model(x).argmax(1) for x in loader]
""",
        """\
model = nn.Sequential(nn.Linear(784, 256), nn.Dropout(0.5), nn.Linear(256, 10))
log = Log(log_each=10)
for epoch in range(epochs):
    log.train(len_dataset=len(train_set))  # a logger's method, not a module's
    for x, y in loader:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        for x, y in test_loader:
            log(model, F.cross_entropy(model(x), y))
""",
        """\
for epoch in range(epochs):
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    with torch.no_grad():
        scores = [model(x, training=False) for x, _ in val_loader]  # the call picks the mode
""",
        """\
nets.encoder.train()
nets.decoder.train()
for x in loader:
    loss = F.mse_loss(nets.decoder(nets.encoder(x)), x)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
_ = [nets[key].eval() for key in nets]
with torch.no_grad():
    reconstruction = nets.decoder(nets.encoder(val_x))
""",
        """\
model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Dropout(0.5), nn.Linear(256, 10))
model.load_state_dict(torch.load("weights.pt"))
model.eval()
with torch.no_grad():
    predictions = [model(x).argmax(1) for x in loader]
""",
        """\
@torch.no_grad()
def predict(model, loader):
    return [model(x).softmax(-1) for x in loader]

classifier = nn.Sequential(nn.Conv2d(3, 16, 3), nn.BatchNorm2d(16), nn.Flatten(), nn.LazyLinear(10)).to(device)
classifier.eval()
probabilities = predict(classifier, test_loader)
""",
        """\
def mc_dropout_predict(model, x, samples=20):
    model.train()  # keep dropout on: Monte-Carlo dropout
    with torch.no_grad():
        return torch.stack([model(x) for _ in range(samples)]).mean(0)
""",
        """\
model = AutoModel.from_pretrained("bert-base-uncased")
with torch.no_grad():
    hidden = model(**inputs).last_hidden_state
""",
        """\
@torch.no_grad()
def predict(model, loader):
    return [model(x) for x in loader]
""",
        """\
model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
with torch.no_grad():
    predictions = [model(x).argmax(1) for x in loader]
""",
        """\
class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.teacher = TeacherNet()
        self.head = nn.Linear(512, 10)

    def forward(self, x):
        with torch.no_grad():
            features = self.teacher(x)
        return self.head(features)
""",
        """\
model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Dropout(0.2), nn.Linear(256, 10))
for x, y in loader:
    with torch.no_grad():
        cached = model(x)  # features for the accumulation pass, in training mode on purpose
    loss = contrastive(model(x), cached)
    loss.backward()
    optimizer.step()
""",
    ]

    def visit_FunctionDef(self, node, ctx: Context) -> None:
        scope = self.analysis.scopes.get(id(node))
        if scope is None:
            return
        parent = scope.parent
        # A module's own method (a frozen backbone in `forward` follows its parent's mode) or a
        # hook a framework calls (in eval mode, for a validation hook): only what the function
        # itself decides about a model's mode counts there (`self.model.train()` and training
        # before the call, or `.train()` restored after it).
        own_only = parent is not None and parent.kind == "class" and (
            self.analysis.is_module_class(parent.node.name) or self.analysis.overrides_external_hook(scope)
        )
        self._check_scope(scope, own_only)

    def check_module_scope(self, scope) -> None:
        self._check_scope(scope)

    def _check_scope(self, scope, own_only: bool = False) -> None:
        analysis = self.analysis
        reported = set()
        for stmt, ctx in scope.statements:
            if ctx.scope is not scope or ctx.grad is not GradMode.DISABLED:
                continue
            for call in analysis.calls_in(stmt):
                func = call.func
                if type(func) is cst.Attribute and func.attr.value == "forward":
                    func = func.value
                key = dotted_name(func)
                if key is None or key == "self" or key in reported or LOSS_NAME_RE.search(last_part(key)):
                    continue
                if any(arg.keyword is not None and arg.keyword.value in MODE_KEYWORDS for arg in call.args):
                    continue  # `model(x, training=False)`: the call says the mode itself
                if not (analysis.is_module(func, ctx) or analysis.is_module_by_evidence(func, ctx)) \
                        or self._in_training_step(ctx):
                    continue
                if not self._in_training_mode(key, ctx, scope, own_only):
                    continue
                reported.add(key)
                self.report(stmt, self.MESSAGE.format(call=self.code(call, 40), model=key), self.FIX.format(model=key))

    def _in_training_step(self, ctx: Context) -> bool:
        """Is the call part of a training step: does its innermost loop (or, outside loops, the
        function) backpropagate or step an optimizer in its own body? A forward pass without grad there (features cached for
        gradient accumulation, a teacher's or target network's outputs) runs in training mode
        by design, or at least not by oversight."""
        loops, analysis = ctx.visible_loops, self.analysis
        if not loops:
            # a per-step function (`_forward_learn(batch)`: a target network's outputs, then
            # the update): its own body, outside any loop, backpropagates or steps
            return any(
                inner.scope is ctx.scope and not inner.visible_loops and (
                    analysis.statement_backpropagates(stmt, inner)
                    or any(analysis.stepped_optimizer(call, inner) is not None for call in analysis.calls_in(stmt))
                )
                for stmt, inner in ctx.scope.statements
            )
        loop = loops[-1]
        return any(
            inner.loop is loop and (
                analysis.statement_backpropagates(stmt, inner)
                or any(analysis.stepped_optimizer(call, inner) is not None for call in analysis.calls_in(stmt))
            )
            for stmt, inner in analysis.statements_in_loop(loop)
        )

    def _in_training_mode(self, key: str, ctx: Context, scope, own_only: bool = False) -> bool:
        """Is the model certainly in training mode at the call (see the rule's documentation)?"""
        last = self._last_switch(scope, key, ctx.order)
        if last is not None:
            # eval mode here, or `.train()` with no training after it (Monte-Carlo dropout)
            return last[1] == "train" and self._trains_between(scope, last[0], ctx.order)
        if self._restored_after(scope, key, ctx):
            return True
        if own_only:
            return False
        switches = self._file_switches(self._names_of(key, ctx))
        if any(mode == "eval" for mode, _ in switches):
            return False  # switched to eval somewhere: the order relative to the call is unknown
        if switches:
            # only ever switched to `.train()`, for training: it is never in eval mode
            analysis = self.analysis
            return any(analysis.backpropagates(where.scope) or analysis.steps_optimizer(where.scope)
                       for _, where in switches)
        return self._built_in_training_mode(key, ctx, 0)

    def _restored_after(self, scope, key: str, ctx: Context) -> bool:
        """Is the model switched back to training mode after the call (`model.train()`,
        `model.train(was_training)`) with no switch of it before the call in the function and no
        training after it? That `.train()` restores a mode the function was meant to leave:
        the author meant to bracket the inference with `.eval()` and `.train()` and the first
        half is missing. Not when a caller of this file switches the model to `.eval()`
        before calling (the caller prepares, the callee restores)."""
        switches = self._scope_switches(scope)
        after = [(at, mode) for at, mode, switched in switches
                 if at > ctx.order and switched is not None and _same_model(switched, key)]
        if not after or min(after)[1] != "train":
            return False
        if self._trains_between(scope, ctx.order, 1 << 62):
            return False  # `.train()` for training that follows (a data-dependent initialisation first)
        return not self._caller_switches_to_eval(scope, key)

    def _caller_switches_to_eval(self, scope, key: str) -> bool:
        """Does a caller of the function in this file switch the model (in its own terms) to
        `.eval()` last before the call?"""
        root, dot, rest = key.partition(".")
        binding = self.analysis.lookup(root, scope.statements[0][1]) if scope.statements else None
        for call, caller_ctx in self.analysis.callers_of(scope):
            if root == "self":
                mapped = "self" + dot + rest if type(call.func) is cst.Attribute and dotted_name(call.func.value) == "self" else None
            elif binding is not None and binding.kind == "param":
                argument = passed_arguments(call, scope).get(root)
                mapped = dotted_name(argument) if argument is not None else None
                mapped = mapped + dot + rest if mapped is not None else None
            else:
                mapped = key
            if mapped is None:
                continue
            last = self._last_switch(caller_ctx.scope, mapped, caller_ctx.order)
            if last is not None and last[1] == "eval":
                return True
        return False

    def _names_of(self, key: str, ctx: Context) -> set:
        """The model's key and, for a parameter, the keys its callers in this file pass."""
        names = {key}
        binding = self.analysis.lookup(key, ctx) if "." not in key else None
        if binding is not None and binding.kind == "param":
            for call, _ in self.analysis.callers_of(binding.ctx.scope):
                argument = passed_arguments(call, binding.ctx.scope).get(key)
                names.add(dotted_name(argument) if argument is not None else None)
        return names

    def _file_switches(self, names: set) -> list:
        """(mode, context) of every statement of the file that switches one of the models
        named (an unknown receiver, or an unknown caller argument, matches any)."""
        memo = self.analysis.module_scope._memo
        if "tl204_file_switches" not in memo:
            memo["tl204_file_switches"] = [
                (switch[0], dotted_name(switch[1]), ctx)
                for statements in self.analysis.statements_by_type.values()
                for stmt, ctx in statements
                for switch in (_switch_of(stmt),) if switch is not None and not _other_train_method(stmt)
            ]
        return [
            (mode, ctx) for mode, switched, ctx in memo["tl204_file_switches"]
            if any(_same_model(switched, name) or (switched and name and last_part(switched) == last_part(name))
                   for name in names)
        ]

    def _scope_switches(self, scope) -> list:
        """(order, "eval" / "train", model key or None) of every mode switch the scope's
        statements make (themselves or through helpers of this file)."""
        memo = scope._memo
        if "tl204_switches" not in memo:
            modes = ModeSwitches(self.analysis)
            memo["tl204_switches"] = [
                (ctx.order, mode, switched)
                for stmt, ctx in scope.statements
                if ctx.scope is scope and type(stmt) is not cst.FunctionDef and not _other_train_method(stmt)
                for mode, switched in [*modes.of_statement(stmt, ctx), *self._other_switches(stmt)]
            ]
        return memo["tl204_switches"]

    def _other_switches(self, stmt) -> list[tuple[str, str | None]]:
        """Mode switches in other spellings: a context manager that runs its block in eval mode
        (`with model_eval_mode(model):`, `with evaluating(net):`), Stable-Baselines'
        `policy.set_training_mode(False)`, and `.eval()` on every entry of a dict of modules
        (`[model[key].eval() for key in model]`)."""
        found = []
        if type(stmt) is cst.With:
            for item in stmt.items:
                call = item.item
                if type(call) is cst.Call and "eval" in name_words(last_part(dotted_name(call.func) or "")):
                    found.extend(("eval", dotted_name(arg.value)) for arg in call.args if dotted_name(arg.value))
            return found
        for call in self.analysis.calls_in(stmt):
            func = call.func
            if type(func) is not cst.Attribute:
                continue
            method = func.attr.value
            if method == "set_training_mode" and call.args:
                flag = call.args[0].value
                found.append(("eval" if type(flag) is cst.Name and flag.value == "False" else "train", dotted_name(func.value)))
            elif method in ("eval", "train") and not call.args and type(func.value) is cst.Subscript:
                owner = dotted_name(func.value.value)
                if owner is not None:
                    found.append((method, owner))  # `model[key].eval()`: every entry, in turn
        return found

    def _last_switch(self, scope, key: str, order: int) -> tuple[int, str] | None:
        """(order, "eval" / "train") of the last statement of the scope before ``order`` that
        switches the model's mode (itself or through a helper of this file), or None."""
        before = [(at, mode) for at, mode, switched in self._scope_switches(scope)
                  if at < order and (_same_model(switched, key) or self._wraps(scope, switched, key))]
        return max(before) if before else None

    def _wraps(self, scope, wrapper: str, key: str) -> bool:
        """Is ``wrapper`` built from the model (`self.model_ddp = DDP(self.model, ...)`)? Switching
        a wrapper's mode switches the module it wraps."""
        if wrapper.startswith("self.") != key.startswith("self."):
            return False
        if wrapper.startswith("self."):
            class_scope = scope.class_scope
            bindings = class_scope.bindings.get(wrapper, ()) if class_scope is not None else ()
        else:
            bindings = scope.bindings.get(wrapper, ())
        return any(
            binding.kind == "assign" and type(binding.value) is cst.Call and key in mentioned_keys(binding.value)
            for binding in bindings
        )

    def _trains_between(self, scope, start: int, end: int) -> bool:
        """Does a statement of the scope between the two orders backpropagate or step an
        optimizer (the `.train()` before it was for training, not for sampling)?"""
        analysis = self.analysis
        return any(
            start < ctx.order < end and (
                analysis.statement_backpropagates(stmt, ctx)
                or any(analysis.stepped_optimizer(call, ctx) is not None for call in analysis.calls_in(stmt))
            )
            for stmt, ctx in scope.statements if ctx.scope is scope
        )

    def _built_in_training_mode(self, key: str, ctx: Context, depth: int) -> bool:
        """Is ``key`` a module built in this file by a module class (so in training mode), or a
        parameter that a caller of this file passes such a module?"""
        analysis = self.analysis
        if key.startswith("self."):
            class_scope = ctx.scope.class_scope
            bindings = [b for b in class_scope.bindings.get(key, ()) if b.kind == "assign"] if class_scope else []
            return bool(bindings) and any(self._constructs_module(b.value, b.ctx) for b in bindings if not b.element)
        if "." in key:
            return False
        binding = analysis.lookup(key, ctx)
        if binding is None:
            return False
        if binding.kind == "assign":
            return not binding.element and self._constructs_module(binding.value, binding.ctx)
        if binding.kind != "param" or depth >= MAX_CALLER_DEPTH:
            return False
        scope = binding.ctx.scope
        for call, caller_ctx in analysis.callers_of(scope):
            argument = passed_arguments(call, scope).get(key)
            argument_key = dotted_name(argument) if argument is not None else None
            if argument_key is None:
                continue
            if self._built_in_training_mode(argument_key, caller_ctx, depth + 1):
                return True
        return False

    def _constructs_module(self, value, ctx: Context) -> bool:
        """``Net()``, ``nn.Sequential(...).to(device)``: a module class called, nothing that
        switches its mode in the chain."""
        while type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value in SAME_MODULE_METHODS:
            value = value.func.value
        return type(value) is cst.Call and self.analysis.is_module_class(value.func) and \
            not LOSS_NAME_RE.search(last_part(dotted_name(value.func) or "")) and self._has_mode_layers(value, set())

    def _has_mode_layers(self, node, seen: set) -> bool:
        """Does the construction (``nn.Sequential(..., nn.Dropout(0.5))``, ``Net()`` of a class
        defined in this file) hold a layer whose output depends on the mode: dropout, batch
        norm, an RNN or transformer layer with dropout? Classes defined elsewhere are unknown:
        no."""
        for inner in iter_expression_nodes(node):
            if type(inner) is not cst.Call:
                continue
            name = dotted_name(inner.func) or ""
            if MODE_LAYER_RE.search(last_part(name)):
                return True
            rate = keyword_argument(inner, "dropout")
            if rate is not None and not (type(rate) in (cst.Integer, cst.Float) and float(rate.value) == 0):
                return True
            local = self.analysis.local_classes.get(name)
            if local is not None and name not in seen:
                seen.add(name)
                if self._has_mode_layers(local, seen):
                    return True
        if type(node) is cst.ClassDef:
            for base in node.bases:
                name = dotted_name(base.value) or ""
                local = self.analysis.local_classes.get(name)
                if local is not None and name not in seen:
                    seen.add(name)
                    if self._has_mode_layers(local, seen):
                        return True
        return False


def _other_train_method(stmt) -> bool:
    """``log.train(len_dataset=n)``: a method named ``train`` that takes other keywords than a
    module's ``mode``, so its receiver is no module."""
    value = getattr(stmt, "value", None)
    return type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value == "train" \
        and any(arg.keyword is not None and arg.keyword.value != "mode" for arg in value.args)
