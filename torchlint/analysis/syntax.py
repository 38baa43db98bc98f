"""Questions about one expression or statement that need no context: dotted names, the calls
along a method chain, the names an expression reads, views and in-place method names."""

from __future__ import annotations

from collections.abc import Iterator
import functools
import re
from torchlint.lazy import cst
from torchlint.analysis.vocabulary import DETACHING_METHODS, GradMode, NON_DIFFERENTIABLE_METHODS, MODULE_PASS_THROUGH_METHODS, NON_MUTATING_INPLACE_METHODS, VIEW_METHODS, _BATCH_RE


_NEUTRAL_FIELDS = frozenset({
    "lpar", "rpar", "comma", "semicolon", "leading_lines", "lines_after_decorators", "header",
    "footer", "newline", "equal", "colon", "operator", "dot", "star", "whitespace_before",
    "whitespace_after", "lbracket", "rbracket", "lbrace", "rbrace", "asynchronous",
    "trailing_whitespace", "default_comma", "star_tok", "arrow",
})
_FIELDS_BY_TYPE: dict[type, tuple[str, ...]] = {}


def child_nodes(node) -> Iterator:
    """Direct children of a libcst node that can hold code (whitespace and punctuation skipped)."""
    fields = _FIELDS_BY_TYPE.get(type(node))
    if fields is None:
        fields = tuple(
            name for name in type(node).__dataclass_fields__
            if name not in _NEUTRAL_FIELDS and not name.startswith(("whitespace", "__"))
        )
        _FIELDS_BY_TYPE[type(node)] = fields
    for name in fields:
        value = getattr(node, name)
        kind = type(value)
        if kind is list or kind is tuple:
            for item in value:
                if _is_node_type(type(item)):
                    yield item
        elif _is_node_type(kind):
            yield value


_NODE_TYPES: dict[type, bool] = {}


def _is_node_type(kind: type) -> bool:
    # issubclass against libcst's abstract base class is slow; the answer per type never changes
    known = _NODE_TYPES.get(kind)
    if known is None:
        known = _NODE_TYPES[kind] = issubclass(kind, cst.CSTNode)
    return known


def iter_expression_nodes(node) -> Iterator:
    """Every node under ``node`` (itself included), not entering lambdas' bodies."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if type(current) is cst.Lambda:
            continue
        stack.extend(child_nodes(current))


def collect_nodes(node, wanted: type, found: list) -> list:
    """Append every node of type ``wanted`` under ``node`` (itself included, lambdas' bodies
    not entered) to ``found``: ``iter_expression_nodes`` filtered, without generators (this is
    the innermost loop of the analysis: every statement's calls)."""
    stack = [node]
    pop, push = stack.pop, stack.append
    fields_by_type = _FIELDS_BY_TYPE
    # node types worth a visit: nodes, less the leaves (a Name holds no other node), unless
    # the leaves are what is wanted
    inner_types = _INNER_NODE_TYPES if wanted not in _LEAF_TYPES else _NODE_TYPES
    lambda_type = cst.Lambda
    while stack:
        current = pop()
        kind = type(current)
        if kind is wanted:
            found.append(current)
        elif kind is lambda_type:
            continue
        fields = fields_by_type.get(kind)
        if fields is None:
            fields = tuple(
                name for name in kind.__dataclass_fields__
                if name not in _NEUTRAL_FIELDS and not name.startswith(("whitespace", "__"))
            )
            fields_by_type[kind] = fields
        for name in fields:
            value = getattr(current, name)
            value_kind = type(value)
            if value_kind is list or value_kind is tuple:
                for item in value:
                    item_kind = type(item)
                    known = inner_types.get(item_kind)
                    if known is None:
                        known = _is_inner_node_type(item_kind)
                    if known:
                        push(item)
            else:
                known = inner_types.get(value_kind)
                if known is None:
                    known = _is_inner_node_type(value_kind)
                if known:
                    push(value)
    return found


_LEAF_TYPE_NAMES = ("Name", "Integer", "Float", "Imaginary", "SimpleString", "Ellipsis")
_INNER_NODE_TYPES: dict[type, bool] = {}


def _is_inner_node_type(kind: type) -> bool:
    known = _INNER_NODE_TYPES.get(kind)
    if known is None:
        known = _INNER_NODE_TYPES[kind] = _is_node_type(kind) and kind not in _LEAF_TYPES
        _NODE_TYPES.setdefault(kind, _is_node_type(kind))
    return known


class _LeafTypes:
    """The node types that hold no other node (libcst is imported lazily, so resolved on first
    use)."""

    def __init__(self) -> None:
        self._types: frozenset | None = None

    def __contains__(self, kind) -> bool:
        if self._types is None:
            self._types = frozenset(getattr(cst, name) for name in _LEAF_TYPE_NAMES)
        return kind in self._types


_LEAF_TYPES = _LeafTypes()


def dotted_name(node) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    kind = type(node)
    if kind is not cst.Attribute:  # a bare name (most calls), or no name at all
        return node.value if kind is cst.Name else None
    parts = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is not cst.Name:
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def storage_key(node) -> str | None:
    """The name that owns a container expression: ``metrics["loss"]`` -> ``metrics``."""
    while type(node) is cst.Subscript:
        node = node.value
    return dotted_name(node)


def key_within(inner: str, outer: str) -> bool:
    """``inner`` is ``outer`` or one of its attributes: ``model.encoder`` is within ``model``,
    ``netG`` is not within ``net``."""
    return inner == outer or inner.startswith(outer + ".")


def last_part(name: str) -> str:
    return name.rpartition(".")[2]


def call_arguments(call) -> list:
    return [arg.value for arg in call.args if not arg.keyword and not arg.star]


def keyword_argument(call, keyword: str):
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    return None


def training_test(test) -> bool | None:
    """For a test on a module's ``training`` flag: False for ``x.training``, True for
    ``not x.training``; None for any other test."""
    negated = type(test) is cst.UnaryOperation and type(test.operator) is cst.Not
    flag = test.expression if negated else test
    if type(flag) is cst.Attribute and flag.attr.value == "training":
        return negated
    return None


def eval_side(expr):
    """The evaluation-mode operand of ``a if self.training else b`` (``b``), else None."""
    if type(expr) is not cst.IfExp:
        return None
    negated = training_test(expr.test)
    if negated is None:
        return None
    return expr.body if negated else expr.orelse


def is_inplace_method(name: str) -> bool:
    """``add_``, ``clamp_``, ``copy_``... (not dunders, not ``requires_grad_`` and the like)."""
    return name.endswith("_") and not name.startswith("_") and name not in NON_MUTATING_INPLACE_METHODS


def storage_base(node):
    """``w`` for ``w[0]``, ``w[i][j]``: what an item assignment writes into."""
    while type(node) is cst.Subscript:
        node = node.value
    return node


def is_view_subscript(node) -> bool:
    """Does ``x[...]`` certainly index with ints, slices, ``...`` and ``None`` only (a view),
    rather than a tensor or a list (advanced indexing makes a copy)?"""
    for element in node.slice:
        index = element.slice
        if type(index) is cst.Slice:
            continue
        value = index.value
        if type(value) is cst.UnaryOperation and type(value.operator) is cst.Minus:
            value = value.expression
        if type(value) is cst.Integer or type(value) is cst.Ellipsis or (type(value) is cst.Name and value.value == "None"):
            continue
        return False
    return True


def strip_views(expr, through_detach: bool = False):
    """The tensor whose storage ``expr`` views: ``w`` for ``w[0]``, ``w.view(-1)``,
    ``w.t()[1:]`` (and ``w.detach()``, which shares the version counter, with
    ``through_detach``); None when a copy may be in the way (``w[mask]``)."""
    while True:
        kind = type(expr)
        if kind is cst.Subscript:
            if not is_view_subscript(expr):
                return None
            expr = expr.value
        elif kind is cst.Call and type(expr.func) is cst.Attribute and (
            expr.func.attr.value in VIEW_METHODS or (through_detach and expr.func.attr.value == "detach")
        ):
            expr = expr.func.value
        else:
            return expr


# Methods returning a view of part of their receiver.
SELECTING_VIEW_METHODS = frozenset({"narrow", "select", "diagonal"})
# Methods and attributes returning a view (or an alias) of all of their receiver's storage.
WHOLE_VIEW_METHODS = frozenset({
    "view", "view_as", "unsqueeze", "squeeze", "transpose", "permute", "t", "unflatten", "movedim",
    "swapaxes", "expand", "expand_as", "detach", "numpy", "as_strided",
})


def selected_view(expr):
    """For a basic-index view of part of a tensor (``out[:, -1]``, ``x[0].detach()``,
    ``h.narrow(1, 0, 4)``, ``m.diagonal()``): ``(base, by_syntax)``, the expression whose storage
    it views and whether the syntax alone says it is a tensor (a multi-axis index, ``narrow`` /
    ``select`` / ``diagonal``; ``x[0]`` may index a list). None when the outermost operation
    copies (``.clone()``, ``.item()``, ``.cpu()``, advanced indexing, arithmetic) or when nothing
    narrower than the whole tensor is selected (``x[:]``, ``x.view(-1)``)."""
    selected = by_syntax = False
    while True:
        kind = type(expr)
        if kind is cst.Subscript:
            if not is_view_subscript(expr):
                # a copy (advanced indexing) or a container's item (batch["x"]): the base of
                # what was selected from it, or no view at all
                return (expr, by_syntax) if selected else None
            if _selects_part(expr):
                selected = True
                by_syntax = by_syntax or len(expr.slice) > 1
            expr = expr.value
        elif kind is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in SELECTING_VIEW_METHODS:
            selected = by_syntax = True
            expr = expr.func.value
        elif kind is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in WHOLE_VIEW_METHODS:
            expr = expr.func.value
        elif kind is cst.Attribute and expr.attr.value in ("data", "T", "mT"):
            expr = expr.value
        else:
            return (expr, by_syntax) if selected else None


def _selects_part(subscript) -> bool:
    """Does a basic index leave out part of the tensor: an integer, or a slice with a bound?"""
    for element in subscript.slice:
        index = element.slice
        if type(index) is cst.Slice:
            if index.lower is not None or index.upper is not None:
                return True
        elif not (type(index.value) is cst.Ellipsis or (type(index.value) is cst.Name and index.value.value == "None")):
            return True
    return False


def empties_container(stmt, key: str) -> bool:
    """Does the statement empty the container ``key`` in place (``xs.clear()``, ``del xs[:]``)?"""
    if type(stmt) is cst.Del:
        return any(storage_key(target.value) == key for target in _del_targets(stmt))
    if type(stmt) is cst.Expr and type(stmt.value) is cst.Call:
        func = stmt.value.func
        return type(func) is cst.Attribute and func.attr.value == "clear" and dotted_name(func.value) == key
    return False


def periodic_test(test) -> bool:
    """``step % 50 == 0``, ``(i + 1) % args.log_every == 0``, ``not step % n``: every N steps."""
    return any(type(node) is cst.BinaryOperation and type(node.operator) is cst.Modulo
               and type(node.left) not in (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)
               for node in iter_expression_nodes(test))


def strip_pass_through(expr):
    """``model`` for ``model.eval().to(device)``."""
    while type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in MODULE_PASS_THROUGH_METHODS:
        expr = expr.func.value
    return expr


def _requires_grad_flag(call, position: int | None, default: bool) -> bool | None:
    """The ``requires_grad`` argument of a call as a literal: True, False, None when unknown."""
    value = keyword_argument(call, "requires_grad")
    if value is None and position is not None:
        positional = call_arguments(call)
        value = positional[position] if len(positional) > position else None
    if value is None:
        return default
    if type(value) is cst.Name and value.value in ("True", "False"):
        return value.value == "True"
    return None


def _parameters_owner(iterable) -> str | None:
    """``model`` for ``model.parameters()`` / ``model.named_parameters()``."""
    if type(iterable) is cst.Call and type(iterable.func) is cst.Attribute and iterable.func.attr.value in (
        "parameters", "named_parameters"
    ):
        return dotted_name(iterable.func.value)
    return None


def _literal_grad_mode(expr) -> GradMode:
    if type(expr) is cst.Name and expr.value in ("True", "False"):
        return GradMode.ENABLED if expr.value == "True" else GradMode.DISABLED
    return GradMode.UNKNOWN


def _merge(first: GradMode, second: GradMode) -> GradMode:
    return first if first is second else GradMode.UNKNOWN


# Namespaces of tensor functions: `torch.cat(losses)` is computed from its arguments.
TENSOR_NAMESPACES = frozenset({"torch", "F", "nn.functional", "torch.nn.functional"})


def _tensor_operand_keys(expr) -> set[str]:
    """The names a backpropagated expression is computed from: ``loss`` in ``loss``,
    ``loss.mean()``, ``(loss / n)`` and ``scaler.scale(loss)`` (a wrapper's argument, not the
    wrapper)."""
    if type(expr) is cst.Call:
        func = expr.func
        if type(func) is cst.Attribute and func.attr.value not in DETACHING_METHODS:
            inner = _tensor_operand_keys(func.value)
            if func.attr.value == "scale" or not inner or dotted_name(func.value) in TENSOR_NAMESPACES:
                # scaler.scale(loss), torch.cat(losses), F.mse_loss(out, y): the arguments
                return set().union(*(_tensor_operand_keys(arg) for arg in call_arguments(expr)))
            return inner
        return set().union(*(_tensor_operand_keys(arg) for arg in call_arguments(expr))) if type(func) is cst.Name else set()
    if type(expr) in (cst.Name, cst.Attribute, cst.Subscript):
        key = storage_key(expr)
        return {key} if key else set()
    if type(expr) is cst.BinaryOperation:
        return _tensor_operand_keys(expr.left) | _tensor_operand_keys(expr.right)
    if type(expr) is cst.UnaryOperation:
        return _tensor_operand_keys(expr.expression)
    return set()


def _call_chain(expr) -> list:
    """The calls along a method chain: ``a.b(1).c_()`` gives ``c_(...)`` and ``b(1)``; both
    branches of a conditional expression are followed."""
    calls = []
    while expr is not None:
        kind = type(expr)
        if kind is cst.IfExp:
            calls.extend(_call_chain(expr.body))
            expr = expr.orelse
        elif kind is cst.Call:
            calls.append(expr)
            expr = expr.func
        elif kind in (cst.Attribute, cst.Subscript):
            expr = expr.value
        else:
            break
    return calls


def _del_targets(stmt) -> list:
    target = stmt.target
    if type(target) in (cst.Tuple, cst.List):
        return [element for element in target.elements]
    return [cst.Element(value=target)]


def _is_batch_stride(expr) -> bool:
    """``range(start, stop, batch_size)``: a loop over batches sliced by hand."""
    return (
        type(expr) is cst.Call and type(expr.func) is cst.Name and expr.func.value == "range"
        and len(expr.args) == 3 and _names_match(_BATCH_RE, expr.args[2].value)
    )


def _names_match(pattern: re.Pattern, expr) -> bool:
    """Does a name or attribute part the expression mentions match (``self._batch_size``)?"""
    return any(pattern.search(part) for key in mentioned_keys(expr) for part in key.split("."))


def call_name(call) -> str | None:
    """``step`` for ``opt.step()``, ``print`` for ``print()``; None for other callees."""
    func = call.func
    if type(func) is cst.Attribute:
        return func.attr.value
    if type(func) is cst.Name:
        return func.value
    return None


_COMPREHENSIONS = frozenset({"GeneratorExp", "ListComp", "SetComp", "DictComp"})


def mentioned_keys(expr, skip_detached: bool = False) -> set[str]:
    """Names and dotted attributes an expression reads. With ``skip_detached``, what sits under
    ``.item()`` / ``.detach()`` / ``float()`` ... is left out: it carries no graph."""
    found: set[str] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.Name:
            found.add(node.value)
            continue
        if kind is cst.Attribute:
            key = dotted_name(node)
            if key is not None:
                found.add(key)
                found.add(key.partition(".")[0])
                continue
        if skip_detached and kind is cst.Call:
            func = node.func
            if type(func) is cst.Attribute and (func.attr.value in DETACHING_METHODS
                                                or func.attr.value in NON_DIFFERENTIABLE_METHODS):
                continue  # out.item(), out.argmax(1): no graph comes out
            if type(func) is cst.Name and func.value in ("float", "int", "bool", "str", "len"):
                continue
        if skip_detached and kind.__name__ in _COMPREHENSIONS:
            found |= _comprehension_keys(node)
            continue
        if kind is cst.Lambda:
            continue
        stack.extend(child_nodes(node))
    return found


def _comprehension_keys(node) -> set[str]:
    """What a comprehension's value carries, for ``mentioned_keys(..., skip_detached=True)``:
    its element's (a dict's value's) names, and its iterables' only when the element uses the
    loop targets undetached. ``sum(x.item() for x in losses)`` is a number made from ``losses``, not
    ``losses``; ``sum(x for x in losses)`` carries them. Conditions carry nothing."""
    element = node.value if type(node).__name__ == "DictComp" else node.elt  # a dict's keys are labels
    carried = mentioned_keys(element, skip_detached=True)
    targets: set[str] = set()
    iterables: set[str] = set()
    clause = node.for_in
    while clause is not None:
        targets |= mentioned_keys(clause.target)
        iterables |= mentioned_keys(clause.iter, skip_detached=True)
        clause = clause.inner_for_in
    if carried & targets:
        carried |= iterables
    return carried - targets


def _is_grad_attribute(node) -> bool:
    """``p.grad`` (an assignment or ``del`` target that resets a gradient)."""
    return type(node) is cst.Attribute and node.attr.value == "grad"


def _is_grad_chain(node) -> bool:
    """``p.grad``, ``p.grad.data``, ``p.grad[mask]``: an expression reading a ``.grad`` tensor."""
    while type(node) in (cst.Attribute, cst.Subscript):
        if type(node) is cst.Attribute and node.attr.value == "grad":
            return True
        node = node.value
    return False


@functools.lru_cache(maxsize=256)  # asked per function by several rules, about one path
def is_test_file(path: str) -> bool:
    """A pytest test module or a file in a tests directory."""
    parts = re.split(r"[\\/]", path)
    filename = parts[-1]
    return (
        any(part in ("tests", "test") for part in parts[:-1])
        or filename.startswith("test_") or filename.endswith("_test.py") or filename == "conftest.py"
    )


def empty_container(value) -> bool:
    """``[]``, ``{}``, ``list()``, ``dict()``, ``defaultdict(list)``: a container filled later."""
    kind = type(value)
    if kind in (cst.List, cst.Dict):
        return not value.elements
    if kind is cst.Call and type(value.func) is cst.Name:
        return value.func.value in ("list", "dict", "defaultdict", "OrderedDict") and (
            not value.args or value.func.value == "defaultdict")
    return False


def key_node(key: str):
    """A Name / Attribute expression for a dotted key (``net.head``), to ask the analysis about
    it; None when a part is not an identifier."""
    parts = key.split(".")
    if not all(part.isidentifier() for part in parts):
        return None
    node = cst.Name(parts[0])
    for part in parts[1:]:
        node = cst.Attribute(value=node, attr=cst.Name(part))
    return node


def parameter_node(binding):
    """The ``cst.Param`` a parameter binding binds (positional, positional-only or keyword-only),
    or None."""
    params = getattr(binding.stmt, "params", None)
    if params is None:
        return None
    return next((param for param in (*params.posonly_params, *params.params, *params.kwonly_params)
                 if param.name.value == binding.key), None)
