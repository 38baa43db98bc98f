"""Property tests for `--fix`: on any valid program the fixed text parses, a second fix changes
nothing, and a program without findings is never changed. Programs come from hypothesmith
(arbitrary valid Python) and from the PyTorch-shaped grammar of test_properties.py."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings

from test_properties import SETTINGS, compiles, libcst_parses, torch_program
from torchlint.engine import lint_source
from torchlint.fixer import fix_text
from torchlint.rules import all_rules
from torchlint.violation import INVALID_FILE_CODE


def assert_fix_is_sound(source: str) -> None:
    rules = all_rules()
    findings = lint_source(source, "generated.py", rules)
    result = fix_text(source, "generated.py", rules, unsafe=True)
    if not findings or any(finding.code == INVALID_FILE_CODE for finding in findings):
        assert result.fixed == source, "a file without findings was changed"
        return
    assert result.refused is None, result.refused
    if result.changed:
        assert compiles(result.fixed) and libcst_parses(result.fixed), f"unparsable fix of:\n{source}\n---\n{result.fixed}"
        again = fix_text(result.fixed, "generated.py", rules, unsafe=True)
        assert again.fixed == result.fixed, f"a second --fix changed:\n{result.fixed}\n---\n{again.fixed}"


@SETTINGS
@given(torch_program())
def test_fixing_torch_shaped_programs(source):
    assume(compiles(source))
    assert_fix_is_sound(source)


hypothesmith = pytest.importorskip("hypothesmith")


@settings(SETTINGS, max_examples=30)
@given(hypothesmith.from_grammar())
def test_fixing_arbitrary_programs(source):
    assume(libcst_parses(source) and compiles(source))
    assert_fix_is_sound(source)
