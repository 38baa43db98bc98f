"""`torchlint verify --plot`: every chart draws its claim's own metric (the data handed to the
drawing code is checked, not pixels), with bad and good told apart, and a PNG per rule."""

from __future__ import annotations

import pytest
from optional_deps import require

from torchlint.verify.charts import KIB, MIB, PANEL_KINDS, chart, raise_step
from torchlint.verify.claims import all_claims

# The claim's metric, as the first panel of its chart: what a reader must see in two seconds.
FIRST_PANEL = {
    # without backward: bytes; after backward: graph nodes; a number returned from the list: the peak
    "TL101": {"live_bytes", "graph_nodes", "peak_bytes"},
    "TL102": {"live_bytes", "graph_nodes"},
    "TL103": {"outcome", "live_bytes"},  # the second backward raises; retain_graph: memory grows
    "TL201": {"peak_bytes"},
    "TL202": {"training_flag"},
    "TL204": {"output_diff"},
    "TL304": {"item_drift"},
    "TL305": {"grad_error"},
    "TL301": {"outcome"},
    "TL302": {"outcome"},
    "TL401": {"wall_time_per_step"},
    "TL402": {"time_per_step"},
    "TL403": {"buffer_allocations"},
    "TL501": {"grad_norm"},
    "TL502": {"param_delta", "applied_vs_last"},
    "TL303": {"grad_is_none", "outcome"},  # .grad stays None; the optimizer raises
    "TL503": {"param_delta", "first_update", "finite_params", "outcome"},
    "TL504": {"snapshot_drift", "reset_error"},
    "NR1": {"outcome"},
    "NR2": {"time_per_step"},
    "TL104": {"live_bytes"},
    "TL203": {"param_delta", "live_bytes"},
    "TL404": {"buffer_allocations", "allocations_per_step"},
    "NR3": {"outcome"},
    "NR4": {"live_bytes"},
    "NR5": {"allocations_per_step"},
    "NR6": {"live_bytes"},
    "NR7": {"live_bytes"},
    "NR8": {"peak_bytes"},
}
RAISES_AT = {"TL103": 2, "TL301": 1, "TL302": 1}  # the step the bad program's exception happens at


def test_every_claim_names_panels_that_exist():
    for claim in all_claims():
        assert claim.chart and set(claim.chart) <= PANEL_KINDS, (claim.code, claim.chart)
        assert claim.chart[0] in FIRST_PANEL[claim.code], (claim.code, claim.claim, claim.chart)
        if "live bytes" not in claim.metric and "memory" not in claim.claim:
            assert "live_bytes" not in claim.chart, f"{claim.code}: live memory is not what {claim.claim!r} is about"


def test_graph_claims_after_backward_plot_graph_nodes():
    after_backward = [claim for claim in all_claims()
                      if claim.code in ("TL101", "TL102") and "after backward" in claim.claim]
    assert len(after_backward) == 2 and all(claim.chart[0] == "graph_nodes" for claim in after_backward)


@pytest.mark.parametrize("steps, raised, expected", [
    ([1, 2, 4], [False, True, True], "at step 2"),
    ([1, 2], [True, True], "at step 1"),
    ([2, 4, 8], [False, False, True], "between steps 5 and 8"),
    ([2, 4], [True, True], "within the first 2 steps"),
    ([1, 2], [False, False], ""),
])
def test_raise_step(steps, raised, expected):
    assert raise_step(steps, raised) == expected


def series(panel, side):
    (found,) = [each for each in panel.series if each.side == side]
    return found


def scaled(values, panel):
    scale = MIB if "(MiB)" in panel.ylabel else KIB
    return [value / scale for value in values]


def test_each_chart_holds_its_claims_metric(cpu_run):
    _, records = cpu_run
    seen = set()
    for record in records:
        code, figure = record["code"], chart(record)
        panels = {panel.metric: panel for panel in figure.panels}
        assert figure.verdict == record["verdict"] and record["verdict"].upper() in figure.title
        assert figure.panels[0].metric in FIRST_PANEL[code] | {"text"}
        seen.add(code)
        if record["verdict"] == "needs-cuda":
            assert [panel.kind for panel in figure.panels] == ["text"] and "GPU" in figure.panels[0].note
            continue
        for panel in figure.panels:
            assert panel.title and (panel.kind in ("strip", "outcome") or panel.xlabel) and \
                (panel.kind == "outcome" or panel.ylabel), (code, panel.metric)
            assert {each.side for each in panel.series} <= {"bad", "good"}
        if "peak_bytes" in panels:
            panel = panels["peak_bytes"]
            for side in ("bad", "good"):
                assert series(panel, side).y == scaled(record[side]["peak_bytes"], panel)
                assert series(panel, side).x == record[side]["steps"]
        if "live_bytes" in panels:
            panel = panels["live_bytes"]
            for side in ("bad", "good"):
                assert series(panel, side).y == scaled(record[side]["live_bytes"], panel)
        if "graph_nodes" in panels:
            for side in ("bad", "good"):
                assert series(panels["graph_nodes"], side).y == record[side]["graph_nodes"]
            if record.get("kind") != "fix":  # a fixed program may keep its last step's graph (flat)
                assert series(panels["graph_nodes"], "good").y == [0] * len(record["good"]["steps"])
        if code == "TL403":
            panel = panels["buffer_allocations"]
            assert series(panel, "bad").y == record["bad"]["steps"]  # one buffer per step
            assert series(panel, "good").y == [1] * len(record["good"]["steps"])  # one in all
            # the canvas of the scratch-buffer loop, the 1024 x 1024 scratch of the helper's loop
            assert "3.0 MiB buffer" in panel.title or "4.0 MiB buffer" in panel.title
        if code in ("TL402", "NR2"):
            panel = panels["time_per_step"]
            for side in ("bad", "good"):
                line = series(panel, side)
                assert line.value == pytest.approx(record[side]["time_per_step_s"] * 1e3)
                assert line.y and min(line.y) == pytest.approx(line.value)  # the bar is the fastest sample
            assert panel.ylabel == "ms per step"
        if code == "TL501":
            panel = panels["grad_norm"]
            for side in ("bad", "good"):
                assert series(panel, side).y == record[side]["figures"]["grad_norm"]
            assert series(panel, "bad").y[-1] > 1.5 * series(panel, "good").y[-1]
            if "grad_sum_error" in panels:
                assert max(series(panels["grad_sum_error"], "bad").y) <= 1e-5
        if code == "TL502" and "param_delta" in panels:
            panel = panels["param_delta"]
            assert set(series(panel, "bad").y) == {0} and min(series(panel, "good").y) > 0
        if code == "TL502" and "applied_vs_last" in panels:
            for metric in ("applied_vs_last", "applied_vs_sum"):
                for side in ("bad", "good"):
                    assert series(panels[metric], side).y == record[side]["figures"][metric]
            assert max(series(panels["applied_vs_last"], "bad").y) <= 1e-5
            assert max(series(panels["applied_vs_sum"], "good").y) <= 1e-5
        if code in RAISES_AT:
            panel = panels.get("outcome")
            if panel is None:  # TL103's retain_graph claim is about memory
                continue
            bad = series(panel, "bad")
            assert bad.x == record["bad"]["steps"]
            assert bad.y == [float(e is not None) for e in record["bad"]["exceptions"]]
            assert set(series(panel, "good").y) == {0.0}
            assert f"RuntimeError at step {RAISES_AT[code]}, line " in panel.note, panel.note
            assert "good: every run completed" in panel.note
        if code == "TL301":
            assert min(series(panels["param_delta"], "good").y) > 0
        if code == "NR1":
            assert panels["grad_sum"].note == "bad and good identical at every step"
    assert seen == set(FIRST_PANEL)


def test_bad_and_good_are_drawn_differently():
    require("matplotlib")
    from torchlint.verify.plot import STYLE

    bad, good = STYLE["bad"], STYLE["good"]
    assert bad["color"] != good["color"] and bad["marker"] != good["marker"]
    assert bad["linestyle"] != good["linestyle"]
    assert good["markerfacecolor"] == "none" and good["zorder"] > bad["zorder"]  # hollow, on top


def test_plot_records_writes_one_png_per_rule(cpu_run, tmp_path):
    require("matplotlib")
    from torchlint.verify.plot import plot_records

    _, records = cpu_run
    written = plot_records(records, tmp_path / "charts")
    assert sorted(path.name for path in written) == sorted(f"{code}.png" for code in {r["code"] for r in records})
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def cuda_measured(segments: int, step_ms: float, allocations: int):
    """A probe result shaped like a CUDA run: allocator counters, no storage sizes."""
    from torchlint.verify.claims import Measured

    runs = [{"steps": n, "live_bytes": 0, "peak_bytes": 4096 * (1 + allocations), "allocations": allocations * n,
             "allocated_bytes": 4096 * n, "graph_nodes": 0, "segments_allocated": segments * n,
             "reserved_bytes": 2 ** 20, "exception": None, "figures": {}} for n in (2, 4, 8)]
    samples = [step_ms / 1e3 * (1 + k / 10) for k in range(6)]
    timing = [{"steps": 8, "cpu_s": 0.01, "wall_s": 0.02, "step_cpu_s": samples, "step_wall_s": samples,
               "exception": None}]
    return Measured({"fixture": "/x/TL401/bad.py", "runs": runs, "timing": timing, "error": None})


@pytest.mark.parametrize("code", ["TL401", "TL403"])
def test_cuda_charts_use_the_allocator_figures(code, tmp_path):
    from torchlint.verify.verifier import record

    claim = next(claim for claim in all_claims() if claim.code == code)  # TL403: the scratch buffers
    bad, good = cuda_measured(1, 2.0, 3), cuda_measured(0, 1.0, 2)
    data = record(claim, "cuda", "2.13.0", "confirmed", "detail", bad, good, "bad summary", "good summary")
    figure = chart(data)
    panels = {panel.metric: panel for panel in figure.panels}
    if code == "TL401":
        assert list(panels) == ["wall_time_per_step", "segments"]
        assert series(panels["segments"], "bad").y == [2, 4, 8] and series(panels["segments"], "good").y == [0] * 3
        assert series(panels["wall_time_per_step"], "bad").value == pytest.approx(2.0)
    else:
        assert series(panels["buffer_allocations"], "bad").y == [6, 12, 24]  # all allocations: CUDA has no sizes
        assert "CUDA" in panels["buffer_allocations"].title
    require("matplotlib")
    from torchlint.verify.plot import plot_records

    (path,) = plot_records([data], tmp_path)
    assert path.name == f"{code}.png" and path.stat().st_size > 0
