"""TL403's fix hint depends on how the loop uses the buffer; and the shared step-loop predicate
that TL401-TL403 rely on, checked on loops it must tell apart."""

from __future__ import annotations

import textwrap

import pytest

from torchlint.analysis import Analysis
from torchlint.engine import lint_source
from torchlint.lazy import cst
from torchlint.rules.tl403_allocation_in_loop import AllocationInLoop


def _hint(body: str) -> str:
    source = "import torch\n\nfor x, y in loader:\n" + textwrap.indent(textwrap.dedent(body), "    ")
    [violation] = lint_source(source, "train.py", [AllocationInLoop])
    return violation.help


def test_written_buffer_is_reset_the_way_its_factory_filled_it():
    assert "`counts.zero_()`" in _hint("counts = torch.zeros(10)\ncounts.index_add_(0, y, x)\n")
    assert "`mask.fill_(1)`" in _hint("mask = torch.ones(10)\nmask[y] = 0\n")
    assert "`fill.fill_(value)`" in _hint("fill = torch.full((10,), 3.0)\nfill += x.sum()\n")


def test_buffer_never_written_is_simply_hoisted():
    hint = _hint("positions = torch.arange(16)\nmodel(x, positions)\n")
    assert "reuse it: the loop never writes into it" in hint


def test_empty_buffer_needs_no_reset():
    hint = _hint("out = torch.empty(8, 16)\ntorch.matmul(x, w, out=out)\n")
    assert "needs no reset" in hint


def _step_loops(source: str) -> dict[str, bool]:
    """``is_step_loop`` for every loop, keyed by the loop's first line."""
    analysis = Analysis(cst.parse_module(textwrap.dedent(source)))
    return {
        analysis.code(loop.node, 40).split(":")[0]: analysis.is_step_loop(loop)
        for loop in analysis.loops.values()
    }


@pytest.mark.parametrize(("source", "expected"), [
    (  # the epoch loop is outer: its inner loop makes the steps
        """
        for epoch in range(epochs):
            for x, y in data:
                model(x).sum().backward()
        """,
        {"for epoch in range(epochs)": False, "for x, y in data": True},
    ),
    (  # gradient accumulation: the outer loop steps the optimizer itself
        """
        for x, y in data:
            for part in x.chunk(4):
                model(part).sum().backward()
            optimizer.step()
        """,
        {"for x, y in data": True, "for part in x.chunk(4)": True},
    ),
    (  # a batch loop with a small inner loop that makes no steps
        """
        for batch in loader:
            for key in batch:
                batch[key] = batch[key].cuda()
            train_step(batch)
        """,
        {"for batch in loader": True, "for key in batch": False},
    ),
    (  # loops over things, not steps
        """
        for path in checkpoints:
            network = build(path)
            scores[path] = evaluate(network)
        while step < max_steps:
            for batch in loader:
                model(batch).backward()
        """,
        {"for path in checkpoints": False, "while step < max_steps": False, "for batch in loader": True},
    ),
])
def test_step_loops(source, expected):
    assert _step_loops(source) == expected


def test_every_iteration_means_unguarded_in_the_innermost_loop_of_a_repeating_loop():
    source = textwrap.dedent("""
        for epoch in range(epochs):
            if epoch:
                for batch in loader:
                    a()
                    try:
                        b()
                        break
                    except Error:
                        c()
            d()
    """)
    analysis = Analysis(cst.parse_module(source))
    every = {
        analysis.code(stmt): analysis.runs_every_iteration(ctx)
        for stmt, ctx in analysis.statements_by_type["Expr"]
    }
    # the `break` in the try body makes the batch loop a retry loop: it runs once
    assert every == {"a()": False, "b()": False, "c()": False, "d()": True}


HELPER_CASES = {
    "a helper that only computes with the buffer": """\
import torch

def process(batch, temp):
    temp.copy_(batch)
    return temp.sum().item()

for batch in loader:
    temp = torch.zeros(64, 64)  # expect: TL403
    process(batch, temp)
""",
    "a method of the class, by keyword": """\
import torch

class Trainer:
    def fill(self, x, *, buf):
        buf[: x.shape[0]] = x

    def fit(self, loader):
        for x in loader:
            buf = torch.zeros(8, 8)  # expect: TL403
            self.fill(x, buf=buf)
            self.model(buf).sum().backward()
""",
    "a helper that returns it: the caller keeps the result": """\
import torch

def place(x, canvas):
    canvas[: len(x)] = x
    return canvas

outputs = []
for x in loader:
    canvas = torch.zeros(8, 8)
    padded = place(x, canvas)
    outputs.append(padded)
""",
    "a helper that returns it: the caller only reads the result": """\
import torch

def place(x, canvas):
    canvas[: len(x)] = x
    return canvas

for x, y in loader:
    canvas = torch.zeros(8, 8)  # expect: TL403
    padded = place(x, canvas)
    loss = criterion(model(padded), y)
    loss.backward()
""",
    "helpers that keep it": """\
import torch

cache = []

def store(x, buf):
    cache.append(buf)

def stash(x, buf):
    x.buffer = buf

def later(x, buf):
    def read():
        return buf.sum()
    return read

def hand_on(x, buf):
    store(x, buf)

def generate(x, buf):
    yield buf

def anything(*args):
    pass

for x in loader:
    a = torch.zeros(8)
    store(x, a)
    b = torch.zeros(8)
    stash(x, b)
    c = torch.zeros(8)
    later(x, c)
    d = torch.zeros(8)
    hand_on(x, d)
    e = torch.zeros(8)
    generate(x, e)
    f = torch.zeros(8)
    anything(x, f)
    g = torch.zeros(8)
    unknown_library_call(x, g)
    model(x).sum().backward()
""",
    "a helper that hands it on to one that does not keep it": """\
import torch

def norm(buf):
    return buf.norm()

def outer(x, buf):
    buf.copy_(x)
    return norm(buf) + 1

for x in loader:
    buf = torch.zeros(8)  # expect: TL403
    outer(x, buf)
    model(x).sum().backward()
""",
}


@pytest.mark.parametrize("source", HELPER_CASES.values(), ids=HELPER_CASES.keys())
def test_buffer_handed_to_a_helper(source):
    from torchlint.testing import actual_findings, describe_mismatch, expected_findings

    expected = expected_findings(source)
    actual = actual_findings(source, [AllocationInLoop], path="train.py")
    assert actual == expected, describe_mismatch(expected, actual)


def test_a_helper_that_writes_into_the_buffer_asks_for_a_reset():
    source = textwrap.dedent("""\
        import torch

        def fill(x, buf):
            buf[: len(x)] = x
            return buf.sum()

        for x in loader:
            buf = torch.zeros(8)
            fill(x, buf)
            model(x).sum().backward()
        """)
    [violation] = lint_source(source, "train.py", [AllocationInLoop])
    assert "`buf.zero_()`" in violation.help
