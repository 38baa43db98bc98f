"""What a function keeps of its arguments beyond the call.

A metric object's ``update(value, n)`` doing ``self.sum += value * n``, a recorder's
``log(loss)`` doing ``self.history.append(loss)``: handed a tensor still attached to the
autograd graph on every step, such a method keeps each step's graph alive from wherever it is
defined. The store happens in the callee; the mistake (and its fix, ``loss.item()``) is at the
call. When the callee lives in the same module, the per-step machinery (``argument_attached``)
already sees the attached argument inside it; ``kept_arguments`` lets a rule report the call
when the callee is in another module of the project (``from utils import AverageMeter``).
"""

from __future__ import annotations

from torchlint.analysis.arguments import passed_arguments
from torchlint.analysis.scopes import Context, Scope
from torchlint.analysis.summaries import in_owner
from torchlint.analysis.syntax import dotted_name, mentioned_keys, storage_key
from torchlint.analysis.vocabulary import COUNT_WORDS, STORING_METHODS, name_words
from torchlint.lazy import cst

STORES, ACCUMULATES = "stores", "accumulates"
MAX_KEEPING_DEPTH = 3


class KeepingQueries:

    @in_owner
    def kept_parameters(self, scope: Scope, depth: int = 0) -> dict[str, tuple[str, object]]:
        """The parameters whose value the function keeps beyond the call, each with how
        (``"stores"``: a value computed from it, graph and all, goes into a container of the
        instance or of the module; ``"accumulates"``: it is added into one) and the statement
        that keeps it. Follows the value into the calls of the project that keep it in turn
        (``for k, v in values.items(): self.meters[k].update(v)``). Decided under the
        hypothesis that the tensor arguments are attached, so a ``.item()`` or ``.detach()`` on
        the way keeps nothing; a parameter the function converts to data anywhere is left out
        (``if isinstance(v, torch.Tensor): v = v.item()``)."""
        memo = scope._memo
        if "kept parameters" in memo:
            return memo["kept parameters"]
        memo["kept parameters"] = {}  # recursion resolves to "keeps nothing"
        if scope.kind != "function" or depth > MAX_KEEPING_DEPTH:
            return {}
        params = {
            key for key, bindings in scope.bindings.items()
            if key not in ("self", "cls") and any(b.kind == "param" for b in bindings)
            and COUNT_WORDS.isdisjoint(name_words(key))
        }
        if not params:
            return {}
        kept: dict[str, tuple[str, object]] = {}

        def keep(value, ctx: Context, how: str, stmt) -> None:
            if not self.is_attached(value, ctx):
                return
            closure = self._sources_closure(mentioned_keys(value, skip_detached=True), scope)
            if self._converted_to_data(closure, scope):
                return
            for key in closure & params:
                kept.setdefault(key, (how, stmt))

        self._under_tensor_hypothesis(scope, lambda: self._find_kept(scope, keep, depth))
        memo["kept parameters"] = kept
        return kept

    def _find_kept(self, scope: Scope, keep, depth: int) -> None:
        for stmt, ctx in scope.statements:
            if ctx.scope is not scope:
                continue
            if type(stmt) is cst.AugAssign and type(stmt.operator) in (cst.AddAssign, cst.SubtractAssign):
                key = storage_key(stmt.target)
                if key is not None and self._outlives_function(key, ctx):
                    how = STORES if type(stmt.value) in (cst.List, cst.Tuple) else ACCUMULATES
                    keep(stmt.value, ctx, how, stmt)
                continue
            if type(stmt) is cst.Assign and len(stmt.targets) == 1:
                # `self.avg[name] = self.avg[name] * n + value`: an update of the kept value by itself
                key = storage_key(stmt.targets[0].target)
                if key is not None and key in mentioned_keys(stmt.value) and self._outlives_function(key, ctx):
                    keep(stmt.value, ctx, ACCUMULATES, stmt)
                continue
            if type(stmt) is not cst.Expr or type(stmt.value) is not cst.Call:
                continue
            call = stmt.value
            func = call.func
            if type(func) is cst.Attribute and func.attr.value in STORING_METHODS:
                key = storage_key(func.value)
                positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
                index = STORING_METHODS[func.attr.value]
                if key is not None and len(positional) > index and self._outlives_function(key, ctx):
                    keep(positional[index], ctx, STORES, stmt)
                continue
            callee = self.called_function(call, ctx, foreign=True)
            if callee is None or callee is scope or not self._receiver_outlives(call, ctx):
                continue
            inner = callee.owner.kept_parameters(callee, depth + 1) if callee.owner is not None else {}
            for name, argument in passed_arguments(call, callee).items():
                if name in inner:
                    keep(argument, ctx, inner[name][0], stmt)

    def _outlives_function(self, key: str, ctx: Context) -> bool:
        """Does the container ``key`` live on after the function returns: an attribute of the
        instance or class (in a method), or a module global (``outlives_call``)?"""
        return (key.partition(".")[0] == "cls" and ctx.scope.class_scope is not None) or self.outlives_call(key, ctx)

    def _receiver_outlives(self, call, ctx: Context) -> bool:
        """For ``obj.method(...)``: is ``obj`` kept beyond the function (``self.meters[k]``,
        a module global)? A module function's own stores are into globals: it always is."""
        func = call.func
        if type(func) is not cst.Attribute:
            return True
        key = storage_key(func.value)
        if key is None:
            return False
        binding = self.lookup(key.partition(".")[0], ctx)
        return (binding is not None and binding.kind == "import") or self._outlives_function(key, ctx)

    def _converted_to_data(self, closure, scope: Scope) -> bool:
        """Does the function turn one of the values in ``closure`` into data somewhere (``v =
        v.item()``): it expects tensors and means to keep numbers."""
        for key in closure:
            for binding in scope.bindings.get(key, ()):
                if binding.kind == "assign" and binding.value is not None and not binding.element \
                        and key in mentioned_keys(binding.value) and not self.is_attached(binding.value, binding.ctx):
                    return True
        return False

    def kept_arguments(self, call, ctx: Context) -> list[tuple[object, str, object, Scope]]:
        """For a call of a function of another module of the project: (argument, how, the
        callee's statement keeping it, callee) for each argument the callee keeps beyond the
        call (see ``kept_parameters``). Calls of this module's functions give nothing: their
        own statements are checked where they run."""
        foreign = bool(self.path) and not self.path.startswith("<")
        callee = self.called_function(call, ctx, foreign=foreign, mentioning=(".append(", "+=", ".extend(", ".insert(", "= self."))
        if callee is None or callee.owner is None:
            return []
        if callee.owner is self and not self.keeper_method_called(call, callee):
            return []
        kept = callee.owner.kept_parameters(callee)
        return [
            (argument, *kept[name], callee)
            for name, argument in passed_arguments(call, callee).items()
            if name in kept
        ]

    def keeper_method_called(self, call, callee: Scope) -> bool:
        """Is the call one of another object's method, of a class of this module that is no
        model (``psnres.update(psnr)`` with ``class AverageMeter``)? What that method keeps is
        reported at the call, where the argument can be made data, not inside it."""
        func = call.func
        parent = callee.parent
        return type(func) is cst.Attribute and dotted_name(func.value) != "self" and parent is not None \
            and parent.kind == "class" and not self.is_module_class(parent.node.name)

    def kept_at_calls(self, scope: Scope, how: str) -> bool:
        """Is what this method keeps handed to it, attached, by a call of this module that
        ``kept_across_iterations`` reports (``psnres.update(psnr)``)? Then its own statement
        needs no report of its own."""
        memo = scope._memo.setdefault("kept at calls", {})
        if how not in memo:
            memo[how] = any(
                self.keeper_method_called(call, scope) and self.kept_across_iterations(call, ctx, how)
                for call, ctx in self.callers_of(scope)
            )
        return memo[how]

    def kept_across_iterations(self, call, ctx: Context, how: str) -> list[tuple[object, object, Scope]]:
        """For a call inside a loop: (argument, the callee's statement keeping it, callee) for
        each graph-attached argument the callee keeps in the way ``how`` (see
        ``kept_arguments``), where the object keeping it outlives the iteration (``meter =
        AverageMeter()`` made before the loop; not one made afresh inside it)."""
        if ctx.loop is None:
            return []
        found = []
        for argument, kind, stmt, callee in self.kept_arguments(call, ctx):
            if kind != how or not self.is_attached(argument, ctx):
                continue
            if type(call.func) is cst.Attribute and callee.parent is not None and callee.parent.kind == "class":
                key = storage_key(call.func.value)
                if key is None or not self.container_outlives_iteration(key, ctx):
                    continue
            found.append((argument, stmt, callee))
        return found

