"""TL502 zero-grad-between-backward-and-step: the step applies no gradient, so nothing learns."""

from torchlint.verify.claims import Claim, Measured, Outcome, Program

MIN_CHANGE = 1e-3  # good's parameter change after one step (measured 0.027 after one, 0.46 after 8)


def _parameters_never_change(bad: Measured, good: Measured) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    # Per-step lists (recorded every step) or one figure per run: compare every value.
    bad_values, good_values = bad.figure_values("param_delta"), good.figure_values("param_delta")
    if not bad_values or not good_values:
        return Outcome(False, "no figures", "no figures", "fixtures must record param_delta")
    holds = max(bad_values) == 0 and min(good_values) >= MIN_CHANGE
    return Outcome(
        holds, f"parameter change {max(bad_values):g} after {bad.steps[-1]} steps",
        f"parameter change {good_values[-1]:.3g} after {good.steps[-1]} steps",
        f"bad: parameters exactly unchanged at every step count; good: changed by >= {MIN_CHANGE:g} "
        f"(smallest {min(good_values):.3g})",
    )


EXACT = 1e-5  # relative distance that counts as equal (float32 sums of four micro-batches)
DIFFERENT = 0.1


def _only_the_last_micro_batch(bad: Measured, good: Measured) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    figures = {}
    for side, measured in (("bad", bad), ("good", good)):
        for name in ("applied_vs_sum", "applied_vs_last"):
            values = measured.figure_values(name)
            if not values:
                return Outcome(False, "no figures", "no figures", f"fixtures must record {name}")
            figures[side, name] = values
    holds = (
        max(figures["bad", "applied_vs_last"]) <= EXACT and min(figures["bad", "applied_vs_sum"]) >= DIFFERENT
        and max(figures["good", "applied_vs_sum"]) <= EXACT
    )
    return Outcome(
        holds,
        f"applied = last micro-batch (distance {max(figures['bad', 'applied_vs_last']):.2g}); "
        f"{min(figures['bad', 'applied_vs_sum']):.2f}+ away from the window's sum",
        f"applied = the window's sum (distance {max(figures['good', 'applied_vs_sum']):.2g})",
        f"bad: every step applies only the last of its micro-batches; good: the sum of all of them "
        f"(equal within {EXACT:g}, different by >= {DIFFERENT:g})",
    )


CLAIMS = [
    Claim(
        code="TL502",
        claim="zero_grad() between backward() and step() discards the gradients: parameters never change",
        metric="param_delta",
        bad=Program("TL502/bad_zero_grad_after_backward.py"),
        good=Program("TL502/good_zero_grad_after_backward.py"),
        check=_parameters_never_change,
        chart=("param_delta",),
    ),
    Claim(
        code="TL502",
        claim="the module's zero_grad() before GradScaler.step() / under a profiler range does the same",
        metric="param_delta",
        bad=Program("TL502/bad_amp_train_step.py"),
        good=Program("TL502/good_zero_grad_placements.py"),
        check=_parameters_never_change,
        chart=("param_delta",),
    ),
    Claim(
        code="TL502",
        claim="in a gradient-accumulation branch, zero_grad() before step() means no update ever happens",
        metric="param_delta",
        bad=Program("TL502/bad_accumulation_branch.py"),
        good=Program("TL502/good_zero_grad_placements.py"),
        check=_parameters_never_change,
        chart=("param_delta",),
    ),
    Claim(
        code="TL502",
        claim="zero_grad() on every micro-batch while step() waits for accumulation: each step applies only the last micro-batch",
        metric="applied_vs_last",
        bad=Program("TL502/bad_zero_grad_every_micro_batch.py"),
        good=Program("TL502/good_zero_grad_after_accumulated_step.py"),
        check=_only_the_last_micro_batch,
        chart=("applied_vs_last", "applied_vs_sum"),
    ),
]
