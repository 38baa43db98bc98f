"""Deferred imports, so that `import torchlint.cli` and cache hits never pay for libcst."""

from __future__ import annotations

import importlib
from types import ModuleType


class LazyModule:
    """Stands in for a module and imports it on first attribute access."""

    def __init__(self, name: str) -> None:
        self.__dict__["_lazy_name"] = name

    def _load(self) -> ModuleType:
        return importlib.import_module(self.__dict__["_lazy_name"])

    def __getattr__(self, attr: str):
        value = getattr(self._load(), attr)
        # Cache on the instance: later lookups never reach __getattr__ again.
        self.__dict__[attr] = value
        return value


cst = LazyModule("libcst")
