"""NR2: some guides say `x.t() + 1` is slow and `.contiguous()` should be called first. It is the
other way round: elementwise kernels handle strided inputs directly, while `.contiguous()` adds a
full transposing copy (an extra allocation and a cache-unfriendly pass) before the same add.
"""

import torch


def _matrix(device):
    torch.manual_seed(0)
    return torch.randn(1024, 1024, device=device)


def run_transposed(steps, device, step_hook=lambda: None):
    x = _matrix(device)
    for _ in range(steps):
        y = x.t() + 1
        step_hook()
    return y if steps else None


def run_contiguous_first(steps, device, step_hook=lambda: None):
    x = _matrix(device)
    for _ in range(steps):
        y = x.t().contiguous() + 1
        step_hook()
    return y if steps else None
