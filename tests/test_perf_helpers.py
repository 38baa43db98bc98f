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
