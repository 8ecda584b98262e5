"""What the selected rules read (``Rule.reads``) decides what a check computes ahead: the
tree's scan and its tree-wide answers before the files are checked only when some rule
reads the project; never what the check finds."""

from __future__ import annotations

import textwrap
from pathlib import Path

from kerasfit.engine.registry import all_rules
from kerasfit.engine.settings import reads_project
from kerasfit.project.check import CheckOptions, check_paths, tree_indexes
from kerasfit.project.config import Selection
from kerasfit.ruleapi import Reads

# net.py trains a model in its `__main__` block: a training script, whose findings count --
# unless another file of the tree imports net.py: then it is a library and the block a demo
_NET = """\
    import tensorflow as tf

    def build():
        return tf.keras.Sequential([tf.keras.layers.Dense(64)])

    if __name__ == "__main__":
        model = build()
        model.compile("adam", "mse")
        norm = tf.keras.layers.BatchNormalization(fused=False)
        model.fit(norm(x), y)
"""


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def _check(root: Path, select: list[str], jobs: int = 1):
    return check_paths([str(root)], CheckOptions(selection=Selection(select=select), use_cache=False, jobs=jobs))


def _found(res) -> list[tuple[str, int, str]]:
    return sorted((Path(d.filename).name, d.row, d.code) for d in res.diagnostics)


def test_reads_project_joins_the_selected_rules_declarations():
    rules = all_rules()
    alone = sorted(c for c, r in rules.items() if Reads.PROJECT not in r.reads)
    # KF101 and KF104 ask nothing of other files themselves (the demo-code filter every
    # report passes is the engine's question); the build-only rules find nothing by walking
    assert alone == ["KF101", "KF104", "KF301", "KF302"]
    assert not reads_project([rules[c] for c in alone]) and not reads_project([])
    assert reads_project([rules["KF101"], rules["KF102"]])


def test_a_finding_resting_on_another_file_of_the_tree_is_dropped_whatever_the_rule_declares(tmp_path):
    # KF101 does not read the project; the engine's demo-code filter asks the tree, lazily
    _tree(tmp_path, {"net.py": _NET})
    alone = _check(tmp_path, ["KF101"])
    assert _found(alone) == [("net.py", 9, "KF101")]  # a training script's
    assert alone.tree_files == 1
    _tree(tmp_path, {"train.py": "from net import build\n"})
    res = _check(tmp_path, ["KF101"])
    # train.py imports net.py: its block is a demo, known from the other file only
    assert _found(res) == [] and res.tree_files == 2


def test_a_pool_computes_the_tree_wide_answers_ahead_only_for_rules_reading_the_project(tmp_path):
    # seven files: the checks run in a pool, where the tree's answers would be shared
    files = {"net.py": _NET, "train.py": "from net import build\n"}
    files.update({f"layer{i}.py": "import tensorflow as tf\nx = tf.keras.layers.Dense(8)\n" for i in range(5)})
    _tree(tmp_path, files)
    for jobs in (1, 2):
        res = _check(tmp_path, ["KF301", "KF302"], jobs)  # build-only: nothing is found by the walk
        assert res.diagnostics == [] and len(res.files) == len(files) and res.tree_files == 0
    # KF101 alone: the pool computes nothing ahead (this process scans no file); its worker
    # asks the tree when a report lands in net.py's training block, and drops it as a demo
    alone = _check(tmp_path, ["KF101"], 2)
    assert alone.tree_files == 0 and _found(alone) == _found(_check(tmp_path, ["KF101"], 1)) == []
    # a rule reading the project: the tree is scanned here, before the checks
    assert _check(tmp_path, ["KF101", "KF102"], 2).tree_files == len(files)


def test_the_prefilter_follows_imports_without_the_tree(tmp_path):
    # model.py never spells tensorflow: the prefilter follows its import, not the tree
    _tree(tmp_path, {
        "compat.py": "from tensorflow.keras import layers\n",
        "model.py": "from compat import layers\n\nbn = layers.BatchNormalization(fused=False)\n",
    })
    assert _found(_check(tmp_path, ["KF101"])) == [("model.py", 3, "KF101")]
    indexes = tree_indexes([tmp_path])
    assert indexes.tree.imports_framework(tmp_path / "model.py", (tmp_path / "model.py").read_bytes())
    assert indexes.tree_files == 0


def test_the_tree_index_reads_the_tree_only_when_a_question_needs_it(tmp_path):
    _tree(tmp_path, {"net.py": _NET, "train.py": "from net import build\n", "util.py": "x = 1\n"})
    indexes = tree_indexes([tmp_path])  # (the language server's, per workspace folder)
    assert indexes.tree_files == 0
    assert indexes.tree.facts(str(tmp_path / "train.py")) is not None  # one file's facts: no scan
    assert indexes.tree_files == 0
    assert indexes.tree.imported_by_others(tmp_path / "net.py")
    assert indexes.tree_files == 3 and not indexes.tree.imported_by_others(tmp_path / "util.py")
