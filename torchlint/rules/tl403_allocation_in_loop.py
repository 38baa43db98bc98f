from __future__ import annotations

from torchlint.analysis import Context, Loop, dotted_name, iter_expression_nodes, keyword_argument, last_part, mentioned_keys
from torchlint.lazy import cst
from torchlint.fix import Delete, Fix, InsertBefore, Replace, source_of
from torchlint.rule import Rule

# Factories whose values do not depend on the iteration: a buffer of them can be made once.
# Random factories (rand, randn, randint, randperm, *_like) are left out on purpose: fresh noise
# every step is the point, and drawing the numbers costs more than the allocation (see docs).
FACTORIES = frozenset({
    "zeros", "ones", "empty", "full", "arange", "linspace", "logspace", "eye", "empty_strided",
    "zeros_like", "ones_like", "empty_like", "full_like",
})
FACTORY_METHODS = frozenset({"new_zeros", "new_ones", "new_empty", "new_full"})
# Methods chained onto a factory that still give one fresh tensor per call.
CONVERSIONS = frozenset({
    "to", "cuda", "cpu", "float", "half", "double", "bfloat16", "long", "int", "bool", "byte",
    "contiguous", "type", "pin_memory",
})
# Calls that may appear in loop-invariant arguments: their result depends on their arguments only.
PURE_CALLS = frozenset({"len", "int", "float", "tuple", "list", "max", "min", "sum", "abs", "round", "Size", "device"})
PURE_METHODS = frozenset({"size", "dim", "numel"})
# Calls that read a tensor argument without keeping a reference to it.
READING_BUILTINS = frozenset({"print", "len", "float", "int", "bool", "isinstance", "str", "repr", "format", "range", "abs"})
# torch functions that keep their argument (or a view of it) alive beyond the call.
KEEPING_TORCH = frozenset({"Parameter", "Buffer", "save", "register_buffer"})
# Methods on other objects that read a tensor argument (copy its values, compute with it).
READING_METHODS = frozenset({
    "add", "sub", "mul", "div", "matmul", "mm", "bmm", "addmm", "masked_fill", "where", "expand_as",
    "view_as", "reshape_as", "type_as", "eq", "ne", "lt", "le", "gt", "ge", "dot", "index_select",
    "gather", "lerp", "maximum", "minimum", "pow", "cross", "outer", "bitwise_and", "logical_and",
})
# How a preallocated buffer of each kind is reset in place.
RESET = {"zeros": ".zero_()", "zeros_like": ".zero_()", "new_zeros": ".zero_()", "ones": ".fill_(1)",
         "ones_like": ".fill_(1)", "new_ones": ".fill_(1)", "full": ".fill_(value)",
         "full_like": ".fill_(value)", "new_full": ".fill_(value)"}


class AllocationInLoop(Rule):
    """
    ## What it does
    Finds a tensor factory (`torch.zeros`, `ones`, `empty`, `full`, `arange`, `linspace`,
    `eye`, the `*_like` and `x.new_*` forms) called on every iteration of a loop with
    arguments that do not change between iterations, whose result is bound to a name that
    the iteration does not keep: it is not stored, appended, yielded, returned, carried into
    the next iteration or handed to a call that might keep it.

    ## Why is this bad?
    Every iteration allocates the same buffer again, and while the new one is being
    allocated the old one is still bound to the name: N allocations instead of one, and a
    peak of two buffers instead of one (measured on a loop padding images onto a 3 MiB
    canvas: 8 canvas allocations in 8 steps against 1, and a peak 2.5 MiB higher). On CPU large buffers come straight from the
    operating system and are zero-filled page by page: measured at 64 MiB on one CPU
    thread, an iteration of `torch.zeros` plus one in-place add took 34 ms against 11 ms for
    `buf.zero_()` on a preallocated buffer plus the same add (the allocation alone: 110 ms
    against 9 ms). On a GPU the caching allocator hides most of the time but not the second
    buffer at the peak. Create the buffer once before the loop
    and reset it in place (`.zero_()`, `.fill_()`), write into it with `out=`, or simply
    reuse it when the loop never writes into it.

    ## Known problems
    Random factories (`torch.rand`, `randn`, `randint`, `randperm` and their `_like` forms)
    are not reported: fresh noise each step is the point, and generating the numbers costs
    more than the allocation (at 4 MiB, `buf.normal_()` was no faster than `torch.randn`).
    Sizes that mention anything the loop binds (`x.shape[0]`, `len(batch)`, the loop target)
    or that call unknown functions count as changing, and so does a `device=x.device` taken
    from the batch. A tensor that reaches a container, an attribute, a `return` / `yield`,
    the next iteration, a call that is not a torch function, a tensor method or a forward
    pass, or that is created with `requires_grad=True` (a fresh leaf each step, on purpose)
    is not reported. A function of the project (this file or another) that receives the
    buffer is read from its parameter: one that only computes with it, writes into it or
    returns it (the caller's uses of the result are then followed) does not keep it (the
    memory guides' `result = process(batch, temp)`); one that stores it, yields it,
    captures it in a nested function or hands it on to a call that might keep it does
    (followed three calls deep; functions of other libraries and `*args` count as keeping). Only statements of the form `name = torch.zeros(...)` (optionally
    followed by `.to(...)`-style conversions) are examined, and only in loops that make
    steps: the loop's own body runs a forward pass, `backward()` or an optimizer step, or its
    header goes over batches or steps; an allocation per epoch or in a setup loop over layers
    is not reported.
    """

    CODE = "TL403"
    NAME = "allocation-in-loop"
    MESSAGE = "`{call}` allocates the same buffer on every iteration of the loop"
    FIX = "create `{name}` once before the loop and reset it in place each iteration with {reset}, or write into it with `out=`"
    AUTOFIX = (
        "Unsafe: allocates once before the loop; inside it resets with `.zero_()` / `.fill_(1)` a "
        "buffer the loop writes into, or nothing for one it never writes or that starts empty. No "
        "fix for `full`-style buffers (the reset value) or multi-line statements."
    )
    TOKENS = ("torch",)
    CLAIM = ("the bad loop makes one buffer-sized allocation per step and peaks at two buffers; "
             "the fixed loop allocates the buffer once")

    INVALID = [
        """\
import torch

hist = torch.zeros(num_classes, dtype=torch.long)
for x, y in loader:
    counts = torch.zeros(num_classes, dtype=torch.long)  # expect: TL403
    counts.scatter_add_(0, y, torch.ones_like(y))
    hist += counts
""",
        """\
import torch

for step in range(steps):
    scratch = torch.empty(batch_size, hidden, device=device)  # expect: TL403
    torch.matmul(inputs, weight, out=scratch)
    total += scratch.sum().item()
""",
        """\
import torch

def process(batch, temp):
    temp[: len(batch)] = batch
    return temp.sum()

for batch in dataloader:
    temp = torch.zeros(1024, 1024)  # expect: TL403
    result = process(batch, temp)
""",
    ]
    VALID = [
        """\
import torch

hist = torch.zeros(num_classes, dtype=torch.long)
counts = torch.zeros(num_classes, dtype=torch.long)
for x, y in loader:
    counts.zero_()
    counts.scatter_add_(0, y, torch.ones_like(y))
    hist += counts
""",
        """\
import torch

outputs = []
for x in loader:
    logits = torch.zeros(x.shape[0], num_classes)
    mask = torch.zeros(num_classes)
    outputs.append(mask)
    noise = torch.randn(batch_size, latent_dim)
""",
        """\
import torch

def pad_batches(batches, width):
    for batch in batches:
        padded = torch.zeros(len(batch), width)
        padded[:, : batch.shape[1]] = batch
        yield padded
""",
        """\
import torch

def remember(history, mask):
    history.append(mask)

for batch in dataloader:
    mask = torch.ones(1024)
    remember(history, mask)
""",
    ]

    def visit_Assign(self, node, ctx: Context) -> None:
        if not ctx.loops or len(node.targets) != 1 or type(node.targets[0].target) is not cst.Name:
            return
        factory = _factory_call(self.analysis, node.value)
        if factory is None:
            return
        call, kind = factory
        if not self.analysis.runs_every_step(ctx):
            return  # allocated on some iterations only
        requires_grad = keyword_argument(call, "requires_grad")
        if requires_grad is not None and not (type(requires_grad) is cst.Name and requires_grad.value == "False"):
            return  # a fresh leaf per step, on purpose
        loop = ctx.loop
        if not self._invariant(node.value, loop):
            return
        name = node.targets[0].target.value
        uses = _BufferUses.in_loop(self.analysis, name, loop, ctx)
        if uses.kept:
            return
        self.report(node, self.MESSAGE.format(call=self.code(call, 50)), self._fix(name, kind, uses.written),
                    autofix=self._autofix(node, name, kind, uses.written, loop))

    def _autofix(self, node, name: str, kind: str, written: bool, loop: Loop) -> Fix | None:
        """Unsafe (the buffer now exists even when the loop runs no iteration, and a reset
        costs a kernel of its own): allocate once before the loop; inside it, reset a buffer
        the loop writes into (``zero_()`` / ``fill_(1)``), or nothing when it is never written
        or starts empty. No fix when the reset value would have to be guessed (``full``) or
        the loop is a function run once per step (no "before the loop" in sight)."""
        if loop.implicit is not None:
            return None
        text = source_of(self.analysis, node)
        if "\n" in text:
            return None  # a multi-line statement: re-indenting it is not worth the risk
        hoist = InsertBefore(loop.node, text)
        message = f"Allocate `{name}` once before the loop"
        if not written or kind.startswith(("empty", "new_empty")):
            return Fix.unsafe(message, hoist, Delete(node))
        reset = RESET.get(kind)
        if reset is None or "value" in reset:
            return None
        return Fix.unsafe(f"{message} and reset it with `{name}{reset}`", hoist, Replace(node, f"{name}{reset}"))

    def _fix(self, name: str, kind: str, written: bool) -> str:
        if not written:
            return f"create `{name}` once before the loop and reuse it: the loop never writes into it"
        if kind in RESET:
            return self.FIX.format(name=name, reset=f"`{name}{RESET[kind]}`")
        if kind.startswith(("empty", "new_empty")):
            return f"create `{name}` once before the loop and reuse it: an empty buffer needs no reset before it is overwritten"
        return f"create `{name}` once before the loop and refill it in place each iteration (`copy_`, `out=`)"

    def _invariant(self, value, loop: Loop) -> bool:
        """Do the arguments of the factory (and of the conversions after it) stay the same on
        every iteration: nothing bound inside the loop, no call whose result could change?"""
        analysis = self.analysis
        for node in iter_expression_nodes(value):
            if type(node) is not cst.Call:
                continue
            func = node.func
            if type(func) is cst.Attribute:
                method = func.attr.value
                if method in PURE_METHODS or method in CONVERSIONS or method in FACTORY_METHODS:
                    continue
                qualified = analysis.qualified_name(func) or ""
                if qualified.startswith("torch.") and (last_part(qualified) in FACTORIES or last_part(qualified) in PURE_CALLS):
                    continue
                return False
            if type(func) is cst.Name and (func.value in PURE_CALLS or _is_torch_factory(analysis, func)):
                continue
            return False
        for key in mentioned_keys(value):
            # the loop's own target is bound at the loop header (order == loop.start)
            if any(loop.start <= binding.ctx.order <= loop.end for binding in loop.scope.bindings.get(key, ())):
                return False
        return True


def _is_torch_factory(analysis, func) -> bool:
    qualified = analysis.qualified_name(func) or ""
    return qualified.startswith("torch.") and last_part(qualified) in FACTORIES


def _factory_call(analysis, value):
    """The factory call behind ``torch.zeros(...).to(device)``-style values, and its kind."""
    while type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value in CONVERSIONS:
        value = value.func.value
    if type(value) is not cst.Call:
        return None
    func = value.func
    if type(func) is cst.Attribute and func.attr.value in FACTORY_METHODS:
        return value, func.attr.value
    qualified = analysis.qualified_name(func) or ""
    if qualified.startswith("torch.") and qualified.count(".") == 1 and last_part(qualified) in FACTORIES:
        return value, last_part(qualified)
    return None


class _BufferUses:
    """How the loop uses the buffer bound to ``name`` and the names that may alias it: is it
    ``kept`` beyond the iteration, is it ``written`` into? A helper function of the project
    that receives it (``process(batch, buf)``) is read the same way, from its parameter."""

    def __init__(self, analysis, name: str, depth: int = 0) -> None:
        self.analysis = analysis
        self.aliases = {name}
        self.kept = False
        self.written = False
        self.depth = depth

    @classmethod
    def in_loop(cls, analysis, name: str, loop: Loop, ctx: Context) -> _BufferUses:
        uses = cls(analysis, name)
        for stmt, stmt_ctx in analysis.statements_in_loop(loop):
            if stmt_ctx.order < ctx.order:
                if any(name in mentioned_keys(expr) for expr in analysis.own_expressions(stmt)):
                    uses.kept = True  # the previous iteration's buffer is still read: carried over
            elif stmt_ctx.order > ctx.order:
                uses._statement(stmt, stmt_ctx)
            if uses.kept:
                break
        return uses

    @classmethod
    def in_helper(cls, scope, name: str, depth: int) -> _BufferUses:
        """The uses of the helper's parameter ``name`` in one call (memoised per function):
        stored, yielded, captured by a nested function or handed on to a call that might keep
        it count as kept; returned does not (the caller follows the call's result)."""
        key = ("TL403 parameter", name)
        memo = scope._memo
        if key in memo:
            return memo[key]
        analysis = scope.owner
        uses = cls(analysis, name, depth)
        memo[key] = uses
        uses.kept = True  # recursion resolves to "kept"
        kept = False
        for stmt, ctx in scope.statements:
            if ctx.scope is not scope:
                continue
            uses.kept = False
            uses._statement(stmt, ctx)
            kept = uses.kept
            if kept:
                break
        uses.kept = kept
        return uses

    def _statement(self, stmt, ctx: Context) -> None:
        kind = type(stmt)
        if kind in (cst.FunctionDef, cst.ClassDef):
            if any(type(node) is cst.Name and node.value in self.aliases for node in iter_expression_nodes(stmt)):
                self.kept = True  # a nested function reads it: a closure may keep it
            return
        if kind is cst.Return and stmt.value is not None and self._may_alias(stmt.value):
            # out of the loop: kept; out of a helper: back to the caller, whose uses of the
            # call's result (an alias of the buffer there) are followed
            self.kept = self.depth == 0
            return
        if kind in (cst.Assign, cst.AnnAssign) and stmt.value is not None:
            targets = [target.target for target in stmt.targets] if kind is cst.Assign else [stmt.target]
            for target in targets:
                if type(target) is cst.Subscript and self._may_alias(target.value):
                    self.written = True  # buf[i] = v writes into the buffer
                elif self._may_alias(stmt.value):
                    self._bind_alias(target)
        elif kind is cst.AugAssign:
            if self._may_alias(stmt.target):
                self.written = True
            elif type(stmt.value) in (cst.List, cst.Tuple) and self._may_alias(stmt.value):
                self.kept = True  # xs += [buf]
        elif kind is cst.For and self._may_alias(stmt.iter):
            self._bind_alias(stmt.target)
        elif kind is cst.With:
            for item in stmt.items:
                if item.asname is not None and self._may_alias(item.item):
                    self._bind_alias(item.asname.name)
        for expr in self.analysis.own_expressions(stmt):
            for node in iter_expression_nodes(expr):
                node_type = type(node)
                if node_type is cst.Yield:
                    value = node.value.item if type(node.value) is cst.From else node.value
                    if value is not None and self._may_alias(value):
                        self.kept = True
                elif node_type is cst.Lambda:
                    if self.aliases & mentioned_keys(node.body):
                        self.kept = True  # captured by a closure
                elif node_type is cst.Call:
                    self._call(node, ctx)
                if self.kept:
                    return

    def _bind_alias(self, target) -> None:
        if type(target) is cst.Name:
            self.aliases.add(target.value)
        elif type(target) in (cst.Tuple, cst.List):
            for element in target.elements:
                self._bind_alias(element.value)
        else:
            self.kept = True  # stored into an attribute, a container, a starred target

    def _call(self, call, ctx: Context) -> None:
        analysis = self.analysis
        func = call.func
        on_buffer = type(func) is cst.Attribute and self._may_alias(func.value)
        out = keyword_argument(call, "out")
        if (on_buffer and func.attr.value.endswith("_")) or (out is not None and self._may_alias(out)):
            self.written = True
        if on_buffer or not any(self._may_alias(arg.value) for arg in call.args):
            return  # the buffer's own methods, or a call that does not receive it
        qualified = analysis.qualified_name(func) or ""
        if qualified.startswith("torch."):
            name = last_part(qualified)
            if name in KEEPING_TORCH:
                self.kept = True
            elif name.endswith("_") or qualified.startswith("torch.distributed."):
                self.written = True  # torch.nn.init.zeros_(buf), dist.all_reduce(buf)
            return
        if type(func) is cst.Name and func.value in READING_BUILTINS and func.value not in analysis.imports:
            return
        if type(func) is cst.Attribute:
            method = func.attr.value
            if method in READING_METHODS or (method.endswith("_") and not method.startswith("_")):
                return  # out.copy_(buf), x.add_(buf), x.matmul(buf): values read, no reference kept
        if analysis.is_module(func, ctx):
            return  # a forward pass reads its inputs
        if not self._helper_call(call, ctx):
            self.kept = True  # a call that might keep a reference

    def _helper_call(self, call, ctx: Context) -> bool:
        """Does the call run a function of the project (this file or another) whose parameters
        that receive the buffer neither keep it nor hand it on to a call that might? Records
        the helper's writes into it."""
        if self.depth >= MAX_HELPER_DEPTH or any(arg.star for arg in call.args):
            return False
        callee = self.analysis.called_function(call, ctx)
        if callee is None or callee.kind != "function" or callee.owner is None:
            return False
        names = _parameter_names(callee, call)
        if names is None:
            return False
        positional, params = names
        for index, arg in enumerate(call.args):
            if not self._may_alias(arg.value):
                continue
            name = arg.keyword.value if arg.keyword is not None else (
                positional[index] if index < len(positional) else None)
            if name is None or name not in params:
                return False  # into *args / **kwargs, or an argument the function does not take
            uses = _BufferUses.in_helper(callee, name, self.depth + 1)
            if uses.kept:
                return False
            self.written = self.written or uses.written
        return True

    def _may_alias(self, expr) -> bool:
        """Could ``expr`` be the buffer, a view of it, or a container holding it?"""
        kind = type(expr)
        if kind is cst.Name:
            return expr.value in self.aliases
        if kind in (cst.Attribute, cst.Subscript):
            return self._may_alias(expr.value)
        if kind is cst.Call:
            func = expr.func
            if type(func) is cst.Attribute and self._may_alias(func.value):
                # buf.view(...), buf.to(device), buf.zero_() may return the same storage;
                # buf.sum(), buf.item(), buf + 1 do not
                method = func.attr.value
                return method in VIEW_FUNCTIONS or method in ALIASING_METHODS or method.endswith("_")
            out = keyword_argument(expr, "out")
            if out is not None and self._may_alias(out):
                return True
            receives = any(self._may_alias(arg.value) for arg in expr.args)
            qualified = self.analysis.qualified_name(func) or ""
            name = last_part(qualified)
            if qualified.startswith("torch.") and name[:1].islower():
                # torch functions allocate their results, except the view-returning ones
                return receives and name in VIEW_FUNCTIONS
            return receives  # unknown functions, forward passes, nn.Parameter(buf): may return it
        if kind in (cst.Tuple, cst.List, cst.Set):
            return any(self._may_alias(element.value) for element in expr.elements)
        if kind is cst.Dict:
            return any(self._may_alias(element.value) for element in expr.elements if type(element) is cst.DictElement)
        if kind is cst.IfExp:
            return self._may_alias(expr.body) or self._may_alias(expr.orelse)
        if kind is cst.BooleanOperation:
            return self._may_alias(expr.left) or self._may_alias(expr.right)
        if kind is cst.NamedExpr:
            return self._may_alias(expr.value)
        return False  # arithmetic, comparisons, literals: fresh values


# How deep calls of helpers that receive the buffer are followed.
MAX_HELPER_DEPTH = 3


def _parameter_names(scope, call) -> tuple[list[str], set[str]] | None:
    """The names of the function's parameters that the call's positional arguments fill, in
    order (``self`` / ``cls`` left out for a call through an attribute), and all that a
    keyword can name; None when the function takes ``*args`` (an argument's parameter is then
    unknown) or is a lambda."""
    node = scope.node
    params = getattr(node, "params", None)
    if params is None or type(params.star_arg) is cst.Param:
        return None
    names = [param.name.value for param in (*params.posonly_params, *params.params)]
    decorators = {dotted_name(decorator.decorator) for decorator in getattr(node, "decorators", ())}
    method = scope.parent is not None and scope.parent.kind == "class" and "staticmethod" not in decorators
    if method and type(call.func) is cst.Attribute:
        names = names[1:]
    return names, {*names, *(param.name.value for param in params.kwonly_params)}


# Tensor methods that may return their receiver's storage (besides views and in-place ops).
ALIASING_METHODS = frozenset({
    "view", "view_as", "expand", "expand_as", "reshape_as", "to", "cuda", "cpu", "float", "half",
    "double", "bfloat16", "long", "int", "bool", "byte", "type", "type_as", "contiguous", "numpy",
    "data", "__getitem__", "as_subclass",
})
VIEW_FUNCTIONS = frozenset({
    "reshape", "flatten", "squeeze", "unsqueeze", "narrow", "transpose", "permute", "select",
    "unbind", "chunk", "split", "tensor_split", "as_strided", "t", "movedim", "moveaxis",
    "view_as_real", "view_as_complex", "broadcast_to", "swapaxes", "swapdims", "diagonal",
    "atleast_1d", "atleast_2d", "atleast_3d", "ravel", "unflatten", "detach", "real", "imag",
})
