"""Hand-checked goldens: three small real models, every number worked out from docs/facts.md.

Each model is built with real TensorFlow at batch 16 on tpu-v5e (197 TFLOP/s, 819 GB/s,
float32 run as bf16 passes, so one peak). The HLO gives the shapes; everything else
below is computed by hand from the facts, written out, and compared with the report:

* the padding rule (kerasfit.core.types.pad_multiple, docs/facts.md#1–3, #8): at a common
  batch under 64, forward and input-gradient ops pad batch to 8 and every feature dim
  (kernels' too, fact 2's upper bound) to 128; kernel-gradient ops pad batch to 128 and
  features to 8. At 64 or more the other way round. A batched matmul (attention) streams
  its rows on 8 sublanes and pads both matrix dims to 128;
* fit = real work / padded work (fact 6); padded FLOPs = FLOPs / fit;
* HBM bytes: each array tiled on its two minor dims, 8 x 128 words, small 2 x 128 / 4 x
  128 tiles for a second-minor dim of 1–2 / 3–4 (fact 7); an activation's lane dim is
  its features at a small batch and its batch at a large one (fact 1); a kernel as laid out;
* time = max(padded FLOPs / 197e12, tiled bytes / 819e9); useful time the same with
  real FLOPs and real bytes; wasted = time - useful.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kerasfit.crosscheck.api import BuildOptions, run_child
from kerasfit.crosscheck.report import make_report

pytestmark = pytest.mark.build

GOLDENS = Path(__file__).resolve().parents[2] / "fixtures" / "crosscheck" / "goldens"
PEAK, HBM = 197e12, 819e9


def report_of(name: str):
    raw = run_child(GOLDENS / f"{name}.py", BuildOptions(batch_size=16, target="tpu-v5e"))
    return make_report(raw, target="tpu-v5e")


@pytest.fixture(scope="module")
def convnet():
    return report_of("convnet")


@pytest.fixture(scope="module")
def transformer():
    return report_of("transformer")


@pytest.fixture(scope="module")
def mobilenet():
    return report_of("mobilenet")


def the_op(report, layer: str, pass_: str, name: str = ""):
    found = [o for o in report.ops if o.layer == layer and o.pass_ == pass_ and name in o.name]
    assert found, f"no {pass_} op of {layer}: {sorted((o.layer, o.pass_) for o in report.ops)}"
    return found[0]


def check(op, dims, flops, padded_flops, tiled, real_bytes, bound):
    """One op against its hand-worked numbers."""
    assert op.dims == dims
    assert op.flops == flops
    assert op.padded_flops == pytest.approx(padded_flops)
    time = max(padded_flops / PEAK, tiled / HBM)
    useful = max(flops / PEAK, real_bytes / HBM)
    assert op.time == pytest.approx(time, rel=1e-6)
    assert op.useful_time == pytest.approx(useful, rel=1e-6)
    assert op.wasted_time == pytest.approx(time - useful, rel=1e-6, abs=1e-15)
    assert op.bound == bound


def no_costed_transposes(report):
    """Transposes and copies that only feed dot/conv operands, or move nothing, cost nothing
    (docs/facts.md#4): none is left as a row with time."""
    assert not [r for r in report.rows if r.kind in ("transpose", "copy") and r.time > 0]


# ---- a small conv net: Conv2D(16, 3) -> Conv2D(32, 1) -> Flatten -> Dense(8), 8x8x8 input

def test_conv_net_goldens(convnet):
    r = convnet
    assert r.common_batch == 16  # every conv runs at batch 16: the small-batch layout
    # c1 forward: 16x8x8x8 * 3x3x8x16. FLOPs 2*16*8*8*16 outputs * 9 taps * 8 = 2,359,296.
    # Features pad to 128: fit 8/128 * 16/128 = 1/128 -> 301,989,888 padded FLOPs (1.53 µs).
    # HBM: x 16x8x8x(8->128 lanes) 524,288 B; kernel 3x3x8x(16->128) 36,864 B; y 524,288 B
    # = 1,085,440 B (1.33 µs): MXU-bound. Real bytes 4*(8192 + 1152 + 16384) = 102,912.
    check(the_op(r, "c1", "forward"),
          {"batch": [16, 16], "in_features": [8, 128], "out_features": [16, 128]},
          2_359_296, 301_989_888, 1_085_440, 102_912, "MXU")
    # c2 forward, a 1x1 16 -> 32: 2*16*64*32*16 = 1,048,576 FLOPs, fit 16*32/128² = 1/32.
    # HBM: x 524,288 + kernel 16x(32->128) 8,192 + y 524,288 = 1,056,768 B: HBM-bound.
    # Real 4*(16384 + 512 + 32768) = 198,656 B.
    check(the_op(r, "c2", "forward"),
          {"batch": [16, 16], "in_features": [16, 128], "out_features": [32, 128]},
          1_048_576, 33_554_432, 1_056_768, 198_656, "HBM")
    # c2 input gradient: contracts over dy's 32 channels, produces 16: the same numbers.
    check(the_op(r, "c2", "input-gradient"),
          {"batch": [16, 16], "in_features": [32, 128], "out_features": [16, 128]},
          1_048_576, 33_554_432, 1_056_768, 198_656, "HBM")
    # c2 weight update: contracts over the batch, 16 -> 128; features pad to 8 (16, 32
    # unchanged): fit 1/8. Arrays as in the forward pass: 1,056,768 B.
    check(the_op(r, "c2", "kernel-gradient"),
          {"batch": [16, 128], "in_features": [16, 16], "out_features": [32, 32]},
          1_048_576, 8_388_608, 1_056_768, 198_656, "HBM")
    # c1 weight update: 2*(3*3*8*16)*(8*8 window)*16 = 2,359,296 FLOPs, fit 1/8.
    check(the_op(r, "c1", "kernel-gradient"),
          {"batch": [16, 128], "in_features": [8, 8], "out_features": [16, 16]},
          2_359_296, 18_874_368, 1_085_440, 102_912, "HBM")
    # d forward: 16x2048 . 2048x8: 524,288 FLOPs; 8 units pad to 128: fit 1/16.
    # HBM: x 16x2048 131,072 B; kernel 2048x(8->128) 1,048,576 B; y 16x(8->128) 8,192 B
    # = 1,187,840 B. Real 4*(32768 + 16384 + 128) = 197,120 B.
    check(the_op(r, "d", "forward"),
          {"batch": [16, 16], "in_features": [2048, 2048], "out_features": [8, 128]},
          524_288, 8_388_608, 1_187_840, 197_120, "HBM")
    check(the_op(r, "d", "input-gradient"),
          {"batch": [16, 16], "in_features": [8, 128], "out_features": [2048, 2048]},
          524_288, 8_388_608, 1_187_840, 197_120, "HBM")
    check(the_op(r, "d", "kernel-gradient"),
          {"batch": [16, 128], "in_features": [2048, 2048], "out_features": [8, 8]},
          524_288, 4_194_304, 1_187_840, 197_120, "HBM")
    # The first conv's input gradient is dead code: 8 ops, no more.
    assert len(r.ops) == 8
    no_costed_transposes(r)


# ---- a transformer: MultiHeadAttention(2 heads, key_dim 8) on 8 x 16, then Dense(16)

def test_transformer_goldens(transformer):
    r = transformer
    # No convolutions: the matmuls vote (docs/facts.md#5). 8 of them stream 16 x 8 = 128
    # token rows (q, k, v, output and ffn forward, two input gradients, ffn's weight update),
    # 6 attention einsums have batch 16 x 2 heads = 32, 4 weight updates batch 16: 128 wins,
    # the large-batch layout: forward batch -> 128, features -> 8; weight update inverse.
    assert r.common_batch == 128
    # query forward: 128x16 . 16x16 (the same cost as a 3-D dot: rows are batch x seq).
    # 2*128*16*16 = 65,536 FLOPs, nothing pads: fit 1. HBM: x 128x16 with the batch on the
    # lanes 8,192 B; kernel 16x(16->128) 8,192 B; y 8,192 B = 24,576 B; real 17,408 B.
    check(the_op(r, "query", "forward"),
          {"batch": [128, 128], "in_features": [16, 16], "out_features": [16, 16]},
          65_536, 65_536, 24_576, 17_408, "HBM")
    check(the_op(r, "ffn", "forward"),
          {"batch": [128, 128], "in_features": [16, 16], "out_features": [16, 16]},
          65_536, 65_536, 24_576, 17_408, "HBM")
    # ffn weight update: batch -> 8 (128 stays), both features 16 -> 128: fit 1/64.
    check(the_op(r, "ffn", "kernel-gradient"),
          {"batch": [128, 128], "in_features": [16, 128], "out_features": [16, 128]},
          65_536, 4_194_304, 24_576, 17_408, "HBM")
    # QK^T: batch 32 (16 x 2 heads), rows 8, contraction key_dim 8 -> 128, keys 8 -> 128:
    # fit 1/256; 2*16*2*8*8*8 = 32,768 FLOPs. HBM: Q 16x8x2x8 tiled on (2 -> 2-row tile,
    # 8 -> 128 lanes) 131,072 B, K the same, scores 16x2x8x(8->128) 131,072 B = 393,216 B.
    # Real 3 x 8,192 B.
    qk = [o for o in r.ops if o.layer == "mha" and o.pass_ == "forward"]
    assert len(qk) == 2
    for op in qk:
        check(op, {"rows": [8, 8], "in_features": [8, 128], "out_features": [8, 128], "batch": [32, 32]},
              32_768, 8_388_608, 393_216, 24_576, "HBM")
    # attention's backward einsums multiply activations by gradients: activation
    # gradients, never weight updates -- and the same numbers as the forward ones.
    back = [o for o in r.ops if o.layer == "mha" and o.pass_ != "forward"]
    assert len(back) == 4 and {o.pass_ for o in back} == {"input-gradient"}
    for op in back:
        check(op, {"rows": [8, 8], "in_features": [8, 128], "out_features": [8, 128], "batch": [32, 32]},
              32_768, 8_388_608, 393_216, 24_576, "HBM")
    # query's weight update: TF's batched matmul x^T . dy per example (batch 16), summed
    # over the batch, which XLA folds into one contraction over the batch's 16 x 8
    # positions (issue 28): exactly the ffn's weight update above, the same numbers.
    check(the_op(r, "query", "kernel-gradient"),
          {"batch": [128, 128], "in_features": [16, 128], "out_features": [16, 128]},
          65_536, 4_194_304, 24_576, 17_408, "HBM")
    # The einsums' transposes are layout-only or feed the dots: nothing costed.
    no_costed_transposes(r)
    assert not [r_ for r_ in r.rows if r_.kind == "transpose"]


# ---- a MobileNet-style net: 1x1 conv -> stride-2 depthwise 3x3 -> 1x1 conv -> GAP -> Dense

def test_depthwise_net_goldens(mobilenet):
    r = mobilenet
    assert r.common_batch == 16
    # pw1 forward: 16x8x8x8 . 1x1x8x16: 262,144 FLOPs, fit 8/128 * 16/128 = 1/128.
    # HBM: x 524,288 + kernel 8x(16->128) 4,096 + y 524,288 = 1,052,672 B; real 98,816 B.
    check(the_op(r, "pw1", "forward"),
          {"batch": [16, 16], "in_features": [8, 128], "out_features": [16, 128]},
          262_144, 33_554_432, 1_052_672, 98_816, "HBM")
    # The depthwise conv is VPU work (no contraction over channels): no MXU padding, its
    # time is its bytes. 2*16*4*4*16*9 = 73,728 FLOPs. HBM: x 16x8x8x(16->128) 524,288 B,
    # kernel 3x3x1x16 in a 2-row tile 3x3x2x128 9,216 B, y 16x4x4x(16->128) 131,072 B.
    dw = the_op(r, "dw", "forward")
    check(dw, {"batch": [16, 16], "in_features": [1, 1], "out_features": [16, 16]},
          73_728, 73_728, 664_576, 82_496, "HBM")
    assert dw.unit == "VPU" and dw.time == pytest.approx(664_576 / HBM)
    # Its stride-2 input gradient: the same 73,728 FLOPs, not 4x that with dy's dilation
    # zeros. HBM: dy 131,072 B, kernel 3x3x16x(1->128) 73,728 B, dx 524,288 B.
    check(the_op(r, "dw", "input-gradient"),
          {"batch": [16, 16], "in_features": [1, 1], "out_features": [16, 16]},
          73_728, 73_728, 729_088, 82_496, "HBM")
    check(the_op(r, "dw", "kernel-gradient"),
          {"batch": [16, 16], "in_features": [1, 1], "out_features": [16, 16]},
          73_728, 73_728, 664_576, 82_496, "HBM")
    # pw2 forward: 16x4x4x16 . 1x1x16x32: 262,144 FLOPs, fit 1/32. HBM 131,072 + 8,192 +
    # 131,072 = 270,336 B; real 51,200 B.
    check(the_op(r, "pw2", "forward"),
          {"batch": [16, 16], "in_features": [16, 128], "out_features": [32, 128]},
          262_144, 8_388_608, 270_336, 51_200, "HBM")
    check(the_op(r, "pw2", "kernel-gradient"),
          {"batch": [16, 128], "in_features": [16, 16], "out_features": [32, 32]},
          262_144, 2_097_152, 270_336, 51_200, "HBM")
    # d forward: 16x32 . 32x8: 8,192 FLOPs, fit 32/128 * 8/128 = 1/64. HBM 8,192 + 16,384
    # + 8,192 = 32,768 B; real 4*(512 + 256 + 128) = 3,584 B.
    check(the_op(r, "d", "forward"),
          {"batch": [16, 16], "in_features": [32, 128], "out_features": [8, 128]},
          8_192, 524_288, 32_768, 3_584, "HBM")
    # the step fit weighs only MXU work: the depthwise ops' FLOPs are not in it
    mxu = [o for o in r.ops if o.unit == "MXU"]
    assert r.step_fit == pytest.approx(sum(o.flops for o in mxu) / sum(o.padded_flops for o in mxu))
    no_costed_transposes(r)
