"""TL504 state-dict-snapshot-aliases-model: a `state_dict()` kept as a snapshot shares the live
tensors, so training after it changes the snapshot, and restoring it restores nothing."""

from torchlint.verify.claims import Claim, Measured, Outcome, Program

MIN_DRIFT = 1e-4  # how far the bad snapshot must have moved (measured 0.05-0.2 after one epoch of SGD)


def _snapshot_moves(name: str):
    def check(bad: Measured, good: Measured) -> Outcome:
        bad.expect_clean()
        good.expect_clean()
        bad_values, good_values = bad.figure_values(name), good.figure_values(name)
        if not bad_values or not good_values:
            return Outcome(False, "no figures", "no figures", f"fixtures must record {name}")
        holds = max(bad_values) >= MIN_DRIFT and max(good_values) == 0
        return Outcome(
            holds, f"{name} up to {max(bad_values):.3g}", f"{name} {max(good_values):g} (exact copy)",
            f"bad: the snapshot moved with training by up to {max(bad_values):.3g} (need >= {MIN_DRIFT:g}); "
            f"good: exactly as taken at every measurement (largest {max(good_values):g}, need 0)",
        )

    return check


CLAIMS = [
    Claim(
        code="TL504",
        claim="an early-stopping `best_state = model.state_dict()` changes with every later step",
        metric="snapshot_drift",
        bad=Program("TL504/bad_best_state_alias.py"),
        good=Program("TL504/good_best_state_copy.py"),
        check=_snapshot_moves("snapshot_drift"),
        chart=("snapshot_drift",),
    ),
    Claim(
        code="TL504",
        claim="resetting to an `initial = model.state_dict()` after fine-tuning restores nothing",
        metric="reset_error",
        bad=Program("TL504/bad_reset_to_initial.py"),
        good=Program("TL504/good_reset_to_initial.py"),
        check=_snapshot_moves("reset_error"),
        chart=("reset_error",),
    ),
]
