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
