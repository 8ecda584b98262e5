"""A safe fix keeps the model identical: every safe fix that fires on fixtures/ and on
the rule examples that build is checked by building the model before and after the
fix with the same weights and input, and comparing the outputs numerically."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

np = pytest.importorskip("numpy", reason="the build extra (TensorFlow, NumPy) is not installed")

from kerasfit.project.check import settings_for
from kerasfit.crosscheck.api import BuildOptions, run_child
from kerasfit.engine.settings import LintSettings
from kerasfit.engine.fix import fix_source
from kerasfit.engine.registry import all_rules
from kerasfit.ruleapi.rule import Invalid

pytestmark = pytest.mark.build

ROOT = Path(__file__).resolve().parents[2]
DISCOVERABLE = re.compile(r"^def (build_model|create_model|get_model|make_model)\(\)", re.M)
# Fixtures whose model is built through another function (an --entry).
ENTRIES = {
    # the fixes are in res_block; the models take images of any size, so build the
    # block alone on an odd-sized input
    "keras3/super_resolution.py": ["keras.Model(*(lambda i: (i, res_block(i, 8)))(keras.Input((11, 13, 8))))"],
    # a subclassed model: call it once on an odd-sized image so it has an input shape
    "keras3/subclassed_classifier.py": ["(lambda m: (m(keras.ops.zeros((1, 45, 45, 3))), m)[1])(make_model())"],
}
# TF1 graph code: build this function on placeholders of these shapes (odd sizes on
# purpose: 'same' and an explicit pad differ there when they are not equivalent).
TF1_GRAPHS = {
    "tf1/lowlevel_graph.py": ("stem", [(2, 9, 9, 3), (2, 8, 8, 3)]),
    # a graph built at import, on its own placeholders: run this tensor, feeding them all
    "project/gaudi_conv.py": ("module:features", []),
}


def _safe_fix(source: str, settings: LintSettings, name: str) -> str | None:
    out = fix_source(source, name, settings)
    assert out.error is None, out.error
    return out.source if out.source != source else None


def _fixture_cases():
    for path in sorted((ROOT / "fixtures").rglob("*.py")):
        if path.name.endswith((".fixed.py", ".unsafe.py")) or "hlo" in path.parts:
            continue
        source = path.read_text()
        fixed = _safe_fix(source, settings_for(path).lint_settings(), str(path))
        if fixed is None:
            continue
        rel = path.relative_to(ROOT / "fixtures").as_posix()
        if rel in TF1_GRAPHS:
            yield pytest.param(source, fixed, None, TF1_GRAPHS[rel], id=rel)
            continue
        entries = ENTRIES.get(rel, [None])
        for entry in entries:
            yield pytest.param(source, fixed, entry, None, id=f"{rel}:{entry if entry and entry.isidentifier() else 'built'}")


def _example_cases():
    for code, rule in sorted(all_rules().items()):
        for i, ex in enumerate(rule.INVALID):
            if not isinstance(ex, Invalid) or ex.expected_fix is None or ex.unsafe or not DISCOVERABLE.search(ex.code):
                continue
            yield pytest.param(ex.code, ex.expected_fix, None, None, id=f"{code}-invalid-{i}")


FIXTURES = list(_fixture_cases())
EXAMPLES = list(_example_cases())


def test_the_safe_fixes_are_all_covered():
    """Every fixture file with a safe fix is built here, none silently skipped."""
    ids = {p.id.split(":")[0] for p in FIXTURES}
    assert ids >= {"crosscheck/zeropad_conv.py", "keras3/subclassed_classifier.py", "keras3/super_resolution.py",
                   "tf1/lowlevel_graph.py", "tf_keras/resnet_functional.py"}
    assert {p.id.split("-")[0] for p in EXAMPLES} >= {"KF101", "KF103"}


def _outputs(path: Path, entry: str | None, weights: Path, out: Path) -> list[np.ndarray]:
    run_child(path, BuildOptions(batch_size=2, entry=entry, use_cache=False, timeout=300),
              probe_weights=str(weights), probe_outputs=str(out))
    with np.load(out) as data:
        return [data[f"arr_{i}"] for i in range(len(data.files))]


_TF1_HARNESS = textwrap.dedent(
    """
    import importlib.util, json, sys
    import numpy as np
    import tensorflow.compat.v1 as tf
    tf.disable_v2_behavior()
    path, fn, shapes, out = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
    spec = importlib.util.spec_from_file_location("m", path)
    mod = importlib.util.module_from_spec(spec)
    results = []
    if fn.startswith("module:"):
        g = tf.Graph()
        with g.as_default():
            tf.set_random_seed(0)
            spec.loader.exec_module(mod)
            feeds = {}
            for k, op in enumerate(o for o in g.get_operations() if o.type == "Placeholder"):
                t = op.outputs[0]
                feeds[t] = np.random.RandomState(k).standard_normal(t.shape.as_list()).astype(np.float32)
            with tf.Session() as s:
                s.run(tf.global_variables_initializer())
                results.append(s.run(getattr(mod, fn[len("module:"):]), feeds))
        np.savez(out, *results)
        sys.exit(0)
    spec.loader.exec_module(mod)
    for k, shape in enumerate(shapes):
        g = tf.Graph()
        with g.as_default():
            tf.set_random_seed(0)  # the same initial weights before and after the fix
            x = tf.placeholder(tf.float32, shape)
            with tf.variable_scope(f"case{k}"):
                y = getattr(mod, fn)(x)
            with tf.Session() as s:
                s.run(tf.global_variables_initializer())
                feed = np.random.RandomState(k).standard_normal(shape).astype(np.float32)
                results.append(s.run(y, {x: feed}))
    np.savez(out, *results)
    """
)


def _tf1_outputs(path: Path, fn: str, shapes, out: Path) -> list[np.ndarray]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "TF_USE_LEGACY_KERAS": "1"}
    subprocess.run([sys.executable, "-c", _TF1_HARNESS, str(path), fn, json.dumps(shapes), str(out)],
                   check=True, env=env, capture_output=True, timeout=300)
    with np.load(out) as data:
        return [data[f"arr_{i}"] for i in range(len(data.files))]


@pytest.mark.parametrize("before,after,entry,tf1", FIXTURES + EXAMPLES)
def test_safe_fix_keeps_outputs_identical(before, after, entry, tf1, tmp_path: Path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    src_a, src_b = tmp_path / "a" / "model.py", tmp_path / "b" / "model.py"
    src_a.write_text(before)
    src_b.write_text(after)
    if tf1 is not None:
        fn, shapes = tf1
        old = _tf1_outputs(src_a, fn, shapes, tmp_path / "before.npz")
        new = _tf1_outputs(src_b, fn, shapes, tmp_path / "after.npz")
    else:
        weights = tmp_path / "weights.npz"  # written by the first build, loaded by the second
        old = _outputs(src_a, entry, weights, tmp_path / "before.npz")
        new = _outputs(src_b, entry, weights, tmp_path / "after.npz")
    assert len(old) == len(new) > 0
    for a, b in zip(old, new):
        assert a.shape == b.shape
        # the same math; a fused kernel may sum in another order
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


# KF105 on a one-element concat of something that is not provably a tensor (issue 17,
# item 2): `tf.concat([v], 0)` -> `v` made a Variable's copy an alias (2.0, not 1.0, after
# an assign_add) and left a list a list (`* 2` repeats it instead of doubling). The fixed
# source is what the rule writes today, so a fix that changes the numbers fails here.
MEANING = {
    "variable-copy": """
        import keras
        import tensorflow as tf

        def build_model():
            v = tf.Variable([1.0])
            snapshot = tf.concat([v], 0)
            v.assign_add([1.0])
            inp = keras.Input((3,))
            return keras.Model(inp, keras.layers.Rescaling(float(snapshot[0]))(keras.layers.Dense(2)(inp)))
        """,
    "list-of-tensors": """
        import keras
        import tensorflow as tf

        def build_model():
            parts = [tf.ones((3,)), 2.0 * tf.ones((3,))]
            stacked = tf.concat([parts], 0)
            scale = float(tf.reduce_mean(stacked * 2))
            inp = keras.Input((3,))
            return keras.Model(inp, keras.layers.Rescaling(scale)(keras.layers.Dense(2)(inp)))
        """,
}


@pytest.mark.parametrize("case", sorted(MEANING))
def test_a_one_element_concat_fix_keeps_a_variables_copy_and_a_lists_tensor(case, tmp_path: Path):
    before = textwrap.dedent(MEANING[case])
    settings = LintSettings([all_rules()["KF105"]])
    after = _safe_fix(before, settings, "model.py")
    assert after is not None and "tf.concat" not in after  # the safe fix fired
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "model.py").write_text(before)
    (tmp_path / "b" / "model.py").write_text(after)
    weights = tmp_path / "weights.npz"
    old = _outputs(tmp_path / "a" / "model.py", None, weights, tmp_path / "before.npz")
    new = _outputs(tmp_path / "b" / "model.py", None, weights, tmp_path / "after.npz")
    assert len(old) == len(new) > 0
    for a, b in zip(old, new):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_fused_true_after_a_dense_breaks_the_model_so_it_is_not_safe(tmp_path: Path):
    """Why KF101's tf-keras fix is unsafe without a proven rank: the issue's reproducer."""
    from kerasfit.crosscheck.api import BuildError

    (ex,) = [e for e in all_rules()["KF101"].INVALID if "Dense(64)" in e.code]
    assert ex.unsafe and fix_source(ex.code, "m.py", LintSettings([all_rules()["KF101"]])).source == ex.code
    before, after = tmp_path / "before.py", tmp_path / "after.py"
    before.write_text(ex.code)
    after.write_text(ex.expected_fix)
    run_child(before, BuildOptions(batch_size=2, entry="build", use_cache=False))  # builds
    with pytest.raises(BuildError, match="4D or 5D"):
        run_child(after, BuildOptions(batch_size=2, entry="build", use_cache=False))
