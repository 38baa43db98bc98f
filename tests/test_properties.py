"""Property tests: on any valid program the engine never raises, never reports TL000, and answers
the same way every time (twice in a row, with or without the prefilter, in another process with
another hash seed, with CRLF line endings or a BOM).

Programs come from hypothesmith (arbitrary valid Python) and from a small grammar of PyTorch
training/evaluation statements nested at random, which is what the rules actually look at.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from torchlint.engine import lint_source
from torchlint.rules import all_rules
from torchlint.violation import INVALID_FILE_CODE

SETTINGS = settings(deadline=None, max_examples=60, derandomize=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])


def lint(source: str | bytes, prefilter: bool = False) -> list[tuple]:
    violations = lint_source(source, "generated.py", all_rules(), prefilter=prefilter)
    return [(v.line, v.column, v.end_line, v.end_column, v.code, v.message) for v in violations]


def rule_findings(findings: list[tuple]) -> list[tuple]:
    return [f for f in findings if f[4] != INVALID_FILE_CODE]


def libcst_parses(source: str) -> bool:
    import libcst

    try:
        libcst.parse_module(source)
    except Exception:  # noqa: BLE001 - libcst's own limits are not ours to test
        return False
    return True


def compiles(source: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(source, "generated.py", "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            return False
    return True


def assert_well_behaved(source: str) -> list[tuple]:
    first = lint(source)
    invalid = [f for f in first if f[4] == INVALID_FILE_CODE]
    assert not invalid, f"TL000 on a program libcst parses: {invalid}\n{source}"
    assert lint(source) == first, "same input, different findings"
    # The prefilter may only skip work, never findings.
    assert rule_findings(lint(source, prefilter=True)) == rule_findings(first)
    return first


# --- arbitrary valid Python (hypothesmith) -------------------------------------------------------

hypothesmith = pytest.importorskip("hypothesmith")


@SETTINGS
@given(hypothesmith.from_grammar())
def test_arbitrary_grammar_programs(source):
    assume(libcst_parses(source))
    assert_well_behaved(source)


@settings(SETTINGS, max_examples=25)
@given(hypothesmith.from_node())
def test_arbitrary_libcst_programs(source):
    assume(compiles(source) and libcst_parses(source))
    assert_well_behaved(source)


# --- PyTorch-shaped programs ---------------------------------------------------------------------

IMPORTS = ["import torch", "import torch as T", "import torch.nn as nn", "from torch import nn",
           "import torch.nn.functional as F", "from torch import no_grad, inference_mode",
           "from torch.cuda.amp import autocast", "from lightning import LightningModule"]
VALUES = ["loss", "out", "logits", "total", "acc", "h", "x", "y", "pred", "self.state"]
CONTAINERS = ["losses", "feats", "history", "stats", "self.buffer", "outputs"]
CALLABLES = ["model", "net", "criterion", "loss_fn", "self.encoder", "self", "Block", "nn.Linear",
             "nn.MSELoss()", "F.cross_entropy", "torch.sigmoid", "T.relu", "helper", "nn.Parameter"]
METHODS = ["item()", "detach()", "cpu()", "clone()", "mean()", "sum()", "tolist()", "numpy()",
           "to('cpu')", "view(-1)", "long()", "argmax(dim=1)", "bool()", "data", "loss", "grad"]
GRAD_CONTEXTS = ["torch.no_grad()", "T.no_grad()", "no_grad()", "torch.inference_mode()",
                 "inference_mode()", "torch.set_grad_enabled(False)", "torch.set_grad_enabled(True)",
                 "torch.enable_grad()", "autocast()", "open('log.txt') as fh", "torch.no_grad(), autocast()"]
DECORATORS = ["@torch.no_grad()", "@torch.inference_mode()", "@T.no_grad()", "@staticmethod",
              "@smart_inference_mode()", "@functools.lru_cache"]
ITERABLES = ["loader", "range(10)", "enumerate(loader)", "zip(xs, ys)", "self.blocks", "tqdm(loader)"]
MAX_DEPTH = 3  # with 1-3 statements a block: programs of a few dozen lines

value, container, callable_, method = (st.sampled_from(pool) for pool in (VALUES, CONTAINERS, CALLABLES, METHODS))


@st.composite
def simple_statement(draw, in_function: bool, in_loop: bool) -> str:
    v, w, c, f, m = draw(value), draw(value), draw(container), draw(callable_), draw(method)
    forms = [
        f"{v} = {f}({w})", f"{v} = {f}({w}, y)", f"{v} = {w}.{m}", f"{v} = {f}({w}).{m}",
        f"{c}.append({v})", f"{c}.extend([{v}, {w}])", f"{c}.insert(0, {v})", f"{c} += [{v}]",
        f"{c}[{w}] = {v}", f"{c}['k'] = {v}", f"{c}.append({{'loss': {v}}})", f"{c}.append(({v}, {w}))",
        f"{v} += {w}", f"{v} = {v} + {w}", f"{v} = torch.cat(({v}, {w}))", f"{v} -= {w} * 0.5",
        f"{v}.backward()", f"{v}.backward(retain_graph=True)", "optimizer.step()", "optimizer.zero_grad()",
        "model.zero_grad(set_to_none=True)", "scaler.scale(loss).backward()", "torch.cuda.empty_cache()",
        "model.eval()", "model.train()", f"{v}.requires_grad_(True)", f"{v}.requires_grad = False",
        f"self.log('loss', {v})", f"del {v}", f"print({v}.item())", f"{v} = float({w})",
        f"{v} = out.loss", f"{v} = out['loss']", f"{v}, {w} = {f}(x)", f"{v}: torch.Tensor = {f}({w})",
        f"{v} = [{f}(t) for t in {c}]", f"{v} = {w} if {v} is None else {v}", f"{c} = []", f"{c} = {{}}",
        f"{v} = 0.0", f"{v} = torch.zeros(1)", f"{v} = (tmp := {f}({w}))", f"{v} = lambda t: {f}(t)",
        "pass", f"assert {v} is not None", f"{v} = sum({c})", f"{c}.clear()", f"{v} = {w}[0]",
    ]
    if in_function:
        forms += [f"return {v}", f"return {c}", f"yield {v}", "return"]
    if in_loop:
        forms += ["break", "continue", f"if {v} is None: continue"]
    return draw(st.sampled_from(forms))


@st.composite
def block(draw, depth: int, in_function: bool, in_loop: bool) -> list[str]:
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        lines += draw(statement(depth, in_function, in_loop))
    return lines


def indented(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


@st.composite
def statement(draw, depth: int, in_function: bool, in_loop: bool) -> list[str]:
    kinds = ["simple"] * 6 + (["for", "while", "with", "if", "try", "def", "class", "match"]
                              if depth < MAX_DEPTH else [])
    kind = draw(st.sampled_from(kinds))
    inner = depth + 1
    if kind == "simple":
        return [draw(simple_statement(in_function, in_loop))]
    if kind == "for":
        target = draw(st.sampled_from(["x", "batch", "(x, y)", "i, (x, y)", "self.step"]))
        header = f"for {target} in {draw(st.sampled_from(ITERABLES))}:"
        return [header, *indented(draw(block(inner, in_function, True)))]
    if kind == "while":
        return [f"while {draw(value)} is not None:", *indented(draw(block(inner, in_function, True)))]
    if kind == "with":
        return [f"with {draw(st.sampled_from(GRAD_CONTEXTS))}:", *indented(draw(block(inner, in_function, in_loop)))]
    if kind == "if":
        lines = [f"if {draw(value)}:", *indented(draw(block(inner, in_function, in_loop)))]
        if draw(st.booleans()):
            lines += ["else:", *indented(draw(block(inner, in_function, in_loop)))]
        return lines
    if kind == "try":
        return ["try:", *indented(draw(block(inner, in_function, in_loop))),
                "except Exception:", *indented(draw(block(inner, in_function, in_loop))),
                "finally:", "    pass"]
    if kind == "def":
        decorators = draw(st.lists(st.sampled_from(DECORATORS), max_size=2))
        name = draw(st.sampled_from(["train", "evaluate", "forward", "validation_step", "training_step", "step"]))
        return [*decorators, f"def {name}(self, x, y=None):", *indented(draw(block(inner, True, False)))]
    if kind == "class":
        base = draw(st.sampled_from(["nn.Module", "LightningModule", "object", "torch.nn.Module"]))
        name = draw(st.sampled_from(["forward", "validation_step", "training_step", "test_step"]))
        method_body = indented(draw(block(inner + 1, True, False)))
        return [f"class Net({base}):", f"    def {name}(self, batch, batch_idx=0):", *indented(method_body)]
    # match
    return [f"match {draw(value)}:", "    case 0:", *indented(indented(draw(block(inner, in_function, in_loop)))),
            "    case _:", *indented(indented(draw(block(inner, in_function, in_loop))))]


@st.composite
def torch_program(draw) -> str:
    imports = draw(st.lists(st.sampled_from(IMPORTS), min_size=1, max_size=4, unique=True))
    body = draw(block(0, False, False))
    return "\n".join([*imports, "", *body]) + "\n"


@SETTINGS
@given(torch_program())
def test_torch_shaped_programs(source):
    assert compiles(source), f"generator produced invalid code:\n{source}"  # guards the generator
    findings = assert_well_behaved(source)
    # Line endings and a BOM are decoding details; they must not move or change any finding.
    assert lint(source.replace("\n", "\r\n")) == findings
    assert lint(b"\xef\xbb\xbf" + source.encode()) == findings
    # `# noqa` on every line suppresses everything.
    assert lint("\n".join(line + "  # noqa" if line.strip() else line
                          for line in source.splitlines()) + "\n") == []


# Two subprocesses per example: few examples, and no shrinking (the failing programs are printed).
@settings(SETTINGS, max_examples=3, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(st.lists(torch_program(), min_size=12, max_size=12))
def test_findings_do_not_depend_on_the_process(tmp_path_factory, programs):
    """What a worker process computes equals what this process computes, whatever the hash seed."""
    directory = tmp_path_factory.mktemp("programs")
    paths = []
    for index, source in enumerate(programs):
        path = directory / f"program_{index}.py"
        path.write_text(source, encoding="utf-8")
        paths.append(str(path))
    here = [[list(finding) for finding in lint(source.encode())] for source in programs]
    driver = textwrap.dedent("""
        import json, sys
        from torchlint.engine import lint_file
        from torchlint.rules import all_rules
        print(json.dumps([[[v.line, v.column, v.end_line, v.end_column, v.code, v.message]
                           for v in lint_file(p, all_rules(), prefilter=False)] for p in sys.argv[1:]]))
    """)
    for seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run([sys.executable, "-c", driver, *paths], env=env,
                                capture_output=True, text=True, check=True)
        assert json.loads(result.stdout) == here, (
            f"PYTHONHASHSEED={seed} changed the findings of one of:\n" + "\n# ---\n".join(programs))
    # The CLI's process pool (one result per worker chunk) must give the serial run's output,
    # and the findings computed here.
    outputs = []
    for jobs in ("1", "2"):
        command = [sys.executable, "-m", "torchlint", "--no-cache", "--select", "ALL", "--format", "json",
                   "--jobs", jobs, *paths]
        result = subprocess.run(command, cwd=directory, capture_output=True, text=True)
        assert result.returncode in (0, 1), result.stderr
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1], "--jobs 2 output differs from --jobs 1"
    by_path = {path: [] for path in paths}
    for item in json.loads(outputs[0]):
        by_path[item["path"]].append([item[key] for key in ("line", "column", "end_line", "end_column",
                                                            "code", "message")])
    assert [sorted(by_path[path]) for path in paths] == [sorted(found) for found in here]
