"""TL403 allocation-in-loop: one fresh buffer per step instead of one in all, and two alive at
the peak (the old buffer is still bound while the new one is made)."""

from torchlint.verify.claims import Claim, Measured, Outcome, Program, human_bytes

PEAK_SHARE = 0.5  # bad's peak over good's, as a share of one buffer (measured 0.81)


def _buffer_allocated_every_step(bad: Measured, good: Measured) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    buffer = bad.last("largest_allocation_bytes")
    if buffer != good.last("largest_allocation_bytes"):
        return Outcome(False, human_bytes(buffer), human_bytes(good.last("largest_allocation_bytes")),
                       "bad and good must share their largest buffer size")
    bad_counts, good_counts = bad.series("largest_allocation_count"), good.series("largest_allocation_count")
    extra_peak = bad.last("peak_bytes") - good.last("peak_bytes")
    holds = bad_counts == bad.steps and set(good_counts) == {1} and extra_peak >= PEAK_SHARE * buffer
    return Outcome(
        holds,
        f"{bad_counts[-1]} x {human_bytes(buffer)} in {bad.steps[-1]} steps, peak +{extra_peak / buffer:.2f} buffer",
        f"{good_counts[-1]} x {human_bytes(buffer)}",
        f"allocations of the {buffer} B buffer at {bad.steps} steps: bad {bad_counts} (need one per step), "
        f"good {good_counts} (need 1); bad's peak exceeds good's by {extra_peak} B "
        f"(need >= {PEAK_SHARE:g} buffer)",
    )


def _cuda_allocation_every_step(bad: Measured, good: Measured) -> Outcome:
    """On CUDA the allocator reports counts, not sizes: bad makes at least one more allocation
    per step than good, and its peak is higher."""
    bad.expect_clean()
    good.expect_clean()
    extra = bad.slope("allocations") - good.slope("allocations")
    extra_peak = bad.last("peak_bytes") - good.last("peak_bytes")
    return Outcome(extra >= 1 and extra_peak > 0, f"{bad.slope('allocations'):+g} allocations/step",
                   f"{good.slope('allocations'):+g} allocations/step",
                   f"bad: {extra:g} more allocations per step (need >= 1), peak {human_bytes(extra_peak)} higher")


CLAIMS = [
    Claim(
        code="TL403",
        claim="a loop-invariant buffer made every step: one allocation per step and two buffers alive at the peak",
        metric="allocations of the buffer size, peak bytes",
        bad=Program("TL403/bad_scratch_buffers.py"),
        chart=('buffer_allocations', 'peak_bytes'),
        good=Program("TL403/good_scratch_buffers.py"),
        check=_buffer_allocated_every_step,
        cuda_check=_cuda_allocation_every_step,
    ),
    Claim(
        code="TL403",
        claim=("a loop-invariant buffer made every step and handed to a helper that keeps no reference: "
               "one allocation per step and two buffers alive at the peak"),
        metric="allocations of the buffer size, peak bytes",
        bad=Program("TL403/bad_helper_buffer.py"),
        chart=("buffer_allocations", "peak_bytes"),
        good=Program("TL403/good_helper_buffer.py"),
        check=_buffer_allocated_every_step,
        cuda_check=_cuda_allocation_every_step,
    ),
]
