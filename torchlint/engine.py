"""Lint one source text: decode, prefilter, parse once, analyse once, run every rule, position.

Everything that touches libcst goes through ``torchlint.lazy.cst`` so that importing this module
is cheap; libcst is imported the first time a file actually has to be parsed.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import io
import os
import queue
import re
import sys
import threading
import tokenize
import warnings
from collections.abc import Sequence
from functools import lru_cache

from torchlint import node_init
from torchlint.lazy import cst
from torchlint.rule import Report, Rule
from torchlint.violation import INVALID_FILE_CODE, INVALID_FILE_NAME, Violation

UNUSED_NOQA_CODE = "TL001"  # computed here from the other rules' findings (torchlint.fix_noqa)
SKIP_FILE_RE = re.compile(r"#\s*torchlint\s*:\s*skip-file\b", re.I)
# flake8's noqa grammar: "# noqa" alone suppresses everything on the line, "# noqa: A1, B2"
# suppresses the listed codes (and codes they prefix).
NOQA_RE = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]*(?:[,\s]+[A-Z]+[0-9]*)*))?", re.I)


class SourceError(Exception):
    """A file that cannot be read, decoded or parsed."""

    def __init__(self, reason: str, line: int = 1, column: int = 1) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line
        self.column = column


# Codecs that packages register at start-up to rewrite UTF-8 source (backports of f-strings and
# annotations, pyxl's inline HTML); an unknown encoding otherwise (a typo) stays TL000.
_SOURCE_REWRITING_CODEC = re.compile(r"unknown encoding(?: for [^:]*)?: (?:future[-_]\w+|pyxl|interpy)\b")


def decode_source(data: bytes) -> str:
    """Decode as the interpreter does: BOM, PEP 263 coding cookie, else UTF-8."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        # A cookie naming a codec a package registers at import (`future_fstrings`, `pyxl`):
        # such codecs rewrite UTF-8 source, so the UTF-8 text is what to lint.
        if not _SOURCE_REWRITING_CODEC.search(str(error)):
            raise SourceError(f"cannot decode: {error}") from None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise SourceError(f"cannot decode: {error}") from None
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as error:
        line = data[: getattr(error, "start", 0)].count(b"\n") + 1
        raise SourceError(f"cannot decode as {encoding}: {error.reason if hasattr(error, 'reason') else error}", line) from None
    return text[1:] if text.startswith("\ufeff") else text


def invalid_file(path: str, reason: str, line: int = 1, column: int = 1) -> Violation:
    return Violation(
        path=path, line=line, column=column, code=INVALID_FILE_CODE, name=INVALID_FILE_NAME,
        message=reason, end_line=line, end_column=column,
    )


@lru_cache(maxsize=64)
def needed_tokens(rules: tuple[type[Rule], ...]) -> tuple[str, ...]:
    return tuple(sorted({token for rule in rules for token in rule.TOKENS}))


def may_match(text: str, rules: Sequence[type[Rule]]) -> bool:
    """Cheap substring prefilter: can any enabled rule possibly match this text?"""
    return any(token in text for token in needed_tokens(tuple(rules)))


# Other deep-learning frameworks: a file importing one and never mentioning torch is not
# PyTorch code.
OTHER_FRAMEWORKS = frozenset({
    "mxnet", "tensorflow", "keras", "jax", "flax", "haiku", "paddle", "mindspore", "chainer",
    "oneflow", "megengine", "theano", "cntk", "caffe", "dynet", "gluonnlp", "gluoncv", "tf_keras",
})
IMPORTED_ROOT_RE = re.compile(r"^[ \t]*(?:from[ \t]+([A-Za-z_]\w*)|import[ \t]+([A-Za-z_]\w*))", re.M)


def may_use_pytorch(text: str) -> bool:
    """False for a file that cannot be PyTorch code: it never mentions torch and imports
    another deep-learning framework (MXNet, TensorFlow, JAX ...) instead. Every rule is about
    PyTorch, so such a file is only syntax-checked."""
    if "torch" in text:
        return True
    return not any(
        (match.group(1) or match.group(2)) in OTHER_FRAMEWORKS for match in IMPORTED_ROOT_RE.finditer(text)
    )


# libcst's native parser recurses once per nesting level on the C stack, and its parse time grows
# quadratically with the length of an operator chain: 7,000 `+` terms crash it (a segmentation
# fault, not an exception) on an 8 MiB stack, 1,500 nested brackets too, and 3,000 chained
# method calls take 15 s. A file nested deeper than MAX_NESTING (measured from its tokens, see
# nesting_depth) is reported as TL000 and never reaches libcst. Ordinary deep code is far below
# it: a 300-term chain measures 300, 500 `elif` branches 503.
MAX_NESTING = 1000
MAX_BRACKETS = 200  # CPython's tokenizer refuses deeper bracket nesting on every version
# Parsing, analysis and positions run in a thread of their own with this stack and at least this
# recursion limit, so deep but valid code works and every file starts at the same depth whoever
# calls (serial run, worker process, flake8). Measured at MAX_NESTING: every kind of nesting
# lints on an 8 MiB stack (16x margin), and positions need between 2,500 and 5,000 frames (4x).
STACK_SIZE = 128 * 1024 * 1024
RECURSION_LIMIT = 20_000

_NESTING_KEYWORDS = frozenset({
    "and", "or", "not", "lambda", "if", "else", "await", "yield", "in", "is", "for", "async", "from",
})
_NEUTRAL_OPS = frozenset({":", "=", ":=", "->", "+=", "-=", "*=", "/=", "//=", "%=", "@=", "&=", "|=",
                          "^=", ">>=", "<<=", "**=", "!"})
_STATEMENT_CONTINUATIONS = frozenset({"elif", "else", "except", "finally", "case"})


def nesting_depth(text: str) -> int:
    """An upper estimate of how deeply libcst's tree for ``text`` nests, from Python's tokenizer
    (iterative, so safe on any input): every bracket, operator, keyword operator and attribute dot
    adds a level to the expression it is in (each implicitly joined string a third of one), a comma or a new
    statement starts over at the enclosing level, and each indented block and each ``elif`` of
    an ``if`` chain (libcst nests them) adds one to the statements below it. Raises SourceError
    for brackets nested deeper than CPython allows, or for text the tokenizer rejects."""
    deepest = 0
    brackets: list[int] = []  # the level outside each open bracket
    chains: list[int] = [0]  # per indentation level: elif/else clauses so far in its statement
    base = 1
    current = 1
    statement_start = True
    previous_string = False
    joined = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            kind = token.type
            if kind in (tokenize.NL, tokenize.COMMENT):
                continue
            if kind == tokenize.NEWLINE:
                statement_start, previous_string = True, False
                continue
            if kind == tokenize.INDENT:
                chains.append(0)
                continue
            if kind == tokenize.DEDENT:
                if len(chains) > 1:
                    chains.pop()
                continue
            string = token.string
            if statement_start:
                statement_start = False
                if kind == tokenize.NAME and string in _STATEMENT_CONTINUATIONS:
                    chains[-1] += 1
                else:
                    chains[-1] = 0
                base = sum(chains) + 2 * len(chains) - 1
                current = base
            is_string = kind == tokenize.STRING or tokenize.tok_name.get(kind) == "FSTRING_START"
            if kind == tokenize.OP:
                if string in "([{":
                    brackets.append(current)
                    if len(brackets) > MAX_BRACKETS:
                        raise SourceError("syntax error: too many nested parentheses", *token.start)
                    current += 1
                elif string in ")]}":
                    current = brackets.pop() + 1 if brackets else current
                elif string == ",":
                    current = brackets[-1] + 1 if brackets else base
                elif string == ";" and not brackets:
                    statement_start = True
                elif string not in _NEUTRAL_OPS:
                    current += 1
            elif kind == tokenize.NAME and string in _NESTING_KEYWORDS:
                current += 1
            elif is_string and previous_string:
                # libcst nests joined strings cheaply: parsed fast up to about 3,000, where its
                # parser stops with an error of its own (measured), so each counts a third
                joined += 1
                if joined % 3 == 0:
                    current += 1
            previous_string = is_string or (previous_string and tokenize.tok_name.get(kind, "").startswith("FSTRING"))
            if current > deepest:
                deepest = current
    except (tokenize.TokenError, SyntaxError) as error:
        message = error.args[0] if error.args else "invalid syntax"
        position = getattr(error, "lineno", None) or (error.args[1][0] if len(error.args) > 1 else 1)
        raise SourceError(f"syntax error: {message}", position or 1) from None
    return deepest


def _surely_shallow(text: str) -> bool:
    """A cheap sufficient condition for ``nesting_depth(text) <= MAX_NESTING``, with string
    methods only (the tokenizer is a third of the lint time of an ordinary file). Every token
    of a statement takes at least one character, so a statement's own nesting is bounded by its
    length; blocks and ``elif`` chains add at most two levels per indentation character and one
    per ``elif``. A statement is a run of lines with brackets open or a trailing backslash;
    brackets inside strings and comments only make runs look longer (a closing one that never
    opened gives up)."""
    budget = MAX_NESTING - text.count("elif")
    longest = balance = 0
    run = 0
    for line in text.split("\n"):
        length = len(line)
        indent = length - len(line.lstrip())
        opening = line.count("(") + line.count("[") + line.count("{")
        if balance + opening > MAX_BRACKETS:
            return False  # maybe nested deeper than CPython allows: the tokenizer judges
        balance += opening - line.count(")") - line.count("]") - line.count("}")
        if balance < 0:
            return False  # unbalanced (brackets in strings): the tokenizer judges
        run += length
        if run + 2 * indent > longest:
            longest = run + 2 * indent
            if longest >= budget:
                return False
        if balance == 0 and not line.rstrip().endswith("\\"):
            run = 0
    return True


# What _elements_shallow scans for: a triple quote, a one-line string, a bracket, a comma, a comment.
_SHALLOW_SCAN = re.compile(
    "'''" + '|"""|' + r"""'(?:[^'\\\n]|\\.)*'""" + '|' + r'"(?:[^"\\\n]|\\.)*"' + r'|[()\[\]{},#]'
)


def _elements_shallow(text: str) -> bool:
    """The same bound as ``_surely_shallow``, per element: a comma starts a new element of its
    bracket (or tuple), which the tokenizer estimate also starts over at, so the characters that
    bound the nesting at a point are those of the unfinished elements around it. A string is
    one token (at most one level), however long; a triple-quoted one is followed to its end. For the
    long literals of configuration tables, where ``_surely_shallow`` gives up."""
    budget = MAX_NESTING - text.count("elif")
    open_elements: list[int] = []  # characters of the unfinished element outside each bracket
    outside = 0  # their sum
    current = 0  # characters of the innermost unfinished element
    indent = 0
    triple = None  # the closing quote of a triple-quoted string being skipped
    starting = True
    for line in text.split("\n"):
        position = 0
        if triple is not None:  # inside a triple-quoted string: one token, already counted
            end = line.find(triple)
            if end < 0:
                continue
            position, triple = end + 3, None
        elif starting:
            indent = len(line) - len(line.lstrip())
        while True:  # (a search from `position` each time: a one-line triple-quoted string moves it)
            match = _SHALLOW_SCAN.search(line, position)
            if match is None:
                break
            token = match.group()
            current += match.start() - position
            position = match.end()
            if token == "#":
                position = len(line)
                break
            if token in ("'''", '"""'):
                current += 1
                end = line.find(token, position)
                if end < 0:
                    triple = token
                    position = len(line)
                    break
                position = end + 3
            elif token in "([{":
                if len(open_elements) >= MAX_BRACKETS:
                    return False
                open_elements.append(current + 1)
                outside += current + 1
                current = 0
            elif token in ")]}":
                if not open_elements:
                    return False  # unbalanced: let the tokenizer judge
                closed = open_elements.pop()
                outside -= closed
                current += closed
            elif token == ",":
                current = 0
            else:
                current += 1  # a string is one token, however long
            if outside + current + 2 * indent >= budget:
                return False
        current += len(line) - position
        if outside + current + 2 * indent >= budget:
            return False
        starting = triple is None and not open_elements and not line.rstrip().endswith("\\")
        if starting:
            current = 0
    return True


def _check_nesting(text: str) -> None:
    if _surely_shallow(text) or _elements_shallow(text):
        return
    depth = nesting_depth(text)
    if depth > MAX_NESTING:
        raise SourceError(f"too deeply nested for the parser (nesting depth {depth} > {MAX_NESTING})")


_validation_lock = threading.Lock()
_unvalidated_parses = 0


@contextlib.contextmanager
def _unvalidated_nodes():
    """libcst nodes built meanwhile skip their ``_validate`` check (``CSTNode.__post_init__``,
    which the ``__init__`` of ``torchlint.node_init`` calls only while ``validation.on``).
    The check guards hand-built trees against impossible shapes; a tree the parser builds from
    source has the shape of that source, yet checking its every node cost a sixth of the parse
    (measured on timm). libcst's own comment there proposes the same. Counted, so that parses on
    several threads restore the check only when the last one ends; nodes built on another thread
    meanwhile go unchecked too, which only ever skips an exception."""
    global _unvalidated_parses
    with _validation_lock:
        if _unvalidated_parses == 0:
            node_init.validation.on = False
        _unvalidated_parses += 1
    try:
        yield
    finally:
        with _validation_lock:
            _unvalidated_parses -= 1
            if _unvalidated_parses == 0:
                node_init.validation.on = True


def parse(text: str, nesting_checked: bool = False):
    """libcst's tree of ``text``, guarded against input that would crash libcst's native parser;
    every failure is a SourceError."""
    if not nesting_checked:
        _check_nesting(text)
    node_init.install()
    try:
        with _unvalidated_nodes():
            return cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        raise _syntax_error(text, error) from None
    except (RecursionError, MemoryError):
        raise SourceError("file too deeply nested to parse") from None


def _syntax_error(text: str, libcst_error) -> SourceError:
    """Python's own message and position when the interpreter agrees the file is invalid (libcst
    sometimes points a line past the error); libcst's when only libcst rejects it."""
    try:
        compile(text, "<file>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:
        return SourceError(f"syntax error: {error.msg}", error.lineno or 1, error.offset or 1)
    except (ValueError, RecursionError, MemoryError):
        pass
    message = str(libcst_error.message).strip().splitlines()[0] if libcst_error.message else "invalid syntax"
    return SourceError(f"syntax error: {message}", libcst_error.raw_line, libcst_error.raw_column + 1)


def compile_check(text: str, path: str) -> bool:
    """Compile ``text`` as the interpreter would import it, without running anything (compile
    only builds a code object). Raise SourceError with CPython's message for an error beyond the
    grammar (``return`` outside a function, ``nonlocal`` at module level, a duplicate argument,
    too many nested parentheses ...). Return False when the running interpreter's grammar
    rejects the text, which may be valid syntax of a newer Python: libcst decides then."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escape sequences and the like are not errors
        try:
            compile(text, path, "exec", dont_inherit=True)
            return True
        except SyntaxError as error:
            failure = error
        except (RecursionError, MemoryError):
            raise SourceError("too deeply nested for the interpreter's compiler") from None
        except ValueError as error:  # null bytes
            raise SourceError(f"syntax error: {error}") from None
        try:
            compile(text, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            if not _is_limit(failure):
                return False
    raise SourceError(f"syntax error: {failure.msg}", failure.lineno or 1, failure.offset or 1)


# Words of the compile-time refusals _compile_time_error does not read off the analysis
# (`await` outside an async function, `global` after use, `nonlocal` without a binding ...):
# files containing them, few in PyTorch code, get the full compile. `global` / `nonlocal` only
# where a statement can start (a line's start, after `;` or a header's `:`, or a continuation),
# `async` only before `def` / `for` / `with`: as words of comments ("global average pooling")
# they sent a file in thirteen to the compiler for nothing.
_RARE_COMPILE_ERRORS = re.compile(
    r"\bawait\b|\basync\b[\s\\]+(?:def|for|with)\b|(?:^|[;:\r])[ \t\f\\\r\n]*(?:global|nonlocal)\b|\b__debug__\b",
    re.M,
)


_RARE_WORDS_RE = re.compile(r"\bawait\b|\basync\b[\s\\]+(?:def|for|with)\b|\b__debug__\b")
_STATEMENT_BLANKS = frozenset(" \t\f\\\r\n")
_WORD_CHARACTER_RE = re.compile(r"\w")


def _may_refuse_rarely(text: str) -> bool:
    """``_RARE_COMPILE_ERRORS.search(text)``, in a twentieth of the time: that regex tries its
    statement-start alternative at every position of the file (a twenty-fifth of the lint time
    of corpus A); here ``global`` / ``nonlocal`` are found as substrings and only their
    surroundings are read, and the other words are searched for only in files containing them."""
    if ("await" in text or "async" in text or "__debug__" in text) and _RARE_WORDS_RE.search(text):
        return True
    for word in ("global", "nonlocal"):
        start = text.find(word)
        while start >= 0:
            end = start + len(word)
            if end == len(text) or not _WORD_CHARACTER_RE.match(text, end):
                before = start  # back over the blanks, line breaks and backslashes before it
                while before and text[before - 1] in _STATEMENT_BLANKS:
                    if text[before - 1] in "\r\n":
                        return True  # a line start (the regex's ^ or \r) among them
                    before -= 1
                if before == 0 or text[before - 1] in ";:":
                    return True
            start = text.find(word, end)
    return False


def _compile_time_error(analysis) -> str | None:
    """What the interpreter's compiler refuses beyond the grammar, read off the analysis of a
    parsed file (a full compile of every file would cost a sixth of the parse): ``return`` /
    ``yield`` / ``await`` outside a function, ``break`` / ``continue`` outside a loop,
    ``nonlocal`` at module level, a duplicate argument, a late ``from __future__`` import. Files
    the prefilter skips get the full compile instead (``check_syntax``)."""
    by_type = analysis.statements_by_type
    for kind, message in (("Return", "'return' outside function"), ("Break", "'break' outside loop"),
                          ("Continue", "'continue' not properly in loop")):
        for stmt, ctx in by_type.get(kind, ()):
            if kind == "Return" and ctx.scope.kind != "function":
                return message
            if kind != "Return" and not ctx.visible_loops:
                return message
    for stmt, ctx in by_type.get("Nonlocal", ()):
        if ctx.scope.kind == "module":
            return "nonlocal declaration not allowed at module level"
    for stmt, ctx in by_type.get("FunctionDef", ()):
        params = stmt.params
        names = [param.name.value for param in (*params.posonly_params, *params.params, *params.kwonly_params)]
        names += [param.name.value for param in (params.star_arg, params.star_kwarg) if isinstance(param, cst.Param)]
        duplicate = next((name for index, name in enumerate(names) if name in names[:index]), None)
        if duplicate is not None:
            return f"duplicate argument '{duplicate}' in function definition"
    from torchlint.analysis.syntax import dotted_name, iter_expression_nodes

    source = analysis.source or ""
    if "yield" in source or "await" in source:
        for kind in ("Expr", "Assign", "AugAssign", "AnnAssign"):
            for stmt, ctx in by_type.get(kind, ()):
                if ctx.scope.kind == "function":
                    continue
                for node in iter_expression_nodes(stmt):
                    if type(node) in (cst.Yield, cst.Await):
                        return f"'{'yield' if type(node) is cst.Yield else 'await'}' outside function"
    if "__future__" in source:
        seen_other = False
        for index, line in enumerate(analysis.module.body):
            small = line.body if type(line) is cst.SimpleStatementLine else []
            if small and type(small[0]) is cst.ImportFrom and dotted_name(small[0].module) == "__future__":
                if seen_other:
                    return "from __future__ imports must occur at the beginning of the file"
                continue
            docstring = index == 0 and small and type(small[0]) is cst.Expr and type(small[0].value) in (
                cst.SimpleString, cst.ConcatenatedString)
            if not docstring:
                seen_other = True
    return None


def _is_limit(error: SyntaxError) -> bool:
    """The interpreter's size limits hold on every Python version, unlike its grammar."""
    return str(error.msg).startswith(("too many nested parentheses", "too many levels of indentation",
                                      "too many statically nested blocks"))


def check_syntax(text: str, path: str = "<file>") -> None:
    """Raise SourceError for a file the prefilter lets skip, exactly as parsing it would: the
    interpreter's compiler first (cheap), libcst only when its grammar rejects the file (which
    may be valid syntax of a newer Python than the running one)."""
    if compile_check(text, path):
        return
    parse(text)


def lint_source(
    source: str | bytes,
    path: str,
    rules: Sequence[type[Rule]],
    options: dict | None = None,
    prefilter: bool = True,
    noqa: bool = True,
    skip_file: bool = True,
    notebook: bool | None = None,
) -> list[Violation]:
    """All findings of ``rules`` in one file's source, sorted, ``# noqa`` applied (unless
    ``noqa`` is false: flake8 applies it itself), a file with ``# torchlint: skip-file`` skipped
    (unless ``skip_file`` is false). Never raises: whatever goes wrong with the file
    is one TL000 finding for it. Parsing, analysis and positions run in a thread with a large
    stack and a fixed recursion limit, so deep code neither crashes the process nor depends on
    how deep the caller's stack already is. A ``.ipynb`` path (or ``notebook=True``) is read as a
    Jupyter notebook: its code cells are linted together and each finding names its cell."""
    if path.lower().endswith(".ipynb") if notebook is None else notebook:
        from torchlint.notebook import lint_notebook

        return lint_notebook(source, path, lambda text: lint_source(
            text, path, rules, options, prefilter, noqa, skip_file, notebook=False))
    try:
        try:
            text = decode_source(source) if isinstance(source, bytes) else source
        except SourceError as error:
            return [invalid_file(path, error.reason, error.line, error.column)]
        if skip_file and _skips_file(text):
            return []
        if not rules:
            return []
        checking = tuple(rule for rule in rules if rule.CODE != UNUSED_NOQA_CODE)
        unused_noqa = noqa and len(checking) < len(rules)
        judged = checking
        if unused_noqa:  # TL001 judges every TL code its comments name, selected or not
            from torchlint.fix_noqa import rules_named_in_noqa

            judged = checking + rules_named_in_noqa(text, checking)
        violations = _run_deep(_lint_text, text, path, judged, options, prefilter) if judged else []
        if len(judged) > len(checking):
            selected = {rule.CODE for rule in checking}
            reported = [v for v in violations if v.code in selected or (
                v.code == INVALID_FILE_CODE and not v.message.startswith("internal error in TL"))]
        else:
            reported = violations
        kept = _without_noqa(reported, text) if noqa else reported
        if unused_noqa:  # from the findings before noqa was applied
            from torchlint.fix_noqa import unused_noqa as find_unused

            kept = kept + _without_noqa(find_unused(text, path, violations, judged), text)
        return sorted(kept)
    except Exception as error:  # never a traceback: the file gets a TL000 instead
        return [invalid_file(path, f"internal error: {_describe(error)}")]


def _describe(error: BaseException) -> str:
    """``Type: message``, even for an exception whose str() itself fails (deep recursion)."""
    try:
        text = str(error)
    except Exception:
        text = ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _lint_text(text: str, path: str, rules: tuple[type[Rule], ...], options: dict | None,
               prefilter: bool, reuse_tree=True) -> list[Violation]:
    """The findings of ``rules`` in ``text``. The project index may already hold the file's tree
    (another file linted earlier imports it; corpus A: half of the index's modules): the file
    is then linted on that tree, not parsed again. Its nodes are then the index analysis's
    nodes too, so when anything read while linting came from an analysis of this very file
    (an import cycle back to it: the file is among the modules consulted), the file is linted
    again on a tree of its own, and that lint answers. ``reuse_tree``: True to look for the
    index's tree, False to parse, or the tree to lint."""
    if reuse_tree is True and path and not path.startswith("<"):
        from torchlint.analysis.project import project

        index = project()
        module = index.indexed_tree(path, text)
        if module is not None:
            earlier, index.consulted = index.consulted, {}  # to see what this lint reads
            try:
                found = _lint_text(text, path, rules, options, prefilter, reuse_tree=module)
                itself = index.consulted_itself(path)
            finally:
                index.consulted = {**earlier, **index.consulted}
            return found if not itself else _lint_text(text, path, rules, options, prefilter, reuse_tree=False)
    try:
        if (prefilter and not may_match(text, rules)) or not may_use_pytorch(text):
            # No rule can match, but an unparseable file is still reported (TL000), the same as
            # without the prefilter.
            check_syntax(text, path)
            return []
        if type(reuse_tree) is bool:
            _check_nesting(text)
            module = parse(text, nesting_checked=True)
        else:  # the index's tree of this text: its parse passed both
            module = reuse_tree
    except SourceError as error:
        return [invalid_file(path, error.reason, error.line, error.column)]
    except RecursionError:
        return [invalid_file(path, "file too deeply nested to parse")]

    from torchlint.analysis import Analysis

    reports: list[Report] = []
    failures: list[Violation] = []
    try:
        analysis = Analysis(module, path, text)
    except RecursionError:
        return [invalid_file(path, "file too deeply nested to analyse")]
    except Exception as error:  # an analysis bug must not take down the run
        return [invalid_file(path, f"internal error while analysing: {_describe(error)}")]
    try:
        refused = _compile_time_error(analysis)
        if refused is None and _may_refuse_rarely(text):
            try:  # the rarer refusals (async code, global / nonlocal misuse): the full compile decides
                compile_check(text, path)
            except SourceError as error:
                return [invalid_file(path, error.reason, error.line, error.column)]
        if refused is not None:
            # CPython's own message and position (the full compile runs only for such files)
            try:
                compile_check(text, path)
            except SourceError as error:
                return [invalid_file(path, error.reason, error.line, error.column)]
            return [invalid_file(path, f"syntax error: {refused}")]
        for rule_class in rules:
            before = len(reports)
            try:
                rule = rule_class(analysis, reports, options)
                analysis.run(rule)
            except Exception as error:  # one rule failing on one file is reported, not fatal
                del reports[before:]
                failures.append(invalid_file(path, f"internal error in {rule_class.CODE}: {_describe(error)}"))
        try:
            positioned = _position(reports, module, path, text)
        except RecursionError:
            return failures + [invalid_file(path, "file too deeply nested to compute positions")]
        except Exception as error:
            return failures + [invalid_file(path, f"internal error while computing positions: {_describe(error)}")]
        return failures + positioned
    finally:
        _release(analysis)


def _release(analysis) -> None:
    """Break the reference cycles of a linted file's analysis (scopes, loops, contexts and
    bindings point at each other), so that refcounting frees it and its tree as soon as the
    file is done. The cyclic collector would find them too, but only by traversing every node
    of the tree: a tenth of the lint time. Only this file's own analysis is released; the
    project index's analyses of other modules never point into it (their answers are about
    their own scopes)."""
    from torchlint.analysis.scopes import Loop, Scope

    for scope in (analysis.module_scope, *analysis.scopes.values()):
        for name in Scope.__slots__:
            with contextlib.suppress(AttributeError):
                delattr(scope, name)
    for loop in analysis.loops.values():
        for name in Loop.__slots__:
            with contextlib.suppress(AttributeError):
                delattr(loop, name)
    analysis.__dict__.clear()


_limit_lock = threading.Lock()
_deep_runs = 0
_saved_limit = 0


def _run_deep(function, *args):
    """``function(*args)`` on the lint thread (one per process, with a STACK_SIZE stack, started
    once: creating a thread with a stack that large costs milliseconds) with the recursion limit
    at least RECURSION_LIMIT (restored when the last such call ends); its exception is re-raised.

    The cyclic garbage collector is paused for the call. A parse allocates millions of objects
    that all live until the file is done, and the collector, triggered every 700 allocations,
    traverses them again and again as it promotes them, the more so as the project index keeps
    other modules' trees alive: on timm that was a fifth of the lint time. Paused, the file's
    objects stay in the youngest generation, and the first collection after the call (at the
    next allocations) examines each of them once and frees the file's cycles (its analysis)."""
    global _deep_runs, _saved_limit
    with _limit_lock:
        if _deep_runs == 0:
            _saved_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_saved_limit, RECURSION_LIMIT))
        _deep_runs += 1
    collecting = gc.isenabled()  # a caller that paused it itself (a nested call) keeps it paused
    if collecting:
        gc.disable()
    try:
        return _lint_thread().run(function, args)
    finally:
        if collecting:
            gc.enable()
        _leave_deep()


class _LintThread:
    """A daemon thread with a large stack that runs one call at a time for its callers."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.requests: queue.SimpleQueue = queue.SimpleQueue()
        self.lock = threading.Lock()  # one call at a time: callers from several threads queue here
        try:
            previous = threading.stack_size(STACK_SIZE)
        except (ValueError, RuntimeError):  # a platform that cannot size thread stacks
            previous = None
        try:
            self.thread = threading.Thread(target=self._serve, name="torchlint-lint", daemon=True)
            self.thread.start()
        finally:
            if previous is not None:
                threading.stack_size(previous)

    def _serve(self) -> None:
        while True:
            function, args, reply = self.requests.get()
            try:
                reply.put((True, function(*args)))
            except BaseException as error:  # handed to the calling thread
                reply.put((False, error))

    def run(self, function, args):
        reply: queue.SimpleQueue = queue.SimpleQueue()
        with self.lock:
            self.requests.put((function, args, reply))
            succeeded, value = reply.get()
        if succeeded:
            return value
        raise value


_thread_lock = threading.Lock()
_thread: _LintThread | None = None


def _lint_thread() -> _LintThread:
    """This process's lint thread (a forked worker starts its own: threads do not survive fork)."""
    global _thread
    with _thread_lock:
        if _thread is None or _thread.pid != os.getpid() or not _thread.thread.is_alive():
            _thread = _LintThread()
        return _thread


def _leave_deep() -> None:
    global _deep_runs
    with _limit_lock:
        _deep_runs -= 1
        if _deep_runs == 0:
            sys.setrecursionlimit(_saved_limit)


def _position(reports: list[Report], module, path: str, text: str | None = None) -> list[Violation]:
    if not reports:
        return []
    source = None
    # Positions cost about a parse; only files with findings pay for them, and only the reported
    # nodes' are computed (torchlint.positions).
    from torchlint.positions import node_positions

    wrapper = cst.MetadataWrapper(module, unsafe_skip_copy=True)
    wanted = [report.node for report in reports]
    for report in reports:  # the nodes a fix's changes name: any other costs the full provider
        if report.autofix is not None:
            wanted.extend(_fix_nodes(report.autofix))
    positions = node_positions(wrapper, wanted)
    seen: set[tuple[int, int, str]] = set()
    violations = []
    for report in reports:
        span = positions.get(report.node)
        if span is None:  # a node of another module of the project: never reported here
            continue
        key = (span.start.line, span.start.column, report.rule.CODE)
        if key in seen:
            continue
        seen.add(key)
        fix = None
        if report.autofix is not None and text is not None:
            from torchlint.fix import SourceText, resolve_or_none

            source = source or SourceText(text)
            fix = resolve_or_none(report.autofix, positions, source)
        violations.append(Violation(
            path=path, line=span.start.line, column=span.start.column + 1,
            code=report.rule.CODE, name=report.rule.NAME, message=report.message,
            end_line=span.end.line, end_column=span.end.column + 1, help=report.fix, fix=fix,
        ))
    return violations


def _fix_nodes(fix) -> list:
    """The nodes whose positions resolving ``fix`` reads (torchlint.fix.resolve): every node its
    changes name, and a decorated definition's first decorator."""
    nodes = []
    for change in fix.changes:
        for name in getattr(type(change), "__slots__", ()):
            value = getattr(change, name, None)
            if isinstance(value, cst.CSTNode):
                nodes.append(value)
                decorators = getattr(value, "decorators", None)
                if decorators:
                    nodes.append(decorators[0])
    return nodes


# The parser's line breaks. str.splitlines() also splits on form feeds, vertical tabs, \x1c-\x1e,
# \x85, U+2028 and U+2029, which are not line breaks in Python source.
LINE_BREAK_RE = re.compile(r"\r\n|\r|\n")


def source_lines(text: str) -> list[str]:
    return LINE_BREAK_RE.split(text)


def _skips_file(text: str) -> bool:
    """``# torchlint: skip-file`` in a comment, not in a string literal."""
    if not SKIP_FILE_RE.search(text):
        return False
    try:
        return any(token.type == tokenize.COMMENT and SKIP_FILE_RE.match(token.string)
                   for token in tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        # Not tokenizable: a comment is a '#' outside quotes on its line, as far as we can tell.
        return any(SKIP_FILE_RE.search(line) and not re.search(r"['\"].*#", line)
                   for line in source_lines(text))


def _without_noqa(violations: list[Violation], text: str) -> list[Violation]:
    if not violations or "noqa" not in text.lower():
        return violations
    lines = source_lines(text)
    kept = []
    for violation in violations:
        line = lines[violation.line - 1] if 0 < violation.line <= len(lines) else ""
        if not _suppressed(line, violation.code):
            kept.append(violation)
    return kept


def _suppressed(line: str, code: str) -> bool:
    for match in NOQA_RE.finditer(line):
        codes = match.group("codes")
        if not codes:
            return True
        if any(code.startswith(listed.upper()) for listed in re.split(r"[,\s]+", codes) if listed):
            return True
    return False


def lint_file(path: str, rules: Sequence[type[Rule]], options: dict | None = None,
              prefilter: bool = True) -> list[Violation]:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        return [invalid_file(path, f"cannot read: {error.strerror or error}")]
    return lint_source(data, path, rules, options, prefilter)
