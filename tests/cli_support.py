"""Shared helpers for the CLI, format and integration tests: toy rules with fully predictable
findings, a sample of real bad code, and an in-process `torchlint` runner."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import torchlint.rules
from torchlint.cli import main
from torchlint.lazy import cst
from torchlint.rule import Rule

REPO = Path(__file__).resolve().parent.parent
REAL_RULES = torchlint.rules.all_rules  # before any test swaps in the toy rules


class PrintCall(Rule):
    """
    ## What it does
    Flags `print(...)` used as a statement. A toy rule for the CLI tests.

    ## Why is this bad?
    It is not; it only gives the tests findings at predictable places.
    """

    CODE = "TL901"
    NAME = "print-call"
    MESSAGE = "`print(...)` called"
    FIX = "remove the call"
    TOKENS = ("print",)
    CLAIM = "nothing at all"
    INVALID = ["print(1)  # expect: TL901\n"]
    VALID = ["log(1)\n"]

    def visit_Expr(self, node, ctx):
        call = node.value
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "print":
            self.report(node)


class PassStatement(Rule):
    """
    ## What it does
    Flags `pass`. Off by default.

    ## Why is this bad?
    A toy rule.
    """

    CODE = "TL902"
    NAME = "pass-statement"
    MESSAGE = "`pass` statement"
    TOKENS = ("pass",)
    ENABLED_BY_DEFAULT = False
    INVALID = ["pass  # expect: TL902\n"]
    VALID = ["x = 1\n"]

    def visit_Pass(self, node, ctx):
        self.report(node)


class Exploding(Rule):
    """
    ## What it does
    Raises on every expression statement: an internal error in one rule.

    ## Why is this bad?
    A toy rule.
    """

    CODE = "TL903"
    NAME = "exploding"
    MESSAGE = "never reported"
    TOKENS = ("print",)
    ENABLED_BY_DEFAULT = False
    INVALID = ["print(1)\n"]
    VALID = ["x = 1\n"]

    def visit_Expr(self, node, ctx):
        raise RuntimeError("boom")


TOY_RULES = (PrintCall, PassStatement, Exploding)


@pytest.fixture
def toy_rules(monkeypatch):
    """Make the CLI see only the toy rules (rules_by_code/default_rules follow all_rules)."""
    monkeypatch.setattr(torchlint.rules, "all_rules", lambda: TOY_RULES)
    return TOY_RULES


class CliResult:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()

    def json(self):
        return json.loads(self.out)


@pytest.fixture
def cli(capsys, monkeypatch, tmp_path):
    """Run `torchlint ARGS` in-process with the working directory at tmp_path."""
    monkeypatch.chdir(tmp_path)

    def run(*args: str, stdin: bytes | str | None = None) -> CliResult:
        if stdin is not None:
            data = stdin.encode() if isinstance(stdin, str) else stdin
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
        code = main(list(args))
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run


def write(directory: Path, name: str, content: str | bytes) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def bad_samples() -> list[tuple[str, str, str]]:
    """(file name, source, code) of real bad code: the TL101 fixtures, else every rule's INVALID
    examples (the rule tests guarantee those produce the rule's code)."""
    fixtures = sorted((REPO / "fixtures" / "TL101").glob("bad*.py"))
    if fixtures:
        return [(path.name, path.read_text(encoding="utf-8"), "TL101") for path in fixtures]
    return [
        (f"bad_{rule.CODE.lower()}_{index}.py", example, rule.CODE)
        for rule in REAL_RULES() if rule.ENABLED_BY_DEFAULT for index, example in enumerate(rule.INVALID)
    ]


def run_torchlint(*args: str, cwd: Path, stdin: str | None = None, env: dict | None = None):
    """`python -m torchlint ARGS` in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "torchlint", *args], cwd=cwd, input=stdin, capture_output=True,
        text=True, env={**os.environ, **(env or {})}, timeout=300,
    )
