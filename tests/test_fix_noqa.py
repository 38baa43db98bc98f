"""TL001 unused-noqa and `--add-noqa`: suppressions as fixes, never touching other tools' codes."""

from __future__ import annotations

from cli_support import cli, write  # noqa: F401 - fixtures are used by name
from torchlint.engine import lint_source
from torchlint.fixer import fix_text, parses
from torchlint.rules import all_rules, rules_by_code

STALE = """\
import torch

for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    history.append(loss.item())  # noqa: TL101
    total += loss.item()  # noqa: E501, TL102
    log(loss)  # noqa: TL101  # kept for the dashboard
    note = "# noqa: TL101 in a string"
"""


def tl001(source: str, rules=None) -> list[tuple[int, int]]:
    rules = rules or (rules_by_code()["TL001"],)
    return [(v.line, v.column) for v in lint_source(source, "t.py", rules) if v.code == "TL001"]


def test_stale_codes_are_reported_where_they_are_written():
    assert tl001(STALE) == [(6, 42), (7, 41), (8, 24)]


def test_a_noqa_that_still_suppresses_is_quiet_even_when_its_rule_is_not_selected():
    source = "losses = []\nfor x, y in loader:\n    losses.append(model(x))  # noqa: TL101\n"
    assert tl001(source) == []
    # and the suppressed TL101 itself is not reported when only TL001 is selected
    assert [v.code for v in lint_source(source, "t.py", (rules_by_code()["TL001"],))] == []


def test_other_tools_codes_and_bare_noqa_are_never_reported():
    assert tl001("import os  # noqa: F401\nx = 1  # noqa\ny = 2  # noqa: E501,W291\n") == []


def test_tl001_is_off_by_default():
    assert not rules_by_code()["TL001"].ENABLED_BY_DEFAULT
    assert tl001(STALE, rules=tuple(rule for rule in all_rules() if rule.ENABLED_BY_DEFAULT)) == []


def test_the_fix_removes_only_the_stale_code():
    result = fix_text(STALE, "t.py", (rules_by_code()["TL001"],))
    assert result.fixed.splitlines()[5:9] == [
        "    history.append(loss.item())",
        "    total += loss.item()  # noqa: E501",
        "    log(loss)  # kept for the dashboard",
        '    note = "# noqa: TL101 in a string"',
    ]
    assert tl001(result.fixed) == []


def test_add_noqa_suppresses_what_cannot_be_fixed_and_merges_with_existing_comments(cli, tmp_path):
    source = ('import torch\n\nfor x in loader:\n    feats.append(model(x))\n    doc = """\n    text"""\n'
              '    total += model(x)  # noqa: E501\n    w = torch.zeros(3, requires_grad=True)\n    w.add_(1)\n')
    path = write(tmp_path, "a.py", source)
    result = cli("--add-noqa", "--no-cache", "a.py")
    text = path.read_text()
    assert "    feats.append(model(x))  # noqa: TL101\n" in text
    assert "    total += model(x)  # noqa: E501, TL102\n" in text
    assert "    w.add_(1)\n" in text  # TL301 has a safe fix: fix it rather than silence it
    assert 'doc = """\n    text"""\n' in text and parses(text) is None
    assert "Added 2 noqa directives." in result.err
    assert [v.code for v in lint_source(text, "a.py", all_rules())] == ["TL301"]
    cli("--add-noqa", "--no-cache", "a.py")
    assert path.read_text() == text  # nothing more to add
