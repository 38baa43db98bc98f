"""Run fixture probes, each in a fresh process, a few at a time.

Each fixture runs in its own process forked from a fork server that has imported torch and nothing
else: allocator state, imported fixture modules and caches never leak from one measurement into
the next, and the ~2 s ``import torch`` is paid once per verify run instead of once per fixture.
(On platforms without fork, ``spawn`` gives the same isolation at the full import cost.)
"""

from __future__ import annotations

import multiprocessing
import os
import time
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any

DEFAULT_TIMEOUT = 120.0


@dataclass(frozen=True)
class ProbeRequest:
    path: str
    function: str = "run"
    step_counts: tuple[int, ...] = (2, 4, 8)
    device: str = "cpu"
    timing: int = 0  # repeats of timed, untracked runs (time claims); 0 = memory only
    timing_steps: tuple[int, ...] = ()  # step counts of the timed runs; () = step_counts


def _child(request: ProbeRequest, sender) -> None:
    from torchlint.verify.probe import measure

    started = time.process_time()
    try:
        result = measure(request.path, request.function, request.step_counts, request.device, request.timing,
                         request.timing_steps)
    except BaseException as error:  # report, never hang the parent
        result = {"error": {"type": type(error).__name__, "message": str(error)[:500]}}
    result["probe_cpu_s"] = round(time.process_time() - started, 3)
    sender.send(result)
    sender.close()


def _environment_child(sender) -> None:
    from torchlint.verify.probe import environment

    sender.send(environment())
    sender.close()


def environment() -> dict[str, Any]:
    """torch version and CUDA availability, asked of a probe process (the parent never imports torch)."""
    context = _context()
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_environment_child, args=(sender,), daemon=True)
    _start(process)
    sender.close()
    try:
        if receiver.poll(DEFAULT_TIMEOUT):
            return receiver.recv()
    except EOFError:
        pass
    finally:
        process.join(5)
    return {"torch_version": None, "cuda": False, "error": f"probe process failed (exit code {process.exitcode})"}


def _context():
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" not in methods:
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torchlint.verify.preload"])  # imports torch once, freezes it
    # The fork server is a new interpreter (`python -c ...`): started from here, a `torch.py` or
    # `multiprocessing.py` in the working directory would be imported instead of the real one.
    from multiprocessing import forkserver

    from torchlint.process import safe_start

    with safe_start(change_directory=True):
        forkserver.ensure_running()
    return context


def _start(process) -> None:
    """Start a probe process; one spawned (no fork server) gets no working directory on its path."""
    from torchlint.process import safe_start

    with safe_start():
        process.start()


def _failure(request: ProbeRequest, kind: str, message: str) -> dict[str, Any]:
    return {"fixture": request.path, "function": request.function, "device": request.device,
            "runs": [], "timing": [], "error": {"type": kind, "message": message}}


def run_probes(requests: list[ProbeRequest], jobs: int | None = None,
               timeout: float = DEFAULT_TIMEOUT) -> list[dict[str, Any]]:
    """Measurements for every request, in request order."""
    jobs = max(1, jobs or min(2, os.cpu_count() or 1))
    context = _context()
    results: list[dict[str, Any] | None] = [None] * len(requests)
    pending = list(enumerate(requests))
    running: dict[int, tuple[Any, Any, float]] = {}
    while pending or running:
        while pending and len(running) < jobs:
            index, request = pending.pop(0)
            receiver, sender = context.Pipe(duplex=False)
            process = context.Process(target=_child, args=(request, sender), daemon=True)
            _start(process)
            sender.close()
            running[index] = (process, receiver, time.monotonic())
        for index, (process, receiver, started) in list(running.items()):
            request = requests[index]
            result = None
            if receiver.poll():
                try:
                    result = receiver.recv()
                except EOFError:  # the pipe closed without a result: the process died
                    process.join(5)
                    result = _failure(request, "Crash", f"probe process died (exit code {process.exitcode})")
            elif not process.is_alive():
                result = _failure(request, "Crash", f"probe process died (exit code {process.exitcode})")
            elif time.monotonic() - started > timeout:
                process.kill()
                result = _failure(request, "Timeout", f"no result after {timeout:.0f} s")
            if result is None:
                continue
            process.join(5)
            receiver.close()
            results[index] = result
            del running[index]
        if running:
            wait([entry[1] for entry in running.values()] + [entry[0].sentinel for entry in running.values()],
                 timeout=0.5)
    return results  # type: ignore[return-value]
