"""`analysis.arguments`: what a call's literal arguments decide inside the function it runs."""

from __future__ import annotations

import libcst as cst
import pytest

from torchlint.analysis import Analysis

SOURCE = """\
def run_epoch(model, loader, optimizer=None, train=True, mode="train"):
    for x, y in loader:
        loss = model(x, y)
        if train:
            loss.backward()
        if not train:
            log(loss)
        if mode == "train" and optimizer is not None:
            optimizer.step()

class Trainer:
    def epoch(self, loader, training):
        if training:
            self.loss.backward()

    def fit(self, loader):
        self.epoch(loader, False)
        self.epoch(loader, training=flag)

run_epoch(model, val_loader, train=False)
run_epoch(model, train_loader, opt)
run_epoch(model, loader, opt, False, "eval")
run_epoch(model, loader, train=flag)
"""


def _setup():
    analysis = Analysis(cst.parse_module(SOURCE), "x.py", SOURCE)
    functions = {scope.name: scope for scope in analysis.scopes.values() if scope.kind == "function"}
    module_calls = [
        (call, ctx) for stmt, ctx in analysis.module_scope.statements if ctx.scope is analysis.module_scope
        for call in analysis.calls_in(stmt) if type(call.func) is cst.Name and call.func.value == "run_epoch"
    ]
    return analysis, functions, module_calls


def _inner(analysis, scope, method):
    return next(call for call, _, _ in analysis.scope_calls(scope)
                if type(call.func) is cst.Attribute and call.func.attr.value == method)


@pytest.mark.parametrize(("index", "backward", "step", "log"), [
    (0, False, False, True),   # train=False: no backward; the default optimizer=None: no step
    (1, True, True, False),    # defaults: train=True, mode="train"
    (2, False, False, True),   # positional False, "eval"
    (3, True, False, True),    # train=flag: unknown, may run; optimizer=None still decides the step
])
def test_literal_arguments_decide_the_branches_of_the_callee(index, backward, step, log):
    analysis, functions, calls = _setup()
    run_epoch = functions["run_epoch"]
    call, _ = calls[index]
    log_call = next(c for c, _, _ in analysis.scope_calls(run_epoch) if type(c.func) is cst.Name and c.func.value == "log")
    assert analysis.may_run_for(call, run_epoch, _inner(analysis, run_epoch, "backward")) is backward
    assert analysis.may_run_for(call, run_epoch, _inner(analysis, run_epoch, "step")) is step
    assert analysis.may_run_for(call, run_epoch, log_call) is log


def test_methods_skip_self_and_unknown_arguments_may_run():
    analysis, functions, _ = _setup()
    epoch, fit = functions["epoch"], functions["fit"]
    calls = [call for call, _, callee in analysis.scope_calls(fit) if callee is epoch]
    backward = _inner(analysis, epoch, "backward")
    assert analysis.may_run_for(calls[0], epoch, backward) is False  # self.epoch(loader, False)
    assert analysis.may_run_for(calls[1], epoch, backward) is True  # training=flag
