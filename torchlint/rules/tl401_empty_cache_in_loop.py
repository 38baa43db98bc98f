from __future__ import annotations

from torchlint.analysis import Context
from torchlint.lazy import cst
from torchlint.fix import move_after_loop
from torchlint.rule import Rule


class EmptyCacheInLoop(Rule):
    """
    ## What it does
    Finds `torch.cuda.empty_cache()` (and the `torch.mps` / `torch.xpu` / other device
    spellings, however imported) called on every iteration of a loop: not under an `if`,
    `except` or `case` inside the innermost loop around it. A `finally:` or `try:` body in
    the loop runs every iteration too.

    ## Why is this bad?
    `empty_cache()` hands every unused block of PyTorch's caching allocator back to the
    driver. The next iteration then allocates its activations, gradients and temporaries
    afresh with `cudaMalloc`/`cudaFree`, which synchronise the device: every step pays for
    the allocations the cache exists to avoid, and the memory it frees is needed again a
    moment later. It does not reduce the memory the tensors themselves use, and on CPU it
    does nothing at all, so the effect can only be measured on a GPU (`torchlint verify`
    reports `needs-cuda` elsewhere): there the flushing loop allocates new driver segments
    every step and takes longer per step. Call it every N steps (`if step % 256 == 0:`),
    once after the loop, or in the handler of an out-of-memory error.

    ## Known problems
    Only loops that make steps count: the loop's own body (not a loop nested in it)
    runs a forward pass, `backward()` or an optimizer step, or its header goes over batches
    or steps (`for batch in loader`, `for step in range(n)`, `while step < max_steps`).
    A call in an outer loop (once per epoch, per checkpoint shard, per profiled operation)
    runs once per whole inner loop and is not reported, nor is one in a loop over models to
    load and unload, devices or files, where handing the previous item's memory back is the
    point. The price: a bare benchmark loop (`for i in range(n): y = x @ x` followed by the
    call) is missed. A loop whose iteration ends in an unconditional `break` / `return` /
    `raise` (a one-shot loop, or a retry loop whose `try:` body breaks out on success) does
    not repeat. A helper of this file that flushes the cache is reported inside its body when
    a step loop calls it on every iteration (its body is per-step code), and the device module
    may be reached through `getattr(torch, device).empty_cache()` or an alias
    (`dev = torch.cuda`). Helpers in other files and wrapper objects
    (`accelerator.empty_cache()`, `get_device_module().empty_cache()`) are not followed.
    A call under an `if` runs on some iterations only and is not reported, except under a test
    the loop does not change (a configuration flag, `if n_gpus:`, or which process runs it,
    `if rank == 0:`, `if is_root_worker():`): when it holds, it holds on every step. Flags that
    ask for the flush on purpose (`if args.empty_cache:`, `if low_memory:`) and tests that change
    from step to step (`step % 100 == 0`, `memory_reserved() > limit`) stay quiet. A guarded call
    gets no fix (moving it out of its `if` would run it everywhere).
    """

    CODE = "TL401"
    NAME = "empty-cache-in-loop"
    MESSAGE = "`{call}` runs on every iteration of the loop, so every iteration re-allocates device memory the cache held"
    FIX = "call it once after the loop, every N steps (`if step % N == 0:`), or only after catching an out-of-memory error"
    AUTOFIX = (
        "Unsafe: moves the call after the loop (alone in a `finally:` or `with` block, it leaves "
        "`pass` there). No fix inside a function run once per step (there is no loop to move "
        "it after), and no guard `if step % N == 0:`: N would be a guess."
    )
    TOKENS = ("empty_cache",)
    CLAIM = "on a GPU the bad loop returns reserved memory to the driver every step and takes longer per step than the fixed one"

    INVALID = [
        """\
for step, (x, y) in enumerate(loader):
    loss = criterion(model(x.cuda()), y.cuda())
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    torch.cuda.empty_cache()  # expect: TL401
""",
        """\
from torch.cuda import empty_cache

for batch in loader:
    try:
        train_step(batch)
    finally:
        empty_cache()  # expect: TL401
""",
        """\
class EMAModel:
    def __init__(self, parameters, decay=0.999):
        self.shadow = [p.clone().detach() for p in parameters]
        self.decay = decay

    @torch.no_grad()
    def step(self, parameters):  # training scripts call it after every optimizer step
        for shadow, param in zip(self.shadow, parameters):
            shadow.sub_((1 - self.decay) * (shadow - param))
        torch.cuda.empty_cache()  # expect: TL401
""",
        """\
for epoch in range(epochs):
    for text, images in loader:
        loss = model(text, images, return_loss=True)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if is_root_worker():  # the root process flushes on every step
            torch.cuda.empty_cache()  # expect: TL401
            log_metrics(loss.item())
""",
    ]
    VALID = [
        """\
for step, (x, y) in enumerate(loader):
    loss = criterion(model(x.cuda()), y.cuda())
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if step % 256 == 0:
        torch.cuda.empty_cache()
""",
        """\
for batch in loader:
    try:
        train_step(batch)
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
torch.cuda.empty_cache()
""",
        """\
while batch_size > 1:
    torch.cuda.empty_cache()
    try:
        run(model, batch_size)
        break
    except torch.cuda.OutOfMemoryError:
        batch_size //= 2
""",
        """\
class EMAModel:
    def store(self, parameters):  # called once, before evaluation
        self.backup = [p.clone() for p in parameters]
        torch.cuda.empty_cache()
""",
        """\
for step, batch in enumerate(loader):
    loss = model(batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if rank == 0 and step % 500 == 0:  # which process, and how often
        torch.cuda.empty_cache()
    if torch.cuda.memory_reserved() > limit:  # only when the cache grows too big
        torch.cuda.empty_cache()
""",
    ]

    def visit_Expr(self, node, ctx: Context) -> None:
        call = node.value
        if not ctx.loops or type(call) is not cst.Call:
            return
        if not self.analysis.is_torch_device_call(call, ctx, "empty_cache"):
            return
        if not self.analysis.runs_every_step(ctx):
            return
        # unsafe: the loop may need the memory freed mid-way (an OOM retry), and code after it
        # does not run when the loop returns
        autofix = move_after_loop(node, ctx, f"Move `{self.code(call, 40)}` after the loop")
        self.report(node, self.MESSAGE.format(call=self.code(call, 40)), autofix=autofix)
