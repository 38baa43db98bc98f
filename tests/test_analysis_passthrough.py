"""`analysis.summaries`: helpers that compute on the tensors they are given, and containers
filled with attached values."""

from __future__ import annotations

import libcst as cst
import pytest

from torchlint.analysis import Analysis

SOURCE = """\
import torch
import torch.nn.functional as F


def masked_mean(values, mask):
    return (values * mask).sum() / mask.sum()


def detach(x):
    if isinstance(x, torch.Tensor):
        return x.detach()
    elif isinstance(x, dict):
        return {k: detach(v) for k, v in x.items()}
    return x


def passthrough_fallback(x):
    if isinstance(x, list):
        return [item.detach() for item in x]
    return x


def accuracy(logits, y):
    return (logits.argmax(-1) == y).float().mean()


def log_probs(logits, labels):
    logp = F.log_softmax(logits, dim=-1)
    return torch.gather(logp, 2, labels.unsqueeze(2)).squeeze(-1), labels.numel()


def run_chunks(model, xs):
    chunks = []
    for x in xs:
        chunks.append(model(x))
    return torch.cat(chunks)


def train(model, loader, mask):
    for x, y in loader:
        out = model(x)
        m = masked_mean(out, mask)
        d = detach(out)
        f = passthrough_fallback(out)
        a = accuracy(out, y)
        lp, count = log_probs(out, y)
        c = run_chunks(model, x)
        probe = m, d, f, a, lp, count, c
        out.sum().backward()
"""


@pytest.fixture(scope="module")
def probe():
    analysis = Analysis(cst.parse_module(SOURCE), "x.py", SOURCE)
    train = next(scope for scope in analysis.scopes.values() if scope.name == "train")
    stmt, ctx = next((stmt, ctx) for stmt, ctx in train.statements
                     if type(stmt) is cst.Assign and type(stmt.targets[0].target) is cst.Name
                     and stmt.targets[0].target.value == "probe")
    elements = {element.value.value: element.value for element in stmt.value.elements}
    return lambda name: analysis.is_attached(elements[name], ctx)


@pytest.mark.parametrize(("name", "attached"), [
    ("m", True),        # arithmetic on the attached argument
    ("d", False),       # a helper named for detaching
    ("f", False),       # handing a parameter back unchanged is not computing on it
    ("a", False),       # a comparison: no graph
    ("lp", True),       # element 0 of the returned tuple carries the graph
    ("count", False),   # element 1 is a number
    ("c", True),        # a list filled with forward outputs, concatenated
])
def test_helper_results(probe, name, attached):
    assert probe(name) is attached
