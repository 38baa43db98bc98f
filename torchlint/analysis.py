"""The shared analysis of one module, built in a single walk over its statements.

Rules ask, the analysis answers. The walk records every statement with its context (scope, the
loops around it, grad mode, whether it runs conditionally inside its loop) and every name binding.
Everything costlier than that (is this expression still attached to the autograd graph? is this
container returned? does this loop backpropagate?) is computed lazily, only when a rule asks,
and memoised. Expressions are only looked into on demand: a walk over every node would cost as
much as the parse itself.
"""

from __future__ import annotations

import enum
import re
from collections import defaultdict
from collections.abc import Iterator

from torchlint.lazy import cst


class GradMode(enum.Enum):
    ENABLED = "enabled"
    DISABLED = "disabled"  # no_grad, inference_mode, set_grad_enabled(False), Lightning eval hooks
    UNKNOWN = "unknown"  # set_grad_enabled(<expression>): rules stay quiet


# Substrings a file must contain for any value in it to count as graph-attached. Rules whose
# findings need an attached value use these as their prefilter tokens.
ATTACHMENT_TOKENS = (
    "torch", "nn.", "F.", "backward", "Module", "Model", "Net", "Loss", "Encoder", "Decoder",
    "Classifier",
    "model", "net", "criterion", "loss", "classifier", "encoder", "decoder", "generator",
    "discriminator", "backbone", "critic", "actor", "head", "teacher", "student",
)

# Names that conventionally hold a module or a loss function: calling them is a forward pass.
# The first group also counts as a suffix (text_encoder, ema_model, q_net); the second only as
# the whole name (a `data_generator()` is a Python generator, not a GAN's).
CONVENTIONAL_MODULE_RE = re.compile(
    r"^(?!_*(?:get|build|create|load|make|init|initialize|save|setup|set|prepare|wrap|unwrap|"
    r"train|eval|evaluate|compile|export|freeze|unfreeze|copy|update|convert|print|log|register|"
    r"replace|patch|resolve|fetch|download|reset|is|has|to|from|apply|check|find|select|"
    r"construct|instantiate|default|profile|infer|run|test|benchmark|count|wrapped)_)"
    r"_*(?:[a-z0-9]+_)*(?:model|net|network|criterion|loss_fn|loss_func|loss_function|lossfn|"
    r"classifier|encoder|decoder|backbone)$"
    r"|^_*(?:generator|discriminator|critic|actor|head|teacher|student|policy_net)$|^net[A-Z]\w*$"
)
# Imported (not locally defined) classes whose name says they build a module.
MODULE_CLASS_RE = re.compile(r"(?:Model|Net|Network|Module|Loss|Encoder|Decoder|Classifier)$")
LIGHTNING_NO_GRAD_HOOKS = frozenset({"validation_step", "test_step", "predict_step"})

DETACHING_METHODS = frozenset({"item", "tolist", "detach", "detach_", "numpy", "__len__"})
NON_DIFFERENTIABLE_METHODS = frozenset({
    "argmax", "argmin", "argsort", "eq", "ne", "lt", "le", "gt", "ge", "long", "int", "bool",
    "byte", "char", "short", "nonzero", "size", "dim", "numel", "element_size", "isnan",
    "isinf", "isfinite", "all", "any", "equal", "data_ptr", "stride", "is_contiguous",
    "get_device", "count_nonzero", "unique", "keys", "nelement", "ndimension", "type",
})
NON_GRAPH_ATTRIBUTES = frozenset({
    "shape", "dtype", "device", "data", "grad", "requires_grad", "ndim", "is_cuda", "is_leaf",
    "grad_fn", "layout", "names", "itemsize", "nbytes",
})
TORCH_NON_DIFFERENTIABLE = frozenset({
    "argmax", "argmin", "argsort", "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf",
    "isfinite", "numel", "is_tensor", "equal", "allclose", "isclose", "unique", "bucketize",
    "searchsorted", "count_nonzero", "nonzero", "tensor", "from_numpy", "zeros", "ones", "empty",
    "full", "rand", "randn", "randint", "randperm", "arange", "linspace", "logspace", "eye",
    "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
    "randint_like", "no_grad", "inference_mode", "enable_grad", "set_grad_enabled", "device",
    "manual_seed", "is_grad_enabled", "save", "load",
})
# torch functions returning (values, indices): the indices carry no graph.
TORCH_VALUES_INDICES = frozenset({"max", "min", "sort", "topk", "kthvalue", "mode", "median"})
PASS_THROUGH_BUILTINS = frozenset({"sum", "max", "min", "abs", "list", "tuple", "sorted", "reversed", "dict"})
LOSS_FUNCTIONAL_RE = re.compile(r"(?:_loss|cross_entropy|kl_div|nll_loss|binary_cross_entropy\w*|_embedding)$")
MODULE_PASS_THROUGH_METHODS = frozenset({
    "to", "cuda", "cpu", "eval", "train", "half", "float", "double", "bfloat16",
    "requires_grad_", "to_empty", "share_memory",
})
BACKWARD_FUNCTIONS = frozenset({"backward", "manual_backward"})
# A loop goes over batches or steps when what it binds (or a while loop's test) is named like
# one (``for batch in ...``, ``for step in ...``, ``while step < ...``) or what it iterates is a
# loader or a collection of them (``for x, y in train_loader``, ``range(num_steps)``). Iterating
# *a* batch (``for key in batch``) goes over its items.
STEP_TARGET_RE = re.compile(r"batch|step|iteration|(?:^|_)iters?(?:$|_)", re.I)
STEP_SOURCE_RE = re.compile(r"loader|batches|steps|iterations|(?:^|_)iters(?:$|_)", re.I)
CONTAINER_WRITES = frozenset({"append", "extend", "insert", "appendleft", "add", "update", "setdefault"})
# Tensor methods named like in-place ops that change no values (or only metadata autograd allows).
NON_MUTATING_INPLACE_METHODS = frozenset({"requires_grad_", "share_memory_", "detach_", "rename_"})
# Methods returning a view of their receiver: an in-place op on the view changes the base.
VIEW_METHODS = frozenset({
    "view", "view_as", "unsqueeze", "squeeze", "transpose", "permute", "t", "narrow", "select",
    "unflatten", "diagonal", "movedim", "swapaxes",
})
PARAMETER_CLASSES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
# torch.nn layers that own `weight` / `bias` parameters.
PARAMETERISED_LAYERS = frozenset({
    "Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
    "ConvTranspose3d", "Embedding", "EmbeddingBag", "LayerNorm", "GroupNorm", "RMSNorm",
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "PReLU",
})

# Optimizers are recognised by name (`optimizer`, `opt_d`, `optimizerG`, `self.actor.optimizer`)
# or by what they are built from; these words make an optimizer-ish name something else.
OPTIMIZER_WORDS = frozenset({"optimizer", "optimiser", "optim", "opt"})
OPTIMIZER_PLURAL_WORDS = frozenset({"optimizers", "optimisers", "optims", "opts"})
NOT_OPTIMIZER_WORDS = frozenset({
    "sched", "scheduler", "schedulers", "lr", "warmup", "config", "cfg", "cls", "class", "kwargs",
    "args", "state", "step", "steps", "closure", "hook", "hooks", "fn", "func", "builder",
    "factory", "name", "level", "type", "idx", "index",
})
OPTIMIZER_CLASSES = frozenset({
    "SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "ASGD", "LBFGS", "NAdam", "RAdam",
    "RMSprop", "Rprop", "SparseAdam", "Adafactor", "Lion", "Lamb", "LAMB", "LARS", "Muon",
    "Adan", "AdaBelief", "Shampoo", "SophiaG", "Lookahead", "FusedAdam", "FusedLAMB",
})
OPTIMIZER_CLASS_RE = re.compile(r"(?:Optimizer|Optimiser)$")
# Calls that clear gradients by their name: zero_grad(), zero_grads(model), clear_grad(),
# optimizer_zero_grad(...), reset_grads(), set_grads_to_none(...)
CLEARING_CALL_RE = re.compile(
    r"(?:zero|clear|reset|null|none)_?(?:all_|the_)?grad|grads?_(?:to_)?(?:zero|none|clear|reset)", re.I
)
# In-place methods that overwrite a `.grad` tensor: `p.grad.zero_()`, `p.grad.copy_(g)`
GRAD_OVERWRITING_METHODS = frozenset({"zero_", "fill_", "copy_"})
_WORD_RE = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


def name_words(name: str) -> list[str]:
    """``optimizerG`` -> [optimizer, g]; ``d_opt2`` -> [d, opt]; ``ZeroRedundancyOptimizer`` -> [...]"""
    return [word.lower() for word in _WORD_RE.findall(name)]


def looks_like_optimizer(name: str, plural: bool = False) -> bool:
    """Is a (last) name part named like an optimizer: ``optimizer``, ``opt_g``, ``optimizerD``,
    ``actor_optimizer``, ``opt1`` (``optimizers`` / ``opts`` too with ``plural``)?"""
    words = name_words(name)
    accepted = OPTIMIZER_WORDS | OPTIMIZER_PLURAL_WORDS if plural else OPTIMIZER_WORDS
    return any(word in accepted for word in words) and not any(word in NOT_OPTIMIZER_WORDS for word in words)

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
            if name not in _NEUTRAL_FIELDS and not name.startswith("whitespace")
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


def dotted_name(node) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
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


def last_part(name: str) -> str:
    return name.rpartition(".")[2]


def call_arguments(call) -> list:
    return [arg.value for arg in call.args if not arg.keyword and not arg.star]


def keyword_argument(call, keyword: str):
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    return None


class Scope:
    """A module, class or function body."""

    __slots__ = ("node", "kind", "parent", "class_scope", "grad", "bindings", "stores", "statements", "name", "_memo")

    def __init__(self, node, kind: str, parent: Scope | None, class_scope: Scope | None, grad: GradMode) -> None:
        self.node = node
        self.kind = kind  # "module", "class" or "function"
        self.parent = parent
        self.class_scope = class_scope
        self.grad = grad
        self.bindings: dict[str, list[Binding]] = defaultdict(list)
        # values written into a container without rebinding it: xs[i] = v, xs.append(v)
        self.stores: dict[str, list] = defaultdict(list)
        self.statements: list[tuple[object, Context]] = []
        self.name = node.name.value if kind != "module" else "<module>"
        self._memo: dict = {}


class Loop:
    """A for or while statement; ``start``/``end`` bound the orders of the statements inside."""

    __slots__ = ("node", "scope", "start", "end", "_memo")

    def __init__(self, node, scope: Scope, start: int) -> None:
        self.node = node
        self.scope = scope
        self.start = start
        self.end = start
        self._memo: dict = {}

    def contains(self, order: int) -> bool:
        return self.start < order <= self.end


class Context:
    """Where a statement sits. ``guard`` is the innermost conditional (if / except / case)
    between the statement and its innermost loop: None means it runs on every iteration."""

    __slots__ = ("scope", "loops", "grad", "guard", "order", "in_finally")

    def __init__(self, scope: Scope, loops: tuple[Loop, ...], grad: GradMode, guard, order: int,
                 in_finally: bool = False) -> None:
        self.scope = scope
        self.loops = loops
        self.grad = grad
        self.guard = guard
        self.order = order
        self.in_finally = in_finally

    @property
    def loop(self) -> Loop | None:
        return self.loops[-1] if self.loops else None


class Binding:
    """``key`` (a name or dotted attribute such as ``self.hidden``) bound by a statement.

    ``element`` is the index path inside an unpacking target: ``out, (h, c) = ...`` binds ``c``
    with element (1, 1)."""

    __slots__ = ("key", "kind", "value", "element", "stmt", "ctx")

    def __init__(self, key: str, kind: str, value, element: tuple[int, ...], stmt, ctx: Context) -> None:
        self.key = key
        self.kind = kind  # assign, augassign, for, with, param, import, def, class
        self.value = value
        self.element = element
        self.stmt = stmt
        self.ctx = ctx

    @property
    def order(self) -> int:
        return self.ctx.order


class Analysis:
    def __init__(self, module, path: str = "<unknown>", source: str | None = None) -> None:
        self.module = module
        self.path = path
        # The file's text, when the caller has it: a substring test answers "can this module
        # contain X at all?" far faster than walking its expressions.
        self.source = source
        self.imports: dict[str, str] = {}
        self.statements_by_type: dict[str, list[tuple[object, Context]]] = defaultdict(list)
        self.scopes: dict[int, Scope] = {}  # id(FunctionDef/ClassDef) -> Scope
        self.loops: dict[int, Loop] = {}  # id(For/While) -> Loop
        self.local_classes: dict[str, object] = {}
        self._order = 0
        self._attached_memo: dict[int, bool] = {}
        self._module_memo: dict[int, bool] = {}
        self._callers_memo: dict[tuple[str, bool], bool] = {}
        self._calls_memo: dict[int, list] = {}
        self._grad_leaf_memo: dict[int, bool] = {}
        self._switches: dict | None = None
        self._sequences_memo: dict[int, dict] = {}
        self._branch_parents: dict[int, tuple[list, list, int]] = {}
        self.module_scope = Scope(module, "module", None, None, GradMode.ENABLED)
        self._collect_top_level_imports(module.body)
        self._walk_block(module.body, self.module_scope, (), GradMode.ENABLED, None, False)

    # ------------------------------------------------------------------ rules

    def run(self, rule) -> None:
        """Call the rule's ``visit_<StatementType>(node, ctx)`` methods on every statement."""
        for attribute in dir(type(rule)):
            if attribute.startswith("visit_"):
                handler = getattr(rule, attribute)
                for node, ctx in self.statements_by_type.get(attribute[6:], ()):
                    handler(node, ctx)

    def may_contain(self, text: str) -> bool:
        """False only when the module's source certainly does not contain ``text``."""
        return self.source is None or text in self.source

    def code(self, node, limit: int = 80) -> str:
        text = " ".join(self.module.code_for_node(node).split())
        return text if len(text) <= limit else text[: limit - 1] + "…"

    # ------------------------------------------------------------------ the walk

    def _collect_top_level_imports(self, statements) -> None:
        for stmt in statements:
            if type(stmt) is cst.SimpleStatementLine:
                for small in stmt.body:
                    if type(small) in (cst.Import, cst.ImportFrom):
                        self._record_import(small)
            elif type(stmt) in (cst.If, cst.Try):
                self._collect_top_level_imports(stmt.body.body)
                for handler in getattr(stmt, "handlers", ()):
                    self._collect_top_level_imports(handler.body.body)
                orelse = stmt.orelse
                while orelse is not None:
                    self._collect_top_level_imports(orelse.body.body)
                    orelse = getattr(orelse, "orelse", None)

    def _record_import(self, node) -> list[str]:
        bound = []
        if type(node) is cst.Import:
            for alias in node.names:
                full = dotted_name(alias.name)
                if full is None:
                    continue
                if alias.asname is not None:
                    local = dotted_name(alias.asname.name)
                    if local:
                        self.imports[local] = full
                        bound.append(local)
                else:
                    root = full.partition(".")[0]
                    self.imports[root] = root
                    bound.append(root)
            return bound
        if isinstance(node.names, cst.ImportStar):
            return bound
        base = dotted_name(node.module) if node.module is not None else ""
        prefix = "." * len(node.relative) + (base or "")
        for alias in node.names:
            name = dotted_name(alias.name)
            if name is None:
                continue
            local = dotted_name(alias.asname.name) if alias.asname is not None else name
            if local:
                self.imports[local] = f"{prefix}.{name}" if prefix and not prefix.endswith(".") else prefix + name
                bound.append(local)
        return bound

    def _context(self, stmt, scope: Scope, loops, grad, guard, in_finally) -> Context:
        self._order += 1
        ctx = Context(scope, loops, grad, guard, self._order, in_finally)
        self.statements_by_type[type(stmt).__name__].append((stmt, ctx))
        scope.statements.append((stmt, ctx))
        return ctx

    def _walk_block(self, statements, scope, loops, grad, guard, in_finally) -> GradMode:
        """Walk a statement list; returns the grad mode in force after it (the statement form
        ``torch.set_grad_enabled(False)`` changes it for the statements that follow)."""
        for stmt in statements:
            kind = type(stmt)
            if kind is cst.SimpleStatementLine:
                for small in stmt.body:
                    grad = self._small_statement(small, scope, loops, grad, guard, in_finally)
            else:
                grad = self._compound_statement(stmt, scope, loops, grad, guard, in_finally)
        return grad

    def _walk_suite(self, suite, scope, loops, grad, guard, in_finally) -> GradMode:
        if type(suite) is cst.SimpleStatementSuite:
            for small in suite.body:
                grad = self._small_statement(small, scope, loops, grad, guard, in_finally)
            return grad
        return self._walk_block(suite.body, scope, loops, grad, guard, in_finally)

    def _small_statement(self, stmt, scope, loops, grad, guard, in_finally) -> GradMode:
        ctx = self._context(stmt, scope, loops, grad, guard, in_finally)
        kind = type(stmt)
        if kind is cst.Assign:
            for target in stmt.targets:
                if type(target.target) is cst.Subscript:
                    key = storage_key(target.target)
                    if key is not None:
                        scope.stores[key].append(stmt.value)
                else:
                    self._bind_target(target.target, "assign", stmt.value, (), stmt, ctx)
        elif kind is cst.AnnAssign:
            if stmt.value is not None:
                self._bind_target(stmt.target, "assign", stmt.value, (), stmt, ctx)
        elif kind is cst.AugAssign:
            self._bind_target(stmt.target, "augassign", stmt, (), stmt, ctx)
        elif kind is cst.Expr:
            call = stmt.value
            if type(call) is cst.Call:
                func = call.func
                if type(func) is cst.Attribute and func.attr.value in CONTAINER_WRITES and call.args:
                    key = storage_key(func.value)
                    if key is not None:
                        scope.stores[key].extend(arg.value for arg in call.args)
                return self._statement_grad_switch(call, grad)
        elif kind in (cst.Import, cst.ImportFrom):
            for local in self._record_import(stmt):
                self._bind(local, "import", None, (), stmt, ctx)
        return grad

    def _statement_grad_switch(self, call, grad: GradMode) -> GradMode:
        """``torch.set_grad_enabled(False)`` as a statement switches grad mode from here on."""
        name = self.qualified_name(call.func)
        if name != "torch.set_grad_enabled" or not call.args:
            return grad
        return _literal_grad_mode(call.args[0].value)

    def _compound_statement(self, stmt, scope, loops, grad, guard, in_finally) -> GradMode:
        kind = type(stmt)
        if kind is cst.FunctionDef:
            self._function(stmt, scope, loops, grad, guard, in_finally)
        elif kind is cst.ClassDef:
            ctx = self._context(stmt, scope, loops, grad, guard, in_finally)
            self._bind(stmt.name.value, "class", stmt, (), stmt, ctx)
            if scope.kind == "module":
                self.local_classes[stmt.name.value] = stmt
            class_scope = Scope(stmt, "class", scope, None, grad)
            self.scopes[id(stmt)] = class_scope
            self._walk_suite(stmt.body, class_scope, (), grad, None, False)
        elif kind in (cst.For, cst.While):
            ctx = self._context(stmt, scope, loops, grad, guard, in_finally)
            if kind is cst.For:
                self._bind_target(stmt.target, "for", stmt.iter, (), stmt, ctx)
            loop = Loop(stmt, scope, ctx.order)
            self.loops[id(stmt)] = loop
            after = self._walk_suite(stmt.body, scope, loops + (loop,), grad, None, False)
            loop.end = self._order
            if stmt.orelse is not None:
                after = self._walk_suite(stmt.orelse.body, scope, loops, after, stmt.orelse, in_finally)
            return _merge(grad, after)
        elif kind is cst.If:
            self._context(stmt, scope, loops, grad, guard, in_finally)
            after = self._walk_suite(stmt.body, scope, loops, grad, stmt, in_finally)
            orelse, other = stmt.orelse, grad
            if type(orelse) is cst.If:
                other = self._compound_statement(orelse, scope, loops, grad, stmt, in_finally)
            elif orelse is not None:
                other = self._walk_suite(orelse.body, scope, loops, grad, stmt, in_finally)
            return _merge(after, other)
        elif kind is cst.With:
            ctx = self._context(stmt, scope, loops, grad, guard, in_finally)
            inner = grad
            for item in stmt.items:
                inner = self._with_item_grad(item.item, inner)
                if item.asname is not None:
                    self._bind_target(item.asname.name, "with", item.item, (), stmt, ctx)
            self._walk_suite(stmt.body, scope, loops, inner, guard, in_finally)
        elif kind in (cst.Try, cst.TryStar):
            self._context(stmt, scope, loops, grad, guard, in_finally)
            after = self._walk_suite(stmt.body, scope, loops, grad, guard, in_finally)
            for handler in stmt.handlers:
                handler_ctx = self._context(handler, scope, loops, grad, handler, in_finally)
                if handler.name is not None:
                    self._bind_target(handler.name.name, "except", None, (), handler, handler_ctx)
                self._walk_suite(handler.body, scope, loops, grad, handler, in_finally)
            if stmt.orelse is not None:
                after = self._walk_suite(stmt.orelse.body, scope, loops, after, guard, in_finally)
            if stmt.finalbody is not None:
                after = self._walk_suite(stmt.finalbody.body, scope, loops, after, guard, True)
            return _merge(grad, after)
        elif kind is cst.Match:
            self._context(stmt, scope, loops, grad, guard, in_finally)
            for case in stmt.cases:
                self._walk_suite(case.body, scope, loops, grad, case, in_finally)
        else:  # statements a newer libcst adds: record them, walk nothing
            self._context(stmt, scope, loops, grad, guard, in_finally)
        return grad

    def _function(self, node, scope, loops, grad, guard, in_finally) -> None:
        ctx = self._context(node, scope, loops, grad, guard, in_finally)
        self._bind(node.name.value, "def", node, (), node, ctx)
        class_scope = scope if scope.kind == "class" else scope.class_scope
        body_grad = GradMode.ENABLED
        if scope.kind == "class" and node.name.value in LIGHTNING_NO_GRAD_HOOKS:
            body_grad = GradMode.DISABLED  # Lightning runs these hooks under no_grad
        for decorator in node.decorators:
            body_grad = self._with_item_grad(decorator.decorator, body_grad)
        function_scope = Scope(node, "function", scope, class_scope, body_grad)
        self.scopes[id(node)] = function_scope
        params = node.params
        param_ctx = Context(function_scope, (), body_grad, None, ctx.order)
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            self._bind(param.name.value, "param", None, (), node, param_ctx)
        for param in (params.star_arg, params.star_kwarg):
            if isinstance(param, cst.Param):
                self._bind(param.name.value, "param", None, (), node, param_ctx)
        self._walk_suite(node.body, function_scope, (), body_grad, None, False)

    def _with_item_grad(self, expr, grad: GradMode) -> GradMode:
        """Grad mode inside ``with expr:`` (or under decorator ``@expr``)."""
        call = expr if type(expr) is cst.Call else None
        target = call.func if call is not None else expr
        name = self.qualified_name(target) or dotted_name(target) or ""
        tail = last_part(name)
        if name == "torch.set_grad_enabled" and call is not None and call.args:
            return _literal_grad_mode(call.args[0].value)
        if name == "torch.inference_mode" and call is not None and call.args:
            mode = _literal_grad_mode(call.args[0].value)  # inference_mode(False) keeps autograd on
            return {GradMode.ENABLED: GradMode.DISABLED, GradMode.DISABLED: grad}.get(mode, GradMode.UNKNOWN)
        if tail.endswith("no_grad") or tail.endswith("inference_mode"):
            return GradMode.DISABLED
        if name == "torch.enable_grad":
            return GradMode.ENABLED
        return grad

    def _bind_target(self, target, kind, value, element, stmt, ctx) -> None:
        target_type = type(target)
        if target_type in (cst.Tuple, cst.List):
            for index, item in enumerate(target.elements):
                inner = item.value
                if type(item) is cst.StarredElement:
                    self._bind_target(inner, kind, value, element + (-1,), stmt, ctx)
                else:
                    self._bind_target(inner, kind, value, element + (index,), stmt, ctx)
            return
        if target_type is cst.StarredElement:
            self._bind_target(target.value, kind, value, element + (-1,), stmt, ctx)
            return
        key = dotted_name(target)
        if key is not None:
            self._bind(key, kind, value, element, stmt, ctx)

    def _bind(self, key, kind, value, element, stmt, ctx: Context) -> None:
        binding = Binding(key, kind, value, element, stmt, ctx)
        ctx.scope.bindings[key].append(binding)
        if key.startswith("self.") and ctx.scope.class_scope is not None:
            ctx.scope.class_scope.bindings[key].append(binding)

    # ------------------------------------------------------------------ names

    def qualified_name(self, node) -> str | None:
        """``torch.nn.functional.relu`` for ``F.relu`` (after ``import torch.nn.functional as F``).

        Unimported ``torch`` / ``nn`` / ``F`` prefixes are taken at their conventional meaning."""
        name = dotted_name(node)
        if name is None:
            return None
        root, _, rest = name.partition(".")
        resolved = self.imports.get(root) or _CONVENTIONAL_ROOTS.get(root)
        if resolved is None:
            return None
        return f"{resolved}.{rest}" if rest else resolved

    def lookup(self, key: str, ctx: Context) -> Binding | None:
        """The binding of ``key`` in force at ``ctx``: the latest earlier one in the statement's own
        scope, else the latest anywhere in the class (for ``self.x``), enclosing functions or module."""
        scope = ctx.scope
        latest = None
        for binding in scope.bindings.get(key, ()):
            if binding.ctx.order < ctx.order:
                latest = binding
            else:
                break
        if latest is not None:
            return latest
        if key.startswith("self.") and scope.class_scope is not None:
            found = scope.class_scope.bindings.get(key)
            if found:
                return found[-1]
        outer = scope.parent
        while outer is not None:
            if outer.kind != "class":
                found = outer.bindings.get(key)
                if found:
                    return found[-1]
            outer = outer.parent
        return None

    def bindings_in(self, key: str, scope: Scope) -> list[Binding]:
        return scope.bindings.get(key, [])

    # ------------------------------------------------------------------ grad mode

    def grad_enabled(self, ctx: Context) -> bool:
        """Autograd records at ``ctx``: not under no_grad, and the function is not one that every
        caller in this module calls with grad disabled."""
        if ctx.grad is not GradMode.ENABLED:
            return False
        scope = ctx.scope
        return not (scope.kind == "function" and self.all_calls_grad_disabled(scope))

    def all_calls_grad_disabled(self, scope: Scope) -> bool:
        """True when the function has callers in this module and every one of them runs with
        grad disabled (e.g. ``evaluate()`` only ever called inside ``with torch.no_grad():``)."""
        name = scope.name
        is_method = scope.parent is not None and scope.parent.kind == "class"
        memo_key = (name, is_method)
        if memo_key in self._callers_memo:
            return self._callers_memo[memo_key]
        self._callers_memo[memo_key] = False  # recursion guard
        if self.source is not None and self.source.count(f"{name}(") <= self.source.count(f"def {name}("):
            return False  # its name is never followed by "(" but in its definitions: no caller here
        found = False
        disabled = True
        for stmt_list in self.statements_by_type.values():
            for stmt, ctx in stmt_list:
                for call in self.calls_in(stmt):
                    func = call.func
                    if is_method:
                        hit = type(func) is cst.Attribute and func.attr.value == name
                    else:
                        hit = type(func) is cst.Name and func.value == name
                    if not hit:
                        continue
                    if ctx.scope is scope:  # recursion (or super().__init__()) says nothing about callers
                        continue
                    found = True
                    if ctx.grad is GradMode.ENABLED and not (
                        ctx.scope.kind == "function" and self.all_calls_grad_disabled(ctx.scope)
                    ):
                        disabled = False
        result = found and disabled
        self._callers_memo[memo_key] = result
        return result

    # ------------------------------------------------------------------ expressions

    def own_expressions(self, stmt) -> list:
        """The expressions that belong to a statement itself, not to the blocks it contains."""
        kind = type(stmt)
        if kind is cst.For:
            return [stmt.target, stmt.iter]
        if kind in (cst.While, cst.If):
            return [stmt.test]
        if kind is cst.With:
            return [item for item in stmt.items]
        if kind is cst.FunctionDef:
            return [*stmt.decorators, stmt.params]
        if kind is cst.ClassDef:
            return [*stmt.decorators, *stmt.bases, *stmt.keywords]
        if kind is cst.Match:
            return [stmt.subject]
        if kind is cst.ExceptHandler:
            return [stmt.type] if stmt.type is not None else []
        if kind in (cst.Try, cst.TryStar):
            return []
        return [stmt]

    def calls_in(self, stmt) -> list:
        """Every call in a statement's own expressions (memoised per statement)."""
        cached = self._calls_memo.get(id(stmt))
        if cached is None:
            cached = [
                node
                for expr in self.own_expressions(stmt)
                for node in iter_expression_nodes(expr)
                if type(node) is cst.Call
            ]
            self._calls_memo[id(stmt)] = cached
        return cached

    def statements_in_loop(self, loop: Loop) -> Iterator[tuple[object, Context]]:
        """Statements of the loop's body (nested loops included, nested functions excluded)."""
        for stmt, ctx in loop.scope.statements:
            if ctx.order > loop.end:
                break
            if ctx.order > loop.start:
                yield stmt, ctx

    def loop_calls(self, loop: Loop, method: str) -> bool:
        """Does any statement in the loop call something named ``method`` (``x.method()`` or
        ``method(...)``/``obj.method(...)``)? Memoised per loop."""
        key = ("calls", method)
        if key not in loop._memo:
            loop._memo[key] = any(
                call_name(call) == method
                for stmt, _ in self.statements_in_loop(loop)
                for call in self.calls_in(stmt)
            )
        return loop._memo[key]

    def resets_in_loop(self, key: str, loop: Loop) -> list[Binding]:
        """Bindings inside the loop's body that give ``key`` a fresh value (``xs = []``), as
        opposed to extending the old one (``xs += [v]``, ``total = total + loss``)."""
        return [
            binding for binding in loop.scope.bindings.get(key, ())
            if loop.contains(binding.ctx.order) and binding.kind != "augassign"
            and not (binding.kind == "assign" and key in mentioned_keys(binding.value))
        ]

    def cleared_in_loop(self, key: str, loop: Loop) -> bool:
        """Is the container emptied inside the loop (``xs.clear()``, ``del xs[:]``)?"""
        for stmt, _ in self.statements_in_loop(loop):
            if type(stmt) is cst.Del and any(
                storage_key(target.value) == key for target in _del_targets(stmt)
            ):
                return True
            if type(stmt) is cst.Expr and type(stmt.value) is cst.Call:
                func = stmt.value.func
                if type(func) is cst.Attribute and func.attr.value == "clear" and dotted_name(func.value) == key:
                    return True
        return False

    def loop_backpropagates(self, loop: Loop) -> bool:
        return any(self.loop_calls(loop, name) for name in BACKWARD_FUNCTIONS)

    def runs_every_iteration(self, ctx: Context) -> bool:
        """Does the statement run on every iteration of its innermost loop? Not under an ``if`` /
        ``except`` / ``case`` inside that loop (a ``try:`` body, a ``with`` block and a ``finally:``
        run every time; a guard in an outer loop does not guard the inner one), and the loop
        really repeats (see ``loop_runs_once``)."""
        loop = ctx.loop
        return loop is not None and ctx.guard is None and not self.loop_runs_once(loop)

    def loop_runs_once(self, loop: Loop) -> bool:
        """Does an unconditional ``break`` / ``return`` / ``raise`` end the loop's first iteration?
        A one-shot loop, or a retry loop whose ``try:`` body breaks out on success: its body
        runs again only after a failure."""
        if "once" not in loop._memo:
            loop._memo["once"] = any(
                type(stmt) in (cst.Break, cst.Return, cst.Raise) and ctx.loop is loop and ctx.guard is None
                for stmt, ctx in self.statements_in_loop(loop)
            )
        return loop._memo["once"]

    def runs_every_step(self, ctx: Context) -> bool:
        """Does the statement run on every iteration of a loop that makes training / inference
        steps (see ``is_step_loop``)? What per-step costs (a cache flush, a collection, an
        allocation) are judged by."""
        return self.runs_every_iteration(ctx) and self.is_step_loop(ctx.loop)

    def is_step_loop(self, loop: Loop) -> bool:
        """Does each iteration make one step: a forward pass (``model(x)``, ``self(x)``), a
        ``backward()`` or an optimizer step in the loop's own body (not in a loop nested in it),
        or a header that goes over batches or steps (``for batch in loader``,
        ``while step < max_steps``) without a nested loop that makes the steps? Outer loops
        (epochs over batches, checkpoint shards over their tensors, profiled operations over
        timing repeats) and loops over things (models, devices, files) are not step loops."""
        if "step" in loop._memo:
            return loop._memo["step"]
        loop._memo["step"] = False  # recursion guard
        own_work = False
        nested = []
        for stmt, ctx in self.statements_in_loop(loop):
            if ctx.loop is not loop:
                continue
            if type(stmt) in (cst.For, cst.While):
                nested.append(self.loops[id(stmt)])
                continue
            if any(self._makes_step(call, ctx) for call in self.calls_in(stmt)):
                own_work = True
                break
        node = loop.node
        if type(node) is cst.For:
            header = (_names_match(STEP_TARGET_RE, node.target) or _names_match(STEP_SOURCE_RE, node.iter)
                      or _is_batch_stride(node.iter))
        else:
            header = _names_match(STEP_TARGET_RE, node.test)
        result = own_work or (header and not any(self.is_step_loop(inner) for inner in nested))
        loop._memo["step"] = result
        return result

    def _makes_step(self, call, ctx: Context) -> bool:
        func = call.func
        if call_name(call) in BACKWARD_FUNCTIONS:
            return True
        if type(func) is cst.Name and func.value == "self":
            return True  # a module calling its own forward (a decoding loop)
        return self.is_module(func, ctx) or self.stepped_optimizer(call, ctx) is not None

    def returned_expressions(self, scope: Scope) -> list:
        """Values of the scope's return / yield statements and yield expressions."""
        if "returned" not in scope._memo:
            values = []
            for stmt, ctx in scope.statements:
                if ctx.scope is not scope:
                    continue
                if type(stmt) is cst.Return and stmt.value is not None:
                    values.append(stmt.value)
                for expr in self.own_expressions(stmt):
                    for node in iter_expression_nodes(expr):
                        if type(node) is cst.Yield and node.value is not None:
                            value = node.value
                            values.append(value.item if type(value) is cst.From else value)
            scope._memo["returned"] = values
        return scope._memo["returned"]

    def backward_roots(self, scope: Scope) -> frozenset[str]:
        """Names that a ``backward()`` in this scope is called on directly: ``loss.backward()``,
        ``accelerator.backward(loss)``, ``scaler.scale(loss).backward()``,
        ``torch.autograd.grad(loss, ...)``. Such a name certainly holds a graph-attached tensor."""
        if "roots" in scope._memo:
            return scope._memo["roots"]
        roots: set[str] = set()
        if not (self.may_contain("backward") or self.may_contain("autograd")):
            scope._memo["roots"] = frozenset()
            return scope._memo["roots"]
        for stmt, _ in scope.statements:
            for call in self.calls_in(stmt):
                name = call_name(call)
                positional = call_arguments(call)
                if name in BACKWARD_FUNCTIONS:
                    # accelerator.backward(loss) / self.manual_backward(loss): the argument;
                    # loss.backward() / scaler.scale(loss).backward(): the receiver
                    if positional:
                        operand = positional[0]
                    elif type(call.func) is cst.Attribute:
                        operand = call.func.value
                    else:
                        continue
                elif name == "grad" and positional and self.qualified_name(call.func) == "torch.autograd.grad":
                    operand = positional[0]
                else:
                    continue
                roots.update(_tensor_operand_keys(operand))
        result = frozenset(roots)
        scope._memo["roots"] = result
        return result

    def backpropagated_keys(self, scope: Scope) -> frozenset[str]:
        """Names whose value reaches a ``backward()`` in this scope: the roots and, transitively,
        the names their bindings were computed from (``loss = total / n`` puts ``total`` in)."""
        if "backprop" not in scope._memo:
            scope._memo["backprop"] = self._sources_closure(self.backward_roots(scope), scope)
        return scope._memo["backprop"]

    def in_eval_branch(self, stmt, ctx: Context) -> bool:
        """Is ``stmt`` on the evaluation side of its innermost ``if`` on a module's ``training``
        flag (the body of ``if not self.training:``, the else of ``if self.training:``)?"""
        guard = ctx.guard
        if type(guard) is not cst.If:
            return False
        negated = training_test(guard.test)
        if negated is None:
            return False
        body = guard.body.body
        in_body = any(
            line is stmt or (type(line) is cst.SimpleStatementLine and any(small is stmt for small in line.body))
            for line in body
        )
        return in_body == negated

    def returned_keys(self, scope: Scope) -> frozenset[str]:
        """Names whose undetached value reaches a return or yield of the function, directly
        (``return feats``) or through other bindings (``out = torch.cat(feats); return out``)."""
        if "returned_keys" not in scope._memo:
            roots = set()
            for value in self.returned_expressions(scope):
                roots.update(mentioned_keys(value, skip_detached=True))
            scope._memo["returned_keys"] = self._sources_closure(roots, scope)
        return scope._memo["returned_keys"]

    def reaches_backward(self, key: str, ctx: Context) -> bool:
        """Does ``key`` feed a backward() in its function, or, for ``self.x``, in any method of
        the class (a meta-learning strategy that stores losses and differentiates them later)?"""
        if key in self.backpropagated_keys(ctx.scope):
            return True
        class_scope = ctx.scope.class_scope
        if not key.startswith("self.") or class_scope is None:
            return False
        return any(
            key in self.backpropagated_keys(method)
            for method in self.scopes.values()
            if method.kind == "function" and method.class_scope is class_scope
        )

    def _sources_closure(self, roots, scope: Scope) -> frozenset[str]:
        pending = list(roots)
        reached: set[str] = set()
        while pending:
            key = pending.pop()
            if key in reached:
                continue
            reached.add(key)
            for binding in scope.bindings.get(key, ()):
                if binding.kind in ("assign", "for") and binding.value is not None:
                    pending.extend(mentioned_keys(binding.value, skip_detached=True))
                elif binding.kind == "augassign":
                    pending.extend(mentioned_keys(binding.value.value, skip_detached=True))
            for value in scope.stores.get(key, ()):
                pending.extend(mentioned_keys(value, skip_detached=True))
        return frozenset(reached)

    # ------------------------------------------------------------------ graph attachment

    def is_attached(self, expr, ctx: Context) -> bool:
        """Is ``expr`` at ``ctx`` a tensor still attached to the autograd graph?

        Sources: forward passes (calls of modules, losses, conventional ``model``/``criterion``
        names), functional losses and names that are backpropagated. Arithmetic, indexing and
        non-detaching methods propagate; ``.item()``, ``.detach()``, ``float()``, comparisons and
        anything computed with grad disabled do not. Unknown calls are not tensors."""
        if ctx.grad is not GradMode.ENABLED:
            return False
        return self._attached(expr, ctx) and self.grad_enabled(ctx)

    def _attached(self, expr, ctx: Context) -> bool:
        kind = type(expr)
        if kind is cst.Name:
            binding = self.lookup(expr.value, ctx)
            return binding is not None and self._binding_attached(binding)
        if kind is cst.Attribute:
            if expr.attr.value in NON_GRAPH_ATTRIBUTES:
                return False
            key = dotted_name(expr)
            if key is not None:
                binding = self.lookup(key, ctx)
                if binding is not None:
                    return self._binding_attached(binding)
            return self._attached(expr.value, ctx)  # out.loss, out.logits
        if kind is cst.Subscript:
            return self._attached(expr.value, ctx)
        if kind is cst.Call:
            return self._call_attached(expr, ctx)
        if kind is cst.BinaryOperation:
            return self._attached(expr.left, ctx) or self._attached(expr.right, ctx)
        if kind is cst.UnaryOperation:
            return type(expr.operator) is not cst.Not and self._attached(expr.expression, ctx)
        if kind in (cst.Tuple, cst.List, cst.Set):
            return any(self._attached(element.value, ctx) for element in expr.elements)
        if kind is cst.Dict:
            return any(self._attached(element.value, ctx) for element in expr.elements)
        if kind is cst.IfExp:
            return self._attached(expr.body, ctx) or self._attached(expr.orelse, ctx)
        if kind is cst.BooleanOperation:
            return self._attached(expr.left, ctx) or self._attached(expr.right, ctx)
        if kind is cst.NamedExpr:
            return self._attached(expr.value, ctx)
        return False

    def _binding_attached(self, binding: Binding) -> bool:
        memo = self._attached_memo
        key = id(binding)
        if key in memo:
            return memo[key]
        memo[key] = False  # cycles resolve to "not attached"
        result = self._compute_binding_attached(binding)
        memo[key] = result
        return result

    def _compute_binding_attached(self, binding: Binding) -> bool:
        ctx = binding.ctx
        if ctx.grad is not GradMode.ENABLED:
            return False
        kind = binding.kind
        if kind == "assign":
            value = self._element_of(binding.value, binding.element)
            if value is None:
                return False
            if self._attached(value, ctx):
                return True
            return type(value) is cst.Call and self._backpropagated(binding)
        if kind == "augassign":
            if self._attached(binding.value.value, ctx):
                return True
            previous = self.lookup(binding.key, ctx)
            return previous is not None and self._binding_attached(previous)
        if kind == "for":
            iterable = binding.value
            if type(iterable) is cst.Call and type(iterable.func) is cst.Name and iterable.func.value == "enumerate":
                if binding.element[:1] == (0,):
                    return False
                arguments = call_arguments(iterable)
                return bool(arguments) and self._attached(arguments[0], ctx)
            return self._attached(iterable, ctx)
        if kind == "param":
            return self._backpropagated(binding)
        return False

    def _backpropagated(self, binding: Binding) -> bool:
        return binding.key in self.backward_roots(binding.ctx.scope)

    def bound_value(self, binding: Binding):
        """The expression an assignment gives its target (the matching element when the target
        unpacks a tuple); None when it is not an assignment or the element is unknown."""
        if binding.kind != "assign" or binding.value is None:
            return None
        value = self._element_of(binding.value, binding.element)
        if value is None or (binding.element and value is binding.value):
            return None
        return value

    def _element_of(self, value, element: tuple[int, ...]):
        """The sub-expression an unpacking target receives, or the whole value when unknown;
        None when it is known to carry no graph (the indices of ``torch.max(x, 1)``)."""
        for index in element:
            if type(value) in (cst.Tuple, cst.List) and index >= 0 and all(
                type(item) is cst.Element for item in value.elements
            ) and index < len(value.elements):
                value = value.elements[index].value
                continue
            if index == 1 and type(value) is cst.Call:
                name = self.qualified_name(value.func) or ""
                method = value.func.attr.value if type(value.func) is cst.Attribute else ""
                if (name.startswith("torch.") and last_part(name) in TORCH_VALUES_INDICES) or (
                    method in TORCH_VALUES_INDICES and len(value.args) >= 1
                ):
                    return None
            return value
        return value

    def _call_attached(self, call, ctx: Context) -> bool:
        func = call.func
        qualified = self.qualified_name(func)
        if qualified is not None and qualified.startswith("torch."):
            return self._torch_call_attached(qualified, call, ctx)
        if type(func) is cst.Attribute:
            method = func.attr.value
            if method in DETACHING_METHODS or method in NON_DIFFERENTIABLE_METHODS:
                return False
            if self._attached(func.value, ctx):
                return True  # a non-detaching tensor method: .cpu(), .to(), .mean(), .view() ...
            if method == "forward" and self.is_module(func.value, ctx):
                return True
        elif type(func) is cst.Name:
            name = func.value
            if name in PASS_THROUGH_BUILTINS and name not in self.imports:
                return any(self._attached(arg.value, ctx) for arg in call.args)
        return self.is_module(func, ctx)

    def _torch_call_attached(self, qualified: str, call, ctx: Context) -> bool:
        name = last_part(qualified)
        if qualified.startswith("torch.nn.functional."):
            if LOSS_FUNCTIONAL_RE.search(name):
                return True
        elif qualified.startswith("torch.nn.") and name[:1].isupper():
            return False  # constructing a module
        if name in TORCH_NON_DIFFERENTIABLE:
            return False
        return any(self._attached(arg.value, ctx) for arg in call.args)

    def is_module(self, expr, ctx: Context) -> bool:
        """Is ``expr`` a module or loss function, so that calling it runs a forward pass?"""
        kind = type(expr)
        if kind is cst.Subscript:  # self.blocks[i](x)
            return self.is_module(expr.value, ctx)
        key = dotted_name(expr)
        if key is None:
            return False
        binding = self.lookup(key, ctx)
        if binding is not None and binding.kind in ("def", "class", "import"):
            # a function named like build_model() is not a module; a class is called to build one
            return binding.kind == "import" and self.is_module_class(expr) and not key[:1].isupper()
        if binding is not None and binding.kind == "assign":
            memo = self._module_memo
            if id(binding) not in memo:
                memo[id(binding)] = False
                memo[id(binding)] = self._binding_is_module(binding)
            if memo[id(binding)]:
                return True
        return is_conventional_module_name(last_part(key))

    def _binding_is_module(self, binding: Binding) -> bool:
        if binding.kind == "param":
            return False
        if binding.kind != "assign" or binding.element:
            return False
        value = binding.value
        # Net().to(device).eval() is still the module
        while type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value in MODULE_PASS_THROUGH_METHODS:
            value = value.func.value
        if type(value) is not cst.Call:
            return type(value) in (cst.Name, cst.Attribute) and self.is_module(value, binding.ctx)
        return self.is_module_class(value.func) or (
            self.qualified_name(value.func) == "torch.compile" and bool(value.args)
            and self.is_module(value.args[0].value, binding.ctx)
        )

    def is_module_class(self, expr) -> bool:
        """Does calling ``expr`` construct a module: ``nn.Linear``, a local ``nn.Module`` subclass,
        an imported class named like ``ResNetModel`` / ``FocalLoss``?"""
        qualified = self.qualified_name(expr)
        if qualified is not None:
            if qualified.startswith("torch.nn.") and last_part(qualified)[:1].isupper():
                return True
        name = dotted_name(expr)
        if name is None:
            return False
        tail = last_part(name)
        if "." not in name and name in self.local_classes:
            return self._local_class_is_module(name, set())
        return bool(tail[:1].isupper() and MODULE_CLASS_RE.search(tail))

    def _local_class_is_module(self, name: str, seen: set[str]) -> bool:
        if name in seen:
            return False
        seen.add(name)
        node = self.local_classes[name]
        for base in node.bases:
            base_name = dotted_name(base.value)
            if base_name is None:
                continue
            if "." not in base_name and base_name in self.local_classes:
                if self._local_class_is_module(base_name, seen):
                    return True
                continue
            qualified = self.qualified_name(base.value) or base_name
            if qualified.startswith("torch.nn.") or MODULE_CLASS_RE.search(last_part(base_name)):
                return True
        return False

    # ------------------------------------------------------------------ in-place mutation

    def mutated_operands(self, stmt) -> list:
        """The tensors a statement modifies in place: receivers of in-place methods in the
        statement's own call chain (``w.add_(1)``, ``w[0].zero_()``, ``y = x.mul_(2).add_(1)``;
        calls buried in other calls' arguments are not looked into, which keeps this a cheap
        statement-level check), first arguments of ``torch.<op>_`` functions
        (``torch.relu_(y)``; ``torch.nn.init.*_`` are not included), the base of an item
        assignment (``w[i] = v`` gives ``w``) and the target of an augmented assignment."""
        operands = []
        kind = type(stmt)
        if kind is cst.AugAssign:
            target = stmt.target
            operands.append(storage_base(target) if type(target) is cst.Subscript else target)
        elif kind is cst.Assign:
            operands.extend(storage_base(t.target) for t in stmt.targets if type(t.target) is cst.Subscript)
        value = getattr(stmt, "value", None) if kind in (cst.Expr, cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Return) else None
        for call in _call_chain(value):
            func = call.func
            if type(func) is not cst.Attribute or not is_inplace_method(func.attr.value):
                continue
            qualified = self.qualified_name(func) or ""
            if not qualified.startswith("torch."):
                operands.append(func.value)  # w.add_(1), also for an imported `w`
            elif qualified.count(".") == 1 and call_arguments(call):
                operands.append(call_arguments(call)[0])  # torch.relu_(y); not torch.nn.init.*_
        return operands

    # ------------------------------------------------------------------ leaves that require grad

    def is_grad_leaf(self, expr, ctx: Context) -> bool:
        """Is ``expr`` at ``ctx`` a leaf tensor that requires grad, or a view of one (``w[0]``,
        ``w.view(-1)``)? In-place ops on those raise outside ``no_grad``.

        Leaves: ``nn.Parameter(...)`` (any spelling; ``self.w`` when the class assigns one to it),
        ``torch.*(..., requires_grad=True)``, ``x.requires_grad_()`` as a call or an earlier
        statement, ``layer.weight`` / ``layer.bias`` of a ``torch.nn`` layer, the loop variable over
        ``m.parameters()`` / ``m.named_parameters()`` / an optimizer's ``group["params"]``. Not
        ``w.data``, ``w.grad``, ``w.detach()``, anything computed from a leaf, nor anything the
        module switches ``requires_grad`` off for (``ema.requires_grad_(False)``, any flag not
        literally True)."""
        expr = strip_views(expr)
        if expr is None:
            return False
        if type(expr) is cst.Call:
            return self._creates_grad_leaf(expr, ctx)
        key = dotted_name(expr)
        if key is None or self._grad_switched_off(key):
            return False
        if any(self._binding_grad_leaf(binding) for binding in self._visible_bindings(key, ctx)):
            return True
        if type(expr) is cst.Attribute and expr.attr.value in ("weight", "bias"):
            return self._is_parameterised_layer(expr.value, ctx)  # model.fc.weight
        return self._grad_switched_on(key, ctx)

    def _visible_bindings(self, key: str, ctx: Context) -> list[Binding]:
        """The binding of ``key`` at ``ctx`` in its own scope; for ``self.x`` without one, every
        assignment to it in the class (``self.weight = nn.Parameter(...)`` in ``__init__``)."""
        scope = ctx.scope
        latest = None
        for binding in scope.bindings.get(key, ()):
            if binding.ctx.order >= ctx.order:
                break
            latest = binding
        if latest is not None:
            return [latest]
        if key.startswith("self.") and scope.class_scope is not None:
            return [b for b in scope.class_scope.bindings.get(key, ()) if b.kind == "assign"]
        binding = self.lookup(key, ctx)
        return [binding] if binding is not None else []

    def _binding_grad_leaf(self, binding: Binding) -> bool:
        memo = self._grad_leaf_memo
        if id(binding) not in memo:
            memo[id(binding)] = False  # cycles resolve to "not a leaf"
            memo[id(binding)] = self._compute_binding_grad_leaf(binding)
        return memo[id(binding)]

    def _compute_binding_grad_leaf(self, binding: Binding) -> bool:
        kind = binding.kind
        if kind == "augassign":  # updated in place: still the same leaf
            return any(self._binding_grad_leaf(b) for b in self._visible_bindings(binding.key, binding.ctx))
        if kind == "for":
            return self._iterates_parameters(binding.value, binding.element, binding.ctx)
        value = self.bound_value(binding)
        if type(value) is cst.Call:
            return self._creates_grad_leaf(value, binding.ctx)
        if type(value) in (cst.Name, cst.Attribute):  # w = self.weight
            return self.is_grad_leaf(value, binding.ctx)
        return False

    def _creates_grad_leaf(self, call, ctx: Context) -> bool:
        func = call.func
        if type(func) is cst.Attribute and func.attr.value == "requires_grad_":
            # a tensor outside the graph becomes a leaf; an attached one stays a non-leaf
            return _requires_grad_flag(call, 0, True) is True and not self.is_attached(func.value, ctx)
        qualified = self.qualified_name(func)
        if qualified is None:
            return False
        if qualified in PARAMETER_CLASSES:
            return _requires_grad_flag(call, 1, True) is True
        if qualified.startswith("torch.") and not qualified.startswith("torch.nn."):
            return _requires_grad_flag(call, None, False) is True  # torch.zeros(..., requires_grad=True)
        return False

    def _iterates_parameters(self, iterable, element: tuple[int, ...], ctx: Context) -> bool:
        """Does a loop target at ``element`` of ``for ... in iterable`` receive parameters?"""
        if type(iterable) is cst.Subscript:  # for p in group["params"], group from .param_groups
            index = iterable.slice[0].slice if len(iterable.slice) == 1 else None
            if element or type(index) is not cst.Index or type(index.value) is not cst.SimpleString:
                return False
            if index.value.value[1:-1] != "params":
                return False
            key = dotted_name(iterable.value)
            binding = self.lookup(key, ctx) if key else None
            return (binding is not None and binding.kind == "for" and not binding.element
                    and type(binding.value) is cst.Attribute and binding.value.attr.value == "param_groups")
        if type(iterable) is not cst.Call:
            return False
        func, arguments = iterable.func, call_arguments(iterable)
        if type(func) is cst.Attribute and func.attr.value in ("parameters", "named_parameters"):
            if element != (() if func.attr.value == "parameters" else (1,)):
                return False
            owner = dotted_name(func.value)
            return owner is None or not self._grad_switched_off(owner)
        name = dotted_name(func)
        if name in ("list", "tuple", "reversed", "sorted") and arguments:
            return self._iterates_parameters(arguments[0], element, ctx)
        if name == "filter" and len(arguments) == 2:
            return self._iterates_parameters(arguments[1], element, ctx)
        if name in ("chain", "itertools.chain") and arguments:
            return all(self._iterates_parameters(argument, element, ctx) for argument in arguments)
        if name == "enumerate" and arguments and element[:1] == (1,):
            return self._iterates_parameters(arguments[0], element[1:], ctx)
        if name == "zip" and element and 0 <= element[0] < len(arguments):
            return self._iterates_parameters(arguments[element[0]], element[1:], ctx)
        return False

    def _is_parameterised_layer(self, expr, ctx: Context) -> bool:
        key = dotted_name(expr)
        if key is None:
            return False
        for binding in self._visible_bindings(key, ctx):
            value = binding.value
            if binding.kind == "assign" and not binding.element and type(value) is cst.Call:
                qualified = self.qualified_name(value.func) or ""
                if qualified.startswith("torch.nn.") and last_part(qualified) in PARAMETERISED_LAYERS:
                    return True
        return False

    def _grad_switched_off(self, key: str) -> bool:
        """Does the module set ``requires_grad`` to anything but a literal True on ``key`` or on
        what contains it (``ema.requires_grad_(False)`` covers ``ema.fc.weight``)? Flow-
        insensitive on purpose: a frozen copy is usually frozen once, far from its updates."""
        switches = self._requires_grad_switches()
        parts = key.split(".")
        return any(
            not enabled
            for end in range(1, len(parts) + 1)
            for _, enabled in switches.get(".".join(parts[:end]), ())
        )

    def _grad_switched_on(self, key: str, ctx: Context) -> bool:
        """``x.requires_grad_()`` / ``x.requires_grad = True`` earlier in the same scope, on a
        value that was not already part of a graph."""
        bindings = self._visible_bindings(key, ctx)
        for switch_ctx, enabled in self._requires_grad_switches().get(key, ()):
            if not enabled or switch_ctx.scope is not ctx.scope or switch_ctx.order >= ctx.order:
                continue
            if not any(b.ctx.scope is ctx.scope and b.ctx.order > switch_ctx.order for b in bindings) and not any(
                self._binding_attached(b) for b in bindings
            ):
                return True
        return False

    def _requires_grad_switches(self) -> dict[str, list[tuple[Context, bool]]]:
        """Every ``k.requires_grad_(flag)`` / ``k.requires_grad = flag`` statement, by ``k``. A
        parameter loop variable switched off also switches off its owner: ``for p in
        ema.parameters(): p.requires_grad = False`` records ``ema``."""
        if self._switches is not None:
            return self._switches
        switches: dict[str, list[tuple[Context, bool]]] = defaultdict(list)
        for stmt, ctx in self.statements_by_type.get("Expr", ()):
            value = stmt.value
            if type(value) is cst.Call and call_name(value) == "requires_grad_" and type(value.func) is cst.Attribute:
                key = dotted_name(strip_pass_through(value.func.value))
                if key is not None:
                    switches[key].append((ctx, _requires_grad_flag(value, 0, True) is True))
        for stmt, ctx in self.statements_by_type.get("Assign", ()):
            for target in stmt.targets:
                target = target.target
                if type(target) is cst.Attribute and target.attr.value == "requires_grad":
                    key = dotted_name(target.value)
                    enabled = type(stmt.value) is cst.Name and stmt.value.value == "True"
                elif type(stmt.value) is cst.Call and call_name(stmt.value) == "requires_grad_":
                    key = dotted_name(target)  # ema = deepcopy(model).requires_grad_(False)
                    enabled = _requires_grad_flag(stmt.value, 0, True) is True
                else:
                    continue
                if key is not None:
                    switches[key].append((ctx, enabled))
        for key, entries in list(switches.items()):
            for ctx, enabled in entries:
                binding = self.lookup(key, ctx) if not enabled and "." not in key else None
                if binding is not None and binding.kind == "for":
                    owner = _parameters_owner(binding.value)
                    if owner is not None:
                        switches[owner].append((ctx, False))
        self._switches = switches
        return switches

    def last_backward_order(self, scope: Scope) -> int:
        """Order of the last statement of the scope that calls ``backward()`` (or
        ``torch.autograd.grad``); 0 when none does."""
        if "last_backward" not in scope._memo:
            last = 0
            for stmt, ctx in scope.statements:
                if ctx.scope is scope and any(
                    call_name(call) in BACKWARD_FUNCTIONS
                    or self.qualified_name(call.func) == "torch.autograd.grad"
                    for call in self.calls_in(stmt)
                ):
                    last = ctx.order
            scope._memo["last_backward"] = last
        return scope._memo["last_backward"]

    # ------------------------------------------------------------------ optimizers and gradients

    def is_optimizer(self, expr, ctx: Context) -> bool:
        """Is ``expr`` an optimizer: named like one (``optimizer``, ``opt_d``, ``self.actor.optimizer``,
        ``optimizers[i]``), or bound to ``torch.optim.*``, a class named ``*Optimizer``, a
        ``create_optimizer(...)`` factory, or the loop variable of ``for o in optimizers``?"""
        if type(expr) is cst.Subscript:
            key = dotted_name(expr.value)
            return key is not None and looks_like_optimizer(last_part(key), plural=True)
        key = dotted_name(expr)
        if key is None:
            return False
        if looks_like_optimizer(last_part(key)):
            return True
        binding = self.lookup(key, ctx)
        if binding is None:
            return False
        if binding.kind == "for":
            iterable = binding.value
            if type(iterable) is cst.Call and type(iterable.func) is cst.Attribute:
                iterable = iterable.func.value  # optimizers.values()
            name = dotted_name(iterable)
            return name is not None and looks_like_optimizer(last_part(name), plural=True)
        return self.optimizer_construction(binding) is not None

    def optimizer_construction(self, binding: Binding):
        """The call that built the optimizer ``binding`` holds (``torch.optim.AdamW(...)``,
        ``DPOptimizer(...)``, ``create_optimizer_v2(...)``), else None."""
        if binding.kind != "assign" or binding.element or type(binding.value) is not cst.Call:
            return None
        func = binding.value.func
        qualified = self.qualified_name(func) or ""
        name = last_part(dotted_name(func) or "")
        if qualified.startswith("torch.optim.") and "." not in qualified[12:] and name[:1].isupper():
            return binding.value  # torch.optim.SGD, not torch.optim.lr_scheduler.StepLR
        if name in OPTIMIZER_CLASSES or OPTIMIZER_CLASS_RE.search(name) or looks_like_optimizer(name):
            return binding.value
        return None

    def is_grad_scaler(self, expr, ctx: Context) -> bool:
        """``scaler`` / ``self.grad_scaler`` / a name bound to ``torch.amp.GradScaler(...)``."""
        key = dotted_name(expr)
        if key is None:
            return False
        if "scaler" in name_words(last_part(key)):
            return True
        binding = self.lookup(key, ctx)
        return (
            binding is not None and binding.kind == "assign" and type(binding.value) is cst.Call
            and (dotted_name(binding.value.func) or "").endswith("GradScaler")
        )

    def stepped_optimizer(self, call, ctx: Context):
        """The optimizer a call steps: ``opt.step()`` -> ``opt``, ``scaler.step(opt)`` -> ``opt``.
        None for anything else: ``scheduler.step()``, ``env.step(action)``, ``ema.step()`` and
        ``opt.step(closure)`` (the closure recomputes, and usually clears, the gradients)."""
        func = call.func
        if type(func) is not cst.Attribute or func.attr.value != "step":
            return None
        receiver = func.value
        if not call.args:
            return receiver if self.is_optimizer(receiver, ctx) else None
        positional = call_arguments(call)
        if len(call.args) != 1 or len(positional) != 1:
            return None
        if self.is_grad_scaler(receiver, ctx):
            return positional[0]
        receiver_name = dotted_name(receiver) or ""
        if self.is_optimizer(positional[0], ctx) and not any(
            word in NOT_OPTIMIZER_WORDS for word in name_words(last_part(receiver_name))
        ):
            return positional[0]  # a wrapper stepping the optimizer it is given
        return None

    def gradient_clearings(self, stmt) -> list:
        """How a statement clears gradients, one entry per clearing: the receiver of
        ``opt.zero_grad()`` / ``model.zero_grad()``, or None where what it covers is unknown
        (``p.grad = None``, ``del p.grad``, ``p.grad.zero_()``, ``zero_grads(model)``,
        ``set_to_none=...``). Empty when it clears nothing."""
        found = []
        kind = type(stmt)
        if kind in (cst.Assign, cst.AnnAssign, cst.Del):
            targets = [t.target for t in stmt.targets] if kind is cst.Assign else (
                [stmt.target] if kind is cst.AnnAssign else [e.value for e in _del_targets(stmt)])
            if any(_is_grad_attribute(target) for target in targets):
                found.append(None)
        for call in self.calls_in(stmt):
            func = call.func
            name = call_name(call) or ""
            if CLEARING_CALL_RE.search(name) and not name.startswith(("on_", "_on_", "test_")):
                found.append(func.value if name == "zero_grad" and type(func) is cst.Attribute else None)
            elif name in GRAD_OVERWRITING_METHODS and type(func) is cst.Attribute and _is_grad_chain(func.value):
                found.append(None)
            elif keyword_argument(call, "set_to_none") is not None:
                found.append(None)
        return found

    def loop_gradient_clearings(self, loop: Loop) -> list[tuple[object, Context]]:
        """Every gradient clearing in the loop's body (nested loops included) with its context."""
        if "clearings" not in loop._memo:
            loop._memo["clearings"] = [
                (receiver, ctx)
                for stmt, ctx in self.statements_in_loop(loop)
                for receiver in self.gradient_clearings(stmt)
            ]
        return loop._memo["clearings"]

    def distinct_optimizers(self, first, first_ctx: Context, second, second_ctx: Context) -> bool:
        """Are two optimizer expressions known to be different objects: different names, each bound
        to its own construction (``opt_g = Adam(G.parameters())``, ``opt_d = Adam(D.parameters())``,
        or ``opt_g, opt_d = self.optimizers()``)? False when either may be an alias of the other."""
        first_key, second_key = dotted_name(first), dotted_name(second)
        if first_key is None or second_key is None or first_key == second_key:
            return False
        bindings = [self.lookup(first_key, first_ctx), self.lookup(second_key, second_ctx)]
        return all(
            binding is not None and binding.kind == "assign" and type(binding.value) is cst.Call
            for binding in bindings
        )

    def straight_line(self, stmt, ctx: Context) -> tuple[list, int] | None:
        """The statements that run, in order, on every pass through the block holding the small
        statement ``stmt`` within one iteration of its innermost loop (or one call of its
        function), and ``stmt``'s index among them. ``with`` and ``try`` bodies are inlined;
        other compound statements (``if``, nested loops, ``def``) are single opaque items whose
        own blocks are other sequences (see ``branch_parent``)."""
        if ctx.loops:
            root = ctx.loop.node
        elif ctx.scope.kind == "function":
            root = ctx.scope.node
        else:
            root = self.module
        memo = self._sequences_memo.get(id(root))
        if memo is None:
            memo = {}
            self._sequences(root.body, [], memo)
            self._sequences_memo[id(root)] = memo
        sequence = memo.get(id(stmt))
        if sequence is None:
            return None
        return sequence, next(index for index, item in enumerate(sequence) if item is stmt)

    def _sequences(self, block, current: list, memo: dict) -> None:
        statements = block if isinstance(block, (list, tuple)) else block.body
        for stmt in statements:
            kind = type(stmt)
            if kind is cst.SimpleStatementLine:
                for small in stmt.body:
                    current.append(small)
                    memo[id(small)] = current
            elif isinstance(stmt, cst.BaseSmallStatement):  # the body of `if x: a(); b()`
                current.append(stmt)
                memo[id(stmt)] = current
            elif kind is cst.With:
                self._sequences(stmt.body, current, memo)
            elif kind in (cst.Try, cst.TryStar):
                self._sequences(stmt.body, current, memo)
                # handlers, else and finally run conditionally or out of order: opaque items
                for extra in (*stmt.handlers, stmt.orelse, stmt.finalbody):
                    if extra is not None:
                        current.append(extra)
                        self._sequences(extra.body, [], memo)
            elif kind is cst.If:
                current.append(stmt)
                branch = stmt
                while type(branch) is cst.If:
                    self._sequences(branch.body, self._branch(current), memo)
                    branch = branch.orelse
                if branch is not None:
                    self._sequences(branch.body, self._branch(current), memo)
            elif kind is cst.Match:
                current.append(stmt)
                for case in stmt.cases:
                    self._sequences(case.body, self._branch(current), memo)
            else:  # loops (their bodies are other iterations), def, class
                current.append(stmt)

    def _branch(self, parent: list) -> list:
        sequence: list = []
        self._branch_parents[id(sequence)] = (sequence, parent, len(parent) - 1)  # keeps the id valid
        return sequence

    def branch_parent(self, sequence: list) -> tuple[list, int] | None:
        """For the sequence of an ``if`` / ``elif`` / ``else`` branch or a ``match`` case: the
        sequence holding that ``if`` / ``match`` statement and its index there. What precedes it
        there ran before every statement of the branch. None for other sequences."""
        found = self._branch_parents.get(id(sequence))
        return found[1:] if found is not None else None

    def calls_within(self, node) -> list:
        """Every call anywhere under ``node``, nested blocks included (for opaque compound
        statements of a straight-line sequence)."""
        if type(node) in (cst.FunctionDef, cst.ClassDef):
            return []
        return [item for item in iter_expression_nodes(node) if type(item) is cst.Call]


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


_CONVENTIONAL_ROOTS = {"torch": "torch", "nn": "torch.nn", "F": "torch.nn.functional"}


def is_conventional_module_name(name: str) -> bool:
    return CONVENTIONAL_MODULE_RE.match(name) is not None


def _literal_grad_mode(expr) -> GradMode:
    if type(expr) is cst.Name and expr.value in ("True", "False"):
        return GradMode.ENABLED if expr.value == "True" else GradMode.DISABLED
    return GradMode.UNKNOWN


def _merge(first: GradMode, second: GradMode) -> GradMode:
    return first if first is second else GradMode.UNKNOWN


def _tensor_operand_keys(expr) -> set[str]:
    """The names a backpropagated expression is computed from: ``loss`` in ``loss``,
    ``loss.mean()``, ``(loss / n)`` and ``scaler.scale(loss)`` (a wrapper's argument, not the
    wrapper)."""
    if type(expr) is cst.Call:
        func = expr.func
        if type(func) is cst.Attribute and func.attr.value not in DETACHING_METHODS:
            inner = _tensor_operand_keys(func.value)
            if func.attr.value == "scale" or not inner:
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


_BATCH_RE = re.compile("batch", re.I)


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
            if type(func) is cst.Attribute and func.attr.value in DETACHING_METHODS:
                continue
            if type(func) is cst.Name and func.value in ("float", "int", "bool", "str", "len"):
                continue
        if kind is cst.Lambda:
            continue
        stack.extend(child_nodes(node))
    return found


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
