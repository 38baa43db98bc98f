"""TL302 on saved *inputs*: which ops save which operand (products, division, powers, layers with
weights), and when the change in place comes between the op and the backward that needs it. Each
case marks its findings with ``# expect: TL302``; the semantics were measured on torch 2.13."""

from __future__ import annotations

import pytest

from torchlint.rules import rules_by_code
from torchlint.testing import assert_findings_match_markers

RULE = rules_by_code()["TL302"]

CASES = {
    "a product saves each operand when the other requires grad": """\
w = torch.randn(3, requires_grad=True)
x = torch.randn(3)
y = x * w
x.add_(1)  # expect: TL302
y.sum().backward()
""",
    "a constant factor saves nothing": """\
h = model(x)
y = h * 2
h.add_(1)
z = h / 4
h.mul_(3)
y.sum().backward()
""",
    "addition and subtraction save nothing": """\
h = model(x)
y = h + bias
z = h - model(x)
h.add_(1)
(y + z).sum().backward()
""",
    "only the operand whose partner requires grad is saved": """\
h = model(x)
c = torch.ones(3)
y = h * c
h.add_(1)
c.add_(1)  # expect: TL302
y.sum().backward()
""",
    "division saves the divisor always and the dividend when the divisor requires grad": """\
h = model(x)
d = torch.rand(3) + 1
y = h / d
h.mul_(2)
d.add_(1)  # expect: TL302
y.sum().backward()
""",
    "powers save the base": """\
h = model(x)
loss = F.mse_loss(h ** 2, t)
with torch.no_grad():
    h.clamp_(min=0)  # expect: TL302
loss.backward()
""",
    "function and method spellings": """\
W = nn.Parameter(torch.randn(3, 3))
a = torch.randn(2, 3)
b = torch.randn(2, 3)
c = torch.randn(2, 3)
e = torch.randn(2, 3)
y = a.matmul(W) + torch.mm(b, W) + F.linear(c, W) + torch.einsum("ij,jk->ik", e, W)
a.zero_()  # expect: TL302
b[0] = 1  # expect: TL302
c.view(-1).mul_(2)  # expect: TL302
e.detach().add_(1)  # expect: TL302
y.sum().backward()
""",
    "rebound between the op and the change": """\
w = torch.randn(3, requires_grad=True)
x = torch.randn(3)
y = x * w
x = x.clone()
x.add_(1)
y.sum().backward()
""",
    "earlier in-place changes keep the tensor": """\
w = torch.randn(3, requires_grad=True)
x = torch.randn(3)
y = x * w
x += 1  # expect: TL302
x.mul_(2)  # expect: TL302
y.sum().backward()
""",
    "a backward between the op and the change spent the graph": """\
for x, t in loader:
    x = x.to(device)
    out = model(x)
    loss = F.mse_loss(out * scale_param, t)
    loss.backward()
    out.mul_(0)
    optimizer.step()
""",
    "changed after the last backward": """\
h = model(x)
loss = (h ** 2).sum()
loss.backward()
h.zero_()
""",
    "the op ran under no_grad": """\
h = model(x)
with torch.no_grad():
    ref = h * model(x)
h.add_(1)
(h + ref).sum().backward()
""",
    "the result never reaches backward": """\
h = model(x)
shown = h * model(x)
h.add_(1)
loss = h.sum()
loss.backward()
log(shown)
""",
    "a number updated in place": """\
h = model(x)
alpha = 0.5
y = h * alpha
alpha *= 0.9
y.sum().backward()
""",
    "a leaf changed with autograd recording is TL301's": """\
w = torch.randn(3, requires_grad=True)
y = w ** 2
w.add_(1)
y.sum().backward()
""",
    "a leaf changed under no_grad after a forward that saved it": """\
w = torch.randn(3, requires_grad=True)
y = w ** 2
with torch.no_grad():
    w.add_(1)  # expect: TL302
y.sum().backward()
""",
    "exclusive branches": """\
h = model(x)
if normalise:
    y = h * model(x)
else:
    h.mul_(2)
    y = h
y.sum().backward()
""",
    "not torch": """\
h = model(x)
y = np.matmul(h, w)
h.add_(1)
loss = model(x).sum()
loss.backward()
""",
    "torch layers with weights save their input": """\
class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.plain_norm = nn.LayerNorm(d, elementwise_affine=False)
        self.fc = nn.Linear(d, d)
        self.frozen = nn.Linear(d, d)
        self.frozen.requires_grad_(False)
        self.unknown = make_layer(d)

    def forward(self, x, y, z, u):
        x += self.fc(self.norm(x))  # expect: TL302
        y += self.plain_norm(y)
        z += self.frozen(z)
        u += self.unknown(u)
        return x + y + z + u
""",
    "another class freezing itself freezes no other": """\
class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        x += self.norm(x)  # expect: TL302
        return x


class FrozenBackbone(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        for p in self.parameters():
            p.requires_grad_(False)

    def forward(self, x):
        x += self.norm(x)
        return x
""",
    "a module's forward hands the result on": """\
class Gate(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.gamma = nn.Parameter(torch.ones(d))

    def forward(self, x):
        h = self.proj(x)
        out = h * self.gamma
        h[:, 0] = 0  # expect: TL302
        return out

    def scores(self, x):
        h = self.proj(x)
        logged = h * self.gamma
        h.zero_()
        return h
""",
    "an element of a list is not a view": """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(5))
        self.encoder = Encoder()

    def forward(self, rgb):
        x5p, skips = self.encoder(rgb)
        skips[1] = skips[1] * self.weight[0] + self.bias[0]
        h = torch.zeros(3, 4)
        y = h[0] * self.weight[1]
        h[0] = 5  # expect: TL302
        return skips, y
""",
    "the op inside the change's own arguments": """\
h = model(x)
h.add_(h * model(x))  # expect: TL302
h.sum().backward()
""",
}


@pytest.mark.parametrize("source", CASES.values(), ids=CASES.keys())
def test_findings_match_markers(source):
    assert_findings_match_markers(source, [RULE])


def test_message_names_the_op_that_saved_the_input():
    from torchlint.engine import lint_source

    source = CASES["a product saves each operand when the other requires grad"]
    [violation] = lint_source(source, "<snippet>", [RULE])
    assert "saved it as an input of `x * w`" in violation.message
