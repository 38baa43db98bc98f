"""TL101 and returns: a container returned (or an attached value made from it) may hand its
graphs to the caller; a number made from it hands none on. Each case marks its findings with
``# expect: TL101``."""

from __future__ import annotations

import pytest

from torchlint.analysis import mentioned_keys
from torchlint.lazy import cst
from torchlint.rules import rules_by_code
from torchlint.testing import assert_findings_match_markers

RULE = rules_by_code()["TL101"]

CASES = {
    "a generator of items summed": """\
def mean_loss(model, loader):
    losses = []
    for x, y in loader:
        losses.append(criterion(model(x), y))  # expect: TL101
    return sum(l.item() for l in losses) / len(losses)
""",
    "a list of items": """\
def per_batch(model, loader):
    losses = []
    for x, y in loader:
        losses.append(criterion(model(x), y))  # expect: TL101
    return [float(l) for l in losses]
""",
    "a number bound first, then returned": """\
def mean_loss(model, loader):
    losses = []
    for x, y in loader:
        losses.append(criterion(model(x), y))  # expect: TL101
    total = sum([l.item() for l in losses if l is not None])
    return total / len(losses)
""",
    "an attached mean is handed on": """\
def chunked_loss(model, chunks, y):
    losses = []
    for x in chunks:
        losses.append(criterion(model(x), y))
    return sum(losses) / len(losses)
""",
    "a comprehension that keeps the tensors": """\
def outputs(model, chunks):
    outs = []
    for x in chunks:
        outs.append(model(x))
    return {i: out * 2 for i, out in enumerate(outs)}
""",
    "a comprehension whose condition reads the list": """\
def outputs(model, chunks, names):
    outs = []
    for x in chunks:
        outs.append(model(x))  # expect: TL101
    return [name for name in names if outs]
""",
}


@pytest.mark.parametrize("source", CASES.values(), ids=CASES.keys())
def test_findings_match_markers(source):
    assert_findings_match_markers(source, [RULE])


@pytest.mark.parametrize(("expression", "keys"), [
    ("sum(x.item() for x in losses)", {"sum"}),
    ("sum(x for x in losses)", {"sum", "losses"}),
    ("[a * w for a in xs for b in ys]", {"w", "xs", "ys"}),
    ("{k: v.detach() for k, v in d.items()}", set()),
    ("{k: v for k, v in d.items() if v > t}", {"d", "d.items"}),
])
def test_comprehension_carries_its_iterables_only_through_its_element(expression, keys):
    node = cst.parse_expression(expression)
    assert mentioned_keys(node, skip_detached=True) == keys
