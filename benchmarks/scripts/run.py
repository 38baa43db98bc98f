"""Lint a pinned set of public training scripts and tutorials with torchlint.

The set is described by ``manifest.json`` next to this file: a list of
``{"repo", "commit", "paths", "notebooks"}``. No third-party code is kept in this
repository; the files are read from bare git mirrors (``git cat-file``) at the pinned commit.

    python benchmarks/scripts/run.py --out findings.json          # extract to a temp dir, lint
    python benchmarks/scripts/run.py --mirrors /work/.mirror --keep /tmp/scripts --out f.json
    python benchmarks/scripts/run.py --extract-only /tmp/scripts  # just extract

A mirror for ``owner/name`` is the first directory matching ``MIRRORS/owner+name*`` that is a
git directory itself or holds one at ``repo/`` or ``.git/``. Files land in
``DEST/owner+name/<path>`` so the repository layout (and relative imports) is kept.
Notebooks (``.ipynb``) are listed in the manifest but not linted: torchlint does not read them.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_MIRRORS = os.environ.get("TORCHLINT_MIRRORS", "/work/.mirror")


def find_git_dir(mirrors: str, repo: str) -> str | None:
    stem = repo.replace("/", "+")
    for cand in sorted(glob.glob(os.path.join(mirrors, stem + "*"))):
        for g in (cand, os.path.join(cand, "repo"), os.path.join(cand, ".git"),
                  os.path.join(cand, "repo", ".git")):
            if os.path.isdir(g) and subprocess.run(
                ["git", "--git-dir", g, "rev-parse", "--git-dir"],
                capture_output=True,
            ).returncode == 0:
                return g
    return None


def git_blob(git_dir: str, commit: str, path: str) -> bytes | None:
    proc = subprocess.run(
        ["git", "--git-dir", git_dir, "cat-file", "blob", f"{commit}:{path}"],
        capture_output=True,
    )
    return proc.stdout if proc.returncode == 0 else None


def extract(manifest: list[dict], mirrors: str, dest: Path, notebooks: bool = False) -> dict:
    stats = {"files": 0, "missing_repos": [], "missing_files": []}
    for entry in manifest:
        repo, commit = entry["repo"], entry["commit"]
        git_dir = find_git_dir(mirrors, repo)
        if git_dir is None:
            stats["missing_repos"].append(repo)
            print(f"warning: no mirror for {repo} under {mirrors}", file=sys.stderr)
            continue
        paths = list(entry["paths"]) + (list(entry.get("notebooks", [])) if notebooks else [])
        for path in paths:
            data = git_blob(git_dir, commit, path)
            if data is None:
                stats["missing_files"].append(f"{repo}:{path}")
                continue
            target = dest / repo.replace("/", "+") / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            stats["files"] += 1
    if stats["missing_files"]:
        print(f"warning: {len(stats['missing_files'])} files missing at the pinned commits "
              f"(is the mirror older/newer?): {stats['missing_files'][:5]}", file=sys.stderr)
    return stats


def lint(dest: Path, torchlint: list[str]) -> list[dict]:
    proc = subprocess.run(
        torchlint + ["--format", "json", "--no-cache", "--exit-zero", "-q", str(dest)],
        capture_output=True, text=True,
    )
    if proc.returncode != 0:
        sys.exit(f"torchlint failed ({proc.returncode}):\n{proc.stderr}")
    raw = json.loads(proc.stdout or "[]")
    findings = []
    for f in raw:
        rel = Path(f["path"]).resolve().relative_to(dest.resolve())
        repo_dir, *rest = rel.parts
        owner, _, name = repo_dir.partition("+")
        findings.append({
            "repo": f"{owner}/{name}", "path": "/".join(rest), "line": f["line"],
            "column": f.get("column"), "code": f["code"], "message": f["message"],
        })
    findings.sort(key=lambda f: (f["repo"], f["path"], f["line"], f["code"]))
    return findings


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--manifest", default=str(HERE / "manifest.json"))
    ap.add_argument("--mirrors", default=DEFAULT_MIRRORS, help="directory holding owner+name* mirrors")
    ap.add_argument("--extract-only", metavar="DEST", help="extract the files into DEST and stop")
    ap.add_argument("--keep", metavar="DEST", help="extract into DEST (kept) instead of a temp dir")
    ap.add_argument("--notebooks", action="store_true", help="also extract the listed notebooks")
    ap.add_argument("--out", default="findings.json", help="where to write the findings list")
    ap.add_argument("--torchlint", default=f"{sys.executable} -m torchlint",
                    help="command that runs torchlint (default: this interpreter's module)")
    args = ap.parse_args(argv)

    manifest = json.loads(Path(args.manifest).read_text())
    if args.extract_only:
        dest = Path(args.extract_only)
        stats = extract(manifest, args.mirrors, dest, args.notebooks)
        print(f"extracted {stats['files']} files into {dest}")
        return 1 if stats["missing_repos"] else 0

    with tempfile.TemporaryDirectory(prefix="torchlint-scripts-") as tmp:
        dest = Path(args.keep or tmp)
        stats = extract(manifest, args.mirrors, dest)
        findings = lint(dest, args.torchlint.split())
    Path(args.out).write_text(json.dumps(findings, indent=1) + "\n")

    per_rule = Counter(f["code"] for f in findings)
    per_repo = Counter(f["repo"] for f in findings)
    print(f"{stats['files']} files linted from {len(manifest) - len(stats['missing_repos'])} repos; "
          f"{len(findings)} findings -> {args.out}")
    for code, n in sorted(per_rule.items()):
        print(f"  {code}  {n}")
    print("per repo:")
    for repo, n in per_repo.most_common():
        print(f"  {n:4d}  {repo}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
