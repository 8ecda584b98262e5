"""Positions and re-rendering through libcst's public API only (issue 11, item 7)."""

from __future__ import annotations

import re
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider, WhitespaceInclusivePositionProvider

from kerasfit import codegen
from kerasfit.api import CheckOptions, check_source
from kerasfit.engine import _Indents, iter_children
from test_positions import FILES, TRICKY

ROOT = Path(__file__).resolve().parent.parent


def test_no_private_libcst_imports():
    private = re.compile(r"^\s*(from|import)\s+libcst\._", re.M)
    offenders = [p for d in ("kerasfit", "rules") for p in (ROOT / d).rglob("*.py") if private.search(p.read_text())]
    assert offenders == []


@pytest.mark.parametrize("source", [TRICKY] + [p.read_text() for p in FILES[:6]], ids=["tricky"] + [p.name for p in FILES[:6]])
def test_every_node_with_a_syntactic_range_is_a_syntactic_kind(source):
    """Where libcst records a node's own range apart from its whole range, the node's type
    is in SYNTACTIC_KINDS: the table decides only where the two coincide."""
    module = cst.parse_module(source)
    found = MetadataWrapper(module, unsafe_skip_copy=True).resolve_many([WhitespaceInclusivePositionProvider, PositionProvider])
    whole, own = found[WhitespaceInclusivePositionProvider], found[PositionProvider]
    missing = {type(n).__name__ for n in whole if whole[n] != own[n] and not isinstance(n, codegen.SYNTACTIC_KINDS)}
    assert missing == set()


def test_removing_a_line_takes_its_semicolon():
    # libcst ends a line's own range at its last statement, before a ";": the engine counts
    # that statement whole, so the removed pad line leaves no stray ";" behind.
    src = (
        "import tensorflow as tf\n\n\ndef model(x):\n"
        "    x = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]]);\n"
        '    x = tf.keras.layers.Conv2D(32, 3, padding="valid")(x)\n'
        "    return x\n"
    )
    res = check_source(src, "m.py", CheckOptions(isolated=True), fix=True)
    assert res.error is None
    assert res.fixed_source == (
        "import tensorflow as tf\n\n\ndef model(x):\n"
        '    x = tf.keras.layers.Conv2D(32, 3, padding="same")(x)\n'
        "    return x\n"
    )


def test_rendering_at_block_indentation_gives_the_source_back():
    src = (
        "def f(x):\n"
        "    if x:\n"
        "        y = g(\n"
        "            x,  # keep\n"
        "            1,\n"
        "        )\n"
        "        return y\n"
    )
    module = cst.parse_module(src)
    indents = _Indents(module)
    nodes, stack = [], [module]
    while stack:
        n = stack.pop()
        nodes.append(n)
        stack.extend(iter_children(n))
    call = next(n for n in nodes if isinstance(n, cst.Call))
    assert indents.render(call, call) == "g(\n            x,  # keep\n            1,\n        )"
    line = next(n for n in nodes if isinstance(n, cst.SimpleStatementLine) and n.body[0].value is call)
    assert indents.render(line, line) == "        y = g(\n            x,  # keep\n            1,\n        )\n"


def test_rendering_a_clause_indents_its_header():
    src = "def f(x):\n    try:\n        pass\n\n    # why\n    except ValueError as e:\n        w = e\n"
    module = cst.parse_module(src)
    nodes, stack = [], [module]
    while stack:
        n = stack.pop()
        nodes.append(n)
        stack.extend(iter_children(n))
    handler = next(n for n in nodes if isinstance(n, cst.ExceptHandler))
    assert _Indents(module).render(handler, handler) == "\n    # why\n    except ValueError as e:\n        w = e\n"
