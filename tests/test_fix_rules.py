"""Each rule's fix on the shapes it is meant for, and the tricky cases where it must offer none
(a finding without a sound fix says so by having no fix)."""

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
    result = fix_text(textwrap.dedent(source), "t.py", [rules_by_code()[code]], unsafe=unsafe)
    assert result.refused is None and parses(result.fixed) is None
    assert not [v for v in result.remaining if v.fix is not None], "a fixable finding survived --fix"
    return result.fixed


def only_fix(source: str, code: str):
    (violation,) = findings(source, code)
    return violation.fix


TRAIN = """\
import torch

def train(model, optimizer, loader):
    losses = []
    for x, y in loader:
        loss = model(x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        {line}
    return losses
"""


@pytest.mark.parametrize("line, applicability, expected", [
    ("losses.append(loss)", "safe", "losses.append(loss.detach())"),
    ("losses.append(model(x))", "unsafe", "losses.append(model(x).detach())"),  # a call may not be a tensor
    ("losses += [loss, 1]", "safe", "losses += [loss.detach(), 1]"),
])
def test_tl101_detaches_what_is_stored(line, applicability, expected):
    source = TRAIN.format(line=line)
    assert only_fix(source, "TL101").applicability == applicability
    assert expected in fixed(source, "TL101")


def test_tl101_on_an_attribute_container_is_unsafe():
    source = TRAIN.replace("losses = []", "self.losses = []").format(line="self.losses.append(loss)")
    source = source.replace("def train(model", "def train(self, model")
    assert only_fix(source, "TL101").applicability == "unsafe"


def test_tl102_detaches_each_added_term():
    source = TRAIN.replace("losses = []", "total = 0.0").replace("return losses", "return total")
    assert "total = total + (loss * 2).detach()" in fixed(source.format(line="total = total + loss * 2"), "TL102")


def test_tl103_detaches_the_elements_of_an_unpacked_tuple_and_handles_unknown_shapes():
    source = """\
    import torch

    def train(lstm, head, optimizer, batches, h, c):
        for x, y in batches:
            optimizer.zero_grad()
            out, (h, c) = lstm(x, (h, c))
            head(out).sum().backward()
            optimizer.step()
    """
    out = fixed(source, "TL103")
    assert "        if h is not None:\n            h = h.detach()\n" in out
    assert "        if c is not None:\n            c = c.detach()\n" in out
    unknown = source.replace("out, (h, c) = lstm(x, (h, c))", "out, h = lstm(x, h)").replace(", c):", "):")
    assert "h = h.detach() if isinstance(h, torch.Tensor) else tuple(part.detach() for part in h)" in fixed(unknown, "TL103")


def test_tl201_decorates_an_evaluation_function_and_wraps_a_loop_after_eval():
    source = """\
    import torch

    def evaluate(model, loader):
        return [model(x) for x in loader]

    def fit(model, loader, val):
        for x in loader:
            model(x).sum().backward()
        model.eval()
        for x in val:
            print(model(x))
    """
    out = fixed(source, "TL201")
    assert "@torch.no_grad()\ndef evaluate(" in out
    assert "    model.eval()\n    with torch.no_grad():\n        for x in val:\n            print(model(x))\n" in out


def test_tl201_imports_torch_when_the_file_only_imports_from_it_and_never_wraps_training():
    source = """\
    \"\"\"Docstring.\"\"\"
    from torch import nn

    def evaluate(model, loader):
        return [model(x) for x in loader]
    """
    assert fixed(source, "TL201").startswith('"""Docstring."""\nfrom torch import nn\nimport torch\n\n@torch.no_grad()\ndef evaluate(')
    assert only_fix(source.replace("from torch import nn", "from mylib import nn"), "TL201") is None
    # an evaluation region opened before the training loop: the loop trains, so it is never wrapped
    trains = """\
    import torch

    def fit(generator, encoder, loader, optimizer):
        generator.eval()
        for epoch in range(10):
            for x in loader:
                loss = ((generator(encoder(x)) - x) ** 2).mean()
                loss.backward()
                optimizer.step()
            encoder.eval()
            print(encoder(x))
    """
    assert [v.fix for v in findings(trains, "TL201")] == [None]


def test_tl301_wraps_the_update_safely():
    source = """\
    import torch as T

    w = T.zeros(3, requires_grad=True)
    for x in loader:
        (x @ w).sum().backward()
        w -= 0.1 * w.grad
    """
    assert only_fix(source, "TL301").applicability == "safe"
    assert "    with T.no_grad():\n        w -= 0.1 * w.grad\n" in fixed(source, "TL301", unsafe=False)


def test_tl302_clones_before_the_update_but_not_under_no_grad():
    source = """\
    import torch

    for x, y in loader:
        probs = torch.sigmoid(model(x))
        probs.clamp_(0.1, 0.9)
        loss = bce(probs, y)
        loss.backward()
    """
    assert "    probs = probs.clone()\n    probs.clamp_(0.1, 0.9)\n" in fixed(source, "TL302")
    under = source.replace("        probs.clamp_(0.1, 0.9)", "        with torch.no_grad():\n            probs.clamp_(0.1, 0.9)")
    assert [v.fix for v in findings(under, "TL302")] == [None]  # reported, with no fix


def test_tl401_moves_the_call_after_the_loop_but_not_out_of_a_per_step_helper():
    source = """\
    import torch

    def train(model, loader):
        for x in loader:
            model(x).sum().backward()
            torch.cuda.empty_cache()
        return model
    """
    assert "        model(x).sum().backward()\n    torch.cuda.empty_cache()\n    return model" in fixed(source, "TL401")
    helper = """\
    import torch

    def free():
        torch.cuda.empty_cache()

    def train(model, loader):
        for x in loader:
            model(x).sum().backward()
            free()
    """
    assert only_fix(helper, "TL401") is None


def test_tl403_hoists_and_resets_or_refuses_to_guess_the_fill_value():
    source = """\
    import torch

    def train(model, loader):
        for x in loader:
            buf = torch.zeros(4, 8)
            buf += x
            model(buf)
    """
    out = fixed(source, "TL403")
    assert "    buf = torch.zeros(4, 8)\n    for x in loader:\n        buf.zero_()\n        buf += x\n" in out
    full = source.replace("torch.zeros(4, 8)", "torch.full((4, 8), 0.5)")
    assert only_fix(full, "TL403") is None


def test_tl501_inserts_zero_grad_before_backward_but_not_for_a_conditional_step():
    source = """\
    import torch

    def train(model, optimizer, loader):
        for x, y in loader:
            loss = model(x, y)
            loss.backward()
            optimizer.step()
    """
    assert only_fix(source, "TL501").applicability == "safe"
    assert "        optimizer.zero_grad()\n        loss.backward()\n" in fixed(source, "TL501", unsafe=False)
    conditional = source.replace("            optimizer.step()", "            if ready(x):\n                optimizer.step()")
    assert all(v.fix is None for v in findings(conditional, "TL501"))


def test_tl502_moves_zero_grad_after_the_step():
    source = """\
    import torch

    def train(model, optimizer, loader):
        for x, y in loader:
            loss = model(x, y)
            loss.backward()
            optimizer.zero_grad()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
    """
    assert only_fix(source, "TL502").applicability == "safe"
    assert "clip_grad_norm_(model.parameters(), 1.0)\n        optimizer.step()\n        optimizer.zero_grad()\n" in fixed(source, "TL502", unsafe=False)


def test_tl301_joins_the_no_grad_block_right_above_but_no_other_block():
    source = """\
    import torch

    w = torch.zeros(3, requires_grad=True)
    for x in loader:
        (x @ w).sum().backward()
        with torch.no_grad():
            log(w)
        w.add_(1)
        with torch.inference_mode():
            log(w)
        w.mul_(0.5)
    """
    out = fixed(source, "TL301")
    assert "    with torch.no_grad():\n        log(w)\n        w.add_(1)\n" in out
    assert "    with torch.inference_mode():\n        log(w)\n    with torch.no_grad():\n        w.mul_(0.5)\n" in out


def test_tl401_tl402_alone_in_a_finally_or_with_block_leave_pass_behind():
    source = """\
    import gc
    import torch

    def train(model, loader):
        for x in loader:
            try:
                model(x).sum().backward()
            finally:
                # flushed on every iteration
                torch.cuda.empty_cache()
            with torch.no_grad():
                gc.collect()
        return model
    """
    out = fixed(source, "TL401")
    assert ("        finally:\n            # flushed on every iteration\n            pass\n"
            "        with torch.no_grad():\n") in out
    assert out.endswith("            gc.collect()\n    torch.cuda.empty_cache()\n    return model\n")
    assert "        with torch.no_grad():\n            pass\n    gc.collect()\n" in fixed(source, "TL402")
