"""What each ``--plot`` chart shows: the claim's own metric, as plain data (no matplotlib here).

A claim names its chart panels (``Claim.chart``, copied into every record as ``"chart"``); this
module turns a verifier record into ``Panel`` objects holding the exact series to draw, and
``plot.py`` only draws them. Tests check the data here, not pixels.

Panel kinds (the ``metric`` of a panel):

- ``live_bytes`` / ``graph_nodes``: tensor bytes / autograd nodes still kept after ``run(n)``
  (the figures the growth checks take their slopes of), over the step counts ``n``.
- ``allocations_per_step``: new allocations per step between consecutive step counts.
- ``peak_bytes``: peak tensor bytes during ``run(n)``, as grouped bars.
- ``buffer_allocations``: how many storages of the largest buffer size ``run(n)`` allocated
  (CPU); on CUDA, which reports no sizes, all allocations.
- ``time_per_step`` / ``wall_time_per_step``: every timed step's CPU (wall) time, with the
  fastest step, the figure the check uses, as a bar.
- ``segments``: CUDA driver segments allocated during ``run(n)``.
- ``allocated_bytes``: bytes allocated in all during ``run(n)``.
- ``grad_norm``, ``grad_sum_error``, ``grad_sum``: figures the fixture records once per step.
- ``param_delta``: how far the parameters moved, per step when recorded per step, else per run.
- ``applied_vs_sum`` / ``applied_vs_last``: at each accumulated step, how far the applied gradient
  is from the sum of the window's micro-batch gradients, and from the last micro-batch's alone.
- ``training_flag``, ``bn_mean_change``, ``output_diff``, ``item_drift``, ``array_drift``,
  ``grad_error``: figures the fixture records once per step (or epoch, or call) for the claims
  that are about behaviour, not memory: the model's mode flag at each training step, how far
  batch norm's running mean moved, how far two identical inference calls differ, how far a
  dataset's stored item drifted from its original value, how far a gradient is from the
  correct one.
- ``first_update``, ``snapshot_drift``, ``reset_error``, ``grad_is_none``, ``finite_params``: figures recorded per
  step or per run, drawn the same way as ``param_delta``.
- ``outcome``: whether each ``run(n)`` completed or raised, the exception, and the step it
  happened at.
- ``text``: no measurement to draw (``needs-cuda``, or an error before measuring).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KIB, MIB = 1024, 1024 * 1024
SIDES = ("bad", "good")
VERDICT_COLORS = {"confirmed": "tab:green", "refuted": "tab:red", "needs-cuda": "tab:gray", "error": "tab:orange"}


@dataclass
class Series:
    side: str  # "bad" or "good"
    label: str
    x: list[float]
    y: list[float]
    value: float | None = None  # one summary figure drawn as a bar (the fastest step of a time panel)


@dataclass
class Panel:
    metric: str
    kind: str  # "line", "bars", "strip", "outcome" or "text"
    title: str
    xlabel: str = ""
    ylabel: str = ""
    series: list[Series] = field(default_factory=list)
    note: str = ""  # drawn inside the panel: the exception and where it happened, a missing figure


@dataclass
class Chart:
    code: str
    verdict: str
    title: str  # the claim
    subtitle: str  # the bad and good summaries the check produced
    panels: list[Panel]


def chart(record: dict[str, Any]) -> Chart:
    """The panels of one claim's chart, from a verifier record (``verifier.record``)."""
    subtitle = "   ".join(f"{side}: {record[side].get('summary')}" for side in SIDES if record[side].get("summary"))
    title = f"{record['code']} {record['verdict'].upper()}: {record['claim']}"
    if record["verdict"] == "needs-cuda" or any("steps" not in record[side] for side in SIDES):
        reason = record.get("detail") or record["verdict"]
        text = (f"needs-cuda: this claim can only be measured on a GPU. This run used {record['device']}, "
                f"so nothing was measured: run `torchlint verify {record['code']} --device cuda` on a machine "
                "with CUDA."
                if record["verdict"] == "needs-cuda" else f"{record['verdict']}: {reason}")
        panel = Panel("text", "text", "not measured", note=text)
        return Chart(record["code"], record["verdict"], title, subtitle, [panel])
    panels = [_BUILDERS[metric](record) for metric in record.get("chart") or ("live_bytes",)]
    return Chart(record["code"], record["verdict"], title, subtitle, panels)


# ------------------------------------------------------------------------------ helpers
def _label(record: dict[str, Any], side: str) -> str:
    return f"{side}: {Path(record[side]['fixture']).name}"


def byte_unit(values: list[float]) -> tuple[str, int]:
    """KiB, or MiB when the largest value is 2 MiB or more."""
    largest = max((abs(value) for value in values), default=0)
    return ("MiB", MIB) if largest >= 2 * MIB else ("KiB", KIB)


def _run_series(record: dict[str, Any], key: str, scale: float = 1) -> list[Series]:
    series = []
    for side in SIDES:
        figures = record[side]
        values = figures.get(key)
        if values:
            series.append(Series(side, _label(record, side), list(figures["steps"]), [v / scale for v in values]))
    return series


def _byte_panel(record: dict[str, Any], key: str, metric: str, kind: str, title: str, ylabel: str) -> Panel:
    unit, scale = byte_unit([v for side in SIDES for v in record[side].get(key) or []])
    return Panel(metric, kind, title, "steps run (n)", f"{ylabel} ({unit})", _run_series(record, key, scale))


def _per_step_figure(record: dict[str, Any], side: str, name: str) -> list[float] | None:
    """A figure the fixture recorded once per step, from the longest run."""
    value = (record[side].get("figures") or {}).get(name)
    if isinstance(value, (int, float)):
        value = [value]
    return list(value) if isinstance(value, list) else None


def _per_step_panel(record: dict[str, Any], name: str, title: str, ylabel: str) -> Panel:
    series, missing = [], []
    for side in SIDES:
        values = _per_step_figure(record, side, name)
        if values is None:
            missing.append(side)
            continue
        series.append(Series(side, _label(record, side), list(range(1, len(values) + 1)), values))
    note = f"not recorded by {' and '.join(missing)}" if missing else ""
    return Panel(name, "line", title, "step", ylabel, series, note)


# ------------------------------------------------------------------------------ panels
def live_bytes(record: dict[str, Any]) -> Panel:
    return _byte_panel(record, "live_bytes", "live_bytes", "line", "tensor memory kept after n steps",
                       "live tensor bytes")


def graph_nodes(record: dict[str, Any]) -> Panel:
    return Panel("graph_nodes", "line", "autograd graph nodes kept after n steps", "steps run (n)",
                 "graph nodes reachable from what the loop kept", _run_series(record, "graph_nodes"))


def allocations_per_step(record: dict[str, Any]) -> Panel:
    series = []
    for side in SIDES:
        steps, counts = record[side]["steps"], record[side]["allocations"]
        increments = [(counts[i + 1] - counts[i]) / (steps[i + 1] - steps[i]) for i in range(len(steps) - 1)]
        series.append(Series(side, _label(record, side), list(steps[1:]), increments))
    return Panel("allocations_per_step", "line", "new tensor allocations per step",
                 "steps run (n), slope from the previous n", "allocations per step", series)


def peak_bytes(record: dict[str, Any]) -> Panel:
    return _byte_panel(record, "peak_bytes", "peak_bytes", "bars", "peak tensor memory during run(n)",
                       "peak tensor bytes")


def buffer_allocations(record: dict[str, Any]) -> Panel:
    if all(record[side].get("largest_allocation_count") for side in SIDES):
        size = record["bad"]["largest_allocation_bytes"][-1]
        unit, scale = byte_unit([size])
        return Panel("buffer_allocations", "line", f"allocations of the {size / scale:.1f} {unit} buffer",
                     "steps run (n)", "buffers allocated in run(n)", _run_series(record, "largest_allocation_count"))
    return Panel("buffer_allocations", "line", "allocations during run(n) (all sizes; CUDA reports no sizes)",
                 "steps run (n)", "allocations", _run_series(record, "allocations"))


def _time_panel(record: dict[str, Any], clock: str) -> Panel:
    samples_key, value_key = ("step_cpu_s", "time_per_step_s") if clock == "cpu" else (
        "step_wall_s", "wall_time_per_step_s")
    series = []
    for side in SIDES:
        figures = record[side]
        samples = [value * 1e3 for value in figures.get(samples_key) or []]
        value = figures.get(value_key)
        series.append(Series(side, _label(record, side), list(range(1, len(samples) + 1)), samples,
                             None if value is None else value * 1e3))
    note = ""
    collection = record["bad"].get("gc_collect_cpu_s")
    if record["code"] == "TL402" and collection:
        note = f"one full gc.collect() of the fixture's objects: {collection * 1e3:.2f} ms"
    metric = "time_per_step" if clock == "cpu" else "wall_time_per_step"
    return Panel(metric, "strip", f"{clock.upper() if clock == 'cpu' else 'wall'} time of every timed step "
                 "(bar: the fastest, which the check uses)", "", "ms per step", series, note)


def time_per_step(record: dict[str, Any]) -> Panel:
    return _time_panel(record, "cpu")


def wall_time_per_step(record: dict[str, Any]) -> Panel:
    return _time_panel(record, "wall")


def segments(record: dict[str, Any]) -> Panel:
    return Panel("segments", "line", "CUDA segments allocated from the driver during run(n)", "steps run (n)",
                 "segments", _run_series(record, "segments_allocated"))


def allocated_bytes(record: dict[str, Any]) -> Panel:
    return _byte_panel(record, "allocated_bytes", "allocated_bytes", "line", "bytes allocated during run(n)",
                       "allocated in all")


def grad_norm(record: dict[str, Any]) -> Panel:
    return _per_step_panel(record, "grad_norm", "gradient norm applied at each step", "‖grad‖ (L2)")


def grad_sum_error(record: dict[str, Any]) -> Panel:
    panel = _per_step_panel(record, "grad_sum_error", "applied gradient vs. the sum of every step's own gradient",
                            "relative distance (0 = exactly the sum)")
    return panel


def grad_sum(record: dict[str, Any]) -> Panel:
    panel = _per_step_panel(record, "grad_sum", "sum of the gradients after each step", "sum of all gradients")
    bad, good = (_per_step_figure(record, side, "grad_sum") for side in SIDES)
    if bad is not None and bad == good:
        panel.note = "bad and good identical at every step"
    return panel


def applied_vs_sum(record: dict[str, Any]) -> Panel:
    return _per_step_panel(record, "applied_vs_sum", "applied gradient vs. the sum of the window's micro-batches",
                           "relative distance (0 = the whole window)")


def applied_vs_last(record: dict[str, Any]) -> Panel:
    return _per_step_panel(record, "applied_vs_last", "applied gradient vs. the last micro-batch's alone",
                           "relative distance (0 = the last micro-batch only)")


def param_delta(record: dict[str, Any]) -> Panel:
    series = []
    for side in SIDES:
        figures = record[side]
        last = (figures.get("figures") or {}).get("param_delta")
        if isinstance(last, list):  # recorded every step
            series.append(Series(side, _label(record, side), list(range(1, len(last) + 1)), list(last)))
            continue
        runs = figures.get("run_figures") or []
        points = [(steps, run.get("param_delta")) for steps, run in zip(figures["steps"], runs)]
        points = [(steps, value) for steps, value in points if isinstance(value, (int, float))]
        if points:
            series.append(Series(side, _label(record, side), [p[0] for p in points], [p[1] for p in points]))
    note = "" if series else "no param_delta recorded"
    return Panel("param_delta", "line", "how far training moved the parameters", "steps run",
                 "‖θ − θ₀‖ (L2)", series, note)


def training_flag(record: dict[str, Any]) -> Panel:
    return _per_step_panel(record, "training_flag", "the model's mode at each training step",
                           "model.training (1 = training mode)")


def bn_mean_change(record: dict[str, Any]) -> Panel:
    return _per_step_panel(record, "bn_mean_change", "how far batch norm's running mean moved",
                           "max |change| of running_mean")


def output_diff(record: dict[str, Any]) -> Panel:
    return _per_step_panel(record, "output_diff", "two identical inference calls: difference of the outputs",
                           "max |output 1 - output 2|")


def item_drift(record: dict[str, Any]) -> Panel:
    return _per_step_panel(record, "item_drift", "stored tensor item 0 vs. its original value, per epoch",
                           "max |item - original|")


def array_drift(record: dict[str, Any]) -> Panel:
    return _per_step_panel(record, "array_drift", "stored NumPy row 0 vs. its original value, per epoch",
                           "max |row - original|")


def grad_error(record: dict[str, Any]) -> Panel:
    return _per_step_panel(record, "grad_error", "gradient from backward() vs. the correct gradient",
                           "max |grad - correct grad|")


def _figure_panel(record: dict[str, Any], name: str, title: str, ylabel: str) -> Panel:
    """A figure recorded every step (drawn against the step) or once per run (against n)."""
    series = []
    for side in SIDES:
        figures = record[side]
        last = (figures.get("figures") or {}).get(name)
        if isinstance(last, list):
            series.append(Series(side, _label(record, side), list(range(1, len(last) + 1)), list(last)))
            continue
        runs = figures.get("run_figures") or []
        points = [(steps, run.get(name)) for steps, run in zip(figures["steps"], runs)]
        points = [(steps, value) for steps, value in points if isinstance(value, (int, float))]
        if points:
            series.append(Series(side, _label(record, side), [p[0] for p in points], [p[1] for p in points]))
    return Panel(name, "line", title, "steps run", ylabel, series, "" if series else f"no {name} recorded")


def first_update(record: dict[str, Any]) -> Panel:
    return _figure_panel(record, "first_update", "how far the first optimizer step moved the parameters",
                         "‖θ₁ − θ₀‖ (L2)")


def snapshot_drift(record: dict[str, Any]) -> Panel:
    return _figure_panel(record, "snapshot_drift", "how far a state-dict snapshot moved after it was taken",
                         "largest change (0 = as taken)")


def reset_error(record: dict[str, Any]) -> Panel:
    return _figure_panel(record, "reset_error", "distance from the initial weights after the reset",
                         "‖θ − θ₀‖ (L2, 0 = reset)")


def finite_params(record: dict[str, Any]) -> Panel:
    return _figure_panel(record, "finite_params", "are all weights finite after each step?",
                         "1 = finite, 0 = inf/NaN")


def grad_is_none(record: dict[str, Any]) -> Panel:
    return _figure_panel(record, "grad_is_none", "is the tensor's .grad None after backward()?",
                         "1 = None, 0 = a gradient")


def raise_step(steps: list[int], raised: list[bool]) -> str:
    """Where the first exception happened, from which step counts completed and which raised."""
    if True not in raised:
        return ""
    first = raised.index(True)
    if first == 0:
        return "at step 1" if steps[0] == 1 else f"within the first {steps[0]} steps"
    before = steps[first - 1]
    if raised[first - 1]:
        return f"by step {steps[first]}"
    return f"at step {steps[first]}" if steps[first] == before + 1 else f"between steps {before + 1} and {steps[first]}"


def outcome(record: dict[str, Any]) -> Panel:
    series, notes = [], []
    for side in SIDES:
        figures = record[side]
        steps = list(figures["steps"])
        exceptions = figures.get("exceptions") or [None] * len(steps)
        raised = [exception is not None for exception in exceptions]
        series.append(Series(side, _label(record, side), steps, [float(flag) for flag in raised]))
        if any(raised):
            exception = next(exception for exception in exceptions if exception)
            message = (exception.get("message") or "").splitlines()[0] if exception.get("message") else ""
            where = f", line {exception['line']}: {exception['code']}" if exception.get("line") else ""
            wrapped = textwrap.wrap(message, 84, max_lines=2, placeholder=" …")
            notes.append(f"{side}: {exception['type']} {raise_step(steps, raised)}{where}\n"
                         + "\n".join("  " + line for line in wrapped))
        else:
            notes.append(f"{side}: every run completed")
    return Panel("outcome", "outcome", "did run(n) complete or raise?", "steps run (n)", "", series,
                 "\n".join(notes))


_BUILDERS = {
    "live_bytes": live_bytes,
    "graph_nodes": graph_nodes,
    "allocations_per_step": allocations_per_step,
    "peak_bytes": peak_bytes,
    "buffer_allocations": buffer_allocations,
    "time_per_step": time_per_step,
    "wall_time_per_step": wall_time_per_step,
    "segments": segments,
    "allocated_bytes": allocated_bytes,
    "grad_norm": grad_norm,
    "grad_sum_error": grad_sum_error,
    "grad_sum": grad_sum,
    "param_delta": param_delta,
    "applied_vs_sum": applied_vs_sum,
    "applied_vs_last": applied_vs_last,
    "training_flag": training_flag,
    "bn_mean_change": bn_mean_change,
    "output_diff": output_diff,
    "item_drift": item_drift,
    "array_drift": array_drift,
    "grad_error": grad_error,
    "outcome": outcome,
    "first_update": first_update,
    "snapshot_drift": snapshot_drift,
    "reset_error": reset_error,
    "grad_is_none": grad_is_none,
    "finite_params": finite_params,
}
PANEL_KINDS = frozenset(_BUILDERS)
