"""Advice and verdicts on real small models built with TensorFlow: the recommendations
account for the report's top rows, and each verdict comes from the finding's own layer."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from kerasfit.project.check import CheckOptions, check_paths
from kerasfit.crosscheck.advice import NEGLIGIBLE
from kerasfit.crosscheck.records import TOP_ROWS
from kerasfit.project.buildstage import BuildRequest

pytestmark = pytest.mark.build

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "model.py"

CUSTOM_TRANSPOSE = '''\
    import tensorflow as tf
    from tensorflow import keras


    class ToChannelsFirst(keras.layers.Layer):
        def __init__(self, filters, **kwargs):
            super().__init__(**kwargs)
            self.conv = keras.layers.Conv2D(filters, 3, padding="same")

        def call(self, x):
            y = self.conv(x)
            y = tf.transpose(y, [0, 3, 1, 2])
            return tf.reduce_mean(tf.reshape(y, [-1, 32 * 16, 16]), axis=2)


    def build_model():
        inputs = keras.Input(shape=(16, 16, 8))
        x = ToChannelsFirst(32, name="to_cf")(inputs)
        outputs = keras.layers.Dense(10)(x)
        return keras.Model(inputs, outputs)
'''

TRANSFORMER = '''\
    from tensorflow import keras
    from tensorflow.keras import layers


    def build_model():
        inputs = keras.Input(shape=(64,), dtype="int32")
        x = layers.Embedding(1000, 64)(inputs)
        attn = layers.MultiHeadAttention(num_heads=4, key_dim=16)(x, x)
        x = layers.LayerNormalization()(x + attn)
        ff = layers.Dense(128, activation="relu")(x)
        ff = layers.Dense(64)(ff)
        x = layers.LayerNormalization()(x + ff)
        x = layers.GlobalAveragePooling1D()(x)
        outputs = layers.Dense(2)(x)
        return keras.Model(inputs, outputs)
'''


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERASFIT_CACHE_DIR", str(tmp_path / "cache"))


def report_json(kerasfit_cmd, path: Path, *args: str) -> dict:
    proc = subprocess.run([*kerasfit_cmd, "report", str(path), "--output-format", "json", *args],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def check_build(path: Path) -> list:
    result = check_paths([path], CheckOptions(build=BuildRequest(), isolated=True))
    assert not result.errors, [r.error for r in result.errors]
    return result.diagnostics


def assert_top_rows_accounted_for(data: dict) -> None:
    """Every top row with real waste is in a change's rows or says where it comes from."""
    wasted = sum(r["wasted_time"] for r in data["rows"])
    covered = {i for rec in data["recommendations"] for i in rec["rows"]}
    for i, row in enumerate(data["rows"][:TOP_ROWS], 1):
        if row["wasted_time"] > NEGLIGIBLE * wasted:
            assert i in covered, (i, row["layer"], [r["text"] for r in data["recommendations"]])


def test_bundled_example_recommends_both_pads_and_keras3_confirms_kf101(tmp_path, kerasfit_cmd):
    path = tmp_path / "model.py"
    shutil.copy(EXAMPLE, path)
    data = report_json(kerasfit_cmd, path)
    pad_rows = [i for i, r in enumerate(data["rows"], 1) if r["kind"] == "pad"]
    assert {data["rows"][i - 1]["layer"] for i in pad_rows} == {"block1_pad", "block2_pad"}
    changes = [r for r in data["recommendations"] if r["kind"] == "change"]
    (pads,) = [r for r in changes if set(pad_rows) <= set(r["rows"])]
    # the static KF103 finding on those rows is the recommendation, with its effect
    assert pads["code"] == "KF103" and "block1_pad" in pads["text"] and "block2_pad" in pads["text"]
    assert 0 < pads["step_time"] < data["step_time"] and pads["saved"] > 0
    assert f"{data['step_time'] * 1e6:.0f} µs → {pads['step_time'] * 1e6:.0f} µs" in pads["text"]
    assert_top_rows_accounted_for(data)
    # check --build: tf-keras built the model, Keras 3 refused `fused`: KF101 confirmed
    (kf101,) = [d for d in check_build(path) if d.code == "KF101"]
    assert kf101.build["status"] == "confirmed" and "fused" in kf101.build["detail"]


def test_transpose_in_a_custom_layers_call_confirms_kf107(tmp_path, kerasfit_cmd):
    path = tmp_path / "custom.py"
    path.write_text(textwrap.dedent(CUSTOM_TRANSPOSE))
    (kf107,) = [d for d in check_build(path) if d.code == "KF107"]
    assert kf107.row == 12
    assert kf107.build["status"] == "confirmed" and kf107.build["layer"] == "to_cf"
    # the report ranks the same transposes at the same line, and says what removing them saves
    data = report_json(kerasfit_cmd, path)
    rows = [i for i, r in enumerate(data["rows"], 1) if r["kind"] == "transpose" and r["layer"] == "to_cf"]
    assert rows and all(data["rows"][i - 1]["source"]["line"] == 12 for i in rows)
    (fix,) = [r for r in data["recommendations"] if set(rows) <= set(r["rows"])]
    assert fix["code"] == "KF107" and fix["saved"] > 0 and fix["source"]["line"] == 12
    assert_top_rows_accounted_for(data)


def test_multi_head_attention_rows_are_traced_to_the_block_and_its_arguments(tmp_path, kerasfit_cmd):
    path = tmp_path / "transformer.py"
    path.write_text(textwrap.dedent(TRANSFORMER))
    data = report_json(kerasfit_cmd, path)
    assert data["blocks"]["multi_head_attention"]["class"] == "MultiHeadAttention"
    inside = [i for i, r in enumerate(data["rows"][:TOP_ROWS], 1)
              if (r["source"] or {}).get("block") == "multi_head_attention"]
    assert inside, "the attention's rows are not the top ones any more: pick a model where they are"
    # The lever the user has: its arguments, at the line constructing it — fewer, larger
    # heads of the same total width, with what that does to the step ...
    (heads,) = [r for r in data["recommendations"] if r["kind"] == "change" and "num_heads=4" in r["text"]]
    assert heads["source"]["line"] == 8 and "key_dim=16 → num_heads=" in heads["text"]
    assert heads["step_time"] < data["step_time"] and heads["rows"]
    # the scores' softmax and its gradient (batch, 4 heads, 64, 64) shrink with the head count too
    assert "its attention matmuls re-simulated, its score-sized moves and fusions scaled" in heads["text"]
    # ... and where the rest of its rows come from, if the change leaves any: inside it,
    # named with its arguments.
    wheres = [r for r in data["recommendations"] if "inside `MultiHeadAttention`" in r["text"]]
    for where in wheres:
        assert where["kind"] == "origin" and where["source"]["line"] == 8 and "key_dim=16" in where["text"]
    assert set(inside) <= set(heads["rows"]) | {i for where in wheres for i in where["rows"]}
    assert_top_rows_accounted_for(data)
    text = subprocess.run([*kerasfit_cmd, "report", str(path)], capture_output=True, text=True,
                          timeout=600).stdout
    assert heads["text"] in text and all(where["text"] in text for where in wheres)


BLOCK_IN_A_CUSTOM_LAYER = '''\
    from tensorflow import keras
    from tensorflow.keras import layers


    class Block(layers.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.att = layers.MultiHeadAttention(num_heads=2, key_dim=32)
            self.ff = keras.Sequential([layers.Dense(96, activation="relu"), layers.Dense(64)])

        def call(self, x):
            x = x + self.att(x, x)
            return x + self.ff(x)


    def build_model():
        inputs = keras.Input(shape=(32, 64))
        x = Block()(inputs)
        x = layers.GlobalAveragePooling1D()(x)
        return keras.Model(inputs, layers.Dense(3)(x))
'''


def test_attention_inside_a_custom_layer_is_a_block_and_a_users_sequential_is_not(tmp_path, kerasfit_cmd):
    path = tmp_path / "block.py"
    path.write_text(textwrap.dedent(BLOCK_IN_A_CUSTOM_LAYER))
    data = report_json(kerasfit_cmd, path)
    # the Sequential holds the user's own Dense layers: they are the user's to change
    assert set(data["blocks"]) == {"multi_head_attention"}
    dense = [r for r in data["rows"] if r["layer"] in ("dense", "dense_1")]
    assert dense and not any((r["source"] or {}).get("block") for r in dense)
    (where,) = [r for r in data["recommendations"] if "inside `MultiHeadAttention`" in r["text"]]
    assert where["source"]["line"] == 8 and "key_dim=32" in where["text"]
    assert_top_rows_accounted_for(data)


def test_an_applications_model_is_a_block_and_gets_no_advice_to_edit_its_insides(tmp_path, kerasfit_cmd):
    path = tmp_path / "resnet.py"
    shutil.copy(ROOT / "fixtures" / "crosscheck" / "resnet50.py", path)
    data = report_json(kerasfit_cmd, path, "--entry", "build_small_model()", "--batch-size", "8")
    assert list(data["blocks"]) == ["resnet50"]
    # its ZeroPadding2D layers and widths are keras's: no change is offered for them ...
    assert not [r for r in data["recommendations"] if r["kind"] == "change" and r["source"]]
    # ... and its top rows say they are inside it, at the line that calls it
    inside = [r for r in data["recommendations"] if "inside `resnet50`" in r["text"]]
    assert inside and inside[0]["source"]["line"] == 9
    assert_top_rows_accounted_for(data)
