"""The fix, measured: which fix checks `torchlint verify` derives from the claims, and how they
are reported (records, text table, rule pages). The measurements themselves run in
tests/test_verify.py, with every other claim."""

from __future__ import annotations

from pathlib import Path

from torchlint.docs import render_page
from torchlint.rules import rules_by_code
from torchlint.verify.claims import Claim, Program, all_claims
from torchlint.verify.fixes import fix_claims

REPO = Path(__file__).resolve().parent.parent


def test_every_fixable_claim_gets_a_fix_check_on_its_fixed_bad_program(tmp_path):
    from torchlint.rules import rules_by_code

    fixable = {code for code, rule in rules_by_code().items() if rule.AUTOFIX}
    claims = [claim for claim in all_claims() if claim.code in fixable]
    checks = fix_claims(claims, REPO / "fixtures", tmp_path)
    by_code = {check.code for check in checks}
    assert by_code == {claim.code for claim in claims}  # every rule that offers fixes has a sound one there
    for check in checks:
        original = next(claim for claim in claims if claim.bad == check.bad and claim.code == check.code)
        assert check.check is original.check and check.bad == original.bad
        fixed = Path(check.good.path)
        assert fixed.is_file() and fixed.parent == tmp_path / check.code and fixed.name.startswith("fixed_bad")
        assert fixed.read_text() != (REPO / "fixtures" / check.bad.path).read_text()
        assert check.claim.startswith("the fix, measured (")


def test_a_claim_whose_bad_program_gets_no_fix_has_no_fix_check(tmp_path):
    program = tmp_path / "TL401" / "bad_helper.py"
    program.parent.mkdir()
    program.write_text("import torch\n\ndef free():\n    torch.cuda.empty_cache()\n\n"
                       "def run(steps, device):\n    for _ in range(steps):\n        free()\n")
    claim = Claim("TL401", "c", "m", Program(str(program)), Program(str(program)), check=lambda bad, good: None)
    assert fix_claims([claim], tmp_path, tmp_path / "out") == []


def test_rule_pages_show_the_fix_measured_apart_from_the_evidence():
    entry = {"code": "TL301", "claim": "raises", "verdict": "confirmed", "device": "cpu", "kind": "claim",
             "bad": {"fixture": "TL301/bad_a.py", "summary": "RuntimeError"},
             "good": {"fixture": "TL301/good_a.py", "summary": "runs"}}
    fix = dict(entry, kind="fix", claim="the fix, measured (Wrap)",
               good={"fixture": "TL301/fixed_bad_a.py", "summary": "runs"})
    page = render_page(rules_by_code()["TL301"], [entry, fix])
    evidence, measured = page.split("## The fix, measured")
    assert "## Evidence" in evidence and "the fix, measured (Wrap)" not in evidence
    assert "- fixed `TL301/fixed_bad_a.py`: runs" in measured and "- good" not in measured
    assert "## Fix\n\nSafe" in page


def test_records_say_which_are_claims_and_which_are_fix_checks(tmp_path):
    import argparse

    from torchlint.verify.cli import _verify_with_fixes, render_text

    claims = [claim for claim in all_claims() if claim.code == "TL301"]
    seen = []

    def fake_verify(all_of_them, device, steps, fixtures, torch_version, jobs):
        seen.extend(all_of_them)
        return [{"code": each.code, "claim": each.claim, "metric": each.metric, "verdict": "confirmed",
                 "detail": "", "device": device, "torch_version": torch_version,
                 "bad": {"summary": "b"}, "good": {"summary": "g"}} for each in all_of_them]

    args = argparse.Namespace(no_fixes=False, steps=8, jobs=1)
    records = _verify_with_fixes(claims, "cpu", args, REPO / "fixtures", "2.x", fake_verify)
    assert [record["kind"] for record in records] == ["claim"] * len(claims) + ["fix"] * len(claims)
    assert "TL301 fix" in render_text(records, 1.0)
    args.no_fixes = True
    assert {record["kind"] for record in _verify_with_fixes(claims, "cpu", args, REPO / "fixtures", "2.x",
                                                             fake_verify)} == {"claim"}
