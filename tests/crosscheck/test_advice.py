"""Advice that can be taken (issue 28 item 5): one test per rule, on the captured step of
keras_cnn.py (fixtures/crosscheck/hlo) moved to other batches and chips. No TensorFlow."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kerasfit.core.types import GB, TARGETS
from kerasfit.crosscheck.advice import GAIN_FLOOR, _block_lever
from kerasfit.crosscheck.hlo import HloOp
from kerasfit.crosscheck.report import make_report
from kerasfit.crosscheck.simulator import with_batch

from test_report import raw_build  # the captured keras_cnn.py step at batch 16

CNN = Path(__file__).resolve().parents[2] / "fixtures" / "crosscheck" / "keras_cnn.py"
MB = 10**6


@pytest.fixture()
def model_file(tmp_path) -> Path:
    path = tmp_path / "keras_cnn.py"
    path.write_text(CNN.read_text())
    return path


def raw_at(path: Path, batch: int) -> dict:
    """The captured step with its per-core batch of 16 changed to ``batch``."""
    raw = raw_build(path)
    meta = {d["name"]: d for d in raw["ops"]}
    ops = [HloOp.from_dict({k: v for k, v in d.items() if k not in ("layer", "source")}) for d in raw["ops"]]
    out = []
    for op in with_batch(ops, 16, batch):
        d = op.to_dict()
        d["layer"], d["source"] = meta[op.name]["layer"], meta[op.name]["source"]
        out.append(d)
    raw.update(ops=out, per_core_batch=batch, global_batch=batch, outputs=[[batch, 10]])
    return raw


def chip_of(monkeypatch, base: str, capacity: int):
    chip = dataclasses.replace(TARGETS[base], name=f"{base}-small", hbm_bytes=capacity)
    monkeypatch.setitem(TARGETS, chip.name, chip)
    return chip.name


def batch_changes(report):
    return [r for r in report.recommendations if r.is_change and r.raises == "batch"]


def test_the_best_batch_not_fitting_offers_the_largest_that_does(model_file, monkeypatch):
    # At batch 8 the step needs ~11.5 MB, at 16 ~22 MB, at 24 ~33 MB and at 128 (the
    # fastest per example) ~33 MB: on a 25 MB chip 16 is the largest that fits
    raw = raw_at(model_file, 8)
    (roomy,) = batch_changes(make_report(raw, "tpu-v5e"))
    assert "per-core batch 8 → 128" in roomy.text and "largest" not in roomy.text
    small = chip_of(monkeypatch, "tpu-v5e", 25 * MB)
    report = make_report(raw, small)
    (change,) = batch_changes(report)
    assert "per-core batch 8 → 16, the largest that fits in HBM (per-core batch 128 would save more" in change.text
    assert change.saved > GAIN_FLOOR * report.step_time  # with its own gain
    assert "more than the chip has" not in change.text


@pytest.mark.parametrize("batch, nearest", [(20, {16, 24, 128}), (130, {128, 136, 256})])
def test_an_odd_batch_gets_the_nearest_multiple_with_its_gain(model_file, batch, nearest):
    report = make_report(raw_at(model_file, batch), "tpu-v5e")
    (change,) = batch_changes(report)
    new = int(change.text.split("→ ")[1].split()[0].rstrip(","))
    assert new in nearest and change.saved > 0
    assert f"per-core batch {batch} → {new}" in change.text


def test_a_batch_already_a_whole_multiple_gets_no_batch_advice(model_file):
    assert not batch_changes(make_report(raw_at(model_file, 128), "tpu-v5e"))


def test_no_advice_gains_nothing(model_file):
    for target in ("tpu-v5e", "gpu", "tpu-v6e"):
        report = make_report(raw_build(model_file), target)
        for r in report.recommendations:
            if r.is_change:
                assert r.saved > GAIN_FLOOR * report.step_time, r.text


def test_a_lever_whose_precondition_holds_is_not_offered():
    v5e = TARGETS["tpu-v5e"]
    mha = {"class": "MultiHeadAttention", "config": {"num_heads": 2, "key_dim": 128}}
    lever = _block_lever(mha, v5e, {256})
    assert "key_dim" not in lever and "sequence length" not in lever  # 128 and 256 already fill it
    lever = _block_lever({"class": "MultiHeadAttention", "config": {"num_heads": 4, "key_dim": 32}}, v5e, {100})
    assert "key_dim) that is a multiple of 128" in lever and "fewer heads" in lever and "sequence length" in lever


def test_a_task_sized_head_is_never_a_change(model_file):
    # On a GPU the float32 Dense(10) head misses TF32's multiple of 4: rounding it would
    # gain, but its width is the task's (10 classes), output layer or not.
    raw = raw_build(model_file)
    raw["output_layers"] = []  # the build did not say which layer is the output
    report = make_report(raw, "gpu")
    assert not [r for r in report.recommendations if r.is_change and "dense_1" in r.text]
    # a hidden layer of a width off the multiple is still advice
    assert any(r.is_change and "conv2d (" in r.text and "30 → 32" in r.text for r in report.recommendations)


def test_rows_the_batch_pads_name_the_batch_change(model_file, monkeypatch):
    # batch 16 pads to 128 in the weight updates (docs/facts.md#1): with room, the batch
    # change covers those rows; on a chip where no larger batch fits, the row says the
    # batch is the lever and why it is not offered
    report = make_report(raw_build(model_file), "tpu-v5e")
    (change,) = batch_changes(report)
    batch_rows = [i for i, r in enumerate(report.rows[:5], 1) if r.why and r.why[0].startswith("batch 16→128")]
    named = {i for r in report.recommendations if not r.is_change and "see the per-core batch change above" in r.text
             for i in r.rows}
    assert batch_rows and set(batch_rows) <= set(change.rows) | named
    tiny = chip_of(monkeypatch, "tpu-v5e", 23 * MB)  # 16 fits (~22 MB), 24 does not
    report = make_report(raw_build(model_file), tiny)
    assert not batch_changes(report)
    origins = [r for r in report.recommendations if not r.is_change and "16 is the per-core batch" in r.text]
    assert origins and all("the batch is yours, but no larger per-core batch fits in HBM" in r.text for r in origins)


def test_a_wider_layer_that_does_not_fit_says_the_largest_batch_that_does(model_file, monkeypatch):
    # on a GPU 30 float32 filters -> 32 gains; on a chip just big enough for the step as
    # it is, the wider layer's step does not fit at batch 16: the advice says what does
    raw = raw_build(model_file)
    need = make_report(raw, "gpu").hbm["need"]
    snug = chip_of(monkeypatch, "gpu", need + 1000)
    (change,) = [r for r in make_report(raw, snug).recommendations if r.is_change and "30 → 32" in r.text]
    assert "more than the chip has: with it, the largest per-core batch that fits is 8" in change.text
    assert GB  # the chips' capacities are in GB elsewhere; here in bytes


def test_max_pooling_whose_gradient_a_gpu_prices_high_is_a_change(model_file):
    # keras_cnn.py's MaxPooling2D: on a GPU its gradient's select-and-scatter takes 26x its
    # bytes' time (docs/facts.md#27) and average pooling has none; a TPU prices it by its
    # bytes, so there is nothing to gain there
    raw = raw_build(model_file)
    (scatter,) = [m for m in raw["mem_ops"] if m["opcode"] == "select-and-scatter"]
    scatter["layer"] = "max_pooling2d"
    scatter["source"] = {"file": str(model_file), "line": 10, "end_line": 10, "column": 8, "end_column": 31}
    gpu = make_report(raw, "gpu")
    (pool,) = [r for r in gpu.recommendations if r.is_change and "select-and-scatter" in r.text]
    assert pool.source["line"] == 10 and pool.saved > 0 and "average pooling" in pool.text
    tpu = make_report(raw, "tpu-v5e")
    assert not [r for r in tpu.recommendations if "select-and-scatter" in r.text]
