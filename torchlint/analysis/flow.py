"""Control flow: the statements of a loop, whether a statement runs every iteration or every
step, straight-line sequences and branches."""

from __future__ import annotations

import re
from collections.abc import Iterator
from torchlint.lazy import cst
from torchlint.analysis.vocabulary import BACKWARD_FUNCTIONS, STEP_SOURCE_RE, STEP_TARGET_RE, name_words
from torchlint.analysis.syntax import _del_targets, empties_container, _is_batch_stride, _names_match, call_name, collect_nodes, dotted_name, iter_expression_nodes, mentioned_keys, storage_key
from torchlint.analysis.scopes import Binding, Context, Loop, Scope

_TRAINING_WORD_RE = re.compile(r"[a-z]+")
# Tests of which process of a distributed run executes a statement.
PROCESS_TEST_RE = re.compile(r"rank|is_main|main_process|master|root_worker|is_root|local_main|is_primary|is_chief", re.I)
# Flags that ask for a cache flush or a collection on purpose.
OPT_IN_TEST_RE = re.compile(r"cache|mem|oom|clear|free|empty|gc|collect|low|debug|profil", re.I)


class ControlFlowQueries:
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
            cached = []
            for expr in self.own_expressions(stmt):
                collect_nodes(expr, cst.Call, cached)
            self._calls_memo[id(stmt)] = cached
        return cached

    def statements_in_loop(self, loop: Loop) -> Iterator[tuple[object, Context]]:
        """Statements of the loop's body (nested loops included, nested functions excluded)."""
        for stmt, ctx in loop.scope.statements:
            if ctx.order > loop.end:
                break
            if ctx.order > loop.start:
                yield stmt, ctx

    def resets_in_loop(self, key: str, loop: Loop) -> list[Binding]:
        """Bindings inside the loop's body that give ``key`` a fresh value (``xs = []``), as
        opposed to extending the old one (``xs += [v]``, ``total = total + loss``)."""
        return [
            binding for binding in loop.scope.bindings.get(key, ())
            if loop.contains(binding.ctx.order) and binding.kind != "augassign"
            and not (binding.kind == "assign" and _extends(key, binding.value))
        ]

    def outlives_call(self, key: str, ctx: Context) -> bool:
        """In code whose only loop is implicit (a per-step function): does the container or
        accumulator ``key`` outlive the call? Attributes of ``self`` and module globals do;
        locals and whatever a parameter holds (``strategy.loss``, reset by the framework that
        passes it) do not."""
        root = key.partition(".")[0]
        if root == "self":
            return ctx.scope.class_scope is not None
        if ctx.scope.kind != "function":
            return True
        binding = self.lookup(root, ctx)
        return binding is not None and binding.ctx.scope is self.module_scope and binding.kind == "assign"

    def cleared_in_loop(self, key: str, loop: Loop) -> bool:
        """Is the container emptied inside the loop (``xs.clear()``, ``del xs[:]``)?"""
        return any(empties_container(stmt, key) for stmt, _ in self.statements_in_loop(loop))

    def consumed_elsewhere(self, key: str, ctx: Context) -> bool:
        """Is the container ``key`` (an attribute of ``self`` or a global) drained by other code
        of the class or module: ``self.outputs.pop()``, ``del self.outputs[-1]``? A forward
        hook pushing what a backward hook pops keeps one entry per layer in flight, not every
        step's."""
        if not (key.startswith("self.") and ctx.scope.class_scope is not None) and self.lookup(
                key.partition(".")[0], ctx) is None:
            return False
        for stmt, _ in self.statements_by_type.get("Del", ()):
            if any(type(element.value) is cst.Subscript and storage_key(element.value) == key
                   for element in _del_targets(stmt)):
                return True
        for stmt, _ in self.statements_by_type.get("Expr", ()) + self.statements_by_type.get("Assign", ()):
            for call in self.calls_in(stmt):
                func = call.func
                if type(func) is cst.Attribute and func.attr.value in ("pop", "popleft", "popitem") \
                        and dotted_name(func.value) == key:
                    return True
        return False

    def restarted_by_own_method(self, key: str, ctx: Context) -> bool:
        """Does another method of the class give ``self.x`` a fresh value that does not read the
        old one (``self.cum_attn = torch.zeros(b, t)`` in ``init_states``), other than
        ``__init__`` and epoch-level hooks? The state then lives from one restart to the next
        (one sequence, one episode), not for the whole of training."""
        class_scope = ctx.scope.class_scope
        if class_scope is None or not key.startswith("self."):
            return False
        for binding in class_scope.bindings.get(key, ()):
            method = binding.ctx.scope
            if method is ctx.scope or method.kind != "function" or method.name == "__init__" \
                    or "epoch" in method.name.lower() or binding.kind != "assign" or binding.element:
                continue
            if binding.value is not None and key not in mentioned_keys(binding.value):
                return True
        return False

    def container_outlives_iteration(self, key: str, ctx: Context, loop: Loop | None = None) -> bool:
        """Does the container ``key``, stored into by a statement at ``ctx`` inside a loop, keep
        what it receives beyond the iteration of ``loop`` (default: the innermost): not a
        per-step function's local (see ``outlives_call``), not rebuilt (``xs = []``) or emptied
        (``xs.clear()``) in the loop?"""
        loop = loop or ctx.loop
        if loop is None:
            return False
        if loop.implicit is not None and not self.outlives_call(key, ctx):
            return False
        return not (self.resets_in_loop(key, loop) or self.cleared_in_loop(key, loop))

    def bound_in_loop(self, key: str, loop: Loop) -> bool:
        """Is ``key`` bound by the loop: its header's target or any statement of its body?"""
        return any(loop.start <= binding.ctx.order <= loop.end for binding in loop.scope.bindings.get(key, ()))

    def loop_backpropagates(self, loop: Loop) -> bool:
        """Does the loop call ``backward()``, in its body or in a module-defined function the
        body calls (``loss = self.train_step(batch)``)?"""
        if "backprop" not in loop._memo:
            loop._memo["backprop"] = any(
                self.statement_backpropagates(stmt, ctx) for stmt, ctx in self.statements_in_loop(loop)
            )
        return loop._memo["backprop"]

    def loop_always_backpropagates(self, loop: Loop) -> bool:
        """Does every iteration of the loop call ``backward()`` (not under an ``if``)?"""
        return any(
            ctx.loop is loop and ctx.guard is None and self.statement_backpropagates(stmt, ctx)
            for stmt, ctx in self.statements_in_loop(loop)
        )

    def statement_backpropagates(self, stmt, ctx: Context) -> bool:
        """Does the statement call ``backward()``: directly (``loss.backward()``,
        ``accelerator.backward(loss)``), through an optimizer wrapper handed the loss
        (``optim.step(loss)``), or in a module-defined function it calls?"""
        return any(
            (call_name(call) in BACKWARD_FUNCTIONS and callee is None) or self.steps_on_a_loss(call, ctx)
            or (callee is not None and self.backpropagates(callee))
            for call, callee in zip(self.calls_in(stmt), self._callees(stmt, ctx))
        )

    def _callees(self, stmt, ctx: Context) -> list:
        return [self.called_function(call, ctx, True, ("backward", "autograd", ".step("))
                for call in self.calls_in(stmt)]

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
        loop = ctx.loop
        if loop is None or self.loop_runs_once(loop) or not self.is_step_loop(loop):
            return False
        return ctx.guard is None or self._process_guard(ctx, loop)

    def _process_guard(self, ctx: Context, loop: Loop) -> bool:
        """Is the statement's only ``if`` inside the loop a test the loop does not change: a
        configuration flag (``if n_gpus:``, ``if args.amp:``) or which process runs it (``if
        is_root_worker():``, ``if rank == 0:``)? When it holds, it holds on every step."""
        guard = ctx.guard
        if type(guard) is not cst.If:
            return False
        found = next(((stmt, stmt_ctx) for stmt, stmt_ctx in self.statements_in_loop(loop) if stmt is guard), None)
        if found is None or found[1].guard is not None or found[1].loop is not loop:
            return False
        text = self.code(guard.test, 200)
        if OPT_IN_TEST_RE.search(text):
            return False  # `if args.empty_cache:`, `if low_memory:`: asked for on purpose
        for node in iter_expression_nodes(guard.test):
            if type(node) is cst.Call and not PROCESS_TEST_RE.search(self.code(node.func, 80)):
                return False  # `if torch.cuda.memory_reserved() > limit:` changes from step to step
            if type(node) in (cst.BinaryOperation, cst.Comparison) and not PROCESS_TEST_RE.search(self.code(node, 200)):
                return False  # `step % 100 == 0`, `loss > best`
        bound = {binding.key for key in mentioned_keys(guard.test) if key != "self"
                 for binding in loop.scope.bindings.get(key, ())
                 if loop.start <= binding.ctx.order <= loop.end}  # (the loop's own target too; not `self`)
        return not bound

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
        if loop.implicit is not None:
            loop._memo["step"] = self.implicit_step_loop(loop)
            return loop._memo["step"]
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
        header = self.header_names_steps(loop)
        result = own_work or (header and not any(self.is_step_loop(inner) for inner in nested))
        loop._memo["step"] = result
        return result

    def header_names_steps(self, loop: Loop) -> bool:
        """Does the loop's header say it goes over steps: ``for batch in loader``, ``for step in
        range(n_steps)``, ``while step < max_steps``?"""
        node = loop.node
        if type(node) is cst.For:
            if _names_match(STEP_TARGET_RE, node.target) or _names_match(STEP_SOURCE_RE, node.iter) \
                    or _is_batch_stride(node.iter):
                return True
            # `progress = tqdm(enumerate(train_loader))` on one branch, `enumerate(train_loader)`
            # on the other, then `for i, batch in progress:`
            bindings = loop.scope.bindings.get(node.iter.value, ()) if type(node.iter) is cst.Name else ()
            return any(binding.kind == "assign" and not binding.element and binding.value is not None
                       and binding.ctx.order < loop.start and _names_match(STEP_SOURCE_RE, binding.value)
                       for binding in bindings)
        if type(node) is cst.While:
            return bool(_names_match(STEP_TARGET_RE, node.test))
        return False

    def _makes_step(self, call, ctx: Context) -> bool:
        func = call.func
        if call_name(call) in BACKWARD_FUNCTIONS:
            return True
        if type(func) is cst.Name and func.value == "self":
            return True  # a module calling its own forward (a decoding loop)
        if (self.is_module(func, ctx) and not _names_a_loss(func)) or self.stepped_optimizer(call, ctx) is not None:
            return True  # (a loss module's call, `self.criterion(out, y)`, scores a step: it makes none)
        # a helper of another module counts when it can backpropagate or step at all
        callee = self.called_function(call, ctx, True, ("backward", ".step(", "autograd"))
        return callee is not None and self.makes_step_per_call(callee)

    def makes_step_per_call(self, scope: Scope) -> bool:
        """Does one call of the function make one step: a forward pass, ``backward()`` or an
        optimizer step outside any loop of its own (``train_step(batch)``, not
        ``train_one_epoch(loader)``)?"""
        if "step_per_call" not in scope._memo:
            scope._memo["step_per_call"] = False  # recursion guard
            scope._memo["step_per_call"] = any(
                all(loop.implicit is not None for loop in ctx.loops) and self._makes_step(call, ctx)
                for call, ctx, _ in self.scope_calls(scope)
            )
        return scope._memo["step_per_call"]

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

    # ------------------------------------------------------------------ branch conditions

    def branch_tests(self, stmt, scope: Scope) -> tuple:
        """The ``if`` tests that decide whether ``stmt`` runs within its function: (test node
        without a leading ``not``, whether it must be true), outermost first."""
        memo = scope._memo.get("branches")
        if memo is None:
            memo = scope._memo["branches"] = {}
            body = scope.node.body
            self._record_branches(body.body if hasattr(body, "body") else body, (), memo)
        return memo.get(id(stmt), ())

    def branch_conditions(self, stmt, scope: Scope) -> tuple[tuple[str, bool], ...]:
        """``branch_tests`` with each test's code in place of its node."""
        path = self.branch_tests(stmt, scope)
        if not path:
            return ()
        # the tests' code is generated only for the paths asked about (codegen is costly)
        texts = scope._memo.setdefault("branch texts", {})  # id(path) -> its (code, positive)
        found = texts.get(id(path))
        if found is None:
            codes = scope._memo.setdefault("branch test codes", {})  # id(test) -> its code
            for test, _ in path:
                if id(test) not in codes:
                    codes[id(test)] = self.code(test, 10_000)
            found = texts[id(path)] = tuple((codes[id(test)], positive) for test, positive in path)
        return found

    def _record_branches(self, statements, path: tuple, memo: dict) -> None:
        for stmt in statements:
            memo[id(stmt)] = path
            if type(stmt) in (cst.SimpleStatementLine, cst.SimpleStatementSuite):
                for small in stmt.body:
                    memo[id(small)] = path
                continue
            kind = type(stmt)
            if kind in (cst.FunctionDef, cst.ClassDef):
                continue
            if kind is cst.If:
                test, positive = stmt.test, True
                while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
                    test, positive = test.expression, not positive
                self._record_branches(_suite_statements(stmt.body), path + ((test, positive),), memo)
                if stmt.orelse is not None:
                    negated = path + ((test, not positive),)
                    if type(stmt.orelse) is cst.If:
                        self._record_branches([stmt.orelse], negated, memo)
                    else:
                        self._record_branches(_suite_statements(stmt.orelse.body), negated, memo)
                elif _ends_in_exit(stmt.body):
                    # `if state != "train": return`: what follows runs only when the test fails
                    path = path + ((test, not positive),)
                continue
            for block in _child_blocks(stmt):
                self._record_branches(block, path, memo)

    def exclusive_branches(self, first, second, scope: Scope) -> bool:
        """Can the two statements never both run in one call: one is under ``if c:`` and the
        other under its ``else`` (or ``if not c:``) with the same test ``c``?"""
        conditions = dict(self.branch_conditions(first, scope))
        return any(
            text in conditions and conditions[text] is not positive
            for text, positive in self.branch_conditions(second, scope)
        )

    def is_accumulation_test(self, test, ctx: Context, depth: int = 0) -> bool:
        """Does an ``if`` test say "a gradient-accumulation boundary": a ``%`` (``(i + 1) % k ==
        0``), a name with "accum" or "sync" in it (``accelerator.sync_gradients``), or a flag
        computed from one (``did_step = (i + 1) % 2 == 0``)?"""
        for node in iter_expression_nodes(test):
            if type(node) is cst.BinaryOperation and type(node.operator) is cst.Modulo:
                return True
            if type(node) in (cst.Name, cst.Attribute):
                key = (dotted_name(node) or "").lower()
                if "accum" in key or "sync" in key:
                    return True
                if type(node) is cst.Name and depth < 2:
                    binding = self.lookup(node.value, ctx)
                    value = binding.value if binding is not None and binding.kind == "assign" else None
                    if value is not None and not binding.element and self.is_accumulation_test(value, binding.ctx, depth + 1):
                        return True
        return False

    def calls_within(self, node) -> list:
        """Every call anywhere under ``node``, nested blocks included (for opaque compound
        statements of a straight-line sequence)."""
        if type(node) in (cst.FunctionDef, cst.ClassDef):
            return []
        return [item for item in iter_expression_nodes(node) if type(item) is cst.Call]

    def _may_train(self, call, owner: str, ctx: Context) -> bool:
        """Can a training routine train ``owner``: it names ``owner`` (or the object holding
        it, ``self`` for ``self.model``), or no other module (``trainer.train()``)?"""
        mentioned = mentioned_keys(call)
        if owner in mentioned or owner.partition(".")[0] in mentioned and "." in owner:
            return True
        return not any(
            self.is_module(part, ctx)
            for part in iter_expression_nodes(call)
            if type(part) in (cst.Name, cst.Attribute) and dotted_name(part) not in (None, owner)
        )

    def _training_routine(self, call, name: str) -> bool:
        """``train(model, loader)``, ``train_one_epoch(...)``, ``trainer.fit(model)``,
        ``trainer.train()``; not the mode switch ``module.train()`` / ``module.train(mode)``."""
        words = _TRAINING_WORD_RE.findall(name.lower())
        if not words:
            return False
        if words[0] in ("optimize", "optimizer", "minimize") and type(call.func) is cst.Name:
            return bool(call.args)  # optimizer(mll, closure=closure), minimize(model, ...)
        if words[0] not in ("train", "training", "fit", "finetune"):
            return False  # check_train_batch_size(...), get_train_loader(...)
        receiver = dotted_name(call.func.value) if type(call.func) is cst.Attribute else None
        if receiver is not None and "trainer" in receiver.lower():
            return True
        if name == "train" and type(call.func) is cst.Attribute:
            return len(call.args) >= 2
        return bool(call.args)

    def changes_weights(self, stmt, ctx: Context, keep: str | None = None, owner: str | None = None) -> bool:
        """Can the statement change a model's weights in place: an optimizer step, a
        ``backward()`` (its step may be in a helper), a module-defined function that steps, a
        call named like a training routine (``train(model, loader)``, ``trainer.fit(model)``,
        not the mode switch ``model.train()``), or ``owner.load_state_dict(other)`` (it copies
        into the same tensors; with ``owner`` None, any object's). ``keep``: a key whose own
        restoring ``load_state_dict(keep)`` does not count."""
        if self.statement_backpropagates(stmt, ctx):
            return True
        for call in self.calls_in(stmt):
            name = call_name(call) or ""
            if self.stepped_optimizer(call, ctx) is not None:
                return True
            if name == "load_state_dict" and call.args:
                receiver = dotted_name(call.func.value) if type(call.func) is cst.Attribute else None
                if (owner is None or receiver == owner) and (keep is None or keep not in mentioned_keys(call.args[0].value)):
                    return True
                continue
            if self._training_routine(call, name) and (owner is None or self._may_train(call, owner, ctx)):
                return True
            callee = self.called_function(call, ctx)
            if callee is not None and self.steps_optimizer(callee):
                return True
        return False




def _suite_statements(suite) -> list:
    return list(suite.body) if type(suite) is cst.IndentedBlock else [suite]


def _child_blocks(stmt) -> list[list]:
    """The statement lists directly inside a compound statement other than ``if``."""
    kind = type(stmt)
    blocks = []
    if kind in (cst.For, cst.While, cst.With):
        blocks.append(_suite_statements(stmt.body))
        if kind is not cst.With and stmt.orelse is not None:
            blocks.append(_suite_statements(stmt.orelse.body))
    elif kind in (cst.Try, cst.TryStar):
        blocks.append(_suite_statements(stmt.body))
        blocks.extend(_suite_statements(handler.body) for handler in stmt.handlers)
        for extra in (stmt.orelse, stmt.finalbody):
            if extra is not None:
                blocks.append(_suite_statements(extra.body))
    elif kind is cst.Match:
        blocks.extend(_suite_statements(case.body) for case in stmt.cases)
    return blocks


def _extends(key: str, value) -> bool:
    """Does the new value of ``key`` build on the old one (``total = total + loss``)? A
    comprehension that only iterates over the old container's keys
    (``{name: 0 for name in metrics}``) starts afresh."""
    if type(value) in (cst.DictComp, cst.ListComp, cst.SetComp) and type(value.for_in.inner_for_in) is type(None):
        produced = [value.key, value.value] if type(value) is cst.DictComp else [value.elt]
        return any(key in mentioned_keys(part) for part in produced) or (
            value.for_in.ifs and any(key in mentioned_keys(test.test) for test in value.for_in.ifs)
        )
    return key in mentioned_keys(value)


def _ends_in_exit(body) -> bool:
    """Does an ``if`` body end in ``return`` / ``raise`` / ``continue`` / ``break``?"""
    statements = _suite_statements(body)
    if not statements:
        return False
    last = statements[-1]
    if type(last) in (cst.SimpleStatementLine, cst.SimpleStatementSuite):
        return bool(last.body) and type(last.body[-1]) in (cst.Return, cst.Raise, cst.Continue, cst.Break)
    return False


LOSS_MODULE_WORDS = frozenset({"criterion", "criteria", "loss", "losses", "metric"})


def _names_a_loss(func) -> bool:
    name = dotted_name(func)
    return name is not None and bool(LOSS_MODULE_WORDS & set(name_words(name.rpartition(".")[2])))
