"""semantic.shapes: the rank and last-axis size of tensor expressions, where the code says them."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from kerasfit.semantic.model import SemanticModel
from kerasfit.semantic.shapes import TensorShape, shape_of

SOURCE = textwrap.dedent(
    """
    import keras
    import tensorflow as tf
    from keras import layers, ops


    def chunked(query, b, h, n, c, d):
        query = ops.reshape(query, (b, h, n, c, d))
        g = ops.cumsum(ops.reshape(query, (b, h, n, c)), axis=-1)
        decay = ops.exp(ops.expand_dims(g, -1) - ops.expand_dims(g, -2)) * ops.triu(ops.ones((c, c)))
        for i in range(n):
            q_i = query[:, :, i]
            query = query * 2.0
        mixed = ops.einsum("bhcij,bhcjd->bhcid", query, query)
        return query, g, decay, q_i, mixed


    def layers_and_ops(images, flat, deltas, w, h):
        feats = layers.Conv2D(12, 3)(keras.Input((32, 32, 3)))
        a, b, c = tf.split(feats, 3, axis=-1)
        mean = tf.reduce_mean(feats, axis=(1, 2), keepdims=True)
        head = layers.Dense(4)(layers.Flatten()(feats))
        boxes = ops.reshape(flat, (-1, 100, 4))
        pair = ops.stack([boxes[..., 0], boxes[..., 1]], axis=-1)
        scaled = deltas * ops.array([w, h])
        tail = ops.reshape(flat, (*ops.shape(flat)[:-1], -1, 2))
        return feats, a, mean, head, boxes, pair, scaled, tail


    def guarded(points):
        if ops.shape(points)[-1] == 4:
            return points
        return points


    def phase_shift(x, r):
        return tf.split(x, 3, 3)


    def net(x):
        return phase_shift(tf.layers.conv2d(x, 12, 3), 2)
    """
)


def _returned(ctx: SemanticModel, fn_name: str) -> list[cst.BaseExpression]:
    fn = next(f for f in ctx.module.body if isinstance(f, cst.FunctionDef) and f.name.value == fn_name)
    last = fn.body.body[-1]
    assert isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[0], cst.Return)
    value = last.body[0].value
    if isinstance(value, cst.Tuple):
        return [e.value for e in value.elements]
    assert value is not None
    return [value]


@pytest.fixture(scope="module")
def ctx() -> SemanticModel:
    return SemanticModel(cst.parse_module(SOURCE), "<shapes>", source=SOURCE)


def test_reshapes_einsum_and_rank_keeping_ops_give_the_rank(ctx):
    query, g, decay, q_i, mixed = (shape_of(ctx, e) for e in _returned(ctx, "chunked"))
    assert query == TensorShape(5, None)  # the reshape reaches through `query = query * 2.0`
    assert g == TensorShape(4, None)
    assert decay.rank == 5  # broadcast with a 2-D mask
    assert q_i.rank == 4  # `x[:, :, i]` of a 5-D tensor cuts a middle axis
    assert mixed.rank == 5


def test_layers_splits_reductions_and_broadcasts_give_the_last_size(ctx):
    feats, a, mean, head, boxes, pair, scaled, tail = (shape_of(ctx, e) for e in _returned(ctx, "layers_and_ops"))
    assert feats == TensorShape(4, 12)  # Conv2D(12, 3) on a 4-D input
    assert a == TensorShape(4, 4)  # a third of 12 channels
    assert mean == TensorShape(4, 12)
    assert head == TensorShape(2, 4)
    assert boxes == TensorShape(3, 4)
    assert pair == TensorShape(3, 2)
    assert scaled.last == 2  # `x * array([w, h])` broadcasts only if x's last axis is 2 (or 1)
    assert tail == TensorShape(None, 2)  # a starred shape: the rank is unknown, the tail is not


def test_a_shape_test_on_the_branch_says_the_last_size(ctx):
    fn = next(f for f in ctx.module.body if isinstance(f, cst.FunctionDef) and f.name.value == "guarded")
    inside = fn.body.body[0].body.body[0].body[0].value
    after = fn.body.body[1].body[0].value
    assert shape_of(ctx, inside).last == 4
    assert shape_of(ctx, after).last is None


def test_a_parameter_has_what_every_same_file_caller_passes(ctx):
    fn = next(f for f in ctx.module.body if isinstance(f, cst.FunctionDef) and f.name.value == "phase_shift")
    x = fn.body.body[0].body[0].value.args[0].value
    assert shape_of(ctx, x) == TensorShape(4, 12)


def test_nothing_is_guessed_for_what_the_code_does_not_say(ctx):
    src = "from keras import ops\n\ndef f(x, n):\n    y = ops.reshape(x, n)\n    return x, y, x[..., 0]\n"
    other = SemanticModel(cst.parse_module(src), "<unknown>", source=src)
    x, y, col = _returned(other, "f")
    assert shape_of(other, x) == TensorShape() and shape_of(other, y) == TensorShape()
    assert shape_of(other, col) == TensorShape()
