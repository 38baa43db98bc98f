"""Positions of the reported nodes, without paying for the positions of every node.

libcst's PositionProvider computes a range for each of a module's nodes while generating its
code: on a 1,000-line module that is about 50 ms, three times the code generation alone, and
``MetadataWrapper.resolve`` adds as much again for a walk of the tree it makes for batchable
providers even when there are none. A file with findings needs the ranges of a handful of nodes.
``node_positions`` generates the code once with the provider's own bookkeeping switched on only
inside the subtrees of the nodes asked for, so their ranges are exactly the provider's (a node's
syntactic range is built from its children's, all inside its subtree): 20 ms instead of 50 on
that module. Any other node's range is computed on demand by the full provider, so a caller that
asks for more than it announced gets the right answer, only slower.

This leans on libcst's codegen protocol (``CodegenState.before_codegen`` / ``after_codegen`` /
``record_syntactic_position``, ``Module._codegen``); where those differ, the full provider is used.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from functools import lru_cache

from torchlint.lazy import cst


class Positions:
    """node -> libcst ``CodeRange`` (PositionProvider's), for the nodes given first and, lazily,
    for any other."""

    def __init__(self, wrapper, nodes: Iterable) -> None:
        self._wrapper = wrapper
        self._complete = False
        try:
            self._known = _targeted(wrapper.module, frozenset(nodes))
        except (AttributeError, TypeError):  # pragma: no cover - a libcst whose codegen protocol differs
            self._known = self._full()

    def __getitem__(self, node):
        if node not in self._known and not self._complete:
            self._known = self._full()
        return self._known[node]

    def get(self, node, default=None):
        """The node's range, or ``default`` for a node that is not in this module (one of
        another module of the project, reached through the project index)."""
        try:
            return self[node]
        except KeyError:
            return default

    def _full(self):
        self._complete = True
        try:
            return cst.metadata.PositionProvider()._gen(self._wrapper)  # without resolve's extra walk
        except (AttributeError, TypeError):  # pragma: no cover
            return self._wrapper.resolve(cst.metadata.PositionProvider)


def node_positions(wrapper, nodes: Iterable) -> Positions:
    return Positions(wrapper, nodes)


def _targeted(module, targets: frozenset) -> dict:
    provider = cst.metadata.PositionProvider()
    provider._computed = {}
    state = _state_class()(
        default_indent=module.default_indent, default_newline=module.default_newline, provider=provider,
    )
    state.targets = targets
    module._codegen(state)
    return provider._computed


@lru_cache(maxsize=None)
def _state_class():
    """Defined on first use: libcst is imported only when a file has findings to position."""
    from libcst.metadata.position_provider import PositionProvidingCodegenState

    class TargetedState(PositionProvidingCodegenState):
        # No __slots__ here: the two attributes below live in an instance dict.
        def before_codegen(self, node) -> None:
            depth = self.__dict__.get("depth", 0)
            if depth or node in self.targets:
                self.depth = depth + 1
                super().before_codegen(node)

        def after_codegen(self, node) -> None:
            if self.__dict__.get("depth", 0):
                super().after_codegen(node)
                self.depth -= 1

        def record_syntactic_position(self, node, *, start_node=None, end_node=None):
            if self.__dict__.get("depth", 0):
                return super().record_syntactic_position(node, start_node=start_node, end_node=end_node)
            return contextlib.nullcontext()

    return TargetedState
