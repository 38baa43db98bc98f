from __future__ import annotations

from torchlint.analysis import Context, dotted_name, iter_expression_nodes, mentioned_keys
from torchlint.lazy import cst
from torchlint.fix import Fix, Replace, factory_made_there
from torchlint.rule import Rule


class RequiresGradThenCopied(Rule):
    """
    ## What it does
    Finds a tensor created with `requires_grad=True` (or `.requires_grad_()`) and copied to a
    device or dtype in the same expression, `w = torch.randn(3, requires_grad=True).cuda()`
    (also `.to(device)`, `.double()`, `.half()`, `.type(...)`, or in a later statement of the
    same function: `w = Variable(x, requires_grad=True)` then `w = w.cuda()`), when the code then reads
    `w.grad` or hands `w` to an optimizer.

    ## Why is this bad?
    The copy is the result of an operation, not a leaf of the autograd graph: `backward()`
    puts the gradient into the `.grad` of the original tensor, which nothing keeps, and
    `w.grad` stays `None`. A hand-written update (`if w.grad is not None: ...`) silently
    never happens, and `torch.optim.SGD([w])` raises "can't optimize a non-leaf Tensor".
    Measured on CPU with `.double()`: after `backward()`, `w.grad` was `None` at every step and
    `w` never changed; created with `dtype=torch.float64, requires_grad=True` it trained.

    ## Known problems
    Only reported when `.grad` of the copy is read or the copy goes to an optimizer in the
    same function (or, for `self.w`, the same class): a copy used as an input to
    `torch.autograd.grad(out, w)` or `gradcheck` works, since those accept non-leaf tensors,
    and that is how the pattern is mostly used in real test code. `.float()` and `.cpu()` are
    not counted: on the float32 CPU tensor a factory makes by default they return the same
    tensor, which is still a leaf. On a CPU-only run `.to("cpu")` does not copy either, so
    the program works there and fails on the GPU.
    `nn.Parameter(torch.randn(...).to(device))`, `requires_grad=True` passed together with
    `device=` / `dtype=`, and `.requires_grad_()` after the move are correct and not reported.
    """

    CODE = "TL303"
    NAME = "requires-grad-then-copied"
    MESSAGE = (
        "`{target}` is a copy of a tensor created with `requires_grad=True`, not a leaf: after "
        "`backward()` its `.grad` stays `None`"
    )
    FIX = "create it in place with `device=` / `dtype=` and `requires_grad=True`, or call `.requires_grad_()` after the move"
    AUTOFIX = (
        "Safe: passes the move's `device=` / `dtype=` to the torch factory instead "
        "(`torch.zeros(3, requires_grad=True, device=device)`), when one simple move (`.cuda()`, "
        "`.to(device)`, `.to(device, dtype)`, `.double()`) follows the factory directly. Unsafe "
        "for random factories, `arange` / `linspace`, and a dtype change of `torch.full` / "
        "`torch.tensor`: the values are drawn or rounded anew. No fix for chains of moves, "
        "`Variable(...)` or other constructors."
    )
    TOKENS = ("requires_grad",)
    CLAIM = "the copied tensor's .grad stays None and it never trains; created on its dtype and device it trains"

    INVALID = [
        """\
a_g = Variable(torch.randn(shape) * 1e-3, requires_grad=True)
if cuda:
    a_g = a_g.cuda()  # expect: TL303
optimizer = torch.optim.Adam([a_g])
""",
        """\
w = torch.randn(10, 1, requires_grad=True).to(device)  # expect: TL303
for x, y in loader:
    loss = ((x @ w - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= lr * w.grad
        w.grad.zero_()
""",
        """\
delta = torch.zeros_like(images, requires_grad=True).cuda()  # expect: TL303
optimizer = torch.optim.Adam([delta], lr=0.01)
""",
        """\
class Model:
    def __init__(self):
        self.scale = Variable(torch.ones(1), requires_grad=True).double()  # expect: TL303

    def grads(self):
        return self.scale.grad
""",
    ]
    VALID = [
        """\
a_g = torch.randn(shape) * 1e-3
if cuda:
    a_g = a_g.cuda()
a_g.requires_grad_()
optimizer = torch.optim.Adam([a_g])
""",
        """\
w = torch.randn(10, 1, device=device, requires_grad=True)
for x, y in loader:
    loss = ((x @ w - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= lr * w.grad
        w.grad.zero_()
""",
        """\
w = torch.randn(10, 1).to(device).requires_grad_()
optimizer = torch.optim.SGD([w], lr=0.1)
""",
        """\
self.bias = nn.Parameter(torch.zeros(64, requires_grad=True).to(device))
""",
        """\
x = torch.randn(4, 16, requires_grad=True).cuda()
out = layer(x)
(grad,) = torch.autograd.grad(out.sum(), x)
""",
        """\
x = torch.randn(8, 3, requires_grad=True).float()
x.sum().backward()
print(x.grad)
""",
    ]

    def visit_Assign(self, node, ctx: Context) -> None:
        if len(node.targets) == 1:
            self._check(node, node.targets[0].target, node.value, ctx)

    def visit_AnnAssign(self, node, ctx: Context) -> None:
        if node.value is not None:
            self._check(node, node.target, node.value, ctx)

    def _check(self, node, target, value, ctx: Context) -> None:
        key = dotted_name(target)
        if key is None or self.analysis.moved_grad_leaf(value, ctx) is None:
            return
        if self._needs_leaf(key, ctx):
            self.report(node, self.MESSAGE.format(target=self.code(target, 40)), autofix=self._autofix(value))

    def _autofix(self, move) -> Fix | None:
        """The factory asked for the device / dtype itself, when the tensor comes straight from a
        torch factory and one simple move copies it (``torch.zeros(3, requires_grad=True).cuda()``);
        a chain of moves or ``Variable(...)`` gets none."""
        factory = move.func.value
        if type(factory) is not cst.Call:
            return None
        made = factory_made_there(self.analysis, factory, move)
        if made is None:
            return None
        code, safe = made
        message = f"Create the tensor as `{code if len(code) <= 60 else code[:57] + '...'}`"
        return (Fix.safe if safe else Fix.unsafe)(message, Replace(move, code))

    def _needs_leaf(self, key: str, ctx: Context) -> bool:
        """Does the code read ``key.grad`` or give ``key`` to an optimizer, without calling
        ``key.retain_grad()`` (which makes a non-leaf keep its gradient)?"""
        analysis = self.analysis
        scopes = [ctx.scope]
        class_scope = ctx.scope.class_scope
        if key.startswith("self.") and class_scope is not None:
            scopes = [scope for scope in analysis.scopes.values() if scope.class_scope is class_scope]
        needs = False
        aliases = {key} | self._loop_aliases(key, scopes)
        for scope in scopes:
            for stmt, _ in scope.statements:
                for expr in analysis.own_expressions(stmt):
                    for item in iter_expression_nodes(expr):
                        kind = type(item)
                        if kind is cst.Attribute and item.attr.value == "grad" and dotted_name(item.value) in aliases:
                            needs = True
                        elif kind is cst.Call and type(item.func) is cst.Attribute and item.func.attr.value == "retain_grad" \
                                and dotted_name(item.func.value) == key:
                            return False
                        elif kind is cst.Call and analysis.constructs_optimizer(item) and any(
                                key in mentioned_keys(arg.value) for arg in item.args):
                            needs = True
        return needs

    def _loop_aliases(self, key: str, scopes) -> set[str]:
        """Loop variables that take the tensor in turn: ``p`` in ``for p in (w, b):``."""
        found = set()
        for scope in scopes:
            for binding in (binding for bindings in scope.bindings.values() for binding in bindings):
                if binding.kind == "for" and type(binding.value) in (cst.Tuple, cst.List) and any(
                        dotted_name(element.value) == key for element in binding.value.elements):
                    found.add(binding.key)
        return found
