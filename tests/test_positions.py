"""torchlint.positions: the ranges of the nodes asked for are exactly libcst's PositionProvider's,
and any other node's range is still available (computed on demand)."""

from __future__ import annotations

import random
from pathlib import Path

import libcst
import pytest

from torchlint.positions import node_positions

REPO = Path(__file__).resolve().parents[1]
SOURCES = sorted((REPO / "fixtures").glob("TL*/*.py")) + sorted((REPO / "torchlint" / "analysis").glob("*.py"))


def full_positions(module):
    return libcst.MetadataWrapper(module, unsafe_skip_copy=True).resolve(libcst.metadata.PositionProvider)


@pytest.mark.parametrize("path", SOURCES[::4], ids=lambda path: f"{path.parent.name}/{path.name}")
def test_the_ranges_asked_for_are_the_providers(path):
    module = libcst.parse_module(path.read_text(encoding="utf-8"))
    expected = full_positions(module)
    nodes = list(expected)
    # what rules report: expressions and statements of a line or a few (nested ones among them)
    small = [node for node in nodes if expected[node].end.line - expected[node].start.line < 3]
    chosen = random.Random(path.name).sample(small, min(40, len(small)))
    positions = node_positions(libcst.MetadataWrapper(module, unsafe_skip_copy=True), chosen)
    assert {node: positions[node] for node in chosen} == {node: expected[node] for node in chosen}
    assert len(positions._known) < len(expected)  # only their subtrees were positioned
    other = next(node for node in nodes if node not in positions._known)
    assert positions[other] == expected[other]  # not announced: computed on demand


def test_syntactic_ranges_leave_out_decorators_and_whitespace():
    module = libcst.parse_module("import torch\n\n\n@torch.no_grad()\ndef f(x):\n    return  x   +  1  # c\n")
    function = module.body[1]
    returned = function.body.body[0].body[0]
    positions = node_positions(libcst.MetadataWrapper(module, unsafe_skip_copy=True), [function, returned.value])
    assert (positions[function].start.line, positions[function].start.column) == (5, 0)  # the `def`, not `@`
    assert (positions[returned.value].start.line, positions[returned.value].start.column) == (6, 12)
    assert (positions[returned.value].end.line, positions[returned.value].end.column) == (6, 20)
