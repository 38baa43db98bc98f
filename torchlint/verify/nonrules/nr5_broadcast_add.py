"""NR5: a guide says `x + y` with a small `y` "broadcasts to (1000, 1000, 100) temporarily" and
recommends `x.add(y)`. Broadcasting is done by strides (a stride-0 view), never by copying the
small operand: `x + y` and `x.add(y)` each allocate exactly one output-sized tensor per step.
"""

import torch

SHAPE = (100, 100, 100)  # 4,000,000 bytes of float32


def _operands(device):
    torch.manual_seed(0)
    return torch.randn(*SHAPE, device=device), torch.randn(SHAPE[-1], device=device)


def run_operator(steps, device, record=lambda name, value: None):
    x, y = _operands(device)
    result = None
    for _ in range(steps):
        result = x + y  # what the guide says materialises y
    record("output_bytes", result.numel() * result.element_size())
    return result


def run_add_method(steps, device, record=lambda name, value: None):
    x, y = _operands(device)
    result = None
    for _ in range(steps):
        result = x.add(y)
    record("output_bytes", result.numel() * result.element_size())
    return result
