"""The flake8 plugin reports exactly what the CLI reports: same codes, lines, columns, messages."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from cli_support import bad_samples, run_torchlint, write

pytestmark = pytest.mark.skipif(importlib.util.find_spec("flake8") is None, reason="flake8 is not installed")


def flake8(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", "--select", "TL", "-j", "1", *args],
        cwd=cwd, capture_output=True, text=True, timeout=300,
    )


COMPOUND = ("def ", "class ", "for ", "while ", "if ", "elif ", "else", "with ", "try", "except",
            "finally", "@", "async ", "match ", "case ")


def _shifted(source: str, lines_with_findings: set[int]) -> str:
    """The same code with non-ASCII text put before each reported statement, so that columns
    must count characters, not bytes, to agree."""
    lines = source.splitlines()
    for number in lines_with_findings:
        line = lines[number - 1]
        stripped = line.lstrip()
        if not stripped.startswith(COMPOUND) and not stripped.rstrip().endswith(":"):
            lines[number - 1] = f"{line[: len(line) - len(stripped)]}ü = 'é'; {stripped}"
    return "\n".join(lines) + "\n"


def _findings(names, cwd) -> list[dict]:
    result = run_torchlint("--no-cache", "--format", "json", *names, cwd=cwd)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def test_flake8_matches_the_cli(tmp_path):
    samples = bad_samples()
    for name, source, _ in samples:
        write(tmp_path, name, source)
    original = _findings([name for name, _, _ in samples], tmp_path)
    names = []
    for name, source, _ in samples:
        lines = {row["line"] for row in original if row["path"] == name}
        write(tmp_path, "shifted_" + name, _shifted(source, lines))
        names += [name, "shifted_" + name]
    write(tmp_path, "clean.py", "import torch\n\nx = torch.zeros(3)\n")
    names.append("clean.py")

    expected = sorted(
        f"{row['path']}:{row['line']}:{row['column']}: {row['code']} {row['message']}"
        for row in _findings(names, tmp_path) if row["code"] != "TL000"
    )
    assert expected, "the bad samples must produce findings"
    assert any(line.startswith("shifted_") for line in expected)

    result = flake8(*names, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert sorted(result.stdout.splitlines()) == expected
    # The CLI's text format is flake8's default format, line for line.
    text = run_torchlint("--no-cache", "-q", *names, cwd=tmp_path)
    # the CLI marks fixable findings with `[*]` (flake8 has no such notion)
    assert sorted(line.replace(" [*] ", " ", 1) for line in text.stdout.splitlines()) == expected


def test_flake8_noqa(tmp_path):
    name, source, code = bad_samples()[0]
    path = write(tmp_path, name, source)
    rows = _findings([name], tmp_path)
    assert rows
    lines = source.splitlines()
    for row in rows:
        lines[row["line"] - 1] += f"  # noqa: {row['code']}"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = flake8(name, cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, "")


SCORER = """\
def score_model(model, loader):
    model.eval()
    total = 0
    for x, y in loader:
        logits = model(x)
        total += (logits.argmax(1) == y).sum().item()
    return total
"""
ACCUMULATOR = """\
losses = []
for batch in loader:
    loss = model(batch).sum()
    loss.backward()
    losses.append(loss)
"""
CONFIGURATION = """\
[tool.torchlint]
extend-select = ["ALL"]
ignore = ["TL401"]
exclude = ["legacy"]
eval-function-words = ["score"]

[tool.torchlint.per-file-ignores]
"tests/*" = ["TL101"]
"""


def test_flake8_reads_the_torchlint_configuration(tmp_path):
    project = tmp_path / "project"
    names = ["src/train.py", "src/scorer.py", "tests/test_train.py", "legacy/old.py", "src/cache.py"]
    for name in names[:-1]:
        write(project, name, SCORER if "scorer" in name else ACCUMULATOR)
    write(project, "src/cache.py", "import torch\nfor x in xs:\n    torch.cuda.empty_cache()\n")

    def cli_rows(*extra):
        rows = _findings(["--force-exclude", *extra, *names], project)
        return sorted(f"{row['path']}:{row['line']}:{row['column']}: {row['code']} {row['message']}" for row in rows)

    unconfigured = cli_rows()
    write(project, "pyproject.toml", CONFIGURATION)
    configured = cli_rows()
    codes = {line.split(": ")[1].split()[0] for line in configured}
    # The configuration matters: TL201 only with `score` as an evaluation word, TL401 ignored,
    # TL101 ignored under tests/, legacy/ excluded.
    assert "TL201" in codes and "TL401" not in codes and "TL101" in codes
    assert not any(line.startswith(("tests/", "legacy/")) for line in configured)
    assert configured != unconfigured
    result = flake8(*names, cwd=project)
    assert result.returncode == 1, result.stderr
    assert sorted(result.stdout.splitlines()) == configured


def test_flake8_reports_a_bad_configuration_without_crashing(tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.torchlint]\nselect = ["TL999"]\n')
    write(tmp_path, "a.py", ACCUMULATOR)
    result = flake8("a.py", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    [line] = result.stdout.splitlines()
    assert line.startswith("a.py:1:1: TL000 configuration error: ") and "TL999" in line
