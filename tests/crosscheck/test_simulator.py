"""The padding simulator, table-driven from docs/facts.md section A. No TensorFlow."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from kerasfit.crosscheck.hlo import FORWARD, INPUT_GRAD, KERNEL_GRAD, HloOp
from kerasfit.crosscheck.simulator import (
    layout,
    most_common_batch,
    pad_to,
    simulate,
    simulate_op,
    tiled_bytes,
    with_batch,
    with_features,
)
from kerasfit.core.types import TARGETS


def conv(pass_: str, batch: int, cin: int, cout: int, hw: int = 8, k: int = 3, name: str = "c") -> HloOp:
    """A 2-D NHWC convolution as TF lowers it for each pass (dim_labels as in real HLO)."""
    if pass_ == KERNEL_GRAD:
        # f01b_i01o->01bf: x^T (batch contracted) with dy, producing the kernel.
        lhs, rhs, out = [batch, hw, hw, cin], [batch, hw, hw, cout], [k, k, cin, cout]
        roles = {"lhs": {"m": [3], "k": [0]}, "rhs": {"k": [0], "n": [3]}, "out": {"m": [2], "n": [3]}}
        m, kk, n, labels, window = cin, batch, cout, "f01b_i01o->01bf", hw * hw
    else:
        lhs, rhs, out = [batch, hw, hw, cin], [k, k, cin, cout], [batch, hw, hw, cout]
        roles = {"lhs": {"m": [0], "k": [3]}, "rhs": {"k": [2], "n": [3]}, "out": {"m": [0], "n": [3]}}
        m, kk, n, labels, window = batch, cin, cout, "b01f_01io->b01f", k * k
    flops = 2 * math.prod(out) * window * kk
    return HloOp(name=f"{name}.{pass_}", opcode="convolution", op_type="Conv2D", op_name=name,
                 dtype="f32", shape=out, lhs_shape=lhs, rhs_shape=rhs, lhs=f"{name}.in",
                 rhs=f"{name}.w", roles=roles, m=m, k=kk, n=n, flops=flops, dim_labels=labels,
                 pass_=pass_)


def train_step(batch: int, cin: int, cout: int, name: str = "c") -> list[HloOp]:
    return [conv(p, batch, cin, cout, name=name) for p in (FORWARD, INPUT_GRAD, KERNEL_GRAD)]


V5E, V6E, GPU = TARGETS["tpu-v5e"], TARGETS["tpu-v6e"], TARGETS["gpu"]


@pytest.mark.parametrize(
    "n, multiple, padded",
    [(16, 128, 128), (128, 128, 128), (129, 128, 256), (3, 8, 8), (1, 8, 8), (30, 8, 32), (100, 256, 256)],
)
def test_pad_to(n, multiple, padded):
    assert pad_to(n, multiple) == padded


# docs/facts.md#1: the most common conv batch picks 8 vs 128 per pass; v6e's MXU is 256
# (fact 8); a GPU pads channels to 8 (fact 18).
@pytest.mark.parametrize(
    "pass_, common, target, expected",
    [
        (FORWARD, 128, V5E, (128, 8)),
        (INPUT_GRAD, 64, V5E, (128, 8)),
        (KERNEL_GRAD, 128, V5E, (8, 128)),
        (FORWARD, 16, V5E, (8, 128)),
        (INPUT_GRAD, 63, V5E, (8, 128)),
        (KERNEL_GRAD, 16, V5E, (128, 8)),
        # v6e tiles 8x128 like every TPU; only the MXU-facing feature dim is 256.
        (KERNEL_GRAD, 16, V6E, (128, 8)),
        (FORWARD, 256, V6E, (128, 8)),
        (FORWARD, 16, V6E, (8, 256)),
        # A GPU never pads the batch, and float32 channels not at all (fact 18).
        (FORWARD, 16, GPU, (1, 1)),
    ],
)
def test_layout(pass_, common, target, expected):
    assert layout(pass_, common, target) == expected
    if target is GPU:
        assert layout(pass_, common, target, "bfloat16") == (1, 8)


@pytest.mark.parametrize(
    "batches, expected",
    [([16, 16, 128], 16), ([16, 128, 128], 128), ([16, 128], 128), ([], None), ([0, 0], None)],
)
def test_most_common_batch(batches, expected):
    assert most_common_batch(batches) == expected


# Per-op fit = useful / padded work (docs/facts.md#6).
@pytest.mark.parametrize(
    "case, op, common, fit, batch, cin, cout",
    [
        # The profiler guide's example: batch 16 -> 128 and feature 3 -> 8: ~5%.
        ("guide 16x3 of 128x8", conv(KERNEL_GRAD, 16, 3, 64), 16, 16 * 3 / (128 * 8), (16, 128), (3, 8), (64, 64)),
        # The U-Net case: "16*1 out of 128*8" of the last 1x1 conv's weight update.
        ("unet 16x1 of 128x8", conv(KERNEL_GRAD, 16, 16, 1, k=1), 16, 16 * 1 / (128 * 8), (16, 128), (16, 16), (1, 8)),
        # Large batch, aligned channels: nothing wasted.
        ("aligned", conv(FORWARD, 128, 64, 128), 128, 1.0, (128, 128), (64, 64), (128, 128)),
        # 30 filters pad to 32 in a large-batch forward pass ...
        ("30 filters fwd", conv(FORWARD, 128, 32, 30), 128, 30 / 32, (128, 128), (32, 32), (30, 32)),
        # ... and to 128 in its weight update, which pads features to 128 at a large batch:
        # both kernel dims pad like the pass's features (the padding rule's bound of
        # docs/facts.md#2, kerasfit.core.types.KERNEL_BOUND). Before: 30 -> 32, 93.75%.
        ("30 filters kgrad", conv(KERNEL_GRAD, 128, 128, 30), 128, 30 / 128, (128, 128), (128, 128), (30, 128)),
        # Small batch: the forward pass pads features to 128, in and out alike: 25%.
        ("small batch fwd", conv(FORWARD, 16, 64, 64), 16, 0.25, (16, 16), (64, 128), (64, 128)),
        # Its input gradient contracts over the 64 filters (dy's channels): 64 -> 128.
        ("small batch igrad", conv(INPUT_GRAD, 16, 64, 64), 16, 0.25, (16, 16), (64, 128), (64, 128)),
    ],
)
def test_op_fit(case, op, common, fit, batch, cin, cout):
    s = simulate_op(op, common, V5E)
    assert s.fit == pytest.approx(fit), case
    assert s.dims == {"batch": batch, "in_features": cin, "out_features": cout}
    assert s.padded_flops == pytest.approx(op.flops / fit)


def test_guide_example_is_about_five_percent():
    s = simulate_op(conv(KERNEL_GRAD, 16, 3, 64), 16, V5E)
    assert round(s.fit * 100) == 5


def test_unet_worst_tensor_is_the_gradient_of_the_single_channel_output():
    s = simulate_op(conv(KERNEL_GRAD, 16, 16, 1, hw=64, k=1), 16, V5E)
    assert s.tensor == "rhs"
    assert (s.shape, s.padded_shape) == ([16, 64, 64, 1], [128, 64, 64, 8])
    assert s.fit == pytest.approx(0.015625)


def test_step_fit_is_flop_weighted():
    ops = train_step(128, 64, 128, "a") + train_step(128, 30, 30, "b")
    sim = simulate(ops, "tpu-v5e")
    useful = sum(s.flops for _, s in sim.ops)
    padded = sum(s.flops / s.fit for _, s in sim.ops)
    assert sim.step_fit == pytest.approx(useful / padded)
    assert 0 < sim.step_fit < 1


def test_common_batch_comes_from_convolutions_and_kernel_gradients_count_their_batch():
    ops = train_step(16, 64, 64)
    assert simulate(ops).common_batch == 16
    dot = HloOp(name="d", opcode="dot", op_type="MatMul", op_name="d", dtype="f32", shape=[512, 10],
                lhs_shape=[512, 64], rhs_shape=[64, 10], lhs="x", rhs="w",
                roles={"lhs": {"m": [0], "k": [1]}, "rhs": {"k": [0], "n": [1]}, "out": {"m": [0], "n": [1]}},
                m=512, k=64, n=10, flops=2 * 512 * 64 * 10, pass_=FORWARD)
    # A matmul with another batch does not change the convolutions' vote.
    assert simulate(ops + [dot, dot, dot, dot]).common_batch == 16
    # Without convolutions the matmuls decide (docs/facts.md#5).
    assert simulate([dot]).common_batch == 512


def with_dtype(ops: list[HloOp], dtype: str) -> list[HloOp]:
    for op in ops:
        op.dtype = dtype
    return ops


def test_v6e_forward_conv_at_large_batch_pads_like_v5e():
    # Hand-computed: batch 128 (a multiple of 128 lanes), 64 -> 96 channels (multiples
    # of 8): nothing pads on v6e either. Before: batch padded to 256, fit 50%.
    s = simulate_op(conv(FORWARD, 128, 64, 96), 128, V6E)
    assert s.dims == {"batch": (128, 128), "in_features": (64, 64), "out_features": (96, 96)}
    assert s.fit == 1.0
    # The weight update pads its features to the MXU's 256, both kernel dims: 25%;
    # forward and input-gradient 100%: 3F / (F + F + 4F) = 50%.
    assert simulate(train_step(128, 128, 128), "tpu-v6e").step_fit == pytest.approx(0.5)
    assert simulate(train_step(128, 256, 256), "tpu-v6e").step_fit == pytest.approx(1.0)


def test_v6e_small_batch_pads_features_to_the_256_wide_mxu():
    # Per-core batch 16: forward batch 16 -> 16 (8 sublanes), features face the MXU:
    # 3 -> 256 and 64 -> 256. Fit = 3/256 x 64/256.
    s = simulate_op(conv(FORWARD, 16, 3, 64), 16, V6E)
    assert s.dims == {"batch": (16, 16), "in_features": (3, 256), "out_features": (64, 256)}
    assert s.fit == pytest.approx(3 / 256 * 64 / 256)
    assert "in-channels 3→256" in s.why


def test_gpu_pads_16_bit_channels_to_8_and_computes_whole_kernel_tiles():
    # float32: XLA pads nothing, but the kernels compute whole tiles: 30 -> 32 (docs/facts.md#27)
    ops = train_step(16, 30, 30)
    assert simulate(ops, "gpu").step_fit == pytest.approx(30 * 30 / (32 * 32))
    # 16-bit: 30 -> 32 (XLA's pad to 8) is a whole 32-wide tile; 100 -> 104 -> two 64-wide tiles
    bf16 = with_dtype(train_step(16, 30, 30), "bf16")
    assert simulate(bf16, "gpu").step_fit == pytest.approx(30 * 30 / (32 * 32))
    s = simulate_op(with_dtype([conv(FORWARD, 16, 100, 100)], "bf16")[0], 16, GPU)
    assert s.dims["in_features"] == (100, 128) and s.dims["out_features"] == (100, 128)
    assert s.dims["batch"] == (16, 16)  # the batch is never padded on a GPU


def test_gaudi_has_its_own_rule_not_the_tpu_batch_flip():
    gaudi = TARGETS["gaudi"]
    # fp32: matmul dims to 64, batch untouched (no per-core-batch flip).
    s = simulate_op(conv(KERNEL_GRAD, 16, 16, 1, k=1), 16, gaudi)
    assert s.dims == {"batch": (16, 16), "in_features": (16, 64), "out_features": (1, 64)}
    s = simulate_op(with_dtype([conv(FORWARD, 16, 100, 100)], "bf16")[0], 16, gaudi)
    assert s.dims == {"batch": (16, 16), "in_features": (100, 128), "out_features": (100, 128)}


def depthwise(pass_: str, batch: int, channels: int, hw: int = 16, k: int = 3) -> HloOp:
    """A DepthwiseConv2D as TF lowers it (shapes and labels copied from real HLO)."""
    if pass_ == KERNEL_GRAD:
        # f01b_i01o->01bf with batch_group_count = channels
        return HloOp(name="dw.k", opcode="convolution", op_type="DepthwiseConv2dNativeBackpropFilter",
                     op_name="dw", dtype="f32", shape=[k, k, 1, channels],
                     lhs_shape=[batch, hw, hw, channels], rhs_shape=[batch, hw, hw, channels],
                     lhs="x", rhs="dy",
                     roles={"lhs": {"m": [3], "k": [0]}, "rhs": {"k": [0], "n": [3]}, "out": {"m": [2], "n": [3]}},
                     m=1, k=batch, n=channels, flops=2 * k * k * channels * batch * hw * hw,
                     dim_labels="f01b_i01o->01bf", batch_group_count=channels, pass_=pass_)
    return HloOp(name="dw.f", opcode="convolution", op_type="DepthwiseConv2dNative", op_name="dw",
                 dtype="f32", shape=[batch, hw, hw, channels], lhs_shape=[batch, hw, hw, channels],
                 rhs_shape=[k, k, 1, channels], lhs="x", rhs="w",
                 roles={"lhs": {"m": [0], "k": [3]}, "rhs": {"k": [2], "n": [3]}, "out": {"m": [0], "n": [3]}},
                 m=batch, k=1, n=channels, flops=2 * batch * hw * hw * channels * k * k,
                 dim_labels="b01f_01io->b01f", feature_group_count=channels, pass_=pass_)


def test_depthwise_conv_has_no_contraction_over_channels():
    # Hand-computed, batch 128 (large): forward batch 128 -> 128, channels 32 -> 32 (8),
    # no in-channel padding: fit 100%. Before: in-features 1 -> 8, fit 12.5%.
    s = simulate_op(depthwise(FORWARD, 128, 32), 128, V5E)
    assert s.dims == {"batch": (128, 128), "in_features": (1, 1), "out_features": (32, 32)}
    assert s.fit == 1.0
    # Its weight update is per-channel too: vector-unit work, nothing padded for the
    # MXU (before: channels 32 -> 128, a 25% "MXU fit").
    s = simulate_op(depthwise(KERNEL_GRAD, 128, 32), 128, V5E)
    assert s.dims == {"batch": (128, 128), "in_features": (1, 1), "out_features": (32, 32)}
    assert s.fit == 1.0 and s.unit == "VPU"
    assert any(w.startswith("depthwise: VPU work") for w in s.why)


def test_grouped_conv_pads_each_group():
    op = conv(FORWARD, 128, 8, 64)  # 4 groups of 8 in-channels -> 16 out-channels each
    op.feature_group_count = 4
    op.lhs_shape = [128, 8, 8, 32]
    s = simulate_op(op, 128, V5E)
    assert s.dims["in_features"] == (32, 32)
    assert s.dims["out_features"] == (64, 64)
    op.n = 60  # 15 per group -> 16 each
    assert simulate_op(op, 128, V5E).dims["out_features"] == (60, 64)


def attention_dot(name: str, lhs: list[int], rhs: list[int], out: list[int], lb, lc, rb, rc,
                  pass_: str) -> HloOp:
    """A batched einsum of multi-head attention, roles as hlo._dot derives them."""
    lf = [i for i in range(len(lhs)) if i not in lb and i not in lc]
    rf = [i for i in range(len(rhs)) if i not in rb and i not in rc]
    nb = len(lb)
    roles = {"lhs": {"m": lf, "k": lc, "b": lb}, "rhs": {"k": rc, "n": rf, "b": rb},
             "out": {"m": list(range(nb, nb + len(lf))), "n": list(range(nb + len(lf), len(out))),
                     "b": list(range(nb))}}
    k = math.prod(lhs[i] for i in lc)
    return HloOp(name=name, opcode="dot", op_type="Einsum", op_name="mha/" + name, dtype="f32",
                 shape=out, lhs_shape=lhs, rhs_shape=rhs, lhs="a", rhs="b", roles=roles,
                 m=math.prod(lhs[i] for i in lf), k=k, n=math.prod(rhs[i] for i in rf),
                 flops=2 * math.prod(out) * k, pass_=pass_,
                 extra={"batch": math.prod(lhs[i] for i in lb)})


def test_attention_backward_matmuls_keep_batch_dims_as_batch():
    # Batch 16, 2 heads, sequence 256, key_dim 24 (shapes from real HLO). The gradient of
    # the scores, dS = dO . V^T: rows 256 -> 256, contraction 24 -> 128, out 256 -> 256.
    ds = attention_dot("ds", [16, 2, 256, 24], [16, 256, 2, 24], [16, 2, 256, 256],
                       [0, 1], [3], [0, 2], [3], INPUT_GRAD)
    s = simulate_op(ds, 16, V5E)
    assert s.dims == {"rows": (256, 256), "in_features": (24, 128), "out_features": (256, 256),
                      "batch": (32, 32)}
    assert s.fit == pytest.approx(24 / 128)
    # dV = P^T . dO: out-features 24 -> 128.
    dv = attention_dot("dv", [16, 2, 256, 256], [16, 256, 2, 24], [16, 2, 256, 24],
                       [0, 1], [3], [0, 2], [1], INPUT_GRAD)
    s = simulate_op(dv, 16, V5E)
    assert s.dims["out_features"] == (24, 128) and s.dims["batch"] == (32, 32)
    assert s.fit == pytest.approx(24 / 128)
    # The sequence length is never taken for the batch: no "batch 256→…" cause.
    assert not any(w.startswith("batch") for w in s.why)


# docs/facts.md#7: 8x128 tiles for 32-bit, two rows per word for 16-bit, small tiles.
@pytest.mark.parametrize(
    "shape, second, minor, itemsize, expansion",
    [
        ([128, 8], 1, 0, 4, 1.0),
        ([128, 3], 1, 0, 4, 4 / 3),  # 4x128 small tile
        ([128, 2], 1, 0, 4, 1.0),  # 2x128 small tile
        ([128, 1], 1, 0, 4, 2.0),
        ([16, 64], 0, 1, 4, 2.0),  # lanes: 64 -> 128
        ([8, 128], 0, 1, 2, 2.0),  # bf16 packs 16 rows per tile
        ([16, 128], 0, 1, 2, 1.0),
    ],
)
def test_tiled_bytes(shape, second, minor, itemsize, expansion):
    real, padded = tiled_bytes(shape, second, minor, itemsize)
    assert padded / real == pytest.approx(expansion)


def test_hbm_expansion_of_small_feature_activations():
    # Large batch: batch is the lane dim, features the sublanes; 3 features use a 4-row tile.
    assert simulate([conv(FORWARD, 128, 3, 8)]).hbm_expansion == pytest.approx((128 * 4 * 4 + 128 * 8 * 4) / (128 * 3 * 4 + 128 * 8 * 4))
    # Small batch: features become the lane dim and pad to 128.
    assert simulate([conv(FORWARD, 16, 16, 16)]).hbm_expansion == pytest.approx(8.0)


def test_what_if_larger_batch_and_rounded_features():
    ops = train_step(16, 16, 1, "out") + train_step(16, 64, 64, "body")
    base = simulate(ops).step_fit
    assert simulate(with_batch(ops, 16, 128)).step_fit > base
    names = {op.name for op in ops if op.op_name == "out"}
    rounded = with_features(ops, names, 1, 8)
    assert simulate(rounded).step_fit > base
    # The clone keeps the original untouched.
    assert ops[0].n == 1
    # ... and its arrays follow the new sizes, so a what-if's HBM bytes do too
    out_fwd = next(op for op in rounded if op.name == "out.forward")
    assert out_fwd.shape == [16, 8, 8, 8] and out_fwd.rhs_shape == [3, 3, 16, 8]
    big = with_batch(ops, 16, 128)
    assert big[0].lhs_shape[0] == 128 and big[0].shape[0] == 128
    assert simulate_op(big[0], 128, V5E).bytes == 8 * simulate_op(ops[0], 16, V5E).bytes - 7 * 3 * 3 * 16 * 4
    # The arrays change with the width: a memory-bound op's time follows its bytes.
    before = {op.name: op for op in ops}
    changed = [op for op in rounded if op.flops != before[op.name].flops]
    assert changed and all(simulate([op]).ops[0][1].bytes > simulate([before[op.name]]).ops[0][1].bytes
                           for op in changed)


def test_simulator_modules_import_without_tensorflow():
    code = (
        "import sys; import kerasfit.crosscheck.api, kerasfit.crosscheck.simulator, kerasfit.crosscheck.hlo, "
        "kerasfit.crosscheck.report; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'tf_keras')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("target", sorted(t for t in TARGETS if TARGETS[t].family != "gpu"))
@pytest.mark.parametrize("width", [1, 10, 30, 100, 200])
def test_kf102_and_the_simulator_read_one_padding_rule(target, width):
    """What KF102 says a width pads to is what the simulator pads it to over a step."""
    from kerasfit.project.check import CheckOptions, check_source
    from kerasfit.core.types import width_padding

    t = TARGETS[target]
    dtype = "f32" if t.family == "tpu" else "bf16"  # KF102 speaks of 16-bit off TPU
    sizes = set()
    for batch in (16, 128):  # both layouts of docs/facts.md#1
        fwd, igrad, kgrad = (with_dtype([conv(p, batch, 64 if p != INPUT_GRAD else width,
                                              width if p != INPUT_GRAD else 64)], dtype)[0]
                             for p in (FORWARD, INPUT_GRAD, KERNEL_GRAD))
        sizes.add(simulate_op(fwd, batch, t).dims["out_features"][1])
        sizes.add(simulate_op(kgrad, batch, t).dims["out_features"][1])
        sizes.add(simulate_op(igrad, batch, t).dims["in_features"][1])
    low, high = width_padding(t, width, "float32" if t.family == "tpu" else "bfloat16")
    assert (min(sizes), max(sizes)) == (low, high)
    if width % t.channel_multiple == 0:
        return
    # off TPU a width pads only in half precision (docs/facts.md#17): say so in the code
    policy = "" if t.family == "tpu" else "keras.config.set_dtype_policy('mixed_bfloat16')\n"
    source = f"import keras\n{policy}x = keras.layers.Dense({width}, name='hidden')(x)\n"
    (d,) = [d for d in check_source(source, "m.py", CheckOptions(isolated=True, target=target)).diagnostics
            if d.code == "KF102"]
    assert (d.fields["padded_to"], d.fields["target"]) == ((low, high), target), d.fields


@pytest.mark.parametrize("target", sorted(t for t in TARGETS if TARGETS[t].family == "gpu"))
@pytest.mark.parametrize("width, policy, multiple", [(30, "", 4), (30, "mixed_bfloat16", 8), (100, "mixed_float16", 8),
                                                     (250, "", 4), (60, "", 4), (60, "mixed_bfloat16", 8)])
def test_kf102_quotes_the_gpu_model_the_report_times_ops_with(target, width, policy, multiple):
    """On a GPU, KF102's figure is the GPU cost model's ratio of a width -> width 3x3 conv's
    time to the rounded width's: the model the simulator times the report's ops with."""
    from kerasfit.core import gpumodel
    from kerasfit.project.check import CheckOptions, check_source

    t = TARGETS[target]
    dtype = "float32" if not policy else policy.removeprefix("mixed_")
    set_policy = f"keras.config.set_dtype_policy('{policy}')\n" if policy else ""
    source = f"import keras\n{set_policy}x = keras.layers.Conv2D({width}, 3, name='hidden')(x)\n"
    found = [d for d in check_source(source, "m.py", CheckOptions(isolated=True, target=target)).diagnostics
             if d.code == "KF102"]
    if width % multiple == 0:
        assert not found  # 60 float32 filters are whole TF32 groups of 4
        return
    (d,) = found
    rounded, speedup = gpumodel.width_speedup(t, width, dtype, conv=True)
    assert rounded == -(-width // multiple) * multiple
    assert (d.fields["multiple"], d.fields["dtype"], d.fields["target"], d.fields["rounded"]) == (multiple, dtype, target, rounded)
    assert d.fields["slowdown"] == speedup and d.fields["conv"]
    # the same figure from the simulator: one 3x3 conv of width -> width over 2^20 rows
    hlo_dtype = "f32" if dtype == "float32" else "bf16"

    def seconds(w):
        op = with_dtype([conv(FORWARD, 1 << 14, w, w, hw=8)], hlo_dtype)[0]
        return simulate_op(op, 1 << 14, t).time
    assert seconds(width) / seconds(rounded) == pytest.approx(speedup, rel=1e-6)
