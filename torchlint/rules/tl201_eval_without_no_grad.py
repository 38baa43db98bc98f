from __future__ import annotations

import math
import re

from torchlint.analysis import (
    ATTACHMENT_TOKENS, BACKWARD_FUNCTIONS, Context, GradMode, call_name, dotted_name,
    empty_container, iter_expression_nodes, key_within, last_part, mentioned_keys, name_words, periodic_test,
    strip_pass_through,
)
from torchlint.analysis.arguments import constant_arguments, passed_arguments
from torchlint.analysis.summaries import MAX_CALL_DEPTH
from torchlint.analysis.uses import CONVERSIONS_KEEPING_DATA, GRAPH_KEEPING_CONVERSIONS, conversion_source
from torchlint.analysis.syntax import collect_nodes, parameter_node
from torchlint.analysis.vocabulary import (
    COMPUTING_METHOD_NAMES, COMPUTING_METHOD_WORDS, CONTAINER_WRITES, DETACHING_METHODS,
    NN_MODULE_API, NOT_FORWARD_METHOD_RE, PARAMETERLESS_LAYERS, is_conventional_module_name,
)
from torchlint.lazy import cst
from torchlint.fix import Fix, InsertBefore, Wrap, torch_reference
from torchlint.rule import Rule

DEFAULT_EVAL_WORDS = (
    "evaluate", "evaluation", "eval", "validate", "validation", "valid", "val", "test", "testing", "predict", "prediction",
    "predictions", "infer", "inference",
)
# Calling a loss on outputs builds no graph of its own worth reporting: the model call does.
LOSS_NAME_RE = re.compile(r"loss|criterion|metric", re.I)
RETRY_RE = re.compile(r"retr(y|ies)|attempt|tries", re.I)
# Code that sets requires_grad or differentiates by hand decides its grad mode on purpose.
# (`self.backward(xt, t)`: a diffusion sampler's own reverse step, not autograd's)
DELIBERATE_GRAD_RE = re.compile(r"requires_grad|autograd|(?<!\bself)\.backward\(|jacobian|hessian|vjp|jvp")
# A module that asks for gradients of inputs or outputs (not the old `autograd.Variable`).
INPUT_GRADIENT_RE = re.compile(
    r"requires_grad_\((?!\s*False)|requires_grad\s*=\s*True|stop_gradient\s*=\s*False|autograd\.(?!Variable\b)|jacobian|hessian|vjp|jvp")
# `self.x.requires_grad_()`, `self.x = torch.as_tensor(x).requires_grad_()`: an attribute made
# to take gradients, which the class's other methods differentiate with respect to.
SELF_REQUIRES_GRAD_RE = re.compile(r"self\.\w+(?:\.\w+)*\.requires_grad_\((?!\s*False)|self\.\w+\s*=[^\n]*requires_grad")
# Names of functions whose one forward pass after `.eval()` is a dry run, not inference.
DRY_RUN_WORDS = frozenset({
    "export", "exporter", "onnx", "trace", "tracing", "script", "jit", "compile", "summary", "profile", "benchmark", "flops",
    "warmup", "warm", "dummy", "check", "verify", "shape", "shapes", "convert", "fuse", "calibrate", "quantize",
})
BUILDER_WORDS = frozenset({"build", "builder", "make", "create", "construct", "setup", "init", "initialize", "initialise"})
GRADIENT_WORDS = frozenset({"grad", "grads", "gradient", "gradients", "saliency", "jacobian", "hessian"})
# Names of a module's methods that produce results step by step for their caller.
GENERATION_WORDS = frozenset({"generate", "generation", "sample", "sampling", "translate", "greedy", "beam"})
# (at class level only turning requires_grad on counts: `if p.requires_grad` filtering the
# parameters, `y.requires_grad = False` on labels say nothing about this method's grad mode)
CLASS_DELIBERATE_GRAD_RE = re.compile(
    r"(?:(?P<receiver>[\w.\]\[]+)\.)?requires_grad(?:_\((?!\s*False)|\s*=\s*True)|autograd|jacobian|hessian|vjp|jvp")
# ... and unfreezing parameters (`for p in self.parameters(): p.requires_grad = True`) is not it
PARAMETER_WORDS = frozenset({"p", "param", "params", "parameter", "parameters", "weight", "weights", "bias", "w", "b"})
# `self.log_alpha = torch.zeros(1, requires_grad=True)` names what it turns grad on for
ASSIGNED_NAME_RE = re.compile(r"\s*([\w.]+)\s*(?::[^=]+)?=(?!=)")
# ... and an optimizer constructed over it (`optim.Adam([self.log_alpha], lr=...)`) makes it a parameter
OPTIMIZED_RE_TEMPLATE = r"(?:optim\.\w+|Adam\w*|SGD|RMSprop)\(\s*\[?[^)]{0,200}?(?<![\w.])%s\b"
DELIBERATE_GRAD_TOKENS = ("requires_grad", "autograd", ".backward(", "jacobian", "hessian", "vjp", "jvp")
HELPER_TRAINING_TOKENS = DELIBERATE_GRAD_TOKENS + (".train(",)
# A test of the mode a shared train/eval loop runs in: `to_do == "train"`, `is_training`,
# `phase == 'train'` (not a module's own `.training` flag).
_MODE_TEST_RE = re.compile(
    r"^(?P<name>(?:\w+\.)*(?:is_|do_)?train(?:ing)?(?:_mode|_model)?)$|"
    r"^(?P<name2>[\w.]+)\s*==\s*['\"]train(?:ing)?['\"]$|^['\"]train(?:ing)?['\"]\s*==\s*(?P<name3>[\w.]+)$")
# Tensors made up on the spot: a smoke test's or a benchmark's inputs.
SYNTHETIC_FACTORIES = frozenset({
    "randn", "rand", "randint", "zeros", "ones", "empty", "full", "arange", "randn_like", "rand_like",
    "zeros_like", "ones_like", "linspace",
})
# Calls that load a model from saved weights: what an inference wrapper runs.
LOADING_FACTORIES = frozenset({"torch.load", "torch.jit.load", "torch.hub.load", "torch.export.load"})
LOADING_NAME_RE = re.compile(r"^(?:load|from_pretrained|load_model|load_checkpoint|load_pretrained)\w*$")
# Literal names of a run's mode, handed to a shared train/eval function.
MODE_NAMES = frozenset({"train", "training", "val", "valid", "validation", "eval", "evaluation", "test", "testing",
                        "dev", "predict", "inference", "forward"})
MODE_KEYWORD_RE = re.compile(r"train|eval|valid|test|mode|phase|update|backward|grad|infer|predict", re.I)
# Text that any training code contains; a file without any of it only runs its models
# (`strip_optimizer(weights)` in a detection script is no optimizer). Bayesian-optimisation and
# probabilistic-programming libraries differentiate what their models compute on their own.
TRAINING_RE = re.compile(
    r"backward|\boptim\.|\boptimi[sz]ers?\b|(?<!env)(?<!envs)\.step\(|\bfit\w*\(|train\(|"
    r"autograd\.(?:grad|backward|functional)|requires_grad|[Tt]rainer\b|\bgrad\(|\b(?:botorch|gpytorch|pyro)\b")
# TRAINING_RE's alternatives, each behind a substring that any match of it contains: one search
# of the whole alternation tries every alternative at every position of the file (a thirtieth of
# the lint time of corpus A); substring tests skip the text at C speed. Same answer
# (tests/test_perf_helpers.py checks them against each other).
_TRAINING_PARTS = (
    ("backward", None), ("train(", None), ("requires_grad", None),
    ("optim", re.compile(r"\boptim\.|\boptimi[sz]ers?\b")),
    (".step(", re.compile(r"(?<!env)(?<!envs)\.step\(")),
    ("fit", re.compile(r"\bfit\w*\(")),
    ("autograd.", re.compile(r"autograd\.(?:grad|backward|functional)")),
    ("rainer", re.compile(r"[Tt]rainer\b")),
    ("grad(", re.compile(r"\bgrad\(")),
    ("botorch", re.compile(r"\bbotorch\b")), ("gpytorch", re.compile(r"\bgpytorch\b")),
    ("pyro", re.compile(r"\bpyro\b")),
)


def mentions_training(text: str) -> bool:
    """``TRAINING_RE.search(text) is not None``, faster."""
    return any(word in text and (pattern is None or pattern.search(text) is not None)
               for word, pattern in _TRAINING_PARTS)
COMPOUND_STATEMENTS = frozenset({"For", "While", "If", "With", "Try", "TryStar", "Match", "FunctionDef", "ClassDef"})
# Calls that may keep what they are given: loggers, buffers, caches, queues, callbacks.
KEEPING_CALL_RE = re.compile(
    r"log|store|record|save|cache|push|put|register|track|buffer|memor|emit|send|queue|callback|hook|"
    r"backward|step|optimi|update|add|append|extend|insert|collect|accumulate|set", re.I)
COMPREHENSIONS = ("ListComp", "SetComp", "GeneratorExp", "DictComp")
# Names of models kept as frozen copies of a trained one.
FROZEN_COPY_WORDS = frozenset({"target", "teacher"})
# Things loaded from saved files, with methods named like a model's, that are not networks.
NOT_A_NETWORK_WORDS = frozenset({
    "tokenizer", "tokenizers", "processor", "vocab", "vocabulary", "extractor", "scheduler", "config",
    "encoder_json", "bpe", "sp", "spm", "lexicon", "dictionary", "dict",
})
DATA_WORDS = frozenset({"data", "dataset", "datasets", "buffer", "stream", "loader", "exps", "experience"})
# Ultralytics model wrappers: calling one runs `predict()`, which disables grad itself.
PREDICTING_WRAPPERS = frozenset({"YOLO", "YOLOWorld", "YOLOE", "RTDETR", "SAM", "FastSAM", "NAS", "Model"})


MODULE_LEVEL_FIX = "run the evaluation loop under `with torch.no_grad():` (or `torch.inference_mode()`)"


class EvalWithoutNoGrad(Rule):
    """
    ## What it does
    Finds evaluation loops that run forward passes with autograd enabled. Evaluation code is
    what follows `model.eval()` in a function (until that model's `.train()`), which covers
    the epoch function with a training phase and then a validation phase, and the body of a
    function whose name says evaluation (`evaluate`, `evaluation`, `eval`, `validate`,
    `validation`, `valid`, `val`, `test`, `testing`, `predict`, `infer`, `inference` as a word of a
    snake_case or camelCase name), at a script's or notebook's top level too. Reported once
    per function (at a script's top level, once per top-level block: a test every N steps
    inside the training loop and the final test loop after it are two reports), at its first
    forward pass that repeats with grad enabled: inside a loop or
    a comprehension, or anywhere in a function that runs once per batch (a framework's
    per-step hook such as skorch's `validation_step`, or a helper a loop of the module calls
    with grad enabled). A forward pass may sit behind a call: `self.infer(x)` runs one when
    the helper it calls does, and `run_epoch(model, val_loader)` after `model.eval()` is
    reported at the call when `run_epoch` loops over forward passes without training for
    those arguments (a `backward()` under `if train:` does not run for `train=False`).
    A method of a project class that the code can read counts by what it runs, whatever its
    name (`model.validation_step(batch)` of a plain `nn.Module`, `model.cf_score(u, i)`); one
    it cannot read counts when its name says it computes (`predict`, `decode`, `sample`,
    `score`, ...) and its receiver is a model by evidence. A script or a training function
    calling, with grad enabled, an evaluation helper of another file (`eval_model(model,
    dev_data)`) that loops over forward passes of the model it is handed, which only the call
    can tell is a network (`model.predict(batch)` on an instance of a project class that runs
    one), is reported at the call; a helper that is reported at its own forward pass in its
    own file is not reported again at its calls. A forward pass on `Variable(x,
    volatile=True)` is reported wherever it runs: `volatile` has done nothing since PyTorch
    0.4 (a branch for older versions, under a test of `torch.__version__`, is left alone).
    A loop over validation or test data (`for x, y in valid_loader:`) inside a training
    function whose forward passes feed only locals read as data (`loss.item()`) is
    evaluation. A template method (no body, or `return None`) counts by what the overrides of
    this module's subclasses run; a parameter every call of the module fills with a model by
    evidence is a model (`infer(path, text, model)` after `model = load_model(ckpt)`), and so
    is a parameter named for a network copy (`target_actor`, `teacher_model`) that is called.
    Where a function has both a one-off forward and one in its own loop, the loop's is reported.
    A function started in another thread (`threading.Thread(target=run)`, `executor.submit(run)`)
    from code under `no_grad()` runs with grad enabled, since grad mode is thread-local: its
    first forward pass in a loop (followed through the helpers of this file it calls) is
    reported. A helper handed a submodule of a model (`avalanche_forward(self.model.backbone,
    x, t)`) runs a forward pass; a parameter annotated with a project class (`model:
    CrossEncoder`) runs that class's methods. In a file that imports GPyTorch or BoTorch,
    `model.eval()` selects a Gaussian process's posterior, which acquisition functions
    differentiate, and opens no evaluation region.

    Inference code is recognised by what it does as well as by its name: a function (also a
    wrapper's `__call__`, `act(obs)`, `sample_images()`) that runs a model with grad enabled,
    never backpropagates, turns the results into data (`.detach()`, `.numpy()`, `.tolist()`,
    `.item()`, `.data`, `int(...)` / `float(...)`) or is named for inference or generation
    (`generate`, `sample`, `translate`, `greedy_decode`, as the first word), and lets no
    attached value out (not returned, yielded, stored, or handed to a call that may keep it):
    the graph autograd records is thrown away unused. A module's own `predict` / `generate` /
    `sample` method that decodes step by step with its layers counts too, unless the module's
    `forward` runs it. So does an evaluation every N steps inside a training loop: an
    `if step % 50 == 0:` block that runs the model, never backpropagates and only reads its
    results (`test_output = cnn(test_x)`, accuracy from `.data`).

    A script or notebook that trains nothing (no `backward`, optimizer, `.step(` other than
    an environment's, `fit`, `train(`, `autograd.grad` or `requires_grad` anywhere in the file;
    not a test, and not code of Bayesian-optimisation or probabilistic-programming libraries,
    which differentiate on their own) and does something when run (a top-level loop or an
    `if __name__ == "__main__":` block, or plain top-level statements that parse arguments or
    run a model; a `test_image.py` is such a script unless it uses a test framework) is
    inference code at its top level and in the
    functions the top level calls (`main()`, `deploy()`): a forward pass there of a model
    known by evidence (built, loaded or switched to `.eval()`, not merely named so), in a loop
    or bound to a name once, is reported, since nothing the script computes is returned to
    anyone who could backpropagate. Forward passes on made-up inputs (`torch.randn(...)`, names
    bound to such tensors: a model file's smoke test or a timing loop) are left alone.
    In such a file, a function that runs a model loaded from saved weights (`torch.jit.load`,
    `torch.load`, `from_pretrained`, `load_model`) and lets no attached value out is inference
    code whatever its name (a command-line wrapper's `_decode`); functions its inference
    functions call, and the `__call__` of an instance they call (`detector(img)`), are reported
    at their own forward pass.
    A forward pass whose result is detached in the same expression
    (`feats[k] = encoder(x).cpu().detach()`), in a loop that trains nothing, is evaluation
    even when the code after it trains another model; so is a forward pass in a loop that
    trains nothing (an environment rollout) whose outputs the iteration only reads as data
    (`action.data.numpy()`, `logp.item()`), while outputs kept with their graph (REINFORCE's
    log-probabilities) are not. In a training step, a forward pass whose results are only
    read as data (a target network's `tgt_net(s).detach()`, values read through `.data`) is
    reported too, and so is an agent's `step()` that trains only through a call
    (`self.train()` once its buffer is full) while its own rollout forward's outputs are only
    read as data. A forward pass whose output a `backward()` of the same pass consumes
    (planning by backpropagating through a model in eval mode) is not evaluation.

    Shared train/eval loops: a function of the file that trains for some arguments but is
    called with literal ones that switch its training off (`self._epoch(loader,
    train_model=False)`, where `backward()` sits under `if train_model:`) is reported once, at
    the forward pass of its loop; a loop whose every `backward()` runs only under a test of a
    mode the code itself decides (`if to_do == "train":`, `if phase == "train":`) while its
    forward pass runs on every pass is reported at that forward pass, unless it runs under
    `torch.set_grad_enabled(...)`.

    Frozen models inside training: a model switched to `.eval()` that the file never switches
    back to `.train()`, builds no optimizer over and leaves requiring grad (a distillation
    teacher, a perceptual network's pass over the real images), run with grad enabled on
    data inside a loop that trains another model, is reported at that forward pass when every
    optimizer the function steps is built in the file. A pass over an attached input
    (`vgg(generator(z))`, a perceptual loss) is not: backward must go through it. The same
    holds for a frozen copy named so (an RL `target` network, a `teacher`) or synced so (a
    DQN's `self.q_next.load_state_dict(self.q_eval.state_dict())`, its own optimizer never
    stepped and its parameters never read), trained by no optimizer built here, run on data in
    a function that backpropagates (an agent's `learn()`), also on attached inputs when what it
    computes is only ever read detached (TD3's `expected_q.detach()`).

    ## Why is this bad?
    `model.eval()` only switches dropout and batch norm to inference behaviour; it does not
    stop autograd. Every forward pass still saves the activations its backward pass would
    need, and keeps them until the outputs die, although no backward pass ever comes.
    Measured on a 3-layer MLP evaluation loop (CPU, fp32): peak memory 2.0× that of the same
    loop under `torch.no_grad()`, and outputs stored for later (predictions, logits) keep
    every batch's graph alive.

    ## Known problems
    Not reported: forward passes under `torch.no_grad()` / `torch.inference_mode()` /
    `torch.set_grad_enabled(False)` (block, decorator with or without parentheses, or the
    statement form) or a project wrapper whose name ends in `no_grad` / `inference_mode`
    (`@smart_inference_mode()`); Lightning `validation_step` / `test_step` / `predict_step`;
    functions whose every call in the same module is grad-disabled; regions that call
    `backward()`, `torch.autograd.grad` or an optimizer step (fine-tuning with frozen batch
    norm after `model.eval()`, saliency maps); models used only through methods such as
    `.generate()` / `.encode()` of classes the project does not define (Hugging Face's and
    sentence-transformers' turn grad off themselves), and Ultralytics `YOLO(...)` wrappers, whose call predicts
    under `inference_mode`; a single forward pass outside any loop of a function no loop
    calls (a dry run, or per-sample prediction whose caller is in another file), or inside a
    retry loop (`while retries:`), unless the function itself switched that very model to
    `.eval()` and uses the result (`model.eval(); output = model(img)`: an inference entry
    point; not in tests, functions or classes named for exporting, tracing or profiling, or
    modules that ask for input gradients; in a class, only the methods joined to the one that
    asks, by calls on `self` or through the attribute it makes require grad: a WGAN-GP
    trainer's gradient penalty leaves its sampler reported). A function named like evaluation stops being evaluation
    code at its first `.train()` (`.train(flag)` with a variable switches nothing that can be
    known; `self.training = False` set by hand counts as a switch). A training call on the other branch of the `if` that switched to `.eval()`
    (`if train: model.train() else: model.eval()` … `if train: loss.backward()`) does not make
    the region training. Methods of `nn.Module` subclasses are not evaluation code by name
    (`predict_masks` is part of the model's forward; its caller owns the grad mode), and
    `.eval()` on a dataset or buffer (Avalanche's transform groups) or an optimizer
    (schedule-free optimizers) starts no region. A method that overrides a hook of a base
    class defined elsewhere and is never called in its own file (`Predictor.inference`) runs
    under a grad mode its framework sets: there only the method's own loops count, not
    forward passes behind helpers. Helpers and model classes of other project files are
    followed through the project's imports. Inference-shaped code is left alone when the
    program shows no graph can exist (`out.numpy()` without a detach would raise), when its
    name says it computes gradients (`grad`, `saliency`, `jacobian`) or builds something
    (`build`, `make`, `create`, `init`: a one-off forward pass that learns shapes), or when it
    runs in a constructor on made-up inputs (`x = block(x)` from `dummy_eval(...)`: shape
    probes). Parameterless `torch.nn` layers (`nn.Softmax2d()`, activations, pooling) are no
    model, and `sample_noise()` / `reset_noise()` (new draws for noisy layers) run nothing.
    Inference code that a training loop also calls (an RL rollout collecting data) is reported
    at its own first forward pass, and its callers are not; a function only evaluation loops
    call is reported at those calls. A class that only unfreezes parameters (`p.requires_grad
    = True`) is no evidence of input gradients. A function named for evaluation whose returned
    values a caller backpropagates (PPO's and SAC's `evaluate(obs, acts)`) is part of the loss.

    Unit tests: in test files (under a `tests/` or `test/` directory, or named `test_*.py` /
    `*_test.py` / `conftest.py`), a name that says "test" is a pytest test, not an evaluation
    loop, so the name-based trigger ignores the word `test` there (on the corpus every such
    finding was a test checking outputs or masks). A `model.eval()` followed by a forward loop
    with grad enabled is still reported inside tests.

    ## Options
    `eval-function-words` (in `[tool.torchlint]`): the words that make a function name
    evaluation code, replacing the default list above, e.g.
    `eval-function-words = ["evaluate", "validate", "score"]`.
    """

    CODE = "TL201"
    NAME = "eval-without-no-grad"
    COPY_MESSAGE = (
        "`{call}` runs `{model}`, a frozen copy trained by no optimizer here, with autograd enabled in a "
        "training step: its graph is recorded (and backward may run through it) for nothing"
    )
    FROZEN_MESSAGE = (
        "`{call}` runs a frozen model (switched to eval, trained by no optimizer) with autograd enabled inside a "
        "training loop: its graph is recorded every step for nothing"
    )
    MESSAGE = "`{call}` runs a forward pass in evaluation code with autograd enabled, keeping activations no backward pass will use"
    THREAD_MESSAGE = (
        "`{call}` runs with autograd enabled: `{target}` runs in a thread started under `no_grad()`, "
        "and grad mode does not cross threads"
    )
    DATA_ONLY_MESSAGE = (
        "`{call}` runs a forward pass with autograd enabled whose results are only read as data "
        "(`.detach()`, `.data`, `.item()`): the graph it records is never used"
    )
    VOLATILE_MESSAGE = (
        "`{call}` runs a forward pass on a `volatile=True` Variable with autograd enabled: `volatile` has had no "
        "effect since PyTorch 0.4, so the graph it was meant to avoid is recorded"
    )
    HELPER_MESSAGE = (
        "`{call}` runs `{function}`, which loops over forward passes (`{forward}`) of the model it is handed, "
        "with autograd enabled: it keeps activations no backward pass will use"
    )
    MODE_MESSAGE = (
        "`{call}` runs with autograd enabled on every pass, but only `if {test}:` backpropagates: "
        "in the other modes it keeps activations no backward pass will use"
    )
    MODE_FIX = "run the forward pass under `torch.set_grad_enabled({test})`"
    EVALUATION_RUN_MESSAGE = (
        "`{call}` runs with autograd enabled also when `{function}` only evaluates (`{caller}`), "
        "keeping activations no backward pass will use"
    )
    EVALUATION_RUN_FIX = (
        "switch grad off when `{function}` does not train (`with torch.set_grad_enabled(train):` around its loop), "
        "or call `{call}(...)` under `torch.no_grad()`"
    )
    FIX = "run the evaluation under `with torch.no_grad():` (or `torch.inference_mode()`), or decorate `{function}` with `@torch.no_grad()`"
    # A finding needs a forward pass: a module-like name or a class whose name says so.
    AUTOFIX = (
        "Unsafe: decorates a function that evaluates from its first statement with "
        "`@torch.no_grad()`, otherwise wraps the evaluation loop (or the forward's statement) in "
        "`with torch.no_grad():`. No fix where `torch` is not imported under a name."
    )
    TOKENS = ATTACHMENT_TOKENS + ("Encoder", "Decoder", "Classifier")
    CLAIM = "the peak memory of the evaluation loop with autograd enabled is at least 1.5× that of the same loop under `torch.no_grad()`"

    INVALID = [
        """\
class Runner:
    def __init__(self, network, multi_gpu):
        self.network = network
        self.mnetwork = nn.DataParallel(network) if multi_gpu else network

    def evaluate(self, loader):
        self.network.eval()
        scores = []
        for x, y in loader:
            score = self.mnetwork(x)  # expect: TL201
            score = score.data.cpu()
            scores.extend(score.numpy().tolist())
        return scores
""",
        """\
class Layer(nn.Linear):
    def forward(self, x):
        return torch.relu(super().forward(x))


class Net(nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.layers = []
        for d in range(len(dims) - 1):
            self.layers = self.layers + [Layer(dims[d], dims[d + 1]).to(device)]

    def predict(self, x):
        scores = []
        for label in range(10):
            h = overlay(x, label)
            for layer in self.layers:
                h = layer(h)  # expect: TL201
            scores.append(h.pow(2).mean(1).unsqueeze(1))
        return torch.cat(scores, 1).argmax(1)
""",
        """\
class CharRNN(nn.Module):
    def forward(self, x, state=None):
        out, state = self.rnn(self.embed(x), state)
        return self.head(out), state

    def generate(self, prefix, steps):
        state, tokens = None, [prefix[0]]
        for _ in range(steps):
            logits, state = self(torch.tensor([[tokens[-1]]]), state)  # expect: TL201
            tokens.append(int(logits.argmax(-1)))
        return tokens
""",
        """\
class CNN(nn.Module):
    def forward(self, x):
        return self.out(x)

cnn = CNN()
for step, (x, y) in enumerate(train_loader):
    loss = loss_func(cnn(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        test_output = cnn(test_x)  # expect: TL201
        pred_y = torch.max(test_output, 1)[1].data.numpy()
        print(step, (pred_y == test_y.numpy()).mean())
""",
        """\
generator = Generator()

def sample_image(n_row, batches_done):
    z = torch.randn(n_row ** 2, latent_dim)
    gen_imgs = generator(z)  # expect: TL201
    save_image(gen_imgs.data, f"images/{batches_done}.png", nrow=n_row)
""",
        """\
class Agent:
    def train_step(self, batch):
        loss = self.model(batch).mean()
        loss.backward()

    def act(self, obs):
        _, logits = self.model(obs)  # expect: TL201
        return logits.argmax(-1).item()
""",
        """\
def evaluate(model, loader):
    model.eval()
    correct = 0
    for x, y in loader:
        logits = model(x)  # expect: TL201
        correct += (logits.argmax(1) == y).sum().item()
    return correct / len(loader.dataset)
""",
        """\
def fit(model, optimizer, train_loader, val_loader, epochs):
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
        model.eval()
        for x, y in val_loader:
            val_loss = F.cross_entropy(model(x), y)  # expect: TL201
""",
        """\
def predictBatches(net, batches):
    return [net(b).softmax(-1) for b in batches]  # expect: TL201
""",
        """\
def run_epoch(model, loader, optimizer, train):
    if train:
        model.train()
    else:
        model.eval()
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)  # expect: TL201
        if train:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
""",
        """\
def run_epoch(model, loader):
    total = 0.0
    for x, y in loader:
        total += F.cross_entropy(model(x), y).item()
    return total

model.eval()
val_loss = run_epoch(model, val_loader)  # expect: TL201
""",
        """\
class Net:
    def infer(self, x):
        return self.module_(x)

    def eval_step(self, x, y):
        self.module_.eval()
        y_pred = self.infer(x)  # expect: TL201
        return self.criterion_(y_pred, y)

    def fit_loop(self, batches):
        for x, y in batches:
            self.eval_step(x, y)
""",
        """\
class Runner:
    def __init__(self, network):
        self.network = network
        self.trainable = sum(p.numel() for p in network.parameters() if p.requires_grad)

    def update(self, x, y):
        y.requires_grad = False
        loss = F.cross_entropy(self.network(x), y)
        loss.backward()

    def predict(self, x):
        self.network.eval()
        score = self.network(x)  # expect: TL201
        score = score.data.cpu().numpy()
        return score.argmax(axis=1).tolist()
""",
        """\
class Agent:  # the rollout throws its graphs away for training and evaluation alike
    def train(self, env, epochs):
        for epoch in range(epochs):
            loss = self.learn(self.buffer.sample())
            loss.backward()
            self.optimizer.step()
            self.collect(env, 1)
            self.evaluate(env)

    def evaluate(self, env):
        self.collect(env, 5)

    def collect(self, env, episodes):
        for _ in range(episodes):
            obs, done = env.reset(), False
            while not done:
                action = self.actor(torch.as_tensor(obs)).detach()  # expect: TL201
                obs, reward, done, _ = env.step(action.cpu().numpy())
                self.buffer.add(obs, action, reward)
""",
        """\
class SequenceModel(nn.Module):
    def unfreeze(self):
        for parameter in self.parameters():
            parameter.requires_grad = True  # fine-tuning, not input gradients

    def slide(self, batches):
        outputs = []
        for batch in batches:
            y = self(torch.tensor(batch))  # expect: TL201
            outputs.append(y.detach().cpu().numpy())
        return outputs
""",
        """\
def do_detect(model, img, conf_thresh):
    model.eval()
    img = torch.from_numpy(img).float().div(255.0).unsqueeze(0)
    output = model(img)  # expect: TL201
    return post_process(output, conf_thresh)
""",
        """\
class Unet(nn.Module):
    def forward(self, x):
        return self.decoder(self.encoder(x))

    def predict(self, x):
        if self.training:
            self.eval()
        x = self.forward(x)  # expect: TL201
        return self.activation(x)
""",
        """\
from sklearn.base import BaseEstimator

class TorchEstimator(BaseEstimator):  # scikit-learn calls predict_proba as it is
    def predict_proba(self, loader):
        self.model.eval()
        predictions = []
        for x, _ in loader:
            predictions.append(self._predict_proba(x))  # expect: TL201
        return torch.cat(predictions)

    def _predict_proba(self, x):
        return F.softmax(self.model(x.to(self.device)), dim=1)  # expect: TL201
""",
        """\
def eval_model(model, initial_input, length):  # run every N steps of training
    model.eval()
    y_hat = model.incremental_forward(initial_input, T=length)  # expect: TL201
    return y_hat.view(-1).cpu().data.numpy()
""",
        """\
class Learner:
    def fit(self, epochs):
        for epoch in range(epochs):
            self._epoch(self.train_loader, train_model=True)
            self._epoch(self.valid_loader, train_model=False)

    def _epoch(self, loader, train_model):
        self.net.train(mode=train_model)
        total = 0.0
        for x, y in loader:
            loss = self.criterion(self.net(x), y)  # expect: TL201
            if train_model:
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            total += loss.item()
        return total
""",
        """\
to_do = config["exp"]["to_do"]  # "train", "valid" or "forward": one script for all three
for batch in batches:
    outputs = model(batch)  # expect: TL201
    if to_do == "train":
        optimizer.zero_grad()
        outputs["loss"].backward()
        optimizer.step()
    write_outputs(outputs["pred"].detach())
""",
        """\
import torch

model = torch.jit.load("lm.pt")  # a generation script: nothing in it trains
state = torch.zeros(1, 512)
tokens = [0]
for step in range(100):
    logits, state = model(torch.tensor([tokens[-1]]), state)  # expect: TL201
    tokens.append(int(logits.argmax()))
print(tokens)
""",
        """\
class Trainer:
    def fit(self, epochs):
        for epoch in range(epochs):
            self.phase = "train"
            self.model.train()
            self.run_epoch(self.train_loader)
            self.phase = "val"
            self.model.eval()
            self.run_epoch(self.val_loader)  # expect: TL201

    def run_epoch(self, loader):
        for x, y in loader:
            loss = self.criterion(self.model(x), y)
            if self.phase == "train":  # "val" for the call after `self.phase = "val"`
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
""",
        """\
class Model:
    def _fit_batch(self, x, y):
        self.y_pred = self.model(x)
        self.loss = self.loss_func(self.y_pred, y)
        if self.state != "train":
            return  # validation stops here: no backward for it
        self.opt.zero_grad()
        self.loss.backward()
        self.opt.step()

    def fit(self, train_batches, valid_batches):
        self.model.train()
        self.state = "train"
        for x, y in train_batches:
            self._fit_batch(x, y)
        self.model.eval()
        self.state = "valid"
        for x, y in valid_batches:
            self._fit_batch(x, y)  # expect: TL201
""",
        """\
pg = Policy().to(device)
optimizer = optim.Adam(pg.parameters(), lr=3e-4)
while global_step < total_timesteps:
    obs = env.reset()
    for step in range(episode_length):  # the rollout: nothing here backpropagates
        action, logp = pg.get_action(obs)  # expect: TL201
        actions[step] = action.data.numpy()[0]
        logprobs[step] = logp.data.numpy()[0]
        obs, rewards[step], dones[step], _ = env.step(action.tolist()[0])
    loss = ppo_loss(pg, actions, logprobs, rewards)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
        """\
class Predictor:
    def __init__(self, model):
        self.model = model.to("cuda")

    def scores(self, batch):  # the logits, graph and all: a caller may train on them
        return self.model(batch)


def predict_dataset(predictor, batches):  # the predictor is whatever the callers pass
    predictions = []
    for batch in batches:
        predictions += predictor.scores(batch).argmax(-1).tolist()  # expect: TL201
    return predictions


def main(model, dev_batches):
    return predict_dataset(Predictor(model), dev_batches)
""",
        """\
import torch


class Recognizer:  # the command-line inference wrapper of a speech toolkit
    def __init__(self, path):
        self.model = torch.jit.load(path)
        self.model = self.model.to("cuda")

    def transcribe(self, audio):
        return self._decode(audio)["text"]

    def _decode(self, audio):
        encoder_out, _ = self.model.forward_encoder(features(audio))  # expect: TL201
        tokens = beam_search(self.model.ctc_activation(encoder_out))
        return {"text": "".join(self.vocab[t] for t in tokens)}
""",
        """\
import torch
from models import build_model


class Detector:  # the inference tool of a detection repository
    def __init__(self, cfg):
        self.model = build_model(cfg)
        self.model.eval()

    def __call__(self, paths):
        results = []
        for path in paths:
            preds = self.model(load_image(path))  # expect: TL201
            results.append(postprocess(preds))
        return results


def main(cfg):
    detector = Detector(cfg)
    for batch in chunks(cfg["images"]):
        write(detector(batch))


if __name__ == "__main__":
    main(load_config())
""",
        """\
import gym
from utils import load_model

env = gym.make("MiniGrid-Empty-8x8-v0")
acmodel = load_model(env.observation_space, env.action_space, "ppo")  # an evaluation script
for _ in range(episodes):
    obs, done = env.reset(), False
    while not done:
        action = acmodel.get_action(preprocess(obs)).item()  # expect: TL201
        obs, reward, done, _ = env.step(action)
""",
        """\
import torch

def deploy(path, image):
    model = torch.jit.load(path)
    output = model(image)  # expect: TL201
    return output

if __name__ == "__main__":
    result = deploy("resnet.pt", torch.ones(1, 3, 224, 224))
    print(result.argmax())
""",
        """\
class SAC:
    def __init__(self, actor, critic):
        self.actor, self.critic = actor, critic
        self.log_alpha = torch.zeros(1, requires_grad=True)  # a parameter: the optimizer below trains it
        self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=3e-4)

    def value(self, state, action):
        q1, q2 = self.critic(state, action)  # expect: TL201
        return torch.minimum(q1, q2)[0].item()

    def update(self, batch):
        loss = self.critic_loss(batch)
        loss.backward()
""",
        """\
encoder.eval()
features = {}
for key, wave in waves.items():
    features[key] = encoder(wave).to("cpu").detach()  # expect: TL201

head.train()
for x, y in batches(features):
    loss = criterion(head(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
        """\
class Enhancer(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Conv2d(3, 3, 3, padding=1)

    def forward(self, x):
        self.output = self.net(x)
        return self.output

    def evaluate(self, images, out_dir):  # an evaluation loop over data, not part of forward
        for i, image in enumerate(images):
            self.forward(image)  # expect: TL201
            save_image(self.output.cpu().numpy(), f"{out_dir}/{i}.png")
""",
        """\
class Trainer:
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer

    @staticmethod
    def load(path):
        model = torch.load(path)
        return Trainer(model, torch.optim.Adam(model.parameters()))

    def predict(self, batch):  # reported here, once, not at its calls
        self.model.eval()
        scores = self.model(batch)  # expect: TL201
        return scores.argmax(-1).tolist()


def predict_dataset(trainer, batches):  # `trainer`: the Trainer its callers load
    preds = []
    for batch in batches:
        preds += trainer.predict(batch)
    return preds


def main(path, batches):
    trainer = Trainer.load(path)
    return predict_dataset(trainer, batches)
""",
        """\
def main(args):
    vqvae = load_vqvae(args.ckpt).to("cuda")  # a network from saved weights, in a script that trains nothing
    codes = read_codes(args.codes_path)
    video = vqvae.decode(codes)  # expect: TL201
    write_video(video[0].cpu().numpy(), args.out_path)


if __name__ == "__main__":
    main(parse_args())
""",
        """\
teacher = TeacherNet()
teacher.load_state_dict(torch.load("teacher.pth"))
optimizer = optim.SGD(student.parameters(), lr=0.01)


def train(epoch):
    student.train()
    teacher.eval()  # frozen: no optimizer, never back to train mode
    for data, target in loader:
        optimizer.zero_grad()
        output = student(data)
        teacher_output = teacher(data)  # expect: TL201
        loss = distillation(output, target, teacher_output.detach())
        loss.backward()
        optimizer.step()
""",
        """\
class Actor(nn.Module):
    def forward(self, s):
        return torch.tanh(self.net(s))


class Agent:
    def __init__(self, critic):
        self.actor = Actor()
        self.critic = critic
        self.actor_target = Actor()
        self.critic_target = copy.deepcopy(critic)
        self.critic_optim = torch.optim.Adam(critic.parameters())

    def learn(self, states, actions, rewards, next_states):
        next_actions = self.actor_target(next_states)  # expect: TL201
        next_q = self.critic_target(next_states, next_actions)
        target = rewards + 0.99 * next_q
        critic_loss = F.mse_loss(self.critic(states, actions), target)
        self.critic_optim.zero_grad()
        critic_loss.backward()
        self.critic_optim.step()
""",
        """\
for episode in range(episodes):
    features = encoder(support)
    relations = relation_net(features)
    loss = F.mse_loss(relations, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if (episode + 1) % 5000 == 0:  # testing, with the training step's names bound afresh
        total = 0
        for images, targets in test_batches:
            features = encoder(images)  # expect: TL201
            relations = relation_net(features)
            _, predicted = torch.max(relations.data, 1)
            total += (predicted == targets).sum().item()
        print("test accuracy", total / len(test_batches))
""",
        """\
def get_model(path):
    model = FastSpeech2()
    model.load_state_dict(torch.load(path))
    model.requires_grad = False  # an attribute of the module: freezes nothing
    model.eval()
    return model


def synthesize(model, text):
    mel = model(text)  # expect: TL201
    save_wav(mel.detach().cpu().numpy())


if __name__ == "__main__":
    model = get_model("ckpt.pth")
    for sentence in sentences:
        synthesize(model, preprocess(sentence))
""",
        """\
import argparse
import torch
from srcnn import SRCNN

parser = argparse.ArgumentParser()
parser.add_argument("--weights")
args = parser.parse_args()
model = SRCNN().to("cuda")
model.load_state_dict(torch.load(args.weights))
inputs = to_tensor(open_image(args.file)).unsqueeze(0).to("cuda")
out = model(inputs)  # expect: TL201
save_image(out.detach().cpu())
""",
        """\
if __name__ == "__main__":
    model = torchvision.models.detection.keypointrcnn_resnet50_fpn(pretrained=True)
    model.eval()
    image = cv2.imread("ski.jpg")
    x = torch.zeros((3, image.shape[0], image.shape[1]))
    x[:, :, :] = to_tensor(image)  # the buffer is filled with the image: real data
    predictions = model([x])[0]  # expect: TL201
    boxes = predictions["boxes"].cpu().numpy().tolist()
""",
        """\
if __name__ == "__main__":
    opt = TestOptions().parse()
    model = create_model(opt)
    model.eval()
    image = transform(Image.open(opt.pic_path)).unsqueeze(0)
    latent = model.netArc(F.interpolate(image, scale_factor=0.5))  # expect: TL201
    fake = model(image, latent)
    save_image(fake.detach().cpu())
""",
        """\
class Diffusion(nn.Module):
    def p_sample(self, xt, t, eps):
        return (xt - self.beta[t] * eps) / self.alpha[t].sqrt()

    def sample(self, eps_model, shape):
        xt = torch.randn(shape)
        for t in reversed(range(self.n_steps)):
            eps = eps_model(xt, t)  # expect: TL201
            xt = self.p_sample(xt, t, eps)  # the helper returns the next step, a local
        return xt.detach().cpu()
""",
        """\
def face2paint(model, img, size):
    img = img.resize((size, size))
    image = to_tensor(img).unsqueeze(0) * 2 - 1
    output = model(image)[0]  # expect: TL201
    return to_pil_image((output * 0.5 + 0.5).clip(0, 1))
""",
        """\
class Agent:
    def __init__(self, n_actions, device):
        self.net = DQN(n_actions).to(device)
        self.tgt_net = DQN(n_actions).to(device)
        self.optimizer = torch.optim.Adam(self.net.parameters())

    def calc_loss(self, states, rewards, next_states, gamma):
        distr = self.net(states)
        next_distr = self.tgt_net(next_states)  # expect: TL201
        next_probs = F.softmax(next_distr, dim=1).data.cpu().numpy()
        projected = torch.tensor(project(next_probs, rewards, gamma))
        return -(F.log_softmax(distr, dim=1) * projected).sum(dim=1).mean()
""",
        """\
class TestModel:
    def set_input(self, batch):
        self.input_A = batch["A"]

    def test(self):  # once per test image, from the test script
        self.real_A = Variable(self.input_A, volatile=True)
        self.fake_B = self.netG(self.real_A)  # expect: TL201
""",
        """\
class ReconstructionModel(nn.Module):  # a plain module: its own code calls validation_step, not Lightning
    def __init__(self, width):
        super().__init__()
        self.encoder = nn.Linear(width, 8)
        self.decoder = nn.Linear(8, width)

    def validation_step(self, batch):
        reconstruction = self.decoder(self.encoder(batch))
        return {"val_loss": torch.mean((batch - reconstruction) ** 2)}


def evaluate(model, val_loader):
    outputs = [model.validation_step(batch) for batch in val_loader]  # expect: TL201
    return torch.stack([x["val_loss"] for x in outputs]).mean().item()


def testing(model, test_loader):
    scores = []
    for batch in test_loader:
        scores.append(torch.mean((batch - model.decoder(model.encoder(batch))) ** 2, dim=1))  # expect: TL201
    return scores
""",
        """\
def entity_ranks(kg_model, triples):
    kg_model.eval()
    ranks = []
    for s, p, o in triples:
        scores = kg_model.score_sp(s, p)  # expect: TL201
        ranks.append((scores > scores[o]).sum().item())
    return ranks
""",
        """\
class Trainer(ABC):
    @abstractmethod
    def _get_losses(self, batch):  # per-sample losses of a batch: each estimator implements it
        raise NotImplementedError

    def _validate_epoch(self, val_loader):
        total = 0.0
        for batch in val_loader:
            total += self._get_losses(batch).sum().item()  # expect: TL201
        return total
""",
        """\
def teach(encoder, generator, train_loader, valid_loader, epochs):
    optimizer = torch.optim.Adam(list(encoder.parameters()) + list(generator.parameters()))
    for epoch in range(epochs):
        for images, labels in train_loader:
            generated = generator(torch.cat((encoder(images), labels), 1))
            loss = F.l1_loss(images, generated)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        valid_loss = 0.0
        for images, labels in valid_loader:
            z = encoder(images)  # expect: TL201
            generated = generator(torch.cat((z, labels), 1))
            loss = F.l1_loss(images, generated)
            valid_loss += loss.item()
        print(epoch, valid_loss)
""",
        """\
class SRGANModel:
    def optimize_parameters(self, step):
        interpolated = (self.var_H * 0.5 + self.fake_H.detach() * 0.5).requires_grad_(True)
        penalty = gradient_penalty(self.netD(interpolated), interpolated)  # WGAN-GP
        (self.netD(self.fake_H.detach()).mean() + penalty).backward()
        self.optimizer_D.step()

    def test(self):  # run on every validation image by the training script
        self.netG.eval()
        self.fake_H = self.netG(self.var_L)  # expect: TL201
        self.netG.train()
""",
        """\
class Backwarder:
    def __init__(self, model: nn.Module, betas):
        self.model = model
        self.betas = betas

    def backward(self, xt, t):  # one reverse-diffusion step of the sampler
        noise = torch.randn_like(xt) if t > 1 else torch.zeros_like(xt)
        return (xt - self.betas[t] * self.model(xt, t)) + self.betas[t].sqrt() * noise

    def backward_loop(self, shape, steps):
        xt = torch.randn(shape)
        frames = [xt.detach().cpu()]
        for t in range(steps, 0, -1):
            xt = self.backward(xt, t)  # expect: TL201
            frames.append(xt.detach().cpu())
        return frames
""",
        """\
def train_model(actor, critic, target_actor, target_critic, batch, critic_optimizer, gamma):
    states, actions, rewards, next_states, masks = batch
    q_value = critic(states, actions).squeeze(1)
    target_next_policy = target_actor(next_states)  # expect: TL201
    target_next_q_value = target_critic(next_states, target_next_policy).squeeze(1)
    target = rewards + masks * gamma * target_next_q_value
    critic_loss = F.mse_loss(q_value, target.detach())
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()
""",
        """\
def train(model, embedder, trainloader, hp):
    embedder.eval()  # a pretrained speaker encoder, frozen
    optimizer = AdaBound(model.parameters(), lr=hp.lr, final_lr=hp.final_lr)
    while True:
        model.train()
        for dvec_mels, target_mag, mixed_mag in trainloader:
            dvec_list = []
            for mel in dvec_mels:
                dvec_list.append(embedder(mel))  # expect: TL201
            dvec = torch.stack(dvec_list, dim=0).detach()
            loss = F.mse_loss(mixed_mag * model(mixed_mag, dvec), target_mag)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
""",
        """\
class Predictor:
    def output_batch(self, ner_model, documents):
        ner_model.eval()
        labels = []
        for start in range(0, len(documents), self.batch_size):
            scores = self.apply_model(ner_model, documents[start:start + self.batch_size])  # expect: TL201
            labels += scores.argmax(-1).tolist()
        return labels

    def apply_model(self, ner_model, features):  # a template the subclasses implement
        return None


class WordPredictor(Predictor):
    def apply_model(self, ner_model, features):
        return ner_model(self.encode(features))
""",
        """\
from continual import Strategy


def run_network(model, x):
    return model(x)


class FeatureReplay(Strategy):
    def _after_training_exp(self, **kwargs):
        self.buffer.update(self.gather_features())

    def gather_features(self):
        self.model.eval()
        features = []
        for x, y in self.loader:
            feats = run_network(self.model.feature_extractor, x)  # expect: TL201
            features.append(feats.cpu())
        return torch.cat(features)
""",
        """\
class Model(nn.Module):
    def score_t(self, batch):
        raise NotImplementedError

    def predict_t(self, batch):
        self.eval()
        return self.score_t(batch)

    def predict(self, batch, target):
        if target == "tail":
            return self.predict_t(batch)
        raise ValueError(target)


def evaluate_ranking(model: Model, batches):
    ranks = []
    for batch in batches:
        scores = model.predict(batch, target="tail")  # expect: TL201
        ranks.append(scores.argmax(dim=1).cpu())
    return ranks
""",
        """\
import threading


class Speaker(nn.Module):
    @torch.no_grad()
    def stream(self, text, steps, frames):
        def run():
            latent = self.encoder(text)
            for _ in range(steps):
                latent = self.decoder(latent)  # expect: TL201
                frames.put(latent)

        threading.Thread(target=run, daemon=True).start()
""",
        """\
def sample(netG, loader, gpus):
    netG.eval()
    images = []
    for noise, text in loader:
        fake = nn.parallel.data_parallel(netG, (noise, text), gpus)  # expect: TL201
        images.append(fake.cpu())
    return images
""",
        """\
def sample_estimator(model, num_classes, train_loader):
    model.eval()
    means = [[] for _ in range(num_classes)]
    for data, target in train_loader:
        data = Variable(data.cuda(), volatile=True)
        output, out_features = model.feature_list(data)  # expect: TL201
        for i, label in enumerate(target):
            means[label].append(out_features[-1][i].data.cpu())
    return means
""",
        """\
model = PointNetCls(k=num_classes)
optimizer = torch.optim.Adam(model.parameters())
for epoch in range(epochs):
    for points, target in train_loader:
        model = model.train()
        loss = F.nll_loss(model(points), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    for points, target in test_loader:
        model = model.eval()
        pred = model(points)  # expect: TL201
        print(pred.data.max(1)[1].eq(target).sum().item())

total_correct = 0
for points, target in test_loader:  # the final test, a block of its own
    model = model.eval()
    pred = model(points)  # expect: TL201
    total_correct += pred.data.max(1)[1].eq(target).sum().item()
""",
        """\
def make_img(loader, G, z):
    img, _ = next(iter(loader))
    result = []
    for i in range(img.size(0)):
        for j in range(z.size(1)):
            out = G(img[i].unsqueeze(0), z[i, j].unsqueeze(0))  # expect: TL201
            result.append(out.data)
    return result


def main(args):
    G = Generator(z_dim=8)  # every call hands make_img a module built here
    G.load_state_dict(torch.load(args.weights))
    G.eval()
    save_image(make_img(val_loader, G, make_z(args)), args.out)
""",
        """\
class Solver:
    def __init__(self):
        self.g12 = G12(conv_dim=64)
        self.optimizer = optim.Adam(self.g12.parameters())

    def to_data(self, x):
        return x.cpu().data.numpy()

    def train(self, loader, fixed_mnist):
        for step, (mnist, svhn) in enumerate(loader):
            loss = self.d_loss(mnist, svhn) + self.g_loss(mnist, svhn)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            if (step + 1) % self.sample_step == 0:
                fake_svhn = self.g12(fixed_mnist)  # expect: TL201
                save_grid(self.to_data(fake_svhn), f"sample-{step + 1}.png")
""",
        """\

class Similarity(nn.Module):
    def forward(self, query, ref):
        return query @ ref.t()


class MatchFinder:
    def __init__(self, distance, threshold=0.5):
        self.distance = distance
        self.threshold = threshold

    def operate(self, function, query, ref):
        return function(query, ref)

    def matching_pairs(self, query, ref):
        return self.operate(self._matching_pairs, query, ref)

    def _matching_pairs(self, query, ref):
        similarity = self.distance(query, ref)  # expect: TL201
        return (similarity > self.threshold).cpu().numpy()


finder = MatchFinder(Similarity())
""",
        """\
class MainLoop:
    def __init__(self, model, train_iterator, valid_iterator):
        self.model = model
        self.optimizer = torch.optim.Adam(self.model.parameters())
        self.train_iterator = train_iterator
        self.valid_iterator = valid_iterator

    def train_epoch(self):
        self.model.train(True)
        for batch in self.train_iterator:
            self.optimizer.zero_grad()
            self.model.get_loss(batch).backward()
            self.optimizer.step()

    def do_validation(self):
        results = []
        self.model.train(False)
        results.extend(self.model.test_performance(self.valid_iterator))  # expect: TL201
        print(results)

    def run(self, epochs):
        for _ in range(epochs):
            self.train_epoch()
            self.do_validation()
""",
        """\
class Pipeline:
    def __init__(self, model, loss_fn):
        self.model = model
        self.loss_fn = loss_fn

    def _inner_loop(self, loader):
        loss, correct = 0.0, 0
        for x, y in loader:
            pred = self.model(x)  # expect: TL201
            loss += self.loss_fn(pred, y).item()
            correct += (pred.argmax(1) == y).sum().item()
        return loss, correct

    def validate(self, loader):
        self.model.eval()
        return self._inner_loop(loader)

    def test(self, loader):
        self.model.eval()
        loss, correct = self._inner_loop(loader)
        print(loss, correct)
""",
        """\
import threading



class Sampler:
    def __init__(self, model):
        self.model = model

    def _predict(self, loader):
        predictions = []
        for x in loader:
            predictions.append(self.model(x))  # expect: TL201
        return torch.cat(predictions).sigmoid()

    def run(self, loader):
        results = []

        def worker():
            results.append(self._predict(loader).mean().item())  # expect: TL201 (a thread starts with grad on)

        with torch.no_grad():
            thread = threading.Thread(target=worker)
            thread.start()
            thread.join()
        return results
""",
        """\
class DeepQNetwork(nn.Module):
    def __init__(self, n_actions):
        super().__init__()
        self.fc = nn.Linear(8, n_actions)
        self.optimizer = torch.optim.RMSprop(self.parameters(), lr=1e-4)

    def forward(self, state):
        return self.fc(state)


class Agent:
    def __init__(self, n_actions):
        self.q_eval = DeepQNetwork(n_actions)
        self.q_next = DeepQNetwork(n_actions)

    def replace_target_network(self):
        self.q_next.load_state_dict(self.q_eval.state_dict())

    def learn(self, states, actions, rewards, states_):
        self.q_eval.optimizer.zero_grad()
        q_pred = self.q_eval.forward(states)[range(len(actions)), actions]
        q_next = self.q_next.forward(states_).max(dim=1)[0]  # expect: TL201
        q_target = rewards + 0.99 * q_next
        loss = self.q_eval.loss(q_target, q_pred)
        loss.backward()
        self.q_eval.optimizer.step()
""",
        """\
class WGANGP:
    def __init__(self):
        self.G = nn.Sequential(nn.Linear(100, 1024), nn.Tanh())
        self.D = nn.Sequential(nn.Linear(1024, 1))

    def gradient_penalty(self, real, fake):
        eta = torch.rand(real.size(0), 1, 1, 1)
        interpolated = (eta * real + (1 - eta) * fake).requires_grad_(True)
        scores = self.D(interpolated)
        gradients = torch.autograd.grad(scores.sum(), interpolated, create_graph=True)[0]
        return ((gradients.norm(2, dim=1) - 1) ** 2).mean()

    def train_step(self, real, z, d_optimizer):
        fake = self.G(z)
        loss = self.D(fake).mean() - self.D(real).mean() + 10 * self.gradient_penalty(real, fake)
        d_optimizer.zero_grad()
        loss.backward()
        d_optimizer.step()

    def generate_img(self, z, n):
        samples = self.G(z).data.cpu().numpy()[:n]  # expect: TL201
        return [sample.reshape(32, 32) for sample in samples]
""",
        """\
class Critic(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.q = nn.Linear(2 * dim, 1)

    def forward(self, state, action):
        return self.q(torch.cat([state, action], 1))


class TD3Agent:
    def __init__(self, actor, dim, gamma=0.99):
        self.actor = actor
        self.critic, self.critic_target = Critic(dim), Critic(dim)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters())
        self.gamma = gamma

    def update(self, state, action, reward, next_state, noise):
        next_action = self.actor(next_state) + noise  # attached: the actor's graph
        next_q = self.critic_target(next_state, next_action)  # expect: TL201
        expected_q = reward + self.gamma * next_q
        loss = F.mse_loss(self.critic(state, action), expected_q.detach())
        self.critic_optimizer.zero_grad()
        loss.backward()
        self.critic_optimizer.step()
""",
        """\
class TextClassifier(nn.Module):
    def __init__(self, vocab, classes):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, 64)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        return self.fc(self.embed(x))

    def validate(self, val_iterator):
        self.eval()
        predictions = []
        for x, y in val_iterator:
            y_pred = self.__call__(x)  # expect: TL201
            predictions.extend(y_pred.argmax(1).tolist())
        self.train()
        return predictions
""",
        """\
class ActorCritic(nn.Module):
    def __init__(self, s_dim, a_dim):
        super().__init__()
        self.mu = nn.Linear(s_dim, a_dim)
        self.sigma = nn.Linear(s_dim, a_dim)

    def forward(self, x):
        return torch.tanh(self.mu(x)), F.softplus(self.sigma(x)) + 1e-3

    def choose_action(self, s):
        self.training = False  # the module's own flag, set by hand
        mu, sigma = self.forward(s)  # expect: TL201
        return torch.distributions.Normal(mu.data, sigma.data).sample().numpy()

    def loss_func(self, s, a):
        self.train()
        mu, sigma = self.forward(s)
        return -torch.distributions.Normal(mu, sigma).log_prob(a).mean()
""",
    ]
    VALID = [
        """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(4)])

    def predict_logits(self, x):  # returns the graph: its caller may train on it
        outs = []
        for block in self.blocks:
            x = block(x)
            outs.append(x)
        return torch.stack(outs)
""",
        """\
class Detector(nn.Module):
    def forward(self, x):
        return self.predict(x)

    def predict(self, x):  # the forward computation itself, named predict
        outputs = []
        for layer in self.layers:
            x = layer(x)
            outputs.append(x)
        return self.head(outputs)


def build_estimator(embedding_net, batch_y):
    n = int(batch_y.shape[-1])  # a one-off forward to learn the embedding's width
    width = embedding_net(batch_y).shape[-1]
    return Flow(n, width)


def compute_per_sample_gradient(layer, activations, backprops):
    grads = layer.per_sample_grad(list(layer.parameters()), activations, backprops)
    return {p: g.detach() for p, g in zip(layer.parameters(), grads)}
""",
        """\
class VAE(nn.Module):
    def forward(self, x):
        return self.decoder(self.encoder(x))

    def sample(self, n):  # the caller may train on the samples
        z = torch.randn(n, self.latent)
        return self.decoder(z)

    def decode_steps(self, z, steps):  # part of the forward computation: returns the graph
        outs = []
        for _ in range(steps):
            z = self.step(z)
            outs.append(z)
        return torch.stack(outs)
""",
        """\
for step, (x, y) in enumerate(train_loader):
    loss = loss_func(cnn(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if step % n_critic == 0:  # a generator step every n_critic batches trains
        fake = generator(z)
        g_loss = -critic(fake).mean()
        g_loss.backward()
        g_optimizer.step()
    if step % 50 == 0:
        with torch.no_grad():
            test_output = cnn(test_x)
        print(step, test_output.argmax(1).eq(test_y).float().mean().item())
""",
        """\
def show_flow(flow, grid):
    out, ldj = flow(grid, reverse=True)  # .numpy() would raise if this built a graph
    return out.squeeze().numpy(), ldj.exp().numpy()
""",
        """\
def evaluate(model, loader):
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            logits = model(x)
            correct += (logits.argmax(1) == y).sum().item()
    return correct / len(loader.dataset)
""",
        """\
@torch.inference_mode
def predict(model, loader):
    return [model(x).argmax(1) for x in loader]
""",
        """\
def finetune(model, optimizer, loader):
    model.eval()  # freeze batch norm statistics, train the rest
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
""",
        """\
class LitModel(LightningModule):
    def validation_step(self, batch, batch_idx):
        for x in batch:
            self.log("val", self.model(x).mean())
""",
        """\
def generate_samples(model, prompts):
    model.eval()
    return [model.generate(p) for p in prompts]
""",
        """\
def infer(model, loader):
    torch.set_grad_enabled(False)
    for x in loader:
        yield model(x)
""",
        """\
def run_epoch(model, loader, optimizer, train):
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        if train:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

model.eval()
with torch.no_grad():
    val_loss = run_epoch(model, val_loader, None, train=False)
""",
        """\
class Predictor(BasePredictor):
    def inference(self, im):
        return self.run_crops(im)

    def run_crops(self, im):
        return [self.model(crop) for crop in crops(im)]
""",
        """\
def profile(model, x):
    model.eval()
    retries = 2
    while retries:
        retries -= 1
        try:
            return count_flops(model, x)
        except RuntimeError:
            pass

def count_flops(model, x):
    return model(x)
""",
        """\
class VariationalTrainer:
    def train(self, x):
        loss = -self.generate_elbo_particles(x).mean()
        loss.backward()

    def generate_elbo_particles(self, x, n=None):
        samples, log_q = self.q.sample_and_log_prob((n or self.n,))
        elbo = self.potential(samples) - log_q
        return elbo
""",
        """\
def export_onnx(model, path):
    model.eval()
    dummy = torch.randn(1, 3, 224, 224)
    y = model(dummy)  # a dry run before exporting
    torch.onnx.export(model, dummy, path)
    return y.shape
""",
        """\
def residual(net, x):  # a PDE residual needs the derivatives of the output
    net.eval()
    x = x.requires_grad_()
    u = net(x)
    return torch.autograd.grad(u.sum(), x, create_graph=True)[0]
""",
        """\
class DensityEstimator:
    def log_prob(self, x):  # an API: samplers may differentiate what it returns
        self.net.eval()
        return self.net.log_prob(x)

    def attach(self, layer):
        self.net.eval()
        handle = layer.register_forward_hook(self.record)  # registers, runs nothing
        return handle
""",
        """\
import torch
from mylib import fit

model = Net()
outputs = []
for x, y in loader:
    outputs.append(model(x))  # the graph is needed: `fit` trains on the outputs below
fit(model, outputs)
""",
        """\
import torch

def profile_flops(model, x):  # a profiler's dry run
    with FlopCounterMode() as counter:
        out = model(x)
    return counter.get_total_flops()

if __name__ == "__main__":
    print(profile_flops(torch.jit.load("m.pt"), torch.ones(1, 3)))
""",
        """\
class SAC:
    def __init__(self, critic):
        self.critic = critic
        self.action = torch.zeros(1, requires_grad=True)  # input gradients: not a parameter

    def value(self, state):
        q = self.critic(state, self.action)
        return q.item()

    def update(self, batch):
        self.critic_loss(batch).backward()
""",
        """\
class Learner:
    def fit(self, epochs):
        for epoch in range(epochs):
            self._epoch(self.train_loader, train_model=True)
            self._epoch(self.valid_loader, train_model=False)

    def _epoch(self, loader, train_model):
        self.net.train(mode=train_model)
        for x, y in loader:
            with torch.set_grad_enabled(train_model):  # off when it only evaluates
                loss = self.criterion(self.net(x), y)
            if train_model:
                loss.backward()
                self.optimizer.step()
""",
        """\
def main(model, test_set):
    torch.no_grad().__enter__()  # grad stays off for the rest of the function
    model.eval()
    for mix, sources in test_set:
        estimates = model(mix[None])
        save(estimates.cpu().numpy())
""",
        """\
import torch
from torch import nn


class CRAFT(nn.Module):
    def forward(self, x):
        return self.head(self.backbone(x))


if __name__ == "__main__":  # a model file's smoke test: made-up inputs, one shape check
    model = CRAFT().cuda()
    output = model(torch.randn(1, 3, 768, 768).cuda())
    print(output.shape)
    for _ in range(100):  # and a timing loop
        model(torch.ones(1, 3, 768, 768, device="cuda"))
""",
        """\
for episode in range(episodes):
    obs, log_probs, rewards = env.reset(), [], []
    for t in range(max_steps):  # REINFORCE: the log-probabilities keep their graph on purpose
        action, log_prob = policy.act(obs)
        log_probs.append(log_prob)
        obs, reward, done, _ = env.step(action.item())
        rewards.append(reward)
    loss = -(torch.stack(log_probs) * discounted(rewards)).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
        """\
for phase in ["train", "val"]:
    for inputs, labels in loaders[phase]:
        optimizer.zero_grad()
        with torch.set_grad_enabled(phase == "train"):  # the tutorial's way
            loss = criterion(model(inputs), labels)
            if phase == "train":
                loss.backward()
                optimizer.step()
""",
        """\
class Trainer:
    def __init__(self, model):
        self.model = model

    @torch.no_grad()
    def predict(self, batch):
        self.model.eval()
        return self.model(batch).argmax(-1).tolist()


def predict_dataset(trainer, batches):  # Trainer.predict turns grad off itself
    preds = []
    for batch in batches:
        preds += trainer.predict(batch)
    return preds
""",
        """\
class Dynamics(nn.Module):
    def forward(self, state, action):
        return self.net(torch.cat([state, action], -1))

    def evaluate_plan(self, state, actions):  # the planner backpropagates through the rollout
        states = []
        for action in actions:
            state = self(state, action)
            states.append(state)
        return torch.stack(states)
""",
        """\
def main(args):
    tokenizer = AutoTokenizer.from_pretrained(args.name)  # loaded, but no network
    ids = read_ids(args.path)
    text = tokenizer.decode(ids)
    print(text)


if __name__ == "__main__":
    main(parse_args())
""",
        """\
vgg = FeatureExtractor()
vgg.eval()
optimizer_G = optim.Adam(generator.parameters())
for lr_imgs, hr_imgs in loader:
    fake = generator(lr_imgs)
    loss = F.l1_loss(vgg(fake), vgg_target(hr_imgs))  # a perceptual loss: backward goes through vgg
    optimizer_G.zero_grad()
    loss.backward()
    optimizer_G.step()
""",
        """\
teacher = TeacherNet().eval().requires_grad_(False)  # no graph is recorded for it
optimizer = optim.SGD(student.parameters(), lr=0.01)
for data, target in loader:
    loss = distillation(student(data), target, teacher(data))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
        """\
class Agent:
    def __init__(self, critic):
        self.critic = critic
        self.critic_target = copy.deepcopy(critic)
        self.critic_optim = torch.optim.Adam(critic.parameters())

    def learn(self, states, actions, rewards, next_states, next_actions):
        with torch.no_grad():
            target = rewards + 0.99 * self.critic_target(next_states, next_actions)
        critic_loss = F.mse_loss(self.critic(states, actions), target)
        self.critic_optim.zero_grad()
        critic_loss.backward()
        self.critic_optim.step()
""",
        """\
model = Net()
model.load_state_dict(torch.load(path))
model.eval()
for k, v in model.named_parameters():
    v.requires_grad = False  # no graph is recorded for this model's forward passes
for img in images:
    out = model(img)
    save(out.cpu().numpy())
""",
        """\
class Model(nn.Module):
    def sample(self, n):
        with torch.no_grad():  # the method turns grad off itself
            x = torch.randn(n, 16)
            for t in range(10):
                x = self.net(x)
            return x


def sample_grid(model, path):
    model.eval()
    for row in range(4):
        images = model.sample(8)
        save(images, f"{path}/{row}.png")
""",
        """\
for step, (x, y) in enumerate(loader):
    if step % 10 == 0:
        out = model(x)  # computed every 10 steps, then trained on below
        print(out.data.mean())
    loss = F.mse_loss(out, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
        """\
class Net(nn.Module):
    def forward(self, x):
        return self.layers(x)


if __name__ == "__main__":
    model = Net()
    model.eval()
    x = torch.randn(2, 3, 32, 32)
    out = model(x)  # a model file's smoke test on made-up inputs
    print(out.shape)
""",
        """\
def plan_actions(model, inputs, actions, steps, uncertainty_weight):
    actions.requires_grad = True
    optimizer_a = optim.Adam([actions], 0.1)
    for i in range(steps):
        optimizer_a.zero_grad()
        model.zero_grad()
        model.eval()  # no dropout while planning
        pred, _ = model.forward(inputs, actions, sampling="fp")
        loss = proximity_cost(pred[0], pred[1].data).mean()
        if uncertainty_weight > 0:
            model.train()
            loss = loss + uncertainty_weight * uncertainty(model, inputs, actions)
        loss.backward()  # the gradient of the plan's cost with respect to the actions
        optimizer_a.step()
    return actions.detach()
""",
        """\
from torch.autograd import Variable
from torch.optim import RMSprop

class Attribution:
    def find_baseline(self, width):
        self.model.eval()
        baseline = Variable(torch.zeros(1, width), requires_grad=True)
        optimizer = RMSprop([baseline], lr=1e-2)
        epoch = 0
        while epoch <= 100:
            epoch += 1
            self.model.zero_grad()
            optimizer.zero_grad()
            output = self.model.forward(baseline)  # the input is optimised through the frozen model
            loss = torch.sum(output ** 2)
            loss.backward()
            optimizer.step()
        self.baseline = baseline.data
""",
        """\
def update(self, state, next_state, reward):
    value = self.critic(state)
    next_value = self.critic(next_state)
    target = reward + self.gamma * next_value.detach()
    loss = F.mse_loss(value, target) + 0.01 * next_value.pow(2).mean()  # both passes are trained
    self.optimizer.zero_grad()
    loss.backward()
    self.optimizer.step()
""",
        """\
def unit_test():
    compiled_fn = torch.compile(lambda x, w: torch.sum(x * w, axis=-1))  # a function, not a model
    for i in range(12):
        x = torch.randint(0, 10, (100 * (i + 1), 2**i), dtype=torch.float32)
        weight = torch.rand((2**i,))
        output = weighted_sum(x, weight)
        torch_output = compiled_fn(x, weight)
        same = torch.allclose(output, torch_output)
        print("output matches", same)
        if not same:
            break


if __name__ == "__main__":
    unit_test()
""",
        """\
class UnetBlock(nn.Module):
    def __init__(self, up_channels, skip_channels):
        super().__init__()
        self.conv = nn.Conv2d(up_channels, skip_channels, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


class DynamicUnet(SequentialEx):
    def __init__(self, encoder, sizes, n_classes):
        x = dummy_eval(encoder, (256, 256)).detach()  # shape probes while building the layers
        middle = nn.Sequential(nn.Conv2d(x.shape[1], x.shape[1], 3), nn.ReLU()).eval()
        x = middle(x)
        layers = [encoder, middle]
        for size in sizes:
            block = UnetBlock(int(x.shape[1]), size).eval()
            layers.append(block)
            x = block(x)
        super().__init__(*layers, nn.Conv2d(int(x.shape[1]), n_classes, 1))
""",
        """\
class Segmenter:
    def __init__(self, generator):
        self.generator = generator
        self.softmax = nn.Softmax2d()  # no weights: it records a graph only for an input that requires grad

    def show(self, images, writer, step):
        self.generator.eval()
        with torch.no_grad():
            fake = self.generator(images).detach()
        fake = self.softmax(fake)
        writer.add_image("prediction", fake.max(1)[1][0].cpu().numpy(), step)
""",
        """\
def test(env, actor, steps):
    actor.eval()
    obs = env.reset()
    for step in range(steps):
        with torch.no_grad():
            action = actor(torch.as_tensor(obs)).numpy()
        obs, reward, done, info = env.step(action)
        actor.sample_noise()  # new draws for the noisy layers: no forward pass
""",
        """\
class TestModel:
    def test(self):
        if torch.__version__.startswith("0.3"):
            self.real_A = Variable(self.input_A, volatile=True)  # honoured before 0.4
            self.fake_B = self.netG(self.real_A)
        else:
            with torch.no_grad():
                self.fake_B = self.netG(self.input_A)
""",
        """\
def validate(val_loader, model, criterion):
    model.eval()
    total = 0.0
    for x, y in val_loader:
        with torch.no_grad():
            output = model(x)
        total += criterion(output, y).item()  # the loss module on a detached output
    return total


def train(train_loader, val_loader, model, optimizer, epochs):
    criterion = nn.CrossEntropyLoss().cuda()
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
        print(validate(val_loader, model, criterion))
""",
        """\
class PPO:
    def evaluate(self, batch_obs, batch_acts):  # PPO's name for the loss's forward pass
        values = self.critic(batch_obs).squeeze()
        log_probs = Categorical(logits=self.actor(batch_obs)).log_prob(batch_acts)
        return values, log_probs

    def learn(self, batch_obs, batch_acts, old_log_probs, advantages, returns, epochs):
        for _ in range(epochs):
            values, log_probs = self.evaluate(batch_obs, batch_acts)
            ratios = torch.exp(log_probs - old_log_probs)
            actor_loss = -torch.min(ratios * advantages, ratios.clamp(0.8, 1.2) * advantages).mean()
            critic_loss = F.mse_loss(values, returns)
            self.optimizer.zero_grad()
            (actor_loss + critic_loss).backward()
            self.optimizer.step()
""",
        """\
class OperatorPredictor:  # a PDE operator of the network's output, differentiated at self.x
    def init(self, points):
        self.x = torch.as_tensor(points)
        self.x.requires_grad_()

    def on_predict_end(self):
        self.net.eval()
        outputs = self.net(self.x)
        self.value = self.op(self.x, outputs).detach().cpu().numpy()
""",
        """\
class CrossEncoder(nn.Module):
    @torch.inference_mode()
    def predict(self, pairs, batch_size=32):
        return torch.cat([self.head(self.encode(chunk)) for chunk in batches(pairs, batch_size)])


def rerank(model: CrossEncoder, samples):
    model.eval()
    results = []
    for query, docs in samples:
        scores = model.predict([(query, doc) for doc in docs])
        results.append(scores.argsort(descending=True))
    return results
""",
        """\
import gpytorch


class Model(nn.Module):
    def posterior(self, X, observation_noise=False):
        self.eval()  # a Gaussian process's posterior mode, which acquisition functions differentiate
        X = self.transform_inputs(X)
        mvn = self(X)
        if observation_noise:
            mvn = self.likelihood(mvn, X)
        return Posterior(distribution=mvn)
""",        """\
class Predictor:
    @torch.no_grad()
    def set_image(self, im):
        self.features = self.get_features(im)

    def get_features(self, im):
        self.model.eval()
        return [self.model.image_encoder(crop).cpu() for crop in crops(im)]


class VideoPredictor:  # its own `get_features`: its calls say nothing of the one above
    def track(self, frames):
        return [self.get_features(frame) for frame in frames]

    def get_features(self, frame):
        return self.backbone(frame)
""",
        """\
import threading


class Speaker(nn.Module):
    @torch.no_grad()
    def stream(self, text, steps, frames):
        @torch.no_grad()  # the thread's own grad mode
        def run():
            latent = self.encoder(text)
            for _ in range(steps):
                latent = self.decoder(latent)
                frames.put(latent)

        threading.Thread(target=run, daemon=True).start()

    def train_in_background(self, batches, optimizer):
        def run():
            for x, y in batches:
                loss = F.mse_loss(self.decoder(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

        threading.Thread(target=run).start()
""",
        """\
def describe(model, loader):
    model.eval()
    sizes = []
    for batch in loader:
        sizes.append(model.get_feature_dim())  # a getter: no forward pass
    return sizes
""",
        """\

class Similarity(nn.Module):
    def forward(self, query, ref):
        return query @ ref.t()


class MatchFinder:
    def __init__(self, distance, threshold=0.5):
        self.distance = distance
        self.threshold = threshold

    def operate(self, function, query, ref):
        return function(query, ref)

    def matching_pairs(self, query, ref):
        with torch.no_grad():
            return self.operate(self._matching_pairs, query, ref)

    def _matching_pairs(self, query, ref):
        similarity = self.distance(query, ref)  # run back by `operate` under no_grad
        return (similarity > self.threshold).cpu().numpy()


finder = MatchFinder(Similarity())
""",
        """\
class MainLoop:
    def __init__(self, model, train_iterator, valid_iterator):
        self.model = model
        self.optimizer = torch.optim.Adam(self.model.parameters())
        self.train_iterator = train_iterator
        self.valid_iterator = valid_iterator

    def train_epoch(self):
        self.model.train(True)
        for batch in self.train_iterator:
            self.optimizer.zero_grad()
            self.model.get_loss(batch).backward()
            self.optimizer.step()

    def do_validation(self):
        results = []
        self.model.train(False)
        with torch.no_grad():
            results.extend(self.model.test_performance(self.valid_iterator))
        print(results)

    def run(self, epochs):
        for _ in range(epochs):
            self.train_epoch()
            self.do_validation()
""",
        """\
class Pipeline:
    def __init__(self, model, loss_fn):
        self.model = model
        self.loss_fn = loss_fn

    def _inner_loop(self, loader):
        loss, correct = 0.0, 0
        for x, y in loader:
            pred = self.model(x)
            loss += self.loss_fn(pred, y).item()
            correct += (pred.argmax(1) == y).sum().item()
        return loss, correct

    def validate(self, loader):
        self.model.eval()
        with torch.no_grad():
            return self._inner_loop(loader)

    def test(self, loader):
        self.model.eval()
        with torch.no_grad():
            loss, correct = self._inner_loop(loader)
        print(loss, correct)
""",
        """\
def push_and_pull(opt, lnet, gnet, s_, bs, br, gamma):
    v_s_ = lnet.forward(s_)[-1]  # the local net's gradients are pushed to the global one
    targets = []
    for r in br[::-1]:
        v_s_ = r + gamma * v_s_
        targets.append(v_s_)
    loss = lnet.loss_func(bs, targets)
    opt.zero_grad()
    loss.backward()
    for lp, gp in zip(lnet.parameters(), gnet.parameters()):
        gp._grad = lp.grad
    opt.step()
    lnet.load_state_dict(gnet.state_dict())
""",
        """\
class VarianceProbe:
    def __init__(self, net, points):
        self.net = net
        self.points = torch.as_tensor(points)
        self.points.requires_grad_()  # the operator below differentiates the outputs by the points

    def on_epoch_end(self):
        outputs = self.net(self.points)
        self.value = self.operator(self.points, outputs).detach().cpu().numpy()
""",
        """\
class Critic(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.q = nn.Linear(2 * dim, 1)

    def forward(self, state, action):
        return self.q(torch.cat([state, action], 1))


class TD3Agent:
    def __init__(self, actor, dim, gamma=0.99):
        self.actor = actor
        self.critic, self.critic_target = Critic(dim), Critic(dim)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters())
        self.gamma = gamma

    def update(self, state, action, reward, next_state, noise):
        next_action = self.actor(next_state) + noise  # attached: the actor's graph
        next_q = self.critic_target(next_state, next_action)
        expected_q = reward + self.gamma * next_q
        loss = F.mse_loss(self.critic(state, action), expected_q)  # backward goes through the target
        self.critic_optimizer.zero_grad()
        loss.backward()
        self.critic_optimizer.step()
""",
    ]

    def visit_FunctionDef(self, node, ctx: Context) -> None:
        analysis = self.analysis
        scope = analysis.scopes.get(id(node))
        if scope is not None and (analysis.may_contain("Thread(") or analysis.may_contain(".submit(")):
            self._report_thread_targets(scope)
        if scope is None or scope.grad is not GradMode.ENABLED:
            return  # decorated with no_grad / inference_mode, or a Lightning eval hook
        if node.name.value == "forward" and self._is_module_method(scope):
            return  # a module's forward: whoever calls the model owns the grad mode
        regions = self._regions(scope)
        found = None
        if regions:  # (whether a caller's grad mode is unknown is asked only where it matters)
            strict = self._grad_unknown(scope) or scope._memo.get("tl201_strict", False)
            found = self._first_forward(scope, regions, strict=strict)
        if found is None:
            found = self._discarded_forward(scope)
            if found is not None:  # inference code from its first statement to its end
                regions = [(scope.statements[0][1].order - 1, math.inf)]
        if found is None:
            if analysis.all_calls_grad_disabled(scope):
                return  # every caller in this module already runs it under no_grad
            self._report_other_shapes(scope)
            return
        if analysis.all_calls_grad_disabled(scope):
            return  # every caller in this module already runs it under no_grad
        if self._trained_on_by_callers(scope):
            return  # PPO's `evaluate(obs, acts)`: the values and log-probs of the loss, whatever its name
        stmt, call = found
        self.report(
            stmt,
            self.MESSAGE.format(call=self.code(call, 50)),
            self.FIX.format(function=node.name.value),
            autofix=self._autofix(scope, regions, stmt),
        )

    def _report_thread_targets(self, scope) -> None:
        """``threading.Thread(target=run).start()`` (or ``executor.submit(run)``) where grad is
        disabled: grad mode is thread-local, so ``run`` and what it calls record a graph. The
        first forward pass it reaches, preferably one in a loop, is reported."""
        analysis = self.analysis
        for stmt, ctx in scope.statements:
            if ctx.scope is not scope or ctx.grad is not GradMode.DISABLED:
                continue
            for call in analysis.calls_in(stmt):
                target = _thread_target(call, analysis)
                if target is None:
                    continue
                function = analysis.called_function(cst.Call(func=target), ctx)
                if function is None or function.kind != "function" or function.grad is not GradMode.ENABLED:
                    continue
                found = self._thread_forward(function)
                if found is not None:
                    where, inner, _ = found
                    self.report(where, self.THREAD_MESSAGE.format(call=self.code(inner, 50),
                                                                 target=function.name),
                                f"decorate `{function.name}` with `@torch.no_grad()` (grad mode does not cross threads)")

    def _thread_forward(self, function, depth: int = 0, seen: frozenset = frozenset()):
        """(statement, call, in a loop) of the forward pass a thread's function reaches with grad
        enabled: the first one in a loop of it or of the functions of this file it calls (three
        calls deep), else its first one; None if it reaches none. A call of a submodule or a
        method of a model by evidence (``self.flow_lm.conditioner(x)``) counts here."""
        analysis = self.analysis
        if depth > 3 or id(function) in seen or function.owner is not analysis:
            return None
        seen = seen | {id(function)}
        first = None
        for stmt, ctx in function.statements:
            if ctx.scope is not function or ctx.grad is not GradMode.ENABLED:
                continue
            looped = _repeats(ctx, analysis)
            for call in analysis.calls_in(stmt):
                callee = analysis.called_function(call, ctx)
                inner = None
                if callee is not None and callee.kind == "function" and callee.grad is GradMode.ENABLED \
                        and not analysis.backpropagates(callee):
                    inner = self._thread_forward(callee, depth + 1, seen)
                direct = self._is_module_call(call, ctx) or self._runs_model_method(call, ctx) or (
                    type(call.func) is cst.Attribute and self._model_part(call.func, ctx)
                    and not NOT_FORWARD_METHOD_RE.match(call.func.attr.value))
                if not direct and inner is None:
                    continue
                if looped:
                    return stmt, call, True
                if inner is not None and inner[2]:
                    return inner
                first = first or (stmt, call, False)
        return first

    def check_module_scope(self, scope) -> None:
        """A script's or notebook's top level: ``model.eval()`` then a test loop."""
        regions = self._regions(scope)
        strict = scope._memo.get("tl201_strict", False)
        found = self._first_forward(scope, regions, strict=strict) if regions else None
        if found is None:
            self._report_other_shapes(scope)
            return
        # a script's separate evaluation blocks (a test every N steps inside training, then the
        # final test loop after it) are separate fixes: one report per top-level statement
        top_level = {id(stmt) for stmt in scope.node.body}
        starts = sorted(ctx.order for stmt, ctx in scope.statements if id(stmt) in top_level)
        for _ in range(MAX_SCRIPT_REPORTS):
            stmt, call = found
            self.report(stmt, self.MESSAGE.format(call=self.code(call, 50)), MODULE_LEVEL_FIX,
                        autofix=self._autofix(scope, regions, stmt))
            order = self._order_of(scope, stmt)
            following = next((start for start in starts if start > order), None)
            if following is None:
                return
            regions = [(max(start, following - 1), end) for start, end in regions if end > following]
            found = self._first_forward(scope, regions, strict=strict) if regions else None
            if found is None:
                return

    @staticmethod
    def _order_of(scope, stmt) -> int:
        memo = scope._memo.setdefault("tl201_orders", {id(each): ctx.order for each, ctx in scope.statements})
        return memo[id(stmt)]

    def _report_other_shapes(self, scope) -> None:
        """Where no evaluation region reports: the first of a shared loop run for evaluation, a
        loop that backpropagates only in one mode, a rollout, an evaluation every N steps, a
        frozen model run inside a training loop."""
        if not self._report_evaluation_run(scope) and not self._report_mode_shared_loop(scope) \
                and not self._report_discarded_in_loop(scope) and not self._report_frozen_model_run(scope) \
                and not self._report_periodic_evaluation(scope) and not self._report_evaluation_helper_call(scope) \
                and not self._report_volatile_forward(scope):
            self._report_data_only_forward(scope)

    def _report_volatile_forward(self, scope) -> bool:
        """A forward pass on ``Variable(x, volatile=True)`` with grad enabled: the author asked for
        no graph, but ``volatile`` has done nothing since PyTorch 0.4, so autograd records one
        (the test methods of pre-0.4 code: ``self.fake_B = self.netG(self.real_A)``)."""
        found = self._volatile_forward(scope)
        if found is None:
            return False
        stmt, call = found
        self.report(stmt, self.VOLATILE_MESSAGE.format(call=self.code(call, 50)),
                    f"run `{self.code(call.func, 40)}` under `with torch.no_grad():` (and drop `volatile=True`)")
        return True

    def _volatile_forward(self, scope):
        """(statement, call) of the function's first forward pass on a volatile Variable with
        grad enabled, or None (memoised)."""
        memo = scope._memo
        if "tl201_volatile" in memo:
            return memo["tl201_volatile"]
        memo["tl201_volatile"] = None
        analysis = self.analysis
        if not analysis.may_contain("volatile") or scope.grad is not GradMode.ENABLED:
            return None
        for stmt, ctx in scope.statements:
            if ctx.scope is not scope or ctx.grad is not GradMode.ENABLED or type(stmt).__name__ in COMPOUND_STATEMENTS:
                continue
            if any("__version__" in self.code(test, 200) for test, _ in analysis.branch_tests(stmt, scope)):
                continue  # the branch for torch < 0.4, where volatile still works
            for call in analysis.calls_in(stmt):
                if (self._is_module_call(call, ctx) or self._is_model_run(call, ctx)) \
                        and any(self._volatile(arg.value, ctx, 0) for arg in call.args):
                    memo["tl201_volatile"] = stmt, call
                    return memo["tl201_volatile"]
        return None

    def _volatile(self, expr, ctx: Context, depth: int) -> bool:
        """Is ``expr`` (a name bound to, or a tensor op of) ``Variable(..., volatile=True)``?"""
        expr = strip_pass_through(expr)
        kind = type(expr)
        if kind is cst.Call:
            if last_part(dotted_name(expr.func) or "") == "Variable":
                return any(arg.keyword is not None and arg.keyword.value == "volatile"
                           and type(arg.value) is cst.Name and arg.value.value == "True" for arg in expr.args)
            return depth < 4 and (any(self._volatile(arg.value, ctx, depth + 1) for arg in expr.args)
                                  or type(expr.func) is cst.Attribute and self._volatile(expr.func.value, ctx, depth + 1))
        if kind in (cst.Tuple, cst.List):
            return depth < 4 and any(self._volatile(element.value, ctx, depth + 1) for element in expr.elements)
        key = dotted_name(expr)
        if key is None or depth >= 4:
            return False
        return any(binding.kind == "assign" and not binding.element and binding.value is not None
                   and self._volatile(binding.value, binding.ctx, depth + 1)
                   for binding in self.analysis.reaching_bindings(key, ctx))

    def _trained_on_by_callers(self, scope) -> bool:
        """Does a caller of the function backpropagate what it returns: ``V, log_probs =
        self.evaluate(obs, acts)`` and then ``critic_loss(V, returns).backward()``?"""
        analysis = self.analysis
        if scope.kind != "function" or analysis.returns_attached(scope) is None:
            return False
        for call, ctx in analysis.callers_of(scope):
            stmt = _statement_in(ctx.scope, call, analysis)
            if type(stmt) is not cst.Assign or strip_pass_through(stmt.value) is not call:
                continue
            names = {node.value for target in stmt.targets for node in iter_expression_nodes(target.target)
                     if type(node) is cst.Name}
            if any(analysis.reaches_backward(name, ctx) for name in names):
                return True
        return False

    def _report_evaluation_helper_call(self, scope) -> bool:
        """A script, or a function that trains, calling with grad enabled a project helper named
        for evaluation (``eval_model(model, dev_data)``, ``validate(net_g, loader)``) that loops
        over forward passes of the model handed to it, with grad enabled and training nothing.
        The helper cannot tell its model is a network (``model.predict(batch)`` on a parameter),
        or lives in another file: the call is where grad mode is decided."""
        analysis = self.analysis
        if scope.kind == "module":
            if not self._runs_top_level_code():
                return False
        elif scope.kind != "function" or not (analysis.backpropagates(scope) or analysis.steps_optimizer(scope)):
            return False
        for stmt, ctx in scope.statements:
            if ctx.scope is not scope or ctx.grad is not GradMode.ENABLED or type(stmt).__name__ in COMPOUND_STATEMENTS:
                continue
            for call in analysis.calls_in(stmt):
                name = call_name(call) or ""
                if not self._name_says_evaluation(name) or name.startswith("test_"):
                    continue  # (the name first: resolving every call of a training function costs)
                callee = analysis.called_function(call, ctx)
                if callee is None or callee is scope or callee.kind != "function" or callee.grad is not GradMode.ENABLED:
                    continue
                owner = callee.owner
                if owner.backpropagates(callee) or owner.steps_optimizer(callee) \
                        or any(token in owner.module.code_for_node(callee.node) for token in HELPER_TRAINING_TOKENS):
                    continue  # (`.train()`: a forward in training mode, re-estimating batch-norm statistics)
                if (self if owner is analysis else type(self)(owner, [], self.options))._reports_itself(callee):
                    continue  # reported once, at its own forward pass, in its own file
                forward = self._looped_forward_through_arguments(call, ctx, callee)
                if forward is None:
                    continue
                self.report(stmt, self.HELPER_MESSAGE.format(call=self.code(call, 50), function=callee.name,
                                                            forward=forward),
                            f"call `{self.code(call.func, 40)}(...)` under `with torch.no_grad():`, "
                            f"or decorate `{callee.name}` with `@torch.no_grad()`")
                return True
        return False

    def _report_data_only_forward(self, scope) -> bool:
        """In a training step (a function that backpropagates, or returns the loss it computes),
        a forward pass of another network whose results are only read as data: detached on the
        spot (``q_next = target_net(s).detach()``) or read through ``.data`` / ``.detach()``
        afterwards (a DQN's ``tgt_net(next_states)`` feeding a projection through ``.data``).
        No gradient can flow back through it, so its graph is recorded for nothing."""
        analysis = self.analysis
        if scope.kind not in ("function", "module") or scope.grad is not GradMode.ENABLED or analysis.is_test_module \
                or self._is_module_method(scope) or self._grad_unknown(scope):
            return False
        if not any(analysis.may_contain(token) for token in (".detach(", ".data", ".item(")):
            return False
        # a training step: the function trains or returns its loss; at the top level of a
        # script, a loop that backpropagates
        step_function = scope.kind == "function" and (
            analysis.backpropagates(scope) or analysis.returns_attached(scope) == "always")
        if scope.kind == "function" and not step_function:
            return False
        own = [(stmt, ctx) for stmt, ctx in scope.statements
               if ctx.scope is scope and type(stmt).__name__ not in COMPOUND_STATEMENTS]
        for index, (stmt, ctx) in enumerate(own):
            if ctx.grad is not GradMode.ENABLED or type(stmt) is not cst.Assign:
                continue
            if not step_function and not any(analysis.loop_backpropagates(loop) for loop in ctx.visible_loops):
                continue
            call = next((call for call in analysis.calls_in(stmt) if self._is_model_run(call, ctx)), None)
            if call is None or any(analysis.is_attached(arg.value, ctx) or analysis.is_grad_leaf(arg.value, ctx)
                                   for arg in call.args):
                continue  # (run on an attached input: a critic scoring the actor's action trains the actor)
            if strip_pass_through(stmt.value) is call:
                names = {node.value for target in stmt.targets for node in iter_expression_nodes(target.target)
                         if type(node) is cst.Name}
                after = [(other, other_ctx) for other, other_ctx in own[index + 1:]
                         if not analysis.exclusive_branches(stmt, other, scope)]
                if not names or names & analysis.backpropagated_keys(scope) \
                        or not self.analysis.only_read_as_data(names, after, derive=3):
                    continue
            elif not _detached_on_the_spot(stmt, call, analysis):
                continue
            else:
                target = call.func.value if type(call.func) is cst.Attribute and call.func.attr.value == "forward" else call.func
                key = dotted_name(target)
                if key is None or not self._frozen_model(key):
                    continue  # (`fake = generator(z).detach()` in a GAN's discriminator step: the idiom, left alone)
            self.report(stmt, self.DATA_ONLY_MESSAGE.format(call=self.code(call, 50)),
                        f"run `{self.code(call.func, 40)}` under `with torch.no_grad():`")
            return True
        return False

    # ------------------------------------------------------------------ a frozen model inside training

    def _report_frozen_model_run(self, scope) -> bool:
        """``teacher.eval()`` then, in a loop that trains another model, ``out = teacher(x)``
        with grad enabled: a model switched to eval mode, never switched back, handed to no
        optimizer and left requiring grad. Its graph is built every step for nothing (or
        backward runs through it and fills gradients nobody uses)."""
        analysis = self.analysis
        if scope.grad is not GradMode.ENABLED:
            return False
        frozen = set()
        if analysis.may_contain(".eval()") and self._optimizers_known(scope):
            # (an optimizer handed in may train the model in eval mode: frozen batch norm)
            frozen = {key for key in self._switched_to_eval(scope) if self._frozen_model(key)}
        # a target network run in a function that backpropagates once per call (an agent's `learn()`)
        copies = {key for key in self._named_copies(scope) if self._frozen_model(key)} \
            if scope.kind == "function" and analysis.backpropagates(scope) else set()
        if not frozen and not copies:
            return False
        for stmt, ctx in scope.statements:
            # (also `dvecs.append(embedder(mel))`, `kd += kl(teacher(x), s)`; not a bare `teacher(x)`)
            if ctx.scope is not scope or ctx.grad is not GradMode.ENABLED \
                    or type(stmt) not in (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Expr):
                continue
            in_training_loop = any(analysis.loop_backpropagates(loop) for loop in ctx.visible_loops if loop.implicit is None)
            candidates = (frozen | copies) if in_training_loop else copies if not any(
                loop.implicit is None for loop in ctx.visible_loops) else set()
            for call in analysis.calls_in(stmt):
                target = call.func.value if type(call.func) is cst.Attribute and call.func.attr.value == "forward" else call.func
                if dotted_name(target) in candidates and self._is_module_call(call, ctx) \
                        and not (type(stmt) is cst.Expr and stmt.value is call) \
                        and (not any(analysis.is_attached(arg.value, ctx) or analysis.is_grad_leaf(arg.value, ctx)
                                     for arg in call.args)
                             # (or what it computes is only ever read detached: `expected_q.detach()`)
                             or dotted_name(target) in copies and self._only_detached_later(stmt, scope)):
                    # (`vgg(fake)` on a generator's output is a perceptual loss, `model(x_adv)` on an
                    # input optimised through the frozen model an attack: backward goes through it)
                    message = self.FROZEN_MESSAGE if dotted_name(target) in frozen else self.COPY_MESSAGE
                    self.report(stmt, message.format(call=self.code(call, 50), model=dotted_name(target)),
                                f"run `{dotted_name(target)}` under `with torch.no_grad():`")
                    return True
        return False

    def _only_detached_later(self, stmt, scope) -> bool:
        """Are the names the statement binds read afterwards only detached, also through locals
        computed from them (``next_q = target(s2, a2)``, ``expected = r + gamma * next_q``,
        then only ``expected.detach()``)? Then no backward goes through what it computed."""
        if type(stmt) is not cst.Assign or not all(type(target.target) is cst.Name for target in stmt.targets):
            return False
        names = {target.target.value for target in stmt.targets}
        own = [(other, ctx) for other, ctx in scope.statements if ctx.scope is scope]
        index = next((i for i, (other, _) in enumerate(own) if other is stmt), None)
        return index is not None and self.analysis.only_read_as_data(names, own[index + 1:], derive=2)

    def _optimizers_known(self, scope) -> bool:
        """Is every optimizer the function steps one whose construction this module shows?"""
        analysis = self.analysis
        stepped = False
        for stmt, ctx in scope.statements:
            if ctx.scope is not scope:
                continue
            for call in analysis.calls_in(stmt):
                optimizer = analysis.stepped_optimizer(call, ctx)
                if optimizer is None:
                    continue
                stepped = True
                if not analysis.optimizer_built_here(optimizer, ctx):
                    return False
        return stepped

    def _named_copies(self, scope) -> set:
        """Models the function runs whose name says they are a frozen copy of another, trained
        by no backward of their own: an RL target network (``self.target_critic``; ``q_next``
        only when the module loads another model's weights into it), a distillation teacher."""
        found = set()
        synced = self._synced_copies()
        for stmt, ctx in scope.statements:
            if ctx.scope is not scope:
                continue
            for call in self.analysis.calls_in(stmt):
                target = call.func.value if type(call.func) is cst.Attribute and call.func.attr.value == "forward" else call.func
                key = dotted_name(target)
                if key is not None and (FROZEN_COPY_WORDS & set(name_words(last_part(key))) or key in synced):
                    found.add(key)
        return found

    def _synced_copies(self) -> set:
        """Models this module loads another model's weights into (``self.q_next.load_state_dict(
        self.q_eval.state_dict())``, a DQN's target network whatever its name), whose own
        optimizer it never steps (``self.q_next.optimizer.step()``) and whose parameters it
        never reads (an A3C worker's local net hands its gradients to the global one)."""
        memo = self.analysis.module_scope._memo
        if "tl201_synced" not in memo:
            copies, stepped = set(), set()
            if self.analysis.may_contain("load_state_dict"):
                statements = [stmt for listed in self.analysis.statements_by_type.values() for stmt, _ in listed]
                for stmt in statements:
                    for call in self.analysis.calls_in(stmt):
                        func = call.func
                        if type(func) is not cst.Attribute:
                            continue
                        if func.attr.value == "load_state_dict" and call.args:
                            source = call.args[0].value
                            if type(source) is cst.Call and call_name(source) == "deepcopy" and source.args:
                                source = source.args[0].value
                            source_key = dotted_name(source.func.value) if type(source) is cst.Call \
                                and type(source.func) is cst.Attribute and source.func.attr.value == "state_dict" else None
                            target_key = dotted_name(func.value)
                            if source_key and target_key and source_key != target_key:
                                copies.add(target_key)
                        elif func.attr.value == "step":
                            stepped.add(dotted_name(func.value) or "")
                        elif func.attr.value in ("parameters", "named_parameters"):
                            stepped.add(dotted_name(func.value) or "")  # an A3C worker pushes its gradients on
            memo["tl201_synced"] = {key for key in copies if not any(key_within(optimizer, key) for optimizer in stepped)}
        return memo["tl201_synced"]

    def _switched_to_eval(self, scope) -> set:
        """Models this function or the module's top level switches to eval (``teacher.eval()``)."""
        found = set()
        for owner in (scope, self.analysis.module_scope):
            for stmt, ctx in owner.statements:
                if ctx.scope is not owner:
                    continue
                switch = _mode_switch(stmt)
                key = dotted_name(switch[1]) if switch is not None and switch[0] == "eval" else None
                if key is not None and key != "self":
                    found.add(key)
        return found

    def _frozen_model(self, key: str) -> bool:
        """Is the model never switched to ``.train()`` in this module, handed to no optimizer
        built here, and not switched out of requiring grad (``requires_grad_(False)``)?"""
        analysis = self.analysis
        memo = analysis.module_scope._memo.setdefault("tl201_frozen", {})
        if key in memo:
            return memo[key]
        root = ".".join(key.split(".")[:2]) if key.startswith("self.") else key.partition(".")[0]
        frozen = not any(key_within(name, root) for name in analysis._requires_grad_switches())
        if frozen:
            for owner in {id(scope): scope for scope in (analysis.module_scope, *analysis.scopes.values())}.values():
                for stmt, ctx in owner.statements:
                    if ctx.scope is not owner:
                        continue
                    switch = _mode_switch(stmt)
                    if switch is not None and switch[0] == "train" and dotted_name(switch[1]) in (key, root, None):
                        frozen = False
                        break
                if not frozen:
                    break
        if frozen and analysis.optimized_anywhere(key):
            frozen = False
        memo[key] = frozen
        return frozen

    # ------------------------------------------------------------------ a shared loop run for evaluation

    def _report_mode_shared_loop(self, scope) -> bool:
        """A loop whose every ``backward()`` runs only under a test of a mode the code decides
        (``if to_do == "train":``, ``if is_training:``), while its forward pass runs on every
        pass: with the mode set to validation or decoding, the forward builds graphs nobody
        uses. A test on a parameter is left to the callers (``_report_evaluation_run``); a
        test on a module's ``.training`` flag belongs to the model."""
        analysis = self.analysis
        if not analysis.may_contain("train"):
            return False
        params = {key for key, bindings in scope.bindings.items() if any(b.kind == "param" for b in bindings)}
        for loop in analysis.loops.values():
            if loop.scope is not scope or loop.implicit is not None or not analysis.loop_backpropagates(loop):
                continue
            statements = [(stmt, ctx) for stmt, ctx in analysis.statements_in_loop(loop)
                          if ctx.scope is scope and type(stmt).__name__ not in COMPOUND_STATEMENTS]
            backwards = [stmt for stmt, ctx in statements if analysis.statement_backpropagates(stmt, ctx)]
            if not backwards or not all(self._under_mode_test(stmt, scope, params) for stmt in backwards):
                continue
            for stmt, ctx in statements:
                if ctx.grad is not GradMode.ENABLED or any(
                        _MODE_TEST_RE.search(text.strip()) for text, _ in analysis.branch_conditions(stmt, scope)):
                    continue
                call = next((call for call in analysis.calls_in(stmt) if self._is_forward(call, ctx)), None)
                if call is None and type(stmt) is cst.Assign and type(stmt.value) is cst.Call and {
                        key for target in stmt.targets for key in mentioned_keys(target.target)
                } & {key for backward in backwards for key in mentioned_keys(backward)}:
                    call = stmt.value  # `outs = forward_model(...)`, whose outputs the guarded backward() uses
                if call is None or (type(stmt) is cst.Expr and stmt.value is call):
                    continue
                test = next(text for text, positive in analysis.branch_conditions(backwards[0], scope)
                            if positive and _MODE_TEST_RE.search(text.strip()))
                self.report(stmt, self.MODE_MESSAGE.format(call=self.code(call, 50), test=" ".join(test.split())[:40]),
                            self.MODE_FIX.format(test=" ".join(test.split())[:40]))
                return True
        return False

    def _under_mode_test(self, stmt, scope, params) -> bool:
        for text, positive in self.analysis.branch_conditions(stmt, scope):
            match = _MODE_TEST_RE.search(text.strip()) if positive else None
            name = match and (match.group("name") or match.group("name2") or match.group("name3"))
            if name and not name.endswith(".training") and name.partition(".")[0] not in params:
                return True
        return False

    def _report_discarded_in_loop(self, scope) -> bool:
        found = self._discarded_in_loop(scope)
        if found is None:
            return False
        stmt, call = found
        self.report(stmt, self.MESSAGE.format(call=self.code(call, 50)),
                    "run the forward pass under `with torch.no_grad():`: its outputs are only read as data")
        return True

    def _discarded_in_loop(self, scope):
        """A loop that trains nothing (an environment rollout, a decoding loop) whose forward
        pass gives outputs that the iteration only reads as data (``action.data.numpy()``,
        ``logp.item()``, ``probs.tolist()``): the graph of every such forward is thrown away.
        (statement, call) or None; memoised."""
        memo = scope._memo
        if "tl201_discarded_in_loop" not in memo:
            memo["tl201_discarded_in_loop"] = None
            memo["tl201_discarded_in_loop"] = self._find_discarded_in_loop(scope)
        return memo["tl201_discarded_in_loop"]

    def _find_discarded_in_loop(self, scope):
        analysis = self.analysis
        if analysis.is_test_module or scope.grad is not GradMode.ENABLED or not any(
                analysis.may_contain(token) for token in (".numpy(", ".item(", ".tolist(", ".data", ".detach(")):
            return None
        backpropagated = analysis.backpropagated_keys(scope)
        for loop in analysis.loops.values():
            if loop.scope is not scope or loop.implicit is not None or analysis.loop_backpropagates(loop) \
                    or analysis.loop_runs_once(loop) or _is_retry_loop(loop.node):
                continue
            statements = [(stmt, ctx) for stmt, ctx in analysis.statements_in_loop(loop)
                          if ctx.scope is scope and type(stmt).__name__ not in COMPOUND_STATEMENTS]
            # over validation or test data, through the locals computed from the outputs too
            # (`z = E(x)`, `generated = G(z)`, `loss = l1(x, generated)`, `total += loss.item()`)
            derive = 3 if _iterates_evaluation_data(loop) else 0
            for index, (stmt, ctx) in enumerate(statements):
                if ctx.grad is not GradMode.ENABLED or type(stmt) is not cst.Assign:
                    continue
                call = next((call for call in analysis.calls_in(stmt) if self._is_model_run(call, ctx)), None)
                if call is None or strip_pass_through(stmt.value) is not call:
                    continue
                names = {node.value for target in stmt.targets for node in iter_expression_nodes(target.target)
                         if type(node) is cst.Name}
                if not names or (names & backpropagated if not derive else analysis.backpropagated_at(names, stmt, ctx)):
                    continue  # (over evaluation data: what this binding holds, not the name, decides)
                if self.analysis.only_read_as_data(names, statements[index + 1:], derive=derive):
                    return stmt, call
        return None

    def _report_evaluation_run(self, scope) -> bool:
        """Reports the first call, with grad enabled, of a function of the project that trains
        for some arguments but not for the literal ones given (``self._epoch(loader,
        train_model=False)``, ``run(model, loader, mode="valid")``), and then loops over
        forward passes with grad enabled: the shared train/eval loop run for evaluation."""
        analysis = self.analysis
        if not analysis.may_contain("False") and not analysis.may_contain("val") and not analysis.may_contain("test"):
            return False
        for stmt, ctx in scope.statements:
            if ctx.scope is not scope or ctx.grad is not GradMode.ENABLED or type(stmt).__name__ in COMPOUND_STATEMENTS:
                continue
            for call in analysis.calls_in(stmt):
                if not any(_mode_argument(arg) for arg in call.args):
                    continue  # (cheap first: the mode is given as a literal flag or name)
                callee = analysis.called_function(call, ctx)
                if callee is None or callee is scope or callee.kind != "function" or not constant_arguments(call, callee):
                    continue
                if not (analysis.backpropagates(callee) or analysis.steps_optimizer(callee)):
                    continue  # never trains: inference code, judged on its own
                if not self._loops_forward(call, ctx):
                    continue
                forward = next(((inner, inner_ctx) for inner, inner_ctx, _ in analysis.scope_calls(callee)
                                if _repeats(inner_ctx, analysis) and inner_ctx.grad is GradMode.ENABLED
                                and self._is_forward(inner, inner_ctx)), None)
                if callee.owner is not analysis or forward is None:
                    self.report(stmt, self.MESSAGE.format(call=self.code(call, 50)), self.EVALUATION_RUN_FIX.format(
                        call=self.code(call.func, 40), function=callee.name))
                    return True
                reported = analysis.module_scope._memo.setdefault("tl201_evaluation_runs", set())
                if id(callee) not in reported:  # once, inside the shared loop, for all its evaluation calls
                    reported.add(id(callee))
                    inner, inner_ctx = forward
                    self.report(_statement_in(callee, inner, analysis),
                                self.EVALUATION_RUN_MESSAGE.format(call=self.code(inner, 50), function=callee.name,
                                                                   caller=self.code(call, 50)),
                                self.EVALUATION_RUN_FIX.format(call=self.code(call.func, 40), function=callee.name))
                return True
        return False

    # ------------------------------------------------------------------ evaluation every N steps

    def _report_periodic_evaluation(self, scope) -> bool:
        found = self._periodic_evaluation(scope)
        if found is None:
            return False
        stmt, call = found
        autofix = None
        reference = torch_reference(self.analysis)
        if reference is not None:
            torch, imports = reference
            autofix = Fix.unsafe(f"Wrap `{self.code(stmt, 30)}` in `with {torch}.no_grad():`",
                                 Wrap(stmt, stmt, f"with {torch}.no_grad():"), *imports)
        self.report(stmt, self.MESSAGE.format(call=self.code(call, 50)),
                    "run the periodic evaluation under `with torch.no_grad():`", autofix=autofix)
        return True

    def _periodic_evaluation(self, scope):
        """A check every N steps inside a training loop (``if step % 50 == 0:`` then
        ``out = model(test_x)``, accuracy from ``out.data``): a block that runs a forward pass
        with grad enabled, never backpropagates, turns what it computed into data and keeps no
        attached value. (statement, call) of its forward pass, or None."""
        analysis = self.analysis
        if not analysis.may_contain("%") or analysis.is_test_module:
            return None
        for stmt, ctx in scope.statements:
            if type(stmt) is not cst.If or ctx.scope is not scope or ctx.grad is not GradMode.ENABLED \
                    or not periodic_test(stmt.test) or ctx.loop is None or not analysis.loop_backpropagates(ctx.loop):
                continue
            inside = {id(node) for node in iter_expression_nodes(stmt.body)}
            block = [(inner, inner_ctx) for inner, inner_ctx in scope.statements
                     if id(inner) in inside and inner_ctx.scope is scope]
            found = self._discarding_block(block)
            if found is not None:
                return found
        return None

    def _discarding_block(self, block):
        analysis = self.analysis
        forward = None
        converts = False
        for stmt, ctx in block:
            if ctx.grad is not GradMode.ENABLED:
                return None
            if type(stmt).__name__ in COMPOUND_STATEMENTS:
                continue
            calls = analysis.calls_in(stmt)
            if analysis.statement_backpropagates(stmt, ctx) or any(
                    analysis.stepped_optimizer(call, ctx) is not None for call in calls):
                return None  # a training step taken every N steps (a GAN's generator update)
            if forward is None and type(stmt) in (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Expr):
                forward_call = next((call for call in calls if self._is_module_call(call, ctx)
                                     and not (type(stmt) is cst.Expr and stmt.value is call)), None)
                if forward_call is not None:  # `out = G(z)`, `save_grid(G(z), path)`; not a bare `G(z)`
                    forward = stmt, forward_call
            if not converts:
                converts = any(call_name(call) in DETACHING_METHODS or self._data_helper(call, ctx) for call in calls) \
                    or self._reads_data_of_attached(stmt, ctx)
            if self._lets_graph_out(stmt, ctx, calls):
                return None
        if forward is None or not (converts or type(forward[0]) is cst.Expr):
            return None  # results read as data, or handed straight to a call that keeps nothing
        stmt = forward[0]
        targets = stmt.targets if type(stmt) is cst.Assign else [stmt] if type(stmt) is not cst.Expr else []
        keys = {key for target in targets for key in mentioned_keys(target.target)}
        if keys & self.analysis.backpropagated_keys(block[0][1].scope) and self._read_after(keys, block):
            return None  # what it computes goes into a loss later
        return forward

    def _data_helper(self, call, ctx: Context) -> bool:
        """``self.to_data(fake)``: a function of the project, handed an attached tensor, that
        returns values none of which is attached (``x.data.numpy()``) and trains nothing."""
        analysis = self.analysis
        if not call.args or not any(analysis.is_attached(arg.value, ctx) for arg in call.args):
            return False
        callee = analysis.called_function(call, ctx)
        return callee is not None and callee.kind == "function" and callee.owner.returns_attached(callee) is None \
            and bool(callee.owner.returned_return_values(callee)) and not callee.owner.backpropagates(callee)

    def _read_after(self, keys: set, block) -> bool:
        """Is one of ``keys`` read after the block, in its loop, before the loop binds it again?
        A training step that reuses the names (``relations = relation_network(...)``) binds
        them afresh and reads nothing the block computed."""
        analysis = self.analysis
        first_ctx = block[0][1]
        loop = first_ctx.loop
        if loop is None:
            return True
        end = max(ctx.order for _, ctx in block)
        statements = [(stmt, ctx) for stmt, ctx in analysis.statements_in_loop(loop)
                      if ctx.scope is first_ctx.scope and type(stmt).__name__ not in COMPOUND_STATEMENTS]
        # after the block, then the next iteration from the top of the body up to the block
        order = [item for item in statements if item[1].order > end] + \
            [item for item in statements if item[1].order < first_ctx.order]
        pending = set(keys)
        for stmt, _ in order:
            if not pending:
                break
            read = set(mentioned_keys(stmt.value)) if type(stmt) in (cst.Assign, cst.AugAssign, cst.AnnAssign) \
                and stmt.value is not None else set(mentioned_keys(stmt))
            if pending & read:
                return True
            if type(stmt) in (cst.Assign, cst.AnnAssign):
                targets = stmt.targets if type(stmt) is cst.Assign else [stmt]
                pending -= {key for target in targets for key in mentioned_keys(target.target)}
        return bool(pending)

    def _autofix(self, scope, regions, stmt) -> Fix | None:
        """Unsafe (code after the forward might need its graph): decorate a function that is
        evaluation from its first statement to its end with ``@torch.no_grad()``; else wrap
        the outermost loop of the evaluation region around the forward (or the forward's
        statement itself) in ``with torch.no_grad():``."""
        reference = torch_reference(self.analysis)
        ctx = next((stmt_ctx for found, stmt_ctx in scope.statements if found is stmt), None)
        if reference is None or ctx is None or ctx.scope is not scope:
            return None
        torch, imports = reference
        first = scope.statements[0][1].order - 1
        region = next(((start, end) for start, end in regions if start < ctx.order < end), None)
        if region is None:
            return None
        analysis = self.analysis
        if analysis.statement_backpropagates(stmt, ctx):
            return None
        if (scope.kind == "function" and region == (first, math.inf) and type(scope.node) is cst.FunctionDef
                and scope.node.asynchronous is None  # torch.no_grad() cannot decorate a coroutine
                and not analysis.backpropagates(scope)):
            return Fix.unsafe(f"Decorate `{scope.name}` with `@{torch}.no_grad()`",
                              InsertBefore(scope.node, f"@{torch}.no_grad()"), *imports)
        # never a loop that also trains (an eval region opened before the training loop)
        loop = next((loop for loop in ctx.visible_loops if loop.scope is scope and loop.start > region[0]
                     and not analysis.loop_backpropagates(loop)), None)
        if loop is not None:
            return Fix.unsafe(f"Wrap the evaluation loop in `with {torch}.no_grad():`",
                              Wrap(loop.node, loop.node, f"with {torch}.no_grad():"), *imports)
        if any(analysis.loop_backpropagates(loop) for loop in ctx.visible_loops):
            return None  # the forward's result may feed the training around it: no guessing
        return Fix.unsafe(f"Wrap `{self.code(stmt, 30)}` in `with {torch}.no_grad():`",
                          Wrap(stmt, stmt, f"with {torch}.no_grad():"), *imports)

    # ------------------------------------------------------------------ evaluation regions

    def _regions(self, scope) -> list[tuple[int, float]]:
        """The evaluation regions of a scope (memoised): its own (see ``_eval_regions``), and
        its whole body when an evaluation region of a step loop calls it (``model.eval()``
        then ``for batch in loader: self._eval_step(batch)``): per-step evaluation code."""
        memo = scope._memo
        if "tl201_regions" not in memo:
            memo["tl201_regions"] = []  # recursion guard
            start = scope.statements[0][1].order - 1 if scope.statements else 0
            regions = list(self._switch_regions(scope))
            if self._called_from_evaluation(scope) or (not regions and self._loop_helper_of_evaluation(scope)):
                regions.append((start, math.inf))
            elif not regions and self._runs_in_inference_script(scope):
                regions.append((start, math.inf))
                memo["tl201_strict"] = True  # only the models' own forward passes count
            memo["tl201_regions"] = regions
        return memo["tl201_regions"]

    def _inference_only_file(self) -> bool:
        """Does nothing in the file train: no ``backward``, optimizer, ``.step(``, ``fit`` or
        ``train(``, and it is not a test? Then its top level (an inference or generation script)
        cannot use the graph of a forward pass it runs: nothing it computes is returned."""
        analysis = self.analysis
        if analysis.is_test_module or analysis.source is None:
            return False
        memo = analysis.module_scope._memo
        if "tl201_trains_nothing" not in memo:
            memo["tl201_trains_nothing"] = not mentions_training(analysis.source)
        return memo["tl201_trains_nothing"]

    def _runs_in_inference_script(self, scope) -> bool:
        """The top level of a file that trains nothing, or a function it calls (``main()``),
        unless the function's name says it measures or builds (a profiler's dry run)."""
        if not self._inference_only_file() or not self._runs_top_level_code():
            return False
        if scope.kind == "module":
            return True
        if scope.kind != "function" or (DRY_RUN_WORDS | BUILDER_WORDS | GRADIENT_WORDS) & {
                word.lower() for word in name_words(scope.name)}:
            return False
        # (a call after the top level's own `model.eval()` is reported there, at the call), or a
        # function such a function calls (`main()` runs `detector(img)`: its `__call__`)
        if any(self._regions(caller_ctx.scope) and caller_ctx.scope._memo.get("tl201_strict")
               for _, caller_ctx in self.analysis.callers_of(scope) if caller_ctx.scope is not scope):
            return True
        if scope.name != "__call__" or scope.parent is None or scope.parent.kind != "class":
            return False
        # `detector = OpenDetector(cfg)` … `detector(img_path=file)` in the script's `main()`
        return any(self._script_callee(call, ctx) is scope
                   for caller in [self.analysis.module_scope, *self.analysis.scopes.values()]
                   if caller is not scope and caller.kind != "class" and self._regions(caller) and caller._memo.get("tl201_strict")
                   for stmt, ctx in caller.statements if ctx.scope is caller
                   for call in self.analysis.calls_in(stmt))

    def _script_callee(self, call, ctx: Context):
        """The function a call runs: a function of the project, or the ``__call__`` of an
        instance of a class of this file (``detector(img)``)."""
        analysis = self.analysis
        callee = analysis.called_function(call, ctx)
        if callee is not None or type(call.func) not in (cst.Name, cst.Attribute):
            return callee
        class_scope = analysis.instance_class(call.func, ctx, foreign=False)
        return analysis.method_of(class_scope, "__call__", set(), foreign=False) if class_scope is not None else None

    def _runs_loaded_weights(self, call) -> bool:
        """Is the model the call runs one loaded from saved weights (``torch.jit.load(path)``,
        ``torch.load``, ``from_pretrained``, ``load_model``), as an inference wrapper's is?"""
        func = call.func
        receivers = [func] + ([func.value] if type(func) is cst.Attribute else [])
        analysis = self.analysis
        for receiver in receivers:
            key = dotted_name(receiver)
            if key is None:
                continue
            scopes = [s for s in analysis.scopes.values() if s.kind == "class"] if key.startswith("self.") else \
                [analysis.module_scope, *[s for s in analysis.scopes.values() if s.kind != "class"]]
            bindings = [b for s in scopes for b in s.bindings.get(key, ())]
            if not bindings:
                continue
            for binding in bindings:
                value = strip_pass_through(binding.value) if binding.kind == "assign" and binding.value is not None else None
                if type(value) is cst.Call:
                    qualified = analysis.qualified_name(value.func) or dotted_name(value.func) or ""
                    if qualified in LOADING_FACTORIES or LOADING_NAME_RE.search(last_part(qualified)):
                        return True
            return False
        return False

    def _synthetic_inputs(self, call, ctx: Context) -> bool:
        """Are the call's inputs made up on the spot (``torch.randn(1, 3, 224, 224)``,
        ``torch.ones(4, 200)``, names bound to them): a model file's smoke test under ``if
        __name__ == "__main__":`` or a timing loop, not inference on data?"""
        arguments = [arg.value for arg in call.args]
        return bool(arguments) and all(self._made_up(argument, ctx, 0) for argument in arguments)

    def _made_up(self, expr, ctx: Context, depth: int, seen: frozenset = frozenset()) -> bool:
        expr = strip_pass_through(expr)
        while type(expr) is cst.Call:
            if type(expr.func) is cst.Attribute and expr.func.attr.value in (
                    "cuda", "to", "float", "half", "double", "long", "cpu", "unsqueeze", "view", "reshape", "requires_grad_",
                    "detach"):
                expr = expr.func.value
            elif last_part(dotted_name(expr.func) or "") == "Variable" and expr.args:
                expr = strip_pass_through(expr.args[0].value)  # `Variable(torch.randn(...))`, the old wrapper
            else:
                break
        kind = type(expr)
        if kind in (cst.Integer, cst.Float, cst.SimpleString) or kind is cst.Name and expr.value in ("None", "True", "False"):
            return True
        if kind in (cst.Tuple, cst.List):
            return all(self._made_up(element.value, ctx, depth + 1, seen) for element in expr.elements)
        if kind is cst.Call:
            qualified = self.analysis.qualified_name(expr.func) or ""
            if "dummy" in {word.lower() for word in name_words(last_part(qualified or dotted_name(expr.func) or ""))}:
                return True  # `dummy_eval(encoder, size)`, `make_dummy_input(cfg)`
            if qualified.rpartition(".")[0] != "torch" and not self._is_model_run(expr, ctx):
                return False  # (a model run on made-up inputs makes up its outputs too)
            if last_part(qualified) in SYNTHETIC_FACTORIES:
                return True
            # `torch.log(torch.randn(...))`: a torch function of made-up tensors
            positional = [arg.value for arg in expr.args if arg.keyword is None]
            return bool(positional) and depth < 6 and all(self._made_up(arg, ctx, depth + 1, seen) for arg in positional)
        if kind is cst.BinaryOperation:  # `[498] * 15`
            return self._made_up(expr.left, ctx, depth + 1, seen) and self._made_up(expr.right, ctx, depth + 1, seen)
        if kind is cst.Name and expr.value in seen:
            return True  # `x = block(x)`: made up if what it started from is
        if kind is cst.Name and depth < 6:
            if self._filled_with_data(expr.value, ctx.scope):
                return False  # `x = torch.zeros(3, h, w)` then `x[:] = img`: a buffer for real data
            # every binding of the name (a loop may rebind it from the model's outputs)
            bindings = ctx.scope.bindings.get(expr.value, ())
            return bool(bindings) and all(
                binding.kind == "assign" and binding.value is not None
                and self._made_up(binding.value, binding.ctx, depth + 1, seen | {expr.value}) for binding in bindings)
        return False

    def _filled_with_data(self, name: str, scope) -> bool:
        """Is the tensor ``name`` written into in place in the scope (``x[:, :, :] = img``,
        ``x.copy_(img)``) with something other than a constant?"""
        analysis = self.analysis
        for stmt, ctx in scope.statements:
            if ctx.scope is not scope:
                continue
            if type(stmt) is cst.Assign and not self._made_up(stmt.value, ctx, 6) and any(
                    type(target.target) is cst.Subscript and dotted_name(target.target.value) == name
                    for target in stmt.targets):
                return True
            for call in analysis.calls_in(stmt):
                func = call.func
                if type(func) is cst.Attribute and func.attr.value == "copy_" and dotted_name(func.value) == name:
                    return True
        return False

    def _runs_top_level_code(self) -> bool:
        """Does the file do something when run: a loop at its top level, or an ``if __name__ ==
        "__main__":`` block (a model file of definitions alone does nothing)?"""
        analysis = self.analysis
        memo = analysis.module_scope._memo
        if "tl201_top_level_code" not in memo:
            memo["tl201_top_level_code"] = False  # recursion guard: a model run asks again
            memo["tl201_top_level_code"] = analysis.may_contain("__main__") or any(
                type(stmt) in (cst.For, cst.While) or self._top_level_run(stmt, ctx)
                for stmt, ctx in analysis.module_scope.statements if ctx.scope is analysis.module_scope)
        return memo["tl201_top_level_code"]

    def _top_level_run(self, stmt, ctx: Context) -> bool:
        """A plain script's statement that does the work: parses its command line
        (``args = parser.parse_args()``) or runs a model known by evidence."""
        if type(stmt) not in (cst.Assign, cst.AnnAssign, cst.Expr):
            return False
        return any(type(call.func) is cst.Attribute and call.func.attr.value == "parse_args"
                   or self._is_model_run(call, ctx) for call in self.analysis.calls_in(stmt))

    def _reported_in_script(self, call, ctx: Context) -> bool:
        """Does the call run a function of this file that is inference code of a script and is
        reported at its own forward pass (a detector's ``__call__`` run by ``main()``)?"""
        if not ctx.scope._memo.get("tl201_strict"):
            return False
        callee = self._script_callee(call, ctx)
        if callee is None or callee is ctx.scope or callee.owner is not self.analysis or callee.kind != "function":
            return False
        regions = self._regions(callee)
        return bool(regions) and callee._memo.get("tl201_strict", False) \
            and self._first_forward(callee, regions, strict=True) is not None

    def _loop_helper_of_evaluation(self, scope) -> bool:
        """A helper that loops over batches running the model (``_inner_loop(dl, ...)``) and that
        only evaluation regions of this module call, with grad on (``self.model.eval()`` then
        ``self._inner_loop(dl_val, ...)`` in both ``_val_loop`` and ``_test_loop``): its own
        loop is the evaluation code, reported once there rather than at each call."""
        memo = scope._memo
        if "tl201_loop_helper" not in memo:
            memo["tl201_loop_helper"] = False  # recursion guard
            memo["tl201_loop_helper"] = self._find_loop_helper_of_evaluation(scope)
        return memo["tl201_loop_helper"]

    def _find_loop_helper_of_evaluation(self, scope) -> bool:
        analysis = self.analysis
        if scope.kind != "function" or scope.grad is not GradMode.ENABLED or scope.name.startswith("__"):
            return False
        callers = [(call, ctx) for call, ctx in analysis.callers_of(scope) if ctx.scope is not scope]
        if not callers or not all(
                ctx.grad is GradMode.ENABLED and not _repeats(ctx, analysis)
                and any(start < ctx.order < end for start, end in self._switch_regions(ctx.scope))
                for _, ctx in callers):
            return False
        # (on its object's own model: a helper handed the model, `run_epoch(model, loader)`,
        # serves its callers, and is reported at the call that hands it an evaluated model)
        return not analysis.backpropagates(scope) and any(
            _repeats(inner_ctx, analysis) and inner_ctx.grad is GradMode.ENABLED and self._is_forward(inner, inner_ctx)
            and not self._runs_parameter(inner, scope)
            for inner, inner_ctx, _ in analysis.scope_calls(scope))

    @staticmethod
    def _runs_parameter(call, scope) -> bool:
        """Is what the call runs (``model(x)``, ``model.predict(x)``) a parameter of the function?"""
        root = (dotted_name(call.func) or "").partition(".")[0]
        return root != "self" and any(binding.kind == "param" for binding in scope.bindings.get(root, ()))

    def _switch_regions(self, scope) -> list[tuple[int, float]]:
        """The evaluation regions a function's own switches and name make (see
        ``_eval_regions``), without asking its callers (memoised)."""
        memo = scope._memo
        if "tl201_switch_regions" not in memo:
            node = scope.node if scope.kind == "function" else None
            start = scope.statements[0][1].order - 1 if scope.statements else 0
            memo["tl201_switch_regions"] = self._eval_regions(node, scope, start)
        return memo["tl201_switch_regions"]

    def _called_from_evaluation(self, scope) -> bool:
        loop = self.analysis.loops.get(id(scope.node)) if scope.kind == "function" else None
        if loop is None or loop.implicit is None or not self.analysis.is_step_loop(loop):
            return False
        for _, caller_ctx in loop.callers:
            caller = caller_ctx.scope
            if caller_ctx.grad is not GradMode.ENABLED or caller.grad is not GradMode.ENABLED:
                continue
            if any(start < caller_ctx.order < end for start, end in self._regions(caller)):
                return True
        return False

    def _eval_regions(self, node, scope, start_order: int) -> list[tuple[int, float]]:
        """(after, until) order ranges of the function's statements that are evaluation code:
        from ``model.eval()`` to that model's ``.train()``, and for a function named like
        evaluation, from its start to the first ``.train()``."""
        switches = []  # (order, "eval" / "train", receiver key)
        switch_statements = scope._memo.setdefault("tl201_switches", {})
        for stmt, stmt_ctx in scope.statements:
            if stmt_ctx.scope is not scope:
                continue
            switch = _mode_switch(stmt) or _training_flag_set(stmt)
            if switch is not None and not self._not_a_model(switch[1], stmt_ctx) and not self._posterior_mode_file():
                switches.append((stmt_ctx.order, switch[0], dotted_name(switch[1])))
                switch_statements[stmt_ctx.order] = stmt
        regions = []
        if node is not None and self._name_says_evaluation(node.name.value) and (
            not self._is_module_method(scope) or self._loops_over_batches(scope) or self._loops_own_forward(scope)
        ):
            regions.append((start_order, next((order for order, mode, _ in switches if mode == "train"), math.inf)))
        for index, (start, mode, key) in enumerate(switches):
            if mode == "eval":
                end = next(
                    (order for order, later, later_key in switches[index + 1:]
                     if later == "train" and key is not None and later_key == key),
                    math.inf,
                )
                regions.append((start, end))
        return regions

    def _posterior_mode_file(self) -> bool:
        """Does the file import GPyTorch or BoTorch? There ``model.eval()`` switches a Gaussian
        process from its prior to its posterior, which acquisition functions differentiate
        (``self.eval(); mvn = self(X)`` in a model's ``posterior``): not evaluation code."""
        memo = self.analysis.module_scope._memo
        if "tl201_posterior_mode" not in memo:
            memo["tl201_posterior_mode"] = any(
                target.lstrip(".").partition(".")[0] in ("gpytorch", "botorch") for target in self.analysis.imports.values())
        return memo["tl201_posterior_mode"]

    def _not_a_model(self, receiver, ctx: Context) -> bool:
        """``dataset.eval()`` (Avalanche's transform groups) and ``optimizer.eval()`` (schedule-free
        optimizers) switch modes of things that are not models."""
        key = dotted_name(receiver)
        if key is not None and DATA_WORDS.intersection(name_words(last_part(key))):
            return True
        return self.analysis.is_optimizer(receiver, ctx)

    def _name_says_evaluation(self, name: str) -> bool:
        words = {word.lower() for word in self.options.get("eval-function-words") or DEFAULT_EVAL_WORDS}
        if self.analysis.is_test_module:
            words -= {"test", "testing"}  # pytest tests, not evaluation loops
        return any(word in words for word in name_words(name))

    def _is_module_method(self, scope) -> bool:
        """A method of an ``nn.Module`` subclass (``predict_masks``, ``_predict_once``) is a piece
        of the model's forward computation whatever its name: its caller owns the grad mode."""
        parent = scope.parent
        return parent is not None and parent.kind == "class" and self.analysis.is_module_class(parent.node.name)

    # ------------------------------------------------------------------ graphs built and discarded

    def _discarded_forward(self, scope):
        memo = scope._memo
        if "tl201_discarded" not in memo:
            memo["tl201_discarded"] = None  # recursion guard
            memo["tl201_discarded"] = self._find_discarded_forward(scope)
        return memo["tl201_discarded"]

    def _find_discarded_forward(self, scope):
        """Inference code, whatever its name: a function that runs a forward pass with grad
        enabled, never backpropagates, turns the results into data (``.detach()``, ``.numpy()``,
        ``.tolist()``, ``.item()``) and lets no attached value out (not returned, yielded, stored
        in ``self`` or a container, or handed to a call that may keep it). The graph autograd
        records is thrown away unused: ``Predictor.__call__``, ``get_embedding(img)``,
        ``act(obs)``. (statement, call) of its first forward pass, or None."""
        analysis = self.analysis
        if scope.kind != "function" or analysis.is_test_module:
            return None
        name = scope.name
        if name.startswith("__") and name != "__call__":
            return None  # __init__ (shape probes), __getitem__ and the like
        if self._is_module_method(scope) and not (self._loops_over_batches(scope) or self._generates(scope)):
            return None  # a piece of the model's own forward computation
        if not (analysis.may_contain(".detach(") or analysis.may_contain(".numpy(")
                or analysis.may_contain(".tolist(") or analysis.may_contain(".item(")
                or analysis.may_contain(".data") or analysis.may_contain("int(") or analysis.may_contain("float(")
                or self._name_says_evaluation(name) or _names_generation(name) or self._inference_only_file()):
            return None
        # first the cheap, local part: a forward pass of the model itself and results made data
        forward = None
        forward_calls = []
        converts = False
        own = [(stmt, ctx) for stmt, ctx in scope.statements
               if ctx.scope is scope and ctx.grad is GradMode.ENABLED and type(stmt).__name__ not in COMPOUND_STATEMENTS]
        for stmt, ctx in own:
            calls = analysis.calls_in(stmt)
            # the model itself, not a helper that may differentiate its result
            forwards = [call for call in calls if self._is_module_call(call, ctx) or self._runs_model_method(call, ctx)
                        or self._forward_helper(call, ctx)]
            forward_calls += forwards
            # `model(example)` alone is a dry run (warm-up, tracing): its result is not used
            if forward is None and forwards and not (type(stmt) is cst.Expr and stmt.value is forwards[0]):
                forward = stmt, forwards[0]
            if not converts and (any(call_name(call) in DETACHING_METHODS or _number_of(call) or call_name(call) in IMAGE_SINKS
                                     for call in calls)
                                 or self._reads_data_of_attached(stmt, ctx)):
                converts = True
        if forward is None or not (converts or self._name_says_evaluation(name) or _names_generation(name) or (
                self._inference_only_file() and not DRY_RUN_WORDS & {word.lower() for word in name_words(name)}
                and self._runs_loaded_weights(forward[1]))):
            return None  # an inference function says so by its results, its name, or its file and its model
        if self._grad_unknown(scope):
            return None
        if (analysis.backpropagates(scope) or analysis.steps_optimizer(scope)) \
                and not self._trains_only_elsewhere(scope, forward, own):
            return None
        words = {word.lower() for word in name_words(name)}
        if GRADIENT_WORDS & words:
            return None  # computes gradients on purpose (per-sample gradients, saliency)
        if BUILDER_WORDS & words:
            return None  # a one-off forward pass that learns shapes while building a model
        if analysis.returns_attached(scope) is not None:
            return None
        callers = analysis.callers_of(scope)
        if callers and all(
            (_repeats(caller_ctx, analysis) or self._loops_forward(call, caller_ctx))
            and any(start < caller_ctx.order < end for start, end in self._regions(caller_ctx.scope))
            for call, caller_ctx in callers
        ):
            return None  # only evaluation loops call it: reported there, at the calls
        if any(analysis.may_contain(token) for token in DELIBERATE_GRAD_TOKENS) and (
            DELIBERATE_GRAD_RE.search(analysis.module.code_for_node(scope.node))
            or scope.parent is not None and scope.parent.kind == "class"
            # the class freezes parameters or takes input gradients; its other methods' own
            # backward() (an agent's learning step) says nothing about this one
            and _class_takes_gradients(analysis.module.code_for_node(scope.parent.node))
            and self._joined_to_gradient_methods(scope)
        ):
            return None  # the grad mode is deliberate
        if any(self._lets_graph_out(stmt, ctx, analysis.calls_in(stmt)) for stmt, ctx in own):
            return None
        # (helpers handed the forward's results, bound to locals: `x = self.step(x, eps)`)
        helpers = [call for stmt, ctx in own if type(stmt) is cst.Assign and type(stmt.value) is cst.Call
                   and all(type(target.target) is cst.Name for target in stmt.targets)
                   for call in [stmt.value] if (callee := analysis.called_function(call, ctx)) is not None
                   and callee.owner.returns_attached(callee)]
        if self._returns_forward_result(scope, forward_calls + helpers):
            return None  # `elbo = log_p - log_q; return elbo`: the caller gets the graph
        if analysis.may_contain(".numpy(") and self._numpy_of_output(forward[0], own):
            return None  # `.numpy()` raises on a tensor that requires grad: the code says no graph is built
        return forward

    def _joined_to_gradient_methods(self, scope) -> bool:
        """Is the method joined, through calls on ``self``, to a method of its class that takes
        gradients of inputs or turns ``requires_grad`` on (an attack's ``perturb`` calling
        ``self.predict``)? A WGAN-GP trainer's ``calculate_gradient_penalty`` says nothing about
        its ``generate_img`` sampler, which neither calls it nor is called by it. True when the
        class's code shows no such method on its own (the gradients are taken at class level)."""
        class_scope = scope.parent
        analysis = self.analysis
        memo = class_scope._memo
        if "tl201_gradient_joined" not in memo:
            calls: dict[str, set[str]] = {}
            methods = {}
            for method, _, call in analysis.class_calls(class_scope):
                methods[method.name] = method
                func = call.func
                if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
                    calls.setdefault(method.name, set()).add(func.attr.value)
            for method in analysis.scopes.values():
                if method.kind == "function" and method.parent is class_scope:
                    methods.setdefault(method.name, method)
            codes = {name: analysis.module.code_for_node(method.node) for name, method in methods.items()}
            taking = {name for name, code in codes.items() if _class_takes_gradients(code)}
            # attributes made to require grad there (`self.x.requires_grad_()`): what reads them joins
            attributes = {subject for name in taking for subject in _gradient_subjects(codes[name])
                          if (subject or "").startswith("self.")}
            taking |= {name for name, code in codes.items()
                       if any(re.search(re.escape(attribute) + r"\b", code) for attribute in attributes)}
            down, up = set(taking), set(taking)
            changed = bool(taking)
            while changed:  # what they call, and what calls them, transitively (not a caller's other callees)
                changed = False
                for name, callees in calls.items():
                    if name in down and not callees <= down:
                        down |= callees
                        changed = True
                    if name not in up and callees & up:
                        up.add(name)
                        changed = True
            memo["tl201_gradient_joined"] = (down | up) if taking else None
        joined = memo["tl201_gradient_joined"]
        return joined is None or scope.name in joined

    def _trains_only_elsewhere(self, scope, forward, own) -> bool:
        """Does the function train only through a call (an agent's ``step()`` that runs
        ``self.train()`` once its buffer is full), with no ``backward()`` or optimizer step of
        its own, while what its forward pass binds is only ever read as data? Then the
        training runs on other tensors, and the rollout's graph is thrown away."""
        analysis = self.analysis
        if analysis.makes_call_itself(scope, "backward") or analysis.makes_call_itself(scope, "step"):
            return False
        stmt, _ = forward
        if type(stmt) is not cst.Assign:
            return False
        names = {node.value for target in stmt.targets for node in iter_expression_nodes(target.target)
                 if type(node) is cst.Name}
        index = next((i for i, (other, _) in enumerate(own) if other is stmt), None)
        if not names or index is None:
            return False
        after = [(other, ctx) for other, ctx in own[index + 1:] if not analysis.exclusive_branches(stmt, other, scope)]
        return self.analysis.only_read_as_data(names, after, helpers=True)

    def _forward_helper(self, call, ctx: Context) -> bool:
        """A method of the same object that runs the model and hands back its output with the
        graph on every path (``self.produce_action(state)`` returning ``self.actor(state)``'s
        sampled action), and never backpropagates: a forward pass one call away."""
        func = call.func
        if type(func) is not cst.Attribute or dotted_name(func.value) != "self":
            return False
        callee = self.analysis.called_function(call, ctx)
        if callee is None or callee.kind != "function" or callee.grad is not GradMode.ENABLED:
            return False
        owner = callee.owner
        if owner.returns_attached(callee) != "always" or owner.backpropagates(callee) or owner.steps_optimizer(callee):
            return False
        if owner is self.analysis and self._loop_helper_of_evaluation(callee) and self._reports_itself(callee):
            return False  # reported once, at the forward pass of its own loop
        rule = self if owner is self.analysis else type(self)(owner, [], self.options)
        return rule._runs_forward(callee, 1)

    def _returns_forward_result(self, scope, forward_calls) -> bool:
        """Is a value the function returns attached once its forward calls count as attached?
        Asked where attachment alone cannot say: the forward runs a method of an object
        torchlint cannot type (``samples, log_q = self.q.sample_and_log_prob(n)``, then
        ``return log_p - log_q``). ``.tolist()``, ``argmax`` or a comparison on the way still
        hand back data."""
        analysis = self.analysis
        return any(analysis.attached_if_calls_are(forward_calls, value, ctx)
                   for value, ctx in analysis.returned_return_values(scope))

    def _reads_data_of_attached(self, stmt, ctx: Context) -> bool:
        """``save_image(fake.data, path)``: the statement takes ``.data`` of an attached tensor."""
        analysis = self.analysis
        if not analysis.may_contain(".data"):
            return False
        return any(
            node.attr.value == "data" and analysis.is_attached(node.value, ctx)
            for expr in analysis.own_expressions(stmt) for node in collect_nodes(expr, cst.Attribute, [])
        )

    def _numpy_of_output(self, forward_stmt, statements) -> bool:
        """Is a name the forward statement binds turned into an array with ``.numpy()`` without
        being detached first (``out.squeeze().cpu().numpy()``)? That raises when the output
        requires grad, so the program shows that the model builds no graph here."""
        if type(forward_stmt) is not cst.Assign:
            return False
        value = forward_stmt.value
        while type(value) is cst.Call and type(value.func) is cst.Attribute:
            if value.func.attr.value in DETACHING_METHODS:
                return False  # `action = self.actor(obs).detach()`: what it binds has no graph
            value = value.func.value
        bound = set()
        for target in forward_stmt.targets:
            nodes = [target.target] if type(target.target) is cst.Name else \
                [element.value for element in getattr(target.target, "elements", ())]
            bound.update(node.value for node in nodes if type(node) is cst.Name)
        for stmt, ctx in statements:
            for call in self.analysis.calls_in(stmt):
                if call_name(call) != "numpy" or type(call.func) is not cst.Attribute:
                    continue
                receiver = conversion_source(call.func.value, GRAPH_KEEPING_CONVERSIONS)
                if type(receiver) is cst.Name and receiver.value in bound:
                    binding = self.analysis.lookup(receiver.value, ctx)
                    if binding is not None and binding.stmt is forward_stmt:
                        return True  # the forward's own output, not `score = score.data.cpu()`
        return False

    def _lets_graph_out(self, stmt, ctx: Context, calls) -> bool:
        """Does the statement keep an attached value beyond the call: yield it, store it into an
        attribute, a subscript or a container, or hand it to a call that may keep it?"""
        analysis = self.analysis
        kind = type(stmt)
        if kind in (cst.Assign, cst.AugAssign, cst.AnnAssign) and stmt.value is not None:
            targets = [t.target for t in stmt.targets] if kind is cst.Assign else [stmt.target]
            if any(not _local_target(t) for t in targets) and analysis.is_attached(stmt.value, ctx):
                return True
        for expr in analysis.own_expressions(stmt):
            for node in iter_expression_nodes(expr):
                if type(node) is cst.Yield and node.value is not None and type(node.value) is not cst.From \
                        and analysis.is_attached(node.value, ctx):
                    return True
        for call in calls:
            arguments = [arg.value for arg in call.args]
            if not arguments or not any(analysis.is_attached(argument, ctx) for argument in arguments):
                continue
            name = call_name(call) or ""
            if name in CONTAINER_WRITES and self._local_container(call.func, ctx):
                continue  # scores.append(out): a list of this call whose graphs end with it
            callee = analysis.called_function(call, ctx)
            if callee is None:  # a call it cannot read: its name says whether it may keep the value
                if name in CONTAINER_WRITES or KEEPING_CALL_RE.search(name):
                    return True
                continue
            if callee.owner.backpropagates(callee) or callee.owner.kept_parameters(callee):
                return True  # the value goes on to a project function that trains on it or keeps it
            if callee.owner.returns_attached(callee) and not (
                    kind is cst.Assign and stmt.value is call and all(type(t.target) is cst.Name for t in stmt.targets)
                    and self._returns_only_data(ctx.scope)):
                return True  # passed on, and what comes back is not a local (whether that is returned is asked apart)
        return False

    def _returns_only_data(self, scope) -> bool:
        """Does every ``return`` of the function hand back data cut from the graph
        (``return xt.detach().cpu()``, or a name last bound so), or nothing?"""
        analysis = self.analysis
        for value, ctx in analysis.returned_return_values(scope):
            if type(value) is cst.Name:
                bindings = analysis.reaching_bindings(value.value, ctx)
                if not bindings or not all(binding.kind == "assign" and not binding.element and binding.value is not None
                                           and (_detaching_chain(binding.value)
                                                or self._holds_only_data(value.value, binding.value, scope))
                                           for binding in bindings):
                    return False
            elif not _detaching_chain(value):
                return False
        return True

    def _holds_only_data(self, name: str, value, scope) -> bool:
        """Is ``name`` a list built of detached values (``x_by_t = [xt.detach().cpu()]``) that
        the function only ever appends detached values to (``x_by_t.append(xt.detach().cpu())``)?"""
        if type(value) not in (cst.List, cst.Tuple) or not all(_detaching_chain(element.value) for element in value.elements):
            return False
        for stmt, ctx in scope.statements:
            if ctx.scope is not scope:
                continue
            for call in self.analysis.calls_in(stmt):
                func = call.func
                if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == name \
                        and func.attr.value in CONTAINER_WRITES and not all(_detaching_chain(arg.value) for arg in call.args):
                    return False
        return True

    def _generates(self, scope) -> bool:
        """A module's ``predict(prefix, n)`` / ``generate(...)`` / ``sample(...)`` decoding step
        by step: named like inference or generation, with a loop that runs the module's own
        layers. Its user calls it for results, not as part of a forward pass."""
        if not (_names_generation(scope.name) or self._name_says_evaluation(scope.name)):
            return False
        analysis = self.analysis
        forward = analysis.method_of(scope.parent, "forward", set())
        if forward is not None and any(
            type(call.func) is cst.Attribute and type(call.func.value) is cst.Name and call.func.value.value == "self"
            and call.func.attr.value == scope.name
            for call, _, _ in forward.owner.scope_calls(forward)
        ):
            return False  # the module's forward runs it: `forward(x)` returning `self.predict(x)`
        return any(
            _repeats(ctx, analysis) and any(
                type(call.func) is cst.Attribute and type(call.func.value) is cst.Name and call.func.value.value == "self"
                or type(call.func) is cst.Name and call.func.value == "self"
                or self._is_module_call(call, ctx)
                for call in analysis.calls_in(stmt))
            for stmt, ctx in scope.statements if ctx.scope is scope and type(stmt).__name__ not in COMPOUND_STATEMENTS
        )

    def _local_container(self, func, ctx: Context) -> bool:
        """``scores`` in ``scores.append(out)``: a list or dict made empty in this function and
        neither returned (undetached), yielded nor stored anywhere."""
        analysis = self.analysis
        receiver = func.value if type(func) is cst.Attribute else None
        if type(receiver) is not cst.Name:
            return False
        scope = ctx.scope
        bindings = scope.bindings.get(receiver.value, ())
        if not bindings or any(b.kind != "assign" or not empty_container(b.value) for b in bindings):
            return False
        if receiver.value in analysis.returned_keys(scope):
            return False
        return not any(  # handed on: self.out = scores, other.append(scores), log(scores)
            receiver.value in mentioned_keys(value)
            for stmt, stmt_ctx in scope.statements if stmt_ctx.scope is scope
            for value in _kept_values(stmt)
        )

    def _loops_over_batches(self, scope) -> bool:
        """Does the function loop over batches itself (``for batch in batches:``)? A module's
        ``predict(sentences)`` that does is an inference API its user calls, not a piece of the
        model's forward pass."""
        analysis = self.analysis
        return any(
            loop.implicit is None and loop.scope is scope and analysis.header_names_steps(loop)
            for loop in analysis.loops.values()
        )

    def _loops_own_forward(self, scope) -> bool:
        """Does a module's method run the whole model (``self(x)``, ``self.forward(x)``) on
        every iteration of a loop of its own, and return no graph? ``evaluate(self, images)``
        then is an evaluation loop over data, not a piece of the forward computation."""
        analysis = self.analysis
        if analysis.returns_attached(scope):
            return False
        for stmt, ctx in scope.statements:
            if ctx.scope is not scope or ctx.loop is None or ctx.loop.implicit is not None:
                continue
            for call in analysis.calls_in(stmt):
                func = call.func
                if (type(func) is cst.Name and func.value == "self") or (
                        type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self"
                        and func.attr.value == "forward"):
                    return True
        return False

    def _trains(self, scope, region) -> bool:
        """Does any statement in the region (nested functions included, for optimizer closures)
        backpropagate or step an optimizer?"""
        after, until = region
        switch = scope._memo.get("tl201_switches", {}).get(after)
        for stmt, ctx in scope.statements:
            if not after < ctx.order < until:
                continue
            if type(stmt) is cst.FunctionDef:
                inner = self.analysis.scopes.get(id(stmt))
                if inner is not None and self._trains(inner, (-1, math.inf)):
                    return True
                continue
            if switch is not None and self.analysis.exclusive_branches(switch, stmt, scope):
                continue  # `if is_train: loss.backward()` against `else: model.eval()`
            if any(self._is_training_call(call, ctx) or self._callee_trains(call, ctx)
                   for call in self.analysis.calls_in(stmt)):
                return True
        return False

    def _callee_trains(self, call, ctx: Context) -> bool:
        """Does the module-defined function this call runs backpropagate or step an optimizer,
        with the arguments given? A ``backward()`` under ``if train:`` does not run for
        ``run_epoch(loader, train=False)``."""
        analysis = self.analysis
        callee = analysis.called_function(call, ctx)
        if callee is None or callee is ctx.scope:
            return False
        if not (analysis.backpropagates(callee) or analysis.steps_optimizer(callee)):
            return False
        for inner_call, inner_ctx, inner_callee in analysis.scope_calls(callee):
            training = self._is_training_call(inner_call, inner_ctx) or (
                inner_callee is not None and inner_callee is not callee
                and (analysis.backpropagates(inner_callee) or analysis.steps_optimizer(inner_callee))
            )
            if training and analysis.may_run_for(call, callee, inner_call, ctx):
                return True
        return False

    def _is_training_call(self, call, ctx: Context) -> bool:
        analysis = self.analysis
        func = call.func
        name = call_name(call)
        if name in BACKWARD_FUNCTIONS or name == "optimizer_step" or analysis.scales_and_steps(call, ctx):
            return True  # (`loss_scaler(loss, optimizer)` backpropagates and steps)
        if name == "grad":
            return analysis.qualified_name(func) == "torch.autograd.grad"
        if name == "step" and type(func) is cst.Attribute:
            # opt.step(closure) counts too: the closure backpropagates
            return analysis.is_optimizer(func.value, ctx) or analysis.stepped_optimizer(call, ctx) is not None
        return False

    # ------------------------------------------------------------------ forward passes

    def _grad_unknown(self, scope, depth: int = 0) -> bool:
        """Is the grad mode the function runs under owned by code this module cannot see? A
        framework's override (``Predictor.inference``, called by a base class elsewhere), or a
        function called only by such functions. Code that trains (``fit``) runs with grad on. Then only its own loops of module calls count
        (a helper's forward, or repetition by a caller's loop, could be under the framework's
        ``no_grad``)."""
        if scope.kind != "function" or depth > MAX_CALL_DEPTH:
            return False
        memo = scope._memo
        if "tl201_unknown" not in memo:
            memo["tl201_unknown"] = False  # recursion guard
            analysis = self.analysis
            if analysis.backpropagates(scope) or analysis.steps_optimizer(scope):
                unknown = False  # training code: grad is on wherever it is called from
            elif analysis.overrides_external_hook(scope):
                unknown = True
            else:
                callers = [ctx.scope for _, ctx in analysis.callers_of(scope) if ctx.scope is not scope]
                unknown = bool(callers) and all(self._grad_unknown(caller, depth + 1) for caller in callers)
            memo["tl201_unknown"] = unknown
        return memo["tl201_unknown"]

    def _first_forward(self, scope, regions, strict: bool = False):
        """The first forward pass in a loop or comprehension, with grad enabled, inside a region
        that does not train: (statement, call) or None. ``strict``: only module calls inside
        the function's own loops count."""
        trains: dict[tuple, bool] = {}
        per_step = None
        outside_loops = None  # the first found outside the function's own loops
        for stmt, ctx in scope.statements:
            if ctx.grad is not GradMode.ENABLED or type(stmt) is cst.FunctionDef:
                continue
            inside = [region for region in regions if region[0] < ctx.order < region[1]]
            if not inside:
                continue
            # a loop, or a function that runs once per step (a loop of this module or a
            # framework calls it for every batch)
            repeated = _repeats(ctx, self.analysis)
            if not repeated and not strict:
                if per_step is None:  # the same for every statement of the function
                    per_step = self._runs_per_step(scope)
                repeated = per_step or self._switched_and_called_in_loop(scope, inside)
            calls = self.analysis.calls_in(stmt) if repeated else _comprehension_calls(stmt, self.analysis)
            is_forward = self._is_forward if not strict else self._is_model_run if scope._memo.get("tl201_strict") \
                else self._runs_module_or_handed_one
            # (made-up inputs: a script's smoke test, or a constructor's shape probe, `x = block(x)`
            # on a dummy tensor to size the next layer)
            call = next((call for call in calls if is_forward(call, ctx) and not self._reported_in_script(call, ctx)
                         and not ((scope._memo.get("tl201_strict") or scope.name == "__init__")
                                  and self._synthetic_inputs(call, ctx))), None)
            if call is None and not strict:
                # a helper that loops over the batches itself: `run_epoch(model, val_data)`
                call = next((call for call in self.analysis.calls_in(stmt) if self._loops_forward(call, ctx)), None)
            if call is None and not repeated and not strict:
                # `model.eval()` then `output = model(img)`: an inference entry point, run once
                call = self._switched_model_run(stmt, ctx, scope, inside)
            if call is None and not repeated and scope._memo.get("tl201_strict") and type(stmt) in (cst.Assign, cst.AnnAssign):
                # `output = model(img)` once, in a script that trains nothing: the output, kept
                # until the script ends, keeps the activations of the whole forward pass
                call = next((call for call in self.analysis.calls_in(stmt) if self._is_model_run(call, ctx)
                             and not self._synthetic_inputs(call, ctx)), None)
            if call is None or self._output_backpropagated(stmt, call, ctx):
                continue  # (`pred = model(x)` … `loss(pred).backward()`: the graph is used, planning by backprop)
            for region in inside:
                if region not in trains:
                    trains[region] = self._trains(scope, region)
                if not trains[region]:
                    if ctx.visible_loops:
                        return stmt, call
                    # a forward of the function's own loop further on, if any, is the place to
                    # report (`for batch in gen: pred = unet(batch)` after a one-off encoder)
                    outside_loops = outside_loops or (stmt, call)
                    break
            if repeated and ctx.visible_loops and _detached_on_the_spot(stmt, call, self.analysis) and not any(
                    self.analysis.loop_backpropagates(loop) for loop in ctx.visible_loops):
                # `feats[k] = encoder(x).cpu().detach()` in a loop that trains nothing: no later
                # training in the region can use a graph that is cut where it is made
                return stmt, call
        return outside_loops

    def _output_backpropagated(self, stmt, call, ctx: Context) -> bool:
        """Does a ``backward()`` of the function, one that runs whenever the statement does,
        run on something computed from the names it binds (actions optimised through a model
        in eval mode by planning)? A ``backward()`` only under a test the statement is not
        under (``if train:``) says nothing of an evaluation pass."""
        if type(stmt) not in (cst.Assign, cst.AnnAssign) or _detached_on_the_spot(stmt, call, self.analysis):
            return False
        targets = [target.target for target in stmt.targets] if type(stmt) is cst.Assign else [stmt.target]
        names = []
        for target in targets:
            elements = [element.value for element in target.elements] if type(target) in (cst.Tuple, cst.List) else [target]
            if not all(type(element) is cst.Name for element in elements):
                return False  # (`features[k] = ...`: a store, not the planning shape)
            names += [element.value for element in elements]
        analysis = self.analysis
        scope = ctx.scope
        if not set(names) & analysis.backpropagated_keys(scope):
            return False
        tests = {id(test) for test, _ in analysis.branch_tests(stmt, scope)}
        loop = ctx.visible_loops[-1] if ctx.visible_loops else None
        return any(
            call_name(inner) in BACKWARD_FUNCTIONS
            and all(id(test) in tests for test, _ in analysis.branch_tests(other, scope))
            for other, other_ctx in scope.statements
            # later in the same pass: the backward of this very forward pass
            if other_ctx.scope is scope and type(other) is cst.Expr and other_ctx.order > ctx.order
            and (other_ctx.visible_loops[-1] if other_ctx.visible_loops else None) is loop
            for inner in analysis.calls_in(other))

    def _switched_model_run(self, stmt, ctx: Context, scope, regions):
        """The forward call of a statement that runs, once, the very model the function itself
        switched to ``.eval()`` at the start of the region (``model.eval()`` … ``output =
        model(img)``; ``self.eval()`` … ``x = self.forward(x)``), and whose result is used: an
        inference entry point (``predict``, ``do_detect``). A bare ``model(dummy)`` is a dry run;
        tests, and functions named for exporting, tracing or profiling, are left alone."""
        analysis = self.analysis
        collected = type(stmt) is cst.Expr and type(stmt.value) is cst.Call and type(stmt.value.func) is cst.Attribute \
            and stmt.value.func.attr.value in CONTAINER_WRITES and type(stmt.value.func.value) is cst.Name
        if not (type(stmt) in (cst.Assign, cst.AnnAssign) or collected) or analysis.is_test_module:
            # (`return model.log_prob(x)` after `.eval()` hands the graph on: an API, maybe
            # differentiated; `results.extend(model.test_performance(it))` keeps what it runs)
            return None
        if scope.kind != "function" and not (scope.kind == "module" and self._runs_in_inference_script(scope)):
            return None  # (a top level that trains nothing: `model.eval()` then `out = model(img)` in a demo script)
        switches = scope._memo.get("tl201_switches", {})
        switched = set()
        for start, _ in regions:
            switch = (_mode_switch(switches[start]) or _training_flag_set(switches[start])) if start in switches else None
            if switch is not None and switch[0] == "eval":
                key = dotted_name(strip_pass_through(switch[1]))
                if key is not None:
                    switched.add(key)
        if not switched:
            return None
        names = [scope.name] + ([scope.parent.name] if scope.parent is not None and scope.parent.kind == "class" else [])
        if any(DRY_RUN_WORDS & set(name_words(name)) for name in names) or self._asks_input_gradients(scope):
            return None  # derivatives of the outputs (a PINN's operators) may need the graph
        for call in analysis.calls_in(stmt):
            func = call.func
            target = func.value if type(func) is cst.Attribute and (
                func.attr.value == "forward" or self._runs_model_method(call, ctx)) else func
            key = dotted_name(target)
            if key is not None and any(key_within(key, model) for model in switched) \
                    and self._is_forward(call, ctx) and not (scope.kind == "module" and self._synthetic_inputs(call, ctx)):
                return call  # the model, or one of its parts (`model.eval()` then `model.encoder(x)`)
        return None

    def _asks_input_gradients(self, scope) -> bool:
        """Does the code ask for gradients of inputs or outputs: the function; for a method, a
        sibling method that returns something or asks it of an attribute (a PINN's operator
        differentiating the network's output at ``self.x``, made ``requires_grad_()`` in
        ``on_init``); for a script's top level, the whole file? A GAN trainer's gradient
        penalty on a local in ``optimize_parameters``, a training step, says nothing about its
        ``test()`` (memoised)."""
        memo = scope._memo
        if "tl201_input_gradients" not in memo:
            analysis = self.analysis
            if scope.kind == "module":
                found = analysis.source is not None and INPUT_GRADIENT_RE.search(analysis.source) is not None
            else:
                # a nested function: the closures around it (ZCS inputs made `stop_gradient=False` by a sibling)
                outer = scope
                while outer.parent is not None and outer.parent.kind == "function":
                    outer = outer.parent
                found = INPUT_GRADIENT_RE.search(analysis.module.code_for_node(outer.node)) is not None
                class_scope = scope.parent if scope.parent is not None and scope.parent.kind == "class" else None
                if not found and class_scope is not None:
                    returns = bool(analysis.returned_return_values(scope))
                    for method in analysis.scopes.values():
                        if method is scope or method.kind != "function" or method.parent is not class_scope:
                            continue
                        code = analysis.module.code_for_node(method.node)
                        if INPUT_GRADIENT_RE.search(code) is None:
                            continue
                        if returns or SELF_REQUIRES_GRAD_RE.search(code) or not analysis.backpropagates(method):
                            found = True
                            break
            memo["tl201_input_gradients"] = found
        return memo["tl201_input_gradients"]

    def _runs_per_step(self, scope, depth: int = 0) -> bool:
        """Is the function a framework's per-step hook, or called with grad enabled for every
        batch by a loop of this module (directly or through other per-step functions)? Then
        each of its forward passes repeats."""
        if self._called_from_evaluation(scope):
            return True
        analysis = self.analysis
        loop = analysis.loops.get(id(scope.node)) if scope.kind == "function" else None
        if loop is None or loop.implicit is None or not analysis.is_step_loop(loop):
            return False
        if not loop.callers:
            return True  # a framework hook
        return depth < MAX_CALL_DEPTH and any(
            caller_ctx.grad is GradMode.ENABLED and caller_ctx.scope.grad is GradMode.ENABLED
            and not self._grad_unknown(caller_ctx.scope) and (
                _repeats(caller_ctx, analysis)
                or (caller_ctx.scope is not scope and self._runs_per_step(caller_ctx.scope, depth + 1))
            )
            for _, caller_ctx in loop.callers
        )

    def _switched_and_called_in_loop(self, scope, regions) -> bool:
        """Does the function switch a model to ``.eval()`` itself (the region starts at that
        call, not at the function's name) and get called, with grad enabled, from inside a loop
        that goes over steps or batches, even every few steps (``if step % 100 == 0:
        sample_images()``)?"""
        switches = scope._memo.get("tl201_switches", {})
        if scope.kind != "function" or not any(start in switches for start, _ in regions):
            return False
        analysis = self.analysis
        return any(
            caller_ctx.grad is GradMode.ENABLED and caller_ctx.scope.grad is GradMode.ENABLED
            and any(analysis.is_step_loop(loop) for loop in caller_ctx.visible_loops)
            and analysis.grad_enabled(caller_ctx)
            for _, caller_ctx in analysis.callers_of(scope)
        )

    def _is_forward(self, call, ctx: Context) -> bool:
        """A module call (``model(x)``, ``model.forward(x)``), or a call of a module-defined
        helper that runs one without training (``self.infer(x)``, ``self._predict(batch)``)."""
        if self._is_module_call(call, ctx):
            return True
        callee = self.analysis.called_function(call, ctx)
        if callee is None:
            return self._runs_model_method(call, ctx) or self._passed_instance_runs_forward(call, ctx)
        if callee is ctx.scope or callee.grad is not GradMode.ENABLED:
            return False
        if self.analysis.has_no_body(callee):
            return self._template_runs_forward(callee)
        if self._callee_trains(call, ctx) or self._reported_inside(callee) \
                or (self._loop_helper_of_evaluation(callee) and self._reports_itself(callee)):
            return False
        return self._runs_forward(callee, 0) or self._forward_through_arguments(call, ctx, callee)

    def _looped_forward_through_arguments(self, call, ctx: Context, callee) -> str | None:
        """The forward pass (its code) that the helper runs in a loop on a model this call hands
        it, with grad enabled; None if there is none."""
        for inner, inner_ctx in self._forwards_through_arguments(call, ctx, callee):
            if _repeats(inner_ctx, callee.owner):
                return callee.owner.module.code_for_node(inner)[:50]
        return None

    def _forward_through_arguments(self, call, ctx: Context, callee) -> bool:
        return next(iter(self._forwards_through_arguments(call, ctx, callee)), None) is not None

    def _forwards_through_arguments(self, call, ctx: Context, callee):
        """The helper's calls (and contexts) that run a model this call hands it: in
        ``eval_model(model, data)``, ``model.predict(batch)``, with ``model`` here an instance of a project
        class whose ``predict`` runs a network with grad enabled and trains nothing; or
        ``run(net_g, loader)`` calling ``net(x)``, with ``net_g`` a module by evidence here."""
        passed = passed_arguments(call, callee)
        if not passed:
            return
        analysis, owner = self.analysis, callee.owner
        for inner, inner_ctx, _ in owner.scope_calls(callee):
            func = inner.func
            receiver = func.value if type(func) is cst.Attribute else func
            if inner_ctx.grad is not GradMode.ENABLED or type(receiver) is not cst.Name:
                continue
            argument = passed.get(receiver.value)
            binding = owner.lookup(receiver.value, inner_ctx)
            if argument is None or binding is None or binding.kind != "param" or binding.ctx.scope is not callee:
                continue
            if type(func) is cst.Name:
                if LOSS_NAME_RE.search(receiver.value) or LOSS_NAME_RE.search(dotted_name(argument) or "") \
                        or (analysis.constructed_layer(argument, ctx) or "").endswith("Loss"):
                    continue  # `criterion(output, target)`: a loss module, not the model
                if analysis.is_module_by_evidence(argument, ctx) or self._model_part(argument, ctx):
                    yield inner, inner_ctx
                continue
            class_scope = analysis.instance_class(argument, ctx)
            method = None if class_scope is None else class_scope.owner.method_of(class_scope, func.attr.value, set())
            if method is None or method.grad is not GradMode.ENABLED:
                continue
            method_owner = method.owner
            if method_owner.backpropagates(method) or method_owner.steps_optimizer(method) or self._reports_itself(method):
                continue  # (a method of this file reported at its own forward pass: once)
            rule = self if method_owner is analysis else type(self)(method_owner, [], self.options)
            if rule._runs_forward(method, 1):
                yield inner, inner_ctx

    def _runs_module_or_handed_one(self, call, ctx: Context) -> bool:
        """A module call, or a helper of the project that calls, with grad enabled, a model this
        call hands it (``avalanche_forward(self.model.feature_extractor, x, t)``): a forward
        pass whatever grad mode the helper's own caller is in."""
        if self._is_module_call(call, ctx):
            return True
        if not call.args:
            return False
        callee = self.analysis.called_function(call, ctx)
        return callee is not None and callee is not ctx.scope and callee.kind == "function" \
            and callee.grad is GradMode.ENABLED and not self._callee_trains(call, ctx) \
            and not self._reported_inside(callee) and self._forward_through_arguments(call, ctx, callee)

    def _model_part(self, expr, ctx: Context) -> bool:
        """``model.feature_extractor`` handed to a helper that calls it: an attribute of a module
        by evidence that ``nn.Module`` does not define is a submodule or a method of the model."""
        return type(expr) is cst.Attribute and expr.attr.value not in NN_MODULE_API \
            and not LOSS_NAME_RE.search(expr.attr.value) and self.analysis.is_module_by_evidence(expr.value, ctx)

    def _passed_instance_runs_forward(self, call, ctx: Context) -> bool:
        """``trainer.predict(batch)`` with ``trainer`` a parameter that every caller in this file
        fills with an instance of a project class (``Trainer(...)``) whose ``predict`` runs a
        model with grad enabled."""
        func = call.func
        analysis = self.analysis
        if type(func) is not cst.Attribute or type(func.value) is not cst.Name:
            return False
        binding = analysis.lookup(func.value.value, ctx)
        scope = ctx.scope
        if binding is None or binding.kind != "param" or binding.ctx.scope is not scope:
            return False
        methods = []
        for caller, caller_ctx in analysis.callers_of(scope):
            argument = passed_arguments(caller, scope).get(func.value.value)
            class_scope = None if argument is None else analysis.class_named(argument.func) \
                if type(argument) is cst.Call else analysis.instance_class(argument, caller_ctx)
            if class_scope is None:
                methods = []
                break
            methods.append(class_scope.owner.method_of(class_scope, func.attr.value, set()))
        if not methods:
            # callers that give no class away (`trainer = Trainer.load(path)`): the project
            # classes the parameter is named for (`trainer`: `Trainer`, `GraphTrainer`)
            methods = analysis.methods_of_classes_named_like(func.value.value, func.attr.value)
        if not methods:
            return False
        for method in methods:
            if method is None or method.grad is not GradMode.ENABLED or self._reports_itself(method):
                return False
            owner = method.owner
            rule = self if owner is analysis else type(self)(owner, [], self.options)
            if not rule._runs_forward(method, 1) or owner.backpropagates(method) or owner.steps_optimizer(method):
                return False
        return True

    def _reports_itself(self, method) -> bool:
        """Is a function of this module reported at its own forward pass (an evaluation region
        of its own, ``self.model.eval()`` then ``self.model(batch)``)? Then not at its calls too."""
        if method.owner is not self.analysis:
            return False
        if self._reported_inside(method):
            return True
        regions = self._regions(method)
        strict = self._grad_unknown(method) or method._memo.get("tl201_strict", False)
        return bool(regions) and self._first_forward(method, regions, strict=strict) is not None

    def _reported_inside(self, callee) -> bool:
        """Is the module-defined function inference code reported at its own forward pass
        (see ``_find_discarded_forward``)? Its callers then need no report of their own."""
        return callee.owner is self.analysis and (
            self._discarded_forward(callee) is not None or self._discarded_in_loop(callee) is not None
            or self._volatile_forward(callee) is not None)

    def _is_model_run(self, call, ctx: Context) -> bool:
        """A model called, or one of its methods that runs it (``acmodel.get_action(obs)``),
        the model known by evidence, not by its name alone (``net.grow_network(r)`` is a method)."""
        if self._runs_model_method(call, ctx):
            return True
        target = call.func
        if type(target) is cst.Attribute and target.attr.value in FORWARD_SPELLINGS:
            target = target.value
        target = target.value if type(target) is cst.Subscript else target
        key = dotted_name(target)
        words = name_words(last_part(key)) if key is not None else []
        if FROZEN_COPY_WORDS.intersection(words):
            rest = "_".join(word for word in words if word not in FROZEN_COPY_WORDS)
            if rest and is_conventional_module_name(rest) and self.analysis.lookup(key.partition(".")[0], ctx) is not None:
                return True  # `target_critic(s, a)`, `teacher_model(x)`: a network copy, named so
        if not self._is_module_call(call, ctx):
            return False
        return self.analysis.is_module_by_evidence(target, ctx)

    def _runs_model_method(self, call, ctx: Context) -> bool:
        """A model's method that torchlint cannot read but whose name says it runs the model
        (``model.predict(x)``, ``self.model.evaluation_step(batch)``), on a receiver that is a
        model by evidence, not by name alone (sklearn's ``model.predict`` is no forward pass)."""
        func = call.func
        if type(func) is not cst.Attribute or func.attr.value.startswith("_"):
            return False  # a library's private method may well disable grad inside
        words = {word.lower() for word in name_words(func.attr.value)}
        # a name that does not say it computes (`model.validation_step(batch)`; also `generate` and
        # `encode`, which Hugging Face's and sentence-transformers' run without grad): only a
        # project's method, read, counts
        # (`model.feature_list(x)`, `net.extract_features(x)`; not `get_feature_dim()`)
        extracts = bool(words & FEATURE_WORDS) and not NOT_FORWARD_METHOD_RE.match(func.attr.value)
        readable_only = not COMPUTING_METHOD_WORDS & words and func.attr.value.lower() not in COMPUTING_METHOD_NAMES \
            and not extracts
        if words & {"register", "hook", "hooks", "noise"}:
            return False  # `layer.register_forward_hook(fn)`, `actor.sample_noise()` (new noisy-layer draws) run nothing
        methods = self._readable_methods(func, ctx)
        if readable_only and not methods:
            return False
        if methods:  # the project's own classes: what their method does decides
            if any(method.owner is self.analysis and self._reports_itself(method) for method in methods):
                return False  # reported at its own forward pass in this file, once
            return any(
                method.grad is GradMode.ENABLED and not method.owner.backpropagates(method)
                and (self if method.owner is self.analysis else type(self)(method.owner, [], self.options))._runs_forward(method, 1)
                for method in methods
            )
        if self.analysis.is_module_by_evidence(func.value, ctx):
            return True
        # in a script that trains nothing (not a library's backend), a network loaded from saved weights
        # (`vqvae = load_vqvae(ckpt)`, then `vqvae.decode(codes)`); not a tokenizer's `decode`
        receiver = dotted_name(func.value) or ""
        return self._inference_only_file() and self._runs_top_level_code() and not receiver.startswith("self.") \
            and not NOT_A_NETWORK_WORDS & set(name_words(last_part(receiver))) and self._runs_loaded_weights(call)

    def _readable_methods(self, func, ctx: Context) -> list:
        """The project-defined methods ``receiver.method`` may run: the one of the receiver's
        class when its binding says (``model = Model(...)``, ``self.text_encoder =
        TextEmbed(...)``); for a parameter, those of the project classes it is named for
        (``model``: ``Model``, ``SimpleModel``). Empty when unknown."""
        analysis = self.analysis
        class_scope = analysis.instance_class(func.value, ctx)
        if class_scope is None and type(func.value) is cst.Name and func.value.value in ("self", "cls"):
            class_scope = ctx.scope.class_scope  # the object's own method (`self.infer_modalities(p)`)
        if class_scope is not None:
            method = class_scope.owner.method_of(class_scope, func.attr.value, set())
            return [method] if method is not None else []
        if type(func.value) is cst.Name:
            binding = analysis.lookup(func.value.value, ctx)
            if binding is not None and binding.kind == "param":
                annotated = self._annotated_class(binding)
                if annotated is not None:  # `model: CrossEncoder`: that class's method
                    method = annotated.owner.method_of(annotated, func.attr.value, set())
                    return [method] if method is not None else []
                return analysis.methods_of_classes_named_like(func.value.value, func.attr.value)
        return []

    def _annotated_class(self, binding):
        """The project class a parameter is annotated with (``model: CrossEncoder``), or None."""
        param = parameter_node(binding)
        if param is None or param.annotation is None or type(param.annotation.annotation) not in (cst.Name, cst.Attribute):
            return None
        return self.analysis.class_named(param.annotation.annotation)

    def _template_runs_forward(self, callee) -> bool:
        """An abstract method its subclasses implement (``self._get_losses(batch)``,
        ``self.score_t(batch)``): its name, or the overrides of its module's subclasses
        (``predict_w.apply_model(model, x)``), say whether it runs the model."""
        owner = callee.owner
        overrides = owner.overriding_methods(callee)
        if any(self._reports_itself(method) for method in overrides):
            return False  # an override reported at its own forward pass: once
        return bool(COMPUTING_METHOD_WORDS & {word.lower() for word in name_words(callee.name)}) or any(
            method.grad is GradMode.ENABLED and not owner.backpropagates(method) and self._runs_forward(method, 1)
            for method in overrides)

    def _runs_forward(self, scope, depth: int) -> bool:
        """Does the function run a module call with grad enabled, itself or through the
        module-defined functions it calls with grad enabled (to ``MAX_CALL_DEPTH``)?"""
        memo = scope._memo
        if "tl201_forward" in memo:
            return memo["tl201_forward"]
        memo["tl201_forward"] = False  # recursion resolves to "no"
        result = depth <= MAX_CALL_DEPTH and any(
            inner_ctx.grad is GradMode.ENABLED and (
                self._is_module_call(inner, inner_ctx) or self._runs_model_method(inner, inner_ctx)
                or (callee is not None and callee is not scope and callee.grad is GradMode.ENABLED
                    and (self._runs_forward(callee, depth + 1)
                         or callee.owner.has_no_body(callee) and self._template_runs_forward(callee)))
            )
            for inner, inner_ctx, callee in self.analysis.scope_calls(scope)
        )
        memo["tl201_forward"] = result
        return result

    def _loops_forward(self, call, ctx: Context) -> bool:
        """Does the call run a module-defined function that loops over forward passes with
        grad enabled, without training, and that is not evaluation code reported on its own?"""
        analysis = self.analysis
        callee = analysis.called_function(call, ctx)
        if callee is None or callee is ctx.scope or callee.grad is not GradMode.ENABLED:
            return False
        if self._callee_trains(call, ctx) or self._reported_inside(callee):
            return False
        if not any(
            _repeats(inner_ctx, analysis) and inner_ctx.grad is GradMode.ENABLED and self._is_forward(inner, inner_ctx)
            for inner, inner_ctx, _ in analysis.scope_calls(callee)
        ):
            return False
        own = self._regions(callee)
        strict = self._grad_unknown(callee) or callee._memo.get("tl201_strict", False)
        return not own or self._first_forward(callee, own, strict=strict) is None

    def _is_module_call(self, call, ctx: Context) -> bool:
        target = call.func
        if type(target) is cst.Attribute and target.attr.value in FORWARD_SPELLINGS:
            target = target.value  # `model.forward(x)`, `self.__call__(x)`
        if call.args and type(target) in (cst.Attribute, cst.Name) \
                and self.analysis.qualified_name(target) in DATA_PARALLEL_FUNCTIONS:
            target = call.args[0].value  # `nn.parallel.data_parallel(netG, inputs, gpus)` runs netG
        name = dotted_name(target.value if type(target) is cst.Subscript else target)
        if name is None or LOSS_NAME_RE.search(last_part(name)):
            return False
        verb = NOT_FORWARD_METHOD_RE.match(last_part(name))
        if verb is not None and 0 < verb.end() < len(last_part(name)):
            return False  # `core.read_model(path)`, `load_model(cfg)`: named for what it makes, not a module
        return self.analysis.is_module(target, ctx) and not self._is_predicting_wrapper(name, ctx) \
            and not self._switched_off(name) and self.analysis.constructed_layer(target, ctx) not in PARAMETERLESS_LAYERS

    def _switched_off(self, key: str) -> bool:
        """Does the file switch the model's parameters out of requiring grad, and never back on
        (``for k, v in model.named_parameters(): v.requires_grad = False``)? Its forward passes on
        data then record no graph."""
        analysis = self.analysis
        switches = analysis._requires_grad_switches()
        root = ".".join(key.split(".")[:2]) if key.startswith("self.") else key.partition(".")[0]
        # `model.requires_grad = False` sets an attribute of the module and freezes nothing
        no_ops = {ctx.order for stmt, ctx in analysis.statements_by_type.get("Assign", ())
                  for target in stmt.targets if type(target.target) is cst.Attribute
                  and target.target.attr.value == "requires_grad" and dotted_name(target.target.value) == root}
        found = [enabled for name, entries in switches.items() if name == root
                 for ctx, enabled in entries if ctx.order not in no_ops]
        return bool(found) and not any(found)

    def _is_predicting_wrapper(self, key: str, ctx: Context) -> bool:
        """Is ``key`` bound to an Ultralytics ``YOLO(...)``-style wrapper, whose call predicts
        under ``inference_mode`` inside the library?"""
        analysis = self.analysis
        bindings = [analysis.lookup(key, ctx)]
        if key.startswith("self.") and ctx.scope.class_scope is not None:
            bindings += ctx.scope.class_scope.bindings.get(key, ())
        for binding in bindings:
            if binding is None or binding.kind != "assign" or type(binding.value) is not cst.Call:
                continue
            qualified = analysis.qualified_name(binding.value.func) or ""
            if qualified.startswith("ultralytics") and last_part(qualified) in PREDICTING_WRAPPERS:
                return True
        return False


def _mode_switch(stmt):
    """("eval" or "train", receiver) for a statement that calls ``model.eval()`` /
    ``model.train()`` (``train(False)`` is ``eval()``), also as ``model = model.eval()`` or
    ``model.eval().to(device)``; None for any other statement."""
    if type(stmt) not in (cst.Expr, cst.Assign, cst.AnnAssign):
        return None
    value = stmt.value
    while type(value) is cst.Call and type(value.func) is cst.Attribute:
        method = value.func.attr.value
        receiver = strip_pass_through(value.func.value)
        if method == "train":
            flag = value.args[0].value if value.args else None
            if flag is None or (type(flag) is cst.Name and flag.value == "True"):
                return "train", receiver
            if type(flag) is cst.Name and flag.value == "False":
                return "eval", receiver
            return None  # train(training): the mode depends on the caller
        if method == "eval" and not value.args:  # eval(...) with arguments is not a module's
            return "eval", receiver
        value = value.func.value
    return None


def _training_flag_set(stmt):
    """("eval" or "train", receiver) for ``self.training = False`` / ``True``: a module setting
    its own mode flag by hand (its layers keep theirs), as an inference method may."""
    if type(stmt) is not cst.Assign or len(stmt.targets) != 1:
        return None
    target, value = stmt.targets[0].target, stmt.value
    if type(target) is not cst.Attribute or target.attr.value != "training" or type(value) is not cst.Name \
            or value.value not in ("True", "False"):
        return None
    return ("train" if value.value == "True" else "eval"), target.value


def _comprehension_calls(stmt, analysis) -> list:
    """Calls evaluated once per element of a comprehension in the statement (the outermost
    iterable, evaluated once, left out)."""
    calls = []
    for expr in analysis.own_expressions(stmt):
        for node in iter_expression_nodes(expr):
            if type(node).__name__ not in COMPREHENSIONS:
                continue
            skipped = {id(inner) for inner in iter_expression_nodes(node.for_in.iter)}
            calls.extend(
                inner for inner in iter_expression_nodes(node)
                if type(inner) is cst.Call and id(inner) not in skipped
            )
    return calls



def _names_generation(name: str) -> bool:
    """``generate``, ``sample_images``, ``greedy_decode``: a name that starts with producing
    samples (not ``compute_per_sample_grad``)."""
    words = name_words(name)
    return bool(words) and words[0].lower() in GENERATION_WORDS


def _kept_values(stmt):
    """Expressions the statement stores beyond a local name: values assigned to attributes or
    items, and arguments of calls that are not torch functions or tensor methods."""
    kind = type(stmt)
    if kind in (cst.Assign, cst.AnnAssign, cst.AugAssign) and stmt.value is not None:
        targets = [t.target for t in stmt.targets] if kind is cst.Assign else [stmt.target]
        if any(type(target) is not cst.Name for target in targets):
            yield stmt.value
    value = getattr(stmt, "value", None)
    if value is None:
        return
    for node in iter_expression_nodes(value):
        if type(node) is cst.Call:
            name = dotted_name(node.func) or ""
            if name.startswith(("torch.", "F.")) or name in ("len", "sum", "max", "min", "zip", "enumerate", "range"):
                continue
            if type(node.func) is cst.Attribute and type(node.func.value) is cst.Call:
                continue  # torch.cat(scores, 1).argmax(1): a tensor method
            yield from (arg.value for arg in node.args)


def _detaching_chain(expr) -> bool:
    """``x.detach().cpu()``, ``out.cpu().numpy()``, ``loss.item()``: a chain of calls one of
    which cuts the graph."""
    while type(expr) is cst.Call and type(expr.func) is cst.Attribute:
        if expr.func.attr.value in DETACHING_METHODS:
            return True
        expr = expr.func.value
    return False


# Calls that turn a tensor into an image on screen or on disk: data, whatever graph it had.
IMAGE_SINKS = frozenset({"to_pil_image", "save_image", "imwrite", "imsave"})


def _number_of(call) -> bool:
    """``int(logits.argmax())``, ``float(score)``: a tensor made a Python number."""
    return type(call.func) is cst.Name and call.func.value in ("int", "float") and len(call.args) == 1


def _local_target(target) -> bool:
    """A name, or a tuple/list unpacking into names only (``_, h = rnn(x)``): nothing stored
    beyond the function."""
    kind = type(target)
    if kind is cst.Name:
        return True
    if kind in (cst.Tuple, cst.List):
        return all(_local_target(element.value) for element in target.elements)
    return False


# Words of a model's method that runs part of it to extract features.
FEATURE_WORDS = frozenset({"feature", "features"})
# At most this many evaluation blocks of one script's top level are reported.
MAX_SCRIPT_REPORTS = 5
# Ways of running a module's forward pass by name.
FORWARD_SPELLINGS = frozenset({"forward", "__call__"})
DATA_PARALLEL_FUNCTIONS = frozenset({"torch.nn.parallel.data_parallel", "torch.nn.parallel.data_parallel.data_parallel"})


def _thread_target(call, analysis):
    """The function a call starts in another thread: ``Thread(target=f)``,
    ``threading.Thread(target=self.run)``, ``executor.submit(f, ...)``; None otherwise."""
    func = call.func
    name = last_part(analysis.qualified_name(func) or dotted_name(func) or "")
    if name == "Thread":
        target = next((arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == "target"), None)
    elif name == "submit" and type(func) is cst.Attribute and call.args and call.args[0].keyword is None:
        target = call.args[0].value
    else:
        return None
    return target if type(target) in (cst.Name, cst.Attribute) else None


def _repeats(ctx: Context, analysis) -> bool:
    """Is the statement inside a for / while loop that really repeats (not a retry loop that
    breaks out after its first successful pass)?"""
    return any(
        not analysis.loop_runs_once(loop) and not _is_retry_loop(loop.node) for loop in ctx.visible_loops
    )


EVALUATION_DATA_WORDS = frozenset({"val", "valid", "validation", "test", "testing", "eval", "evaluation", "dev"})


def _iterates_evaluation_data(loop) -> bool:
    """``for x, y in valid_loader:``, ``for batch in test_batches:``: a loop over data whose
    name says it is for validation or testing."""
    node = loop.node
    if type(node) is not cst.For:
        return False
    return any(EVALUATION_DATA_WORDS & {word.lower() for word in name_words(last_part(key))}
               for key in mentioned_keys(node.iter))


def _is_retry_loop(node) -> bool:
    """``while retries:`` / ``for attempt in range(3):``: the body runs again only to retry."""
    header = node.test if type(node) is cst.While else node.target
    return any(
        type(item) is cst.Name and RETRY_RE.search(item.value) for item in iter_expression_nodes(header)
    )


def _mode_argument(arg) -> bool:
    """``False`` / ``train=False`` / ``"valid"``: an argument that may set a run's mode (not
    ``bias=False``, ``inplace=True``)."""
    value = arg.value
    if type(value) is cst.SimpleString:
        return value.value.strip("'\"").lower() in MODE_NAMES
    if type(value) is not cst.Name or value.value not in ("True", "False"):
        return False
    return arg.keyword is None or bool(MODE_KEYWORD_RE.search(arg.keyword.value))


def _statement_in(scope, call, analysis):
    """The statement of ``scope`` whose own expressions contain ``call``."""
    for stmt, ctx in scope.statements:
        if ctx.scope is scope and any(inner is call for inner in analysis.calls_in(stmt)):
            return stmt
    return scope.node


def _detached_on_the_spot(stmt, call, analysis) -> bool:
    """Is the forward call's result detached (or made data) by the expression that calls it
    (``encoder(x).to("cpu").detach()``, ``model(x).argmax(1).tolist()``)?"""
    for outer in analysis.calls_in(stmt):
        if call_name(outer) not in DETACHING_METHODS or type(outer.func) is not cst.Attribute:
            continue
        if conversion_source(outer.func.value, CONVERSIONS_KEEPING_DATA, stop=call) is call:
            return True
    return False


def _gradient_subjects(code: str):
    """What each ``requires_grad`` switch or autograd call in the code is about: the receiver
    (``self.x.requires_grad_()``), the name a tensor made with ``requires_grad=True`` is bound
    to, or None (``autograd.grad(...)``, a subject unknown)."""
    for match in CLASS_DELIBERATE_GRAD_RE.finditer(code):
        subject = match.group("receiver")
        if subject is None and match.group(0).startswith("requires_grad"):
            # `self.log_alpha = torch.zeros(1, requires_grad=True)`: the name it is bound to
            line_start = code.rfind("\n", 0, match.start()) + 1
            bound = ASSIGNED_NAME_RE.match(code, line_start)
            subject = bound.group(1) if bound else None
        yield subject


def _class_takes_gradients(code: str) -> bool:
    """Does a class's code turn requires_grad on for something other than parameters, or
    call into autograd (input gradients, Jacobians)? A tensor handed to an optimizer
    (SAC's ``self.log_alpha``) is a parameter whatever its name."""
    for subject in _gradient_subjects(code):
        if subject is None:
            return True
        if PARAMETER_WORDS.intersection(name_words(last_part(subject.rstrip("]").split("[")[0]))):
            continue
        if not re.search(OPTIMIZED_RE_TEMPLATE % re.escape(subject.split("[")[0]), code):
            return True
    return False
