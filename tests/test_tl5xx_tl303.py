"""TL503 / TL504 / TL303 beyond their snippets: the analysis questions they ask, mutations of
their good fixtures (breaking correct code must make the rule fire exactly there), and the
correct shapes real code takes that must stay quiet."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from torchlint.analysis import Analysis
from torchlint.engine import lint_source, parse
from torchlint.rules import rules_by_code

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RULES = rules_by_code()


def _findings(text: str, code: str) -> set[int]:
    return {v.line for v in lint_source(text, "mutated.py", [RULES[code]])}


def _messages(text: str, code: str) -> list[str]:
    return [v.message for v in lint_source(text, "snippet.py", [RULES[code]])]


def _line_of(lines: list[str], pattern: str) -> int:
    return next(index for index, line in enumerate(lines) if re.search(pattern, line))


# ------------------------------------------------------------------ analysis questions

def test_scaled_backward_scaler():
    analysis = Analysis(parse("""\
amp_scaler = torch.amp.GradScaler()
scaled = grad_scaler.scale(loss)
scaled.backward()
amp_scaler.scale(loss).backward()
self.scaler.scale(loss).backward(retain_graph=True)
loss.backward()
images.scale(2).backward()
accelerator.backward(loss)
"""))
    found = []
    for node, ctx in analysis.statements_by_type["Expr"]:
        scaler = analysis.scaled_backward_scaler(node.value, ctx)
        found.append(analysis.code(scaler) if scaler is not None else None)
    assert found == ["grad_scaler", "amp_scaler", "self.scaler", None, None, None]


@pytest.mark.parametrize(("value", "aliases"), [
    ("model.state_dict()", True),
    ("model.state_dict().copy()", True),
    ("dict(self.model.state_dict())", True),
    ("OrderedDict(model.state_dict())", True),
    ("{'model': model.state_dict(), 'epoch': epoch}", True),
    ("{k: v for k, v in model.state_dict().items()}", True),
    ("{k: v.detach() for k, v in model.state_dict().items()}", True),
    ("optimizer.state_dict()", True),
    ("model.module.state_dict()", True),
    ("copy.deepcopy(model.state_dict())", False),
    ("{k: v.clone() for k, v in model.state_dict().items()}", False),
    ("{k: v.detach().cpu().clone() for k, v in model.state_dict().items()}", False),
    ("{k: v.cpu() for k, v in model.state_dict().items()}", False),
    ("scheduler.state_dict()", False),
    ("torch.load(path)", False),
])
def test_aliasing_state_dict(value, aliases):
    analysis = Analysis(parse(f"model = Net()\nsnapshot = {value}\n"))
    node, ctx = analysis.statements_by_type["Assign"][1]
    assert (analysis.aliasing_state_dict(node.value, ctx) is not None) is aliases


@pytest.mark.parametrize(("value", "moved"), [
    ("torch.randn(3, requires_grad=True).cuda()", True),
    ("torch.zeros(3, requires_grad=True).to(device)", True),
    ("torch.ones(3, requires_grad=True).float().cuda()", True),
    ("torch.tensor([1.0], requires_grad=True).double()", True),
    ("torch.randn(3).requires_grad_().cuda()", True),
    ("Variable(torch.randn(3), requires_grad=True).cuda()", True),
    ("torch.randn(3, requires_grad=True).float()", False),
    ("torch.randn(3, requires_grad=True).cpu()", False),
    ("torch.randn(3, device=device, requires_grad=True)", False),
    ("torch.randn(3).cuda().requires_grad_()", False),
    ("torch.randn(3).to(device)", False),
    ("torch.randn(3, requires_grad=False).cuda()", False),
    ("nn.Parameter(torch.randn(3, requires_grad=True).to(device))", False),
    ("torch.randn(3, device=device, requires_grad=True).to(device)", False),  # no copy: the same leaf
    ("torch.randn(3, device=device, requires_grad=True).to(torch.float64)", True),
])
def test_moved_grad_leaf(value, moved):
    analysis = Analysis(parse(f"w = {value}\n"))
    node, ctx = analysis.statements_by_type["Assign"][0]
    assert (analysis.moved_grad_leaf(node.value, ctx) is not None) is moved


@pytest.mark.parametrize(("statement", "changes"), [
    ("optimizer.step()", True),
    ("loss.backward()", True),
    ("train_one_epoch(model, loader, optimizer)", True),
    ("trainer.fit(model)", True),
    ("trainer.train()", True),
    ("model.load_state_dict(other)", True),
    ("model.train()", False),
    ("model.train(mode)", False),
    ("scheduler.step()", False),
    ("model.load_state_dict(best)", False),  # restoring the snapshot itself is the use
    ("other.load_state_dict(weights)", False),  # another object's weights
    ("print(model)", False),
])
def test_changes_weights(statement, changes):
    analysis = Analysis(parse(f"{statement}\n"))
    (node, ctx), = [item for items in analysis.statements_by_type.values() for item in items]
    assert analysis.changes_weights(node, ctx, keep="best", owner="model") is changes


# ------------------------------------------------------------------ TL503

@pytest.mark.parametrize("fixture", ["good_unscale_before_clip.py", "good_protocol_variants.py"])
def test_removing_unscale_before_a_clip_is_reported_at_the_clip(fixture):
    lines = (FIXTURES / "TL503" / fixture).read_text().splitlines()
    assert not _findings("\n".join(lines), "TL503")
    index = _line_of(lines, r"^\s+(self\.)?scaler\.unscale_\(")
    indent = re.match(r"\s*", lines[index]).group()
    mutated = lines[:index] + [indent + "pass"] + lines[index + 1:]
    clip = _line_of(mutated[index:], r"clip_grad_norm_\(") + index
    assert _findings("\n".join(mutated), "TL503") == {clip + 1}


def test_replacing_scaler_step_by_optimizer_step_is_reported():
    lines = (FIXTURES / "TL503" / "good_scaler_step.py").read_text().splitlines()
    assert not _findings("\n".join(lines), "TL503")
    index = _line_of(lines, r"^\s+scaler\.step\(optimizer\)")
    lines[index] = lines[index].replace("scaler.step(optimizer)", "optimizer.step()")
    assert _findings("\n".join(lines), "TL503") == {index + 1}


def test_deleting_update_is_reported_at_the_step():
    lines = (FIXTURES / "TL503" / "good_scaler_step.py").read_text().splitlines()
    index = _line_of(lines, r"^\s+scaler\.update\(\)")
    indent = re.match(r"\s*", lines[index]).group()
    mutated = lines[:index] + [indent + "pass"] + lines[index + 1:]
    step = _line_of(mutated, r"^\s+scaler\.step\(optimizer\)")
    assert _findings("\n".join(mutated), "TL503") == {step + 1}


def test_scaler_messages_name_the_scaler_and_optimizer():
    source = """\
def step(self, loss):
    self.grad_scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_value_(self.model.parameters(), 0.5)
    self.grad_scaler.step(self.opt)
    self.grad_scaler.update()
"""
    (message,) = _messages(source, "TL503")
    assert "`torch.nn.utils.clip_grad_value_(...)`" in message and "`self.grad_scaler.unscale_()`" in message
    (violation,) = lint_source(source, "snippet.py", [RULES["TL503"]])
    assert violation.help == "call `self.grad_scaler.unscale_(self.opt)` right before clipping, then `self.grad_scaler.step(self.opt)`"


@pytest.mark.parametrize("source", [
    # no scaler at all: plain fp32 training clips and steps
    "loss.backward()\ntorch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\noptimizer.step()\n",
    # a disabled scaler: scale() returns the loss unchanged
    "scaler = torch.amp.GradScaler(enabled=False)\nscaler.scale(loss).backward()\noptimizer.step()\n",
    # the unscaled branch of a step that works with or without AMP
    "if scaler is not None:\n    scaler.scale(loss).backward()\nelse:\n    loss.backward()\n"
    "if scaler is not None:\n    scaler.step(optimizer)\n    scaler.update()\nelse:\n    optimizer.step()\n",
    # a framework's own clipping unscales first
    "scaler.scale(loss).backward()\naccelerator.clip_grad_norm_(model.parameters(), 1.0)\n"
    "scaler.step(optimizer)\nscaler.update()\n",
    # the clip of the unscaled arm, before the scaled arm's scaler.step()
    "if scaler is None:\n    loss.backward()\n    torch.nn.utils.clip_grad_norm_(params, 1.0)\n    optimizer.step()\n"
    "else:\n    scaler.scale(loss).backward()\n    scaler.unscale_(optimizer)\n"
    "    torch.nn.utils.clip_grad_norm_(params, 1.0)\n    scaler.step(optimizer)\n    scaler.update()\n",
    # update() in another method of the class
    "class T:\n    def step(self, loss):\n        self.scaler.scale(loss).backward()\n"
    "        self.scaler.step(self.optimizer)\n\n    def after(self):\n        self.scaler.update()\n",
    # a scheduler's step is no optimizer step
    "scaler.scale(loss).backward()\nscaler.step(optimizer)\nscaler.update()\nscheduler.step()\n",
])
def test_tl503_quiet_on_correct_code(source):
    assert _findings(source, "TL503") == set()


def test_plain_step_after_unscale_is_reported_for_the_lost_overflow_check():
    source = "scaler.scale(loss).backward()\nscaler.unscale_(optimizer)\noptimizer.step()\nscaler.update()\n"
    (message,) = _messages(source, "TL503")
    assert message.startswith("`optimizer.step()` after `scaler.unscale_()`") and "inf/NaN" in message


def test_update_in_a_helper_counts_only_if_the_helper_updates():
    source = """\
def finish(scaler):
    scaler.{method}()

def train(model, optimizer, scaler, loader):
    for x, y in loader:
        scaler.scale(model(x).sum()).backward()
        scaler.step(optimizer)
        finish(scaler)
"""
    assert _findings(source.format(method="update"), "TL503") == set()
    assert _findings(source.format(method="get_scale"), "TL503") == {7}


def test_scaled_or_plain_backward_then_a_shared_clip_is_reported():
    source = """\
for x, y in loader:
    loss = criterion(model(x), y)
    if use_amp:
        scaler.scale(loss).backward()
    else:
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if use_amp:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
"""
    assert _findings(source, "TL503") == {7}


def test_a_later_plain_training_loop_is_not_blamed_on_an_earlier_scaler():
    source = """\
for x, y in loader:
    scaler.scale(diffusion_loss(x)).backward()
    scaler.step(optimizer)
    scaler.update()
for x, y in loader:
    classifier_loss(x, y).backward()
    torch.nn.utils.clip_grad_norm_(classifier.parameters(), 1.0)
    optimizer_cls.step()
"""
    assert _findings(source, "TL503") == set()


def test_clipping_through_a_local_alias_and_a_scaler_only_checkpointed():
    source = """\
def train(model, optimizer, scaler, loader, checkpointer):
    clip = torch.nn.utils.clip_grad_norm_
    for x, y in loader:
        scaler.scale(model(x).sum()).backward()
        clip(model.parameters(), 1.0)
        scaler.step(optimizer)
        checkpointer.save(model, optimizer, scaler)
"""
    assert _findings(source, "TL503") == {5, 6}


def test_a_scaler_that_may_be_none_is_not_disabled():
    source = """\
if fp16:
    scaler = torch.amp.GradScaler()
else:
    scaler = None
for x, y in loader:
    if scaler is None:  loss(x, y).backward()
    else: scaler.scale(loss(x, y)).backward()
    if scaler is None:
        optimizer.step()
    else:
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        scaler.step(optimizer)
        scaler.update()
"""
    assert _findings(source, "TL503") == {11}
    assert _findings(source.replace("torch.amp.GradScaler()", "None"), "TL503") == set()


def test_clipping_helper_is_quiet_when_its_caller_unscales():
    source = """\
def clip_and_step(model, optimizer, scaler):
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()

def train(model, optimizer, scaler, loader):
    for x, y in loader:
        scaler.scale(model(x).sum()).backward()
        scaler.unscale_(optimizer)
        clip_and_step(model, optimizer, scaler)
"""
    assert _findings(source, "TL503") == set()
    assert _findings(source.replace("        scaler.unscale_(optimizer)\n", ""), "TL503") == {2}


# ------------------------------------------------------------------ TL504

def test_deepcopy_removed_from_a_good_snapshot_is_reported():
    lines = (FIXTURES / "TL504" / "good_best_state_copy.py").read_text().splitlines()
    assert not _findings("\n".join(lines), "TL504")
    index = _line_of(lines, r"best_state = copy\.deepcopy\(model\.state_dict\(\)\)")
    lines[index] = lines[index].replace("copy.deepcopy(model.state_dict())", "model.state_dict()")
    assert _findings("\n".join(lines), "TL504") == {index + 1}


def test_clone_removed_from_a_comprehension_is_reported():
    lines = (FIXTURES / "TL504" / "good_reset_to_initial.py").read_text().splitlines()
    index = _line_of(lines, r"tensor\.detach\(\)\.clone\(\)")
    lines[index] = lines[index].replace("tensor.detach().clone()", "tensor.detach()")
    assert _findings("\n".join(lines), "TL504") == {index + 1}


@pytest.mark.parametrize("source", [
    # an unconditional snapshot at the end of every epoch: the last one is the final weights
    "for epoch in range(n):\n    train_one_epoch(model, loader, optimizer)\n    state = model.state_dict()\n"
    "torch.save(state, 'last.pt')\n",
    # rebound to a fresh state dict before it is used
    "state = model.state_dict()\ntrain(model, loader, optimizer)\nstate = model.state_dict()\ntorch.save(state, p)\n",
    # loaded into another model: the snapshot's owner is untouched
    "src = model.state_dict()\nstudent.load_state_dict(src)\nprint(len(src))\n",
    # only the mode switches between snapshot and use
    "sd = model.state_dict()\nmodel.train()\nmodel.eval()\ntorch.save(sd, p)\n",
    # an initialising step, then the state dict taken afresh in the same branch
    "state = optimizer.state_dict()\nif len(state['state']) == 0:\n    optimizer.step()\n"
    "    state = optimizer.state_dict()\nbroadcast(state)\n",
    # fit() of another model does not touch this one's weights
    "ref = teacher.state_dict()\ntrainer.fit(student, loader)\ncompare(ref, student.state_dict())\n",
    # a fresh optimizer has no per-parameter state yet: its state dict shares nothing
    "optimizer = torch.optim.Adam(model.parameters())\nopt_state = optimizer.state_dict()\n"
    "train(3, model, loader, optimizer)\ncompare(opt_state, saved)\n",
    # the names are rebound to new objects before the training that follows
    "state = optimizer.state_dict()\noptimizer = torch.optim.Adam(model.parameters())\n"
    "train(2, model, loader, optimizer)\ncompare(state, saved)\n",
    # weights replaced with `.data = ...` by a class that does not train
    "class Explainer:\n    def attribute(self, x):\n        self._original = self.model.state_dict()\n"
    "        self._change_weights()\n\n    def restore(self):\n        self.model.load_state_dict(self._original)\n",
    # each periodic checkpoint is built and saved in its own branch
    "for epoch in range(n):\n    train(model, loader, optimizer)\n    if epoch == 50:\n"
    "        states = {'net': model.state_dict()}\n        torch.save(states, a)\n"
    "    if epoch % 200 == 199:\n        states = {'net': model.state_dict()}\n        torch.save(states, b)\n",
    # the scheduler's state holds no tensors
    "for epoch in range(n):\n    train(model, loader, optimizer)\n    if better:\n        best = scheduler.state_dict()\n"
    "scheduler.load_state_dict(best)\n",
])
def test_tl504_quiet_on_correct_code(source):
    assert _findings(source, "TL504") == set()


def test_checkpoint_built_and_saved_under_one_if_is_quiet():
    source = """\
for epoch in range(epochs):
    train_one_epoch(model, optimizer, loader)
    if args.output_dir:
        checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
        if args.amp:
            checkpoint["scaler"] = scaler.state_dict()
        save_on_master(checkpoint, path)
"""
    assert _findings(source, "TL504") == set()
    # restored under another test: a later epoch may restore an older, now changed snapshot
    restored = source.replace("        save_on_master(checkpoint, path)\n", "") + \
        "    if diverged:\n        model.load_state_dict(checkpoint['model'])\n"
    assert _findings(restored, "TL504") == {4}


@pytest.mark.parametrize("hook, test", [("on_epoch_end", "monitor_op(current, self.mark)"),
                                        ("update", "current < self.best"), ("update", "improved")])
def test_callback_snapshots_restored_in_another_method(hook, test):
    source = f"""\
class EarlyStopping:
    def {hook}(self, current):
        if {test}:
            self.weights = self.model.state_dict()

    def on_train_end(self):
        self.model.load_state_dict(self.weights)
"""
    expected = set() if (hook, test) == ("update", "improved") else {4}
    assert _findings(source, "TL504") == expected


def test_ema_swap_with_an_aliased_backup_is_reported():
    source = """\
class EMASwap:
    def apply(self, model):
        self.backup = {k: v.detach() for k, v in model.state_dict().items()}
        model.load_state_dict(self.ema_state)

    def restore(self, model):
        model.load_state_dict(self.backup)
"""
    assert _findings(source, "TL504") == {3}
    assert _findings(source.replace("v.detach()", "v.detach().clone()"), "TL504") == set()


def test_rollback_to_a_snapshot_in_the_same_loop_is_reported():
    source = """\
for epoch in range(epochs):
    if diverged:
        model.load_state_dict(checkpoint)
    train_one_epoch(model, loader, optimizer)
    if val_loss < best:
        checkpoint = model.state_dict()
"""
    assert _findings(source, "TL504") == {6}


# ------------------------------------------------------------------ TL303

def test_moving_requires_grad_into_the_factory_chain_is_reported():
    lines = (FIXTURES / "TL303" / "good_optimizer_leaf.py").read_text().splitlines()
    assert not _findings("\n".join(lines), "TL303")
    index = _line_of(lines, r"delta = torch\.zeros\(")
    lines[index] = re.sub(r"torch\.zeros\(images\.shape, device=images\.device, dtype=torch\.float64, requires_grad=True\)",
                          "torch.zeros(images.shape, requires_grad=True).to(images.device, torch.float64)", lines[index])
    assert _findings("\n".join(lines), "TL303") == {index + 1}


@pytest.mark.parametrize("source", [
    # a non-leaf input is fine for autograd.grad and gradcheck
    "x = torch.randn(4, requires_grad=True).cuda()\ny = f(x)\ng, = torch.autograd.grad(y.sum(), x)\n",
    "x = torch.randn(4, requires_grad=True).double()\nassert gradcheck(f, (x,))\n",
    # retain_grad() keeps the non-leaf's gradient
    "x = torch.randn(4, requires_grad=True).cuda()\nx.retain_grad()\nf(x).sum().backward()\nprint(x.grad)\n",
    # .grad of something else
    "x = torch.randn(4, requires_grad=True).cuda()\nf(x, w).sum().backward()\nprint(w.grad)\n",
])
def test_tl303_quiet_on_correct_code(source):
    assert _findings(source, "TL303") == set()


def test_loop_over_the_tensors_counts_as_reading_their_grad():
    source = """\
w = torch.randn(3, 1, requires_grad=True).to(device)
b = torch.zeros(1, requires_grad=True).to(device)
loss = ((x @ w + b - y) ** 2).mean()
loss.backward()
with torch.no_grad():
    for p in (w, b):
        p -= 0.1 * p.grad
"""
    assert _findings(source, "TL303") == {1, 2}
