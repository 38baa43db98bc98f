from __future__ import annotations

from torchlint.analysis import Context, GradMode, DETACHING_METHODS, child_nodes, dotted_name, key_within, strip_views
from torchlint.analysis.inplace import parameters_owner
from torchlint.lazy import cst
from torchlint.rule import InPlaceMutationRule

# `x.grad`, `x.shape`...: reading these does not make a forward pass use `x`.
NOT_A_USE = frozenset({"data", "grad", "shape", "dtype", "device", "requires_grad", "is_leaf", "size", "dim", "numel"})


class DataMutatedBeforeBackward(InPlaceMutationRule):
    """
    ## What it does
    Finds tensors changed through `.data` between the forward pass that used them and the
    `backward()` that differentiates that forward pass. The change is an in-place method on `x.data`
    (`x.data.add_(...)`, `p.data.mul_(...)`, `p.data[:, 0].zero_()`), item and augmented
    assignments (`x.data[i] = v`, `w.data -= u`) and rebinding (`p.data = new`). A forward
    pass uses the tensor when a statement with grad enabled computes with it directly
    (`y = (x ** 2).sum()`) or, for a parameter (`model.fc.weight`, the loop variable of `for
    p in model.parameters()`), calls the module that owns it (`out = model(x)`). The
    statements are looked for in one iteration of the loop around the change (the
    innermost loop that also backpropagates after it), or in the function's body.

    ## Why is this bad?
    A forward pass saves the tensors its backward pass needs. `.data` is the same storage
    with autograd's bookkeeping switched off: changing it bumps no version counter, so
    `backward()` does not raise "one of the variables needed for gradient computation has
    been modified by an inplace operation" as it would for the same change made without
    `.data` — it silently computes the gradients from the new values. Measured on CPU:
    `y = (x ** 2).sum(); x.data.add_(1); y.backward()` gives `x.grad` = [4, 6, 8] instead of
    [2, 4, 6]; a training loop that adds weight noise through `.data` between the forward
    pass and `backward()` applied gradients 0.02 to 0.06 away from the correct ones at every
    step, without any error.

    ## Known problems
    Not reported: changes after `backward()` in the same iteration (the classic manual SGD
    step `p.data -= lr * p.grad.data`, weight clipping after `optimizer.step()`), changes
    before the forward pass (WGAN clipping at the top of the critic loop), weight
    initialisation (no `backward()` follows in the function), and forward passes that do not
    use the tensor (a generator's forward before the discriminator's clipping). An optimizer's
    `group["params"]` has no known owner module: any module call counts as its forward pass.
    Changes inside a helper function, and forward passes or `backward()` calls that happen in
    other functions, are not followed.
    """

    CODE = "TL305"
    NAME = "data-mutated-before-backward"
    MESSAGE = (
        "`{stmt}` changes `{tensor}` through `.data` after `{forward}` used it and before `backward()`: "
        "autograd does not see the change and computes the gradients from the new values"
    )
    FIX = (
        "make the change after `backward()` (under `with torch.no_grad():`, without `.data`), "
        "or before the forward pass"
    )
    TOKENS = (".data",)
    CLAIM = (
        "gradients computed after a `.data` change between forward and backward differ from the correct "
        "gradients (max abs error > 1e-3), while the good program's match them within 1e-6"
    )

    INVALID = [
        """\
x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = (x ** 2).sum()
x.data.add_(1.0)  # expect: TL305
y.backward()
""",
        """\
for x, y in loader:
    loss = criterion(model(x), y)
    for p in model.parameters():
        p.data.add_(0.01 * torch.randn_like(p))  # expect: TL305
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
        """\
def train_step(model, x, y, optimizer):
    out = model(x)
    model.fc.weight.data = model.fc.weight.data.clamp(-1, 1)  # expect: TL305
    loss = F.mse_loss(out, y)
    loss.backward()
    optimizer.step()
""",
    ]
    VALID = [
        """\
for x, y in loader:
    loss = criterion(model(x), y)
    model.zero_grad()
    loss.backward()
    for p in model.parameters():
        p.data -= lr * p.grad.data
""",
        """\
for x, _ in loader:
    for p in critic.parameters():
        p.data.clamp_(-0.01, 0.01)
    loss = -critic(x).mean()
    loss.backward()
    opt_critic.step()
""",
        """\
for noise, real in loader:
    fake = generator(noise)
    for p in critic.parameters():
        p.data.clamp_(-0.01, 0.01)
    loss_d = critic(fake.detach()).mean() - critic(real).mean()
    loss_d.backward()
""",
        """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 1)
        self.fc.weight.data.normal_(0, 0.02)
        self.fc.bias.data.zero_()
""",
        """\
dataset = datasets.MNIST(root, download=True)
idx = dataset.targets < 5
dataset.targets = dataset.targets[idx]
dataset.data = dataset.data[idx]
for x, y in DataLoader(dataset):
    criterion(model(x), y).backward()
    optimizer.step()
""",
        """\
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
""",
        """\
def check_kernels(a, forget):
    result = forget_mult(a, forget)
    result.sum().backward()
    first = a.grad.clone()
    a.grad.data *= 0  # zeroes the gradient between two checks: no forward pass saved it
    forget.grad.data *= 0
    result = forget_mult(a, forget, use_cuda=False)
    result.sum().backward()
    return first, a.grad
""",
    ]

    def check_mutation(self, node, ctx: Context) -> None:
        target = _data_target(node, self.analysis)
        if target is None:
            return
        tensor = target.value  # `x` for `x.data`
        key = dotted_name(tensor)
        if key is None or key.rpartition(".")[2] == "grad":
            return  # `a.grad.data *= 0`: a gradient, which no forward pass saved
        owners = self._owners(key, ctx)
        forward = self._forward_before_backward(node, ctx, key, owners)
        if forward is None:
            return
        self.report(
            node,
            self.MESSAGE.format(stmt=self.code(node, 60), tensor=key, forward=self.code(forward, 40)),
        )

    def _owners(self, key: str, ctx: Context) -> tuple[str, ...] | None:
        """Module keys whose call is a forward pass using ``key``: for ``model.fc.weight``
        ``model.fc`` and ``model``; for ``p`` of ``for p in model.parameters()`` ``model``; None
        for a loop over an optimizer's parameters (any module); () for a plain tensor."""
        if "." in key:
            parts = key.split(".")
            return tuple(".".join(parts[:end]) for end in range(len(parts) - 1, 0, -1))
        binding = self.analysis.lookup(key, ctx)
        if binding is None or binding.kind != "for":
            return ()
        owner = parameters_owner(binding.value, binding.element)
        if owner is not None:
            return (owner,)
        if self.analysis.is_grad_leaf(cst.Name(key), ctx):
            return None  # group["params"]: a parameter of some module
        return ()

    def _forward_before_backward(self, node, ctx: Context, key: str, owners):
        """The statement of the last forward pass that used ``key`` before the change, when a
        ``backward()`` follows the change and none ran between that forward pass and it."""
        analysis = self.analysis
        regions = [list(analysis.statements_in_loop(loop)) for loop in reversed(ctx.visible_loops)]
        regions.append([(stmt, stmt_ctx) for stmt, stmt_ctx in ctx.scope.statements if stmt_ctx.scope is ctx.scope])
        for statements in regions:
            before = [(stmt, c) for stmt, c in statements if c.order < ctx.order]
            after = [(stmt, c) for stmt, c in statements if c.order > ctx.order]
            if not any(analysis.statement_backpropagates(stmt, c) for stmt, c in after):
                continue  # no backward() follows in this region: try the enclosing one
            for stmt, stmt_ctx in reversed(before):
                if analysis.statement_backpropagates(stmt, stmt_ctx):
                    return None  # the last forward pass before the change is already differentiated
                if stmt_ctx.grad is GradMode.ENABLED and self._uses(stmt, stmt_ctx, key, owners):
                    return stmt
            return None
        return None

    def _uses(self, stmt, ctx: Context, key: str, owners) -> bool:
        if type(stmt) in (cst.For, cst.While, cst.If, cst.With, cst.Try, cst.FunctionDef, cst.ClassDef):
            return False  # their bodies are statements of their own
        analysis = self.analysis
        for call in analysis.calls_in(stmt):
            func = call.func
            if type(func) is cst.Attribute and func.attr.value == "forward":
                func = func.value
            called = dotted_name(func)
            if called is None or not analysis.is_module(func, ctx):
                continue
            if owners is None or any(key_within(called, owner) for owner in owners):
                return True
        if owners == () and not analysis.is_grad_leaf(cst.Name(key), ctx):
            # a plain tensor: the statement must compute an attached value from it
            value = getattr(stmt, "value", None)
            if value is None or not (analysis.is_attached(value, ctx) or self._feeds_backward(stmt, ctx)):
                return False
        return any(_reads(expr, key) for expr in analysis.own_expressions(stmt))

    def _feeds_backward(self, stmt, ctx: Context) -> bool:
        """Does the statement bind a name a ``backward()`` of the function differentiates
        (``loss = (x @ w).pow(2).mean()`` before ``loss.backward()``)?"""
        if type(stmt) not in (cst.Assign, cst.AnnAssign, cst.AugAssign):
            return False
        targets = [t.target for t in stmt.targets] if type(stmt) is cst.Assign else [stmt.target]
        keys = self.analysis.backpropagated_keys(ctx.scope)
        return any(dotted_name(target) in keys for target in targets)


def _data_target(stmt, analysis):
    """The ``x.data`` attribute a statement changes in place or rebinds, or None."""
    if type(stmt) in (cst.Assign, cst.AugAssign):
        targets = [t.target for t in stmt.targets] if type(stmt) is cst.Assign else [stmt.target]
        for target in targets:
            if _is_data(target):
                return target  # p.data = new, w.data -= u
    for operand in analysis.mutated_operands(stmt):
        base = strip_views(operand)
        if base is not None and _is_data(base):
            return base
    return None


def _is_data(node) -> bool:
    return type(node) is cst.Attribute and node.attr.value == "data" and dotted_name(node.value) is not None


def _reads(expr, key: str) -> bool:
    """Does the expression compute with ``key`` (not only read its ``.data`` / ``.grad`` /
    ``.shape``, nor detach it)?"""
    stack = [expr]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.Lambda:
            continue
        if kind in (cst.Name, cst.Attribute):
            name = dotted_name(node)
            if name == key:
                return True
            if kind is cst.Attribute and dotted_name(node.value) == key:
                continue  # `x.targets`, `x.grad`: an attribute of it, not a computation with it
        if kind is cst.Call and type(node.func) is cst.Attribute and dotted_name(node.func.value) == key:
            if node.func.attr.value not in NOT_A_USE and node.func.attr.value not in DETACHING_METHODS:
                return True  # x.sum(), x.matmul(w)
        if kind is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in DETACHING_METHODS:
            continue
        if kind is cst.Assign:  # the targets are written, not read
            stack.append(node.value)
            continue
        stack.extend(child_nodes(node))
    return False
