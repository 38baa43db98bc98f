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
    respect_gitignore: bool = True,
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
    With ``respect_gitignore``, a walk inside a git repository skips what git ignores
    (``.gitignore`` files, ``.git/info/exclude``, the global excludes file), see ``GitIgnore``.
    """
    collector = _Collector(settings_for)
    if respect_gitignore:
        collector.gitignore = GitIgnore()
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
        self.gitignore: GitIgnore | None = None

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
        gitignore = self.gitignore
        if gitignore is not None and not self.settings_for(os.path.abspath(top)).respect_gitignore:
            gitignore = None  # `respect-gitignore = false` in the configuration that applies there
        stack: list[tuple[str, tuple | None]] = [(top, gitignore.rules_above(top) if gitignore else None)]
        while stack:
            directory, rules = stack.pop()
            try:
                with os.scandir(directory) as scan:
                    entries = sorted(scan, key=lambda entry: entry.name)
            except OSError as error:
                self.problems.append((directory, f"cannot read directory: {error.strerror or error}"))
                continue
            absolute = os.path.abspath(directory)
            excluded = self.excluder(absolute)
            if gitignore is not None:
                rules = gitignore.rules_in(absolute, rules, entries)
            subdirectories = []
            for entry in entries:
                path = os.path.normpath(entry.path)
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if not excluded(path) and not os.path.exists(os.path.join(path, "pyvenv.cfg")) and not (
                                rules and gitignore.ignored(rules, absolute, entry.name, True)):
                            subdirectories.append((path, rules))
                    elif entry.name.endswith(LINTED_SUFFIXES) and entry.is_file() and not excluded(path) and not (
                            rules and gitignore.ignored(rules, absolute, entry.name, False)):
                        info = entry.stat()  # follows a symlinked file; dangling links never get here
                        self.keep((info.st_dev, info.st_ino), path)
                except OSError:
                    continue
            stack.extend(reversed(subdirectories))


def excluded_with_parents(path: str, settings: Settings) -> bool:
    """Do the settings' exclude patterns match the file or a directory above it (up to the root)?"""
    return _Excluder(settings.exclude, settings.root).with_parents(path)


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


class GitIgnore:
    """What git ignores, for directory walks inside a git repository, as git (and ruff) read it:
    each ``.gitignore`` applies below its directory, a deeper one and a later line winning;
    below them ``$GIT_DIR/info/exclude``, then the global excludes file (``core.excludesFile``,
    by default ``~/.config/git/ignore``). Outside a repository nothing is ignored, as in git. A
    directory named explicitly is walked even if it is ignored (its contents then are not
    filtered by the rules above it); explicit files are never filtered.

    Rules are a tuple of (directory, spec) pairs, shallowest first, shared by every directory
    below: a walk reads each ``.gitignore`` once. pathspec (the matcher) is imported only when a
    rule exists.
    """

    def __init__(self) -> None:
        self._repository_rules: dict[str, tuple] = {}
        self._global: list[str] | None = None

    def rules_above(self, top: str) -> tuple | None:
        """The rules that apply inside directory ``top``, from the ``.gitignore`` files between
        its repository's root and ``top`` (``top``'s own is read by the walk); None when ``top``
        is in no repository, or is itself ignored."""
        top = os.path.abspath(top)
        root = _repository_root(top)
        if root is None:
            return None
        rules = self.repository(root)
        if top == root:
            return rules
        parts = os.path.relpath(top, root).split(os.sep)
        directory = root
        for part in parts:
            rules = self._with_file(rules, directory)
            if self.ignored(rules, directory, part, True):
                return None  # named explicitly: walked, without the rules that ignore it
            directory = os.path.join(directory, part)
        return rules

    def rules_in(self, directory: str, rules: tuple | None, entries: Sequence[os.DirEntry]) -> tuple | None:
        """The rules below ``directory``: a repository met in the walk (a clone, a submodule)
        starts afresh, and the directory's own ``.gitignore`` is added. (``entries``: its
        contents, already listed by the walk.)"""
        names = {entry.name for entry in entries if entry.name in (".git", ".gitignore")}
        if ".git" in names and (rules is None or rules[0][0] != directory):
            rules = self.repository(directory)
        if ".gitignore" in names and rules is not None:
            rules = self._with_file(rules, directory)
        return rules

    def repository(self, root: str) -> tuple:
        """The rules of a repository's root before any ``.gitignore``: the global excludes file,
        then ``info/exclude``. The first pair's directory is the root, even with no patterns."""
        if root not in self._repository_rules:
            git_directory = _git_directory(root)
            patterns = self.global_patterns(git_directory)
            rules: tuple = ((root, _spec(patterns)),)
            if git_directory is not None:
                for directory in _info_directories(git_directory):
                    rules = _add(rules, root, _read_patterns(os.path.join(directory, "info", "exclude")))
            self._repository_rules[root] = rules
        return self._repository_rules[root]

    def global_patterns(self, git_directory: str | None) -> list[str]:
        if self._global is None:
            self._global = _read_patterns(_global_excludes_file(git_directory)) or []
        return self._global

    @staticmethod
    def _with_file(rules: tuple, directory: str) -> tuple:
        return _add(rules, directory, _read_patterns(os.path.join(directory, ".gitignore")))

    @staticmethod
    def ignored(rules: tuple, directory: str, name: str, is_directory: bool) -> bool:
        """Is ``name`` in ``directory`` (absolute) ignored? The deepest rule that matches decides."""
        path = os.path.join(directory, name)
        for base, spec in reversed(rules):
            if spec is None:
                continue
            relative = path[len(base) + 1:] if base != os.sep else path[1:]
            if os.sep != "/":
                relative = relative.replace(os.sep, "/")
            decided = spec.check(relative + "/" if is_directory else relative)
            if decided is not None:
                return decided
        return False


def _add(rules: tuple, directory: str, patterns: list[str] | None) -> tuple:
    spec = _spec(patterns)
    return rules if spec is None else (*rules, (directory, spec))


def _spec(patterns: list[str] | None) -> _Spec | None:
    if not patterns:
        return None
    import pathspec

    try:
        return _Spec(pathspec.GitIgnoreSpec.from_lines(patterns))
    except Exception:  # a pattern pathspec cannot compile: git would skip the line; skip the file
        valid = []
        for pattern in patterns:
            try:
                pathspec.GitIgnoreSpec.from_lines([pattern])
            except Exception:
                continue
            valid.append(pattern)
        return _Spec(pathspec.GitIgnoreSpec.from_lines(valid)) if valid else None


class _Spec:
    """One ignore file's patterns. pathspec tries the patterns one by one in Python, so a
    ``.gitignore`` of 75 lines (GitHub's Python template) costs 75 regex calls a path: most
    paths match none of them, and one regex made of them all answers that in one call. Only a
    path that matches goes to pathspec, which decides (negation, directory patterns, order)."""

    def __init__(self, spec) -> None:
        self.spec = spec
        self.any = _any_pattern(spec)

    def check(self, path: str) -> bool | None:
        if self.any is not None and self.any.search(path) is None:
            return None
        return self.spec.check_file(path).include


def _any_pattern(spec):
    """A regex matching wherever one of ``spec``'s patterns does (None: no such shortcut). The
    patterns' named groups are made anonymous so that they can be joined."""
    import re

    try:
        sources = [pattern.regex.pattern for pattern in spec.patterns
                   if pattern.include is not None and pattern.regex is not None]
        if not sources or not all(isinstance(source, str) for source in sources):
            return None
        joined = "|".join(f"(?:{re.sub(r'[(][?]P<[A-Za-z_][A-Za-z0-9_]*>', '(?:', source)})" for source in sources)
        return None if "(?P=" in joined else re.compile(joined)
    except (AttributeError, re.error, RecursionError):
        return None


def _read_patterns(path: str | None) -> list[str] | None:
    if not path:
        return None
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            return [line for line in handle.read().splitlines() if line.strip() and not line.startswith("#")]
    except OSError:  # absent or unreadable: git ignores it too
        return None


def _repository_root(directory: str) -> str | None:
    while True:
        if os.path.exists(os.path.join(directory, ".git")):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def _git_directory(root: str) -> str | None:
    """The repository's git directory: ``.git``, or where a ``.git`` file (a worktree or
    submodule) points."""
    dot_git = os.path.join(root, ".git")
    if os.path.isdir(dot_git):
        return dot_git
    try:
        with open(dot_git, encoding="utf-8") as handle:
            first = handle.readline().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not first.startswith("gitdir:"):
        return None
    return os.path.normpath(os.path.join(root, first[len("gitdir:"):].strip()))


def _info_directories(git_directory: str) -> list[str]:
    """Where ``info/exclude`` may be: the git directory, and a worktree's common directory."""
    directories = [git_directory]
    try:
        with open(os.path.join(git_directory, "commondir"), encoding="utf-8") as handle:
            directories.append(os.path.normpath(os.path.join(git_directory, handle.read().strip())))
    except (OSError, UnicodeDecodeError):
        pass
    return directories


def _global_excludes_file(git_directory: str | None) -> str | None:
    """``core.excludesFile`` from git's configuration files (the last one setting it wins),
    else git's default, ``$XDG_CONFIG_HOME/git/ignore``."""
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    configs = [os.path.join(xdg, "git", "config"), os.path.join(home, ".gitconfig")]
    if git_directory is not None:
        configs.append(os.path.join(git_directory, "config"))
    found = None
    for config in configs:
        found = _config_excludes_file(config) or found
    return os.path.expanduser(found) if found else os.path.join(xdg, "git", "ignore")


def _config_excludes_file(path: str) -> str | None:
    """The ``excludesFile`` of a git config file's ``[core]`` section (a minimal reading of the
    format: sections, ``key = value``, quotes, comments)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    section, value = "", None
    for line in lines:
        line = line.strip()
        if line.startswith("["):
            section = line[1:line.find("]")].strip().lower() if "]" in line else ""
            continue
        key, _, rest = line.partition("=")
        if section == "core" and key.strip().lower() == "excludesfile" and rest.strip():
            rest = rest.strip()
            if rest.startswith('"'):
                rest = rest[1:rest.find('"', 1)] if '"' in rest[1:] else rest[1:]
            else:
                rest = rest.split("#")[0].split(";")[0].strip()
            value = rest or None
    return value
