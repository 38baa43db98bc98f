"""The lint path's shortcuts (issue 8, speed) give the answers of the long way round."""

from __future__ import annotations

import gc
import weakref

import pytest

from torchlint import engine, positions
from torchlint.analysis import Analysis
from torchlint.analysis.syntax import collect_nodes, iter_expression_nodes
from torchlint.lazy import cst
from torchlint.rules import all_rules, default_rules

FINDING = """\
import torch


def train(model, loader):
    losses = []
    for x in loader:
        loss = model(x)
        loss.backward()
        losses.append(loss)
"""


def lint(text: str, rules=None, path: str = "train.py") -> list[tuple[int, str, str]]:
    return [(v.line, v.code, v.message) for v in engine.lint_source(text, path, rules or default_rules())]


# The full compile runs only for files whose text may hold a refusal the analysis does not see
# (_RARE_COMPILE_ERRORS): these are spelled the ways that prefilter must still catch.
@pytest.mark.parametrize("body, message", [
    ("def g():\n    x = 1\n    if x: global x\n", "name 'x' is used prior to global declaration"),
    ("def g():\n    x = 1; global x\n", "name 'x' is assigned to before global declaration"),
    ("def g():\n    x = 1\n    \\\nglobal x\n", "name 'x' is assigned to before global declaration"),
    ("def g():\n    return [a async for a in b]\n", "asynchronous comprehension outside of an asynchronous function"),
    ("def g():\n    async  with a:\n        pass\n", "'async with' outside async function"),
    ("__debug__ = 1\n", "cannot assign to __debug__"),
])
def test_rare_compile_errors_still_reach_the_compiler(body, message):
    assert [(code, text) for _, code, text in lint(FINDING + body)] == [("TL000", f"syntax error: {message}")]


@pytest.mark.parametrize("comment", ["# global average pooling", "# async copy to the device", "# nonlocal means"])
def test_the_words_in_comments_change_nothing(comment):
    assert [code for _, code, _ in lint(comment + "\n" + FINDING)] == ["TL101"]


@pytest.mark.parametrize("text", [
    "global x", " global x", "a;global x", "a: \\\n global x", "xglobal y", "globalx = 1", "# global pooling",
    "x = 1  # global", "if a: nonlocal b", "\rglobal", "f(\n  global_pool)", "a =\\\nglobal", "q global",
    "a:  \t\fglobal\n", "global", "nonlocal\u00e9", "x = 1\n    global y", "async  with a:", "async\\\nfor",
    "asynchronous with", "await", "awaited", "__debug__", "x__debug__", "s = 'global'", "a:\n\n  global",
])
def test_the_rare_refusal_test_answers_as_its_regex(text):
    for variant in (text, "import torch\n" + text, text + "\nx = 1"):
        assert engine._may_refuse_rarely(variant) == bool(engine._RARE_COMPILE_ERRORS.search(variant)), variant


def test_the_collector_is_running_again_after_a_lint_and_a_caller_pause_is_kept():
    assert gc.isenabled()
    lint(FINDING)
    assert gc.isenabled()
    gc.disable()
    try:
        lint(FINDING)
        assert not gc.isenabled()  # the caller paused it: not ours to switch back on
    finally:
        gc.enable()


def test_a_linted_files_analysis_is_freed_without_the_collector(monkeypatch):
    made = []
    original = Analysis.__init__

    def recording(self, *args, **kwargs):
        original(self, *args, **kwargs)
        made.append(weakref.ref(self))

    monkeypatch.setattr(Analysis, "__init__", recording)
    gc.disable()
    try:
        assert [code for _, code, _ in lint(FINDING)] == ["TL101"]
        assert made and all(ref() is None or not ref().__dict__ for ref in made)
    finally:
        gc.enable()


def test_a_fixable_finding_is_positioned_without_the_full_provider(monkeypatch):
    def refuse(self):
        raise AssertionError("the full PositionProvider ran")

    monkeypatch.setattr(positions.Positions, "_full", refuse)
    text = FINDING.replace("    for x in loader:\n", "    model.eval()\n    for x in loader:\n").replace(
        "        loss.backward()\n        losses.append(loss)\n", "        losses.append(loss.item())\n")
    found = engine.lint_source(text, "evaluate.py", all_rules())
    fixed = [v for v in found if v.fix is not None]
    assert fixed, [(v.line, v.code, v.message) for v in found]


SNIPPETS = [
    "f(g(x), key=h(y))[i](z)\n",
    "y = [a(b) for b in c(d)] + {k: v(k) for k in w()}\n",
    "z = lambda q: inner(q)\nouter(lambda: hidden())\n",
    "x: Annotated[int, meta()] = value(1, 'two', 3.0, 4j, ...)\n",
    "print(f'{fmt(a)!r:>{width()}}')\n",
]


@pytest.mark.parametrize("source", SNIPPETS)
def test_collect_nodes_finds_what_the_plain_walk_finds(source):
    module = cst.parse_module(source)
    for statement in module.body:
        for wanted in (cst.Call, cst.Name, cst.SimpleString):
            expected = [node for node in iter_expression_nodes(statement) if type(node) is wanted]
            assert collect_nodes(statement, wanted, []) == expected


def test_a_parse_skips_node_validation_and_puts_it_back(monkeypatch):
    from torchlint import node_init

    validated = []
    checked = cst.CSTNode.__dict__["__post_init__"]
    monkeypatch.setattr(cst.CSTNode, "__post_init__", lambda node: validated.append(node))
    module = engine.parse("x = (1)\nwith open(p) as f:\n    y = f.read()\n")
    assert module.code.startswith("x = (1)") and validated == []
    assert node_init.validation.on
    monkeypatch.setattr(cst.CSTNode, "__post_init__", checked)
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")  # hand-built nodes are checked again after the parse


def test_a_parse_that_fails_puts_validation_back():
    from torchlint import node_init

    with pytest.raises(engine.SourceError):
        engine.parse("def f(:\n")
    assert node_init.validation.on
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")


def test_valid_code_libcsts_validation_would_refuse_is_linted():
    # LibCST issue 1061: the check raises TypeError on this valid line; the parse alone is fine
    found = lint("value = () if 0 else(lambda:())\n" + FINDING)
    assert [code for _, code, _ in found] == ["TL101"]


def test_the_faster_node_inits_take_what_the_dataclass_ones_take():
    import inspect

    from torchlint import node_init

    node_init.install()
    assert len(node_init.ORIGINAL_INITS) > 300  # every libcst node class
    for cls, original in node_init.ORIGINAL_INITS.items():
        fast, slow = inspect.signature(cls.__dict__["__init__"]), inspect.signature(original)
        assert list(fast.parameters) == list(slow.parameters), cls
        for name, parameter in slow.parameters.items():
            default = fast.parameters[name].default
            assert default is parameter.default, (cls, name)  # the default factory's sentinel too


@pytest.mark.parametrize("source", SNIPPETS + [FINDING, "@dec\nclass A(B, metaclass=M):\n    x: int = 1\n",
                                               "match p:\n    case [1, *rest] if rest:\n        pass\n"])
def test_trees_built_with_the_faster_inits_equal_the_dataclass_ones(source):
    from torchlint import node_init

    node_init.install()
    def build():  # parsed, and hand-built: positional, keyword, defaults and default factories
        return [cst.parse_module(source), cst.Attribute(cst.Name("a"), cst.Name("b")), cst.Comma(),
                cst.Arg(value=cst.Integer("1"), keyword=cst.Name("k")), cst.Param(cst.Name("p"))]

    fast = {cls: cls.__dict__["__init__"] for cls in node_init.ORIGINAL_INITS}
    try:
        for cls, original in node_init.ORIGINAL_INITS.items():
            cls.__init__ = original
        expected = build()
    finally:
        for cls, init in fast.items():
            cls.__init__ = init
    built = build()
    assert built[0].code == source
    assert all(node.deep_equals(other) for node, other in zip(built, expected))
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")


@pytest.mark.parametrize("head", ["", '"""A one-line docstring."""\n', "x = '''one line'''  # (x)\n"])
def test_a_one_line_triple_quoted_string_does_not_hide_the_code_after_it(head):
    # the cheap nesting bound once went on scanning inside such a string, took its closing
    # quotes for an opening, and let the rest of the file through unmeasured
    deep = head + "import torch\nx = " + " + ".join(["a"] * 1100) + "\n"
    assert not engine._elements_shallow(deep)
    assert [v.message for v in engine.lint_source(deep, "a.py", default_rules())] == [
        "too deeply nested for the parser (nesting depth 1100 > 1000)"]
    assert engine._elements_shallow(head + "import torch\nx = [\n" + "    (1, 2),\n" * 600 + "]\n")
