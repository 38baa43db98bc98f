"""What a value is, by evidence: a module (a forward pass when called), an optimizer, a grad
scaler."""

from __future__ import annotations

import re

from torchlint.analysis.arguments import passed_arguments
from torchlint.analysis.project import project


from torchlint.lazy import cst
from torchlint.analysis.vocabulary import is_clearing_call_name, GRAD_OVERWRITING_METHODS, MODULE_CLASS_RE, NEUTRAL_BASES, NOT_OPTIMIZER_WORDS, OPTIMIZER_CLASSES, OPTIMIZER_CLASS_RE, is_conventional_module_name, looks_like_optimizer, name_words
from torchlint.analysis.syntax import is_view_subscript, iter_expression_nodes, key_node, key_within, mentioned_keys, parameter_node, _del_targets, _is_grad_attribute, _is_grad_chain, call_arguments, call_name, dotted_name, keyword_argument, last_part, strip_pass_through
from torchlint.analysis.scopes import Binding, Context, Loop, Scope
from torchlint.analysis.vocabulary import (
    MODULE_EVIDENCE_METHODS, MODULE_FACTORY_QUALIFIED, MODULE_FACTORY_RE,
)

# receivers of those methods that are not modules: torch itself, data and frames
NOT_MODULE_RECEIVERS = frozenset({"torch", "self", "np", "numpy", "pd", "df", "dataset", "data"})


# Hugging Face's from_pretrained also builds what is no model.
NOT_A_MODEL_FACTORY_RE = re.compile(r"Tokenizer|Processor|FeatureExtractor|Config|Scheduler|Pipeline", re.I)


class ModuleQueries:
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
        if binding is None and "." in key:
            root = self.lookup(key.partition(".")[0], ctx)
            if root is not None and root.kind == "import":
                return False  # a library's function (`idist.auto_model(model)`), not a model
        if key == "self":
            # a module's own methods: self(x) is its forward pass
            class_scope = ctx.scope.class_scope
            return class_scope is not None and class_scope.owner._local_class_is_module(class_scope.name, set())
        if binding is not None and self.parameter_hypothesis(binding):
            return True
        if self.has_module_evidence(key, ctx):
            return True
        if binding is not None and binding.kind == "param" and key == binding.key \
                and self._handed_a_module(binding, elsewhere=False):
            return True  # `make_img(loader, G, z)` called with `G = model.Generator()`
        if binding is not None and binding.kind in ("assign", "for"):
            memo = self._module_memo
            if id(binding) not in memo:
                memo[id(binding)] = False
                memo[id(binding)] = self._binding_is_module(binding) if binding.kind == "assign" \
                    else self._iterates_modules(binding.value, binding.element, binding.ctx)
            if memo[id(binding)]:
                return True
        return is_conventional_module_name(last_part(key))

    def _iterates_modules(self, iterable, element: tuple[int, ...], ctx: Context) -> bool:
        """Does ``for <target> in iterable`` give modules at ``element``: ``self.blocks`` built as
        an ``nn.ModuleList`` / ``nn.Sequential`` or a list of layers, ``model.children()``,
        ``enumerate(self.layers)``?"""
        if type(iterable) is cst.Call:
            func, arguments = iterable.func, call_arguments(iterable)
            if type(func) is cst.Attribute and func.attr.value in ("children", "modules"):
                return not element
            name = dotted_name(func)
            if name in ("reversed", "list", "tuple") and arguments:
                return self._iterates_modules(arguments[0], element, ctx)
            if name == "enumerate" and arguments and element[:1] == (1,):
                return self._iterates_modules(arguments[0], element[1:], ctx)
            if name == "zip" and element and 0 <= element[0] < len(arguments):
                return self._iterates_modules(arguments[element[0]], element[1:], ctx)
            return False
        if element:
            return False
        key = dotted_name(iterable)
        if key is None:
            return False
        owner, _, attribute = key.rpartition(".")
        if owner and owner != "self" and not owner.startswith("self.") and self.is_module_by_evidence_or_build(owner, ctx):
            return True  # for mi in detect.m: the layer list of a module built or picked out of a model
        if not key.startswith("self.") or ctx.scope.class_scope is None:
            return False
        class_scope = ctx.scope.class_scope
        values = [b.value for b in class_scope.bindings.get(key, ()) if b.kind == "assign" and not b.element]
        values += [b.value.value for b in class_scope.bindings.get(key, ()) if b.kind == "augassign"]
        values += list(class_scope.stores.get(key, ()))
        return any(self._holds_modules(value, ctx) for value in values)

    def is_module_by_evidence_or_build(self, key: str, ctx: Context) -> bool:
        """``key`` is a module by evidence, or was picked out of one (``m = self.model[-1]``)."""
        binding = self.lookup(key, ctx)
        if binding is not None and binding.kind == "assign" and not binding.element and type(binding.value) is cst.Subscript:
            return self.is_module(binding.value.value, binding.ctx)
        node = key_node(key)
        return node is not None and self.is_module_by_evidence(node, ctx)

    def _holds_modules(self, value, ctx: Context) -> bool:
        """``nn.ModuleList([...])``, ``nn.Sequential(...)``, ``[Block(...) for _ in range(n)]``,
        ``[Layer(a, b)]``, or a single module appended to the container."""
        value = strip_pass_through(value)  # Layer(a, b).cuda()
        kind = type(value)
        if kind is cst.Call:  # nn.ModuleList(...), nn.Sequential(...), Block(...)
            return self.is_module_class(value.func)
        if kind in (cst.List, cst.Tuple):
            return bool(value.elements) and all(self._holds_modules(item.value, ctx) for item in value.elements)
        if kind in (cst.ListComp, cst.GeneratorExp):
            return self._holds_modules(value.elt, ctx)
        if kind is cst.BinaryOperation and type(value.operator) is cst.Add:  # self.layers + [Layer(...)]
            return self._holds_modules(value.left, ctx) or self._holds_modules(value.right, ctx)
        return False

    def _binding_is_module(self, binding: Binding) -> bool:
        if binding.kind == "param":
            return False
        if binding.kind != "assign":
            return False
        value = _element_value(binding)
        if value is None:
            return False
        if type(value) is cst.IfExp:  # nn.DataParallel(net) if multi_gpu else net
            return self._value_is_module(value.body, binding.ctx) or self._value_is_module(value.orelse, binding.ctx)
        return self._value_is_module(value, binding.ctx)

    def _value_is_module(self, value, ctx: Context) -> bool:
        # Net().to(device).eval() is still the module
        value = strip_pass_through(value)
        if type(value) is not cst.Call:
            return type(value) in (cst.Name, cst.Attribute) and self.is_module(value, ctx)
        if self.is_module_factory(value, ctx):
            return True
        return self.is_module_class(value.func) or (
            self.qualified_name(value.func) == "torch.compile" and bool(value.args)
            and self.is_module(value.args[0].value, ctx)
        )

    def is_module_by_evidence(self, expr, ctx: Context) -> bool:
        """Is ``expr`` a module by more than its name: it receives a method only modules have
        (``net.eval()``), it was built by a module class or factory, or it is a module's ``self``?"""
        key = dotted_name(expr)
        if key is None:
            return False
        if key == "self":
            class_scope = ctx.scope.class_scope
            return class_scope is not None and class_scope.owner._local_class_is_module(class_scope.name, set())
        if self.has_module_evidence(key, ctx):
            return True
        binding = self.lookup(key, ctx)
        if binding is not None and binding.kind == "param":
            return self._annotated_module(binding) or (key == binding.key and self._handed_a_module(binding))
        if binding is None or binding.kind != "assign" or _element_value(binding) is None:
            return False
        value = strip_pass_through(_element_value(binding))
        if type(value) is cst.Name and key.startswith("self.") and binding.ctx.scope.name == "__init__":
            return self.is_module_by_evidence(value, binding.ctx)  # `self.fn = fn`: what constructions hand it
        if type(value) is not cst.Call and dotted_name(value) == key:
            # `self.model = self.model.to(device)`, `net = net.to(device)`: what it was built as before
            if key.startswith("self.") and ctx.scope.class_scope is not None:
                candidates = ctx.scope.class_scope.bindings.get(key, ())
            else:
                candidates = [other for other in binding.ctx.scope.bindings.get(key, ()) if other.ctx.order < binding.ctx.order]
            earlier = [other for other in candidates
                       if other.kind == "assign" and not other.element
                       and type(strip_pass_through(other.value)) is cst.Call]
            if not earlier:
                return False
            binding, value = earlier[-1], strip_pass_through(earlier[-1].value)
        if type(value) is not cst.Call:
            return False
        if self.is_module_factory(value, binding.ctx):
            return True
        if _moved_instance(_element_value(binding)):
            return True  # `SRCNN().to(device)`: an instance of a class, moved to a device
        # built by a class that is a module for certain, not one merely named like a model
        # (coremltools' MLModel, sklearn's LinearModel)
        name = dotted_name(value.func) or ""
        if (self.qualified_name(value.func) or "").startswith("torch.nn."):
            return True
        if "." not in name and name in self.local_classes:
            return self._local_class_is_module(name, set())
        return self._project_class_is_module(name) if name else False

    def _handed_a_module(self, binding, elsewhere: bool = True) -> bool:
        """Does every call of the function in this module hand this parameter a module by evidence
        (``infer(path, text, model)`` after ``model = load_model(ckpt)``), or, when this module
        never calls it and ``elsewhere`` is set, every call in the modules that import it?
        Memoised; recursion
        (a caller's own parameter asked again) resolves to no."""
        memo = self._module_memo
        key = ("handed", id(binding), elsewhere)
        if key in memo:
            return memo[key]
        memo[key] = False
        function = binding.ctx.scope
        calls = self.callers_of(function) if function.kind == "function" else []
        if not calls and function.name == "__init__":  # `ResidualAdd(nn.Sequential(...))`
            arguments = self.constructor_arguments(binding, binding.key) or ()
            memo[key] = bool(arguments) and all(self._module_value(argument, ctx) for argument, ctx in arguments)
            return memo[key]
        if not calls:  # (`elsewhere`: then ask the modules that import it)
            memo[key] = elsewhere and self._handed_a_module_elsewhere(function, binding.key)
            return memo[key]
        arguments = [(passed_arguments(call, function).get(binding.key), ctx) for call, ctx in calls]
        memo[key] = bool(arguments) and all(
            argument is not None and self.is_module_by_evidence(argument, ctx) for argument, ctx in arguments)
        return memo[key]

    def constructor_arguments(self, binding, name: str) -> list | None:
        """(argument, context) of the ``__init__`` parameter ``name`` at every construction of
        its class in this module (``ResidualAdd(nn.Sequential(...))`` for ``self.fn = fn``), or
        None: ``binding`` is not in an ``__init__``, ``name`` is not its parameter, the module
        never constructs the class, or a construction leaves the parameter unknown."""
        init = binding.ctx.scope
        if init.kind != "function" or init.name != "__init__" or init.parent is None or init.parent.kind != "class":
            return None
        if not any(b.kind == "param" for b in init.bindings.get(name, ())):
            return None
        memo = self._module_memo
        key = ("constructed", id(init), name)
        if key not in memo:
            memo[key] = None
            found = []
            for call, ctx in self.constructions(init.parent.name):
                argument = passed_arguments(call, init, bound=True).get(name)
                if argument is None:
                    return None
                found.append((argument, ctx))
            memo[key] = found or None
        return memo[key]

    def constructions(self, class_name: str) -> list:
        """(call, context) of every call in this module that names the local class
        ``class_name`` (``Block(dim)``, not ``other.Block(dim)``)."""
        index = self.module_scope._memo.get("constructions")
        if index is None:
            index = self.module_scope._memo["constructions"] = {}
            for scope in [self.module_scope, *self.scopes.values()]:
                if scope.kind == "class":
                    continue
                for call, ctx, _ in self.scope_calls(scope, foreign=False):  # (the walk callers_of shares)
                    if type(call.func) is cst.Name and call.func.value in self.local_classes:
                        index.setdefault(call.func.value, []).append((call, ctx))
        return index.get(class_name, [])

    def _module_value(self, value, ctx: Context) -> bool:
        """Is the expression a module by evidence: built by a module class (``nn.Sequential(...)``,
        ``Block(d)``) or a name that is one by evidence?"""
        value = strip_pass_through(value)
        if type(value) is cst.Call:
            return self.is_module_factory(value, ctx) or self.is_module_class(value.func)
        return type(value) in (cst.Name, cst.Attribute) and self.is_module_by_evidence(value, ctx)

    def _handed_a_module_elsewhere(self, function, name: str) -> bool:
        """For a module-level function this module never calls (`evaluate(model, data)` in
        ``utils.py``): do the project modules that import and call it all hand the parameter
        ``name`` a module by evidence (``main.py``: ``model = SASRec(...)``, ``model.eval()``,
        ``evaluate(model, dataset)``)?"""
        found = False
        for importer, call, ctx, callee in self.calls_from_importers(function):
            argument = passed_arguments(call, callee or function).get(name)
            if argument is None or not importer.is_module_by_evidence(argument, ctx):
                return False
            found = True
        return found

    def _annotated_module(self, binding) -> bool:
        """A parameter annotated with a module class: ``model: nn.Module``, ``model: Model``
        (a project class that subclasses ``nn.Module``)."""
        param = parameter_node(binding)
        if param is None or param.annotation is None:
            return False
        annotation = param.annotation.annotation
        if type(annotation) is cst.SimpleString:
            return False  # a string annotation: not worth parsing
        return self.is_module_class(annotation)

    def has_module_evidence(self, key: str, ctx: Context) -> bool:
        """Does ``key`` (``net_g``, ``self.G``) receive a method only modules have
        (``net_g.eval()``, ``G.parameters()``, ``model.named_modules()``) in the scope that uses
        it: the function, for ``self.x`` any method of the class, for a global the module?"""
        class_scope = ctx.scope.class_scope
        if key.startswith("self.") and class_scope is not None:
            return self.class_module_evidence(class_scope, key, set())
        if not self._has_evidence_text():
            return False
        scopes = [ctx.scope]
        binding = self.lookup(key.partition(".")[0], ctx)
        if binding is None or ctx.scope.kind == "module" or binding.ctx.scope is self.module_scope:
            scopes.append(self.module_scope)  # (a global model: `model.eval()` at the top level counts)
        return any(key in self._scope_module_evidence(scope) for scope in scopes)

    def class_module_evidence(self, class_scope, key: str, seen: set) -> bool:
        """``has_module_evidence`` for ``self.x`` in the methods of a class and of its bases
        in the project (``self.denoiser = torch.load(path).eval()`` in a base class's
        ``__init__``)."""
        owner = class_scope.owner
        if owner is not None and owner is not self:
            return owner.class_module_evidence(class_scope, key, seen)
        if id(class_scope) in seen or len(seen) > 4:
            return False
        seen.add(id(class_scope))
        memo = class_scope._memo.setdefault("module evidence", {})
        if key not in memo:
            memo[key] = False  # recursion resolves to "no evidence"
            memo[key] = self._class_module_evidence(class_scope, key, seen)
        return memo[key]

    def _class_module_evidence(self, class_scope, key: str, seen: set) -> bool:
        if "methods" not in class_scope._memo:
            class_scope._memo["methods"] = [
                s for s in self.scopes.values() if s.class_scope is class_scope and s.kind == "function"
            ]
        if self._has_evidence_text() and any(
                key in self._scope_module_evidence(scope) for scope in class_scope._memo["methods"]):
            return True
        for base in class_scope.node.bases:
            base_name = dotted_name(base.value)
            if base_name is None or base_name in NEUTRAL_BASES:
                continue
            base_scope = self.class_named(base.value)
            if base_scope is not None and base_scope.owner is not None and base_scope.owner.may_contain(key) \
                    and self.class_module_evidence(base_scope, key, seen):
                return True
        return False

    def _has_evidence_text(self) -> bool:
        memo = self.module_scope._memo
        if "evidence_text" not in memo:
            memo["evidence_text"] = self.source is None or any(
                f".{method}(" in self.source for method in MODULE_EVIDENCE_METHODS
            )
        return memo["evidence_text"]

    def _scope_module_evidence(self, scope) -> frozenset[str]:
        memo = scope._memo
        if "module_evidence" not in memo:
            memo["module_evidence"] = frozenset(
                key
                for stmt, stmt_ctx in scope.statements if stmt_ctx.scope is scope
                for call in self.calls_in(stmt)
                if type(call.func) is cst.Attribute and call.func.attr.value in MODULE_EVIDENCE_METHODS
                for key in (dotted_name(strip_pass_through(call.func.value)),)
                if key is not None and key not in NOT_MODULE_RECEIVERS
            )
        return memo["module_evidence"]

    def is_module_factory(self, call, ctx: Context) -> bool:
        """Does the call return a module: ``timm.create_model(...)``,
        ``AutoModel.from_pretrained(...)``, ``torch.load(path)``, ``copy.deepcopy(model)``?"""
        qualified = self.qualified_name(call.func)
        if qualified in MODULE_FACTORY_QUALIFIED:
            return not self._compiles_a_function(call, ctx)
        name = dotted_name(call.func) or ""
        if name.endswith("deepcopy"):
            arguments = call_arguments(call)
            return bool(arguments) and self.is_module(arguments[0], ctx)
        if NOT_A_MODEL_FACTORY_RE.search(name):
            return False  # AutoTokenizer / AutoImageProcessor / AutoConfig.from_pretrained(...)
        return bool(MODULE_FACTORY_RE.search(name))

    def _compiles_a_function(self, call, ctx: Context) -> bool:
        """``torch.compile(lambda x, w: ...)``, ``torch.jit.script(my_function)``: a compiled
        function, not a module."""
        arguments = call_arguments(call)
        if not arguments:
            return False
        target = arguments[0]
        if type(target) is cst.Lambda:
            return True
        binding = self.lookup(target.value, ctx) if type(target) is cst.Name else None
        return binding is not None and binding.kind == "def"

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
        if not tail[:1].isupper():
            return False
        if self._project_defines_class(name):
            return self._project_class_is_module(name)  # `IModel(ABC)`: its bases say, not its name
        return bool(MODULE_CLASS_RE.search(tail))

    def _project_defines_class(self, name: str) -> bool:
        if not self.path or self.path.startswith("<") or name.partition(".")[0] not in self.imports:
            return False
        memo = self.module_scope._memo.setdefault("project defines", {})
        if name not in memo:
            memo[name] = project().defines_class(self.path, self.imports, name)
        return memo[name]

    def _project_class_is_module(self, name: str) -> bool:
        """Is the class an imported name refers to in another module of the project an
        ``nn.Module`` subclass? (Read with Python's parser, not analysed: see ``project``.)"""
        if not self.path or self.path.startswith("<") or name.partition(".")[0] not in self.imports:
            return False
        memo = self.module_scope._memo.setdefault("project classes", {})
        if name not in memo:
            memo[name] = project().class_is_module(self.path, self.imports, name)
        return memo[name]

    def _local_class_is_module(self, name: str, seen: set) -> bool:
        """Is the class ``name`` of this module an ``nn.Module`` subclass, through its bases in
        this module or in other modules of the project?"""
        if (self.path, name) in seen or name not in self.local_classes:
            return False
        seen.add((self.path, name))
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
            if qualified.startswith("torch.nn."):
                return True
            if self._project_defines_class(base_name):
                if self._project_class_is_module(base_name):
                    return True
                continue
            if MODULE_CLASS_RE.search(last_part(base_name)):
                return True
        return False

    def constructed_layer(self, expr, ctx: Context) -> str | None:
        """The ``torch.nn`` layer class that built the module ``expr`` calls (``nn.Softmax2d``
        for ``self.activation = nn.Softmax2d()``, or for the construction itself); None when it
        is anything else or unknown."""
        value = expr
        if type(expr) in (cst.Name, cst.Attribute):
            key = dotted_name(expr)
            binding = self.lookup(key, ctx) if key is not None else None
            value = self.bound_value(binding) if binding is not None else None
        if type(value) is not cst.Call:
            return None
        constructed = self.qualified_name(value.func) or ""
        return last_part(constructed) if constructed.startswith("torch.nn.") else None


class OptimizerQueries:
    def is_torch_device_call(self, call, ctx: Context, function: str) -> bool:
        """Is ``call`` ``function`` of a torch device module, however reached:
        ``torch.cuda.empty_cache()``, ``torch.xpu.memory.empty_cache()``, an imported
        ``empty_cache()``, ``getattr(torch, device_type).empty_cache()``, or a name bound to one
        of those modules (``dev = torch.cuda`` then ``dev.empty_cache()``)?"""
        if call_name(call) != function:
            return False
        name = self.qualified_name(call.func)
        if name is not None:
            return name.startswith("torch.") and last_part(name) == function
        func = call.func
        if type(func) is not cst.Attribute:
            return False
        return self._is_torch_device_module(func.value, ctx, 0)

    def _is_torch_device_module(self, expr, ctx: Context, depth: int) -> bool:
        if type(expr) is cst.Call:  # getattr(torch, name), getattr(torch.backends, name)
            if dotted_name(expr.func) == "getattr" and expr.args:
                owner = self.qualified_name(expr.args[0].value) or ""
                return owner == "torch" or owner.startswith("torch.")
            return False
        qualified = self.qualified_name(expr)
        if qualified is not None:
            return qualified.startswith("torch.")
        key = dotted_name(expr)
        binding = self.lookup(key, ctx) if key is not None and depth < 3 else None
        if binding is None or binding.kind != "assign" or binding.element:
            return False
        return self._is_torch_device_module(binding.value, binding.ctx, depth + 1)

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
        # `optimizer = AdaBound(model.parameters(), ...)`: a class torchlint does not know, bound to
        # a name that says optimizer and built over a model's parameters
        arguments = call_arguments(binding.value)
        if looks_like_optimizer(last_part(binding.key)) and arguments and any(
                type(node) is cst.Call and type(node.func) is cst.Attribute
                and node.func.attr.value in ("parameters", "named_parameters")
                for node in iter_expression_nodes(arguments[0])):
            return binding.value
        return None

    # ------------------------------------------------------------------ what an optimizer updates

    def optimizer_bindings(self, optimizer, ctx: Context) -> list[Binding]:
        """What the optimizer expression may hold at ``ctx``: ``self.optimizer``'s assignments in
        the class, else the bindings of the name that reach the statement."""
        key = dotted_name(optimizer)
        if key is None:
            return []
        class_scope = ctx.scope.class_scope
        if key.startswith("self.") and class_scope is not None and class_scope.bindings.get(key):
            return list(class_scope.bindings[key])
        return self.reaching_bindings(key, ctx)

    def optimizer_built_here(self, optimizer, ctx: Context) -> bool:
        """Is every binding the optimizer may hold an optimizer built in this module (so that
        what it updates is known)?"""
        bindings = self.optimizer_bindings(optimizer, ctx)
        return bool(bindings) and all(self.optimizer_construction(binding) is not None for binding in bindings)

    def optimizer_constructions(self, optimizer, ctx: Context, any_call: bool = False) -> list:
        """The calls that built the optimizer (``AdamW(model.parameters(), lr=...)``); with
        ``any_call``, any call it was bound to (``optimizer_class(net.parameters())``)."""
        found = []
        for binding in self.optimizer_bindings(optimizer, ctx):
            construction = self.optimizer_construction(binding)
            if construction is None and any_call and binding.kind == "assign" and not binding.element \
                    and type(binding.value) is cst.Call:
                construction = binding.value
            if construction is not None:
                found.append(construction)
        return found

    def optimizes(self, optimizer, ctx: Context, model: str) -> bool:
        """Was the optimizer built over ``model``'s parameters (its construction reads ``model``
        or one of its attributes: ``Adam(self.net.parameters())`` optimizes ``self.net``)?"""
        return any(key_within(used, model) for construction in self.optimizer_constructions(optimizer, ctx)
                   for used in mentioned_keys(construction))

    def optimized_modules(self, optimizer, ctx: Context) -> set[str]:
        """The modules whose ``.parameters()`` / ``.named_parameters()`` built the optimizer
        (``Adam(self.critic.parameters())`` -> ``self.critic``)."""
        owners = set()
        for construction in self.optimizer_constructions(optimizer, ctx, any_call=True):
            for node in iter_expression_nodes(construction):
                if type(node) is cst.Call and type(node.func) is cst.Attribute \
                        and node.func.attr.value in ("parameters", "named_parameters"):
                    owner = dotted_name(node.func.value)
                    if owner is not None:
                        owners.add(owner)
        return owners

    def optimized_anywhere(self, model: str) -> bool:
        """Does any optimizer built in this module read ``model`` (or an attribute of it, or,
        for ``self.net.encoder``, ``self.net``)?"""
        memo = self.module_scope._memo
        if "optimized keys" not in memo:
            scopes = {id(scope): scope for scope in (self.module_scope, *self.scopes.values())}.values()
            memo["optimized keys"] = {
                used for scope in scopes for bindings in scope.bindings.values() for binding in bindings
                if (construction := self.optimizer_construction(binding)) is not None
                for used in mentioned_keys(construction)
            }
        root = ".".join(model.split(".")[:2]) if model.startswith("self.") else model.partition(".")[0]
        return any(key_within(used, model) or used == root for used in memo["optimized keys"])

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
            # self.optimizers.step(): a container stepping all its optimizers (torchtitan's)
            key = dotted_name(receiver)
            container = key is not None and looks_like_optimizer(last_part(key), plural=True)
            return receiver if container or self.is_optimizer(receiver, ctx) else None
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

    def steps_through_wrapper(self, call, ctx: Context) -> bool:
        """``self.strategy.optimizer_step(self.optimizer, model, scheduler)``: a distributed
        strategy or accelerator wrapper named for stepping, handed an optimizer. It trains;
        what else it does (clearing, unscaling) is not known, so only the training question
        asks this."""
        func = call.func
        if type(func) is not cst.Attribute:
            return False
        words = set(name_words(func.attr.value))
        if "step" not in words or not words & {"optimizer", "optim", "opt"}:
            return False
        return any(self.is_optimizer(argument, ctx) for argument in call_arguments(call))

    def steps_on_a_loss(self, call, ctx: Context) -> bool:
        """``self.optim.step(loss)``: an optimizer wrapper handed the loss (tianshou's, many
        projects' own) backpropagates it itself (and clears and steps: no TL501 step). Not
        ``optimizer.step(closure)``, whose argument is a function. Also a loss scaler called
        on the loss and the optimizer, ``loss_scaler(loss, optimizer, parameters=...)`` (timm's
        and MAE's ``NativeScaler``): it backpropagates and steps."""
        if self.scales_and_steps(call, ctx):
            return True
        func = call.func
        if type(func) is not cst.Attribute or func.attr.value != "step" or len(call.args) != 1:
            return False
        positional = call_arguments(call)
        receiver = dotted_name(func.value)
        if len(positional) != 1 or receiver is None or not looks_like_optimizer(last_part(receiver)):
            return False
        key = dotted_name(positional[0])
        if key is None or "closure" in key.lower():
            return False
        binding = self.lookup(key, ctx)
        return binding is not None and binding.kind in ("assign", "augassign") and type(binding.value) is not cst.Lambda

    def scales_and_steps(self, call, ctx: Context) -> bool:
        """``loss_scaler(loss, optimizer, clip_grad=...)``: an object named for loss scaling,
        called (not one of its methods) with the loss and an optimizer."""
        func = call.func
        name = func.value if type(func) is cst.Name else func.attr.value if type(func) is cst.Attribute else ""
        if "scaler" not in name_words(name):
            return False
        positional = call_arguments(call)
        optimizer = positional[1] if len(positional) >= 2 else keyword_argument(call, "optimizer")
        return bool(positional) and optimizer is not None and dotted_name(positional[0]) is not None \
            and self.is_optimizer(optimizer, ctx)

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
            if is_clearing_call_name(name):
                # `self.zero_grad([self.netG_A, self.netG_B])`: a helper clearing the nets it is handed
                handed = any(arg.keyword is None for arg in call.args)
                found.append(func.value if name == "zero_grad" and type(func) is cst.Attribute and not handed else None)
            elif name in GRAD_OVERWRITING_METHODS and type(func) is cst.Attribute and _is_grad_chain(func.value):
                found.append(None)
            elif keyword_argument(call, "set_to_none") is not None:
                found.append(None)
        return found

    def loop_gradient_clearings(self, loop: Loop, inside: Scope | None = None) -> list[tuple[object, Context]]:
        """Every gradient clearing in the loop's body (nested loops included) with its context.
        ``inside``: a function the loop calls whose own clearings the caller already counts
        (they are not clearings around its call)."""
        key = ("clearings", id(inside))
        if key not in loop._memo:
            loop._memo[key] = []  # recursion guard (a helper's loop calling its caller)
            clearings = [
                (receiver, ctx)
                for stmt, ctx in self.statements_in_loop(loop)
                for receiver in self.gradient_clearings(stmt)
            ]
            # a module-defined helper that clears them (receiver unknown)
            clearings += [
                (None, ctx)
                for stmt, ctx in self.statements_in_loop(loop)
                for callee in self._callees(stmt, ctx)
                if callee is not None and callee is not inside and self.clears_gradients(callee)
            ]
            # an implicit loop: the loops calling the function may clear them around the call
            for _, caller_ctx in loop.callers:
                if caller_ctx.loop is not None and caller_ctx.loop is not loop:
                    clearings += self.loop_gradient_clearings(caller_ctx.loop, loop.scope)
            loop._memo[key] = clearings
        return loop._memo[key]

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


# ---------------------------------------------------------------------- grad scalers and state dicts
# (questions of the second wave's TL503 / TL504; kept apart so they merge as one block)

# Gradient clipping that works on whatever `.grad` holds. `accelerator.clip_grad_norm_` and
# Lightning's `clip_gradients` unscale first themselves, so only torch's own functions count.
GRADIENT_CLIPPING = frozenset({"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm"})
# Shallow wrappers that copy the dict but not the tensors: still aliases of the live weights.
SHALLOW_DICT_COPIES = frozenset({"dict", "OrderedDict", "collections.OrderedDict"})
# Calls that return the module a wrapper (DDP, FSDP, torch.compile, an accelerator) holds:
# `accelerator.unwrap_model(model)`, `de_parallel(model)`.
UNWRAPPING_CALLS = frozenset({"unwrap_model", "de_parallel", "unwrap", "get_unwrapped_model", "unwrap_module"})


def _unwrapped(owner):
    """The module an unwrapping expression names: ``getattr(model, "module", model)``,
    ``accelerator.unwrap_model(model)``, ``de_parallel(model)`` give ``model``."""
    if type(owner) is not cst.Call or not owner.args:
        return owner
    name = last_part(dotted_name(owner.func) or "")
    if name == "getattr" and len(owner.args) == 3 and type(owner.args[1].value) is cst.SimpleString \
            and owner.args[1].value.value.strip("'\"") == "module":
        return owner.args[2].value
    if name in UNWRAPPING_CALLS and len(owner.args) == 1 and not owner.args[0].keyword:
        return owner.args[0].value
    return owner


class ScalerQueries:
    def scaled_backward_scaler(self, call, ctx: Context):
        """The grad scaler of ``scaler.scale(loss).backward()`` (also through a name bound to
        ``scaler.scale(loss)``); None for any other call."""
        func = call.func
        if type(func) is not cst.Attribute or func.attr.value != "backward":
            return None
        scaled = func.value
        key = dotted_name(scaled)
        if key is not None:
            binding = self.lookup(key, ctx)
            if binding is None or binding.kind != "assign" or binding.element:
                return None
            scaled = binding.value
        if type(scaled) is not cst.Call or type(scaled.func) is not cst.Attribute or scaled.func.attr.value != "scale":
            return None
        scaler = scaled.func.value
        return scaler if self.is_grad_scaler(scaler, ctx) else None

    def scaled_backwards(self, scope: Scope) -> list[tuple[object, Context, object]]:
        """(statement, context, scaler) for every scaled ``backward()`` of a function's own body."""
        if "scaled_backwards" not in scope._memo:
            scope._memo["scaled_backwards"] = [
                (stmt, ctx, scaler)
                for stmt, ctx in scope.statements if ctx.scope is scope
                for call in self.calls_in(stmt)
                for scaler in (self.scaled_backward_scaler(call, ctx),) if scaler is not None
            ]
        return scope._memo["scaled_backwards"]

    def is_gradient_clipping(self, call, ctx: Context | None = None) -> bool:
        """``torch.nn.utils.clip_grad_norm_(...)``, ``nn.utils.clip_grad_value_(...)``, the
        imported function or a local alias of it (``clip = torch.nn.utils.clip_grad_norm_``),
        apex's; not a framework's own method of the same name (those unscale first)."""
        if not self.may_contain("clip_grad"):
            return False
        func = call.func
        if ctx is not None and type(func) is cst.Name and func.value not in self.imports:
            binding = self.lookup(func.value, ctx)
            if binding is not None and binding.kind == "assign" and not binding.element:
                func = binding.value
        if last_part(dotted_name(func) or "") not in GRADIENT_CLIPPING:
            return False
        qualified = self.qualified_name(func)
        if qualified is None or not qualified.startswith(("torch.nn.utils", "apex.contrib.clip_grad")):
            return False
        # clip_grad_norm_(params, float("inf")) measures the norm and clips nothing
        arguments = call_arguments(call)
        limit = keyword_argument(call, "max_norm") or (arguments[1] if len(arguments) > 1 else None)
        return limit is None or "inf" not in self.code(limit, 40).lower()

    def scaler_disabled(self, scaler, ctx: Context) -> bool:
        """Is the scaler bound to ``GradScaler(..., enabled=False)`` (a literal), or to None, by
        every binding that may reach ``ctx`` (not when another arm of an ``if`` builds one)?"""
        key = dotted_name(scaler)
        bindings = self.reaching_bindings(key, ctx) if key is not None else []
        return bool(bindings) and all(self._disabled_scaler_binding(binding) for binding in bindings)

    @staticmethod
    def _disabled_scaler_binding(binding) -> bool:
        if binding.kind != "assign" or binding.element:
            return False
        value = binding.value
        if type(value) is cst.Name and value.value == "None":
            return True
        enabled = keyword_argument(value, "enabled") if type(value) is cst.Call else None
        return type(enabled) is cst.Name and enabled.value == "False"

    def scaler_updates(self) -> frozenset[str]:
        """The keys (``scaler``, ``self.grad_scaler``) of every grad scaler ``.update()``d anywhere
        in the module."""
        memo = self.module_scope._memo
        if "scaler_updates" not in memo:
            memo["scaler_updates"] = frozenset(
                dotted_name(call.func.value)
                for stmt, ctx in self.statements_by_type.get("Expr", ())
                for call in self.calls_in(stmt)
                if call_name(call) == "update" and type(call.func) is cst.Attribute
                and self.is_grad_scaler(call.func.value, ctx)
            )
        return memo["scaler_updates"]

    def aliasing_state_dict(self, value, ctx: Context):
        """The ``.state_dict()`` call of a module or optimizer whose tensors ``value`` shares
        rather than copies: the call itself, ``.copy()`` / ``dict()`` / ``OrderedDict()`` of it,
        a dict literal holding it, or ``{k: v for k, v in sd.items()}`` (``v.detach()``, ``v.data``
        included). None when ``value`` copies the tensors (``deepcopy``, ``v.clone()``,
        ``v.cpu()``) or is no state dict."""
        kind = type(value)
        if kind is cst.Dict:
            for element in value.elements:
                found = self.aliasing_state_dict(element.value, ctx) if type(element) is cst.DictElement else None
                if found is not None:
                    return found
            return None
        if kind is cst.DictComp:
            return self._aliasing_comprehension(value, ctx)
        if kind is cst.IfExp:  # `model.module.state_dict() if distributed else model.state_dict()`
            return self.aliasing_state_dict(value.body, ctx) or self.aliasing_state_dict(value.orelse, ctx)
        if kind is not cst.Call:
            return None
        func = value.func
        if type(func) is cst.Attribute and func.attr.value == "copy" and not value.args:
            return self.aliasing_state_dict(func.value, ctx)
        if dotted_name(func) in SHALLOW_DICT_COPIES and len(value.args) == 1 and not value.args[0].keyword:
            return self.aliasing_state_dict(value.args[0].value, ctx)
        if type(func) is not cst.Attribute or func.attr.value != "state_dict":
            return None
        owner = _unwrapped(strip_pass_through(func.value))
        if type(owner) is cst.IfExp:  # `(model.module if distributed else model).state_dict()`
            owner = _unwrapped(owner.orelse)
        if type(owner) is cst.Attribute and owner.attr.value == "module":
            owner = owner.value  # model.module: the module DataParallel / DDP wraps
        return value if self.is_module(owner, ctx) or self.is_optimizer(owner, ctx) else None

    def _aliasing_comprehension(self, comp, ctx: Context):
        """``{k: v for k, v in model.state_dict().items()}``: a new dict of the same tensors."""
        for_in = comp.for_in
        iterable = for_in.iter
        if for_in.inner_for_in is not None or type(iterable) is not cst.Call or call_name(iterable) != "items":
            return None
        found = self.aliasing_state_dict(iterable.func.value, ctx)
        if found is None or type(for_in.target) is not cst.Tuple or len(for_in.target.elements) != 2:
            return None
        tensor = dotted_name(for_in.target.elements[1].value)
        value = comp.value
        while type(value) is cst.Call and call_name(value) == "detach" and not value.args:
            value = value.func.value
        if type(value) is cst.Attribute and value.attr.value == "data":
            value = value.value
        return found if tensor is not None and dotted_name(value) == tensor else None

    def constructs_optimizer(self, call) -> bool:
        """Does the call build an optimizer: ``torch.optim.SGD(...)``, ``AdamW(...)``, a class
        named ``*Optimizer``?"""
        qualified = self.qualified_name(call.func) or ""
        name = last_part(dotted_name(call.func) or "")
        if qualified.startswith("torch.optim.") and "." not in qualified[12:] and name[:1].isupper():
            return True
        return name in OPTIMIZER_CLASSES or bool(OPTIMIZER_CLASS_RE.search(name))



# torch functions that return a tuple, a non-tensor or a module rather than one tensor: indexing
# their result picks an element, it does not view a tensor.
NOT_ONE_TENSOR_TORCH = frozenset({
    "split", "chunk", "unbind", "tensor_split", "hsplit", "vsplit", "dsplit", "max", "min", "sort",
    "topk", "kthvalue", "mode", "median", "unique", "unique_consecutive", "svd", "qr", "eig", "eigh",
    "slogdet", "lu", "histogram", "meshgrid", "broadcast_tensors", "where", "nonzero", "aminmax",
    "frexp", "std_mean", "var_mean", "load", "save", "device", "no_grad", "enable_grad",
    "inference_mode", "set_grad_enabled", "manual_seed", "is_tensor", "is_grad_enabled", "compile",
    "get_default_dtype", "finfo", "iinfo", "Size", "Generator", "dtype",
})
# torch namespaces whose lower-case functions return one tensor.
TENSOR_NAMESPACES = frozenset({"torch", "torch.nn.functional", "torch.fft", "torch.special"})
# Methods that exist on tensors only (a module or a list has none of them) and return a tensor.
TENSOR_ONLY_METHODS = frozenset({
    "softmax", "log_softmax", "sigmoid", "tanh", "relu", "permute", "contiguous", "unsqueeze",
    "squeeze", "view", "view_as", "reshape", "reshape_as", "transpose", "masked_fill", "matmul",
    "bmm", "mm", "exp", "log", "sqrt", "rsqrt", "pow", "clamp", "narrow", "select", "diagonal",
    "flatten", "unflatten", "expand", "expand_as", "repeat", "t", "detach", "clone", "abs", "neg",
    "mul", "div", "add", "sub", "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor",
    "type_as", "index_select", "gather", "roll", "flip", "cumsum", "norm", "float", "double",
    "long", "int", "bool", "pin_memory", "movedim", "swapaxes",
})
# Attributes of model outputs and modules that hold one tensor.
TENSOR_ATTRIBUTES = frozenset({"logits", "last_hidden_state", "pooler_output", "weight", "bias", "T", "mT", "data", "grad"})


class TensorQueries:
    """Whether a value is a tensor or a Python container, by evidence in the file."""

    def is_python_container(self, key: str, ctx: Context) -> bool:
        """Is ``key`` bound, where ``ctx`` reads it, to a dict or list built in this file
        (``{}``, ``[]``, a comprehension, ``dict()``, ``defaultdict(list)``, ``deque()``)?"""
        binding = self.lookup(key, ctx)
        if binding is None or binding.kind != "assign" or binding.element:
            return False
        value = binding.value
        if type(value) is cst.BinaryOperation and type(value.operator) is cst.Multiply:
            value = value.left if type(value.left) is cst.List else value.right  # `[None] * n`
        if type(value) in (cst.Dict, cst.List, cst.DictComp, cst.ListComp):
            return True
        if type(value) is cst.Call:
            name = dotted_name(value.func) or ""
            return last_part(name) in ("dict", "list", "defaultdict", "OrderedDict", "deque")
        return False

    def is_tensor(self, expr, ctx: Context, depth: int = 0) -> bool:
        """Is ``expr`` one tensor by evidence: a torch function that returns one, a method only
        tensors have, a basic index of a tensor, arithmetic on one, a ``.logits`` / ``.weight``
        attribute, a name bound to any of these or a parameter annotated ``Tensor``? A module's
        output (maybe a tuple), a loop target or an unknown call is not evidence."""
        if depth > 8:
            return False
        kind = type(expr)
        if kind is cst.Call:
            func = expr.func
            qualified = self.qualified_name(func) or ""
            namespace, _, function = qualified.rpartition(".")
            if namespace in TENSOR_NAMESPACES and function[:1].islower():
                return function not in NOT_ONE_TENSOR_TORCH
            if type(func) is cst.Attribute and not qualified:
                if func.attr.value in TENSOR_ONLY_METHODS and not self.is_module(func.value, ctx):
                    return True
                if func.attr.value in ("to", "cuda", "cpu", "half", "bfloat16", "requires_grad_"):
                    return self.is_tensor(func.value, ctx, depth + 1)
            return False
        if kind is cst.Subscript:
            return is_view_subscript(expr) and self.is_tensor(expr.value, ctx, depth + 1)
        if kind is cst.BinaryOperation:
            return self.is_tensor(expr.left, ctx, depth + 1) or self.is_tensor(expr.right, ctx, depth + 1)
        if kind is cst.UnaryOperation:
            return self.is_tensor(expr.expression, ctx, depth + 1)
        if kind is cst.Attribute and expr.attr.value in TENSOR_ATTRIBUTES:
            return True
        key = dotted_name(expr)
        if key is None:
            return False
        binding = self.lookup(key, ctx)
        if binding is None:
            return False
        if binding.kind == "param":
            return _annotated_tensor(binding)
        value = self.bound_value(binding)
        return value is not None and self.is_tensor(value, binding.ctx, depth + 1)


def _annotated_tensor(binding: Binding) -> bool:
    """Is the parameter ``binding`` annotated ``Tensor`` / ``torch.Tensor`` (or ``Optional`` of it)?"""
    param = parameter_node(binding)
    if param is not None and param.annotation is not None:
        annotation = param.annotation.annotation
        text = dotted_name(annotation) or ""
        if type(annotation) is cst.Subscript:
            text = dotted_name(annotation.slice[0].slice.value) or ""
        return last_part(text) in ("Tensor", "FloatTensor", "LongTensor")
    return False


# Classes whose instances move to a device but are data, not networks.
_DATA_CLASS_RE = re.compile(r"Tensor|Variable|Parameter|Data|Batch|Encoding|Dict|List|Buffer|Storage|Generator")


def _moved_instance(value) -> bool:
    """``Net(cfg).to(device)``, ``Net().cuda().eval()``: an instance of a class (a CamelCase
    name, not a tensor or data container) moved to a device. Only modules and tensors have
    ``.to`` / ``.cuda``; optimizers, schedulers and tokenizers do not."""
    moved = False
    while type(value) is cst.Call and type(value.func) is cst.Attribute \
            and value.func.attr.value in ("to", "cuda", "eval", "train", "float", "half"):
        moved = moved or value.func.attr.value in ("to", "cuda")
        value = value.func.value
    if not moved or type(value) is not cst.Call:
        return False
    name = last_part(dotted_name(value.func) or "")
    return len(name) > 1 and name[0].isupper() and _DATA_CLASS_RE.search(name) is None


def _element_value(binding):
    """The expression a binding gives its name: the whole value, or for ``a, b = A(), B()``
    the element of a tuple or list literal the name receives; None when unknown (``a, b =
    make_pair()``)."""
    value = binding.value
    for index in binding.element or ():
        if type(value) not in (cst.Tuple, cst.List) or index >= len(value.elements) \
                or any(type(element) is cst.StarredElement for element in value.elements):
            return None
        value = value.elements[index].value
    return value
