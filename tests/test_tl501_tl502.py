"""TL501 / TL502 beyond their snippets: the optimizer predicates they share, and mutations of
the good fixtures (breaking a correct loop must make the rule fire exactly there)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from torchlint.analysis import Analysis, looks_like_optimizer
from torchlint.engine import lint_source, parse
from torchlint.lazy import cst
from torchlint.rules import rules_by_code

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RULES = rules_by_code()


@pytest.mark.parametrize("name", ["optimizer", "opt", "optim", "opt_d", "optimizerG", "dOptimizer", "opt1",
                                  "actor_optimizer", "_optimizer", "optimizer_gc"])
def test_optimizer_names(name):
    assert looks_like_optimizer(name)


@pytest.mark.parametrize("name", ["scheduler", "lr_scheduler", "optimizer_lr_scheduler", "opt_level", "option",
                                  "options", "optimizer_cls", "adopt", "env", "ema", "optimizers"])
def test_not_optimizer_names(name):
    assert not looks_like_optimizer(name)


STEPS = """\
import torch
sgd = torch.optim.SGD(params, lr=0.1)
sched = torch.optim.lr_scheduler.StepLR(sgd, 10)
amp = torch.amp.GradScaler()
for o in optimizers:
    pass
sgd.step()
sched.step()
env.step(action)
ema.step()
optimizer.step()
optimizer.step(closure)
amp.step(sgd)
scaler.step(optimizer)
lr_scheduler.step(optimizer)
o.step()
"""


def test_stepped_optimizer():
    analysis = Analysis(parse(STEPS))
    stepped = {}
    for node, ctx in analysis.statements_by_type["Expr"]:
        call = node.value
        if type(call) is cst.Call and type(call.func) is cst.Attribute and call.func.attr.value == "step":
            optimizer = analysis.stepped_optimizer(call, ctx)
            stepped[analysis.code(call)] = analysis.code(optimizer) if optimizer is not None else None
    assert stepped == {
        "sgd.step()": "sgd", "sched.step()": None, "env.step(action)": None, "ema.step()": None,
        "optimizer.step()": "optimizer", "optimizer.step(closure)": None, "amp.step(sgd)": "sgd",
        "scaler.step(optimizer)": "optimizer", "lr_scheduler.step(optimizer)": None, "o.step()": "o",
    }


def _findings(text: str, code: str) -> set[int]:
    return {v.line for v in lint_source(text, "mutated.py", [RULES[code]])}


def _line_of(lines: list[str], pattern: str) -> int:
    return next(index for index, line in enumerate(lines) if re.search(pattern, line))


@pytest.mark.parametrize("fixture", ["good_training_loop.py", "good_amp_grad_scaler.py", "good_gan_two_optimizers.py"])
def test_removing_zero_grad_from_a_good_loop_is_reported_at_the_step(fixture):
    lines = (FIXTURES / "TL501" / fixture).read_text().splitlines()
    assert not _findings("\n".join(lines), "TL501")
    index = _line_of(lines, r"^\s+opt\w*\.zero_grad\(")
    indent = re.match(r"\s*", lines[index]).group()
    mutated = lines[:index] + [indent + "pass"] + lines[index + 1:]
    step = next(i for i in range(index, len(lines)) if re.search(r"\.step\(\w*\)\s*$", mutated[i]))
    assert _findings("\n".join(mutated), "TL501") == {step + 1}


@pytest.mark.parametrize("fixture", ["TL502/good_zero_grad_after_backward.py", "TL501/good_amp_grad_scaler.py"])
def test_moving_zero_grad_between_backward_and_step_is_reported(fixture):
    lines = (FIXTURES / fixture).read_text().splitlines()
    assert not _findings("\n".join(lines), "TL502")
    zero_grad = lines.pop(_line_of(lines, r"^\s+optimizer\.zero_grad\("))
    step = _line_of(lines, r"^\s+(?:optimizer|scaler)\.step\(")
    lines.insert(step, zero_grad)
    assert _findings("\n".join(lines), "TL502") == {step + 1}


def test_zero_grad_in_the_branch_before_the_step_but_not_after_it():
    source = """\
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y)
    loss.backward()
    if (i + 1) % 4 == 0:
        {first}
        {second}
"""
    bad = source.format(first="optimizer.zero_grad()", second="optimizer.step()")
    good = source.format(first="optimizer.step()", second="optimizer.zero_grad()")
    assert _findings(bad, "TL502") == {5}
    assert _findings(good, "TL502") == set()
