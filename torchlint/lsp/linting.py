"""What the language server knows without the protocol: the configuration of each document (read
as the CLI reads it), its findings, the ``# noqa`` edit, fix edits, rule pages and position units.

Positions here are 0-based lines and 0-based character offsets in code points, like Python's
string indices; the protocol layer converts them to the client's units (UTF-16 by default).
Lines are the parser's: split at ``\\r\\n``, ``\\r`` and ``\\n`` only, as LSP splits them too.
"""

from __future__ import annotations

import io
import os
import re
import tokenize
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from torchlint.config import ConfigError, ConfigResolver, Layer, ancestors, ignored_for, select_rules
from torchlint.engine import NOQA_RE, lint_source, source_lines
from torchlint.violation import INVALID_FILE_CODE, Violation


@dataclass(frozen=True, order=True)
class Edit:
    """Replace the text from (start_line, start_character) to (end_line, end_character)."""

    start_line: int
    start_character: int
    end_line: int
    end_character: int
    new_text: str


class Configurations:
    """The settings and rule selection for each path, exactly as the CLI resolves them (the nearest
    ``pyproject.toml`` with ``[tool.torchlint]``, or ``--config FILE`` for every path), kept across
    requests and dropped when a configuration file the lookup passes changes on disk.

    A change is seen by statting the ``pyproject.toml`` files above the document on every lookup
    (a few microseconds each), so no file watching is needed from the client.
    """

    def __init__(self, config_file: str | None = None, warn=None) -> None:
        self.config_file = os.path.abspath(config_file) if config_file else None
        self._warn = warn
        self._reset()

    def _reset(self) -> None:
        self._resolver: ConfigResolver | ConfigError | None = None
        self._selections: dict[int, object] = {}
        self._seen: dict[str, tuple | None] = {}  # each configuration file looked at: its stat

    def resolve(self, path: str):
        """(settings, selection) for ``path``; raises ConfigError for a configuration the CLI
        would refuse (with the CLI's message)."""
        states = self._states(os.path.dirname(os.path.abspath(path)))
        if any(self._seen.get(candidate, state) != state for candidate, state in states.items()):
            self._reset()  # a file the resolver has read (or found missing) is not what it was
        self._seen.update(states)
        if self._resolver is None:
            try:
                self._resolver = ConfigResolver(self.config_file, warn=self._warn)
            except ConfigError as error:
                self._resolver = error
        if isinstance(self._resolver, ConfigError):
            raise self._resolver
        settings = self._resolver.for_path(path)
        if id(settings) not in self._selections:
            from torchlint.rules import all_rules

            selection = select_rules(all_rules(), settings, Layer())
            if not selection.rules and settings.file_layer.select is not None:
                # the CLI's "no rules to run" usage error
                selection = ConfigError(f"no rules to run: {settings.source or 'the configuration'}: "
                                        "select selects none (`torchlint --list-rules` lists the codes)")
            self._selections[id(settings)] = (settings, selection)
        settings, selection = self._selections[id(settings)]
        if isinstance(selection, ConfigError):
            raise selection
        return settings, selection

    def _states(self, directory: str) -> dict[str, tuple | None]:
        """The configuration files the resolver reads for a file in ``directory`` (``--config``,
        else every ``pyproject.toml`` above it), each with its stat, None where there is none."""
        candidates = [self.config_file] if self.config_file else [
            os.path.join(parent, "pyproject.toml") for parent in ancestors(directory)
        ]
        states: dict[str, tuple | None] = {}
        for candidate in candidates:
            try:
                status = os.stat(candidate)
            except OSError:
                states[candidate] = None
                continue
            states[candidate] = (status.st_mtime_ns, status.st_ctime_ns, status.st_size, status.st_ino)
        return states


def lint_text(text: str, path: str, configurations: Configurations) -> list[Violation]:
    """The findings the CLI reports for ``path`` if its content were ``text`` (as with
    ``torchlint --stdin-filename PATH --force-exclude -``): the same rules, options, ignores and
    per-file-ignores, ``# noqa`` and ``skip-file``. An excluded path has none: editors open any file,
    and a vendored or generated one should stay quiet, as with pre-commit. Raises ConfigError."""
    from torchlint.files import _Excluder
    from torchlint.runner import DEFAULT_MAX_FILE_SIZE, too_large

    settings, selection = configurations.resolve(path)
    if _Excluder(settings.exclude, settings.root).with_parents(path):
        return []
    ignored = ignored_for(path, selection, settings)
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > DEFAULT_MAX_FILE_SIZE:
        violations = [too_large(path, size, DEFAULT_MAX_FILE_SIZE)]
    else:
        # Python text: a notebook arrives here as its code cells joined (notebook sync)
        violations = lint_source(text, path, selection.rules, settings.options, notebook=False)
    return [violation for violation in violations if violation.code not in ignored]


def violation_span(violation: Violation, lines: list[str]) -> tuple[int, int, int, int]:
    """The finding's range (0-based, code points), clamped to the text. An empty range (a syntax
    error's position) is widened to the rest of its line, so that editors can show it."""
    last = max(len(lines) - 1, 0)
    start_line = min(max(violation.line - 1, 0), last)
    end_line = min(max(violation.end_line - 1, start_line), last)
    start_line_text = lines[start_line] if lines else ""
    start = min(max(violation.column - 1, 0), len(start_line_text))
    end = min(max(violation.end_column - 1, 0), len(lines[end_line]) if lines else 0)
    if (end_line, end) <= (start_line, start):
        end_line, end = start_line, len(start_line_text)
        if end <= start and start > 0:  # at the end of the line: mark its last character
            start = end - 1
    return start_line, start, end_line, end


def noqa_edit(text: str, line: int, code: str) -> Edit | None:
    """The edit that suppresses ``code`` on ``line`` (0-based) with a ``# noqa`` comment: the code
    is added to an existing ``# noqa: ...`` list, else ``  # noqa: CODE`` is appended after the
    code and any comment. None when no comment can go there: the line ends inside a string (or
    any token) that goes on to the next line, it ends in a backslash continuation, a bare
    ``# noqa`` already suppresses everything, or the text cannot be tokenized."""
    lines = source_lines(text)
    if not 0 <= line < len(lines):
        return None
    row = line + 1  # tokenize counts lines from 1
    comment = None
    try:
        # tokenize splits lines at "\n" only: give it the parser's lines
        normalized = "\n".join(lines)
        for token in tokenize.generate_tokens(io.StringIO(normalized).readline):
            if token.start[0] > row:
                break
            if token.type == tokenize.COMMENT and token.start[0] == row:
                comment = token
            elif token.type not in (tokenize.NL, tokenize.NEWLINE) and token.start[0] <= row < token.end[0]:
                return None  # a triple-quoted string (or f-string part) goes on past this line
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    source = lines[line]
    if comment is not None:
        match = NOQA_RE.search(source, comment.start[1])
        if match and not match.group("codes"):
            return None  # a bare `# noqa` suppresses every code already
        if match:
            listed = [part.upper() for part in re.split(r"[,\s]+", match.group("codes")) if part]
            if any(code.startswith(prefix) for prefix in listed):
                return None
            end = match.end("codes")
            return Edit(line, end, line, end, f", {code}")
    elif source.rstrip().endswith("\\"):
        return None  # a comment cannot come before a line continuation
    content = source.rstrip()
    return Edit(line, len(content), line, len(source), f"  # noqa: {code}")


def _fix_edits(violation: Violation) -> list[Edit] | None:
    """The edits of ``violation``'s safe autofix as LSP edits (0-based lines, code-point
    characters; torchlint's are 1-based), or None: no fix, or one that is not safe to apply
    without review (``--unsafe-fixes`` territory)."""
    fix = violation.fix
    if fix is None or not fix.edits or not fix.is_safe:
        return None
    return [Edit(edit.line - 1, edit.column - 1, edit.end_line - 1, edit.end_column - 1, edit.content)
            for edit in fix.edits]


def fix_all_edits(violations: list[Violation]) -> list[Edit]:
    """Every fix's edits, in order, dropping any fix that overlaps one already taken (like ruff,
    which applies the rest and leaves those to the next run)."""
    taken: list[Edit] = []
    fixes = [edits for edits in (_fix_edits(violation) for violation in violations) if edits]
    for edits in sorted(fixes, key=min):
        if any(_overlap(edit, other) for edit in edits for other in taken):
            continue
        taken.extend(edits)
    return sorted(taken)


def _overlap(first: Edit, second: Edit) -> bool:
    a = ((first.start_line, first.start_character), (first.end_line, first.end_character))
    b = ((second.start_line, second.start_character), (second.end_line, second.end_character))
    return (a[0] < b[1] and b[0] < a[1]) or a[0] == b[0]  # same start: two insertions conflict too


@lru_cache(maxsize=None)
def explanation(code: str) -> str | None:
    """What ``torchlint --explain CODE`` prints (Markdown), or None for an unknown code."""
    from torchlint.docs import explain, explain_invalid_file
    from torchlint.rules import rules_by_code

    if code == INVALID_FILE_CODE:
        return explain_invalid_file()
    rule = rules_by_code().get(code)
    return explain(rule) if rule is not None else None


@lru_cache(maxsize=None)
def rules_directory() -> Path | None:
    """The checkout's ``rules/`` directory (one generated page per rule), when torchlint runs from
    a checkout or an editable install; a wheel does not ship the pages."""
    directory = Path(__file__).resolve().parents[2] / "rules"
    try:  # the generated index, not some other project's rules/ next to an installed package
        with open(directory / "README.md", encoding="utf-8") as index:
            return directory if index.readline().strip() == "# torchlint rules" else None
    except OSError:
        return None


@lru_cache(maxsize=256)
def rule_page(code: str, base_url: str | None) -> str | None:
    """The rule's page: ``base_url`` + ``CODE.md`` when the editor configured one (for example
    the rules/ folder of the repository on its forge), else the page in the checkout as a
    ``file://`` URI, else None. Like the SARIF output, no web address is made up: the project has
    no published home page yet."""
    if code == INVALID_FILE_CODE:
        return None
    if base_url:
        return base_url.rstrip("/") + f"/{code}.md"
    directory = rules_directory()
    if directory is None or not (directory / f"{code}.md").is_file():
        return None
    from torchlint.formatters import _file_uri

    return _file_uri(str(directory / f"{code}.md"))


# Position units: LSP positions count UTF-16 code units unless client and server agree on
# UTF-8 or UTF-32 (code points, as here).

def to_units(line: str, character: int, encoding: str) -> int:
    prefix = line[:character]
    if encoding == "utf-32":
        return len(prefix)
    if encoding == "utf-8":
        return len(prefix.encode("utf-8", "surrogatepass"))
    return len(prefix) + sum(1 for char in prefix if ord(char) > 0xFFFF)


def from_units(line: str, units: int, encoding: str) -> int:
    if encoding == "utf-32":
        return min(units, len(line))
    counted = 0
    for index, char in enumerate(line):
        if counted >= units:
            return index
        if encoding == "utf-8":
            counted += len(char.encode("utf-8", "surrogatepass"))
        else:
            counted += 2 if ord(char) > 0xFFFF else 1
    return len(line)


# ---- notebooks --------------------------------------------------------------------------------
# IPython syntax in code cells is not Python: line magics (`%time f()`), shell escapes (`!pip
# install x`, `files = !ls`) and help (`?obj`, `obj?`, `obj??`) become `pass` at their
# indentation, so the rest of the cell is linted and line numbers stay those of the cell. A cell
# magic keeps its cell when the body is Python (`%%time`), else the whole cell is masked
# (`%%bash`, `%%writefile`).
_MAGIC_LINE = re.compile(r"^([ \t]*)(?:[%!?]|[\w.]+[ \t]*\?\??[ \t]*$|[\w.]+(?:[ \t]*,[ \t]*[\w.]+)*[ \t]*=[ \t]*[%!])")
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "python", "python3", "memit"})


_SCAN = re.compile("'''" + '|"""|' + r"""'(?:[^'\\\n]|\\.)*'""" + "|" + r'"(?:[^"\\\n]|\\.)*"' + r"|[()\[\]{}#]")


def mask_cell(lines: list[str]) -> list[str]:
    """The cell's lines with IPython syntax masked. Only a line that starts a statement can be
    IPython syntax: not one inside brackets, a triple-quoted string or after a backslash."""
    first = next((line for line in lines if line.strip()), "")
    if first.lstrip().startswith("%%"):
        name = first.strip()[2:].split(maxsplit=1)[0] if first.strip()[2:] else ""
        if name not in _PYTHON_CELL_MAGICS:
            return ["" for _ in lines]
    masked = []
    depth = 0  # open brackets
    triple = None  # the quotes that close the triple-quoted string we are in
    continued = False  # the previous line ended with a backslash
    for line in lines:
        match = _MAGIC_LINE.match(line) if depth == 0 and triple is None and not continued else None
        if match:
            masked.append(match.group(1) + "pass")
            continue
        masked.append(line)
        position = 0
        if triple is not None:
            end = line.find(triple)
            if end < 0:
                continue
            position, triple = end + 3, None
        while (token := _SCAN.search(line, position)) is not None:
            position = token.end()
            text = token.group()
            if text == "#":
                break
            if text in ("'''", '"""'):
                end = line.find(text, position)
                if end < 0:
                    triple = text
                    break
                position = end + 3
            elif text in "([{":
                depth += 1
            elif text in ")]}":
                depth = max(depth - 1, 0)
        continued = triple is None and line.rstrip().endswith("\\")
    return masked


def notebook_source(cells: list[str]) -> tuple[str, list[int]]:
    """One module from the texts of a notebook's code cells, in order, IPython syntax masked, and
    the module line (0-based) each cell starts at: cell lines and module lines match one to one,
    so ``# noqa`` works per cell line."""
    lines: list[str] = []
    starts = []
    for text in cells:
        starts.append(len(lines))
        lines.extend(mask_cell(source_lines(text)))
    return "\n".join(lines), starts
