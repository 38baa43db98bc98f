"""Which files to lint: explicit files as given, directories walked for ``*.py``."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from torchlint.config import matches


class PathError(Exception):
    """A path given on the command line (or in --files-from) that does not exist."""


def collect_files(
    paths: Sequence[str], exclude: Sequence[str], root: str, force_exclude: bool = False
) -> list[str]:
    """Sorted, de-duplicated files to lint.

    Explicit files are always linted (whatever their extension), unless ``force_exclude``, which
    pre-commit users want because pre-commit passes every file explicitly. Walking never enters
    symlinked directories, so a link cycle cannot loop and no file is reported twice.
    """
    excluded = _Excluder(exclude, root)
    found: set[str] = set()
    for given in paths:
        path = os.path.normpath(given)
        if force_exclude and excluded.with_parents(path):
            continue
        if os.path.isdir(path):
            found.update(_walk(path, excluded))
        elif os.path.exists(path) or os.path.islink(path):
            found.add(path)
        else:
            raise PathError(f"{given}: no such file or directory")
    return sorted(found)


def read_path_list(lines: Iterable[str]) -> list[str]:
    """One path a line, as ``git ls-files`` prints them; blank lines ignored."""
    return [line.rstrip("\r\n") for line in lines if line.strip()]


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


def _walk(directory: str, excluded: _Excluder) -> Iterable[str]:
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return  # an unreadable directory has nothing we could lint
    for entry in entries:
        path = os.path.normpath(entry.path)
        try:
            if entry.is_dir(follow_symlinks=False):
                if not excluded(path) and not os.path.exists(os.path.join(path, "pyvenv.cfg")):
                    yield from _walk(path, excluded)
            elif entry.name.endswith(".py") and entry.is_file() and not excluded(path):
                yield path  # symlinked files count; dangling links don't (is_file is False)
        except OSError:
            continue
