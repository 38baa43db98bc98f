"""The pygls glue: document and notebook sync, diagnostics scheduling, code actions, hover.

What is linted is a *unit*: a text document, or a notebook (LSP 3.17 notebook sync), whose
Python code cells are joined into one module and whose findings are published per cell.

Linting runs on one worker thread, off the event loop, so requests are answered while a file is
being linted; the text is read on the event loop, where pygls applies the client's changes.
Diagnostics are scheduled per unit: an edit after a quiet spell is linted at once (the result is
shown within a lint's time of the change), edits in quick succession wait until the typing
pauses for DEBOUNCE seconds, and a result is published only if the unit did not change while it
was computed.
"""

from __future__ import annotations

import asyncio
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from urllib.parse import unquote

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from torchlint import __version__
from torchlint.config import ConfigError
from torchlint.engine import source_lines
from torchlint.lsp import linting
from torchlint.lsp.linting import (
    Configurations, Edit, explanation, fix_all_edits, from_units, lint_text, noqa_edit, notebook_source, rule_page,
    to_units, violation_span,
)
from torchlint.violation import INVALID_FILE_CODE, Violation

DEBOUNCE = 0.2  # seconds of quiet after a burst of edits before linting
SOURCE = "torchlint"
FIX_ALL_KIND = "source.fixAll.torchlint"


@dataclass(frozen=True)
class Part:
    """A document of a unit: its lines ``start`` to ``start + count`` of the linted text."""

    uri: str
    version: int | None
    start: int
    count: int


@dataclass
class Result:
    """One lint of one version of a unit."""

    version: int | None
    text: str
    lines: list[str]
    violations: list[Violation]
    parts: tuple[Part, ...]

    def part(self, uri: str) -> Part | None:
        return next((part for part in self.parts if unquote(part.uri) == unquote(uri)), None)


@dataclass
class UnitState:
    last_change: float = 0.0
    task: asyncio.Task | None = None
    result: Result | None = None
    burst: bool = False  # the pending lint waits for a quiet spell
    published: tuple[str, ...] = ()  # the documents diagnostics were last published for


@dataclass
class Session:
    server: LanguageServer
    configurations: Configurations
    units: dict[str, UnitState] = field(default_factory=dict)
    executor: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1, "torchlint-lsp"))
    rules_url: str | None = None
    shown_errors: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)

    # ---- units ---------------------------------------------------------------------------

    @property
    def workspace(self):
        return self.server.workspace

    def unit_of(self, uri: str) -> str:
        """The notebook a cell belongs to, else the document itself."""
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        return notebook.uri if notebook is not None else uri

    def is_open(self, unit: str) -> bool:
        return (unquote(unit) in self.workspace.text_documents
                or self.workspace.get_notebook_document(notebook_uri=unit) is not None)

    def version_of(self, unit: str) -> int | None:
        notebook = self.workspace.get_notebook_document(notebook_uri=unit)
        if notebook is not None:
            return notebook.version
        return self.workspace.get_text_document(unit).version

    def path_of(self, uri: str, language_id: str | None, suffix: str = ".py") -> str | None:
        """The file's path, or a stand-in for an unsaved buffer (configured like a file in the
        workspace root); None for a document that is not Python."""
        path = to_fs_path(uri) if uri.startswith("file:") else None
        if language_id not in (None, "", "python") and not (path or "").endswith(suffix):
            return None
        if path is None:
            path = os.path.join(self.workspace.root_path or os.getcwd(), "untitled" + suffix)
        return path

    def snapshot(self, unit: str) -> tuple[int | None, str, str | None, tuple[Part, ...]]:
        """(version, text, path, parts) of the unit as it is now."""
        notebook = self.workspace.get_notebook_document(notebook_uri=unit)
        if notebook is None:
            document = self.workspace.get_text_document(unit)
            lines = source_lines(document.source)
            part = Part(unit, document.version, 0, len(lines))
            return document.version, document.source, self.path_of(unit, document.language_id), (part,)
        cells = []
        for cell in notebook.cells:
            if cell.kind != lsp.NotebookCellKind.Code or unquote(cell.document) not in self.workspace.text_documents:
                continue
            document = self.workspace.get_text_document(cell.document)
            if document.language_id in (None, "", "python"):
                cells.append(document)
        text, starts = notebook_source([document.source for document in cells])
        total = len(source_lines(text)) if cells else 0
        ends = [*starts[1:], total]
        parts = tuple(Part(document.uri, document.version, start, end - start)
                      for document, start, end in zip(cells, starts, ends))
        return notebook.version, text, self.path_of(unit, None, ".ipynb"), parts

    # ---- linting -------------------------------------------------------------------------

    def lint_in_worker(self, text: str, path: str | None) -> tuple[list[Violation], str | None]:
        """The findings (on the worker thread), or the configuration error that stops them."""
        if path is None:
            return [], None
        try:
            return lint_text(text, path, self.configurations), None
        except ConfigError as error:
            return [], str(error)

    async def lint(self, unit: str) -> Result | None:
        if not self.is_open(unit):
            return None
        version, text, path, parts = self.snapshot(unit)
        violations, error = await asyncio.get_running_loop().run_in_executor(
            self.executor, self.lint_in_worker, text, path)
        if error is not None:
            self.config_error(error)
        while self.warnings:  # the configuration's warnings, collected on the worker thread
            self.server.window_log_message(lsp.LogMessageParams(lsp.MessageType.Warning, self.warnings.pop(0)))
        return Result(version, text, source_lines(text), violations, parts)

    def config_error(self, message: str) -> None:
        """Shown once per distinct message; the document gets no diagnostics, as the CLI would
        refuse to run (exit 2) rather than lint with settings nobody asked for."""
        if message in self.shown_errors:
            return
        self.shown_errors.add(message)
        self.server.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Error, f"torchlint: {message}"))

    async def current(self, uri: str) -> Result | None:
        """The findings for the unit of ``uri`` as it is now: the last result if the unit has not
        changed since, else a fresh lint."""
        unit = self.unit_of(uri)
        if not self.is_open(unit):
            return None
        state = self.units.get(unit)
        if state is not None and state.result is not None and state.result.version == self.version_of(unit):
            return state.result
        result = await self.lint(unit)
        if result is not None and self.units.get(unit) is state is not None:
            state.result = result
        return result

    def schedule(self, unit: str, immediately: bool) -> None:
        state = self.units.setdefault(unit, UnitState())
        now = time.monotonic()
        # an edit soon after the previous one is part of a burst: wait for the typing to pause
        burst = not immediately and now - state.last_change < DEBOUNCE
        state.last_change = now
        if state.task is not None and not state.task.done():
            if immediately:  # open or save: the newest text, now
                state.task.cancel()
            else:
                state.burst = state.burst or burst
                return  # the pending lint reads the newest text when it runs
        state.burst = burst
        state.task = asyncio.ensure_future(self._lint_and_publish(unit, state))

    async def _lint_and_publish(self, unit: str, state: UnitState) -> None:
        try:
            await self._lint_until_current(unit, state)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a server bug must not go unseen, nor stop the server
            self.server.window_log_message(lsp.LogMessageParams(
                lsp.MessageType.Error, f"torchlint: internal error while linting {unit}: {type(error).__name__}: {error}"))

    async def _lint_until_current(self, unit: str, state: UnitState) -> None:
        while True:
            while state.burst and (wait := state.last_change + DEBOUNCE - time.monotonic()) > 0:
                await asyncio.sleep(wait)
            state.burst = False
            result = await self.lint(unit)
            if result is None or self.units.get(unit) is not state:
                return  # closed meanwhile
            if self.version_of(unit) == result.version:
                state.result = result
                self.publish(state, result)
                return
            state.burst = True  # changed while linting: lint the newest text once typing pauses

    def publish(self, state: UnitState, result: Result) -> None:
        for part in result.parts:
            diagnostics = [self.diagnostic(violation, result, part) for violation in self.in_part(result, part)]
            self.server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
                uri=part.uri, version=part.version, diagnostics=diagnostics))
        now = tuple(part.uri for part in result.parts)
        for gone in set(state.published) - set(now):  # cells deleted since: clear theirs
            self.server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=gone, diagnostics=[]))
        state.published = now

    def close(self, unit: str) -> None:
        state = self.units.pop(unit, None)
        if state is None:
            return
        if state.task is not None:
            state.task.cancel()
        for uri in state.published:
            self.server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def relint_all(self) -> None:
        for unit in list(self.units):
            if self.is_open(unit):
                self.schedule(unit, immediately=True)

    # ---- conversions ---------------------------------------------------------------------

    @staticmethod
    def in_part(result: Result, part: Part) -> list[Violation]:
        return [violation for violation in result.violations
                if part.start <= violation_span(violation, result.lines)[0] < part.start + part.count]

    @property
    def encoding(self) -> str:
        encoding = self.workspace.position_encoding
        return str(getattr(encoding, "value", encoding) or "utf-16")

    def position(self, lines: list[str], line: int, character: int, part: Part) -> lsp.Position:
        """The client's position of (line, character) of the linted text, in ``part``."""
        text = lines[line] if 0 <= line < len(lines) else ""
        return lsp.Position(line=line - part.start, character=to_units(text, character, self.encoding))

    def range(self, result: Result, part: Part, start_line: int, start: int, end_line: int, end: int) -> lsp.Range:
        last = part.start + max(part.count - 1, 0)
        if end_line > last:  # a finding that runs on into the next cell ends with this one
            end_line, end = last, len(result.lines[last]) if last < len(result.lines) else 0
        return lsp.Range(self.position(result.lines, start_line, start, part),
                         self.position(result.lines, end_line, end, part))

    def diagnostic(self, violation: Violation, result: Result, part: Part) -> lsp.Diagnostic:
        page = rule_page(violation.code, self.rules_url)
        message = violation.message + (f"\nhelp: {violation.help}" if violation.help else "")
        return lsp.Diagnostic(
            range=self.range(result, part, *violation_span(violation, result.lines)),
            message=message,
            severity=lsp.DiagnosticSeverity.Error if violation.code == INVALID_FILE_CODE
            else lsp.DiagnosticSeverity.Warning,
            code=violation.code,
            code_description=lsp.CodeDescription(href=page) if page else None,
            source=SOURCE,
            data={"name": violation.name},
        )

    def workspace_edit(self, result: Result, edits: list[Edit]) -> lsp.WorkspaceEdit | None:
        """Edits of the linted version, per document of the unit: versioned where the client takes
        that, so a client whose document has moved on refuses them instead of applying them at the
        wrong place. None if an edit crosses from one cell into another."""
        by_part: dict[Part, list[lsp.TextEdit]] = {}
        for edit in edits:
            part = next((part for part in result.parts
                         if part.start <= edit.start_line and edit.end_line < part.start + part.count), None)
            if part is None:
                return None
            by_part.setdefault(part, []).append(lsp.TextEdit(
                self.range(result, part, edit.start_line, edit.start_character, edit.end_line, edit.end_character),
                edit.new_text))
        capabilities = self.server.client_capabilities
        workspace_edit = capabilities.workspace.workspace_edit if capabilities.workspace else None
        if workspace_edit is not None and workspace_edit.document_changes:
            return lsp.WorkspaceEdit(document_changes=[
                lsp.TextDocumentEdit(lsp.OptionalVersionedTextDocumentIdentifier(uri=part.uri, version=part.version),
                                     text_edits)
                for part, text_edits in by_part.items()
            ])
        return lsp.WorkspaceEdit(changes={part.uri: text_edits for part, text_edits in by_part.items()})

    # ---- code actions and hover ----------------------------------------------------------

    async def code_actions(self, params: lsp.CodeActionParams) -> list[lsp.CodeAction] | None:
        uri = params.text_document.uri
        result = await self.current(uri)
        part = result.part(uri) if result is not None else None
        if part is None:
            return None
        wanted = params.context.only
        first = part.start + params.range.start.line
        last = part.start + params.range.end.line
        actions: list[lsp.CodeAction] = []
        offered: set[tuple[int, str]] = set()  # one noqa action per line and code
        for violation in self.in_part(result, part):
            if violation.code == INVALID_FILE_CODE:
                continue
            start_line, _, end_line, _ = violation_span(violation, result.lines)
            if end_line < first or start_line > last:
                continue
            diagnostic = self.diagnostic(violation, result, part)
            edits = linting._fix_edits(violation)
            edit = self.workspace_edit(result, edits) if edits else None
            if edit is not None and _wanted(lsp.CodeActionKind.QuickFix, wanted):
                actions.append(lsp.CodeAction(
                    title=f"Fix {violation.code}: {violation.help or violation.name}",
                    kind=lsp.CodeActionKind.QuickFix, diagnostics=[diagnostic], is_preferred=True, edit=edit,
                ))
            if (start_line, violation.code) in offered:
                continue
            offered.add((start_line, violation.code))
            noqa = noqa_edit(result.text, start_line, violation.code)
            edit = self.workspace_edit(result, [noqa]) if noqa is not None else None
            if edit is not None and _wanted(lsp.CodeActionKind.QuickFix, wanted):
                actions.append(lsp.CodeAction(
                    title=f"Ignore {violation.code} on this line (# noqa)",
                    kind=lsp.CodeActionKind.QuickFix, diagnostics=[diagnostic], edit=edit,
                ))
        if _wanted(FIX_ALL_KIND, wanted):
            edits = fix_all_edits(result.violations)
            edit = self.workspace_edit(result, edits) if edits else None
            if edit is not None:
                actions.append(lsp.CodeAction(title="Fix all torchlint findings", kind=FIX_ALL_KIND, edit=edit))
        return actions

    async def hover(self, params: lsp.HoverParams) -> lsp.Hover | None:
        uri = params.text_document.uri
        result = await self.current(uri)
        part = result.part(uri) if result is not None else None
        if part is None or not 0 <= params.position.line < part.count:
            return None
        line = part.start + params.position.line
        if line >= len(result.lines):
            return None
        character = from_units(result.lines[line], params.position.character, self.encoding)
        found = []
        for violation in self.in_part(result, part):
            span = violation_span(violation, result.lines)
            if (span[0], span[1]) <= (line, character) <= (span[2], span[3]):
                found.append((violation, span))
        texts = list(dict.fromkeys(filter(None, (explanation(violation.code) for violation, _ in found))))
        if not texts:
            return None
        return lsp.Hover(
            contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value="\n\n---\n\n".join(texts)),
            range=self.range(result, part, *found[0][1]),
        )

    def warm_up(self) -> None:
        """Import libcst and the rules and lint a small file once, before the first document."""
        from torchlint.engine import lint_source
        from torchlint.rules import all_rules

        lint_source("import torch\nfor x in data:\n    losses.append(model(x))\n", "warm-up.py", all_rules())


def _wanted(kind: str, only: list[str] | None) -> bool:
    """Does ``kind`` fall under one of the kinds the client asked for (hierarchical: "source"
    covers "source.fixAll.torchlint")?"""
    return not only or any(kind == prefix or kind.startswith(prefix + ".") for prefix in only)


def create_server(config_file: str | None = None) -> LanguageServer:
    notebooks = lsp.NotebookDocumentSyncOptions(notebook_selector=[
        lsp.NotebookDocumentFilterWithCells(cells=[lsp.NotebookCellLanguage(language="python")],
                                            notebook="jupyter-notebook"),
    ], save=True)
    server = LanguageServer("torchlint", __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
                            notebook_document_sync=notebooks)
    warnings: list[str] = []
    session = Session(server, Configurations(config_file, warn=lambda message: warnings.append(
        f"torchlint: warning: {message}")), warnings=warnings)

    @server.feature(lsp.INITIALIZE)
    def initialize(params: lsp.InitializeParams) -> None:
        options = params.initialization_options
        if isinstance(options, dict) and isinstance(options.get("rulesUrl"), str):
            session.rules_url = options["rulesUrl"]

    @server.feature(lsp.INITIALIZED)
    def initialized(params: lsp.InitializedParams) -> None:
        session.executor.submit(session.warm_up)

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: lsp.DidOpenTextDocumentParams) -> None:
        session.schedule(params.text_document.uri, immediately=True)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: lsp.DidChangeTextDocumentParams) -> None:
        session.schedule(session.unit_of(params.text_document.uri), immediately=False)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(params: lsp.DidSaveTextDocumentParams) -> None:
        if os.path.basename(params.text_document.uri) == "pyproject.toml":
            session.relint_all()  # the configuration may have changed
        elif params.text_document.uri in session.units:
            session.schedule(params.text_document.uri, immediately=True)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: lsp.DidCloseTextDocumentParams) -> None:
        session.close(params.text_document.uri)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_did_open(params: lsp.DidOpenNotebookDocumentParams) -> None:
        session.schedule(params.notebook_document.uri, immediately=True)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_did_change(params: lsp.DidChangeNotebookDocumentParams) -> None:
        session.schedule(params.notebook_document.uri, immediately=False)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_did_save(params: lsp.DidSaveNotebookDocumentParams) -> None:
        session.schedule(params.notebook_document.uri, immediately=True)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_did_close(params: lsp.DidCloseNotebookDocumentParams) -> None:
        session.close(params.notebook_document.uri)

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(params: lsp.DidChangeWatchedFilesParams) -> None:
        if any(os.path.basename(change.uri) == "pyproject.toml" for change in params.changes):
            session.relint_all()

    @server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION,
                    lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix, FIX_ALL_KIND]))
    async def code_action(params: lsp.CodeActionParams):
        return await session.code_actions(params)

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    async def hover(params: lsp.HoverParams):
        return await session.hover(params)

    @server.feature(lsp.SHUTDOWN)
    def shutdown(params: None) -> None:
        for state in session.units.values():
            if state.task is not None:
                state.task.cancel()
        session.executor.shutdown(wait=False, cancel_futures=True)

    return server
