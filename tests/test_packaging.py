"""Packaging: the fixtures ship inside the package (one copy, mapped from the top-level fixtures/),
the package list matches the tree, and a non-editable install can run `torchlint verify`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from torchlint.verify.fixtures import PACKAGE, default_fixtures_dir, fixtures_dir

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
SOURCES = ("pyproject.toml", "README.md", "torchlint", "fixtures")


def fixture_files(root: Path) -> dict[str, bytes]:
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(root.glob("TL*/*.py"))}


def test_package_list_matches_the_tree():
    on_disk = {".".join(path.parent.relative_to(REPO).parts)
               for path in (REPO / "torchlint").rglob("__init__.py")}
    assert set(SETUPTOOLS["packages"]) == on_disk | {PACKAGE}, (
        "pyproject.toml [tool.setuptools] packages must list every package under torchlint/")
    assert SETUPTOOLS["package-dir"] == {PACKAGE: "fixtures"}
    assert SETUPTOOLS["package-data"][PACKAGE] == ["TL*/*.py"]


def test_fixtures_are_read_from_the_package_which_is_the_top_level_directory():
    assert fixtures_dir().resolve() == (REPO / "fixtures").resolve()
    assert not (REPO / "torchlint" / "_fixtures").exists(), "one copy: fixtures/ is mapped, never copied"
    assert len(fixture_files(fixtures_dir())) >= 22


def test_environment_variable_overrides_the_default(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHLINT_FIXTURES", str(tmp_path))
    assert default_fixtures_dir() == tmp_path
    monkeypatch.delenv("TORCHLINT_FIXTURES")
    assert default_fixtures_dir() == fixtures_dir()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of the sources (the checkout itself is never written to)."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "src"
    source.mkdir()
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, source / name)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "--wheel-dir", str(work / "dist"), str(source)],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    (built,) = (work / "dist").glob("torchlint-*.whl")
    return built


def test_wheel_carries_every_fixture_byte_identical(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        shipped = {name.removeprefix("torchlint/_fixtures/"): archive.read(name) for name in names
                   if name.startswith("torchlint/_fixtures/TL") and name.endswith(".py")}
        assert "torchlint/_fixtures/__init__.py" in names
    assert shipped == fixture_files(REPO / "fixtures")
    assert not [name for name in names if name.startswith("fixtures/")], "no top-level fixtures package"
    assert "torchlint/verify/nonrules/nr1_del_outputs.py" in names


@pytest.mark.slow
def test_non_editable_install_verifies_from_another_directory(wheel, tmp_path):
    """The README's promise: a normal install runs `torchlint verify` anywhere. The venv reuses this
    interpreter's packages (torch) but installs torchlint itself from the wheel."""
    pytest.importorskip("torch")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check",
                    "--force-reinstall", str(wheel)], check=True, timeout=300)
    where = subprocess.run([str(python), "-c", "import torchlint._fixtures as f; print(f.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, check=True)
    assert str(venv) in where.stdout, where.stdout
    env = {key: value for key, value in os.environ.items() if key != "TORCHLINT_FIXTURES"}
    result = subprocess.run([str(venv / "bin" / "torchlint"), "verify", "TL101", "TL502", "--device", "cpu"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=600, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 refuted" in result.stdout and "0 error" in result.stdout
