"""`torchlint server`: the language server, driven end to end by a real LSP client over stdio
(pygls's), plus the protocol-free parts (noqa edits, ranges, position units) directly.

The client tests start `python -m torchlint server` in a scratch project and wait for each
notification with a generous timeout (the suite runs on loaded two-core machines); they skip
with how to install pygls when it is missing, and fail under CI=true.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import run_torchlint
from optional_deps import require

from torchlint.config import ConfigError
from torchlint.engine import lint_source, source_lines
from torchlint.lsp.linting import (
    Configurations, Edit, from_units, lint_text, noqa_edit, rule_page, to_units, violation_span,
)
from torchlint.rules import default_rules

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 60.0  # seconds for any one message: generous, for a loaded machine

TRAIN = """\
import torch


def train(model, loader, optimizer, criterion):
    losses = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss)
    return losses
"""
TRAIN_LINE = 10  # 0-based line of `losses.append(loss)`: TL101

SCORE = """\
import torch


def score_model(model, loader):
    scores = []
    for x, y in loader:
        scores.append(model(x).softmax(1))
    return torch.cat(scores)
"""


# ---- the protocol-free parts --------------------------------------------------------------


def apply(text: str, edit: Edit) -> str:
    lines = source_lines(text)
    offsets = [0]
    for line in lines[:-1]:
        offsets.append(offsets[-1] + len(line) + 1)  # these tests use "\n" only
    start = offsets[edit.start_line] + edit.start_character
    end = offsets[edit.end_line] + edit.end_character
    return text[:start] + edit.new_text + text[end:]


def codes(text: str) -> list[tuple[int, str]]:
    return [(violation.line, violation.code) for violation in lint_source(text, "t.py", default_rules())]


def test_noqa_edit_silences_exactly_that_finding():
    assert (11, "TL101") in codes(TRAIN)
    edited = apply(TRAIN, noqa_edit(TRAIN, TRAIN_LINE, "TL101"))
    assert source_lines(edited)[TRAIN_LINE] == "        losses.append(loss)  # noqa: TL101"
    assert (11, "TL101") not in codes(edited)
    assert len(codes(edited)) == len(codes(TRAIN)) - 1


@pytest.mark.parametrize(("line", "expected"), [
    ("        losses.append(loss)  # noqa: E501", "        losses.append(loss)  # noqa: E501, TL101"),
    ("        losses.append(loss)  # noqa:E501,W291", "        losses.append(loss)  # noqa:E501,W291, TL101"),
    ("        losses.append(loss)  # keep for the plot", "        losses.append(loss)  # keep for the plot  # noqa: TL101"),
    ("        losses.append(loss)   ", "        losses.append(loss)  # noqa: TL101"),
    ("        losses.append('#')", "        losses.append('#')  # noqa: TL101"),
])
def test_noqa_edit_merges_with_what_the_line_has(line, expected):
    lines = source_lines(TRAIN)
    lines[TRAIN_LINE] = line
    text = "\n".join(lines)
    edited = apply(text, noqa_edit(text, TRAIN_LINE, "TL101"))
    assert source_lines(edited)[TRAIN_LINE] == expected
    assert (11, "TL101") not in codes(edited)


@pytest.mark.parametrize("text", [
    'x = 1  # noqa\n',  # suppresses every code already
    'x = 1  # noqa: TL1\n',  # the prefix covers TL101
    'x = """start\nend"""\n',  # line 0 ends inside a string
    'x = 1 + \\\n    2\n',  # a comment cannot come before the continuation
    'x = (\n',  # not tokenizable
])
def test_noqa_edit_refuses_where_no_comment_can_go(text):
    assert noqa_edit(text, 0, "TL101") is None


def test_noqa_edit_on_a_line_inside_brackets():
    text = "total = sum(\n    losses,\n)\n"
    edited = apply(text, noqa_edit(text, 1, "TL102"))
    assert edited == "total = sum(\n    losses,  # noqa: TL102\n)\n"
    compile(edited, "t.py", "exec")


def test_noqa_edit_counts_lines_as_the_parser_does():
    text = "a = 1\rlosses.append(loss)\r\nb = 2\n"
    edit = noqa_edit(text, 1, "TL101")
    assert edit == Edit(1, len("losses.append(loss)"), 1, len("losses.append(loss)"), "  # noqa: TL101")


def test_position_units():
    line = "x = '\U0001F600é'  # y"
    character = line.index("#")
    assert to_units(line, character, "utf-32") == character
    assert to_units(line, character, "utf-16") == character + 1  # the emoji is two UTF-16 units
    assert to_units(line, character, "utf-8") == len(line[:character].encode())
    for encoding in ("utf-8", "utf-16", "utf-32"):
        assert from_units(line, to_units(line, character, encoding), encoding) == character


def test_an_empty_range_covers_the_rest_of_its_line():
    (violation,) = lint_source("x = (1,\ny = 2\n", "t.py", default_rules())
    lines = source_lines("x = (1,\ny = 2\n")
    start_line, start, end_line, end = violation_span(violation, lines)
    assert violation.code == "TL000" and (start_line, end_line) == (violation.line - 1,) * 2
    assert end > start


def test_lint_text_reads_the_configuration_as_the_cli(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\neval-function-words = ["score"]\n'
                                             '[tool.torchlint.per-file-ignores]\n"ignored_*.py" = ["TL101"]\n')
    configurations = Configurations()
    assert [v.code for v in lint_text(SCORE, str(tmp_path / "score.py"), configurations)] == ["TL201"]
    assert [v.code for v in lint_text(TRAIN, str(tmp_path / "train.py"), configurations)] == ["TL101"]
    assert lint_text(TRAIN, str(tmp_path / "ignored_train.py"), configurations) == []
    # a change on disk is seen by the next lint, without restarting the server, wherever it is
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL1"]\n')
    (tmp_path / "new").mkdir()
    assert lint_text(TRAIN, str(tmp_path / "new" / "train.py"), configurations) == []
    assert lint_text(TRAIN, str(tmp_path / "train.py"), configurations) == []
    assert lint_text(SCORE, str(tmp_path / "score.py"), configurations) == []  # default words again
    (tmp_path / "new" / "pyproject.toml").write_text('[tool.torchlint]\nselect = ["TL101"]\n')  # a nearer one
    assert [v.code for v in lint_text(TRAIN, str(tmp_path / "new" / "train.py"), configurations)] == ["TL101"]


def test_lint_text_with_a_config_file_for_every_path(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL1"]\n')  # not read
    (tmp_path / "torchlint.toml").write_text('eval-function-words = ["score"]\n')
    configurations = Configurations(str(tmp_path / "torchlint.toml"))
    assert [v.code for v in lint_text(TRAIN + SCORE, str(tmp_path / "sub" / "a.py"), configurations)] == [
        "TL101", "TL201"]
    with pytest.raises(ConfigError, match="configuration file not found"):
        lint_text(TRAIN, str(tmp_path / "a.py"), Configurations(str(tmp_path / "missing.toml")))


def test_rule_pages_are_the_checkouts_or_the_configured_ones():
    assert rule_page("TL101", "https://example.com/torchlint/rules/") == "https://example.com/torchlint/rules/TL101.md"
    assert rule_page("TL000", "https://example.com/rules") is None
    local = rule_page("TL101", None)
    assert local is None or (local.startswith("file://") and local.endswith("/rules/TL101.md"))


def test_linting_never_imports_pygls():
    code = ("import sys, torchlint.cli as cli; cli.main(['-q', '--no-cache', 'fixtures/TL101']); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pygls', 'lsprotocol', 'torchlint.lsp')))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stderr


def test_the_readme_editor_snippets_start_this_server():
    """The Editors section's configuration snippets parse, and each starts `torchlint server`."""
    import re

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: tomli, a dependency there
        import tomli as tomllib

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    editors = readme.split("## Editors\n", 1)[1].split("\n## ", 1)[0]
    blocks = dict(re.findall(r"^```(\w+)\n(.*?)^```", editors, re.S | re.M))
    assert set(blocks) >= {"sh", "json", "lua", "toml", "elisp"}
    vscode = json.loads(blocks["json"])
    assert [vscode["glspc.serverCommand"], *vscode["glspc.serverCommandArguments"]] == ["torchlint", "server"]
    helix = tomllib.loads(blocks["toml"])
    assert helix["language-server"]["torchlint"] == {"command": "torchlint", "args": ["server"]}
    assert "torchlint" in helix["language"][0]["language-servers"]
    assert 'cmd = { "torchlint", "server" }' in blocks["lua"]
    assert '("torchlint" "server")' in blocks["elisp"]


def test_the_server_subcommand_is_listed_and_has_help():
    assert "`torchlint server --help` for the language server" in " ".join(run_torchlint("--help", cwd=REPO).stdout.split())
    result = run_torchlint("server", "--help", cwd=REPO)
    assert result.returncode == 0 and "usage: torchlint server" in result.stdout
    result = run_torchlint("server", "--no-such-option", cwd=REPO)
    assert result.returncode == 2 and "unrecognized arguments" in result.stderr


def test_server_without_pygls_says_how_to_install_it(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['pygls'] = None\n")
    result = subprocess.run([sys.executable, "-m", "torchlint", "server"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300, stdin=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])})
    assert result.returncode == 2
    assert result.stderr.strip() == ("torchlint: error: torchlint server needs pygls (the `lsp` extra): "
                                     "pip install 'pygls>=2.0,<3'")


# ---- a real client over stdio -------------------------------------------------------------


class Editor:
    """A pygls client driving `python -m torchlint server` in ``root``, collecting what the
    server publishes."""

    def __init__(self, root: Path) -> None:
        require("pygls")
        from lsprotocol import types as lsp
        from pygls.lsp.client import LanguageClient

        self.lsp = lsp
        self.root = root
        self.client = LanguageClient("torchlint-tests", "1")
        self.published: asyncio.Queue = asyncio.Queue()
        self.messages: list[str] = []
        self.client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)(lambda params: self.published.put_nowait(params))
        self.client.feature(lsp.WINDOW_SHOW_MESSAGE)(lambda params: self.messages.append(params.message))
        self.client.feature(lsp.WINDOW_LOG_MESSAGE)(lambda params: self.messages.append(params.message))

    async def start(self, *args: str, notebooks: bool = False, options: dict | None = None,
                    site: Path | None = None) -> object:
        lsp = self.lsp
        paths = [str(site) if site else None, str(REPO), os.environ.get("PYTHONPATH")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths))}
        await self.client.start_io(sys.executable, "-m", "torchlint", "server", *args, cwd=str(self.root), env=env)
        capabilities = lsp.ClientCapabilities(
            workspace=lsp.WorkspaceClientCapabilities(workspace_edit=lsp.WorkspaceEditClientCapabilities(
                document_changes=True)),
            text_document=lsp.TextDocumentClientCapabilities(
                publish_diagnostics=lsp.PublishDiagnosticsClientCapabilities(version_support=True)),
            notebook_document=lsp.NotebookDocumentClientCapabilities(
                synchronization=lsp.NotebookDocumentSyncClientCapabilities()) if notebooks else None,
        )
        result = await asyncio.wait_for(self.client.initialize_async(lsp.InitializeParams(
            capabilities=capabilities, process_id=os.getpid(), root_uri=self.root.as_uri(),
            initialization_options=options)), TIMEOUT)
        self.client.initialized(lsp.InitializedParams())
        return result

    def uri(self, name: str) -> str:
        return (self.root / name).as_uri()

    def open(self, name: str, text: str, version: int = 1) -> None:
        self.client.text_document_did_open(self.lsp.DidOpenTextDocumentParams(
            self.lsp.TextDocumentItem(uri=self.uri(name), language_id="python", version=version, text=text)))

    def change(self, name: str, version: int, text: str, range_=None) -> None:
        lsp = self.lsp
        change = (lsp.TextDocumentContentChangePartial(range=range_, text=text) if range_ is not None
                  else lsp.TextDocumentContentChangeWholeDocument(text=text))
        self.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(uri=self.uri(name), version=version), [change]))

    async def diagnostics(self, name: str, version: int | None = None) -> list:
        """The next diagnostics published for ``name`` (for ``version``, when given)."""
        while True:
            params = await asyncio.wait_for(self.published.get(), TIMEOUT)
            if params.uri == self.uri(name) and (version is None or params.version == version):
                return list(params.diagnostics)

    async def code_actions(self, name: str, line: int) -> list:
        lsp = self.lsp
        return list(await asyncio.wait_for(self.client.text_document_code_action_async(lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(self.uri(name)),
            range=lsp.Range(lsp.Position(line, 0), lsp.Position(line, 0)),
            context=lsp.CodeActionContext(diagnostics=[]))), TIMEOUT) or [])

    async def stop(self) -> None:
        await asyncio.wait_for(self.client.shutdown_async(None), TIMEOUT)
        self.client.exit(None)
        await asyncio.wait_for(self.client.stop(), TIMEOUT)


def run(scenario) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 10 * TIMEOUT))


def apply_text_edits(text: str, edits) -> str:
    """Apply LSP TextEdits (UTF-16 units; these texts are ASCII) to ``text``, last first."""
    lines = source_lines(text)
    offsets = [0]
    for line in lines[:-1]:
        offsets.append(offsets[-1] + len(line) + 1)
    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        start = offsets[edit.range.start.line] + edit.range.start.character
        end = offsets[edit.range.end.line] + edit.range.end.character
        text = text[:start] + edit.new_text + text[end:]
    return text


def test_a_session_as_an_editor_runs_it(tmp_path):
    """initialize, open, the diagnostic at the right line with its code, link and help, hover,
    the code action with its edit, applying it, a change with fresh diagnostics, shutdown."""
    editor = Editor(tmp_path)

    async def scenario():
        lsp = editor.lsp
        result = await editor.start()
        assert result.server_info.name == "torchlint"
        assert result.capabilities.notebook_document_sync is None  # this client has no notebooks
        editor.open("train.py", TRAIN)
        (diagnostic,) = await editor.diagnostics("train.py", 1)
        assert diagnostic.code == "TL101" and diagnostic.source == "torchlint"
        assert diagnostic.range.start == lsp.Position(TRAIN_LINE, 8)
        assert diagnostic.range.end == lsp.Position(TRAIN_LINE, len("        losses.append(loss)"))
        assert diagnostic.severity == lsp.DiagnosticSeverity.Warning
        assert "\nhelp: " in diagnostic.message
        assert diagnostic.code_description.href == (REPO / "rules" / "TL101.md").as_uri()  # this checkout's page

        hover = await asyncio.wait_for(editor.client.text_document_hover_async(lsp.HoverParams(
            lsp.TextDocumentIdentifier(editor.uri("train.py")), lsp.Position(TRAIN_LINE, 12))), TIMEOUT)
        assert hover.contents.kind == lsp.MarkupKind.Markdown
        assert hover.contents.value == run_torchlint("--explain", "TL101", cwd=REPO).stdout
        nothing = await asyncio.wait_for(editor.client.text_document_hover_async(lsp.HoverParams(
            lsp.TextDocumentIdentifier(editor.uri("train.py")), lsp.Position(0, 0))), TIMEOUT)
        assert nothing is None

        actions = await editor.code_actions("train.py", TRAIN_LINE)
        (ignore,) = [action for action in actions if "noqa" in action.title]
        assert ignore.kind == lsp.CodeActionKind.QuickFix and ignore.diagnostics[0].code == "TL101"
        (document_edit,) = ignore.edit.document_changes
        assert document_edit.text_document.uri == editor.uri("train.py")
        assert document_edit.text_document.version == 1
        # no finding on line 0: no quick fix there (the document's "Fix all" is offered anywhere)
        assert [action for action in await editor.code_actions("train.py", 0)
                if action.kind == lsp.CodeActionKind.QuickFix] == []

        # the editor applies the edit: the finding is gone in the next diagnostics
        edited = apply_text_edits(TRAIN, document_edit.edits)
        assert source_lines(edited)[TRAIN_LINE].endswith("  # noqa: TL101")
        editor.change("train.py", 2, edited)
        assert await editor.diagnostics("train.py", 2) == []

        # an incremental change that brings a finding back (TL102 a line lower)
        position = lsp.Position(TRAIN_LINE + 1, 0)
        editor.change("train.py", 3, "        total = total + loss\n", lsp.Range(position, position))
        (fresh,) = await editor.diagnostics("train.py", 3)
        assert fresh.code == "TL102" and fresh.range.start.line == TRAIN_LINE + 1

        editor.client.text_document_did_close(lsp.DidCloseTextDocumentParams(
            lsp.TextDocumentIdentifier(editor.uri("train.py"))))
        assert await editor.diagnostics("train.py") == []
        await editor.stop()

    run(scenario)
    assert editor.client._server.returncode == 0  # exited after shutdown and exit


def test_the_server_reports_what_the_cli_reports_under_a_configuration(tmp_path):
    """select/ignore, per-file-ignores and eval-function-words from the nearest pyproject.toml,
    in a subproject with a configuration of its own: the same findings as `torchlint`."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torchlint]\neval-function-words = ["score"]\n'
        '[tool.torchlint.per-file-ignores]\n"legacy/*" = ["TL101"]\n')
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL102"]\n')
    (tmp_path / "legacy").mkdir()
    files = {"score.py": SCORE, "train.py": TRAIN, "legacy/train.py": TRAIN + SCORE.replace("import torch\n", ""),
             "sub/train.py": TRAIN.replace("losses.append(loss)", "total = total + loss"),
             "sub/score.py": SCORE}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    cli = run_torchlint("--format", "json", "--no-cache", *files, cwd=tmp_path)
    expected = {(Path(item["path"]).as_posix(), item["line"] - 1, item["code"]) for item in json.loads(cli.stdout)}
    assert {code for _, _, code in expected} == {"TL101", "TL201"}  # the configuration matters here

    editor = Editor(tmp_path)
    found = set()

    async def scenario():
        await editor.start(options={"rulesUrl": "https://example.com/torchlint/rules"})
        for name, text in files.items():
            editor.open(name, text)
            for diagnostic in await editor.diagnostics(name, 1):
                found.add((name, diagnostic.range.start.line, diagnostic.code))
                assert diagnostic.code_description.href == f"https://example.com/torchlint/rules/{diagnostic.code}.md"
        await editor.stop()

    run(scenario)
    assert found == expected


def test_a_configuration_error_is_shown_not_linted_around(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nselect = ["TL9"]\n')
    editor = Editor(tmp_path)

    async def scenario():
        await editor.start()
        editor.open("train.py", TRAIN)
        assert await editor.diagnostics("train.py", 1) == []
        await editor.stop()

    run(scenario)
    assert any("unknown rule code 'TL9'" in message for message in editor.messages), editor.messages


def test_a_burst_of_edits_ends_with_the_diagnostics_of_the_last_text(tmp_path):
    """Typing a line one character at a time, changes back to back: the server does not lint each
    one (the debounce), and what it publishes last is for the last version, never a stale text."""
    editor = Editor(tmp_path)
    typed = "        total = total + loss"
    published = []

    async def scenario():
        lsp = editor.lsp
        await editor.start()
        editor.open("train.py", TRAIN)
        await editor.diagnostics("train.py", 1)
        end_of_append = lsp.Position(TRAIN_LINE, len("        losses.append(loss)"))
        editor.change("train.py", 2, "\n", lsp.Range(end_of_append, end_of_append))
        line = TRAIN_LINE + 1
        for column, character in enumerate(typed):
            position = lsp.Position(line, column)
            editor.change("train.py", 3 + column, character, lsp.Range(position, position))
        last = 2 + len(typed)
        while True:
            params = await asyncio.wait_for(editor.published.get(), TIMEOUT)
            published.append(params.version)
            if params.version == last:
                assert sorted(d.code for d in params.diagnostics) == ["TL101", "TL102"]
                assert [d.range.start.line for d in params.diagnostics if d.code == "TL102"] == [line]
                break
        await editor.stop()

    run(scenario)
    assert published == sorted(published)  # never an older version after a newer one
    assert len(published) < len(typed) // 2  # not one lint per keystroke


# ---- notebooks ----------------------------------------------------------------------------


def test_notebook_cells_are_one_module_with_ipython_syntax_masked():
    from torchlint.lsp.linting import notebook_source

    cells = [
        "%matplotlib inline\nimport torch\n",
        "files = !ls\nfor x, y in loader:\n    %time loss = model(x)\n    losses.append(loss)\nmodel?\n",
        "%%bash\nfor f in *; do echo $f; done\n",
        "%%time\ntotal = total + loss",
    ]
    text, starts = notebook_source(cells)
    lines = source_lines(text)
    assert starts == [0, 3, 9, 12]
    assert lines[0] == "pass" and lines[1] == "import torch"
    assert lines[3] == "pass" and lines[5] == "    pass" and lines[6] == "    losses.append(loss)" and lines[7] == "pass"
    assert lines[9:12] == ["", "", ""]  # a bash cell is not Python
    assert lines[12:] == ["pass", "total = total + loss"]
    compile(text, "nb", "exec")


def test_notebook_masking_leaves_python_alone():
    from torchlint.lsp.linting import notebook_source

    python = ('x = a % b\ny = "!"\nif x != y:\n    z = {"?": 1}\nw = (x\n     % 2)\ns = """\n!not a shell\n"""\n'
              'v = 1 + \\\n    % 3\n')
    assert notebook_source([python])[0] == python


class Notebook:
    """A notebook of cells for the client: (kind, text) each, markdown or code."""

    def __init__(self, editor: Editor, name: str, cells: list[tuple[str, str]]) -> None:
        lsp = editor.lsp
        self.editor, self.uri = editor, editor.uri(name)
        self.cells = [f"{self.uri}#cell{index}" for index in range(len(cells))]
        kinds = {"code": lsp.NotebookCellKind.Code, "markdown": lsp.NotebookCellKind.Markup}
        editor.client.notebook_document_did_open(lsp.DidOpenNotebookDocumentParams(
            notebook_document=lsp.NotebookDocument(uri=self.uri, notebook_type="jupyter-notebook", version=1, cells=[
                lsp.NotebookCell(kind=kinds[kind], document=uri) for uri, (kind, _) in zip(self.cells, cells)]),
            cell_text_documents=[
                lsp.TextDocumentItem(uri=uri, language_id="python" if kind == "code" else "markdown", version=1, text=text)
                for uri, (kind, text) in zip(self.cells, cells)]))

    def change_cell(self, index: int, version: int, text: str) -> None:
        lsp = self.editor.lsp
        self.editor.client.notebook_document_did_change(lsp.DidChangeNotebookDocumentParams(
            notebook_document=lsp.VersionedNotebookDocumentIdentifier(version=version, uri=self.uri),
            change=lsp.NotebookDocumentChangeEvent(cells=lsp.NotebookDocumentCellChanges(text_content=[
                lsp.NotebookDocumentCellContentChanges(
                    document=lsp.VersionedTextDocumentIdentifier(uri=self.cells[index], version=version),
                    changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)])]))))

    async def diagnostics(self) -> dict[str, list]:
        """The next diagnostics for every code cell (published together after each lint)."""
        found: dict[str, list] = {}
        while True:
            params = await asyncio.wait_for(self.editor.published.get(), TIMEOUT)
            if params.uri in self.cells:
                found[params.uri] = list(params.diagnostics)
            if len(found) == self.code_cells:
                return found


def test_a_notebook_is_linted_as_one_module_and_reported_per_cell(tmp_path):
    editor = Editor(tmp_path)
    cells = [
        ("markdown", "# Training\nWith `%time` and a `!pip` line."),
        ("code", "%pip install torch\nimport torch\nlosses = []\n"),
        ("code", "for x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n"
                 "    optimizer.step()\n    optimizer.zero_grad()\n    losses.append(loss)\n"),
    ]

    async def scenario():
        lsp = editor.lsp
        result = await editor.start(notebooks=True)
        assert result.capabilities.notebook_document_sync is not None
        notebook = Notebook(editor, "train.ipynb", cells)
        notebook.code_cells = 2
        found = await notebook.diagnostics()
        assert found[notebook.cells[1]] == []
        (diagnostic,) = found[notebook.cells[2]]
        assert diagnostic.code == "TL101"
        assert diagnostic.range.start == lsp.Position(5, 4)  # line 6 of the third cell, not of the module

        actions = await editor.code_actions("train.ipynb#cell2", 5)
        (ignore,) = [action for action in actions if "noqa" in action.title]
        (document_edit,) = ignore.edit.document_changes
        assert document_edit.text_document.uri == notebook.cells[2]
        assert [edit.range.start.line for edit in document_edit.edits] == [5]

        hover = await asyncio.wait_for(editor.client.text_document_hover_async(lsp.HoverParams(
            lsp.TextDocumentIdentifier(notebook.cells[2]), lsp.Position(5, 10))), TIMEOUT)
        assert hover.contents.value.startswith("# TL101 ")

        notebook.change_cell(2, 2, apply_text_edits(cells[2][1], document_edit.edits))
        found = await notebook.diagnostics()
        assert found == {notebook.cells[1]: [], notebook.cells[2]: []}

        editor.client.notebook_document_did_close(lsp.DidCloseNotebookDocumentParams(
            notebook_document=lsp.NotebookDocumentIdentifier(notebook.uri),
            cell_text_documents=[lsp.TextDocumentIdentifier(uri) for uri in notebook.cells]))
        await editor.stop()

    run(scenario)


STAND_IN_FIX = """\
# Planted by tests/test_server.py: a stand-in safe autofix for TL101 (`x.append(loss)` ->
# `x.append(loss.detach())`); TL101's own fix is unsafe here (the loss reaches backward()).
import torchlint.lsp.linting as linting


def _fix_edits(violation):
    if violation.code != "TL101" or violation.line != violation.end_line:
        return None
    end = violation.end_column - 2  # before the closing parenthesis, 0-based
    return [linting.Edit(violation.line - 1, end, violation.line - 1, end, ".detach()")]


linting._fix_edits = _fix_edits
"""


def test_fix_actions_apply_the_edits_of_a_finding_that_has_a_fix(tmp_path):
    """The path autofix will take: a finding whose fix has edits gets "Fix ..." (preferred) and the
    document "Fix all torchlint findings"; applying either leaves no finding behind."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(STAND_IN_FIX)
    text = TRAIN.replace("        losses.append(loss)\n", "        losses.append(loss)\n        history.append(loss)\n")
    assert [code for _, code in codes(text)] == ["TL101", "TL101"]
    editor = Editor(tmp_path)

    async def scenario():
        lsp = editor.lsp
        await editor.start(site=site)
        editor.open("train.py", text)
        assert len(await editor.diagnostics("train.py", 1)) == 2
        actions = await editor.code_actions("train.py", TRAIN_LINE)
        (fix,) = [action for action in actions if action.title.startswith("Fix TL101")]
        assert fix.is_preferred and fix.kind == lsp.CodeActionKind.QuickFix
        (document_edit,) = fix.edit.document_changes
        fixed_one = apply_text_edits(text, document_edit.edits)
        assert "losses.append(loss.detach())" in fixed_one and "history.append(loss)\n" in fixed_one

        (fix_all,) = [action for action in actions if action.kind == "source.fixAll.torchlint"]
        (document_edit,) = fix_all.edit.document_changes
        fixed = apply_text_edits(text, document_edit.edits)
        assert "losses.append(loss.detach())" in fixed and "history.append(loss.detach())" in fixed
        assert codes(fixed) == []
        only = await asyncio.wait_for(editor.client.text_document_code_action_async(lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(editor.uri("train.py")),
            range=lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)),
            context=lsp.CodeActionContext(diagnostics=[], only=[lsp.CodeActionKind.SourceFixAll]))), TIMEOUT)
        assert [action.title for action in only] == ["Fix all torchlint findings"]
        await editor.stop()

    run(scenario)


def test_safe_fixes_of_real_findings_become_lsp_edits(tmp_path):
    from torchlint.lsp.linting import _fix_edits

    text = ("import torch\n\n\ndef train(model, loader, optimizer):\n    for x, y in loader:\n"
            "        loss = torch.nn.functional.mse_loss(model(x), y)\n        loss.backward()\n"
            "        optimizer.step()\n")
    (violation,) = [v for v in lint_text(text, str(tmp_path / "train.py"), Configurations()) if v.code == "TL501"]
    assert violation.fix is not None and violation.fix.is_safe
    edits = _fix_edits(violation)
    assert edits and all(edit.start_line == fix_edit.line - 1 and edit.new_text == fix_edit.content
                         for edit, fix_edit in zip(edits, violation.fix.edits))
    from types import SimpleNamespace as NS

    fixed = apply_text_edits(text, [NS(range=NS(start=NS(line=e.start_line, character=e.start_character),
                                                end=NS(line=e.end_line, character=e.end_character)),
                                       new_text=e.new_text) for e in edits])
    assert "zero_grad()" in fixed and not [v for v in lint_text(fixed, str(tmp_path / "train.py"), Configurations())
                                          if v.code == "TL501"]
