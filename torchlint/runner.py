"""Lint many files: cache lookups, then serial or process-parallel linting, in a stable order.

Workers read their own files, so the parent never holds sources; each file's outcome comes back
as soon as its chunk is done. Whatever goes wrong with one file becomes a TL000 finding for that
file and the run goes on.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from torchlint.cache import Cache, content_hash
from torchlint.engine import invalid_file, lint_source
from torchlint.files import read_source
from torchlint.rule import Rule
from torchlint.violation import Violation

# Below this many files to lint, starting worker processes costs more than it saves.
PARALLEL_MIN_FILES = 4


@dataclass(frozen=True)
class Job:
    """What linting one file needs: the same for every file of a run."""

    rules: tuple[type[Rule], ...]
    options: dict
    prefilter: bool = True


@dataclass
class Outcome:
    path: str
    digest: str | None  # None: do not cache (unreadable file, crash)
    violations: list[Violation] | None  # None: content matches the cached digest


@dataclass
class RunResult:
    violations: list[Violation]
    files_checked: int


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def check_file(path: str, expected_digest: str | None, job: Job) -> Outcome:
    try:
        data = read_source(path)  # a named pipe or device is refused, never waited on
    except OSError as error:
        return Outcome(path, None, [invalid_file(path, f"cannot read: {error.strerror or error}")])
    digest = content_hash(data)
    if digest == expected_digest:
        return Outcome(path, digest, None)
    try:
        return Outcome(path, digest, lint_source(data, path, job.rules, job.options, job.prefilter))
    except Exception as error:  # never a traceback: the file gets a TL000 instead
        return Outcome(path, None, [_internal_error(path, error)])


def _internal_error(path: str, error: BaseException) -> Violation:
    return invalid_file(path, f"internal error: {type(error).__name__}: {error}")


def lint_files(
    files: Sequence[str],
    job: Job,
    cache: Cache | None,
    jobs: int,
    ignored_codes: Callable[[str], frozenset[str]],
) -> RunResult:
    found: list[Violation] = []

    def keep(path: str, violations: list[Violation]) -> None:
        ignored = ignored_codes(path)
        found.extend(violation for violation in violations if violation.code not in ignored)

    pending: list[tuple[str, str | None]] = []
    stats: dict[str, os.stat_result] = {}
    for path in files:
        if cache is not None:
            try:
                stats[path] = os.stat(path)
            except OSError:
                pass  # check_file reports why it cannot be read
            else:
                cached = cache.unchanged(path, stats[path])
                if cached is not None:
                    keep(path, cached)
                    del stats[path]
                    continue
        pending.append((path, cache.known_hash(path) if cache else None))

    for outcome in _outcomes(pending, job, jobs):
        violations = outcome.violations
        if violations is None:  # same content as cached, only the mtime moved
            violations = cache.violations(outcome.path) if cache else None
            if violations is None:
                violations = check_file(outcome.path, None, job).violations or []
        if cache is not None and outcome.digest is not None and outcome.path in stats:
            cache.store(outcome.path, stats[outcome.path], outcome.digest, violations)
        keep(outcome.path, violations)
    if cache is not None:
        cache.save()
    return RunResult(sorted(found), len(files))


def _outcomes(pending: list[tuple[str, str | None]], job: Job, jobs: int) -> Iterator[Outcome]:
    if jobs <= 1 or len(pending) < PARALLEL_MIN_FILES:
        for path, expected in pending:
            yield check_file(path, expected, job)
        return
    workers = min(jobs, len(pending))
    # Small chunks keep both workers busy to the end; a chunk's round trip costs little.
    size = max(1, min(8, len(pending) // (workers * 4)))
    chunks = [pending[start:start + size] for start in range(0, len(pending), size)]
    crashed: list[tuple[str, str | None]] = []
    yield from _pool_outcomes(chunks, job, workers, crashed)
    if crashed:
        # A worker died (a crash in native code, or killed): retry file by file so only the
        # culprit is lost, and report it instead of the whole chunk.
        lost: list[tuple[str, str | None]] = []
        yield from _pool_outcomes([[item] for item in crashed], job, workers, lost)
        for path, _ in lost:
            yield Outcome(path, None, [invalid_file(path, "internal error: the worker process crashed on this file")])


def _pool_outcomes(chunks, job: Job, workers: int, crashed: list) -> Iterator[Outcome]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    # fork starts workers with everything already imported; elsewhere use the platform default.
    context = multiprocessing.get_context("fork") if sys.platform.startswith("linux") else None
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_set_job, initargs=(job,)) as pool:
        futures = {pool.submit(_check_chunk, chunk): chunk for chunk in chunks}
        for future in as_completed(futures):
            try:
                outcomes = future.result()
            except BrokenProcessPool:
                crashed.extend(futures[future])
                continue
            except Exception as error:  # e.g. a result that cannot be pickled back
                outcomes = [Outcome(path, None, [_internal_error(path, error)]) for path, _ in futures[future]]
            yield from outcomes


_worker_job: Job | None = None


def _set_job(job: Job) -> None:
    global _worker_job
    _worker_job = job


def _check_chunk(chunk: list[tuple[str, str | None]]) -> list[Outcome]:
    assert _worker_job is not None
    return [check_file(path, expected, _worker_job) for path, expected in chunk]


def lint_stdin(data: bytes, path: str, job: Job, ignored: frozenset[str]) -> RunResult:
    try:
        violations = lint_source(data, path, job.rules, job.options, job.prefilter)
    except Exception as error:
        violations = [_internal_error(path, error)]
    return RunResult(sorted(v for v in violations if v.code not in ignored), 1)
