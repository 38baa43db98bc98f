"""Optional test dependencies, skipped loudly: a skipped test says how to enable it, and under
``CI=true`` a missing dependency is a failure, never a silent skip."""

from __future__ import annotations

import importlib
import importlib.util
import os

import pytest

TORCH_PIN = "torch==2.13.0"
HOW_TO_INSTALL = {
    "torch": (f"the runtime verifier needs torch: pip install {TORCH_PIN} --index-url "
              "https://download.pytorch.org/whl/cpu (CPU only), then pip install -e '.[verify]'"),
    "matplotlib": "`torchlint verify --plot` needs matplotlib: pip install -e '.[plot]'",
    "pygls": "`torchlint server` (the language server) needs pygls: pip install -e '.[lsp]'",
}


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def missing_message(name: str) -> str:
    return f"{name} is not installed: {HOW_TO_INSTALL.get(name, f'pip install {name}')}"


def installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def require(name: str, module_level: bool = False):
    """Import and return ``name``; when it is missing, skip with how to install it (fail under CI)."""
    if not installed(name):
        message = missing_message(name)
        if in_ci():
            pytest.fail(f"CI=true: {message}", pytrace=False)
        pytest.skip(message, allow_module_level=module_level)
    return importlib.import_module(name)
