"""Fails on its second step, like backward through a freed graph."""


def run(steps, device):
    for step in range(steps):
        if step == 1:
            raise RuntimeError("second step is not allowed")
    return None
