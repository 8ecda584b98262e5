from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from typing import Collection, Sequence

from kerasfit.ruleapi import Finding, Invalid, Range, Reads, Rule
from kerasfit.ruleapi.symbols import (
    CHANNELS_FIRST_VALUES,
    DENSE_LAYERS,
    MATMUL_CALLS,
    TRANSPOSE_CALLS,
)
from kerasfit.ruleapi.syntax import dotted_name, get_arg

# Depthwise convolutions: XLA names batch and feature dims of a convolution freely
# (dim_labels), so swapping them around one is folded into the conv.
_DEPTHWISE = frozenset({
    "tf.nn.depthwise_conv2d", "tf.nn.depthwise_conv2d_native", "keras.layers.DepthwiseConv2D",
    "keras.ops.depthwise_conv", "keras.backend.depthwise_conv2d", "keras.layers.DepthwiseConv1D",
})

# Ops that only add or drop a size-1 axis: a transpose through them still feeds the op after.
_UNIT_AXIS = frozenset({"tf.expand_dims", "keras.ops.expand_dims", "tf.squeeze", "keras.ops.squeeze"})
# How code reads a layer's weights.
_WEIGHT_ATTRS = frozenset({"kernel", "weights", "get_weights", "embeddings", "depthwise_kernel", "pointwise_kernel",
                           "recurrent_kernel", "trainable_weights", "variables"})
# How many names, unit-axis ops and transposes a value is followed through to its consumer.
_HOPS = 5
# Dense layers and matmuls: an operand transposed into one is free (docs/facts.md#4).
_MATMUL_LAYERS = frozenset(MATMUL_CALLS) | frozenset(DENSE_LAYERS)

_SET_FORMAT = {"keras.backend.set_image_data_format", "keras.config.set_image_data_format"}
_WHY = {
    "tpu": "the minor dim is the TPU's 128-lane tiled dim, so this is a real relayout copy through HBM",
    "gpu": "tensor cores want channels last (NHWC); this is a real copy",
    "gaudi": "Gaudi transposes that move the fastest-changing dim are real copies",
}

_FORMAT_WHY = {
    "tpu": "the TPU tiles the minor dim to 128 lanes, so XLA wraps convs and pools in transposes (real copies)",
    "gpu": "tensor cores want NHWC, so convs run on transposed copies",
    "gaudi": "Gaudi prefers NHWC, so convs run on transposed copies",
}


@dataclass(frozen=True)
class LastAxisTranspose(Finding):
    perm: tuple[int, ...]
    family: str  # the target's family, which says why it is a copy

    def message(self) -> str:
        return f"Transpose with perm {list(self.perm)} moves the last axis: {_WHY[self.family]}; keep one layout end to end"


@dataclass(frozen=True)
class LastAxisPermute(Finding):
    dims: tuple[int, ...]  # Permute's dims (the batch axis not counted)
    family: str

    def message(self) -> str:
        what = "swaps the last two axes (token mixing)" if len(self.dims) == 2 else "moves the last axis"
        return f"`Permute({self.dims})` {what}: {_WHY[self.family]}; keep one layout end to end"


@dataclass(frozen=True)
class ChannelsFirst(Finding):
    data_format: str  # the value as written: "channels_first", "NCHW"
    family: str

    def message(self) -> str:
        return (f"data_format '{self.data_format}' puts channels before the spatial dims: "
                f"{_FORMAT_WHY[self.family]}; use channels_last (NHWC)")

class NonlogicalTranspose(Rule):
    """
    ## What it does
    Flags layout changes that move the last (minor) axis in model code:
    `tf.transpose` / `keras.ops.transpose` / `K.permute_dimensions` with a constant
    permutation whose last entry is not the last axis (NHWC ↔ NCHW and the like), a
    `Permute` layer doing the same on a rank ≥ 4 tensor, and `data_format=
    'channels_first'` / `'NCHW'` passed to TF/Keras ops or set globally (reported at the
    literal, once, however many layers use it).

    Not flagged: permutations that keep the last axis in place (`[0, 2, 1, 3]` — a
    metadata-only change on Gaudi and cheap on TPU); transposes feeding a matmul
    (`tf.matmul`, `@`, `einsum`) or any 2-D transpose, which XLA folds into the
    matmul on TPU and GPU (still flagged for the `gaudi` target when not a matmul
    operand); a swap of the batch and channel axes around a depthwise convolution
    (the per-example-kernel trick: XLA folds it into the conv's dimension labels);
    input-pipeline and host code (a TPUEstimator `metric_fn`, a `serving_input_fn`,
    tests), code that runs once while a layer is constructed, a converter that lays a
    layer's weights out for another framework (`ops.transpose(layer.kernel, ...)` outside
    model code);
    and a TF1 `model_fn` transposing its `features` (the TPU reference models feed
    images batch-minor on purpose and transpose once). Nor code the default
    configuration never runs: a branch like `if data_format == "channels_first":` with
    a `channels_last` default, `if keras.config.image_data_format() == "channels_first":`
    (Keras's default is channels_last unless the file sets it), or `if
    keras.config.backend() == "torch":` (kerasfit models the XLA backends, tensorflow and
    jax), and a function every same-file call of which sits in such a branch
    (`roi_align_torch(...)` called only under the torch test) — the same question KF103 asks; when the branch is switched on, the
    `channels_first` setting that does it is the finding. A matmul operand may reach the
    matmul through the name it is assigned to (`key = transpose(key)`, every use that
    assignment reaches) and `expand_dims`/`squeeze`.

    ## Why is this slow on the accelerator
    A TPU tiles the two most minor dims of every array (8×128); a transpose that moves
    the minor dim rewrites every tile — a copy through HBM, not a metadata change
    (docs/facts.md#4, #7). Gaudi's guide says the same of transposes that move the
    fastest-changing dim, and prefers NHWC (docs/facts.md#17); NVIDIA tensor cores want
    channels last (docs/facts.md#18). A model written channels-first wraps every conv in
    such transposes.

    ## Example
    ```python
    x = tf.keras.layers.Conv2D(64, 3, data_format="channels_first")(x)
    y = tf.transpose(x, [0, 2, 3, 1])
    ```

    ## Use instead
    ```python
    x = tf.keras.layers.Conv2D(64, 3)(x)     # channels_last end to end
    ```

    ## Fix safety
    No automatic fix: changing the layout changes the shapes every later op sees.

    ## References
    docs/facts.md#4, #7, #17, #18; Cloud TPU performance guide; Intel Gaudi TensorFlow
    optimization guide; NVIDIA Deep Learning Performance guide.
    """

    code = "KF107"
    build_evidence = "transpose"
    name = "nonlogical-transpose"
    message = "Transpose moves the minor (last) axis: a real copy"
    reads = frozenset({Reads.STATEMENT, Reads.FILE_FACTS, Reads.PROJECT})  # the function's role and whether it runs on the host

    VALID = (
        """
        import tensorflow as tf
        y = tf.transpose(x, [0, 2, 1, 3])
        """,
        """
        import keras
        y = keras.ops.transpose(x, (1, 0, 2))
        """,
        # matmul operands: free on TPU (docs/facts.md#4)
        """
        import tensorflow as tf
        logits = tf.matmul(h, tf.transpose(w))
        """,
        """
        import tensorflow as tf

        def attend(q, k):
            kt = tf.transpose(k, [0, 2, 1])
            return tf.matmul(q, kt)
        """,
        """
        import tensorflow as tf
        w_t = tf.transpose(w, [1, 0])
        """,
        """
        import tensorflow as tf
        y = tf.keras.layers.Conv2D(32, 3, data_format='channels_last')(x)
        """,
        # TPU reference: the infeed is batch-minor (HWCN), transposed once in the model_fn
        """
        import tensorflow.compat.v1 as tf

        def model_fn(features, labels, mode, params):
            features = tf.transpose(features, [3, 0, 1, 2])
            return tf.layers.conv2d(features, 64, 7)
        """,
        # input pipeline runs on the host
        """
        import tensorflow as tf

        def preprocess(image, label):
            return tf.transpose(image, [2, 0, 1]), label

        ds = tf.data.Dataset.from_tensor_slices((x, y)).map(preprocess)
        """,
        # weights laid out for another framework, outside model code: a one-off conversion
        """
        from keras import ops

        def export_weights(backbone):
            kernel = backbone.get_layer("attention_output").weights[0]
            return {"o_proj.weight": ops.transpose(kernel, axes=(2, 0, 1))}
        """,
        # transposed twice on the way into a matmul: the two compose into the operand's layout
        """
        from keras import ops

        def attend(q, k):
            k = ops.transpose(k, (0, 2, 1))
            k = ops.expand_dims(k, axis=1)
            return ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))
        """,
        # the two result axes of a matmul trade places: the matmul's own output layout
        """
        import tensorflow as tf

        def attend(v, w):
            h = tf.keras.layers.Permute((2, 1))(v @ w)
            return tf.transpose(tf.matmul(v, w), [0, 2, 1]) + h
        """,
        # token mixing into a Dense: the Dense folds the transpose of its operand
        """
        import tensorflow as tf
        y = tf.keras.layers.Dense(64)(tf.keras.layers.Permute((2, 1))(x))
        """,
        # an index table built once while the layer is constructed, and a test
        """
        import keras
        from keras import ops

        def relative_index(n):
            coords = ops.reshape(ops.stack(ops.meshgrid(ops.arange(n), ops.arange(n))), (2, -1))
            return ops.transpose(coords[:, :, None] - coords[:, None, :], (1, 2, 0))

        class Attention(keras.layers.Layer):
            def __init__(self, n, **kwargs):
                super().__init__(**kwargs)
                self.index = relative_index(n)

        class AttentionTest(keras.src.testing.TestCase):
            def test_channels_first(self):
                x = ops.transpose(ops.ones((2, 8, 8, 3)), (0, 3, 1, 2))
                self.assertEqual(x.shape, (2, 3, 8, 8))
        """,
        # per-example kernels: batch and channels trade places around a depthwise conv,
        # which XLA folds into the conv's dimension labels
        """
        import tensorflow as tf

        def per_example_conv(x, kernels):
            xt = tf.transpose(x, [3, 1, 2, 0])
            y = tf.nn.depthwise_conv2d(xt, kernels, [1, 1, 1, 1], 'SAME')
            return tf.transpose(y, [3, 1, 2, 0])
        """,
        # a TPUEstimator metric_fn runs on the host
        "import tensorflow.compat.v1 as tf\n\n"
        "def metric_fn(per_example_loss, label_ids, logits):\n"
        "    probs = tf.transpose(tf.nn.softmax(logits), [0, 2, 1])\n"
        "    return {'auc': tf.metrics.auc(label_ids, probs[:, 1, :])}\n",
        # branches the default configuration never runs: the parameter's default, Keras's
        # default image data format, and a backend XLA does not compile (torch)
        "import keras\nfrom keras import ops\n\n"
        "def to_nhwc(x, data_format='channels_last'):\n"
        "    if data_format == 'channels_first':\n"
        "        x = ops.transpose(x, (0, 2, 3, 1))\n"
        "    return x\n",
        "import keras\nfrom keras import ops\n\n"
        "def f(x):\n"
        "    if keras.config.image_data_format() == 'channels_first':\n"
        "        x = ops.transpose(x, (0, 3, 1, 2))\n"
        "    return x\n",
        "import keras\nfrom keras import ops\n\n"
        "def f(x):\n"
        "    if keras.config.backend() == 'torch':\n"
        "        x = ops.transpose(x, (0, 3, 1, 2))\n"
        "    return x\n",
        # a function every call of which sits in the torch branch: torch-only as a whole
        "import keras\nfrom keras import ops\n\n"
        "def roi_align_torch(x, rois):\n"
        "    import torchvision\n\n"
        "    return ops.transpose(torchvision.ops.roi_align(ops.transpose(x, (0, 3, 1, 2)), rois, 7), (0, 2, 3, 1))\n\n"
        "def roi_align(x, rois):\n"
        "    if keras.backend.backend() == 'torch':\n"
        "        return roi_align_torch(x, rois)\n"
        "    return x\n",
        # a layer whose format defaults to Keras's (keras-hub style)
        "import keras\nfrom keras import ops\n\n"
        "class Block(keras.layers.Layer):\n"
        "    def __init__(self, data_format=None, **kwargs):\n"
        "        super().__init__(**kwargs)\n"
        "        self.data_format = keras.backend.standardize_data_format(data_format)\n\n"
        "    def call(self, x):\n"
        "        if self.data_format == 'channels_first':\n"
        "            x = ops.transpose(x, (0, 2, 3, 1))\n"
        "        return x\n",
        # the parameter rebound to its standardized value, then kept (keras-hub's idiom)
        "import keras\nfrom keras import ops\n\n"
        "def standardize_data_format(data_format):\n"
        "    if data_format is None:\n"
        "        return keras.config.image_data_format()\n"
        "    return data_format.lower()\n\n"
        "class Attention(keras.layers.Layer):\n"
        "    def __init__(self, data_format=None, **kwargs):\n"
        "        super().__init__(**kwargs)\n"
        "        data_format = standardize_data_format(data_format)\n"
        "        self.data_format = data_format\n\n"
        "    def call(self, x):\n"
        "        if self.data_format == 'channels_first':\n"
        "            x = ops.transpose(x, (0, 2, 3, 1))\n"
        "        return x\n",
        # ... and through a scaling by a constant
        "from keras import ops\n\n"
        "SCALE = 0.125\n\n"
        "def attend(q, k):\n"
        "    q = ops.transpose(q, (0, 1, 3, 2))\n"
        "    q = q * SCALE\n"
        "    return ops.matmul(q, k)\n",
        # matmul operands through a rebound name and a size-1 axis (free, docs/facts.md#4)
        "from keras import ops\n\n"
        "def attend(query, key):\n"
        "    key = ops.transpose(key, [0, 2, 3, 1])\n"
        "    return ops.matmul(query, key)\n",
        "from keras import ops\n\n"
        "def attend(q, k):\n"
        "    k_t = ops.transpose(k, (0, 2, 3, 1))\n"
        "    return ops.matmul(q, ops.expand_dims(k_t, 2))\n",
        "from keras import ops\n\n"
        "def attend(q, k):\n"
        "    k_t = ops.transpose(k, (0, 1, 3, 2))\n"
        "    k_t = ops.expand_dims(k_t, axis=2)\n"
        "    return ops.matmul(q, k_t)\n",
        "from keras import ops\n\n"
        "def attend(q, k):\n"
        "    return ops.einsum('bhqd,bhdk->bhqk', q, ops.transpose(k, (0, 1, 3, 2)))\n",
        # chosen at run time: nothing to say statically
        """
        import tensorflow as tf
        fmt = 'channels_first' if tf.test.is_gpu_available() else 'channels_last'
        y = tf.keras.layers.Conv2D(32, 3, data_format=fmt)(x)
        """,
    )
    INVALID = (
        # a helper called from the torch branch and from the default path: it runs on XLA
        Invalid(
            """
            import keras
            from keras import ops

            def to_nchw(x):
                return ops.transpose(x, (0, 3, 1, 2))

            def f(x):
                if keras.backend.backend() == "torch":
                    return to_nchw(x)
                return to_nchw(x) * 2
            """,
            at=Range(5, 11, 5, 41),
        ),
        # token mixing: the permuted tensor goes on to a residual add, not into a matmul
        Invalid(
            """
            import tensorflow as tf

            def mixer(x):
                y = tf.keras.layers.Permute((2, 1))(x)
                return y + tf.keras.layers.Permute((2, 1))(x)
            """,
            finding="LastAxisPermute", fields={"dims": (2, 1)},
            at=(Range(4, 8, 4, 39), Range(5, 15, 5, 46)),
        ),
        # NHWC -> NCHW in a model_fn: not the batch-minor infeed brought to the front
        Invalid(
            """
            import tensorflow.compat.v1 as tf

            def model_fn(features, labels, mode, params):
                if params["data_format"] == "channels_first":
                    features = tf.transpose(features, [0, 3, 1, 2])
                return tf.layers.conv2d(features, 64, 7, data_format=params["data_format"])
            """,
            at=Range(5, 19, 5, 55),
        ),
        # a phase shift: the reshape's last two axes trade places — the minor one moves
        Invalid(
            """
            import tensorflow as tf

            def phase_shift(x, r):
                b, h, w, c = x.get_shape().as_list()
                x = tf.reshape(x, (-1, h, w, r, r))
                return tf.transpose(x, (0, 1, 2, 4, 3))
            """,
            at=Range(6, 11, 6, 43),
        ),
        Invalid(
            """
            import tensorflow as tf
            y = tf.transpose(x, [0, 3, 1, 2])
            """,
            fields={"perm": (0, 3, 1, 2)},
            at=Range(2, 4, 2, 33),
        ),
        Invalid(
            """
            import tensorflow as tf
            y = tf.transpose(x, perm=(0, 2, 3, 1))
            """,
            at=Range(2, 4, 2, 38),
        ),
        Invalid(
            """
            from tf_keras import backend as K
            y = K.permute_dimensions(x, (0, 3, 1, 2))
            """,
            at=Range(2, 4, 2, 41),
        ),
        Invalid(
            """
            import keras
            y = keras.layers.Permute((3, 1, 2))(x)
            """,
            at=Range(2, 4, 2, 35),
        ),
        Invalid(
            """
            import tensorflow as tf
            w_t = tf.transpose(w, [1, 0])
            """,
            target="gaudi",
            finding="LastAxisTranspose", fields={"family": "gaudi"},
            at=Range(2, 6, 2, 29),
        ),
        Invalid(
            """
            import tensorflow as tf
            y = tf.keras.layers.Conv2D(32, 3, data_format='channels_first')(x)
            """,
            fields={"data_format": "channels_first"},
            at=Range(2, 46, 2, 62),
        ),
        Invalid(
            """
            import tensorflow as tf
            y = tf.nn.conv2d(x, w, 1, 'SAME', data_format='NCHW')
            """,
            at=Range(2, 46, 2, 52),
        ),
        # one finding at the definition, however many layers read it
        Invalid(
            """
            import tensorflow.compat.v1 as tf

            DATA_FORMAT = 'channels_first'

            def block(x, filters, data_format=DATA_FORMAT):
                x = tf.layers.conv2d(x, filters, 3, data_format=data_format)
                return tf.layers.conv2d(x, filters, 3, data_format=data_format)
            """,
            at=Range(3, 14, 3, 30),
        ),
        Invalid(
            """
            import keras
            keras.config.set_image_data_format('channels_first')
            """,
            at=Range(2, 35, 2, 51),
        ),
        Invalid("import keras\nkeras.config.set_image_data_format('channels_first')\n", at=Range(2, 35, 2, 51)),
        # the default path runs these: channels_last is the default, jax compiles with XLA
        Invalid(
            "from keras import ops\n\n"
            "def to_nchw(x, data_format='channels_last'):\n"
            "    if data_format == 'channels_last':\n"
            "        x = ops.transpose(x, (0, 3, 1, 2))\n"
            "    return x\n",
            at=Range(5, 12, 5, 42),
        ),
        Invalid(
            "import keras\nfrom keras import ops\n\n"
            "def f(x):\n"
            "    if keras.config.backend() == 'jax':\n"
            "        x = ops.transpose(x, (0, 3, 1, 2))\n"
            "    return x\n",
            at=Range(6, 12, 6, 42),
        ),
        # data_format=None is Keras's default (channels_last): this branch runs
        Invalid(
            "import keras\nfrom keras import ops\n\n"
            "class Attention2D(keras.layers.Layer):\n"
            "    def __init__(self, data_format=None, **kwargs):\n"
            "        super().__init__(**kwargs)\n"
            "        self.data_format = data_format\n\n"
            "    def call(self, x):\n"
            "        if self.data_format == 'channels_last':\n"
            "            x = ops.transpose(x, (0, 3, 1, 2))\n"
            "        return x\n",
            at=Range(11, 16, 11, 46),
        ),
        # a rebound name that a conv reads too is not only a matmul operand
        Invalid(
            "from keras import ops\n\n"
            "def f(q, k, conv):\n"
            "    k = ops.transpose(k, (0, 2, 3, 1))\n"
            "    return ops.matmul(q, k) + conv(k)\n",
            at=Range(4, 8, 4, 38),
        ),
        # the same swap into a regular conv is a real copy
        Invalid(
            """
            import tensorflow as tf

            def f(x, w):
                xt = tf.transpose(x, [3, 1, 2, 0])
                return tf.nn.conv2d(xt, w, 1, 'SAME')
            """,
            at=Range(4, 9, 4, 38),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.call_name(node)
        if name is None:
            return
        if name in TRANSPOSE_CALLS:
            self._check_transpose(node, name)
        elif name == "keras.layers.Permute":
            self._check_permute(node)
        elif name in _SET_FORMAT:
            arg = get_arg(node, "data_format", 0)
            if arg is not None:
                self._check_format(arg.value)
        else:
            for a in node.args:
                if a.keyword is not None and a.keyword.value == "data_format":
                    self._check_format(a.value)

    def _check_transpose(self, node: cst.Call, name: str) -> None:
        kw, idx, pkw, pidx = TRANSPOSE_CALLS[name]
        perm_arg = get_arg(node, pkw, pidx)
        if perm_arg is None:
            return  # reverses all axes of an unknown rank (2-D: a matmul operand, usually)
        perm = self.ctx.const(perm_arg.value)
        if not isinstance(perm, (list, tuple)) or len(perm) < 2 or not all(isinstance(p, int) for p in perm):
            return
        rank = len(perm)
        if perm[-1] in (rank - 1, -1):
            return
        gaudi = self.ctx.target.family == "gaudi"
        if (rank == 2 and not gaudi) or self._feeds_matmul(node):
            return
        operand = get_arg(node, kw, idx)
        if not gaudi and operand is not None and _swaps_last_two(perm) and self._matmul_result(operand.value):
            return
        ctx = self.ctx
        if ctx.off_by_default(node) is not None:
            return  # a channels_first / torch-only branch: the default path never runs it
        if self._off_the_step(node):
            return
        if _swaps_batch_and_channel(perm) and (
            self._feeds(node, _DEPTHWISE) or (operand is not None and self._made_by(operand.value, _DEPTHWISE))
        ):
            return  # per-example depthwise trick: the swap folds into the conv's dim labels
        if operand is not None and perm[0] in (rank - 1, -1) and self._model_fn_features(operand.value):
            return  # a batch-minor infeed brought to the front once
        if operand is not None and self._reshuffles_weights(node, operand.value):
            return
        self.report(node, LastAxisTranspose(tuple(perm), self.ctx.target.family))

    def _check_permute(self, node: cst.Call) -> None:
        dims_arg = get_arg(node, "dims", 0)
        dims = self.ctx.const(dims_arg.value) if dims_arg is not None else None
        if not isinstance(dims, (list, tuple)) or not all(isinstance(d, int) for d in dims):
            return
        if dims[-1] == len(dims):
            return
        applied = self.ctx.parent(node)
        if len(dims) < 3 and self.ctx.target.family != "gaudi" and isinstance(applied, cst.Call) and applied.func is node and (
                self._only_into(applied, _MATMUL_LAYERS, True, 0)
                or applied.args and self._matmul_result(applied.args[0].value)):
            return  # (batch, a, b) -> (batch, b, a) into or out of a Dense / matmul, which folds it
        if self.ctx.off_by_default(node) is not None or self._off_the_step(node):
            return
        self.report(node, LastAxisPermute(tuple(dims), self.ctx.target.family))

    def _matmul_result(self, operand: cst.BaseExpression) -> bool:
        """``operand`` is what a matmul (or a Dense) gives: swapping its two result axes is
        the matmul's own output layout, folded into it (docs/facts.md#4)."""
        src = self.ctx.value_of(operand)
        if isinstance(src, cst.BinaryOperation) and isinstance(src.operator, cst.MatrixMultiply):
            return True
        return isinstance(src, cst.Call) and self._consumer(src) in _MATMUL_LAYERS

    def _off_the_step(self, node: cst.CSTNode) -> bool:
        """Code no training step runs: the input pipeline, host code (a TPUEstimator
        ``metric_fn``, tests) and what runs once while a layer is constructed."""
        ctx = self.ctx
        fn = ctx.enclosing_callable(node)
        return ctx.role_of(node) == "input" or ctx.is_host_function(fn) or ctx.is_construction(fn)

    def _reshuffles_weights(self, node: cst.Call, operand: cst.BaseExpression) -> bool:
        """A layer's weights (``.kernel``, ``.weights[0]``, ``get_weights()``) transposed
        outside any model code: a converter laying weights out for another framework, run
        once, not in a step."""
        fn = self.ctx.enclosing_callable(node)
        if fn is None or self.ctx.function_role(fn) != "other":
            return False
        src = self.ctx.value_of(operand)
        while isinstance(src, (cst.Subscript, cst.Call)):
            src = src.value if isinstance(src, cst.Subscript) else src.func
        return isinstance(src, cst.Attribute) and src.attr.value in _WEIGHT_ATTRS

    def _check_format(self, value: cst.BaseExpression) -> None:
        ctx = self.ctx
        if ctx.role_of(value) == "input" or ctx.is_host_function(ctx.enclosing_callable(value)):
            return
        for src in ctx.const_sources(value):
            v = ctx.const(src, scopes=ctx.scopes_of(src))
            if isinstance(v, str) and v in CHANNELS_FIRST_VALUES:
                self.report(src, ChannelsFirst(v, ctx.target.family))

    def _feeds_matmul(self, node: cst.Call) -> bool:
        """The transpose's result is a matmul operand, directly or through one name."""
        return self._feeds(node, MATMUL_CALLS, matmul=True)

    def _consumer(self, call: cst.CSTNode | None) -> str | None:
        """The op a call is: its canonical name, or the layer's for ``Layer(...)(x)``."""
        if not isinstance(call, cst.Call):
            return None
        name = self.ctx.call_name_anywhere(call)
        return name

    def _made_by(self, operand: cst.BaseExpression, ops: frozenset[str]) -> bool:
        o = self.ctx.origin(operand)
        return o is not None and o.name in ops

    def _feeds(self, node: cst.Call, ops: Collection[str], matmul: bool = False) -> bool:
        """The transpose's result goes only into ``ops``: directly, or through names the
        assignment binds (``key = transpose(key)`` counts the uses it reaches), and through
        ``expand_dims``/``squeeze``, which only add or drop a size-1 axis."""
        return self._only_into(node, ops, matmul, 0)

    def _only_into(self, expr: cst.BaseExpression, ops: Collection[str], matmul: bool, depth: int) -> bool:
        ctx = self.ctx
        parent = ctx.parent(expr)
        if matmul and isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.MatrixMultiply):
            return True
        if matmul and depth < _HOPS and isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, (cst.Multiply, cst.Divide)):
            # `q * scale` on the way to the matmul: elementwise by a scalar, so layout
            # assignment gives the product the layout the matmul wants (docs/facts.md#4, #5)
            other = parent.right if parent.left is expr else parent.left
            if self._scalar(other):
                return self._only_into(parent, ops, matmul, depth + 1)
            return False
        if isinstance(parent, cst.Arg):
            call = ctx.parent(parent)
            name = self._consumer(call)
            if name in ops:
                return True
            if (name in _UNIT_AXIS or matmul and name in TRANSPOSE_CALLS) and isinstance(call, cst.Call) and depth < _HOPS and (
                    parent is call.args[0]):
                # (a transpose of it composes with it: still one matmul operand's layout)
                return self._only_into(call, ops, matmul, depth + 1)
            return False
        uses = ctx.uses_of(expr) if depth < _HOPS else None
        return uses is not None and bool(uses) and all(self._only_into(n, ops, matmul, depth + 1) for n in uses)

    def _scalar(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """A number: a literal, a name that folds to one, arithmetic on numbers, or a
        ``self.x`` every store of which is arithmetic with a number in it
        (``self.scale = self.key_dim ** -0.5``)."""
        if isinstance(expr, (cst.Integer, cst.Float)):
            return True
        v = self.ctx.const(expr, scopes=self.ctx.scopes_of(expr))
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return True
        if isinstance(expr, cst.BinaryOperation):
            sides = (expr.left, expr.right)
            return any(isinstance(x, (cst.Integer, cst.Float, cst.UnaryOperation)) for x in sides) and all(
                self._scalar(x, depth) or isinstance(x, (cst.Name, cst.Attribute)) for x in sides)
        if isinstance(expr, cst.UnaryOperation):
            return self._scalar(expr.expression, depth)
        dotted = dotted_name(expr) if isinstance(expr, cst.Attribute) else None
        if dotted is None or not dotted.startswith("self.") or depth > 1:
            return False
        stores = self.ctx.attr_stores(dotted)
        return bool(stores) and all(value is not None and isinstance(value, cst.BinaryOperation) and self._scalar(value, depth + 1)
                                    for value, _where in stores)

    def _model_fn_features(self, operand: cst.BaseExpression) -> bool:
        base = operand.value if isinstance(operand, cst.Subscript) else operand
        if not isinstance(base, cst.Name):
            return False
        func = self.ctx.enclosing_function(operand)
        if func is None:
            return False
        params = [p.name.value for p in func.params.params]
        is_model_fn = func.name.value == "model_fn" or func.name.value.endswith("_model_fn") or params[:3] == ["features", "labels", "mode"]
        return is_model_fn and base.value in params[:1]


def _swaps_last_two(perm: Sequence[int]) -> bool:
    """``[0, 2, 1]`` / ``[0, 1, 3, 2]``: the two minor axes trade places, the rest stay."""
    r = len(perm)
    return list(perm) == [*range(r - 2), r - 1, r - 2]


def _swaps_batch_and_channel(perm: Sequence[int]) -> bool:
    """``[3, 1, 2, 0]``: the first and last axes trade places, the rest stay."""
    r = len(perm)
    return r >= 3 and perm[0] in (r - 1, -1) and perm[-1] == 0 and list(perm[1:-1]) == list(range(1, r - 1))
