"""Jupyter notebooks: walked, joined, masked, placed in cells, written back."""

from __future__ import annotations

import json

import pytest

from cli_support import cli  # noqa: F401 - a fixture, used by name

from torchlint.engine import lint_source
from torchlint.notebook import NotebookError, load, mask
from torchlint.rules import default_rules

BUG = """losses = []
for batch in loader:
    loss = model(batch).sum()
    loss.backward()
    losses.append(loss)
"""


def code(source: str, outputs: list | None = None) -> dict:
    return {"cell_type": "code", "execution_count": 3, "metadata": {"tags": ["x"]},
            "outputs": outputs or [], "source": source.splitlines(keepends=True)}


def markdown(source: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": source.splitlines(keepends=True)}


def notebook(*cells: dict, language: str = "python") -> str:
    document = {"cells": list(cells), "nbformat": 4, "nbformat_minor": 5,
                "metadata": {"kernelspec": {"name": "k", "language": language, "display_name": "K"}}}
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


def lint(text: str, path: str = "nb.ipynb"):
    return lint_source(text, path, default_rules())


def test_finding_in_third_cell_names_the_cell_and_its_line(cli, tmp_path):
    text = notebook(markdown("# Training\n"), code("import torch\n"), code("x = 1\n" + BUG))
    (tmp_path / "nb.ipynb").write_text(text)
    [finding] = lint(text)
    assert (finding.cell, finding.line, finding.column, finding.code) == (3, 6, 5, "TL101")
    result = cli("--output-format", "concise", "nb.ipynb")
    assert result.out.startswith("nb.ipynb:cell 3:6:5: TL101 ")
    [row] = cli("--format", "json", "nb.ipynb").json()
    assert (row["cell"], row["line"], row["end_line"]) == (3, 6, 6)


def test_json_has_no_cell_key_for_python_files(tmp_path):
    [finding] = lint(BUG, "train.py")
    assert finding.cell is None and "cell" not in finding.as_dict()


def test_cells_are_one_module_across_cells():
    # The loop is in one cell and the append in the same loop; the list is made in another cell.
    text = notebook(code("losses = []\n"), code(BUG.split("\n", 1)[1]))
    [finding] = lint(text)
    assert (finding.cell, finding.line) == (2, 4)


MAGICS = """%matplotlib inline
!pip install torch
files = !ls
%time y = f(1)
model?
??model
torch.nn.Linear??
for batch in loader:
    %time z = 1
    !nvidia-smi
    loss = model(batch).sum()
    loss.backward()
    losses.append(loss)
"""


def test_magics_shell_escapes_and_help_are_masked_not_errors():
    text = notebook(code("losses = []\n"), code(MAGICS))
    found = lint(text)
    assert [(item.code, item.cell, item.line) for item in found] == [("TL101", 2, 13)]


def test_cell_magics():
    bash = code("%%bash\nfor f in *; do echo $f; done\n")
    timed = code("%%time\n" + BUG)
    found = lint(notebook(bash, timed))
    assert [(item.code, item.cell, item.line) for item in found] == [("TL101", 2, 6)]  # the body of %%time is Python
    assert lint(notebook(code("%%writefile x.py\n" + BUG))) == []  # a file's text, not run here


def test_mask_leaves_strings_and_brackets_alone():
    lines = ['x = """', "%not a magic", '"""', "y = (1", "  % 2)", "z = 3  # why?", "!echo hi"]
    assert mask(lines) == ['x = """', "%not a magic", '"""', "y = (1", "  % 2)", "z = 3  # why?", "pass"]
    assert mask(["!pip install \\", "   torch", "a = 1"]) == ["pass", "", "a = 1"]


def test_noqa_works_per_cell_line():
    quiet = BUG.replace("losses.append(loss)", "losses.append(loss)  # noqa: TL101")
    assert lint(notebook(code(quiet))) == []


def test_syntax_error_is_placed_in_its_cell():
    [finding] = lint(notebook(code("a = 1\n"), markdown("x"), code("b = 2\ndef broken(:\n")))
    assert (finding.code, finding.cell, finding.line) == ("TL000", 3, 2)


@pytest.mark.parametrize(("data", "reason"), [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "no `cells` list"),
    (json.dumps({"worksheets": [], "nbformat": 3}), "nbformat 3"),
    (json.dumps({"cells": [{"cell_type": "code", "source": 3}]}), "cell 1: `source` must be"),
    (b"\xff\xfe", "not valid UTF-8"),
])
def test_invalid_notebook_is_tl000_with_the_reason(data, reason):
    [finding] = lint(data)
    assert finding.code == "TL000" and reason in finding.message and finding.cell is None


def test_json_error_position():
    with pytest.raises(NotebookError) as error:
        load('{\n "cells": [\n  1,,\n ]}')
    assert (error.value.line, error.value.column) == (3, 5)


def test_other_languages_and_empty_notebooks_have_no_findings():
    assert lint(notebook(code(BUG), language="R")) == []
    assert lint(notebook(markdown("only prose"))) == []


def test_walk_finds_notebooks_and_extend_exclude_drops_them(cli, tmp_path):
    (tmp_path / "nb.ipynb").write_text(notebook(code(BUG)))
    (tmp_path / ".ipynb_checkpoints").mkdir()  # Jupyter's autosaved copy is not linted twice
    (tmp_path / ".ipynb_checkpoints" / "nb-checkpoint.ipynb").write_text(notebook(code(BUG)))
    assert [row["path"] for row in cli("--format", "json", ".").json()] == ["nb.ipynb"]
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nextend-exclude = ["*.ipynb"]\n')
    assert cli("--format", "json", ".").json() == []


# --- writing back: what a fix of the joined source needs ------------------------------------------

OUTPUT = {"output_type": "stream", "name": "stdout", "text": ["3\n"]}


def test_rebuild_unchanged_is_byte_for_byte():
    text = notebook(markdown("# T\n"), code("%matplotlib inline\nimport torch\n"), code(BUG, [OUTPUT]))
    parsed = load(text)
    assert parsed.rebuild(parsed.source) == text


@pytest.mark.parametrize("indent", [1, 2, None])
def test_rebuild_writes_an_edit_into_its_cell_only(indent):
    document = json.loads(notebook(markdown("# T\n"), code("%matplotlib inline\nimport torch\n"),
                                   code(BUG, [OUTPUT]), code("!ls\nprint(losses)")))
    text = json.dumps(document, indent=indent, ensure_ascii=False)
    parsed = load(text)
    edited = parsed.source.replace("losses.append(loss)", "losses.append(loss.detach())")
    rebuilt = parsed.rebuild(edited)
    result = json.loads(rebuilt)
    assert "".join(result["cells"][2]["source"]) == BUG.replace("append(loss)", "append(loss.detach())")
    # Everything else unchanged: other cells (magics restored), outputs, metadata.
    document["cells"][2]["source"] = result["cells"][2]["source"]
    assert result == document
    # Only the edited cell's source text moved in the file.
    start = text.index("losses = []")
    assert rebuilt[:start] == text[:start]
    assert rebuilt[rebuilt.index("loss.backward()"):].replace("loss.detach()", "loss") == text[text.index("loss.backward()"):]


def test_rebuild_inserted_and_deleted_lines_stay_in_their_cells():
    text = notebook(code("import torch\n"), code("a = 1\nb = 2\n"), code("c = 3"))
    parsed = load(text)
    assert parsed.source == "import torch\na = 1\nb = 2\nc = 3\n"
    result = json.loads(parsed.rebuild("import torch\nimport gc\na = 1\nc = 3\n"))
    assert [cell["source"] for cell in result["cells"]] == [["import torch\n", "import gc\n"], ["a = 1\n"], ["c = 3"]]


def test_locate_offset():
    parsed = load(notebook(code("a = 1\n"), markdown("m"), code("bb = 2\ncc = 3\n")))
    offset = parsed.source.index("cc")
    assert parsed.locate_offset(offset + 1) == (3, 2, 2)


def test_automagic_and_future_imports_and_top_level_await():
    lines = ["cd ..", "ls -l data/", "history = train(", "    model)", "cat = 3", "ls", "from __future__ import annotations"]
    assert mask(lines) == ["pass", "pass", "history = train(", "    model)", "cat = 3", "ls", "pass"]
    text = notebook(code("import asyncio\n"), code("from __future__ import division\nawait client.fetch(\n    1)\n"
                                                  "x = await f()\nasync def g():\n    return await h()\n"))
    parsed = load(text)
    assert parsed.cells[1].masked == ["pass", "_ or  client.fetch(", "    1)", "x = _ or  f()", "async def g():",
                                      "    return await h()"]
    assert lint(text) == []
    assert parsed.rebuild(parsed.source) == text  # masked lines get their original text back


def test_empty_file_is_an_empty_notebook():
    assert lint("") == [] and lint(b"  \n") == []


def test_cell_survives_the_cache_and_reaches_sarif_and_github(cli, tmp_path, lint_calls):
    (tmp_path / "nb.ipynb").write_text(notebook(markdown("# T\n"), code("import torch\n"), code(BUG)))
    first = cli("--format", "json", "-j", "1", ".").json()
    second = cli("--format", "json", "-j", "1", ".").json()
    assert lint_calls == ["nb.ipynb"]  # the second run came from .torchlint_cache
    assert first == second and [row["cell"] for row in second] == [3]
    [result] = cli("--format", "sarif", ".").json()["runs"][0]["results"]
    assert result["properties"] == {"cell": 3} and result["message"]["text"].startswith("cell 3: ")
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "nb.ipynb"
    assert cli("--format", "github", ".").out.startswith("::warning file=nb.ipynb,line=5,col=5,")


def test_rebuild_keeps_crlf_layout_and_bom():
    text = "\ufeff" + notebook(code("a = 1\nb = 2\n"), code("c = 3\n")).replace("\n", "\r\n")
    parsed = load(text.encode("utf-8"))
    assert parsed.rebuild(parsed.source) == text
    rebuilt = parsed.rebuild(parsed.source.replace("b = 2", "b = 22\nbb = 0"))
    assert rebuilt.startswith("\ufeff") and "\n" not in rebuilt.replace("\r\n", "")
    assert json.loads(rebuilt[1:])["cells"][0]["source"] == ["a = 1\n", "b = 22\n", "bb = 0\n"]
    assert rebuilt[1:].replace("b = 22\\n\",\r\n    \"bb = 0", "b = 2") == text[1:]


def test_notebook_from_stdin_and_its_size_limit(cli, tmp_path):
    text = notebook(code("import torch\n"), code(BUG, [{"output_type": "stream", "name": "stdout",
                                                         "text": ["x" * 3000 + "\n"]}]))
    result = cli("--output-format", "full", "--stdin-filename", "nb.ipynb", "--max-file-size", "2K", "-", stdin=text)
    assert result.out.startswith("nb.ipynb:cell 2:5:5: TL101 ")  # 16 times the limit for a notebook
    assert "5 |     losses.append(loss)\n" in result.out
    result = cli("--stdin-filename", "nb.ipynb", "--max-file-size", "200", "-", stdin=text)
    assert "TL000 file too large" in result.out
