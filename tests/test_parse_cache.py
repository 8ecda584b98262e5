"""Re-parsing only the edited top-level statements must give the same module text and
the same findings as parsing the whole file."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from kerasfit.project.check import check_source
from kerasfit.engine.parse import ParseCache

from test_positions import TRICKY

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {p.name: p.read_text() for p in sorted((ROOT / "fixtures").rglob("*.py"))}
SOURCES["tricky"] = TRICKY
SOURCES["two-space"] = "import tensorflow as tf\n\ndef f(x):\n  if x:\n    return tf.nn.relu(x)\n\n\n# about g\n@tf.function\ndef g(x):\n  return tf.concat([x], -1)\n\n# the end\n"


def _same(a, b) -> None:
    assert [d.to_dict() for d in a.diagnostics] == [d.to_dict() for d in b.diagnostics]


@pytest.mark.parametrize("name", list(SOURCES))
def test_pieces_join_back_to_the_same_text(name):
    src = SOURCES[name]
    module = ParseCache().parse(src, ast.parse(src))
    if module is None:  # allowed: the caller then parses the whole file
        return
    assert module.code == src


@pytest.mark.parametrize("name", list(SOURCES))
def test_edits_through_the_cache_give_the_same_findings(name):
    src = SOURCES[name]
    rng = random.Random(name)
    cache = ParseCache()
    lines = src.splitlines(keepends=True)
    for _ in range(6):
        i = rng.randrange(len(lines))
        choice = rng.random()
        if choice < 0.4:
            lines[i] = lines[i].rstrip("\n") + "  # edited\n"
        elif choice < 0.7:
            lines.insert(i, "\n")
        else:
            lines.insert(i, "# a comment line\n")
        text = "".join(lines)
        try:
            ast.parse(text)
        except SyntaxError:
            continue
        _same(check_source(text, "m.py", parse_cache=cache), check_source(text, "m.py"))
        module = cache.parse(text, ast.parse(text))
        if module is not None:
            assert module.code == text


def test_only_the_edited_piece_is_parsed_again():
    src = SOURCES["tricky"]
    cache = ParseCache()
    cache.parse(src, ast.parse(src))
    before = dict(cache.pieces)
    edited = src.replace("return tf.keras.layers.Conv2D(30, 3)(x)", "return tf.keras.layers.Conv2D(32, 3)(x)")
    module = cache.parse(edited, ast.parse(edited))
    assert module is not None and module.code == edited
    new = set(cache.pieces) - set(before)
    assert len(new) == 1 and "Conv2D(32" in next(iter(new))


def test_identical_statements_stay_distinct_nodes():
    src = "import tf_keras\n" + "a = tf_keras.layers.BatchNormalization(fused=False)\n" * 5
    cache = ParseCache()
    for _ in range(2):  # the second run is served from the cache
        res = check_source(src, "m.py", parse_cache=cache)
        assert [d.row for d in res.diagnostics] == [2, 3, 4, 5, 6]


def test_a_long_edit_session_keeps_only_the_current_pieces():
    """Pieces an edit replaced are dropped, so memory follows the file, not the session."""
    src = SOURCES["tricky"]
    cache = ParseCache()
    cache.parse(src, ast.parse(src))
    n = len(cache.pieces)
    text = src
    for k in range(30):
        text = text.replace(f"Conv2D({30 + k}, 3)", f"Conv2D({31 + k}, 3)")
        assert cache.parse(text, ast.parse(text)) is not None
    assert len(cache.pieces) == n
    assert all(p in text for p in cache.pieces)
