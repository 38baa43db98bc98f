"""Guide claims the measurements refute, kept as documented non-rules (no lint rule exists).

For these, "bad" is the code the guide warns against and "good" the guide's recommendation;
``confirmed`` means the refutation holds: the guide is wrong on this torch version.
"""

from torchlint.verify.claims import Claim, Measured, Outcome, nonrule_program, per_step_bytes

FILE_NR1 = "nr1_del_outputs.py"
FILE_NR2 = "nr2_transpose_contiguous.py"
MIN_SLOWDOWN = 1.3  # measured 2.6-13x while planning; 1.3x leaves room for a loaded machine


def _del_outputs_is_harmless(bad: Measured, good: Measured) -> Outcome:
    good.expect_clean()
    bad.expect_ran()
    failure = next((e for e in bad.exceptions if e), None)
    if failure:  # the guide would be right
        return Outcome(False, f"{failure['type']}: {failure['message'][:60]}", "ok", "del outputs raised")
    bad_grads, good_grads = bad.figure("grad_sum"), good.figure("grad_sum")
    same = bad_grads == good_grads and bool(bad_grads)
    return Outcome(
        same, f"no error, grad sums {bad_grads[-1]:.6g}", f"grad sums {good_grads[-1]:.6g}",
        f"gradient sums per step identical: {same} ({len(bad_grads)} steps)",
    )


def _contiguous_first_is_slower(bad: Measured, good: Measured) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    bad_time, good_time = bad.time_per_step(), good.time_per_step()
    bad_alloc, good_alloc = bad.slope("allocated_bytes"), good.slope("allocated_bytes")
    ratio = good_time / bad_time if bad_time > 0 else float("inf")
    holds = ratio >= MIN_SLOWDOWN and good_alloc >= 2 * bad_alloc > 0
    return Outcome(
        holds, f"{bad_time * 1e3:.2f} ms/step, {per_step_bytes(bad_alloc)} allocated",
        f"{good_time * 1e3:.2f} ms/step ({ratio:.1f}x), {per_step_bytes(good_alloc)} allocated",
        f".contiguous() first: {ratio:.2f}x the CPU time per step (need >= {MIN_SLOWDOWN}) and "
        f"{good_alloc / bad_alloc if bad_alloc else 0:.1f}x the bytes allocated per step (need >= 2)",
    )


CLAIMS = [
    Claim(
        code="NR1",
        claim="non-rule: `del outputs` before `backward()` raises no error and leaves gradients identical",
        metric="exception, gradient sums",
        bad=nonrule_program(FILE_NR1, "run_del_outputs"),
        good=nonrule_program(FILE_NR1, "run_keep_outputs"),
        check=_del_outputs_is_harmless,
        chart=("outcome", "grad_sum"),
    ),
    Claim(
        code="NR2",
        claim="non-rule: `x.t() + 1` is faster than `x.t().contiguous() + 1`, which copies first",
        metric="CPU time per step, bytes allocated per step",
        bad=nonrule_program(FILE_NR2, "run_transposed"),
        good=nonrule_program(FILE_NR2, "run_contiguous_first"),
        check=_contiguous_first_is_slower,
        chart=("time_per_step", "allocated_bytes"),
        timing=3,
        timing_steps=(8,),  # 21 single-step samples whatever --steps is
    ),
]
