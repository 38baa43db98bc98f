"""Crash tests at scale: the interpreter's standard library and the shared corpus through every rule.

With the prefilter off every file is parsed and analysed, so any exception in the analysis or a
rule shows up as an internal-error TL000. A file may get TL000 only when libcst itself cannot
decode or parse it (lib2to3's Python 2 test data, deliberately bad encodings, and a couple of
files the interpreter accepts but libcst's grammar does not).

These tests parse ~1,800 + ~2,000 files (about 60 + 35 CPU seconds of libcst parsing alone); on two
worker processes they took 44 s + 21 s wall (125 CPU s) on an idle 2-core machine with ten rules.
Every file is kept (no sampling), and they carry the ``slow`` marker so a local run can skip them
with ``-m "not slow"``; CI runs them.
"""

from __future__ import annotations

import os
import sysconfig
import tokenize
import traceback
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from torchlint.engine import SourceError, decode_source, lint_source, may_match
from torchlint.rules import all_rules
from torchlint.violation import INVALID_FILE_CODE

pytestmark = pytest.mark.slow

WORKERS = max(1, min(2, len(os.sched_getaffinity(0))))
STDLIB = Path(sysconfig.get_paths()["stdlib"])
CORPUS_CANDIDATES = [Path("/work/corpus"), Path.home() / ".cache" / "torchlint-bench" / "corpus"]


def python_files(root: Path, skip_dirs: set[str]) -> list[Path]:
    return sorted(path for path in root.rglob("*.py")
                  if not skip_dirs.intersection(path.relative_to(root).parts))


Result = tuple[str, list[tuple], bool, bool, "str | None"]  # path, findings, prefilter, compiles, crash


def lint_one(path: Path) -> Result:
    """Lint one file with every rule and no prefilter; never raises (crashes come back as text)."""
    rules = all_rules()
    data = path.read_bytes()
    try:
        violations = lint_source(data, str(path), rules, prefilter=False)
    except BaseException:  # the engine must catch everything itself; record instead of dying
        return str(path), [], True, True, traceback.format_exc()
    try:
        passes_prefilter = may_match(decode_source(data), rules)
    except SourceError:
        passes_prefilter = True
    found = [(v.line, v.column, v.code, v.message) for v in violations]
    return str(path), found, passes_prefilter, compiles(data, str(path)), None


def lint_all(paths: list[Path]) -> list[Result]:
    with ProcessPoolExecutor(WORKERS) as pool:
        return list(pool.map(lint_one, paths, chunksize=16))


def libcst_parses(path: str) -> bool:
    """Independent oracle: can libcst itself parse the file (decoded as the interpreter does)?"""
    import libcst

    try:
        with tokenize.open(path) as handle:
            libcst.parse_module(handle.read())
    except (SyntaxError, UnicodeDecodeError, LookupError, libcst.ParserSyntaxError):
        return False
    return True


def compiles(data: bytes, path: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escape sequences in old test data
        try:
            compile(data, path, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            return False
    return True


def check_results(results: list[Result]) -> list[str]:
    """Every problem found, as readable lines (an empty list means the run was clean)."""
    problems = []
    for path, found, passes_prefilter, valid, crash in results:
        if crash:
            problems.append(f"{path}: lint_source raised\n{crash}")
            continue
        invalid = [f for f in found if f[2] == INVALID_FILE_CODE]
        for line, column, _, message in invalid:
            if "internal error" in message or "analyse" in message:
                problems.append(f"{path}:{line}:{column}: analysis/rule crash: {message}")
        if invalid and valid and libcst_parses(path):  # the interpreter's compile errors are TL000 too
            problems.append(f"{path}: TL000 although libcst parses it: {invalid[0][3]}")
        if not invalid and not valid and not libcst_parses(path):
            problems.append(f"{path}: libcst cannot parse it, yet no TL000")
        # The prefilter may only skip files where no rule could fire anyway.
        rule_findings = [f for f in found if f[2] != INVALID_FILE_CODE]
        if rule_findings and not passes_prefilter:
            problems.append(f"{path}: the prefilter would skip a file with findings {rule_findings[:3]}")
    return problems


def test_standard_library_lints_without_crashes():
    paths = python_files(STDLIB, {"site-packages", "dist-packages", "__pycache__"})
    assert len(paths) > 500, f"too few stdlib files under {STDLIB}: {len(paths)}"
    results = lint_all(paths)
    problems = check_results(results)
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:30])
    # TL000 exactly on the files libcst cannot read (checked above, file by file); of those, the
    # ones the interpreter compiles are libcst's own limits and must stay rare.
    libcst_limits = [path for path, found, _, valid, _ in results
                     if valid and any(f[2] == INVALID_FILE_CODE for f in found)]
    assert len(libcst_limits) <= 5, libcst_limits


def corpus_root() -> Path | None:
    configured = os.environ.get("TORCHLINT_CORPUS")
    candidates = [Path(configured)] if configured else CORPUS_CANDIDATES
    return next((path for path in candidates if any(path.glob("*/**/*.py"))), None)


def test_corpus_lints_without_crashes_or_tl000():
    root = corpus_root()
    if root is None:
        pytest.skip("no built corpus: set TORCHLINT_CORPUS or run bash ../shared/corpus/build.sh DEST")
    paths = python_files(root, {".wheels", "__pycache__"})
    results = lint_all(paths)
    problems = check_results(results)
    invalid = [f"{path}:{f[0]}: {f[3]}" for path, found, *_ in results for f in found
               if f[2] == INVALID_FILE_CODE]
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:30])
    assert not invalid, "TL000 on corpus files:\n" + "\n".join(invalid[:30])
