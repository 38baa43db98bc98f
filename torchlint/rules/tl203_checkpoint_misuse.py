from __future__ import annotations

import re

from torchlint.analysis import GradMode, Context, call_arguments, dotted_name, keyword_argument, last_part
from torchlint.analysis.syntax import _names_match
from torchlint.analysis.vocabulary import PARAMETERISED_LAYERS, PARAMETERLESS_LAYERS, STEP_SOURCE_RE
from torchlint.lazy import cst
from torchlint.fix import Fix, Replace, with_keywords
from torchlint.rule import Rule

CHECKPOINT_FUNCTIONS = frozenset({"torch.utils.checkpoint.checkpoint", "torch.utils.checkpoint.checkpoint_sequential"})
# Layers that are one operation: checkpointing one alone saves nothing (it keeps its input, which
# is what the layer itself would have kept, or as much).
SINGLE_OPERATION_LAYERS = PARAMETERISED_LAYERS | PARAMETERLESS_LAYERS
SINGLE_OPERATION_FUNCTIONS = frozenset({
    "relu", "gelu", "silu", "tanh", "sigmoid", "softmax", "log_softmax", "dropout", "linear",
    "conv1d", "conv2d", "layer_norm", "leaky_relu", "mish", "elu",
})
# Names of inputs that cannot require grad: integer token ids and masks.
NO_GRAD_INPUT_RE = re.compile(r"(?:^|_)(?:ids|mask|masks|labels|positions|indices)$|^input_ids$", re.I)
# Methods that keep whether their receiver requires grad.
PASSING_METHODS = frozenset({
    "to", "cuda", "float", "half", "bfloat16", "long", "int", "contiguous", "view", "reshape",
    "unsqueeze", "squeeze", "permute", "transpose", "flatten", "pin_memory",
})
TORCH_DATA_FACTORIES = frozenset({
    "zeros", "ones", "empty", "full", "arange", "rand", "randn", "randint", "tensor", "as_tensor",
    "from_numpy", "linspace", "eye",
})


class CheckpointMisuse(Rule):
    """
    ## What it does
    Finds `torch.utils.checkpoint.checkpoint` calls that cannot work as meant: the
    reentrant form on inputs that do not require grad, and checkpoints around a single
    layer.

    The reentrant form is `use_reentrant=True`, or the argument left out, which still
    means reentrant on torch 2.x; inputs that do not require grad are the batch itself,
    token ids, masks, detached tensors. A single layer is `checkpoint(self.fc1, x)`,
    `checkpoint(self.act, x)`, `checkpoint(F.relu, x)`.

    ## Why is this bad?
    The reentrant checkpoint runs its function under `torch.no_grad()` and hooks the
    recomputation into the graph through its inputs. When none of them requires grad the
    output does not either: the checkpointed weights get no gradient at all (`.grad` stays
    `None`, with only a warning), so that part of the model silently stops training
    (measured: a block's weights moved 0.0 over the steps, against a visible update with
    `use_reentrant=False`). Pass `use_reentrant=False`, which also handles inputs that do
    not require grad and keyword arguments.

    Checkpointing trades compute for memory only over a segment with several operations:
    the checkpoint keeps the segment's inputs and drops what its inside would have saved.
    A single layer keeps its input anyway, so checkpointing each layer separately saves
    nothing, runs every forward twice and adds per-checkpoint bookkeeping (measured on a
    5-layer MLP: live memory after the forward 1.67x that of no checkpointing, and 5x that
    of one checkpoint around the whole stack). Checkpoint whole blocks.

    ## Known problems
    An input counts as not requiring grad only by evidence: a loop target over a loader,
    a batch unpacked or indexed, a name like `input_ids` or `attention_mask`, a factory
    result without `requires_grad=True`, or `.detach()`. A `forward()` parameter may or may
    not require grad, so a checkpoint on one is not reported (the reentrant form still
    drops gradients when it does not: prefer `use_reentrant=False` everywhere). A single
    layer is recognised when it is built in the file from a `torch.nn` class (`Linear`,
    `Conv2d`, `LayerNorm`, `ReLU`, `Dropout`...) or is a functional (`F.relu`); custom
    blocks are never reported. Calls under `torch.no_grad()` are not examined.
    """

    CODE = "TL203"
    NAME = "checkpoint-misuse"
    MESSAGE = ("`{call}` uses the reentrant checkpoint on inputs that do not require grad: "
               "the checkpointed weights get no gradient")
    FIX = "pass `use_reentrant=False`"
    LAYER_MESSAGE = ("`{call}` checkpoints a single `{layer}`: it keeps its input either way, so memory does not "
                     "go down and the forward runs twice")
    LAYER_FIX = "checkpoint a block of several layers (or the whole stack) in one call"
    AUTOFIX = (
        "Unsafe: passes `use_reentrant=False` to a reentrant checkpoint whose inputs need no grad "
        "(the checkpointed weights then get their gradients). Unsafe because the non-reentrant "
        "implementation also checks that the recomputation matches the forward (a function whose "
        "shapes vary between the two calls raises) and treats `torch.no_grad()` / `detach()` "
        "inside the function differently. No fix for a checkpoint around a single layer: the "
        "remedy, checkpointing a block of several layers, is a restructuring, and unwrapping the "
        "one layer would not lower memory either."
    )
    TOKENS = ("checkpoint",)
    CLAIM = ("the reentrant checkpoint on an input without grad leaves the block's weights without gradient; "
             "checkpointing each layer separately keeps more live memory than one checkpoint around the stack")

    INVALID = [
        """\
from torch.utils.checkpoint import checkpoint

for x, y in loader:
    h = checkpoint(model.encoder, x, use_reentrant=True)  # expect: TL203
    loss = criterion(model.head(h), y)
    loss.backward()
""",
        """\
import torch.utils.checkpoint as cp
from torch import nn

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(512, 512)
        self.act = nn.ReLU()

    def forward(self, x):
        x = cp.checkpoint(self.fc1, x, use_reentrant=False)  # expect: TL203
        return cp.checkpoint(self.act, x, use_reentrant=False)  # expect: TL203
""",
        """\
import torch

def embed(self, input_ids):
    return torch.utils.checkpoint.checkpoint(self.embeddings, input_ids)  # expect: TL203
""",
    ]
    VALID = [
        """\
from torch.utils.checkpoint import checkpoint

for x, y in loader:
    h = checkpoint(model.encoder, x, use_reentrant=False)
    loss = criterion(model.head(h), y)
    loss.backward()
""",
        """\
from torch.utils.checkpoint import checkpoint
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(512, 512)
        self.blocks = nn.ModuleList([Block() for _ in range(12)])

    def forward(self, x):
        x = self.stem(x)  # requires grad from here on
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=True)
        return x
""",
        """\
import torch
from torch.utils.checkpoint import checkpoint

for x, y in loader:
    with torch.no_grad():
        features = checkpoint(backbone, x, use_reentrant=True)
""",
    ]

    def visit_Expr(self, node, ctx: Context) -> None:
        self._check(node, ctx)

    def visit_Assign(self, node, ctx: Context) -> None:
        self._check(node, ctx)

    def visit_AugAssign(self, node, ctx: Context) -> None:
        self._check(node, ctx)

    def visit_Return(self, node, ctx: Context) -> None:
        self._check(node, ctx)

    def _check(self, node, ctx: Context) -> None:
        if ctx.grad is GradMode.DISABLED:
            return  # nothing is recorded: neither mistake costs anything
        analysis = self.analysis
        for call in analysis.calls_in(node):
            if analysis.qualified_name(call.func) not in CHECKPOINT_FUNCTIONS:
                continue
            arguments = call_arguments(call)
            if not arguments:
                continue
            function, inputs = arguments[0], arguments[1:]
            if last_part(analysis.qualified_name(call.func)) == "checkpoint_sequential":
                inputs = inputs[1:]  # checkpoint_sequential(functions, segments, input)
            elif self._check_single_layer(node, call, function, ctx):
                continue
            if self._reentrant(call) and inputs and all(self._grad_free(value, ctx) for value in inputs):
                self.report(node, self.MESSAGE.format(call=self.code(call, 60)), autofix=self._autofix(call))

    def _autofix(self, call) -> Fix | None:
        """``use_reentrant=False``: the value replaced, or the keyword added."""
        value = keyword_argument(call, "use_reentrant")
        if value is not None:
            return Fix.unsafe("Pass `use_reentrant=False`", Replace(value, "False"))
        code = with_keywords(self.analysis, call, [("use_reentrant", "False")])
        return Fix.unsafe("Pass `use_reentrant=False`", Replace(call, code)) if code is not None else None

    def _check_single_layer(self, node, call, function, ctx: Context) -> bool:
        layer = self._single_layer(function, ctx)
        if layer is None:
            return False
        self.report(node, self.LAYER_MESSAGE.format(call=self.code(call, 50), layer=layer), self.LAYER_FIX)
        return True

    def _reentrant(self, call) -> bool:
        value = keyword_argument(call, "use_reentrant")
        return value is None or (type(value) is cst.Name and value.value == "True")

    def _single_layer(self, function, ctx: Context) -> str | None:
        """The class (or function) name when ``function`` is one layer of one operation."""
        analysis = self.analysis
        qualified = analysis.qualified_name(function) or ""
        if qualified.startswith("torch.") and last_part(qualified) in SINGLE_OPERATION_FUNCTIONS:
            return last_part(qualified)
        constructed = analysis.constructed_layer(function, ctx)
        return constructed if constructed in SINGLE_OPERATION_LAYERS else None

    def _grad_free(self, expr, ctx: Context, depth: int = 0) -> bool:
        """Does ``expr`` certainly not require grad: data from a loader or a batch, token ids
        and masks, factory results, detached tensors?"""
        if depth > 6:
            return False
        analysis = self.analysis
        kind = type(expr)
        if kind is cst.Subscript:
            return self._grad_free(expr.value, ctx, depth + 1)
        if kind is cst.Call:
            func = expr.func
            qualified = analysis.qualified_name(func) or ""
            if qualified.startswith("torch.") and last_part(qualified) in TORCH_DATA_FACTORIES:
                flag = keyword_argument(expr, "requires_grad")
                return flag is None or (type(flag) is cst.Name and flag.value == "False")
            if type(func) is cst.Attribute and func.attr.value == "detach":
                return True
            if type(func) is cst.Attribute and func.attr.value in PASSING_METHODS:
                return self._grad_free(func.value, ctx, depth + 1)
            return False
        key = dotted_name(expr)
        if key is None:
            return False
        if NO_GRAD_INPUT_RE.search(last_part(key)):
            return True
        binding = analysis.lookup(key, ctx)
        if binding is None:
            return False
        if binding.kind == "for":
            # a loop target over a loader: the batch itself
            iterable = binding.value
            return _names_match(STEP_SOURCE_RE, iterable) and not analysis.is_attached(iterable, binding.ctx)
        if binding.kind == "assign":
            value = analysis.bound_value(binding)
            if value is None and binding.element:
                value = binding.value  # x, y = batch: an element of the batch
            return value is not None and self._grad_free(value, binding.ctx, depth + 1)
        return False
