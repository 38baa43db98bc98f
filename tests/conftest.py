"""Test-run policy: the quick default run, and loud skips.

- ``python -m pytest`` deselects the tests marked ``slow`` (the whole standard library and the
  shared corpus through every rule: about 3 minutes of the 4-minute full run on 2 cores) and says
  so at the end. ``python -m pytest --slow`` runs every test; that is what ``.ci/run`` runs. An
  explicit ``-m`` expression (``-m slow``) is honoured as given.
- Optional dependencies skip with how to enable them, and fail under ``CI=true``
  (``tests/optional_deps.py``).
"""

from __future__ import annotations

import json

import pytest

import torchlint.runner

SLOW_HINT = "run them with `python -m pytest --slow` (what .ci/run and CI run)"


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run the tests marked slow (whole stdlib / corpus sweeps, minutes)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--slow") or config.getoption("markexpr", ""):
        return
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if not slow:
        return
    config.hook.pytest_deselected(items=slow)
    items[:] = [item for item in items if item.get_closest_marker("slow") is None]
    config._torchlint_slow_deselected = [item.nodeid for item in slow]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    deselected = getattr(config, "_torchlint_slow_deselected", [])
    if deselected:
        terminalreporter.write_sep("-", f"{len(deselected)} slow tests deselected", yellow=True)
        for nodeid in deselected:
            terminalreporter.write_line(f"  {nodeid}")
        terminalreporter.write_line(f"  {SLOW_HINT}")


@pytest.fixture(scope="session")
def cpu_run(tmp_path_factory):
    """(exit code, records) of one ``torchlint verify --device cpu --format json`` over every claim,
    shared by the verifier and chart tests (about 10 s)."""
    from optional_deps import require

    require("torch")
    from torchlint.verify.cli import main

    output = tmp_path_factory.mktemp("verify") / "evidence.json"
    code = main(["--device", "cpu", "--format", "json", "--output-file", str(output)])
    return code, json.loads(output.read_text(encoding="utf-8"))


@pytest.fixture
def lint_calls(monkeypatch):
    """Paths torchlint actually linted (cache misses), in-process serial runs only."""
    calls: list[str] = []
    real = torchlint.runner.lint_source

    def counting(data, path, *args, **kwargs):
        calls.append(path)
        return real(data, path, *args, **kwargs)

    monkeypatch.setattr(torchlint.runner, "lint_source", counting)
    return calls
