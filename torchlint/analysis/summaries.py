"""What a call of a function defined in this module does, and which functions run once per step.

A *summary* answers, for one function or method, the questions the rules ask about a call of
it: does it backpropagate, step or clear an optimizer, empty a cache (``reaches_call``), does it
return a value still attached to the autograd graph (``returns_attached``). Summaries look
through the calls the function makes to other functions of the module (``self.method``, module
functions, closures), bottom-up, to a bounded depth; recursion resolves to "no".

*Per-step* functions are those a loop of the module calls (directly or through other such
functions) and the per-step hooks of frameworks (``PER_STEP_HOOKS``, a module's ``forward``).
Their bodies get an implicit loop (see ``Loop``), so that every loop rule sees them as the
inside of a loop: a list in ``self`` that ``training_step`` appends to outlives the call, an
``empty_cache()`` in a helper the step loop calls runs every step.
"""

from __future__ import annotations

import functools
import os

from torchlint.analysis.arguments import passed_arguments
from torchlint.analysis.project import project
from torchlint.analysis.scopes import Context, Loop, Scope
from torchlint.analysis.syntax import call_name, dotted_name, last_part, strip_pass_through
from torchlint.analysis.vocabulary import FORWARD_METHODS, NEUTRAL_BASES, PER_STEP_HOOKS, GradMode, is_clearing_call_name, name_words
from torchlint.lazy import cst

MAX_CALL_DEPTH = 4
# Helpers named for turning tensors into data (`detach(x)`, `to_numpy(t)`, `tensor_to_cpu(d)`).
DETACHING_HELPER_WORDS = frozenset({"detach", "detached", "numpy", "np", "cpu", "item", "items", "scalar", "scalars", "float", "list"})
# reaches_call's questions: the predicate (a method of the analysis) each one asks of a call
REACHED_CALLS = {
    "backward": "_is_backward_call", "step": "_is_step_call", "clear": "_is_clearing_call",
    "unscale": "_is_unscale_call", "update": "_is_update_call",
}
# What a module's text must contain for one of its functions to reach the call at all.
REACHED_TEXT = {
    "backward": ("backward", "autograd", ".step(", "scaler("), "step": (".step(", "scaler("), "clear": ("zero_grad", ".grad"),
    "unscale": ("unscale",), "update": (".update(",),
}
# Hook registrations and the kind of hook each registers.
HOOK_REGISTRATIONS = {
    "register_forward_hook": "forward", "register_forward_pre_hook": "forward",
    "register_full_backward_hook": "backward", "register_backward_hook": "backward",
    "register_full_backward_pre_hook": "backward", "register_hook": "backward",
}
# The update methods of a moving average of the weights (timm's `ModelEma.update`, diffusers'
# `EMAModel.step`, `AveragedModel.update_parameters`): training loops call them every step.
AVERAGE_UPDATE_METHODS = frozenset({"step", "update", "update_parameters", "update_ema", "ema_step"})


def _names_moving_average(class_name: str) -> bool:
    words = set(name_words(class_name))
    return bool(words & {"ema", "swa", "averaged"}) or {"moving", "average"} <= words


# A function named for one step or batch of a phase (`eval_step`, `_val_step_label_side`,
# `train_batch`, `test_one_batch`) is called once per batch, wherever its loop is.
PHASE_WORDS = frozenset({
    "train", "training", "val", "valid", "validate", "validation", "eval", "evaluate", "evaluation",
    "test", "predict", "prediction", "infer", "inference",
})
STEP_WORDS = frozenset({"step", "batch"})
# ... unless it builds or fetches the batch rather than running it (`get_train_batch`,
# `collate_eval_batch`)
BATCH_BUILDING_WORDS = frozenset({
    "get", "make", "build", "create", "collate", "load", "prepare", "sample", "generate", "split", "fetch", "next",
    "size", "sizes", "count", "num", "steps", "batches",
})


def _named_step(scope: Scope) -> str | None:
    words = set(name_words(scope.name))
    if words & PHASE_WORDS and words & STEP_WORDS and not words & BATCH_BUILDING_WORDS:
        return f"`{scope.name}` is named for one step of a phase: it runs once per batch"
    return None


def in_owner(method):
    """Answer a question about a scope in the analysis of the module that defines it: a
    function imported from another module of the project is summarised there, with that
    module's imports and bindings."""
    name = method.__name__

    @functools.wraps(method)
    def answer(self, scope, *args, **kwargs):
        owner = scope.owner
        if owner is not None and owner is not self:
            return getattr(owner, name)(scope, *args, **kwargs)
        return method(self, scope, *args, **kwargs)

    return answer


class SummaryQueries:
    # ------------------------------------------------------------------ resolving calls

    def called_function(self, call, ctx: Context, foreign: bool = True, mentioning: tuple = ()) -> Scope | None:
        """The scope of the project-defined function or method a call runs: ``helper(x)``
        (a module function or a closure in force at the call), ``self.method(x)`` /
        ``cls.method(x)`` (through the class and its bases), ``meter.update(x)`` on an instance
        of a project class; with ``foreign``, also functions and classes imported from other
        modules of the project (``compute_loss(...)`` after ``from .losses import
        compute_loss``, ``utils.step(...)`` after ``import utils``)."""
        func = call.func
        if type(func) is cst.Name:
            binding = self.lookup(func.value, ctx)
            if binding is not None and binding.kind == "def":
                return self.scopes.get(id(binding.value))
            if foreign and binding is not None and binding.kind == "import":
                found = self.project_definition(func.value, mentioning)
                return found if found is not None and found.kind == "function" else None
            return None
        if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value in ("self", "cls"):
            class_scope = ctx.scope.class_scope
            if class_scope is not None:
                return self.method_of(class_scope, func.attr.value, set(), foreign)
            return None
        if type(func) is cst.Attribute:  # meter.update(loss), with meter = AverageMeter()
            if foreign and type(func.value) is cst.Name:
                binding = self.lookup(func.value.value, ctx)
                if binding is not None and binding.kind == "import":  # utils.train_step(...)
                    found = self.project_definition(f"{func.value.value}.{func.attr.value}", mentioning)
                    return found if found is not None and found.kind == "function" else None
            class_scope = self.instance_class(func.value, ctx, foreign)
            if class_scope is not None:
                return self.method_of(class_scope, func.attr.value, set(), foreign)
        return None

    def project_definition(self, dotted: str, mentioning: tuple = ()) -> Scope | None:
        """The function or class that an imported name (``compute_loss``, ``models.Net``)
        refers to in another module of the project, if it is one (see ``project``). With
        ``mentioning``, only when that module's text contains one of those strings: a cheap
        test that spares analysing a module that cannot answer the question."""
        if not self.path or self.path.startswith("<"):
            return None
        root, _, rest = dotted.partition(".")
        target = self.imports.get(root)
        if target is None:
            return None
        if mentioning and dotted not in self.module_scope._memo.get("project", {}) and not any(
            project().mentions(self, dotted, text) for text in mentioning
        ):
            return None
        memo = self.module_scope._memo.setdefault("project", {})
        if dotted not in memo:
            memo[dotted] = project().definition(self, f"{target}.{rest}" if rest else target)
        found = memo[dotted]
        if found is not None:
            owner = found.owner
            self.project_dependencies[owner.path] = owner.digest
            self.project_dependencies.update(owner.project_dependencies)
            project().note(owner)
        return found

    def module_definition(self, name: str, hops: int = 0) -> Scope | None:
        """The function or class that the module-level name ``name`` is in this module, also
        through an import of it from another project module (a package's re-export)."""
        bindings = self.module_scope.bindings.get(name)
        if not bindings:
            # `from .base import *` in a package's __init__: the name may come from there
            for module in self.star_imports if hops <= 2 else ():
                found = project().definition(self, f"{module}.{name}", hops + 1)
                if found is not None:
                    return found
            return None
        binding = bindings[-1]
        if binding.kind in ("def", "class"):
            return self.scopes.get(id(binding.value))
        if binding.kind == "import" and name in self.imports:
            return project().definition(self, self.imports[name], hops)
        return None

    def instance_class(self, expr, ctx: Context, foreign: bool = True) -> Scope | None:
        """The scope of the project-defined class ``expr`` is an instance of, when its binding
        (``meter = AverageMeter()``, ``self.meter = Meter()`` anywhere in the class) says so;
        for ``meters[k]``, when the container holds instances of one class (``{k: Meter() for k
        in keys}``, ``defaultdict(Meter)``)."""
        if type(expr) is cst.Subscript:
            return self._element_class(expr.value, ctx, foreign)
        key = dotted_name(expr)
        if key is None:
            return None
        if not key.startswith("self."):
            latest = self.lookup(key, ctx)  # every reaching binding must be a call: check the cheap one first
            if latest is None or latest.kind != "assign" or latest.element or type(latest.value) is not cst.Call:
                return None
        bindings = self.reaching_bindings(key, ctx) if not key.startswith("self.") else []
        if not bindings and key.startswith("self.") and ctx.scope.class_scope is not None:
            bindings = [b for b in ctx.scope.class_scope.bindings.get(key, ()) if b.kind == "assign"]
        found = None
        for binding in bindings:
            value = binding.value if binding.kind == "assign" and not binding.element else None
            value = strip_pass_through(value) if value is not None else None  # EdgeModel(config).to(device)
            if type(value) is not cst.Call:
                return None
            scope = self.class_named(value.func, foreign)
            if scope is None or (found is not None and scope is not found):
                return None
            found = scope
        return found

    def _element_class(self, container, ctx: Context, foreign: bool) -> Scope | None:
        """The project class every element of the container ``container`` is an instance of,
        when its one binding builds it so: ``{k: Meter() for k in keys}``, ``[Meter() for _ in
        range(n)]``, ``OrderedDict([(k, Meter(k)) for k in keys])``, ``defaultdict(Meter)``."""
        key = dotted_name(container)
        if key is None:
            return None
        if key.startswith("self."):
            class_scope = ctx.scope.class_scope
            bindings = [b for b in class_scope.bindings.get(key, ()) if b.kind == "assign"] if class_scope else []
        else:
            bindings = self.reaching_bindings(key, ctx)
        if len(bindings) != 1 or bindings[0].kind != "assign" or bindings[0].element:
            return None
        value = bindings[0].value
        if type(value) is cst.Call and last_part(dotted_name(value.func) or "") in ("dict", "OrderedDict", "defaultdict") \
                and len(value.args) == 1 and not value.args[0].keyword:
            value = value.args[0].value
            if type(value) in (cst.Name, cst.Attribute):  # defaultdict(Meter)
                return self.class_named(value, foreign)
        if type(value) is cst.DictComp:
            element = value.value
        elif type(value) in (cst.ListComp, cst.GeneratorExp):
            element = value.elt
            if type(element) is cst.Tuple and len(element.elements) == 2:  # [(k, Meter()) for k in keys]
                element = element.elements[1].value
        else:
            return None
        return self.class_named(element.func, foreign) if type(element) is cst.Call else None

    def class_named(self, expr, foreign: bool = True) -> Scope | None:
        """The scope of the class that ``expr`` names: defined in this module, or (with
        ``foreign``) imported from another module of the project."""
        name = dotted_name(expr)
        if name is None:
            return None
        node = self.local_classes.get(name)
        if node is not None:
            return self.scopes.get(id(node))
        if foreign and name.partition(".")[0] in self.imports:
            found = self.project_definition(name)
            return found if found is not None and found.kind == "class" else None
        return None

    def stored_by_constructor(self, instance: str, attribute: str, ctx: Context):
        """The argument that built ``instance`` (a name bound to ``Evaluator(model, data)``, a
        project class) and that the class's ``__init__`` keeps as ``self.<attribute>`` as it is
        (``self.model = model``): the caller's expression for what the instance's methods call
        ``self.model``. None when unknown."""
        binding = self.lookup(instance, ctx)
        if binding is None or binding.kind != "assign" or binding.element:
            return None
        value = strip_pass_through(binding.value)
        class_scope = self.class_named(value.func) if type(value) is cst.Call else None
        init = None if class_scope is None else class_scope.owner.method_of(class_scope, "__init__", set())
        if init is None:
            return None
        kept = None
        for stmt, stmt_ctx in init.statements:
            if stmt_ctx.scope is not init or type(stmt) is not cst.Assign or len(stmt.targets) != 1:
                continue
            target = stmt.targets[0].target
            if type(target) is cst.Attribute and type(target.value) is cst.Name and target.value.value == "self" \
                    and target.attr.value == attribute:
                if kept is not None or type(stmt.value) is not cst.Name:
                    return None  # stored twice, or something built from it
                kept = stmt.value.value
        if kept is None or not any(b.kind == "param" for b in init.bindings.get(kept, ())):
            return None
        return passed_arguments(value, init, bound=True).get(kept)

    def methods_of_classes_named_like(self, name: str, method: str) -> list[Scope]:
        """The method ``method`` of every project class this module defines or imports whose
        name shares a word with ``name``: for a parameter ``trainer`` whose callers give no
        class away, the ``predict`` of ``Trainer`` and ``GraphTrainer``. Empty when one such
        class has no such method."""
        words = set(name_words(name)) - {"self", "obj", "object", "x", "m"}
        if not words:
            return []
        memo = self.module_scope._memo.setdefault("methods named like", {})
        if (name, method) in memo:
            return memo[name, method]
        found: list[Scope] = []
        candidates = list(self.local_classes) + [local for local, full in self.imports.items() if local == full.rpartition(".")[2]]
        for candidate in candidates:
            if not words & set(name_words(candidate)):
                continue
            class_scope = self.class_named(cst.Name(candidate))
            if class_scope is None:
                continue
            scope = class_scope.owner.method_of(class_scope, method, set())
            if scope is None:
                found = []
                break
            found.append(scope)
        memo[name, method] = found
        return found

    @in_owner
    def method_of(self, class_scope: Scope, name: str, seen: set, foreign: bool = True) -> Scope | None:
        """The method ``name`` of a class or of its bases defined in the project."""
        if id(class_scope) in seen:
            return None
        seen.add(id(class_scope))
        for binding in reversed(class_scope.bindings.get(name, ())):
            if binding.kind == "def":
                return self.scopes.get(id(binding.value))
        for base in class_scope.node.bases:
            base_scope = self.class_named(base.value, foreign)
            if base_scope is not None:
                found = self.method_of(base_scope, name, seen, foreign)
                if found is not None:
                    return found
        return None

    @in_owner
    def scope_calls(self, scope: Scope, foreign: bool = False) -> list[tuple[object, Context, Scope | None]]:
        """Every call in the function's own statements (its loops included, nested definitions
        not) with its context and the function of its module it runs, if any (with ``foreign``,
        also functions of other modules of the project: each such module is then analysed,
        so the questions that can ask a cheaper test first, like ``reaches_call``, do)."""
        memo = scope._memo
        key = "calls" if foreign else "local calls"
        if key not in memo:
            memo[key] = [
                (call, ctx, self.called_function(call, ctx, foreign))
                for stmt, ctx in scope.statements
                if ctx.scope is scope
                for call in self.calls_in(stmt)
            ]
        return memo[key]

    def callers_of(self, scope: Scope) -> list[tuple[object, Context]]:
        """The calls in this module that run the function (as ``called_function`` resolves
        them), with their contexts."""
        index = self.module_scope._memo.get("callers")
        if index is None:
            index = self.module_scope._memo["callers"] = {}
            for caller in [self.module_scope, *self.scopes.values()]:
                if caller.kind == "class":
                    continue
                for call, ctx, callee in self.scope_calls(caller, foreign=False):
                    if callee is not None:
                        index.setdefault(id(callee), []).append((call, ctx))
        return index.get(id(scope), [])

    @staticmethod
    def has_no_body(scope: Scope) -> bool:
        """Is the function a stub its subclasses implement: nothing but a docstring, ``...``,
        ``pass``, ``return None`` or ``raise NotImplementedError``?"""
        body = scope.node.body
        statements = body.body if type(body) is cst.IndentedBlock else [body]
        for line in statements:
            for small in getattr(line, "body", ()) if type(line) in (cst.SimpleStatementLine, cst.SimpleStatementSuite) else [line]:
                kind = type(small)
                if kind is cst.Pass or kind is cst.Expr and type(small.value) in (cst.Ellipsis, cst.SimpleString, cst.ConcatenatedString):
                    continue
                if kind is cst.Return and (small.value is None or type(small.value) is cst.Name and small.value.value == "None"):
                    continue
                if kind is cst.Raise and small.exc is not None:
                    raised = small.exc.func if type(small.exc) is cst.Call else small.exc
                    if dotted_name(raised) == "NotImplementedError":
                        continue
                return False
        return True

    def overriding_methods(self, scope: Scope) -> list[Scope]:
        """The methods of this module's direct subclasses that override the method ``scope``
        (``predict_w.apply_model`` for the template ``predict.apply_model``)."""
        parent = scope.parent
        if parent is None or parent.kind != "class" or scope.owner is not self:
            return []
        found = []
        for class_name, node in self.local_classes.items():
            if not any(dotted_name(base.value) == parent.name for base in node.bases):
                continue
            subclass = self.scopes.get(id(node))
            for binding in subclass.bindings.get(scope.name, ()) if subclass is not None else ():
                method = self.scopes.get(id(binding.value)) if binding.kind == "def" else None
                if method is not None and method.parent is subclass:
                    found.append(method)
        return found

    def overrides_external_hook(self, scope: Scope) -> bool:
        """Is the function a method of a class with a base defined elsewhere, and never called
        in this module? Then a framework calls it, and owns its grad mode."""
        parent = scope.parent
        if parent is None or parent.kind != "class" or self.callers_of(scope):
            return False
        return self.bases_may_call(parent, scope.name, set())

    @in_owner
    def bases_may_call(self, class_scope: Scope, name: str, seen: set) -> bool:
        """May a base class call the method ``name`` on its own: a base outside the project
        (a framework's, other than ``nn.Module`` and ``object``), or a project base class
        (in this module or another) whose methods call ``self.name(...)``?"""
        for base_scope in self._bases_to_ask(class_scope, seen, name):
            if base_scope is None:
                return True
            if self.calls_own_method(base_scope, name) or self.bases_may_call(base_scope, name, seen):
                return True
        return False

    def _bases_to_ask(self, class_scope: Scope, seen: set, method: str | None = None):
        """The class scope of each base of the class other than ``nn.Module`` and ``object``
        (``Generic[T]`` read as ``Generic``) not in ``seen`` (which it joins), or None for a base
        torchlint cannot read. With ``method``, a project base too large to analyse whose
        modules never write ``method(`` is left out: it cannot call it."""
        for base in class_scope.node.bases:
            expr = base.value.value if type(base.value) is cst.Subscript else base.value
            base_name = dotted_name(expr) or ""
            if base_name in NEUTRAL_BASES or (self.qualified_name(expr) or "") in NEUTRAL_BASES:
                continue
            base_scope = self.class_named(expr)
            if base_scope is not None:
                if id(base_scope) in seen:
                    continue
                seen.add(id(base_scope))
            elif base_name.endswith("Mixin"):
                continue  # a library's mixin lends methods (`PeftAdapterMixin`); it does not drive the class
            elif method is not None and base_name.partition(".")[0] in self.imports and not project().class_may_call(
                    self.path, self.imports, base_name, method):
                continue
            yield base_scope

    @in_owner
    def bases_call_without_grad(self, class_scope: Scope, name: str, seen: set) -> bool | None:
        """Do the class's bases, all defined in the project, call ``self.name(...)``, and only
        with grad disabled? (Then an override runs without grad, whoever starts the base.)
        None when no base calls it; False when one calls it with grad, or a base is a
        framework's class, whose calls torchlint cannot see."""
        found = None
        for base_scope in self._bases_to_ask(class_scope, seen, name):
            if base_scope is None:
                return False
            owner = base_scope.owner
            own = owner.own_method_calls(base_scope, name)
            answer = all(own) if own else owner.bases_call_without_grad(base_scope, name, seen)
            if answer is False:
                return False
            found = found or answer
        return found

    @in_owner
    def own_method_calls(self, class_scope: Scope, name: str) -> list[bool]:
        """For each ``self.name(...)`` in the class's methods: is grad disabled there (by its
        context, or by every caller of the method that makes it)?"""
        return [
            ctx.grad is GradMode.DISABLED or (ctx.grad is GradMode.ENABLED and self.all_calls_grad_disabled(method))
            for method, ctx in self._self_calls(class_scope, name)
        ]

    @in_owner
    def calls_own_method(self, class_scope: Scope, name: str) -> bool:
        """Does a method of the class call ``self.name(...)`` with grad disabled? (A base
        class's ``__call__`` that calls ``self.infer(x)`` with grad on leaves the mode as it is:
        the override is not run under a mode torchlint cannot see.)"""
        return any(ctx.grad is not GradMode.ENABLED for _, ctx in self._self_calls(class_scope, name))

    def _self_calls(self, class_scope: Scope, name: str):
        """(method, context) of each ``self.name(...)`` in the methods of the class."""
        for method, ctx, call in self.class_calls(class_scope):
            func = call.func
            if type(func) is cst.Attribute and func.attr.value == name \
                    and type(func.value) is cst.Name and func.value.value == "self":
                yield method, ctx

    def class_calls(self, class_scope: Scope):
        """(method, context, call) of every call in the methods of the class (their own
        statements, not nested functions')."""
        for method in self.scopes.values():
            if method.kind != "function" or method.class_scope is not class_scope:
                continue
            for stmt, ctx in method.statements:
                if ctx.scope is method:
                    for call in self.calls_in(stmt):
                        yield method, ctx, call

    def calls_from_importers(self, function: Scope):
        """(importer, call, context, callee) for each call of ``function``, a module-level
        function of this module, in the project modules that import it (``Project.importers``);
        ``callee`` is None for a call through ``from module import *``."""
        if not self.path or self.path.startswith("<") or function.parent is not self.module_scope:
            return
        here = os.path.abspath(self.path)
        stem = os.path.splitext(os.path.basename(here))[0]
        for importer in project().importers(here, function.name):
            star = f"from {stem} import *" in (importer.source or "")
            for statements in importer.statements_by_type.values():
                for stmt, ctx in statements:
                    for call in importer.calls_in(stmt):
                        if call_name(call) != function.name:
                            continue
                        callee = importer.called_function(call, ctx)
                        if callee is not None:
                            if callee.name != function.name or os.path.abspath(callee.owner.path or "") != here:
                                continue
                        elif not (star and type(call.func) is cst.Name and importer.lookup(function.name, ctx) is None):
                            continue
                        yield importer, call, ctx, callee

    # ------------------------------------------------------------------ summaries

    @in_owner
    def reaches_call(self, scope: Scope, question: str, depth: int = 0) -> bool:
        """Does running the function make a call for which the predicate ``question`` names
        (``REACHED_CALLS``) holds, in its own body or in a project-defined function it calls
        (to ``MAX_CALL_DEPTH``)?"""
        memo = scope._memo
        key = ("reaches", question)
        if key in memo:
            return memo[key]
        if depth > MAX_CALL_DEPTH:
            return False
        predicate = getattr(self, REACHED_CALLS[question])
        memo[key] = False  # recursion resolves to "no"
        result = False
        mentioning = REACHED_TEXT[question]
        for call, ctx, callee in self.scope_calls(scope, foreign=False):
            if callee is None:  # a function of another project module that can reach it at all
                callee = self.called_function(call, ctx, True, mentioning)
            if predicate(call, ctx) or (
                callee is not None and callee is not scope
                and self.reaches_call(callee, question, depth + 1)
            ):
                result = True
                break
        memo[key] = result
        return result

    def makes_call_itself(self, scope: Scope, question: str) -> bool:
        """``reaches_call`` for the function's own statements only, not the functions it calls
        (an agent's ``step()`` that trains only through ``self.train()``)."""
        predicate = getattr(self, REACHED_CALLS[question])
        return any(predicate(call, ctx) for call, ctx, _ in self.scope_calls(scope, foreign=False))

    def call_reaches(self, call, ctx: Context, question: str) -> bool:
        """Does this call run a project-defined function that reaches ``question``?"""
        callee = self.called_function(call, ctx)
        return callee is not None and self.reaches_call(callee, question)

    def _is_unscale_call(self, call, ctx: Context) -> bool:
        return "unscale" in (dotted_name(call.func) or "").lower()  # scaler.unscale_(opt)

    def _is_update_call(self, call, ctx: Context) -> bool:
        return call_name(call) == "update"  # scaler.update()

    def backpropagates(self, scope: Scope) -> bool:
        return self.reaches_call(scope, "backward")

    def _is_backward_call(self, call, ctx: Context) -> bool:
        name = call_name(call)
        if name in ("backward", "manual_backward"):
            # (a project's own `backward` method, a diffusion sampler's reverse step, runs
            # backward() only if its body does: that is asked of the callee)
            return self.called_function(call, ctx, foreign=False) is None
        if name == "step" or (name is not None and "scaler" in name.lower()):
            return self.steps_on_a_loss(call, ctx)
        return name == "grad" and self.qualified_name(call.func) == "torch.autograd.grad"

    def _is_step_call(self, call, ctx: Context) -> bool:
        return self.stepped_optimizer(call, ctx) is not None or self.scales_and_steps(call, ctx)

    def _is_clearing_call(self, call, ctx: Context) -> bool:
        return is_clearing_call_name(call_name(call) or "")

    def steps_optimizer(self, scope: Scope) -> bool:
        return self.reaches_call(scope, "step")

    def clears_gradients(self, scope: Scope) -> bool:
        return self.reaches_call(scope, "clear")

    @in_owner
    def returns_attached(self, scope: Scope) -> str | None:
        """``"always"`` when the function returns a value attached to the graph whatever its
        arguments, ``"arguments"`` when it does if an argument is a module that it calls
        (``def run(net, x): return net(x)``), None when it returns nothing attached."""
        memo = scope._memo
        if "returns_attached" in memo:
            return memo["returns_attached"]
        memo["returns_attached"] = None  # recursion resolves to "not attached"
        values = self._computed_return_values(scope)
        result = None
        if values:
            if self._returns_attached_under(scope, values, hypothesis=False):
                result = "always"
            elif self._returns_attached_under(scope, values, hypothesis=True):
                result = "arguments"
        memo["returns_attached"] = result
        return result

    @in_owner
    def passes_tensors_through(self, scope: Scope) -> bool:
        """Does the function return a graph-attached value when its tensor arguments are
        attached (``def masked_mean(x, m): return (x * m).sum() / m.sum()``, ``def
        logprobs(logits, y): return F.log_softmax(logits, -1).gather(...)``)? Asked only of
        functions that return nothing attached otherwise."""
        memo = scope._memo
        if "passes_tensors" not in memo:
            memo["passes_tensors"] = False  # recursion resolves to "no"
            if DETACHING_HELPER_WORDS.isdisjoint(name_words(scope.name)):
                values = self._computed_return_values(scope)
                memo["passes_tensors"] = self._under_tensor_hypothesis(
                    scope, lambda: any(self.is_attached(value, ctx) for value, ctx in values))
        return memo["passes_tensors"]

    def _computed_return_values(self, scope: Scope) -> list[tuple[object, Context]]:
        """Returned values other than a parameter handed back unchanged next to other returns
        (``else: return x`` in a ``detach(x)`` helper that detaches tensors and passes anything
        else through)."""
        values = self.returned_return_values(scope)
        params = {key for key, bindings in scope.bindings.items() if any(b.kind == "param" for b in bindings)}
        computed = [(value, ctx) for value, ctx in values if not (type(value) is cst.Name and value.value in params)]
        return computed if computed else values

    def _under_tensor_hypothesis(self, scope: Scope, question):
        saved = self._tensor_hypothesis, self._attached_memo
        self._tensor_hypothesis, self._attached_memo = scope, {}
        try:
            return question()
        finally:
            self._tensor_hypothesis, self._attached_memo = saved

    @in_owner
    def passes_tensors_to_element(self, scope: Scope, index: int) -> bool:
        """``passes_tensors_through`` for element ``index`` of the tuple every return returns."""
        memo = scope._memo.setdefault("passes_tensors_element", {})
        if index not in memo:
            memo[index] = False
            values = self.returned_return_values(scope)
            if not DETACHING_HELPER_WORDS.isdisjoint(name_words(scope.name)):
                return False
            memo[index] = self._under_tensor_hypothesis(scope, lambda: self._elements_attached(values, index))
        return memo[index]

    def returned_return_values(self, scope: Scope) -> list[tuple[object, Context]]:
        """The values of the function's own ``return`` statements with their contexts."""
        return [
            (stmt.value, ctx) for stmt, ctx in scope.statements
            if ctx.scope is scope and type(stmt) is cst.Return and stmt.value is not None
        ]

    def _returns_attached_under(self, scope: Scope, values, hypothesis: bool) -> bool:
        """Attachment of the returned values; with ``hypothesis``, every parameter of the
        function counts as a module (calling it is a forward pass)."""
        saved = self._hypothesis, self._attached_memo, self._module_memo
        self._hypothesis = scope if hypothesis else None
        self._attached_memo, self._module_memo = {}, {}
        try:
            return any(self.is_attached(value, ctx) for value, ctx in values)
        finally:
            self._hypothesis, self._attached_memo, self._module_memo = saved

    def returned_element_attached(self, scope: Scope, index: int, call, ctx: Context) -> bool:
        """For ``a, b = f(...)``: is element ``index`` of what ``f`` returns attached? Decided
        per element where every return statement returns a tuple literal long enough."""
        values = self.returned_return_values(scope)
        if not values or index < 0 or not all(
            type(value) is cst.Tuple and len(value.elements) > index for value, _ in values
        ):
            return self.call_returns_attached(call, ctx)
        if scope.owner._elements_attached(values, index):
            return True
        return any(self._attached(arg.value, ctx) for arg in call.args) and self.passes_tensors_to_element(scope, index)

    def _elements_attached(self, values, index: int) -> bool:
        return any(self.is_attached(value.elements[index].value, value_ctx) for value, value_ctx in values)

    def parameter_hypothesis(self, binding) -> bool:
        """Is ``binding`` a parameter of the function whose summary is being computed under the
        hypothesis that its arguments are modules?"""
        return binding.kind == "param" and self._hypothesis is not None and binding.ctx.scope is self._hypothesis

    def call_returns_attached(self, call, ctx: Context) -> bool:
        """Does a call of a module-defined function return a graph-attached value here?"""
        callee = self.called_function(call, ctx)
        if callee is None or callee.grad is not callee.grad.ENABLED:
            return False
        summary = self.returns_attached(callee)
        if summary == "always":
            return True
        arguments = [arg.value for arg in call.args]
        if summary == "arguments":
            receiver = [call.func.value] if type(call.func) is cst.Attribute else []  # self.helper(x): self may be the module
            if any(self.is_module(argument, ctx) for argument in arguments + receiver):
                return True
        # a helper computing on attached tensors: `masked_mean(loss, mask)`
        return any(self._attached(argument, ctx) for argument in arguments) and self.passes_tensors_through(callee)

    def argument_attached(self, binding) -> bool:
        """Is the parameter ``binding`` given a graph-attached argument by a loop of this
        module that calls its function (``record(loss)`` in a training loop)?"""
        scope = binding.ctx.scope
        loop = self.loops.get(id(scope.node)) if scope.kind == "function" else None
        if loop is None or not loop.callers:
            return False
        params = scope.node.params
        names = [param.name.value for param in (*params.posonly_params, *params.params)]
        for call, caller_ctx in loop.callers:
            if type(call.func) is cst.Attribute and names[:1] in (["self"], ["cls"]):
                positional_names = names[1:]
            else:
                positional_names = names
            for index, arg in enumerate(call.args):
                if arg.star:
                    continue
                name = arg.keyword.value if arg.keyword is not None else (
                    positional_names[index] if index < len(positional_names) else None)
                if name == binding.key and self._attached(arg.value, caller_ctx) and self.grad_enabled(caller_ctx):
                    return True
        return False

    # ------------------------------------------------------------------ per-step functions

    def install_implicit_loops(self) -> None:
        """Give every per-step function an implicit loop around its body (see ``Loop``)."""
        functions = [scope for scope in self.scopes.values() if scope.kind == "function"]
        if not functions or self.is_test_module:
            return  # a test's loops go over cases, not steps
        reasons: dict[int, str] = {}
        callers: dict[int, list] = {}
        for scope in functions:
            hook = self._framework_hook(scope) or self._inherited_step_method(scope) or _named_step(scope)
            if hook is not None:
                reasons[id(scope)] = hook
        for scope, kind in self._registered_hooks():
            reasons.setdefault(id(scope), f"registered as a {kind} hook: it runs on every pass")
        # functions a loop calls, then the functions those call, to a bounded depth
        for loop in self.loops.values():
            for stmt, ctx in self.statements_in_loop(loop):
                for call in self.calls_in(stmt):
                    callee = self.called_function(call, ctx, foreign=False)
                    if callee is not None and callee is not ctx.scope:
                        callers.setdefault(id(callee), []).append((call, ctx))
                        if id(callee) not in reasons:
                            reasons[id(callee)] = f"called in a loop in `{ctx.scope.name}`"
        pending = [(scope, 0) for scope in functions if id(scope) in reasons]
        while pending:
            scope, depth = pending.pop()
            if depth >= MAX_CALL_DEPTH:
                continue
            for call, ctx, callee in self.scope_calls(scope, foreign=False):
                if callee is None or callee is scope:
                    continue
                callers.setdefault(id(callee), []).append((call, ctx))
                if id(callee) not in reasons:
                    reasons[id(callee)] = f"called by per-step `{scope.name}`"
                    pending.append((callee, depth + 1))
        for scope in functions:
            reason = reasons.get(id(scope))
            if reason is None:
                continue
            loop = self._implicit_loop(scope, reason)
            loop.callers = callers.get(id(scope), [])

    def _registered_hooks(self) -> list[tuple[Scope, str]]:
        """The functions of this module registered as module or tensor hooks
        (``layer.register_forward_hook(self.save_activation)``), each with its kind: "forward"
        (forward and forward-pre hooks) or "backward". Memoised."""
        memo = self.module_scope._memo
        if "registered hooks" in memo:
            return memo["registered hooks"]
        found = memo["registered hooks"] = []
        if not any(self.may_contain(name) for name in HOOK_REGISTRATIONS):
            return found  # (call_name is the method's name as written: "register_" alone is every @register_model)
        for stmt, ctx in self.statements_by_type.get("Expr", []) + self.statements_by_type.get("Assign", []):
            for call in self.calls_in(stmt):
                kind = HOOK_REGISTRATIONS.get(call_name(call) or "")
                if kind is None or not call.args:
                    continue
                hook = call.args[0].value
                if type(hook) is cst.Call and dotted_name(hook.func) in ("partial", "functools.partial") and hook.args:
                    hook = hook.args[0].value
                scope = None
                if type(hook) is cst.Name:
                    binding = self.lookup(hook.value, ctx)
                    scope = self.scopes.get(id(binding.value)) if binding is not None and binding.kind == "def" else None
                elif type(hook) is cst.Attribute and type(hook.value) is cst.Name and hook.value.value == "self" \
                        and ctx.scope.class_scope is not None:
                    scope = self.method_of(ctx.scope.class_scope, hook.attr.value, set(), False)
                if scope is not None and scope.kind == "function":
                    found.append((scope, kind))
        return found

    def forward_hook_tensor(self, binding) -> bool:
        """Is the parameter ``binding`` the input or output a forward hook receives, in a module
        that also registers backward hooks or backpropagates (Grad-CAM's activations and
        gradients): the forward it hooks runs with autograd recording, so what it gets is
        attached."""
        scope = binding.ctx.scope
        if binding.key in ("self", "cls") or not self.may_contain("register_"):
            return False
        hooks = self._registered_hooks()
        if not any(hooked is scope and kind == "forward" for hooked, kind in hooks):
            return False
        params = scope.node.params
        names = [param.name.value for param in (*params.posonly_params, *params.params) if param.name.value not in ("self", "cls")]
        if not names or binding.key == names[0]:
            return False  # the module itself
        return any(kind == "backward" for _, kind in hooks) or self.may_contain(".backward(")

    def _framework_hook(self, scope: Scope) -> str | None:
        parent = scope.parent
        if parent is None or parent.kind != "class":
            return None
        name = scope.name
        if name in PER_STEP_HOOKS:
            return f"`{name}` runs every step ({PER_STEP_HOOKS[name]})"
        if name in FORWARD_METHODS and self.is_module_class(parent.node.name):
            return "a module's `forward` runs every step"
        if name in AVERAGE_UPDATE_METHODS and _names_moving_average(parent.name):
            return f"`{parent.name}.{name}` runs after every optimizer step (a moving average of the weights)"
        return None

    def _inherited_step_method(self, scope: Scope) -> str | None:
        """A method that a base class (in this module or another of the project) calls on
        ``self`` inside a step loop: ``BaseTrainer.fit`` looping ``self.train_step(batch)``
        makes every subclass's ``train_step`` per-step code."""
        parent = scope.parent
        if parent is None or parent.kind != "class":
            return None
        needle = f"self.{scope.name}("
        for base in parent.node.bases:
            name = dotted_name(base.value)
            if name is None:
                continue
            if name not in self.local_classes and not project().mentions(self, name, needle):
                continue  # the base's module never calls it: no need to analyse that module
            base_scope = self.class_named(base.value)
            if base_scope is not None:
                where = self.loop_called_methods(base_scope).get(scope.name)
                if where is not None:
                    return f"called in a loop in `{where}`"
        return None

    @in_owner
    def loop_called_methods(self, class_scope: Scope) -> dict[str, str]:
        """The methods that the class's own methods, or its bases', call on ``self`` inside a
        loop over steps, each with the ``Class.method`` holding that loop."""
        memo = class_scope._memo
        if "loop_called" in memo:
            return memo["loop_called"]
        memo["loop_called"] = found = {}
        for base in class_scope.node.bases:
            base_scope = self.class_named(base.value)
            if base_scope is not None:
                for name, where in self.loop_called_methods(base_scope).items():
                    found.setdefault(name, where)
        for bindings in list(class_scope.bindings.values()):
            for binding in bindings:
                scope = self.scopes.get(id(binding.value)) if binding.kind == "def" else None
                if scope is None or scope.parent is not class_scope:
                    continue
                for stmt, ctx in scope.statements:
                    loop = ctx.loop
                    if ctx.scope is not scope or loop is None or loop.implicit is not None:
                        continue
                    if not (self.header_names_steps(loop) or self.is_step_loop(loop)):
                        continue
                    for call in self.calls_in(stmt):
                        func = call.func
                        if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
                            found.setdefault(func.attr.value, f"{class_scope.name}.{scope.name}")
        return found

    def _implicit_loop(self, scope: Scope, reason: str) -> Loop:
        node = scope.node
        own = [ctx for _, ctx in scope.statements]
        params = [b.ctx for bindings in scope.bindings.values() for b in bindings if b.kind == "param"]
        start = min((ctx.order for ctx in own + params), default=0) - 1
        loop = Loop(node, scope, start, implicit=reason)
        loop.end = max((ctx.order for ctx in own), default=start)
        self.loops[id(node)] = loop
        seen = set()
        for ctx in own + params:
            if id(ctx) not in seen:
                seen.add(id(ctx))
                ctx.loops = (loop,) + ctx.loops
        return loop

    def implicit_step_loop(self, loop: Loop) -> bool:
        """Does an implicit loop make steps: a framework's per-step hook, or a function called
        on every iteration of a loop that makes steps?"""
        if loop.implicit is None:
            return False
        if not loop.callers:
            return True  # a framework hook
        return any(
            (self.runs_every_iteration(ctx) or self._process_guard(ctx, ctx.loop)) and self.is_step_loop(ctx.loop)
            for _, ctx in loop.callers if ctx.loop is not None
        )  # (`if self.group_all: ... else: sample_and_group(...)`: a configuration, the same every step)
