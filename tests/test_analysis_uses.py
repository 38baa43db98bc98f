"""`analysis.uses`: is every later use of a value a read as data (what TL201 asks of a forward
pass's outputs before calling the pass evaluation)?"""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchlint.analysis import Analysis

HELPERS = """\
import torch


def sample_action(probs):
    return torch.multinomial(probs, 1).item()


def keep(history, value):
    history.append(value)
    return value
"""


def _after_forward(body: str):
    """The analysis, and the statements of ``step()`` after its first one (``out = net(x)``)."""
    source = HELPERS + "\n\ndef step(net, x, history):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    analysis = Analysis(cst.parse_module(source), "uses.py", source)
    scope = next(s for s in analysis.scopes.values() if s.name == "step")
    own = [(stmt, ctx) for stmt, ctx in scope.statements if ctx.scope is scope]
    return analysis, own[1:]


@pytest.mark.parametrize(("body", "helpers", "derive", "expected"), [
    ("out = net(x)\nreturn out.detach().cpu().numpy()\n", False, 0, True),
    ("out = net(x)\nreturn out.softmax(-1).data\n", False, 0, True),  # through a conversion that keeps the graph
    ("out = net(x)\nreturn out\n", False, 0, False),  # handed on with its graph
    ("out = net(x)\nhistory.append(out)\n", False, 0, False),
    ("out = net(x)\nx = 1\n", False, 0, False),  # never read: nothing says it is data
    ("out = net(x)\nreturn sample_action(out)\n", True, 0, True),  # a project function that only reads it
    ("out = net(x)\nreturn keep(history, out)\n", True, 0, False),  # ... not one that keeps it
    ("out = net(x)\nreturn sample_action(out)\n", False, 0, False),  # helpers not followed
    ("out = net(x)\nkl = (out * out.log()).sum()\nreturn kl.item()\n", False, 1, True),  # a derived local read as data
    ("out = net(x)\nkl = (out * out.log()).sum()\nreturn kl.item()\n", False, 0, False),
    ("out = net(x)\nprint(out.item())\nout = net(x * 2)\nreturn out\n", False, 0, True),  # bound again: another value
    ("out = net(x)\nprint(out.item())\nout = net(out)\nreturn out\n", False, 0, False),  # fed on with its graph
])
def test_only_read_as_data(body, helpers, derive, expected):
    analysis, after = _after_forward(body)
    assert analysis.only_read_as_data({"out"}, after, helpers=helpers, derive=derive) is expected
