"""`[tool.torchlint]` settings: discovery, validation, and the effective rule selection.

Selection is layered like ruff's: start from the rules enabled by default; the configuration file
is one layer and the command line another. In each layer `select` (when given) replaces the
selection so far, `extend-select` adds to it and `ignore` removes from it. Code selectors are
prefixes (`TL1` means TL100-TL199) or `ALL`.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from torchlint.violation import INVALID_FILE_CODE

if TYPE_CHECKING:
    from torchlint.rule import Rule

LIST_KEYS = ("select", "ignore", "extend-select", "exclude", "extend-exclude", "eval-function-words")
KNOWN_KEYS = (*LIST_KEYS, "per-file-ignores", "respect-gitignore")
CODE_KEYS = ("select", "ignore", "extend-select")
DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".tox", ".nox", "venv", ".venv", "build", "dist", "__pycache__",
    ".eggs", "*.egg-info", "node_modules", ".mypy_cache", ".pytest_cache", ".torchlint_cache",
    ".ipynb_checkpoints",  # Jupyter's autosaved copies of every notebook
)


class ConfigError(Exception):
    """A configuration problem the user has to fix; the message names the file and key."""


@dataclass
class Layer:
    """One source of selection settings: the configuration file or the command line."""

    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)


@dataclass
class Settings:
    root: str  # directory that globs are relative to and where the cache lives
    source: str | None = None  # the configuration file, if any
    file_layer: Layer = field(default_factory=Layer)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    exclude: list[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    options: dict = field(default_factory=dict)  # passed to every rule
    respect_gitignore: bool = True  # directory walks skip what git ignores

    def relative(self, path: str) -> str:
        """``path`` relative to the root with forward slashes, for glob matching."""
        relative = os.path.relpath(os.path.abspath(path), self.root)
        return relative.replace(os.sep, "/")


@dataclass(frozen=True)
class Selection:
    rules: tuple[type[Rule], ...]
    ignored: frozenset[str]  # codes dropped everywhere, TL000 included when asked for
    per_file_ignores: tuple[tuple[str, frozenset[str]], ...]

    @property
    def codes(self) -> list[str]:
        return [rule.CODE for rule in self.rules]


def load_settings(paths: Sequence[str], config_file: str | None = None) -> Settings:
    """The settings for the common directory of ``paths`` (one lookup; runs resolve per file)."""
    return ConfigResolver(config_file).for_directory(_common_directory(paths))


class UnreadableConfig(ConfigError):
    """A pyproject.toml that exists but cannot be read: an error only where it may apply."""


class ConfigResolver:
    """The settings that apply to each file, like ruff: ``--config FILE`` for every file, else
    the nearest ``pyproject.toml`` with a ``[tool.torchlint]`` table in the file's directory or
    above it, else the defaults. Lookups are cached per directory, and each configuration file
    is read once, so every file under it shares one ``Settings`` object.

    A ``pyproject.toml`` that cannot be read is an error for the files it may apply to: those
    below it with no readable ``pyproject.toml`` nearer. Once a readable ``pyproject.toml`` without
    a torchlint table has been passed (the project's own file), an unreadable one further up is
    skipped with a warning, since it most likely belongs to something else (a home directory).
    """

    def __init__(self, config_file: str | None = None, warn=None) -> None:
        self.default = Settings(root=os.getcwd())
        self.fixed = load_config_file(config_file) if config_file is not None else None
        self._warn = warn or _print_warning
        self._warned: set[str] = set()
        self._files: dict[str, Settings | ConfigError | None] = {}
        self._directories: dict[tuple[str, bool], Settings | ConfigError] = {}

    def for_path(self, path: str) -> Settings:
        """Settings for a file (or ``-``/a stdin name): looked up from the file's directory."""
        if self.fixed is not None:
            return self.fixed
        return self.for_directory(os.path.dirname(os.path.abspath(path)))

    def for_directory(self, directory: str) -> Settings:
        if self.fixed is not None:
            return self.fixed
        result = self._resolve(os.path.abspath(directory))
        if isinstance(result, ConfigError):
            raise result
        return result

    def _resolve(self, directory: str) -> Settings | ConfigError:
        lenient = False  # True once a readable pyproject.toml without a torchlint table was passed
        visited: list[tuple[str, bool]] = []
        result: Settings | ConfigError = self.default
        for current in ancestors(directory):
            key = (current, lenient)
            if key in self._directories:
                result = self._directories[key]
                break
            visited.append(key)
            state = self._pyproject(os.path.join(current, "pyproject.toml"))
            if state is None:
                continue
            if isinstance(state, UnreadableConfig) and lenient:
                self._skip(state)
                continue
            if isinstance(state, (Settings, ConfigError)):
                result = state
                break
            lenient = True  # a readable pyproject.toml with no [tool.torchlint]: look further up
        for key in visited:
            self._directories[key] = result
        return result

    def _pyproject(self, path: str):
        """None: no such file; {}: no torchlint table; else its Settings or the error it raises."""
        if path not in self._files:
            try:
                if not os.path.isfile(path):
                    state = None
                else:
                    table = _read_table(path, require_section=True)
                    state = {} if table is None else _settings_from(table, path)
            except ConfigError as error:
                state = error
            self._files[path] = state
        return self._files[path]

    def _skip(self, error: ConfigError) -> None:
        if str(error) not in self._warned:
            self._warned.add(str(error))
            self._warn(f"{error}; skipped, a nearer pyproject.toml has no [tool.torchlint] table")


def _print_warning(message: str) -> None:
    print(f"torchlint: warning: {message}", file=sys.stderr)


def load_config_file(config_file: str) -> Settings:
    """``--config FILE``: a pyproject.toml (its ``[tool.torchlint]`` table), or any other TOML
    file holding the settings in a ``[tool.torchlint]`` table or, failing that, at top level."""
    if not os.path.exists(config_file):
        raise ConfigError(f"{config_file}: configuration file not found")
    if not os.path.isfile(config_file):
        raise ConfigError(f"{config_file}: configuration file is not a regular file")
    table = _read_table(config_file, require_section=False)
    return _settings_from(table, config_file)


def _common_directory(paths: Sequence[str]) -> str:
    directories = [
        os.path.abspath(path if os.path.isdir(path) else os.path.dirname(path) or ".")
        for path in paths if path != "-"
    ]
    if not directories:
        return os.getcwd()
    try:
        return os.path.commonpath(directories)
    except ValueError:  # different drives on Windows
        return os.getcwd()


def ancestors(directory: str) -> Iterable[str]:
    """The directory, its parent, and so on up to the filesystem's root."""
    while True:
        yield directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return
        directory = parent


def _read_table(path: str, require_section: bool) -> dict | None:
    if require_section:
        # Most pyproject.toml files have no torchlint section; don't pay for a TOML parse then.
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                if "torchlint" not in handle.read():
                    return None
        except OSError as error:
            raise UnreadableConfig(f"{path}: cannot read: {error.strerror or error}") from None
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    try:
        with open(path, "rb") as handle:
            document = tomllib.load(handle)
    except OSError as error:
        raise UnreadableConfig(f"{path}: cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not valid UTF-8 (TOML files must be UTF-8): byte {error.start}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: invalid TOML: {error}") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid TOML: nested too deeply") from None
    tool = document.get("tool")
    if isinstance(tool, dict) and "torchlint" in tool:
        if not isinstance(tool["torchlint"], dict):
            raise ConfigError(f"{path}: [tool.torchlint] must be a table")
        return tool["torchlint"]
    if require_section:
        return None
    # A dedicated file given with --config (torchlint.toml) may hold the keys at top level.
    return {} if os.path.basename(path) == "pyproject.toml" else document


def _settings_from(table: dict, path: str) -> Settings:
    where = f"{path}: [tool.torchlint]" if os.path.basename(path) == "pyproject.toml" else path
    for key in table:
        if key not in KNOWN_KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} (known keys: {', '.join(KNOWN_KEYS)})")
    values = {key: _string_list(table[key], f"{where}: {key}") for key in LIST_KEYS if key in table}
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{where}: per-file-ignores must be a table of glob = [codes]")
    settings = Settings(root=os.path.dirname(os.path.abspath(path)), source=path)
    settings.file_layer = Layer(values.get("select"), values.get("extend-select", []), values.get("ignore", []))
    settings.per_file_ignores = {
        glob: _string_list(codes, f"{where}: per-file-ignores {glob!r}") for glob, codes in per_file.items()
    }
    if "exclude" in values:
        settings.exclude = values["exclude"]
    settings.exclude += values.get("extend-exclude", [])
    if "eval-function-words" in values:
        settings.options["eval-function-words"] = values["eval-function-words"]
    if "respect-gitignore" in table:
        if not isinstance(table["respect-gitignore"], bool):
            raise ConfigError(f"{where}: respect-gitignore must be true or false")
        settings.respect_gitignore = table["respect-gitignore"]
    return settings


def _string_list(value: object, where: str) -> list[str]:
    if isinstance(value, str):
        raise ConfigError(f"{where} must be a list of strings, for example [{value!r}]")
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{where} must be a list of strings")
    return list(value)


def split_codes(text: str) -> list[str]:
    """``--select TL101,TL2`` (repeatable, comma separated) as a list of selectors."""
    return [part.strip() for part in text.split(",") if part.strip()]


def select_rules(
    rules: Sequence[type[Rule]], settings: Settings, cli: Layer, source_of_cli: str = "command line"
) -> Selection:
    """The rules to run and the codes to drop, with every selector checked against known codes."""
    known = [INVALID_FILE_CODE, *(rule.CODE for rule in rules)]
    where = settings.source or "configuration"
    layers = [(settings.file_layer, f"{where}"), (cli, source_of_cli)]
    selected = {rule.CODE for rule in rules if rule.ENABLED_BY_DEFAULT} | {INVALID_FILE_CODE}
    for layer, origin in layers:
        if layer.select is not None:
            selected = _expand(layer.select, known, f"{origin}: select") | {INVALID_FILE_CODE}
        selected |= _expand(layer.extend_select, known, f"{origin}: extend-select")
        selected -= _expand(layer.ignore, known, f"{origin}: ignore")
    per_file = tuple(
        (glob.rstrip("/"), frozenset(_expand(codes, known, f"{where}: per-file-ignores {glob!r}")))
        for glob, codes in settings.per_file_ignores.items()
    )
    return Selection(
        rules=tuple(rule for rule in rules if rule.CODE in selected),
        ignored=frozenset({INVALID_FILE_CODE} - selected),
        per_file_ignores=per_file,
    )


def _expand(selectors: Iterable[str], known: Sequence[str], where: str) -> set[str]:
    codes: set[str] = set()
    for selector in selectors:
        prefix = selector.strip().upper()
        if prefix == "ALL":
            codes.update(known)
            continue
        matched = [code for code in known if prefix and code.startswith(prefix)]
        if not matched:
            raise ConfigError(f"{where}: unknown rule code {selector!r} (known codes: {', '.join(known)})")
        codes.update(matched)
    return codes


def ignored_for(path: str, selection: Selection, settings: Settings) -> frozenset[str]:
    """Codes that ``path`` must not report: global ignores plus matching per-file-ignores."""
    if not selection.per_file_ignores:
        return selection.ignored
    relative = settings.relative(path)
    name = os.path.basename(path)
    codes = set(selection.ignored)
    for glob, ignored in selection.per_file_ignores:
        if matches(glob, relative, name, path):
            codes |= ignored
    return frozenset(codes)


def matches(glob: str, relative: str, name: str, given: str | None = None) -> bool:
    """Globs without a slash match a basename, others the path relative to the root. ``**/``
    matches zero or more directories, so ``**/a.py`` matches a top-level ``a.py`` too."""
    glob = glob.removeprefix("./")
    if "/" not in glob:
        return fnmatch.fnmatchcase(name, glob)
    candidates = (relative, given.replace(os.sep, "/").removeprefix("./")) if given else (relative,)
    return any(
        fnmatch.fnmatchcase(candidate, variant) or fnmatch.fnmatchcase(candidate, variant + "/*")
        for variant in _glob_variants(glob)
        for candidate in candidates
    )


@lru_cache(maxsize=1024)
def _glob_variants(glob: str) -> tuple[str, ...]:
    """``glob`` and every spelling with one or more of its ``**/`` segments matching nothing."""
    variants = [glob]
    for variant in variants:  # grows while iterating: a breadth-first closure
        for start in range(len(variant)):
            if variant.startswith("**/", start) and (start == 0 or variant[start - 1] == "/"):
                shorter = variant[:start] + variant[start + 3:]
                if shorter not in variants and len(variants) < 64:
                    variants.append(shorter)
    return tuple(variants)
