"""TL203 checkpoint-misuse: the reentrant checkpoint on inputs without grad drops the segment's
gradients; a checkpoint per layer keeps more memory than one around the stack."""

from torchlint.verify.claims import Claim, FixtureFailed, Measured, Outcome, Program, human_bytes

MIN_DELTA = 1e-3  # how far (L2) training must move the good encoder and the bad head (measured: 0.08 and up)
MIN_RATIO = 2.0  # per-layer checkpoints' live bytes over one checkpoint's (measured 5x)


def _encoder_never_trains(bad: Measured, good: Measured) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    bad_encoder, bad_head = bad.figure_values("param_delta"), bad.figure_values("head_delta")
    good_encoder = good.figure_values("param_delta")
    if not (bad_encoder and bad_head and good_encoder):
        return Outcome(False, "", "", "the fixtures must return param_delta (the encoder's) and head_delta")
    holds = max(bad_encoder) == 0 and min(bad_head) >= MIN_DELTA and min(good_encoder) >= MIN_DELTA
    return Outcome(
        holds, f"encoder moved {bad_encoder[-1]:g}, head {bad_head[-1]:.3g}", f"encoder moved {good_encoder[-1]:.3g}",
        f"bad encoder weights moved {bad_encoder} (need exactly 0) while its head moved {bad_head} "
        f"(need >= {MIN_DELTA:g}); good encoder moved {good_encoder} (need >= {MIN_DELTA:g})",
    )


def _per_layer_keeps_more(bad: Measured, good: Measured) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    bad_saved, good_saved = saved_activation_bytes(bad), saved_activation_bytes(good)
    ratios = [b / g if g > 0 else float("inf") for b, g in zip(bad_saved, good_saved)]
    return Outcome(
        min(ratios) >= MIN_RATIO, f"{human_bytes(bad_saved[-1])} saved for backward",
        f"{human_bytes(good_saved[-1])} ({ratios[-1]:.1f}x less)",
        f"bytes saved for backward after the last forward (live less parameters, input, output): per-layer "
        f"{bad_saved}, whole stack {good_saved}; ratio {', '.join(f'{r:.2f}' for r in ratios)} "
        f"(need >= {MIN_RATIO:g} at every step count)",
    )


def saved_activation_bytes(measured: Measured) -> list[float]:
    """Live bytes after each run less its ``fixed_bytes`` figure (parameters, input, output):
    what the kept graph saved for backward."""
    fixed = [run.get("figures", {}).get("fixed_bytes") for run in measured.runs]
    if any(value is None for value in fixed):
        raise FixtureFailed(f"{measured.name}: no fixed_bytes figure")
    return [live - value for live, value in zip(measured.series("live_bytes"), fixed)]


CLAIMS = [
    Claim(
        code="TL203",
        claim="a reentrant checkpoint on an input without grad: the checkpointed weights get no gradient and never move",
        metric="distance the encoder's and the head's weights moved",
        bad=Program("TL203/bad_checkpoint.py"),
        good=Program("TL203/good_checkpoint.py"),
        check=_encoder_never_trains,
        chart=("param_delta",),
    ),
    Claim(
        code="TL203",
        claim="a checkpoint around each layer keeps more live memory after the forward than one around the stack",
        metric="bytes saved for backward after the forward",
        bad=Program("TL203/bad_per_layer.py", "run_per_layer"),
        good=Program("TL203/good_checkpoint.py", "run_per_layer"),
        check=_per_layer_keeps_more,
        chart=("live_bytes",),
    ),
]
