"""The HLO text reader, on text captured from TF 2.21 (fixtures/crosscheck/hlo) and small
hand-written modules. No TensorFlow."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kerasfit.crosscheck.hlo import (
    FORWARD,
    INPUT_GRAD,
    KERNEL_GRAD,
    HloOp,
    classify_pass,
    parse_hlo,
    parse_shape,
    strip_scopes,
)

HLO_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "crosscheck" / "hlo"


@pytest.fixture(scope="module")
def cnn_ops() -> dict[str, HloOp]:
    # keras_cnn.py at batch 16: Conv2D(30) -> pool -> Conv2D(64) -> GAP -> Dense(100) -> Dense(10)
    ops, _ = parse_hlo((HLO_DIR / "keras_cnn_b16.hlo").read_text())
    variables = [[3, 3, 3, 30], [30], [3, 3, 30, 64], [64], [64, 100], [100], [100, 10], [10]]
    for op in ops:
        op.pass_ = classify_pass(op, variables)
    return {f"{strip_scopes(op.op_name)}|{op.pass_}": op for op in ops}


def test_captured_step_has_every_pass_and_no_dead_ops(cnn_ops):
    passes = sorted(op.pass_ for op in cnn_ops.values())
    # The first conv's input gradient is dead (nobody needs d/d(images)) and dropped.
    assert passes.count(FORWARD) == 4
    assert passes.count(INPUT_GRAD) == 3
    assert passes.count(KERNEL_GRAD) == 4
    assert not any("conv2d_1/convolution" in k and k.endswith(INPUT_GRAD) for k in cnn_ops)


def test_forward_conv_roles_and_flops(cnn_ops):
    op = cnn_ops["functional_1/conv2d_1/convolution|forward"]
    assert op.opcode == "convolution" and op.dim_labels == "b01f_01io->b01f"
    assert (op.m, op.k, op.n) == (16, 3, 30)
    assert op.shape == [16, 32, 32, 30]
    assert op.flops == 2 * math.prod(op.shape) * 3 * 3 * 3


def test_kernel_gradient_conv_contracts_over_the_batch(cnn_ops):
    op = cnn_ops["functional_1/conv2d_1_2/convolution/Conv2DBackpropFilter|kernel-gradient"]
    assert op.dim_labels == "f01b_i01o->01bf"
    assert op.shape == [3, 3, 30, 64]
    assert (op.m, op.k, op.n) == (30, 16, 64)
    # Same multiply-adds as the forward conv it differentiates.
    fwd = cnn_ops["functional_1/conv2d_1_2/convolution|forward"]
    assert op.flops == fwd.flops


def test_dense_passes_from_matmul_attributes(cnn_ops):
    fwd = cnn_ops["functional_1/dense_1/MatMul|forward"]
    dx = cnn_ops["functional_1/dense_1/MatMul/MatMul|input-gradient"]
    dw = cnn_ops["functional_1/dense_1/MatMul/MatMul_1|kernel-gradient"]
    assert (fwd.m, fwd.k, fwd.n) == (16, 64, 100)
    assert (dx.m, dx.k, dx.n) == (16, 100, 64)
    assert (dw.m, dw.k, dw.n) == (64, 16, 100)
    assert dw.grad_y and dx.grad_x and not (fwd.grad_x or fwd.grad_y)


SMALL = """\
HloModule m

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}

ENTRY %main (x: f32[4,6,6,3], w: f32[3,3,3,8], w2: f32[3,3,3,8]) -> (f32[4,6,6,8], /*index=1*/f32[]) {
  %x = f32[4,6,6,3]{3,2,1,0} parameter(0)
  %w = f32[3,3,3,8]{3,2,1,0} parameter(1)
  %w2 = f32[3,3,3,8]{3,2,1,0} parameter(2)
  %zero = f32[] constant(0)
  %one = f32[] constant(1.5)
  %p = f32[4,8,8,3]{3,2,1,0} pad(f32[4,6,6,3]{3,2,1,0} %x, f32[] %zero), padding=0_0x1_1x1_1x0_0, metadata={op_type="Pad" op_name="model/zero_padding2d/Pad"}
  %r = f32[4,8,8,3]{3,2,1,0} reshape(f32[4,8,8,3]{3,2,1,0} %p)
  %c = f32[4,6,6,8]{3,2,1,0} convolution(f32[4,8,8,3]{3,2,1,0} %r, f32[3,3,3,8]{3,2,1,0} %w), window={size=3x3}, dim_labels=b01f_01io->b01f, metadata={op_type="Conv2D" op_name="model/conv/Conv2D"}
  %q = f32[4,8,8,3]{3,2,1,0} pad(f32[4,6,6,3]{3,2,1,0} %x, f32[] %one), padding=0_0x1_1x1_1x0_0, metadata={op_type="PadV2" op_name="model/pad2"}
  %dead = f32[4,6,6,8]{3,2,1,0} convolution(f32[4,8,8,3]{3,2,1,0} %q, f32[3,3,3,8]{3,2,1,0} %w2), window={size=3x3}, dim_labels=b01f_01io->b01f, metadata={op_type="Conv2D" op_name="model/unused/Conv2D"}
  %sum = f32[] reduce(f32[4,6,6,8]{3,2,1,0} %c, f32[] %zero), dimensions={0,1,2,3}, to_apply=%add
  ROOT %t = (f32[4,6,6,8]{3,2,1,0}, /*index=1*/f32[]) tuple(f32[4,6,6,8]{3,2,1,0} %c, f32[] %sum)
}
"""


def test_dead_code_is_dropped_and_pads_are_traced_to_their_conv():
    ops, pads = parse_hlo(SMALL)
    assert [op.name for op in ops] == ["c"]
    assert ops[0].window == "size=3x3" and ops[0].op_name == "model/conv/Conv2D"
    # The non-zero pad only feeds the dead conv, so it is not reported either.
    assert [p.name for p in pads] == ["p"]
    pad = pads[0]
    assert pad.zero and pad.consumers == ["c"]
    assert (pad.shape, pad.padded_shape) == ([4, 6, 6, 3], [4, 8, 8, 3])


def test_nonzero_pad_is_not_zero():
    live = SMALL.replace("%c, f32[] %sum)", "%dead, f32[] %sum)").replace(
        "ROOT %t = (f32[4,6,6,8]{3,2,1,0}, /*index=1*/f32[]) tuple(f32[4,6,6,8]{3,2,1,0} %c",
        "ROOT %t = (f32[4,6,6,8]{3,2,1,0}, /*index=1*/f32[]) tuple(f32[4,6,6,8]{3,2,1,0} %dead",
    )
    _, pads = parse_hlo(live)
    by_name = {p.name: p for p in pads}
    assert not by_name["q"].zero


@pytest.mark.parametrize(
    "op_name, op_type, labels, grad_x, grad_y, shape, expected",
    [
        ("model/conv/Conv2D", "Conv2D", "b01f_01io->b01f", False, False, [4, 8], FORWARD),
        # Conv2DTranspose's forward op is a Conv2DBackpropInput outside any gradient scope.
        ("unet/up0/conv2d_transpose", "Conv2DBackpropInput", "b01f_01oi->b01f", False, False, [4, 8], FORWARD),
        ("gradients/unet/up0/conv2d_transpose_grad/Conv2D", "Conv2D", "b01f_01io->b01f", False, False, [4, 8], INPUT_GRAD),
        ("gradient_tape/m/c/Conv2DBackpropFilter", "Conv2DBackpropFilter", "f01b_i01o->01bf", False, False, [3, 3, 3, 8], KERNEL_GRAD),
        ("gradients_1/s/c/Conv2D_grad/Conv2DBackpropInput", "Conv2DBackpropInput", "b01f_01oi->b01f", False, False, [4, 8], INPUT_GRAD),
        ("gradient_tape/m/d/MatMul/MatMul_1", "MatMul", "", False, True, [64, 10], KERNEL_GRAD),
        ("gradient_tape/m/d/MatMul/MatMul", "MatMul", "", True, False, [16, 64], INPUT_GRAD),
        # An einsum's weight gradient is recognised by its variable-shaped result.
        ("gradient_tape/m/e/Einsum/Einsum_1", "Einsum", "", False, False, [10, 64], KERNEL_GRAD),
        ("gradient_tape/m/e/Einsum/Einsum", "Einsum", "", False, False, [16, 64], INPUT_GRAD),
        # TF's grad_y names the second matmul operand, a weight or not: attention's
        # activation x activation backward matmul is no weight update (before: it was).
        ("gradient_tape/m/mha/MatMul/MatMul_1", "BatchMatMulV2", "", False, True, [16, 64], INPUT_GRAD),
    ],
)
def test_classify_pass(op_name, op_type, labels, grad_x, grad_y, shape, expected):
    op = HloOp(name="x", opcode="convolution" if labels else "dot", op_type=op_type, op_name=op_name,
               dtype="f32", shape=shape, lhs_shape=[], rhs_shape=[], lhs="", rhs="", roles={},
               m=1, k=1, n=1, flops=1, dim_labels=labels, grad_x=grad_x, grad_y=grad_y)
    assert classify_pass(op, [[64, 10]]) == expected


@pytest.mark.parametrize(
    "op_name, stripped",
    [
        ("StatefulPartitionedCall/gradients/unet/out/Conv2D_grad/Conv2DBackpropFilter", "unet/out/Conv2D"),
        ("gradient_tape/functional_1/c1_1/convolution/Conv2DBackpropInput", "functional_1/c1_1/convolution/Conv2DBackpropInput"),
        ("functional_1/dense_1/MatMul", "functional_1/dense_1/MatMul"),
    ],
)
def test_strip_scopes(op_name, stripped):
    assert strip_scopes(op_name) == stripped


def test_parse_shape():
    assert parse_shape("f32[16,3,3,8]{3,2,1,0}") == [16, 3, 3, 8]
    assert parse_shape("f32[]") == []
    assert parse_shape("bf16[<=8,4]") == [8, 4]


LOOP = """\
HloModule loop

%body (t: (s32[], f32[8,16])) -> (s32[], f32[8,16]) {
  %t = (s32[], f32[8,16]{1,0}) parameter(0)
  %i = s32[] get-tuple-element((s32[], f32[8,16]{1,0}) %t), index=0
  %h = f32[8,16]{1,0} get-tuple-element((s32[], f32[8,16]{1,0}) %t), index=1
  %w = f32[16,16]{1,0} constant({...})
  %d = f32[8,16]{1,0} dot(f32[8,16]{1,0} %h, f32[16,16]{1,0} %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_type="MatMul" op_name="model/rnn/while/cell/MatMul"}
  %one = s32[] constant(1)
  %j = s32[] add(s32[] %i, s32[] %one)
  ROOT %r = (s32[], f32[8,16]{1,0}) tuple(s32[] %j, f32[8,16]{1,0} %d)
}

%cond (c: (s32[], f32[8,16])) -> pred[] {
  %c = (s32[], f32[8,16]{1,0}) parameter(0)
  %n = s32[] get-tuple-element((s32[], f32[8,16]{1,0}) %c), index=0
  %seven = s32[] constant(7), metadata={op_type="Less" op_name="model/rnn/while/Less"}
  ROOT %lt = pred[] compare(s32[] %n, s32[] %seven), direction=LT
}

ENTRY %main (x: f32[8,16]) -> f32[8,16] {
  %x = f32[8,16]{1,0} parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[8,16]{1,0}) tuple(s32[] %zero, f32[8,16]{1,0} %x)
  %loop = (s32[], f32[8,16]{1,0}) while((s32[], f32[8,16]{1,0}) %init), condition=%cond, body=%body
  ROOT %out = f32[8,16]{1,0} get-tuple-element((s32[], f32[8,16]{1,0}) %loop), index=1
}
"""


def test_a_while_body_counts_its_trip_count():
    # Before: the loop's matmul was counted once; the condition runs it 7 times.
    (op,) = parse_hlo(LOOP)[0]
    assert op.extra["trips"] == 7
    from kerasfit.crosscheck.simulator import simulate

    sim = simulate([op])
    assert sim.flops == 7 * 2 * 8 * 16 * 16
    from kerasfit.crosscheck.report import make_report

    d = op.to_dict()
    d["pass"], d["layer"], d["source"] = FORWARD, "rnn", None
    (rep,) = make_report({"ops": [d], "mem_ops": [], "per_core_batch": 8}).ops
    assert "×7 (while loop)" in rep.why and rep.flops == 7 * 2 * 8 * 16 * 16
    # without a constant bound, XLA's known trip count in the backend config is read
    known = LOOP.replace("condition=%cond, body=%body",
                         'condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"5"}}')
    assert parse_hlo(known)[0][0].extra["trips"] == 5


MOVES_HLO = """\
HloModule moves

ENTRY %main (x: f32[8,16], w: f32[32,16]) -> (f32[8,32], f32[32,8], f32[8,16]) {
  %x = f32[8,16]{1,0} parameter(0)
  %w = f32[32,16]{1,0} parameter(1)
  %wt = f32[16,32]{1,0} transpose(f32[32,16]{1,0} %w), dimensions={1,0}, metadata={op_name="m/dense/MatMul"}
  %wr = f32[16,32]{0,1} copy(f32[16,32]{1,0} %wt), metadata={op_name="m/dense/MatMul"}
  %d = f32[8,32]{1,0} dot(f32[8,16]{1,0} %x, f32[16,32]{1,0} %wr), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="m/dense/MatMul"}
  %same = f32[8,32]{1,0} transpose(f32[8,32]{1,0} %d), dimensions={0,1}, metadata={op_name="m/dense/MatMul"}
  %moved = f32[32,8]{1,0} transpose(f32[8,32]{1,0} %same), dimensions={1,0}, metadata={op_name="m/t/transpose"}
  %two = f32[] constant(2)
  %b = f32[32,8]{1,0} broadcast(f32[] %two), dimensions={}
  %scaled = f32[32,8]{1,0} multiply(f32[32,8]{1,0} %moved, f32[32,8]{1,0} %b), metadata={op_name="m/scale/mul"}
  %sq = f32[8,16]{1,0} multiply(f32[8,16]{1,0} %x, f32[8,16]{1,0} %x), metadata={op_name="m/act/mul"}
  %act = f32[8,16]{1,0} tanh(f32[8,16]{1,0} %sq), metadata={op_name="m/act/tanh"}
  ROOT %t = (f32[8,32]{1,0}, f32[32,8]{1,0}, f32[8,16]{1,0}) tuple(f32[8,32]{1,0} %same, f32[32,8]{1,0} %scaled, f32[8,16]{1,0} %act)
}
"""


def test_moves_feeding_only_a_dot_are_free_and_others_cost_their_bytes():
    from kerasfit.crosscheck.hlo import memory_ops

    by = {m.name: m for m in memory_ops(MOVES_HLO)}
    # docs/facts.md#4: the weight's transpose and relayout copy only feed the dot operand.
    assert by["wt"].free and by["wr"].free
    # an identity transpose moves nothing and is not an op at all
    assert "same" not in by
    # a real transpose read by an elementwise op costs its HBM bytes: 2 x 8x32 floats
    assert not by["moved"].free and by["moved"].kind == "transpose" and by["moved"].bytes == 2 * 8 * 32 * 4
    # elementwise ops are costed as one loop fusion: x read once, tanh's result written
    # once, the multiply in between stays in the fusion (docs/facts.md#5)
    assert by["sq"].kind == "elementwise" and by["sq"].bytes == 8 * 16 * 4
    assert by["act"].bytes == 8 * 16 * 4
    # the scale reads the transpose's result from HBM and writes its own
    assert by["scaled"].bytes == 2 * 32 * 8 * 4
    # a scalar broadcast fused into its consumer costs nothing of its own
    assert "b" not in by


DOTS_3D = """\
HloModule dots

ENTRY %main (x: f32[2,8,16], y: f32[16,16], w: f32[16,32]) -> (f32[2,8,32], f32[16,32]) {
  %x = f32[2,8,16]{2,1,0} parameter(0)
  %y = f32[16,16]{1,0} parameter(1)
  %w = f32[16,32]{1,0} parameter(2)
  %a = f32[2,8,32]{2,1,0} dot(f32[2,8,16]{2,1,0} %x, f32[16,32]{1,0} %w), lhs_contracting_dims={2}, rhs_contracting_dims={0}, metadata={op_name="m/dense3d/MatMul"}
  %b = f32[16,32]{1,0} dot(f32[16,16]{1,0} %y, f32[16,32]{1,0} %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="m/dense2d/MatMul"}
  ROOT %t = (f32[2,8,32]{2,1,0}, f32[16,32]{1,0}) tuple(f32[2,8,32]{2,1,0} %a, f32[16,32]{1,0} %b)
}
"""


@pytest.mark.parametrize("common", [16, 128])
def test_a_3d_dense_costs_what_the_same_dense_after_a_reshape_costs(common):
    # Before: the 3-D dot's sequence axis (8) sat on the lanes in HBM, 8 -> 128.
    from kerasfit.crosscheck.simulator import simulate_op
    from kerasfit.core.types import TARGETS

    a, b = parse_hlo(DOTS_3D)[0]
    for op in (a, b):
        op.pass_ = FORWARD
    sa, sb = (simulate_op(op, common, TARGETS["tpu-v5e"]) for op in (a, b))
    assert (sa.fit, sa.flops, sa.tiled, sa.bytes) == (sb.fit, sb.flops, sb.tiled, sb.bytes)
    assert not any("8→128" in w for w in sa.tiled_why)


def test_strided_input_gradient_counts_no_dilation_zeros():
    text = SMALL.replace("window={size=3x3}, dim_labels=b01f_01io->b01f, metadata={op_type=\"Conv2D\" op_name=\"model/conv/Conv2D\"}",
                         "window={size=3x3 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f, metadata={op_type=\"Conv2D\" op_name=\"model/conv/Conv2D\"}")
    (op,) = parse_hlo(text)[0]
    # 4x6x6x8 outputs x 9 taps x 3 channels x 2, of which one tap in 2x2 meets a real value
    assert op.flops == 2 * 4 * 6 * 6 * 8 * 9 * 3 // 4


SCAN = """\
HloModule scan

%body (p: (s32[], f32[64,32,128], f32[64,32,256], f32[128,256])) -> (s32[], f32[64,32,128], f32[64,32,256], f32[128,256]) {
  %p = (s32[], f32[64,32,128]{2,1,0}, f32[64,32,256]{2,1,0}, f32[128,256]{1,0}) parameter(0)
  %i = s32[] get-tuple-element((s32[], f32[64,32,128]{2,1,0}, f32[64,32,256]{2,1,0}, f32[128,256]{1,0}) %p), index=0
  %xs = f32[64,32,128]{2,1,0} get-tuple-element((s32[], f32[64,32,128]{2,1,0}, f32[64,32,256]{2,1,0}, f32[128,256]{1,0}) %p), index=1
  %ys = f32[64,32,256]{2,1,0} get-tuple-element((s32[], f32[64,32,128]{2,1,0}, f32[64,32,256]{2,1,0}, f32[128,256]{1,0}) %p), index=2
  %w = f32[128,256]{1,0} get-tuple-element((s32[], f32[64,32,128]{2,1,0}, f32[64,32,256]{2,1,0}, f32[128,256]{1,0}) %p), index=3
  %zero = s32[] constant(0)
  %x = f32[1,32,128]{2,1,0} dynamic-slice(f32[64,32,128]{2,1,0} %xs, s32[] %i, s32[] %zero, s32[] %zero), dynamic_slice_sizes={1,32,128}, metadata={op_name="m/rnn/while/TensorListGetItem"}
  %x2 = f32[32,128]{1,0} reshape(f32[1,32,128]{2,1,0} %x)
  %h = f32[32,256]{1,0} dot(f32[32,128]{1,0} %x2, f32[128,256]{1,0} %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="m/rnn/while/MatMul"}
  %h3 = f32[1,32,256]{2,1,0} reshape(f32[32,256]{1,0} %h)
  %ys2 = f32[64,32,256]{2,1,0} dynamic-update-slice(f32[64,32,256]{2,1,0} %ys, f32[1,32,256]{2,1,0} %h3, s32[] %i, s32[] %zero, s32[] %zero), metadata={op_name="m/rnn/while/TensorListSetItem"}
  %one = s32[] constant(1)
  %i2 = s32[] add(s32[] %i, s32[] %one)
  ROOT %t = (s32[], f32[64,32,128]{2,1,0}, f32[64,32,256]{2,1,0}, f32[128,256]{1,0}) tuple(s32[] %i2, f32[64,32,128]{2,1,0} %xs, f32[64,32,256]{2,1,0} %ys2, f32[128,256]{1,0} %w)
}

%cond (c: (s32[], f32[64,32,128], f32[64,32,256], f32[128,256])) -> pred[] {
  %c = (s32[], f32[64,32,128]{2,1,0}, f32[64,32,256]{2,1,0}, f32[128,256]{1,0}) parameter(0)
  %n = s32[] get-tuple-element((s32[], f32[64,32,128]{2,1,0}, f32[64,32,256]{2,1,0}, f32[128,256]{1,0}) %c), index=0
  %steps = s32[] constant(64), metadata={op_type="Less" op_name="m/rnn/while/Less"}
  ROOT %lt = pred[] compare(s32[] %n, s32[] %steps), direction=LT
}

ENTRY %main (xs: f32[64,32,128], w: f32[128,256]) -> f32[64,32,256] {
  %xs = f32[64,32,128]{2,1,0} parameter(0)
  %w = f32[128,256]{1,0} parameter(1)
  %zero = s32[] constant(0)
  %f = f32[] constant(0)
  %ys = f32[64,32,256]{2,1,0} broadcast(f32[] %f), dimensions={}
  %init = (s32[], f32[64,32,128]{2,1,0}, f32[64,32,256]{2,1,0}, f32[128,256]{1,0}) tuple(s32[] %zero, f32[64,32,128]{2,1,0} %xs, f32[64,32,256]{2,1,0} %ys, f32[128,256]{1,0} %w)
  %loop = (s32[], f32[64,32,128]{2,1,0}, f32[64,32,256]{2,1,0}, f32[128,256]{1,0}) while((s32[], f32[64,32,128]{2,1,0}, f32[64,32,256]{2,1,0}, f32[128,256]{1,0}) %init), condition=%cond, body=%body
  ROOT %out = f32[64,32,256]{2,1,0} get-tuple-element((s32[], f32[64,32,128]{2,1,0}, f32[64,32,256]{2,1,0}, f32[128,256]{1,0}) %loop), index=2
}
"""


def test_a_scan_loop_moves_one_slice_per_trip_and_its_step_time_is_the_hand_sum():
    """issue 28: a ``while`` body's dynamic slice and update move one slice per trip, in
    place, not the stacked buffer. Hand computation on tpu-v5e (819 GB/s, 197 TFLOPS), 64
    trips of: read x_t 32x128 and write it (dynamic-slice), the 32x128 @ 128x256 matmul
    (memory-bound: 32x128 + 128x256 + 32x256 floats through HBM, every dim a whole tile),
    read h_t 32x256 and write it into the buffer (dynamic-update-slice); and once, the
    zeroed 64x32x256 buffer written before the loop."""
    from kerasfit.crosscheck.hlo import memory_ops
    from kerasfit.crosscheck.report import make_report

    mem = {m.opcode: m for m in memory_ops(SCAN)}
    assert mem["dynamic-slice"].trips == 64 and mem["dynamic-slice"].bytes == 2 * 32 * 128 * 4
    assert mem["dynamic-update-slice"].bytes == 2 * 32 * 256 * 4  # before: the 64x32x256 buffer twice, per trip
    (op,) = parse_hlo(SCAN)[0]
    d = op.to_dict()
    d["pass"], d["layer"], d["source"] = FORWARD, "rnn", None
    raw = {"ops": [d], "per_core_batch": 32,
           "mem_ops": [dict(m.to_dict(), layer="rnn", source=None) for m in memory_ops(SCAN)]}
    report = make_report(raw, "tpu-v5e")
    dot = (32 * 128 + 128 * 256 + 32 * 256) * 4
    slices = (2 * 32 * 128 + 2 * 32 * 256) * 4
    assert report.step_time == pytest.approx((64 * (dot + slices) + 64 * 32 * 256 * 4) / 819e9)
    (row,) = [r for r in report.rows if r.kind == "dynamic-update-slice"]
    assert row.padded_shape == [1, 32, 256] and "one 1×32×256 slice of a 64×32×256 buffer per run, in place" in row.why
