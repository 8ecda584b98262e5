from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from kerasfit.ruleapi import RuleContext
    from kerasfit.ruleapi.values import Origin

from kerasfit.ruleapi import Finding, Invalid, Range, Reads, Rule
from kerasfit.ruleapi.symbols import (
    CONCAT_CALLS,
    MATMUL_CALLS,
    RELAYOUT_CALLS,
    RESHAPE_CALLS,
    SPACE_DEPTH_OPS,
    SPLIT_CALLS,
    TRANSPOSE_CALLS,
    canonical,
)
from kerasfit.ruleapi.syntax import dotted_name, get_arg, walk

_ADVICE = {
    "depth_to_space": "upsample with `Conv2DTranspose(strides=r)` or a resize followed by a conv",
    "space_to_depth": "do it in the input pipeline (on the host) or use a strided convolution",
    "space_to_batch": "use the convolution's `dilation_rate`",
    "batch_to_space": "use the convolution's `dilation_rate`",
}


_TILES = frozenset({"tf.tile", "keras.ops.tile"})


def _advice(name: str) -> str:
    for key, text in _ADVICE.items():
        if key in name:
            return text
    return ""


@dataclass(frozen=True)
class SpaceDepthOp(Finding):
    op: str  # "depth_to_space"
    padded_to: int  # what the feature dim pads to on the target
    advice: str  # what to use instead
    unread_module: str | None = None  # taken for the op by its name: a project module kerasfit cannot read

    def message(self) -> str:
        note = f" (taken by its name: kerasfit cannot read `{self.unread_module}`)" if self.unread_module else ""
        return (f"`{self.op}`{note} moves data between the feature dim (padded to {self.padded_to}) and "
                f"spatial/batch dims: a full relayout copy on the accelerator; {self.advice}")


@dataclass(frozen=True)
class PixelShuffle(Finding):
    template = ("Hand-written pixel shuffle (reshape → transpose → reshape) moves data between the padded "
                "feature dim and spatial dims, like `depth_to_space`; upsample with `Conv2DTranspose(strides=r)` "
                "or a strided conv instead")


@dataclass(frozen=True)
class PhaseSplit(Finding):
    template = ("Stride-2 phase split concatenated on channels is a hand-written `space_to_depth`: it moves "
                "spatial data into the padded feature dim; use a strided convolution (e.g. a 6×6/stride-2 stem)")


class SpaceDepth(Rule):
    """
    ## What it does
    Flags ops that move data between the feature (channel) dimension and the spatial or
    batch dimensions in model code: `tf.nn.space_to_depth`, `tf.nn.depth_to_space`,
    `keras.ops.space_to_depth` / `depth_to_space`, `tf.space_to_batch(_nd)`,
    `tf.batch_to_space(_nd)` (also a function of that name in a project module kerasfit
    cannot read, such as a compat shim; the finding says so), and their hand-written forms —
    a pixel shuffle written as reshape (rank ≥ 5) → transpose → reshape that multiplies a
    spatial or the channel dim (also when split / squeeze / concat move the data in between,
    as sub-pixel phase shifts do), and a "Focus"-style stride-2 phase split concatenated on
    channels. `batch_to_space` over a tiled batch is nearest-neighbour upsampling, which
    the finding names.

    Input-pipeline code (functions given to `Dataset.map`, parsers) is not flagged:
    there the op runs on the host CPU, and the TPU reference models use
    `space_to_depth` in the input pipeline on purpose. Nor is an image grid made for a
    summary or a plot (the reshape → transpose → reshape goes into `tf.summary.image`,
    or sits in a function named for a summary, grid, montage or plot): it tiles a few
    images once per summary, outside the training computation.

    ## Why is this slow on the accelerator
    On a TPU the feature dimension is the minor, 128-lane tiled dimension and is padded
    to a multiple of 8 or 128; spatial and batch dims are laid out differently. These
    ops rewrite the tensor across that boundary, which is a full relayout copy through
    HBM with padding on both sides (docs/facts.md#7, #12, #13). The Cloud TPU guide lists all
    four ops as expensive.

    ## Example
    ```python
    x = tf.keras.layers.Conv2D(3 * 4 * 4, 3, padding="same")(x)
    x = tf.nn.depth_to_space(x, 4)                 # ESPCN-style upsampling
    ```

    ## Use instead
    ```python
    x = tf.keras.layers.Conv2DTranspose(3, 4, strides=4, padding="same")(x)
    ```

    ## Fix safety
    No automatic fix: the replacement is a different layer with its own weights.

    ## References
    docs/facts.md#7, #12, #13; Cloud TPU performance guide, "TensorFlow ops".
    """

    code = "KF106"
    name = "space-depth"
    message = "Space/depth rearrangement moves data between padded and unpadded dims"
    reads = frozenset({Reads.STATEMENT, Reads.FILE_FACTS, Reads.PROJECT})  # the function's role

    VALID = (
        # input pipeline: runs on the host, and is the TPU reference models' own trick
        """
        import tensorflow as tf

        def parse(record):
            image = tf.io.decode_jpeg(record)
            return tf.nn.space_to_depth(image[None], 2)[0]

        ds = tf.data.TFRecordDataset('train').map(parse)
        """,
        # a user's own function of the same name
        """
        import tensorflow as tf

        def depth_to_space(x, r):
            return x

        y = depth_to_space(x, 2)
        """,
        # Swin-style window partition: channels stay minor, no dim is multiplied
        """
        import tensorflow as tf

        def window_partition(x, ws, h, w, c):
            x = tf.reshape(x, [-1, h // ws, ws, w // ws, ws, c])
            x = tf.transpose(x, [0, 1, 3, 2, 4, 5])
            return tf.reshape(x, [-1, ws, ws, c])
        """,
        # Swin-style window reverse written with products: still a block partition
        "from keras import ops\n\n"
        "def window_reverse(windows, ws, h, w, c):\n"
        "    x = ops.reshape(windows, (-1, h // ws, w // ws, ws, ws, c))\n"
        "    x = ops.transpose(x, (0, 1, 3, 2, 4, 5))\n"
        "    return ops.reshape(x, (-1, (h // ws) * ws, (w // ws) * ws, c))\n",
        # an image grid for a summary: tiles a batch of RGB images into one picture
        "import tensorflow as tf\n\n"
        "def add_samples(images, rows, cols, h, w):\n"
        "    x = tf.reshape(images, [rows, cols, h, w, 3])\n"
        "    x = tf.transpose(x, [0, 2, 1, 3, 4])\n"
        "    x = tf.reshape(x, [1, rows * h, cols * w, 3])\n"
        "    tf.summary.image('samples', x)\n",
        "from keras import ops\n\n"
        "def image_grid(images, rows, cols, h, w, c):\n"
        "    x = ops.reshape(images, (rows, cols, h, w, c))\n"
        "    x = ops.transpose(x, (0, 2, 1, 3, 4))\n"
        "    return ops.reshape(x, (1, rows * h, cols * w, c))\n",
        # a stride-2 slice that is not a phase split
        """
        import tensorflow as tf
        y = tf.concat([a[:, ::2], b[:, ::2]], axis=1)
        """,
        # attention heads regrouped through a matmul: the data is computed, not shuffled
        """
        import tensorflow as tf

        def attention(x, b, n, h, d):
            qkv = tf.reshape(x, [b, n, 3, h, d])
            q, k, v = tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))
            out = tf.matmul(tf.nn.softmax(tf.matmul(q, k, transpose_b=True)), v)
            out = tf.concat(tf.unstack(out, axis=1), axis=-1)
            return tf.reshape(out, [b, n, h * d])
        """,
        # attention heads moved next to the batch for `q @ k`: a matmul's operands are
        # transposed for free, and no spatial dim is multiplied by a factor of the channels
        """
        from keras import ops

        def attention(qkv, batch, height, width, heads, key_dim):
            qkv = ops.transpose(ops.reshape(qkv, (batch, height * width, 3, heads, key_dim)), axes=(2, 0, 3, 1, 4))
            qkv = ops.reshape(qkv, (3, batch * heads, height * width, key_dim))
            queries, keys, values = ops.unstack(qkv, axis=0)
            return ops.softmax(queries @ ops.transpose(keys, axes=(0, 2, 1))) @ values
        """,
    )
    INVALID = (
        # a sub-pixel phase shift: reshape, transpose, then split / squeeze / concat back
        Invalid(
            """
            import tensorflow as tf

            def phase_shift(image, r):
                bsize, a, b, c = image.get_shape().as_list()
                x = tf.reshape(image, (-1, a, b, r, r))
                x = tf.transpose(x, (0, 1, 2, 4, 3))
                x = tf.split(x, a, 1)
                x = tf.concat([tf.squeeze(t, axis=1) for t in x], 2)
                x = tf.split(x, b, 1)
                x = tf.concat([tf.squeeze(t, axis=1) for t in x], 2)
                return tf.reshape(x, (-1, a * r, b * r, 1))
            """,
            finding="PixelShuffle",
            at=Range(6, 8, 6, 40),
        ),
        # a project module's `batch_to_space` kerasfit cannot read, over a tiled batch:
        # nearest-neighbour upsampling
        Invalid(
            """
            import tensorflow.compat.v1 as tf
            from . import compat_utils

            def upscale(images, scale):
                return compat_utils.batch_to_space(
                    input=tf.tile(images, [scale**2, 1, 1, 1]), crops=[[0, 0], [0, 0]], block_shape=scale)
            """,
            fields={"op": "batch_to_space", "unread_module": ".compat_utils"},
            at=Range(5, 11, 6, 94),
        ),
        Invalid(
            """
            import tensorflow as tf

            class SubPixel(tf.keras.layers.Layer):
                def call(self, x):
                    return tf.nn.depth_to_space(x, 4)
            """,
            fields={"op": "depth_to_space", "padded_to": 128},
            at=Range(5, 15, 5, 41),
        ),
        Invalid(
            """
            import tensorflow.compat.v1 as tf

            def model_fn(features, labels, mode, params):
                net = tf.layers.conv2d(features, 64, 3)
                net = tf.space_to_batch_nd(net, [2, 2], [[0, 0], [0, 0]])
                return net
            """,
            fields={"op": "space_to_batch_nd", "advice": "use the convolution's `dilation_rate`"},
            at=Range(5, 10, 5, 61),
        ),
        Invalid(
            """
            import keras

            x = keras.ops.depth_to_space(x, 2)
            """,
            at=Range(3, 4, 3, 34),
        ),
        # hand-written pixel shuffle split over lines, in Keras 3 ops
        Invalid(
            """
            from keras import ops

            def pixel_shuffle(x, r, h, w, c):
                x = ops.reshape(x, (-1, h, w, r, r, c))
                x = ops.transpose(x, (0, 1, 3, 2, 4, 5))
                return ops.reshape(x, (-1, h * r, w * r, c))
            """,
            finding="PixelShuffle",
            at=Range(5, 8, 5, 44),
        ),
        # YOLO "Focus": space_to_depth by strided slices
        Invalid(
            """
            import tensorflow as tf

            def focus(x):
                return tf.concat([x[:, ::2, ::2, :], x[:, 1::2, ::2, :], x[:, ::2, 1::2, :], x[:, 1::2, 1::2, :]], axis=-1)
            """,
            finding="PhaseSplit",
            at=Range(4, 11, 4, 111),
        ),
        # the same through named parts and Lambda layers
        Invalid(
            """
            from tensorflow.keras.layers import Concatenate, Lambda

            def focus(x):
                x1 = Lambda(lambda z: z[:, ::2, ::2, :])(x)
                x2 = Lambda(lambda z: z[:, 1::2, ::2, :])(x)
                x3 = Lambda(lambda z: z[:, ::2, 1::2, :])(x)
                x4 = Lambda(lambda z: z[:, 1::2, 1::2, :])(x)
                return Concatenate()([x1, x2, x3, x4])
            """,
            finding="PhaseSplit",
            at=Range(8, 11, 8, 42),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.call_name(node)
        if name is None:
            # Concatenate(axis=-1)([x1, x2, x3, x4])
            if isinstance(node.func, cst.Call) and self.ctx.call_name(node.func) == "keras.layers.Concatenate" and node.args:
                axis = get_arg(node.func, "axis", 0)
                axis_v = self.ctx.int_const(axis.value) if axis is not None else -1
                self._phase_split(node, node.args[0].value, axis_v)
            elif type(node.func) is cst.Attribute:
                self._by_its_name(node)
            return
        if name in SPACE_DEPTH_OPS:
            self._report_op(node, name)
        elif name in RESHAPE_CALLS:
            self._check_pixel_shuffle(node, name)
        elif name in CONCAT_CALLS:
            self._check_phase_split(node, name)

    def _report_op(self, node: cst.Call, name: str, unread: str | None = None, op: str | None = None) -> None:
        if self.ctx.role_of(node) == "input":
            return
        op = op or name.rsplit(".", 1)[-1]
        advice = _advice(name)
        operand = get_arg(node, "input", 0)
        if "batch_to_space" in name and operand is not None:
            tiled = self.ctx.origin(operand.value)
            if tiled is not None and tiled.name in _TILES:
                advice = ("it is nearest-neighbour upsampling (tile, then batch_to_space): "
                          "`UpSampling2D(interpolation='nearest')` does it without a trip through the batch dim")
        self.report(node, SpaceDepthOp(op, self.ctx.target.large, advice, unread))

    def _by_its_name(self, node: cst.Call) -> None:
        """``compat_utils.batch_to_space(...)``: a function of a project module kerasfit cannot
        read (not in the tree) named like a space/depth op is taken for it, and says so."""
        op = node.func.attr.value  # type: ignore[attr-defined]
        guess = canonical(f"tensorflow.{op}")
        if guess not in SPACE_DEPTH_OPS:
            return
        module = self.ctx.unseen_project_callee(node)
        if module is not None:
            self._report_op(node, guess, module, op)

    def _check_pixel_shuffle(self, reshape: cst.Call, name: str) -> None:
        kw, idx, shape_kw, shape_idx = RESHAPE_CALLS[name]
        operand, shape = get_arg(reshape, kw, idx), get_arg(reshape, shape_kw, shape_idx)
        if operand is None or shape is None or not _has_product(shape.value):
            return
        ctx = self.ctx
        if ctx.role_of(reshape) == "input":
            return
        origin = _transpose_source(ctx, operand.value)
        if origin is None or origin.name is None:
            return
        t = origin.call
        tkw, tidx, pkw, pidx = TRANSPOSE_CALLS[origin.name]
        t_in, perm = get_arg(t, tkw, tidx), get_arg(t, pkw, pidx)
        if t_in is None or perm is None:
            return
        perm_v = ctx.const(perm.value, scopes=ctx.scopes_of(perm.value))
        if not isinstance(perm_v, (list, tuple)) or len(perm_v) < 5 or list(perm_v) == sorted(perm_v):
            return
        inner = ctx.origin(t_in.value)
        if inner is None or inner.name not in RESHAPE_CALLS:
            return
        if _block_partition(ctx, inner.call, inner.name) or _visualisation(ctx, reshape) or _feeds_matmul(ctx, reshape):
            return
        self.report(origin.via[0] if origin.via else t, PixelShuffle())

    def _check_phase_split(self, node: cst.Call, name: str) -> None:
        vkw, vidx, akw, aidx, default = CONCAT_CALLS[name]
        values, axis = get_arg(node, vkw, vidx), get_arg(node, akw, aidx)
        axis_v = self.ctx.int_const(axis.value) if axis is not None else default
        if values is not None:
            self._phase_split(node, values.value, axis_v)

    def _phase_split(self, node: cst.Call, elems: cst.BaseExpression, axis_v: int | None) -> None:
        if axis_v not in (-1, 3):
            return
        if not isinstance(elems, (cst.List, cst.Tuple)) or len(elems.elements) < 4:
            return
        if not all(_strided_slice(self.ctx, _phase_source(self.ctx, el.value)) for el in elems.elements):
            return
        if self.ctx.role_of(node) == "input":
            return
        self.report(node, PhaseSplit())


def _transpose_source(ctx: RuleContext, expr: cst.BaseExpression, depth: int = 0) -> Origin | None:
    """The transpose a reshaped tensor comes from: directly, or through ops that only split,
    squeeze and concatenate its data again (a phase shift written with ``tf.split`` /
    ``tf.concat([tf.squeeze(x, 1) for x in X], 2)``), a comprehension's element included."""
    if depth > 8:
        return None
    origin = ctx.origin(expr)
    if origin is None:
        source = _comprehension_source(ctx, expr)
        return _transpose_source(ctx, source, depth + 1) if source is not None else None
    if origin.name in TRANSPOSE_CALLS:
        return origin
    name = origin.name or ""
    spec: tuple[str, int] | None = next(
        (table[name][:2] for table in (CONCAT_CALLS, SPLIT_CALLS, RELAYOUT_CALLS) if name in table), None)
    arg = get_arg(origin.call, spec[0], spec[1]) if spec is not None else None
    if arg is None:
        return None
    inner = arg.value
    if isinstance(inner, (cst.ListComp, cst.GeneratorExp)):
        inner = inner.elt
    elif isinstance(inner, (cst.List, cst.Tuple)) and inner.elements:
        inner = inner.elements[0].value
    return _transpose_source(ctx, inner, depth + 1)


def _comprehension_source(ctx: RuleContext, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``x`` in ``[f(x) for x in X]``: ``X``."""
    if not isinstance(expr, cst.Name):
        return None
    for anc in reversed(ctx.ancestors(expr)):
        if isinstance(anc, (cst.ListComp, cst.GeneratorExp)):
            comp = anc.for_in
            if isinstance(comp.target, cst.Name) and comp.target.value == expr.value:
                return comp.iter
    return None


def _feeds_matmul(ctx: RuleContext, reshape: cst.Call) -> bool:
    """Attention heads regrouped (``(b, n, 3, heads, d)`` → transpose → ``(3, b * heads, n,
    d)``) for ``q @ k``: the data reaches a matmul, whose operands' transposes the TPU makes
    for free (docs/facts.md#4). Followed by name through the function's assignments (an
    ``unstack`` into ``q, k, v``), in any order: a may-answer."""
    fn = ctx.enclosing_function(reshape)
    parent = ctx.parent(reshape)
    if fn is None or not isinstance(parent, cst.Assign):
        return False
    derived = {n.value for t in parent.targets for n in walk(t.target) if isinstance(n, cst.Name)}
    assigns = [n for n in walk(fn.body) if isinstance(n, cst.Assign)]
    for _ in range(4):  # names derived from those, a few steps on
        grown = {n.value for a in assigns if _mentions(a.value, derived)
                 for t in a.targets for n in walk(t.target) if isinstance(n, cst.Name)}
        if grown <= derived:
            break
        derived |= grown
    for n in walk(fn.body):
        if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.MatrixMultiply):
            if _mentions(n.left, derived) or _mentions(n.right, derived):
                return True
        elif isinstance(n, cst.Call) and ctx.call_name(n) in MATMUL_CALLS and _mentions(n, derived):
            return True
    return False


def _mentions(expr: cst.CSTNode, names: set[str]) -> bool:
    return any(isinstance(n, cst.Name) and n.value in names for n in walk(expr))


def _has_product(shape: cst.BaseExpression) -> bool:
    """A reshape target with a multiplied dim (``h * r`` or ``r * r * c``)."""
    if not isinstance(shape, (cst.List, cst.Tuple)):
        return False
    return any(
        isinstance(el.value, cst.BinaryOperation) and isinstance(el.value.operator, cst.Multiply)
        for el in shape.elements[1:]
    )


def _strided_slice(ctx: RuleContext, expr: cst.BaseExpression) -> bool:
    """``x[:, ::2, 1::2, :]``: a subscript with a constant step of 2 or more."""
    if not isinstance(expr, cst.Subscript):
        return False
    steps = 0
    for el in expr.slice:
        s = el.slice
        if isinstance(s, cst.Slice) and s.step is not None:
            v = ctx.int_const(s.step)
            if v is None or v < 2:
                return False
            steps += 1
    return steps >= 2


def _phase_source(ctx: RuleContext, expr: cst.BaseExpression) -> cst.BaseExpression:
    """What a concatenated part is: ``x0`` bound once to ``x[:, 0::2, 0::2, :]``, or
    ``Lambda(lambda z: z[:, ::2, ::2, :])(x)`` — the slice itself."""
    if isinstance(expr, cst.Name):
        b = ctx.reaching_bindings(expr)
        if len(b) == 1 and b[0].kind == "assign" and b[0].value is not None:
            expr = b[0].value
    if (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Call)
        and ctx.call_name(expr.func) == "keras.layers.Lambda"
        and expr.func.args
        and isinstance(expr.func.args[0].value, cst.Lambda)
    ):
        expr = expr.func.args[0].value.body
    return expr


def _block_partition(ctx: RuleContext, reshape: cst.Call, name: str) -> bool:
    """A window/block partition splits spatial dims (``h // ws``) and keeps the channel dim
    last: it moves spatial data to the batch dim, never into the feature dim."""
    kw, idx, shape_kw, shape_idx = RESHAPE_CALLS[name]
    shape = get_arg(reshape, shape_kw, shape_idx)
    if shape is None or not isinstance(shape.value, (cst.List, cst.Tuple)):
        return False
    return any(
        isinstance(el.value, cst.BinaryOperation) and isinstance(el.value.operator, (cst.FloorDivide, cst.Divide))
        for el in shape.value.elements[1:-1]
    )


# An image grid for a summary or a plot tiles a batch of images into one picture: the
# same reshape -> transpose -> reshape as a pixel shuffle, but it runs once per summary
# step on a handful of images, not in the training computation.
_VISUAL_FUNCTION = re.compile(r"summar|visuali[sz]|grid|montage|mosaic|tile_images|plot|show", re.I)


def _visualisation(ctx: RuleContext, reshape: cst.Call) -> bool:
    """The shuffle's function is named for a summary/plot/image grid, or its result goes
    (through up to three names) into a summary op (``tf.summary.image``,
    ``self._tpu_summary.image``)."""
    func = next((sc for sc in ctx.scopes_of(reshape) if isinstance(sc, cst.FunctionDef)), None)
    if func is not None and _VISUAL_FUNCTION.search(func.name.value):
        return True
    return _into_summary(ctx, reshape, 0)


def _into_summary(ctx: RuleContext, expr: cst.BaseExpression, depth: int) -> bool:
    parent = ctx.parent(expr)
    if isinstance(parent, cst.Arg):
        call = ctx.parent(parent)
        d = (dotted_name(call.func) or "") if isinstance(call, cst.Call) else ""
        return "summary" in d.lower()
    return depth < 3 and any(_into_summary(ctx, n, depth + 1) for n in ctx.uses_of(expr) or ())
