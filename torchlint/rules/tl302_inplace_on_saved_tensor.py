from __future__ import annotations

import re

from torchlint.analysis import (
    BACKWARD_FUNCTIONS, PARAMETERISED_LAYERS, Binding, Context, GradMode, _call_chain, call_arguments, call_name,
    dotted_name, eval_side, is_view_subscript, iter_expression_nodes, keyword_argument, last_part, mentioned_keys, name_words,
    strip_pass_through, strip_views,
)
from torchlint.analysis.objects import TENSOR_ONLY_METHODS
from torchlint.lazy import cst
from torchlint.fix import Fix, InsertBefore
from torchlint.rule import InPlaceMutationRule

# Ops whose backward needs their own output, measured on torch 2.13: mutating the result in place
# makes backward() raise. (pow, log, gelu, silu, elu, softplus... save their input instead.)
OUTPUT_SAVING_OPS = frozenset({
    "sigmoid", "tanh", "exp", "exp2", "expm1", "softmax", "log_softmax", "softmin", "relu",
    "sqrt", "rsqrt", "reciprocal", "tan",
    # reductions and decompositions whose backward reads their result (every output of the
    # multi-output ones: eigenvalues and eigenvectors, U/S/V, Q/R)
    "logsumexp", "cumprod", "prod", "norm", "det", "inverse", "inv", "pinv", "cholesky",
    "eigh", "eigvalsh", "symeig", "svd", "svdvals", "qr",
})
# Activations that save their input when run out of place but their result when run in place
# (measured on torch 2.13: `y = F.leaky_relu(x, inplace=True); y += 1` makes backward() raise).
INPLACE_OUTPUT_SAVING_OPS = frozenset({"leaky_relu", "elu", "selu", "celu", "rrelu"})
INPLACE_OUTPUT_SAVING_MODULES = {
    "LeakyReLU": ("leaky_relu", 1), "ELU": ("elu", 1), "SELU": ("selu", 0), "CELU": ("celu", 1),
    "RReLU": ("rrelu", 2),
}  # class: (op, position of its `inplace` argument)
OUTPUT_SAVING_ALIASES = {"expit": "sigmoid"}  # torch.special.expit
OUTPUT_SAVING_NAMESPACES = frozenset({"torch", "torch.nn.functional", "torch.special", "torch.linalg"})
OUTPUT_SAVING_MODULES = {
    "Sigmoid": "sigmoid", "Tanh": "tanh", "ReLU": "relu", "Softmax": "softmax",
    "LogSoftmax": "log_softmax", "Softmin": "softmin",
}
# Methods whose result the caller backpropagates: the graph of what they return is still needed.
GRAPH_RETURNING_METHODS = frozenset({"forward", "training_step"})
# Calls on a module that return the module itself.
MODULE_MOVES = frozenset({"to", "cuda", "cpu", "half", "float", "double", "bfloat16", "train", "eval", "requires_grad_"})
MAX_ALIAS_DEPTH = 8


class InplaceOnSavedTensor(InPlaceMutationRule):
    """
    ## What it does
    Finds in-place changes to the output of an op whose backward needs that output —
    `sigmoid`, `tanh`, `exp`, `softmax`, `log_softmax`, `relu`, `sqrt`, `rsqrt`,
    `reciprocal`, the reductions `logsumexp` / `prod` / `cumprod` / `norm` and the
    decompositions and inverses of `torch.linalg` (`eigh`, `svd`, `qr`, `cholesky`, `inv`,
    `det`…, every output of the multi-output ones) in their `torch.`, method and
    `torch.nn.functional` spellings, and the
    `nn.Sigmoid` / `nn.Tanh` / `nn.ReLU` / `nn.Softmax` modules, `LeakyReLU` / `ELU` / `SELU` /
    `CELU` / `RReLU` when they run in place (`inplace=True`, `F.leaky_relu_`: out of place they
    save their input, in place their result, measured) (also as the last layer of an
    `nn.Sequential`, or given as a constructor argument's default: `act=nn.ReLU()` kept as
    `self.act`) — while that output is still
    needed: a `backward()` in the same function follows and reaches it, or a `forward()` /
    `training_step()` returns it. Mutations are in-place methods (`y.mul_(2)`,
    `y[:, 0].zero_()`, even `y.detach().zero_()`, which shares the version counter),
    augmented assignments (`y += 1`), item assignments (`y[mask] = 0`) and layers built with
    `inplace=True` (`nn.Dropout(p, inplace=True)`, an `nn.Sequential` that starts with
    `nn.LeakyReLU(0.2, inplace=True)`, `F.relu(y, inplace=True)`). The op's input
    must be attached to the graph or a leaf that requires grad; in a method of a module, a
    value computed from the module's own layers or methods (`self.V(x)`) counts, and so do
    the inputs of its `forward` (the output of the layers before it). Any method of a module
    that returns the changed tensor, or a value computed from it, hands the graph on.

    Also finds an optimizer's `step()` (an in-place update of the weights it optimizes, the
    modules whose `.parameters()` built it) between computing a loss through those modules
    and that loss's `backward()`: an actor-critic's `critic_optim.step()` before
    `policy_loss.backward()` when the policy loss ran through the critic (PyTorch >= 1.5
    raises "modified by an inplace operation"; older versions computed wrong gradients).

    Also finds in-place changes to a tensor that an op saved as one of its *inputs*, between
    that op and the `backward()` its result reaches (or the return of a module's method):
    an operand of `*`, `@`, `mul`, `matmul`, `mm`, `bmm`, `einsum`, `F.linear`, `F.conv*d`
    when another operand requires grad (`y = x * w` saves `x` because `w` is a parameter),
    the divisor of `/` / `div` when either side requires grad and the dividend when the
    divisor does, any operand of `**` / `pow` when one requires grad, and the input of a
    `torch.nn` layer with weights (`Linear`, `Conv*`, `LayerNorm`, `BatchNorm*`...): a
    pre-norm block's `x += self.mlp(self.norm(x))` changes the `x` that `LayerNorm` saved
    (also a module class of the project whose `forward` first runs such a layer on its
    input, and a layer every construction of the class hands over, `ResidualAdd(fn)` built
    as `ResidualAdd(nn.Sequential(nn.LayerNorm(d), ...))`);
    the input of `norm` / `vector_norm` / `std` / `var` (`x /= x.norm(dim=-1, keepdim=True)`,
    CLIP-style feature normalisation, raises in backward; `x /= x.sum()` does not). In an
    `nn.Sequential`, an in-place layer right after a layer or a project block whose output
    is saved (a block whose `forward` ends in an in-place `LeakyReLU`) is reported too.

    ## Why is this bad?
    Autograd saved the output (or the input) for the backward pass and checks its version
    counter. The in-place change itself raises nothing; the later `backward()` raises
    `RuntimeError: one of the variables needed for gradient computation has been modified by
    an inplace operation` (measured on torch 2.13 for every op listed above, including a
    mutation done under `torch.no_grad()`, and for a write into another slice of the saved
    tensor's storage). Use an out-of-place op (`y = y * 2`, `x = x + self.mlp(self.norm(x))`)
    or mutate a `.clone()`.

    ## Known problems
    Conservative: only what the function's own code shows. Not reported when the op's input
    is not known to require grad (a parameter of the function, a plain tensor), when the op
    ran under `torch.no_grad()`, for a mutation after the last `backward()`, on `.clone()`,
    `.data` or advanced-indexing copies (`y[mask].zero_()`), for re-binding (`y = y * 2`),
    for `inplace=True` functions and modules (`nn.ReLU(inplace=True)`; `inplace=False` is the output-saving op), for in-place
    shortcuts taken only in eval mode (`if not self.training: y.mul_(s)`,
    `y.log1p() if self.training else y.log1p_()`: nobody backpropagates there), and for ops
    that save their input rather than their output (`pow`, `log`, `gelu`, `silu`, `elu`,
    `softplus`, `leaky_relu`, `hardtanh`, linear layers...) beyond those listed above.
    OpenMMLab's `ConvModule` counts as ending in its activation (ReLU unless `act_cfg` says
    otherwise, `act_cfg=None` for none), also as the layers of a container a list
    comprehension runs (an FPN's `laterals[i - 1] += ...`), and `build_activation_layer(act_cfg)`
    as the activation its config names. `nn.Sequential(*layers)` is read when `layers` is a
    list built in the same function (`insert` keeps its last layer; every `append`ed layer
    may end it).
    Saved inputs: addition and subtraction save nothing and a constant factor (`h * 2`)
    saves nothing either (measured), so neither is reported; the op and the change must be
    in the same function with the tensor not rebound in between (`x = x.clone()`; a name
    bound to it, `targets = self.targets`, saved as `xs * targets`, is the same tensor), a
    `backward()` between them spends the graph and ends the search, an augmented assignment
    on a name not known to hold a tensor (`alpha *= 0.9` after `h * alpha`) is not reported,
    layers are recognised only when bound to a `torch.nn` constructor (`self.norm =
    nn.LayerNorm(d)`, also wrapped by `weight_norm` or first in an `nn.Sequential`; not
    `norm_layer(d)`), `a[1]` counts as a view of `a` only when `a` is a
    tensor by evidence (it may be an element of a list), and a leaf that requires grad
    changed with autograd recording is TL301's finding.
    """

    CODE = "TL302"
    NAME = "inplace-on-saved-tensor"
    MESSAGE = "`{stmt}` modifies `{name}` in place, but autograd saved it as the output of `{op}` for backward"
    STEP_MESSAGE = (
        "`{step}` updates the weights of `{module}` in place, but `{loss}` was computed through `{module}` "
        "before it and `{backward}` still needs the weights that forward pass used"
    )
    STEP_FIX = "call `{backward}` before `{step}`, or compute that loss again after the step"
    INPUT_MESSAGE = "`{stmt}` modifies `{name}` in place, but autograd saved it as an input of `{op}` for backward"
    SPLIT_MESSAGE = ("`{stmt}` modifies `{name}` in place, one of the views `{op}` returned: autograd refuses "
                     "in-place changes to the outputs of an op that returns several views")
    FIX = "use an out-of-place op (`{name} = {name} * ...`) or change a copy made with `{name}.clone()`"
    AUTOFIX = (
        "Unsafe (other aliases no longer see the update): inserts `x = x.clone()` before the "
        "in-place update. No fix under `no_grad`, where the copy would cut the graph."
    )
    TOKENS = (
        "sigmoid", "tan", "exp", "softmax", "softmin", "relu", "sqrt", "reciprocal",
        "Sigmoid", "Tanh", "ReLU", "Softm",
        # saved inputs
        "*", "@", "/", "mul", "matmul", "mm(", "einsum", "div", "pow", "linear", "conv", "Linear", "Conv", "Norm",
    )
    CLAIM = (
        "the bad program's backward() raises that a variable needed for gradient computation was modified "
        "by an inplace operation; the fixed one runs"
    )

    INVALID = [
        """\
class Attention(nn.Module):
    def __init__(self, dim, attn_drop=0.1):
        super().__init__()
        self.qk = nn.Linear(dim, dim * 2)
        self.attn_drop = nn.Dropout(attn_drop, inplace=True)

    def forward(self, x):
        q, k = self.qk(x).chunk(2, dim=-1)
        attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)
        attn = self.attn_drop(attn)  # expect: TL302
        return attn @ x
""",
        """\
class SoftCapping(nn.Module):
    def forward(self, attn_weights):  # the attention scores of the layers before it
        attn_weights = torch.tanh(attn_weights / self.cap)
        attn_weights *= self.cap  # expect: TL302
        return attn_weights
""",
        """\
class FiLMConv(nn.Module):
    def __init__(self, channels, act=nn.ReLU()):
        super().__init__()
        self.lin = nn.Linear(channels, channels)
        self.act = act

    def forward(self, x, messages):
        out = self.act(self.lin(x))
        out += messages  # expect: TL302
        return out
""",
        """\
class Controller(LightningModule):
    def descent_loss(self, x):
        V = self.V(x)
        violation = F.relu(1.0 + self.V_dot(x) + V)
        violation *= self.mask(x)  # expect: TL302
        return violation.mean()
""",
        """\
def whitened(model, x):
    features = model(x)
    evals, evecs = torch.linalg.eigh(features.T @ features)
    evals.clamp_min_(1e-6)  # expect: TL302
    loss = (evecs @ (x / evals.sqrt())).sum()
    loss.backward()
""",
        """\
class ConvBNReLU(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Residual(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.block = ConvBNReLU(c)

    def forward(self, x):
        out = self.block(x)
        out += x  # expect: TL302
        return out
""",
        """\
for x, y in loader:
    probs = torch.sigmoid(model(x))
    probs.clamp_(1e-6, 1 - 1e-6)  # expect: TL302
    loss = F.binary_cross_entropy(probs, y)
    loss.backward()
""",
        """\
class Block(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        out = F.relu(self.conv(x))
        out += x  # expect: TL302
        return out
""",
        """\
class ResBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.relu = nn.ReLU(inplace=False)

    def forward(self, x):
        out = self.relu(self.conv(x))
        out += x  # expect: TL302
        return self.relu(out)
""",
        """\
class ResBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.ReLU())

    def forward(self, x):
        out = self.body(x)
        out += x  # expect: TL302
        return out
""",
        """\
class PreNormBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.mlp = nn.Linear(d, d)

    def forward(self, x):
        x += self.mlp(self.norm(x))  # expect: TL302
        return x
""",
        """\
gate = nn.Parameter(torch.ones(16))
for x, y in loader:
    gated = x * gate
    x.clamp_(-1, 1)  # expect: TL302
    loss = F.mse_loss(head(x) + gated, y)
    loss.backward()
""",
        """\
from mmcv.cnn import ConvModule

class PositionAttention(nn.Module):
    def __init__(self, channels, act_cfg=dict(type="ReLU")):
        super().__init__()
        self.pre_conv = ConvModule(channels, channels, 3, padding=1, act_cfg=act_cfg)

    def forward(self, x, pos):
        x = self.pre_conv(x)
        x += pos  # expect: TL302
        return x
""",
        """\
from mmcv.cnn import ConvModule

class FPNF(nn.Module):
    def __init__(self, in_channels, out_channels, act_cfg=dict(type="ReLU")):
        super().__init__()
        self.lateral_convs = nn.ModuleList()
        for channels in in_channels:
            conv = ConvModule(channels, out_channels, 1, act_cfg=act_cfg)
            self.lateral_convs.append(conv)

    def forward(self, inputs):
        laterals = [conv(inputs[i]) for i, conv in enumerate(self.lateral_convs)]
        for i in range(len(laterals) - 1, 0, -1):
            laterals[i - 1] += F.interpolate(laterals[i], size=laterals[i - 1].shape[2:])  # expect: TL302
            laterals[i - 1] = self.smooth(laterals[i - 1])
        return torch.cat(laterals, 1)
""",
        """\
class Encoder(nn.Module):
    def __init__(self, dim, kernel):
        super().__init__()
        self.pos_conv = nn.Conv1d(dim, dim, kernel, padding=kernel // 2, groups=16)
        self.pos_conv = nn.utils.weight_norm(self.pos_conv, name="weight", dim=2)
        self.pos_conv = nn.Sequential(self.pos_conv, nn.GELU())

    def freeze_first(self, prefixes):  # some parameters only
        for name, p in self.named_parameters():
            if name.startswith(prefixes):
                p.requires_grad = False

    def forward(self, x):
        x_conv = self.pos_conv(x.transpose(1, 2)).transpose(1, 2)
        x += x_conv  # expect: TL302
        return self.layers(x)
""",
        """\
class Encoder(nn.Module):
    def __init__(self, dims, blocks, activation=nn.ReLU):
        super().__init__()
        self.blocks = nn.ModuleList()
        for _ in range(blocks):
            block = nn.Sequential(nn.Linear(dims, dims), nn.LayerNorm(dims), activation()).to(device)
            self.blocks.append(block)

    def forward(self, x):
        for i, block in enumerate(self.blocks):
            residual = x
            x = block(x)
            x += residual  # expect: TL302
        return x
""",
        """\
class ConvBNAct(nn.Module):
    def __init__(self, c_in, c_out, use_lab=False):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 1)
        self.act = nn.ReLU()
        if use_lab:
            self.lab = Affine()
        else:
            self.lab = nn.Identity()

    def forward(self, x):
        x = self.act(self.conv(x))
        x = self.lab(x)  # the ReLU's output itself, by default
        return x


class Block(nn.Module):
    def __init__(self, c, agg):
        super().__init__()
        if agg == "se":
            squeeze = ConvBNAct(c, c // 2)
            excite = ConvBNAct(c // 2, c)
            self.aggregation = nn.Sequential(squeeze, excite)
        else:
            self.aggregation = nn.Sequential(ConvBNAct(c, c), Gate(c))

    def forward(self, x):
        identity = x
        x = self.aggregation(x)
        x += identity  # expect: TL302
        return x
""",
        """\
class SAC:
    def __init__(self, policy, critic):
        self.policy, self.critic = policy, critic
        self.policy_optim = torch.optim.Adam(self.policy.parameters())
        self.critic_optim = torch.optim.Adam(self.critic.parameters())

    def update(self, state, action, target):
        q_loss = F.mse_loss(self.critic(state, action), target)
        pi, log_pi = self.policy.sample(state)
        policy_loss = (self.alpha * log_pi - self.critic(state, pi)).mean()  # through the critic
        self.critic_optim.zero_grad()
        q_loss.backward()
        self.critic_optim.step()  # expect: TL302
        self.policy_optim.zero_grad()
        policy_loss.backward()
        self.policy_optim.step()
""",
        """\
class ResidualBlock(nn.Module):
    def __init__(self, channels, dropout_fn):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, 3, padding=1)
        self.dropout_fn = dropout_fn

    def forward(self, x):
        residual = x
        x = self.dropout_fn(F.relu(self.conv(x)))  # p=0, or eval mode: relu's own output
        x += residual  # expect: TL302
        return x
""",
        """\
class ResBlock(ME.MinkowskiNetwork):
    def __init__(self, c, convolution):
        super().__init__(3)
        self.block = Seq().append(convolution(c, c, kernel_size=3)).append(ME.MinkowskiBatchNorm(c)).append(ME.MinkowskiReLU())

    def forward(self, x):
        out = self.block(x)
        out += x  # expect: TL302
        return out
""",
        """\
class SACPolicy(nn.Module):
    def __init__(self, actor, actor_optim, critic1, critic1_optim):  # optimizers built by the caller
        super().__init__()
        self.actor, self.actor_optim = actor, actor_optim
        self.critic1, self.critic1_optim = critic1, critic1_optim

    def learn(self, obs, act, target_q):
        new_act, log_prob = self.actor(obs)
        current_q = self.critic1(obs, act)
        actor_loss = (0.2 * log_prob - self.critic1(obs, new_act)).mean()
        critic_loss = F.mse_loss(current_q, target_q)
        self.critic1_optim.zero_grad()
        critic_loss.backward()
        self.critic1_optim.step()  # expect: TL302
        self.actor_optim.zero_grad()
        actor_loss.backward()
        self.actor_optim.step()
""",
        """\
class L2Norm(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))

    def forward(self, x):  # x comes out of the layers before it
        norm = x.pow(2).sum(dim=1, keepdim=True).sqrt() + 1e-10
        x /= norm  # expect: TL302
        return self.weight.view(1, -1, 1, 1) * x
""",
        """\
class Head(nn.Module):
    def __init__(self, c, classes):
        super().__init__()
        self.score = nn.Sequential(
            nn.Conv2d(c, 4096, 7), nn.ReLU(inplace=True),
            nn.Dropout(inplace=True),  # expect: TL302
            nn.Conv2d(4096, classes, 1),
        )
""",
        """\
class FeedForward(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d, hidden), nn.Linear(hidden, d)
        self.dropout = nn.Dropout(0.1, inplace=True)

    def forward(self, x):
        return x + self.linear2(self.dropout(F.relu(self.linear1(x))))  # expect: TL302
""",
        """\
class ClipScore(nn.Module):
    def forward(self, image, text):
        image_features = self.clip.encode_image(image)
        text_features = self.clip.encode_text(text)
        image_features /= image_features.norm(dim=-1, keepdim=True)  # expect: TL302
        text_features = text_features / text_features.norm(dim=-1, keepdim=True)
        return (image_features * text_features).sum(-1)
""",
        """\
class SmoothedFocal(nn.Module):
    def forward(self, logits, target):
        log_preds = logits.log_softmax(dim=-1)
        self.targets = torch.zeros_like(logits).scatter_(1, target.unsqueeze(1), 1)
        targets = self.targets
        weighted = log_preds.exp() * targets  # saves `targets`, the same tensor as `self.targets`
        self.targets.mul_(0.9).add_(0.1 / logits.size(-1))  # expect: TL302
        return -(self.targets * log_preds).sum(-1).mean() + weighted.mean()
""",
        """\
class ResidualAdd(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        out = self.fn(x)  # every construction hands `fn` a block that starts with a layer norm
        x += out  # expect: TL302
        return x


class EncoderBlock(nn.Sequential):
    def __init__(self, dim):
        super().__init__(
            ResidualAdd(nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim))),
            ResidualAdd(nn.Sequential(nn.LayerNorm(dim), nn.GELU(), nn.Linear(dim, dim))),
        )
""",
        """\
from mmcv.cnn import build_activation_layer


class ConvReLU(nn.Module):
    def __init__(self, cin, cout, use_batchnorm=True):
        super().__init__()
        layers = [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(inplace=True)]
        if use_batchnorm:
            layers.insert(1, nn.BatchNorm2d(cout))
        self.block = nn.Sequential(*layers)

    def forward(self, x, skip):
        x = self.block(x)
        x += skip  # expect: TL302
        return x


class BasicBlock(nn.Module):
    def __init__(self, planes, act_cfg=dict(type="ReLU")):
        super().__init__()
        self.conv = nn.Conv2d(planes, planes, 3, padding=1)
        self.relu = build_activation_layer(act_cfg)

    def forward(self, x):
        def _inner_forward(x):
            out = self.relu(self.conv(x))
            out += x  # expect: TL302
            return out

        return _inner_forward(x)
""",
        """\
class Predictor(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.proj = nn.Linear(dim, 1)

    def forward(self, x):
        return self.proj(self.norm(x))


class Gate(nn.Module):
    def forward(self, x):
        return torch.sigmoid(x)


class Variance(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.pitch_predictor = Predictor(dim)
        self.gate = Gate()
        self.pitch_embed = nn.Linear(1, dim)

    def forward(self, condition):
        pitch = self.pitch_predictor(condition)
        condition += self.pitch_embed(pitch)  # expect: TL302
        return condition
""",
    ]
    VALID = [
        """\
class Attention(nn.Module):
    def __init__(self, dim, attn_drop=0.1):
        super().__init__()
        self.qk = nn.Linear(dim, dim * 2)
        self.attn_drop = nn.Dropout(attn_drop)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        q, k = self.qk(x).chunk(2, dim=-1)
        attn = self.attn_drop((q @ k.transpose(-2, -1)).softmax(dim=-1))
        return self.act(self.qk(attn @ x))  # a linear layer's output: nothing saved it
""",
        """\
class FiLMConv(nn.Module):
    def __init__(self, channels, act=None):
        super().__init__()
        self.lin = nn.Linear(channels, channels)
        self.act = act

    def forward(self, x, messages):
        out = self.act(self.lin(x))
        out += messages  # the activation is whatever the caller passes: unknown
        return out
""",
        """\
class Sampler(nn.Module):
    def log_weights(self, distances):
        weights = torch.exp(-distances)  # computed from data, not from the module
        weights /= weights.sum()
        return weights
""",
        """\
def whitened(model, x):
    features = model(x)
    evals, evecs = torch.linalg.eigh(features.T @ features)
    evals = evals.clamp_min(1e-6)
    loss = (evecs @ (x / evals.sqrt())).sum()
    loss.backward()
""",
        """\
class ConvBN(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return self.bn(self.conv(x))


class Residual(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.block = ConvBN(c)

    def forward(self, x):
        out = self.block(x)
        out += x
        return out.relu()
""",
        """\
def forward(self, x):
    q, k = self.proj(x).chunk(2, dim=-1)
    q = q * self.scale
    with torch.no_grad():
        a, b = self.proj(x).chunk(2, dim=-1)
        a.mul_(2)
    return q @ k.transpose(-1, -2) + a
""",
        """\
for x, y in loader:
    probs = torch.sigmoid(model(x))
    probs = probs.clamp(1e-6, 1 - 1e-6)
    loss = F.binary_cross_entropy(probs, y)
    loss.backward()
""",
        """\
class Block(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        out = F.relu(self.conv(x))
        out = out + x
        return out
""",
        """\
def visualise(model, x):
    with torch.no_grad():
        heat = torch.softmax(model(x), dim=1)
    heat[:, 0] = 0
    return heat
""",
        """\
for x, y in loader:
    logits = model(x)
    probs = logits.softmax(dim=-1).clone()
    probs[:, 0] = 0
    loss = F.cross_entropy(logits, y)
    loss.backward()
""",
        """\
class PreNormBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.mlp = nn.Linear(d, d)

    def forward(self, x):
        x = x + self.mlp(self.norm(x))
        h = x * 2
        h.add_(1)
        return h
""",
        """\
from mmcv.cnn import ConvModule

class FPN(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.lateral = ConvModule(channels, channels, 1, act_cfg=None)  # no activation
        self.smooth = ConvModule(channels, channels, 3, padding=1, act_cfg=dict(type="GELU"))

    def forward(self, x, top):
        lateral = self.lateral(x)
        lateral += top
        smoothed = self.smooth(lateral)
        smoothed += top  # GELU saves its input, not its output
        return smoothed
""",
        """\
from mmcv.cnn import ConvModule

class FPNF(nn.Module):
    def __init__(self, in_channels, out_channels, act_cfg=None):
        super().__init__()
        self.lateral_convs = nn.ModuleList()
        for channels in in_channels:
            conv = ConvModule(channels, out_channels, 1, act_cfg=act_cfg)
            self.lateral_convs.append(conv)

    def forward(self, inputs):
        laterals = [conv(inputs[i]) for i, conv in enumerate(self.lateral_convs)]
        for i in range(len(laterals) - 1, 0, -1):
            laterals[i - 1] += F.interpolate(laterals[i], size=laterals[i - 1].shape[2:])  # no activation: nothing saved its output
            laterals[i - 1] = self.smooth(laterals[i - 1])
        return torch.cat(laterals, 1)
""",
        """\
class Encoder(nn.Module):
    def __init__(self, dim, kernel):
        super().__init__()
        self.pos_conv = nn.Conv1d(dim, dim, kernel, padding=kernel // 2, groups=16)
        self.pos_conv = nn.utils.weight_norm(self.pos_conv, name="weight", dim=2)
        self.pos_conv = nn.Sequential(self.pos_conv, nn.GELU())

    def freeze(self):  # the whole encoder: nothing requires grad
        for p in self.parameters():
            p.requires_grad = False

    def forward(self, x):
        x_conv = self.pos_conv(x.transpose(1, 2)).transpose(1, 2)
        x += x_conv
        return self.layers(x)
""",
        """\
class Encoder(nn.Module):
    def __init__(self, dims, blocks, activation=nn.GELU):  # GELU saves its input, not its output
        super().__init__()
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(dims, dims), activation()) for _ in range(blocks)])
        self.heads = nn.ModuleList([nn.Sequential(nn.Linear(dims, dims), nn.ReLU()), nn.Linear(dims, dims)])

    def forward(self, x):
        for block in self.blocks:
            residual = x
            x = block(x)
            x += residual
        for head in self.heads:  # one of them ends in a ReLU, the other does not
            y = head(x)
            y += x
        return x
""",
        """\
class SAC:
    def __init__(self, policy, critic):
        self.policy, self.critic = policy, critic
        self.policy_optim = torch.optim.Adam(self.policy.parameters())
        self.critic_optim = torch.optim.Adam(self.critic.parameters())

    def update(self, state, action, target):
        q_loss = F.mse_loss(self.critic(state, action), target)
        self.critic_optim.zero_grad()
        q_loss.backward()
        self.critic_optim.step()
        pi, log_pi = self.policy.sample(state)  # computed after the step: from the new weights
        policy_loss = (self.alpha * log_pi - self.critic(state, pi)).mean()
        self.policy_optim.zero_grad()
        policy_loss.backward()
        self.policy_optim.step()
""",
        """\
class ResidualBlock(nn.Module):
    def __init__(self, channels, p):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, 3, padding=1)
        self.dropout = nn.Dropout(p)

    def forward(self, x):
        out = self.dropout(self.conv(x))  # a convolution does not save its output
        out += x
        return F.relu(out)
""",
        """\
class ResBlock(ME.MinkowskiNetwork):
    def __init__(self, c, convolution):
        super().__init__(3)
        self.block = Seq().append(convolution(c, c, kernel_size=3)).append(ME.MinkowskiLeakyReLU()).append(ME.MinkowskiBatchNorm(c))
        self.act = ME.MinkowskiLeakyReLU()  # leaky_relu saves its input

    def forward(self, x):
        out = self.block(x)
        out += x
        y = self.act(out)
        y += x
        return y
""",
        """\
class SACPolicy(nn.Module):
    def __init__(self, actor, actor_optim, critic1, critic1_optim):
        super().__init__()
        self.actor, self.actor_optim = actor, actor_optim
        self.critic1, self.critic1_optim = critic1, critic1_optim

    def learn(self, obs, act, target_q):
        critic_loss = F.mse_loss(self.critic1(obs, act), target_q)
        self.critic1_optim.zero_grad()
        critic_loss.backward()
        self.critic1_optim.step()
        new_act, log_prob = self.actor(obs)  # the actor loss sees the updated critic
        actor_loss = (0.2 * log_prob - self.critic1(obs, new_act)).mean()
        self.actor_optim.zero_grad()
        actor_loss.backward()
        self.actor_optim.step()
""",
        """\
class Scaled(nn.Module):
    def forward(self, x, scale):  # `scale` is a number: nothing autograd saved
        y = self.proj(x) * scale
        scale *= 0.5
        return y + scale
""",
        """\
class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(c, c, 3), nn.BatchNorm2d(c), nn.ReLU(inplace=True),  # batch norm saves its input
            nn.Dropout(0.1), nn.Conv2d(c, c, 3),
        )
""",
        """\
class Normalised(nn.Module):
    def forward(self, x):
        h = self.proj(x)
        h = h / h.norm(dim=-1, keepdim=True)  # out of place: the saved h is left alone
        g = self.gate(x)
        g /= g.sum(dim=-1, keepdim=True)  # a sum saves nothing of its input
        return h * g
""",
        """\
class SmoothedFocal(nn.Module):
    def forward(self, logits, target):
        log_preds = logits.log_softmax(dim=-1)
        self.targets = torch.zeros_like(logits).scatter_(1, target.unsqueeze(1), 1)
        targets = self.targets
        targets = targets.clone()  # the product below saves the copy
        weighted = log_preds.exp() * targets
        self.targets.mul_(0.9).add_(0.1 / logits.size(-1))
        return -(self.targets * log_preds).sum(-1).mean() + weighted.mean()
""",
        """\
class ResidualAdd(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        out = self.fn(x)
        x += out  # one construction hands `fn` a dropout, which saves no input
        return x


class EncoderBlock(nn.Sequential):
    def __init__(self, dim):
        super().__init__(
            ResidualAdd(nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim))),
            ResidualAdd(nn.Dropout(0.1)),
        )


class UnknownBlock(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        out = self.fn(x)
        x += out  # what `fn` is, no construction in this file says
        return x
""",
        """\
from mmcv.cnn import build_activation_layer


class ConvReLU(nn.Module):
    def __init__(self, cin, cout, project=True):
        super().__init__()
        layers = [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(inplace=True)]
        if project:
            layers.append(nn.Conv2d(cout, cout, 1))  # may end the block: a convolution saves no output
        self.block = nn.Sequential(*layers)

    def forward(self, x, skip):
        x = self.block(x)
        x += skip
        return x


class BasicBlock(nn.Module):
    def __init__(self, planes, act_cfg=dict(type="LeakyReLU")):
        super().__init__()
        self.conv = nn.Conv2d(planes, planes, 3, padding=1)
        self.relu = build_activation_layer(act_cfg)  # a leaky ReLU saves its input, not its output

    def forward(self, x):
        def _inner_forward(x):
            out = self.relu(self.conv(x))
            out += x
            return out

        return _inner_forward(x)
""",
        """\
class Predictor(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.proj = nn.Linear(dim, 1)

    def forward(self, x):
        return self.proj(self.norm(x))


class Gate(nn.Module):
    def forward(self, x):
        return torch.sigmoid(x)


class Variance(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.pitch_predictor = Predictor(dim)
        self.gate = Gate()
        self.pitch_embed = nn.Linear(1, dim)

    def forward(self, condition):
        pitch = self.pitch_predictor(condition)
        condition = condition + self.pitch_embed(pitch)  # a new tensor
        return condition

    def gated(self, condition):
        g = self.gate(condition)
        condition += g  # a sigmoid saves its output, not its input
        return condition
""",
    ]

    def visit_Expr(self, node, ctx: Context) -> None:
        super().visit_Expr(node, ctx)
        if type(node.value) is cst.Call and call_name(node.value) == "step":
            self._check_step_before_backward(node, node.value, ctx)

    def visit_Assign(self, node, ctx: Context) -> None:
        super().visit_Assign(node, ctx)
        if self.analysis.may_contain("Sequential") and self.analysis.may_contain("inplace") or self.analysis.may_contain("(True)"):
            self._check_sequential_layers(node, ctx)

    SEQUENCE_MESSAGE = (
        "`{layer}` changes in place the output of `{previous}` right before it in the sequence, "
        "which autograd saved for backward"
    )
    SEQUENCE_FIX = "build `{layer}` without `inplace=True`"

    def _check_sequential_layers(self, node, ctx: Context) -> None:
        """``nn.Sequential(..., nn.ReLU(inplace=True), nn.Dropout(inplace=True), ...)``: an
        in-place layer right after a layer that saves its output (ReLU, Sigmoid, Tanh,
        Softmax) overwrites that output, and backward raises."""
        for constructor in iter_expression_nodes(node.value):
            if type(constructor) is not cst.Call or last_part(self.analysis.qualified_name(constructor.func) or "") != "Sequential" \
                    or not (self.analysis.qualified_name(constructor.func) or "").startswith("torch.nn."):
                continue
            layers = [arg.value for arg in constructor.args if not arg.star and arg.keyword is None]
            for previous, layer in zip(layers, layers[1:]):
                if type(previous) is not cst.Call or type(layer) is not cst.Call:
                    continue
                if self._saving_constructor(previous, 0, ctx) is None or not _builds_in_place(self.analysis, layer):
                    continue
                self.report(layer, self.SEQUENCE_MESSAGE.format(layer=self.code(layer, 40), previous=self.code(previous, 40)),
                            self.SEQUENCE_FIX.format(layer=self.code(layer.func, 30)))
                return

    def _check_step_before_backward(self, node, call, ctx: Context) -> None:
        """``critic_optim.step()`` between computing ``policy_loss`` through ``self.critic`` and
        ``policy_loss.backward()``: the step updates the critic's weights in place, and the
        backward needs the weights the forward used (PyTorch >= 1.5 raises "modified by an
        inplace operation"; before that, the gradients were silently wrong)."""
        analysis = self.analysis
        optimizer = analysis.stepped_optimizer(call, ctx)
        if optimizer is None:
            return
        if type(optimizer) is cst.Subscript:  # self.q_optimizers[i].step()
            optimizer = optimizer.value
        owners = analysis.optimized_modules(optimizer, ctx) or self._modules_named_like(optimizer, ctx)
        if not owners:
            return
        scope = ctx.scope
        for stmt, stmt_ctx in scope.statements:
            if stmt_ctx.order <= ctx.order or stmt_ctx.scope is not scope:
                continue
            for inner in analysis.calls_in(stmt):
                if call_name(inner) != "backward" or type(inner.func) is not cst.Attribute:
                    continue
                root = dotted_name(inner.func.value)
                binding = analysis.lookup(root, stmt_ctx) if root is not None else None
                if binding is None or binding.ctx.scope is not scope or binding.ctx.order >= ctx.order:
                    continue  # computed after the step: from the new weights
                if analysis.exclusive_branches(node, stmt, scope):
                    continue
                module = self._computed_through(root, binding.ctx, owners, scope)
                if module is not None:
                    self.report(node, self.STEP_MESSAGE.format(step=self.code(call, 40), module=module,
                                                              loss=root, backward=self.code(stmt, 40)),
                                self.STEP_FIX.format(step=self.code(call, 40), backward=self.code(stmt, 40)))
                    return

    def _modules_named_like(self, optimizer, ctx: Context) -> set[str]:
        """For an optimizer the class is handed (``self.critic1_optim = critic1_optim``): the
        attribute of the class named for the same part (``self.critic1``; ``self.q_net_list``
        for ``self.q_optimizer_list``)."""
        key = dotted_name(optimizer)
        class_scope = ctx.scope.class_scope
        if key is None or not key.startswith("self.") or key.count(".") != 1 or class_scope is None:
            return set()
        stem = _part_words(last_part(key), OPTIMIZER_NAME_WORDS)
        if not stem:
            return set()
        return {
            attribute for attribute in class_scope.bindings
            if attribute.startswith("self.") and attribute.count(".") == 1 and attribute != key
            and _part_words(last_part(attribute), NETWORK_NAME_WORDS) == stem
        }

    def _computed_through(self, root: str, ctx: Context, owners: set, scope) -> str | None:
        """The module of ``owners`` that a call in the computation of ``root`` runs, or None."""
        analysis = self.analysis
        for key in analysis._sources_closure({root}, scope):
            for binding in scope.bindings.get(key, ()):
                if binding.kind != "assign" or binding.value is None or binding.ctx.order > ctx.order:
                    continue
                for node in iter_expression_nodes(binding.value):
                    if type(node) is not cst.Call:
                        continue
                    func = node.func.value if type(node.func) is cst.Subscript else node.func  # self.q_nets[i](x)
                    called = dotted_name(func)
                    if called in owners:
                        return called
        return None

    def check_mutation(self, node, ctx: Context) -> None:
        if ctx.scope.kind == "class":
            return  # class bodies run no tensor code worth checking
        operands = self.analysis.mutated_operands(node) + self._inplace_activation_inputs(node, ctx)
        if not operands or self.analysis.in_eval_branch(node, ctx):
            return  # an in-place shortcut taken only in eval mode, where nobody backpropagates
        evaluation = eval_side(getattr(node, "value", None))
        if evaluation is not None:  # y = y.log1p() if self.training else y.log1p_()
            inside = {id(each) for each in iter_expression_nodes(evaluation)}
            operands = [operand for operand in operands if id(operand) not in inside]
        for operand in operands:
            base = strip_views(operand, through_detach=True)
            if type(base) is cst.Call and self.analysis.grad_enabled(ctx):
                # `self.dropout(F.relu(h))` with `self.dropout = nn.Dropout(inplace=True)`
                op = self._saving_op(base, ctx)
                if op is not None:
                    name = self.code(base, 30)
                    self.report(node, self.MESSAGE.format(stmt=self.code(node, 60), name=name, op=op),
                                self.FIX.format(name=name))
                    return
            key = dotted_name(base) if base is not None else None
            if key is None:
                continue
            if type(node) is cst.Assign and self._python_list(key, ctx):
                continue  # `laterals[i] = conv(laterals[i])` replaces an element of a list
            split = self._split_view(key, ctx, 0)
            if split is not None and self.analysis.grad_enabled(ctx):
                name = self.code(base, 30)
                self.report(node, self.SPLIT_MESSAGE.format(stmt=self.code(node, 60), name=name, op=split),
                            self.FIX.format(name=name), autofix=self._autofix(node, base, ctx))
                return
            origin = self._saved_origin(key, ctx, 0)
            if origin is not None and self._graph_still_needed(origin[1], ctx):
                # an element of a list of layer outputs (`laterals[i - 1] += ...`) is the tensor
                element = node.target if type(node) is cst.AugAssign else operand
                name = self.code(element if self._python_list(key, ctx) else base, 30)
                self.report(node, self.MESSAGE.format(stmt=self.code(node, 60), name=name, op=origin[0]) + origin[2],
                            self.FIX.format(name=name), autofix=self._autofix(node, base, ctx))
                return
            found = self._saved_as_input(node, operand, base, key, ctx)
            if found is not None:
                op, own = found
                name = self.code(base, 30)
                # a copy made before the statement would be what its own op saves: no fix then
                self.report(node, self.INPUT_MESSAGE.format(stmt=self.code(node, 60), name=name, op=op),
                            self.FIX.format(name=name), autofix=None if own else self._autofix(node, base, ctx))
                return

    def _inplace_activation_inputs(self, node, ctx: Context) -> list:
        """Inputs the statement's calls change in place through an activation built with
        ``inplace=True``: ``self.act(x)`` with ``self.act = nn.LeakyReLU(0.2, inplace=True)``, an
        ``nn.Sequential`` that starts with one, ``F.relu(x, inplace=True)``."""
        value = getattr(node, "value", None) if type(node) in (cst.Assign, cst.Expr, cst.AugAssign, cst.AnnAssign, cst.Return) else None
        if value is None or not self.analysis.may_contain("inplace"):
            return []
        found = []
        for call in (node for node in iter_expression_nodes(value) if type(node) is cst.Call):  # nested ones too
            arguments = call_arguments(call)
            if not arguments:
                continue
            qualified = self.analysis.qualified_name(call.func) or ""
            if qualified.startswith("torch.nn.functional.") and _inplace_true(call):
                found.append(arguments[0])
                continue
            key = dotted_name(call.func)
            binding = self.analysis.lookup(key, ctx) if key else None
            if binding is not None and binding.kind == "assign" and not binding.element \
                    and type(binding.value) is cst.Call and self._starts_in_place(binding.value):
                found.append(arguments[0])
        return found

    def _starts_in_place(self, constructor) -> bool:
        """``nn.ReLU(inplace=True)``, or an ``nn.Sequential`` whose first layer is one."""
        qualified = self.analysis.qualified_name(constructor.func) or ""
        if not qualified.startswith("torch.nn."):
            return False
        if last_part(qualified) == "Sequential":
            layers = call_arguments(constructor)
            return bool(layers) and type(layers[0]) is cst.Call and not any(arg.star for arg in constructor.args) \
                and self._starts_in_place(layers[0])
        return _inplace_true(constructor)

    def _autofix(self, node, base, ctx: Context) -> Fix | None:
        """Unsafe (another alias of the tensor no longer sees the update): give the name a copy
        of its own right before the update, so the saved tensor stays as autograd saved it.
        Not under ``no_grad``, where the copy would cut the graph."""
        if type(base) is not cst.Name or ctx.grad is not GradMode.ENABLED or self._python_list(base.value, ctx):
            return None  # (a list has no `.clone()`: its element is what changes)
        key = base.value
        return Fix.unsafe(f"Clone `{key}` before updating it in place", InsertBefore(node, f"{key} = {key}.clone()"))

    def _split_view(self, key: str, ctx: Context, depth: int) -> str | None:
        """The op when ``key`` holds one of the views a multi-output op returned, from a tensor
        that requires grad: ``q, k, v = qkv.chunk(3, dim=-1)`` (``split``, ``unbind``,
        ``tensor_split``), also after view-only reshaping (``q = rearrange(q, ...)``, ``q =
        q.transpose(1, 2)``, ``q, k, v = map(lambda t: rearrange(t, ...), (q, k, v))``).
        Autograd refuses an in-place change of such a view as soon as it happens."""
        if depth > MAX_ALIAS_DEPTH:
            return None
        for binding in self._possible_bindings(key, ctx):  # any path: `if mask: q = q * m`
            found = self._split_view_binding(binding, depth)
            if found is not None:
                return found
        return None

    def _possible_bindings(self, key: str, ctx: Context) -> list[Binding]:
        """The bindings of ``key`` that may be in force at ``ctx``: the reaching ones, and
        earlier ones of the same scope back to the last that ran unconditionally (a binding
        under an ``if`` without ``else`` leaves the one before it in force on the other path)."""
        analysis = self.analysis
        found = list(analysis.reaching_bindings(key, ctx))
        if not found or found[0].ctx.guard is None:
            return found
        earlier = [b for b in ctx.scope.bindings.get(key, ()) if b.ctx.order < found[-1].ctx.order]
        for binding in reversed(earlier):
            found.append(binding)
            if binding.ctx.guard is None:
                break
        return found

    def _split_view_binding(self, binding: Binding, depth: int) -> str | None:
        analysis = self.analysis
        if binding.kind != "assign":
            return None
        value = binding.value
        if type(value) is not cst.Call:
            return None
        name = call_name(value) or ""
        arguments = call_arguments(value)
        if binding.element and name in MULTI_VIEW_OPS:
            func = value.func
            source = func.value if type(func) is cst.Attribute and not (analysis.qualified_name(func) or "").startswith("torch.") \
                else (arguments[0] if arguments else None)
            return f"{name}()" if source is not None and analysis.is_attached(source, binding.ctx) else None
        if binding.element and name == "map" and len(arguments) == 2 and type(arguments[0]) is cst.Lambda \
                and type(arguments[1]) in (cst.Tuple, cst.List) and _view_only(arguments[0].body):
            elements = arguments[1].elements
            index = binding.element[0]
            inner = dotted_name(elements[index].value) if 0 <= index < len(elements) else None
            return self._split_view(inner, binding.ctx, depth + 1) if inner else None
        if not binding.element and _view_only(value) and arguments or (
                not binding.element and type(value.func) is cst.Attribute and value.func.attr.value in VIEW_ONLY_CALLS):
            inner = value.func.value if type(value.func) is cst.Attribute and value.func.attr.value in VIEW_ONLY_CALLS \
                else arguments[0]
            inner_key = dotted_name(inner)
            return self._split_view(inner_key, binding.ctx, depth + 1) if inner_key else None
        return None

    def _saved_origin(self, key: str, ctx: Context, depth: int) -> tuple[str, Binding, str] | None:
        """(op, binding, note) when ``key`` at ``ctx`` holds the output of an output-saving op computed
        in this scope (following in-place updates, aliases and views)."""
        binding = self.analysis.lookup(key, ctx)
        if binding is None or binding.ctx.scope is not ctx.scope or depth > MAX_ALIAS_DEPTH:
            return None
        if binding.kind == "augassign":  # an earlier in-place update: same tensor
            return self._saved_origin(key, binding.ctx, depth + 1)
        value = self.analysis.bound_value(binding)
        if value is None and binding.element and type(binding.value) is cst.Call:
            value = binding.value  # evals, evecs = torch.linalg.eigh(a): each output is saved
        if value is not None:
            value = strip_views(value, through_detach=True)
        if type(value) is cst.Call:
            op = self._saving_op(value, binding.ctx)
            if op is None and value.args and self._may_be_identity(value.func, binding.ctx):
                # `x = self.lab(x)` with `self.lab = nn.Identity()` on one path of `__init__`,
                # `x = self.dropout(x)`
                argument = strip_views(value.args[0].value, through_detach=True)
                inner = dotted_name(argument) if argument is not None else None
                found = self._saved_origin(inner, binding.ctx, depth + 1) if inner else None
                if type(argument) is cst.Call:  # `self.dropout(F.relu(h))`
                    op = self._saving_op(argument, binding.ctx)
                    found = (op, binding, "") if op is not None else None
                if found is not None and self._is_dropout(value.func):
                    note = f" (`{self.code(value.func, 30)}` hands its input back in eval mode or with p=0)"
                    return found[0], found[1], note
                return found
            return (op, binding, "") if op is not None else None
        if type(value) is cst.ListComp:  # laterals = [conv(x[i]) for i, conv in enumerate(self.lateral_convs)]
            op = self._element_saving_op(value, binding.ctx)
            return (op, binding, "") if op is not None else None
        alias = dotted_name(value) if value is not None else None
        return self._saved_origin(alias, binding.ctx, depth + 1) if alias else None

    def _may_be_identity(self, func, ctx: Context) -> bool:
        """Does the call may hand back its input itself: ``self.X`` built as ``nn.Identity()``
        on some path of the class's methods, or a dropout (``nn.Dropout``, ``F.dropout``),
        which returns its very input in eval mode or with ``p=0`` (measured, torch 2.13)?"""
        qualified = self.analysis.qualified_name(func) or ""
        if qualified.rpartition(".")[0] == "torch.nn.functional" and last_part(qualified) in DROPOUTS:
            return True
        key = dotted_name(func)
        class_scope = ctx.scope.class_scope
        if key is None or not key.startswith("self.") or class_scope is None:
            return False
        if DROP_WORDS & set(name_words(last_part(key))):
            return True  # `self.dropout_fn`, `self.drop_path`: given to the constructor, a dropout by name
        for binding in class_scope.bindings.get(key, ()):
            if binding.kind != "assign" or type(binding.value) is not cst.Call:
                continue
            built = self.analysis.qualified_name(binding.value.func) or ""
            if built == "torch.nn.Identity" or (built.startswith("torch.nn.") and last_part(built) in DROPOUT_MODULES):
                return True
        return False

    def _is_dropout(self, func) -> bool:
        qualified = self.analysis.qualified_name(func) or ""
        return last_part(qualified) in DROPOUTS | DROPOUT_MODULES or bool(DROP_WORDS & set(name_words(last_part(dotted_name(func) or ""))))

    def _python_list(self, key: str, ctx: Context) -> bool:
        binding = self.analysis.lookup(key, ctx)
        return binding is not None and binding.kind == "assign" and type(binding.value) in (cst.ListComp, cst.List)

    def _element_saving_op(self, comprehension, ctx: Context) -> str | None:
        """The op when every element of a list comprehension is the output of a layer, from a
        layer container, that saves its output: ``[conv(inputs[i]) for i, conv in
        enumerate(self.lateral_convs)]`` with ``self.lateral_convs.append(ConvModule(...))``
        in ``__init__`` (an FPN's laterals, which its top-down path adds into in place)."""
        element = comprehension.elt
        loop = comprehension.for_in
        if type(element) is not cst.Call or type(element.func) is not cst.Name or loop.inner_for_in is not None:
            return None
        layer, iterable, target = element.func.value, loop.iter, loop.target
        if type(iterable) is cst.Call and dotted_name(iterable.func) == "enumerate" and iterable.args \
                and type(target) is cst.Tuple and len(target.elements) == 2:
            iterable, target = iterable.args[0].value, target.elements[1].value
        if type(target) is not cst.Name or target.value != layer:
            return None
        container = dotted_name(iterable)
        found = self._saving_elements(container, ctx)
        return f"{found[0]} in {container}" if found is not None else None

    def _saving_elements(self, container: str | None, ctx: Context) -> tuple[str, bool] | None:
        """(op, trained) when every layer put into the instance's container ``self.blocks``
        (appended in a loop of ``__init__``, or listed in ``nn.ModuleList([...])``) saves its
        output; None when any of them does not or one is unknown."""
        class_scope = ctx.scope.class_scope
        if container is None or not container.startswith("self.") or class_scope is None:
            return None
        constructors = self._element_constructors(container, class_scope)
        found = [self._saving_constructor(constructor, 0, constructor_ctx) if type(constructor) is cst.Call else None
                 for constructor, constructor_ctx in constructors]
        if not found or any(item is None for item in found):
            return None
        return found[0][0], all(item[1] for item in found)

    def _element_constructors(self, container: str, class_scope) -> list:
        """(constructor, ctx) of every layer the class's methods put into ``container``; an
        unknown element makes the list empty."""
        constructors = []
        for method in self.analysis.scopes.values():
            if method.class_scope is not class_scope or method.kind != "function":
                continue
            for stored in method.stores.get(container, ()):
                if type(stored) is cst.Name:
                    bindings = [b for b in method.bindings.get(stored.value, ()) if b.kind == "assign" and not b.element]
                    if len(bindings) != 1:
                        return []
                    constructors.append((bindings[0].value, bindings[0].ctx))
                else:
                    constructors.append((stored, None))
            for binding in method.bindings.get(container, ()):
                value = binding.value if binding.kind == "assign" and not binding.element else None
                if type(value) is not cst.Call or last_part(dotted_name(value.func) or "") != "ModuleList":
                    return []
                listed = call_arguments(value)
                if not listed:
                    continue  # `nn.ModuleList()`, filled by appends
                if type(listed[0]) is cst.ListComp:
                    constructors.append((listed[0].elt, binding.ctx))
                elif type(listed[0]) is cst.List:
                    constructors.extend((element.value, binding.ctx) for element in listed[0].elements)
                else:
                    return []
        return constructors

    def _saving_op(self, call, ctx: Context) -> str | None:
        """The op name when ``call`` runs an output-saving op, with autograd recording, on an
        input that requires grad."""
        analysis = self.analysis
        func = call.func
        qualified = analysis.qualified_name(func)
        op = source = None
        if qualified is not None:
            namespace, _, name = qualified.rpartition(".")
            name = OUTPUT_SAVING_ALIASES.get(name, name)
            if namespace in OUTPUT_SAVING_NAMESPACES and (name in OUTPUT_SAVING_OPS or _inplace_saving_call(name, call)):
                arguments = call_arguments(call)
                op, source = qualified, arguments[0] if arguments else keyword_argument(call, "input")
        elif type(func) is cst.Attribute and func.attr.value in OUTPUT_SAVING_OPS:
            if self._requires_grad(func.value, ctx):  # x.sigmoid() on a tensor, not self.relu(x)
                op, source = func.attr.value, func.value
        trained_layers = False
        if op is None:
            found = self._saving_module(func, ctx)
            op, trained_layers = found if found is not None else (None, False)
            arguments = call_arguments(call)
            source = arguments[0] if op is not None and arguments else None
        if source is None:
            return None
        # (`F.relu(x, inplace=True)` saves its result like the out-of-place call: measured, a
        # later `y += 1` makes backward() raise)
        # a Sequential's activation gets its input from the layers before it, which train
        return op if trained_layers or self._requires_grad(source, ctx) or self._model_computed(source, ctx) else None

    def _saving_module(self, func, ctx: Context) -> tuple[str, bool] | None:
        """``self.act`` bound to ``nn.Sigmoid()`` (not ``nn.ReLU(inplace=True)``)."""
        key = dotted_name(func)
        if key is None:
            return None
        analysis = self.analysis
        binding = analysis.lookup(key, ctx)
        if binding is not None and binding.kind == "for":
            # `for i, block in enumerate(self.blocks): x = block(x)`
            iterable, element = binding.value, binding.element
            if type(iterable) is cst.Call and dotted_name(iterable.func) == "enumerate" and iterable.args \
                    and element[:1] == (1,):
                iterable, element = iterable.args[0].value, element[1:]
            return self._saving_elements(dotted_name(iterable), ctx) if element == () else None
        if binding is None or binding.kind != "assign" or binding.element:
            return None
        if key.startswith("self.") and ctx.scope.class_scope is not None:
            # `if agg == "ese": self.aggregation = ...` / `else: self.aggregation = ...`: built one
            # way or another in `__init__`, it saves its output when any of the ways does
            for other in ctx.scope.class_scope.bindings.get(key, ()):
                if other is not binding and other.kind == "assign" and not other.element and type(other.value) is cst.Call:
                    found = self._saving_constructor(other.value, 0, other.ctx)
                    if found is not None:
                        return found
        value = binding.value
        if type(value) is cst.Name:  # `self.act = act`, the constructor's `act=nn.ReLU()` by default
            value = analysis.parameter_default(analysis.lookup(value.value, binding.ctx))
        if type(value) is not cst.Call:
            return None
        return self._saving_constructor(value, 0, binding.ctx)

    def _saving_constructor(self, constructor, depth: int, ctx: Context | None = None) -> tuple[str, bool] | None:
        """(op, whether layers with parameters feed it) for ``nn.Sigmoid()``, or for an
        ``nn.Sequential(...)`` whose last layer is one: its output is the output the activation
        saved, computed from the layers before it."""
        while type(constructor.func) is cst.Attribute and constructor.func.attr.value in MODULE_MOVES \
                and type(constructor.func.value) is cst.Call:
            constructor = constructor.func.value  # `nn.Sequential(...).to(device)`
        qualified = self.analysis.qualified_name(constructor.func) or ""
        if not qualified and type(constructor.func) is cst.Name and ctx is not None:
            # `activation()` with `activation=nn.ReLU` a parameter of the constructor
            binding = self.analysis.lookup(constructor.func.value, ctx)
            default = self.analysis.parameter_default(binding) if binding is not None and binding.kind == "param" else None
            qualified = self.analysis.qualified_name(default) or "" if default is not None else ""
            if qualified.startswith("torch.nn."):
                constructor = cst.Call(func=default)
        if qualified.startswith(MMCV_PREFIXES) and last_part(qualified) == "ConvModule":
            return self._conv_module(constructor, depth, ctx)
        func = constructor.func
        if type(func) is cst.Attribute and func.attr.value in CHAIN_APPENDS and type(func.value) is cst.Call \
                and depth < MAX_ALIAS_DEPTH:
            # `Seq().append(conv).append(norm).append(ME.MinkowskiReLU())`: a sequence built by a chain
            layers = call_arguments(constructor)
            last = layers[-1] if layers else None
            found = self._saving_constructor(last, depth + 1, ctx) if type(last) is cst.Call else None
            return (found[0], True) if found is not None else None
        if last_part(qualified or dotted_name(func) or "") == "build_activation_layer" and constructor.args:
            # OpenMMLab's `build_activation_layer(act_cfg)`, `act_cfg=dict(type="ReLU")` by default
            activation = self._activation_type(constructor.args[0].value, depth, ctx)
            return (f"build_activation_layer(...) (a {activation})", False) \
                if activation in OUTPUT_SAVING_ACTIVATION_TYPES else None
        if not qualified.startswith("torch.nn."):
            activation = _foreign_activation(last_part(qualified or dotted_name(func) or ""))
            if activation is not None and self.analysis.class_named(func) is None:
                # MinkowskiEngine's `ME.MinkowskiReLU()` runs torch's relu (a project's `ConvBNReLU`
                # is read instead)
                return f"{dotted_name(func)}()", False
            return self._project_block(constructor, depth)
        if last_part(qualified) == "Sequential" and depth < MAX_ALIAS_DEPTH:
            if len(constructor.args) == 1 and constructor.args[0].star == "*" and ctx is not None:
                return self._listed_sequential(constructor.args[0].value, depth, ctx)  # `nn.Sequential(*layers)`
            layers = call_arguments(constructor)
            last = layers[-1] if layers else None
            if type(last) is cst.Name and ctx is not None:  # `nn.Sequential(squeeze_conv, excitation_conv)`
                binding = self.analysis.lookup(last.value, ctx)
                if binding is not None and binding.kind == "assign" and not binding.element:
                    last = binding.value
            if type(last) is not cst.Call or any(arg.star for arg in constructor.args):
                return None
            found = self._saving_constructor(last, depth + 1, ctx)
            if found is None:
                return None
            trained = found[1] or any(
                type(layer) is cst.Call and (
                    last_part(self.analysis.qualified_name(layer.func) or "") in PARAMETERISED_LAYERS
                    or self.analysis.is_module_class(layer.func)  # a project's ConvLayer(...)
                )
                for layer in layers[:-1]
            )
            return found[0], trained
        if last_part(qualified) in INPLACE_OUTPUT_SAVING_MODULES:
            _, position = INPLACE_OUTPUT_SAVING_MODULES[last_part(qualified)]
            if _inplace_true(constructor) or _true_at(constructor, position):
                return f"{self.code(constructor, 40)}", False  # its result, when it runs in place
            return None
        if last_part(qualified) not in OUTPUT_SAVING_MODULES:
            return None  # (an inplace=True ReLU saves its result all the same: `x = self.relu(x); x += y` raises)
        return f"{dotted_name(constructor.func)}()", False

    def _listed_sequential(self, listed, depth: int, ctx: Context) -> tuple[str, bool] | None:
        """(op, whether layers with parameters feed it) for ``nn.Sequential(*layers)`` with
        ``layers = [conv, nn.ReLU(inplace=True)]`` built in the same function, changed only by
        ``layers.insert(1, bn)`` (the last layer stays) or ``layers.append(act)`` (every layer
        that may end up last must save its output)."""
        if type(listed) is not cst.Name:
            return None
        scope = ctx.scope
        bindings = [b for b in scope.bindings.get(listed.value, ()) if b.ctx.scope is scope]
        if len(bindings) != 1 or bindings[0].kind != "assign" or bindings[0].element \
                or type(bindings[0].value) is not cst.List or not bindings[0].value.elements:
            return None
        layers = [element.value for element in bindings[0].value.elements]
        lasts = [layers[-1]]
        for stmt, stmt_ctx in scope.statements:
            if stmt_ctx.scope is not scope:
                continue
            for call in self.analysis.calls_in(stmt):
                func = call.func
                if type(func) is not cst.Attribute or type(func.value) is not cst.Name or func.value.value != listed.value:
                    continue
                arguments = call_arguments(call)
                if func.attr.value == "insert" and len(arguments) == 2 and type(arguments[0]) is cst.Integer \
                        and 0 <= int(arguments[0].value) < len(layers):
                    layers.insert(0, arguments[1])  # before the last: only its training matters
                elif func.attr.value == "append" and len(arguments) == 1:
                    lasts.append(arguments[0])
                    layers.insert(0, arguments[0])
                else:
                    return None  # extended, popped, handed on: what ends it is unknown
        found = [self._saving_constructor(last, depth + 1, ctx) if type(last) is cst.Call else None for last in lasts]
        if any(item is None for item in found):
            return None
        trained = any(item[1] for item in found) or any(
            type(layer) is cst.Call and (
                last_part(self.analysis.qualified_name(layer.func) or "") in PARAMETERISED_LAYERS
                or self.analysis.is_module_class(layer.func))
            for layer in layers if not any(layer is last for last in lasts))
        return found[0][0], trained

    def _conv_module(self, constructor, depth: int, ctx: Context | None) -> tuple[str, bool] | None:
        """(op, True) for OpenMMLab's ``ConvModule(...)`` when its last layer is an activation
        that saves its output: conv, norm, act in that order by default, and the activation is
        ``dict(type="ReLU")`` unless ``act_cfg`` says otherwise (``act_cfg=None``: none)."""
        order = keyword_argument(constructor, "order")
        if order is not None and not (type(order) in (cst.Tuple, cst.List) and order.elements
                                      and _string(order.elements[-1].value) == "act"):
            return None
        config = keyword_argument(constructor, "act_cfg")  # (`act_cfg=None` is the name None, no activation)
        activation = "ReLU" if config is None else self._activation_type(config, depth, ctx)
        if activation not in CONV_MODULE_SAVING_ACTIVATIONS:
            return None
        return f"ConvModule(...) (its forward ends in {activation})", True

    def _activation_type(self, config, depth: int, ctx: Context | None) -> str | None:
        """The ``type`` of an OpenMMLab activation config: ``dict(type="ReLU")``, ``{"type":
        "ReLU"}``, or a name bound to one (a local, a parameter's default); None when it is
        ``None`` or unknown."""
        if depth > MAX_ALIAS_DEPTH or config is None:
            return None
        if type(config) is cst.Call and dotted_name(config.func) == "dict":
            return _string(keyword_argument(config, "type"))
        if type(config) is cst.Dict:
            return next((_string(element.value) for element in config.elements
                         if type(element) is cst.DictElement and _string(element.key) == "type"), None)
        if type(config) is cst.Name and ctx is not None:
            binding = self.analysis.lookup(config.value, ctx)
            if binding is not None and binding.kind == "assign" and not binding.element:
                return self._activation_type(binding.value, depth + 1, binding.ctx)
            if binding is not None and binding.kind == "param":
                return self._activation_type(self.analysis.parameter_default(binding), depth + 1, binding.ctx)
        return None

    def _project_forward(self, constructor, depth: int):
        """(class, its ``forward``, this rule in the terms of the class's module) for a module
        class of the project (this file or another) that ``constructor`` builds; None when it is
        not one, has no ``forward`` torchlint can read, or the chain of blocks is too deep."""
        analysis = self.analysis
        class_scope = analysis.class_named(constructor.func) if depth < MAX_ALIAS_DEPTH else None
        if class_scope is None:
            return None
        owner = class_scope.owner
        if not owner._local_class_is_module(class_scope.name, set()):
            return None
        forward = owner.method_of(class_scope, "forward", set())
        if forward is None:
            return None
        return class_scope, forward, self if owner is analysis else type(self)(owner, [], self.options)

    def _project_block(self, constructor, depth: int) -> tuple[str, bool] | None:
        """(op, True) for a module class of the project (this file or another) whose
        ``forward`` returns, on every path, the output of an output-saving op: a
        ``ConvBNReLU`` block ending in ``self.relu(...)``. Adding into its output in place
        (``out = self.block(x); out += identity``) changes what that activation saved."""
        block = self._project_forward(constructor, depth)
        if block is None:
            return None
        class_scope, forward, rule = block
        values = rule.analysis.returned_return_values(forward)
        if not values:
            return None
        for value, ctx in values:
            value = strip_views(value, through_detach=True)
            if type(value) is cst.Call:
                op = rule._saving_op(value, ctx)
            else:
                key = dotted_name(value) if value is not None else None
                found = rule._saved_origin(key, ctx, depth + 1) if key else None
                op = found[0] if found is not None else None
            if op is None:
                return None
        return f"{class_scope.name}() (its forward ends in {op})", True

    def _model_computed(self, expr, ctx: Context) -> bool:
        """Inside a method of a module class: is ``expr`` computed (through the function's
        bindings) from a call of the module's own layers or methods, ``self.V(x)``,
        ``self.encoder(h)``? Such results carry the module's parameters' graph even when the
        methods are too deep (or in another file) to be followed."""
        scope = ctx.scope
        method = scope
        while method.parent is not None and method.parent.kind == "function":
            method = method.parent  # `def _inner_forward(x):` inside `forward` (checkpointed blocks)
        parent = method.parent
        if scope.kind != "function" or parent is None or parent.kind != "class" \
                or not self.analysis.is_module_class(parent.node.name):
            return False
        memo = scope._memo.setdefault("tl302_model_computed", {})
        roots = frozenset(mentioned_keys(expr, skip_detached=True))
        if roots not in memo:
            closure = self.analysis._sources_closure(roots, scope)
            memo[roots] = any(
                # forward(self, x): what the module is given comes out of the layers before it
                (binding.kind == "param" and method.name == "forward" and key != "self")
                or (binding.kind == "assign" and _calls_own_member(binding.value))
                for key in closure
                for binding in scope.bindings.get(key, ())
                if binding.kind == "param" or (binding.kind == "assign" and binding.value is not None)
            ) or _calls_own_member(expr)
        return memo[roots]

    # ------------------------------------------------------------------ saved inputs

    def _saved_as_input(self, node, operand, base, key: str, ctx: Context) -> tuple[str, bool] | None:
        """(op, whether it runs in the mutation's own statement) for the op that saved, as one of its inputs, the tensor ``key`` holds at the mutation
        ``node``: an op earlier in the function (or in the mutation's own right-hand side, as in
        ``x += self.fc(self.norm(x))``), run with autograd recording on the same tensor, whose
        result still goes on to a ``backward()`` after the mutation (with none in between) or
        out of a module's method: ``y = x * w; x.add_(1); y.sum().backward()``."""
        analysis = self.analysis
        scope = ctx.scope
        if analysis.grad_enabled(ctx) and analysis.is_grad_leaf(base, ctx):
            return None  # a leaf that requires grad changed with autograd recording: TL301's finding
        targets = [t.target for t in node.targets] if type(node) is cst.Assign else [getattr(node, "target", None)]
        if any(_maybe_element(expr) for expr in (operand, *targets) if expr is not None) \
                and not self._tensor_by_evidence(base, ctx):
            return None  # `skips[1] = ...` may store into a list: only a tensor's item is a view
        origin = self._tensor_origin(key, ctx)
        aliases = self._aliases(key, origin, ctx)
        for site, site_ctx in self._input_sites(scope):
            if site_ctx.order > ctx.order:
                break
            own = site is node
            if (not own and site_ctx.order == ctx.order) or not analysis.grad_enabled(site_ctx):
                continue
            if not own and analysis.exclusive_branches(site, node, scope):
                continue
            # the tensor under its own name (not rebound in between: `x = x + 1` makes another
            # one) or under a name bound to it (`targets = self.targets`, then `xs * targets`)
            names = [key] if own or self._tensor_origin(key, site_ctx) is origin else []
            names += [alias for alias, binding in aliases if not own and analysis.lookup(alias, site_ctx) is binding]
            for name in names:
                for op, tensors_only in self._saving_input_ops(self._site_ops(site, site_ctx, own), name, site_ctx):
                    if type(node) is cst.AugAssign and not tensors_only and not self._is_tensor(base, ctx):
                        continue  # `scale *= 0.9` on a number that multiplied a tensor
                    if self._result_still_needed(site, site_ctx, ctx, own):
                        return op, own
        return None

    def _aliases(self, key: str, origin, ctx: Context) -> list:
        """(name, binding) of the plain names bound to the tensor ``key`` holds at ``ctx``
        (``targets = self.targets_classes``) earlier in the same function."""
        found = []
        scope = ctx.scope
        for stmt, stmt_ctx in scope.statements:
            if stmt_ctx.order >= ctx.order:
                break
            if stmt_ctx.scope is not scope or type(stmt) is not cst.Assign or len(stmt.targets) != 1 \
                    or type(stmt.targets[0].target) is not cst.Name or dotted_name(stmt.value) != key:
                continue
            if self._tensor_origin(key, stmt_ctx) is not origin:
                continue  # the name held another tensor then
            alias = stmt.targets[0].target.value
            binding = next((b for b in scope.bindings.get(alias, ()) if b.ctx is stmt_ctx), None)
            if binding is not None and alias != key:
                found.append((alias, binding))
        return found

    def _site_ops(self, site, site_ctx: Context, own: bool) -> list:
        """The input-saving ops of a statement (see ``_site_values``), each with its kind,
        operands, whether it takes tensors only and its operands' names (memoised)."""
        memo = site_ctx.scope._memo.setdefault("TL302 site ops", {})
        key = (id(site), own)
        if key not in memo:
            found = []
            for expr in _site_values(site, own):
                for node in iter_expression_nodes(expr):
                    op = self._input_op(node, site_ctx)
                    if op is not None:
                        found.append((node, *op, [self._operand_key(operand, site_ctx) for operand in op[1]]))
            memo[key] = found
        return memo[key]

    def _input_sites(self, scope) -> list:
        """The function's assignments in order, its own statements only (memoised per scope)."""
        memo = scope._memo
        if "TL302 input sites" not in memo:
            memo["TL302 input sites"] = [
                (stmt, ctx) for stmt, ctx in scope.statements
                if ctx.scope is scope and type(stmt) in (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Expr)
            ]
        return memo["TL302 input sites"]

    def _tensor_origin(self, key: str, ctx: Context) -> Binding | None:
        """The binding that made the tensor ``key`` holds at ``ctx``, through in-place updates
        (``x += 1`` keeps the tensor)."""
        binding = self.analysis.lookup(key, ctx)
        for _ in range(MAX_ALIAS_DEPTH):
            if binding is None or binding.kind != "augassign" or binding.ctx.scope is not ctx.scope:
                break
            binding = self.analysis.lookup(key, binding.ctx)
        return binding

    def _saving_input_ops(self, ops: list, key: str, ctx: Context):
        """(op source, whether the op takes tensors only) for each of the ``ops`` that saves
        the operand holding ``key`` for its backward: products save each operand when another
        requires grad, division its divisor when either does and its dividend when the divisor
        does, powers every operand when one does (measured, torch 2.13)."""
        for node, kind, operands, tensors_only, keys in ops:
            keyed = [operand_key == key for operand_key in keys]
            if not any(keyed):
                continue
            needs = [self._requires_grad(operand, ctx) or self._model_computed(operand, ctx) if operand is not None else True
                     for operand in operands]  # (a module's forward input comes out of the layers before it)
            for index, hit in enumerate(keyed):
                if not hit:
                    continue
                others = needs[:index] + needs[index + 1:]
                if kind == "product":
                    saved = any(others)
                elif kind == "divide":
                    saved = needs[1] or (index == 1 and needs[0])
                elif kind == "unary":
                    saved = needs[0]
                else:  # power
                    saved = any(needs)
                if saved:
                    yield self.code(node, 40), tensors_only
                    break

    def _input_op(self, node, ctx: Context):
        """(kind, operands, whether it takes tensors only) when ``node`` is an op that saves inputs: ``a * b``, ``a @
        b``, ``a / b``, ``a ** b``, ``torch.mul`` / ``matmul`` / ``mm`` / ``bmm`` / ``einsum`` /
        ``div`` / ``pow`` (also as tensor methods), ``F.linear`` / ``F.conv*d``, and calls of
        ``torch.nn`` layers with weights (``Linear``, ``Conv*``, norms). A layer's weight stands
        as the operand ``None`` (it requires grad)."""
        kind = type(node)
        if kind is cst.BinaryOperation:
            found = BINARY_INPUT_OPS.get(type(node.operator).__name__)
            return (found, [node.left, node.right], type(node.operator) is cst.MatrixMultiply) if found else None
        if kind is not cst.Call:
            return None
        func = node.func
        qualified = self.analysis.qualified_name(func)
        arguments = call_arguments(node)
        if qualified is not None:
            namespace, _, name = qualified.rpartition(".")
            if namespace in UNARY_INPUT_NAMESPACES and name in UNARY_INPUT_SAVING and arguments:
                return "unary", arguments[:1], True
            if namespace not in INPUT_SAVING_NAMESPACES or name not in INPUT_SAVING_CALLS:
                return None
            found = INPUT_SAVING_CALLS[name]
            if name == "einsum":
                return found, arguments[1:], True
            return (found, arguments[:2], name in TENSOR_ONLY_CALLS) if len(arguments) >= 2 else None
        if type(func) is cst.Attribute and func.attr.value in UNARY_INPUT_SAVING - {"vector_norm"} \
                and not self.analysis.is_module(func.value, ctx):
            return "unary", [func.value], True  # `x.norm(dim=-1, keepdim=True)`: a tensor's method
        if type(func) is cst.Attribute and func.attr.value in INPUT_SAVING_METHODS and arguments:
            name = func.attr.value
            if self.analysis.is_module(func.value, ctx):
                return None  # a module's own method
            return INPUT_SAVING_CALLS[name], [func.value, arguments[0]], name in TENSOR_ONLY_CALLS
        if arguments and self._input_saving_layer(func, ctx):
            return "product", [arguments[0], None], True
        return None

    def _input_saving_layer(self, func, ctx: Context) -> bool:
        """``self.fc`` bound to ``nn.Linear(...)`` (a ``torch.nn`` layer whose weight requires
        grad: not frozen, not ``affine=False``)."""
        analysis = self.analysis
        key = dotted_name(func)
        if key is None:
            return False
        binding = analysis.lookup(key, ctx)
        if binding is None or binding.kind != "assign" or binding.element or type(binding.value) not in (cst.Call, cst.Name):
            return False
        return self._input_saving_constructor(binding.value, binding, 0) and not self._frozen(key, ctx)

    def _input_saving_constructor(self, constructor, binding: Binding, depth: int) -> bool:
        """Does the layer ``constructor`` builds save its input: a ``torch.nn`` layer with a
        weight (``nn.Conv1d(...)``), also wrapped (``nn.utils.weight_norm(conv)``) or first in
        an ``nn.Sequential``, or an earlier binding of the name it is given (``self.pos_conv =
        nn.Sequential(self.pos_conv, SamePad(k), nn.GELU())``)?"""
        analysis = self.analysis
        if depth > MAX_ALIAS_DEPTH:
            return False
        if type(constructor) in (cst.Name, cst.Attribute):
            key = dotted_name(constructor) or ""
            scope = binding.ctx.scope
            owner = scope.class_scope if key.startswith("self.") and scope.class_scope is not None else scope
            earlier = [b for b in owner.bindings.get(key, ()) if b.kind == "assign" and not b.element
                       and b.ctx.order < binding.ctx.order and b.ctx.scope is scope]
            if not earlier and type(constructor) is cst.Name:
                # `self.fn = fn` in `__init__`: the layers every construction of the class hands it
                handed = analysis.constructor_arguments(binding, key) or ()
                return bool(handed) and all(type(strip_pass_through(argument)) is cst.Call
                                            and self._input_saving_constructor(strip_pass_through(argument), binding, depth + 1)
                                            for argument, _ in handed)
            return bool(earlier) and self._input_saving_constructor(earlier[-1].value, earlier[-1], depth + 1)
        if type(constructor) is not cst.Call:
            return False
        qualified = analysis.qualified_name(constructor.func) or ""
        if not qualified.startswith("torch.nn."):
            return self._project_block_saves_input(constructor, depth)
        name = last_part(qualified)
        arguments = call_arguments(constructor)
        if name in ("Sequential", "weight_norm", "spectral_norm") and not any(arg.star for arg in constructor.args):
            return bool(arguments) and self._input_saving_constructor(arguments[0], binding, depth + 1)
        if name not in INPUT_SAVING_LAYERS:
            return False
        for flag in ("affine", "elementwise_affine"):
            value = keyword_argument(constructor, flag)
            if value is not None and not (type(value) is cst.Name and value.value == "True"):
                return False
        return True

    def _project_block_saves_input(self, constructor, depth: int) -> bool:
        """Does the module class of the project (this file or another) that ``constructor``
        builds save its input: the first op its ``forward`` runs on its input is one that saves
        it (``self.norm(x)``, ``self.proj(x)``, ``x @ self.w``), in that class's own terms?"""
        block = self._project_forward(constructor, depth)
        if block is None:
            return False
        class_scope, forward, rule = block
        params = [*forward.node.params.posonly_params, *forward.node.params.params][1:]
        if not params:
            return False
        name = params[0].name.value
        for stmt, ctx in forward.statements:
            if ctx.scope is not forward:
                continue
            own = type(stmt) is cst.Expr
            value = getattr(stmt, "value", None)
            if value is not None and any(type(node) is cst.Name and node.value == name for node in iter_expression_nodes(value)):
                # the first statement that reads the input decides
                return ctx.grad is GradMode.ENABLED and any(
                    key == name for _, _, operands, _, keys in rule._site_ops(stmt, ctx, own)
                    for key in keys) and not rule._frozen_class(class_scope)
            if any(b.ctx is ctx for b in forward.bindings.get(name, ())):
                return False  # rebound before it is read
        return False

    def _frozen_class(self, class_scope) -> bool:
        """Does the class switch ``requires_grad`` off for its own parameters?"""
        return any(switch_ctx.scope.class_scope is class_scope and not enabled
                   for switch_ctx, enabled in self.analysis._requires_grad_switches().get("self", ()))

    def _frozen(self, key: str, ctx: Context) -> bool:
        """Does the module switch ``requires_grad`` off for ``key`` or what holds it? A switch on
        ``self`` (``for p in self.parameters(): p.requires_grad_(False)``) counts only in the
        class it is written in: another class of the file freezing itself freezes no other."""
        switches = self.analysis._requires_grad_switches()
        parts = key.split(".")
        for end in range(1, len(parts) + 1):
            for switch_ctx, enabled in switches.get(".".join(parts[:end]), ()):
                if enabled or (parts[0] == "self" and switch_ctx.scope.class_scope is not ctx.scope.class_scope):
                    continue
                return True
        return False

    def _operand_key(self, operand, ctx: Context) -> str | None:
        """The name whose storage an operand reads (``x`` for ``x``, ``x[:, 0]``, ``x.t()``);
        for ``skips[1]``, which may read an element of a list, only when ``skips`` is a tensor
        by evidence."""
        key = _operand_key(operand)
        if key is not None and _maybe_element(operand) and not self._tensor_by_evidence(
                strip_views(operand, through_detach=True), ctx):
            return None
        return key

    def _tensor_by_evidence(self, expr, ctx: Context) -> bool:
        analysis = self.analysis
        return expr is not None and (analysis.is_tensor(expr, ctx) or analysis.is_grad_leaf(expr, ctx))

    def _is_tensor(self, expr, ctx: Context) -> bool:
        analysis = self.analysis
        return analysis.is_tensor(expr, ctx) or analysis.is_attached(expr, ctx) or analysis.is_grad_leaf(expr, ctx) \
            or self._used_as_tensor(expr, ctx)

    def _used_as_tensor(self, expr, ctx: Context) -> bool:
        """Is a parameter of the function the receiver of a method only tensors have
        (``x.pow(2)``, ``x.permute(...)``)?"""
        key = dotted_name(expr)
        binding = self.analysis.lookup(key, ctx) if key is not None else None
        if binding is None or binding.kind != "param":
            return False
        return any(
            type(call.func) is cst.Attribute and dotted_name(call.func.value) == key and call.func.attr.value in TENSOR_ONLY_METHODS
            for stmt, stmt_ctx in ctx.scope.statements if stmt_ctx.scope is ctx.scope
            for call in self.analysis.calls_in(stmt)
        )

    def _result_still_needed(self, site, site_ctx: Context, ctx: Context, own: bool) -> bool:
        """Does the result of the op at ``site`` go on to a ``backward()`` that comes after the
        mutation at ``ctx``, with no ``backward()`` between the op and the mutation (which
        would have spent its graph), or out of a module's method?"""
        analysis = self.analysis
        scope = ctx.scope
        orders = self._backward_orders(scope)
        if any(site_ctx.order < order < ctx.order for order in orders):
            return False
        results = _result_keys(site)
        if not results:
            return False
        if any(order > ctx.order for order in orders) and results & analysis.backpropagated_keys(scope):
            return True
        if not (scope.kind == "function" and scope.parent is not None and scope.parent.kind == "class"
                and results & analysis.returned_keys(scope)):
            return False
        return scope.name in GRAPH_RETURNING_METHODS or analysis.is_module_class(scope.parent.node.name)

    def _backward_orders(self, scope) -> list[int]:
        """Orders of the function's own statements that call ``backward()`` or
        ``torch.autograd.grad`` (memoised per scope)."""
        memo = scope._memo
        if "TL302 backward orders" not in memo:
            analysis = self.analysis
            memo["TL302 backward orders"] = [
                ctx.order for stmt, ctx in scope.statements
                if ctx.scope is scope and any(
                    call_name(call) in BACKWARD_FUNCTIONS or analysis.qualified_name(call.func) == "torch.autograd.grad"
                    for call in analysis.calls_in(stmt)
                )
            ]
        return memo["TL302 backward orders"]

    def _requires_grad(self, expr, ctx: Context) -> bool:
        analysis = self.analysis
        return analysis.is_attached(expr, ctx) or (analysis.grad_enabled(ctx) and analysis.is_grad_leaf(expr, ctx))

    def _graph_still_needed(self, origin: Binding, ctx: Context) -> bool:
        """A backward() after the mutation reaches the saved tensor, or the method hands it to a
        caller that backpropagates it."""
        analysis = self.analysis
        scope = ctx.scope
        if ctx.order < analysis.last_backward_order(scope) and origin.key in analysis.backpropagated_keys(scope):
            return True
        method = scope
        while method.parent is not None and method.parent.kind == "function":
            method = method.parent  # a helper nested in the method (`_inner_forward`) returns into it
        if not (scope.kind == "function" and method.parent is not None and method.parent.kind == "class"
                and origin.key in analysis.returned_keys(scope)):
            return False
        # forward() / training_step(), or any method of a module (a Lightning module's
        # `descent_loss(...)`): what a model's method returns goes on into its loss
        return method.name in GRAPH_RETURNING_METHODS or analysis.is_module_class(method.parent.node.name)


def _calls_own_member(expr) -> bool:
    """Does ``expr`` call ``self.<name>(...)`` (a layer or method of the module itself)?"""
    for node in iter_expression_nodes(expr):
        if type(node) is cst.Call and type(node.func) is cst.Attribute and type(node.func.value) is cst.Name \
                and node.func.value.value == "self" and node.func.attr.value not in DETACHING_OWN_CALLS:
            return True
    return False


# self.<name>(...) calls that do not compute with the module's parameters
DETACHING_OWN_CALLS = frozenset({"register_buffer", "parameters", "named_parameters", "modules", "children", "log", "log_dict"})


# Methods that add a layer to a sequence and return the sequence, for chains of them.
CHAIN_APPENDS = frozenset({"append", "add"})
# Prefixes that make an activation one that saves its input, not its output.
ACTIVATION_VARIANTS = frozenset({"leaky", "p", "r", "c", "s", "hard", "log", "gumbel", "quick", "soft", "fast"})


def _foreign_activation(name: str) -> str | None:
    """The output-saving activation a class of another library named like one wraps:
    ``MinkowskiReLU`` -> relu (not ``LeakyReLU``, ``PReLU`` or ``Hardtanh``)."""
    for suffix, op in OUTPUT_SAVING_MODULES.items():
        if name.endswith(suffix) and name != suffix:
            prefix = name[: -len(suffix)]
            words = name_words(prefix)
            if prefix[:1].isupper() and words and words[-1] not in ACTIVATION_VARIANTS:
                return op
    return None


# Words that name an optimizer, or a network, around the name of the part it belongs to.
OPTIMIZER_NAME_WORDS = frozenset({"optim", "optimizer", "optimiser", "opt", "optimizers", "optims", "list", "s"})
NETWORK_NAME_WORDS = frozenset({"net", "network", "model", "nets", "networks", "models", "list", "s", "fn", "func"})


def _part_words(name: str, noise: frozenset) -> frozenset:
    """``critic1_optim`` -> {critic, 1}; ``q_net_list`` -> {q}."""
    words = (word.lower() for word in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", name))
    return frozenset(word for word in words if word not in noise)


# Dropouts return their very input in eval mode or with p=0.
DROPOUTS = frozenset({"dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"})
DROP_WORDS = frozenset({"drop", "dropout"})
DROPOUT_MODULES = frozenset({"Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"})


# Ops returning several views of their input; functions and methods that only re-view a tensor.
MULTI_VIEW_OPS = frozenset({"chunk", "split", "unbind", "tensor_split", "split_with_sizes", "hsplit", "vsplit", "dsplit"})
VIEW_ONLY_CALLS = frozenset({"rearrange", "view", "transpose", "permute", "unsqueeze", "squeeze", "movedim", "expand", "t"})


def _view_only(expr) -> bool:
    """A call that only re-views its first operand: ``rearrange(t, ...)``, ``t.view(...)``."""
    if type(expr) is not cst.Call:
        return False
    func = expr.func
    if type(func) is cst.Attribute and func.attr.value in VIEW_ONLY_CALLS:
        return True
    return type(func) is cst.Name and func.value in VIEW_ONLY_CALLS and bool(expr.args)


# Ops that save their inputs for backward (measured on torch 2.13: changing the saved input in
# place before backward() raises). `add` / `sub` save nothing; ops saving their output are above.
BINARY_INPUT_OPS = {"Multiply": "product", "MatrixMultiply": "product", "Divide": "divide", "Power": "power"}
INPUT_SAVING_CALLS = {
    "mul": "product", "multiply": "product", "matmul": "product", "mm": "product", "bmm": "product",
    "einsum": "product", "linear": "product", "conv1d": "product", "conv2d": "product", "conv3d": "product",
    "div": "divide", "divide": "divide", "true_divide": "divide", "pow": "power", "float_power": "power",
}
# Ops that take tensors only (`mul` and the operators also take numbers).
TENSOR_ONLY_CALLS = frozenset({"matmul", "mm", "bmm", "einsum", "linear", "conv1d", "conv2d", "conv3d"})
INPUT_SAVING_METHODS = frozenset({"mul", "multiply", "matmul", "mm", "bmm", "div", "divide", "true_divide", "pow"})
INPUT_SAVING_NAMESPACES = frozenset({"torch", "torch.nn.functional", "torch.Tensor"})
# Reductions that save their one input (measured: `x /= x.norm(dim=-1, keepdim=True)` on a tensor
# that requires grad makes backward() raise; `x /= x.sum()` does not).
UNARY_INPUT_SAVING = frozenset({"norm", "vector_norm", "std", "var"})
UNARY_INPUT_NAMESPACES = frozenset({"torch", "torch.linalg", "torch.Tensor"})
# torch.nn layers whose weight requires grad: they save their input for the weight's gradient.
INPUT_SAVING_LAYERS = frozenset({
    "Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
    "LayerNorm", "GroupNorm", "RMSNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
    "PReLU", "MultiheadAttention", "RNN", "LSTM", "GRU",
})


def _operand_key(operand) -> str | None:
    """The name whose storage an operand reads (``x`` for ``x``, ``x[:, 0]``, ``x.t()``)."""
    if operand is None:
        return None
    base = strip_views(operand, through_detach=True)
    return dotted_name(base) if base is not None else None


def _maybe_element(expr) -> bool:
    """Is ``expr`` (or what it views) indexed by a single integer, ``a[1]``, which reads an
    element when ``a`` is a list and a view only when it is a tensor?"""
    while True:
        kind = type(expr)
        if kind is cst.Subscript:
            if len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index and is_view_subscript(expr):
                value = expr.slice[0].slice.value
                if type(value) is not cst.Ellipsis and not (type(value) is cst.Name and value.value == "None"):
                    return True
            expr = expr.value
        elif kind is cst.Call and type(expr.func) is cst.Attribute:
            expr = expr.func.value
        else:
            return False


def _site_values(site, own: bool) -> list:
    """The expressions of a statement where an op runs before its mutation: the right-hand side
    of an assignment; for the mutation itself, its right-hand side or the arguments of its
    in-place calls (``x.add_(x * w)``)."""
    kind = type(site)
    if kind is cst.Expr:
        if not own:
            return []
        return [arg.value for call in _call_chain(site.value) for arg in call.args]
    value = site.value
    if value is None:
        return []
    if own and kind is cst.Assign and not any(type(t.target) is cst.Subscript for t in site.targets):
        return []
    return [value]


def _result_keys(site) -> set[str]:
    """The names an assignment stores its value in (the base of ``buf[i] = ...``)."""
    kind = type(site)
    targets = [t.target for t in site.targets] if kind is cst.Assign else (
        [site.target] if kind in (cst.AnnAssign, cst.AugAssign) else [])
    if kind is cst.Expr:  # x.add_(x * w): the result goes into the mutated tensor
        targets = [call.func.value for call in _call_chain(site.value) if type(call.func) is cst.Attribute]
    keys: set[str] = set()
    pending = list(targets)
    while pending:
        target = pending.pop()
        if type(target) in (cst.Tuple, cst.List):
            pending.extend(element.value for element in target.elements)
            continue
        if type(target) is cst.StarredElement:
            target = target.value
        base = strip_views(target) if type(target) is cst.Subscript else target
        key = dotted_name(base) if base is not None else None
        if key is not None:
            keys.add(key)
    return keys


# torch.nn layers that take `inplace` as their first positional argument (`nn.ReLU(True)`).
INPLACE_FIRST_LAYERS = frozenset({"ReLU", "ReLU6", "SELU", "SiLU", "Mish", "Hardswish", "Hardsigmoid"})
# torch.nn layers with an `inplace` flag at all.
INPLACE_LAYERS = INPLACE_FIRST_LAYERS | frozenset({
    "LeakyReLU", "ELU", "CELU", "RReLU", "Hardtanh", "Threshold", "Dropout", "Dropout1d", "Dropout2d",
    "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
})


def _builds_in_place(analysis, layer) -> bool:
    """``nn.Dropout(inplace=True)``, ``nn.ReLU(True)``: a ``torch.nn`` layer built to change its input in place."""
    qualified = analysis.qualified_name(layer.func) or ""
    name = last_part(qualified)
    if not qualified.startswith("torch.nn.") or name not in INPLACE_LAYERS:
        return False
    if _inplace_true(layer):
        return True
    positional = [arg.value for arg in layer.args if arg.keyword is None]
    return name in INPLACE_FIRST_LAYERS and bool(positional) and type(positional[0]) is cst.Name \
        and positional[0].value == "True"


def _inplace_saving_call(name: str, call) -> bool:
    """``F.leaky_relu(x, 0.2, inplace=True)``, ``F.elu_(x)``: an activation run in place, which
    saves its result for backward."""
    if name.endswith("_") and name[:-1] in INPLACE_OUTPUT_SAVING_OPS:
        return True
    return name in INPLACE_OUTPUT_SAVING_OPS and _inplace_true(call)


def _true_at(call, position: int) -> bool:
    """Is the positional argument at ``position`` the literal ``True``?"""
    positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
    return len(positional) > position and type(positional[position]) is cst.Name and positional[position].value == "True"


def _inplace_true(call) -> bool:
    """Does the call pass ``inplace=True``?"""
    flag = keyword_argument(call, "inplace")
    return type(flag) is cst.Name and flag.value == "True"


# OpenMMLab's ConvModule (conv, norm, activation in one module) and the activations it can end
# in that save their output for backward (its ReLU-family activations run in place, and an
# in-place ReLU saves its result all the same).
MMCV_PREFIXES = ("mmcv.", "mmengine.", "mmdet.", "mmseg.", "mmpose.", "mmocr.", "mmdet3d.")
CONV_MODULE_SAVING_ACTIVATIONS = frozenset({"ReLU", "LeakyReLU", "Sigmoid", "Tanh", "ELU"})
# ... and those that save their output out of place too, as `build_activation_layer(cfg)` builds
# them (a leaky ReLU or an ELU built without `inplace=True` saves its input).
OUTPUT_SAVING_ACTIVATION_TYPES = frozenset({"ReLU", "Sigmoid", "Tanh"})


def _string(expr) -> str | None:
    if type(expr) is cst.SimpleString:
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None
