#!/usr/bin/env python3
"""Score torchlint against the real-bug benchmark in manifest.json.

For every case the file is taken from a local git mirror of the repository at
the buggy commit (parent of the fix) and at the fix commit, linted with
``torchlint --format json`` inside the repository's Python files at that commit (as in a user's
checkout, so that helpers, base classes and models imported from other files are seen;
``--single-file`` lints the file alone), and scored:

FOUND  a finding with the expected rule code lies within +-2 lines of ``line``
       (or of one of the optional ``also_lines``: other statements of the same
       bug, e.g. the ``step()`` paired with a ``backward()``) in the buggy file.
QUIET  the fixed file has no finding of that rule within +-2 lines of
       ``fixed_line`` (or, when ``fixed_line`` is null, no finding of that
       rule anywhere in the file).

Mirrors are looked up as ``<mirrors>/<owner>+<name>*`` (the layout the
session's ``fetch`` tool produces: ``/work/.mirror/<owner>+<name>/repo``, a
bare git directory or a work tree with ``.git``).  A case whose mirror or
commit is absent is reported as ``missing``, never as an error.  The script
always exits 0.

    python benchmarks/realworld/score.py                 # all cases
    python benchmarks/realworld/score.py --only ID       # one case
    python benchmarks/realworld/score.py --json out.json # per-case results
    python benchmarks/realworld/score.py --mirrors DIR   # other mirror root
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import OrderedDict

HERE = os.path.dirname(os.path.abspath(__file__))
WINDOW = 2


def find_git_dir(mirrors: str, repo: str) -> str | None:
    owner, name = repo.split("/", 1)
    base = f"{owner}+{name}"
    cands = sorted(glob.glob(os.path.join(mirrors, glob.escape(base))))
    cands += sorted(p for p in glob.glob(os.path.join(mirrors, glob.escape(base) + "*"))
                    if p not in cands)
    for c in cands:
        for sub in ("repo/.git", "repo", ".git", ""):
            d = os.path.join(c, sub) if sub else c
            if os.path.isfile(os.path.join(d, "HEAD")) and os.path.isdir(os.path.join(d, "objects")):
                return d
    return None


def git_show(git_dir: str, commit: str, path: str) -> bytes | None:
    r = subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"],
                       capture_output=True)
    return r.stdout if r.returncode == 0 else None


def torchlint_cmd() -> list[str]:
    exe = shutil.which("torchlint")
    return [exe] if exe else [sys.executable, "-m", "torchlint.cli"]


def lint(cmd: list[str], file: str) -> tuple[list[dict], str | None]:
    # --no-cache: every extracted file is new; --select ALL: score every rule
    r = subprocess.run(cmd + ["--format", "json", "--no-cache", "--select", "ALL", file],
                       capture_output=True, text=True)
    try:
        data = json.loads(r.stdout or "[]")
    except json.JSONDecodeError:
        return [], f"torchlint output not JSON (rc={r.returncode}): {r.stderr.strip()[:200]}"
    if isinstance(data, dict):  # tolerate a wrapped form
        data = data.get("findings", data.get("results", []))
    return data, None


def near(findings: list[dict], line: int) -> list[dict]:
    return [f for f in findings if abs(int(f.get("line", -999)) - line) <= WINDOW]


def extract_tree(git_dir: str, commit: str, dest: str) -> None:
    """The repository's Python files at ``commit`` under ``dest`` (a ``.git`` directory marks the
    project root), so that the linted file sees its project as a user's checkout would."""
    archive = subprocess.run(["git", "--git-dir", git_dir, "archive", commit, "--", "*.py"], capture_output=True)
    if archive.returncode == 0:
        subprocess.run(["tar", "-x", "-C", dest], input=archive.stdout, capture_output=True)
    os.makedirs(os.path.join(dest, ".git"), exist_ok=True)


def score_case(case: dict, mirrors: str, cmd: list[str], tmp: str, single_file: bool = False) -> dict:
    res = OrderedDict(id=case["id"], rule=case["rule"], repo=case["repo"], path=case["path"],
                      line=case["line"], fixed_line=case.get("fixed_line"))
    git_dir = find_git_dir(mirrors, case["repo"])
    if git_dir is None:
        res["status"] = "missing"
        res["why"] = f"no mirror {case['repo'].replace('/', '+')}* under {mirrors}"
        return res
    buggy = git_show(git_dir, case["buggy_commit"], case["path"])
    fixed = git_show(git_dir, case["fix_commit"], case["path"])
    if buggy is None or fixed is None:
        res["status"] = "missing"
        res["why"] = "commit or path not in the mirror"
        return res
    name = os.path.basename(case["path"])
    out = {}
    for tag, blob, commit in (("buggy", buggy, case["buggy_commit"]), ("fixed", fixed, case["fix_commit"])):
        d = os.path.join(tmp, case["id"], tag)
        os.makedirs(d, exist_ok=True)
        if single_file:
            f = os.path.join(d, name)
        else:
            extract_tree(git_dir, commit, d)
            f = os.path.join(d, case["path"])
            os.makedirs(os.path.dirname(f), exist_ok=True)
        with open(f, "wb") as fh:
            fh.write(blob)
        findings, err = lint(cmd, f)
        out[tag] = findings
        if err:
            res[f"{tag}_error"] = err
    rule = case["rule"]
    anchors = [case["line"]] + list(case.get("also_lines") or [])
    b_near = [f for f in out["buggy"] if any(abs(int(f.get("line", -999)) - a) <= WINDOW for a in anchors)]
    res["found"] = any(f.get("code") == rule for f in b_near)
    others = sorted({f.get("code") for f in b_near if f.get("code") != rule})
    res["found_by_other"] = others
    res["buggy_codes"] = sorted({f.get("code") for f in out["buggy"]})
    fl = case.get("fixed_line")
    same_rule_fixed = [f for f in out["fixed"] if f.get("code") == rule]
    if fl is None:
        res["quiet"] = not same_rule_fixed
    else:
        res["quiet"] = not near(same_rule_fixed, fl)
    res["fixed_rule_findings"] = [f.get("line") for f in same_rule_fixed]
    res["status"] = "ok"
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manifest", default=os.path.join(HERE, "manifest.json"))
    ap.add_argument("--mirrors", default=os.environ.get("TORCHLINT_MIRRORS", "/work/.mirror"),
                    help="directory holding <owner>+<name>* mirrors (default /work/.mirror)")
    ap.add_argument("--json", metavar="OUT", help="write per-case results to OUT")
    ap.add_argument("--only", metavar="ID", action="append", help="run only this case (repeatable)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print one line per case")
    ap.add_argument("--single-file", action="store_true",
                    help="lint the file alone (default: inside its repository's Python files at that commit)")
    args = ap.parse_args(argv)

    with open(args.manifest) as fh:
        cases = json.load(fh)
    if args.only:
        cases = [c for c in cases if c["id"] in set(args.only)]
        if not cases:
            print(f"no case with id {args.only}")
            return 0
    cmd = torchlint_cmd()
    results = []
    with tempfile.TemporaryDirectory(prefix="tl-realworld-") as tmp:
        for c in cases:
            try:
                r = score_case(c, args.mirrors, cmd, tmp, args.single_file)
            except Exception as e:  # never fail the run on one case
                r = OrderedDict(id=c["id"], rule=c["rule"], repo=c["repo"], status="missing",
                                why=f"{type(e).__name__}: {e}")
            results.append(r)

    print(f"{'id':34} {'rule':6} {'found':6} {'quiet':6} other-rules-at-line")
    for r in results:
        if r["status"] != "ok":
            print(f"{r['id']:34} {r['rule']:6} {'missing':13} {r.get('why', '')}")
            continue
        err = " (lint error)" if any(k.endswith("_error") for k in r) else ""
        print(f"{r['id']:34} {r['rule']:6} {('yes' if r['found'] else 'no'):6} "
              f"{('yes' if r['quiet'] else 'no'):6} {','.join(r['found_by_other'])}{err}")

    rules = sorted({r["rule"] for r in results})
    print()
    print(f"{'rule':6} {'cases':>5} {'missing':>7} {'found':>5} {'other':>5} {'fixed-quiet':>11}")
    tot = dict(cases=0, missing=0, found=0, other=0, quiet=0)
    for rule in rules:
        rs = [r for r in results if r["rule"] == rule]
        ok = [r for r in rs if r["status"] == "ok"]
        row = dict(cases=len(rs), missing=len(rs) - len(ok),
                   found=sum(r["found"] for r in ok),
                   other=sum((not r["found"]) and bool(r["found_by_other"]) for r in ok),
                   quiet=sum(r["quiet"] for r in ok))
        for k in tot:
            tot[k] += row[k]
        print(f"{rule:6} {row['cases']:5d} {row['missing']:7d} {row['found']:5d} {row['other']:5d} "
              f"{row['quiet']:11d}")
    print(f"{'all':6} {tot['cases']:5d} {tot['missing']:7d} {tot['found']:5d} {tot['other']:5d} "
          f"{tot['quiet']:11d}")
    scored = tot["cases"] - tot["missing"]
    if scored:
        print(f"\nrecall: {tot['found']}/{scored} = {tot['found'] / scored:.1%} "
              f"(of cases with a mirror); fixed file quiet: {tot['quiet']}/{scored}")
        both = sum(r["status"] == "ok" and r["found"] and r["quiet"] for r in results)
        print(f"found and quiet after fix: {both}/{scored}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
