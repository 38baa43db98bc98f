"""TL303 requires-grad-then-copied: `torch.randn(..., requires_grad=True).to(...)` is not a leaf.
Its `.grad` stays None (a hand-written update never runs) and an optimizer refuses it."""

from torchlint.verify.claims import Claim, Measured, Outcome, Program, all_of, good_parameters_change, raises_vs_clean

MIN_CHANGE = 1e-3  # good's weights must move at least this much (measured 0.5 after 2 steps)


def _grad_stays_none(bad: Measured, good: Measured) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    bad_none, good_none = bad.figure_values("grad_is_none"), good.figure_values("grad_is_none")
    bad_delta, good_delta = bad.figure_values("param_delta"), good.figure_values("param_delta")
    if not (bad_none and good_none and bad_delta and good_delta):
        return Outcome(False, "no figures", "no figures", "fixtures must record grad_is_none and param_delta")
    holds = min(bad_none) == 1 and max(bad_delta) == 0 and max(good_none) == 0 and min(good_delta) >= MIN_CHANGE
    return Outcome(
        holds, f".grad None at {sum(bad_none):.0f}/{len(bad_none)} steps, weights moved {max(bad_delta):g}",
        f".grad set at every step, weights moved {good_delta[-1]:.3g}",
        f"bad: .grad is None after every backward() and the weights never change; good: .grad is set at every "
        f"step and the weights move by >= {MIN_CHANGE:g} (smallest {min(good_delta):.3g})",
    )


CLAIMS = [
    Claim(
        code="TL303",
        claim="a tensor made with requires_grad=True and then copied to float64 never gets a .grad",
        metric="grad_is_none, param_delta",
        bad=Program("TL303/bad_copied_leaf.py"),
        good=Program("TL303/good_created_in_place.py"),
        check=_grad_stays_none,
        chart=("grad_is_none", "param_delta"),
    ),
    Claim(
        code="TL303",
        claim="an optimizer given the copied tensor raises at once; created in place it trains",
        metric="exception, param_delta",
        bad=Program("TL303/bad_optimizer_non_leaf.py"),
        good=Program("TL303/good_optimizer_leaf.py"),
        check=all_of(raises_vs_clean("ValueError", "non-leaf"), good_parameters_change()),
        step_counts=(1, 2),
        chart=("outcome", "param_delta"),
    ),
]
