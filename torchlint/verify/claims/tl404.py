"""TL404 device-copy-in-loop: a loop-invariant tensor copied every step.

On CPU the host-to-device copy cannot be observed (`.to("cpu")` returns the tensor itself), so the
fixtures copy with a dtype change, `.to(device, torch.float64)`: on CPU that is the measured proxy
(one tensor-sized allocation and copy per step); on a GPU the same line is the real host-to-device
copy, checked with the allocator's counts and the wall time per step."""

from torchlint.verify.claims import Claim, Measured, Outcome, Program, human_bytes

PRIOR_BYTES = 512 * 512 * 8  # the float64 copy of the fixtures' 512x512 host tensor: 2 MiB
HOST_BUFFER_BYTES = 8 * 512 * 4  # the float32 `torch.ones(x.shape)` made first (x is 8 x 512 or 513)


def _copied_every_step(bad: Measured, good: Measured) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    bad_size, good_size = bad.last("largest_allocation_bytes"), good.last("largest_allocation_bytes")
    if bad_size != PRIOR_BYTES or good_size != PRIOR_BYTES:
        return Outcome(False, human_bytes(bad_size), human_bytes(good_size),
                       f"both programs' largest allocation must be the {PRIOR_BYTES} B copy")
    bad_counts, good_counts = bad.series("largest_allocation_count"), good.series("largest_allocation_count")
    holds = bad_counts == bad.steps and set(good_counts) == {1}
    return Outcome(
        holds, f"{bad_counts[-1]} copies of {human_bytes(bad_size)} in {bad.steps[-1]} steps",
        f"{good_counts[-1]} copy", f"copies of the {bad_size} B tensor at {bad.steps} steps: bad {bad_counts} "
        f"(need one per step), good {good_counts} (need 1 in all)",
    )


def _cuda_copied_every_step(bad: Measured, good: Measured) -> Outcome:
    """On CUDA: at least one more device allocation per step, and slower steps."""
    bad.expect_clean()
    good.expect_clean()
    extra = bad.slope("allocations") - good.slope("allocations")
    bad_time, good_time = bad.time_per_step("wall_s"), good.time_per_step("wall_s")
    return Outcome(extra >= 1 and bad_time > good_time, f"{bad_time * 1e3:.3f} ms/step",
                   f"{good_time * 1e3:.3f} ms/step",
                   f"bad: {extra:g} more device allocations per step (need >= 1) and slower steps (wall)")


def _host_buffer_every_step(bad: Measured, good: Measured) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    extra_allocations = bad.slope("allocations") - good.slope("allocations")
    bad_bytes, good_bytes = bad.slope("allocated_bytes"), good.slope("allocated_bytes")
    extra_bytes = bad_bytes - good_bytes
    holds = extra_allocations >= 1 and extra_bytes >= HOST_BUFFER_BYTES
    return Outcome(
        holds, f"{bad.slope('allocations'):+g} allocations/step, {human_bytes(bad_bytes)}/step",
        f"{good.slope('allocations'):+g} allocations/step, {human_bytes(good_bytes)}/step",
        f"bad makes {extra_allocations:g} more allocations per step (need >= 1) and allocates {extra_bytes:g} "
        f"more bytes per step (need >= {HOST_BUFFER_BYTES}, the host buffer)",
    )


CLAIMS = [
    Claim(
        code="TL404",
        claim="a loop-invariant tensor moved every step is copied every step; moved once before the loop, once "
              "(CPU proxy: the copy is a dtype conversion)",
        metric="copies of the tensor (largest allocation count)",
        bad=Program("TL404/bad_device_copies.py"),
        good=Program("TL404/good_device_copies.py"),
        check=_copied_every_step,
        cuda_check=_cuda_copied_every_step,
        chart=("buffer_allocations",),
    ),
    Claim(
        code="TL404",
        claim="a factory followed by a conversion makes two buffers per step where `device=`/`dtype=` makes one "
              "(CPU proxy: the conversion is a dtype change)",
        metric="allocations and bytes allocated per step",
        bad=Program("TL404/bad_device_copies.py", "run_factory"),
        good=Program("TL404/good_device_copies.py", "run_factory"),
        check=_host_buffer_every_step,
        chart=("allocations_per_step",),
    ),
]
