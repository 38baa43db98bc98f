"""NR8: a guide's "Tensor Clearing Checklist" recommends `typical_cleanup(tensor)`, a function that
`del`s its own parameter ("Delete reference ... That's it!"), and an `aggressive_cleanup` that
does the same after `.detach()` / `.cpu()`. `del` inside a function removes only the function's
own name: the caller's reference keeps the tensor alive, so the cleanup frees nothing.

Both programs make a feature tensor each step, then a second one while the first is still bound
in the caller; one calls the guide's cleanup on the first before making the second. If the cleanup
freed it, the peak would hold one tensor; it holds two in both programs.
"""

import torch

SIZE = 512  # one tensor: 1 MiB of float32


def typical_cleanup(tensor):  # the guide's function, as written
    if tensor.numel() == 1:
        value = tensor.item()
    del tensor
    return value if "value" in locals() else None


def _features(seed, device):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(SIZE, SIZE, generator=generator).to(device)


def run_without_cleanup(steps, device, record=lambda name, value: None):
    total = 0.0
    for step in range(steps):
        features = _features(step, device)
        total += float(features.mean())
        scratch = _features(step + steps, device)  # made while `features` is still bound
        total += float(scratch.mean())
    return total


def run_with_cleanup(steps, device, record=lambda name, value: None):
    total = 0.0
    for step in range(steps):
        features = _features(step, device)
        total += float(features.mean())
        typical_cleanup(features)  # what the guide says frees the tensor
        scratch = _features(step + steps, device)
        total += float(scratch.mean())
    return total
