from __future__ import annotations

from torchlint.analysis import STORING_METHODS, Context, dotted_name, iter_expression_nodes, mentioned_keys, storage_key, strip_views
from torchlint.analysis.syntax import is_view_subscript, selected_view
from torchlint.analysis.vocabulary import LOSS_FUNCTIONAL_RE
from torchlint.lazy import cst
from torchlint.fix import Fix, Replace, source_of
from torchlint.rule import Rule

# method -> index of the stored argument (TL101's storing calls)


# Reductions to one element when called without a dimension.
FULL_REDUCTIONS = frozenset({"mean", "sum", "norm", "std", "var", "prod", "logsumexp", "max", "min"})

class ViewKeepsBaseAlive(Rule):
    """
    ## What it does
    Finds a loop that stores a basic-index view of part of a tensor made in the iteration
    (`out[:, -1]`, `x[0]`, `h.narrow(1, 0, k)`, `m.diagonal()`, `t.select(0, i)`, also
    after `.detach()` or `.view(...)`) into a list or dict that outlives the iteration:
    `xs.append(out[:, -1])`, `d[k] = out[0]`, `xs += [out[:, -1]]`.

    ## Why is this bad?
    A view has no storage of its own: it keeps its base tensor's whole storage alive. Every
    stored slice pins the full tensor it was cut from, so a loop that means to keep one
    column of each step's output keeps every step's whole output. Measured on a decoding
    loop keeping the last position of a (16, 64, 256) output: 64x the bytes of the same
    loop storing `.clone()`d slices. `.detach()` does not help: it is a view too, and so is
    `.numpy()` of a CPU tensor.

    Store a copy of just the part: `out[:, -1].clone()` (`.detach().clone()` for a tensor
    attached to the graph), or `.item()` / `.tolist()` for numbers.

    ## Known problems
    `.cpu()`, `.to(...)`, `.float()` and `.contiguous()` end the view when they copy, which
    is what they do for a GPU tensor moved to the host (the usual case) but not for a CPU
    tensor already on the host in that dtype and layout (then they return the tensor
    itself and the base stays alive); they are taken as copies, so such CPU code is not
    reported. `x[0]` with a single index is reported only when `x` is a tensor by evidence
    in the file (a torch function's result, a tensor method's), since it may index a list
    or a model's output tuple; multi-axis indexes, `narrow`, `select` and `diagonal` are
    tensors by syntax. An index by a name (`x[i]`, `out[:, k]`) counts as advanced indexing,
    a copy, since the name may hold a tensor or a list; slices with any bounds are views.
    Not reported: views of a one-element value (`loss.data[0]`, pre-0.4 code's spelling of
    `.item()`, on a loss or a full reduction such as `x.mean()`), views of tensors that outlive the iteration anyway
    (made before the loop, attributes of `self`), views whose base the loop also stores
    whole, values still attached to the autograd graph (TL101 reports those: the graph
    keeps more than the base), stores into an attribute (`self.last = out[:, -1]` keeps one
    base, not one per step), and loops that make no steps (a loop over layers).
    """

    CODE = "TL104"
    NAME = "view-keeps-base-alive"
    MESSAGE = "`{stmt}` stores a view of `{base}`, which keeps all of `{base}`'s storage alive after the iteration"
    FIX = "store a copy of just the part: `{value}.clone()`, or `.item()` / `.tolist()` for numbers"
    AUTOFIX = (
        "Unsafe: stores `v.clone()` instead of the view `v`: the same values without the base's "
        "storage. Unsafe because a later in-place write into the base, or through the stored "
        "view, no longer reaches what was stored."
    )
    TOKENS = ("[", "narrow", "select", "diagonal")
    CLAIM = ("storing a slice of each step's output keeps every step's whole output: live bytes per step are "
             "the base's size, not the slice's")

    INVALID = [
        """\
import torch

last_logits = []
with torch.no_grad():
    for step in range(max_new_tokens):
        logits = model(tokens)
        last_logits.append(logits[:, -1])  # expect: TL104
        tokens = torch.cat([tokens, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
""",
        """\
import torch

firsts = {}
for step, batch in enumerate(loader):
    scores = torch.softmax(model(batch), dim=-1)
    firsts[step] = scores[0].detach()  # expect: TL104
""",
        """\
import torch

diagonals = []
for batch in loader:
    with torch.no_grad():
        sim = encoder(batch) @ encoder(batch).T
    diagonals.append(sim.diagonal())  # expect: TL104
""",
    ]
    VALID = [
        """\
import torch

last_logits = []
with torch.no_grad():
    for step in range(max_new_tokens):
        logits = model(tokens)
        last_logits.append(logits[:, -1].clone())
        tokens = torch.cat([tokens, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
""",
        """\
import torch

outputs, lasts, picked = [], [], []
table = torch.randn(1000, 64)
for step, batch in enumerate(loader):
    out = model(batch).detach()
    outputs.append(out)          # the base itself is kept: the view costs nothing more
    lasts.append(out[:, -1])
    picked.append(table[step])   # a view of a tensor that lives anyway
    scores = torch.softmax(out, dim=-1)
    picked.append(scores[mask])  # a boolean mask copies
    picked.append(scores[:, 0].cpu())  # a device-to-host copy
    picked.append(scores[0].item())
""",
        """\
outputs = []
for batch in loader:
    out = model(batch)
    outputs.append(out[0])  # out may be a tuple: indexing it picks an element
""",
        """\
mse_train, nll_train = [], []
for data, target in train_loader:
    output = model(data)
    loss = F.nll_loss(output, target)
    loss.backward()
    optimizer.step()
    mse_train.append(F.mse_loss(output, target).data[0])  # pre-0.4 `.item()`: one element
    nll_train.append(loss.data[0])
""",
    ]

    def visit_Expr(self, node, ctx: Context) -> None:
        call = node.value
        if not ctx.loops or type(call) is not cst.Call or type(call.func) is not cst.Attribute:
            return
        index = STORING_METHODS.get(call.func.attr.value)
        if index is None:
            return
        positional = [arg.value for arg in call.args if arg.keyword is None]
        if len(positional) > index:
            self._check(node, call.func.value, positional[index], ctx)

    def visit_AugAssign(self, node, ctx: Context) -> None:
        # xs += [v]
        if ctx.loops and type(node.operator) is cst.AddAssign and type(node.value) in (cst.List, cst.Tuple):
            self._check(node, node.target, node.value, ctx)

    def visit_Assign(self, node, ctx: Context) -> None:
        # d[k] = v into a dict or list built in this file (not a write into a tensor)
        if not ctx.loops or len(node.targets) != 1 or type(node.targets[0].target) is not cst.Subscript:
            return
        target = node.targets[0].target
        key = storage_key(target)
        if key is not None and self.analysis.is_python_container(key, ctx):
            self._check(node, target.value, node.value, ctx)

    def _check(self, node, container, value, ctx: Context) -> None:
        analysis = self.analysis
        key = storage_key(container)
        # the innermost loop that makes steps: `for key, val in losses.items()` inside a loop
        # over batches stores per batch
        loop = next((loop for loop in reversed(ctx.loops) if analysis.is_step_loop(loop)), None)
        if key is None or loop is None:
            return
        values = [element.value for element in value.elements] if type(value) in (cst.List, cst.Tuple) else [value]
        for stored in values:
            view = self._view_of_fresh_tensor(stored, ctx, loop)
            if view is None:
                continue
            if not analysis.container_outlives_iteration(key, ctx, loop):
                return  # rebuilt or emptied every iteration: nothing outlives it
            if analysis.is_attached(stored, ctx):
                return  # TL101's: the graph keeps far more than the base
            base = analysis.code(view, 30)
            text = source_of(analysis, stored)
            if type(stored) not in (cst.Name, cst.Attribute, cst.Subscript, cst.Call):
                text = f"({text})"
            # unsafe: a later in-place write into the base (or through the stored view) no longer
            # reaches the stored copy
            autofix = Fix.unsafe(f"Store a copy: `{self.operand(stored)}.clone()`", Replace(stored, f"{text}.clone()"))
            self.report(node, self.MESSAGE.format(stmt=self.code(node, 60), base=base),
                        self.FIX.format(value=self.operand(stored)), autofix=autofix)
            return

    def _view_of_fresh_tensor(self, value, ctx: Context, loop):
        """The base of ``value`` when it is a view of part of a tensor made in this iteration of
        ``loop``, which nothing else in the loop keeps whole; else None."""
        analysis = self.analysis
        if type(value) is cst.Name:
            # last = out[:, -1]; lasts.append(last)
            binding = analysis.lookup(value.value, ctx)
            bound = analysis.bound_value(binding) if binding is not None and loop.contains(binding.ctx.order) else None
            if bound is not None:
                value, ctx = bound, binding.ctx
        found = selected_view(value)
        if found is None:
            return None
        base, by_syntax = found
        if not by_syntax and not analysis.is_tensor(base, ctx):
            return None  # x[0] may pick an element of a list or tuple
        if self._numpy_array(base, ctx) or not self._made_as_tensor(base, ctx):
            return None  # a NumPy slice, or the result of a function that may return one
        if self._scalar(base, ctx, 0):
            return None  # `loss.data[0]` (the pre-0.4 `.item()`): a one-element storage pins nothing
        if _batch_of_one(value, self._origins(base, ctx, loop)):
            return None  # m[None] ... [0]: the index removes a dimension of size one
        if self._indexed_by_inner_loop(value, ctx, loop):
            return None  # for b in range(bs): d[b] = x[:, b]: together the slices are all of x
        if type(base) is cst.Call:
            return base  # made by the call, in this iteration
        key = storage_key(base)  # batch["target"][:, :k]: the batch
        if key is None or key.startswith("self."):
            return None  # an attribute of the object: it outlives the iteration anyway
        binding = analysis.lookup(key, ctx) or analysis.lookup(key.partition(".")[0], ctx)
        if binding is None or not (loop.contains(binding.ctx.order) or binding.ctx.order == loop.start):
            return None  # made before the loop: alive anyway
        if self._kept_whole(key, loop, ctx):
            return None
        return base

    def _scalar(self, expr, ctx: Context, depth: int) -> bool:
        """Is ``expr`` a reduced value of one element: a loss (``F.mse_loss(out, y)``,
        ``criterion(out, y)`` without ``reduction="none"``), a full reduction (``x.mean()``,
        ``torch.sum(x)``), or a name bound to one?"""
        analysis = self.analysis
        while type(expr) is cst.Attribute and expr.attr.value == "data":
            expr = expr.value
        if type(expr) is cst.Name and depth < 3:
            binding = analysis.lookup(expr.value, ctx)
            value = analysis.bound_value(binding) if binding is not None else None
            return value is not None and self._scalar(value, binding.ctx, depth + 1)
        if type(expr) is not cst.Call:
            return False
        if any(arg.keyword is not None and arg.keyword.value in ("reduction", "reduce", "dim", "axis", "keepdim")
               for arg in expr.args):
            return False  # `reduction="none"`, `x.sum(dim=1)`: a tensor per element or per row
        name = dotted_name(expr.func) or ""
        last = name.rpartition(".")[2]
        if type(expr.func) is cst.Attribute and last in FULL_REDUCTIONS and not expr.args:
            return True  # x.mean()
        qualified = analysis.qualified_name(expr.func) or name
        if qualified.startswith("torch.") and last in FULL_REDUCTIONS and len(expr.args) == 1:
            return True  # torch.mean(x)
        return bool(LOSS_FUNCTIONAL_RE.search(last)) or last in ("criterion", "loss_fn", "loss_func")

    def _origins(self, base, ctx: Context, loop) -> list:
        """``base`` and the values the names it mentions were bound to in the loop, a few
        bindings deep: ``codes = out.codes.transpose(1, -1)`` and ``out = codec(x.unsqueeze(0))``."""
        analysis = self.analysis
        found, pending, seen = [base], [(base, ctx)], set()
        while pending and len(found) < 8:
            expr, expr_ctx = pending.pop()
            for key in mentioned_keys(expr):
                binding = analysis.lookup(key, expr_ctx)
                if binding is None or id(binding) in seen or not loop.contains(binding.ctx.order):
                    continue
                seen.add(id(binding))
                value = binding.value if binding.kind == "assign" else None
                if value is not None:
                    found.append(value)
                    pending.append((value, binding.ctx))
        return found

    def _indexed_by_inner_loop(self, view, ctx: Context, loop) -> bool:
        """Does the view's index mention the target of a loop nested in ``loop`` around the store
        (``for b in range(bs): ... x[:, b:b + 1]``)?"""
        if loop not in ctx.loops:
            return False
        inner = [each for each in ctx.loops[ctx.loops.index(loop) + 1:] if type(each.node) is cst.For]
        if not inner:
            return False
        targets = set().union(*(mentioned_keys(each.node.target) for each in inner))
        return any(targets & mentioned_keys(element.slice) for subscript in _subscripts(view) for element in subscript.slice)

    def _made_as_tensor(self, base, ctx: Context) -> bool:
        """Is the base, when it is (or is bound to) a call, made by torch: a torch function or a
        tensor method, a forward pass, a method of a forward pass's result? A plain function or
        an unknown object's method may return a NumPy array, whose ``a[0, 0]`` is a copy.
        Anything else (an unpacked tuple element, arithmetic) keeps the syntax's word."""
        analysis = self.analysis
        if type(base) in (cst.Name, cst.Attribute):
            if analysis.is_tensor(base, ctx):
                return True
            key = dotted_name(base) or ""
            binding = analysis.lookup(key, ctx) or analysis.lookup(key.partition(".")[0], ctx)
            value = analysis.bound_value(binding) if binding is not None else None
            if type(value) is not cst.Call:
                return True
            base, ctx = value, binding.ctx
        if type(base) is not cst.Call:
            return True
        if analysis.is_tensor(base, ctx) or analysis.is_module(base.func, ctx):
            return True
        func = base.func
        return type(func) is cst.Attribute and (analysis.is_tensor(func.value, ctx) or self._forward_result(func.value, ctx))

    def _forward_result(self, expr, ctx: Context) -> bool:
        """Is ``expr`` a name bound to a forward pass (``y = model(x)``)?"""
        binding = self.analysis.lookup(dotted_name(expr) or "", ctx)
        value = self.analysis.bound_value(binding) if binding is not None else None
        return type(value) is cst.Call and self.analysis.is_module(value.func, binding.ctx)

    def _numpy_array(self, expr, ctx: Context) -> bool:
        """Is ``expr`` a NumPy array by evidence: ``t.numpy()``, ``np.f(...)``, ``m.predict_proba(x)``
        style results, or a name bound to one?"""
        if type(expr) in (cst.Name, cst.Attribute):
            binding = self.analysis.lookup(dotted_name(expr) or "", ctx)
            expr = self.analysis.bound_value(binding) if binding is not None else None
        if type(expr) is not cst.Call:
            return False
        func = expr.func
        root = (dotted_name(func) or "").partition(".")[0]
        if root in ("np", "numpy") or self.analysis.imports.get(root, "").startswith("numpy"):
            return True
        return type(func) is cst.Attribute and func.attr.value in ("numpy", "predict_proba", "predict", "to_numpy")

    def _kept_whole(self, key: str, loop, ctx: Context) -> bool:
        """Does another statement of the loop store the base itself (or a whole view of it)?"""
        analysis = self.analysis
        for stmt, stmt_ctx in analysis.statements_in_loop(loop):
            if stmt_ctx.order == ctx.order or type(stmt) not in (cst.Expr, cst.Assign, cst.AugAssign):
                continue
            for expr in _stored_expressions(stmt):
                if selected_view(expr) is None and dotted_name(strip_views(expr, through_detach=True)) == key:
                    return True
        return False


def _subscripts(view) -> list:
    """The subscripts of a view's chain, outermost first: ``x[0][:, 1:]`` for
    ``x[0][:, 1:].detach()``."""
    found = []
    while True:
        if type(view) is cst.Subscript:
            if not is_view_subscript(view):
                return found
            found.append(view)
            view = view.value
        elif type(view) is cst.Call and type(view.func) is cst.Attribute:
            view = view.func.value
        elif type(view) is cst.Attribute:
            view = view.value
        else:
            return found


def _batch_of_one(view, origins: list) -> bool:
    """``F.interpolate(m[None], ...)[0]``, ``model(x.unsqueeze(0))[0]``: a leading ``[0]`` that
    takes back the dimension of size one the base's expression (or one it was computed from,
    ``origins``) added."""
    subscripts = _subscripts(view)
    if len(subscripts) != 1 or len(subscripts[0].slice) != 1:
        return False
    index = subscripts[0].slice[0].slice
    if type(index) is cst.Slice or type(index.value) is not cst.Integer or index.value.value != "0":
        return False
    for node in (node for origin in origins for node in iter_expression_nodes(origin)):
        if type(node) is cst.Subscript and any(
            type(element.slice) is cst.Index and type(element.slice.value) is cst.Name
            and element.slice.value.value == "None" for element in node.slice[:1]
        ):
            return True
        if (type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "unsqueeze"
                and node.args and type(node.args[0].value) is cst.Integer and node.args[0].value.value == "0"):
            return True
    return False


def _stored_expressions(stmt) -> list:
    """What a statement stores somewhere that may outlive it: appended values, values assigned
    into an attribute or an item, list elements added with ``+=``."""
    kind = type(stmt)
    found = []
    if kind is cst.Expr and type(stmt.value) is cst.Call and type(stmt.value.func) is cst.Attribute:
        if stmt.value.func.attr.value in STORING_METHODS or stmt.value.func.attr.value in ("add", "update", "put"):
            found = [arg.value for arg in stmt.value.args]
    elif kind is cst.Assign and any(type(target.target) in (cst.Attribute, cst.Subscript) for target in stmt.targets):
        found = [stmt.value]
    elif kind is cst.AugAssign:
        found = [stmt.value]
    expanded = []
    for expr in found:
        if type(expr) in (cst.List, cst.Tuple):
            expanded.extend(element.value for element in expr.elements)
        elif type(expr) is cst.Dict:
            expanded.extend(element.value for element in expr.elements if type(element) is cst.DictElement)
        else:
            expanded.append(expr)
    return expanded
