"""The language server compiles only the region an edit changed (kerasfit.engine.incremental).

Every tree it makes must be CPython's tree of the whole text (line numbers included,
once each statement's row shift is added), cut where a whole-file parse would cut, and
every check through it must give the findings and fixes of a check from scratch.
"""

from __future__ import annotations

import ast
import copy
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kerasfit.project.check import check_source
from kerasfit.engine.parse import ParseCache
from kerasfit.engine.incremental import IncrementalAST, cut_offsets, line_starts, row_shift, statement_start_row

from test_positions import TRICKY

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {p.name: p.read_text() for p in sorted((ROOT / "fixtures").rglob("*.py"))}
SOURCES["tricky"] = TRICKY
SOURCES["tricky-crlf"] = TRICKY.replace("\n", "\r\n")
SOURCES["tabs"] = "import tensorflow as tf\n\n\nclass M(tf.keras.Model):\n\tdef call(self, x):\n\t\tif x:\n\t\t\treturn tf.pad(x, [[0, 0], [1, 1]])\n\t\treturn x\n\n\n# é, 😀 and ü in a comment\ny = 'ü😀'; z = tf.keras.layers.Dense(100)\n"

SNIPPETS = [
    "\n",
    "# a comment\n",
    "    x = 1\n",  # continues the block before it, or is an unexpected indent
    "else:\n    pass\n",
    "def extra(x):\n    return tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])\n",
    "@tf.function\n",
    '"""',  # opens a string that may swallow the rest of the file
    "(",
    ")",
    "from __future__ import annotations\n",
    "y = tf.keras.layers.Dense(100)(y)\n",
    "class K(tf.keras.layers.Layer):\n    def call(self, x):\n        return tf.transpose(x, [0, 2, 1])\n",
    "\\\n",
    "if True:\n",
]


def absolute(tree: ast.Module) -> str:
    """The tree with every row shift applied, dumped with positions."""
    body = []
    for s in tree.body:
        c = copy.deepcopy(s)
        ast.increment_lineno(c, row_shift(s))
        body.append(c)
    return ast.dump(ast.Module(body=body, type_ignores=[]), include_attributes=True)


def expected_cuts(text: str, tree: ast.Module) -> list[int]:
    return cut_offsets(text, sorted({statement_start_row(s) for s in tree.body}), line_starts(text))


def edit(text: str, rng: random.Random) -> str:
    lines = text.splitlines(keepends=True) or [""]
    k = rng.randrange(len(lines) + 1)
    r = rng.random()
    if r < 0.25:
        return "".join(lines[:k] + [rng.choice(SNIPPETS)] + lines[k:])
    if r < 0.4 and lines:
        return "".join(lines[:k] + lines[k + 1 + rng.randrange(3):])
    if r < 0.55:
        return "".join(lines[:k] + lines[k:][1:2] + lines[k:][:1] + lines[k + 2:])  # swap two lines
    pos = rng.randrange(len(text) + 1)
    if r < 0.8:
        return text[:pos] + rng.choice(["x", " ", "1", ":", "\n", "'", "#"]) + text[pos:]
    return text[:pos] + text[pos + rng.randrange(1, 6):]


def parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def session(text: str, rng: random.Random, n: int):
    """Texts of an editing session: most edits that break the syntax are typed on
    until the text parses again, as in an editor."""
    for _ in range(n):
        new = edit(text, rng)
        yield new
        if parses(new) or rng.random() < 0.3:
            text = new


def check_tree(inc: IncrementalAST, text: str) -> None:
    got = inc.tree(text)
    try:
        want = ast.parse(text)
    except (SyntaxError, ValueError):
        assert got is None, "a text CPython refuses must go to the whole-file path"
        return
    if got is None:
        return  # allowed: the caller parses the whole file
    tree, cuts = got
    assert absolute(tree) == ast.dump(want, include_attributes=True)
    assert cuts == expected_cuts(text, want)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_random_edits_give_cpythons_tree(name):
    rng = random.Random(name)
    text = SOURCES[name]
    inc = IncrementalAST()
    inc.remember(text, ast.parse(text))
    for text in session(text, rng, 60):
        check_tree(inc, text)
        if inc.source is None:  # after a refusal the server parses the whole file again
            try:
                inc.remember(text, ast.parse(text))
            except SyntaxError:
                text = SOURCES[name]
                inc.remember(text, ast.parse(text))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), name=st.sampled_from(sorted(SOURCES)))
def test_edit_sessions_give_the_findings_of_a_fresh_check(seed, name):
    """The whole path (tree, libcst pieces, positions, fixes) against a check from scratch."""
    rng = random.Random(seed)
    text = SOURCES[name]
    cache = ParseCache()
    check_source(text, "m.py", parse_cache=cache)
    for text in session(text, rng, 4):
        a = check_source(text, "m.py", parse_cache=cache)
        b = check_source(text, "m.py")
        assert [d.to_dict() for d in a.diagnostics] == [d.to_dict() for d in b.diagnostics]


SRC = '''import tensorflow as tf


def a(x):
    return tf.keras.layers.Conv2D(30, 3)(x)


# leads into b
def b(x):
    return tf.keras.layers.Dense(100)(x)


def c(x):
    return x
'''


def fresh() -> IncrementalAST:
    inc = IncrementalAST()
    inc.remember(SRC, ast.parse(SRC))
    return inc


def test_an_edit_inside_one_function_compiles_only_that_function():
    inc = fresh()
    text = SRC.replace("Dense(100)", "Dense(128)")
    check_tree(inc, text)
    assert inc.last == f"region of {len(text[text.index('# leads'):text.index('def c')])} chars"


def test_rows_added_above_move_the_statements_below():
    inc = fresh()
    text = SRC.replace("def a(x):\n", "def a(x):\n    x = x + 1\n\n    x = x * 2\n")
    check_tree(inc, text)
    res = check_source(text, "m.py", parse_cache=_cache_after(SRC))
    assert [(d.code, d.row) for d in res.diagnostics] == [(d.code, d.row) for d in check_source(text, "m.py").diagnostics]
    assert any(d.row == 13 for d in res.diagnostics)  # Dense(100), three rows lower


def _cache_after(text: str) -> ParseCache:
    cache = ParseCache()
    check_source(text, "m.py", parse_cache=cache)
    return cache


def test_an_indented_line_at_a_boundary_joins_the_statement_above():
    inc = fresh()
    text = SRC.replace("\n\n# leads into b", "\n    y = 1\n\n# leads into b")
    check_tree(inc, text)
    tree, _ = inc.tree(text)
    assert absolute(tree) == ast.dump(ast.parse(text), include_attributes=True)


def test_an_open_string_that_swallows_the_rest_goes_to_the_whole_file():
    inc = fresh()
    assert inc.tree(SRC.replace("def c(x):", 'X = """\ndef c(x):')) is None


def test_a_future_import_is_compiled_only_from_the_top_of_the_file():
    """A ``__future__`` import can change how the rest parses: a region holding one is
    widened until it starts the file."""
    inc = fresh()
    text = SRC.replace("def c(x):", "from __future__ import annotations\ndef c(x):")
    check_tree(inc, text)
    assert inc.last in ("", "whole file") or inc.last == f"region of {len(text)} chars" or inc.source is None


def test_deleting_a_whole_function_and_pasting_it_back():
    inc = fresh()
    start, end = SRC.index("# leads"), SRC.index("def c")
    gone = SRC[:start] + SRC[end:]
    check_tree(inc, gone)
    check_tree(inc, SRC)
    assert inc.last.startswith("region of")


def test_a_lone_backslash_line_typed_into_a_block_is_checked_as_cpython_reads_it():
    """libcst needs such text rewritten (kerasfit.engine.layout), which the whole-file path does:
    an edited document with one gives the findings of a fresh check."""
    src = "import tf_keras\n\n\ndef f(x):\n    if x:\n        y = 1\n    return tf_keras.layers.BatchNormalization(fused=False)(x)\n"
    cache = _cache_after(src)
    edited = src.replace("    return", "\\\n    return")
    a, b = check_source(edited, "m.py", parse_cache=cache), check_source(edited, "m.py")
    assert [d.to_dict() for d in a.diagnostics] == [d.to_dict() for d in b.diagnostics]
    assert [d.code for d in a.diagnostics] == ["KF101"]
