"""The project index: answers read from other modules of the linted project (helpers, base
classes, model classes imported from another file), and the modules each answer depends on."""

from __future__ import annotations

import json
import textwrap

import pytest

from torchlint.analysis.project import project
from torchlint.engine import lint_file
from torchlint.rules import default_rules


def write(root, files: dict[str, str]) -> None:
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def codes(path) -> list[tuple[int, str]]:
    return [(v.line, v.code) for v in lint_file(str(path), default_rules())]


LOSS_HELPER = """\
    import torch
    import torch.nn.functional as F

    def compute_loss(model, batch):
        x, y = batch
        return F.cross_entropy(model(x), y)

    @torch.no_grad()
    def compute_loss_value(model, batch):
        x, y = batch
        return F.cross_entropy(model(x), y).item()
    """

# The loss never reaches backward() in this loop: only the helper's summary says it is attached.
TRAIN_WITH_IMPORTED_LOSS = """\
    import torch
    from {module} import compute_loss

    def validate(model, loader):
        model.eval()
        losses = []
        with torch.no_grad():
            pass
        for batch in loader:
            loss = compute_loss(model, batch)
            losses.append(loss)
        return sum(l.item() for l in losses)
    """


def test_attached_value_returned_by_a_helper_in_another_module(tmp_path):
    write(tmp_path, {"helpers.py": LOSS_HELPER, "train.py": TRAIN_WITH_IMPORTED_LOSS.format(module="helpers")})
    assert (10, "TL201") in codes(tmp_path / "train.py")


def test_relative_import_inside_a_package(tmp_path):
    write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/losses.py": LOSS_HELPER,
        "pkg/train.py": TRAIN_WITH_IMPORTED_LOSS.format(module=".losses"),
    })
    assert (10, "TL201") in codes(tmp_path / "pkg" / "train.py")


def test_reexport_through_a_package_init(tmp_path):
    write(tmp_path, {
        "pkg/__init__.py": "from .losses import compute_loss\n",
        "pkg/losses.py": LOSS_HELPER,
        "train.py": TRAIN_WITH_IMPORTED_LOSS.format(module="pkg"),
    })
    assert (10, "TL201") in codes(tmp_path / "train.py")


def test_helper_returning_a_number_is_quiet(tmp_path):
    train = TRAIN_WITH_IMPORTED_LOSS.format(module="helpers").replace(
        "import compute_loss", "import compute_loss_value as compute_loss")
    write(tmp_path, {"helpers.py": LOSS_HELPER, "train.py": train})
    assert codes(tmp_path / "train.py") == []


def test_unknown_module_stays_unknown(tmp_path):
    write(tmp_path, {"train.py": TRAIN_WITH_IMPORTED_LOSS.format(module="somewhere_else")})
    assert codes(tmp_path / "train.py") == []


BASE_TRAINER = """\
    class BaseTrainer:
        def fit(self, loader, epochs):
            for epoch in range(epochs):
                for batch in loader:
                    self.run_batch(batch)

        def run_batch(self, batch):
            raise NotImplementedError
    """

SUBCLASS = """\
    import torch
    from base import BaseTrainer

    class Trainer(BaseTrainer):
        def __init__(self, model, optimizer):
            self.model, self.optimizer = model, optimizer
            self.history = []

        def run_batch(self, batch):
            self.optimizer.zero_grad()
            loss = self.model(batch).mean()
            loss.backward()
            self.optimizer.step()
            self.history.append(loss)
    """


def test_step_method_called_in_a_loop_of_a_base_class_in_another_module(tmp_path):
    write(tmp_path, {"base.py": BASE_TRAINER, "trainer.py": SUBCLASS})
    assert (14, "TL101") in codes(tmp_path / "trainer.py")


def test_without_the_base_class_loop_the_method_is_not_per_step(tmp_path):
    write(tmp_path, {"base.py": BASE_TRAINER.replace("for batch in loader:\n", "if loader:\n"), "trainer.py": SUBCLASS})
    assert (14, "TL101") not in codes(tmp_path / "trainer.py")


HELPER_CLEARING = """\
    def prepare(optimizer):
        optimizer.zero_grad(set_to_none=True)
    """

TRAIN_WITH_IMPORTED_CLEAR = """\
    import torch
    from optim_utils import prepare

    def train(model, loader, optimizer):
        for x, y in loader:
            prepare(optimizer)
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
    """


def test_gradients_cleared_in_an_imported_helper(tmp_path):
    write(tmp_path, {"optim_utils.py": HELPER_CLEARING, "train.py": TRAIN_WITH_IMPORTED_CLEAR})
    assert codes(tmp_path / "train.py") == []
    write(tmp_path, {"optim_utils.py": "def prepare(optimizer):\n    pass\n"})
    assert (9, "TL501") in codes(tmp_path / "train.py")


MODELS = """\
    import torch.nn as nn

    class Generator(nn.Module):
        def forward(self, z):
            return z
    """

EVALUATE_IMPORTED_MODEL = """\
    import torch
    from models import Generator

    net_g = Generator()
    samples = []
    for z in torch.randn(8, 4, 16):
        samples.append(net_g(z))
    """


def test_model_class_imported_from_another_module(tmp_path):
    write(tmp_path, {"models.py": MODELS, "sample.py": EVALUATE_IMPORTED_MODEL})
    found = codes(tmp_path / "sample.py")
    assert any(code in ("TL101", "TL201") for _, code in found)
    write(tmp_path, {"models.py": "class Generator:\n    def __call__(self, z):\n        return z\n"})
    assert codes(tmp_path / "sample.py") == []


def test_modules_consulted_are_recorded_with_their_hash(tmp_path):
    write(tmp_path, {"helpers.py": LOSS_HELPER, "train.py": TRAIN_WITH_IMPORTED_LOSS.format(module="helpers")})
    project().begin()
    codes(tmp_path / "train.py")
    consulted = project().consulted
    assert str(tmp_path / "helpers.py") in consulted
    assert all(len(digest) == 64 and mtime > 0 for digest, mtime, _ in consulted.values())


@pytest.mark.parametrize("cycle", [True, False])
def test_import_cycles_and_self_imports_terminate(tmp_path, cycle):
    write(tmp_path, {
        "a.py": "from b import f\n\ndef g(model, x):\n    return f(model, x)\n",
        "b.py": ("from a import g\n\ndef f(model, x):\n    return g(model, x)\n" if cycle
                 else "def f(model, x):\n    return model(x)\n"),
        "train.py": "import torch\nfrom a import g\nout = []\nfor x in loader:\n    out.append(g(model, x))\n"
                    "    out[-1].sum().backward()\n",
    })
    codes(tmp_path / "train.py")  # terminates, no TL000
    assert all(code != "TL000" for _, code in codes(tmp_path / "train.py"))


def test_cache_relints_a_file_when_a_module_it_read_changes(tmp_path):
    from cli_support import run_torchlint

    write(tmp_path, {"helpers.py": LOSS_HELPER, "train.py": TRAIN_WITH_IMPORTED_LOSS.format(module="helpers")})
    target = str(tmp_path / "train.py")
    first = run_torchlint("--format", "json", target, cwd=tmp_path)
    # the helper's summary makes the loss attached: the forward with grad on (TL201) and the
    # list that keeps every batch's graph until the sum (TL101)
    assert sorted(v["code"] for v in json.loads(first.stdout)) == ["TL101", "TL201"]
    assert (tmp_path / ".torchlint_cache").is_dir()
    # the helper now runs its forward pass without autograd: the caller's finding goes away
    (tmp_path / "helpers.py").write_text(textwrap.dedent(LOSS_HELPER).replace(
        "def compute_loss(model", "@torch.no_grad()\ndef compute_loss(model"))
    second = run_torchlint("--format", "json", target, cwd=tmp_path)
    assert json.loads(second.stdout) == []
    # and unchanged files come from the cache again
    third = run_torchlint("--format", "json", target, cwd=tmp_path)
    assert json.loads(third.stdout) == []


BLOCKS = """\
    import torch.nn as nn

    class ConvBNReLU(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv = nn.Conv2d(c, c, 3, padding=1)
            self.act = nn.ReLU()

        def forward(self, x):
            x = self.conv(x)
            return self.act(x)
    """

RESIDUAL = """\
    import torch.nn as nn
    from blocks import ConvBNReLU

    class Residual(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.block = ConvBNReLU(c)

        def forward(self, x):
            out = self.block(x)
            out += x
            return out
    """


def test_inplace_add_into_a_block_from_another_module_that_ends_in_an_activation(tmp_path):
    write(tmp_path, {"blocks.py": BLOCKS, "model.py": RESIDUAL})
    assert (11, "TL302") in codes(tmp_path / "model.py")
    write(tmp_path, {"blocks.py": BLOCKS.replace("return self.act(x)", "return x")})
    assert (11, "TL302") not in codes(tmp_path / "model.py")


def test_a_module_read_only_as_text_is_a_dependency_of_every_file_that_asks(tmp_path):
    """The class index answers from the module's text; a second file asking the same question
    (the text now cached) depends on that module too."""
    write(tmp_path, {"models.py": MODELS, "a.py": EVALUATE_IMPORTED_MODEL, "b.py": EVALUATE_IMPORTED_MODEL})
    for name in ("a.py", "b.py"):
        project().begin()
        codes(tmp_path / name)
        assert str(tmp_path / "models.py") in project().consulted


# ---------------------------------------------------------------- what a callee keeps

METERS = """\
    import torch

    class AverageMeter:
        def __init__(self, name=""):
            self.reset()

        def reset(self):
            self.val = 0
            self.sum = 0
            self.count = 0

        def update(self, val, n=1):
            self.val = val
            self.sum += val * n
            self.count += n

    class History:
        def __init__(self):
            self.values = []

        def log(self, value):
            self.values.append(value)

        def log_all(self, values):
            for name, value in values.items():
                self.log(value)

    class ConvertingMeter:
        def __init__(self):
            self.values = []

        def update(self, value):
            if isinstance(value, torch.Tensor):
                value = value.item()
            self.values.append(value)

    class ItemMeter:
        def __init__(self):
            self.total = 0.0

        def update(self, value):
            self.total += value.item()

    class KeepAverage:
        def __init__(self):
            self.avg_values = {}
            self.iters = {}
            self.last = {}

        def update_value(self, name, value):
            self.avg_values[name] = self.avg_values[name] * self.iters[name] + value
            self.iters[name] += 1
            self.avg_values[name] /= self.iters[name]

        def set_last(self, name, value):
            self.last[name] = value
    """

KEEPING_LOOP = """\
    import torch
    from meters import AverageMeter, History, ConvertingMeter, ItemMeter, KeepAverage

    def train(model, loader, optimizer, criterion):
        {setup}
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            {call}
    """


@pytest.mark.parametrize("setup, call, code", [
    ("losses = AverageMeter('loss')", "losses.update(loss, x.size(0))", "TL102"),
    ("meters = {k: AverageMeter(k) for k in ('loss', 'acc')}", "meters['loss'].update(loss)", "TL102"),
    ("history = History()", "history.log(loss)", "TL101"),
    ("history = History()", "history.log_all({'loss': loss})", "TL101"),
    ("keep_avg = KeepAverage()", "keep_avg.update_value('loss', loss)", "TL102"),
])
def test_a_tensor_handed_to_an_object_of_another_module_that_keeps_it(tmp_path, setup, call, code):
    write(tmp_path, {"meters.py": METERS, "train.py": KEEPING_LOOP.format(setup=setup, call=call)})
    assert codes(tmp_path / "train.py") == [(11, code)]


@pytest.mark.parametrize("setup, call", [
    ("losses = AverageMeter('loss')", "losses.update(loss.item(), x.size(0))"),  # a number
    ("losses = ConvertingMeter()", "losses.update(loss)"),  # converts tensors itself
    ("losses = ItemMeter()", "losses.update(loss)"),  # keeps loss.item()
    ("pass", "fresh = AverageMeter(); fresh.update(loss)"),  # made afresh every step
    ("losses = AverageMeter('loss')", "losses.update(x.sum().item(), loss.numel())"),  # a count
    ("keep_avg = KeepAverage()", "keep_avg.update_value('loss', loss if isinstance(loss, float) else loss.item())"),
    ("keep_avg = KeepAverage()", "keep_avg.set_last('loss', loss)"),  # one slot, overwritten
])
def test_a_callee_that_keeps_no_graph_is_quiet(tmp_path, setup, call):
    write(tmp_path, {"meters.py": METERS, "train.py": KEEPING_LOOP.format(setup=setup, call=call)})
    assert codes(tmp_path / "train.py") == []


def test_a_meter_under_no_grad_is_quiet(tmp_path):
    evaluation = """\
        import torch
        from meters import AverageMeter

        def evaluate(model, loader, criterion):
            losses = AverageMeter()
            with torch.no_grad():
                for x, y in loader:
                    losses.update(criterion(model(x), y))
            return losses.sum
        """
    write(tmp_path, {"meters.py": METERS, "evaluate.py": evaluation})
    assert codes(tmp_path / "evaluate.py") == []
    write(tmp_path, {"evaluate.py": evaluation.replace("with torch.no_grad():", "if True:")})
    assert (8, "TL102") in codes(tmp_path / "evaluate.py")


DETECTOR = """\
    import torch
    from interface import IModel

    class Detector(IModel):
        def __init__(self, path):
            self._model = torch.jit.load(path)
            self._model.eval()

        def __call__(self, image):
            out = self._model(image)[0]
            return out.cpu().detach().numpy()
    """


def test_a_project_class_named_like_a_model_is_what_its_bases_say(tmp_path):
    # `IModel` ends like a model class, but the project defines it as a plain interface
    write(tmp_path, {"interface.py": "from abc import ABC\n\nclass IModel(ABC):\n    pass\n", "detector.py": DETECTOR})
    assert codes(tmp_path / "detector.py") == [(10, "TL201")]
    # an nn.Module base makes `__call__` a piece of a model's computation: its caller owns grad mode
    write(tmp_path, {"interface.py": "import torch\n\nclass IModel(torch.nn.Module):\n    pass\n"})
    assert codes(tmp_path / "detector.py") == []


def test_a_module_class_reexported_by_a_package_stays_a_module(tmp_path):
    write(tmp_path, {
        "losses/__init__.py": "from .chamfer import ChamferMean\n",
        "losses/chamfer.py": "import torch\n\nclass ChamferMean(torch.nn.Module):\n    def forward(self, a, b):\n        return (a - b).abs().mean()\n",
        "train.py": """\
            from losses import ChamferMean

            def score(loader):
                metric = ChamferMean()
                scores = []
                for a, b in loader:
                    scores.append(metric(a, b))
                return sum(s.item() for s in scores)
            """,
    })
    assert codes(tmp_path / "train.py") == [(7, "TL101")]


def test_a_checkout_that_is_its_own_package_resolves_imports_by_the_package_name(tmp_path):
    # `TTS.utils.measures` for utils/measures.py: setup.py installs the checkout's root as `TTS`
    write(tmp_path, {"__init__.py": "", "utils/__init__.py": "", "utils/helpers.py": LOSS_HELPER,
                     "train.py": TRAIN_WITH_IMPORTED_LOSS.format(module="TTS.utils.helpers")})
    assert (10, "TL201") in codes(tmp_path / "train.py")
    other = tmp_path / "other"  # a checkout that is not a package: the name stays unknown
    other.mkdir()
    write(other, {"utils/__init__.py": "", "utils/helpers.py": LOSS_HELPER,
                  "train.py": TRAIN_WITH_IMPORTED_LOSS.format(module="TTS.utils.helpers")})
    assert (10, "TL201") not in codes(other / "train.py")


def _counting_parses(monkeypatch) -> list[str]:
    from torchlint import engine

    parsed: list[str] = []
    original = engine.parse

    def counting(text, *args, **kwargs):
        parsed.append(text)
        return original(text, *args, **kwargs)

    monkeypatch.setattr(engine, "parse", counting)
    return parsed


def test_a_module_the_index_parsed_is_linted_on_that_tree(tmp_path, monkeypatch):
    write(tmp_path, {"helpers.py": LOSS_HELPER, "train.py": TRAIN_WITH_IMPORTED_LOSS.format(module="helpers")})
    project().__init__()  # a fresh index, as in a new process
    helpers_alone = codes(tmp_path / "helpers.py")
    project().__init__()
    parsed = _counting_parses(monkeypatch)
    train = codes(tmp_path / "train.py")  # its questions make the index parse helpers.py
    assert (10, "TL201") in train
    assert codes(tmp_path / "helpers.py") == helpers_alone
    assert parsed.count((tmp_path / "helpers.py").read_text()) == 1


CYCLE_A = """\
    import torch
    from b import run_model

    def compute(model, x):
        return model(x)

    def validate(model, loader):
        model.eval()
        losses = []
        for x in loader:
            losses.append(run_model(model, x))
        return losses
    """
CYCLE_B = """\
    import torch
    from a import compute

    def train(model, loader, optimizer):
        losses = []
        for x in loader:
            loss = compute(model, x)
            loss.backward()
            optimizer.step()
            losses.append(loss)
        return losses

    def run_model(model, x):
        return compute(model, x)
    """


def test_a_file_whose_lint_reads_its_own_index_analysis_gets_a_tree_of_its_own(tmp_path, monkeypatch):
    write(tmp_path, {"a.py": CYCLE_A, "b.py": CYCLE_B})
    project().__init__()
    a_alone = codes(tmp_path / "a.py")
    project().__init__()
    parsed = _counting_parses(monkeypatch)
    codes(tmp_path / "b.py")  # the index parses a.py for b's question
    text = (tmp_path / "a.py").read_text()
    assert parsed.count(text) == 1
    assert codes(tmp_path / "a.py") == a_alone
    # a's lint read b's answer, which came from a: linted again on a fresh parse
    assert parsed.count(text) == 2


TRAINER_MODULE = """\
    import torch

    class Trainer:
        def __init__(self, model, optimizer):
            self.model, self.optimizer = model, optimizer

        @staticmethod
        def load(path):
            model = torch.load(path)
            return Trainer(model, torch.optim.Adam(model.parameters()))

        def update(self, batch):
            loss = self.model(batch).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

        def predict(self, batch):
            {decorator}
            self.model.eval()
            return self.model.predict(batch)


    class GraphTrainer(Trainer):
        pass
    """

PREDICT_SCRIPT = """\
    from trainer import Trainer, GraphTrainer

    def predict_dataset(trainer, batches):
        preds = []
        for batch in batches:
            preds += trainer.predict(batch)
        return preds

    def main(path, batches):
        trainer = Trainer.load(path)
        return predict_dataset(trainer, batches)
    """


@pytest.mark.parametrize(("decorator", "expected"), [("pass", [(6, "TL201")]), ("torch.set_grad_enabled(False)", [])])
def test_a_parameter_named_for_the_project_classes_it_holds(tmp_path, decorator, expected):
    # `trainer = Trainer.load(path)` gives no class away: the imported classes named like the
    # parameter (Trainer, GraphTrainer) say what `trainer.predict(batch)` runs
    write(tmp_path, {"trainer.py": TRAINER_MODULE.format(decorator=decorator), "predict.py": PREDICT_SCRIPT})
    assert codes(tmp_path / "predict.py") == expected


MODEL_WRAPPER = """\
    import torch
    from torch import nn

    class Wrapper:
        def __init__(self, network):
            self.network = network

        def predict(self, batch):
            self.network.eval()
            scores = self.network(batch)
            return scores.argmax(-1).tolist()

        def update(self, batch, optimizer):
            self.network.train()
            loss = self.network(batch).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """

EVAL_HELPERS = """\
    import torch

    def eval_model(model, data):
        predictions = []
        for batch in data:
            predictions.extend(model.predict(batch))
        return predictions

    @torch.no_grad()
    def eval_model_no_grad(model, data):
        predictions = []
        for batch in data:
            predictions.extend(model.predict(batch))
        return predictions

    def evaluate_and_tune(model, data, optimizer):
        for batch in data:
            model.update(batch, optimizer)
    """

TRAIN_SCRIPT = """\
    import torch
    from torch import nn
    from wrapper import Wrapper
    from helpers import eval_model, eval_model_no_grad, evaluate_and_tune

    def main(train_data, dev_data, epochs):
        model = Wrapper(nn.Linear(4, 2))
        optimizer = torch.optim.SGD(model.network.parameters(), lr=0.1)
        for epoch in range(epochs):
            for batch in train_data:
                model.update(batch, optimizer)
            {call}
    """


@pytest.mark.parametrize(("call", "expected"), [
    ("print(eval_model(model, dev_data))", [(12, "TL201")]),
    ("with torch.no_grad():\n                print(eval_model(model, dev_data))", []),
    ("print(eval_model_no_grad(model, dev_data))", []),  # the helper turns grad off itself
    ("evaluate_and_tune(model, dev_data, optimizer)", []),  # it trains
])
def test_an_evaluation_helper_of_another_module_run_on_a_model_handed_to_it(tmp_path, call, expected):
    # `model.predict(batch)` on a parameter: only the call says `model` is a Wrapper, whose
    # `predict` runs a network with grad enabled
    write(tmp_path, {"wrapper.py": MODEL_WRAPPER, "helpers.py": EVAL_HELPERS,
                     "train.py": TRAIN_SCRIPT.format(call=call)})
    assert [(line, code) for line, code in codes(tmp_path / "train.py") if code == "TL201"] == expected
    assert not [code for _, code in codes(tmp_path / "helpers.py") if code == "TL201"]


def test_an_evaluation_helper_called_by_a_prediction_script(tmp_path):
    script = """\
        import argparse
        import torch
        from torch import nn
        from wrapper import Wrapper
        from helpers import eval_model

        args = argparse.ArgumentParser().parse_args()
        model = Wrapper(nn.Linear(4, 2))
        model.network.load_state_dict(torch.load(args.checkpoint))
        print(eval_model(model, torch.load(args.data)))
        """
    write(tmp_path, {"wrapper.py": MODEL_WRAPPER, "helpers.py": EVAL_HELPERS, "predict.py": script})
    assert codes(tmp_path / "predict.py") == [(10, "TL201")]


def test_an_evaluation_helper_reported_in_its_own_file_is_not_reported_again_at_its_calls(tmp_path):
    helpers = """\
        def evaluate(model, loader):
            model.eval()
            correct = 0
            for x, y in loader:
                correct += (model(x).argmax(1) == y).sum().item()
            return correct
        """
    train = """\
        import torch
        from helpers import evaluate

        def fit(model, train_loader, val_loader, optimizer, epochs):
            for epoch in range(epochs):
                model.train()
                for x, y in train_loader:
                    optimizer.zero_grad()
                    torch.nn.functional.cross_entropy(model(x), y).backward()
                    optimizer.step()
                print(evaluate(model, val_loader))
        """
    write(tmp_path, {"helpers.py": helpers, "train.py": train})
    assert [code for _, code in codes(tmp_path / "helpers.py")] == ["TL201"]
    assert "TL201" not in [code for _, code in codes(tmp_path / "train.py")]


def _write_plain(root, files: dict[str, str]) -> None:
    """Files without any project marker: an unpacked wheel, a copied folder."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_a_package_without_project_markers_resolves_its_absolute_imports(tmp_path):
    # site-packages/avalanche/training/supervised/strategy.py importing avalanche.models.utils
    site = tmp_path / "site"
    _write_plain(site, {
        "pkg/__init__.py": "", "pkg/models/__init__.py": "", "pkg/models/utils.py": LOSS_HELPER,
        "pkg/training/__init__.py": "", "pkg/training/supervised/__init__.py": "",
        "pkg/training/supervised/strategy.py": TRAIN_WITH_IMPORTED_LOSS.format(module="pkg.models.utils"),
    })
    project().__init__()
    assert (10, "TL201") in codes(site / "pkg" / "training" / "supervised" / "strategy.py")


PREDICTOR = """\
    from {source} import {base}

    class Predictor({base}):
        def inference(self, im):
            return self.prompt_inference(im)

        def prompt_inference(self, im):
            self.model.eval()
            return [self.model(crop).cpu() for crop in im.split(64)]
    """


def test_an_override_that_a_base_class_in_another_module_runs_under_inference_mode(tmp_path):
    write(tmp_path, {
        "engine.py": """\
            import torch

            class BasePredictor:
                @torch.inference_mode()
                def stream_inference(self, source):
                    for batch in source:
                        yield self.inference(batch)
            """,
        "predict.py": PREDICTOR.format(source="engine", base="BasePredictor"),
        "framework.py": PREDICTOR.format(source="torchvision_like", base="Base"),
    })
    assert codes(tmp_path / "predict.py") == []
    # a base torchlint cannot read may run it with grad on: still reported
    assert [code for _, code in codes(tmp_path / "framework.py")] == ["TL201"]



def test_a_module_of_another_framework_answers_no_pytorch_question(tmp_path):
    # a TensorFlow driver: `agent.choose_action(obs)` runs a Keras model, not a PyTorch one
    agent = """\
        import tensorflow as tf
        from tensorflow import keras

        class ActorCritic(keras.Model):
            def call(self, state):
                return self.pi(self.fc(state))

        class Agent:
            def __init__(self):
                self.actor_critic = ActorCritic()

            def choose_action(self, observation):
                probs = self.actor_critic(tf.convert_to_tensor([observation]))
                return probs.numpy()[0].argmax()
        """
    driver = """\
        import gym
        from agent import Agent

        agent = Agent()
        env = gym.make("CartPole-v1")
        for episode in range(100):
            observation, done = env.reset(), False
            while not done:
                action = agent.choose_action(observation)
                observation, reward, done, info = env.step(action)
        """
    write(tmp_path, {"agent.py": agent, "main.py": driver})
    assert codes(tmp_path / "main.py") == []
    # the same driver over a PyTorch agent is reported
    torch_agent = agent.replace("import tensorflow as tf\n        from tensorflow import keras\n",
                                "import torch\n        from torch import nn\n").replace(
        "keras.Model", "nn.Module").replace("def call(", "def forward(").replace(
        "tf.convert_to_tensor([observation])", "torch.tensor([observation])").replace(
        "probs.numpy()", "probs.detach().numpy()")
    other = tmp_path / "torch_version"
    other.mkdir()
    write(other, {"agent.py": torch_agent, "main.py": driver})
    assert [code for _, code in codes(other / "main.py")] == ["TL201"]


SASREC_UTILS = """\
    import numpy as np


    def evaluate(model, dataset, users):
        hits = 0.0
        for u in users:
            seq, items = dataset[u]
            predictions = -model.predict(np.array([u]), np.array([seq]), np.array(items))
            hits += float(predictions[0].argsort().argsort()[0].item() < 10)
        return hits / len(users)
    """


@pytest.mark.parametrize("importing", ["from utils import *", "from utils import evaluate"])
def test_a_helper_whose_callers_in_another_module_hand_it_a_model(tmp_path, importing):
    # utils.py never says `model` is a network; main.py, which calls it, does
    write(tmp_path, {"utils.py": SASREC_UTILS, "main.py": f"""\
        import torch
        from model import SASRec
        {importing}

        model = SASRec(item_count=1000, hidden=50)
        optimizer = torch.optim.Adam(model.parameters())
        for epoch in range(200):
            model.train()
            train_one_epoch(model, optimizer)
            model.eval()
            print(evaluate(model, dataset, users))
        """})
    assert (8, "TL201") in codes(tmp_path / "utils.py")


def test_a_helper_called_with_something_else_elsewhere_stays_unknown(tmp_path):
    write(tmp_path, {"utils.py": SASREC_UTILS, "main.py": """\
        from sklearn.linear_model import LogisticRegression
        from utils import evaluate

        model = LogisticRegression().fit(features, labels)
        print(evaluate(model, dataset, users))
        """})
    assert codes(tmp_path / "utils.py") == []


def test_a_function_its_own_main_runs_under_no_grad_but_a_training_script_does_not(tmp_path):
    predict = """\
        import torch

        def predict(model, batches):
            model.eval()
            labels = []
            for x in batches:
                labels.append(model(x).argmax(-1).tolist())
            return labels

        if __name__ == "__main__":
            model = torch.load("model.pt")
            with torch.no_grad():
                print(predict(model, load_batches()))
        """
    train = """\
        import torch
        from predict import predict

        def train(model, loader, dev_batches, optimizer):
            for step, (x, y) in enumerate(loader):
                loss = torch.nn.functional.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if step % 100 == 0:
                    print(predict(model, dev_batches))
                    model.train()
        """
    write(tmp_path, {"predict.py": predict, "train.py": train})
    assert (7, "TL201") in codes(tmp_path / "predict.py")
    quiet = tmp_path / "quiet"  # the training script evaluates under no_grad too
    quiet.mkdir()
    write(quiet, {"predict.py": predict, "train.py": train.replace(
        "print(predict(model, dev_batches))", "with torch.no_grad():\n                        print(predict(model, dev_batches))")})
    assert codes(quiet / "predict.py") == []


LARGE_BASE = '''\
    import torch.nn as nn
    from peft_like import PeftAdapterMixin

    PADDING = """{padding}"""


    class BaseModel(nn.Sequential, PeftAdapterMixin):
        def save(self, path):
            {body}
    '''

SUBCLASS_EMBEDDING = """\
    from base import BaseModel


    class Encoder(BaseModel):
        def embed_batches(self, batches):
            found = []
            for batch in batches:
                found.append(self(batch).cpu().numpy())
            return found
    """


@pytest.mark.parametrize(("body", "reported"), [
    ("return path", True),  # the base never calls `embed_batches`: the subclass's callers own the mode
    ("return self.embed_batches([path])", False),  # it may: then the base owns the grad mode
])
def test_a_base_too_large_to_analyse_is_read_by_its_text(tmp_path, body, reported):
    padding = "x" * 70_000  # larger than the modules the index analyses
    write(tmp_path, {"base.py": LARGE_BASE.format(padding=padding, body=body), "encoder.py": SUBCLASS_EMBEDDING})
    assert ((8, "TL201") in codes(tmp_path / "encoder.py")) is reported


TRAINER_CALLING_BACK = """\
    import torch


    class Trainer:
        def __init__(self, model, data_iter):
            self.model = model
            self.data_iter = data_iter

        def eval(self, evaluate):
            self.model.eval()
            results = []
            for batch in self.data_iter:
                {guard}
                    results.append(evaluate(self.model, batch))
            return results
    """

CLASSIFY_WITH_CALLBACK = """\
    from trainer import Trainer


    def main(model, data_iter):
        trainer = Trainer(model, data_iter)

        def evaluate(model, batch):
            inputs, labels = batch
            logits = model(inputs)
            return (logits.argmax(1) == labels).float().mean().item()

        print(trainer.eval(evaluate))
    """


@pytest.mark.parametrize(("guard", "reported"), [
    ("with torch.no_grad():", False),  # the trainer calls the callback back under no_grad
    ("if True:", True),
])
def test_a_callback_takes_the_grad_mode_of_the_function_it_is_handed_to(tmp_path, guard, reported):
    write(tmp_path, {"trainer.py": TRAINER_CALLING_BACK.replace("{guard}", guard), "classify.py": CLASSIFY_WITH_CALLBACK})
    assert ((9, "TL201") in codes(tmp_path / "classify.py")) is reported
