"""The base class every rule subclasses.

A rule is one small class: its code, name, message, fix hint, the source tokens a file must
contain for the rule to possibly match, its documentation (the docstring, in ruff's shape) and a
few VALID / INVALID snippets that double as tests and as the docs' examples. Rules implement
``visit_<StatementType>(node, ctx)`` methods; the engine calls them for every statement of that
libcst type, with the statement's context (see ``torchlint.analysis``).
"""

from __future__ import annotations

import inspect
import re
from typing import TYPE_CHECKING, Any, ClassVar

from torchlint.lazy import cst

if TYPE_CHECKING:
    from torchlint.analysis import Analysis
    from torchlint.fix import Fix

_CODE_RE = re.compile(r"^TL\d{3}$")
_NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


class Report:
    __slots__ = ("node", "rule", "message", "fix", "autofix")

    def __init__(self, node: Any, rule: type[Rule], message: str, fix: str | None,
                 autofix: Fix | None = None) -> None:
        self.node = node
        self.rule = rule
        self.message = message
        self.fix = fix  # the fix in words (ruff's fix_title)
        self.autofix = autofix  # the fix as changes to the tree (torchlint.fix), if a sound one exists


class Rule:
    CODE: ClassVar[str]
    NAME: ClassVar[str]
    MESSAGE: ClassVar[str]
    FIX: ClassVar[str | None] = None
    # A file that contains none of these substrings cannot produce a finding of this rule and
    # is not parsed for it. Keep the list generous: a missing token silently loses findings.
    TOKENS: ClassVar[tuple[str, ...]] = ()
    ENABLED_BY_DEFAULT: ClassVar[bool] = True
    # The automatic fix in words, starting with its applicability ("Safe: ..." / "Unsafe: ..."),
    # for the docs; empty when the rule offers none. The fix itself is passed to report().
    AUTOFIX: ClassVar[str] = ""
    # What the runtime verifier checks, in one sentence (shown in rule pages and `verify`).
    CLAIM: ClassVar[str] = ""
    VALID: ClassVar[list[str]] = []
    INVALID: ClassVar[list[str]] = []

    def __init__(self, analysis: Analysis, reports: list[Report], options: dict | None = None) -> None:
        self.analysis = analysis
        self._reports = reports
        self.options = options or {}

    def report(self, node: Any, message: str | None = None, fix: str | None = None,
               autofix: Fix | None = None) -> None:
        """Report a finding at ``node``. ``fix`` says how to fix it in words; ``autofix``, where
        a sound one exists, is the fix itself (``Fix.safe(...)`` / ``Fix.unsafe(...)`` of
        ``torchlint.fix``), applied by ``--fix``."""
        self._reports.append(Report(node, type(self), message or self.MESSAGE, fix or self.FIX, autofix))

    def code(self, node: Any, limit: int = 80) -> str:
        """Source text of a node on one line, shortened to ``limit`` characters, for messages."""
        return self.analysis.code(node, limit)

    def operand(self, node: Any, limit: int = 40) -> str:
        """Source of an expression ready to take a method call in a fix hint: ``loss``,
        ``out.loss``, but ``(model(x))`` and ``(a + b)``."""
        text = self.code(node, limit)
        return text if type(node) in (cst.Name, cst.Attribute, cst.Subscript) else f"({text})"

    @classmethod
    def documentation(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def summary(cls) -> str:
        """The first sentence of "What it does", for tables and SARIF shortDescription."""
        doc = cls.documentation()
        match = re.search(r"## What it does\s+(.+?)(?:\n\n|$)", doc, re.S)
        text = " ".join((match.group(1) if match else doc).split())
        return text.split(". ")[0].rstrip(".")

    @classmethod
    def check_definition(cls) -> list[str]:
        """Problems with the rule's own declaration (tested for every rule)."""
        problems = []
        if not _CODE_RE.match(getattr(cls, "CODE", "")):
            problems.append("CODE must look like TL123")
        if not _NAME_RE.match(getattr(cls, "NAME", "")):
            problems.append("NAME must be kebab-case")
        if not getattr(cls, "MESSAGE", ""):
            problems.append("MESSAGE is empty")
        if cls.MESSAGE.endswith("."):
            problems.append("MESSAGE must not end with a period")
        if not cls.TOKENS:
            problems.append("TOKENS is empty")
        doc = cls.documentation()
        for heading in ("## What it does", "## Why is this bad?"):
            if heading not in doc:
                problems.append(f"docstring lacks {heading!r}")
        if not cls.VALID or not cls.INVALID:
            problems.append("VALID and INVALID examples are required")
        return problems


class InPlaceMutationRule(Rule):
    """Base for rules about tensors changed in place: every statement kind that can change one
    (``x.add_(1)``, ``y = x.mul_(2)``, ``w -= g``, ``w[0] = v``, ``return x.relu_()``) goes
    to ``check_mutation``."""

    def check_mutation(self, node: Any, ctx: Any) -> None:
        raise NotImplementedError

    def visit_Expr(self, node: Any, ctx: Any) -> None:
        self.check_mutation(node, ctx)

    def visit_Assign(self, node: Any, ctx: Any) -> None:
        self.check_mutation(node, ctx)

    def visit_AnnAssign(self, node: Any, ctx: Any) -> None:
        self.check_mutation(node, ctx)

    def visit_AugAssign(self, node: Any, ctx: Any) -> None:
        self.check_mutation(node, ctx)

    def visit_Return(self, node: Any, ctx: Any) -> None:
        self.check_mutation(node, ctx)
