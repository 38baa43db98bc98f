"""Regression tests for the process side of the CLI found by attacking it (issue 12): option
injection through the pre-commit hook, imports from the working directory, Ctrl-C and a killed
parent with workers, worker and file-size bounds, empty selections, stdin and --force-exclude,
--statistics in machine formats, environment errors, early output checks, and -jN output."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import torchlint.runner
from cli_support import REPO, cli, write  # noqa: F401  (cli is a fixture)

LINUX = sys.platform.startswith("linux")
BAD = "import torch\n\nfor x in loader:\n    loss = model(x).sum()\n    losses.append(loss)\n    loss.backward()\n"  # TL101
CLEAN = "import torch\n\nx = torch.zeros(3)\n"


def torchlint_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "torchlint", *args]


def run(args: list[str], cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=60, **kwargs)


# --- 1. the pre-commit hook never takes a file name for an option --------------------------------

def hook_definition() -> dict:
    """The hook's entry, args and require_serial, read from .pre-commit-hooks.yaml."""
    text = (REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    try:
        import yaml
    except ImportError:  # the file is simple enough to read by hand
        fields = {}
        for line in text.splitlines():
            if line.startswith("- id:") and fields:
                break  # the first hook is the lint hook (torchlint-fix follows it)
            key, _, value = line.strip().lstrip("- ").partition(":")
            if key in ("entry", "args", "require_serial"):
                fields[key] = value.strip()
        return {"entry": fields["entry"], "args": json.loads(fields.get("args", "[]")),
                "require_serial": fields.get("require_serial") == "true"}
    return next(hook for hook in yaml.safe_load(text) if hook["id"] == "torchlint")


def as_pre_commit_runs(hook: dict, filenames: list[str], args: list[str] | None = None) -> list[str]:
    """`entry args... filenames...`, exactly how pre-commit builds the command line."""
    entry = shlex.split(hook["entry"])
    assert entry[0] == "torchlint"
    return torchlint_cmd(*entry[1:], *(hook.get("args", []) if args is None else args), *filenames)


@pytest.mark.skipif(not LINUX, reason="file names with leading dashes and shebang tagging: POSIX")
def test_pre_commit_hook_file_names_are_never_options(tmp_path):
    hook = hook_definition()
    assert hook.get("require_serial") is True  # one torchlint at a time, each with its own workers
    write(tmp_path, "setup.py", "SETUP = 1\n")
    write(tmp_path, "-osetup.py", BAD)
    write(tmp_path, "--exit-zero", "#!/usr/bin/env python\n" + BAD)
    write(tmp_path, "-dash.py", BAD)
    write(tmp_path, "clean.py", CLEAN)
    names = ["--exit-zero", "-dash.py", "-osetup.py", "clean.py", "setup.py"]  # git's order
    result = run(as_pre_commit_runs(hook, names), tmp_path)
    assert result.returncode == 1, result.stderr  # not 0 (--exit-zero), not 2 (-dash.py as an option)
    assert (tmp_path / "setup.py").read_text() == "SETUP = 1\n"  # not overwritten by -osetup.py
    reported = {line.split(":")[0] for line in result.stdout.splitlines()}
    assert reported == {"--exit-zero", "-dash.py", "-osetup.py"}

    # A user who overrides args and forgets the `--` gets a clear error, never an injection.
    result = run(as_pre_commit_runs(hook, names, args=["--force-exclude"]), tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert "--pre-commit: the hook's args must end with `--`" in result.stderr
    assert (tmp_path / "setup.py").read_text() == "SETUP = 1\n"
    # The documented form with options works.
    result = run(as_pre_commit_runs(hook, names, args=["--force-exclude", "--"]), tmp_path)
    assert result.returncode == 1 and (tmp_path / "setup.py").read_text() == "SETUP = 1\n"


def test_double_dash_ends_options(cli, tmp_path):
    write(tmp_path, "-j.py", BAD)
    result = cli("--format", "json", "--no-cache", "--", "-j.py")
    assert result.code == 1 and [row["path"] for row in result.json()] == ["-j.py"]


# --- 2. nothing is imported from the working directory -------------------------------------------

SHADOWED = ("argparse", "dataclasses", "enum", "re", "json", "typing", "fnmatch", "hashlib", "tempfile",
            "multiprocessing", "concurrent", "signal", "ctypes", "pickle", "selectors", "tomllib", "torch")


def plant_shadows(directory: Path, names=SHADOWED) -> Path:
    marker = directory / "IMPORTED"
    for name in names:
        write(directory, f"{name}.py", f"open({str(marker)!r}, 'a').write({name!r} + '\\n')\n")
    return marker


def test_python_m_torchlint_does_not_import_from_the_working_directory(tmp_path):
    marker = plant_shadows(tmp_path)
    for index in range(6):  # enough files for the worker pool
        write(tmp_path, f"src/m{index}.py", BAD)
    result = run(torchlint_cmd("--no-cache", "-j", "2", "src"), tmp_path)
    assert not marker.exists(), f"imported from the working directory: {marker.read_text()}"
    assert result.returncode == 1 and len(result.stdout.splitlines()) == 6, result.stderr


def test_python_m_torchlint_verify_does_not_import_from_the_working_directory(tmp_path):
    marker = plant_shadows(tmp_path, ("argparse", "json"))
    result = run([sys.executable, "-m", "torchlint.verify", "--help"], tmp_path)
    assert not marker.exists(), f"imported from the working directory: {marker.read_text()}"
    assert result.returncode == 0 and "usage: torchlint verify" in result.stdout, result.stderr


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (pip install -e '.[verify]')")
def test_verify_fork_server_does_not_import_from_the_working_directory(tmp_path):
    attack = tmp_path / "attack"
    marker = plant_shadows(attack, ("multiprocessing", "torch", "numpy", "argparse"))
    script = write(tmp_path, "ask.py", "import json\nfrom torchlint.verify.runner import environment\n"
                                       "if __name__ == '__main__':\n    print(json.dumps(environment()))\n")
    result = run([sys.executable, str(script)], attack)
    assert not marker.exists(), f"imported from the working directory: {marker.read_text()}"
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["torch_version"]


# --- 3. Ctrl-C and a killed parent ----------------------------------------------------------------

SLOW_BLOCK = """
def train_{i}(model, loader, opt):
    losses = []
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y) + {i}
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses
"""


def slow_tree(directory: Path, files: int = 6, blocks: int = 600) -> Path:
    """Files that take a few seconds each to lint."""
    source = "import torch\n" + "".join(SLOW_BLOCK.format(i=i) for i in range(blocks))
    for index in range(files):
        write(directory, f"slow/s{index}.py", source)
    return directory / "slow"


def children_of(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.add(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def start_with_workers(tree: Path, cwd: Path) -> tuple[subprocess.Popen, set[int]]:
    process = subprocess.Popen(torchlint_cmd("--no-cache", "-q", "-j", "2", str(tree)), cwd=cwd,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 20
    workers: set[int] = set()
    while time.monotonic() < deadline and len(workers) < 2:
        time.sleep(0.05)
        workers = children_of(process.pid)
    assert len(workers) == 2, "the workers never started"
    time.sleep(0.3)  # both busy on a slow file
    return process, workers


@pytest.mark.skipif(not LINUX or (os.cpu_count() or 1) < 2, reason="reads /proc; needs 2 cores")
def test_ctrl_c_stops_at_once(tmp_path):
    process, workers = start_with_workers(slow_tree(tmp_path), tmp_path)
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole group
    interrupted = time.monotonic()
    out, err = process.communicate(timeout=30)
    assert time.monotonic() - interrupted < 3, "Ctrl-C took more than 3 s"
    assert process.returncode == 130
    assert err.strip() == "torchlint: error: interrupted, no report written" and out == ""
    assert not any(alive(worker) for worker in workers)


@pytest.mark.skipif(not LINUX or (os.cpu_count() or 1) < 2, reason="reads /proc; needs 2 cores")
def test_workers_die_with_their_parent(tmp_path):
    process, workers = start_with_workers(slow_tree(tmp_path), tmp_path)
    process.kill()
    process.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(alive(worker) for worker in workers):
        time.sleep(0.05)
    survivors = [worker for worker in workers if alive(worker)]
    for worker in survivors:  # do not leave them behind if the test fails
        os.kill(worker, signal.SIGKILL)
    assert not survivors, "workers outlived their parent"


def test_a_crashing_file_costs_only_itself(cli, tmp_path, monkeypatch):
    if not LINUX:
        pytest.skip("workers inherit the monkeypatch only when forked")
    for index in range(8):
        write(tmp_path, f"f{index}.py", BAD)
    real = torchlint.runner.lint_source

    def crash(data, path, *args, **kwargs):
        if path.endswith("f5.py"):
            os._exit(3)  # a native crash, as far as the parent can tell
        return real(data, path, *args, **kwargs)

    monkeypatch.setattr(torchlint.runner, "lint_source", crash)
    monkeypatch.setattr(torchlint.runner, "default_jobs", lambda: 2)
    rows = cli("--format", "json", "--no-cache", "-j", "2").json()
    assert [(row["path"], row["code"]) for row in rows] == [
        (f"f{index}.py", "TL000" if index == 5 else "TL101") for index in range(8)]
    assert rows[5]["message"] == "internal error: the worker process crashed on this file"


# --- 4. --jobs is capped ---------------------------------------------------------------------------

def test_jobs_are_capped_by_cores_and_files(cli, tmp_path, monkeypatch):
    used = []
    real = torchlint.runner._pool_outcomes

    def spy(chunks, job, workers):
        used.append(workers)
        return real(chunks, job, workers)

    monkeypatch.setattr(torchlint.runner, "_pool_outcomes", spy)
    monkeypatch.setattr(torchlint.runner, "default_jobs", lambda: 2)
    for index in range(5):
        write(tmp_path, f"m{index}.py", BAD)
    assert cli("--no-cache", "-q", "--jobs", "1000").code == 1
    assert used == [2]  # min(1000, 5 files, 2 cores)
    used.clear()
    assert cli("--no-cache", "-q", "--jobs", "1000", "m0.py").code == 1
    assert used == []  # one file: no pool at all
    assert "capped at the number of cores and of files" in " ".join(cli("--help").out.split())


# --- 5. files too large to lint --------------------------------------------------------------------

def test_file_size_bound(cli, tmp_path):
    write(tmp_path, "big.py", BAD + "#" * 2000 + "\n")
    write(tmp_path, "small.py", BAD)
    rows = cli("--format", "json", "--max-file-size", "1K").json()
    assert [(row["path"], row["code"]) for row in rows] == [("big.py", "TL000"), ("small.py", "TL101")]
    assert rows[0]["message"] == (f"file too large ({(tmp_path / 'big.py').stat().st_size} bytes > 1024); "
                                  "raise the limit with --max-file-size")
    # The cache (written by the run above for small.py, and now for big.py) never hides the bound.
    assert [row["code"] for row in cli("--format", "json").json()] == ["TL101", "TL101"]
    assert [row["code"] for row in cli("--format", "json", "--max-file-size", "1K").json()] == ["TL000", "TL101"]
    # From stdin too, and bad sizes are usage errors.
    rows = cli("--format", "json", "--max-file-size", "50", "--stdin-filename", "s.py", "-", stdin=BAD).json()
    assert [row["code"] for row in rows] == ["TL000"] and "bytes > 50)" in rows[0]["message"]
    assert cli("--max-file-size", "lots").code == 2


def test_default_size_bound_refuses_a_huge_file_without_reading_it(cli, tmp_path):
    huge = tmp_path / "huge.py"
    with open(huge, "wb") as handle:  # sparse: no time or disk spent
        handle.truncate(torchlint.runner.DEFAULT_MAX_FILE_SIZE + 1)
    rows = cli("--format", "json", "--no-cache").json()
    assert [row["code"] for row in rows] == ["TL000"] and "file too large" in rows[0]["message"]
    # Well above any real source file: the largest in the 563k-line corpus is 0.23 MB.
    assert torchlint.runner.DEFAULT_MAX_FILE_SIZE >= 4 * 1024 * 1024


# --- 6. a selection without rules is a configuration error ----------------------------------------

@pytest.mark.parametrize("args", [("--select", ""), ("--select", "TL000"), ("--select", ",")])
def test_selecting_no_rule_is_an_error(cli, tmp_path, args):
    write(tmp_path, "a.py", BAD)
    result = cli(*args)
    assert result.code == 2 and result.out == ""
    assert result.err.startswith("torchlint: error: no rules to run: --select") and len(result.err.splitlines()) == 1


def test_select_empty_list_in_configuration_is_an_error(cli, tmp_path):
    write(tmp_path, "pyproject.toml", "[tool.torchlint]\nselect = []\n")
    write(tmp_path, "a.py", BAD)
    result = cli()
    assert result.code == 2 and "no rules to run" in result.err and "pyproject.toml" in result.err
    assert cli("--stdin-filename", "a.py", "-", stdin=BAD).code == 2


# --- 7. --force-exclude applies to --stdin-filename ------------------------------------------------

def test_force_exclude_applies_to_stdin_filename(cli, tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.torchlint]\nextend-exclude = ["generated"]\n')
    excluded = cli("--format", "json", "--force-exclude", "--stdin-filename", "generated/x.py", "-", stdin=BAD)
    assert excluded.code == 0 and excluded.json() == []
    linted = cli("--format", "json", "--stdin-filename", "generated/x.py", "-", stdin=BAD)
    assert linted.code == 1 and [row["code"] for row in linted.json()] == ["TL101"]
    kept = cli("--format", "json", "--force-exclude", "--stdin-filename", "src/x.py", "-", stdin=BAD)
    assert kept.code == 1


# --- 8. --statistics in machine formats --------------------------------------------------------------

@pytest.mark.parametrize("output_format", ["sarif", "github"])
def test_statistics_refuses_machine_formats(cli, tmp_path, output_format):
    write(tmp_path, "a.py", BAD)
    result = cli("--statistics", "--format", output_format)
    assert result.code == 2 and result.out == ""
    assert f"--statistics prints text or json, not {output_format}" in result.err
    assert cli("--statistics", "--format", "json").json()[0]["code"] == "TL101"


# --- 9. environment errors are reported as what they are -------------------------------------------

@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_full_disk_is_not_an_internal_error(tmp_path):
    write(tmp_path, "a.py", BAD)
    with open("/dev/full", "w") as full:
        result = subprocess.run(torchlint_cmd("--no-cache", "-q"), cwd=tmp_path, stdout=full,
                                stderr=subprocess.PIPE, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr == "torchlint: error: cannot write output: No space left on device\n"


@pytest.mark.skipif(not LINUX, reason="POSIX descriptors")
def test_closed_stdout_is_not_an_internal_error(tmp_path):
    write(tmp_path, "a.py", BAD)
    result = subprocess.run(torchlint_cmd("--no-cache", "-q"), cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, timeout=60, preexec_fn=lambda: os.close(1))
    assert result.returncode == 2
    assert result.stderr == "torchlint: error: cannot write output: stdout is closed\n"


@pytest.mark.skipif(not LINUX, reason="POSIX pipes")
def test_reader_going_away_exits_quietly(tmp_path):
    write(tmp_path, "many.py", "import torch\n" + "".join(SLOW_BLOCK.format(i=i) for i in range(300)))
    process = subprocess.Popen(torchlint_cmd("--no-cache", "-q"), cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    process.stdout.readline()  # `| head -1`
    process.stdout.close()
    err = process.stderr.read()
    process.wait(timeout=60)
    assert err == b"" and process.returncode == 1


def test_os_errors_are_not_internal_errors(cli, tmp_path, monkeypatch):
    write(tmp_path, "a.py", BAD)

    def no_descriptors(*args, **kwargs):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(torchlint.runner, "lint_files", no_descriptors)
    result = cli()
    assert result.code == 2 and result.err == "torchlint: error: Too many open files\n"


# --- 10. the output path is checked before linting ---------------------------------------------------

@pytest.mark.parametrize(("target", "problem"), [
    ("no/such/dir/report.txt", "directory no/such/dir does not exist"),
    ("adir", "is a directory"),
])
def test_output_file_is_checked_before_linting(cli, tmp_path, monkeypatch, target, problem):
    (tmp_path / "adir").mkdir()
    write(tmp_path, "a.py", BAD)
    linted = []
    monkeypatch.setattr(torchlint.runner, "lint_files", lambda *args, **kwargs: linted.append(1))
    result = cli("-o", target)
    assert result.code == 2 and not linted
    assert result.err == f"torchlint: error: --output-file {target}: {problem}\n"


@pytest.mark.skipif(not LINUX or os.geteuid() == 0, reason="root may write anywhere")
def test_output_file_in_read_only_directory(cli, tmp_path):
    (tmp_path / "ro").mkdir(mode=0o555)
    write(tmp_path, "a.py", BAD)
    result = cli("-o", "ro/report.txt")
    assert result.code == 2 and "ro/report.txt: directory ro is not writable" in result.err


# --- 11. output is the same for any --jobs ------------------------------------------------------------

def test_output_is_identical_for_any_jobs(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(torchlint.runner, "default_jobs", lambda: 3)  # let -j3 run 3 workers here too
    shutil.copytree(REPO / "fixtures", tmp_path / "fixtures", ignore=shutil.ignore_patterns("__pycache__"))
    write(tmp_path, "broken/syntax.py", "import torch\ndef f(:\n")
    write(tmp_path, "broken/latin.py", b"import torch\nx = '\xff'\n")
    write(tmp_path, "broken/null.py", b"import torch\x00\n")
    write(tmp_path, "broken/big.py", BAD * 400)
    outputs = {}
    for output_format in ("text", "json"):
        for jobs in ("1", "2", "3"):
            result = cli("--no-cache", "--format", output_format, "-j", jobs, "--max-file-size", "20000",
                         "fixtures", "broken")
            outputs[output_format, jobs] = (result.code, result.out)
    for output_format in ("text", "json"):
        serial = outputs[output_format, "1"]
        assert serial[0] == 1 and serial[1].count("TL000") >= 4
        assert outputs[output_format, "2"] == serial and outputs[output_format, "3"] == serial
