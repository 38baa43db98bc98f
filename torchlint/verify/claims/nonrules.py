"""Guide claims the measurements refute, kept as documented non-rules (no lint rule exists).

For these, "bad" is the code the guide warns against and "good" the guide's recommendation;
``confirmed`` means the refutation holds: the guide is wrong on this torch version.
"""

from torchlint.verify.claims import Claim, Measured, Outcome, human_bytes, nonrule_program, per_step_bytes

FILE_NR1 = "nr1_del_outputs.py"
FILE_NR2 = "nr2_transpose_contiguous.py"
MIN_SLOWDOWN = 1.3  # measured 2.6-13x while planning; 1.3x leaves room for a loaded machine


def _del_outputs_is_harmless(bad: Measured, good: Measured) -> Outcome:
    good.expect_clean()
    bad.expect_ran()
    failure = next((e for e in bad.exceptions if e), None)
    if failure:  # the guide would be right
        return Outcome(False, f"{failure['type']}: {failure['message'][:60]}", "ok", "del outputs raised")
    bad_grads, good_grads = bad.figure("grad_sum"), good.figure("grad_sum")
    same = bad_grads == good_grads and bool(bad_grads)
    return Outcome(
        same, f"no error, grad sums {bad_grads[-1]:.6g}", f"grad sums {good_grads[-1]:.6g}",
        f"gradient sums per step identical: {same} ({len(bad_grads)} steps)",
    )


def _contiguous_first_is_slower(bad: Measured, good: Measured) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    bad_time, good_time = bad.time_per_step(), good.time_per_step()
    bad_alloc, good_alloc = bad.slope("allocated_bytes"), good.slope("allocated_bytes")
    ratio = good_time / bad_time if bad_time > 0 else float("inf")
    holds = ratio >= MIN_SLOWDOWN and good_alloc >= 2 * bad_alloc > 0
    return Outcome(
        holds, f"{bad_time * 1e3:.2f} ms/step, {per_step_bytes(bad_alloc)} allocated",
        f"{good_time * 1e3:.2f} ms/step ({ratio:.1f}x), {per_step_bytes(good_alloc)} allocated",
        f".contiguous() first: {ratio:.2f}x the CPU time per step (need >= {MIN_SLOWDOWN}) and "
        f"{good_alloc / bad_alloc if bad_alloc else 0:.1f}x the bytes allocated per step (need >= 2)",
    )


CLAIMS = [
    Claim(
        code="NR1",
        guide="`del outputs  # ERROR: outputs needed for loss.backward()`",
        guide_source="000_97185e908d0060fb.txt › Common Mistakes › Mistake 1: Deleting Before Backward",
        claim="non-rule: `del outputs` before `backward()` raises no error and leaves gradients identical",
        metric="exception, gradient sums",
        bad=nonrule_program(FILE_NR1, "run_del_outputs"),
        good=nonrule_program(FILE_NR1, "run_keep_outputs"),
        check=_del_outputs_is_harmless,
        chart=("outcome", "grad_sum"),
    ),
    Claim(
        code="NR2",
        guide="Non-contiguous tensors slow down operations … If doing many operations on a tensor, call `.contiguous()` once upfront.",
        guide_source="004_3c78811699fbbc00.txt › 2. Contiguous Tensors",
        claim="non-rule: `x.t() + 1` is faster than `x.t().contiguous() + 1`, which copies first",
        metric="CPU time per step, bytes allocated per step",
        bad=nonrule_program(FILE_NR2, "run_transposed"),
        good=nonrule_program(FILE_NR2, "run_contiguous_first"),
        check=_contiguous_first_is_slower,
        chart=("time_per_step", "allocated_bytes"),
        timing=3,
        timing_steps=(8,),  # 21 single-step samples whatever --steps is
    ),
]


# ------------------------------------------------------------------------------ NR3 - NR8
FILE_NR3 = "nr3_inplace_intermediate.py"
FILE_NR4 = "nr4_checkpoint_each_layer.py"
FILE_NR5 = "nr5_broadcast_add.py"
FILE_NR6 = "nr6_missing_zero_grad.py"
FILE_NR7 = "nr7_pruning.py"
FILE_NR8 = "nr8_del_parameter.py"
MIN_CHECKPOINT_EXCESS = 1.2  # per-layer checkpoints' saved bytes over none's (measured 2.5x)
MIN_PRUNED_RATIO = 2.5  # pruned module bytes over dense (measured 3.0x)


def _inplace_intermediate_runs(bad: Measured, good: Measured) -> Outcome:
    good.expect_clean()
    bad.expect_ran()
    failure = next((e for e in bad.exceptions if e), None)
    if failure:  # the guide would be right
        return Outcome(False, f"{failure['type']}: {failure['message'][:60]}", "ok", "y.add_(1) raised")
    bad_grads, good_grads = bad.figure_values("grad_sum"), good.figure_values("grad_sum")
    same = bool(bad_grads) and bad_grads == good_grads
    return Outcome(
        same, f"no error, grad sum {bad_grads[-1]:g}" if bad_grads else "no error", f"grad sum {good_grads[-1]:g}" if good_grads else "",
        f"`y.add_(1)` raised nothing; gradient sums identical to `y = y + 1` at every step: {same}",
    )


def _per_layer_checkpoint_keeps_more(bad: Measured, good: Measured) -> Outcome:
    from torchlint.verify.claims.tl203 import saved_activation_bytes

    bad.expect_clean()
    good.expect_clean()
    none, per_layer = saved_activation_bytes(bad), saved_activation_bytes(good)
    ratios = [p / n if n > 0 else float("inf") for p, n in zip(per_layer, none)]
    live = good.last("live_bytes") / bad.last("live_bytes") if bad.last("live_bytes") else float("inf")
    return Outcome(
        min(ratios) >= MIN_CHECKPOINT_EXCESS, f"{human_bytes(none[-1])} saved for backward",
        f"{human_bytes(per_layer[-1])} saved ({ratios[-1]:.2f}x), live {live - 1:+.0%}",
        f"bytes saved for backward after the forward: no checkpoint {none}, one checkpoint per layer {per_layer}; "
        f"ratio {', '.join(f'{r:.2f}' for r in ratios)} (need >= {MIN_CHECKPOINT_EXCESS} at every step count); "
        f"all live bytes {live:.2f}x",
    )


def _broadcast_allocates_only_the_output(bad: Measured, good: Measured) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    output = bad.figure("output_bytes")
    bad_bytes, good_bytes = bad.slope("allocated_bytes"), good.slope("allocated_bytes")
    bad_allocs, good_allocs = bad.slope("allocations"), good.slope("allocations")
    holds = bad_bytes == good_bytes == output and bad_allocs == good_allocs == 1
    return Outcome(
        holds, f"{bad_allocs:g} allocation of {human_bytes(bad_bytes)}/step",
        f"{good_allocs:g} allocation of {human_bytes(good_bytes)}/step",
        f"`x + y` allocates {bad_bytes:g} B in {bad_allocs:g} allocation(s) per step, `x.add(y)` {good_bytes:g} B in "
        f"{good_allocs:g}; the output is {output} B (need all equal, one allocation per step)",
    )


def _memory_flat_without_zero_grad(bad: Measured, good: Measured) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    bad_live, good_live = bad.slope("live_bytes"), good.slope("live_bytes")
    bad_peak, good_peak = bad.series("peak_bytes"), good.series("peak_bytes")
    holds = bad_live == 0 and len(set(bad_peak)) == 1 and bad.last("live_bytes") == good.last("live_bytes")
    return Outcome(
        holds, f"{per_step_bytes(bad_live)}, peak {human_bytes(bad_peak[-1])} at every step count",
        f"{per_step_bytes(good_live)}, peak {human_bytes(good_peak[-1])}",
        f"without zero_grad: live bytes slope {bad_live:g} (need 0), peaks {bad_peak} (need all equal), final live "
        f"bytes equal to the clearing loop's: {bad.last('live_bytes') == good.last('live_bytes')}; the peak is "
        f"{bad_peak[-1] - good_peak[-1]:g} B above the clearing loop's at every step count (the gradients stay "
        f"allocated through the forward pass instead of being set to None), a constant, not growth",
    )


def _pruning_is_larger(bad: Measured, good: Measured) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    dense, pruned, removed = bad.figure("module_bytes"), good.figure("module_bytes"), good.figure("removed_bytes")
    if not (dense and pruned and removed):
        return Outcome(False, "", "", "the programs must record module_bytes (and removed_bytes)")
    live_ratio = good.last("live_bytes") / bad.last("live_bytes") if bad.last("live_bytes") else float("inf")
    holds = pruned >= MIN_PRUNED_RATIO * dense and removed == dense and live_ratio >= MIN_PRUNED_RATIO
    return Outcome(
        holds, f"dense {human_bytes(dense)}", f"pruned {human_bytes(pruned)} ({pruned / dense:.1f}x), "
        f"after prune.remove {human_bytes(removed)}",
        f"module tensors: dense {dense} B, pruned {pruned} B (need >= {MIN_PRUNED_RATIO}x dense), after "
        f"prune.remove {removed} B (need = dense); live bytes of the returned module {live_ratio:.2f}x dense's",
    )


def _cleanup_frees_nothing(bad: Measured, good: Measured) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    bad_peak, good_peak = bad.series("peak_bytes"), good.series("peak_bytes")
    tensor = bad.last("largest_allocation_bytes")
    holds = bad_peak == good_peak and tensor > 0 and good_peak[-1] >= 2 * tensor
    return Outcome(
        holds, f"peak {human_bytes(bad_peak[-1])}", f"peak {human_bytes(good_peak[-1])} "
        f"({good_peak[-1] / tensor:.0f} tensors)" if tensor else "",
        f"peak bytes without the cleanup {bad_peak}, with it {good_peak} (need identical, and at least two "
        f"{tensor} B tensors: the cleaned-up one was still alive when the next was made)",
    )


CLAIMS += [
    Claim(
        code="NR3",
        guide="`y = x * 2` / `y.add_(1)  # RuntimeError!` … \"Cannot modify intermediate tensor in-place\"",
        guide_source="002_0980e50726dfac2c.txt › Autograd Restrictions",
        claim="non-rule: `y = x * 2; y.add_(1)` raises no error and gives the gradients of `y = y + 1`",
        metric="exception, gradient sums",
        bad=nonrule_program(FILE_NR3, "run_inplace"),
        good=nonrule_program(FILE_NR3, "run_out_of_place"),
        check=_inplace_intermediate_runs,
        chart=("outcome", "grad_sum"),
    ),
    Claim(
        code="NR4",
        guide="`# With checkpoint: saves only layer inputs (~1x memory)`, with one `checkpoint(...)` per layer (`# Without checkpoint: saves all activations (~3x memory)`)",
        guide_source="001_254e4583fb5b4578.txt › Gradient Checkpointing › Basic Gradient Checkpointing; Memory Savings Example",
        claim="non-rule: a checkpoint around each layer keeps more memory for backward than no checkpointing at all",
        metric="bytes saved for backward after the forward",
        bad=nonrule_program(FILE_NR4, "run_no_checkpoint"),
        good=nonrule_program(FILE_NR4, "run_checkpoint_each_layer"),
        check=_per_layer_checkpoint_keeps_more,
        chart=("live_bytes",),
    ),
    Claim(
        code="NR5",
        guide="`result = x + y  # y broadcasts to (1000, 1000, 100) temporarily` (\"MEMORY INEFFICIENT: Broadcasting creates full tensor\"); `x.add(y)` is \"MORE EFFICIENT\"",
        guide_source="004_3c78811699fbbc00.txt › 4. Broadcasting Awareness",
        claim="non-rule: `x + y` with a broadcast `y` allocates only the output, exactly as `x.add(y)`",
        metric="allocations and bytes allocated per step",
        bad=nonrule_program(FILE_NR5, "run_operator"),
        good=nonrule_program(FILE_NR5, "run_add_method"),
        check=_broadcast_allocates_only_the_output,
        chart=("allocations_per_step",),
    ),
    Claim(
        code="NR6",
        guide="Each `.backward()` call adds to existing gradients. Without clearing, memory grows unbounded.",
        guide_source="004_3c78811699fbbc00.txt › 2. Check Gradient Accumulation",
        claim="non-rule: without `zero_grad()` memory stays flat (the gradients are wrong instead: TL501)",
        metric="live bytes per step, peak bytes",
        bad=nonrule_program(FILE_NR6, "run_without_zero_grad"),
        good=nonrule_program(FILE_NR6, "run_with_zero_grad"),
        check=_memory_flat_without_zero_grad,
        chart=("live_bytes", "peak_bytes"),
    ),
    Claim(
        code="NR7",
        guide='"Model Pruning for Memory": `prune.ln_structured(model, name="weight", amount=0.3, n=2, dim=0)`, then `prune.remove(model, "weight")`',
        guide_source="001_254e4583fb5b4578.txt › Model Pruning for Memory › Weight Pruning",
        claim="non-rule: pruning saves no memory: a pruned module holds 3x the dense bytes, the dense size after `prune.remove`",
        metric="bytes of the module's tensors",
        bad=nonrule_program(FILE_NR7, "run_dense"),
        good=nonrule_program(FILE_NR7, "run_pruned"),
        check=_pruning_is_larger,
        chart=("live_bytes",),
    ),
    Claim(
        code="NR8",
        guide="`typical_cleanup(tensor)`: `# 2. Delete reference` / `del tensor` / `# That's it! PyTorch cache will handle the rest` (\"sufficient for 99% of cases\")",
        guide_source="000_97185e908d0060fb.txt › Tensor Clearing Checklist",
        claim="non-rule: `del` of a function's own parameter frees nothing the caller still holds",
        metric="peak bytes",
        bad=nonrule_program(FILE_NR8, "run_without_cleanup"),
        good=nonrule_program(FILE_NR8, "run_with_cleanup"),
        check=_cleanup_frees_nothing,
        chart=("peak_bytes",),
    ),
]
