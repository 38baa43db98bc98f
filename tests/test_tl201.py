"""TL201 behaviour the VALID/INVALID snippets cannot state: the `eval-function-words` option
(directly and through `[tool.torchlint]`), unit tests in test files, and the message."""

from __future__ import annotations

import json
from textwrap import dedent

from torchlint.cli import main
from torchlint.engine import lint_source
from torchlint.rules import rules_by_code

RULE = rules_by_code()["TL201"]

SCORING = """\
def score_batches(model, loader):
    return [model(x).argmax(1) for x in loader]

def evaluate(model, loader):
    return [model(x).argmax(1) for x in loader]
"""


def lines(source: str, path: str = "project/eval.py", options: dict | None = None) -> list[int]:
    return [v.line for v in lint_source(dedent(source), path, [RULE], options=options, prefilter=False)]


def test_default_words_make_evaluate_evaluation_code_but_not_score():
    assert lines(SCORING) == [5]


def test_eval_function_words_replace_the_default_list():
    assert lines(SCORING, options={"eval-function-words": ["score"]}) == [2]
    assert lines(SCORING, options={"eval-function-words": ["Score", "evaluate"]}) == [2, 5]


def test_eval_function_words_from_pyproject(tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\neval-function-words = ["score"]\n')
    (tmp_path / "scoring.py").write_text("import torch\n" + SCORING)
    monkeypatch.chdir(tmp_path)
    code = main(["scoring.py", "--select", "TL201", "--format", "json", "--no-cache", "-q"])
    assert code == 1
    assert [(item["line"], item["code"]) for item in json.loads(capsys.readouterr().out)] == [(3, "TL201")]


PYTEST_STYLE = """\
def test_forward_shapes(model, batches):
    for x in batches:
        assert model(x).shape[-1] == 10

def test_eval_mode_is_deterministic(model, batches):
    model.eval()
    for x in batches:
        assert torch.equal(model(x), model(x))
"""


def test_test_functions_in_test_files_are_not_evaluation_by_name():
    # a pytest test is not an evaluation loop; model.eval() still makes evaluation code
    for path in ("tests/test_model.py", "pkg/tests/models/checks.py", "test_model.py", "model_test.py"):
        assert lines(PYTEST_STYLE, path) == [8], path


def test_test_functions_elsewhere_are_evaluation_by_name():
    assert lines(PYTEST_STYLE, "train.py") == [3, 8]


def test_one_finding_per_function_at_the_first_forward_with_grad():
    source = """\
    def validate(model, loader, other_loader):
        model.eval()
        with torch.no_grad():
            for x in loader:
                model(x)
        for x in other_loader:
            logits = model(x)
            probs = model(x).softmax(-1)
    """
    [finding] = lint_source(dedent(source), "v.py", [RULE], prefilter=False)
    assert finding.line == 7
    assert "`model(x)`" in finding.message
    assert "`validate`" in finding.help and "torch.no_grad()" in finding.help


def test_train_false_starts_and_train_ends_the_region():
    source = """\
    def epoch(model, optimizer, train_loader, val_loader):
        model.train(False)
        for x in val_loader:
            model(x)
        model.train()
        for x in train_loader:
            model(x).sum()
    """
    assert lines(source) == [4]


def test_scaled_backward_makes_the_region_training():
    source = """\
    def finetune(model, loader, optimizer, scaler):
        model.eval()
        for x in loader:
            scaler.scale(model(x).sum()).backward()
    """
    assert lines(source) == []
