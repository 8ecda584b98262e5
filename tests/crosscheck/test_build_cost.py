"""The cost model on real builds (issue 28): a recurrent loop's slices, one HBM figure in
the layout the report uses, and one attention layer costed alike under Keras 3 and tf-keras.

Each test builds a real (small) model with real TensorFlow in the child process.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kerasfit.crosscheck.api import BuildOptions, run_child
from kerasfit.crosscheck.report import make_report

pytestmark = pytest.mark.build

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "crosscheck"
V5E_BANDWIDTH = 819e9  # bytes/s, docs/targets.md


@pytest.fixture(scope="module")
def gru_raw():
    return run_child(FIXTURES / "gru_sequence.py", BuildOptions(batch_size=32))


def test_a_gru_loop_moves_one_slice_per_trip_and_its_matmuls_cost_their_hand_sum(gru_raw):
    """64 steps of a GRU(256) over 128 features at batch 32, on tpu-v5e. By hand: every
    dynamic slice or update inside the loop reads and writes one [1, ...] slice of its
    stacked buffer per step (a 64th of it), in place; the cell's matmuls, every dim a
    whole 8x128 tile at this batch (docs/facts.md#1, #7), are memory-bound: per step
    x·W (32x128, 128x768 -> 32x768), h·U (32x256, 256x768 -> 32x768), their weight
    gradients (the same three arrays each) and h's gradient (32x768 · 768x256); x is the
    model's input, so no gradient of it is computed."""
    report = make_report(gru_raw, "tpu-v5e")
    loop = [m for m in gru_raw["mem_ops"] if m["opcode"] in ("dynamic-slice", "dynamic-update-slice")
            and m["trips"] == 64]
    assert len(loop) > 10
    for m in loop:
        buffer = m["operand_shapes"][0]
        assert buffer[0] == 64
        assert m["bytes"] == 2 * math.prod(buffer[1:]) * 4, m  # one slice in, one out; not the buffer
    rows = [r for r in report.rows if r.kind in ("dynamic-slice", "dynamic-update-slice")]
    assert sum(r.time for r in rows) == pytest.approx(
        sum(2 * math.prod(m["operand_shapes"][0]) * 4 for m in loop) / V5E_BANDWIDTH)
    xw = (32 * 128 + 128 * 768 + 32 * 768) * 4
    hu = (32 * 256 + 256 * 768 + 32 * 768) * 4
    dots = [r for r in report.rows if r.kind == "dot" and r.layer in ("gru", "gru_cell")]
    assert sum(r.time for r in dots) == pytest.approx(64 * (2 * xw + 3 * hu) / V5E_BANDWIDTH)
    # the slices are a part of the step, not the step (before: each one moved its buffer,
    # 64x a slice, on every trip — most of the step)
    assert sum(r.time for r in rows) < 0.5 * report.step_time
    assert report.step_time == pytest.approx(sum(r.time for r in report.rows))


def test_a_cnn_with_the_batch_on_the_lanes_needs_the_hbm_of_its_hand_sum():
    """keras_cnn.py at a per-core batch of 128: the activations' layout puts the batch on
    the 128 lanes and the channels on the 8 sublanes (docs/facts.md#1, #7). Hand sum of
    the forward activations the backward pass reads, float32, tiled that way:
    [128,32,32,3→4], [128,32,32,30→32], [128,16,16,30→32], [128,16,16,64], [128,64],
    [128,100→104] twice (the Dense and its ReLU), [128,10→16]; weights, their gradients
    and Adam's two slots as tiled float32 arrays (4 x 253,952 B). The expansion line
    divides the same activations by their real bytes."""
    raw = run_child(FIXTURES / "keras_cnn.py", BuildOptions(batch_size=128))
    report = make_report(raw, "tpu-v5e")
    assert report.common_batch == 128 and report.layout["forward"] == [128, 8]
    stored = 4 * 128 * (32 * 32 * 4 + 32 * 32 * 32 + 16 * 16 * 32 + 16 * 16 * 64 + 64 + 104 + 104 + 16)
    real = 4 * 128 * (32 * 32 * 3 + 32 * 32 * 30 + 16 * 16 * 30 + 16 * 16 * 64 + 64 + 100 + 100 + 10)
    hand = 4 * 253_952 + stored
    assert report.hbm["need"] == pytest.approx(hand, rel=0.10)
    assert report.hbm_expansion == pytest.approx(report.hbm["activations"] / real, rel=0.10)
    assert report.hbm["fits"]


@pytest.fixture(scope="module")
def attention_reports():
    return {name: make_report(run_child(FIXTURES / f"{name}.py", BuildOptions(batch_size=128)), "tpu-v5e")
            for name in ("mha_keras3", "mha_tf_keras")}


def _attention_rows(report):
    return [r for r in report.rows if "multi_head_attention" in r.layer or (r.source or {}).get("block")]


def test_keras3_and_tf_keras_attention_cost_the_same(attention_reports):
    """The same MultiHeadAttention block under Keras 3 and tf-keras: the same matmuls per
    pass, and the block's time and waste within 10% (before: Keras 3's projection weight
    gradients were batched matmuls summed over the batch, and its backward transposes were
    ranked as copies)."""
    k3, tk = attention_reports["mha_keras3"], attention_reports["mha_tf_keras"]
    for pass_ in ("forward", "input-gradient", "kernel-gradient"):
        a = sum(r.time for r in _attention_rows(k3) if r.kind == "dot" and r.pass_ == pass_)
        b = sum(r.time for r in _attention_rows(tk) if r.kind == "dot" and r.pass_ == pass_)
        assert a == pytest.approx(b, rel=0.10), pass_
    for attr in ("time", "wasted_time"):
        a = sum(getattr(r, attr) for r in _attention_rows(k3))
        b = sum(getattr(r, attr) for r in _attention_rows(tk))
        assert a == pytest.approx(b, rel=0.10), attr


def test_transposes_the_tpu_never_materialises_are_set_aside_not_ranked(attention_reports):
    for report in attention_reports.values():
        wasted = sum(r.wasted_time for r in report.rows)
        moved = sum(r.wasted_time for r in report.rows if r.kind == "transpose")
        assert moved <= 0.10 * wasted
        # what was set aside is said, with why
        for note in (n for n in report.notes if n.startswith("set aside")):
            assert "docs/facts.md#" in note
