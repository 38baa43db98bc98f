"""flake8 entry point (`flake8.extension`: ``TL = "torchlint.flake8_plugin:Plugin"``).

It runs the same engine with the default rules, so `flake8 --select TL` reports the same codes,
lines, columns and messages as `torchlint`. flake8 asks for ``tree`` to classify the plugin as an
AST plugin; we ignore the ast and lint the file's text with libcst.

``# noqa`` is left to flake8, which applies it to every plugin's findings (and not at all under
``--disable-noqa``); ``# torchlint: skip-file`` is honoured unless ``--disable-noqa`` is given.

TL000: flake8 reports a file Python cannot parse as E999 and then runs no AST plugin on it, so a
syntax error is never reported twice. A TL000 that does come from here means libcst failed on a
file Python accepts, or torchlint failed internally; it is reported so the gap is visible.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from torchlint import __version__


class Plugin:
    name = "torchlint"
    version = __version__
    disable_noqa = False

    def __init__(self, tree: Any, filename: str, lines: Sequence[str]) -> None:
        self.filename = filename
        self.lines = lines

    @classmethod
    def parse_options(cls, options: Any) -> None:
        cls.disable_noqa = bool(getattr(options, "disable_noqa", False))

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        from torchlint.engine import lint_source
        from torchlint.rules import default_rules

        violations = lint_source("".join(self.lines), self.filename, default_rules(), noqa=False,
                                 skip_file=not self.disable_noqa)
        for violation in violations:
            # flake8 takes a 0-based column and displays it plus one.
            yield violation.line, violation.column - 1, f"{violation.code} {violation.message}", type(self)
