"""Lint many files: cache lookups, then serial or process-parallel linting, in a stable order.

Workers read their own files, so the parent never holds sources; each file's outcome comes back
as soon as its chunk is done. Whatever goes wrong with one file becomes a TL000 finding for that
file and the run goes on.
"""

from __future__ import annotations

import contextlib
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
# Linting costs about 10 s and 550 MB per MB of dense source; the largest file in 563k lines of
# released PyTorch code is 0.23 MB and PyTorch's own largest is 1.4 MB. A bigger file is
# almost certainly generated, and would hold a worker for minutes.
DEFAULT_MAX_FILE_SIZE = 4 * 1024 * 1024


@dataclass(frozen=True)
class Job:
    """What linting one file needs: the same for every file of a run."""

    rules: tuple[type[Rule], ...]
    options: dict
    prefilter: bool = True
    max_file_size: int = DEFAULT_MAX_FILE_SIZE  # bytes; a larger file gets TL000 unread


@dataclass
class Outcome:
    path: str
    digest: str | None  # None: do not cache (unreadable file, crash)
    violations: list[Violation] | None  # None: content matches the cached digest
    # the other project modules the result read (see analysis.project), for the cache
    dependencies: list | None = None


@dataclass
class RunResult:
    violations: list[Violation]
    files_checked: int


def default_jobs() -> int:
    """The cores this process may run on: the default, and the cap, for ``--jobs``."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def too_large(path: str, size: int, limit: int) -> Violation:
    return invalid_file(path, f"file too large ({size} bytes > {limit}); raise the limit with --max-file-size")


# A notebook's file is mostly outputs (images in base64): its limit is this many times larger.
NOTEBOOK_SIZE_FACTOR = 16


def size_limit(path: str, job: Job) -> int:
    return job.max_file_size * (NOTEBOOK_SIZE_FACTOR if path.lower().endswith(".ipynb") else 1)


def check_file(path: str, expected_digest: str | None, job: Job) -> Outcome:
    try:
        size = os.stat(path).st_size
    except OSError:
        size = 0  # reading it says why it cannot be read
    if size > size_limit(path, job):  # never cached: the limit is not part of the cache key
        return Outcome(path, None, [too_large(path, size, size_limit(path, job))])
    try:
        data = read_source(path)  # a named pipe or device is refused, never waited on
    except OSError as error:
        return Outcome(path, None, [invalid_file(path, f"cannot read: {error.strerror or error}")])
    digest = content_hash(data)
    if digest == expected_digest:
        return Outcome(path, digest, None)
    from torchlint.analysis.project import project

    try:
        project().begin()
        violations = lint_source(data, path, job.rules, job.options, job.prefilter)
        return Outcome(path, digest, violations, project().dependencies())
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
    progress: Callable[[int], None] | None = None,
) -> RunResult:
    """``progress(1)`` is called as each file is done (from the cache or linted)."""
    found: list[Violation] = []

    def keep(path: str, violations: list[Violation]) -> None:
        ignored = ignored_codes(path)
        found.extend(violation for violation in violations if violation.code not in ignored)
        if progress is not None:
            progress(1)

    pending: list[tuple[str, str | None]] = []
    stats: dict[str, os.stat_result] = {}
    for path in files:
        if cache is not None:
            try:
                stats[path] = os.stat(path)
            except OSError:
                pass  # check_file reports why it cannot be read
            else:
                if stats[path].st_size > size_limit(path, job):  # check_file reports it, uncached
                    pending.append((path, None))
                    del stats[path]
                    continue
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
            cache.store(outcome.path, stats[outcome.path], outcome.digest, violations, outcome.dependencies)
        keep(outcome.path, violations)
    if cache is not None:
        cache.save()
    return RunResult(sorted(found), len(files))


def _outcomes(pending: list[tuple[str, str | None]], job: Job, jobs: int) -> Iterator[Outcome]:
    # Never more workers than files or cores: `--jobs 1000` must not start 1000 processes.
    workers = min(jobs, len(pending), default_jobs())
    if workers <= 1 or len(pending) < PARALLEL_MIN_FILES:
        for path, expected in pending:
            yield check_file(path, expected, job)
        return
    # Small chunks keep every worker busy to the end; a chunk's round trip costs little.
    size = max(1, min(8, len(pending) // (workers * 4)))
    chunks = [pending[start:start + size] for start in range(0, len(pending), size)]
    yield from _pool_outcomes(chunks, job, workers)


class _Worker:
    """One worker process and the chunk it is working on (``None``: idle)."""

    def __init__(self, context, job: Job) -> None:
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_work, args=(child, job, os.getpid()), daemon=True)
        self.process.start()
        child.close()
        self.chunk: list[tuple[str, str | None]] | None = None
        self.answered = 0  # files of the chunk whose outcome came back


def _pool_outcomes(chunks, job: Job, workers: int) -> Iterator[Outcome]:
    """Outcomes of every file in ``chunks``, in completion order, from ``workers`` processes.

    Workers send each file's outcome as soon as it is done, so when one dies (a crash in native
    code, or killed) the file it was on is known: that file is retried once on its own, and
    reported as TL000 if it kills a worker again; the rest of its chunk goes back in the queue.
    Whatever ends this generator early (Ctrl-C, an error) kills the workers at once, and they
    also die with this process however it ends.
    """
    import multiprocessing
    from collections import deque
    from multiprocessing.connection import wait

    from torchlint.process import safe_start

    # fork starts workers with everything already imported; elsewhere use the platform default.
    context = multiprocessing.get_context("fork") if sys.platform.startswith("linux") else multiprocessing.get_context()
    queue: deque[list[tuple[str, str | None]]] = deque(chunks)
    retried: set[str] = set()
    pool: list[_Worker] = []
    spawns = context.get_start_method() != "fork"
    try:
        while queue or any(worker.chunk is not None for worker in pool):
            while queue and len(pool) < workers:
                with safe_start() if spawns else contextlib.nullcontext():
                    pool.append(_Worker(context, job))
            for worker in list(pool):
                if worker.chunk is None and queue:
                    worker.chunk, worker.answered = queue.popleft(), 0
                    try:
                        worker.connection.send(worker.chunk)
                    except OSError:  # it died while idle: its chunk goes to another worker
                        queue.appendleft(worker.chunk)
                        _retire(worker, pool)
            busy = [worker for worker in pool if worker.chunk is not None]
            if not busy:
                continue
            ready = wait([worker.connection for worker in busy] + [worker.process.sentinel for worker in busy])
            for worker in busy:
                if worker.connection not in ready and worker.process.sentinel not in ready:
                    continue
                try:
                    while worker.connection.poll():
                        message = worker.connection.recv()
                        if message is None:  # chunk done
                            worker.chunk = None
                            break
                        worker.answered += 1
                        yield message
                    if worker.chunk is None or worker.process.is_alive():
                        continue
                except (EOFError, OSError):
                    pass
                # The worker died: requeue the rest of its chunk, retry the file it was on once.
                culprit, *rest = worker.chunk[worker.answered:]
                _retire(worker, pool)
                if rest:
                    queue.append(rest)
                if culprit[0] in retried:
                    yield Outcome(culprit[0], None, [invalid_file(
                        culprit[0], "internal error: the worker process crashed on this file")])
                else:
                    retried.add(culprit[0])
                    queue.append([culprit])
        for worker in pool:  # done: let them exit on their own
            try:
                worker.connection.send(None)
            except OSError:
                pass
        for worker in pool:
            worker.process.join(1)
    finally:
        for worker in pool:
            if worker.process.is_alive():
                worker.process.kill()
        for worker in pool:
            worker.process.join()
            worker.connection.close()


def _retire(worker: _Worker, pool: list[_Worker]) -> None:
    worker.chunk = None
    worker.process.kill()
    worker.process.join()
    worker.connection.close()
    pool.remove(worker)


def _work(connection, job: Job, parent: int) -> None:
    """A worker: lint the chunks the parent sends, one outcome a file, ``None`` after a chunk."""
    import signal

    from torchlint.process import die_with_parent

    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    while True:
        try:
            chunk = connection.recv()
        except (EOFError, OSError):
            return
        if chunk is None:
            return
        for path, expected in chunk:
            outcome = check_file(path, expected, job)
            try:
                connection.send(outcome)
            except (OSError, EOFError):
                return
            except Exception as error:  # e.g. a result that cannot be pickled
                connection.send(Outcome(path, None, [_internal_error(path, error)]))
        connection.send(None)


def lint_stdin(data: bytes, path: str, job: Job, ignored: frozenset[str]) -> RunResult:
    if len(data) > size_limit(path, job):
        return RunResult([v for v in [too_large(path, len(data), size_limit(path, job))] if v.code not in ignored], 1)
    try:
        violations = lint_source(data, path, job.rules, job.options, job.prefilter)
    except Exception as error:
        violations = [_internal_error(path, error)]
    return RunResult(sorted(v for v in violations if v.code not in ignored), 1)
