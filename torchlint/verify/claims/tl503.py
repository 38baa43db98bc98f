"""TL503 grad-scaler-protocol: GradScaler's order broken. Clipping before `unscale_` shrinks every
update by about the loss scale; `optimizer.step()` applies 65536x gradients; without `update()`
the second `scaler.step()` raises."""

from torchlint.verify.claims import Claim, Measured, Outcome, Program, raises_vs_clean

MIN_RATIO = 1000.0  # how many times smaller / larger the bad update is (measured 65536 = the loss scale)


def _ratio(bad: Measured, good: Measured, name: str, bad_smaller: bool) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    bad_values, good_values = bad.figure_values(name), good.figure_values(name)
    if not bad_values or not good_values or len(bad_values) != len(good_values):
        return Outcome(False, "no figures", "no figures", f"fixtures must record {name} once per run")
    pairs = list(zip(bad_values, good_values))
    if bad_smaller:
        ratios = [g / b if b > 0 else float("inf") for b, g in pairs]
    else:
        ratios = [b / g if g > 0 else float("inf") for b, g in pairs]
    holds = min(ratios) >= MIN_RATIO and min(good_values) > 0
    word = "less" if bad_smaller else "more"
    return Outcome(
        holds, f"{name} {bad_values[-1]:.3g} after {bad.steps[-1]} steps",
        f"{name} {good_values[-1]:.3g} ({min(ratios):.0f}x {'more' if bad_smaller else 'less'})",
        f"bad's {name} is {word} than good's by {min(ratios):.4g}x at the smallest over step counts "
        f"{bad.steps} (need >= {MIN_RATIO:g}x)",
    )


def _clip_shrinks_update(bad: Measured, good: Measured) -> Outcome:
    return _ratio(bad, good, "param_delta", bad_smaller=True)


def _step_applies_scaled_gradients(bad: Measured, good: Measured) -> Outcome:
    return _ratio(bad, good, "first_update", bad_smaller=False)


def _overflow_reaches_weights(bad: Measured, good: Measured) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    bad_values, good_values = bad.figure_values("finite_params"), good.figure_values("finite_params")
    if not bad_values or not good_values:
        return Outcome(False, "no figures", "no figures", "fixtures must record finite_params every step")
    holds = max(bad_values) == 0 and min(good_values) == 1
    return Outcome(
        holds, f"weights non-finite after {len(bad_values) - sum(bad_values):.0f}/{len(bad_values)} steps",
        f"weights finite after {sum(good_values):.0f}/{len(good_values)} steps",
        "bad: inf/NaN in the weights from the first step on, at every step count; good: finite after every "
        "step (the overflowed steps are skipped)",
    )


CLAIMS = [
    Claim(
        code="TL503",
        claim="clipping before scaler.unscale_() clips 65536x gradients: the weights barely move",
        metric="param_delta",
        bad=Program("TL503/bad_clip_before_unscale.py"),
        good=Program("TL503/good_unscale_before_clip.py"),
        check=_clip_shrinks_update,
        chart=("param_delta",),
    ),
    Claim(
        code="TL503",
        claim="optimizer.step() after scaler.scale(loss).backward() applies the scaled gradients",
        metric="first_update",
        bad=Program("TL503/bad_optimizer_step.py"),
        good=Program("TL503/good_scaler_step.py"),
        check=_step_applies_scaled_gradients,
        chart=("first_update",),
    ),
    Claim(
        code="TL503",
        claim="optimizer.step() after unscale_() writes the overflowed float16 gradients into the weights",
        metric="finite_params",
        bad=Program("TL503/bad_step_after_unscale.py"),
        good=Program("TL503/good_step_after_unscale.py"),
        check=_overflow_reaches_weights,
        chart=("finite_params",),
    ),
    Claim(
        code="TL503",
        claim="scaler.step() without scaler.update(): the second step raises",
        metric="exception",
        bad=Program("TL503/bad_missing_update.py"),
        good=Program("TL503/good_protocol_variants.py"),
        check=raises_vs_clean("RuntimeError", "since the last update", clean_below=2),
        step_counts=(1, 2, 4),
        chart=("outcome",),
    ),
]
