"""The other modules of the linted project: where an import leads, and that module's analysis.

A helper imported from another file of the project (``from .losses import compute_loss``,
``import utils`` then ``utils.train_step(...)``), a base class defined elsewhere, a model class
imported from ``models.py``: the analysis asks the project for the defining module's own
``Analysis`` and reads the answer there (its summaries, its classes). Modules are found on disk
from the importing file: relative imports through its package, absolute imports from its own
directory and the directories above it, up to the project root (the nearest ``pyproject.toml``,
``setup.py`` or ``.git``). Installed packages are never read.

Modules are parsed on first use, only when a rule's question reaches them, and kept for the
process (the most recently used ``MAX_MODULES``). Every module consulted while linting a file is
recorded with its content hash (``consulted``): the cache re-lints the file when one of them
changes. Import chains are followed to ``MAX_HOPS`` re-exports, and a module that is being
analysed when it is asked for again (an import cycle) is unknown, not an error.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict

MAX_MODULES = 64
MAX_HOPS = 3
MAX_MODULE_BYTES = 2_000_000
PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
# Top-level names that are never the project's own modules: resolving them would only cost stats.
EXTERNAL_ROOTS = frozenset({
    "torch", "torchvision", "torchaudio", "torchtext", "numpy", "np", "scipy", "pandas", "sklearn",
    "matplotlib", "typing", "typing_extensions", "collections", "functools", "itertools", "os", "sys",
    "re", "math", "json", "time", "random", "logging", "argparse", "dataclasses", "abc", "copy",
    "pathlib", "warnings", "contextlib", "transformers", "pytorch_lightning", "lightning", "einops",
    "timm", "tqdm", "__future__",
})


class Project:
    """Per process: the modules of the projects being linted, analysed on demand."""

    def __init__(self) -> None:
        self._analyses: OrderedDict[str, object] = OrderedDict()
        self._loading: set[str] = set()
        self._roots: dict[str, str | None] = {}
        # the modules read for the file being linted: path -> (sha256, mtime_ns, size) as read
        self.consulted: dict[str, tuple[str, int, int]] = {}

    def begin(self) -> None:
        """Start linting a new file: forget what the last one consulted."""
        self.consulted = {}

    def note(self, analysis) -> None:
        """Record that the file being linted read an answer from ``analysis``'s module (and so
        from every module that one's answers read)."""
        if analysis.digest is not None:
            self.consulted[analysis.path] = analysis.digest
        self.consulted.update(analysis.project_dependencies)

    def dependencies(self) -> list[list]:
        """What the file just linted read from other modules, for the cache:
        ``[path, sha256, mtime_ns, size]`` each."""
        return [[path, *signature] for path, signature in sorted(self.consulted.items())]

    # ------------------------------------------------------------------ finding modules

    @staticmethod
    def _is_file(path: str) -> bool:
        return os.path.isfile(path)

    def _root(self, directory: str) -> str | None:
        if directory in self._roots:
            return self._roots[directory]
        root = None
        if any(os.path.lexists(os.path.join(directory, marker)) for marker in PROJECT_MARKERS):
            root = directory
        else:
            parent = os.path.dirname(directory)
            root = self._root(parent) if parent != directory else None
        self._roots[directory] = root
        return root

    def _module_file(self, base: str, parts: list[str]) -> str | None:
        stem = os.path.join(base, *parts) if parts else base
        for candidate in (stem + ".py", os.path.join(stem, "__init__.py")) if parts else (os.path.join(stem, "__init__.py"),):
            if self._is_file(candidate):
                return candidate
        return None

    def _search_directories(self, importer: str) -> list[str]:
        directory = os.path.dirname(os.path.abspath(importer))
        root = self._root(directory)
        found = []
        current = directory
        while True:
            found.append(current)
            if current == root or len(found) > 8:
                break
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
        if root is not None and os.path.isdir(os.path.join(root, "src")):
            found.append(os.path.join(root, "src"))
        return found if root is not None else found[:2]

    def locate(self, importer: str, target: str) -> tuple[str, list[str]] | None:
        """The file of the project module that ``target`` (``.losses.compute_loss``,
        ``models.Net``, ``utils``) names from ``importer``, and the attribute path left inside
        it (``["compute_loss"]``)."""
        level = len(target) - len(target.lstrip("."))
        parts = [part for part in target[level:].split(".") if part]
        if level:
            base = os.path.dirname(os.path.abspath(importer))
            for _ in range(level - 1):
                base = os.path.dirname(base)
            bases = [base]
            shortest = 0
        else:
            if not parts or parts[0] in EXTERNAL_ROOTS:
                return None
            bases = self._search_directories(importer)
            shortest = 1
        for size in range(len(parts), shortest - 1, -1):
            for base in bases:
                path = self._module_file(base, parts[:size])
                if path is not None and os.path.abspath(path) != os.path.abspath(importer):
                    return path, parts[size:]
        return None

    # ------------------------------------------------------------------ analyses

    def analysis(self, path: str):
        """The analysis of the project module in ``path``, or None (unreadable, unparsable,
        too large, or being analysed already)."""
        path = os.path.abspath(path)
        if path in self._loading:
            return None
        try:
            stat = os.stat(path)
        except OSError:
            return None
        signature = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        if path in self._analyses and self._analyses[path][0] == signature:
            self._analyses.move_to_end(path)
            found = self._analyses[path][1]
            if found is not None:
                self.note(found)
            return found
        self._loading.add(path)
        try:
            found = self._analyse(path, (stat.st_mtime_ns, stat.st_size))
        finally:
            self._loading.discard(path)
        self._analyses[path] = (signature, found)
        while len(self._analyses) > MAX_MODULES:
            self._analyses.popitem(last=False)
        if found is not None:
            self.note(found)
        return found

    def _analyse(self, path: str, stamp: tuple[int, int]):
        from torchlint.analysis import Analysis
        from torchlint.engine import SourceError, decode_source, parse

        try:
            with open(path, "rb") as handle:
                data = handle.read(MAX_MODULE_BYTES + 1)
            if len(data) > MAX_MODULE_BYTES:
                return None
            text = decode_source(data)
            module = parse(text)
            found = Analysis(module, path, text)
        except (OSError, SourceError, RecursionError, ValueError):
            return None
        except Exception:  # another module's trouble never fails this file's lint
            return None
        found.digest = (hashlib.sha256(data).hexdigest(), *stamp)
        return found

    def definition(self, analysis, qualified: str, hops: int = 0):
        """The scope (function or class) that ``qualified`` — an entry of ``analysis.imports``
        plus attributes, as in ``.losses.compute_loss`` — names in a project module."""
        if hops > MAX_HOPS:
            return None
        located = self.locate(analysis.path, qualified)
        if located is None:
            return None
        path, attributes = located
        target = self.analysis(path)
        if target is None or len(attributes) != 1:
            return None
        return target.module_definition(attributes[0], hops + 1)


_PROJECT = Project()


def project() -> Project:
    return _PROJECT
