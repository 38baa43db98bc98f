"""Where the rules' fixture programs are: installed as package data, or the checkout's fixtures/.

The top-level ``fixtures/`` directory of the repository is installed as the package
``torchlint._fixtures`` (``pyproject.toml`` maps it with ``package-dir``), so a wheel, an sdist and
an editable install all carry the same single copy. The lint tests and ``torchlint verify`` both
read it from here.
"""

from __future__ import annotations

import importlib.resources
import os
from pathlib import Path

PACKAGE = "torchlint._fixtures"
ENVIRONMENT_VARIABLE = "TORCHLINT_FIXTURES"


def fixtures_dir() -> Path:
    """The directory holding ``TL*/bad*.py`` and ``TL*/good*.py``.

    The installed package when it is importable; otherwise (a source tree on ``sys.path`` without
    installing, or an editable install made before the mapping existed) the checkout's own
    ``fixtures/`` next to the ``torchlint`` package.
    """
    try:
        root = importlib.resources.files(PACKAGE)
    except (ImportError, TypeError):
        root = None
    if root is not None:
        path = Path(str(root))
        if path.is_dir():
            return path
    return Path(__file__).resolve().parents[2] / "fixtures"


def default_fixtures_dir() -> Path:
    """``$TORCHLINT_FIXTURES`` when set, else ``fixtures_dir()``."""
    configured = os.environ.get(ENVIRONMENT_VARIABLE)
    return Path(configured) if configured else fixtures_dir()
