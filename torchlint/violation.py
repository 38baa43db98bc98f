"""The one finding type every output format and integration renders."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import total_ordering
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchlint.fix import Fix


@total_ordering
@dataclass(frozen=True, slots=True)
class Violation:
    path: str
    line: int  # 1-based (in a notebook: in its cell)
    column: int  # 1-based, in characters
    code: str
    name: str
    message: str
    end_line: int
    end_column: int
    help: str | None = None  # how to fix it, in words (ruff's fix_title)
    cell: int | None = None  # a notebook's cell, numbered from 1 among all its cells
    # the fix as text edits (torchlint.fix.Fix), where the rule has a sound one
    fix: Fix | None = field(default=None, compare=False)

    def sort_key(self) -> tuple:
        """File, then cell, then position: a notebook's findings in reading order."""
        return (self.path, self.cell or 0, self.line, self.column, self.code, self.name, self.message,
                self.end_line, self.end_column, self.help or "")

    def __lt__(self, other: Violation) -> bool:
        if not isinstance(other, Violation):
            return NotImplemented
        return self.sort_key() < other.sort_key()

    def as_dict(self) -> dict:
        data = {name: getattr(self, name) for name in _FIELDS}
        data["fix"] = self.fix.as_dict() if self.fix is not None else None
        if self.cell is not None:  # the key exists only for notebooks
            data["cell"] = self.cell
        return data


_FIELDS = ("path", "line", "column", "code", "name", "message", "end_line", "end_column", "help")


INVALID_FILE_CODE = "TL000"
INVALID_FILE_NAME = "invalid-file"
