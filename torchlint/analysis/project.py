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
import re
import time
from collections import OrderedDict

from torchlint.config import ancestors

MAX_MODULES = 64
MAX_HOPS = 3
LOCATE_SECONDS = 5.0  # how long where an import leads is remembered
MAX_IMPORTERS = 4  # modules read to learn what a helper's callers hand it
MAX_SCANNED_FILES = 2000  # files of a project looked at for those callers
INDEX_SECONDS = 30.0  # how long a project's index of calls and imports is remembered
CALLED_NAME_RE = re.compile(r"(\w+)\s*\(")
IMPORT_LINE_RE = re.compile(r"^[ \t]*(?:from[ \t]+\S+[ \t]+)?import[ \t]+.*$", re.M)
WORD_RE = re.compile(r"\w+")
SKIPPED_FOLDERS = frozenset({"venv", "env", "site-packages", "node_modules", "build", "dist", "__pycache__"})
# A module analysed for another file's questions: helpers and models of user code are small; a
# library's core module over this size costs more than its answers are worth (measured on timm:
# with no limit the index added 60% to a cold run, with this one 16%).
MAX_MODULE_BYTES = 60_000
MAX_TEXT_BYTES = 2_000_000  # read as text (substring tests, the class index with Python's parser)
# Base class names that make a class a module (as analysis.vocabulary.MODULE_CLASS_RE says).
MODULE_BASE_RE = re.compile(r"^(Module|LightningModule|PreTrainedModel)$")
PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
# Top-level names that are never the project's own modules: resolving them would only cost stats.
EXTERNAL_ROOTS = frozenset({
    "torch", "torchvision", "torchaudio", "torchtext", "numpy", "np", "scipy", "pandas", "sklearn",
    "matplotlib", "typing", "typing_extensions", "collections", "functools", "itertools", "os", "sys",
    "re", "math", "json", "time", "random", "logging", "argparse", "dataclasses", "abc", "copy",
    "pathlib", "warnings", "contextlib", "transformers", "pytorch_lightning", "lightning", "einops",
    "timm", "tqdm", "__future__",
})


class _Read:
    """A module file as read: its stat signature, bytes, (sha256, mtime_ns, size), and text."""

    __slots__ = ("signature", "data", "digest", "_text")

    def __init__(self, signature: tuple, data: bytes, digest: tuple) -> None:
        self.signature, self.data, self.digest, self._text = signature, data, digest, None

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self.data.decode("utf-8", "replace")
        return self._text


class Project:
    """Per process: the modules of the projects being linted, analysed on demand."""

    def __init__(self) -> None:
        self._analyses: OrderedDict[str, object] = OrderedDict()
        self._loading: set[str] = set()
        self._roots: dict[str, str | None] = {}
        self._reads: dict[str, _Read] = {}
        self._located: dict[tuple, tuple] = {}
        self._importers: dict[object, tuple[str, str]] = {}  # see _importer_parts
        self._mentions: dict[tuple, tuple] = {}  # mentions' answers while one file is linted
        self._mentions_for: dict | None = None  # the ``consulted`` record they were read for
        self._indexes: dict[str, tuple] = {}
        self._listings: dict[tuple, tuple] = {}
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
        for current in ancestors(directory):
            found.append(current)
            if current == root or len(found) > 8:
                break
        if root is not None and os.path.isdir(os.path.join(root, "src")):
            found.append(os.path.join(root, "src"))
        if root is not None:
            return found
        # no project marker (an unpacked wheel, a copied folder): the directory that holds the
        # top-level package of the importer, as Python's own import path would have it
        for top in ancestors(directory):
            if not self._is_file(os.path.join(top, "__init__.py")):
                break
        return found[:2] if top in found[:2] else [*found[:2], top]

    def locate(self, importer: str, target: str) -> tuple[str, list[str]] | None:
        """The file of the project module that ``target`` (``.losses.compute_loss``,
        ``models.Net``, ``utils``) names from ``importer``, and the attribute path left inside
        it (``["compute_loss"]``). Answers are kept for a few seconds (files appear and go)."""
        directory, name = self._importer_parts(importer)
        key = (directory, target, name)
        now = time.monotonic()
        known = self._located.get(key)
        if known is not None and now - known[0] < LOCATE_SECONDS:
            return known[1]
        found = self._locate(importer, target)
        if len(self._located) > 20_000:
            self._located.clear()
        self._located[key] = (now, found)
        return found

    def _importer_parts(self, importer: str) -> tuple[str, str]:
        """The importing file's absolute directory and base name, remembered per path (and
        working directory, for a relative one): ``locate`` runs for most calls a rule asks
        about, and the path arithmetic cost more than the answer's lookup."""
        key = importer if os.path.isabs(importer) else (importer, os.getcwd())
        parts = self._importers.get(key)
        if parts is None:
            if len(self._importers) > 20_000:
                self._importers.clear()
            parts = self._importers[key] = (os.path.dirname(os.path.abspath(importer)), os.path.basename(importer))
        return parts

    def _locate(self, importer: str, target: str) -> tuple[str, list[str]] | None:
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
        root = self._root(os.path.dirname(os.path.abspath(importer))) if not level and len(parts) > 1 else None
        if root is not None and self._is_file(os.path.join(root, "__init__.py")):
            # the project's root is its package, installed under another name (`TTS.utils.measures`
            # for `utils/measures.py` of a checkout whose setup.py maps the package onto it)
            for size in range(len(parts), 1, -1):
                path = self._module_file(root, parts[1:size])
                if path is not None and os.path.abspath(path) != os.path.abspath(importer):
                    return path, parts[size:]
        return None

    # ------------------------------------------------------------------ modules that import one

    def importers(self, path: str, name: str) -> list:
        """Analyses of the project modules that import the module ``path`` and call ``name``
        (their text calls ``name(`` and imports a module of that name), at most
        ``MAX_IMPORTERS``: where a helper's arguments come from. A module with no project
        marker above it is searched for in its own directory only."""
        path = os.path.abspath(path)
        directory = os.path.dirname(path)
        stem = os.path.splitext(os.path.basename(path))[0]
        if stem == "__init__":
            stem = os.path.basename(directory)
        root = self._root(directory)
        found = []
        for candidate, called, imported in self._call_index(root if root is not None else directory, root is not None):
            if name not in called or stem not in imported or candidate == path:
                continue
            analysis = self.analysis(candidate)
            if analysis is not None:
                found.append(analysis)
                if len(found) >= MAX_IMPORTERS:
                    break
        return found

    def _call_index(self, base: str, recursive: bool) -> list[tuple[str, frozenset, frozenset]]:
        """For each ``.py`` file under ``base`` (hidden, virtualenv and build folders skipped; at
        most ``MAX_SCANNED_FILES``): the names it calls and the module names its imports
        mention. Built from the files' text, remembered for ``INDEX_SECONDS``."""
        key = (base, recursive)
        now = time.monotonic()
        known = self._listings.get(key)
        if known is not None and now - known[0] < INDEX_SECONDS:
            return known[1]
        entries = []
        for current, folders, names in os.walk(base):
            folders[:] = sorted(folder for folder in folders if not folder.startswith(".")
                                and folder not in SKIPPED_FOLDERS) if recursive else []
            for file_name in sorted(names):
                if not file_name.endswith(".py"):
                    continue
                file_path = os.path.join(current, file_name)
                text = self._peek(file_path)
                if text is None or "import" not in text:
                    continue
                imported = frozenset(word for line in IMPORT_LINE_RE.findall(text) for word in WORD_RE.findall(line))
                entries.append((file_path, frozenset(CALLED_NAME_RE.findall(text)), imported))
            if len(entries) >= MAX_SCANNED_FILES:
                break
        self._listings[key] = (now, entries)
        return entries

    def _peek(self, path: str) -> str | None:
        """A module's text, read without making it a dependency of the file being linted."""
        read = self._reads.get(path)
        if read is not None:
            return read.text
        try:
            if os.path.getsize(path) > MAX_TEXT_BYTES:
                return None
            with open(path, "rb") as handle:
                return handle.read().decode("utf-8", "replace")
        except OSError:
            return None

    # ------------------------------------------------------------------ analyses

    def analysis(self, path: str):
        """The analysis of the project module in ``path``, or None (unreadable, unparsable,
        too large, or being analysed already)."""
        path = os.path.abspath(path)
        if path in self._loading:
            return None
        read = self._read(path)
        if read is None or read.size > MAX_MODULE_BYTES:
            return None
        if path in self._analyses and self._analyses[path][0] == read.signature:
            self._analyses.move_to_end(path)
            found = self._analyses[path][1]
            if found is not None:
                self.note(found)  # and the modules its answers read
            return found
        self._loading.add(path)
        try:
            found = self._analyse(path, read)
        finally:
            self._loading.discard(path)
        self._analyses[path] = (read.signature, found)
        while len(self._analyses) > MAX_MODULES:
            self._analyses.popitem(last=False)
        if found is not None:
            self.note(found)
        return found

    def indexed_tree(self, path: str, text: str):
        """The tree of ``text`` when the index holds an analysis of the file ``path`` made from
        that same text, else None. Neither reads the file nor counts as consulting it."""
        entry = self._analyses.get(os.path.abspath(path))
        found = entry[1] if entry is not None else None
        return found.module if found is not None and found.source == text else None

    def consulted_itself(self, path: str) -> bool:
        """Did the file being linted read anything from (an analysis of) the file ``path``?"""
        return os.path.abspath(path) in self.consulted

    @staticmethod
    def _analyse(path: str, read: _Read):
        from torchlint.analysis import Analysis
        from torchlint.engine import decode_source, may_use_pytorch, parse

        try:
            text = decode_source(read.data)
            if not may_use_pytorch(text):
                return None  # a Keras or JAX module: it answers no question about PyTorch code
            found = Analysis(parse(text), path, text)
        except Exception:  # another module's trouble (unparsable, too deep) never fails this file's lint
            return None
        found.digest = read.digest
        return found

    # ------------------------------------------------------------------ cheap answers (no libcst)

    def _read(self, path: str) -> _Read | None:
        """The module file's bytes and digest, read once while its stat stays the same (None:
        unreadable or over ``MAX_TEXT_BYTES``). Every answer read from it makes it a module the
        file being linted depends on (``consulted``)."""
        try:
            stat = os.stat(path)
        except OSError:
            return None
        signature = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        cached = self._reads.get(path)
        if cached is None or cached.signature != signature:
            cached = None
            if stat.st_size <= MAX_TEXT_BYTES:
                try:
                    with open(path, "rb") as handle:
                        data = handle.read(MAX_TEXT_BYTES + 1)
                except OSError:
                    data = None
                if data is not None and len(data) <= MAX_TEXT_BYTES:
                    cached = _Read(signature, data, (hashlib.sha256(data).hexdigest(), *signature[:2]))
            if cached is None:
                self._reads.pop(path, None)
                return None
            self._reads[path] = cached
            while len(self._reads) > 4 * MAX_MODULES:
                self._reads.pop(next(iter(self._reads)))
        self.consulted[path] = cached.digest
        return cached

    def _text(self, path: str) -> str | None:
        """The module's source as text, or None (unreadable, too large)."""
        read = self._read(os.path.abspath(path))
        return read.text if read is not None else None

    def _class_index(self, path: str) -> dict | None:
        """``{"classes": {name: [base, ...]}, "imports": {local: target}}`` of a module, read
        with Python's own parser (a tenth of libcst's cost): enough to tell whether a class
        is an ``nn.Module`` subclass without analysing the module."""
        text = self._text(path)
        if text is None:
            return None
        key = os.path.abspath(path)
        cached = self._indexes.get(key)
        if cached is not None and cached[0] is text:
            return cached[1]
        import ast

        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            tree = None
        classes: dict[str, list[str]] = {}
        imports: dict[str, str] = {}
        for node in tree.body if tree is not None else ():
            if isinstance(node, ast.ClassDef):
                classes[node.name] = [ast.unparse(base.value if isinstance(base, ast.Subscript) else base)
                                      for base in node.bases]
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    imports[alias.asname or alias.name.partition(".")[0]] = alias.name if alias.asname else alias.name.partition(".")[0]
            elif isinstance(node, ast.ImportFrom):
                prefix = "." * node.level + (node.module or "")
                for alias in node.names:
                    separator = "" if prefix.endswith(".") or not prefix else "."
                    imports[alias.asname or alias.name] = f"{prefix}{separator}{alias.name}"
        index = {"classes": classes, "imports": imports}
        self._indexes[key] = (text, index)
        return index

    def defines_class(self, importer: str, imports: dict, name: str, depth: int = 0) -> bool:
        """Does ``name`` (as written in ``importer``) refer to a class that a module of the
        project defines (also through a package's re-export)? Then its bases answer what it
        is, not its name."""
        root, _, rest = name.partition(".")
        target = imports.get(root)
        located = self.locate(importer, f"{target}.{rest}" if rest else target) if target is not None else None
        if located is None or len(located[1]) != 1 or depth > MAX_HOPS:
            return False
        path, (class_name,) = located
        index = self._class_index(path)
        if index is None:
            return False
        if class_name in index["classes"]:
            return True
        return class_name in index["imports"] and self.defines_class(path, index["imports"], class_name, depth + 1)

    def class_is_module(self, importer: str, imports: dict, name: str, depth: int = 0) -> bool:
        """Is the class that ``name`` (a name or dotted name, as written in ``importer``, whose
        imports are ``imports``) refers to in another project module an ``nn.Module`` subclass?"""
        if depth > MAX_HOPS + 2:
            return False
        root, _, rest = name.partition(".")
        target = imports.get(root)
        if target is None:
            return False
        located = self.locate(importer, f"{target}.{rest}" if rest else target)
        if located is None or len(located[1]) != 1:
            return False
        path, (class_name,) = located
        index = self._class_index(path)
        if index is None:
            return False
        return self._indexed_class_is_module(path, index, class_name, depth + 1, set())

    def class_may_call(self, importer: str, imports: dict, name: str, method: str, depth: int = 0) -> bool:
        """May the project class ``name`` (as written in ``importer``), one the index does not
        analyse (too large), or one of its bases call ``self.method(...)``? Read from the text
        of the modules and their class indexes: no module whose text never writes
        ``method(`` calls it. True when any of it is unknown (a framework's base)."""
        if depth > MAX_HOPS + 2:
            return True
        root, _, rest = name.partition(".")
        target = imports.get(root)
        located = self.locate(importer, f"{target}.{rest}" if rest else target) if target is not None else None
        if located is None or len(located[1]) != 1:
            return True
        path, (class_name,) = located
        return self._indexed_class_may_call(path, class_name, method, depth + 1, set())

    def _indexed_class_may_call(self, path: str, class_name: str, method: str, depth: int, seen: set) -> bool:
        from torchlint.analysis.vocabulary import NEUTRAL_BASES

        if (path, class_name) in seen:
            return False
        seen.add((path, class_name))
        index = self._class_index(path)
        text = self._text(path)
        if index is None or text is None:
            return True
        bases = index["classes"].get(class_name)
        if bases is None:  # re-exported: `from .model import BaseModel` in a package's __init__
            return class_name not in index["imports"] or self.class_may_call(path, index["imports"], class_name, method, depth)
        if f"{method}(" in text:
            return True
        for base in bases:
            root = base.partition(".")[0]
            qualified = index["imports"].get(root, root) + base[len(root):]
            if base in NEUTRAL_BASES or qualified in NEUTRAL_BASES:
                continue
            if "." not in base and base in index["classes"]:
                if self._indexed_class_may_call(path, base, method, depth, seen):
                    return True
            elif root in index["imports"] and self.defines_class(path, index["imports"], base):
                if self.class_may_call(path, index["imports"], base, method, depth):
                    return True
            elif not base.endswith("Mixin"):
                return True  # a framework's class
        return False

    def _indexed_class_is_module(self, path: str, index: dict, class_name: str, depth: int, seen: set) -> bool:
        if (path, class_name) in seen:
            return False
        seen.add((path, class_name))
        bases = index["classes"].get(class_name)
        if bases is None:  # re-exported: `from .layers import Mlp` in a package's __init__
            return class_name in index["imports"] and self.class_is_module(path, index["imports"], class_name, depth)
        for base in bases:
            root = base.partition(".")[0]
            qualified = index["imports"].get(root, root) + base[len(root):]
            tail = base.rpartition(".")[2]
            if qualified.startswith(("torch.nn.", "nn.")) or MODULE_BASE_RE.search(tail):
                return True
            if "." not in base and base in index["classes"]:
                if self._indexed_class_is_module(path, index, base, depth, seen):
                    return True
            elif root in index["imports"] and self.class_is_module(path, index["imports"], base, depth):
                return True
        return False

    def mentions(self, analysis, dotted: str, text: str) -> bool:
        """Does the project module that the imported ``dotted`` name comes from contain ``text``
        at all? (A cheap test before analysing it.)"""
        root, _, rest = dotted.partition(".")
        target = analysis.imports.get(root)
        if target is None:
            return False
        # Rules ask the same question of the same import at many calls: the answer is kept while
        # one file is linted (as long as ``consulted`` is its record), and a kept answer records
        # the module it read, as reading it again would.
        if self._mentions_for is not self.consulted:
            self._mentions_for, self._mentions = self.consulted, {}
        key = (analysis.path, target, rest, text)
        known = self._mentions.get(key)
        if known is not None:
            path, digest, answer = known
            if digest is not None:
                self.consulted[path] = digest
            return answer
        located = self.locate(analysis.path, f"{target}.{rest}" if rest else target)
        if located is None:
            self._mentions[key] = (None, None, False)
            return False
        read = self._read(os.path.abspath(located[0]))
        answer = read is not None and text in read.text
        self._mentions[key] = (read and os.path.abspath(located[0]), read and read.digest, answer)
        return answer

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
