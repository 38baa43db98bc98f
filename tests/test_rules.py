"""Every rule's own VALID/INVALID examples and every fixture file, checked line by line."""

from __future__ import annotations

import pytest

from torchlint.rules import all_rules
from torchlint.testing import actual_findings, describe_mismatch, expected_findings, fixtures_dir

FIXTURES = fixtures_dir()  # the installed torchlint._fixtures: in a checkout, the top-level fixtures/
RULES = all_rules()


def _examples(kind: str):
    for rule in RULES:
        for index, snippet in enumerate(getattr(rule, kind)):
            yield pytest.param(rule, snippet, id=f"{rule.CODE}-{kind.lower()}-{index}")


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.CODE)
def test_rule_definition(rule):
    assert rule.check_definition() == []


def test_codes_and_names_are_unique():
    assert len({rule.CODE for rule in RULES}) == len(RULES)
    assert len({rule.NAME for rule in RULES}) == len(RULES)


@pytest.mark.parametrize(("rule", "snippet"), list(_examples("INVALID")))
def test_invalid_example_is_reported_exactly(rule, snippet):
    expected = {(line, code) for line, code in expected_findings(snippet) if code == rule.CODE}
    assert expected, "INVALID examples must mark their finding with `# expect:`"
    for prefilter in (True, False):
        actual = actual_findings(snippet, [rule], prefilter=prefilter)
        assert actual == expected, describe_mismatch(expected, actual)


@pytest.mark.parametrize(("rule", "snippet"), list(_examples("VALID")))
def test_valid_example_is_quiet(rule, snippet):
    assert expected_findings(snippet) == set()
    assert actual_findings(snippet, [rule], prefilter=False) == set()


FIXTURE_FILES = sorted(FIXTURES.glob("TL*/*.py"))


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_findings_match_markers(path):
    text = path.read_text(encoding="utf-8")
    expected = expected_findings(text)
    if path.name.startswith("bad"):
        assert any(code == path.parent.name for _, code in expected), "a bad fixture marks its rule's findings"
    actual = actual_findings(text, RULES, path=str(path))
    assert actual == expected, describe_mismatch(expected, actual)


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.CODE)
def test_every_rule_has_bad_and_good_fixtures(rule):
    folder = FIXTURES / rule.CODE
    assert sorted(folder.glob("bad*.py")), f"no fixtures/{rule.CODE}/bad*.py"
    assert sorted(folder.glob("good*.py")), f"no fixtures/{rule.CODE}/good*.py"
