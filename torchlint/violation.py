"""The one finding type every output format and integration renders."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import total_ordering


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

    def sort_key(self) -> tuple:
        """File, then cell, then position: a notebook's findings in reading order."""
        return (self.path, self.cell or 0, self.line, self.column, self.code, self.name, self.message,
                self.end_line, self.end_column, self.help or "")

    def __lt__(self, other: Violation) -> bool:
        if not isinstance(other, Violation):
            return NotImplemented
        return self.sort_key() < other.sort_key()

    def as_dict(self) -> dict:
        data = asdict(self)
        data["fix"] = None  # no autofix yet; the key is part of the JSON contract
        if self.cell is None:  # the key exists only for notebooks
            del data["cell"]
        return data


INVALID_FILE_CODE = "TL000"
INVALID_FILE_NAME = "invalid-file"
