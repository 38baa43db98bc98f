"""How long after a change the language server publishes fresh diagnostics, measured as an editor
sees it: a real LSP client (pygls's) drives `python -m torchlint server` over stdio.

    PYTHONPATH=. python benchmarks/lsp_latency.py                 # a generated 1,000-line training module
    PYTHONPATH=. python benchmarks/lsp_latency.py --file PATH     # any file

For the document it prints:
- the engine alone: `lint_source` on the text in this process (median of --repeat runs);
- open: didOpen to the first publishDiagnostics (libcst already warmed up by the server);
- isolated edits: didChange (one character typed in a comment, a quiet spell before each) to the
  publishDiagnostics of that version; median, 90th percentile and maximum;
- a burst: --burst keystrokes --interval ms apart, from the last keystroke to the diagnostics of
  the last version (the debounce waits for typing to pause, then lints once).

Figures depend on the machine and its load; the target is an isolated edit of a 1,000-line file
answered within 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

BLOCK = '''

def train_{i}(model, loader, optimizer, criterion, epochs=1):
    """Train for a few epochs; keeps the per-step losses for a plot."""
    model.train()
    losses = []
    for epoch in range(epochs):
        for step, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            output = model(x)
            loss = criterion(output, y)
            loss.backward()
            optimizer.step()
            losses.append(loss)
            if step % 100 == 0:
                print(f"epoch {{epoch}} step {{step}}: {{loss.item():.4f}}")
    return losses


def evaluate_{i}(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            prediction = model(x).argmax(dim=1)
            correct += (prediction == y).sum().item()
            total += y.numel()
    return correct / max(total, 1)


class Head_{i}(nn.Module):
    def __init__(self, width=256, classes=10):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.out = nn.Linear(width, classes)

    def forward(self, x):
        return self.out(torch.relu(self.norm(x)))
'''


def generated_module(lines: int = 1000) -> str:
    """A training module of about ``lines`` lines: loops, evaluation, modules; one TL101 per block."""
    text = '"""Generated for the latency benchmark."""\n\nimport torch\nfrom torch import nn\n'
    index = 0
    while text.count("\n") + BLOCK.count("\n") <= lines:
        text += BLOCK.format(i=index)
        index += 1
    return text + "\n" * max(0, lines - text.count("\n"))


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def engine_time(text: str, path: str, repeat: int) -> tuple[float, int]:
    from torchlint.engine import lint_source
    from torchlint.rules import default_rules

    rules = default_rules()
    lint_source(text, path, rules)  # libcst imported, rules loaded
    times, cpu = [], []
    for index in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        violations = lint_source(text + "#" * index, path, rules)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return min(times), statistics.median(times), min(cpu), len(violations)


async def session(text: str, path: Path, args) -> dict:
    from lsprotocol import types as lsp
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("torchlint-latency", "1")
    arrivals: dict[int, float] = {}
    counts: dict[int, int] = {}
    arrived = asyncio.Event()

    @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def published(params):
        if params.version is not None:
            arrivals[params.version] = time.perf_counter()
            counts[params.version] = len(params.diagnostics)
            arrived.set()

    async def wait_for(version: int) -> float:
        while version not in arrivals:
            arrived.clear()
            await asyncio.wait_for(arrived.wait(), 60)
        return arrivals[version]

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    await client.start_io(sys.executable, "-m", "torchlint", "server", cwd=str(path.parent), env=env)
    await client.initialize_async(lsp.InitializeParams(capabilities=lsp.ClientCapabilities(),
                                                       root_uri=path.parent.as_uri()))
    client.initialized(lsp.InitializedParams())
    await asyncio.sleep(args.settle)  # let the server warm up (libcst, rules), as an editor's startup does
    uri = path.as_uri()
    results: dict = {}

    sent = time.perf_counter()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    results["open"] = await wait_for(1) - sent
    results["findings"] = counts[1]

    # One character typed at the end of the first line (a comment keeps the findings the same).
    lines = text.split("\n")
    end = lsp.Position(0, len(lines[0]))
    version = 1
    column = end.character
    isolated = []
    for _ in range(args.edits):
        await asyncio.sleep(args.quiet)
        version += 1
        change = lsp.TextDocumentContentChangePartial(
            range=lsp.Range(lsp.Position(0, column), lsp.Position(0, column)), text=" #" if version == 2 else "x")
        column += len(change.text)
        sent = time.perf_counter()
        client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(uri=uri, version=version), [change]))
        isolated.append(await wait_for(version) - sent)
    results["isolated"] = isolated

    await asyncio.sleep(args.quiet)
    for _ in range(args.burst):
        version += 1
        change = lsp.TextDocumentContentChangePartial(
            range=lsp.Range(lsp.Position(0, column), lsp.Position(0, column)), text="y")
        column += 1
        client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(uri=uri, version=version), [change]))
        last = time.perf_counter()
        await asyncio.sleep(args.interval / 1000)
    results["burst"] = await wait_for(version) - last
    results["burst_publishes"] = sum(1 for published_version in arrivals if published_version > version - args.burst)

    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", help="benchmark this file instead of a generated 1,000-line module")
    parser.add_argument("--lines", type=int, default=1000, help="size of the generated module")
    parser.add_argument("--edits", type=int, default=30, help="isolated edits to time")
    parser.add_argument("--quiet", type=float, default=0.4, help="seconds of quiet before each isolated edit")
    parser.add_argument("--burst", type=int, default=20, help="keystrokes in the burst")
    parser.add_argument("--interval", type=float, default=50, help="milliseconds between burst keystrokes")
    parser.add_argument("--repeat", type=int, default=20, help="runs of the engine alone")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds between initialized and didOpen")
    args = parser.parse_args()
    try:
        import pygls  # noqa: F401
    except ModuleNotFoundError:
        print("lsp_latency.py needs pygls: pip install -e '.[lsp]'", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory() as scratch:
        if args.file:
            source = Path(args.file).read_text(encoding="utf-8")
            path = Path(scratch) / Path(args.file).name
        else:
            source = generated_module(args.lines)
            path = Path(scratch) / "generated_training.py"
        path.write_text(source, encoding="utf-8")
        engine_min, engine, engine_cpu, findings = engine_time(source, str(path), args.repeat)
        results = asyncio.run(session(source, path, args))

    ms = 1000
    isolated = results["isolated"]
    print(f"document: {args.file or 'generated training module'}, {source.count(chr(10))} lines, "
          f"{len(source.encode())} bytes, {findings} findings (server: {results['findings']})")
    print(f"engine alone (lint_source, {args.repeat} runs): min {engine_min * ms:.1f} ms, "
          f"median {engine * ms:.1f} ms wall; min {engine_cpu * ms:.1f} ms CPU")
    print(f"machine load (1-minute average) {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"open -> diagnostics: {results['open'] * ms:.1f} ms")
    print(f"isolated edit -> diagnostics ({len(isolated)} edits): min {min(isolated) * ms:.1f} ms, "
          f"median {statistics.median(isolated) * ms:.1f} ms, "
          f"p90 {percentile(isolated, 0.9) * ms:.1f} ms, max {max(isolated) * ms:.1f} ms")
    print(f"burst of {args.burst} keystrokes {args.interval:.0f} ms apart: last keystroke -> diagnostics "
          f"{results['burst'] * ms:.1f} ms ({results['burst_publishes']} publishes for the burst)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
