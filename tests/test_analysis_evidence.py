"""`analysis.objects`: what counts as a module by evidence (the receivers TL201 treats as models)."""

from __future__ import annotations

import libcst as cst
import pytest

from torchlint.analysis import Analysis

SOURCE = """\
import torch
from srcnn import SRCNN


def weighted(x, w):
    return (x * w).sum(-1)


def main(model, batch):
    compiled_lambda = torch.compile(lambda x, w: (x * w).sum(-1))
    compiled_function = torch.compile(weighted)
    compiled_model = torch.compile(model.eval())
    loaded = torch.jit.load("model.pt")
    moved = SRCNN().to("cuda")
    batch_on_device = Batch(batch).to("cuda")
    plain = SRCNN()
    actor, critic = nn.Linear(4, 2), nn.Linear(6, 1)
    first, second = make_pair()
    use(compiled_lambda, compiled_function, compiled_model, loaded, moved, batch_on_device, plain, actor, critic, first)
"""


def _evidence():
    analysis = Analysis(cst.parse_module(SOURCE), "evidence.py", SOURCE)
    scope = next(s for s in analysis.scopes.values() if s.name == "main")
    stmt, ctx = next((stmt, ctx) for stmt, ctx in scope.statements
                     if type(stmt) is cst.Expr and ctx.scope is scope)
    return lambda name: analysis.is_module_by_evidence(cst.Name(name), ctx)


@pytest.mark.parametrize(("name", "expected"), [
    ("compiled_lambda", False),  # a compiled function is no model
    ("compiled_function", False),
    ("compiled_model", True),
    ("loaded", True),
    ("moved", True),  # an instance of a class moved to a device: only modules and tensors move
    ("batch_on_device", False),  # a data container moves too, and is no model
    ("plain", False),  # an instance of an unknown class, by itself: no evidence
    ("actor", True),  # `actor, critic = nn.Linear(...), nn.Linear(...)`: the tuple's elements
    ("critic", True),
    ("first", False),  # unpacked from a call: unknown
])
def test_module_by_evidence(name, expected):
    assert _evidence()(name) is expected


HANDED = """\
import torch


def load_model(path):
    model = Net()
    model.load_state_dict(torch.load(path))
    return model.eval()


def infer(model, batch):
    return model.predict(batch)


def score(scorer, batch):
    return scorer.predict(batch)


def main(path, batches, estimator):
    model = load_model(path)
    for batch in batches:
        infer(model, batch)
        score(estimator, batch)
"""


@pytest.mark.parametrize(("function", "parameter", "expected"), [
    ("infer", "model", True),  # every call hands it a loaded model
    ("score", "scorer", False),  # a parameter of the caller: nothing says it is a module
])
def test_a_parameter_every_call_fills_with_a_module(function, parameter, expected):
    analysis = Analysis(cst.parse_module(HANDED), "handed.py", HANDED)
    scope = next(s for s in analysis.scopes.values() if s.name == function)
    stmt, ctx = next((stmt, ctx) for stmt, ctx in scope.statements if ctx.scope is scope)
    assert analysis.is_module_by_evidence(cst.Name(parameter), ctx) is expected


CONSTRUCTED = """\
import torch.nn as nn


class Residual(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x) + x


class Gate(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x) * x


class Net(nn.Module):
    def __init__(self, dim, activation):
        super().__init__()
        self.blocks = nn.Sequential(Residual(nn.Linear(dim, dim)), Residual(Block(dim)))
        self.gates = [Gate(nn.Linear(dim, dim)), Gate(activation)]


class Block(nn.Module):
    def forward(self, x):
        return x
"""


@pytest.mark.parametrize(("class_name", "expected"), [
    ("Residual", True),  # every construction hands `fn` a module
    ("Gate", False),  # one construction hands it a parameter nothing says is a module
])
def test_an_attribute_every_construction_fills_with_a_module(class_name, expected):
    analysis = Analysis(cst.parse_module(CONSTRUCTED), "constructed.py", CONSTRUCTED)
    forward = next(s for s in analysis.scopes.values() if s.name == "forward" and s.parent.name == class_name)
    stmt, ctx = next((stmt, ctx) for stmt, ctx in forward.statements if ctx.scope is forward)
    fn = cst.parse_expression("self.fn")
    assert analysis.is_module_by_evidence(fn, ctx) is expected
    assert analysis.is_module(fn, ctx) is expected
