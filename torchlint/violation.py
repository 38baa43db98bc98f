"""The one finding type every output format and integration renders."""

from __future__ import annotations

from dataclasses import asdict, dataclass


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

    def as_dict(self) -> dict:
        data = asdict(self)
        data["fix"] = None  # no autofix yet; the key is part of the JSON contract
        return data


INVALID_FILE_CODE = "TL000"
INVALID_FILE_NAME = "invalid-file"
