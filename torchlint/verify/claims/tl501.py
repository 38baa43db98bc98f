"""TL501 missing-zero-grad: a correctness bug, not a leak. Memory stays flat, but the gradient a
step applies is the sum of every earlier step's gradient (its norm keeps growing)."""

from torchlint.verify.claims import Claim, Measured, Outcome, Program, per_step_bytes

SUM_TOLERANCE = 1e-5  # relative error of "applied gradient == sum of the steps' own gradients"
NOT_SUM = 0.1  # a loop that clears gradients is this far from the running sum after step 1
MIN_NORM_RATIO = 1.5  # bad's last gradient norm over good's (measured 4.3x at 8 steps)


def _gradients_accumulate(bad: Measured, good: Measured) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    bad_error, good_error = bad.figure("grad_sum_error"), good.figure("grad_sum_error")
    bad_norm, good_norm = bad.figure("grad_norm"), good.figure("grad_norm")
    if not (isinstance(bad_error, list) and isinstance(good_error, list) and bad_norm and good_norm):
        return Outcome(False, "no figures", "no figures", "fixtures must record grad_sum_error and grad_norm per step")
    bad_slope, good_slope = bad.slope("live_bytes"), good.slope("live_bytes")
    ratio = bad_norm[-1] / good_norm[-1]
    holds = (
        max(bad_error) <= SUM_TOLERANCE
        and min(good_error[1:]) >= NOT_SUM
        and ratio >= MIN_NORM_RATIO
        and bad_slope == 0 and good_slope == 0
    )
    return Outcome(
        holds,
        f"grad = sum of steps (err {max(bad_error):.1g}), |g| {bad_norm[0]:.2f}->{bad_norm[-1]:.2f}, "
        f"{per_step_bytes(bad_slope)}",
        f"grad = own step (err >= {min(good_error[1:]):.2f}), |g| {good_norm[0]:.2f}->{good_norm[-1]:.2f}, "
        f"{per_step_bytes(good_slope)}",
        f"bad: applied gradient equals the sum of all steps' gradients within {SUM_TOLERANCE:g} at every step, "
        f"its norm {ratio:.1f}x good's after {len(bad_norm)} steps (need >= {MIN_NORM_RATIO}); "
        f"good: differs from the running sum by >= {NOT_SUM} after step 1; live memory flat in both",
    )


GROWTH = 1.5  # bad's gradient norm over good's at the same step, at its largest (measured 2.5-26x)


def _gradient_norm_grows(bad: Measured, good: Measured) -> Outcome:
    """Step by step against the good program (same seed, same data): accumulation makes bad's
    gradient norm at least GROWTH × good's at some step, while good's own norm does not grow.
    (Comparing step to step, not last to first, also covers loops that clear once per epoch.)"""
    bad.expect_clean()
    good.expect_clean()
    bad_norm, good_norm = bad.figure("grad_norm"), good.figure("grad_norm")
    if not (isinstance(bad_norm, list) and isinstance(good_norm, list)):
        return Outcome(False, "no figures", "no figures", "fixtures must record grad_norm once per step")
    ratio = max(b / g for b, g in zip(bad_norm, good_norm) if g > 0)
    good_growth = good_norm[-1] / good_norm[0]
    bad_slope, good_slope = bad.slope("live_bytes"), good.slope("live_bytes")
    holds = ratio >= GROWTH and good_growth < GROWTH and bad_slope == 0 and good_slope == 0
    return Outcome(
        holds, f"|g| up to {ratio:.1f}x good's in {len(bad_norm)} steps, {per_step_bytes(bad_slope)}",
        f"|g| x{good_growth:.1f} over the run, {per_step_bytes(good_slope)}",
        f"largest bad/good gradient-norm ratio at the same step {ratio:.2f} (need >= {GROWTH}); good's norm "
        f"last/first {good_growth:.2f} (need < {GROWTH}); live memory flat in both",
    )


CLAIMS = [
    Claim(
        code="TL501",
        claim="gradients accumulate across steps: the applied gradient is the sum of all steps' (memory does not grow)",
        metric="grad_sum_error, grad_norm, live bytes",
        bad=Program("TL501/bad_training_loop.py"),
        chart=("grad_norm", "grad_sum_error"),
        good=Program("TL501/good_training_loop.py"),
        check=_gradients_accumulate,
    ),
    Claim(
        code="TL501",
        claim="with AMP's GradScaler the unscaled gradients accumulate the same way",
        metric="grad_norm growth, live bytes",
        bad=Program("TL501/bad_amp_grad_scaler.py"),
        chart=("grad_norm",),
        good=Program("TL501/good_amp_grad_scaler.py"),
        check=_gradient_norm_grows,
    ),
    Claim(
        code="TL501",
        claim="a GAN step that forgets one of its two optimizers' zero_grad() accumulates that model's gradients",
        metric="grad_norm growth, live bytes",
        bad=Program("TL501/bad_gan_two_optimizers.py"),
        chart=("grad_norm",),
        good=Program("TL501/good_gan_two_optimizers.py"),
        check=_gradient_norm_grows,
    ),
]
