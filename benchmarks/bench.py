"""Benchmark torchlint on the shared corpus against a bare libcst parse and TorchFix.

Run from the project root with the project's virtualenv:

    python benchmarks/bench.py                      # build/reuse the corpus, everything
    python benchmarks/bench.py --corpus /work/corpus --json bench.json
    python benchmarks/bench.py --quick --skip-torchfix   # smoke run on a small subset

Every figure comes from one run on one file list, each tool in its own subprocess. CPU seconds
(user + sys of the child and its children, from ``wait4``) are the comparable figure; wall time
is used only where it is the point (parallel speed-up, start-up). TorchFix is installed, pinned,
into its own virtualenv next to the corpus cache.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
BUILD_SCRIPT = PROJECT.parent / "shared" / "corpus" / "build.sh"
CACHE_HOME = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "torchlint-bench"
TORCHFIX_PIN = "torchfix==0.7.0"
TORCH_PIN = "torch==2.13.0"  # CPU wheel; only installed if TorchFix's dependencies ask for torch
STARTUP_REPEATS = 7

TARGETS = {  # ratio name -> (comparison, bound)
    "cold / bare parse of parsed files": ("<=", 1.3),
    "TorchFix / torchlint cold (subset)": (">=", 20.0),
    "serial / parallel (wall)": (">=", 1.7),
    "cold / warm (CPU)": (">=", 10.0),
    "peak RSS, one process (MB)": ("<=", 300.0),
    "start-up --version (wall s)": ("<=", 0.25),
    "one small file (wall s)": ("<=", 0.25),
}

# Bare parse, decoding as the interpreter does; run in a fresh interpreter like the linters are.
BARE_PARSE = """
import sys, tokenize, libcst
parsed = failed = 0
for path in open(sys.argv[1], encoding="utf-8").read().splitlines():
    try:
        with tokenize.open(path) as handle:
            libcst.parse_module(handle.read())
        parsed += 1
    except Exception:
        failed += 1
print(parsed, failed)
"""

SMALL_FILE = """\
import torch


def train(model, loader, optimizer, criterion):
    losses = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss)
    return sum(l.item() for l in losses) / len(losses)
"""


@dataclass
class Run:
    label: str
    files: int
    cpu: float  # user + sys seconds of the child and everything it waited for
    wall: float
    maxrss_mb: float  # largest single process (wait4 ru_maxrss)
    tree_rss_mb: float  # largest sampled sum over the process tree (parallel runs)
    returncode: int
    stdout: str = field(repr=False, default="")
    stderr: str = field(repr=False, default="")


def measure(label: str, command: list[str], files: int, cwd: Path | None = None,
            env: dict | None = None) -> Run:
    """Run ``command`` to completion and take its CPU, wall time and memory from the kernel."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=err, cwd=cwd, env=env)
        sampler = TreeRssSampler(process.pid)
        sampler.start()
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        sampler.stop()
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Run(label, files, usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024,
                   max(sampler.peak_kb, usage.ru_maxrss) / 1024, process.returncode,
                   out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"))


class TreeRssSampler(threading.Thread):
    """Samples the summed RSS of a process and its descendants (what ``--jobs`` really costs)."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval, self.peak_kb = pid, interval, 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(self.interval):
            self.peak_kb = max(self.peak_kb, sum(map(_rss_kb, _descendants(self.pid))))

    def stop(self) -> None:
        self._done.set()
        self.join()


def _descendants(pid: int) -> list[int]:
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as handle:
                    pending.extend(int(child) for child in handle.read().split())
        except OSError:
            continue  # exited between listing and reading
    return found


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


# --- corpus and tools --------------------------------------------------------------------------

def ensure_corpus(path: Path) -> Path:
    if not any(path.glob("*/**/*.py")):
        print(f"building the corpus into {path} ...", file=sys.stderr)
        subprocess.run(["bash", str(BUILD_SCRIPT), str(path)], check=True)
    return path


def corpus_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if ".wheels" not in p.relative_to(root).parts)


def ensure_torchfix(venv: Path) -> Path:
    """A virtualenv holding only the pinned TorchFix; CPU torch first if it would pull torch."""
    executable = venv / "bin" / "torchfix"
    if executable.exists():
        return executable
    print(f"installing {TORCHFIX_PIN} into {venv} ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        subprocess.run(pip + ["--dry-run", "--report", report.name, TORCHFIX_PIN], check=True)
        planned = {item["metadata"]["name"].lower() for item in json.load(open(report.name))["install"]}
    if "torch" in planned:
        subprocess.run(pip + [TORCH_PIN], check=True)
    subprocess.run(pip + [TORCHFIX_PIN], check=True)
    return executable


def torchlint_command() -> list[str]:
    script = Path(sys.executable).parent / "torchlint"
    return [str(script)] if script.exists() else [sys.executable, "-m", "torchlint"]


def snapshot_torchlint(directory: Path) -> dict:
    """Copy the package and return an environment that runs the copy.

    Others edit the checkout while the benchmark runs; every run must measure the same code, and
    the cache key (which fingerprints torchlint's own sources) must not change between the
    cache-filling and the warm run."""
    shutil.copytree(PROJECT / "torchlint", directory / "torchlint",
                    ignore=shutil.ignore_patterns("__pycache__"))
    compileall.compile_dir(directory / "torchlint", quiet=1)  # no run pays for bytecode
    env = {**os.environ, "PYTHONPATH": str(directory)}
    probe = subprocess.run([sys.executable, "-c", "import torchlint.cli; print(torchlint.__file__)"],
                           env=env, cwd=directory, capture_output=True, text=True, check=True)
    if not Path(probe.stdout.strip()).is_relative_to(directory):
        sys.exit(f"the snapshot in {directory} is not the torchlint that runs: {probe.stdout.strip()}")
    sys.path.insert(0, str(directory))  # the prefilter split below uses the same code
    return env


def prefilter_split(files: list[Path]) -> tuple[list[Path], list[Path]]:
    """Files the default rule set's token prefilter lets through, and the ones it skips."""
    from torchlint.engine import SourceError, decode_source, may_match
    from torchlint.rules import default_rules

    rules = default_rules()
    parsed, skipped = [], []
    for path in files:
        try:
            text = decode_source(path.read_bytes())
        except SourceError:
            parsed.append(path)  # reported as TL000 by the engine; keep it on the parse side
            continue
        (parsed if may_match(text, rules) else skipped).append(path)
    return parsed, skipped


def write_list(files: list[Path], directory: Path, name: str) -> Path:
    path = directory / name
    path.write_text("".join(f"{file}\n" for file in files), encoding="utf-8")
    return path


# --- the benchmark -----------------------------------------------------------------------------

SUBSET_REPEATS = 3


def _cpu(run: "Run") -> float:
    return run.cpu


class Bench:
    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.lint = torchlint_command()
        self.env = snapshot_torchlint(workdir / "snapshot")
        self.runs: dict[str, Run] = {}
        self.fastest: dict[str, Run] = {}
        self.checks: dict[str, bool | str] = {}

    def record(self, key: str, run: Run, ok_codes: tuple[int, ...] = (0, 1)) -> Run:
        if run.returncode not in ok_codes:
            sys.exit(f"{run.label} failed with exit code {run.returncode}:\n{run.stderr[-3000:]}")
        self.runs[key] = run
        print(f"  {run.label}: {run.cpu:.2f} CPU s, {run.wall:.2f} s wall", file=sys.stderr)
        return run

    def bare_parse(self, key: str, label: str, file_list: Path, count: int) -> Run:
        return self.record(key, measure(label, [sys.executable, "-c", BARE_PARSE, str(file_list)], count),
                           ok_codes=(0,))

    def torchlint(self, key: str, label: str, file_list: Path, count: int, *options: str,
                  cache_dir: Path | None = None) -> Run:
        # Each run gets its own working directory so a cache can only come from where we put it.
        cwd = cache_dir or Path(tempfile.mkdtemp(dir=self.workdir))
        command = [*self.lint, "--format", "json", "--files-from", str(file_list), *options]
        return self.record(key, measure(label, command, count, cwd=cwd, env=self.env))

    def run(self, files: list[Path], torchfix_files: list[Path]) -> dict:
        args, work = self.args, self.workdir
        parsed, skipped = prefilter_split(files)
        all_list = write_list(files, work, "all.txt")
        parsed_list = write_list(parsed, work, "parsed.txt")
        n = len(files)
        print(f"{n} files, {len(parsed)} pass the prefilter, {len(skipped)} skipped", file=sys.stderr)

        self.bare_parse("bare_all", "bare libcst parse, all files", all_list, n)
        self.bare_parse("bare_parsed", "bare libcst parse, prefiltered files", parsed_list, len(parsed))
        serial = self.torchlint("cold_serial", "torchlint cold serial (-j1)", all_list, n,
                                "--no-cache", "--jobs", "1")
        parallel = self.torchlint("cold_parallel", f"torchlint cold parallel (-j{args.jobs})", all_list, n,
                                  "--no-cache", "--jobs", str(args.jobs))
        unfiltered = self.torchlint("no_prefilter", "torchlint cold serial, --no-prefilter", all_list, n,
                                    "--no-cache", "--jobs", "1", "--no-prefilter")
        cache_home = Path(tempfile.mkdtemp(dir=work))
        filling = self.torchlint("cache_fill", "torchlint cold, filling the cache (-j1)", all_list, n,
                                 "--jobs", "1", cache_dir=cache_home)
        warm = self.torchlint("warm", "torchlint warm (-j1)", all_list, n, "--jobs", "1", cache_dir=cache_home)
        self.checks["serial output == parallel output"] = serial.stdout == parallel.stdout
        self.checks["findings with prefilter == without"] = serial.stdout == unfiltered.stdout
        self.checks["cold output == cache-filling == warm"] = serial.stdout == filling.stdout == warm.stdout
        self.checks["warm run imports libcst"] = self.warm_imports_libcst(all_list, cache_home)

        if torchfix_files:
            self.compare_torchfix(torchfix_files)
        startup = self.startup()
        findings = json.loads(serial.stdout or "[]")
        return {
            "files": n, "parsed": len(parsed), "skipped": len(skipped), "jobs": args.jobs,
            "torchfix_files": len(torchfix_files), "torchfix_subset": args.torchfix_label,
            "findings_total": len(findings),
            "findings_per_code": dict(sorted(Counter(item["code"] for item in findings).items())),
            "runs": {key: {k: v for k, v in asdict(run).items() if k not in ("stdout", "stderr")}
                     for key, run in self.runs.items()},
            "startup": startup, "checks": self.checks, "ratios": self.ratios(startup),
        }

    def warm_imports_libcst(self, file_list: Path, cache_home: Path) -> bool:
        command = [sys.executable, "-X", "importtime", "-m", "torchlint", "--format", "json",
                   "--files-from", str(file_list), "--jobs", "1"]
        result = subprocess.run(command, cwd=cache_home, capture_output=True, text=True, env=self.env)
        imported = (line.split("|")[-1].strip() for line in result.stderr.splitlines()
                    if line.startswith("import time:"))
        return any(name == "libcst" or name.startswith("libcst.") for name in imported)

    def compare_torchfix(self, files: list[Path]) -> None:
        executable = ensure_torchfix(self.args.torchfix_venv)
        subset_list = write_list(files, self.workdir, "torchfix_subset.txt")
        n = len(files)
        # The two cheap runs alternate three times and keep their fastest: on a shared machine
        # noise only ever adds time, and one slow run would skew the ratio either way.
        for _ in range(SUBSET_REPEATS):
            bare = self.bare_parse("subset_bare", "bare libcst parse, TorchFix subset, best of 3", subset_list, n)
            lint = self.torchlint("subset_cold", "torchlint cold serial, TorchFix subset, best of 3", subset_list, n,
                                  "--no-cache", "--jobs", "1")
            self.fastest["subset_bare"] = min(self.fastest.get("subset_bare", bare), bare, key=_cpu)
            self.fastest["subset_cold"] = min(self.fastest.get("subset_cold", lint), lint, key=_cpu)
        self.runs.update(self.fastest)
        # TorchFix's own CLI, one process, so its CPU time is comparable to torchlint -j1.
        run = measure(f"TorchFix {TORCHFIX_PIN.split('==')[1]} (--jobs 1)",
                      [str(executable), "--jobs", "1", *map(str, files)], n, cwd=self.workdir)
        self.record("torchfix", run)

    def startup(self) -> dict:
        small = self.workdir / "small_train.py"
        small.write_text(SMALL_FILE, encoding="utf-8")

        def medians(command: list[str]) -> tuple[float, float]:
            runs = [measure("start-up", command, 1, cwd=self.workdir, env=self.env)
                    for _ in range(STARTUP_REPEATS)]
            return statistics.median(r.wall for r in runs), statistics.median(r.cpu for r in runs)

        version_wall, version_cpu = medians([*self.lint, "--version"])
        small_wall, small_cpu = medians([*self.lint, "--no-cache", str(small)])
        # CPU medians too: on a shared machine wall time also measures the neighbours.
        return {"version_wall": version_wall, "version_cpu": version_cpu, "small_file_wall": small_wall,
                "small_file_cpu": small_cpu, "repeats": STARTUP_REPEATS}

    def ratios(self, startup: dict) -> dict:
        r = self.runs
        ratios = {
            "cold / bare parse of parsed files": r["cold_serial"].cpu / r["bare_parsed"].cpu,
            "serial / parallel (wall)": r["cold_serial"].wall / r["cold_parallel"].wall,
            "cold / warm (CPU)": r["cold_serial"].cpu / r["warm"].cpu,
            "peak RSS, one process (MB)": max(run.maxrss_mb for key, run in r.items()
                                              if key in ("cold_serial", "cold_parallel", "warm", "no_prefilter")),
            "start-up --version (wall s)": startup["version_wall"],
            "one small file (wall s)": startup["small_file_wall"],
            "cold / bare parse of all files": r["cold_serial"].cpu / r["bare_all"].cpu,
        }
        if "torchfix" in r:
            ratios["TorchFix / torchlint cold (subset)"] = r["torchfix"].cpu / r["subset_cold"].cpu
            ratios["TorchFix / bare parse (subset)"] = r["torchfix"].cpu / r["subset_bare"].cpu
        return ratios


def render(result: dict, runs: dict[str, Run]) -> str:
    lines = [f"torchlint benchmark: {result['files']} files ({result['parsed']} parsed, "
             f"{result['skipped']} skipped by the prefilter), --jobs {result['jobs']}, "
             f"{os.cpu_count()} CPUs", ""]
    lines.append(f"{'run':<52}{'files':>6}{'CPU s':>9}{'wall s':>9}{'RSS MB':>8}{'tree MB':>9}")
    for key, run in runs.items():
        if key == "subset_bare":
            lines.append(f"-- TorchFix comparison on {result['torchfix_subset']} "
                         f"({result['torchfix_files']} files)")
        lines.append(f"{run.label:<52}{run.files:>6}{run.cpu:>9.2f}{run.wall:>9.2f}"
                     f"{run.maxrss_mb:>8.0f}{run.tree_rss_mb:>9.0f}")
    startup = result["startup"]
    lines += ["", f"start-up, median of {startup['repeats']}: --version {startup['version_wall']:.3f} s wall "
              f"({startup['version_cpu']:.3f} CPU s), one small file {startup['small_file_wall']:.3f} s wall "
              f"({startup['small_file_cpu']:.3f} CPU s)", ""]
    lines.append(f"{'ratio':<42}{'value':>9}   target")
    for name, value in result["ratios"].items():
        target = TARGETS.get(name)
        verdict = ""
        if target:
            op, bound = target
            met = value <= bound if op == "<=" else value >= bound
            verdict = f"{op} {bound:g}  {'ok' if met else 'MISSED'}"
        lines.append(f"{name:<42}{value:>9.3f}   {verdict}")
    lines += ["", "findings: " + (", ".join(f"{code} {count}" for code, count in result["findings_per_code"].items())
                                  or "none") + f" (total {result['findings_total']})"]
    for name, value in result["checks"].items():
        expected = name != "warm run imports libcst"
        verdict = "ok" if value == expected else "FAILED"
        lines.append(f"{name}: {'yes' if value else 'no'}  {verdict}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CACHE_HOME / "corpus",
                        help="built corpus to reuse, or where to build it (default: %(default)s)")
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)),
                        help="workers for the parallel run (default: all CPUs)")
    parser.add_argument("--skip-torchfix", action="store_true")
    parser.add_argument("--torchfix-subset", default="timm",
                        help="corpus package(s), comma-separated, TorchFix runs on, or 'all' (default: timm)")
    parser.add_argument("--torchfix-limit", type=int, default=0,
                        help="at most this many files of the TorchFix subset (evenly spread)")
    parser.add_argument("--torchfix-venv", type=Path, default=CACHE_HOME / TORCHFIX_PIN.replace("==", "-"))
    parser.add_argument("--quick", action="store_true", help="every 15th file only: a smoke run")
    parser.add_argument("--json", type=Path, help="also write the results here as JSON")
    args = parser.parse_args(argv)

    root = ensure_corpus(args.corpus.expanduser().resolve())
    files = corpus_files(root)
    if args.quick:
        files = files[::15]
    torchfix_files: list[Path] = []
    args.torchfix_label = args.torchfix_subset
    if not args.skip_torchfix:
        packages = set(args.torchfix_subset.split(","))
        torchfix_files = [f for f in files if args.torchfix_subset == "all"
                          or f.relative_to(root).parts[0] in packages]
        if args.torchfix_limit and len(torchfix_files) > args.torchfix_limit:
            step = len(torchfix_files) / args.torchfix_limit
            torchfix_files = [torchfix_files[int(i * step)] for i in range(args.torchfix_limit)]
            args.torchfix_label += f", {args.torchfix_limit} files"
        if not torchfix_files:
            sys.exit(f"no corpus files match --torchfix-subset {args.torchfix_subset!r}")

    with tempfile.TemporaryDirectory(prefix="torchlint-bench-") as workdir:
        bench = Bench(args, Path(workdir))
        result = bench.run(files, torchfix_files)
        table = render(result, bench.runs)
    print(table)
    if args.json:
        args.json.write_text(json.dumps({**result, "table": table}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
