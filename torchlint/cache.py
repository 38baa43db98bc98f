"""Per-file result cache in ``.torchlint_cache/``.

One index file per (torchlint version, source fingerprint, effective configuration) maps each
file's absolute path to its size, mtime, sha256 and violations. The content hash is the key of
truth: size + mtime only let an unchanged file skip being read. Files modified within the last
couple of seconds are stored without their mtime, so an edit in the same clock tick is never
mistaken for "unchanged" (git's "racy clean" problem).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time

from torchlint import __version__
from torchlint.violation import Violation

CACHE_DIR = ".torchlint_cache"
KEEP_INDEXES = 8  # configurations remembered; older index files are deleted
RACY_SECONDS = 2.0
_FIELDS = ("line", "column", "code", "name", "message", "end_line", "end_column", "help")


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def configuration_key(codes: list[str], options: dict, prefilter: bool) -> str:
    identity = {
        "version": __version__,
        "source": _source_fingerprint(),
        "codes": sorted(codes),
        "options": options,
        "prefilter": prefilter,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]


def _source_fingerprint() -> list:
    """Size and mtime of torchlint's own modules: editing a rule in a checkout invalidates results
    even though the version string did not change."""
    package = os.path.dirname(os.path.abspath(__file__))
    stamps = []
    for directory in (package, os.path.join(package, "rules")):
        try:
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name.endswith(".py"):
                stat = entry.stat()
                stamps.append([entry.name, stat.st_size, stat.st_mtime_ns])
    return stamps


class Cache:
    def __init__(self, root: str, key: str) -> None:
        self.directory = os.path.join(root, CACHE_DIR)
        self.index_path = os.path.join(self.directory, f"{key}.json")
        self.entries: dict[str, list] = self._load()
        self.changed = False

    def _load(self) -> dict[str, list]:
        try:
            with open(self.index_path, encoding="utf-8") as handle:
                entries = json.load(handle)
        except (OSError, ValueError):
            return {}  # missing or corrupt: start empty
        return entries if isinstance(entries, dict) else {}

    def _entry(self, path: str) -> list | None:
        entry = self.entries.get(os.path.abspath(path))
        if isinstance(entry, list) and len(entry) == 4 and isinstance(entry[3], list):
            return entry
        return None

    def unchanged(self, path: str, stat: os.stat_result) -> list[Violation] | None:
        """Cached violations when size and mtime say the file was not touched."""
        entry = self._entry(path)
        if entry is None or entry[0] != stat.st_mtime_ns or entry[1] != stat.st_size:
            return None
        return self._violations(path, entry)

    def known_hash(self, path: str) -> str | None:
        entry = self._entry(path)
        return entry[2] if entry else None

    def violations(self, path: str) -> list[Violation] | None:
        entry = self._entry(path)
        return self._violations(path, entry) if entry else None

    def _violations(self, path: str, entry: list) -> list[Violation] | None:
        try:
            return [Violation(path=path, **dict(zip(_FIELDS, row, strict=True))) for row in entry[3]]
        except (TypeError, ValueError):
            return None  # an entry we cannot read back is a miss

    def store(self, path: str, stat: os.stat_result, digest: str, violations: list[Violation]) -> None:
        racy = time.time() - stat.st_mtime_ns / 1e9 < RACY_SECONDS
        rows = [[getattr(violation, name) for name in _FIELDS] for violation in violations]
        entry = [None if racy else stat.st_mtime_ns, stat.st_size, digest, rows]
        key = os.path.abspath(path)
        if self.entries.get(key) != entry:
            self.entries[key] = entry
            self.changed = True

    def save(self) -> None:
        """Write the index atomically; a cache that cannot be written is silently skipped."""
        if not self.changed:
            return
        # Forget deleted files, so the index does not grow forever.
        self.entries = {path: entry for path, entry in self.entries.items() if os.path.exists(path)}
        try:
            self._prepare_directory()
            handle, temporary = tempfile.mkstemp(dir=self.directory, prefix=".index-", suffix=".tmp")
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as output:
                    json.dump(self.entries, output, separators=(",", ":"))
                os.replace(temporary, self.index_path)
            except BaseException:
                os.remove(temporary)
                raise
            self._prune()
        except OSError:
            pass

    def _prepare_directory(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        ignore = os.path.join(self.directory, ".gitignore")
        if not os.path.exists(ignore):
            with open(ignore, "w", encoding="utf-8") as handle:
                handle.write("# Created by torchlint\n*\n")
            # The CACHEDIR.TAG convention tells backup tools to skip this directory.
            with open(os.path.join(self.directory, "CACHEDIR.TAG"), "w", encoding="utf-8") as handle:
                handle.write("Signature: 8a477f597d28d172789f06886806bc55\n# torchlint cache\n")

    def _prune(self) -> None:
        indexes = []
        for entry in os.scandir(self.directory):
            if entry.name.endswith(".json"):
                indexes.append((entry.stat().st_mtime, entry.path))
        for _, path in sorted(indexes, reverse=True)[KEEP_INDEXES:]:
            try:
                os.remove(path)
            except OSError:
                pass
