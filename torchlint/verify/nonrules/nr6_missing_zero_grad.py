"""NR6: a guide says that without `optimizer.zero_grad()` "memory grows unbounded". It does not:
`backward()` adds into the existing `.grad` tensors in place, so memory is the same after 2 steps
as after 8, with or without clearing. What goes wrong is the values: every update applies the sum
of all gradients so far (TL501's claim).
"""

import torch
import torch.nn.functional as F
from torch import nn


def _setup(device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(64, 256, device=device)
    target = torch.randint(0, 10, (64,), device=device)
    return model, optimizer, data, target


def run_without_zero_grad(steps, device):
    model, optimizer, data, target = _setup(device)
    for _ in range(steps):
        loss = F.cross_entropy(model(data), target)
        loss.backward()  # what the guide says makes memory grow
        optimizer.step()
    return model


def run_with_zero_grad(steps, device):
    model, optimizer, data, target = _setup(device)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()
    return model
