"""TL305 data-mutated-before-backward: a `.data` change between the forward pass and
`backward()` is invisible to autograd, which then differentiates with the changed values."""

from torchlint.verify.claims import Claim, Measured, Outcome, Program

WRONG = 1e-3  # the bad program's gradients are at least this far from the correct ones, every step
RIGHT = 1e-6  # the good program's match them (float32 round-off)


def _gradients_wrong(bad: Measured, good: Measured) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    bad_error, good_error = bad.figure_values("grad_error"), good.figure_values("grad_error")
    if not (bad_error and good_error):
        return Outcome(False, "no figures", "no figures", "fixtures must record grad_error every step")
    holds = min(bad_error) >= WRONG and max(good_error) <= RIGHT
    return Outcome(
        holds,
        f"gradient off by {min(bad_error):.2g}..{max(bad_error):.2g}, no error raised",
        f"gradient off by <= {max(good_error):.1g}",
        f"bad: every one of {len(bad_error)} steps' gradients differs from the correct gradient by >= {WRONG:g} "
        f"(smallest {min(bad_error):.3g}) and nothing raises; good: within {RIGHT:g} (largest {max(good_error):.2g})",
    )


CLAIMS = [
    Claim(
        code="TL305",
        claim="`x.data.add_(1)` between `(x ** 2).sum()` and backward(): gradient [4, 6, 8] instead of [2, 4, 6], silently",
        metric="largest |grad - correct grad| per step",
        bad=Program("TL305/bad_weight_noise.py", "run_leaf"),
        good=Program("TL305/good_weight_noise.py", "run_leaf"),
        chart=("grad_error",),
        check=_gradients_wrong,
    ),
    Claim(
        code="TL305",
        claim="weight noise added through `.data` between forward and backward: every step applies wrong gradients",
        metric="largest |grad - correct grad| per step",
        bad=Program("TL305/bad_weight_noise.py"),
        good=Program("TL305/good_weight_noise.py"),
        chart=("grad_error",),
        check=_gradients_wrong,
    ),
]
