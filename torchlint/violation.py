"""The one finding type every output format and integration renders."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchlint.fix import Fix


@dataclass(frozen=True, slots=True, order=True)
class Violation:
    path: str
    line: int  # 1-based
    column: int  # 1-based, in characters
    code: str
    name: str
    message: str
    end_line: int
    end_column: int
    help: str | None = None  # how to fix it, in words (ruff's fix_title)
    # the fix as text edits (torchlint.fix.Fix), where the rule has a sound one
    fix: Fix | None = field(default=None, compare=False)

    def as_dict(self) -> dict:
        data = {name: getattr(self, name) for name in _FIELDS}
        data["fix"] = self.fix.as_dict() if self.fix is not None else None
        return data


_FIELDS = ("path", "line", "column", "code", "name", "message", "end_line", "end_column", "help")


INVALID_FILE_CODE = "TL000"
INVALID_FILE_NAME = "invalid-file"
