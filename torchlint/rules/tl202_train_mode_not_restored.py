from __future__ import annotations

import re

from torchlint.analysis import BACKWARD_FUNCTIONS, Context, GradMode, call_name, dotted_name, last_part, mentioned_keys, name_words, strip_pass_through
from torchlint.analysis.arguments import passed_arguments
from torchlint.analysis.summaries import MAX_CALL_DEPTH
from torchlint.lazy import cst
from torchlint.fix import Fix, InsertBefore
from torchlint.rule import Rule
from torchlint.rules.tl201_eval_without_no_grad import DATA_WORDS, _mode_switch

# Calls that restore saved weights: `load_state_dict`, `load_model(path)`, `load_checkpoint`.
LOADING_CALL_RE = re.compile(r"^(?:load_state_dict|load|load_model|load_checkpoint|load_weights|load_pretrained|restore|restore_checkpoint)$")

# `if epoch == epochs - 1:` / `if epoch + 1 == num_epochs:` / `if is_last_epoch:`: evaluation
# that runs only on the last pass, after which nothing trains.
LAST_PASS_RE = re.compile(r"(==|>=).*[-+]\s*1\b|[-+]\s*1\b.*(==|>=)|\b\w*(last|final)\w*\b", re.I)


class TrainModeNotRestored(Rule):
    """
    ## What it does
    Finds loops that train a model and switch it to evaluation mode for validation without
    switching it back. Training is stepping an optimizer, directly or through a helper the
    loop calls; the switch is `model.eval()`, `model.train(False)`, or a helper such as
    `validate(model, loader)` that calls `.eval()` on it; and nothing in the loop restores
    the mode: no `model.train()` at the top of the loop, after the validation, in the training helper the
    loop calls (`train_one_epoch(model, ...)` calling `model.train()`), or at the end of the
    validation helper. Helpers defined in the same file are followed (to a bounded depth),
    with their parameters mapped to the arguments of the call and literal arguments deciding
    branches (`run_epoch(model, loader, train=True)` reaches the `model.train()` under
    `if train:`); helpers of other project files are followed the same way, and a method of
    an instance built in the loop (`Evaluator(self.model, ...).get_scores()`) switches what
    its constructor stored (`self.model = model`: the caller's `self.model`).

    Also an agent or trainer class (not a module, so no caller's `.train()` reaches its
    networks) that switches one of its networks to `.eval()` (to pick actions, to evaluate),
    steps an optimizer built over that network's parameters, and never switches it back
    anywhere in the file: a DDPG agent with batch norm calling `self.actor.eval()` in
    `act()` trains the actor in eval mode from its first action on. A method that restores
    saved weights before the switch (`self.G.load_state_dict(torch.load(path))`, then
    `self.G.eval()`) starts an evaluation run of its own and is not reported.

    ## Why is this bad?
    `.eval()` stays in force until `.train()` is called. From the second epoch on the model
    trains in evaluation mode: dropout is off (no regularisation) and batch norm normalises
    with its frozen running statistics instead of the batch's, and never updates them. The
    program runs, the loss goes down, and nothing warns. Measured on CPU with a two-epoch
    loop over a model with dropout and batch norm: the model's `training` flag was True,
    True in the first epoch's steps and False, False in the second's, and the batch-norm
    running mean stopped changing after the first validation.

    ## Known problems
    Not reported: a `.train()` anywhere in the loop (also `.train(mode)` with a variable,
    which may restore), evaluation that runs only on the last pass (under `if epoch ==
    epochs - 1:` or a test naming the last / final pass, or followed by `break` / `return`),
    models the loop does not train (a DQN target network switched to `.eval()` and only
    called under `no_grad`; a frozen teacher handed to a helper whose optimizers are built
    over other models), models built afresh in every iteration, loops that backpropagate
    without stepping an optimizer (gradient inspection; a call named for the update after
    `backward()`, `train_op()`, or a strategy's `optimizer_step(optimizer, ...)` counts as
    stepping), and `.eval()` on datasets or optimizers. A loop that restores
    the mode through a helper in another file (a framework's `fit`) is assumed not to: such
    code calls `.eval()` through the framework too, which is not followed either.
    A model passed to a backward or optimizer-step wrapper in the loop
    (`strategy.backward(loss, self.model, self.optimizer)`) is trained there, and a module
    that trains itself (`self.fit_on_task(...)` backpropagates) and validates with
    `self.eval()` is checked like any other model.

    Step functions handed to a framework that loops over them (ignite's
    `Engine(train_step)`) are checked as a pair: a validation step that calls `.eval()` is
    reported when the training step handed over beside it never calls `.train()` on that
    model. Frameworks that set the mode themselves (Lightning's `training_step`, ignite's
    `create_supervised_trainer`) take methods or build the step for you: nothing is handed over.
    """

    CODE = "TL202"
    NAME = "train-mode-not-restored"
    MESSAGE = (
        "`{stmt}` switches `{model}` to evaluation mode inside a loop that trains it, and nothing in the "
        "loop switches it back: from the next iteration on it trains with dropout off and batch norm frozen"
    )
    FIX = "call `{model}.train()` at the top of the loop (or at the end of the validation)"
    HANDED_MESSAGE = (
        "`{stmt}` switches `{model}` to evaluation mode, and `{step}`, which the framework runs between "
        "validations, never switches it back: after the first validation it trains with dropout off and batch norm frozen"
    )
    HANDED_FIX = "call `{model}.train()` at the start of `{step}`"
    CLASS_MESSAGE = (
        "`{stmt}` switches `{model}` to evaluation mode, and nothing in this file switches it back, while "
        "`{owner}` trains it (`{optimizer}`): every update after this call trains with dropout off and batch norm frozen"
    )
    CLASS_FIX = "call `{model}.train()` before `{model}` is trained (at the start of the update method)"
    AUTOFIX = (
        "Unsafe: inserts `model.train()` right before the statement of the loop's body that trains "
        "first (the inner loop over batches, or the training helper's call), so every pass trains "
        "in training mode wherever the validation sits. Unsafe because a model kept in eval mode "
        "on purpose (frozen batch norm) would lose it; no fix when the function puts the model in "
        "eval mode before the loop, or the switch names no model."
    )
    TOKENS = (".eval(", "train", "backward", ".step(", "fit")  # the switch and the training may both sit in imported helpers
    CLAIM = (
        "the model's `training` flag is False during every training step after the first validation "
        "(True in every step of the good program), and batch-norm running statistics stop changing"
    )

    INVALID = [
        """\
model.train()
for epoch in range(epochs):
    for x, y in train_loader:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    model.eval()  # expect: TL202
    with torch.no_grad():
        val_loss = sum(F.cross_entropy(model(x), y).item() for x, y in val_loader)
""",
        """\
def validate(net, loader):
    net.eval()
    with torch.no_grad():
        return sum((net(x).argmax(1) == y).sum().item() for x, y in loader)

def fit(model, optimizer, train_loader, val_loader, epochs):
    model.train()
    for epoch in range(epochs):
        for x, y in train_loader:
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
        accuracy = validate(model, val_loader)  # expect: TL202
""",
        """\
class SFTTrainer:
    def fit(self, epochs):
        for epoch in range(epochs):
            self.model.train()
            for batch in self.loader:
                loss = self.loss_fn(self.model(batch.x), batch.y)
                self.strategy.backward(loss, self.model, self.optimizer)
                self.strategy.optimizer_step(self.optimizer, self.model, self.scheduler)
                self.log_and_evaluate(batch.step)  # expect: TL202

    def log_and_evaluate(self, step):
        if step % self.eval_steps == 0:
            self.evaluate()

    def evaluate(self):
        self.model.eval()
        with torch.no_grad():
            for batch in self.eval_loader:
                self.model(batch.x)
""",
        """\
def run(model, iterator, train_op, eval_steps):
    def evaluate():
        model.eval()
        for batch in iterator.eval_batches():
            model(batch)

    model.train()
    for step, batch in enumerate(iterator.train_batches()):
        loss = model(batch).mean()
        loss.backward()
        train_op()  # the update a library built
        if step % eval_steps == 0:
            evaluate()  # expect: TL202
""",
        """\
class Trainer:  # its own eval() method switches the model
    def train(self, loader):
        self.model.train()
        for step, batch in enumerate(loader):
            loss = self.model(batch).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            if step % 100 == 0:
                self.eval()  # expect: TL202

    def eval(self):
        self.model.eval()
        with torch.no_grad():
            return [self.model(batch) for batch in self.val_batches]
""",
        """\
class RewardModelTrainer:
    def fit(self, args):
        for epoch in range(self.epochs):
            self.model.train()  # once per epoch: the evaluation below runs every N steps
            for batch in self.train_dataloader:
                loss = self.loss_fn(*self.forward(self.model, batch))
                self.strategy.backward(loss, self.model, self.optimizer)
                self.strategy.optimizer_step(self.optimizer, self.model, self.scheduler)
                self.log_and_evaluate(args, batch)  # expect: TL202

    def log_and_evaluate(self, args, batch):
        if self.global_step % args.eval_steps == 0:
            self.evaluate(self.eval_dataloader)

    def evaluate(self, loader):
        self.model.eval()
        with torch.no_grad():
            return sum(self.model(batch).mean().item() for batch in loader)
""",
        """\
class MetaLearner(nn.Module):  # the module trains itself
    def fit(self, loader, optimizer, val_loader):
        self.train()
        for episode, task in enumerate(loader):
            self.fit_on_task(task, optimizer)
            if (episode + 1) % 1000 == 0:
                self.validate(val_loader)  # expect: TL202

    def fit_on_task(self, task, optimizer):
        optimizer.zero_grad()
        loss = self.loss(task)
        loss.backward()
        optimizer.step()

    def validate(self, loader):
        self.eval()
        with torch.no_grad():
            return sum(self.accuracy(task) for task in loader) / len(loader)
""",
        """\
from ignite.engine import Engine


def train_step(engine, batch):  # ignite runs it for every batch, between validations
    x, y = batch
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def val_step(engine, batch):
    with torch.no_grad():
        model.eval()  # expect: TL202
        x, y = batch
        return model(x), y


trainer, evaluator = Engine(train_step), Engine(val_step)
""",
        """\
class Trigger:
    def __init__(self):
        self.mask = torch.zeros(32, 32, requires_grad=True)

    def generate(self, model, x, target):  # optimizes a trigger of its own, not the model
        model.eval()
        optimizer = torch.optim.Adam([self.mask], lr=0.1)
        for _ in range(10):
            loss = F.cross_entropy(model(x * self.mask), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return self.mask.detach()


def harden(model, loader, optimizer):
    trigger = Trigger()
    model.train()
    for x, y in loader:
        mask = trigger.generate(model, x, y)  # expect: TL202
        loss = F.cross_entropy(model(x * mask), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
""",
        """\
class Trainer:
    def train_step(self):
        loss = self.model(next(self.dl))
        loss.backward()
        self.opt.step()
        self.opt.zero_grad()
        if self.step % self.sample_every == 0:  # samples after the step, and forgets to switch back
            self.model.eval()
            save_samples(self.model.sample(16))
        self.step += 1

    def train(self):
        while self.step < self.num_steps:
            self.train_step()  # expect: TL202
""",
        """\
class Evaluator:
    def __init__(self, model, loader):
        self.model = model
        self.loader = loader

    def get_scores(self):
        self.model.eval()
        with torch.no_grad():
            return sum(self.model(x).argmax(1).eq(y).sum().item() for x, y in self.loader)

class Trainer:
    def train(self, epochs):
        self.model.train()
        for epoch in range(epochs):
            self.train_epoch()
            evaluator = Evaluator(self.model, self.dev_loader)
            accuracy = evaluator.get_scores()  # expect: TL202

    def train_epoch(self):
        for x, y in self.loader:
            self.optimizer.zero_grad()
            F.cross_entropy(self.model(x), y).backward()
            self.optimizer.step()
""",
        """\
class Agent:
    def __init__(self):
        self.actor = Actor()  # batch norm inside
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=1e-4)

    def act(self, obs):
        self.actor.eval()  # expect: TL202
        with torch.no_grad():
            return self.actor(obs).numpy()

    def update(self, batch):
        loss = -self.critic(batch.obs, self.actor(batch.obs)).mean()
        self.actor_optimizer.zero_grad()
        loss.backward()
        self.actor_optimizer.step()
""",
    ]
    VALID = [
        """\
for epoch in range(epochs):
    model.train()
    for x, y in train_loader:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        val_loss = sum(F.cross_entropy(model(x), y).item() for x, y in val_loader)
""",
        """\
def train_one_epoch(model, loader, optimizer):
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()

def evaluate(model, loader):
    model.eval()
    with torch.no_grad():
        return sum(F.cross_entropy(model(x), y).item() for x, y in loader)

for epoch in range(epochs):
    train_one_epoch(model, train_loader, optimizer)
    val_loss = evaluate(model, val_loader)
""",
        """\
def validate(model, loader):
    model.eval()
    try:
        with torch.no_grad():
            return sum(model(x).sum().item() for x in loader)
    finally:
        model.train()

for step, (x, y) in enumerate(loader):
    loss = F.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    if step % 100 == 0:
        validate(model, val_loader)
""",
        """\
for epoch in range(epochs):
    for x, y in loader:
        optimizer.zero_grad()
        F.mse_loss(model(x), y).backward()
        optimizer.step()
    if epoch == epochs - 1:
        model.eval()
        test(model)
""",
        """\
for step in range(steps):
    state, reward = env.step(policy(state))
    loss = policy_loss(policy, state, reward)
    loss.backward()
    optimizer.step()
    if step % sync_every == 0:
        target_net.load_state_dict(policy.state_dict())
        target_net.eval()
""",
        """\
def show_gradients(net, batch):
    net.eval()
    F.cross_entropy(net(batch[0]), batch[1]).backward()
    plot({name: p.grad for name, p in net.named_parameters()})

for name, act in activations.items():
    net = BaseNetwork(act())
    show_gradients(net, batch)
""",
        """\
for epoch in range(epochs):
    for phase in ["train", "val"]:
        model.train(phase == "train")
        for x, y in loaders[phase]:
            loss = F.cross_entropy(model(x), y)
            if phase == "train":
                loss.backward()
                optimizer.step()
""",
        """\
model.train()
for x, y in loader:  # gradient inspection: nothing updates the weights
    model.eval()
    x.requires_grad_(True)
    loss = criterion(model(x), y)
    loss.backward()
    saliency.update({"grad": x.grad.abs().mean().item()})
""",
        """\
class LoRATrainer:  # the text encoder of the pipeline is frozen: eval mode on purpose
    def train_loop(self, loader):
        for batch in loader:
            loss = self.train_single(batch)
            self.optimizer.step()
            self.optimizer.zero_grad()

    def train_single(self, batch):
        with torch.no_grad():
            self.sd.text_encoder.eval()
            embeds = self.sd.text_encoder(batch.prompt)
        loss = self.sd.unet(batch.latents, embeds).mean()
        loss.backward()
        return loss.detach()
""",
        """\
def perceptual_loss(output, target):
    vgg = load_vgg16("./weights")  # its own frozen network, not the model being trained
    vgg.eval()
    return F.mse_loss(vgg(output), vgg(target))


def train(model, loader, optimizer):
    for x, y in loader:
        loss = perceptual_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
""",
        """\
from ignite.engine import Engine


def train_step(engine, batch):
    model.train()  # every step starts in training mode
    x, y = batch
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def val_step(engine, batch):
    model.eval()
    with torch.no_grad():
        x, y = batch
        return model(x), y


trainer, evaluator = Engine(train_step), Engine(val_step)
""",
        """\
def train(loader, model, criterion, optimizer):
    model.eval()  # linear probe: the frozen backbone's batch norm must not move
    for x, y in loader:
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def validate(loader, model):
    model.eval()
    with torch.no_grad():
        return sum((model(x).argmax(1) == y).sum().item() for x, y in loader)


for epoch in range(epochs):
    train(train_loader, model, criterion, optimizer)
    validate(val_loader, model)
""",
        """\
for epoch in range(epochs):
    model.train()
    train_one_epoch(model, loader, optimizer, model_ema)
    evaluate(val_loader, model_ema.ema)  # the EMA copy: averaged, never trained by backward
    snapshot = copy.deepcopy(model).eval().requires_grad_(False)  # a copy's mode
    save(snapshot)
""",
        """\
def train_one_epoch(model, loader, optimizer, dist_model=None):
    model.train()
    if dist_model is not None:
        dist_model.eval()  # the distillation teacher, frozen
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        if dist_model is not None:
            with torch.no_grad():
                loss = loss + F.mse_loss(model(x), dist_model(x))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
for epoch in range(epochs):
    train_one_epoch(model, loader, optimizer, dist_model)
""",
        """\
class Adapter:
    def adapt(self, volume, num_steps):
        for step in range(num_steps):
            self.norm.eval()
            self.scores.append(self.test_volume(volume))
            self.norm.train() if self.fit_norm_params else self.norm.eval()
            self.optimizer.zero_grad()
            for x in volume:
                self._accumulate_gradients(x)
            self.optimizer.step()

    def _accumulate_gradients(self, x):
        loss = self.ddpm_loss(self.seg(self.norm(x)))
        loss.backward()
""",
        """\
class Evaluator:
    def __init__(self, model, loader):
        self.model = model
        self.loader = loader

    def get_scores(self):
        self.model.eval()
        with torch.no_grad():
            return sum(self.model(x).argmax(1).eq(y).sum().item() for x, y in self.loader)

class Trainer:
    def train(self, epochs):
        for epoch in range(epochs):
            self.train_epoch()
            evaluator = Evaluator(self.ema_model, self.dev_loader)  # the averaged copy, never trained by backward
            accuracy = evaluator.get_scores()

    def train_epoch(self):
        self.model.train()
        for x, y in self.loader:
            self.optimizer.zero_grad()
            F.cross_entropy(self.model(x), y).backward()
            self.optimizer.step()
""",
        """\
class Agent:
    def __init__(self):
        self.actor = Actor()
        self.actor_target = copy.deepcopy(self.actor).eval()
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=1e-4)

    def act(self, obs):
        self.actor.eval()
        with torch.no_grad():
            action = self.actor(obs).numpy()
        self.actor.train()
        return action

    def update(self, batch):
        loss = -self.critic(batch.obs, self.actor(batch.obs)).mean()
        self.actor_optimizer.zero_grad()
        loss.backward()
        self.actor_optimizer.step()
""",
        """\
class Evaluator:  # the training script switches every network back itself
    def __init__(self, agent):
        self.agent = agent

    def run(self, env):
        self.agent.actor.eval()
        return rollout(env, self.agent.actor)


def train(agent, env, steps):
    for step in range(steps):
        agent.actor.train()
        agent.update(env.sample())
""",
        """\
class GANModel:
    def __init__(self):
        self.G = Generator()  # batch norm inside
        self.g_optimizer = torch.optim.Adam(self.G.parameters(), lr=2e-4)

    def train(self, loader):
        for z in loader:
            loss = -self.D(self.G(z)).mean()
            self.g_optimizer.zero_grad()
            loss.backward()
            self.g_optimizer.step()

    def evaluate(self, g_path):
        self.G.load_state_dict(torch.load(g_path))  # restores a checkpoint: a run of its own
        self.G.eval()
        with torch.no_grad():
            return self.G(torch.randn(64, 100))
""",
    ]

    def visit_ClassDef(self, node, ctx: Context) -> None:
        """An agent or trainer class (not a module: no caller's ``.train()`` reaches its networks)
        that switches one of its networks to ``.eval()`` to act or to evaluate, steps an
        optimizer built over that network's parameters, and never switches it back anywhere in
        the file (DDPG agents with batch norm that call ``self.actor.eval()`` to pick actions)."""
        analysis = self.analysis
        if not analysis.may_contain(".eval(") or not analysis.may_contain(".step("):
            return
        class_scope = analysis.scopes.get(id(node))
        if class_scope is None or analysis.is_module_class(node.name) or analysis.is_test_module \
                or any((dotted_name(base.value) or "").endswith("TestCase") for base in node.bases):
            return
        switches = [(stmt, ctx, _switch_of(stmt)) for stmt, ctx in self._statements_switching()]
        restoring = {dotted_name(strip_pass_through(receiver)) for _, _, (mode, receiver) in switches if mode == "train"}
        if any(key is None or not key.startswith("self.") for key in restoring):
            return  # `model.train()`, `m.train()` over a list: it may well restore these networks
        reported = set()
        for stmt, ctx, (mode, receiver) in switches:
            key = dotted_name(strip_pass_through(receiver))
            method = ctx.scope
            if mode != "eval" or key is None or not key.startswith("self.") or key.count(".") != 1 or key in reported \
                    or method.class_scope is not class_scope or method.name == "__init__" or _names_a_copy(key) \
                    or any(_same_model(key, other) for other in restoring):
                continue
            optimizer = self._class_optimizer_of(class_scope, key)
            if optimizer is None or self._loads_weights_before(method, ctx):
                continue
            reported.add(key)
            self.report(stmt, self.CLASS_MESSAGE.format(stmt=self.code(stmt, 50), model=key, owner=node.name.value,
                                                        optimizer=optimizer),
                        self.CLASS_FIX.format(model=key))

    def _loads_weights_before(self, method, ctx: Context) -> bool:
        """Does the method load saved weights before the switch (``self.load_model(path)``,
        ``self.G.load_state_dict(torch.load(path))``)? Then it is the entry point of a run that
        restores a checkpoint to evaluate it (``evaluate(test_loader, g_path)``), not a pause in
        training."""
        analysis = self.analysis
        for stmt, stmt_ctx in method.statements:
            if stmt_ctx.order >= ctx.order:
                break
            if stmt_ctx.scope is method and any(
                    LOADING_CALL_RE.match(call_name(call) or "") for call in analysis.calls_in(stmt)):
                return True
        return False

    def _statements_switching(self) -> list:
        """Statements anywhere in the file that switch a model's mode (found once per file, for
        all its classes)."""
        memo = self.analysis.module_scope._memo
        if "tl202_switching" not in memo:
            memo["tl202_switching"] = [
                (stmt, ctx) for kind in ("Expr", "Assign") for stmt, ctx in self.analysis.statements_by_type.get(kind, ())
                if _switch_of(stmt) is not None]
        return memo["tl202_switching"]

    def _class_optimizer_of(self, class_scope, key: str) -> str | None:
        """The code of an optimizer the class steps that was built over ``key``'s parameters."""
        analysis = self.analysis
        for _, ctx, call in analysis.class_calls(class_scope):
            optimizer = analysis.stepped_optimizer(call, ctx)
            if optimizer is not None and analysis.optimizes(optimizer, ctx, key):
                return self.code(optimizer, 40)
        return None

    def visit_For(self, node, ctx: Context) -> None:
        self._check_loop(node)

    def visit_While(self, node, ctx: Context) -> None:
        self._check_loop(node)

    def _check_loop(self, node) -> None:
        analysis = self.analysis
        loop = analysis.loops.get(id(node))
        if loop is None or not self._trains(loop):
            return
        evals, restored = [], []
        modes = ModeSwitches(analysis)
        for stmt, ctx in analysis.statements_in_loop(loop):
            if ctx.scope is not loop.scope:
                continue
            for mode, key in modes.of_statement(stmt, ctx):
                (evals if mode == "eval" else restored).append((stmt, ctx, key))
        # a model the training itself switches to eval trains in eval mode on purpose (a frozen
        # backbone under a linear probe, frozen batch norm while fine-tuning)
        deliberate = [key for stmt, ctx, key in evals
                      if key is not None and self._trains_here(stmt, ctx) and self._switches_before_training(stmt, ctx)
                      and not self._builds_own_optimizer(stmt, ctx)]
        reported = set()
        for stmt, ctx, key in evals:
            if id(stmt) in reported or any(_same_model(key, other) for _, _, other in restored):
                continue
            if any(_same_model(key, other) for other in deliberate) or (key is not None and _names_a_copy(key)):
                continue
            if key is not None and self._trains_others(stmt, ctx, key):
                continue  # a distillation teacher handed to the training helper beside the model
            if self._inner_training_loop(loop, ctx) or self._last_pass_only(stmt, ctx):
                continue
            if key is not None and not self._trained_in(key, loop):
                continue  # a target network, an EMA copy: switched to eval, never trained here
            if key is not None and self._built_in_loop(key, loop):
                continue  # a fresh model every iteration starts in training mode
            reported.add(id(stmt))
            model = key or "model"  # `models[i].eval()`: the receiver has no name
            self.report(stmt, self.MESSAGE.format(stmt=self.code(stmt, 50), model=model), self.FIX.format(model=model),
                        autofix=self._autofix(key, loop) if key is not None else None)

    def check_module_scope(self, scope) -> None:
        """Step functions handed to a framework that loops over them (ignite's
        ``Engine(train_step)``, ``create_engines(train_step, val_step)``): the validation step
        switches the model to ``.eval()`` and the training step, which the framework runs
        between validations, never switches it back."""
        analysis = self.analysis
        if not analysis.may_contain(".eval(") or not analysis.may_contain("backward"):
            return
        handed = self._functions_handed_over()
        modes = ModeSwitches(analysis)
        trainers, switches = [], []
        for function in handed:
            loop = analysis.loops.get(id(function.node))
            if loop is None or loop.implicit is None or loop.callers:
                continue  # not per-step, or looped over by this file's own code (checked there)
            own = [(stmt, ctx) for stmt, ctx in function.statements if ctx.scope is function]
            found = [(stmt, mode, key) for stmt, ctx in own for mode, key in modes.of_statement(stmt, ctx)]
            if analysis.backpropagates(function) and analysis.steps_optimizer(function):
                trainers.append((function, {key for _, mode, key in found if mode == "train"}))
            else:
                switches.extend((stmt, key) for stmt, mode, key in found if mode == "eval")
        for stmt, key in switches:
            for trainer, restored in trainers:
                if any(_same_model(key, other) for other in restored):
                    continue
                if key is not None and not self._mentions_model(trainer, key):
                    continue
                model = key or "model"
                self.report(stmt, self.HANDED_MESSAGE.format(stmt=self.code(stmt, 50), model=model, step=trainer.name),
                            self.HANDED_FIX.format(model=model, step=trainer.name))
                break

    def _functions_handed_over(self) -> list:
        """The functions of this module passed as an argument to a call (``Engine(train_step)``)."""
        analysis = self.analysis
        found = []
        for stmt, ctx in analysis.statements_by_type.get("Assign", []) + analysis.statements_by_type.get("Expr", []):
            for call in analysis.calls_in(stmt):
                for arg in call.args:
                    if type(arg.value) is not cst.Name:
                        continue
                    binding = analysis.lookup(arg.value.value, ctx)
                    function = analysis.scopes.get(id(binding.value)) if binding is not None and binding.kind == "def" else None
                    if function is not None and function not in found:
                        found.append(function)
        return found

    def _mentions_model(self, function, key: str) -> bool:
        root = key.partition(".")[0]
        return any(root == used.partition(".")[0] for stmt, ctx in function.statements if ctx.scope is function
                   for used in mentioned_keys(stmt))

    def _autofix(self, key: str, loop) -> Fix | None:
        """``model.train()`` inserted right before the statement of the loop's body that trains
        first (the inner loop over batches, ``train_one_epoch(...)``), so every iteration trains
        in training mode wherever its validation sits. Unsafe: a model put in eval mode on
        purpose for training (frozen batch norm) loses that; no fix when the function switches
        the model to eval mode before the loop, or when the training is not in the loop's own
        body (a ``while`` test, a helper that is the loop)."""
        analysis = self.analysis
        if loop.implicit is not None:
            return None
        for stmt, ctx in loop.scope.statements:
            # the statement's own switch only: asking `modes` here would fill its memo out of the
            # order the detection asks in
            own = _switch_of(stmt) if ctx.scope is loop.scope and ctx.order < loop.start else None
            if own is not None and own[0] == "eval" and _same_model(key, dotted_name(strip_pass_through(own[1]))):
                return None  # eval mode chosen before the loop: training in it may be deliberate
        first = None
        for stmt, ctx in analysis.statements_in_loop(loop):
            if ctx.scope is loop.scope and self._trains_here(stmt, ctx):
                first = ctx.order
                break
        if first is None:
            return None
        orders = {id(stmt): ctx.order for stmt, ctx in loop.scope.statements}
        # the body's statements as the walk records them: a line of simple statements by its first
        anchors = [stmt.body[0] if type(stmt) is cst.SimpleStatementLine else stmt
                   for stmt in getattr(loop.node.body, "body", ())]
        containing = [stmt for stmt in anchors if id(stmt) in orders and orders[id(stmt)] <= first]
        if not containing:
            return None
        return Fix.unsafe(f"Insert `{key}.train()` before the training in the loop",
                          InsertBefore(containing[-1], f"{key}.train()"))

    def _trains_others(self, stmt, ctx: Context, key: str) -> bool:
        """Does the statement hand a training helper optimizers that are all built over other
        models' parameters than ``key``'s (``train_one_epoch(model, ..., optimizer, ...,
        dist_model)`` with ``optimizer = AdamW(model.parameters())``)?"""
        analysis = self.analysis
        if not self._trains_here(stmt, ctx):
            return False
        optimizers = [arg.value for call in analysis.calls_in(stmt) for arg in call.args
                      if analysis.is_optimizer(arg.value, ctx)]
        if not optimizers:
            return False
        for optimizer in optimizers:
            if not analysis.optimizer_built_here(optimizer, ctx):
                return False  # built elsewhere: what it optimizes is not known
            if analysis.optimizes(optimizer, ctx, key):
                return False
        return True

    def _switches_before_training(self, stmt, ctx: Context) -> bool:
        """Does a helper the statement calls switch a model to eval unconditionally before it
        trains (``def train(...): model.eval()`` first, a linear probe)? A switch after the step,
        under ``if step % every == 0:`` to draw samples, is validation that forgets to switch back."""
        analysis = self.analysis
        for call in analysis.calls_in(stmt):
            callee = analysis.called_function(call, ctx)
            if callee is None:
                continue
            for inner, inner_ctx in callee.statements:
                if inner_ctx.scope is not callee or type(inner) in (cst.FunctionDef, cst.ClassDef):
                    continue
                if self._trains_here(inner, inner_ctx) or analysis.statement_backpropagates(inner, inner_ctx):
                    break
                switch = _switch_of(inner)
                if switch is not None and switch[0] == "eval" and inner_ctx.guard is None \
                        and all(loop.implicit is not None for loop in inner_ctx.loops):
                    return True
        return False

    def _builds_own_optimizer(self, stmt, ctx: Context) -> bool:
        """Does a helper the statement calls build an optimizer of its own (``Adam([self.mask,
        self.pattern])``)? It trains those tensors, not the model it switches to eval."""
        analysis = self.analysis
        for call in analysis.calls_in(stmt):
            callee = analysis.called_function(call, ctx)
            if callee is not None and any(
                    analysis.optimizer_construction(binding) is not None
                    for bindings in callee.bindings.values() for binding in bindings):
                return True
        return False

    def _trains_here(self, stmt, ctx: Context) -> bool:
        """Does the statement step an optimizer, or call a helper that does?"""
        analysis = self.analysis
        return any(
            analysis.stepped_optimizer(call, ctx) is not None or analysis.steps_through_wrapper(call, ctx)
            or (callee is not None and callee is not ctx.scope and analysis.steps_optimizer(callee))
            for call in analysis.calls_in(stmt)
            for callee in (analysis.called_function(call, ctx),)
        )

    # ------------------------------------------------------------------ the loop

    def _trains(self, loop) -> bool:
        """Does the loop step an optimizer (itself or through a helper)? A loop that only
        backpropagates inspects gradients (saliency, gradient histograms): no training."""
        if "tl202_trains" not in loop._memo:
            analysis = self.analysis
            statements = list(analysis.statements_in_loop(loop))
            loop._memo["tl202_trains"] = any(self._trains_here(stmt, ctx) for stmt, ctx in statements) or (
                # `loss.backward(); train_op()`: an update step a library built
                analysis.loop_backpropagates(loop)
                and any(_named_update(call) for stmt, _ in statements for call in analysis.calls_in(stmt))
            )
        return loop._memo["tl202_trains"]

    def _inner_training_loop(self, loop, ctx: Context) -> bool:
        """Is there a loop inside ``loop`` around the statement that trains too? Then the
        statement is judged there."""
        return any(
            inner is not loop and inner.start > loop.start and self._trains(inner)
            for inner in ctx.visible_loops
        )

    def _last_pass_only(self, stmt, ctx: Context) -> bool:
        """Does the switch run only on the last pass: under ``if epoch == epochs - 1:`` or
        followed by ``break`` / ``return`` in its block?"""
        analysis = self.analysis
        if any(
            positive and "%" not in text and LAST_PASS_RE.search(text)  # `(epoch + 1) % 5 == 0` repeats
            for text, positive in analysis.branch_conditions(stmt, ctx.scope)
        ):
            return True
        found = analysis.straight_line(stmt, ctx)
        if found is None:
            return False
        sequence, index = found
        return any(type(item) in (cst.Break, cst.Return) for item in sequence[index + 1:])

    def _built_in_loop(self, key: str, loop) -> bool:
        return any(
            loop.contains(binding.ctx.order) and binding.kind == "assign"
            for binding in loop.scope.bindings.get(key.partition(".")[0] if not key.startswith("self.") else key, ())
        )

    def _trained_in(self, key: str, loop) -> bool:
        """Does the loop run the model with grad enabled, or pass it to (or call through
        ``self``) a helper that trains?"""
        analysis = self.analysis
        for stmt, ctx in analysis.statements_in_loop(loop):
            for call in analysis.calls_in(stmt):
                func = call.func
                if type(func) is cst.Attribute and func.attr.value == "forward":
                    func = func.value
                called = dotted_name(func)
                if called is not None and ctx.grad is GradMode.ENABLED and _same_model(called, key) \
                        and analysis.is_module(func, ctx):
                    return True
                optimizer = analysis.stepped_optimizer(call, ctx)
                if optimizer is not None and analysis.optimizes(optimizer, ctx, key):
                    return True
                if (optimizer is not None or call_name(call) in BACKWARD_FUNCTIONS or analysis.steps_through_wrapper(call, ctx)) \
                        and any(_same_model(dotted_name(strip_pass_through(arg.value)), key) for arg in call.args):
                    return True  # `strategy.backward(loss, self.model, self.optimizer)`
                callee = analysis.called_function(call, ctx)
                if callee is None or not (analysis.backpropagates(callee) or analysis.steps_optimizer(callee)):
                    continue
                if (key == "self" or key.startswith("self.") and key.count(".") == 1) and type(func) is cst.Attribute \
                        and dotted_name(func.value) == "self":
                    # a module training itself (`self.fit_on_task(...)`), or its model
                    return True  # (`self.sd.text_encoder`, a part of a pipeline, may well be frozen)
                if any(_same_model(dotted_name(strip_pass_through(arg.value)), key) for arg in call.args) \
                        and not self._optimizes_other_models(call, callee, key):
                    return True
        return False

    def _optimizes_other_models(self, call, callee, key: str) -> bool:
        """Does the helper handed the model step only optimizers it builds over other models'
        parameters (``Adam(student.parameters())`` while ``teacher`` is handed in frozen)?"""
        owner = callee.owner
        parameters = [name for name, value in passed_arguments(call, callee).items()
                      if _same_model(dotted_name(strip_pass_through(value)), key)]
        stepped = [(optimizer, inner_ctx) for inner, inner_ctx, _ in owner.scope_calls(callee)
                   if (optimizer := owner.stepped_optimizer(inner, inner_ctx)) is not None]
        return bool(parameters) and bool(stepped) and all(
            owner.optimizer_built_here(optimizer, inner_ctx)
            and not any(owner.optimizes(optimizer, inner_ctx, parameter) for parameter in parameters)
            for optimizer, inner_ctx in stepped
        )


class ModeSwitches:
    """Which models running a statement switches to ``.eval()`` / ``.train()``, through the
    module-defined helpers it calls (shared with TL204)."""

    def __init__(self, analysis) -> None:
        self.analysis = analysis

    def of_statement(self, stmt, ctx: Context, depth: int = 0) -> list[tuple[str, str | None]]:
        """The mode switches running the statement makes: ("eval" / "train", model key in the
        statement's own terms, None when unknown), its own and those of the module-defined
        functions it calls (whose parameters are mapped to the call's arguments)."""
        memo = self.analysis.module_scope._memo.setdefault("mode_switches", {})
        if id(stmt) in memo:
            return memo[id(stmt)]
        memo[id(stmt)] = []  # recursion resolves to "none"
        found = []
        own = _switch_of(stmt)
        if own is not None and _copied(own[1]):
            own = None  # `copy.deepcopy(net).eval()`: a copy's mode, not the model's
        if own is not None:
            mode, receiver = own
            key = dotted_name(strip_pass_through(receiver))
            if key == "self" and not self.analysis.is_module_by_evidence(receiver, ctx):
                pass  # a trainer's own `eval()` method: followed below like any other call
            elif not self._not_a_model(key, receiver, ctx):
                found.append((mode, key))
        if depth >= MAX_CALL_DEPTH or type(stmt) in (cst.FunctionDef, cst.ClassDef):
            memo[id(stmt)] = found
            return found
        analysis = self.analysis
        for call in analysis.calls_in(stmt):
            callee = analysis.called_function(call, ctx)
            if callee is None or callee is ctx.scope:
                continue
            for inner, inner_ctx in callee.statements:
                if inner_ctx.scope is not callee:
                    continue
                switches = self.of_statement(inner, inner_ctx, depth + 1)
                if not switches or not self._may_run(call, callee, inner):
                    continue
                found.extend((mode, self._map_key(key, call, callee, ctx)) for mode, key in switches
                             if not self._built_by_callee(key, callee))
        memo[id(stmt)] = found
        return found

    def _may_run(self, call, callee, stmt) -> bool:
        calls = self.analysis.calls_in(stmt)
        return not calls or self.analysis.may_run_for(call, callee, calls[0])

    def _map_key(self, key, call, callee, ctx: Context) -> str | None:
        """A key of the callee's (``net``, ``self.model``) in the caller's terms."""
        if key is None:
            return None
        root, dot, rest = key.partition(".")
        arguments = passed_arguments(call, callee)
        if root in arguments:
            mapped = dotted_name(strip_pass_through(arguments[root]))
            return mapped + dot + rest if mapped is not None else None
        if root == "self" and type(call.func) is cst.Attribute:
            owner = dotted_name(call.func.value)
            if owner is not None and type(call.func.value) is cst.Name and rest:
                # `evaluator = Evaluator(self.model, ...)`, then `evaluator.get_scores()`
                # switching its `self.model`: the caller's `self.model`
                attribute, inner_dot, further = rest.partition(".")
                stored = self.analysis.stored_by_constructor(owner, attribute, ctx)
                mapped = None if stored is None else dotted_name(strip_pass_through(stored))
                if mapped is not None:
                    return mapped + inner_dot + further
            return owner + dot + rest if owner is not None else None
        binding = self.analysis.lookup(root, ctx)
        if binding is not None and binding.ctx.scope is self.analysis.module_scope:
            return key  # a global model
        return None

    def _built_by_callee(self, key, callee) -> bool:
        """Is ``key`` a local of the callee bound only to something it builds or loads from
        nothing it was given (``vgg = load_vgg16(path)``, ``net = Vgg16()``)? Switching that
        to ``.eval()`` switches the callee's own network, not any model of the caller."""
        if key is None:
            return False
        root = key.partition(".")[0]
        bindings = callee.bindings.get(root, ())
        if not bindings or root == "self":
            return False
        given = {name for name, found in callee.bindings.items() if any(b.kind == "param" for b in found)} | {"self"}
        for binding in bindings:
            value = binding.value if binding.kind == "assign" and not binding.element else None
            if type(value) is not cst.Call or given & {used.partition(".")[0] for used in mentioned_keys(value)}:
                return False
        return True

    def _not_a_model(self, key, receiver, ctx: Context) -> bool:
        if key is not None and DATA_WORDS.intersection(name_words(last_part(key))):
            return True  # Avalanche's dataset.eval()
        return self.analysis.is_optimizer(receiver, ctx)  # schedule-free optimizers


def _switch_of(stmt):
    """("eval" / "train", receiver) for ``model.eval()`` / ``model.train()``; ``.train(flag)``
    with a flag that is not a literal counts as "train": it may restore the mode."""
    found = _mode_switch(stmt)
    if found is not None:
        return found
    value = getattr(stmt, "value", None) if type(stmt) in (cst.Expr, cst.Assign, cst.AnnAssign) else None
    if type(value) is cst.IfExp:
        # `self.norm.train() if self.fit_norm else self.norm.eval()`: may switch back to training
        for arm in (value.body, value.orelse):
            found = _switch_of(cst.Expr(value=arm))
            if found is not None and found[0] == "train":
                return found
        return None
    while type(value) is cst.Call and type(value.func) is cst.Attribute:
        if value.func.attr.value == "train" and value.args:
            return "train", value.func.value
        value = value.func.value
    return None


def _copied(receiver) -> bool:
    """``copy.deepcopy(net)``, also behind pass-through calls (``deepcopy(net).to(device)``)."""
    while type(receiver) is cst.Call:
        if last_part(dotted_name(receiver.func) or "") == "deepcopy":
            return True
        if type(receiver.func) is not cst.Attribute:
            return False
        receiver = receiver.func.value
    return False


# Copies of a model kept beside it and never trained by backward: an EMA / SWA average, a
# distillation teacher, an RL target network.
COPY_WORDS = frozenset({"ema", "swa", "averaged", "teacher", "target"})


def _names_a_copy(key: str) -> bool:
    return any(COPY_WORDS & set(name_words(part)) for part in key.split("."))


def _same_model(first: str | None, second: str | None) -> bool:
    """Unknown matches anything; ``model`` and ``model.module`` are the same model."""
    if first is None or second is None:
        return True
    return first == second or first.startswith(second + ".") or second.startswith(first + ".")


UPDATE_WORDS = frozenset({"train", "optim", "optimize", "optimizer", "update"})


def _named_update(call) -> bool:
    """``train_op()``, ``optimize_step()``, ``self.update_params()``: a call named for updating the
    weights (not a scheduler's, an environment's or a progress bar's)."""
    func = call.func
    name = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else ""
    words = set(name_words(name))
    if words & {"lr", "scheduler", "sched", "bar", "progress", "stats", "metrics", "ema"}:
        return False
    if not (words & UPDATE_WORDS - {"update"} or "update" in words and words & {"params", "parameters", "weights", "model", "step"}):
        return False  # (a bare `update()` is a dict's or a meter's as often as not)
    receiver = dotted_name(func.value) if type(func) is cst.Attribute else None
    return receiver is None or not set(name_words(last_part(receiver))) & {"scheduler", "sched", "env", "pbar", "bar", "progress", "meter", "ema", "writer", "logger"}
