"""Child processes that never import from the working directory and never outlive their parent.

* ``python -m torchlint`` puts the working directory first on ``sys.path``, so an ``argparse.py``
  or ``torch.py`` there would be imported instead of the real module: ``torchlint/__main__.py``
  takes it off again before it imports anything.
* A child started as a new interpreter (``spawn``, ``forkserver``) runs ``python -c ...``, which
  puts the working directory first on the child's ``sys.path`` before it imports
  ``multiprocessing``: ``safe_start`` starts such children with ``PYTHONSAFEPATH`` set (Python
  3.11+) and, for the fork server, from the directory torchlint itself is installed in.
* ``die_with_parent`` (a worker initializer) makes a worker exit when its parent dies, however it
  dies: on Linux the kernel sends SIGKILL (``PR_SET_PDEATHSIG``); elsewhere a thread watches for
  the parent process id to change.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator

# Where the torchlint package lives: trusted, since torchlint's own code is imported from there.
INSTALL_DIRECTORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@contextlib.contextmanager
def safe_start(change_directory: bool = False) -> Iterator[None]:
    """Start new interpreters without the working directory on their ``sys.path``.

    ``change_directory`` also starts them from torchlint's install directory, which covers
    Python 3.10 (no ``PYTHONSAFEPATH``); only for children that do not resolve relative paths
    (the fork server: its children change back to our working directory themselves).
    """
    saved_flag = os.environ.get("PYTHONSAFEPATH")
    os.environ["PYTHONSAFEPATH"] = "1"
    saved_directory = None
    if change_directory:
        try:
            saved_directory = os.getcwd()
            os.chdir(INSTALL_DIRECTORY)
        except OSError:
            saved_directory = None
    try:
        yield
    finally:
        if saved_directory is not None:
            os.chdir(saved_directory)
        if saved_flag is None:
            os.environ.pop("PYTHONSAFEPATH", None)
        else:
            os.environ["PYTHONSAFEPATH"] = saved_flag


_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Exit as soon as the process ``parent`` is gone (call it first thing in a worker)."""
    import signal

    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0:
                if os.getppid() != parent:  # the parent died before the prctl
                    os._exit(1)
                return
        except (OSError, AttributeError):
            pass
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="torchlint-parent-watch").start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)
