"""Per-file result cache.

Where: in ``.torchlint_cache/`` at the file's project root, the nearest directory at or above the
file that holds a ``pyproject.toml`` or a ``.git``. A file in no project is cached in the user's
cache directory (``$XDG_CACHE_HOME/torchlint``, by default ``~/.cache/torchlint``), in an index
named after the working directory, so torchlint never litters a home directory.

What: one index file per (torchlint version, source fingerprint, effective configuration) maps
each file's absolute path to its mtime, size, inode, ctime, sha256 and violations, and to the other
modules of the project its result read (``analysis.project``: an imported helper, a base class),
each with its sha256, mtime and size: editing a helper re-lints the files that use it. The content
hash is the key of truth: mtime, size, inode and ctime only let an unchanged file skip being read.
When any of them differs (``cp -p``, ``touch -r`` and tar restore the mtime, not the ctime or the
inode) the file is hashed, which is far cheaper than linting it. Files changed within the last
couple of seconds are stored without their mtime, so an edit in the same clock tick is never
mistaken for "unchanged" (git's "racy clean" problem).

Safety: a repository can commit anything, a ``.torchlint_cache`` included. The cache therefore
never follows a symbolic link: the directory is opened with ``O_NOFOLLOW`` and every file in it
is read, created, renamed or deleted relative to that open descriptor, again without following
links. The directory must be a real directory owned by this user (or by the owner of the project
directory that holds it), not writable by others, holding only names the cache itself writes, as
regular files. Anything else means "no cache": the run lints normally and writes nothing. The
cache deletes only its own index files (its naming scheme and its format marker). A row of an
index that does not have exactly the expected shape is a cache miss, and no cache problem ever
stops a run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat as stat_module
import time

from torchlint import __version__
from torchlint.violation import Violation

CACHE_DIR = ".torchlint_cache"
USER_CACHE_DIR = "torchlint"  # under $XDG_CACHE_HOME or ~/.cache
KEEP_INDEXES = 8  # configurations remembered per project; older index files are deleted
KEEP_USER_INDEXES = 64  # (working directory, configuration) pairs remembered in the user cache
RACY_SECONDS = 2.0
MAX_INDEX_BYTES = 256 * 1024 * 1024
STALE_TEMPORARY_SECONDS = 3600.0
FORMAT = "torchlint-cache-5"
MARKER = ('{"format":"%s"' % FORMAT).encode()  # how every index file written by this version starts
_FIELDS = ("line", "column", "code", "name", "message", "end_line", "end_column", "help", "cell", "fix")
_PROJECT_INDEX = re.compile(r"[0-9a-f]{24}\.json")
_USER_INDEX = re.compile(r"[0-9a-f]{16}-[0-9a-f]{24}\.json")
_TEMPORARY = re.compile(r"\.index-[0-9A-Za-z_-]{1,64}\.tmp")
_OWN_FILES = (".gitignore", "CACHEDIR.TAG")
_DIGEST = re.compile(r"[0-9a-f]{64}")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
# Without O_NOFOLLOW and descriptor-relative calls the cache cannot be made safe: it is off.
# (os.replace takes src_dir_fd/dst_dir_fd wherever os.open takes dir_fd: renameat is POSIX.)
SUPPORTED = bool(_NOFOLLOW and _DIRECTORY) and {os.open, os.mkdir, os.unlink, os.stat} <= os.supports_dir_fd


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


def user_cache_home() -> str | None:
    """``$XDG_CACHE_HOME`` when it is an absolute path (the spec ignores others), else ~/.cache."""
    configured = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(configured):
        return configured
    home = os.path.expanduser("~")
    return os.path.join(home, ".cache") if os.path.isabs(home) else None


def project_root(directory: str, known: dict[str, str | None] | None = None) -> str | None:
    """The nearest directory at or above ``directory`` with a pyproject.toml or a .git."""
    known = {} if known is None else known
    visited = []
    root = None
    current = directory
    while True:
        if current in known:
            root = known[current]
            break
        visited.append(current)
        if os.path.isfile(os.path.join(current, "pyproject.toml")) or os.path.lexists(os.path.join(current, ".git")):
            root = current
            break
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for path in visited:
        known[path] = root
    return root


class Cache:
    """Cached results of one configuration, for files in any number of projects."""

    def __init__(self, key: str) -> None:
        self.key = key
        self._roots: dict[str, str | None] = {}
        self._by_directory: dict[str, _Index | None] = {}
        self._indexes: dict[tuple[str, str, str], _Index] = {}

    @property
    def changed(self) -> bool:
        return any(index.changed for index in self._indexes.values())

    def _index(self, path: str) -> _Index | None:
        directory = os.path.dirname(os.path.abspath(path))
        if directory not in self._by_directory:
            self._by_directory[directory] = self._locate(directory)
        return self._by_directory[directory]

    def _locate(self, directory: str) -> _Index | None:
        if not SUPPORTED:
            return None
        root = project_root(directory, self._roots)
        if root is not None:
            location = (root, CACHE_DIR, f"{self.key}.json", _PROJECT_INDEX, KEEP_INDEXES)
        else:
            home = user_cache_home()
            try:
                anchor = os.getcwd()
            except OSError:
                return None
            if home is None:
                return None
            prefix = hashlib.sha256(os.fsencode(anchor)).hexdigest()[:16]
            location = (home, USER_CACHE_DIR, f"{prefix}-{self.key}.json", _USER_INDEX, KEEP_USER_INDEXES)
        index = self._indexes.get(location[:3])
        if index is None:
            index = self._indexes[location[:3]] = _Index(*location)
        return index

    def _entry(self, path: str) -> list | None:
        try:
            index = self._index(path)
            if index is None:
                return None
            entry = index.get(os.path.abspath(path))
            return entry if _valid_entry(entry) else None
        except Exception:  # a cache problem is a miss, never a failed run
            return None

    def unchanged(self, path: str, stat: os.stat_result) -> list[Violation] | None:
        """Cached violations when mtime, size, inode and ctime say the file was not touched."""
        entry = self._entry(path)
        if entry is None or entry[0] is None:
            return None
        if (entry[0], entry[1], entry[2], entry[3]) != (stat.st_mtime_ns, stat.st_size, stat.st_ino, stat.st_ctime_ns):
            return None
        if not _dependencies_unchanged(entry):
            return None
        return self._violations(path, entry)

    def known_hash(self, path: str) -> str | None:
        """The cached content hash, when the modules the cached result read are unchanged."""
        entry = self._entry(path)
        return entry[4] if entry and _dependencies_unchanged(entry) else None

    def violations(self, path: str) -> list[Violation] | None:
        entry = self._entry(path)
        return self._violations(path, entry) if entry else None

    @staticmethod
    def _violations(path: str, entry: list) -> list[Violation]:
        return [Violation(path, *row[:-1], fix=_fix(row[-1])) for row in entry[5]]

    def store(self, path: str, stat: os.stat_result, digest: str, violations: list[Violation],
              dependencies: list | None = None) -> None:
        """Remember a file's result; ``dependencies`` None keeps those of the cached entry (the
        content was unchanged and not linted again)."""
        try:
            index = self._index(path)
            if index is None:
                return
            if dependencies is None:
                previous = self._entry(path)
                dependencies = previous[6] if previous else []
            newest = max(stat.st_mtime_ns, stat.st_ctime_ns) / 1e9
            racy = time.time() - newest < RACY_SECONDS
            rows = [[getattr(violation, name) for name in _FIELDS[:-1]] + [_fix_data(violation.fix)]
                    for violation in violations]
            entry = [None if racy else stat.st_mtime_ns, stat.st_size, stat.st_ino, stat.st_ctime_ns, digest, rows,
                     [list(row) for row in dependencies]]
            index.put(os.path.abspath(path), entry)
        except Exception:
            return

    def save(self) -> None:
        """Write every changed index atomically; a cache that cannot be written is skipped."""
        for index in self._indexes.values():
            try:
                index.save()
            except Exception:
                continue


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0


def _valid_row(row: object) -> bool:
    return (
        type(row) is list and len(row) == len(_FIELDS)
        and all(_is_count(row[position]) for position in (0, 1, 5, 6))
        and all(type(row[position]) is str for position in (2, 3, 4))
        and (row[7] is None or type(row[7]) is str)
        and (row[8] is None or _is_count(row[8]))
        and (row[9] is None or _valid_fix(row[9]))
    )


def _valid_dependency(row: object) -> bool:
    return (
        type(row) is list and len(row) == 4 and type(row[0]) is str
        and type(row[1]) is str and _DIGEST.fullmatch(row[1]) is not None
        and _is_count(row[2]) and _is_count(row[3])
    )


def _valid_fix(data: object) -> bool:
    try:
        _fix(data)
        return type(data) is dict
    except (KeyError, TypeError, IndexError):
        return False


def _valid_entry(entry: object) -> bool:
    return (
        type(entry) is list and len(entry) == 7
        and (entry[0] is None or _is_count(entry[0]))
        and all(_is_count(entry[position]) for position in (1, 2, 3))
        and type(entry[4]) is str and _DIGEST.fullmatch(entry[4]) is not None
        and type(entry[5]) is list and all(_valid_row(row) for row in entry[5])
        and type(entry[6]) is list and all(_valid_dependency(row) for row in entry[6])
    )


def _dependencies_unchanged(entry: list) -> bool:
    """Are the other project modules the cached result read (``[path, sha256, mtime_ns,
    size]`` each) as they were? A changed mtime or size costs a hash, as for the file itself."""
    for path, digest, mtime, size in entry[6]:
        try:
            stat = os.stat(path)
            if (stat.st_mtime_ns, stat.st_size) == (mtime, size):
                continue
            with open(path, "rb") as handle:
                if content_hash(handle.read()) != digest:
                    return False
        except OSError:
            return False
    return True


class _Index:
    """One index file in one cache directory, read on first use and written by ``save``."""

    def __init__(self, parent: str, directory: str, name: str, pattern: re.Pattern, keep: int) -> None:
        self.parent, self.directory, self.name, self.pattern, self.keep = parent, directory, name, pattern, keep
        self.entries: dict[str, object] | None = None
        self.usable = True  # False: something unexpected is there, so neither read nor write
        self.changed = False

    def get(self, path: str) -> object:
        return self._load().get(path)

    def put(self, path: str, entry: list) -> None:
        entries = self._load()
        if self.usable and entries.get(path) != entry:
            entries[path] = entry
            self.changed = True

    def _load(self) -> dict:
        if self.entries is None:
            self.entries = {}
            descriptor = self._open_directory(create=False)
            if descriptor is not None:
                try:
                    self.entries = self._read(descriptor)
                finally:
                    os.close(descriptor)
        return self.entries

    def _read(self, directory: int) -> dict:
        try:
            descriptor = os.open(self.name, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC, dir_fd=directory)
        except OSError:
            return {}  # not written yet
        with open(descriptor, "rb") as handle:
            info = os.fstat(descriptor)
            if not stat_module.S_ISREG(info.st_mode) or info.st_size > MAX_INDEX_BYTES:
                return {}
            data = handle.read(MAX_INDEX_BYTES + 1)
        if not data.startswith(MARKER):
            return {}  # another format (an older torchlint) or not ours
        try:
            document = json.loads(data)
        except (ValueError, RecursionError, MemoryError):
            return {}
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            return {}
        entries = document.get("entries")
        return entries if isinstance(entries, dict) else {}

    def _open_directory(self, create: bool) -> int | None:
        """The cache directory's descriptor, when it is exactly what the cache writes there."""
        if not self.usable:
            return None
        try:
            if create:
                os.makedirs(self.parent, mode=0o700, exist_ok=True)
            parent = os.open(self.parent, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        except OSError:
            return None
        try:
            parent_owner = os.fstat(parent).st_uid
            if create:
                try:
                    os.mkdir(self.directory, 0o755, dir_fd=parent)
                except FileExistsError:
                    pass
            try:
                descriptor = os.open(self.directory, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=parent)
            except FileNotFoundError:
                return None  # no cache yet: nothing to read, and usable for writing later
            except OSError:
                self.usable = False  # a symbolic link, a file, or no permission
                return None
        except OSError:
            return None
        finally:
            os.close(parent)
        if not self._expected(descriptor, parent_owner):
            os.close(descriptor)
            self.usable = False
            return None
        return descriptor

    def _expected(self, descriptor: int, parent_owner: int) -> bool:
        try:
            info = os.fstat(descriptor)
            if not stat_module.S_ISDIR(info.st_mode) or info.st_mode & stat_module.S_IWOTH:
                return False
            if info.st_uid not in (os.geteuid(), parent_owner):
                return False
            with os.scandir(descriptor) as entries:
                for entry in entries:
                    if not entry.is_file(follow_symlinks=False) or not _own_name(entry.name):
                        return False
        except OSError:
            return False
        return True

    def save(self) -> None:
        if not self.changed or not self.usable or self.entries is None:
            return
        # Forget deleted files, so the index does not grow forever.
        entries = {path: entry for path, entry in self.entries.items() if os.path.exists(path)}
        data = json.dumps({"format": FORMAT, "entries": entries}, separators=(",", ":")).encode()
        descriptor = self._open_directory(create=True)
        if descriptor is None:
            return
        try:
            self._mark(descriptor)
            temporary = f".index-{os.getpid()}-{os.urandom(6).hex()}.tmp"
            output = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o644,
                             dir_fd=descriptor)
            try:
                with open(output, "wb") as handle:
                    handle.write(data)
                os.replace(temporary, self.name, src_dir_fd=descriptor, dst_dir_fd=descriptor)
            except BaseException:
                _unlink(temporary, descriptor)
                raise
            self.changed = False
            self._prune(descriptor)
        except OSError:
            pass
        finally:
            os.close(descriptor)

    @staticmethod
    def _mark(directory: int) -> None:
        """Create .gitignore (git never shows the cache) and CACHEDIR.TAG (backup tools skip it),
        each only if no entry of that name exists: an existing one is never opened."""
        for name, text in ((".gitignore", "# Created by torchlint\n*\n"),
                           ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n# torchlint cache\n")):
            try:
                created = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o644,
                                  dir_fd=directory)
            except FileExistsError:
                continue
            with open(created, "w", encoding="utf-8") as handle:
                handle.write(text)

    def _prune(self, directory: int) -> None:
        """Delete the oldest index files beyond ``keep`` and temporaries a crashed run left, but
        only regular files named as this cache names them that start with its format marker."""
        indexes, stale = [], []
        now = time.time()
        with os.scandir(directory) as entries:
            for entry in entries:
                if not entry.is_file(follow_symlinks=False):
                    continue
                modified = entry.stat(follow_symlinks=False).st_mtime
                if self.pattern.fullmatch(entry.name):
                    indexes.append((modified, entry.name))
                elif _TEMPORARY.fullmatch(entry.name) and now - modified > STALE_TEMPORARY_SECONDS:
                    stale.append(entry.name)
        doomed = [name for _, name in sorted(indexes, reverse=True)[self.keep:]] + stale
        for name in doomed:
            if name != self.name and _starts_with_marker(name, directory):
                _unlink(name, directory)


def _own_name(name: str) -> bool:
    return (
        name in _OWN_FILES or _PROJECT_INDEX.fullmatch(name) is not None
        or _USER_INDEX.fullmatch(name) is not None or _TEMPORARY.fullmatch(name) is not None
    )


def _starts_with_marker(name: str, directory: int) -> bool:
    try:
        descriptor = os.open(name, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC, dir_fd=directory)
    except OSError:
        return False
    with open(descriptor, "rb") as handle:
        return stat_module.S_ISREG(os.fstat(descriptor).st_mode) and handle.read(len(MARKER)) == MARKER


def _unlink(name: str, directory: int) -> None:
    try:
        os.unlink(name, dir_fd=directory)
    except OSError:
        pass


def _fix_data(fix) -> dict | None:
    return fix.as_dict() if fix is not None else None


def _fix(data: dict | None):
    if data is None:
        return None
    from torchlint.fix import Fix

    return Fix.from_dict(data)
