"""Property tests for `--fix`: on any valid program the fixed text parses, a second fix changes
nothing, and a program without findings is never changed. Programs come from hypothesmith
(arbitrary valid Python), from the PyTorch-shaped grammar of test_properties.py, and from a
grammar of the statements the second-wave rules' fixes rewrite (GradScaler steps and clips,
state-dict snapshots, factories moved to a device, checkpoints, mode switches, dataset items)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from test_properties import SETTINGS, compiles, libcst_parses, torch_program
from torchlint.engine import lint_source
from torchlint.fixer import fix_text
from torchlint.rules import all_rules
from torchlint.violation import INVALID_FILE_CODE


def assert_fix_is_sound(source: str) -> None:
    rules = all_rules()
    findings = lint_source(source, "generated.py", rules)
    result = fix_text(source, "generated.py", rules, unsafe=True)
    if not findings or any(finding.code == INVALID_FILE_CODE for finding in findings):
        assert result.fixed == source, "a file without findings was changed"
        return
    assert result.refused is None, result.refused
    if result.changed:
        assert compiles(result.fixed) and libcst_parses(result.fixed), f"unparsable fix of:\n{source}\n---\n{result.fixed}"
        again = fix_text(result.fixed, "generated.py", rules, unsafe=True)
        assert again.fixed == result.fixed, f"a second --fix changed:\n{result.fixed}\n---\n{again.fixed}"


@SETTINGS
@given(torch_program())
def test_fixing_torch_shaped_programs(source):
    assume(compiles(source))
    assert_fix_is_sound(source)


SECOND_WAVE_STATEMENTS = [
    "scaler.scale(loss).backward()", "scaler.step(optimizer)", "scaler.update()", "scaler.unscale_(optimizer)",
    "optimizer.step()", "optimizer.zero_grad()", "loss = criterion(model(x), y)", "loss.backward()",
    "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)", "nn.utils.clip_grad_value_(params, 0.5)",
    "best = model.state_dict()", "best = {'model': model.state_dict(), 'epoch': epoch}",
    "model.load_state_dict(best)", "state = optimizer.state_dict()",
    "w = torch.zeros(3, requires_grad=True).to(device)", "w = torch.randn(3, requires_grad=True).cuda()",
    "w = torch.full((3,), 0.1, requires_grad=True).double()", "print(w.grad)",
    "mask = torch.ones(4, x.shape[0]).to(x.device)", "noise = torch.randn(x.shape).cuda()",
    "loss = criterion(model(x), y, weight=weights.to(device))", "z = prior.cuda() @ x",
    "h = checkpoint(encoder, x)", "h = checkpoint(encoder, x, use_reentrant=True)",
    "model.eval()", "model.train()", "outs.append(out[:, -1])", "kept[step] = out.diagonal()",
    "out = model(x).detach()", "v = self.data[i]", "v.mul_(2)", "v += 1", "return v", "outs = []", "kept = {}",
    # a few lines that belong together: a training pass, an evaluation, an epoch of both
    "for x, y in loader:\n    optimizer.zero_grad()\n    criterion(model(x), y).backward()\n    optimizer.step()",
    "model.eval()\nwith torch.no_grad():\n    out = model(x)",
    "for x, y in loader:\n    out = model(x).detach()\n    outs.append(out[0])\n    criterion(out, y)",
    "for epoch in range(epochs):\n    for x, y in loader:\n        optimizer.zero_grad()\n"
    "        criterion(model(x), y).backward()\n        optimizer.step()\n    model.eval()",
    "best = model.state_dict()\nfor x, y in loader:\n    criterion(model(x), y).backward()\n    optimizer.step()\n"
    "model.load_state_dict(best)",
    "v = self.data[i]\nv.mul_(2)", "w = torch.zeros(3, requires_grad=True).to(device)\nprint(w.grad)",
]
HEADERS = ["for x, y in loader:", "for step, (x, y) in enumerate(loader):", "for epoch in range(epochs):",
           "if use_amp:", "if (step + 1) % k == 0:", "with torch.no_grad():", "while step < n:"]
PRELUDE = """\
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
from torch.utils.data import Dataset

weights = torch.tensor([1.0, 2.0])
prior = torch.rand(4, 4)
"""


@st.composite
def second_wave_block(draw, depth: int) -> list[str]:
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        if depth < 3 and draw(st.integers(0, 3)) == 0:
            body = draw(second_wave_block(depth + 1))
            lines += [draw(st.sampled_from(HEADERS)), *("    " + line for line in body)]
        else:
            lines += draw(st.sampled_from(SECOND_WAVE_STATEMENTS)).split("\n")
    return lines


@st.composite
def second_wave_program(draw) -> str:
    body = ["    " + line for line in draw(second_wave_block(1))]
    if draw(st.booleans()):
        header = ["class Items(Dataset):", "    def __init__(self):", "        self.data = torch.randn(8, 4)",
                  "    def __getitem__(self, i):"]
        body = ["    " + line for line in body]
    else:
        header = ["def train(model, optimizer, scaler, loader, device, epochs, k, n, step=0):"]
    return PRELUDE + "\n" + "\n".join([*header, *body]) + "\n"


@SETTINGS
@given(second_wave_program())
def test_fixing_second_wave_shapes(source):
    assume(compiles(source))
    assert_fix_is_sound(source)


hypothesmith = pytest.importorskip("hypothesmith")


@settings(SETTINGS, max_examples=30)
@given(hypothesmith.from_grammar())
def test_fixing_arbitrary_programs(source):
    assume(libcst_parses(source) and compiles(source))
    assert_fix_is_sound(source)
