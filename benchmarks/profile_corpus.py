"""Profile torchlint's lint path on the corpus with cProfile (one process, no cache).

    python benchmarks/profile_corpus.py --corpus /work/corpus [--top 15] [--sort cumtime]
        [--no-prefilter] [--package timm] [--output profile.pstats]

Runs exactly what a cold serial run does per file (read, decode, prefilter, parse, analyse, every
default rule, positions) and prints the hottest functions.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import CACHE_HOME, corpus_files  # noqa: E402  (after the path set-up)

from torchlint import engine  # noqa: E402
from torchlint.runner import Job, check_file  # noqa: E402
from torchlint.rules import default_rules  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CACHE_HOME / "corpus")
    parser.add_argument("--package", help="only this corpus package")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--sort", default="cumtime", choices=["cumtime", "tottime", "ncalls"])
    parser.add_argument("--no-prefilter", action="store_true")
    parser.add_argument("--output", type=Path, help="also save the raw pstats here")
    args = parser.parse_args(argv)

    files = corpus_files(args.corpus.expanduser().resolve())
    if args.package:
        files = [f for f in files if f.relative_to(args.corpus.resolve()).parts[0] == args.package]
    job = Job(default_rules(), {}, prefilter=not args.no_prefilter)
    profile = cProfile.Profile(time.process_time)  # CPU time: the machine may be shared

    # The engine parses and analyses on a thread of its own, which cProfile (per thread) does not
    # see: profile each of its calls on that thread, everything else the engine does unchanged.
    run_deep = engine._run_deep
    engine._run_deep = lambda function, *arguments: run_deep(profile.runcall, function, *arguments)

    start = time.process_time()
    findings = sum(len(check_file(str(path), None, job).violations or []) for path in files)
    print(f"{len(files)} files, {findings} findings, {time.process_time() - start:.1f} CPU s under cProfile\n")
    stats = pstats.Stats(profile)
    if args.output:
        stats.dump_stats(str(args.output))
    stats.strip_dirs().sort_stats(args.sort).print_stats(args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
