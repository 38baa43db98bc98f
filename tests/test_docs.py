"""Rule documentation: the committed rules/ pages are what the generator produces now."""

from __future__ import annotations

import json

from cli_support import REPO, TOY_RULES, PassStatement, PrintCall
from torchlint.docs import explain, main, render_index, render_page, stale_pages, write_rule_pages
from torchlint.rules import all_rules

RULES_DIR = REPO / "rules"


def test_committed_rule_pages_are_up_to_date():
    stale = stale_pages(str(RULES_DIR))
    assert stale == [], f"run `python -m torchlint.docs rules/` and commit: stale {stale}"


def test_every_real_rule_explains_itself():
    for rule in all_rules():
        text = explain(rule)
        assert text.startswith(f"# {rule.CODE} {rule.NAME}\n")
        assert "## What it does" in text and "## Why is this bad?" in text
        assert "```python\n" + rule.INVALID[0].strip("\n") + "\n```" in text
        assert "```python\n" + rule.VALID[0].strip("\n") + "\n```" in text


def test_explain_orders_sections_like_ruff():
    text = explain(PrintCall)
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == ["## What it does", "## Why is this bad?", "## Example", "## Use instead",
                        "## What `torchlint verify` checks"]


def test_index_and_pages(tmp_path):
    (tmp_path / "TL999.md").write_text("a rule that no longer exists")
    evidence = [
        {"code": "TL901", "claim": "print keeps memory", "metric": "live_bytes", "device": "cpu",
         "torch_version": "2.13.0",
         "verdict": "confirmed", "detail": "bad grows, good stays flat",
         "bad": {"fixture": "TL901/bad_loop.py", "summary": "+262,144 B/step"},
         "good": {"fixture": "TL901/good_loop.py", "summary": "+0 B/step"}},
        {"code": "TL902", "device": "cuda", "verdict": "needs-cuda"},
    ]
    (tmp_path / "evidence.json").write_text(json.dumps(evidence))
    changed = write_rule_pages(str(tmp_path), TOY_RULES)
    assert sorted(path.rsplit("/", 1)[1] for path in changed) == [
        "README.md", "TL901.md", "TL902.md", "TL903.md", "TL999.md"]
    assert not (tmp_path / "TL999.md").exists()
    assert stale_pages(str(tmp_path), TOY_RULES) == []
    assert write_rule_pages(str(tmp_path), TOY_RULES) == []  # idempotent

    index = (tmp_path / "README.md").read_text()
    assert index == render_index(TOY_RULES)
    assert "| [TL901](TL901.md) | `print-call` | Flags `print(...)` used as a statement | on |" in index
    assert "| [TL902](TL902.md) | `pass-statement` | Flags `pass` | off |" in index

    page = (tmp_path / "TL901.md").read_text()
    assert page.endswith(
        "## Evidence\n\nMeasured by `torchlint verify` on the rule's fixtures:\n\n"
        "- print keeps memory: **confirmed** (cpu, torch 2.13.0)\n"
        "  - metric: live_bytes\n"
        "  - bad `TL901/bad_loop.py`: +262,144 B/step\n"
        "  - good `TL901/good_loop.py`: +0 B/step\n"
        "  - check: bad grows, good stays flat\n"
    )
    assert "- claim: **needs-cuda** (cuda)\n" in (tmp_path / "TL902.md").read_text()
    assert "## Evidence" not in render_page(PassStatement, [])

    (tmp_path / "TL901.md").write_text("edited by hand")
    assert stale_pages(str(tmp_path), TOY_RULES) == ["TL901.md"]


def test_module_entry_point_checks_and_writes(tmp_path, capsys):
    target = tmp_path / "pages"
    assert main([str(target), "--check"]) == 1
    assert main([str(target)]) == 0
    assert main([str(target), "--check"]) == 0
    assert (target / "README.md").exists()
    capsys.readouterr()
