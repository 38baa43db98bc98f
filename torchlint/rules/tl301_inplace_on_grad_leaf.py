from __future__ import annotations

from torchlint.analysis import Context, GradMode
from torchlint.fix import Fix, Wrap, torch_reference
from torchlint.rule import InPlaceMutationRule


class InplaceOnGradLeaf(InPlaceMutationRule):
    """
    ## What it does
    Finds in-place changes to a leaf tensor that requires grad, made while autograd is
    recording: in-place methods (`w.add_(...)`, `p.clamp_(...)`, `w.zero_()`, `w.copy_(...)`,
    `w.normal_()`), augmented assignments (`w -= lr * w.grad`) and item or slice assignments
    (`w[0] = 0`). Leaves that require grad are `nn.Parameter(...)` (also `self.weight` when the
    class assigns one to it, `layer.weight` / `layer.bias` of a `torch.nn` layer, and the
    `weight` / `bias` of a model's submodule, `model.emb.weight`, or of a layer taken from a
    module's layer list, `for mi in self.model[-1].m: mi.bias`), tensors
    created with `requires_grad=True` or made so with `.requires_grad_()`, and the loop
    variable of `for p in model.parameters()` / `named_parameters()` / an optimizer's
    `group["params"]`, or a loop variable whose `.grad` the function reads (`for param in
    params: param -= lr * param.grad`; outside classes, since an optimizer class's `step()`
    may run under its caller's `no_grad`). A torch call writing into one with `out=`
    (`torch.arange(n, out=self.freq)`) is an in-place change too.

    ## Why is this bad?
    Autograd refuses it: the statement raises `RuntimeError: a leaf Variable that requires
    grad is being used in an in-place operation` (or "a view of a leaf Variable ..." for
    `w[0] = 0`) on the spot, every time. Manual SGD updates, weight clipping and
    re-initialisation must run under `torch.no_grad()`, where the same statement is correct
    and the parameters change as intended.

    ## Known problems
    Not reported under `torch.no_grad()` / `torch.inference_mode()` (blocks, decorators such as
    `@torch.no_grad()` on an optimizer's `step` or an `init_weights`, functions every caller
    of which runs with grad disabled), on `p.data`, `p.grad` or `p.detach()` (autograd
    allows those; `.data` is not the fix, though: it hides the change from autograd, and
    between a forward pass and its `backward()` gives silently wrong gradients, see TL305), for `torch.nn.init.*_` functions (they disable grad themselves), and for
    parameters whose `requires_grad` the module switches off anywhere
    (`ema.requires_grad_(False)`, `p.requires_grad = False`, or any flag that is not a literal
    `True`; also through a helper of the module, `toggle_grad(model_tgt, False)` with `for p in
    model.parameters(): p.requires_grad_(flag)`). Leaves reached only through calls (`get_weight().add_(1)`), `setattr`, or
    comprehensions are not followed.
    """

    CODE = "TL301"
    NAME = "inplace-on-grad-leaf"
    MESSAGE = "`{stmt}` modifies `{leaf}`, a leaf tensor that requires grad, in place while autograd is recording"
    FIX = "do the update under `with torch.no_grad():`; initialise with `torch.nn.init` functions"
    AUTOFIX = (
        "Safe (the update raised as written): wraps the in-place update in `with "
        "torch.no_grad():`."
    )
    TOKENS = ("requires_grad", "Parameter", "parameters", "param_groups", ".weight", ".bias", ".grad")
    CLAIM = (
        "the bad program raises a RuntimeError about a leaf Variable used in an in-place operation; "
        "the fixed one runs and changes its parameters"
    )

    INVALID = [
        """\
class Model(nn.Module):
    def _initialize_biases(self):
        m = self.model[-1]  # the Detect head
        for mi, s in zip(m.m, m.stride):  # its conv layers
            b = mi.bias.view(m.na, -1)
            b[:, 4] += math.log(8 / (640 / s) ** 2)  # expect: TL301
""",
        """\
def sgd(params, lr, batch_size):
    for param in params:  # reading param.grad says each one is a leaf that requires grad
        param -= lr * param.grad / batch_size  # expect: TL301
        param.grad.zero_()
""",
        """\
class Basis(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.frequencies = nn.Parameter(torch.empty(n))
        self.reset_parameters()

    def reset_parameters(self):
        torch.arange(1, self.frequencies.numel() + 1, out=self.frequencies)  # expect: TL301
""",
        """\
w = torch.randn(10, 1, requires_grad=True)
for x, y in loader:
    loss = ((x @ w - y) ** 2).mean()
    loss.backward()
    w -= 0.01 * w.grad  # expect: TL301
    w.grad.zero_()
""",
        """\
for p in critic.parameters():
    p.clamp_(-0.01, 0.01)  # expect: TL301
""",
        """\
class Detect(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.conv = nn.Conv2d(256, 3 * (num_classes + 5), 1)
        bias = self.conv.bias.view(3, -1)
        bias[:, 4] += math.log(8 / 640 ** 2)  # expect: TL301
""",
        """\
class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(1))

    def forward(self, x):
        self.gain.clamp_(min=0.0)  # expect: TL301
        return x * self.gain
""",
        """\
def toggle_grad(model, requires_grad):
    for p in model.parameters():
        p.requires_grad_(requires_grad)


def update_average(model_tgt, model_src, beta):
    toggle_grad(model_src, False)
    toggle_grad(model_tgt, True)
    for p_tgt, p_src in zip(model_tgt.parameters(), model_src.parameters()):
        p_tgt.copy_(beta * p_tgt + (1.0 - beta) * p_src)  # expect: TL301
""",
    ]
    VALID = [
        """\
class Model(nn.Module):
    def _initialize_biases(self):
        m = self.model[-1]
        for mi, s in zip(m.m, m.stride):
            b = mi.bias.view(m.na, -1)
            b.data[:, 4] += math.log(8 / (640 / s) ** 2)
""",
        """\
class Basis(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.frequencies = nn.Parameter(torch.empty(n))

    @torch.no_grad()
    def reset_parameters(self):
        torch.arange(1, self.frequencies.numel() + 1, out=self.frequencies)
        buffer = torch.empty(3)
        torch.arange(3, out=buffer)
""",
        """\
w = torch.randn(10, 1, requires_grad=True)
for x, y in loader:
    loss = ((x @ w - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= 0.01 * w.grad
    w.grad.zero_()
""",
        """\
for p in critic.parameters():
    p.data.clamp_(-0.01, 0.01)
""",
        """\
@torch.no_grad()
def init_weights(model):
    for name, p in model.named_parameters():
        if "bias" in name:
            p.zero_()
        else:
            nn.init.xavier_uniform_(p)
""",
        """\
ema = copy.deepcopy(model).requires_grad_(False)
for p_ema, p in zip(ema.parameters(), model.parameters()):
    p_ema.mul_(0.999).add_(p.detach(), alpha=0.001)
""",
        """\
def toggle_grad(model, requires_grad):
    for p in model.parameters():
        p.requires_grad_(requires_grad)


def update_average(model_tgt, model_src, beta):
    toggle_grad(model_src, False)
    toggle_grad(model_tgt, False)  # the target's parameters stop requiring grad
    for p_tgt, p_src in zip(model_tgt.parameters(), model_src.parameters()):
        p_tgt.copy_(beta * p_tgt + (1.0 - beta) * p_src)
""",
        """\
def set_requires_grad(nets, requires_grad=False):
    if not isinstance(nets, list):
        nets = [nets]
    for net in nets:
        if net is not None:
            for param in net.parameters():
                param.requires_grad = requires_grad


def update_average(model_tgt, model_src, beta):
    set_requires_grad([model_tgt, model_src], False)
    for p_tgt, p_src in zip(model_tgt.parameters(), model_src.parameters()):
        p_tgt.copy_(beta * p_tgt + (1.0 - beta) * p_src)
""",
    ]

    def check_mutation(self, node, ctx: Context) -> None:
        analysis = self.analysis
        if ctx.grad is not GradMode.ENABLED:
            return  # under no_grad the update is exactly what one should write
        operands = analysis.mutated_operands(node)
        leaf = next((operand for operand in operands if analysis.is_grad_leaf(operand, ctx)), None)
        if leaf is None or not analysis.grad_enabled(ctx):
            return  # grad_enabled last: it looks at every caller of the function
        self.report(node, self.MESSAGE.format(stmt=self.code(node, 60), leaf=self.code(leaf, 40)),
                    self.FIX.format(leaf=self.code(leaf, 40)), autofix=self._autofix(node, ctx))

    def _autofix(self, node, ctx: Context) -> Fix | None:
        # safe: the statement raised as written ("a leaf Variable that requires grad is being
        # used in an in-place operation"); under no_grad it does what it says
        reference = torch_reference(self.analysis)
        if reference is None:
            return None
        torch, imports = reference
        return Fix.safe(f"Wrap the update in `with {torch}.no_grad():`",
                        Wrap(node, node, f"with {torch}.no_grad():", join=self._previous_without_grad(node, ctx)),
                        *imports)

    def _previous_without_grad(self, node, ctx: Context):
        """The statement that runs right before ``node`` when it runs with grad disabled by a
        literal ``no_grad`` block (the one an earlier fix opened): the fix joins that block."""
        found = self.analysis.straight_line(node, ctx)
        if found is None or found[1] == 0:
            return None
        previous = found[0][found[1] - 1]
        previous_ctx = next((each for stmt, each in ctx.scope.statements if stmt is previous), None)
        if previous_ctx is None or previous_ctx.grad is GradMode.ENABLED:
            return None
        return previous
