"""TL401 empty-cache-in-loop: measurable only on a GPU (on CPU `empty_cache()` does nothing)."""

from torchlint.verify.claims import Claim, Measured, Outcome, Program


def _cache_released_every_step(bad: Measured, good: Measured) -> Outcome:
    """On CUDA: bad's steps are slower and it asks the driver for new memory segments every step
    (the cache it just released), where good reuses its cached segments."""
    bad.expect_clean()
    good.expect_clean()
    bad_time, good_time = bad.time_per_step("wall_s"), good.time_per_step("wall_s")
    bad_segments, good_segments = bad.slope("segments_allocated"), good.slope("segments_allocated")
    holds = bad_time > good_time and bad_segments >= 1 and good_segments == 0
    return Outcome(
        holds, f"{bad_time * 1e3:.2f} ms/step, {bad_segments:+g} segments/step",
        f"{good_time * 1e3:.2f} ms/step, {good_segments:+g} segments/step",
        "bad slower per step (wall, synchronized) and allocating >= 1 new segment per step; good none",
    )


CLAIMS = [
    Claim(
        code="TL401",
        claim="empty_cache() every step returns the cache: each step re-allocates from the driver and is slower",
        metric="wall time per step, CUDA segments allocated per step",
        bad=Program("TL401/bad_training_loop.py"),
        chart=('wall_time_per_step', 'segments'),
        good=Program("TL401/good_training_loop.py"),
        check=_cache_released_every_step,
        needs_cuda=True,  # on CPU the verdict is needs-cuda without running anything
        timing=3,
    ),
]
