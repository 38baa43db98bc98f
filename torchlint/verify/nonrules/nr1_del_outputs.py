"""NR1: some guides say `del outputs` before `loss.backward()` breaks backward. It does not.

The autograd graph holds what backward needs (saved tensors live in the graph nodes, not in the
Python name), so deleting the Python reference only drops a name: backward runs and the gradients
are bit-for-bit those of the loop that keeps `outputs` until after the step.
"""

import torch
from torch import nn


def _setup(device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.randn(32, 128, device=device)
    target = torch.randint(0, 10, (32,), device=device)
    return model, optimizer, data, target


def _grad_sum(model):
    return sum(float(p.grad.double().sum()) for p in model.parameters())


def run_del_outputs(steps, device, record=lambda name, value: None):
    model, optimizer, data, target = _setup(device)
    for _ in range(steps):
        optimizer.zero_grad()
        outputs = model(data)
        loss = nn.functional.cross_entropy(outputs, target)
        del outputs  # what the guide warns against
        loss.backward()
        record("grad_sum", _grad_sum(model))
        optimizer.step()
    return model


def run_keep_outputs(steps, device, record=lambda name, value: None):
    model, optimizer, data, target = _setup(device)
    for _ in range(steps):
        optimizer.zero_grad()
        outputs = model(data)
        loss = nn.functional.cross_entropy(outputs, target)
        loss.backward()
        record("grad_sum", _grad_sum(model))
        optimizer.step()
        del outputs
    return model
