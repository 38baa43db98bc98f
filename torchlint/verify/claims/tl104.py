"""TL104 view-keeps-base-alive: a stored slice keeps its whole base storage."""

from torchlint.verify.claims import Claim, Program, grows_faster

BASE_BYTES = 16 * 64 * 256 * 4  # one step's output in the fixtures: 1 MiB
SLICE_BYTES = 16 * 256 * 4  # its last position: 16 KiB

CLAIMS = [
    Claim(
        code="TL104",
        claim="a stored `out[:, -1]` keeps each step's whole output: live bytes grow by the base, not the slice",
        metric="live bytes per step",
        bad=Program("TL104/bad_sliced_outputs.py"),
        good=Program("TL104/good_sliced_outputs.py"),
        # measured: bad +1,048,576 B per step (the whole output), good +16,384 B (the cloned
        # slice): 64x. Thresholds: at least 3/4 of the base per step and 32x the good's growth.
        check=grows_faster("live_bytes", min_per_step=0.75 * BASE_BYTES, min_ratio=32),
        chart=("live_bytes",),
    ),
]
