"""TL104 view-keeps-base-alive, TL404 device-copy-in-loop, TL203 checkpoint-misuse, the analysis
questions they added, and the non-rules NR3-NR8 (their programs, checks and docs section)."""

from __future__ import annotations

import textwrap

import pytest

from torchlint.docs import render_index
from torchlint.lazy import cst
from torchlint.analysis.syntax import selected_view
from torchlint.rules import rules_by_code
from torchlint.testing import actual_findings, describe_mismatch, expected_findings
from torchlint.verify.claims import Measured, all_claims
from torchlint.verify.claims.nonrules import CLAIMS as NONRULE_CLAIMS

RULES = rules_by_code()
NEW_CODES = ("TL104", "TL203", "TL404")
NEW_NONRULES = ("NR3", "NR4", "NR5", "NR6", "NR7", "NR8")


def check(code: str, source: str) -> None:
    """The rule reports exactly the lines marked ``# expect: CODE`` (and nothing when none is)."""
    source = textwrap.dedent(source)
    expected = {(line, c) for line, c in expected_findings(source) if c == code}
    actual = actual_findings(source, [RULES[code]], prefilter=False)
    assert actual == expected, describe_mismatch(expected, actual)


def expression(text: str):
    return cst.parse_expression(text)


# ------------------------------------------------------------------ analysis: selected_view
@pytest.mark.parametrize("text, base, by_syntax", [
    ("out[:, -1]", "out", True),
    ("out[0]", "out", False),
    ("out[0].detach()", "out", False),
    ("out[..., 0]", "out", True),
    ("h.narrow(1, 0, 4)", "h", True),
    ("m.diagonal()", "m", True),
    ("t.select(0, 2).unsqueeze(0)", "t", True),
    ("model(x)[:, -1]", "model(x)", True),
    ("x[1:]", "x", False),
])
def test_selected_view_finds_the_base(text, base, by_syntax):
    found = selected_view(expression(text))
    assert found is not None
    assert cst.Module([]).code_for_node(found[0]) == base and found[1] is by_syntax


@pytest.mark.parametrize("text", [
    "out[:, -1].clone()", "out[0].item()", "out[:, 0].tolist()", "out[:, 0].cpu()", "out[mask]",
    "out[idx]", "out[:]", "out[...]", "out.view(-1)", "out[:, 0] * 2", "out[None]", "out[:, 0].float()",
])
def test_selected_view_rejects_copies_and_whole_views(text):
    assert selected_view(expression(text)) is None


# ------------------------------------------------------------------ TL104
def test_tl104_per_step_function_appending_to_self():
    check("TL104", """\
        import torch
        class Module(LightningModule):
            def validation_step(self, batch, batch_idx):
                logits = torch.softmax(self(batch), dim=-1)
                self.first_rows.append(logits[0])  # expect: TL104
    """)


def test_tl104_numpy_of_a_view_and_a_view_bound_first():
    check("TL104", """\
        import torch
        arrays, rows = [], []
        with torch.no_grad():
            for step, batch in enumerate(loader):
                probs = torch.sigmoid(model(batch))
                arrays.append(probs[:, 0].numpy())  # expect: TL104
                first = probs[0:1, :]
                rows.append(first)  # expect: TL104
    """)


def test_tl104_quiet_when_cleared_rebound_stored_on_attribute_or_attached():
    check("TL104", """\
        import torch
        window, history = [], []
        for step, batch in enumerate(loader):
            out = model(batch)
            history.append(out[:, -1])      # attached: TL101's finding, not this rule's
            with torch.no_grad():
                pred = model(batch)
            self.last = pred[:, -1]          # one base at a time
            window.append(pred[:, -1])
            if len(window) > 10:
                window.clear()               # emptied in the loop
            window = window[-10:]
    """)


def test_tl104_quiet_for_lists_and_data_made_before_the_loop():
    check("TL104", """\
        import torch
        picked = []
        embeddings = torch.randn(100, 16)
        for step, batch in enumerate(loader):
            names = batch["names"]
            picked.append(names[0])           # a list, not a tensor, by evidence
            picked.append(embeddings[step])   # alive anyway
            picked.append(batch[0])           # the loop target: no evidence it is a tensor
    """)


def test_tl104_quiet_for_numpy_slices():
    check("TL104", """\
        import numpy as np
        import torch
        scores, firsts = [], []
        with torch.no_grad():
            for step, batch in enumerate(loader):
                probs = model(batch).softmax(-1).cpu().numpy()
                scores.append(probs[:, 1])
                firsts.append(np.stack(outputs)[0, :])
    """)


def test_tl104_quiet_for_batch_of_one_and_results_of_plain_functions():
    check("TL104", """\
        import torch
        import torch.nn.functional as F
        masks, arcs, steps_kept, decoded, per_item = [], [], [], [], {}
        with torch.no_grad():
            for step, batch in enumerate(loader):
                mask = F.interpolate(batch[None].float(), size=(8, 8)).to(torch.bool)[0]
                masks.append(mask)                               # [None] ... [0]: all of it
                arcs.append(deviation_series(batch, points)[0, 0])  # may be a NumPy scalar
                logits = decode_step(model, batch)
                steps_kept.append(logits[:, 0])                  # a plain function's result
                y = model(batch)
                decoded.append(y.argsort(1, descending=True)[:, :5])  # expect: TL104
                outputs = codec.encode(batch.unsqueeze(0))
                codes = outputs.audio_codes.transpose(1, -1)
                decoded.append(codes[0])                         # the unsqueezed batch of one
                for b in range(batch.shape[0]):
                    per_item[b] = y[:, b:b + 1].detach()         # together: all of y
    """)


def test_tl104_items_of_a_batch_and_stores_in_an_inner_loop_over_items():
    check("TL104", """\
        import torch
        history, per_key = [], {}
        for step, batch in enumerate(loader):
            history.append(batch["target"][:, :encoder_length].detach())  # expect: TL104
            with torch.no_grad():
                losses = criterion(model(batch), batch["target"])
            for key, val in losses.items():
                per_key[key].append(val[:, 0, :])  # expect: TL104
    """)


def test_tl104_message_names_the_base():
    source = textwrap.dedent("""\
        import torch
        kept = []
        with torch.no_grad():
            for step in range(steps):
                hidden = model(tokens)
                kept.append(hidden[:, -1])
    """)
    from torchlint.engine import lint_source

    (violation,) = lint_source(source, "<snippet>", [RULES["TL104"]], prefilter=False)
    assert "`hidden`" in violation.message and "hidden[:, -1].clone()" in violation.help


# ------------------------------------------------------------------ TL404
def test_tl404_annotated_parameter_and_global_in_forward():
    check("TL404", """\
        import torch
        from torch import nn
        MEAN = torch.tensor([0.5, 0.5, 0.5])

        def train(model, loader, weights: torch.Tensor, device):
            for x, y in loader:
                loss = (model(x.to(device)) - y.to(device)).pow(2).mul(weights.to(device)).mean()  # expect: TL404
                loss.backward()

        class Normalise(nn.Module):
            def forward(self, x):
                return x - MEAN.to(x.device)  # expect: TL404
    """)


def test_tl404_quiet_for_dtype_cpu_changed_and_unknown_values():
    check("TL404", """\
        import torch
        def train(model, loader, weights, device):
            table = torch.zeros(10)
            bias = torch.ones(10)
            for x, y in loader:
                table.add_(1)
                model(x, table.to(device))                # changed in place every step
                model(x, bias.to(torch.float16))          # a dtype conversion, not a device copy
                model(x, bias.to("cpu"))                  # to the CPU
                model(x, weights.to(device))              # unknown type
                noise = torch.randn(x.shape, generator=g).to(device)  # a CPU generator
                model(x + noise).sum().backward()
    """)


def test_tl404_factory_and_tl403_deferral():
    check("TL404", """\
        import torch
        for step, (x, y) in enumerate(loader):
            eye = torch.eye(x.shape[0]).cuda()  # expect: TL404
            ones = torch.ones(4, 4).to(device)  # TL403 reports it: hoisting removes the copy
            ids = torch.arange(x.shape[1], device="cpu").to(device)  # made on a device on purpose
            model(x, eye, ones, ids).backward()
    """)


# ------------------------------------------------------------------ TL203
def test_tl203_aliases_sequential_and_default_reentrant():
    check("TL203", """\
        import torch
        import torch.utils.checkpoint as cp
        for step, (x, y) in enumerate(train_loader):
            out = cp.checkpoint(model.body, x.to(device))  # expect: TL203
            out = torch.utils.checkpoint.checkpoint_sequential(model.layers, 4, x, use_reentrant=True)  # expect: TL203
            mask = batch["attention_mask"]
            out = cp.checkpoint(model.body, x.detach(), mask, use_reentrant=True)  # expect: TL203
    """)


def test_tl203_quiet_when_an_input_may_require_grad():
    check("TL203", """\
        import torch
        from torch.utils.checkpoint import checkpoint
        def forward(self, hidden, attention_mask):
            hidden = checkpoint(self.block, hidden, attention_mask, use_reentrant=True)
            embedded = self.embed(hidden)
            return checkpoint(self.block, embedded, use_reentrant=True)

        for x, y in loader:
            noise = torch.zeros(4, requires_grad=True)
            out = checkpoint(model.body, x, noise, use_reentrant=True)
            out = checkpoint(model.body, x, use_reentrant=False)
    """)


def test_tl203_single_layers_but_not_blocks():
    check("TL203", """\
        import torch.nn.functional as F
        from torch import nn
        from torch.utils.checkpoint import checkpoint

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.LayerNorm(64)
                self.block = TransformerBlock(64)
                self.mlp = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))

            def forward(self, x):
                x = checkpoint(self.norm, x, use_reentrant=False)  # expect: TL203
                x = checkpoint(F.silu, x, use_reentrant=False)  # expect: TL203
                x = checkpoint(self.block, x, use_reentrant=False)
                return checkpoint(self.mlp, x, use_reentrant=False)
    """)


# ------------------------------------------------------------------ claims and non-rules
def test_new_rules_have_claims_and_nonrules_quote_their_guide():
    codes = {claim.code for claim in all_claims()}
    assert set(NEW_CODES) <= codes and set(NEW_NONRULES) <= codes
    for claim in NONRULE_CLAIMS:
        assert claim.claim.startswith("non-rule: ")
        assert claim.guide and claim.guide_source and ".txt › " in claim.guide_source, claim.code


def test_readme_lists_every_nonrule_with_its_measured_verdict():
    evidence = [{"code": "NR5", "claim": next(c.claim for c in NONRULE_CLAIMS if c.code == "NR5"),
                 "verdict": "confirmed", "device": "cpu", "torch_version": "2.13.0",
                 "bad": {"summary": "1 allocation of 3.8 MiB/step"}, "good": {"summary": "1 allocation of 3.8 MiB/step"},
                 "detail": "x + y allocates the output only"}]
    index = render_index(evidence=evidence)
    assert "## Non-rules: advice from the guides that measures false" in index
    for claim in NONRULE_CLAIMS:
        assert f"- **{claim.code}**: " in index and claim.guide_source in index
    assert ("  Measured: **confirmed** (cpu, torch 2.13.0); the code the guide warns against: 1 allocation of "
            "3.8 MiB/step; the guide's recommendation: 1 allocation of 3.8 MiB/step. Check: x + y allocates the "
            "output only.") in index


def _measured(runs, **extra):
    return Measured({"fixture": "x/bad.py", "runs": runs, **extra})


def test_tl104_check_refutes_a_slice_that_copies():
    (claim,) = [c for c in all_claims() if c.code == "TL104"]
    runs = [{"steps": n, "live_bytes": n * 16384} for n in (2, 4, 8)]
    outcome = claim.check(_measured(runs), _measured(runs))
    assert not outcome.holds
    bad = [{"steps": n, "live_bytes": n * 1048576} for n in (2, 4, 8)]
    assert claim.check(_measured(bad), _measured(runs)).holds


def test_nr6_check_refutes_growing_memory():
    (claim,) = [c for c in all_claims() if c.code == "NR6"]
    flat = [{"steps": n, "live_bytes": 1000, "peak_bytes": 2000} for n in (2, 4, 8)]
    growing = [{"steps": n, "live_bytes": 1000 * n, "peak_bytes": 2000 * n} for n in (2, 4, 8)]
    assert claim.check(_measured(flat), _measured(flat)).holds
    assert not claim.check(_measured(growing), _measured(flat)).holds


def test_new_claims_confirmed_on_cpu(cpu_run):
    _, records = cpu_run
    verdicts = {(r["code"], r["claim"]): r["verdict"] for r in records if r["code"] in NEW_CODES + NEW_NONRULES}
    assert {code for code, _ in verdicts} == set(NEW_CODES + NEW_NONRULES)
    assert set(verdicts.values()) == {"confirmed"}, verdicts


# ------------------------------------------------------------------ mutation operators
def test_mutation_operators_break_correct_code_and_the_rules_see_it(tmp_path, capsys, monkeypatch):
    import importlib.util
    import sys
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "mutation.py"
    spec = importlib.util.spec_from_file_location("mutation_harness", path)
    harness = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "mutation_harness", harness)  # dataclasses look their module up
    spec.loader.exec_module(harness)
    (tmp_path / "decode.py").write_text(textwrap.dedent("""\
        import torch

        def decode(model, tokens, steps):
            lasts, rows = [], []
            for step in range(steps):
                logits = model(tokens)
                lasts.append(logits[:, -1].detach().clone())
                rows.append(logits[0].detach().clone())  # x[0]: no site, may be a list
                tokens = torch.cat([tokens, logits[:, -1:].argmax(-1)], dim=1)
            return lasts, rows

        def train(model, loader, optimizer, device):
            weights = torch.tensor([1.0, 2.0]).to(device)
            criterion = torch.nn.CrossEntropyLoss().to(device)  # a module: no site
            for x, y in loader:
                loss = criterion(model(x), y) * weights.sum()
                loss.backward()
                optimizer.step()
    """))
    out = tmp_path / "mutants.json"
    assert harness.main([str(tmp_path), "--rules", "TL104,TL404", "-j", "1", "--max-per-rule", "0",
                         "--json", str(out)]) == 0
    capsys.readouterr()
    results = json.loads(out.read_text())
    results = results["mutants"] if isinstance(results, dict) else results
    assert sorted((r["rule"], r["line"], r["status"]) for r in results) == [
        ("TL104", 7, "detected"), ("TL404", 16, "detected")]
