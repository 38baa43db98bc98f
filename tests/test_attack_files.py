"""Regression tests for the cache, the file walk and the configuration lookup (issue 12): what a
hostile or unusual repository, file system or path list did to torchlint, and must no longer do.
In-process runs on the toy rules of tests/cli_support.py, plus subprocesses where a fault hangs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import torchlint.cache
import torchlint.config
import torchlint.files
import torchlint.runner
from cli_support import cli, toy_rules, write  # noqa: F401 - fixtures are used by name
from torchlint.cache import CACHE_DIR, KEEP_INDEXES, MARKER, Cache, user_cache_home

pytestmark = pytest.mark.usefixtures("toy_rules")

PRINTS = "x = 1\nprint(x)\n"
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
needs_non_root = pytest.mark.skipif(ROOT, reason="root reads every file and directory whatever its mode")
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")


@pytest.fixture(autouse=True)
def user_cache(tmp_path_factory, monkeypatch):
    """A private user cache directory, so no test writes into the real ~/.cache."""
    home = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home / "torchlint"


def project(tmp_path, body: str | None = None) -> None:
    text = "[project]\nname = 'x'\n"
    if body is not None:
        text += "\n[tool.torchlint]\n" + textwrap.dedent(body)
    write(tmp_path, "pyproject.toml", text)


def rows(result) -> list[tuple[str, int, str]]:
    return [(row["path"], row["line"], row["code"]) for row in result.json()]


def tree(directory) -> dict[str, bytes]:
    return {
        os.path.relpath(os.path.join(top, name), directory): open(os.path.join(top, name), "rb").read()
        for top, _, names in os.walk(directory) for name in names
    }


# --- 1. the cache never follows symbolic links, never deletes what it did not write -----------------

@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_symlinks_committed_inside_the_cache_are_never_written_through(cli, tmp_path):
    repo = tmp_path / "repo"
    outside = tmp_path / "outside"
    write(outside, "bashrc", "export PATH=/usr/bin\n")
    write(outside, "profile", "umask 022\n")
    write(repo, "a.py", PRINTS)
    project(repo)
    cache = repo / CACHE_DIR
    cache.mkdir()
    os.symlink("../../outside/bashrc", cache / "CACHEDIR.TAG")
    os.symlink("../../outside/profile", cache / ".gitignore")
    os.symlink("../../outside/bashrc", cache / ("0" * 24 + ".json"))
    before = tree(outside)
    os.chdir(repo)
    expected = cli("--format", "json", "--no-cache")
    for _ in range(2):
        assert cli("--format", "json").out == expected.out
    assert tree(outside) == before
    assert sorted(os.listdir(cache)) == [".gitignore", "0" * 24 + ".json", "CACHEDIR.TAG"]  # nothing added
    assert all(os.path.islink(cache / name) for name in os.listdir(cache))


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_a_symlinked_cache_directory_is_neither_written_nor_pruned(cli, tmp_path):
    repo = tmp_path / "repo"
    victim = tmp_path / "documents"
    for index in range(20):  # named exactly as the cache names its index files
        path = write(victim, f"{index:024x}.json", json.dumps({"mine": index}))
        os.utime(path, (1_000_000 + index, 1_000_000 + index))
    write(victim, "notes.json", "{}")
    before = tree(victim)
    write(repo, "a.py", PRINTS)
    project(repo)
    os.symlink(victim, repo / CACHE_DIR)
    os.chdir(repo)
    expected = cli("--format", "json", "--no-cache")
    for args in ((), ("--extend-select", "TL902"), ("--select", "TL902")) * 4:  # many configurations
        assert cli("--format", "json", *args).code in (0, 1)
    assert cli("--format", "json").out == expected.out
    assert tree(victim) == before


def test_pruning_deletes_only_index_files_the_cache_wrote(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    project(tmp_path)
    source = write(tmp_path, "a.py", PRINTS)
    os.utime(source, (1_000_000, 1_000_000))
    cache_dir = tmp_path / CACHE_DIR
    cache_dir.mkdir()
    foreign = {f"{index:024x}.json": b'{"not": "ours"}' for index in range(5)}  # our names, not our marker
    for name, data in foreign.items():
        (cache_dir / name).write_bytes(data)
        os.utime(cache_dir / name, (1, 1))  # the oldest of all: pruned first if anything were
    for number in range(KEEP_INDEXES + 6):
        cache = Cache(f"{0xabc000 + number:024x}")
        cache.store(str(source), os.stat(source), "0" * 64, [])
        cache.save()
    ours = [path for path in cache_dir.iterdir() if path.read_bytes().startswith(MARKER)]
    assert len(ours) == KEEP_INDEXES
    assert {name: (cache_dir / name).read_bytes() for name in foreign} == foreign


def test_unexpected_things_in_the_cache_directory_mean_no_cache(cli, tmp_path, lint_calls):
    project(tmp_path)
    write(tmp_path, "a.py", PRINTS)
    (tmp_path / CACHE_DIR / "subdirectory").mkdir(parents=True)
    write(tmp_path / CACHE_DIR, "report.txt", "a user's file\n")
    first = cli("--format", "json", "-j", "1")
    second = cli("--format", "json", "-j", "1")
    assert first.out == second.out and first.code == second.code == 1
    assert lint_calls == ["a.py", "a.py"]  # no cache: linted both times
    assert sorted(os.listdir(tmp_path / CACHE_DIR)) == ["report.txt", "subdirectory"]  # nothing written


# --- 2. tampered cache rows are misses, never a failed run --------------------------------------------

def _index(tmp_path):
    [path] = (tmp_path / CACHE_DIR).glob("*.json")
    return path


@pytest.mark.parametrize("tamper", ["object-values", "object-rows", "nested-deeply", "huge-number", "wrong-types"])
def test_tampered_cache_rows_are_cache_misses(cli, tmp_path, lint_calls, tamper):
    project(tmp_path)
    write(tmp_path, "a.py", PRINTS)
    expected = cli("--format", "json", "-j", "1")
    index = _index(tmp_path)
    document = json.loads(index.read_bytes())
    key = str(tmp_path / "a.py")
    entry = document["entries"][key]
    if tamper == "object-values":
        entry[5][0][0] = {"line": 2}
        entry[4] = {"sha": entry[4]}
    elif tamper == "object-rows":
        entry[5] = [{"line": 2, "column": 1}]
    elif tamper == "wrong-types":
        entry[5][0][2] = 901
        entry[1] = True
    if tamper == "nested-deeply":
        data = MARKER + b',"entries":{"' + key.encode() + b'":' + b"[" * 200_000 + b"]" * 200_000 + b"}}"
    elif tamper == "huge-number":
        data = MARKER + b',"entries":{"' + key.encode() + b'":[' + b"9" * 100_000 + b"]}}"
    else:
        data = json.dumps(document).replace(" ", "").encode()
    index.write_bytes(data)
    lint_calls.clear()
    for _ in range(2):  # and every later run
        result = cli("--format", "json", "-j", "1")
        assert (result.code, result.out, result.err) == (expected.code, expected.out, expected.err)
    assert lint_calls == ["a.py"]  # a miss, then cached again


# --- 3. same size, mtime restored: the content hash decides ---------------------------------------

@pytest.mark.parametrize("how", ["touch -r", "cp -p"])
def test_same_size_edit_with_restored_mtime_is_not_served_stale(cli, tmp_path, lint_calls, monkeypatch, how):
    monkeypatch.setattr(torchlint.cache, "RACY_SECONDS", -1.0)  # no clock-tick grace in a fast test
    project(tmp_path)
    target = write(tmp_path, "a.py", "print(1)\nx = 2\n")
    old = os.stat(target)
    first = cli("--format", "json", "-j", "1")
    assert rows(first) == [("a.py", 1, "TL901")]
    lint_calls.clear()
    assert cli("--format", "json", "-j", "1").out == first.out and lint_calls == []  # the fast path holds
    edited = "x = 2\nprint(1)\n"  # same size, a different finding
    if how == "touch -r":
        target.write_text(edited)
    else:
        write(tmp_path, "copy.txt", edited)
        os.replace(tmp_path / "copy.txt", target)  # a new inode
    os.utime(target, ns=(old.st_atime_ns, old.st_mtime_ns))
    assert (os.stat(target).st_size, os.stat(target).st_mtime_ns) == (old.st_size, old.st_mtime_ns)
    assert rows(cli("--format", "json", "-j", "1")) == [("a.py", 2, "TL901")]
    assert lint_calls == ["a.py"]


# --- 4. where the cache lives ----------------------------------------------------------------------

def test_without_a_project_the_cache_goes_to_the_user_cache_directory(cli, tmp_path, user_cache, lint_calls):
    write(tmp_path, "a.py", PRINTS)
    assert cli("-j", "1").code == 1
    assert cli("-j", "1").code == 1
    assert lint_calls == ["a.py"]  # the second run was served from the cache
    assert not (tmp_path / CACHE_DIR).exists()  # not in the working directory (say $HOME)
    assert [path.suffix for path in user_cache.iterdir() if path.name.endswith(".json")] == [".json"]
    assert user_cache_home() == str(user_cache.parent)


def test_the_cache_lives_at_the_project_root(cli, tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()  # a repository without pyproject.toml
    write(tmp_path, "src/pkg/a.py", PRINTS)
    monkeypatch.chdir(tmp_path / "src")
    assert cli("pkg").code == 1
    assert (tmp_path / CACHE_DIR / ".gitignore").is_file()
    assert not (tmp_path / "src" / CACHE_DIR).exists()


@needs_non_root
def test_read_only_tree_lints_with_the_cache_silently_off(cli, tmp_path):
    project(tmp_path)
    write(tmp_path, "a.py", PRINTS)
    os.chmod(tmp_path, 0o555)
    try:
        result = cli("--format", "json")
        assert (result.code, rows(result), result.err) == (1, [("a.py", 2, "TL901")], "")
    finally:
        os.chmod(tmp_path, 0o755)
    assert not (tmp_path / CACHE_DIR).exists()


# --- 5. named pipes never block ---------------------------------------------------------------------

@needs_fifo
def test_named_pipe_on_the_command_line_or_in_files_from_is_reported_not_opened(tmp_path):
    write(tmp_path, "a.py", PRINTS)
    os.mkfifo(tmp_path / "pipe.py")
    write(tmp_path, "list.txt", "pipe.py\na.py\n")
    probe = (
        "import sys, cli_support, torchlint.rules\n"
        "torchlint.rules.all_rules = lambda: cli_support.TOY_RULES\n"
        "from torchlint.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.path.dirname(__file__) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for args in (["pipe.py", "a.py"], ["--files-from", "list.txt"]):
        result = subprocess.run([sys.executable, "-c", probe, "--format", "json", "--no-cache", *args],
                                cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)
        assert result.returncode == 1, result.stderr
        found = json.loads(result.stdout)
        assert [(row["path"], row["code"]) for row in found] == [("a.py", "TL901"), ("pipe.py", "TL000")]
        assert "named pipe" in found[1]["message"]


@needs_fifo
def test_reading_a_named_pipe_fails_at_once(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    with pytest.raises(OSError, match="named pipe"):
        torchlint.files.read_source(str(tmp_path / "pipe.py"))


# --- 6. unreadable directories, missing search permission, missing listed paths, parent configs ------

def test_an_unreadable_directory_is_reported(cli, tmp_path, monkeypatch):
    write(tmp_path, "a.py", PRINTS)
    write(tmp_path, "locked/b.py", PRINTS)
    real = os.scandir

    def scandir(path="."):
        if os.path.basename(os.fspath(path)) == "locked":
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(torchlint.files.os, "scandir", scandir)
    result = cli("--format", "json", "--no-cache")
    assert result.code == 1
    assert [(row["path"], row["code"], row["message"]) for row in result.json()] == [
        ("a.py", "TL901", "`print(...)` called"),
        ("locked", "TL000", "cannot read directory: Permission denied"),
    ]


@needs_non_root
def test_unreadable_directory_and_no_search_permission_for_real(cli, tmp_path):
    write(tmp_path, "a.py", PRINTS)
    write(tmp_path, "locked/b.py", PRINTS)
    write(tmp_path, "nosearch/c.py", PRINTS)
    os.chmod(tmp_path / "locked", 0)
    os.chmod(tmp_path / "nosearch", 0o600)  # can list, cannot reach what is inside
    try:
        walked = cli("--format", "json", "--no-cache")
        named = cli("--format", "json", "--no-cache", "nosearch/c.py", "a.py")
    finally:
        os.chmod(tmp_path / "locked", 0o755)
        os.chmod(tmp_path / "nosearch", 0o755)
    assert ("locked", "TL000") in [(row["path"], row["code"]) for row in walked.json()]
    assert named.code == 1
    assert [(row["path"], row["code"]) for row in named.json()] == [("a.py", "TL901"), ("nosearch/c.py", "TL000")]
    assert "Permission denied" in named.json()[1]["message"]


def test_a_missing_path_in_files_from_is_reported_and_the_rest_linted(cli, tmp_path):
    write(tmp_path, "a.py", PRINTS)
    write(tmp_path, "c.py", PRINTS)
    result = cli("--format", "json", "--no-cache", "--files-from", "-", stdin="a.py\ngone.py\nc.py\n")
    assert result.code == 2
    assert [row["path"] for row in result.json()] == ["a.py", "c.py"]
    assert result.err == "torchlint: error: gone.py: no such file or directory (listed in --files-from)\n"


def _unreadable(monkeypatch, *paths):
    """Make ``open`` in torchlint.config fail for these files, as a mode-000 file does."""
    def fake_open(file, *args, **kwargs):
        if os.path.abspath(file) in {os.path.abspath(path) for path in paths}:
            raise PermissionError(13, "Permission denied", file)
        return open(file, *args, **kwargs)

    monkeypatch.setattr(torchlint.config, "open", fake_open, raising=False)


def test_an_unreadable_parent_pyproject_does_not_abort_a_project_with_its_own(cli, tmp_path, monkeypatch):
    home = tmp_path
    write(home, "pyproject.toml", "[tool.torchlint]\nselect = ['TL902']\n")
    own = home / "own"
    write(own, "a.py", PRINTS)
    project(own, 'ignore = ["TL901"]\n')  # its own configuration
    plain = home / "plain"
    write(plain, "a.py", PRINTS)
    project(plain)  # its own pyproject.toml, without [tool.torchlint]
    _unreadable(monkeypatch, home / "pyproject.toml")
    monkeypatch.chdir(own)
    result = cli("--format", "json", "--no-cache")
    assert (result.code, result.out.strip(), result.err) == (0, "[]", "")
    monkeypatch.chdir(plain)
    result = cli("--format", "json", "--no-cache")
    assert (result.code, rows(result)) == (1, [("a.py", 2, "TL901")])
    assert result.err.startswith("torchlint: warning: ") and str(home / "pyproject.toml") in result.err
    # The nearest pyproject.toml, the one that applies, unreadable: a clear configuration error.
    _unreadable(monkeypatch, plain / "pyproject.toml")
    result = cli("--format", "json", "--no-cache")
    assert result.code == 2
    assert result.err == f"torchlint: error: {plain / 'pyproject.toml'}: cannot read: Permission denied\n"


@needs_non_root
def test_an_unreadable_parent_pyproject_for_real(cli, tmp_path, monkeypatch):
    write(tmp_path, "pyproject.toml", "[tool.torchlint]\n")
    write(tmp_path, "own/a.py", PRINTS)
    project(tmp_path / "own", 'ignore = ["TL901"]\n')
    os.chmod(tmp_path / "pyproject.toml", 0)
    monkeypatch.chdir(tmp_path / "own")
    try:
        result = cli("--format", "json")
    finally:
        os.chmod(tmp_path / "pyproject.toml", 0o644)
    assert (result.code, result.err) == (0, "")


# --- 7. each file gets its own configuration --------------------------------------------------------

def test_configuration_is_resolved_per_file_not_per_batch(cli, tmp_path):
    project(tmp_path, 'ignore = ["TL901"]\nextend-exclude = ["generated"]\n')
    write(tmp_path, "top.py", SOURCE)
    sub = tmp_path / "packages" / "sub"
    project(sub, """\
        extend-select = ["TL902"]
        [tool.torchlint.per-file-ignores]
        "tests/*" = ["TL902"]
    """)
    write(sub, "a.py", SOURCE)
    write(sub, "tests/test_a.py", SOURCE)
    write(sub, "generated/g.py", SOURCE)  # excluded only by the root's configuration: linted here
    write(tmp_path, "generated/g.py", SOURCE)
    alone = cli("--format", "json", "--no-cache", "packages/sub/a.py")
    batched = cli("--format", "json", "--no-cache", "packages/sub/a.py", "top.py")
    assert rows(alone) == [("packages/sub/a.py", 1, "TL901"), ("packages/sub/a.py", 2, "TL902")]
    assert rows(batched) == rows(alone)
    walked = cli("--format", "json", "--no-cache")
    assert rows(walked) == [
        ("packages/sub/a.py", 1, "TL901"), ("packages/sub/a.py", 2, "TL902"),
        ("packages/sub/generated/g.py", 1, "TL901"), ("packages/sub/generated/g.py", 2, "TL902"),
        ("packages/sub/tests/test_a.py", 1, "TL901"),
    ]
    assert cli("--format", "json", "-j", "1").out == walked.out  # and with the cache, twice
    assert cli("--format", "json", "-j", "1").out == walked.out


SOURCE = "print(1)\npass\n"


def test_config_lookup_is_cached_per_directory(tmp_path, monkeypatch):
    project(tmp_path, 'ignore = ["TL901"]\n')
    for index in range(30):
        write(tmp_path, f"pkg/m{index}.py", "x = 1\n")
    calls = []
    real = torchlint.config._read_table
    monkeypatch.setattr(torchlint.config, "_read_table",
                        lambda *args, **kwargs: calls.append(args) or real(*args, **kwargs))
    resolver = torchlint.config.ConfigResolver()
    settings = {id(resolver.for_path(str(path))) for path in (tmp_path / "pkg").iterdir()}
    assert len(settings) == 1 and len(calls) == 1


# --- 8. one file, one report -------------------------------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_a_file_is_linted_once_whatever_its_spellings(cli, tmp_path):
    write(tmp_path, "pkg/a.py", PRINTS)
    os.symlink("a.py", tmp_path / "pkg" / "alias.py")
    result = cli("--format", "json", "--no-cache", "pkg/a.py", str(tmp_path / "pkg" / "a.py"), "./pkg/a.py",
                 "pkg/alias.py", "pkg")
    assert rows(result) == [("pkg/a.py", 2, "TL901")]
    assert "1 file checked" in cli("--no-cache", "pkg", ".").err
    result = cli("--format", "json", "--no-cache", "pkg/alias.py", "pkg/a.py")
    assert rows(result) == [("pkg/alias.py", 2, "TL901")]  # under the first spelling given


# --- 9. `**/` matches zero or more directories ----------------------------------------------------------

def test_double_star_glob_matches_top_level_files(cli, tmp_path):
    project(tmp_path, """\
        [tool.torchlint.per-file-ignores]
        "**/a.py" = ["TL901"]
        "src/**/gen_*.py" = ["TL901"]
    """)
    for name in ("a.py", "deep/er/a.py", "b.py", "src/gen_x.py", "src/sub/gen_y.py"):
        write(tmp_path, name, PRINTS)
    assert [row["path"] for row in cli("--format", "json", "--no-cache").json()] == ["b.py"]
    assert torchlint.config.matches("**/a.py", "a.py", "a.py")
    assert not torchlint.config.matches("**/a.py", "ba.py", "ba.py")


# --- 10, 11. --config FILE formats, non-UTF-8 configuration ---------------------------------------------

def test_config_file_formats(cli, tmp_path):
    write(tmp_path, "a.py", SOURCE)
    write(tmp_path, "torchlint.toml", 'select = ["TL902"]\n')  # keys at top level, like ruff.toml
    assert rows(cli("--format", "json", "--no-cache", "--config", "torchlint.toml")) == [("a.py", 2, "TL902")]
    write(tmp_path, "shared.toml", '[tool.torchlint]\nselect = ["TL902"]\n')  # or in a [tool.torchlint] table
    assert rows(cli("--format", "json", "--no-cache", "--config", "shared.toml")) == [("a.py", 2, "TL902")]
    write(tmp_path, "other.toml", '[project]\nname = "x"\n')  # a copy of a pyproject.toml by another name
    result = cli("--no-cache", "--config", "other.toml")
    assert result.code == 2 and "other.toml: unknown key 'project'" in result.err


def test_non_utf8_pyproject_is_a_configuration_error(cli, tmp_path):
    write(tmp_path, "a.py", PRINTS)
    write(tmp_path, "pyproject.toml", "[tool.torchlint]\n# caf\xe9\n".encode("latin-1"))
    for args in ((), ("--config", "pyproject.toml")):
        result = cli("--no-cache", *args)
        assert result.code == 2
        assert "internal error" not in result.err
        assert result.err.startswith(f"torchlint: error: {tmp_path / 'pyproject.toml'}: not valid UTF-8") or \
            result.err.startswith("torchlint: error: pyproject.toml: not valid UTF-8")
        assert result.err.count("\n") == 1


# --- the walk ---------------------------------------------------------------------------------------------

def test_a_very_deep_tree_is_walked_without_recursion(cli, tmp_path):
    levels = []
    path = str(tmp_path)
    try:
        for _ in range(1100):  # deeper than the interpreter's recursion limit
            path = os.path.join(path, "d")
            os.mkdir(path)
            levels.append(path)
        write(tmp_path / path, "a.py", PRINTS)
    except OSError:
        pytest.skip("the file system refuses paths this long")
    try:
        result = cli("--no-cache", "-q")
        assert result.code == 1 and len(result.lines) == 1, result.err
    finally:  # shutil.rmtree recurses too: take the tree down from the bottom
        os.remove(os.path.join(path, "a.py"))
        for level in reversed(levels):
            os.rmdir(level)
