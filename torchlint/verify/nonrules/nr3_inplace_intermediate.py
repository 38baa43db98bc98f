"""NR3: a guide says an in-place operation on an intermediate result (`y = x * 2; y.add_(1)`)
raises a RuntimeError. It does not: `mul` by a constant saves nothing for backward that `add_`
changes, so autograd accepts the in-place op and the gradients equal those of `y = y + 1`. The
error exists only when the changed tensor was saved by an op (TL302 covers that).
"""

import torch


def _step(device, inplace):
    x = torch.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    y = x * 2
    if inplace:
        y.add_(1)  # what the guide says raises
    else:
        y = y + 1
    (y * y).sum().backward()
    return x.grad


def run_inplace(steps, device, record=lambda name, value: None):
    grads = []
    for _ in range(steps):
        grad = _step(device, inplace=True)
        record("grad_sum", grad.sum())
        grads.append(grad)
    return grads


def run_out_of_place(steps, device, record=lambda name, value: None):
    grads = []
    for _ in range(steps):
        grad = _step(device, inplace=False)
        record("grad_sum", grad.sum())
        grads.append(grad)
    return grads
