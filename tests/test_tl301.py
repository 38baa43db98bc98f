"""TL301 inplace-on-grad-leaf: which tensors count as leaves that require grad, and when the
in-place change is allowed. Each case marks its findings with ``# expect: TL301``."""

from __future__ import annotations

import pytest

from torchlint.rules import rules_by_code
from torchlint.testing import assert_findings_match_markers

RULE = rules_by_code()["TL301"]

CASES = {
    "optimizer step without no_grad": """\
def step(optimizer):
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is None:
                continue
            p.add_(p.grad, alpha=-group["lr"])  # expect: TL301
""",
    "optimizer step under a no_grad decorator": """\
@torch.no_grad()
def step(optimizer):
    for group in optimizer.param_groups:
        for p in group["params"]:
            p.add_(p.grad, alpha=-group["lr"])
""",
    "requires_grad switched on by a statement": """\
x = torch.zeros(3)
x.requires_grad_()
x.add_(1)  # expect: TL301
y = torch.zeros(3)
y.requires_grad = True
y += 1  # expect: TL301
""",
    "requires_grad_ on a graph output is no leaf": """\
out = model(batch)
out.requires_grad_()
out.add_(1)
""",
    "requires_grad switched off": """\
p = nn.Parameter(torch.ones(3))
p.requires_grad = False
p.add_(1)
model.requires_grad_(trainable)
for q in model.parameters():
    q.mul_(0.9)
""",
    "a frozen copy frozen through its parameters": """\
for p in ema.parameters():
    p.requires_grad_(False)
for p in ema.parameters():
    p.mul_(0.9)
""",
    "moved to a device: not a leaf any more on a GPU": """\
w = torch.randn(3, requires_grad=True).to(device)
w.add_(1)
""",
    "data, grad and detach are allowed": """\
d = torch.zeros_like(x, requires_grad=True)
d.data.clamp_(-1, 1)
d.grad.data.zero_()
d.grad.zero_()
d.detach().zero_()
d.clamp_(-1, 1)  # expect: TL301
""",
    "every caller disables grad": """\
def shrink(model):
    for name, p in model.named_parameters():
        p.mul_(0.5)

with torch.no_grad():
    shrink(net)
""",
    "item assignment and views of a leaf": """\
w = nn.Parameter(torch.ones(3, 3))
w[0] = 1  # expect: TL301
w[0].zero_()  # expect: TL301
w.t().mul_(2)  # expect: TL301
w[mask].zero_()
w[i].zero_()
""",
    "torch in-place functions, not nn.init": """\
w = nn.Parameter(torch.ones(3))
torch.relu_(w)  # expect: TL301
nn.init.zeros_(w)
torch.nn.init.normal_(w)
""",
    "an imported leaf": """\
from .state import shared_weight
shared_weight.requires_grad_()
shared_weight.add_(1)  # expect: TL301
""",
    "layer parameters": """\
layer = nn.Linear(3, 3)
layer.weight.zero_()  # expect: TL301
model = Net()
model.fc.weight.zero_()  # expect: TL301
model.fc.bias.data.zero_()
""",
    "parameter loops": """\
for i, p in enumerate(model.parameters()):
    p.zero_()  # expect: TL301
for p in itertools.chain(a.parameters(), b.parameters()):
    p.zero_()  # expect: TL301
for item in model.named_parameters():
    item.zero_()
count = 0
for p in model.parameters():
    count += 1
""",
    "grad mode switches": """\
with torch.no_grad():
    with torch.enable_grad():
        w = torch.ones(2, requires_grad=True)
        w.add_(1)  # expect: TL301
with torch.inference_mode():
    for p in model.parameters():
        p.zero_()
""",
    "statement form of set_grad_enabled": """\
torch.set_grad_enabled(False)
w = torch.ones(2, requires_grad=True)
w.add_(1)
""",
    "class attributes": """\
class Gain(nn.Module):
    def __init__(self, learn):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(1))
        self.maybe = nn.Parameter(torch.ones(1)) if learn else torch.ones(1)
        self.register_buffer("running", torch.ones(1))

    def forward(self, x):
        self.running.mul_(0.9)
        self.maybe.mul_(2)
        gain = self.gain
        gain -= 1  # expect: TL301
        return x * self.gain

    def freeze(self):
        return self.gain.fill_(1.0)  # expect: TL301
""",
    "lightning evaluation hooks run under no_grad": """\
class Model(LightningModule):
    def validation_step(self, batch, batch_idx):
        for p in self.parameters():
            p.zero_()
""",
}


@pytest.mark.parametrize("source", CASES.values(), ids=CASES.keys())
def test_findings_match_markers(source):
    assert_findings_match_markers(source, [RULE])
