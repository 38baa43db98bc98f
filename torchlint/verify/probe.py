"""Measure one fixture function in this process; the runner calls it in a fresh process per fixture.

``python -m torchlint.verify.probe FIXTURE.py [--function run] [--steps 2,4,8] [--device cpu]
[--timing REPEATS]`` prints the measurements as JSON (the runner uses ``measure`` directly through a
fork server, which saves the ~2 s ``import torch`` per fixture).

Protocol (see README.md): ``run(steps, device)`` returns what the loop kept; it may also accept
``step_hook`` (called after every iteration) and ``record(name, value)`` (named figures).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import inspect
import json
import linecache
import random
import sys
import time
import warnings
from numbers import Number
from pathlib import Path
from typing import Any, Callable

# torch warns at import when numpy is missing; the verifier never uses numpy through torch, and the
# user can do nothing about it inside a probe (numpy is optional: seed_everything seeds it if present).
warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)

import torch  # noqa: E402

try:  # optimizers import torch._dynamo (and sympy) on their first step: ~1 s, paid once in the fork server
    import torch._dynamo  # noqa: F401
except ImportError:
    pass

from torchlint.verify.tracker import CudaMeter, StorageTracker, count_graph_nodes, synchronize  # noqa: E402

MESSAGE_LIMIT = 500


def load_function(path: str, function: str) -> Callable:
    name = "torchlint_fixture_" + "".join(c if c.isalnum() else "_" for c in Path(path).stem)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return getattr(module, function)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy
    except ImportError:
        return
    numpy.random.seed(seed)


def as_figure(value: Any) -> Any:
    """A JSON number (or list of numbers) for a recorded/returned value, else None."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, Number):
        return float(value) if isinstance(value, float) else value
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.detach().cpu())
    if isinstance(value, (list, tuple)) and value:
        items = [as_figure(item) for item in value]
        return items if all(isinstance(item, (int, float)) for item in items) else None
    return None


def describe_exception(error: BaseException, source: str | None = None) -> dict[str, Any]:
    """Type and message; with ``source`` (the fixture's file) also the line of that file the
    exception came through last (``line``, ``code``): where in the program it happened."""
    message = str(error).strip()
    described: dict[str, Any] = {"type": type(error).__name__, "message": message[:MESSAGE_LIMIT]}
    if source is not None:
        line = None
        traceback = error.__traceback__
        while traceback is not None:
            if traceback.tb_frame.f_code.co_filename == source:
                line = traceback.tb_lineno
            traceback = traceback.tb_next
        if line is not None:
            described["line"] = line
            code = linecache.getline(source, line).split("# expect:")[0]  # a fixture's lint marker
            described["code"] = code.strip()[:200]
    return described


class Session:
    """One fixture function and the keyword arguments its ``run`` accepts."""

    def __init__(self, function: Callable, device: str) -> None:
        self.function = function
        self.device = device
        parameters = inspect.signature(function).parameters
        self.takes_hook = "step_hook" in parameters
        self.takes_record = "record" in parameters
        self.source = getattr(getattr(function, "__code__", None), "co_filename", None)

    def call(self, steps: int, hook: Callable[[], None] | None = None,
             figures: dict[str, Any] | None = None) -> tuple[Any, dict | None]:
        """``run(steps, device)``; returns (kept value, exception description or None)."""
        kwargs: dict[str, Any] = {}
        if self.takes_hook:
            kwargs["step_hook"] = hook or (lambda: None)
        if self.takes_record:
            store = figures if figures is not None else {}
            # Converted at once: a recorded tensor must not stay alive and count as kept memory.
            kwargs["record"] = lambda name, value: store.setdefault(str(name), []).append(as_figure(value))
        try:
            return self.function(steps, self.device, **kwargs), None
        except Exception as error:  # the expected outcome of some claims
            described = describe_exception(error, self.source)
            error.__traceback__ = None  # frames hold the loop's tensors
            del error
            return None, described


def measure_memory(session: Session, steps: int, preexisting: list, curve: bool) -> dict[str, Any]:
    cuda = session.device.startswith("cuda")
    recorded: dict[str, list] = {}
    per_step: list[dict[str, float]] = []
    seed_everything(0)
    gc.collect()
    meter = CudaMeter() if cuda else None
    tracker = None if cuda else StorageTracker()
    if tracker is not None:
        tracker.mark_preexisting(preexisting)
    started = [time.process_time(), time.perf_counter()]

    def read(collect: bool) -> dict[str, int]:
        if meter is None:
            return tracker.snapshot(collect=collect)
        if collect:
            gc.collect()  # cycles would otherwise hold device memory past the reading
        return meter.read()

    def hook() -> None:
        if curve:
            point = dict(read(collect=True))
            point["cpu_s"] = time.process_time() - started[0]
            point["wall_s"] = time.perf_counter() - started[1]
            per_step.append(point)

    if meter is not None:
        meter.start()
        kept, exception = session.call(steps, hook, recorded)
        figures = read(collect=True)
    else:
        with tracker:
            kept, exception = session.call(steps, hook, recorded)
            figures = read(collect=True)
    result: dict[str, Any] = {"steps": steps, **figures}
    if tracker is not None and tracker.sizes:
        largest = max(tracker.sizes)
        result["largest_allocation_bytes"] = largest
        result["largest_allocation_count"] = tracker.sizes[largest]
    result["graph_nodes"] = count_graph_nodes(kept)
    result["exception"] = exception
    named = {name: as_figure(values if len(values) > 1 else values[0]) for name, values in recorded.items()}
    if isinstance(kept, dict):
        for key, value in kept.items():
            figure = as_figure(value)
            if figure is not None:
                named.setdefault(str(key), figure)
    result["figures"] = named
    if curve and per_step:
        result["per_step"] = per_step
    del kept
    gc.collect()
    return result


def measure_time(session: Session, steps: int, repeats: int) -> dict[str, Any]:
    """Best of ``repeats`` untracked runs (the tracker itself would slow the ops down). With a
    ``step_hook`` every step's own CPU and wall time is kept too (the first step of each run,
    which follows the setup, is left out): a better per-step figure than a slope between totals."""
    best_cpu = best_wall = float("inf")
    exception = None
    step_cpu: list[float] = []
    step_wall: list[float] = []
    for _ in range(repeats):
        seed_everything(0)
        gc.collect()
        synchronize(session.device)
        stamps: list[tuple[float, float]] = []

        def hook() -> None:
            synchronize(session.device)
            stamps.append((time.process_time(), time.perf_counter()))

        cpu, wall = time.process_time(), time.perf_counter()
        kept, exception = session.call(steps, hook)
        synchronize(session.device)
        best_cpu = min(best_cpu, time.process_time() - cpu)
        best_wall = min(best_wall, time.perf_counter() - wall)
        step_cpu.extend(later[0] - earlier[0] for earlier, later in zip(stamps, stamps[1:]))
        step_wall.extend(later[1] - earlier[1] for earlier, later in zip(stamps, stamps[1:]))
        del kept
    return {"steps": steps, "cpu_s": best_cpu, "wall_s": best_wall, "step_cpu_s": step_cpu,
            "step_wall_s": step_wall, "exception": exception}


def collection_cost(session: Session, repeats: int = 3) -> float:
    """CPU time of one full ``gc.collect()`` of the fixture's objects (the frozen pre-existing
    heap excluded), best of ``repeats``: measured inside the fixture's first step (its objects
    alive) when it takes a ``step_hook``, else after a run."""
    timings: list[float] = []

    def collect() -> None:
        if timings:
            return
        for _ in range(repeats):
            started = time.process_time()
            gc.collect()
            timings.append(time.process_time() - started)

    if session.takes_hook:
        session.call(1, collect)
    collect()
    return min(timings)


def measure(path: str, function: str = "run", step_counts: tuple[int, ...] = (2, 4, 8),
            device: str = "cpu", timing: int = 0, timing_steps: tuple[int, ...] = ()) -> dict[str, Any]:
    """Every figure of one fixture function. Never raises: failures are reported in the result."""
    torch.set_num_threads(1)
    result: dict[str, Any] = {
        "fixture": path, "function": function, "device": device,
        "torch_version": str(torch.__version__), "runs": [], "timing": [], "error": None,
    }
    try:
        session = Session(load_function(path, function), device)
    except Exception as error:  # a broken fixture file is an "error" verdict, not a crash
        result["error"] = describe_exception(error)
        return result
    seed_everything(0)
    # Warm-up, tracked like the measured runs: lazy imports and caches are not the fixture's cost.
    with StorageTracker(mark_existing=False):
        session.call(1)
    gc.collect()
    # Everything alive now (torch, the fixture module, its globals) is pre-existing. Freezing it
    # takes ~165k objects out of every later gc.collect(), which then costs microseconds, not 70 ms.
    preexisting = [value for value in gc.get_objects() if issubclass(type(value), torch.Tensor)]
    gc.freeze()
    counts = sorted(set(step_counts))
    for steps in counts:
        result["runs"].append(measure_memory(session, steps, preexisting, curve=steps == counts[-1]))
    if timing:
        # The heap stays frozen: a gc.collect() in a timed loop walks the fixture's own objects,
        # not torch's (a real program would also pay for those: the figure is a lower bound).
        for steps in sorted(set(timing_steps)) or counts:
            result["timing"].append(measure_time(session, steps, timing))
        result["gc_collect_cpu_s"] = collection_cost(session)
    return result


def environment() -> dict[str, Any]:
    return {"torch_version": str(torch.__version__), "cuda": torch.cuda.is_available()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchlint.verify.probe")
    parser.add_argument("fixture")
    parser.add_argument("--function", default="run")
    parser.add_argument("--steps", default="2,4,8", help="comma-separated step counts")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--timing", type=int, default=0, metavar="REPEATS")
    parser.add_argument("--timing-steps", default="", help="comma-separated step counts of timed runs")
    args = parser.parse_args(argv)
    counts = tuple(int(part) for part in args.steps.split(","))
    timing_steps = tuple(int(part) for part in args.timing_steps.split(",") if part)
    result = measure(args.fixture, args.function, counts, args.device, args.timing, timing_steps)
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
