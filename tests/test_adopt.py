"""Turning kerasfit on in an existing codebase: `check --add-noqa` and the baseline
(`--write-baseline`, `--baseline`, `baseline =` in [tool.kerasfit])."""

from __future__ import annotations

import ast
import json

import pytest

from kfhelpers import run, write

BN = "keras.layers.BatchNormalization(fused=False)(x)"

# Every place a finding can sit: a plain line, an existing flake8 noqa, a comment, a
# call over two lines, a line continued with a backslash, inside a multi-line string's
# line, an existing KF noqa for another code, and the same statement twice.
TRICKY = f"""import tf_keras as keras
bn = {BN}  # noqa: E501
y = {BN}  # keep
z = keras.layers.BatchNormalization(
    fused=False)(x)
w = {BN} + \\
    1
s = \"\"\"
text\"\"\" + str({BN}) + \"\"\"
more\"\"\"
v = {BN}  # noqa: KF102
"""


def _codes(r) -> list[tuple[int, str]]:
    return [(d["location"]["row"], d["code"]) for d in r.json()]


def test_add_noqa_comments_where_python_allows_and_counts_the_rest(tmp_path):
    f = write(tmp_path / "model.py", TRICKY)
    r = run("check", "--add-noqa", "model.py", "--no-cache", cwd=tmp_path)
    assert r.returncode == 1, r  # two findings could not get a comment: they still fail
    assert r.stdout.splitlines() == [
        "model.py:6:5: KF101 left without a noqa comment: its line is continued with a backslash",
        "model.py:9:15: KF101 left without a noqa comment: its line ends inside a multi-line string",
        "Added a noqa comment for 4 finding(s) in 1 file(s).",
        "2 finding(s) left without one (they still fail the check).",
    ]
    text = f.read_text()
    ast.parse(text)
    lines = text.splitlines()
    assert lines[1] == f"bn = {BN}  # noqa: E501, KF101"  # merged into the existing list
    assert lines[2] == f"y = {BN}  # keep  # noqa: KF101"
    assert lines[3] == "z = keras.layers.BatchNormalization(  # noqa: KF101"
    assert lines[5].endswith("\\") and lines[8] == f'text""" + str({BN}) + """'  # untouched
    assert lines[10] == f"v = {BN}  # noqa: KF102, KF101"

    after = run("check", "model.py", "--no-cache", "--output-format", "json", cwd=tmp_path)
    assert _codes(after) == [(6, "KF101"), (9, "KF101")]

    again = run("check", "--add-noqa", "model.py", "--no-cache", cwd=tmp_path)
    assert f.read_text() == text  # a second run changes nothing
    assert "Added a noqa comment for 0 finding(s) in 0 file(s)." in again.stdout


def test_add_noqa_in_a_notebook_keeps_magics_and_the_json(tmp_path):
    nb = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Train\n"]},
            {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
             "source": ["%matplotlib inline\n", "import tf_keras as keras\n", f"bn = {BN}\n"]},
        ],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    f = write(tmp_path / "train.ipynb", json.dumps(nb, indent=1) + "\n")
    r = run("check", "--add-noqa", "train.ipynb", "--no-cache", cwd=tmp_path)
    assert r.returncode == 0, r
    cells = json.loads(f.read_text())["cells"]
    assert cells[1]["source"] == ["%matplotlib inline\n", "import tf_keras as keras\n", f"bn = {BN}  # noqa: KF101\n"]
    assert cells[0] == nb["cells"][0]
    assert run("check", "train.ipynb", "--no-cache", cwd=tmp_path).returncode == 0


def test_add_noqa_leaves_info_findings_and_refuses_fix(tmp_path):
    head = "import tensorflow as tf\nout = tf.keras.layers.Dense(10, activation='softmax')(x)\n"
    f = write(tmp_path / "head.py", head)
    r = run("check", "--add-noqa", "head.py", "--no-cache", cwd=tmp_path)
    assert r.returncode == 0 and f.read_text() == head, r  # an info finding never fails the run
    r = run("check", "--add-noqa", "--fix", "head.py", cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "--add-noqa cannot be combined" in r.stderr


MODEL = f"""import tf_keras as keras


def build(x):
    a = {BN}
    b = {BN}
    return keras.layers.Conv2D(30, 3)(a + b)
"""


def test_baseline_accepts_todays_findings_and_fails_new_ones(tmp_path):
    write(tmp_path / "src" / "model.py", MODEL)
    r = run("check", "src", "--no-cache", "--write-baseline", "kerasfit-baseline.json", cwd=tmp_path)
    assert r.returncode == 0, r
    assert r.stdout.startswith("Wrote 3 finding(s) in 1 file(s) to kerasfit-baseline.json")
    data = json.loads((tmp_path / "kerasfit-baseline.json").read_text())
    assert {e["path"] for e in data["findings"]} == {"src/model.py"}  # relative to the baseline's directory
    assert all("row" not in e and "line" not in e for e in data["findings"])

    ok = run("check", "src", "--no-cache", "--baseline", "kerasfit-baseline.json", cwd=tmp_path)
    assert ok.returncode == 0, ok
    assert ok.stdout.splitlines() == ["All checks passed!", "3 finding(s) accepted by the baseline (not shown)."]

    # edits elsewhere (lines above, a re-indent, a reflowed call, a comment) do not wake them
    moved = MODEL.replace("def build(x):\n", "# a new comment\n\n\nclass M:\n  def build(self, x):\n")
    moved = moved.replace("\n    a = ", "\n        a = ").replace("\n    b = ", "\n        b = ")
    moved = moved.replace("    return keras.layers.Conv2D(30, 3)(a + b)", "        return keras.layers.Conv2D(\n            30, 3)(a + b)  # why")
    write(tmp_path / "src" / "model.py", moved)
    ast.parse(moved)
    r = run("check", "src", "--no-cache", "--baseline", "kerasfit-baseline.json", cwd=tmp_path)
    assert r.returncode == 0, (moved, r)

    # one more copy of an accepted statement, and a changed one, are new findings
    more = moved.replace(f"        b = {BN}\n", f"        b = {BN}\n        b = {BN}\n")
    more = more.replace("Conv2D(\n            30, 3)", "Conv2D(\n            31, 3)")
    write(tmp_path / "src" / "model.py", more)
    r = run("check", "src", "--no-cache", "--baseline", "kerasfit-baseline.json", "--output-format", "json", cwd=tmp_path)
    assert r.returncode == 1, r
    assert sorted(_codes(r)) == [(11, "KF101"), (13, "KF102")]  # the second `b = …`, the `31`
    text = run("check", "src", "--no-cache", "--baseline", "kerasfit-baseline.json", cwd=tmp_path)
    assert "Found 2 finding(s)." in text.stdout and "2 finding(s) accepted by the baseline (not shown)." in text.stdout


def test_baseline_from_the_config_is_relative_to_the_pyproject(tmp_path):
    write(tmp_path / "pkg" / "model.py", MODEL)
    r = run("check", ".", "--no-cache", "--write-baseline", "conf/base.json", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.splitlines() == [
        "kerasfit: error: --write-baseline conf/base.json: cannot write: No such file or directory; not written"]
    (tmp_path / "conf").mkdir()
    r = run("check", ".", "--no-cache", "--write-baseline", "conf/base.json", cwd=tmp_path)
    assert r.returncode == 0, r
    assert json.loads((tmp_path / "conf" / "base.json").read_text())["findings"][0]["path"] == "../pkg/model.py"
    write(tmp_path / "pyproject.toml", '[tool.kerasfit]\nbaseline = "conf/base.json"\n')
    r = run("check", "model.py", "--no-cache", cwd=tmp_path / "pkg")  # run from below the config
    assert r.returncode == 0 and "3 finding(s) accepted by the baseline" in r.stdout, r
    # --write-baseline records every finding, not only the ones the current baseline lets through
    r = run("check", "model.py", "--no-cache", "--write-baseline", "again.json", cwd=tmp_path / "pkg")
    assert r.stdout.startswith("Wrote 3 finding(s)"), r


@pytest.mark.parametrize("where", ["option", "config", "not json"])
def test_a_baseline_that_cannot_be_read_is_one_line_exit_2(tmp_path, where):
    write(tmp_path / "model.py", MODEL)
    args = ["check", "model.py", "--no-cache"]
    if where == "option":
        args += ["--baseline", "missing.json"]
    elif where == "config":
        write(tmp_path / "pyproject.toml", '[tool.kerasfit]\nbaseline = "missing.json"\n')
    else:
        write(tmp_path / "bad.json", "{not json")
        args += ["--baseline", "bad.json"]
    r = run(*args, cwd=tmp_path)
    assert r.returncode == 2, r
    (line,) = r.stderr.splitlines()
    assert line.startswith("kerasfit: error:")
    assert ("bad.json" in line and "not a kerasfit baseline" in line) if where == "not json" else "missing.json: no such file" in line
    assert r.stdout == ""
    # also with nothing to report: a missing baseline is never an empty one
    write(tmp_path / "model.py", "import tensorflow as tf\n")
    assert run(*args, cwd=tmp_path).returncode == 2


def test_add_noqa_over_the_fixture_models_parses_and_is_idempotent(tmp_path):
    """Every realistic model file: each commented file parses, the check then passes,
    and a second run writes nothing."""
    import shutil

    from kfhelpers import ROOT

    shutil.copytree(ROOT / "fixtures", tmp_path / "fixtures")
    args = ("fixtures", "--no-cache", "--select", "ALL", "--fail-on", "info")
    before = run("check", *args, "--output-format", "json", cwd=tmp_path)
    assert before.returncode == 1 and len(before.json()) > 100
    r = run("check", "--add-noqa", *args, cwd=tmp_path)
    assert r.returncode == 0, r
    assert r.stdout.splitlines()[-1].startswith(f"Added a noqa comment for {len(before.json())} finding(s)")
    texts = {p: p.read_text() for p in sorted((tmp_path / "fixtures").rglob("*.py"))}
    for p, text in texts.items():
        ast.parse(text, str(p))
    assert run("check", *args, cwd=tmp_path).returncode == 0
    again = run("check", "--add-noqa", *args, cwd=tmp_path)
    assert again.returncode == 0 and {p: p.read_text() for p in texts} == texts
