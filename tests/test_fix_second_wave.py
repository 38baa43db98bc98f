"""The second-wave rules' fixes (TL104, TL202, TL203, TL303, TL404, TL503, TL504) on the shapes they
are meant for, and the tricky cases where a finding must keep no fix (the rule does not guess).
Each fixed text parses and a second `--fix` changes nothing (``fixed``); the measurements of the
fixed bad fixtures run in `torchlint verify` (tests/test_verify.py)."""

from __future__ import annotations

import textwrap

import pytest

from torchlint.engine import lint_source
from torchlint.fixer import fix_text, parses
from torchlint.rules import rules_by_code


def findings(source: str, code: str):
    source = textwrap.dedent(source)
    return [v for v in lint_source(source, "t.py", [rules_by_code()[code]]) if v.code == code]


def fixed(source: str, code: str, unsafe: bool = True) -> str:
    rules = [rules_by_code()[code]]
    result = fix_text(textwrap.dedent(source), "t.py", rules, unsafe=unsafe)
    assert result.changed and result.refused is None and parses(result.fixed) is None
    assert not [v for v in result.remaining if v.fix is not None], "a fixable finding survived --fix"
    assert fix_text(result.fixed, "t.py", rules, unsafe=unsafe).fixed == result.fixed, "a second --fix changed it"
    return result.fixed


def fixes(source: str, code: str) -> list:
    return [v.fix for v in findings(source, code)]


def applicability(source: str, code: str) -> list[str | None]:
    return [fix.applicability if fix is not None else None for fix in fixes(source, code)]


# --- TL503 grad-scaler-protocol ------------------------------------------------------------------

CLIP = """\
import torch

def train(model, optimizer, scaler, loader):
    for x, y in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x, y)
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
"""


def test_tl503_unscales_right_before_the_clip():
    assert applicability(CLIP, "TL503") == ["safe"]
    out = fixed(CLIP, "TL503", unsafe=False)
    assert ("        scaler.scale(loss).backward()\n        scaler.unscale_(optimizer)\n"
            "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n") in out


def test_tl503_two_clips_get_one_unscale():
    source = CLIP.replace("        scaler.step(optimizer)\n",
                          "        torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)\n        scaler.step(optimizer)\n")
    assert applicability(source, "TL503") == ["safe", None]
    assert fixed(source, "TL503").count("unscale_") == 1


@pytest.mark.parametrize("change", [
    # the step only every k micro-batches: an unscale_ per micro-batch would raise on the second
    ("        scaler.step(optimizer)\n        scaler.update()\n",
     "        if (i + 1) % k == 0:\n            scaler.step(optimizer)\n            scaler.update()\n"),
    # the scaler steps two optimizers: which one the clip's parameters belong to is not known
    ("        scaler.step(optimizer)\n", "        scaler.step(optimizer)\n        scaler.step(head_optimizer)\n"),
    # the scaled backward runs only under `if use_amp:`; the clip also runs without a scaler
    ("        scaler.scale(loss).backward()\n",
     "        if use_amp:\n            scaler.scale(loss).backward()\n        else:\n            loss.backward()\n"),
])
def test_tl503_no_unscale_where_it_could_run_twice_or_without_a_scaler(change):
    source = CLIP.replace(*change).replace("for x, y in loader:", "for i, (x, y) in enumerate(loader):")
    assert fixes(source, "TL503") == [None] * len(fixes(source, "TL503"))
    assert findings(source, "TL503")  # still reported, only without a fix


STEP = """\
import torch

def train_step(model, optimizer, scaler, x, y):
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(x, y)
    scaler.scale(loss).backward()
    optimizer.step()
"""


def test_tl503_steps_through_the_scaler_and_adds_the_missing_update():
    assert applicability(STEP, "TL503") == ["safe"]
    assert fixed(STEP, "TL503", unsafe=False).endswith(
        "    scaler.scale(loss).backward()\n    scaler.step(optimizer)\n    scaler.update()\n")
    updated = STEP + "\ndef end_of_step(scaler):\n    scaler.update()\n"
    assert "    scaler.step(optimizer)\n\ndef end_of_step" in fixed(updated, "TL503")  # no second update


def test_tl503_no_step_fix_where_the_scaler_may_be_unused():
    source = STEP.replace("    scaler.scale(loss).backward()\n",
                          "    if scaler is not None:\n        scaler.scale(loss).backward()\n")
    assert fixes(source, "TL503") == [None] * len(fixes(source, "TL503"))


MISSING_UPDATE = """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
"""


def test_tl503_inserts_the_update_after_the_step():
    assert applicability(MISSING_UPDATE, "TL503") == ["safe"]
    assert fixed(MISSING_UPDATE, "TL503", unsafe=False).endswith("    scaler.step(optimizer)\n    scaler.update()\n")
    two = MISSING_UPDATE + "    scaler.step(optimizer_head)\n"
    assert fixes(two, "TL503") == [None, None]  # update() between the two steps would mis-scale the second


# --- TL504 state-dict snapshot -------------------------------------------------------------------

SNAPSHOT = """\
{imports}

def fit(model, optimizer, loader, epochs):
    best_loss = float("inf")
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            model(x, y).backward()
            optimizer.step()
        val_loss = evaluate(model)
        if val_loss < best_loss:
            best_loss = val_loss
            best_state = {snapshot}
    model.load_state_dict(best_state)
"""


@pytest.mark.parametrize("imports, snapshot, expected", [
    ("import copy\nimport torch", "model.state_dict()", "copy.deepcopy(model.state_dict())"),
    ("from copy import deepcopy\nimport torch", "model.state_dict()", "deepcopy(model.state_dict())"),
    ("import copy as cp\nimport torch", "model.state_dict()", "cp.deepcopy(model.state_dict())"),
    # a dict literal holds other things: only the state dict is copied
    ("import copy\nimport torch", '{"model": model.state_dict(), "epoch": epoch}',
     '{"model": copy.deepcopy(model.state_dict()), "epoch": epoch}'),
])
def test_tl504_deep_copies_the_state_dict_with_the_import_in_force(imports, snapshot, expected):
    source = SNAPSHOT.format(imports=imports, snapshot=snapshot)
    assert applicability(source, "TL504") == ["unsafe"]
    out = fixed(source, "TL504")
    assert f"best_state = {expected}\n" in out and out.startswith(imports + "\n\n")


def test_tl504_adds_import_copy_once_and_never_over_a_name_in_use():
    source = SNAPSHOT.format(imports='"""Training."""\nimport torch', snapshot="model.state_dict()")
    source += "\n\ndef rewind(model, optimizer, loader):\n    start = model.state_dict()\n"
    source += "    for x, y in loader:\n        model(x, y).backward()\n        optimizer.step()\n"
    source += "    model.load_state_dict(start)\n"
    out = fixed(source, "TL504")
    assert out.startswith('"""Training."""\nimport torch\nimport copy\n') and out.count("import copy") == 1
    assert out.count("copy.deepcopy(model.state_dict())") == 2
    shadowed = source.replace("def rewind(model, optimizer, loader):", "def rewind(model, optimizer, loader, copy=None):")
    assert fixes(shadowed, "TL504") == [None, None]


# --- TL303 requires-grad-then-copied and TL404's factories ----------------------------------------

LEAF = """\
import torch

def fit(loader, device):
    w = {value}
    for x, y in loader:
        ((x @ w - y) ** 2).mean().backward()
        print(w.grad)
"""


@pytest.mark.parametrize("value, expected, kind", [
    ("torch.zeros(8, 1, requires_grad=True).cuda()", 'torch.zeros(8, 1, requires_grad=True, device="cuda")', "safe"),
    ("torch.ones(8, 1, requires_grad=True).to(device)", "torch.ones(8, 1, requires_grad=True, device=device)", "safe"),
    ("torch.zeros(8, 1, device=device, requires_grad=True).double()",
     "torch.zeros(8, 1, device=device, requires_grad=True, dtype=torch.float64)", "safe"),
    ("torch.randn(8, 1, requires_grad=True).to(device, torch.float64)",
     "torch.randn(8, 1, requires_grad=True, device=device, dtype=torch.float64)", "unsafe"),  # another generator
    ("torch.tensor([0.1], requires_grad=True).to(dtype=torch.float64)",
     "torch.tensor([0.1], requires_grad=True, dtype=torch.float64)", "unsafe"),  # rounded anew
    ("torch.full((8, 1), 0.1, requires_grad=True).double()",
     "torch.full((8, 1), 0.1, requires_grad=True, dtype=torch.float64)", "unsafe"),
    ("torch.full((8, 1), 0.1, requires_grad=True).to(device)",
     "torch.full((8, 1), 0.1, requires_grad=True, device=device)", "safe"),
])
def test_tl303_makes_the_leaf_where_it_is_used(value, expected, kind):
    source = LEAF.format(value=value)
    assert applicability(source, "TL303") == [kind]
    assert f"    w = {expected}\n" in fixed(source, "TL303")


@pytest.mark.parametrize("value", [
    "torch.zeros(8, 1, requires_grad=True).to(x0)",  # another tensor's device and dtype
    "torch.zeros(8, 1, requires_grad=True).to(cuda_dtype)",  # a dtype by its name, of unknown value
    "torch.zeros(8, 1, requires_grad=True).double().cuda()",  # a chain of moves
    "torch.zeros(8, 1, device='cpu', requires_grad=True).to('cuda')",  # made on one device, moved to another
    "torch.zeros(8, 1, requires_grad=True).cuda(non_blocking=True)",
    "torch.zeros(8, 1, requires_grad=True).to(device, non_blocking=True)",
    "torch.zeros(8, 1, **options).cuda()",
    "torch.zeros(\n        8, 1, requires_grad=True,\n    ).cuda()",  # layout of a new argument: not ours
    "Variable(torch.zeros(8, 1), requires_grad=True).cuda()",
])
def test_tl303_no_fix_beyond_one_simple_move_of_a_torch_factory(value):
    source = LEAF.format(value=value).replace("**options", "requires_grad=True, **options")
    found = fixes(source, "TL303")
    assert found and found == [None] * len(found)


def test_tl404_makes_factories_on_the_device():
    source = """\
    import torch

    def train(model, loader, device):
        for step, (x, y) in enumerate(loader):
            mask = torch.ones(x.shape[0], 4).to(x.device)
            noise = torch.randn(x.shape).cuda()
            model(x * mask + noise, y).backward()
    """
    assert applicability(source, "TL404") == ["safe", "unsafe"]
    out = fixed(source, "TL404")
    assert "mask = torch.ones(x.shape[0], 4, device=x.device)\n" in out
    assert 'noise = torch.randn(x.shape, device="cuda")\n' in out


HOIST = """\
import torch

def train(model, loader, device):
    weights = torch.tensor([1.0, 5.0])
    with torch.no_grad():
        for x, y in loader:
            x = x.to(device)
            loss = model(x, y, weights.to({target}))
            loss.backward()
"""


def test_tl404_copies_a_loop_invariant_tensor_once_before_the_loop():
    source = HOIST.format(target="device")
    assert applicability(source, "TL404") == ["unsafe"]
    out = fixed(source, "TL404")
    assert ("    with torch.no_grad():\n        weights_on_device = weights.to(device)\n        for x, y in loader:\n"
            in out) and "loss = model(x, y, weights_on_device)\n" in out


@pytest.mark.parametrize("source", [
    HOIST.format(target="x.device"),  # this batch's device: it may change from step to step
    HOIST.format(target="device)).add(weights.to(device"),  # moved twice
    HOIST.format(target="pick(device)"),  # a call: it may answer differently every step
    HOIST.replace("    weights = torch", "    weights_on_device = None\n    weights = torch").format(target="device"),
    """\
import torch
from torch import nn

class Head(nn.Module):
    def forward(self, x, weights):
        prior = torch.ones(4)
        return x * prior.to(x.device)
""",
])
def test_tl404_no_hoist_where_the_copy_may_differ_per_step_or_the_name_is_taken(source):
    assert all(fix is None for fix in fixes(source, "TL404"))


# --- TL104 view kept -----------------------------------------------------------------------------

def test_tl104_stores_a_copy_of_the_part():
    source = """\
    import torch

    def collect(model, loader):
        lasts = []
        firsts = {}
        for step, x in enumerate(loader):
            out = model(x).detach()
            last = out[:, -1]
            lasts.append(last)
            firsts[step] = out.diagonal()
        return lasts, firsts
    """
    assert applicability(source, "TL104") == ["unsafe", "unsafe"]
    out = fixed(source, "TL104")
    assert "lasts.append(last.clone())\n" in out and "firsts[step] = out.diagonal().clone()\n" in out


# --- TL202 train mode not restored ---------------------------------------------------------------

EPOCHS = """\
import torch

def fit(model, optimizer, loader, val_loader, epochs):
    model.train()
    for epoch in range(epochs):
{body}
"""
TRAIN = """\
        for x, y in loader:
            optimizer.zero_grad()
            model(x, y).backward()
            optimizer.step()
"""
VALIDATE = """\
        model.eval()
        with torch.no_grad():
            print(sum(model(x, y).item() for x, y in val_loader))
"""


@pytest.mark.parametrize("body", [TRAIN + VALIDATE, VALIDATE + TRAIN], ids=["after", "before"])
def test_tl202_restores_training_mode_right_before_the_training(body):
    source = EPOCHS.format(body=body.rstrip("\n"))
    assert applicability(source, "TL202") == ["unsafe"]
    assert "        model.train()\n        for x, y in loader:\n" in fixed(source, "TL202")


def test_tl202_no_fix_when_eval_mode_was_chosen_before_the_loop():
    source = EPOCHS.format(body=(TRAIN + VALIDATE).rstrip("\n")).replace("    model.train()\n", "    model.eval()\n")
    assert fixes(source, "TL202") == [None]


# --- TL203 checkpoint misuse ---------------------------------------------------------------------

def test_tl203_turns_off_the_reentrant_checkpoint_but_leaves_single_layers_alone():
    source = """\
    import torch
    import torch.utils.checkpoint as cp

    def train(encoder, head, layer, loader, optimizer):
        for x, y in loader:
            features = cp.checkpoint(encoder, x)
            other = cp.checkpoint(encoder, x, use_reentrant=True)
            head(features + layer(other) + cp.checkpoint(torch.relu, features, use_reentrant=False)).sum().backward()
            optimizer.step()
    """
    assert [fix is None for fix in fixes(source, "TL203")] == [False, False, True]
    out = fixed(source, "TL203")
    assert "cp.checkpoint(encoder, x, use_reentrant=False)\n" in out
    assert "other = cp.checkpoint(encoder, x, use_reentrant=False)\n" in out


def test_tl202_inserts_before_a_training_helper_not_before_the_statements_above_it():
    source = """\
    import torch

    def train_one_epoch(model, loader, optimizer):
        for x, y in loader:
            optimizer.zero_grad()
            model(x, y).backward()
            optimizer.step()

    def fit(model, optimizer, loader, val_loader, epochs):
        for epoch in range(epochs):
            if epoch % 10 == 0:
                print(epoch)
            train_one_epoch(model, loader, optimizer)
            model.eval()
            print(sum(model(x, y).item() for x, y in val_loader))
    """
    assert "            print(epoch)\n        model.train()\n        train_one_epoch(model, loader, optimizer)\n" in fixed(
        source, "TL202")


# --- TL304 dataset item mutated in place ---------------------------------------------------------

DATASET = """\
import numpy as np
import torch
from torch.utils.data import Dataset

class Noisy(Dataset):
    def __init__(self, n):
        self.x = {store}

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        x = self.x[i]
        if self.augment:
            x.mul_(1.5)
        x += 1
        return x
"""


@pytest.mark.parametrize("store, copy", [("torch.randn(n, 8)", "clone"), ("np.zeros((n, 8)).astype(np.float32)", "copy")])
def test_tl304_copies_the_item_once_before_its_first_change(store, copy):
    source = DATASET.format(store=store)
    assert applicability(source, "TL304") == ["unsafe", "unsafe"]
    out = fixed(source, "TL304")
    # where it is taken, not before the first change: that one runs only under `if self.augment:`
    assert f"        x = self.x[i]\n        x = x.{copy}()\n        if self.augment:\n" in out
    assert out.count(f".{copy}()") == 1


def test_tl304_no_fix_for_an_item_bound_on_several_paths():
    source = DATASET.format(store="torch.randn(n, 8)").replace(
        "        x = self.x[i]\n", "        if i % 2:\n            x = self.x[i]\n        else:\n            x = self.x[-i]\n")
    assert fixes(source, "TL304") == [None, None]


@pytest.mark.parametrize("store", ["load_items(n)", "torch.randn(n, 8) if n else np.zeros((n, 8))"])
def test_tl304_no_fix_for_data_of_unknown_type(store):
    source = DATASET.format(store=store).replace("        x += 1\n", "")
    assert fixes(source, "TL304") in ([None], [])


def test_tl504_in_a_file_without_imports_adds_one_after_the_docstring():
    source = SNAPSHOT.format(imports='"""Training."""\n# a comment', snapshot="model.state_dict()")
    assert fixed(source, "TL504").startswith('"""Training."""\n# a comment\n\nimport copy\ndef fit(')
