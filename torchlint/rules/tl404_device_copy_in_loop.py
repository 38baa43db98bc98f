from __future__ import annotations

import re

from torchlint.analysis import Context, call_arguments, dotted_name, is_inplace_method, keyword_argument, last_part
from torchlint.lazy import cst
from torchlint.fix import Fix, InsertBefore, Replace, factory_made_there, source_of
from torchlint.rule import Rule
from torchlint.rules.tl403_allocation_in_loop import AllocationInLoop

# Factories that make their values themselves: made on the CPU and copied, they could have been
# made on the device. `torch.tensor` / `as_tensor` / `from_numpy` start from host data (a copy is
# needed anyway) and the `*_like` forms already follow their argument's device.
DEVICE_FACTORIES = frozenset({
    "zeros", "ones", "empty", "full", "arange", "linspace", "logspace", "eye", "rand", "randn",
    "randint", "randperm", "empty_strided", "tril_indices", "triu_indices",
})
# What a device argument is called: `device`, `self.device`, `x.device`, `dev`, `gpu`, `local_rank`.
DEVICE_NAME_RE = re.compile(r"device|^dev$|gpu|cuda|rank", re.I)
DEVICE_STRING_RE = re.compile(r"^[rbuRBU]*['\"](?:cuda|mps|xpu|npu|hpu)")


class DeviceCopyInLoop(Rule):
    """
    ## What it does
    Finds, in a loop that makes training or inference steps, a tensor that does not change
    between iterations copied to the device on every iteration: `w.to(device)` or `w.cuda()`
    on a name bound before the loop and never rebound or changed in place inside it
    (`class_weights`, `mean`, a mask). Also finds tensors made on the CPU and then copied,
    `torch.zeros(...).cuda()` / `torch.arange(...).to(device)`, where `device=` would make
    them on the device directly.

    ## Why is this bad?
    Each `.to(device)` of a host tensor allocates device memory and runs a host-to-device
    copy over PCIe, every step, for the same values; from pageable memory the copy also
    makes the host wait. Moving the tensor once before the loop costs one copy in all. A
    factory followed by `.cuda()` fills a CPU buffer, allocates a second one on the device
    and copies between them, where `torch.zeros(..., device=device)` fills the device
    buffer in place. On CPU the copy is not observable (`.to("cpu")` returns the tensor
    itself); `torchlint verify` measures the same loops with a dtype change as the copy:
    one tensor-sized allocation per step against one in all.

    ## Known problems
    Only plain names are examined (`self.weights.to(device)` in a `forward` may be a
    registered buffer, for which the call returns the buffer itself once the module has
    been moved). A name counts as a tensor only by evidence in the file (a torch function's
    result, a tensor method's, a `Tensor` annotation): per-batch data (loop targets, names
    bound in the loop) is never reported, and neither are modules (`model.to(device)` moves
    the parameters in place and returns the module: a no-op after the first call), nor
    moves to the CPU or in loops that make no steps. A random factory given a `generator=`
    is not reported (a CPU generator cannot draw on the device). A factory whose arguments do not
    change between iterations is left to TL403 (making it once before the loop removes
    the copy too).
    """

    CODE = "TL404"
    NAME = "device-copy-in-loop"
    MESSAGE = "`{call}` copies the same tensor to the device on every iteration of the loop"
    FIX = "move `{name}` to the device once, before the loop"
    FACTORY_MESSAGE = "`{call}` makes the tensor on the CPU and copies it to the device on every iteration"
    FACTORY_FIX = "create it on the device: pass `device=` to `{factory}`"
    AUTOFIX = (
        "Safe: a torch factory copied to the device, `torch.zeros(n).cuda()`, becomes "
        "`torch.zeros(n, device=\"cuda\")` (the move's `device=` / `dtype=` passed to the factory); "
        "unsafe for random factories and `arange` / `linspace` (the device's generator draws other "
        "numbers) and for a dtype change of `torch.full` / `torch.tensor` (the values are rounded "
        "anew). Unsafe: a loop-invariant `w.to(device)` is copied once before the loop, "
        "`w_on_device = w.to(device)`, and the loop uses that name (the copy is made even when the "
        "loop runs no iteration, and a change to `w` by a function the loop calls no longer "
        "reaches it). No fix in a function run once per step, for a name moved twice in the loop, "
        "or a move to a device that changes (`w.to(x.device)` of the batch `x`)."
    )
    TOKENS = (".to(", ".cuda(")
    CLAIM = ("a loop-invariant tensor converted every step makes one tensor-sized copy per step, against one in all "
             "when hoisted (on CPU the copy is a dtype conversion standing in for the host-to-device copy)")

    INVALID = [
        """\
import torch
import torch.nn.functional as F

class_weights = torch.tensor([1.0, 5.0, 2.0])
for x, y in loader:
    x, y = x.to(device), y.to(device)
    loss = F.cross_entropy(model(x), y, weight=class_weights.to(device))  # expect: TL404
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
""",
        """\
import torch

for step, (x, y) in enumerate(loader):
    noise = torch.randn(x.shape).cuda()  # expect: TL404
    loss = criterion(model(x.cuda() + noise), y.cuda())
    loss.backward()
""",
    ]
    VALID = [
        """\
import torch
import torch.nn.functional as F

class_weights = torch.tensor([1.0, 5.0, 2.0]).to(device)
for x, y in loader:
    x, y = x.to(device), y.to(device)
    loss = F.cross_entropy(model(x), y, weight=class_weights)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
""",
        """\
import torch

mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
for epoch in range(epochs):
    model.to(device)                          # a module: moved in place, a no-op after the first time
    for step, (x, y) in enumerate(loader):
        x = x.to(device)                      # per-batch data
        noise = torch.randn(x.shape, device=device)
        mean = mean.to(x.device)              # rebound in the loop: copied once
        loss = criterion(model((x - mean) + noise), y.to(device))
        loss.backward()
""",
        """\
import torch

for step, batch in enumerate(loader):
    targets = torch.zeros(batch_size, num_classes).to(device)  # TL403's: make it once before the loop
    targets.scatter_(1, batch["labels"], 1.0)
    loss = criterion(model(batch["x"]), targets)
    loss.backward()
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
        if not ctx.loops:
            return
        analysis = self.analysis
        moves = [call for call in analysis.calls_in(node) if _moves_to_device(call)]
        if not moves or not analysis.is_step_loop(ctx.loop):
            return
        for call in moves:
            receiver = call.func.value
            if type(receiver) is cst.Name:
                self._check_invariant(node, call, receiver, ctx)
            elif type(receiver) is cst.Call:
                self._check_factory(node, call, receiver, ctx)

    def _check_invariant(self, node, call, receiver, ctx: Context) -> None:
        analysis = self.analysis
        name = receiver.value
        loop = ctx.loop
        binding = analysis.lookup(name, ctx)
        if binding is None or analysis.bound_in_loop(name, loop):
            return  # unknown, or per-iteration data
        if loop.implicit is not None and binding.ctx.scope is loop.scope:
            return  # a per-step function's own local or parameter: made afresh on every call
        if not analysis.is_tensor(receiver, ctx) or analysis.is_module(receiver, ctx):
            return
        if self._changed_in_loop(name, loop):
            return  # the host copy changes: copying it every step may be the point
        self.report(call, self.MESSAGE.format(call=self.code(call, 50)), self.FIX.format(name=name),
                    autofix=self._hoist(call, name, ctx))

    def _hoist(self, call, name: str, ctx: Context) -> Fix | None:
        """``w_on_device = w.to(device)`` before the loop and the name in place of the call.
        Unsafe: the copy is made even when the loop runs no iteration, and a change to ``w``
        by a function the loop calls would no longer reach the device copy. Only for a
        ``for`` / ``while`` statement (not a function run once per step), a name moved once in
        the loop, and a move whose arguments are names, attributes or constants not rebound in
        the loop (``x.device`` of a batch changes every step)."""
        analysis = self.analysis
        loop = ctx.loop
        if loop.implicit is not None:
            return None
        for arg in call.args:
            if arg.star or type(arg.value) not in (cst.Name, cst.Attribute, cst.SimpleString, cst.Integer):
                return None
            root = arg.value
            while type(root) is cst.Attribute:
                root = root.value
            if type(root) is not cst.Name and type(arg.value) not in (cst.SimpleString, cst.Integer):
                return None
            if type(root) is cst.Name and analysis.bound_in_loop(root.value, loop):
                return None  # the device of this iteration's batch
        moves = sum(
            _moves_to_device(other) and type(other.func.value) is cst.Name and other.func.value.value == name
            for stmt, _ in analysis.statements_in_loop(loop) for other in analysis.calls_in(stmt)
        )
        if moves != 1:
            return None  # moved twice: one hoisted copy for both is a second edit, left to the user
        hoisted = f"{name}_on_device"
        scopes = [analysis.module_scope, *analysis.scopes.values()]
        if hoisted in analysis.imports or any(scope.bindings.get(hoisted) for scope in scopes):
            return None
        return Fix.unsafe(f"Copy `{name}` once before the loop, as `{hoisted}`",
                          InsertBefore(loop.node, f"{hoisted} = {source_of(analysis, call)}"), Replace(call, hoisted))

    def _check_factory(self, node, call, factory, ctx: Context) -> None:
        qualified = self.analysis.qualified_name(factory.func) or ""
        if not qualified.startswith("torch.") or qualified.count(".") != 1 or last_part(qualified) not in DEVICE_FACTORIES:
            return
        if keyword_argument(factory, "device") is not None:
            return  # made on a device already; the move goes elsewhere on purpose
        if keyword_argument(factory, "generator") is not None:
            return  # a CPU generator cannot draw on the device: made on the CPU on purpose
        if type(node) is cst.Assign and self._allocation_in_loop(node, ctx):
            return  # TL403 reports it: made once before the loop, it is copied once
        autofix = None
        made = factory_made_there(self.analysis, factory, call)
        if made is not None:
            code, safe = made
            shown = code if len(code) <= 60 else code[:57] + "..."
            autofix = (Fix.safe if safe else Fix.unsafe)(f"Create it on the device: `{shown}`", Replace(call, code))
        self.report(call, self.FACTORY_MESSAGE.format(call=self.code(call, 50)),
                    self.FACTORY_FIX.format(factory=f"torch.{last_part(qualified)}"), autofix=autofix)

    def _allocation_in_loop(self, node, ctx: Context) -> bool:
        """Does TL403 report the statement (a loop-invariant buffer made every step)? Its fix,
        making the buffer once before the loop, removes the per-step copy too."""
        reports: list = []
        AllocationInLoop(self.analysis, reports).visit_Assign(node, ctx)
        return bool(reports)

    def _changed_in_loop(self, name: str, loop) -> bool:
        """Is ``name`` changed in place inside the loop (``w.mul_(...)``, ``w[i] = v``,
        ``w += 1``)?"""
        for stmt, _ in self.analysis.statements_in_loop(loop):
            kind = type(stmt)
            if kind is cst.AugAssign and dotted_name(stmt.target) == name:
                return True
            if kind is cst.Assign and any(
                type(target.target) is cst.Subscript and dotted_name(target.target.value) == name for target in stmt.targets
            ):
                return True
            for call in self.analysis.calls_in(stmt):
                func = call.func
                if type(func) is cst.Attribute and dotted_name(func.value) == name and is_inplace_method(func.attr.value):
                    return True
        return False


def _moves_to_device(call) -> bool:
    """``x.cuda()``, ``x.to(device)``, ``x.to(device=d)``, ``x.to("cuda:0")``, ``x.to(y.device)``."""
    func = call.func
    if type(func) is not cst.Attribute:
        return False
    if func.attr.value == "cuda":
        return True
    if func.attr.value != "to":
        return False
    target = keyword_argument(call, "device")
    if target is None:
        positional = call_arguments(call)
        target = positional[0] if positional else None
    if target is None:
        return False
    if type(target) is cst.SimpleString:
        return bool(DEVICE_STRING_RE.match(target.value))
    if type(target) is cst.Call:
        name = dotted_name(target.func) or ""
        return last_part(name) == "device" and not any(
            type(arg.value) is cst.SimpleString and "cpu" in arg.value.value for arg in target.args)
    key = dotted_name(target)
    return key is not None and bool(DEVICE_NAME_RE.search(last_part(key))) and "cpu" not in key.lower()
