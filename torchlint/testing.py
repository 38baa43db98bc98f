"""Helpers for testing rules against source marked with ``# expect: CODE`` comments."""

from __future__ import annotations

import re
from collections.abc import Sequence

from torchlint.engine import lint_source
from torchlint.rule import Rule
from torchlint.verify.fixtures import fixtures_dir

__all__ = [
    "EXPECT_RE", "actual_findings", "assert_findings_match_markers", "describe_mismatch", "expected_findings",
    "fixtures_dir",
]

EXPECT_RE = re.compile(r"#\s*expect:\s*(TL\d{3}(?:\s*,\s*TL\d{3})*)")


def expected_findings(text: str) -> set[tuple[int, str]]:
    """(line, code) for every ``# expect: TL101[, TL102]`` marker."""
    expected = set()
    for number, line in enumerate(text.splitlines(), start=1):
        match = EXPECT_RE.search(line)
        if match:
            expected.update((number, code.strip()) for code in match.group(1).split(","))
    return expected


def actual_findings(text: str, rules: Sequence[type[Rule]], path: str = "<snippet>",
                    prefilter: bool = True) -> set[tuple[int, str]]:
    return {(v.line, v.code) for v in lint_source(text, path, rules, prefilter=prefilter)}


def describe_mismatch(expected: set, actual: set) -> str:
    missing = sorted(expected - actual)
    extra = sorted(actual - expected)
    return f"missing (line, code): {missing}; unexpected: {extra}"


def assert_findings_match_markers(text: str, rules: Sequence[type[Rule]]) -> None:
    """The rules report exactly the ``# expect:`` markers of ``text``, with the substring
    prefilter on and off."""
    expected = expected_findings(text)
    for prefilter in (True, False):
        actual = actual_findings(text, rules, prefilter=prefilter)
        assert actual == expected, describe_mismatch(expected, actual)
