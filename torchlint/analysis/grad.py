"""Grad mode: does autograd record at a statement (no_grad blocks and decorators, callers that
all disable grad)?"""

from __future__ import annotations


from torchlint.lazy import cst
from torchlint.analysis.arguments import passed_arguments
from torchlint.analysis.vocabulary import GradMode
from torchlint.analysis.scopes import Context, Scope


class GradModeQueries:
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
        memo_key = (name, id(scope.parent)) if is_method else (name, None)
        if memo_key in self._callers_memo:
            return self._callers_memo[memo_key]
        self._callers_memo[memo_key] = False  # recursion guard
        if self.source is not None and self.source.count(f"{name}(") <= self.source.count(f"def {name}(") \
                and not (is_method and scope.parent.node.bases) \
                and self.source.count(name) <= self.source.count(f"def {name}("):
            return False  # its name appears only in its definitions: no caller here
        found = False
        disabled = True
        own_class = scope.parent if is_method else None
        for ctx, on_self in self._calls_by_name().get((name, is_method), ()):
            if ctx.scope is scope:  # recursion (or super().__init__()) says nothing about callers
                continue
            if on_self and not self._related_classes(ctx.scope.class_scope, own_class):
                continue  # `self.get_features(im)` in another class of the file runs its own method
            found = True
            if ctx.grad is GradMode.ENABLED and not (
                ctx.scope.kind == "function" and self.all_calls_grad_disabled(ctx.scope)
            ):
                disabled = False
        for ctx, on_self, call, argument in self._callbacks_by_name().get((name, is_method), ()) if disabled else ():
            # a function handed over to be called back runs where it is handed over, unless the
            # function it is handed to calls it only with grad disabled
            if ctx.scope is scope or (on_self and not self._related_classes(ctx.scope.class_scope, own_class)):
                continue
            found = True
            if ctx.grad is GradMode.ENABLED and not (
                ctx.scope.kind == "function" and self.all_calls_grad_disabled(ctx.scope)
            ) and not self._calls_back_without_grad(call, argument, ctx):
                disabled = False
        if not found and is_method:
            # no caller here: a project base class that calls it (a predictor's
            # `stream_inference` under `inference_mode` calling `self.inference(im)`) owns its mode
            result = self.bases_call_without_grad(scope.parent, name, set()) is True
        else:
            # (a module-level function its own `__main__` runs under no_grad may be run with
            # grad on by the training script that imports it)
            result = found and disabled and not self._called_with_grad_elsewhere(scope)
        self._callers_memo[memo_key] = result
        return result

    def _calls_by_name(self) -> dict[tuple[str, bool], list[Context]]:
        """The contexts of every call in the module by (called name, is a method call): ``f(x)``
        under (``f``, False), ``obj.f(x)`` under (``f``, True). Built once."""
        index = self.module_scope._memo.get("calls_by_name")
        if index is None:
            index = self.module_scope._memo["calls_by_name"] = {}
            for stmt_list in self.statements_by_type.values():
                for stmt, ctx in stmt_list:
                    for call in self.calls_in(stmt):
                        func = call.func
                        if type(func) is cst.Attribute:
                            on_self = type(func.value) is cst.Name and func.value.value == "self"
                            index.setdefault((func.attr.value, True), []).append((ctx, on_self))
                        elif type(func) is cst.Name:
                            index.setdefault((func.value, False), []).append((ctx, False))
        return index

    def _callbacks_by_name(self) -> dict[tuple[str, bool], list]:
        """(context, on self, call, argument) of every function handed to a call to be called
        back (`self.operate(self._match, q)`, `trainer.eval(evaluate, path)`), by (name, is a
        method), as ``_calls_by_name`` has them; not one handed to a thread or a process
        starter, whose grad mode is its own. Built once."""
        index = self.module_scope._memo.get("callbacks_by_name")
        if index is None:
            index = self.module_scope._memo["callbacks_by_name"] = {}
            functions = {scope.name for scope in self.scopes.values() if scope.kind == "function"}
            for stmt_list in self.statements_by_type.values():
                for stmt, ctx in stmt_list:
                    for call in self.calls_in(stmt):
                        if _starts_elsewhere(call.func):
                            continue
                        for arg in call.args:
                            value = arg.value
                            if type(value) is cst.Attribute and value.attr.value in functions \
                                    and type(value.value) is cst.Name and value.value.value == "self":
                                index.setdefault((value.attr.value, True), []).append((ctx, True, call, value))
                            elif type(value) is cst.Name and value.value in functions:
                                index.setdefault((value.value, False), []).append((ctx, False, call, value))
        return index

    def _calls_back_without_grad(self, call, argument, ctx: Context) -> bool:
        """Does the project function the call runs call the function it is handed (as
        ``argument``) only with grad disabled (``Trainer.eval(self, evaluate, ...)`` running
        ``evaluate(model, batch)`` under ``torch.no_grad()``, in another module)?"""
        callee = self.called_function(call, ctx, foreign=True)
        if callee is None:
            return False
        parameter = next((name for name, value in passed_arguments(call, callee).items() if value is argument), None)
        if parameter is None:
            return False
        owner = callee.owner
        grads = [inner_ctx.grad is not GradMode.ENABLED or owner.all_calls_grad_disabled(callee)
                 for inner, inner_ctx, _ in owner.scope_calls(callee)
                 if type(inner.func) is cst.Name and inner.func.value == parameter]
        return bool(grads) and all(grads)

    def _called_with_grad_elsewhere(self, scope: Scope) -> bool:
        """Does a project module that imports this module-level function call it with grad
        enabled (``train.py`` calling ``predict(model, batches)`` in its evaluation every N
        steps, where ``predict.py``'s own ``__main__`` wraps it in ``no_grad``)?"""
        return any(
            callee is not None and ctx.grad is GradMode.ENABLED
            and not (ctx.scope.kind == "function" and importer.all_calls_grad_disabled(ctx.scope))
            for importer, _, ctx, callee in self.calls_from_importers(scope)
        )

    def _related_classes(self, caller_class, own_class) -> bool:
        """Can ``self`` in a method of ``caller_class`` be an instance of ``own_class``: the same
        class, or one derived from the other in this module (unknown classes: yes)?"""
        if caller_class is None or own_class is None or caller_class is own_class:
            return True
        return self._derives_from(caller_class, own_class, 0) or self._derives_from(own_class, caller_class, 0)

    def _derives_from(self, class_scope, base_scope, depth: int) -> bool:
        if depth > 8:
            return True
        for base in class_scope.node.bases:
            local = self.class_named(base.value, False)
            if local is None:
                continue
            if local is base_scope or self._derives_from(local, base_scope, depth + 1):
                return True
        return False


# Calls that run the function they are handed in another thread or process, where grad mode
# starts enabled whatever the caller's.
CONCURRENT_STARTERS = frozenset({"Thread", "Timer", "Process", "start_new_thread"})
CONCURRENT_METHODS = frozenset({
    "submit", "map", "imap", "imap_unordered", "starmap", "starmap_async", "apply_async", "map_async", "run_in_executor",
})


def _starts_elsewhere(func) -> bool:
    if type(func) is cst.Attribute:
        return func.attr.value in CONCURRENT_METHODS or func.attr.value in CONCURRENT_STARTERS
    return type(func) is cst.Name and func.value in CONCURRENT_STARTERS
