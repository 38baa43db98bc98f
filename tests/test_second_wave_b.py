"""TL202, TL204, TL304 and TL305 on shapes beyond their VALID/INVALID examples: the positives
real code writes and the correct code next to them that must stay quiet."""

from __future__ import annotations

import textwrap

import pytest

from torchlint.engine import lint_source
from torchlint.rules import default_rules, rules_by_code
from torchlint.rules.tl202_train_mode_not_restored import TrainModeNotRestored
from torchlint.rules.tl204_inference_without_eval_mode import InferenceWithoutEvalMode
from torchlint.rules.tl301_inplace_on_grad_leaf import InplaceOnGradLeaf
from torchlint.rules.tl304_dataset_item_mutated_in_place import DatasetItemMutatedInPlace
from torchlint.rules.tl305_data_mutated_before_backward import DataMutatedBeforeBackward
from torchlint.testing import actual_findings, describe_mismatch, expected_findings


def _assert_markers(rule, source: str) -> None:
    source = textwrap.dedent(source)
    expected = {(line, code) for line, code in expected_findings(source) if code == rule.CODE}
    actual = actual_findings(source, [rule], prefilter=False)
    assert actual == expected, describe_mismatch(expected, actual)


# ---------------------------------------------------------------------------------- TL202

@pytest.mark.parametrize("source", [
    pytest.param("""
        for epoch in range(epochs):
            for x, y in loader:
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()
            model.train(False)  # expect: TL202
            evaluate(model)
        """, id="train-false-is-eval"),
    pytest.param("""
        class Trainer:
            def validate(self):
                self.model.eval()
                with torch.no_grad():
                    return [self.model(x) for x in self.val_loader]

            def fit(self):
                self.model.train()
                for epoch in range(self.epochs):
                    for x, y in self.loader:
                        self.optimizer.zero_grad()
                        self.criterion(self.model(x), y).backward()
                        self.optimizer.step()
                    self.validate()  # expect: TL202
        """, id="method-helper-through-self"),
    pytest.param("""
        model.train()
        for step, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            if step % 500 == 0:
                model.eval()  # expect: TL202
                with torch.no_grad():
                    score = metric(model(val_x), val_y)
        """, id="eval-every-n-steps-inside-the-step-loop"),
    pytest.param("""
        model.train()
        for epoch in range(epochs):
            for x, y in loader:
                optimizer.zero_grad()
                F.mse_loss(model(x), y).backward()
                optimizer.step()
            if (epoch + 1) % 5 == 0:
                model.eval()  # expect: TL202
                evaluate(model)
        """, id="periodic-validation-is-not-the-last-pass"),
    pytest.param("""
        for epoch in range(epochs):
            generator.train()
            for z, real in loader:
                fake = generator(z)
                loss_g = -critic(fake).mean()
                opt_g.zero_grad()
                loss_g.backward()
                opt_g.step()
                loss_c = critic(fake.detach()).mean() - critic(real).mean()
                opt_c.zero_grad()
                loss_c.backward()
                opt_c.step()
            generator.eval()
            critic.eval()  # expect: TL202
            save_samples(generator(fixed_z))
        """, id="second-model-not-restored"),
])
def test_tl202_reports(source):
    _assert_markers(TrainModeNotRestored, source)


@pytest.mark.parametrize("source", [
    pytest.param("""
        def run_epoch(model, loader, optimizer, train):
            if train:
                model.train()
            else:
                model.eval()
            for x, y in loader:
                loss = F.cross_entropy(model(x), y)
                if train:
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()

        for epoch in range(epochs):
            run_epoch(model, train_loader, optimizer, train=True)
            run_epoch(model, val_loader, optimizer, train=False)
        """, id="one-helper-both-modes-by-literal-argument"),
    pytest.param("""
        for epoch in range(epochs):
            for phase in ("train", "val"):
                model.train(phase == "train")
                for x, y in loaders[phase]:
                    loss = F.cross_entropy(model(x), y)
                    if phase == "train":
                        loss.backward()
                        optimizer.step()
                if phase == "val":
                    model.eval()
        """, id="train-with-a-variable-flag"),
    pytest.param("""
        for step, (x, y) in enumerate(loader):
            F.mse_loss(model(x), y).backward()
            optimizer.step()
            if step == max_steps:
                model.eval()
                final_score = evaluate(model)
                break
        """, id="evaluation-then-break"),
    pytest.param("""
        for epoch in range(epochs):
            for x, y in loader:
                F.mse_loss(model(x), y).backward()
                optimizer.step()
            if epoch + 1 == num_epochs:
                model.eval()
        """, id="last-epoch-plus-one"),
    pytest.param("""
        for epoch in range(epochs):
            model.eval()
            for x, y in loader:
                F.mse_loss(model(x), y).backward()
        """, id="backward-without-an-optimizer-step"),
    pytest.param("""
        for epoch in range(epochs):
            train_data.eval()
            for x, y in loader:
                F.mse_loss(model(x), y).backward()
                optimizer.step()
        """, id="dataset-eval-is-not-a-model"),
])
def test_tl202_quiet(source):
    _assert_markers(TrainModeNotRestored, source)


def test_tl202_message_names_the_model_and_the_fix():
    source = textwrap.dedent(next(example for example in TrainModeNotRestored.INVALID if "validate(model, val_loader)" in example))
    [violation] = lint_source(source, "train.py", [TrainModeNotRestored])
    assert "`model`" in violation.message and "validate(model, val_loader)" in violation.message
    assert "`model.train()`" in violation.help


# ---------------------------------------------------------------------------------- TL204

def test_tl204_is_off_by_default():
    assert InferenceWithoutEvalMode not in default_rules()
    assert InferenceWithoutEvalMode.ENABLED_BY_DEFAULT is False


@pytest.mark.parametrize("source", [
    pytest.param("""
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(16, 32, num_layers=2, dropout=0.3)

        class Tagger(Head):
            pass

        tagger = Tagger().to(device)

        @torch.inference_mode()
        def tag(batch):
            return tagger(batch)  # expect: TL204
        """, id="dropout-in-a-base-class-under-inference-mode"),
    pytest.param("""
        class Predictor:
            def __init__(self):
                self.net = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8))

            def predict(self, x):
                with torch.no_grad():
                    return self.net(x)  # expect: TL204
        """, id="attribute-of-a-plain-class"),
])
def test_tl204_reports(source):
    _assert_markers(InferenceWithoutEvalMode, source)


@pytest.mark.parametrize("source", [
    pytest.param("""
        model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.1)).eval()
        with torch.no_grad():
            y = model(x)
        """, id="eval-in-the-construction-chain"),
    pytest.param("""
        model = torch.load("model.pt")
        with torch.no_grad():
            y = model(x)
        """, id="loaded-model-keeps-its-saved-mode"),
    pytest.param("""
        @torch.no_grad()
        def predict(net, x):
            return net(x)

        def main():
            model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.1))
            model.eval()
            return predict(model, x)
        """, id="caller-sets-the-mode"),
    pytest.param("""
        net = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.1))
        y = net(x)
        """, id="grad-enabled-is-tl201s-business"),
])
def test_tl204_quiet(source):
    _assert_markers(InferenceWithoutEvalMode, source)


# ---------------------------------------------------------------------------------- TL304

@pytest.mark.parametrize("source", [
    pytest.param("""
        class Audio(Dataset):
            def __init__(self, path):
                self.waves = torch.load(path)

            def __getitem__(self, i):
                wave = self.waves[i]
                wave[: self.fade] *= self.ramp  # expect: TL304
                return wave
        """, id="slice-of-a-stored-row-scaled"),
    pytest.param("""
        class Points(torch.utils.data.Dataset):
            def __init__(self, points):
                self.points = np.asarray(points, dtype=np.float32)

            def __getitem__(self, idx):
                cloud = self.points[idx]
                cloud[:, :3] -= cloud[:, :3].mean(0)  # expect: TL304
                return cloud
        """, id="item-assignment-through-a-view"),
    pytest.param("""
        class Images(Dataset):
            def __getitem__(self, index):
                img, target = self.data[index], self.targets[index]
                img.div_(255)  # expect: TL304
                return img, target
        """, id="tuple-unpacking-and-inplace-method"),
])
def test_tl304_reports(source):
    _assert_markers(DatasetItemMutatedInPlace, source)


@pytest.mark.parametrize("source", [
    pytest.param("""
        class Images(Dataset):
            def __init__(self, path):
                self.data = np.load(path)

            def __getitem__(self, index):
                img = self.data[[index]]
                img -= 0.5
                return img
        """, id="advanced-indexing-copies"),
    pytest.param("""
        class Images(Dataset):
            def __init__(self, path):
                self.data = torch.load(path)

            def __getitem__(self, index):
                img = self.data[index]
                if self.transform is not None:
                    img = self.transform(img)
                else:
                    img = img.clone()
                img.mul_(2)
                return img
        """, id="rebound-on-every-path"),
    pytest.param("""
        class Counter(Dataset):
            def __getitem__(self, index):
                self.calls += 1
                self.seen[index] = True
                return self.items[index]
        """, id="bookkeeping-is-not-the-data"),
    pytest.param("""
        class Tokens:
            def __getitem__(self, index):
                row = self.rows[index]
                row.mul_(2)
                return row
        """, id="not-a-dataset"),
    pytest.param("""
        class Images(Dataset):
            def __getitem__(self, index):
                img = torch.tensor(self.data[index])
                img -= img.mean()
                return img
        """, id="torch-tensor-copies"),
])
def test_tl304_quiet(source):
    _assert_markers(DatasetItemMutatedInPlace, source)


# ---------------------------------------------------------------------------------- TL305

@pytest.mark.parametrize("source", [
    pytest.param("""
        for batch in loader:
            out = model(batch.x)
            loss = criterion(out, batch.y)
            for group in optimizer.param_groups:
                for p in group["params"]:
                    p.data.mul_(1 - weight_decay)  # expect: TL305
            loss.backward()
            optimizer.step()
        """, id="decay-over-optimizer-params-before-backward"),
    pytest.param("""
        def step(self, x):
            y = self.encoder(x)
            self.encoder.proj.weight.data[:, 0] = 0  # expect: TL305
            self.loss(y).backward()
        """, id="item-assignment-on-a-submodule-weight"),
    pytest.param("""
        for x in loader:
            loss = (x @ w).pow(2).mean()
            w.data -= 0.1  # expect: TL305
            loss.backward()
        """, id="augmented-assignment-on-a-leaf"),
])
def test_tl305_reports(source):
    _assert_markers(DataMutatedBeforeBackward, source)


@pytest.mark.parametrize("source", [
    pytest.param("""
        for x in loader:
            loss = model(x).mean()
            loss.backward()
            optimizer.step()
            loss = model(x).mean()
            for p in model.parameters():
                p.data.clamp_(-1, 1)
        """, id="second-forward-without-a-later-backward"),
    pytest.param("""
        for x, y in loader:
            q = encoder_q(x)
            for p_q, p_k in zip(encoder_q.parameters(), encoder_k.parameters()):
                p_k.data = p_k.data * 0.99 + p_q.data * 0.01
            with torch.no_grad():
                k = encoder_k(y)
            contrastive(q, k).backward()
            optimizer.step()
        """, id="momentum-encoder-update-moco"),
    pytest.param("""
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                ema_out = ema(x)
            for p_ema, p in zip(ema.parameters(), model.parameters()):
                p_ema.data.mul_(0.99).add_(p.data, alpha=0.01)
        """, id="ema-after-the-step"),
    pytest.param("""
        for x, y in loader:
            with torch.no_grad():
                out = model(x)
            for p in model.parameters():
                p.data.add_(noise)
            loss = criterion(model(x), y)
            loss.backward()
        """, id="forward-under-no-grad-saves-nothing"),
])
def test_tl305_quiet(source):
    _assert_markers(DataMutatedBeforeBackward, source)


def test_tl301_fix_no_longer_suggests_data():
    assert ".data" not in InplaceOnGradLeaf.FIX
    [violation] = lint_source(textwrap.dedent(InplaceOnGradLeaf.INVALID[0]), "train.py", [InplaceOnGradLeaf])
    assert ".data" not in violation.help and "torch.no_grad()" in violation.help


def test_every_new_rule_has_a_confirmed_claim_registered():
    from torchlint.verify.claims import all_claims  # needs no torch to import

    codes = {claim.code for claim in all_claims()}
    assert {"TL202", "TL204", "TL304", "TL305"} <= codes
    assert set(rules_by_code()) >= {"TL202", "TL204", "TL304", "TL305"}
