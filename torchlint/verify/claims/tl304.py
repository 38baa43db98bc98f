"""TL304 dataset-item-mutated-in-place: `__getitem__` changing a view of the stored data makes
the dataset drift a little further every epoch."""

from torchlint.verify.claims import Claim, Measured, Outcome, Program

MIN_DRIFT = 1e-3  # after the first epoch, item 0 is at least this far from its original value
UNCHANGED = 0.0  # the good datasets' stored item stays bit-identical


def _dataset_drifts(bad: Measured, good: Measured) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    details, holds = [], True
    for name in ("item_drift", "array_drift"):
        drift, kept = bad.figure(name), good.figure(name)
        if not (isinstance(drift, list) and isinstance(kept, list) and len(drift) >= 2):
            return Outcome(False, "no figures", "no figures", f"fixtures must record {name} once per epoch")
        growing = all(later > earlier for earlier, later in zip(drift, drift[1:]))
        holds = holds and drift[0] >= MIN_DRIFT and growing and max(kept) <= UNCHANGED
        details.append(f"{name}: bad {' -> '.join(f'{v:.3g}' for v in drift)}, good max {max(kept):g}")
    return Outcome(
        holds,
        "stored item drifts every epoch: " + ", ".join(
            f"{name.split('_')[0]} {bad.figure(name)[0]:.2g} -> {bad.figure(name)[-1]:.2g}" for name in ("item_drift", "array_drift")
        ),
        "stored items unchanged",
        "; ".join(details) + f" (need bad >= {MIN_DRIFT:g} after epoch 1 and strictly growing; good == 0)",
    )


CLAIMS = [
    Claim(
        code="TL304",
        claim="a dataset whose __getitem__ changes stored data in place drifts further every epoch (tensor view and NumPy row)",
        metric="distance of stored item 0 from its original value, per epoch",
        bad=Program("TL304/bad_noisy_dataset.py"),
        good=Program("TL304/good_noisy_dataset.py"),
        chart=("item_drift", "array_drift"),
        check=_dataset_drifts,
    ),
]
