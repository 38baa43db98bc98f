"""``torchlint verify [CODES...]``: run each rule's bad and good fixtures and check its claim.

Exit 0 when every claim measurable on the device is confirmed, 1 when any is refuted or errors,
2 on usage errors (including a missing torch or, with --plot, matplotlib).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Sequence

INSTALL_HINT = ("torchlint verify needs PyTorch: pip install torch --index-url "
                "https://download.pytorch.org/whl/cpu (CPU only; plain `pip install torch` for CUDA)")
DEFAULT_STEPS = 8


def _check_destinations(args) -> None:
    """``--output-file`` and ``--plot`` are checked before the measurements, not after them."""
    import os

    from torchlint import cli

    if args.output_file:
        try:
            cli.check_output_path(args.output_file, "--output-file")
        except cli.UsageError as error:
            raise UsageError(str(error)) from None
    if args.plot:
        plot = Path(args.plot)
        if plot.exists() and not plot.is_dir():
            raise UsageError(f"--plot {plot}: not a directory")
        existing = plot if plot.exists() else next((p for p in plot.absolute().parents if p.exists()), None)
        if existing is None or not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
            raise UsageError(f"--plot {plot}: cannot create or write charts there")


class UsageError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchlint verify",
        description="Run every rule's bad and good fixture programs and check the rule's claim with measurements.",
    )
    parser.add_argument("codes", nargs="*", metavar="CODE", help="rules to verify (default: all)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS,
                        help=f"largest step count; fixtures also run at steps/4 and steps/2 (default {DEFAULT_STEPS})")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--output-file", metavar="FILE")
    parser.add_argument("--plot", metavar="DIR", help="write one chart per rule to DIR, showing the measurement its claim is about")
    parser.add_argument("--fixtures", metavar="DIR", default=None,
                        help="the fixtures directory (default: $TORCHLINT_FIXTURES, else the fixtures "
                             "installed with torchlint, which are the repository's fixtures/)")
    parser.add_argument("--jobs", type=int, default=None, help="probes run at once (default: min(2, CPUs))")
    parser.add_argument("--no-fixes", action="store_true",
                        help="do not check the rules' fixes (by default each fixed bad program must pass the claim's check)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exit_:  # argparse already printed the usage error
        return 0 if exit_.code == 0 else 2
    # find_spec, not import: measuring happens in probe processes, and `import torch` costs ~2 s.
    if not _torch_installed():
        print(INSTALL_HINT, file=sys.stderr)
        return 2
    try:
        return _verify(args)
    except UsageError as error:
        print(f"torchlint verify: error: {error}", file=sys.stderr)
        return 2


def _torch_installed() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # a broken or blocked installation
        return False


def _verify(args: argparse.Namespace) -> int:
    from torchlint.verify.claims import all_claims
    from torchlint.verify.runner import environment
    from torchlint.verify.verifier import verify

    if args.steps < 2:
        raise UsageError("--steps must be at least 2 (growth is measured between step counts)")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UsageError("--plot needs matplotlib: pip install matplotlib") from None
    _check_destinations(args)
    claims = all_claims()
    known = {claim.code for claim in claims}
    wanted = [code.upper() for code in args.codes]
    unknown = [code for code in wanted if code not in known]
    if unknown:
        raise UsageError(f"no claims for {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    if wanted:
        claims = [claim for claim in claims if claim.code in wanted]
    if args.fixtures is None:
        from torchlint.verify.fixtures import default_fixtures_dir

        fixtures = default_fixtures_dir()
    else:
        fixtures = Path(args.fixtures)
    if not fixtures.is_dir():
        raise UsageError(f"fixtures directory not found: {fixtures}")

    started = time.perf_counter()
    env = environment()
    if env.get("error"):
        print(f"torchlint verify: cannot start torch: {env['error']}", file=sys.stderr)
        return 1
    device = ("cuda" if env["cuda"] else "cpu") if args.device == "auto" else args.device
    if device == "cuda" and not env["cuda"]:
        raise UsageError("--device cuda: CUDA is not available")
    records = _verify_with_fixes(claims, device, args, fixtures, env["torch_version"], verify)
    elapsed = time.perf_counter() - started
    text = json.dumps(records, indent=2) + "\n" if args.format == "json" else render_text(records, elapsed)
    if args.output_file:
        Path(args.output_file).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    if args.plot:
        from torchlint.verify.plot import plot_records

        for path in plot_records(records, Path(args.plot)):
            print(f"wrote {path}", file=sys.stderr)
    return 1 if any(record["verdict"] in ("refuted", "error") for record in records) else 0


def _verify_with_fixes(claims, device, args, fixtures, torch_version, verify) -> list[dict]:
    """The claims' records (``"kind": "claim"``) followed by one record per fix check
    (``"kind": "fix"``, see ``torchlint.verify.fixes``)."""
    import tempfile

    from torchlint.verify.fixes import CLAIM, FIX, fix_claims

    with tempfile.TemporaryDirectory(prefix="torchlint-fixed-") as directory:
        checks = [] if args.no_fixes else fix_claims(claims, fixtures, Path(directory))
        records = verify(claims + checks, device, args.steps, fixtures, torch_version, args.jobs)
    for index, record in enumerate(records):
        record["kind"] = CLAIM if index < len(claims) else FIX
    return records


def render_text(records: list[dict], elapsed: float) -> str:
    from torchlint.verify.claims import VERDICTS

    header = ("rule", "claim", "metric", "bad", "good", "verdict")
    rows = [header] + [
        (r["code"] + (" fix" if r.get("kind") == "fix" else ""), _shorten(r["claim"], 56), r["metric"],
         r["bad"].get("summary") or "-",
         r["good"].get("summary") or "-", r["verdict"])
        for r in records
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    for r in records:
        if r["verdict"] in ("refuted", "error") and r["detail"]:
            lines.append(f"{r['code']} {r['verdict']}: {r['detail']}")
    counts = {verdict: sum(r["verdict"] == verdict for r in records) for verdict in VERDICTS}
    device = records[0]["device"] if records else "-"
    torch_version = records[0]["torch_version"] if records else "-"
    lines.append(", ".join(f"{count} {verdict}" for verdict, count in counts.items())
                 + f" (device {device}, torch {torch_version}, {elapsed:.1f} s)")
    return "\n".join(lines) + "\n"


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


if __name__ == "__main__":
    raise SystemExit(main())
