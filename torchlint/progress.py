"""A progress line on stderr for long runs on a terminal: files done / total, rate, time left.

Small on purpose (no dependency, nothing imported at start-up beyond ``os``/``sys``/``time``):
it is drawn only after ``DELAY`` seconds, at most every ``INTERVAL``, and erased at the end, so
short runs never show it and the report that follows starts on a clean line.
"""

from __future__ import annotations

import os
import sys
import time

DELAY = 2.0  # seconds before the line first appears
INTERVAL = 0.2  # seconds between redraws


def wanted(stream=None, quiet: bool = False) -> bool:
    """Only for a person watching a terminal: never with ``-q``, in CI, or into a pipe or file."""
    stream = sys.stderr if stream is None else stream
    if quiet or in_ci():
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def in_ci() -> bool:
    """``CI`` set to anything but empty, 0 or false, as CI services do."""
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


class Progress:
    def __init__(self, total: int, stream=None, clock=time.monotonic) -> None:
        self.total = total
        self.stream = sys.stderr if stream is None else stream
        self.clock = clock
        self.started = clock()
        self.drawn_at: float | None = None
        self.done = 0

    def advance(self, count: int = 1) -> None:
        self.done += count
        now = self.clock()
        if now - self.started < DELAY or (self.drawn_at is not None and now - self.drawn_at < INTERVAL):
            return
        self.drawn_at = now
        self._write("\r" + self.line(now)[: self._width() - 1] + "\033[K")  # one row: \r can redraw it

    def line(self, now: float) -> str:
        elapsed = max(now - self.started, 1e-9)
        rate = self.done / elapsed
        percent = 100 * self.done // max(self.total, 1)
        text = f"torchlint: {self.done}/{self.total} files ({percent}%), {rate:.1f} files/s"
        if 0 < self.done < self.total:
            text += f", about {_duration((self.total - self.done) / rate)} left"
        return text

    def _width(self) -> int:
        try:
            return os.get_terminal_size(self.stream.fileno()).columns or 80
        except (AttributeError, OSError, ValueError):  # not a real terminal (a test's stand-in)
            return 80

    def close(self) -> None:
        """Erase the line (if it was ever drawn)."""
        if self.drawn_at is not None:
            self._write("\r\033[K")
            self.drawn_at = None

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: progress is not worth failing for
            pass


def _duration(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
