"""TL204 inference-without-eval-mode: `no_grad` does not switch dropout and batch norm to
inference behaviour; `.eval()` does."""

from torchlint.verify.claims import Claim, Measured, Outcome, Program

MIN_OUTPUT_DIFF = 1e-3  # two identical calls with dropout on (measured ~0.3-1)
MIN_BN_CHANGE = 1e-3  # one prediction batch moves the learnt running mean (inputs shifted by +1)
SAME = 1e-7  # eval mode: identical calls, running statistics untouched


def _outputs_vary(bad: Measured, good: Measured) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    bad_diff, good_diff = bad.figure_values("output_diff"), good.figure_values("output_diff")
    bad_bn, good_bn = bad.figure_values("bn_mean_change"), good.figure_values("bn_mean_change")
    if not (bad_diff and good_diff and bad_bn and good_bn):
        return Outcome(False, "no figures", "no figures", "fixtures must record output_diff and bn_mean_change")
    holds = (
        min(bad_diff) >= MIN_OUTPUT_DIFF and min(bad_bn) >= MIN_BN_CHANGE
        and max(good_diff) <= SAME and max(good_bn) <= SAME
    )
    return Outcome(
        holds,
        f"same input, outputs differ by >= {min(bad_diff):.2g}; BN mean moved >= {min(bad_bn):.2g}",
        f"outputs differ by <= {max(good_diff):.1g}; BN mean moved <= {max(good_bn):.1g}",
        f"bad: two identical calls under no_grad differ by >= {MIN_OUTPUT_DIFF:g} in every one of {len(bad_diff)} "
        f"pairs (smallest {min(bad_diff):.3g}), running mean moves >= {MIN_BN_CHANGE:g} per call "
        f"(smallest {min(bad_bn):.3g}); good (eval mode): differences and movement <= {SAME:g}",
    )


CLAIMS = [
    Claim(
        code="TL204",
        claim="under no_grad a training-mode model gives different outputs for the same input and overwrites its batch-norm statistics",
        metric="output difference between identical calls, batch-norm running-mean change",
        bad=Program("TL204/bad_predict.py"),
        good=Program("TL204/good_predict.py"),
        chart=("output_diff", "bn_mean_change"),
        check=_outputs_vary,
    ),
]
