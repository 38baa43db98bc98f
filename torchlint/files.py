"""Which files to lint: explicit files as given, directories walked for ``*.py`` and ``*.ipynb``."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from torchlint.config import Settings, matches


LINTED_SUFFIXES = (".py", ".ipynb")  # what a directory walk picks up (notebooks like ruff)


class PathError(Exception):
    """A path given on the command line that does not exist."""


@dataclass
class Collected:
    """The files to lint, sorted, each once; the paths that could not be linted or walked, as
    (path, reason) pairs, which the run reports as ``TL000``; and the paths listed in
    ``--files-from`` that do not exist, which make the run exit 2 after linting the others."""

    files: list[str] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def collect_files(
    paths: Sequence[str],
    settings_for: Callable[[str], Settings],
    force_exclude: bool = False,
    listed: Sequence[str] = (),
) -> Collected:
    """Sorted, de-duplicated files to lint.

    ``paths`` come from the command line: one that does not exist raises ``PathError``. ``listed``
    come from ``--files-from``: one that does not exist is reported in ``missing`` and the others
    are linted.
    ``settings_for(directory)`` gives the settings (the exclude patterns) that apply in a
    directory. Explicit files are always linted (whatever their extension), unless
    ``force_exclude``, which pre-commit users want because pre-commit passes every file
    explicitly. A file reached twice (relative and absolute spellings, a symlink, a hard link) is
    linted once, under the first spelling met. Walking never enters symlinked directories, so a
    link cycle cannot loop. Named pipes and devices are never opened: one named explicitly is a
    problem, one met in a walk is skipped. An unreadable directory is a problem.
    """
    collector = _Collector(settings_for)
    for given in paths:
        collector.add(given, force_exclude, must_exist=True)
    for given in listed:
        collector.add(given, force_exclude, must_exist=False)
    return Collected(sorted(collector.found.values()), collector.problems, collector.missing)


def read_path_list(lines: Iterable[str]) -> list[str]:
    """One path a line, as ``git ls-files`` prints them; blank lines ignored."""
    return [line.rstrip("\r\n") for line in lines if line.strip()]


def read_source(path: str) -> bytes:
    """A regular file's bytes. A named pipe or device is refused without blocking on it."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with open(descriptor, "rb") as handle:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(f"not a regular file ({_kind(mode)})")
        return handle.read()


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a file"


class _Collector:
    def __init__(self, settings_for: Callable[[str], Settings]) -> None:
        self.settings_for = settings_for
        self.found: dict[object, str] = {}  # (device, inode) -> first spelling
        self.problems: list[tuple[str, str]] = []
        self.missing: list[str] = []
        self._excluders: dict[int, tuple[Settings, _Excluder]] = {}

    def excluder(self, directory: str) -> _Excluder:
        settings = self.settings_for(directory)
        known = self._excluders.get(id(settings))
        if known is None or known[0] is not settings:
            known = self._excluders[id(settings)] = (settings, _Excluder(settings.exclude, settings.root))
        return known[1]

    def keep(self, identity: object, path: str) -> None:
        self.found.setdefault(identity, path)

    def add(self, given: str, force_exclude: bool, must_exist: bool) -> None:
        path = os.path.normpath(given)
        if force_exclude and self.excluder(os.path.dirname(os.path.abspath(path))).with_parents(path):
            return
        try:
            info = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            if os.path.islink(path):  # a dangling link: the run reports it as unreadable
                self.keep(("link", os.path.abspath(path)), path)
            elif must_exist:
                raise PathError(f"{given}: no such file or directory") from None
            else:
                self.missing.append(given)
            return
        except OSError as error:  # no search permission on a directory above it, a link loop ...
            self.problems.append((path, f"cannot read: {error.strerror or error}"))
            return
        if stat.S_ISDIR(info.st_mode):
            self.walk(path)
        elif stat.S_ISREG(info.st_mode):
            self.keep((info.st_dev, info.st_ino), path)
        else:
            self.problems.append((path, f"cannot read: not a regular file ({_kind(info.st_mode)})"))

    def walk(self, top: str) -> None:
        # Depth first in sorted order, without recursion: a very deep tree cannot overflow.
        stack = [top]
        while stack:
            directory = stack.pop()
            try:
                with os.scandir(directory) as scan:
                    entries = sorted(scan, key=lambda entry: entry.name)
            except OSError as error:
                self.problems.append((directory, f"cannot read directory: {error.strerror or error}"))
                continue
            excluded = self.excluder(os.path.abspath(directory))
            subdirectories = []
            for entry in entries:
                path = os.path.normpath(entry.path)
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if not excluded(path) and not os.path.exists(os.path.join(path, "pyvenv.cfg")):
                            subdirectories.append(path)
                    elif entry.name.endswith(LINTED_SUFFIXES) and entry.is_file() and not excluded(path):
                        info = entry.stat()  # follows a symlinked file; dangling links never get here
                        self.keep((info.st_dev, info.st_ino), path)
                except OSError:
                    continue
            stack.extend(reversed(subdirectories))


class _Excluder:
    def __init__(self, patterns: Sequence[str], root: str) -> None:
        self.patterns = [pattern.rstrip("/") for pattern in patterns if pattern.strip()]
        self.root = root

    def __call__(self, path: str) -> bool:
        if not self.patterns:
            return False
        relative = os.path.relpath(os.path.abspath(path), self.root).replace(os.sep, "/")
        name = os.path.basename(path)
        return any(matches(pattern, relative, name, path) for pattern in self.patterns)

    def with_parents(self, path: str) -> bool:
        """Is the path or one of its directories (up to the root) excluded?"""
        path = os.path.abspath(path)
        while True:
            if self(path):
                return True
            parent = os.path.dirname(path)
            if parent == path or not parent.startswith(self.root):
                return False
            path = parent
