"""TL202 train-mode-not-restored: after the first validation the model trains in eval mode,
with dropout off and batch-norm statistics frozen."""

from torchlint.verify.claims import Claim, Measured, Outcome, Program

BATCHES_PER_EPOCH = 2  # the fixtures' training loaders
MIN_BN_CHANGE = 1e-6  # a training-mode epoch moves the running mean at least this much (measured ~1e-2)


def _trains_in_eval_mode(bad: Measured, good: Measured) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    bad_flags, good_flags = bad.figure("training_flag"), good.figure("training_flag")
    bad_bn, good_bn = bad.figure("bn_mean_change"), good.figure("bn_mean_change")
    if not all(isinstance(series, list) and len(series) > BATCHES_PER_EPOCH for series in (bad_flags, good_flags)):
        return Outcome(False, "no figures", "no figures", "fixtures must record training_flag every step")
    first, later = bad_flags[:BATCHES_PER_EPOCH], bad_flags[BATCHES_PER_EPOCH:]
    bad_frozen = max(bad_bn[1:]) if len(bad_bn) > 1 else float("nan")
    holds = (
        min(first) == 1 and max(later) == 0 and min(good_flags) == 1
        and bad_bn[0] >= MIN_BN_CHANGE and bad_frozen == 0 and min(good_bn) >= MIN_BN_CHANGE
    )
    return Outcome(
        holds,
        f"training flag {sum(first):.0f}/{len(first)} steps in epoch 1, {sum(later):.0f}/{len(later)} after; "
        f"BN mean change after epoch 1: {bad_frozen:.2g}",
        f"training flag {sum(good_flags):.0f}/{len(good_flags)} steps; BN mean change >= {min(good_bn):.2g}",
        f"bad: `training` True in the first epoch's {BATCHES_PER_EPOCH} steps and False in all {len(later)} later "
        f"ones, batch-norm running mean unchanged (0) in every epoch after the first; good: True in every step, "
        f"running mean moves >= {MIN_BN_CHANGE:g} every epoch",
    )


CLAIMS = [
    Claim(
        code="TL202",
        claim=f"{title}: after the first validation every training step runs in eval mode and batch norm stops learning",
        metric="training flag per step, batch-norm running-mean change per epoch",
        bad=Program(f"TL202/{bad}.py"),
        good=Program(f"TL202/{good}.py"),
        chart=("training_flag", "bn_mean_change"),
        check=_trains_in_eval_mode,
    )
    for bad, good, title in (
        ("bad_epoch_loop", "good_epoch_loop", "`model.eval()` in the epoch loop"),
        ("bad_validation_helper", "good_helpers", "a validation helper that calls `.eval()`"),
    )
]
