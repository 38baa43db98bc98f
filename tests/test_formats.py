"""Output formats: JSON keys, SARIF 2.1.0 structure field by field, GitHub command escaping."""

from __future__ import annotations

import json
import os

import pytest

import torchlint
from cli_support import TOY_RULES, PrintCall, cli, toy_rules, write  # noqa: F401 - fixtures
from torchlint.formatters import github_line, render, sarif, statistics, summary, text_line
from torchlint.violation import Violation

pytestmark = pytest.mark.usefixtures("toy_rules")


def violation(**changes) -> Violation:
    fields = dict(path="src/a.py", line=3, column=5, code="TL901", name="print-call",
                  message="`print(...)` called", end_line=4, end_column=9, help="remove the call")
    fields.update(changes)
    return Violation(**fields)


def test_text_line_and_summary():
    assert text_line(violation()) == "src/a.py:3:5: TL901 `print(...)` called"
    coloured = text_line(violation(), colour=True)
    assert "\033[" in coloured and coloured.replace("\033[1m", "").replace("\033[31m", "").replace(
        "\033[0m", "") == text_line(violation())
    assert summary([violation(), violation(line=9), violation(path="b.py")], 120) == \
        "Found 3 problems in 2 files (120 files checked)."
    assert summary([violation()], 1) == "Found 1 problem in 1 file (1 file checked)."
    assert summary([], 0) == "No problems found (0 files checked)."


def test_json_keys():
    [item] = json.loads(render([violation()], "json", TOY_RULES))
    assert item == {
        "path": "src/a.py", "line": 3, "column": 5, "end_line": 4, "end_column": 9, "code": "TL901",
        "name": "print-call", "message": "`print(...)` called", "fix": None, "help": "remove the call",
    }


def test_statistics_order():
    found = [violation(code="TL902", name="pass-statement"), violation(), violation()]
    assert statistics(found, "text") == "     2  TL901  print-call\n     1  TL902  pass-statement\n"


@pytest.mark.parametrize(("message", "path", "expected"), [
    ("plain", "a.py", "::warning file=a.py,line=3,col=5,endLine=4,endColumn=9,title=TL901::plain"),
    ("100% sure\r\nnext: a, b", "a.py",
     "::warning file=a.py,line=3,col=5,endLine=4,endColumn=9,title=TL901::100%25 sure%0D%0Anext: a, b"),
    ("m", "dir,with:odd%name\n.py", "::warning file=dir%2Cwith%3Aodd%25name%0A.py,line=3,col=5,"
     "endLine=4,endColumn=9,title=TL901::m"),
])
def test_github_escaping(message, path, expected):
    assert github_line(violation(message=message, path=path)) == expected


def test_github_invalid_file_is_an_error():
    line = github_line(violation(code="TL000", name="invalid-file", message="syntax error"))
    assert line.startswith("::error file=src/a.py,")
    assert line.endswith(",title=TL000::syntax error")


def test_sarif_structure(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    found = [
        violation(path=os.path.join("src", "my model.py")),
        violation(path="broken.py", code="TL000", name="invalid-file", message="syntax error",
                  line=2, column=1, end_line=2, end_column=1),
    ]
    log = json.loads(render(found, "sarif", TOY_RULES))
    assert set(log) == {"$schema", "version", "runs"}
    assert log["version"] == "2.1.0"
    assert log["$schema"].startswith("https://") and "sarif" in log["$schema"] and "2.1.0" in log["$schema"]
    [run] = log["runs"]
    assert run["columnKind"] == "unicodeCodePoints"
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.as_uri() + "/"

    driver = run["tool"]["driver"]
    assert driver["name"] == "torchlint"
    assert driver["version"] == torchlint.__version__
    assert "informationUri" not in driver  # unpublished: no page to point at, never a package index
    rules = driver["rules"]
    assert [rule["id"] for rule in rules] == ["TL000", "TL901", "TL902", "TL903"]
    descriptor = rules[1]
    assert descriptor["name"] == "print-call"
    assert descriptor["shortDescription"] == {"text": PrintCall.summary()}
    assert descriptor["fullDescription"]["text"].startswith("Flags `print(...)` used as a statement.")
    assert set(descriptor["help"]) == {"text", "markdown"}
    assert "## Why is this bad?" in descriptor["help"]["markdown"]
    assert "```python\nprint(1)  # expect: TL901\n```" in descriptor["help"]["markdown"]
    assert descriptor["defaultConfiguration"] == {"level": "warning", "enabled": True}
    assert rules[2]["defaultConfiguration"] == {"level": "warning", "enabled": False}
    assert descriptor["properties"]["enabledByDefault"] is True
    assert descriptor["properties"]["claim"] == "nothing at all"
    for rule in rules:
        assert isinstance(rule["shortDescription"]["text"], str) and rule["shortDescription"]["text"]

    first, second = run["results"]
    assert first == {
        "ruleId": "TL901",
        "ruleIndex": 1,
        "level": "warning",
        "message": {"text": "`print(...)` called"},
        "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": "src/my%20model.py", "uriBaseId": "%SRCROOT%"},
            "region": {"startLine": 3, "startColumn": 5, "endLine": 4, "endColumn": 9},
        }}],
    }
    assert (second["ruleId"], second["ruleIndex"], second["level"]) == ("TL000", 0, "error")
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]


def test_sarif_path_outside_the_working_directory(tmp_path, monkeypatch):
    inside = tmp_path / "inside"
    inside.mkdir()
    monkeypatch.chdir(inside)
    outside = str(tmp_path / "elsewhere" / "a.py")
    [result] = sarif([violation(path=outside)], TOY_RULES)["runs"][0]["results"]
    location = result["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": (tmp_path / "elsewhere" / "a.py").as_uri()}


def test_sarif_from_the_cli_is_complete_without_findings(cli, tmp_path):
    write(tmp_path, "a.py", "x = 1\n")
    result = cli("--format", "sarif", "a.py")
    assert result.code == 0
    run = json.loads(result.out)["runs"][0]
    assert run["results"] == []
    assert len(run["tool"]["driver"]["rules"]) == 1 + len(TOY_RULES)
