"""flake8 entry point (`flake8.extension`: ``TL = "torchlint.flake8_plugin:Plugin"``).

It runs the same engine with the same configuration as `torchlint`: the ``[tool.torchlint]``
table of the nearest ``pyproject.toml`` above each file (``select``, ``extend-select``,
``ignore``, ``per-file-ignores``, ``exclude``/``extend-exclude``, ``eval-function-words``), so
`flake8 --select TL` reports the same codes, lines, columns and messages as `torchlint` and the
editor agrees with CI. A file the configuration excludes gets no findings (as `torchlint
--force-exclude` treats it: flake8 names every file explicitly). flake8 asks for ``tree`` to
classify the plugin as an AST plugin; we ignore the ast and lint the file's text with libcst.

``# noqa`` is left to flake8, which applies it to every plugin's findings (and not at all under
``--disable-noqa``); ``# torchlint: skip-file`` is honoured unless ``--disable-noqa`` is given.

TL000: flake8 reports a file Python cannot parse as E999 and then runs no AST plugin on it, so a
syntax error is never reported twice. A TL000 that does come from here means libcst failed on a
file Python accepts, torchlint failed internally, or the configuration is invalid (the message
says which); it is reported so the gap is visible.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from torchlint import __version__


class Plugin:
    name = "torchlint"
    version = __version__
    disable_noqa = False
    _resolver = None  # one per process: each pyproject.toml is read once, whatever the file count

    def __init__(self, tree: Any, filename: str, lines: Sequence[str]) -> None:
        self.filename = filename
        self.lines = lines

    @classmethod
    def parse_options(cls, options: Any) -> None:
        cls.disable_noqa = bool(getattr(options, "disable_noqa", False))

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        from torchlint.engine import lint_source

        try:
            rules, options, ignored = self._configuration()
        except Exception as error:  # a bad pyproject.toml: said once a file, never a crash
            from torchlint.violation import INVALID_FILE_CODE

            yield 1, 0, f"{INVALID_FILE_CODE} configuration error: {error}", type(self)
            return
        if rules is None:  # excluded by the configuration
            return
        violations = lint_source("".join(self.lines), self.filename, rules, options, noqa=False,
                                 skip_file=not self.disable_noqa)
        for violation in violations:
            if violation.code in ignored:
                continue
            # flake8 takes a 0-based column and displays it plus one.
            yield violation.line, violation.column - 1, f"{violation.code} {violation.message}", type(self)

    def _configuration(self):
        """(rules, rule options, codes not to report) for this file, as `torchlint` has them;
        rules is None for a file the configuration excludes."""
        from torchlint.config import ConfigResolver, Layer, ignored_for, select_rules
        from torchlint.files import excluded_with_parents
        from torchlint.rules import all_rules

        cls = type(self)
        if cls._resolver is None:
            cls._resolver = ConfigResolver(warn=lambda message: None)
        path = self.filename if self.filename not in ("stdin", "-") else "stdin.py"
        settings = cls._resolver.for_path(path)
        if excluded_with_parents(path, settings):
            return None, None, frozenset()
        selection = select_rules(all_rules(), settings, Layer())
        return selection.rules, settings.options, ignored_for(path, selection, settings)
