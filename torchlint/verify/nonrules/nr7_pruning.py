"""NR7: a guide lists pruning (`torch.nn.utils.prune`) under "Model Pruning for Memory". While a
module is pruned it holds `weight_orig`, `weight_mask` and the masked `weight`: three tensors of
the weight's size where the dense module had one. `prune.remove` folds them back into one dense
tensor of the same size, zeros included. Pruning never makes the model smaller in memory.

Both programs train a Linear(1000, 1000) for `steps` steps and return it: the dense one as is,
the pruned one still pruned (as during fine-tuning after pruning); the pruned one also records the
tensor bytes of a second pruned Linear after `prune.remove`.
"""

import torch
import torch.nn.utils.prune as prune
from torch import nn


def _train(model, steps, device):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(8, 1000, device=device)
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        model(data).square().mean().backward()
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)  # no gradients kept: only the module's own tensors
    return model


def _module_bytes(module):
    tensors = {id(t): t for t in [*module.parameters(), *module.buffers()]}
    weight = getattr(module, "weight")
    tensors[id(weight)] = weight
    return sum(t.numel() * t.element_size() for t in tensors.values())


def run_dense(steps, device, record=lambda name, value: None):
    torch.manual_seed(0)
    model = _train(nn.Linear(1000, 1000).to(device), steps, device)
    record("module_bytes", _module_bytes(model))
    return model


def run_pruned(steps, device, record=lambda name, value: None):
    torch.manual_seed(0)
    model = nn.Linear(1000, 1000).to(device)
    prune.ln_structured(model, name="weight", amount=0.3, n=2, dim=0)  # the guide's call
    model = _train(model, steps, device)
    record("module_bytes", _module_bytes(model))
    permanent = nn.Linear(1000, 1000).to(device)
    prune.ln_structured(permanent, name="weight", amount=0.3, n=2, dim=0)
    prune.remove(permanent, "weight")  # the guide's "make pruning permanent"
    record("removed_bytes", _module_bytes(permanent))
    return model
