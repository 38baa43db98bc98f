"""The README's shell snippets, run as written (in a scratch project, never in the checkout).

Every ```sh block is split into commands. Commands that need the network or would recurse are
left out and listed here: `pip install` / `pip wheel` (tests/test_packaging.py builds and installs
a wheel instead) and `python -m pytest` (this is the test suite). Every other command must exit 0
or 1 (1 means findings) without a traceback; the Quickstart's lint of the fixtures must exit 1, as
the README says. The ```toml configuration example must be accepted as written. The verifier's
block runs the whole catalogue twice, so it is marked slow.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from optional_deps import require

from torchlint.verify.fixtures import fixtures_dir

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
BLOCK_RE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
NOT_RUN = re.compile(r"^(pip|python -m pip) (install|wheel)\b|^python -m pytest\b")
EXPECTED_EXIT = {"torchlint fixtures/": {1}}  # the Quickstart: bad fixtures have findings


def blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK_RE.findall(README) if lang == language]


def commands(block: str) -> list[str]:
    """Shell commands of a block: heredocs and `\\` continuations kept whole, comment-only lines
    dropped, each `&&` part that installs or runs the test suite left out."""
    result: list[str] = []
    lines = block.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        while line.rstrip().endswith("\\") and index < len(lines):
            line = line.rstrip()[:-1] + " " + lines[index].strip()
            index += 1
        heredoc = re.search(r"<<\s*'?(\w+)'?", line)
        if heredoc:
            body = []
            while index < len(lines) and lines[index].strip() != heredoc.group(1):
                body.append(lines[index])
                index += 1
            index += 1
            line = "\n".join([line, *body, heredoc.group(1)])
        kept = [part.strip() for part in line.split(" && ") if not NOT_RUN.match(part.strip())]
        if kept:
            result.append(" && ".join(kept))
    return result


def test_the_snippets_are_found():
    found = [command for block in blocks("sh") for command in commands(block)]
    assert "torchlint fixtures/" in found
    assert any(command.startswith("python - shard-*.sarif <<'EOF'") for command in found)
    assert any(command.startswith("torchlint verify") for command in found)


@pytest.fixture
def project(tmp_path) -> Path:
    """A scratch git repository shaped like the README's examples: fixtures/, src/, train.py."""
    root = tmp_path / "project"
    shutil.copytree(fixtures_dir(), root / "fixtures", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "src").mkdir()
    for path in sorted(fixtures_dir().glob("TL10*/bad_training_loop.py")):
        shutil.copy2(path, root / "src" / f"{path.parent.name.lower()}_{path.name}")
    shutil.copy2(fixtures_dir() / "TL501" / "good_training_loop.py", root / "train.py")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "scratch"]):
        subprocess.run(["git", *args], cwd=root, check=True, env=env, capture_output=True)
    return root


def shell_env(tmp_path: Path) -> dict[str, str]:
    """`python` and `torchlint` resolve to this interpreter and its scripts."""
    shims = tmp_path / "shims"
    shims.mkdir(exist_ok=True)
    for name in ("python", "python3"):
        if not (shims / name).exists():
            (shims / name).symlink_to(sys.executable)
    path = os.pathsep.join([str(shims), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path, "NO_COLOR": "1"}


def run_commands(commands_: list[str], cwd: Path, env: dict[str, str]) -> None:
    for command in commands_:
        result = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
                                timeout=600)
        allowed = EXPECTED_EXIT.get(command, {0, 1})
        assert result.returncode in allowed, f"$ {command}\nexit {result.returncode}\n{result.stderr[-2000:]}"
        assert "Traceback" not in result.stderr, f"$ {command}\n{result.stderr[-2000:]}"


LINT_BLOCKS = [block for block in blocks("sh") if "torchlint verify" not in block]
VERIFY_BLOCKS = [block for block in blocks("sh") if "torchlint verify" in block]


def test_lint_snippets_run_as_written(project, tmp_path):
    """Quickstart, usage, flake8 and the sharding recipe, in README order (the SARIF merge reads
    the shard the recipe wrote)."""
    if any("flake8" in block for block in LINT_BLOCKS) and shutil.which("flake8") is None:
        require("flake8")
    run_commands([command for block in LINT_BLOCKS for command in commands(block)], project, shell_env(tmp_path))
    assert (project / "shard-aa.sarif").is_file() and (project / "torchlint.sarif").is_file()


def test_configuration_example_is_accepted(project, tmp_path):
    (example,) = [block for block in blocks("toml") if "[tool.torchlint]" in block]  # not Helix's
    (project / "pyproject.toml").write_text(example, encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "torchlint", "."], cwd=project, capture_output=True,
                            text=True, env=shell_env(tmp_path), timeout=300)
    assert result.returncode in (0, 1), result.stderr


@pytest.mark.slow
def test_verifier_snippets_run_as_written(project, tmp_path):
    require("torch")
    require("matplotlib")
    run_commands([command for block in VERIFY_BLOCKS for command in commands(block)], project,
                 shell_env(tmp_path))
    assert (project / "evidence.json").is_file() and (project / "charts" / "TL101.png").is_file()


@pytest.mark.parametrize("document", ["README.md", "torchlint/verify/README.md"])
def test_no_install_from_an_index_that_does_not_have_it(document):
    """torchlint is not published: `pip install torchlint` appears only as what to do once released."""
    text = (REPO / document).read_text(encoding="utf-8")
    for match in re.finditer(r"pip install '?torchlint(\[[\w,]+\])?(?! ?@)'?(?=[\s`]|$)", text):
        context = text[max(0, match.start() - 200): match.end() + 200]
        assert "released" in context, f"{document}: {context!r}"
