"""TL201 eval-without-no-grad: evaluating with autograd on saves every layer's activations."""

from torchlint.verify.claims import Claim, Measured, Outcome, Program, human_bytes

MIN_PEAK_RATIO = 1.5  # measured 1.98x (3x Linear(256, 256), batch 512)


def _peak_higher(bad: Measured, good: Measured) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    bad_peak, good_peak = bad.last("peak_bytes"), good.last("peak_bytes")
    ratio = bad_peak / good_peak if good_peak else float("inf")
    flat = bad.slope("live_bytes") == 0 and good.slope("live_bytes") == 0
    return Outcome(
        ratio >= MIN_PEAK_RATIO and flat, f"peak {human_bytes(bad_peak)} ({ratio:.2f}x)",
        f"peak {human_bytes(good_peak)}",
        f"peak during the eval loop: bad {bad_peak} B, good {good_peak} B, {ratio:.2f}x (need >= {MIN_PEAK_RATIO}); "
        f"nothing kept afterwards in either (live bytes flat: {flat})",
    )


CLAIMS = [
    Claim(
        code="TL201",
        claim="an eval loop with autograd on peaks far higher than the same loop under no_grad()",
        metric="peak bytes",
        bad=Program("TL201/bad_evaluate.py"),
        chart=('peak_bytes',),
        good=Program("TL201/good_evaluate_no_grad.py"),
        check=_peak_higher,
    ),
]
