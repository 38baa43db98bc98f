"""Fast paths of hot helpers give the same answers as the plain code they replace."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from torchlint.rules.tl201_eval_without_no_grad import TRAINING_RE, mentions_training

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

# Each alternative of TRAINING_RE, its near misses (word boundaries, the lookbehinds), and text
# that contains a gate substring without matching.
TRAINING_SNIPPETS = [
    "loss.backward()", "torch.optim.SGD", "xoptim.SGD", "optimizer", "optimizers", "optimisers",
    "optimizerx", "self.optimizer_state", "opt.step()", "env.step(a)", "envs.step(a)", "xenv.step(",
    "model.fit(x)", "fit_generator(", "refit(", "benefit", "model.train()", "train", "autograd.grad(",
    "autograd.backward", "autograd.functional.jacobian", "autograd.Function", "x.requires_grad_()",
    "Trainer", "trainer", "Trainers", "pl.Trainer(", "grad(f)", "torch.autograd.grad", "nograd(",
    "botorch", "import gpytorch", "pyro.sample", "pyroxene", "mybotorch", "gpytorchx", "fitness",
    "", "import torch\nmodel.eval()\n", "optim", "# optim.\n",
]


@pytest.mark.parametrize("text", TRAINING_SNIPPETS)
def test_mentions_training_agrees_with_training_re(text):
    assert mentions_training(text) is (TRAINING_RE.search(text) is not None)


def test_mentions_training_agrees_on_pairs_and_fixtures():
    texts = [a + "\n" + b for a, b in itertools.product(TRAINING_SNIPPETS, repeat=2)]
    texts += [path.read_text(encoding="utf-8", errors="replace") for path in sorted(FIXTURES.rglob("*.py"))]
    disagreeing = [text for text in texts if mentions_training(text) is not (TRAINING_RE.search(text) is not None)]
    assert not disagreeing
    assert any(mentions_training(text) for text in texts) and not all(mentions_training(text) for text in texts)


def test_kept_mention_answers_still_record_the_module_read(tmp_path, monkeypatch):
    """Project.mentions keeps its answers while one file is linted; a kept answer must record
    the module it read as a dependency again (the cache re-lints on its change), and a new
    file's lint (``begin``) must read the module again."""
    from types import SimpleNamespace

    from torchlint.analysis.project import Project

    (tmp_path / "pyproject.toml").write_text("")
    helper = tmp_path / "helpers.py"
    helper.write_text("def train_step(model):\n    return model\n")
    importer = str(tmp_path / "train.py")
    analysis = SimpleNamespace(path=importer, imports={"helpers": "helpers"})
    index = Project()
    index.begin()
    assert index.mentions(analysis, "helpers.train_step", "def train_step")
    assert not index.mentions(analysis, "helpers.train_step", "backward")
    recorded = dict(index.consulted)
    assert str(helper) in recorded
    index.consulted.clear()  # the same record: the kept answers answer, and record the read again
    assert index.mentions(analysis, "helpers.train_step", "def train_step")
    assert index.consulted == recorded
    helper.write_text("def other():\n    pass\n")
    index.begin()  # a new file: read again
    assert not index.mentions(analysis, "helpers.train_step", "def train_step")
    assert index.consulted[str(helper)] != recorded[str(helper)]
