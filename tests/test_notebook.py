"""Jupyter notebooks through the real console script: discovery, cells as one module,
IPython syntax, positions per cell, every output format, and ``--fix`` written back."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import nbformat
import pytest

from kfhelpers import finding_lines, run

from kerasfit.project.notebook import Notebook, mask


def make_notebook(path: Path, cells: list[tuple[str, str]], *, outputs: bool = True) -> dict:
    """Write a notebook as Jupyter does (nbformat: indent 1, cell ids, outputs)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["colab"] = {"provenance": [], "gpuType": "T4"}
    for kind, src in cells:
        if kind == "md":
            nb.cells.append(nbformat.v4.new_markdown_cell(src))
        else:
            cell = nbformat.v4.new_code_cell(src, execution_count=len(nb.cells))
            if outputs:
                cell.outputs = [nbformat.v4.new_output("stream", text=f"output of cell {len(nb.cells) + 1}\n")]
            cell.metadata["id"] = f"meta-{len(nb.cells)}"
            nb.cells.append(cell)
    nbformat.validate(nb)
    nbformat.write(nb, str(path))
    return json.loads(path.read_text())


TRAIN = [
    ("md", "# Train a small model on a TPU"),
    ("code", "!pip install -q tf-keras\n%matplotlib inline\nimport tf_keras\nfrom tf_keras import layers"),
    ("code", "%%bash\nnvidia-smi | head -n 3"),
    # names imported in cell 2 resolve here, in cell 4
    ("code", "files = !ls data\nbn = layers.BatchNormalization(fused=False)\nhead = layers.Dense(100)"),
]


def test_check_finds_notebooks_and_reports_cells(tmp_path):
    make_notebook(tmp_path / "train.ipynb", TRAIN)
    r = run("check", "--no-cache", ".", cwd=tmp_path)
    assert r.returncode == 1, r
    found = finding_lines(r.stdout)
    assert found[0].startswith("train.ipynb:cell 4:2:6: KF101 "), found
    assert found[1].startswith("train.ipynb:cell 4:3:"), found
    assert "KF102" in found[1] and "100 units" in found[1]
    assert "All checks passed" not in r.stdout
    assert not any("KF001" in line for line in found), "magics and shell escapes must be masked"


def test_json_and_sarif_carry_the_cell(tmp_path):
    make_notebook(tmp_path / "train.ipynb", TRAIN)
    js = run("check", "--no-cache", "--output-format", "json", "train.ipynb", cwd=tmp_path).json()
    kf101 = next(d for d in js if d["code"] == "KF101")
    assert kf101["cell"] == 4 and kf101["location"] == {"row": 2, "column": 6}
    sarif = json.loads(run("check", "--no-cache", "--output-format", "sarif", "train.ipynb", cwd=tmp_path).stdout)
    res = next(x for x in sarif["runs"][0]["results"] if x["ruleId"] == "KF101")
    assert res["properties"]["cell"] == 4
    assert res["locations"][0]["logicalLocations"][0]["name"] == "cell 4"
    assert res["locations"][0]["physicalLocation"]["region"]["startLine"] == 2


def test_fix_writes_back_only_sources_and_keeps_everything_else(tmp_path):
    path = tmp_path / "train.ipynb"
    before = make_notebook(path, TRAIN)
    # KF101's fix is unsafe (it needs a 4-D input kerasfit cannot see)
    r = run("check", "--no-cache", "--fix", "--unsafe-fixes", "train.ipynb", cwd=tmp_path)
    assert "1 fixed" in r.stdout, r
    after = json.loads(path.read_text())
    nbformat.validate(nbformat.reads(path.read_text(), as_version=nbformat.NO_CONVERT))
    src = "".join(after["cells"][3]["source"])
    assert "BatchNormalization(fused=True)" in src
    assert src.startswith("files = !ls data\n"), "the shell escape is written back as it was"
    assert "".join(after["cells"][1]["source"]).startswith("!pip install -q tf-keras\n%matplotlib inline\n")
    assert after["cells"][2]["source"] == before["cells"][2]["source"]
    # everything but that one source is untouched: outputs, metadata, ids, counts
    expected = copy.deepcopy(before)
    expected["cells"][3]["source"] = after["cells"][3]["source"]
    assert after == expected
    # written the way Jupyter writes (indent 1, final newline): only the fixed line differs
    old_lines, new_lines = (p.splitlines() for p in (json.dumps(before, indent=1, ensure_ascii=False), path.read_text()))
    assert len(old_lines) == len(new_lines)
    assert sum(a != b for a, b in zip(old_lines, new_lines)) == 1
    # a second --fix changes nothing
    text = path.read_text()
    run("check", "--no-cache", "--fix", "--unsafe-fixes", "train.ipynb", cwd=tmp_path)
    assert path.read_text() == text


def test_unsafe_fix_with_an_import_keeps_cells_apart(tmp_path):
    path = tmp_path / "nb.ipynb"
    make_notebook(path, [
        ("code", "import tensorflow as tf"),
        ("code", "%time x = 1\nconv = tf.keras.layers.Conv2D(30, 3)"),
    ])
    run("check", "--no-cache", "--fix", "--unsafe-fixes", "nb.ipynb", cwd=tmp_path)
    after = json.loads(path.read_text())
    assert [len(c["outputs"]) for c in after["cells"]] == [1, 1]
    assert "".join(after["cells"][1]["source"]).startswith("%time x = 1\n")
    nbformat.validate(nbformat.reads(path.read_text(), as_version=nbformat.NO_CONVERT))


def test_suppression_comments_inside_cells(tmp_path):
    make_notebook(tmp_path / "nb.ipynb", [
        ("code", "import tf_keras"),
        ("code", "a = tf_keras.layers.BatchNormalization(fused=False)  # noqa: KF101\n"
                 "b = tf_keras.layers.BatchNormalization(fused=False)"),
    ])
    found = finding_lines(run("check", "--no-cache", "nb.ipynb", cwd=tmp_path).stdout)
    assert [f.split(": ")[0] for f in found] == ["nb.ipynb:cell 2:2:5"]


def test_syntax_error_is_placed_in_its_cell(tmp_path):
    make_notebook(tmp_path / "nb.ipynb", [("code", "import tf_keras"), ("md", "text"), ("code", "x = 1\ny = = 2")])
    found = finding_lines(run("check", "--no-cache", "nb.ipynb", cwd=tmp_path).stdout)
    assert found and found[0].startswith("nb.ipynb:cell 3:2:"), found
    assert "KF001" in found[0]


def test_not_a_notebook_is_one_line_error(tmp_path):
    (tmp_path / "broken.ipynb").write_text('{"cells": [ "keras"')
    r = run("check", "--no-cache", "broken.ipynb", cwd=tmp_path)
    assert r.returncode != 0
    errs = [line for line in (r.stdout + r.stderr).splitlines() if "broken.ipynb" in line]
    assert len(errs) == 1 and "not a valid notebook" in errs[0], r
    assert "All checks passed" not in r.stdout
    assert (tmp_path / "broken.ipynb").read_text() == '{"cells": [ "keras"'


def test_checkpoints_are_not_discovered(tmp_path):
    make_notebook(tmp_path / ".ipynb_checkpoints" / "train-checkpoint.ipynb", TRAIN) if (tmp_path / ".ipynb_checkpoints").mkdir() is None else None
    r = run("check", "--no-cache", ".", cwd=tmp_path)
    assert r.returncode == 0 and finding_lines(r.stdout) == [], r


@pytest.mark.parametrize(
    ("line", "masked"),
    [
        ("!pip install x", True),
        ("    %timeit f()", True),
        ("files = !ls", True),
        ("model.fit?", True),
        ("??model", True),
        ("x = 5 % 3", False),
        ("print('!')", False),
        ("y = a if b else c", False),
    ],
)
def test_mask_ipython_lines(line, masked):
    originals: dict[int, str] = {}
    out = mask(line, originals)
    assert (out != line) is masked
    assert out.count("\n") == line.count("\n")
    if masked:
        assert out.startswith(line[: len(line) - len(line.lstrip())])  # indentation kept
        assert list(originals.values()) == [line]


@pytest.mark.parametrize(
    ("cell", "kept"),
    [
        # explicit auto-call escapes: IPython reads `/f a b` as f(a, b), `,f a b` as
        # f("a", "b"), `;f a b` as f("a b"); no Python statement starts so
        ("/print 1 2", 0),
        (",print a b", 0),
        (";print a b", 0),
        ("if ok:\n    /print x", 1),
        # a `!` / `%` line continued with a trailing backslash: the continuation lines are
        # IPython's too (indented or not), and keep the escape line's indentation
        ("!python -m trainer --model_dir=gs://b/m \\\n    --tpu=local \\\n    --epochs=3", 0),
        ("%env A=1 \\\nB=2", 0),
        ("files = !ls \\\n   -l", 0),
        ("for i in range(2):\n    !echo {i} \\\n        done", 1),
        # not at the start of a logical line: Python's own `%` and `!`
        ("x = (a\n     % b)", 2),
        ('s = """\n!not a shell line\n"""', 3),
        ("t = 'a' \\\n    '%d'", 2),
        # automagic (IPython's default): a magic or alias name without its `%`, where the
        # line is no Python; a name assigned or called stays Python
        ("pip install datasets\ncd ..", 0),
        ("history = model.fit(\n    x,\n)", 3),
        ("pip = 3\ntime.sleep(1)", 2),
    ],
)
def test_mask_reads_escapes_as_ipython_does(cell, kept):
    """Escapes are masked only at the start of a logical line, with their backslash
    continuations; the masked cell parses; ``kept`` lines stay as written."""
    originals: dict[int, str] = {}
    out = mask(cell, originals)
    assert out.count("\n") == cell.count("\n")
    compile(out, "cell", "exec")  # no KF001
    assert sum(a == b for a, b in zip(cell.split("\n"), out.split("\n"))) == kept
    for before, after in zip(cell.split("\n"), out.split("\n")):
        if before != after:
            assert after.startswith(cell.split("\n")[0][: len(cell) - len(cell.lstrip())])


def test_colab_continuations_and_autocall_give_no_kf001_and_later_findings_stay(tmp_path):
    make_notebook(tmp_path / "tpu.ipynb", [
        ("code", "!python -m official.resnet.resnet_main --model_dir=gs://bucket/model \\\n"
                 "    --tpu=$TPU_NAME \\\n    --data_dir=gs://bucket/data\n%env TPU_NAME=local \\\n  EXTRA=1"),
        ("code", "/print 'ready'\n,print a b\n;print a b\nimport tf_keras"),
        ("code", "bn = tf_keras.layers.BatchNormalization(fused=False)"),
    ])
    r = run("check", "--no-cache", "tpu.ipynb", cwd=tmp_path)
    found = finding_lines(r.stdout)
    assert not [f for f in found if "KF001" in f], found
    assert [f.split(": ")[0] for f in found] == ["tpu.ipynb:cell 3:1:6"], found


PASTED = " # install the compiler\n !sudo apt-get install edgetpu-compiler \\\n     -y\n" \
         " bn = tf_keras.layers.BatchNormalization(fused=False)\n for i in range(2):\n     print(i)"


def test_a_cell_pasted_indented_is_read_as_ipython_runs_it_and_fixed_in_place(tmp_path):
    """IPython takes the first line's indentation off every line of a cell that has it, so
    a cell pasted from a function body runs: no KF001, its findings at the cell's own
    columns, its fix written back with the cell's indentation, and nothing more on a
    second --fix."""
    path = tmp_path / "pasted.ipynb"
    cells = [("code", "import tf_keras"), ("code", PASTED),
             ("code", "x = tf_keras.layers.BatchNormalization(fused=False)"),
             ("code", "    # an indented comment alone needs no block\ny = 1")]
    # code indented under an unindented first line is an error in IPython too
    make_notebook(path, [*cells, ("code", "z = 1\n    w = 2")])
    found = finding_lines(run("check", "--no-cache", "pasted.ipynb", cwd=tmp_path).stdout)
    # (columns as the cell is written: `tf_keras` of the pasted line is its 7th character)
    assert [f.split(": ")[0] for f in found][:2] == ["pasted.ipynb:cell 2:4:7", "pasted.ipynb:cell 3:1:5"], found
    assert found[2].startswith("pasted.ipynb:cell 5:2:"), found
    assert "KF001" in found[2] and "KF001" not in found[0] + found[1]

    make_notebook(path, cells)
    run("check", "--no-cache", "--fix", "--unsafe-fixes", "pasted.ipynb", cwd=tmp_path)
    text = path.read_text()
    after = ["".join(c["source"]) for c in json.loads(text)["cells"]]
    assert after == ["import tf_keras", PASTED.replace("fused=False", "fused=True"),
                     "x = tf_keras.layers.BatchNormalization(fused=True)", cells[3][1]]
    run("check", "--no-cache", "--fix", "--unsafe-fixes", "pasted.ipynb", cwd=tmp_path)
    assert path.read_text() == text


def test_a_users_line_that_looks_like_a_mask_tag_survives_fix(tmp_path):
    """The masking tags are words no cell holds: a user's line ending in
    `# kerasfit-magic 0` (or a `# kerasfit-cell 2` line) in an untouched cell is kept."""
    path = tmp_path / "nb.ipynb"
    mine = "x = compute()  # kerasfit-magic 0\n# kerasfit-cell 2\ny = 1"
    make_notebook(path, [
        ("code", "!pip install -q tf-keras\nimport tf_keras"),
        ("code", mine),
        ("code", "bn = tf_keras.layers.BatchNormalization(fused=False)"),
    ])
    r = run("check", "--no-cache", "--fix", "--unsafe-fixes", "nb.ipynb", cwd=tmp_path)
    assert "1 fixed" in r.stdout, r
    cells = json.loads(path.read_text())["cells"]
    assert "".join(cells[0]["source"]) == "!pip install -q tf-keras\nimport tf_keras"
    assert "".join(cells[1]["source"]) == mine
    assert "fused=True" in "".join(cells[2]["source"])


def test_cell_magics_and_help_still_masked():
    nb = Notebook.from_cells([(1, "%%time\nimport keras\nkeras.layers.Dense?"), (2, "??keras.Model\n%%not a cell magic here")])
    compile(nb.module, "nb", "exec")
    assert "import keras" in nb.module
    assert nb.split(nb.module) == ["%%time\nimport keras\nkeras.layers.Dense?", "??keras.Model\n%%not a cell magic here"]


def test_round_trip_of_the_module_restores_every_cell():
    nb = Notebook.from_cells([(1, "%load_ext autoreload\nimport keras"), (3, "%%writefile x.py\nprint(1)\n"), (4, "y = 2")])
    assert nb.split(nb.module) == ["%load_ext autoreload\nimport keras", "%%writefile x.py\nprint(1)\n", "y = 2"]
    assert [nb.locate(r) for r in (nb.starts[2], nb.starts[2] - 1)] == [(2, 1), (1, 3)]
