from __future__ import annotations

import re

from torchlint.analysis import VIEW_METHODS, Context, dotted_name, is_view_subscript, iter_expression_nodes, last_part
from torchlint.lazy import cst
from torchlint.fix import Fix, InsertAfter
from torchlint.rule import InPlaceMutationRule

DATASET_RE = re.compile(r"Dataset", re.I)
ITEM_METHODS = frozenset({"__getitem__", "__getitems__"})
# Stored values that are arrays or tensors: built by these namespaces or methods.
ARRAY_NAMESPACES = ("torch.", "numpy.", "np.")
ARRAY_METHODS = frozenset({
    "astype", "float", "double", "half", "long", "int", "to", "cuda", "cpu", "numpy", "reshape", "view",
    "permute", "transpose", "contiguous", "clone", "copy", "tensor", "from_numpy", "load", "stack", "cat",
    "concatenate", "array", "asarray", "zeros", "ones", "randn", "rand", "empty", "full", "arange",
})


class DatasetItemMutatedInPlace(InPlaceMutationRule):
    """
    ## What it does
    Finds `__getitem__` methods of `Dataset` classes that change the dataset's stored data in
    place. The change is an in-place tensor method (`x.mul_(...)`, `x.sub_(mean)`), an augmented assignment
    (`x -= mean`, `x /= 255`) or an item assignment (`x[0] = 0`) on a value that is the stored
    data itself or a view of it (`x = self.data[i]`, `x = self.images[i].view(-1)`), or directly
    on `self.data[i]` (`self.data[i] += noise`). Augmented and item assignments count where
    the class fills the attribute with a tensor or array (`torch.*`, `np.*`, `.float()`, ...):
    on a list of Python numbers they rebind an element instead of changing an array.

    ## Why is this bad?
    Indexing a tensor or array with an integer or a slice returns a view that shares the
    dataset's storage, and a list element is the stored object itself. Changing it in place
    changes the dataset: every epoch normalises, augments or adds noise to the already
    changed values, so the inputs drift further with each pass. Measured on CPU: a stored
    item scaled in place by 1.5 in `__getitem__` was 1.1 away from its original value after
    one epoch and 52 after eight; a NumPy row centred in place (`image -= 0.25`) moved by
    0.25 more every epoch; with `.clone()` / `.copy()` first the stored data stayed
    bit-identical. With `num_workers >
    0` each worker process changes its own copy, so the drift also depends on the worker
    layout.

    ## Known problems
    Not reported: values copied first (`.clone()`, `.copy()`, `torch.tensor(...)`,
    `np.array(...)`, `copy.deepcopy(...)`), data loaded or built per call, transforms that
    return new tensors (`x = self.transform(x)` rebinds `x`), advanced indexing (a copy), and
    writes that store a new object (`self.cache[i] = x`). Conversions that may return the
    same tensor (`x = self.data[i].float()` on a float tensor) are taken as copies. Helpers
    called from `__getitem__` are not followed.
    """

    CODE = "TL304"
    NAME = "dataset-item-mutated-in-place"
    MESSAGE = (
        "`{stmt}` changes `{stored}`, the dataset's stored data, in place inside `__getitem__`: "
        "every epoch sees the values left by the previous one"
    )
    FIX = "copy first (`{value}.clone()` / `.copy()`) or use an out-of-place operation (`x = x * s`)"
    AUTOFIX = (
        "Unsafe: inserts `x = x.clone()` (`x = x.copy()` for a NumPy array) right after the one "
        "assignment that binds a local `x` to a view of the stored data (so every later change, on "
        "every path, works on the copy), when the class fills that "
        "attribute from torch or NumPy. Unsafe because a dataset that changes its items on "
        "purpose (normalising each once) stops doing so. No fix for a change written on "
        "`self.x[i]` itself, or data of unknown type."
    )
    TOKENS = ("__getitem__",)
    CLAIM = (
        "the bad dataset's item differs between epochs (max abs change > 1e-3 and growing), while the good "
        "dataset returns identical items every epoch"
    )

    INVALID = [
        """\
class NoisyDataset(Dataset):
    def __init__(self, n):
        self.x = torch.randn(n, 16)

    def __getitem__(self, i):
        x = self.x[i]
        x.add_(0.1 * torch.randn_like(x))  # expect: TL304
        return x
""",
        """\
class Images(torch.utils.data.Dataset):
    def __init__(self, path):
        self.images = np.load(path).astype(np.float32)
        self.mean = self.images.mean()

    def __getitem__(self, index):
        image = self.images[index]
        image -= self.mean  # expect: TL304
        return torch.from_numpy(image)
""",
        """\
class Series(Dataset):
    def __init__(self, values):
        self.data = torch.as_tensor(values)

    def __getitem__(self, i):
        self.data[i] *= 2  # expect: TL304
        return self.data[i]
""",
    ]
    VALID = [
        """\
class NoisyDataset(Dataset):
    def __init__(self, n):
        self.x = torch.randn(n, 16)

    def __getitem__(self, i):
        x = self.x[i].clone()
        x.add_(0.1 * torch.randn_like(x))
        return x
""",
        """\
class Images(Dataset):
    def __init__(self, path):
        self.images = np.load(path)

    def __getitem__(self, index):
        image = self.transform(self.images[index])
        image -= 0.5
        return image
""",
        """\
class Cached(Dataset):
    def __getitem__(self, i):
        if i not in self.cache:
            self.cache[i] = load(self.paths[i])
        x = np.array(self.cache[i])
        x /= 255.0
        return x
""",
        """\
class Pairs(Dataset):
    def __init__(self, items):
        self.items = items

    def __getitem__(self, i):
        path, label = self.items[i]
        label -= 1
        return read(path), label
""",
    ]

    def check_mutation(self, node, ctx: Context) -> None:
        scope = ctx.scope
        if scope.kind != "function" or scope.name not in ITEM_METHODS or not self._in_dataset(scope):
            return
        analysis = self.analysis
        inplace_method = type(node) not in (cst.AugAssign,) and not _item_assignment(node)
        for operand in _changed(node, analysis):
            stored = self._stored_view(operand, ctx, depth=0)
            if stored is None:
                continue
            if not inplace_method and not self._holds_array(stored, scope):
                continue  # `label -= 1` on a list element rebinds a number
            value = self.code(operand, 30)
            self.report(node, self.MESSAGE.format(stmt=self.code(node, 50), stored=stored),
                        self.FIX.format(value=value), autofix=self._autofix(node, operand, stored, ctx))
            return

    def _autofix(self, node, operand, stored: str, ctx: Context) -> Fix | None:
        """``x = x.clone()`` (``x.copy()`` for a NumPy array) right after the one assignment that
        binds the local ``x`` to a view of the stored data, so every later change, on every
        path, works on the copy; only when the class fills the stored attribute from torch or
        NumPy (the copy method is known). Unsafe: a dataset that changes its stored items on
        purpose (normalising each once, behind a flag) stops doing so."""
        if type(operand) is not cst.Name:
            return None  # `self.x[i].mul_(2)`: an out-of-place rewrite, not a copy, is the fix
        method = {"torch": "clone", "numpy": "copy"}.get(self._library_of(stored, ctx.scope))
        if method is None:
            return None
        name = operand.value
        bindings = self.analysis.reaching_bindings(name, ctx)
        if len(bindings) != 1 or bindings[0].kind != "assign" or type(bindings[0].stmt) is not cst.Assign:
            return None  # bound on several paths: one copy would not cover them all
        return Fix.unsafe(f"Copy `{name}` where it is taken: `{name} = {name}.{method}()`",
                          InsertAfter(bindings[0].stmt, f"{name} = {name}.{method}()"))

    def _library_of(self, key: str, scope) -> str | None:
        """"torch" or "numpy" when every assignment of ``self.<attr>`` in the class is a call
        of that library (``torch.randn(...)``, ``np.load(...).astype(...)``), else None."""
        class_scope = scope.class_scope
        found = set()
        for binding in class_scope.bindings.get(key, ()) if class_scope is not None else ():
            value = binding.value if binding.kind == "assign" and not binding.element else None
            library = None
            while type(value) is cst.Call:
                qualified = self.analysis.qualified_name(value.func) or dotted_name(value.func) or ""
                if qualified.startswith("torch."):
                    library = "torch"
                elif qualified.startswith(("numpy.", "np.")):
                    library = "numpy"
                value = value.func.value if type(value.func) is cst.Attribute else None
            found.add(library)
        return found.pop() if len(found) == 1 else None

    def _in_dataset(self, scope) -> bool:
        parent = scope.parent
        if parent is None or parent.kind != "class":
            return False
        node = parent.node
        names = [node.name.value] + [dotted_name(base.value) or "" for base in node.bases]
        return any(DATASET_RE.search(last_part(name)) for name in names)

    def _stored_view(self, expr, ctx: Context, depth: int) -> str | None:
        """The ``self.<attr>`` whose storage ``expr`` is or views (``self.x[i]``, ``x`` bound
        to one on every path reaching here), or None."""
        base, subscripted = expr, False
        while True:  # down to the stored tensor through views: x[i], x.view(-1), x[i].t()
            if type(base) is cst.Subscript:
                if not _basic_index(base):
                    return None  # advanced indexing copies
                base, subscripted = base.value, True
            elif type(base) is cst.Call and type(base.func) is cst.Attribute and base.func.attr.value in VIEW_METHODS:
                base, subscripted = base.func.value, True
            else:
                break
        if depth > 3:
            return None
        key = dotted_name(base)
        if key is None:
            return None
        if key.startswith("self."):
            return key if subscripted else None  # `self.count += 1` is a counter, not the data
        if "." in key:
            return None
        bindings = self.analysis.reaching_bindings(key, ctx)
        if not bindings:
            return None
        found = None
        for binding in bindings:
            if binding.kind not in ("assign", "for") or binding.ctx.scope is not ctx.scope:
                return None
            value = self.analysis.bound_value(binding) if binding.element else binding.value
            if binding.kind == "for" or value is None:
                return None
            stored = self._stored_view(value, binding.ctx, depth + 1)
            if stored is None:
                return None
            found = stored
        return found

    def _holds_array(self, key: str, scope) -> bool:
        """Does the class fill ``self.<attr>`` with a tensor or array?"""
        class_scope = scope.class_scope
        if class_scope is None:
            return False
        for binding in class_scope.bindings.get(key, ()):
            value = binding.value if binding.kind == "assign" and not binding.element else None
            while type(value) is cst.Call:
                qualified = self.analysis.qualified_name(value.func) or dotted_name(value.func) or ""
                if qualified.startswith(ARRAY_NAMESPACES) or last_part(qualified) in ARRAY_METHODS:
                    return True
                value = value.func.value if type(value.func) is cst.Attribute else None
        return False


def _changed(stmt, analysis) -> list:
    """What the statement changes, with its subscript kept (``self.data[i]`` for
    ``self.data[i] *= 2``, where ``mutated_operands`` gives the container)."""
    if type(stmt) is cst.AugAssign:
        return [stmt.target]
    if _item_assignment(stmt):
        return [t.target for t in stmt.targets if type(t.target) is cst.Subscript]
    return analysis.mutated_operands(stmt)


def _basic_index(node) -> bool:
    """``x[i]``, ``x[idx, :3]``, ``x[i + 1]``: indices that are ints, slices or names (the
    item index ``__getitem__`` receives), which give a view; not ``x[[i, j]]`` / ``x[mask]``
    / ``x[idx.long()]`` (advanced indexing copies)."""
    if is_view_subscript(node):
        return True
    for element in node.slice:
        index = element.slice
        if type(index) is cst.Slice:
            continue
        if any(type(part) in (cst.List, cst.Tuple, cst.Call, cst.Comparison, cst.ListComp)
               for part in iter_expression_nodes(index.value)):
            return False
    return True


def _item_assignment(stmt) -> bool:
    return type(stmt) is cst.Assign and any(type(t.target) is cst.Subscript for t in stmt.targets)

