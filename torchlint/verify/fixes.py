"""The fix, measured: each rule's fixes applied to the bad program of each of its claims, and the
fixed program run through the claim's own check in place of the good program.

A claim's check says how the bad program differs from the good one (memory grows / stays flat,
an exception / a clean run, parameters frozen / moving). ``check(bad, fixed)`` holding means the
fixed program differs from the bad one exactly as the good one does: the fix removed the bug the
rule is about. A claim whose bad program gets no fix from its rule (the finding has no sound
fix) gets no fix check.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from torchlint.verify.claims import Claim, Program

FIX, CLAIM = "fix", "claim"


def fixed_program(claim: Claim, fixtures_dir: Path, directory: Path) -> tuple[Program, list[str]] | None:
    """The claim's bad program with every fix of the claim's rule applied (safe and unsafe),
    written under ``directory``; None when the rule fixes nothing in it."""
    from torchlint.fixer import fix_text
    from torchlint.rules import rules_by_code

    rule = rules_by_code().get(claim.code)
    source = claim.bad.resolve(fixtures_dir)
    if rule is None or not source.is_file():
        return None
    result = fix_text(source.read_text(encoding="utf-8"), str(source), [rule], unsafe=True)
    if not result.changed or result.refused:
        return None
    target = directory / claim.code / f"fixed_{source.name}"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(result.fixed, encoding="utf-8")
    messages = list(dict.fromkeys(violation.fix.message for violation in result.applied))
    return Program(str(target), claim.bad.function), messages


def fix_claims(claims: list[Claim], fixtures_dir: Path, directory: Path) -> list[Claim]:
    """One fix check per claim whose bad program its rule can fix."""
    checks = []
    for claim in claims:
        fixed = fixed_program(claim, fixtures_dir, directory)
        if fixed is None:
            continue
        program, messages = fixed
        shown = "; ".join(messages[:2]) + ("; ..." if len(messages) > 2 else "")
        checks.append(dataclasses.replace(
            claim, good=program,
            claim=f"the fix, measured ({shown}): the fixed program passes the claim's check in place of the good one",
        ))
    return checks
