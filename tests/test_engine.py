"""The engine through lint results: traversal, name resolution, fix application."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

import libcst as cst
import pytest

from kfhelpers import BAD, GOOD

from kerasfit.engine.settings import LintSettings
from kerasfit.engine.fix import apply_fixes, fix_source
from kerasfit.engine.lint import lint_source
from kerasfit.engine.registry import all_rules
from kerasfit.ruleapi import Finding, Reads
from kerasfit.ruleapi.rule import Remove, Replace, Rule
from kerasfit.core.types import Applicability, Edit, Fix


@pytest.fixture(scope="module")
def kf101() -> LintSettings:
    return LintSettings([all_rules()["KF101"]])


def rows(src: str, settings: LintSettings, code: str = "KF101") -> list[int]:
    diags = lint_source(src, "m.py", settings).diagnostics
    assert not [d for d in diags if d.code in ("KF001", "KF002")], diags
    return [d.row for d in diags if d.code == code]


# ---- name resolution (kerasfit.semantic.naming.Names, seen through KF101) ------------------------


@pytest.mark.parametrize(
    "src,fixed",
    [
        pytest.param(
            "from tensorflow.keras import layers as L\nbn = L.BatchNormalization(fused=False)\n", None, id="from-tf-keras-import-layers-as-L"
        ),
        pytest.param(
            "import tensorflow.compat.v1 as tf\nh = tf.layers.batch_normalization(h, training=True, fused=False)\n",
            "import tensorflow.compat.v1 as tf\nh = tf.layers.batch_normalization(h, training=True, fused=True)\n",
            id="import-compat-v1-as-tf",
        ),
        pytest.param(
            "from tf_keras.layers import BatchNormalization as BN\nx = BN(fused=False)(x)\n",
            "from tf_keras.layers import BatchNormalization as BN\nx = BN(fused=True)(x)\n",
            id="from-tf_keras-layers-import-as-BN",
        ),
        pytest.param(
            "import tensorflow as tf\nh = tf.compat.v1.layers.batch_normalization(h, fused=False)\n",
            "import tensorflow as tf\nh = tf.compat.v1.layers.batch_normalization(h, fused=True)\n",
            id="tf-compat-v1-layers",
        ),
        pytest.param("import tensorflow as tf\nbn = tf.keras.layers.BatchNormalization(fused=False)\n", None, id="tf-keras"),
        pytest.param("from keras import layers\nbn = layers.BatchNormalization(fused=False)\n", None, id="keras3-layers"),
        pytest.param(
            "import tf_keras\nbn = tf_keras.layers.BatchNormalization(fused=False)\n",
            "import tf_keras\nbn = tf_keras.layers.BatchNormalization(fused=True)\n",
            id="tf_keras",
        ),
    ],
)
def test_aliases_resolve_to_the_keras_layer(kf101, src, fixed):
    assert rows(src, kf101) == [2]
    # unsafe: the input's rank is not known here, so `fused=True` is not proven legal
    out = fix_source(src, "m.py", kf101, unsafe=True)
    assert out.error is None
    cst.parse_module(out.source)
    if fixed is not None:
        assert out.source == fixed
    assert rows(out.source, kf101) == []


@pytest.mark.parametrize(
    "src",
    [
        pytest.param("class BatchNormalization:\n    def __init__(self, fused):\n        pass\nbn = BatchNormalization(fused=False)\n", id="own-class"),
        pytest.param(
            "import tensorflow as tf\nclass BatchNormalization(tf.keras.layers.Layer):\n    pass\nbn = BatchNormalization(fused=False)\n",
            id="own-subclass-of-keras-layer",
        ),
        pytest.param("from mylib.layers import BatchNormalization\nbn = BatchNormalization(fused=False)\nimport keras\n", id="other-library"),
        pytest.param("import numpy as tf\nh = tf.layers.batch_normalization(h, fused=False)\n", id="tf-is-not-tensorflow"),
        pytest.param(
            "from tf_keras.layers import BatchNormalization\ndef f(BatchNormalization):\n    return BatchNormalization(fused=False)\n",
            id="shadowed-by-parameter",
        ),
        pytest.param("import tf_keras as keras\nbn = keras.layers.BatchNormalization(renorm=True, fused=False)\n", id="renorm-needs-unfused"),
    ],
)
def test_not_keras_is_never_flagged(kf101, src):
    assert rows(src, kf101) == []


# ---- traversal ------------------------------------------------------------------------------------


def test_traversal_reaches_every_nesting(kf101):
    src = (
        "import tf_keras as keras\n"
        "def build(n):\n"
        "    @decorate(keras.layers.BatchNormalization(fused=False))\n"  # 3
        "    class Block(keras.Model):\n"
        "        def __init__(self):\n"
        "            self.bns = [keras.layers.BatchNormalization(fused=False) for _ in range(n)]\n"  # 6
        "            self.f = lambda: keras.layers.BatchNormalization(fused=False)\n"  # 7
        "            self.d = {k: keras.layers.BatchNormalization(fused=False) for k in 'ab'}\n"  # 8
        "    if n:\n"
        "        with scope():\n"
        "            try:\n"
        "                x = (yield keras.layers.BatchNormalization(fused=False))\n"  # 12
        "            except E:\n"
        "                pass\n"
        "    return f'{keras.layers.BatchNormalization(fused=False)}'\n"  # 15
        "async def g():\n"
        "    async for x in it:\n"
        "        await h(keras.layers.BatchNormalization(fused=False), y=keras.layers.BatchNormalization(fused=False))\n"  # 18 x2
        "match v:\n"
        "    case [a, *_]:\n"
        "        bn = keras.layers.BatchNormalization(fused=False)\n"  # 21
    )
    assert rows(src, kf101) == [3, 6, 7, 8, 12, 15, 18, 18, 21]
    out = fix_source(src, "m.py", kf101, unsafe=True)  # input ranks unknown: unsafe fixes
    assert out.applied == 9 and "fused=False" not in out.source
    assert fix_source(out.source, "m.py", kf101, unsafe=True).source == out.source


class Recorder(Rule):
    """Records visit/leave order to check the traversal contract."""

    code = "KF991"
    reads = frozenset({Reads.STATEMENT})
    name = "test-recorder"
    message = "m"
    events: list[str] = []

    def visit_FunctionDef(self, node):
        self.events.append(f"visit {node.name.value}")

    def leave_FunctionDef(self, node):
        self.events.append(f"leave {node.name.value}")

    def visit_Name(self, node):
        if node.value.startswith("v"):
            self.events.append(node.value)


def test_visit_and_leave_in_source_order():
    Recorder.events = []
    lint_source("def a():\n    v1\n    def b():\n        v2\n    v3\ndef c():\n    v4\n", "m.py", LintSettings([Recorder]))
    assert Recorder.events == ["visit a", "v1", "visit b", "v2", "leave b", "v3", "leave a", "visit c", "v4", "leave c"]


class Crashes(Rule):
    code = "KF992"
    reads = frozenset({Reads.STATEMENT})
    name = "test-crashes"
    message = "m"

    def visit_Call(self, node):
        raise ZeroDivisionError("boom")


def test_a_crashing_rule_does_not_hide_the_others(kf101):
    src = "import tf_keras as keras\nbn = keras.layers.BatchNormalization(fused=False)\n"  # one call
    diags = lint_source(src, "m.py", LintSettings([Crashes, all_rules()["KF101"]])).diagnostics
    assert sorted(d.code for d in diags) == ["KF002", "KF101"]
    crash = next(d for d in diags if d.code == "KF002")
    assert "KF992" in crash.message and "ZeroDivisionError" in crash.message


def test_positions_are_characters_not_bytes(kf101):
    src = "import tf_keras as keras\nx = 'é🚀'; bn = keras.layers.BatchNormalization(fused=False)\n"
    (d,) = lint_source(src, "m.py", kf101).diagnostics
    line = src.splitlines()[1]
    assert d.column == line.index("keras") and src[d.start : d.end].startswith("keras.layers")
    assert src[d.fix.edits[0].start : d.fix.edits[0].end] == "False"


# ---- fix application ---------------------------------------------------------------------------


class WrapCall(Rule):
    """Outer fix: wraps a whole BatchNormalization(...) call."""

    code = "KF993"
    reads = frozenset({Reads.STATEMENT})
    name = "test-wrap"
    message = "wrap"
    fix_safety = Applicability.SAFE

    def visit_Call(self, node):
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "BatchNormalization":
            if not any(a.keyword and a.keyword.value == "name" for a in node.args):
                code = cst.Module([]).code_for_node(node)
                self.report(node, fix=self.make_fix(Replace(node, code[:-1] + ", name='bn')")))


class RenameLayers(Rule):
    """Inner fix: a second edit inside the same call."""

    code = "KF994"
    reads = frozenset({Reads.STATEMENT})
    name = "test-rename"
    message = "rename"
    fix_safety = Applicability.SAFE

    def visit_Attribute(self, node):
        if node.attr.value == "layers":
            self.report(node, fix=self.make_fix(Replace(node.attr, "layers_v2")))


def test_overlapping_fixes_outer_first_then_relint():
    settings = LintSettings([WrapCall, RenameLayers])
    out = fix_source("import k\nbn = k.layers.BatchNormalization(axis=1)\n", "m.py", settings)
    assert out.source == "import k\nbn = k.layers_v2.BatchNormalization(axis=1, name='bn')\n"
    assert out.applied == 2 and out.error is None
    again = fix_source(out.source, "m.py", settings)
    assert again.source == out.source and again.applied == 0


def test_apply_fixes_skips_overlaps_and_reports_what_it_applied():
    src = "abcdefgh"
    outer = Fix(Applicability.SAFE, "outer", (Edit(1, 6, "X"),))
    inner = Fix(Applicability.SAFE, "inner", (Edit(2, 3, "Y"),))
    later = Fix(Applicability.SAFE, "later", (Edit(6, 8, "Z"),))
    text, chosen = apply_fixes(src, [inner, later, outer])
    assert text == "aXZ" and chosen == [outer, later]


class UnsafeRemove(Rule):
    code = "KF995"
    reads = frozenset({Reads.STATEMENT})
    name = "test-unsafe-remove"
    message = "remove"
    fix_safety = Applicability.UNSAFE

    def visit_SimpleStatementLine(self, node):
        if "drop_me" in cst.Module([]).code_for_node(node):
            self.report(node, fix=self.make_fix(Remove(node)))


def test_unsafe_fixes_need_the_flag_and_remove_whole_lines():
    src = "import keras\nx = 1\ndrop_me()  # trailing\ny = 2\n"
    settings = LintSettings([UnsafeRemove])
    assert fix_source(src, "m.py", settings).source == src
    out = fix_source(src, "m.py", settings, unsafe=True)
    assert out.source == "import keras\nx = 1\ny = 2\n"


class AddsImport(Rule):
    code = "KF996"
    reads = frozenset({Reads.STATEMENT})
    name = "test-adds-import"
    message = "needs import"
    fix_safety = Applicability.SAFE

    def visit_Call(self, node):
        if isinstance(node.func, cst.Name) and node.func.value == "old":
            self.report(node, fix=self.make_fix(Replace(node.func, "mixed_precision.new"),
                                                imports=[("tensorflow.keras", "mixed_precision", None)]))


def test_fix_requested_imports_are_added_once():
    src = "import tensorflow as tf\n\nold()\nold()\n"
    out = fix_source(src, "m.py", LintSettings([AddsImport]))
    assert out.source.count("from tensorflow.keras import mixed_precision") == 1
    assert out.source.count("mixed_precision.new()") == 2
    assert fix_source(out.source, "m.py", LintSettings([AddsImport])).source == out.source


def test_fix_is_idempotent_on_kf101(kf101):
    out = fix_source(BAD, "m.py", kf101)
    assert out.source == GOOD and out.applied == 1 and out.diagnostics == []
    again = fix_source(out.source, "m.py", kf101)
    assert again.source == GOOD and again.applied == 0


# ---- report(once=True) -------------------------------------------------------------------------


def test_a_once_report_keeps_the_first_of_a_node_in_source_order():
    """Each statement reaching the shared width reports it; the engine keeps the first
    ``once`` report of the node (by source order), whatever else reports it."""

    @dataclass(frozen=True)
    class Reached(Finding):
        fn: str
        template = "reached from {fn}"

    @dataclass(frozen=True)
    class Plain(Finding):
        fn: str
        template = "plain from {fn}"

    class SharedWidth(Rule):
        code, name, message = "KF993", "shared-width", "shared"
        reads = frozenset({Reads.STATEMENT})

        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            width = self.ctx.module.body[0].body[0].value  # `W = 30`: the shared site
            self.report(width, Reached(node.name.value), once=True)
            self.report(width, Plain(node.name.value))

    src = "W = 30\n\n\ndef a():\n    return W\n\n\ndef b():\n    return W\n"
    got = [(d.finding, d.fields["fn"]) for d in lint_source(src, "m.py", LintSettings(rules=[SharedWidth])).diagnostics]
    assert sorted(got) == [("Plain", "a"), ("Plain", "b"), ("Reached", "a")]


def test_a_check_takes_the_ast_the_project_index_already_parsed(tmp_path):
    import ast

    from kerasfit.engine.parse import parse_guarded
    from kerasfit.semantic.index import ProjectIndex

    path = tmp_path / "m.py"
    text = "from tensorflow import keras\nx = keras.layers.Dense(3)\n"
    path.write_bytes(text.encode("utf-8"))
    index = ProjectIndex([tmp_path])
    facts = index.facts(path)
    assert facts is not None
    assert index.known_tree(str(path), text) is facts.tree
    assert index.known_tree(str(tmp_path / "other.py"), text) is None  # same text, another file
    assert index.known_tree(str(path), text + "y = 1\n") is None  # not the text parsed
    assert parse_guarded(text, str(path), known=facts.tree)[1] is facts.tree
    # the check with the index finds what it finds without it
    rules = list(all_rules().values())
    with_index = lint_source(text, str(path), LintSettings(rules, project=index)).diagnostics
    alone = lint_source(text, str(path), LintSettings(rules, project=ProjectIndex([tmp_path]))).diagnostics
    assert with_index and [d.code for d in with_index] == [d.code for d in alone]

    # a declared encoding: the file's bytes parse in it, the checked text is UTF-8, so the
    # index's tree (a different string here) is never taken
    coded = "# -*- coding: latin-1 -*-\ns = '\u00e9'\n"
    path.write_bytes(coded.encode("utf-8"))
    facts = index.facts(path)
    assert facts is not None
    assert ast.literal_eval(facts.tree.body[0].value) != "\u00e9"  # type: ignore[attr-defined]
    assert index.known_tree(str(path), coded) is None


def test_the_project_index_takes_the_ast_a_check_parsed(tmp_path):
    import ast

    from kerasfit.semantic.index import ProjectIndex

    path = tmp_path / "m.py"
    text = "import tensorflow as tf\n\ndef helper(x):\n    return tf.keras.layers.Dense(3)(x)\n"
    path.write_bytes(text.encode("utf-8"))
    index = ProjectIndex([tmp_path])
    lint_source(text, str(path), LintSettings(list(all_rules().values()), project=index))
    # the file's facts, asked for with its text or read from disk, are built on the check's
    # AST: the text is not parsed again
    offered = index._offered
    assert offered is not None and offered[0] == str(path)
    tree = offered[2]
    assert isinstance(tree, ast.Module)
    assert index.facts(path, source=text).tree is tree and index.facts(path).tree is tree
    assert index.reach_part(str(path)) is not None and index.reached_from_model(path, "helper")
    # only the last check's is kept (every file's AST at once would slow the collector)
    index.offer_tree(tmp_path / "n.py", "y = 2\n", ast.parse("y = 2\n"))
    assert index._offered is not None and index._offered[0] == str(tmp_path / "n.py")
    assert index.facts(path, source=text + "z = 3\n").tree is not tree
    # never for a text that declares its encoding (the file's bytes parse in it, the text as UTF-8)
    coded = "# -*- coding: latin-1 -*-\nimport tensorflow as tf\ns = '\u00e9'\n"
    other = tmp_path / "c.py"
    other.write_bytes(coded.encode("utf-8"))
    lint_source(coded, str(other), LintSettings(list(all_rules().values()), project=index))
    assert index._offered is None
