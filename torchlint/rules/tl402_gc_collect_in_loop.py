from __future__ import annotations

from torchlint.analysis import Context, call_arguments, keyword_argument
from torchlint.lazy import cst
from torchlint.fix import move_after_loop
from torchlint.rule import Rule


class GcCollectInLoop(Rule):
    """
    ## What it does
    Finds a full garbage collection, `gc.collect()` (however `gc` is imported), called on
    every iteration of a loop: not under an `if`, `except` or `case` inside the innermost
    loop around it. A `finally:` or `try:` body in the loop runs every iteration too.

    ## Why is this bad?
    A full collection walks every container object the process has: the model's modules and
    parameters, the dataset's samples, the optimizer state, everything imported. In a
    training program that is milliseconds per call, paid on every step, and it frees
    nothing that reference counting does not already free unless the step creates reference
    cycles. Measured on CPU: a process that has imported torch holds about 165,000 tracked
    objects and one full collection took 74 ms; with torch's objects frozen out of the way,
    collecting after every step still added 3.2 ms to a 0.6 ms step of a small text
    classifier whose dataset keeps 20,000 Python containers. Collect once per epoch or every
    N steps, or after deleting a large object graph.

    ## Known problems
    Only loops that make steps count: the loop's own body (not a loop nested in it)
    runs a forward pass, `backward()` or an optimizer step, or its header goes over batches
    or steps (`for batch in loader`, `for step in range(n)`, `while step < max_steps`).
    A collection in an outer loop (once per epoch, per checkpoint shard, per episode) runs
    once per whole inner loop and is not reported, nor is one in a loop over models to build
    and drop, where freeing the previous model is the point. `gc.collect(0)` and
    `gc.collect(1)` (young generations only, cheap) are not reported. A loop whose iteration
    ends in an unconditional `break` / `return` / `raise` does not repeat. A helper of this
    file that collects is reported inside its body when a step loop calls it on every
    iteration; helpers in other files are not followed.
    """

    CODE = "TL402"
    NAME = "gc-collect-in-loop"
    MESSAGE = "`{call}` runs a full garbage collection on every iteration of the loop"
    FIX = "collect once per epoch or every N steps (`if step % N == 0:`), or once after the loop"
    AUTOFIX = (
        "Unsafe: moves the call after the loop (alone in a `finally:` or `with` block, it leaves "
        "`pass` there). No fix inside a function run once per step (there is no loop to move "
        "it after), and no guard `if step % N == 0:`: N would be a guess."
    )
    TOKENS = ("collect",)
    CLAIM = ("the bad loop takes longer per step than the fixed one by at least the cost of one full "
             "collection of the program's objects")

    INVALID = [
        """\
import gc

for epoch in range(epochs):
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        gc.collect()  # expect: TL402
""",
        """\
from gc import collect

while step < max_steps:
    step = train_step(step)
    with torch.no_grad():
        collect()  # expect: TL402
""",
    ]
    VALID = [
        """\
import gc

for epoch in range(epochs):
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    gc.collect()
""",
        """\
import gc

for step, batch in enumerate(loader):
    train_step(batch)
    if step % 1000 == 0:
        gc.collect()
    gc.collect(0)
""",
    ]

    def visit_Expr(self, node, ctx: Context) -> None:
        call = node.value
        if not ctx.loops or type(call) is not cst.Call:
            return
        if self.analysis.qualified_name(call.func) != "gc.collect":
            return
        generation = keyword_argument(call, "generation") or next(iter(call_arguments(call)), None)
        if type(generation) is cst.Integer and generation.value in ("0", "1"):
            return  # a young-generation collection: cheap
        if not self.analysis.runs_every_step(ctx):
            return
        # unsafe: the loop may need the memory freed mid-way (an OOM retry), and code after it
        # does not run when the loop returns
        autofix = move_after_loop(node, ctx, f"Move `{self.code(call, 40)}` after the loop")
        self.report(node, self.MESSAGE.format(call=self.code(call, 40)), autofix=autofix)
