"""Run the claims: probe every program a claim needs (each once), then apply each claim's check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torchlint.verify.claims import (
    CONFIRMED, ERROR, NEEDS_CUDA, REFUTED, Claim, FixtureFailed, Measured, Program,
)
from torchlint.verify.runner import ProbeRequest, run_probes


def step_counts_for(steps: int) -> tuple[int, ...]:
    """Three step counts ending at ``steps`` (two when steps < 4): growth is a slope, not a number."""
    return tuple(sorted({max(1, steps // 4), max(1, steps // 2), steps}))


def _request(program: Program, claim: Claim, fixtures_dir: Path, device: str, steps: int) -> ProbeRequest:
    return ProbeRequest(str(program.resolve(fixtures_dir)), program.function,
                        claim.step_counts or step_counts_for(steps), device, claim.timing, claim.timing_steps)


def verify(claims: list[Claim], device: str, steps: int, fixtures_dir: Path, torch_version: str,
           jobs: int | None = None) -> list[dict[str, Any]]:
    """One record per claim (see ``record``), in the order given. ``device`` is "cpu" or "cuda"."""
    plans: list[tuple[Claim, ProbeRequest | None, ProbeRequest | None, str]] = []
    for claim in claims:
        if claim.needs_cuda and not device.startswith("cuda"):
            plans.append((claim, None, None, "needs a GPU; none used"))
            continue
        paths = [program.resolve(fixtures_dir) for program in (claim.bad, claim.good)]
        missing = [str(path) for path in paths if not path.is_file()]
        if missing:
            plans.append((claim, None, None, "missing fixture: " + ", ".join(missing)))
            continue
        plans.append((claim, _request(claim.bad, claim, fixtures_dir, device, steps),
                      _request(claim.good, claim, fixtures_dir, device, steps), ""))
    # Merge identical requests (claims often share a good program); timed requests cover untimed.
    unique: dict[tuple, ProbeRequest] = {}
    for _, *requests, _ in plans:
        for request in requests:
            if request is not None:
                key = (request.path, request.function, request.step_counts, request.device)
                if key not in unique or request.timing > unique[key].timing:
                    unique[key] = request
    keys = list(unique)
    results = dict(zip(keys, run_probes([unique[key] for key in keys], jobs)))

    def measured(request: ProbeRequest) -> Measured:
        return Measured(results[(request.path, request.function, request.step_counts, request.device)])

    records = []
    for claim, bad_request, good_request, reason in plans:
        if bad_request is None or good_request is None:
            verdict = NEEDS_CUDA if claim.needs_cuda and not reason.startswith("missing") else ERROR
            records.append(record(claim, device, torch_version, verdict, reason, None, None, "", ""))
            continue
        bad, good = measured(bad_request), measured(good_request)
        check = claim.cuda_check if device.startswith("cuda") and claim.cuda_check else claim.check
        try:
            outcome = check(bad, good)
        except FixtureFailed as failure:
            records.append(record(claim, device, torch_version, ERROR, str(failure), bad, good, "", ""))
            continue
        verdict = CONFIRMED if outcome.holds else REFUTED
        records.append(record(claim, device, torch_version, verdict, outcome.detail, bad, good,
                              outcome.bad, outcome.good))
    return records


def record(claim: Claim, device: str, torch_version: str, verdict: str, detail: str, bad: Measured | None,
           good: Measured | None, bad_summary: str, good_summary: str) -> dict[str, Any]:
    return {
        "code": claim.code,
        "claim": claim.claim,
        "metric": claim.metric,
        "device": device,
        "torch_version": torch_version,
        "verdict": verdict,
        "detail": detail,
        "chart": list(claim.chart),
        "bad": figures(claim.bad, bad, bad_summary),
        "good": figures(claim.good, good, good_summary),
    }


def figures(program: Program, measured: Measured | None, summary: str) -> dict[str, Any]:
    path = Path(program.path)
    shown = f"{path.parent.name}/{path.name}" if path.is_absolute() else program.path
    out: dict[str, Any] = {"fixture": shown, "function": program.function, "summary": summary}
    if measured is None:
        return out
    out["error"] = measured.error
    for key in ("steps", "live_bytes", "peak_bytes", "allocations", "allocated_bytes", "graph_nodes"):
        out[key] = measured.steps if key == "steps" else measured.series(key)
    optional = ("segments_allocated", "reserved_bytes", "largest_allocation_bytes", "largest_allocation_count")
    for key in optional:
        if measured.runs and key in measured.runs[-1]:
            out[key] = measured.series(key)
    out["exception"] = next((e for e in reversed(measured.exceptions) if e), None)
    out["exceptions"] = measured.exceptions  # per run: the step it happened at follows from these
    out["figures"] = measured.runs[-1].get("figures", {}) if measured.runs else {}
    out["run_figures"] = [run.get("figures", {}) for run in measured.runs]
    curve = measured.runs[-1].get("per_step") if measured.runs else None
    out["live_bytes_per_step"] = [point["live_bytes"] for point in curve] if curve else None
    if measured.timing:
        out["time_per_step_s"] = measured.time_per_step("cpu_s")
        out["wall_time_per_step_s"] = measured.time_per_step("wall_s")
        out["timed_steps"] = [run["steps"] for run in measured.timing]
        out["cpu_s"] = [run["cpu_s"] for run in measured.timing]
        out["step_cpu_s"] = [value for run in measured.timing for value in run.get("step_cpu_s", [])]
        out["step_wall_s"] = [value for run in measured.timing for value in run.get("step_wall_s", [])]
        out["gc_collect_cpu_s"] = measured.result.get("gc_collect_cpu_s")
    else:
        out["time_per_step_s"] = None
    return out
