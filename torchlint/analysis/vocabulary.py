"""The words of PyTorch code torchlint knows: names of detaching, differentiable and in-place
methods, module and optimizer naming conventions, framework hooks."""

from __future__ import annotations

import enum
import re



class GradMode(enum.Enum):
    ENABLED = "enabled"
    DISABLED = "disabled"  # no_grad, inference_mode, set_grad_enabled(False), Lightning eval hooks
    UNKNOWN = "unknown"  # set_grad_enabled(<expression>): rules stay quiet


# Substrings a file must contain for any value in it to count as graph-attached. Rules whose
# findings need an attached value use these as their prefilter tokens.
ATTACHMENT_TOKENS = (
    "torch", "nn.", "F.", "backward", "Module", "Model", "Net", "Loss", "Encoder", "Decoder",
    "Classifier",
    "model", "net", "criterion", "loss", "classifier", "encoder", "decoder", "generator",
    "discriminator", "backbone", "critic", "actor", "head", "teacher", "student",
)

# Names that conventionally hold a module or a loss function: calling them is a forward pass.
# The first group also counts as a suffix (text_encoder, ema_model, q_net); the second only as
# the whole name (a `data_generator()` is a Python generator, not a GAN's).
CONVENTIONAL_MODULE_RE = re.compile(
    r"^(?!_*(?:get|build|create|load|make|init|initialize|save|setup|set|prepare|wrap|unwrap|"
    r"train|eval|evaluate|compile|export|freeze|unfreeze|copy|update|convert|print|log|register|"
    r"replace|patch|resolve|fetch|download|reset|is|has|to|from|apply|check|find|select|"
    r"construct|instantiate|default|profile|infer|run|test|benchmark|count|wrapped)_)"
    r"_*(?:[a-z0-9]+_)*(?:model|net|network|criterion|loss_fn|loss_func|loss_function|lossfn|"
    r"classifier|encoder|decoder|backbone|extractor|embedder|projector|trunk)$"
    r"|^_*(?:generator|discriminator|critic|actor|head|teacher|student|policy_net|policy)$|^net[A-Z]\w*$"
)
# Imported (not locally defined) classes whose name says they build a module.
MODULE_CLASS_RE = re.compile(r"(?:Model|Net|Network|Module|Loss|Encoder|Decoder|Classifier)$")
# Words of a parameter name that says it counts (`n`, `batch_size`, `num_samples`): a metric's
# `update(value, n)` keeps `value * n`, yet only `value` is a tensor.
COUNT_WORDS = frozenset({"n", "num", "count", "counts", "size", "len", "length", "samples", "steps", "step", "iters", "k"})
# Methods that add an element to a Python container, with the position of the element.
STORING_METHODS = {"append": 0, "extend": 0, "insert": 1, "appendleft": 0}
# Bases that never call a subclass's methods other than forward and the hooks they document.
NEUTRAL_BASES = frozenset({
    "object", "ABC", "abc.ABC", "Generic", "typing.Generic", "Protocol", "typing.Protocol",
    "nn.Module", "Module", "torch.nn.Module", "torch.nn.modules.module.Module",
    # torch's containers run their layers, never a subclass's other methods
    "nn.Sequential", "torch.nn.Sequential", "nn.ModuleList", "torch.nn.ModuleList", "nn.ModuleDict", "torch.nn.ModuleDict",
    # scikit-learn's estimator bases: model selection calls `predict`/`predict_proba` as they are
    "BaseEstimator", "sklearn.base.BaseEstimator", "ClassifierMixin", "sklearn.base.ClassifierMixin",
    "RegressorMixin", "sklearn.base.RegressorMixin", "TransformerMixin", "sklearn.base.TransformerMixin",
})
LIGHTNING_NO_GRAD_HOOKS = frozenset({"validation_step", "test_step", "predict_step"})
# Methods a framework calls once per step (or per batch): their bodies are per-step code even
# though no loop of the project calls them. One list, each name with the frameworks using it.
PER_STEP_HOOKS = {
    # PyTorch Lightning
    "training_step": "Lightning / Hugging Face / skorch", "training_step_end": "Lightning",
    "on_train_batch_start": "Lightning", "on_train_batch_end": "Lightning",
    "on_validation_batch_end": "Lightning", "on_test_batch_end": "Lightning",
    "on_before_backward": "Lightning", "on_after_backward": "Lightning",
    "on_before_optimizer_step": "Lightning", "on_before_zero_grad": "Lightning",
    "validation_step": "Lightning / skorch", "test_step": "Lightning", "predict_step": "Lightning",
    # Hugging Face Trainer
    "compute_loss": "Hugging Face Trainer", "prediction_step": "Hugging Face Trainer",
    # skorch
    "train_step": "skorch", "train_step_single": "skorch", "validation_step_single": "skorch",
    "evaluation_step": "skorch",
    # fastai callbacks
    "before_batch": "fastai", "after_pred": "fastai", "after_loss": "fastai",
    "before_backward": "fastai", "after_backward": "fastai", "before_step": "fastai",
    "after_step": "fastai", "after_batch": "fastai",
    # torchbearer / poutyne callbacks
    "on_step_training": "torchbearer", "on_train_batch_begin": "poutyne / Keras-style callbacks",
    "on_batch_begin": "Keras-style callbacks (catalyst, lumin, poutyne)",
    "on_batch_end": "Keras-style callbacks (catalyst, lumin, poutyne)",
    "on_forwards_end": "lumin", "on_backwards_begin": "lumin", "on_backwards_end": "lumin",
    # OpenMMLab runner hooks
    "before_train_iter": "mmcv / mmengine", "after_train_iter": "mmcv / mmengine",
    "after_val_iter": "mmcv / mmengine", "after_test_iter": "mmcv / mmengine",
}
# A module's forward runs once per step of whatever drives the model.
FORWARD_METHODS = frozenset({"forward"})
# Methods only a module has: a name receiving one of them is a module (`net_g.eval()`,
# `G.parameters()`), whatever it is called.
MODULE_EVIDENCE_METHODS = (
    "eval", "parameters", "named_parameters", "modules", "named_modules", "children",
    "named_children", "buffers", "named_buffers", "register_forward_hook",
    "register_buffer", "apply", "half", "bfloat16",
)
# Words of a model's method that runs the model (``model.predict(x)``, ``net.evaluation_step(b)``,
# ``vae.decode(z)``), for a method torchlint cannot read. Not ``generate`` or ``encode``: the
# libraries that name them so (Hugging Face, sentence-transformers) disable grad inside.
COMPUTING_METHOD_WORDS = frozenset({
    "predict", "prediction", "evaluate", "evaluation", "infer", "inference", "decode", "denoise",
    # a pass over held-out data: `model.test_performance(loader)`, `net.validate(batches)`
    "test", "validate", "validation",
    "reconstruct", "sample", "recognize", "recognise", "translate",
    # decoding a sequence step by step: `model.beam_search(xs, beam)`, `model.greedy_decode(xs)`
    "beam", "greedy",
    # a policy network choosing actions: `agent.act(obs)`, `acmodel.get_action(obs)`
    "act", "action", "actions",
    # a named variant of the forward pass: `model.incremental_forward(x, T)`, `forward_features(x)`
    "forward",
    # a scoring model's forward: `model.score_sp_po(s, p, o)` (knowledge-graph embeddings), `model.cf_score(u, i)`
    "score", "scores",
    # a model's own objective: `net.loss(theta, x)`, `model.calculate_loss(batch)`, `flow.log_prob(x)`
    "loss", "losses", "nll", "elbo", "logprob", "likelihood",
})
# Whole method names of the same kind whose words alone say too little.
COMPUTING_METHOD_NAMES = frozenset({"log_prob", "log_probs", "log_likelihood"})
# Calls whose result is a module: model factories and loaders.
MODULE_FACTORY_RE = re.compile(
    r"(?:^|\.)(?:create_model|from_pretrained|from_config|load_model|build_model|get_model|"
    r"make_model|model_from_config)$"
)
MODULE_FACTORY_QUALIFIED = frozenset({
    "torch.load", "torch.hub.load", "torch.jit.load", "torch.jit.script", "torch.jit.trace",
    "torch.compile", "timm.create_model",
})

DETACHING_METHODS = frozenset({"item", "tolist", "detach", "detach_", "numpy", "__len__"})
NON_DIFFERENTIABLE_METHODS = frozenset({
    "argmax", "argmin", "argsort", "eq", "ne", "lt", "le", "gt", "ge", "long", "int", "bool",
    "byte", "char", "short", "nonzero", "size", "dim", "numel", "element_size", "isnan",
    "isinf", "isfinite", "all", "any", "equal", "data_ptr", "stride", "is_contiguous",
    "get_device", "count_nonzero", "unique", "keys", "nelement", "ndimension", "type",
})
NON_GRAPH_ATTRIBUTES = frozenset({
    "shape", "dtype", "device", "data", "grad", "requires_grad", "ndim", "is_cuda", "is_leaf",
    "grad_fn", "layout", "names", "itemsize", "nbytes",
})
TORCH_NON_DIFFERENTIABLE = frozenset({
    "argmax", "argmin", "argsort", "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf",
    "isfinite", "numel", "is_tensor", "equal", "allclose", "isclose", "unique", "bucketize",
    "searchsorted", "count_nonzero", "nonzero", "tensor", "from_numpy", "zeros", "ones", "empty",
    "full", "rand", "randn", "randint", "randperm", "arange", "linspace", "logspace", "eye",
    "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
    "randint_like", "no_grad", "inference_mode", "enable_grad", "set_grad_enabled", "device",
    "manual_seed", "is_grad_enabled", "save", "load",
})
# torch functions returning (values, indices): the indices carry no graph.
TORCH_VALUES_INDICES = frozenset({"max", "min", "sort", "topk", "kthvalue", "mode", "median"})
PASS_THROUGH_BUILTINS = frozenset({"sum", "max", "min", "abs", "list", "tuple", "sorted", "reversed", "dict"})
LOSS_FUNCTIONAL_RE = re.compile(r"(?:_loss|cross_entropy|kl_div|nll_loss|binary_cross_entropy\w*|_embedding)$")
MODULE_PASS_THROUGH_METHODS = frozenset({
    "to", "cuda", "cpu", "eval", "train", "half", "float", "double", "bfloat16",
    "requires_grad_", "to_empty", "share_memory",
})
BACKWARD_FUNCTIONS = frozenset({"backward", "manual_backward"})
# What `nn.Module` itself defines: an attribute of a model under any other name is one of its
# submodules or its own methods (`model.feature_extractor`, `net.encode`).
NN_MODULE_API = frozenset({
    *MODULE_EVIDENCE_METHODS, *MODULE_PASS_THROUGH_METHODS, "state_dict", "load_state_dict", "zero_grad",
    "register_parameter", "add_module", "get_submodule", "get_parameter", "extra_repr", "training",
    "register_full_backward_hook", "register_forward_pre_hook", "type", "forward",
})
# A loop goes over batches or steps when what it binds (or a while loop's test) is named like
# one (``for batch in ...``, ``for step in ...``, ``while step < ...``) or what it iterates is a
# loader or a collection of them (``for x, y in train_loader``, ``range(num_steps)``). Iterating
# *a* batch (``for key in batch``) goes over its items.
STEP_TARGET_RE = re.compile(r"batch|step|iteration|(?:^|_)iters?(?:$|_)", re.I)
STEP_SOURCE_RE = re.compile(r"loader|batches|steps|iterations|(?:^|_)iters(?:$|_)", re.I)
CONTAINER_WRITES = frozenset({"append", "extend", "insert", "appendleft", "add", "update", "setdefault"})
# Tensor methods named like in-place ops that change no values (or only metadata autograd allows).
NON_MUTATING_INPLACE_METHODS = frozenset({"requires_grad_", "share_memory_", "detach_", "rename_"})
# Methods returning a view of their receiver: an in-place op on the view changes the base.
VIEW_METHODS = frozenset({
    "view", "view_as", "unsqueeze", "squeeze", "transpose", "permute", "t", "narrow", "select",
    "unflatten", "diagonal", "movedim", "swapaxes",
})
PARAMETER_CLASSES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
# torch.nn layers that own `weight` / `bias` parameters.
PARAMETERISED_LAYERS = frozenset({
    "Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
    "ConvTranspose3d", "Embedding", "EmbeddingBag", "LayerNorm", "GroupNorm", "RMSNorm",
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "PReLU",
})
# torch.nn layers without parameters or buffers: one operation on their input, recording a graph
# only when that input requires grad.
PARAMETERLESS_LAYERS = frozenset({
    "ReLU", "ReLU6", "GELU", "SiLU", "Mish", "Tanh", "Sigmoid", "LeakyReLU", "ELU", "Hardswish",
    "Hardsigmoid", "Softmax", "Softmax2d", "LogSoftmax", "Softmin", "Dropout", "Dropout1d", "Dropout2d",
    "Identity", "Flatten", "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d", "Upsample", "PixelShuffle",
})

# Optimizers are recognised by name (`optimizer`, `opt_d`, `optimizerG`, `self.actor.optimizer`)
# or by what they are built from; these words make an optimizer-ish name something else.
OPTIMIZER_WORDS = frozenset({"optimizer", "optimiser", "optim", "opt"})
OPTIMIZER_PLURAL_WORDS = frozenset({"optimizers", "optimisers", "optims", "opts"})
NOT_OPTIMIZER_WORDS = frozenset({
    "sched", "scheduler", "schedulers", "lr", "warmup", "config", "cfg", "cls", "class", "kwargs",
    "args", "state", "step", "steps", "closure", "hook", "hooks", "fn", "func", "builder",
    "factory", "name", "level", "type", "idx", "index",
})
OPTIMIZER_CLASSES = frozenset({
    "SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "ASGD", "LBFGS", "NAdam", "RAdam",
    "RMSprop", "Rprop", "SparseAdam", "Adafactor", "Lion", "Lamb", "LAMB", "LARS", "Muon",
    "Adan", "AdaBelief", "Shampoo", "SophiaG", "Lookahead", "FusedAdam", "FusedLAMB",
})
OPTIMIZER_CLASS_RE = re.compile(r"(?:Optimizer|Optimiser)$")
# Calls that clear gradients by their name: zero_grad(), zero_grads(model), clear_grad(),
# optimizer_zero_grad(...), reset_grads(), set_grads_to_none(...)
CLEARING_CALL_RE = re.compile(
    r"(?:zero|clear|reset|null|none)_?(?:all_|the_)?grad|grads?_(?:to_)?(?:zero|none|clear|reset)", re.I
)
# In-place methods that overwrite a `.grad` tensor: `p.grad.zero_()`, `p.grad.copy_(g)`
GRAD_OVERWRITING_METHODS = frozenset({"zero_", "fill_", "copy_"})
_WORD_RE = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


def is_clearing_call_name(name: str) -> bool:
    """Is a called name one that clears gradients (``zero_grad``, ``zero_grads``,
    ``set_grads_to_none``), not a hook or test named after it (``on_before_zero_grad``)?"""
    return bool(CLEARING_CALL_RE.search(name)) and not name.startswith(("on_", "_on_", "test_"))


def name_words(name: str) -> list[str]:
    """``optimizerG`` -> [optimizer, g]; ``d_opt2`` -> [d, opt]; ``ZeroRedundancyOptimizer`` -> [...]"""
    return [word.lower() for word in _WORD_RE.findall(name)]


# The parts of a GAN or an actor-critic, by the words their models' and optimizers' names use.
ROLE_WORDS = {
    "g": "generator", "gen": "generator", "generator": "generator", "netg": "generator",
    "d": "discriminator", "disc": "discriminator", "discr": "discriminator", "discriminator": "discriminator",
    "netd": "discriminator", "actor": "actor", "policy": "actor", "critic": "critic", "value": "critic",
}


def model_roles(name: str | None) -> set[str]:
    """``g_optimizer`` -> {generator}; ``netD`` -> {discriminator}; ``model`` -> set()."""
    if name is None:
        return set()
    return {ROLE_WORDS[word] for word in name_words(name.rpartition(".")[2]) if word in ROLE_WORDS}


def looks_like_optimizer(name: str, plural: bool = False) -> bool:
    """Is a (last) name part named like an optimizer: ``optimizer``, ``opt_g``, ``optimizerD``,
    ``actor_optimizer``, ``opt1`` (``optimizers`` / ``opts`` too with ``plural``)?"""
    words = name_words(name)
    accepted = OPTIMIZER_WORDS | OPTIMIZER_PLURAL_WORDS if plural else OPTIMIZER_WORDS
    return any(word in accepted for word in words) and not any(word in NOT_OPTIMIZER_WORDS for word in words)

_CONVENTIONAL_ROOTS = {"torch": "torch", "nn": "torch.nn", "F": "torch.nn.functional"}


def is_conventional_module_name(name: str) -> bool:
    return CONVENTIONAL_MODULE_RE.match(name) is not None


_BATCH_RE = re.compile("batch", re.I)

# Methods of a module that do not compute from its inputs with autograd: the nn.Module API,
# accessors, configuration, and inference entry points that run without grad.
NOT_FORWARD_METHOD_RE = re.compile(
    r"_*(?:get|set|register|load|save|num|is|has|to|from|named|parameters|buffers|modules|children|"
    r"state_dict|zero_grad|eval|train|apply|cuda|cpu|xpu|mps|half|float|double|bfloat16|type|"
    r"requires_grad|reset|init|build|make|create|add|remove|extra_repr|print|log|update|freeze|"
    r"unfreeze|prepare|compile|cache|clear|enable|disable|generate|predict|sample|share_memory|"
    r"fuse|merge|resize|tie|post_init|gradient_checkpointing|push|summary|count|device|dtype|"
    r"config|copy|clone|detach|item|tolist|numpy|size|dim|keys|values|items|hook|module|"
    r"fit|score|transform|close|step|decode_step|estimate|flops|memory|profile|benchmark|report|read|export|"
    r"convert|download|info|describe|show|display|plot)(?:_|$)"
)
