"""A directory walk skips what git ignores; explicit files are always linted."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from cli_support import cli, toy_rules, write  # noqa: F401 - fixtures are used by name

from torchlint.config import Settings
from torchlint.files import _spec, collect_files

pytestmark = pytest.mark.usefixtures("toy_rules")


@pytest.fixture(autouse=True)
def no_user_git_config(monkeypatch, tmp_path):
    """The user's own global excludes file must not change these results."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    return home


def walk(top, **kwargs) -> list[str]:
    settings = Settings(root=str(top))
    return collect_files([str(top)], lambda directory: settings, **kwargs).files


def tree(root, names):
    for name in names:
        write(root, name, "x = 1\n")


def relative(root, files):
    return sorted(str(path)[len(str(root)) + 1:] for path in files)


def test_gitignore_nested_negation_and_directories(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    tree(repo, ["train.py", "outputs/copy.py", "wandb/run-1/files/code/train.py", "wandb/keep.py",
                "lightning_logs/v0/x.py", "pkg/gen_a.py", "pkg/gen_keep.py", "pkg/sub/b.py", "pkg/sub/tmp.py"])
    write(repo, ".gitignore", "outputs/\nwandb/run-*/files/code/\nlightning_logs\n# comment\ngen_*.py\n!gen_keep.py\n")
    write(repo, "pkg/sub/.gitignore", "tmp.py\n")
    assert relative(repo, walk(repo)) == ["pkg/gen_keep.py", "pkg/sub/b.py", "train.py", "wandb/keep.py"]
    assert len(walk(repo, respect_gitignore=False)) == 9


def test_info_exclude_and_global_excludes(tmp_path, no_user_git_config):
    repo = tmp_path / "repo"
    (repo / ".git" / "info").mkdir(parents=True)
    (repo / ".git" / "info" / "exclude").write_text("local_only.py\n")
    write(no_user_git_config, ".config/git/ignore", "scratch_*.py\n")
    tree(repo, ["a.py", "local_only.py", "scratch_1.py", "sub/scratch_2.py"])
    assert relative(repo, walk(repo)) == ["a.py"]
    # core.excludesFile in ~/.gitconfig replaces the default global file
    write(no_user_git_config, ".gitconfig", '[user]\n name = x\n[core]\n\texcludesFile = "~/my-ignores"\n')
    write(no_user_git_config, "my-ignores", "a.py\n")
    assert relative(repo, walk(repo)) == ["scratch_1.py", "sub/scratch_2.py"]


def test_outside_a_repository_gitignore_is_not_read(tmp_path):
    tree(tmp_path / "plain", ["a.py", "b.py"])
    write(tmp_path / "plain", ".gitignore", "a.py\n")
    assert relative(tmp_path / "plain", walk(tmp_path / "plain")) == ["a.py", "b.py"]


def test_walk_from_a_subdirectory_uses_the_rules_above_it(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    write(repo, ".gitignore", "*_generated.py\nignored_dir/\n")
    tree(repo, ["src/a.py", "src/b_generated.py", "ignored_dir/c.py"])
    assert relative(repo, walk(repo / "src")) == ["src/a.py"]
    # A directory named explicitly is walked even if it is ignored
    assert relative(repo, walk(repo / "ignored_dir")) == ["ignored_dir/c.py"]


def test_nested_repository_starts_afresh(tmp_path):
    outer = tmp_path / "outer"
    (outer / ".git").mkdir(parents=True)
    write(outer, ".gitignore", "*.py\n!/vendor/\n")
    (outer / "vendor" / ".git").mkdir(parents=True)
    write(outer, "vendor/.gitignore", "skip.py\n")
    tree(outer, ["top.py", "vendor/lib.py", "vendor/skip.py"])
    assert relative(outer, walk(outer)) == ["vendor/lib.py"]


def test_cli_explicit_files_always_linted_and_flag(cli, tmp_path):
    (tmp_path / ".git").mkdir()
    write(tmp_path, ".gitignore", "outputs/\n")
    write(tmp_path, "outputs/copy.py", "print(1)\n")
    write(tmp_path, "main.py", "print(1)\n")
    assert [row["path"] for row in cli("--format", "json").json()] == ["main.py"]
    assert [row["path"] for row in cli("--format", "json", "outputs/copy.py").json()] == ["outputs/copy.py"]
    assert [row["path"] for row in cli("--format", "json", "--no-respect-gitignore").json()] == [
        "main.py", "outputs/copy.py"]


PATTERNS = """\
*.log.py
/rooted.py
build*/
doc/**/gen.py
**/cache/
a/**/b.py
!a/keep/b.py
[abc]x.py
deep/*
!deep/keep/
\\#hash.py
trailing.py\x20\x20
"""
FILES = ["x.log.py", "rooted.py", "sub/rooted.py", "build1/a.py", "buildfile.py", "doc/x/y/gen.py",
         "doc/gen.py", "p/cache/z.py", "a/b.py", "a/q/b.py", "a/keep/b.py", "ax.py", "dx.py",
         "deep/one.py", "deep/keep/two.py", "#hash.py", "trailing.py", "plain.py"]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git command")
def test_agrees_with_git(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    write(repo, ".gitignore", PATTERNS)
    tree(repo, FILES)
    listed = subprocess.run(["git", "ls-files", "--others", "--exclude-standard"], cwd=repo, check=True,
                            capture_output=True, text=True).stdout.split()
    expected = sorted(name for name in listed if name.endswith(".py"))
    assert 5 < len(expected) < len(FILES)  # the patterns do ignore some files, not all
    assert relative(repo, walk(repo)) == expected
    # The one-regex shortcut was in use, and agrees with pathspec alone
    spec = _spec(PATTERNS.splitlines())
    assert spec.any is not None
    for name in FILES + ["build1/", "p/cache/", "deep/keep/", "a/keep/"]:
        assert spec.check(name) == spec.spec.check_file(name).include, name


def test_configuration_can_turn_it_off(cli, tmp_path):
    (tmp_path / ".git").mkdir()
    write(tmp_path, ".gitignore", "outputs/\n")
    write(tmp_path, "outputs/copy.py", "print(1)\n")
    write(tmp_path, "pyproject.toml", "[tool.torchlint]\nrespect-gitignore = false\n")
    assert [row["path"] for row in cli("--format", "json").json()] == ["outputs/copy.py"]
    write(tmp_path, "pyproject.toml", '[tool.torchlint]\nrespect-gitignore = "no"\n')
    result = cli("--format", "json")
    assert result.code == 2 and "respect-gitignore must be true or false" in result.err
