"""The pygls glue: document sync, diagnostics scheduling, code actions, hover.

Linting runs on one worker thread, off the event loop, so requests are answered while a file is
being linted. Diagnostics are scheduled per document: an edit after a quiet spell is linted at
once (the result is shown within a lint's time of the change), edits in quick succession wait
until the typing pauses for DEBOUNCE seconds, and a result is published only if the document did
not change while it was computed.
"""

from __future__ import annotations

import asyncio
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from torchlint import __version__
from torchlint.config import ConfigError
from torchlint.engine import source_lines
from torchlint.lsp.linting import (
    Configurations, Edit, _fix_edits, explanation, fix_all_edits, from_units, lint_text, noqa_edit,
    rule_page, to_units, violation_span,
)
from torchlint.violation import INVALID_FILE_CODE, Violation

DEBOUNCE = 0.2  # seconds of quiet after a burst of edits before linting
SOURCE = "torchlint"
FIX_ALL_KIND = "source.fixAll.torchlint"


@dataclass
class Result:
    """One lint of one version of a document."""

    version: int | None
    text: str
    lines: list[str]
    violations: list[Violation]


@dataclass
class DocumentState:
    last_change: float = 0.0
    task: asyncio.Task | None = None
    result: Result | None = None
    burst: bool = False  # the pending lint waits for a quiet spell


@dataclass
class Session:
    server: LanguageServer
    configurations: Configurations
    documents: dict[str, DocumentState] = field(default_factory=dict)
    executor: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1, "torchlint-lsp"))
    rules_url: str | None = None
    shown_errors: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)

    # ---- documents and linting -------------------------------------------------------------

    def path_of(self, uri: str) -> str | None:
        """The file's path, or a stand-in for an unsaved buffer (configured like a file in the
        workspace root); None for a document that is not Python."""
        document = self.server.workspace.get_text_document(uri)
        path = to_fs_path(uri) if uri.startswith("file:") else None
        if document.language_id not in (None, "", "python") and not (path or "").endswith(".py"):
            return None
        if path is None:
            root = self.server.workspace.root_path or os.getcwd()
            path = os.path.join(root, "untitled.py")
        return path

    def lint_in_worker(self, text: str, path: str | None) -> tuple[list[Violation], str | None]:
        """The findings (on the worker thread), or the configuration error that stops them."""
        if path is None:
            return [], None
        try:
            return lint_text(text, path, self.configurations), None
        except ConfigError as error:
            return [], str(error)

    async def lint(self, uri: str) -> Result | None:
        """Lint the document's current text. What is read from the workspace is read here, on the
        event loop, which is where pygls applies the client's changes."""
        if uri not in self.server.workspace.text_documents:
            return None
        document = self.server.workspace.get_text_document(uri)
        version, text, path = document.version, document.source, self.path_of(uri)
        violations, error = await asyncio.get_running_loop().run_in_executor(
            self.executor, self.lint_in_worker, text, path)
        if error is not None:
            self.config_error(error)
        while self.warnings:  # the configuration's warnings, collected on the worker thread
            self.server.window_log_message(lsp.LogMessageParams(lsp.MessageType.Warning, self.warnings.pop(0)))
        return Result(version, text, source_lines(text), violations)

    def config_error(self, message: str) -> None:
        """Shown once per distinct message; the document gets no diagnostics, as the CLI would
        refuse to run (exit 2) rather than lint with settings nobody asked for."""
        if message in self.shown_errors:
            return
        self.shown_errors.add(message)
        self.server.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Error, f"torchlint: {message}"))

    async def current(self, uri: str) -> Result | None:
        """The findings for the document as it is now: the last result if the document has not
        changed since, else a fresh lint."""
        state = self.documents.get(uri)
        if uri not in self.server.workspace.text_documents:
            return None
        version = self.server.workspace.get_text_document(uri).version
        if state is not None and state.result is not None and state.result.version == version:
            return state.result
        result = await self.lint(uri)
        if result is not None and state is not None and uri in self.documents:
            state.result = result
        return result

    def schedule(self, uri: str, immediately: bool) -> None:
        state = self.documents.setdefault(uri, DocumentState())
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
        state.task = asyncio.ensure_future(self._lint_and_publish(uri, state))

    async def _lint_and_publish(self, uri: str, state: DocumentState) -> None:
        while True:
            while state.burst and (wait := state.last_change + DEBOUNCE - time.monotonic()) > 0:
                await asyncio.sleep(wait)
            state.burst = False
            result = await self.lint(uri)
            if result is None or self.documents.get(uri) is not state:
                return  # closed meanwhile
            document = self.server.workspace.get_text_document(uri)
            if document.version == result.version:
                state.result = result
                self.publish(uri, result)
                return
            state.burst = True  # changed while linting: lint the newest text once typing pauses

    def publish(self, uri: str, result: Result) -> None:
        self.server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
            uri=uri, version=result.version,
            diagnostics=[self.diagnostic(violation, result) for violation in result.violations],
        ))

    def close(self, uri: str) -> None:
        state = self.documents.pop(uri, None)
        if state is not None and state.task is not None:
            state.task.cancel()
        self.server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def relint_all(self) -> None:
        for uri in list(self.documents):
            if uri in self.server.workspace.text_documents:
                self.schedule(uri, immediately=True)

    # ---- conversions -----------------------------------------------------------------------

    @property
    def encoding(self) -> str:
        encoding = self.server.workspace.position_encoding
        return str(getattr(encoding, "value", encoding) or "utf-16")

    def position(self, lines: list[str], line: int, character: int) -> lsp.Position:
        text = lines[line] if 0 <= line < len(lines) else ""
        return lsp.Position(line=line, character=to_units(text, character, self.encoding))

    def range(self, lines: list[str], start_line: int, start: int, end_line: int, end: int) -> lsp.Range:
        return lsp.Range(self.position(lines, start_line, start), self.position(lines, end_line, end))

    def text_edit(self, lines: list[str], edit: Edit) -> lsp.TextEdit:
        return lsp.TextEdit(self.range(lines, edit.start_line, edit.start_character, edit.end_line,
                                       edit.end_character), edit.new_text)

    def diagnostic(self, violation: Violation, result: Result) -> lsp.Diagnostic:
        page = rule_page(violation.code, self.rules_url)
        message = violation.message + (f"\nhelp: {violation.help}" if violation.help else "")
        return lsp.Diagnostic(
            range=self.range(result.lines, *violation_span(violation, result.lines)),
            message=message,
            severity=lsp.DiagnosticSeverity.Error if violation.code == INVALID_FILE_CODE
            else lsp.DiagnosticSeverity.Warning,
            code=violation.code,
            code_description=lsp.CodeDescription(href=page) if page else None,
            source=SOURCE,
            data={"name": violation.name},
        )

    def workspace_edit(self, uri: str, result: Result, edits: list[Edit]) -> lsp.WorkspaceEdit:
        """Edits of the linted version: versioned where the client takes that, so a client whose
        document has moved on refuses them instead of applying them at the wrong place."""
        text_edits = [self.text_edit(result.lines, edit) for edit in edits]
        capabilities = self.server.client_capabilities
        workspace_edit = capabilities.workspace.workspace_edit if capabilities.workspace else None
        if workspace_edit is not None and workspace_edit.document_changes:
            identifier = lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=result.version)
            return lsp.WorkspaceEdit(document_changes=[lsp.TextDocumentEdit(identifier, text_edits)])
        return lsp.WorkspaceEdit(changes={uri: text_edits})

    # ---- code actions and hover ------------------------------------------------------------

    async def code_actions(self, params: lsp.CodeActionParams) -> list[lsp.CodeAction] | None:
        uri = params.text_document.uri
        result = await self.current(uri)
        if result is None:
            return None
        wanted = params.context.only
        first = params.range.start.line
        last = params.range.end.line
        actions: list[lsp.CodeAction] = []
        offered: set[tuple[int, str]] = set()  # one noqa action per line and code
        for violation in result.violations:
            if violation.code == INVALID_FILE_CODE:
                continue
            start_line, _, end_line, _ = violation_span(violation, result.lines)
            if end_line < first or start_line > last:
                continue
            diagnostic = self.diagnostic(violation, result)
            edits = _fix_edits(violation)
            if edits and _wanted(lsp.CodeActionKind.QuickFix, wanted):
                actions.append(lsp.CodeAction(
                    title=f"Fix {violation.code}: {violation.help or violation.name}",
                    kind=lsp.CodeActionKind.QuickFix, diagnostics=[diagnostic], is_preferred=True,
                    edit=self.workspace_edit(uri, result, edits),
                ))
            if (start_line, violation.code) in offered:
                continue
            offered.add((start_line, violation.code))
            edit = noqa_edit(result.text, start_line, violation.code)
            if edit is not None and _wanted(lsp.CodeActionKind.QuickFix, wanted):
                actions.append(lsp.CodeAction(
                    title=f"Ignore {violation.code} on this line (# noqa)",
                    kind=lsp.CodeActionKind.QuickFix, diagnostics=[diagnostic],
                    edit=self.workspace_edit(uri, result, [edit]),
                ))
        if _wanted(FIX_ALL_KIND, wanted):
            edits = fix_all_edits(result.violations)
            if edits:
                actions.append(lsp.CodeAction(
                    title="Fix all torchlint findings", kind=FIX_ALL_KIND,
                    edit=self.workspace_edit(uri, result, edits),
                ))
        return actions

    async def hover(self, params: lsp.HoverParams) -> lsp.Hover | None:
        result = await self.current(params.text_document.uri)
        if result is None:
            return None
        line = params.position.line
        if not 0 <= line < len(result.lines):
            return None
        character = from_units(result.lines[line], params.position.character, self.encoding)
        found = []
        for violation in result.violations:
            span = violation_span(violation, result.lines)
            if (span[0], span[1]) <= (line, character) <= (span[2], span[3]):
                found.append((violation, span))
        texts = list(dict.fromkeys(filter(None, (explanation(violation.code) for violation, _ in found))))
        if not texts:
            return None
        return lsp.Hover(
            contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value="\n\n---\n\n".join(texts)),
            range=self.range(result.lines, *found[0][1]),
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
    server = LanguageServer("torchlint", __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental)
    warnings: list[str] = []
    session = Session(server, Configurations(config_file, warn=lambda message: warnings.append(
        f"torchlint: warning: {message}")), warnings=warnings)

    @server.feature(lsp.INITIALIZED)
    def initialized(params: lsp.InitializedParams) -> None:
        session.executor.submit(session.warm_up)

    @server.feature(lsp.INITIALIZE)
    def initialize(params: lsp.InitializeParams) -> None:
        options = params.initialization_options
        if isinstance(options, dict) and isinstance(options.get("rulesUrl"), str):
            session.rules_url = options["rulesUrl"]

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: lsp.DidOpenTextDocumentParams) -> None:
        session.schedule(params.text_document.uri, immediately=True)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: lsp.DidChangeTextDocumentParams) -> None:
        session.schedule(params.text_document.uri, immediately=False)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(params: lsp.DidSaveTextDocumentParams) -> None:
        if os.path.basename(params.text_document.uri) == "pyproject.toml":
            session.relint_all()  # the configuration may have changed
        elif params.text_document.uri in session.documents:
            session.schedule(params.text_document.uri, immediately=True)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: lsp.DidCloseTextDocumentParams) -> None:
        session.close(params.text_document.uri)

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
        for state in session.documents.values():
            if state.task is not None:
                state.task.cancel()
        session.executor.shutdown(wait=False, cancel_futures=True)

    server.torchlint_session = session  # for tests and the benchmark in the same process
    return server
