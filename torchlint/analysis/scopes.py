"""The records of the walk: scopes (module, class, function), loops, statement contexts and
name bindings."""

from __future__ import annotations

from collections import defaultdict
from torchlint.analysis.vocabulary import GradMode


class Scope:
    """A module, class or function body."""

    __slots__ = ("node", "kind", "parent", "class_scope", "grad", "bindings", "stores", "statements", "name", "_memo", "owner")

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
        self.owner = None  # the Analysis of the module that defines it


class Loop:
    """A for or while statement; ``start``/``end`` bound the orders of the statements inside.

    An *implicit* loop is the body of a function that runs once per step although no loop is
    visible around it: a loop in the project calls it, or a framework does (a Lightning
    ``training_step``, a module's ``forward``). ``node`` is then the function definition and
    ``implicit`` says why it repeats; its parameters count as bound afresh on every pass."""

    __slots__ = ("node", "scope", "start", "end", "implicit", "callers", "_memo")

    def __init__(self, node, scope: Scope, start: int, implicit: str | None = None) -> None:
        self.node = node
        self.scope = scope
        self.start = start
        self.end = start
        self.implicit = implicit
        # for an implicit loop: the (call, context) pairs of the loops that call the function
        self.callers: list = []
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

    @property
    def visible_loops(self) -> tuple[Loop, ...]:
        """The for / while statements around the statement, without implicit loops."""
        return tuple(loop for loop in self.loops if loop.implicit is None)


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

