"""TL302 inplace-on-saved-tensor: which outputs autograd saved, which changes count as in place,
and when the graph is still needed. Each case marks its findings with ``# expect: TL302``."""

from __future__ import annotations

import pytest

from torchlint.rules import rules_by_code
from torchlint.testing import actual_findings, assert_findings_match_markers, expected_findings

RULE = rules_by_code()["TL302"]

CASES = {
    "item assignment before backward": """\
y = torch.tanh(model(x))
y[0] = 0  # expect: TL302
loss = y.sum()
loss.backward()
""",
    "the input is not known to require grad": """\
def f(x):
    y = x.exp()
    y.mul_(2)
    y.sum().backward()
""",
    "a leaf input requires grad": """\
w = torch.randn(3, requires_grad=True)
y = w.exp()
y += 1  # expect: TL302
y.sum().backward()
""",
    "views and detached aliases share the version counter": """\
y = model(x).softmax(-1)
z = y.view(-1)
z.zero_()  # expect: TL302
y.detach().mul_(2)  # expect: TL302
y[y > 0.5].zero_()
y.sum().backward()
""",
    "activation modules": """\
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.act = nn.ReLU()
        self.act_inplace = nn.ReLU(inplace=True)

    def forward(self, x):
        h = self.act(self.fc(x))
        h += x  # expect: TL302
        g = self.act_inplace(self.fc(x))
        g += x  # expect: TL302
        return h + g
""",
    "changed after the last backward": """\
p = torch.sigmoid(model(x))
loss = bce(p, t)
loss.backward()
p = p.detach()
p[p > 0.5] = 1
""",
    "not a torch op": """\
y = np.exp(model(x))
y += 1
z = F.gelu(model(x))
z.mul_(2)
loss = y.sum() + z.sum()
loss.backward()
""",
    "forward returns something computed from the saved output": """\
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        h = torch.sigmoid(self.fc(x))
        out = h.clone()
        h.mul_(2)  # expect: TL302
        return out
""",
    "forward does not return it": """\
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        h = torch.sigmoid(self.fc(x))
        shown = torch.sigmoid(self.fc(x))
        shown.mul_(2)
        return h
""",
    "lightning training_step returns the loss": """\
class Model(LightningModule):
    def training_step(self, batch, batch_idx):
        x, y = batch
        p = torch.softmax(self.model(x), -1)
        p.clamp_(min=1e-6)  # expect: TL302
        return -(p.log() * y).sum()
""",
    "spellings": """\
a = torch.special.expit(model(x))
a.mul_(2)  # expect: TL302
b, c = torch.sigmoid(model(x)), model(x)
b.mul_(2)  # expect: TL302
c.mul_(2)
d = F.log_softmax(model(x), dim=1)
torch.relu_(d)  # expect: TL302
loss = (a + b + c + d).sum()
loss.backward()
""",
    "not backpropagated through the op": """\
logits = model(x)
probs = logits.softmax(-1)
probs[:, 0] = 0
loss = F.cross_entropy(logits, y)
loss.backward()
""",
}


@pytest.mark.parametrize("source", CASES.values(), ids=CASES.keys())
def test_findings_match_markers(source):
    assert_findings_match_markers(source, [RULE])


EVAL_ONLY = """\
class Pooling(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        scores = torch.relu(self.proj(x))
        scaled = scores.log1p() if self.training else scores.log1p_()
        if not self.training:
            scores.mul_(2)
        gates = torch.sigmoid(scores)
        if self.training:
            pass
        else:
            gates.clamp_(0.1, 0.9)
        weights = torch.exp(scores)
        if self.training:
            weights.add_(1)  # expect: TL302
        return scaled, gates, weights
"""


def test_eval_only_shortcuts_are_quiet():
    expected = expected_findings(EVAL_ONLY)
    assert actual_findings(EVAL_ONLY, [RULE], prefilter=False) == expected


def test_the_same_shortcuts_are_reported_without_the_training_flag():
    source = EVAL_ONLY.replace("self.training", "self.verbose")
    assert {line for line, _ in actual_findings(source, [RULE], prefilter=False)} == {8, 10, 15, 18}


def test_an_element_of_a_list_of_layer_outputs_gets_no_clone_fix():
    # `laterals` is a Python list: `laterals = laterals.clone()` would raise; the element is the tensor
    import textwrap

    from torchlint.engine import lint_source

    source = textwrap.dedent(next(example for example in RULE.INVALID if "lateral_convs" in example))
    [violation] = lint_source(source, "fpn.py", [RULE])
    assert "modifies `laterals[i - 1]` in place" in violation.message
    assert violation.fix is None
