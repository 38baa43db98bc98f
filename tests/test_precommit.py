"""The real pre-commit, installing the hook from a committed copy of this project.

`pre-commit try-repo` builds a virtualenv and pip-installs the hook repository into it, which
takes a while (libcst and setuptools come from the package registry). The copy is a fresh git
repository, so the result does not depend on what is committed or modified in the checkout.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli_support import REPO, bad_samples, write

pytestmark = pytest.mark.skipif(importlib.util.find_spec("pre_commit") is None,
                                reason="pre-commit is not installed (pip install -e '.[dev]')")

PROJECT_FILES = ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml")


def git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", "-c", "commit.gpgsign=false",
         *args], cwd=cwd, check=True, capture_output=True,
    )


def hook_repository(destination: Path) -> Path:
    destination.mkdir()
    for name in PROJECT_FILES:
        shutil.copy2(REPO / name, destination / name)
    # fixtures/ is installed too, as the package torchlint._fixtures (pyproject.toml's package-dir)
    for package in ("torchlint", "fixtures"):
        shutil.copytree(REPO / package, destination / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    git("init", "-q", cwd=destination)
    git("add", ".", cwd=destination)
    git("commit", "-q", "-m", "hook", cwd=destination)
    return destination


def test_pre_commit_try_repo(tmp_path):
    hooks = hook_repository(tmp_path / "hook")
    project = tmp_path / "project"
    samples = bad_samples()
    for name, source, _ in samples:
        write(project, f"src/{name}", source)
    write(project, "src/broken.py", "import torch\n\ndef train(:\n    loss.backward()\n")
    write(project, "src/clean.py", "import torch\n\nx = torch.zeros(3)\n")
    write(project, "notes.txt", "not python\n")
    git("init", "-q", cwd=project)
    git("add", ".", cwd=project)

    env = {key: value for key, value in os.environ.items() if not key.startswith(("PRE_COMMIT", "VIRTUAL_ENV"))}
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    result = subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(hooks), "torchlint", "--all-files", "--color", "never"],
        cwd=project, capture_output=True, text=True, env=env, timeout=900,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "torchlint" in output and "Failed" in output
    for name, _, code in samples:
        assert f"src/{name}:" in output and f": {code} " in output, output
    assert "src/broken.py:" in output and "TL000 syntax error" in output
    assert "clean.py:" not in output and "notes.txt" not in output
