from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

import libcst as cst

if TYPE_CHECKING:
    from kerasfit.ruleapi import RuleContext

from kerasfit.ruleapi import Applicability, Finding, Invalid, Range, Reads, Rule, Severity
from kerasfit.ruleapi.fixes import Remove, Replace
from kerasfit.ruleapi.symbols import CONCAT_CALLS, MODEL_BASES, SPLIT_CALLS, label
from kerasfit.ruleapi.syntax import get_arg, self_attr, walk
from kerasfit.ruleapi.values import TensorShape

# Methods of Keras classes whose arguments are tensors.
_TENSOR_METHODS = {"call", "train_step", "test_step", "predict_step", "compute_loss", "update_state", "__call__"}
_KERAS_TENSOR_BASES = MODEL_BASES | {"keras.losses.Loss", "keras.metrics.Metric"}
# Dataset methods whose function argument runs in the input pipeline (on the host).
_PIPELINE_METHODS = {"map", "flat_map", "interleave", "filter", "py_function"}
_ATOMIC = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)
# TF/Keras functions whose result is not one tensor (a list, a tuple, a structure, a variable).
_NOT_ONE_TENSOR = frozenset(SPLIT_CALLS) | {
    "tf.meshgrid", "tf.unique", "tf.unique_with_counts", "tf.nn.moments", "tf.while_loop", "tf.cond",
    "tf.case", "tf.switch_case", "tf.map_fn", "tf.scan", "tf.foldl", "tf.foldr", "tf.vectorized_map",
    "tf.py_function", "tf.numpy_function", "tf.dynamic_partition", "tf.math.top_k", "tf.nn.top_k",
    "tf.linalg.eigh", "tf.linalg.qr", "tf.linalg.svd", "tf.get_variable", "tf.compat.v1.get_variable",
    "keras.backend.variable", "keras.ops.top_k", "keras.ops.eigh", "keras.ops.qr", "keras.ops.svd",
}
_NOT_TENSOR_MODULES = ("tf.nest.", "tf.data.", "tf.distribute.", "tf.train.", "keras.utils.")
# Layers whose output can be anything (a Lambda returns what its function returns).
_LAYERS_ANY_OUTPUT = frozenset({"keras.layers.Lambda", "keras.layers.TFSMLayer", "keras.layers.RNN"})
# Keywords that make a layer return a list: RNN states, attention scores.
_SEVERAL_OUTPUTS = frozenset({"return_state", "return_attention_scores"})


# The TPU's lane width: the minor dim is tiled in 128 lanes (docs/facts.md#7). A cut on a
# multiple of it keeps every tile as it is.
_LANES = 128
# A last axis this small holds a few coordinates per row (box corners, points), not a
# feature dim the layout work of slicing it could matter for.
_SMALL_AXIS = 8
# Ops that read only their operand's shape, never its values.
_SHAPE_ONLY = frozenset({"tf.ones_like", "tf.zeros_like", "keras.ops.ones_like", "keras.ops.zeros_like", "keras.ops.full_like",
                         "tf.fill", "tf.shape", "keras.ops.shape", "keras.backend.ones_like", "keras.backend.zeros_like"})
_FACTS = "docs/facts.md#7, #11"
_INSIDE = (f"inside one of the 128-lane tiles the TPU pads that axis to: a relayout copy ({_FACTS}); produce the "
           "parts with separate layers/heads, or size them to multiples of 128, where you can")


def _bound(value: object, shape: TensorShape) -> int | None:
    """A slice bound as a lane index (negative ones counted from a known end), else None."""
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    if value < 0:
        return value + shape.last if shape.last is not None else None
    return value


def _from_end(value: object, side: str) -> str | None:
    """A cut ``k`` lanes before the end of a last axis of unknown width (``y[..., :-1]``
    drops a state column): on a 128-lane boundary only when the width is ``k`` more than a
    multiple of 128, so the cut is reported unless ``k`` is itself a multiple of 128."""
    if not isinstance(value, int) or isinstance(value, bool) or value >= 0 or value % _LANES == 0:
        return None
    return f"{side} {-value} lane{'s' if value < -1 else ''} before the end of the last (lane) axis, {_INSIDE}"


def _shift(cut: cst.BaseSlice, const: Callable[[cst.BaseExpression], object]) -> int | None:
    """``k:`` -> k, ``:-k`` -> -k (the two halves of a shift by k); else None."""
    if not isinstance(cut, cst.Slice) or cut.step is not None or (cut.lower is None) == (cut.upper is None):
        return None
    bound = const(cut.lower if cut.lower is not None else cut.upper)  # type: ignore[arg-type]
    if not isinstance(bound, int) or isinstance(bound, bool) or bound == 0:
        return None
    if cut.lower is not None:
        return bound if bound > 0 else None
    return bound if bound < 0 else None


def _small_columns(cut: cst.BaseSlice, const: Callable[[cst.BaseExpression], object]) -> tuple[int, int] | None:
    """The columns ``[start, stop)`` a constant index or closed unit-step range below
    ``_SMALL_AXIS`` takes (``0`` -> (0, 1), ``2:4`` -> (2, 4)); else None."""
    def small(e: cst.BaseExpression | None, default: int | None) -> int | None:
        v = const(e) if e is not None else default
        return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= _SMALL_AXIS else None

    if isinstance(cut, cst.Index):
        k = small(cut.value, None)
        return (k, k + 1) if k is not None and k < _SMALL_AXIS else None
    if not isinstance(cut, cst.Slice) or cut.step is not None and const(cut.step) != 1:
        return None
    lower, upper = small(cut.lower, 0), small(cut.upper, None)
    return (lower, upper) if lower is not None and upper is not None and lower < upper else None


def _reads_last_axis(node: cst.Subscript) -> bool:
    """``x[..., k]``, ``x[:, :, k]``: a subscript spelled as a cut of the last axis."""
    els = [e for e in node.slice if not _adds_axis(e)]
    if len(els) < 2:
        return False
    lead = els[:-1]
    return any(isinstance(e.slice, cst.Index) and isinstance(e.slice.value, cst.Ellipsis) for e in lead) or all(
        _is_full_slice(e) for e in lead)


def _joins(name: str | None) -> bool:
    """A concat or stack: lays its parts side by side, computes nothing with them."""
    return name is not None and (name in CONCAT_CALLS or name.endswith((".stack", ".concatenate", ".Concatenate")))


def _adds_axis(el: cst.SubscriptElement) -> bool:
    s = el.slice
    if not isinstance(s, cst.Index):
        return False
    v = s.value
    return (isinstance(v, cst.Name) and v.value == "None") or (isinstance(v, cst.Attribute) and v.attr.value == "newaxis")


def _is_full_slice(el: cst.SubscriptElement) -> bool:
    s = el.slice
    return isinstance(s, cst.Slice) and s.lower is None and s.upper is None and s.step is None


@dataclass(frozen=True)
class LaneSplit(Finding):
    op: str  # "tf.split", "tf.unstack"
    why: str  # why its pieces cost a relayout

    template = "`{op}` of the last (lane) axis {why} (" + _FACTS + "); produce the pieces separately where you can"


@dataclass(frozen=True)
class SingleConcat(Finding):
    op: str  # "tf.concat", "Concatenate"
    fixed: bool  # the operand is one tensor, so the fix drops the copy

    def message(self) -> str:
        text = f"`{self.op}` of a single tensor is a needless copy; use the tensor itself"
        return text if self.fixed else f"{text} (not auto-fixed: it may not be a tensor, and its copy may be needed)"


@dataclass(frozen=True)
class ConcatSplitBack(Finding):
    op: str  # the concat
    parts: int  # how many tensors it joins, and the split makes again
    axis: int

    template = ("`{op}` of {parts} tensors is split back into {parts} pieces along axis {axis}: "
                "two copies through the padded layout; if the pieces are the parts, use them directly")


@dataclass(frozen=True)
class LaneSlice(Finding):
    start: int  # the lane the slice starts at
    width: int | None  # how many lanes it takes; None: to the end

    def message(self) -> str:
        wide = f", {self.width} wide" if self.width is not None else ""
        return f"`tf.slice` of the last (lane) axis from lane {self.start}{wide}, {_INSIDE}"


@dataclass(frozen=True)
class LaneCut(Finding):
    subscript: str  # the subscript as written: "[..., 1:]"
    why: str  # where it cuts the lane axis and why that is a copy

    template = "`{subscript}` {why}"

class NeedlessConcatSlice(Rule):
    """
    ## What it does
    Flags concatenations and slices of the padded last (lane) dim that are needless or
    costly on the accelerator:

    - a concat of a single tensor: `tf.concat([x], axis)`, `layers.Concatenate()([x])`,
      `keras.ops.concatenate([x])` (warning; a safe fix, see below);
    - a concat immediately split back into as many pieces along the same axis, e.g.
      `y = tf.concat([a, b], -1)` then `p, q = tf.split(y, 2, -1)` (warning);
    - a cut of the last (lane) axis that the code shows costs a relayout, in model or
      loss code (info: often necessary, but worth knowing the cost): an index that drops
      the axis (`x[..., 0]`), a slice starting or ending off a 128-lane boundary
      (`x[..., 5:]`, `x[:, :, :, :3]`), a strided slice (`x[..., ::2]`), a `tf.split` /
      `keras.ops.split` whose cuts fall off a 128-lane boundary, a `tf.unstack` of the
      axis, and `tf.slice(x, [0, .., k], [-1, .., n])` that takes every dim whole but the
      last.

    Which axis: `...` before the last index (`x[..., k]`, `x[b, ..., k]`, `x[..., i, k]`), or three
    or more indices whose leading ones are whole (`x[:, :, k]`) unless the code says the
    tensor has another rank (`x[:, :, k]` of a reshaped 5-D block tensor cuts a block
    axis), and `axis=-1` for split/unstack (or the last axis of a rank the code says).
    What the code says of a tensor's rank and last-axis size comes from reshapes to a
    literal shape, `keras.Input`, layers of a fixed output rank and their constant widths,
    rank-keeping ops, `einsum`, `stack`/`concat`/`expand_dims`, and what every same-file
    caller passes (`kerasfit.ruleapi.RuleContext.shape_of`).

    Not flagged, because the cut need not cost a relayout or the code does not say it
    does: cuts on 128-lane boundaries (`x[..., :128]`, halves of a 512-wide `Dense`);
    bounds the code does not fold (`x[..., :d // 2]` of RoPE, `ops.split(gate_up, 2, -1)`:
    at multiples of 128 they are free), though a constant bound counted from the end of
    an axis of unknown width (`y_true[:, :, :-1]`, a target with a state column) is
    reported: it lies on a boundary only for one width in 128; a last axis of at most 8 that the code spells
    (coordinates: `reshape(x, (-1, 4))`, `a, b, c, d = unstack(boxes, axis=-1)`, every
    column restacked with `stack(..., axis=-1)`), or that the code reads as coordinates —
    a function reads the tensor's last axis only at two or more constant columns and
    closed ranges below 8 (no open `[..., 5:]`, no `[..., -1]`, not a reshape whose
    width does not fold, like `num_classes + 5`) and no arithmetic
    combines those columns with each other or with another few-column tensor's
    (`x_ids = pos[..., 0]; y_ids = pos[..., 1]`, each to its own rotation; `label[:, :,
    :4], label[:, :, 4]` handed back apart); when arithmetic does combine them (`boxes[...,
    2] - boxes[..., 0]`), whole-tensor work replaces the cuts and they are reported; a
    one-column slice in arithmetic with its own tensor (`x / x[:, :, -1:]`: the column is
    broadcast inside the fused op); a slice whose values are never read
    (`ops.ones_like(x[..., 0])`); neighbours along the axis compared or differenced
    (`m[..., 1:] > m[..., :-1]`: any spelling shifts the lanes, there is nothing to choose);
    `x[:, k]`, which could be any axis of a 3-D tensor.

    Precision policy for the tensors: only values that are plausibly TF
    tensors in model or loss code are flagged — inside `call`/`train_step`/… of a
    Keras `Layer`/`Model`/`Loss`/`Metric` subclass, a `@tf.function`, a
    `keras.layers.Lambda` (inline, or a function handed to it by name), a Keras
    loss function `f(y_true, y_pred)`, a helper only model code calls, a value
    produced by a TF/Keras call, or — in loss and box helpers — a name that holds
    a tensor by the function's own data flow: it is computed by a TF op, sliced or
    combined from a tensor, or flows (sliced, combined, unpacked) into a TF op
    (`b1_wh = b1[..., 2:4]` … `K.maximum(b1_wh, …)`).
    Never flagged: code inside functions handed to `Dataset.map`/`filter`/
    `interleave` (the host input pipeline), host code (a TPUEstimator `metric_fn`,
    a `serving_input_fn`, a `main` that drives training, tests), code that runs once
    while a layer is constructed (`__init__` and the helpers only it calls), values
    produced by NumPy — also inside a layer's `call()`, an anchor table built with
    `np.zeros` —, `keras.datasets` or `.numpy()`, and shape vectors (`tf.shape(x)[1:3]`).

    ## Why is this slow on the accelerator
    The TPU keeps the last (minor) dim of every array in tiles of 128 lanes
    (docs/facts.md#1, #7); the Cloud TPU guide calls concatenation, slicing and strided
    slicing inside a padded dimension expensive — they become relayout copies — while a
    cut on tile boundaries takes whole tiles (docs/facts.md#7, #11). An index that drops
    the last axis moves the next axis into the lanes: every tile is rewritten. A concat
    that is split right back, or a concat of one tensor, copies data for nothing.

    ## Example
    ```python
    h = tf.nn.relu(x)
    h = tf.concat([h], axis=-1)
    y = tf.concat([a, b], axis=-1)
    p, q = tf.split(y, 2, axis=-1)
    rgb = x[..., :3]
    rot = x[..., ::2]
    ```

    ## Use instead
    ```python
    h = tf.nn.relu(x)
    p, q = a, b
    rgb = rgb_head(features)   # produce the parts with separate layers where you can
    rot = x[..., :half]        # rotate halves: contiguous parts, cut at a multiple of 128
    ```

    ## Fix safety
    Safe for the single-tensor concat without `name=`, when the element is provably
    a tensor value — the result of a TF/Keras op, directly or through the one
    assignment that reaches the name: the concat becomes the element itself. Anything
    else (a parameter, an attribute, a `tf.Variable`, a Python list) is not fixed: `v`
    for a Variable would be an alias that later `assign`s change, and a list would stay
    a list; and spelling the copy out (`tf.identity(x)`, which a one-value `tf.concat`
    already runs) would change no op, only silence the finding. The other findings have no automatic fix: whether the pieces equal the
    original parts depends on their sizes, and replacing a slice means changing the
    model.

    ## References
    docs/facts.md#1, #7, #11; Cloud TPU performance guide, "TensorFlow ops"; XLA, "Tiled layout".
    """

    code = "KF105"
    name = "needless-concat-slice"
    message = "Needless concat, or a cut of the padded last (lane) dim"
    fix_title = "Use the tensor itself"  # or its copy, see Fix safety
    fix_safety = Applicability.SAFE
    reads = frozenset({Reads.STATEMENT, Reads.FILE_FACTS, Reads.PROJECT})  # pipeline functions and names used (file facts), roles, project layers
    # Lane padding of the feature dim is the TPU's layout (docs/facts.md#7, #11).
    targets = frozenset({"tpu"})

    VALID = (
        # 128 lanes before the end: on a tile boundary whenever the width is a multiple of 128
        """
        import tensorflow as tf

        def heads(y_true):
            return y_true[:, :, :-128]
        """,
        """
        import tensorflow as tf
        y = tf.concat([a, b], axis=-1)
        """,
        # input pipeline: host-side slicing is cheap
        """
        import tensorflow as tf

        def parse(image, label):
            image = tf.image.decode_png(image)
            return image[..., :3], label

        ds = tf.data.Dataset.from_tensor_slices((x, y)).map(parse)
        """,
        """
        import tensorflow as tf
        ds = ds.map(lambda img, lbl: (img[..., :3], lbl))
        """,
        # numpy arrays
        """
        import numpy as np
        import tensorflow as tf
        images = np.load('x.npy')
        rgb = images[..., :3]
        """,
        # not the last axis / ambiguous
        """
        import tensorflow as tf
        y = tf.keras.layers.Dense(8)(x)
        first = y[:, 0]
        z = y[0, ...]
        """,
        """
        import tensorflow as tf
        parts = tf.split(tf.keras.layers.Dense(8)(x), 2, axis=0)
        """,
        """
        import tensorflow as tf
        y = tf.keras.layers.Dense(8)(x)[..., tf.newaxis]
        """,
        # cuts on 128-lane boundaries keep the tiles as they are (docs/facts.md#7)
        """
        import keras
        from keras import ops

        class Block(keras.layers.Layer):
            def call(self, x):
                h = keras.layers.Dense(512)(x)
                a, b = ops.split(h, 2, axis=-1)
                return h[..., :128] + h[..., 256:384] + a + b
        """,
        # RoPE halves, a gated unit's split: the widths are the layer's parameters, so the
        # code does not say where the cut falls (at 128 lanes it costs nothing)
        """
        import keras
        from keras import ops

        class Rotary(keras.layers.Layer):
            def __init__(self, head_dim, **kwargs):
                super().__init__(**kwargs)
                self.head_dim = head_dim

            def call(self, x, gate_up):
                x1, x2 = x[..., : self.head_dim // 2], x[..., self.head_dim // 2 :]
                gate, up = ops.split(gate_up, 2, axis=-1)
                return ops.concatenate([-x2, x1], axis=-1) * ops.silu(gate) * up
        """,
        # `x[:, :, k]` of a 5-D block tensor cuts a block axis, not the last one
        """
        import keras
        from keras import ops

        class Chunked(keras.layers.Layer):
            def call(self, query, b, h, n, c, d):
                query = ops.reshape(query, (b, h, n, c, d))
                return [query[:, :, i] for i in range(3)]
        """,
        # coordinates: an axis of four the code spells (a reshape, named pieces, a restack)
        """
        import keras
        from keras import ops

        class Boxes(keras.layers.Layer):
            def call(self, flat, deltas, size):
                boxes = ops.reshape(flat, (-1, 100, 4))
                width = boxes[..., 2] - boxes[..., 0]
                dx, dy, dw, dh = ops.unstack(deltas, axis=-1)
                scaled = ops.stack([boxes[..., 0] * size, boxes[..., 1] * size, boxes[..., 2], boxes[..., 3]], axis=-1)
                return width * dw, scaled
        """,
        # host NumPy inside a layer: an anchor table is no tensor
        """
        import numpy as np
        import keras

        class Anchors(keras.layers.Layer):
            def __init__(self, sizes, **kwargs):
                super().__init__(**kwargs)
                self.table = np.zeros((len(sizes), 3, 4))

            def call(self, features):
                anchors = np.zeros((9, 3, 4))
                widths = anchors[..., 2] - anchors[..., 0]
                heights = self.table[..., 3] - self.table[..., 1]
                return features * keras.ops.convert_to_tensor(widths * heights)
        """,
        # neighbours compared along the axis: a shift however it is written
        """
        import keras
        from keras import ops

        class SpanStarts(keras.layers.Layer):
            def call(self, mask):
                padded = ops.pad(mask, [[0, 0], [1, 0]])
                return ops.greater(padded[..., 1:], padded[..., :-1])
        """,
        # only the slice's shape is read; a test; an index table built once in __init__
        """
        import keras
        from keras import ops

        def relative_index(n):
            coords = ops.stack(ops.meshgrid(ops.arange(n), ops.arange(n)), axis=-1)
            return coords[:, :, 0] * n + coords[:, :, 1]

        class Attention(keras.layers.Layer):
            def __init__(self, n, **kwargs):
                super().__init__(**kwargs)
                self.index = relative_index(n)

            def call(self, x):
                return ops.ones_like(x[..., 0])

        class AttentionTest(keras.src.testing.TestCase):
            def test_mask(self):
                logits = ops.ones((2, 3, 5))
                self.assertAllClose(logits[:, :, 1], ops.ones((2, 3)))
        """,
        # a grouped conv written with Lambda layers: the group width is `x.shape[-1] // groups`,
        # which the code does not fold, so nothing says whether the cuts fall on 128-lane boundaries
        """
        from tensorflow.keras import layers

        def slice_tensor(x, start, stop):
            return x[:, :, :, start:stop]

        def group_conv(x, filters, groups):
            width = x.shape[-1] // groups
            parts = [
                layers.Lambda(slice_tensor, arguments={"start": g * width, "stop": (g + 1) * width})(x)
                for g in range(groups)
            ]
            return layers.Concatenate()([layers.Conv2D(filters // groups, 3, padding="same")(p) for p in parts])
        """,
        # split of a concat along another axis
        """
        import tensorflow as tf
        y = tf.concat([a, b], axis=-1)
        p, q = tf.split(y, 2, axis=0)
        """,
        # NumPy preprocessing that hands its result to TF at the end
        """
        import numpy as np
        import tensorflow as tf

        def encode_boxes(true_boxes, input_shape):
            boxes = np.array(true_boxes, dtype='float32')
            xy = (boxes[..., 0:2] + boxes[..., 2:4]) / 2
            wh = boxes[..., 2:4] - boxes[..., 0:2]
            return tf.convert_to_tensor(np.concatenate([xy, wh], -1))
        """,
        # host code: a TPUEstimator metric_fn
        """
        import tensorflow.compat.v1 as tf

        def metric_fn(per_example_loss, label_ids, logits):
            pos = tf.nn.softmax(logits)[:, :, 1]
            return {'auc': tf.metrics.auc(label_ids, pos)}
        """,
        # a shape vector is a few integers, not feature data
        """
        import tensorflow as tf

        def decode(feats):
            grid_shape = tf.shape(feats)[1:3]
            return tf.cast(grid_shape[..., ::-1], feats.dtype)
        """,
        # an image augmentation module: per-example tf.data code on the host
        """
        import tensorflow as tf

        def color(image, factor):
            gray = tf.image.grayscale_to_rgb(tf.image.rgb_to_grayscale(image))
            return tf.cast(factor * tf.cast(image, tf.float32) + (1 - factor) * tf.cast(gray, tf.float32), tf.uint8)

        def autocontrast(image):
            def scale_channel(ch):
                return tf.cast(ch, tf.float32) - tf.cast(tf.reduce_min(ch), tf.float32)
            return tf.stack([scale_channel(image[:, :, 0]), scale_channel(image[:, :, 1])], 2)
        """,
        # a driver: NumPy arrays from keras.datasets
        """
        import tensorflow as tf

        def main():
            (x_train, y_train), _ = tf.keras.datasets.cifar10.load_data()
            red = x_train.astype('float32')[..., 0]
            model.fit(tf.image.resize(x_train, (64, 64)), y_train)
        """,
        # rows, not columns: tf.slice of the leading axis
        "import tensorflow as tf\n\ndef head(rois):\n    return tf.slice(rois, [2, 0], [3, -1])\n",
        # a coordinate axis: read only at a few constant columns, each going its own way
        # (a rotation per position axis, joined by a concat)
        """
        import keras
        from keras import ops

        class Rope2D(keras.layers.Layer):
            def call(self, x, position_ids):
                x_ids = position_ids[..., 0]
                y_ids = position_ids[..., 1]
                return ops.concatenate([self.rope(x, x_ids), self.rope(x, y_ids)], axis=-1)
        """,
        # box targets and class ids handed back apart: a few columns, nothing combined
        """
        import keras
        from keras import ops

        class LabelEncoder(keras.layers.Layer):
            def call(self, boxes, classes):
                label = ops.concatenate([boxes, ops.expand_dims(classes, -1)], axis=-1)
                label = ops.where(ops.isnan(label), -1.0, label)
                return label[:, :, :4], label[:, :, 4]
        """,
        # normalized by its own last column: the column is broadcast inside the divide
        """
        import keras
        from keras import ops

        class SinePosition(keras.layers.Layer):
            def call(self, mask):
                x_embed = ops.cumsum(mask, axis=2)
                return ops.divide(x_embed, ops.add(x_embed[:, :, -1:], 1e-6))
        """,
    )
    INVALID = (
        # the same few columns combined with each other: the whole-tensor form
        # (`boxes[..., 2:] - boxes[..., :2]`) replaces the cuts
        Invalid(
            """
            import keras
            from keras import ops

            class Decode(keras.layers.Layer):
                def call(self, boxes):
                    w = boxes[..., 2] - boxes[..., 0]
                    h = boxes[..., 3] - boxes[..., 1]
                    return ops.stack([w, h], axis=-1)
            """,
            finding="LaneCut",
            at=(Range(6, 12, 6, 25), Range(6, 28, 6, 41), Range(7, 12, 7, 25), Range(7, 28, 7, 41)),
        ),
        # a detector head: the few box columns sit before an open range of class scores
        Invalid(
            """
            import keras
            from keras import ops

            class Head(keras.layers.Layer):
                def call(self, y):
                    return ops.sigmoid(y[..., :2]), y[..., 2:4], ops.softmax(y[..., 5:])
            """,
            at=(Range(6, 27, 6, 37), Range(6, 40, 6, 51), Range(6, 65, 6, 75)),
        ),
        # a detector's target keeps one state column after the classes: the cut falls 1 lane
        # before the end of an axis of unknown width, off a 128-lane boundary unless the
        # width is one more than a multiple of 128
        Invalid(
            """
            import tensorflow as tf

            def focal(y_true, y_pred):
                labels = y_true[:, :, :-1]
                return tf.reduce_sum(tf.square(labels - y_pred))
            """,
            finding="LaneCut", fields={"why": "ends 1 lane before the end of the last (lane) axis, inside one of the 128-lane tiles the TPU pads that axis to: a relayout copy (docs/facts.md#7, #11); produce the parts with separate layers/heads, or size them to multiples of 128, where you can"},
            at=Range(4, 13, 4, 30),
        ),
        # TF1 graph code: a column of the last axis cut with tf.slice
        Invalid(
            """
                import tensorflow.compat.v1 as tf

                def crop_pool(bottom, rois):
                    batch_ids = tf.squeeze(tf.slice(rois, [0, 0], [-1, 1], name="batch_id"), [1])
                    return tf.image.crop_and_resize(bottom, rois[:, 1:], tf.to_int32(batch_ids), [7, 7])
                """,
            fields={"start": 0, "width": 1},
            at=Range(4, 27, 4, 75),
        ),
        # a 3-D tensor the code says is 3-D (a Conv1D's output): `[:, :, k]` is its last axis
        Invalid(
            """
            import keras

            def head(x):
                y = keras.layers.Conv1D(64, 3)(x)
                return y[:, :, 1:]
            """,
            finding="LaneCut", fields={"why": "starts at lane 1 of the last (lane) axis, inside one of the 128-lane tiles the TPU pads that axis to: a relayout copy (docs/facts.md#7, #11); produce the parts with separate layers/heads, or size them to multiples of 128, where you can"},
            at=Range(5, 11, 5, 22),
        ),
        # interleaved pairs: every second lane
        Invalid(
            """
            import keras
            from keras import ops

            class Rotary(keras.layers.Layer):
                def call(self, x):
                    return ops.stack([-x[..., 1::2], x[..., ::2]], axis=-1)
            """,
            finding="LaneCut", fields={"why": "takes one lane in 2 of the last (lane) axis: an interleave of the TPU's 128-lane tiles, a relayout copy (docs/facts.md#7, #11); lay the parts out contiguously (rotate halves, not pairs) where you can"},
            at=(Range(6, 27, 6, 39), Range(6, 41, 6, 52)),
        ),
        # a positive axis that the rank the code says makes the last one; a backend chosen in
        # branches still names TensorFlow's split
        Invalid(
            """
            import os

            if os.environ.get("BACKEND") == "tensorflow":
                import tensorflow as F
            else:
                import torch as F

            def rgb_heads(x):
                x = F.keras.layers.Conv2D(12, 3)(x)
                return F.split(x, 3, 3)
            """,
            finding="LaneSplit", fields={"why": "cuts it at lane 4, inside a 128-lane tile the TPU pads that axis to: each piece is a relayout copy"},
            at=Range(10, 11, 10, 27),
        ),
        # the sliced tensor comes from a layer kept in a list: a Keras tensor in a helper method
        Invalid(
            """
            import keras

            class Heads:
                def __init__(self):
                    self.convs = [keras.layers.Conv2D(32, 3, padding="same") for _ in range(3)]

                def first_channels(self, x):
                    y = self.convs[0](x)
                    return y[..., :3]
            """,
            finding="LaneCut", fields={"why": "ends at lane 3 of the last (lane) axis, inside one of the 128-lane tiles the TPU pads that axis to: a relayout copy (docs/facts.md#7, #11); produce the parts with separate layers/heads, or size them to multiples of 128, where you can"},
            at=Range(9, 15, 9, 25),
        ),
        Invalid(
            """
            import tensorflow as tf

            @tf.function
            def f(x):
                h = tf.nn.relu(x)
                return tf.concat([h], axis=-1)
            """,
            expected_fix="""
            import tensorflow as tf

            @tf.function
            def f(x):
                h = tf.nn.relu(x)
                return h
            """,
            at=Range(6, 11, 6, 34),
        ),
        Invalid(
            """
            import keras

            class M(keras.Model):
                def call(self, x):
                    h = keras.ops.relu(x)
                    h = keras.ops.concatenate([h], axis=-1)
                    return h
            """,
            expected_fix="""
            import keras

            class M(keras.Model):
                def call(self, x):
                    h = keras.ops.relu(x)
                    return h
            """,
            at=Range(6, 12, 6, 47),
        ),
        # a parameter may be anything (a Variable, a list): its copy may be needed, so no fix
        Invalid(
            """
            import keras

            class M(keras.Model):
                def call(self, x):
                    x = keras.ops.concatenate([x], axis=-1)
                    return x
            """,
            finding="SingleConcat",
            at=Range(5, 12, 5, 47),
        ),
        Invalid(
            """
            from tensorflow.keras import layers
            x = layers.Concatenate()([layers.Dense(16)(inp)])
            """,
            expected_fix="""
            from tensorflow.keras import layers
            x = layers.Dense(16)(inp)
            """,
            at=Range(2, 4, 2, 49),
        ),
        # `v` would alias the Variable: after `v.assign_add(1.0)` the "copy" would read 2.0
        Invalid(
            """
            import tensorflow as tf

            v = tf.Variable([1.0])
            snapshot = tf.concat([v], 0)
            v.assign_add([1.0])
            """,
            finding="SingleConcat",
            at=Range(4, 11, 4, 28),
        ),
        Invalid(
            """
            import tensorflow as tf

            @tf.function
            def f(x):
                return tf.concat([x], axis=-1)
            """,
            finding="SingleConcat",
            at=Range(5, 11, 5, 34),
        ),
        # imported by its bare name, on a list: no fix
        Invalid(
            """
            from tensorflow import concat
            y = concat([parts], 0)
            """,
            finding="SingleConcat",
            at=Range(2, 4, 2, 22),
        ),
        # a Python list would stay a list: no fix
        Invalid(
            """
            import tensorflow as tf
            y = tf.concat([parts], 0)
            """,
            finding="SingleConcat",
            at=Range(2, 4, 2, 25),
        ),
        Invalid(
            """
            import tensorflow as tf

            def f(a, b):
                y = tf.concat([a, b], axis=-1)
                p, q = tf.split(y, 2, axis=-1)
                return p * q
            """,
            finding="ConcatSplitBack",
            at=Range(5, 11, 5, 34),
        ),
        Invalid(
            """
            import keras

            class Head(keras.layers.Layer):
                def call(self, x):
                    return x[..., :4], x[..., 4:]
            """,
            finding="LaneCut", fields={"why": "ends at lane 4 of the last (lane) axis, inside one of the 128-lane tiles the TPU pads that axis to: a relayout copy (docs/facts.md#7, #11); produce the parts with separate layers/heads, or size them to multiples of 128, where you can"},
            at=(Range(5, 15, 5, 25), Range(5, 27, 5, 37)),
        ),
        Invalid(
            """
            import tensorflow as tf

            def yolo_xy_loss(y_true, y_pred):
                return tf.reduce_sum(tf.square(y_true[..., 0:2] - y_pred[..., 0:2]))
            """,
                at=(Range(4, 35, 4, 51), Range(4, 54, 4, 70)),
        ),
        Invalid(
            """
            import tensorflow as tf

            def loss_fn(y_true, y_pred):
                p = tf.nn.sigmoid(y_pred)
                return tf.reduce_mean(p[:, :, :, 0:16] - y_true)
            """,
            at=Range(5, 26, 5, 42),
        ),
        Invalid(
            """
            import tensorflow as tf
            feats = tf.keras.layers.Dense(32)(x)
            mu, logvar = tf.split(feats, 2, axis=-1)
            """,
            fields={"op": "tf.split"},
            at=Range(3, 13, 3, 40),
        ),
        # a loss helper: parameters that flow into TF ops, slices of slices
        Invalid(
            """
            from tensorflow.keras import backend as K

            def box_iou(b1, b2):
                b1_wh = b1[..., 2:4]
                b2_wh = b2[..., 2:4]
                inter_wh = K.maximum(K.minimum(b1_wh, b2_wh), 0.0)
                inter = inter_wh[..., 0] * inter_wh[..., 1]
                return inter / (b1_wh[..., 0] * b1_wh[..., 1] + b2_wh[..., 0] * b2_wh[..., 1] - inter)
            """,
                at=(Range(4, 12, 4, 24), Range(5, 12, 5, 24), Range(7, 12, 7, 28), Range(7, 31, 7, 47), Range(8, 20, 8, 33), Range(8, 36, 8, 49), Range(8, 52, 8, 65), Range(8, 68, 8, 81)),
        ),
        # a box transform whose pieces are stacked back into a tensor
        Invalid(
            """
            from tensorflow import keras

            def bbox_transform_inv(boxes, deltas):
                width = boxes[:, :, 2] - boxes[:, :, 0]
                x1 = boxes[:, :, 0] + deltas[:, :, 0] * width
                x2 = boxes[:, :, 2] + deltas[:, :, 2] * width
                return keras.backend.stack([x1, x2], axis=2)
            """,
                at=(Range(4, 12, 4, 26), Range(4, 29, 4, 43), Range(5, 9, 5, 23), Range(5, 26, 5, 41), Range(6, 9, 6, 23), Range(6, 26, 6, 41)),
        ),
        # a list of y_true tensors, sliced per scale; an index before `...`
        Invalid(
            """
            import tensorflow as tf
            from tensorflow.keras import backend as K

            def yolo_loss(args, num_layers):
                y_true = args[num_layers:]
                dtype = K.dtype(y_true[0])
                for i in range(num_layers):
                    object_mask = y_true[i][..., 4:5]
                    first = tf.boolean_mask(y_true[i][0, ..., 0:4], object_mask[0, ..., 0] > 0)
            """,
                at=(Range(8, 22, 8, 41), Range(9, 32, 9, 54), Range(9, 56, 9, 78)),
        ),
        # asking a tensor's shape says it is a tensor
        Invalid(
            """
            import tensorflow as tf

            def grid_positions(boxes, output_size):
                batch_size = tf.shape(boxes)[0]
                xs = [boxes[:, :, 1] + i * boxes[:, :, 3] / output_size for i in range(output_size)]
                return tf.reshape(tf.stack(xs, axis=2), [batch_size, -1])
            """,
                at=(Range(5, 10, 5, 24), Range(5, 31, 5, 45)),
        ),
        # a helper only a Layer's call uses
        Invalid(
            """
            import tensorflow as tf

            def centers(boxes):
                return (boxes[..., 0] + boxes[..., 2]) / 2

            class RegressBoxes(tf.keras.layers.Layer):
                def call(self, inputs):
                    return centers(inputs)
            """,
                at=(Range(4, 12, 4, 25), Range(4, 28, 4, 41)),
        ),
    )

    # ---- concat / split --------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.call_name(node)
        if name is None:
            # an exact type first (every unresolved call passes here): see _pipeline_fns
            if type(node.func) is cst.Call and node.args and isinstance(node.args[0].value, (cst.List, cst.Tuple)):
                found = self.ctx.layer_constructor(node.func)
                if found is not None and found[1] == "keras.layers.Concatenate":
                    self._single_concat(node, node.args[0].value, "Concatenate", None)
            return
        spec = CONCAT_CALLS.get(name)
        if spec is not None:
            values = get_arg(node, spec[0], spec[1])
            if values is not None and isinstance(values.value, (cst.List, cst.Tuple)):
                self._single_concat(node, values.value, label(name), get_arg(node, "name"))
            return
        if name == "tf.slice":
            self._tf_slice(node)
            return
        spec = SPLIT_CALLS.get(name)
        if spec is None:
            return
        value = get_arg(node, spec[0], spec[1])
        axis_arg = get_arg(node, spec[2], spec[3])
        axis = self.ctx.const(axis_arg.value) if axis_arg is not None else spec[4]
        if value is None or not isinstance(axis, int):
            return
        if "unstack" not in name and self._undoes_concat(node, name, value.value, axis):
            return
        shape = self.ctx.shape_of(value.value)
        if not (axis == -1 or shape.rank is not None and axis == shape.rank - 1):
            return  # another axis, or a positive axis of a tensor whose rank the code does not say
        why = self._split_cost(node, name, shape)
        if why is not None and self._tensorish(value.value, node):
            self.report(node, LaneSplit(label(name), why), severity=Severity.INFO)

    def _split_cost(self, node: cst.Call, name: str, shape: TensorShape) -> str | None:
        """Why the pieces cost a relayout, or None when they need not (or the code does not say)."""
        if shape.last is not None and shape.last <= _SMALL_AXIS:
            return None  # a few coordinates per row (boxes, points): no feature dim to tile
        if "unstack" in name:
            count = self._unpacked_count(node)
            if count is not None and count <= _SMALL_AXIS:
                return None  # unpacked into a few named coordinates: the axis is that small
            return "drops the axis the TPU tiles in 128 lanes: every piece moves the next axis into the lanes, a relayout copy"
        pieces = get_arg(node, "num_or_size_splits" if name == "tf.split" else "indices_or_sections", 1)
        given = self.ctx.const(pieces.value) if pieces is not None else None
        if isinstance(given, int) and not isinstance(given, bool) and given > 0:
            if shape.last is None or shape.last % given:
                return None  # pieces of a size the code does not say
            bounds = [shape.last // given * i for i in range(1, given)]
        elif isinstance(given, (list, tuple)) and all(isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in given):
            # tf.split takes the sizes, keras.ops.split the indices where the cuts fall
            bounds = [sum(given[:i]) for i in range(1, len(given))] if name == "tf.split" else list(given)
        else:
            return None
        off = [b for b in bounds if b % _LANES]
        if not off:
            return None  # cuts on 128-lane boundaries keep the tiling
        return f"cuts it at lane {off[0]}, inside a 128-lane tile the TPU pads that axis to: each piece is a relayout copy"

    def _unpacked_count(self, node: cst.Call) -> int | None:
        """``a, b, c, d = tf.unstack(x, axis=-1)`` / ``num=4``: how many pieces the code names."""
        num = get_arg(node, "num", 1)
        value = self.ctx.const(num.value) if num is not None else None
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        parent = self.ctx.parent(node)
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, (cst.Tuple, cst.List)):
            return len(parent.targets[0].target.elements)
        return None

    def _single_concat(self, node: cst.Call, values: cst.List | cst.Tuple, what: str, name_arg: cst.Arg | None) -> None:
        elements = values.elements
        if len(elements) != 1 or isinstance(elements[0], cst.StarredElement):
            return
        el = elements[0].value
        change: Replace | Remove | None = None
        if name_arg is None and isinstance(el, _ATOMIC) and self._op_result(el):
            change = Replace(node, el)
            stack = self.ctx.ancestors(node)
            # `x = tf.concat([x], -1)` becomes nothing rather than `x = x`
            if (
                isinstance(el, cst.Name)
                and len(stack) >= 2
                and isinstance(stack[-1], cst.Assign)
                and isinstance(stack[-2], cst.SimpleStatementLine)
                and len(stack[-2].body) == 1
                and len(stack[-1].targets) == 1
                and isinstance(stack[-1].targets[0].target, cst.Name)
                and stack[-1].targets[0].target.value == el.value
            ):
                change = Remove(stack[-2])
            self.report(node, SingleConcat(what, fixed=True), fix=self.make_fix(change))
            return
        # Anything else (a parameter, a Variable, a list) may need its copy: `v` for a
        # Variable would be an alias, a list would stay a list. Respelling the copy
        # (`tf.identity(x)`, which a one-value `tf.concat` already runs) would change no op
        # and only silence the finding: no fix.
        self.report(node, SingleConcat(what, fixed=False))

    def _op_result(self, expr: cst.BaseExpression) -> bool:
        """``expr`` is provably one tensor value: a TF/Keras op's result (directly, or the
        one assignment that reaches the name). Not a parameter, an attribute or a subscript
        (a Variable, a list, anything), not an object a constructor makes (``tf.Variable``),
        not an op that returns several tensors."""
        src = self.ctx.value_of(expr)
        if not isinstance(src, cst.Call):
            return False
        name = self.ctx.call_name(src)
        if name is not None:
            last = name.rsplit(".", 1)[-1]
            return not last[:1].isupper() and name not in _NOT_ONE_TENSOR and not name.startswith(_NOT_TENSOR_MODULES)
        # a layer application: Dense(16)(x), self.dense(x)
        held = self_attr(src.func) or isinstance(src.func, cst.Subscript) or isinstance(src.func, cst.Call)
        found = self.ctx.layer_constructor(src.func) if held else None
        if found is None or not found[1].startswith("keras.layers.") or found[1] in _LAYERS_ANY_OUTPUT:
            return False
        keywords = {a.keyword.value for a in src.args if a.keyword is not None}
        if isinstance(src.func, cst.Call):
            keywords |= {a.keyword.value for a in src.func.args if a.keyword is not None}
        return not keywords & _SEVERAL_OUTPUTS

    def _undoes_concat(self, node: cst.Call, name: str, value: cst.BaseExpression, axis: int) -> bool:
        src = self.ctx.value_of(value)
        if not isinstance(src, cst.Call):
            return False
        cname = self.ctx.call_name(src)
        if cname is None:
            return False
        spec = CONCAT_CALLS.get(cname)
        if spec is None:
            return False
        parts = get_arg(src, spec[0], spec[1])
        c_axis_arg = get_arg(src, spec[2], spec[3])
        c_axis = self.ctx.const(c_axis_arg.value) if c_axis_arg is not None else spec[4]
        if parts is None or not isinstance(parts.value, (cst.List, cst.Tuple)) or c_axis != axis:
            return False
        n = len(parts.value.elements)
        pieces = get_arg(node, "num_or_size_splits" if name == "tf.split" else "indices_or_sections", 1)
        count = None
        if pieces is not None and isinstance(pieces.value, (cst.List, cst.Tuple)) and name == "tf.split":
            count = len(pieces.value.elements)  # one size per piece
        elif pieces is not None:
            k = self.ctx.const(pieces.value)
            count = k if isinstance(k, int) and not isinstance(k, bool) else None
        if n < 2 or count != n:
            return False
        self.report(node, ConcatSplitBack(label(cname), n, axis))
        return True

    # ---- slices -----------------------------------------------------------------
    def _tf_slice(self, node: cst.Call) -> None:
        """``tf.slice(rois, [0, 1], [-1, 1])``: every dim taken whole but the last, of which
        a part is taken — a TF op, so its input is a tensor whatever the code around it."""
        begin, size = get_arg(node, "begin", 1), get_arg(node, "size", 2)
        b = self.ctx.const(begin.value) if begin is not None else None
        n = self.ctx.const(size.value) if size is not None else None
        if not (isinstance(b, (list, tuple)) and isinstance(n, (list, tuple)) and len(b) == len(n) >= 2):
            return
        if any(x != 0 for x in b[:-1]) or any(x != -1 for x in n[:-1]) or n[-1] == -1 and b[-1] == 0:
            return
        if not all(isinstance(x, int) for x in (b[-1], n[-1])):
            return
        if b[-1] % _LANES == 0 and (n[-1] == -1 or n[-1] % _LANES == 0):
            return  # starts and ends on 128-lane boundaries: the tiles stay as they are
        value = get_arg(node, "input_", 0)
        if value is not None and self._small_axis(self.ctx.shape_of(value.value)):
            return
        if self._in_pipeline(node) or self._host_code(node):
            return
        self.report(node, LaneSlice(b[-1], n[-1] if n[-1] != -1 else None), severity=Severity.INFO)

    @staticmethod
    def _small_axis(shape: TensorShape) -> bool:
        return shape.last is not None and shape.last <= _SMALL_AXIS

    def _host_code(self, node: cst.CSTNode) -> bool:
        """Code no training step runs: host functions, the input pipeline, and what runs once
        while a layer is constructed (an index table built in ``__init__``)."""
        fn = self.ctx.enclosing_callable(node)
        ctx = self.ctx
        return fn is not None and (ctx.is_host_function(fn) or ctx.function_role(fn) == "input" or ctx.is_construction(fn))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        els = [e for e in node.slice if not _adds_axis(e)]  # `None` / `tf.newaxis` add axes, slice nothing
        if not els or len(els) < len(node.slice) and not els[:-1]:
            return
        last = els[-1]
        if _is_full_slice(last) or not isinstance(last.slice, (cst.Index, cst.Slice)):
            return
        if isinstance(last.slice, cst.Index) and isinstance(last.slice.value, cst.Ellipsis):
            return
        lead = els[:-1]
        if not lead and len(node.slice) == len(els):
            return  # x[k]: the first axis (a list, a row)
        above = self.ctx.ancestors(node)
        parent = above[-1] if above else None
        if isinstance(parent, (cst.AssignTarget, cst.AugAssign)):
            return  # item assignment: not a TF tensor
        if isinstance(parent, cst.Arg) and len(above) >= 2 and self.ctx.call_name(above[-2]) in _SHAPE_ONLY:
            return  # `ones_like(x[..., 0])` reads only the slice's shape: XLA never computes it
        counted_from_end = any(isinstance(e.slice, cst.Index) and isinstance(e.slice.value, cst.Ellipsis) for e in lead)
        shape = self.ctx.shape_of(node.value)
        if not counted_from_end:
            # three or more indices whose leading ones are whole (`x[:, k]` could be any
            # axis of a 3-D tensor): the last axis, unless the code says the tensor has
            # another rank (`x[:, :, k]` of a 5-D block tensor cuts a block axis)
            if len(els) < 3 or not all(_is_full_slice(e) for e in lead) or shape.rank not in (None, len(els)):
                return
        why = self._cut_cost(last.slice, shape)
        if why is None or self._restacked(node, above) or self._neighbours(node, above) or self._coordinate_axis(node):
            return
        if self._own_column(node, above):
            return
        if not self._tensorish(node.value, node):
            return
        spelled = "[" + ", ".join(self.ctx.code(e).strip().rstrip(",").strip() for e in node.slice) + "]"
        self.report(node, LaneCut(spelled, why), severity=Severity.INFO)

    def _coordinate_axis(self, node: cst.Subscript) -> bool:
        """``x = pos[..., 0]; y = pos[..., 1]``, ``label[:, :, :4], label[:, :, 4]``: where
        the function reads the tensor's last axis, it reads it only at constant columns and
        closed ranges, all below 8, and at two or more of them. The code then treats that
        axis as a few coordinates per row (points, boxes), not a feature dim to tile: no open
        range (``[..., 5:]``, a detector head's class scores), no column counted from an
        unknown end (``[..., -1]``), no index the code does not fold."""
        fn = self.ctx.enclosing_callable(node)
        if fn is None:
            return False
        src = self.ctx.value_of(node.value)
        if isinstance(src, cst.Call) and (self.ctx.call_name(src) or "").endswith(".reshape"):
            return False  # the reshape spells the width (`num_classes + 5`): what it says stands
        base = self.ctx.code(node.value)
        cuts: set[tuple[int, int]] = set()
        for n in walk(fn):
            if not isinstance(n, cst.Subscript) or self.ctx.code(n.value) != base:
                continue
            last = n.slice[-1]
            if not _reads_last_axis(n) or _is_full_slice(last) or isinstance(last.slice, cst.Index) and isinstance(
                    last.slice.value, cst.Ellipsis) or not isinstance(last.slice, (cst.Index, cst.Slice)):
                continue  # not (spelled as) a cut of the last axis
            cut = _small_columns(last.slice, self.ctx.const)
            if cut is None:
                return False
            cuts.add(cut)
        mine = _small_columns(node.slice[-1].slice, self.ctx.const)
        return len(cuts) >= 2 and mine not in self._columns_met(fn, base)

    def _own_column(self, node: cst.Subscript, above: Sequence[cst.CSTNode]) -> bool:
        """``x / (x[:, :, -1:] + eps)``: one column kept as an axis, in arithmetic with the
        whole tensor it was cut from (normalized by its last column). The column is
        broadcast back over the lanes inside the fused elementwise op: no copy to avoid."""
        cut = node.slice[-1].slice
        if not isinstance(cut, cst.Slice) or cut.step is not None:
            return False
        const = self.ctx.const
        lower = const(cut.lower) if cut.lower is not None else 0
        upper = const(cut.upper) if cut.upper is not None else None
        one = lower == -1 and upper is None or (isinstance(lower, int) and isinstance(upper, int) and upper - lower == 1 and lower >= 0)
        if not one:
            return False
        base = self.ctx.code(node.value)
        for anc in reversed(above):
            if isinstance(anc, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                return False
            operands = self._combined(anc)
            if operands and any(self.ctx.code(o) == base for o in operands):
                return True
        return False

    def _combined(self, node: cst.CSTNode) -> list[cst.BaseExpression]:
        """What ``node`` combines arithmetically: a binary operation's operands, or the
        arguments of a call that is no concat or stack (none for anything else)."""
        if isinstance(node, cst.BinaryOperation):
            return [node.left, node.right]
        if isinstance(node, cst.Call) and not _joins(self.ctx.call_name(node)):
            return [a.value for a in node.args]
        return []

    def _columns_met(self, fn: cst.FunctionDef | cst.Lambda, base: str) -> set[tuple[int, int]]:
        """The columns of ``base`` that arithmetic in ``fn`` combines with another column —
        of ``base`` or of another few-column tensor — directly or through the names they
        are assigned to (``w = b[..., 2] - b[..., 0]``, ``area = wh[..., 0] * wh[..., 1]``,
        ``b[..., 0] + d[..., 0] * w``): work on whole tensors (``b[..., 2:] - b[..., :2]``)
        can replace those cuts. Columns that each go their own way (a lookup per
        coordinate, an embedding per box side joined by a concat) have no whole-tensor
        form to offer."""
        code = self.ctx.code
        const = self.ctx.const
        origins: dict[str, set[tuple[str, tuple[int, int]]]] = {}

        def cols(expr: cst.CSTNode) -> set[tuple[str, tuple[int, int]]]:
            out: set[tuple[str, tuple[int, int]]] = set()
            shape_only: set[int] = set()  # `ops.shape(pos_x)` reads no column's values
            for n in walk(expr):
                if id(n) in shape_only:
                    continue
                if isinstance(n, cst.Call) and self.ctx.call_name(n) in _SHAPE_ONLY or (
                        isinstance(n, cst.Attribute) and n.attr.value in ("shape", "dtype")):
                    shape_only.update(id(d) for d in walk(n))
                elif isinstance(n, cst.Subscript) and _reads_last_axis(n):
                    cut = _small_columns(n.slice[-1].slice, const)
                    if cut is not None:
                        out.add((code(n.value), cut))
                elif isinstance(n, cst.Name):
                    out |= origins.get(n.value, set())
            return out

        for n in walk(fn):
            if isinstance(n, cst.Assign):
                for t in n.targets:
                    pairs = zip(t.target.elements, n.value.elements) if isinstance(t.target, (cst.Tuple, cst.List)) and isinstance(
                        n.value, (cst.Tuple, cst.List)) and len(t.target.elements) == len(n.value.elements) else [(t, n.value)]
                    for target, value in pairs:
                        inner = target.value if isinstance(target, cst.Element) else target.target  # type: ignore[union-attr]
                        if isinstance(inner, cst.Name):
                            found = cols(value.value if isinstance(value, cst.Element) else value)
                            origins.setdefault(inner.value, set()).update(found)
        met: set[tuple[int, int]] = set()
        for n in walk(fn):
            operands = self._combined(n)
            if not operands:
                continue
            reads = [cols(o) for o in operands]
            joined: set[tuple[str, tuple[int, int]]] = set().union(*reads)
            if sum(1 for r in reads if r) >= 2 and len(joined) >= 2:
                met.update(cut for b, cut in joined if b == base)
        return met

    def _neighbours(self, node: cst.Subscript, above: Sequence[cst.CSTNode]) -> bool:
        """``x[..., 1:] - x[..., :-1]``, ``greater(m[..., 1:], m[..., :-1])``: neighbours along
        the last axis compared or differenced. Every way to write it shifts the lanes by
        one: there is no layout to choose instead."""
        parent = above[-1] if above else None
        if isinstance(parent, cst.Arg) and len(above) >= 2 and isinstance(above[-2], cst.Call):
            others = [a.value for a in above[-2].args if a is not parent]
        elif isinstance(parent, (cst.BinaryOperation, cst.Comparison)):
            others = [parent.right if parent.left is node else parent.left] if isinstance(parent, cst.BinaryOperation) else [
                parent.left, *(c.comparator for c in parent.comparisons)]
        else:
            return False
        base = self.ctx.code(node.value)
        mine = _shift(node.slice[-1].slice, self.ctx.const)
        return mine is not None and any(
            isinstance(o, cst.Subscript) and o is not node and self.ctx.code(o.value) == base
            and _shift(o.slice[-1].slice, self.ctx.const) == -mine for o in others)

    def _restacked(self, node: cst.Subscript, above: Sequence[cst.CSTNode]) -> bool:
        """``stack([b[..., 0] * w, b[..., 1] * h, b[..., 2] * w, b[..., 3] * h], axis=-1)``: every
        column of a few-column tensor, each taken by index, stacked back on the last axis —
        the code says the axis has exactly those few columns (coordinates, not features)."""
        i = len(above) - 1
        while i >= 2 and not isinstance(above[i], (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            el, seq, arg = above[i], above[i - 1], above[i - 2]
            if isinstance(el, cst.Element) and isinstance(seq, (cst.List, cst.Tuple)) and isinstance(arg, cst.Arg):
                call = above[i - 3] if i >= 3 else None
                name = self.ctx.call_name(call) if isinstance(call, cst.Call) else None
                if name is None or not name.endswith(".stack") or arg is not call.args[0]:  # type: ignore[union-attr]
                    return False
                axis = get_arg(call, "axis", 1)  # type: ignore[arg-type]
                if axis is None or self.ctx.const(axis.value) != -1 or len(seq.elements) > _SMALL_AXIS:
                    return False
                base = self.ctx.code(node.value)
                columns = {c for e in seq.elements for c in self._columns_of(e.value, base)}
                return columns == set(range(len(seq.elements)))
            i -= 1
        return False

    def _columns_of(self, expr: cst.BaseExpression, base: str) -> Iterator[int]:
        """The integer indices ``base[..., j]`` of ``expr`` takes on the last axis."""
        for n in walk(expr):
            if isinstance(n, cst.Subscript) and isinstance(n.slice[-1].slice, cst.Index):
                j = self.ctx.const(n.slice[-1].slice.value)
                if isinstance(j, int) and not isinstance(j, bool) and self.ctx.code(n.value) == base:
                    yield j

    def _cut_cost(self, cut: cst.Index | cst.Slice, shape: TensorShape) -> str | None:
        """What slicing the last axis with ``cut`` costs on the TPU, or None when it need not
        cost a relayout: a few coordinates per row, cuts on 128-lane boundaries, or bounds
        the code does not fold (nothing then says where the cut falls)."""
        if self._small_axis(shape):
            return None  # boxes, points: a few coordinates per row, no feature dim to tile
        const = self.ctx.const
        if isinstance(cut, cst.Index):
            return ("takes one column of the last (lane) axis: dropping the axis the TPU tiles in 128 lanes moves the "
                    f"next axis into the lanes, a relayout copy ({_FACTS}); keep the axis (`k:k+1`) or compute on the "
                    "whole tensor where you can")
        step = const(cut.step) if cut.step is not None else 1
        if step != 1:
            if not isinstance(step, int) or isinstance(step, bool):
                return None
            if step < 0:
                return (f"reverses the last (lane) axis: every lane of the TPU's 128-lane tiles moves, a relayout copy "
                        f"({_FACTS}); keep one order (reverse what produces or reads it instead) where you can")
            return (f"takes one lane in {step} of the last (lane) axis: an interleave of the TPU's 128-lane tiles, "
                    f"a relayout copy ({_FACTS}); lay the parts out contiguously (rotate halves, not pairs) where you can")
        raw_lower = const(cut.lower) if cut.lower is not None else 0
        lower = _bound(raw_lower, shape)
        if lower is None:
            return _from_end(raw_lower, "starts")
        if lower % _LANES:
            return f"starts at lane {lower} of the last (lane) axis, {_INSIDE}"
        raw_upper = const(cut.upper) if cut.upper is not None else None
        upper = _bound(raw_upper, shape) if cut.upper is not None else shape.last
        if upper is None:
            return _from_end(raw_upper, "ends")
        if upper % _LANES == 0 or upper == shape.last:
            return None  # (a suffix from a 128-lane boundary keeps the tiles)
        return f"ends at lane {upper} of the last (lane) axis, {_INSIDE}"

    # ---- is it a TF tensor in model or loss code? ------------------------------------
    def _tensorish(self, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
        """(``at``: the node being visited, where ``expr`` is used.)"""
        fn = self.ctx.callable_of(at)
        if fn is not None and self.ctx.tensor_names(fn).host_data(expr):
            return False  # NumPy on the host, even inside a layer's call()
        if self._in_pipeline(at) or not self._tensor_in_code(expr, at):
            return False
        # asked last: the roles need the whole file's index
        return not self._host_code(at)

    def _tensor_in_code(self, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
        ctx = self.ctx
        src = ctx.value_of(expr)
        if isinstance(src, cst.Call):
            raw = ctx.raw_name(src.func) or ""
            if raw.split(".")[0] in ("numpy", "np", "pandas", "scipy"):
                return False
            if isinstance(src.func, cst.Attribute) and src.func.attr.value in ("numpy", "to_numpy", "tolist"):
                return False
            if ctx.call_name(src) is not None:
                return True
            if isinstance(src.func, cst.Call) and (ctx.call_name(src.func) or "").startswith("keras.layers."):
                return True
            held = self_attr(src.func) or isinstance(src.func, cst.Subscript) or (
                isinstance(src.func, cst.Name) and ctx.loop_source(src.func) is not None
            )  # self.conv(x), self.convs[i](x), conv(x) for conv in self.convs
            found = ctx.layer_constructor(src.func) if held else None
            if found is not None and found[1].startswith("keras.layers."):
                return True
        for anc in reversed(ctx.ancestors(at)):
            if isinstance(anc, cst.Lambda):
                if self._lambda_layer(anc, at):
                    return True
            elif isinstance(anc, cst.FunctionDef):
                if self._model_function(anc, at) or self._loss_signature(anc):
                    return True
                # loss and box helpers: the sliced value is (or is sliced/combined
                # from, or into) a tensor a TF op computes with; else a helper that
                # only model code calls
                if ctx.tensor_names(anc).holds_tensor(expr):
                    return True
                # the file-wide roles only matter for a helper this file calls or hands
                # over by name (`layers.Lambda(slice_tensor, arguments=...)`)
                used = ctx.file_fact(f"KF105.used.{anc.name.value}", partial(_used_by_name, anc.name.value))
                return used and ctx.function_role(anc) == "model"
        return False

    @staticmethod
    def _loss_signature(fn: cst.FunctionDef) -> bool:
        """``def loss(y_true, y_pred)``: Keras calls it on tensors."""
        names = {p.name.value for p in fn.params.params}
        return {"y_true", "y_pred"} <= names

    def _lambda_layer(self, lam: cst.Lambda, at: cst.CSTNode) -> bool:
        stack = self.ctx.ancestors(at)
        i = next((k for k, n in enumerate(stack) if n is lam), None)
        if i is None or i < 2 or not isinstance(stack[i - 1], cst.Arg):
            return False
        return self.ctx.call_name(stack[i - 2]) == "keras.layers.Lambda"

    def _model_function(self, fn: cst.FunctionDef, at: cst.CSTNode) -> bool:
        for d in fn.decorators:
            dec = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
            if self.ctx.resolve(dec) == "tf.function":
                return True
        if fn.name.value not in _TENSOR_METHODS:
            return False
        cls = None
        for anc in reversed(self.ctx.ancestors(at)):
            if isinstance(anc, cst.ClassDef):
                cls = anc
                break
            if anc is not fn and isinstance(anc, cst.FunctionDef):
                return False
        return cls is not None and any(self.ctx.resolve(b.value) in _KERAS_TENSOR_BASES for b in cls.bases)

    def _in_pipeline(self, at: cst.CSTNode) -> bool:
        stack = self.ctx.ancestors(at)
        pipeline_fns: frozenset[str] = self.ctx.file_fact("KF105.pipeline_fns", _pipeline_fns)
        for i, anc in enumerate(stack):
            if isinstance(anc, cst.FunctionDef) and anc.name.value in pipeline_fns:
                return True
            if isinstance(anc, cst.Lambda) and i >= 2 and isinstance(stack[i - 1], cst.Arg):
                call = stack[i - 2]
                if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute):
                    if call.func.attr.value in _PIPELINE_METHODS:
                        return True
        return False


def _pipeline_fns(ctx: RuleContext) -> frozenset[str]:
    """Names of the functions the file hands to a ``Dataset`` method (``ds.map(parse)``)."""
    out: set[str] = set()
    # the file index lists every call: no walk of the whole module (exact types: libcst's
    # node classes have no subclasses, and isinstance against them costs ~10x)
    for call in ctx.all_calls():
        func = call.func
        if type(func) is cst.Attribute and func.attr.value in _PIPELINE_METHODS:
            out.update(a.value.value for a in call.args if type(a.value) is cst.Name)
    return frozenset(out)


def _used_by_name(name: str, ctx: RuleContext) -> bool:
    """The file's text names ``name`` besides its ``def``: a call, or the function
    handed over by reference (``layers.Lambda(slice_tensor)``)."""
    return len(re.findall(rf"(?<!\w){re.escape(name)}\b", ctx.source)) > 1
