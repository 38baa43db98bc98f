"""`torchlint verify`: every rule's claim on CPU, the JSON shape, verdict logic, exit codes."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from optional_deps import require

from torchlint.verify.fixtures import fixtures_dir

REPO = Path(__file__).resolve().parents[1]
PROGRAMS = Path(__file__).resolve().parent / "verify_programs"
FIXTURES = fixtures_dir()
HINT = "pip install torch --index-url https://download.pytorch.org/whl/cpu"


def needs_torch():
    """torch, or a skip that says how to install it (a failure under CI=true)."""
    return require("torch")


# A `python -c` prelude that makes `import NAME` fail as if NAME were not installed.
BLOCK_IMPORT = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == {name!r} or name.startswith({name!r} + "."):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Block())
"""


def run_blocked(module: str, args: list[str], entry: str = "torchlint.verify.cli") -> subprocess.CompletedProcess:
    code = BLOCK_IMPORT.format(name=module) + (
        f"from {entry} import main\n"
        f"raise SystemExit(main({args!r}))\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)


def runnable_fixture_codes() -> set[str]:
    codes = set()
    for directory in FIXTURES.glob("TL*"):
        files = list(directory.glob("bad*.py")) + list(directory.glob("good*.py"))
        if any("def run(" in path.read_text(encoding="utf-8") for path in files):
            codes.add(directory.name)
    return codes


# ------------------------------------------------------------------ the whole catalogue on CPU
# (`cpu_run`, the exit code and records of one `torchlint verify --device cpu`, is in conftest.py:
# the chart tests use the same run.)


def test_every_claim_is_confirmed_on_cpu_and_only_tl401_needs_cuda(cpu_run):
    code, records = cpu_run
    problems = [f"{r['code']}: {r['verdict']} ({r['detail']})" for r in records
                if r["verdict"] not in ("confirmed", "needs-cuda") and not _only_timing_missed(r)]
    assert not problems
    assert {r["code"] for r in records if r["verdict"] == "needs-cuda"} <= {"TL401"}
    assert code == 0 or any(_only_timing_missed(r) for r in records)


def _only_timing_missed(record) -> bool:
    """NR2's speed half is a wall-clock ratio, which a loaded CI machine can miss (0.84x seen once
    while another run shared the two cores); its bytes half is exact and must still hold. Speed is
    measured by `torchlint verify` runs and the benchmark script, not asserted by a unit test."""
    if record["code"] != "NR2" or record["verdict"] != "refuted":
        return False
    match = re.search(r"and ([0-9.]+)x the bytes allocated per step", record["detail"])
    return match is not None and float(match.group(1)) >= 2



def test_every_rule_with_runnable_fixtures_has_a_claim(cpu_run):
    _, records = cpu_run
    assert runnable_fixture_codes() <= {r["code"] for r in records}
    assert {"NR1", "NR2"} <= {r["code"] for r in records}


def test_json_records_carry_the_figures_for_bad_and_good(cpu_run):
    torch = needs_torch()
    _, records = cpu_run
    assert records
    for record in records:
        assert {"code", "claim", "metric", "device", "torch_version", "verdict", "detail", "bad", "good"} <= set(record)
        assert record["device"] == "cpu" and record["torch_version"] == torch.__version__
        if record["verdict"] == "needs-cuda":
            continue
        for side in ("bad", "good"):
            figures = record[side]
            steps = figures["steps"]
            assert len(steps) >= 2 and steps == sorted(steps)
            for key in ("live_bytes", "peak_bytes", "allocations", "allocated_bytes", "graph_nodes"):
                assert len(figures[key]) == len(steps), (record["code"], side, key)
                assert all(isinstance(value, int) and value >= 0 for value in figures[key])
            assert "exception" in figures and "time_per_step_s" in figures and figures["summary"]
    raised = [r["bad"]["exception"] for r in records
              if r["code"] in ("TL103", "TL301", "TL302") and r["bad"]["exception"]]
    assert raised and all(exception["type"] == "RuntimeError" and exception["message"] for exception in raised)
    timed = [r for r in records if r["code"] in ("TL402", "NR2")]
    assert timed and all(r["bad"]["time_per_step_s"] > 0 and r["good"]["time_per_step_s"] > 0 for r in timed)


# ------------------------------------------------------------------ probe and runner on tiny programs
def test_probe_measures_exact_growth_per_step_and_a_curve():
    needs_torch()
    from torchlint.verify.runner import ProbeRequest, run_probes

    leak, flat = run_probes([ProbeRequest(str(PROGRAMS / "leak.py"), step_counts=(2, 4, 8)),
                             ProbeRequest(str(PROGRAMS / "flat.py"), step_counts=(2, 4, 8))])
    assert [run["live_bytes"] for run in leak["runs"]] == [2 * 4096, 4 * 4096, 8 * 4096]
    assert [run["allocations"] for run in leak["runs"]] == [10, 20, 40]  # ones, mul, sum, zeros, add
    curve = [point["live_bytes"] for point in leak["runs"][-1]["per_step"]]
    assert curve == [1024 + 4096 * k for k in range(1, 9)]  # read inside the step: `scratch` still alive
    assert [run["live_bytes"] for run in flat["runs"]] == [4096] * 3
    assert flat["runs"][-1]["figures"] == {"total": [1024.0 * k for k in range(1, 9)], "steps": 8}


def test_probe_counts_graph_nodes_and_records_exceptions_and_import_errors():
    needs_torch()
    from torchlint.verify.runner import ProbeRequest, run_probes

    graph, raises, broken, crash = run_probes([
        ProbeRequest(str(PROGRAMS / name), step_counts=(2, 4))
        for name in ("graph.py", "raises.py", "broken.py", "crash.py")
    ])
    nodes = [run["graph_nodes"] for run in graph["runs"]]
    assert nodes[1] - nodes[0] == 2 * 3  # mul, sum and the running add per step
    assert [run["live_bytes"] for run in graph["runs"]] == [68, 68]  # tensors flat: the graph grows, not bytes
    assert raises["runs"][0]["exception"] == {"type": "RuntimeError", "message": "second step is not allowed",
                                              "line": 7, "code": 'raise RuntimeError("second step is not allowed")'}
    assert broken["error"]["type"] == "ModuleNotFoundError" and not broken["runs"]
    assert crash["error"]["type"] == "Crash" and "exit code 3" in crash["error"]["message"]


def test_probe_figures_are_identical_in_separate_processes():
    needs_torch()
    from torchlint.verify.runner import ProbeRequest, run_probes

    request = ProbeRequest(str(REPO / "torchlint/verify/nonrules/nr1_del_outputs.py"), "run_del_outputs", (2, 4))
    first, second = run_probes([request, request])
    strip = lambda result: [{k: v for k, v in run.items() if k != "per_step"} for run in result["runs"]]  # noqa: E731
    assert strip(first) == strip(second)
    assert first["runs"][0]["allocations"] > 0


# ------------------------------------------------------------------ verdicts and exit codes
def program_claims():
    from torchlint.verify.claims import Claim, Program, grows_linearly_vs_flat

    def leak_vs_flat(code, bad, good, **options):
        return Claim(code=code, claim="test claim", metric="live bytes", bad=Program(str(PROGRAMS / bad)),
                     good=Program(str(PROGRAMS / good)), check=grows_linearly_vs_flat("live_bytes", 4096), **options)

    return {
        "confirmed": leak_vs_flat("TL901", "leak.py", "flat.py"),
        "refuted": leak_vs_flat("TL902", "flat.py", "leak.py"),
        "error-raises": leak_vs_flat("TL903", "raises.py", "flat.py"),
        "error-import": leak_vs_flat("TL904", "broken.py", "flat.py"),
        "error-missing": leak_vs_flat("TL905", "missing.py", "flat.py"),
        "needs-cuda": leak_vs_flat("TL906", "leak.py", "flat.py", needs_cuda=True),
    }


def test_verdicts_follow_the_measurements():
    torch = needs_torch()
    from torchlint.verify.verifier import verify

    claims = program_claims()
    records = verify(list(claims.values()), "cpu", 8, PROGRAMS, torch.__version__)
    verdicts = {name: record["verdict"] for name, record in zip(claims, records)}
    assert verdicts == {
        "confirmed": "confirmed", "refuted": "refuted", "error-raises": "error", "error-import": "error",
        "error-missing": "error", "needs-cuda": "needs-cuda",
    }
    by_code = {record["code"]: record for record in records}
    assert by_code["TL901"]["bad"]["summary"] == "+4.0 KiB/step"
    assert "second step is not allowed" in by_code["TL903"]["detail"]
    assert "missing fixture" in by_code["TL905"]["detail"]


@pytest.mark.parametrize("names, expected", [(["confirmed", "needs-cuda"], 0), (["confirmed", "refuted"], 1),
                                             (["error-import"], 1)])
def test_exit_code_and_text_table(monkeypatch, capsys, names, expected):
    needs_torch()
    import torchlint.verify.claims as claims_module
    from torchlint.verify.cli import main

    claims = program_claims()
    monkeypatch.setattr(claims_module, "all_claims", lambda: [claims[name] for name in names])
    assert main(["--device", "cpu", "--fixtures", str(PROGRAMS)]) == expected
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["rule", "claim", "metric", "bad", "good", "verdict"]
    counts = {verdict: sum(claims[name] is not None and name.split("-")[0] == verdict.split("-")[0]
                           for name in names) for verdict in ("confirmed", "refuted", "error")}
    assert out[-1].startswith(f"{counts['confirmed']} confirmed, {counts['refuted']} refuted, "
                              f"{int('needs-cuda' in names)} needs-cuda, {counts['error']} error (device cpu")


@pytest.mark.parametrize("args", [["TL999"], ["--steps", "1"], ["--device", "tpu"], ["--format", "xml"],
                                  ["--fixtures", "/nonexistent/fixtures"], ["--jobs", "0"]])
def test_usage_errors_exit_2(capsys, args):
    needs_torch()
    from torchlint.verify.cli import main

    assert main(args) == 2
    assert "error" in capsys.readouterr().err


def test_unwritable_destinations_fail_before_measuring(tmp_path, capsys, monkeypatch):
    needs_torch()
    from torchlint.verify import cli as verify_cli

    def no_measuring(*args, **kwargs):
        raise AssertionError("measured although the report could not be written")

    monkeypatch.setattr("torchlint.verify.verifier.verify", no_measuring)
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for args, says in ((["--output-file", str(tmp_path / "missing" / "out.json")], "does not exist"),
                       (["--plot", str(a_file)], "not a directory")):
        assert verify_cli.main(["TL101", *args]) == 2
        assert says in capsys.readouterr().err


@pytest.mark.parametrize("entry, args", [("torchlint.verify.cli", ["--device", "cpu"]),
                                         ("torchlint.cli", ["verify", "TL101"])])
def test_without_torch_one_line_and_exit_2(entry, args):
    result = run_blocked("torch", args, entry)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()] and HINT in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_plot_without_matplotlib_is_a_one_line_error():
    needs_torch()
    result = run_blocked("matplotlib", ["NR1", "--device", "cpu", "--plot", "charts"])
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "matplotlib" in result.stderr
    assert "Traceback" not in result.stderr


def test_plot_writes_a_chart_per_rule(tmp_path, capsys):
    needs_torch()
    require("matplotlib")
    from torchlint.verify.cli import main

    assert main(["NR1", "--device", "cpu", "--plot", str(tmp_path / "charts")]) == 0
    chart = tmp_path / "charts" / "NR1.png"
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_verify_cli_does_not_import_torch_in_the_parent():
    code = ("import sys\nfrom torchlint.verify import cli\n"
            "assert cli.main(['--help']) == 0\nprint('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            cwd=REPO, env={**os.environ, "COLUMNS": "100"})
    assert result.stdout.strip().splitlines()[-1] == "False"


def test_no_numpy_warning_from_inside_torch_when_numpy_is_missing(tmp_path):
    """torch warns "Failed to initialize NumPy" at import when numpy is missing; the user cannot act
    on it, so the verifier's probes filter it and its parent process never imports torch."""
    needs_torch()
    blocked = tmp_path / "no_numpy" / "numpy"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'numpy'\", name='numpy')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(blocked.parent),
                                                                     os.environ.get("PYTHONPATH")]))}
    plain = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True, env=env,
                           timeout=120, cwd=tmp_path)
    assert "Failed to initialize NumPy" in plain.stderr  # the situation this test is about
    # The parent must not import torch either (it once did, unpickling the probes' torch.__version__).
    code = ("import sys\nfrom torchlint.verify.cli import main\n"
            "code = main(['NR1', '--device', 'cpu'])\nprint('parent imported torch:', 'torch' in sys.modules)\n"
            "raise SystemExit(code)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "NumPy" not in result.stderr and "1 confirmed" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "parent imported torch: False"
