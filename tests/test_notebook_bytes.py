"""Notebooks written back byte for byte outside the changed sources, and notebooks that
cannot be read costing only themselves.

``KERASFIT_NOTEBOOK_DIRS`` (os.pathsep-separated) runs the splice property over every
``.ipynb`` below those directories as well (real notebooks, off the suite: none ships).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kfhelpers import finding_lines, run

from kerasfit.project.notebook import Notebook, NotebookError, _source_spans

KERNEL = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}

# What a notebook written by hand, by an old Jupyter or by another tool may hold, all of
# which json.loads + json.dumps would re-spell: escapes, CRLF inside a source, numbers with
# trailing zeros or exponents, an escaped slash, a duplicate key, a BOM, 2-space indent.
ODD = (
    '\ufeff{\r\n'
    '  "cells": [\r\n'
    '    {"cell_type": "markdown", "metadata": {}, "source": ["a \\u003e b \\/ c\\r\\n", "x"]},\r\n'
    '    {\r\n'
    '      "cell_type": "code", "execution_count": 1, "metadata": {"scrolled": true, "scrolled": false},\r\n'
    '      "outputs": [],\r\n'
    '      "source": ["import tensorflow as tf\\r\\n", "y = 1 if 2 \\u003e 1 else 0\\r\\n"]\r\n'
    '    },\r\n'
    '    {\r\n'
    '      "cell_type": "code", "execution_count": 2, "metadata": {"ExecuteTime": {"w": 300.50, "n": 1E5}},\r\n'
    '      "outputs": [],\r\n'
    '      "source": [\r\n'
    '        "def block(x):\\n",\r\n'
    '        "    x = tf.keras.layers.ZeroPadding2D(padding=1)(x)\\n",\r\n'
    '        "    return tf.keras.layers.Conv2D(32, 3, padding=\\"valid\\")(x)\\n"\r\n'
    '      ]\r\n'
    '    },\r\n'
    '    {"cell_type": "code", "execution_count": 3, "metadata": {}, "outputs": [], "source": "head = tf.keras.layers.Dense(100)"}\r\n'
    '  ],\r\n'
    '  "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}, "w": 1.50},\r\n'
    '  "nbformat": 4,\r\n'
    '  "nbformat_minor": 4\r\n'
    '}\r\n'
)


def _span_of_source(text: str, number: int) -> tuple[int, int]:
    return _source_spans(text)[number]


def test_fix_changes_only_the_fixed_cells_source_bytes(tmp_path):
    path = tmp_path / "odd.ipynb"
    path.write_bytes(ODD.encode("utf-8"))
    r = run("check", "--no-cache", "--fix", "odd.ipynb", cwd=tmp_path)
    assert "1 fixed" in r.stdout, r
    after = path.read_bytes().decode("utf-8")
    start, end = _span_of_source(ODD, 3)
    new_start, new_end = _span_of_source(after, 3)
    assert new_start == start
    assert after[:start] == ODD[:start], "bytes before the fixed source changed"
    assert after[new_end:] == ODD[end:], "bytes after the fixed source changed"
    fixed = json.loads(after[new_start:new_end])
    assert fixed == ["def block(x):\n", '    return tf.keras.layers.Conv2D(32, 3, padding="same")(x)\n']
    # the list keeps the original's item layout (CRLF and 8 spaces before each item)
    assert after[new_start:new_end].startswith('[\r\n        "def block(x):\\n",\r\n        "    return')
    # a second --fix changes nothing
    run("check", "--no-cache", "--fix", "odd.ipynb", cwd=tmp_path)
    assert path.read_bytes().decode("utf-8") == after


def test_findings_left_after_fix_are_placed_in_the_fixed_cells(tmp_path):
    """The pad's line goes, so everything after it moves up a line: the finding left in the
    last cell must be reported where a fresh check of the written notebook reports it."""
    path = tmp_path / "odd.ipynb"
    path.write_bytes(ODD.encode("utf-8"))
    fixing = finding_lines(run("check", "--no-cache", "--fix", "odd.ipynb", cwd=tmp_path).stdout)
    fresh = finding_lines(run("check", "--no-cache", "odd.ipynb", cwd=tmp_path).stdout)
    assert fixing == fresh and fresh and fresh[0].startswith("odd.ipynb:cell 4:1:"), (fixing, fresh)


def test_cell_without_id_gives_no_library_warning(tmp_path):
    """nbformat warns about missing cell ids in nbformat 4.5 notebooks; that is not the user's finding."""
    nb = {
        "cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                   "source": "import tensorflow as tf\nx = tf.keras.layers.ZeroPadding2D(1)(x)\n"
                             "x = tf.keras.layers.Conv2D(32, 3)(x)\n"}],
        "metadata": KERNEL, "nbformat": 4, "nbformat_minor": 5,
    }
    path = tmp_path / "noid.ipynb"
    path.write_text(json.dumps(nb, indent=1))
    r = run("check", "--no-cache", "--fix", "noid.ipynb", cwd=tmp_path)
    assert "Warning" not in r.stderr and "Warning" not in r.stdout, r
    assert 'padding="same"' in json.loads(path.read_text())["cells"][0]["source"], r


def test_deeply_nested_notebook_costs_only_itself(tmp_path):
    depth = 100_000
    (tmp_path / "deep.ipynb").write_text('{"cells": ' + "[" * depth + '"tensorflow"' + "]" * depth + "}")
    (tmp_path / "model.py").write_text("import tensorflow as tf\nhead = tf.keras.layers.Dense(100)\nx = tf.keras.layers.Dense(30)\n")
    r = run("check", "--no-cache", ".", cwd=tmp_path)
    assert r.returncode == 1, r
    errors = [ln for ln in (r.stdout + r.stderr).splitlines() if "deep.ipynb" in ln]
    assert len(errors) == 1 and "nested too deeply" in errors[0], r
    assert any(ln.startswith("model.py:3:") for ln in finding_lines(r.stdout)), r


# ---- the splice, as a property --------------------------------------------------------

_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
_source_lines = st.lists(st.one_of(_text, st.sampled_from(["x = 1\n", "\r\n", "a\u003eb\n", "é/\\\n", ""])), max_size=5)


@st.composite
def notebooks(draw: st.DrawFn) -> tuple[str, list[int]]:
    """A notebook's text in one of the layouts writers use, and its code cells' numbers."""
    cells = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["code", "markdown"]))
        lines = draw(_source_lines)
        source: object = lines if draw(st.booleans()) else "".join(lines)
        cell = {"cell_type": kind, "metadata": {"n": draw(st.floats(allow_nan=False, allow_infinity=False))}, "source": source}
        if kind == "code":
            cell.update(execution_count=None, outputs=[])
        cells.append(cell)
    nb = {"cells": cells, "metadata": KERNEL, "nbformat": 4, "nbformat_minor": 4}
    indent = draw(st.sampled_from([None, 1, 2, 4, "\t"]))
    text = json.dumps(nb, indent=indent, ensure_ascii=draw(st.booleans()))
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    code = [i for i, c in enumerate(cells, start=1) if c["cell_type"] == "code"]
    return text, code


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(notebooks(), st.data())
def test_splice_keeps_every_other_byte(case, data):
    text, code = case
    _check_splice(text, lambda cell: data.draw(st.one_of(st.just(cell.source), _text.map(lambda s: s + "\n"), _text)))


def _check_splice(text: str, new_source) -> None:
    nb = Notebook.from_json(text)
    raw = json.loads(text)
    new = [new_source(c) for c in nb.cells]
    out = nb.dumps(new)
    expected = json.loads(text)
    for cell, src in zip(nb.cells, new):
        if _changed(cell, src):
            was = raw["cells"][cell.number - 1]["source"]
            if "\r\n" in cell.source and "\n" not in cell.source.replace("\r\n", ""):
                src = src.replace("\r\n", "\n").replace("\n", "\r\n")  # a CRLF source stays CRLF
            expected["cells"][cell.number - 1]["source"] = src if isinstance(was, str) else _lines(src)
    assert json.loads(out) == expected
    # outside each changed source, the bytes are the original's
    old_spans, new_spans = _spans(text), _spans(out)
    changed = [c.number for c, s in zip(nb.cells, new) if _changed(c, s)]
    pieces_old, pieces_new, a, b = [], [], 0, 0
    for n in sorted(changed):
        pieces_old.append(text[a:old_spans[n][0]])
        pieces_new.append(out[b:new_spans[n][0]])
        a, b = old_spans[n][1], new_spans[n][1]
    pieces_old.append(text[a:])
    pieces_new.append(out[b:])
    assert pieces_old == pieces_new


def _changed(cell, new: str) -> bool:
    """The module reads a CRLF source as LF: the same text with LF is no change."""
    return new not in (cell.source, cell.source.replace("\r\n", "\n"))


def _lines(src: str) -> list[str]:
    return re.findall(r"[^\n]*\n|[^\n]+$", src)


def _spans(text: str) -> dict[int, tuple[int, int]]:
    return _source_spans(text)


def _real_notebooks() -> list[Path]:
    dirs = [Path(d) for d in os.environ.get("KERASFIT_NOTEBOOK_DIRS", "").split(os.pathsep) if d]
    return sorted(p for d in dirs for p in d.rglob("*.ipynb"))


@pytest.mark.skipif(not _real_notebooks(), reason="KERASFIT_NOTEBOOK_DIRS names no notebooks")
def test_splice_on_real_notebooks():
    seen = 0
    for path in _real_notebooks():
        text = path.read_bytes().decode("utf-8-sig")
        try:
            nb = Notebook.from_json(text, str(path))
        except NotebookError:
            continue
        if not nb.cells:
            continue
        seen += 1
        _check_splice(text, lambda cell: cell.source if cell.number % 2 else cell.source + "# kerasfit was here\n")
    assert seen
