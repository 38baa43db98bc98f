"""Keeps one 4 KiB tensor per step (a leak of exactly 4096 bytes per step)."""
import torch


def run(steps, device, step_hook=lambda: None):
    kept = []
    for step in range(steps):
        scratch = torch.ones(256, device=device) * step  # freed every step
        kept.append(torch.zeros(1024, device=device) + scratch.sum())
        step_hook()
    return kept
