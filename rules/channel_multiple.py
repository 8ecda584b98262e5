from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from typing import TYPE_CHECKING, Hashable, TypedDict

if TYPE_CHECKING:
    from kerasfit.ruleapi import RuleContext

from kerasfit.ruleapi import (
    Applicability,
    Finding,
    Invalid,
    Range,
    Reads,
    Rule,
    Severity,
    Valid,
    tensor_core_multiple,
    width_padding,
    width_speedup,
)
from kerasfit.ruleapi.fixes import Replace, keyword_value
from kerasfit.ruleapi.symbols import (
    CONV_LAYERS,
    DENSE_LAYERS,
    HEAD_ACTIVATIONS,
    HEAD_CONSUMERS,
    KERAS1_WIDTH_KEYWORDS,
    MODEL_CONSTRUCTORS,
    canonical,
    label,
)
from kerasfit.ruleapi.syntax import dotted_name, get_arg, walk

# tf.nn convolutions whose kernel is a variable: canonical -> index of the output-channel dim.
_NN_CONVS = {
    "tf.nn.conv1d": -1,
    "tf.nn.conv2d": -1,
    "tf.nn.conv3d": -1,
    "tf.nn.conv1d_transpose": -2,
    "tf.nn.conv2d_transpose": -2,
    "tf.nn.conv3d_transpose": -2,
}
# A size named like one of these is fixed by the task (classes, vocabulary, anchors...).
_SEMANTIC_SIZE = re.compile(
    r"class|label|categor|vocab|action|anchor|keypoint|joint|landmark|n_?out|out_?dim|outputs?\b|output_|target|token",
    re.I,
)
# A layer whose result is stored under one of these names is the model's output.
_HEAD_TARGET = re.compile(r"logit|^outputs?$|^output_|pred|prob|classif|head$|^head|score", re.I)
_LAYERS = {**CONV_LAYERS, **DENSE_LAYERS}
# callees a project factory can be called by (libcst's node classes have no subclasses:
# a type test, as isinstance against them costs ~10x)
_NAMED = frozenset({cst.Name, cst.Attribute})


class _Fate(TypedDict):
    """A width off the multiple: the fields of :class:`_Width`."""

    width: int
    target: str
    multiple: int
    rounded: int
    padded_to: tuple[int, ...]
    wasted: int | None
    dtype: str | None
    slowdown: float | None
    conv: bool


@dataclass(frozen=True)
class _Width(Finding):
    """A width off the target's multiple and what the target does with it."""

    width: int = field(kw_only=True)  # the width found
    target: str = field(kw_only=True)  # the chip's name
    multiple: int = field(kw_only=True)  # what the width should be a multiple of
    rounded: int = field(kw_only=True)  # the width rounded up to it
    # TPU / Gaudi: what the width pads to over a training step (least, most), and the
    # percentage of the padded work that is padding
    padded_to: tuple[int, ...] = field(default=(), kw_only=True)
    wasted: int | None = field(default=None, kw_only=True)
    # GPU: the layer's compute dtype, and the GPU cost model's time per op of this width
    # relative to the rounded one (docs/facts.md#27)
    dtype: str | None = field(default=None, kw_only=True)
    slowdown: float | None = field(default=None, kw_only=True)
    conv: bool = field(default=False, kw_only=True)  # a convolution (else a matmul)

    @property
    def says(self) -> str:
        """What the target does with the width, a phrase after it."""
        if self.slowdown is not None:
            kind = "convolution" if self.conv else "matmul"
            return (f"miss the tensor cores' multiple of {self.multiple} in {self.dtype} on {self.target}: "
                    f"≈{self.slowdown:.1f}× the time per {kind} of {self.rounded} in kerasfit's GPU model "
                    "(docs/facts.md#27)")
        low, high = self.padded_to
        pad = f"{low} or {high}" if low != high else str(high)
        return f"pad to {pad} on {self.target} ({self.wasted}% of the padded work wasted)"

    @property
    def fill(self) -> str:
        """A wider choice that fills the MXU, when it is not the rounded width."""
        high = self.padded_to[-1] if self.padded_to else self.rounded
        return f", or {high} to fill the MXU" if high != self.rounded else ""


@dataclass(frozen=True)
class OutputHead(_Width):
    layer: str
    unit: str
    head: str  # why it is taken for an output head: "softmax/sigmoid activation"

    template = "`{layer}` output head ({head}): {width} {unit} {says}; its width is set by the task, so not fixed"


@dataclass(frozen=True)
class OffMultiple(_Width):
    layer: str
    unit: str
    not_fixed: str | None = None  # why the width is not rounded up in place; None: it is (the fix)

    def message(self) -> str:
        text = (f"`{self.layer}`: {self.width} {self.unit} {self.says}; round up to {self.rounded} "
                f"(a multiple of {self.multiple}){self.fill}")
        return f"{text} (not auto-fixed: {self.not_fixed})" if self.not_fixed else text


@dataclass(frozen=True)
class LoopWidth(_Width):
    layer: str
    unit: str
    loop: str  # the iterated expression's source: "HIDDEN"

    template = ("`{layer}` built in a loop with `{loop}` = {width} {unit}, which {says}; "
                "round up to {rounded} (a multiple of {multiple}){fill}")


@dataclass(frozen=True)
class _CallSite(_Width):
    """A layer whose width a parameter of a project function or class sets."""

    callee: str  # the function or class whose parameter sizes the layer
    param: str
    layer: str
    unit: str


@dataclass(frozen=True)
class CallSiteHead(_CallSite):
    template = "`{callee}(..., {param}={width})` builds a `{layer}` with {width} {unit} that {says}; an output head, so not fixed"


@dataclass(frozen=True)
class CallSiteWidth(_CallSite):
    feeds: str | None  # a narrow internal layer: the layer its output feeds
    at_call_site: bool  # reported (and fixed) at the call site's literal, else at the layer

    def message(self) -> str:
        text = f"`{self.callee}(..., {self.param}={self.width})` builds a `{self.layer}` with {self.width} {self.unit} that {self.says}"
        if self.feeds:
            text += f"; a narrow internal layer (its output feeds `{self.feeds}`), not an output head"
        text += f"; pass {self.rounded} (a multiple of {self.multiple}){self.fill}"
        return text if self.at_call_site else f"{text} (not auto-fixed: the value is set where `{self.callee}` is called)"


@dataclass(frozen=True)
class _Factory(_Width):
    """A layer a project function builds."""

    factory: str  # the project function that builds the layer
    layer: str
    unit: str


@dataclass(frozen=True)
class FactoryHead(_Factory):
    head: str

    template = "`{factory}(...)` builds a `{layer}` with {width} {unit} that {says}; an output head ({head}), so not fixed"


@dataclass(frozen=True)
class FactoryWidth(_Factory):
    template = ("`{factory}(...)` builds a `{layer}` with {width} {unit} that {says}; "
                "pass {rounded} (a multiple of {multiple}){fill}")


@dataclass(frozen=True)
class KernelHead(_Width):
    op: str  # "tf.nn.conv2d"

    template = "`{op}` kernel has {width} output channels (an output head): {says}; set by the task, so not fixed"


@dataclass(frozen=True)
class KernelWidth(_Width):
    op: str

    template = ("`{op}` kernel has {width} output channels: {says}; make it {rounded} "
                "(not auto-fixed: its bias and the next kernel's input dim must change too)")


class ChannelMultiple(Rule):
    """
    ## What it does
    Flags the output width of a convolution or dense layer — `filters` of
    `Conv1D/2D/3D`, `Conv*Transpose`, `SeparableConv*`, `tf.layers.conv2d`…, `units`
    of `Dense`, `tf.layers.dense` and recurrent layers (Keras 1's `nb_filter=` /
    `output_dim=` too), and the output-channel dim of a `tf.nn.conv2d` kernel
    variable — that folds to a constant which is not a
    multiple of 8 (on a GPU: of the tensor cores' multiple for the layer's dtype). The
    message says what the dim pads to on the selected target and the share of the padded
    work that is wasted; on a GPU, how much longer kerasfit's GPU cost model takes for
    such an op than for the rounded width. A width taken from a list or tuple
    literal walked by a loop (`for units in HIDDEN: Dense(units)`, `HIDDEN` maybe a module
    constant) is reported at each element that is not a multiple (1–4 wide ones skipped).

    Output heads, whose width the task fixes, are reported at `info` severity and
    never fixed: the model's last layer (last element of a `Sequential`, last layer
    built in a function that builds a `Model`/`EstimatorSpec`, or in a `keras.Model`
    subclass's `__init__`), sizes named like `num_classes`/`vocab_size`/`num_anchors`,
    layers with `activation='softmax'`/`'sigmoid'` or whose result goes straight into
    a softmax/sigmoid, a cross-entropy or `depth_to_space`, results stored as
    `logits`/`outputs`/`predictions`, and 1–4 wide outputs (image channels,
    regression targets). A 1–4 wide layer whose output multiplies another tensor — a
    gate (a squeeze-excitation or spatial-attention `Conv2D(1, …)`, an MoE shared
    expert's `Dense(1)`) or an attention-pooling score (a `Dense(1)` whose softmax weights
    a sum) — is not reported: its width is what it computes, and no other width would
    do. A width that comes from a
    function parameter is reported with the value each same-file call site passes: at the
    call site when it passes a literal to a function that builds this one layer (a conv
    wrapper, where the fix goes), else at the layer; there a 1–4 wide width whose output
    feeds another conv or dense layer is a narrow internal layer, not a head. Other sizes
    computed from a parameter are skipped: callers may pass another value.

    ## Why is this slow on the accelerator
    The TPU pads the feature dims of every convolution and matmul operand to 8 or
    128 by pass: a layer's width pads to the small multiple in some passes of a training
    step and to the MXU's 128 (256 on v6e) in the others (docs/facts.md#1–3, #8), so a
    `Dense(100)` computes as if it had 104 units in some passes and 128 in the others,
    wasting up to 22% of those ops. The sizes come from the same padding rule the
    build's simulator uses (`kerasfit.core.types.pad_multiple`), which takes the upper of
    fact 2's two kernel sizes where the pass pads features to the MXU's. Tensor cores
    want channels in multiples of 16 bytes (docs/facts.md#18): 8 where the layer computes
    in float16/bfloat16 — its own `dtype=`, a mixed-precision policy the file or another
    file of the tree sets (`mixed_precision.set_global_policy("mixed_float16")`,
    `keras.config.set_dtype_policy(...)`), or `dtype` in `[tool.kerasfit.build]` — and 4
    in float32 (TF32). Off it, kerasfit's own GPU measurements find the whole training
    step 1.3–2.2× slower (30 → 32 filters: 1.79× in bfloat16, 1.30× in float32;
    docs/facts.md#27): XLA pads a 16-bit op's operands and slices its result through HBM,
    and a float32 op loses TF32. The figure in the message is the GPU cost model's, the
    one the build report times ops with (`kerasfit.core.gpumodel`). Gaudi's matrix
    engine wants 64/128 (docs/facts.md#17). A multiple of 8 is unpadded in at least one
    of the two TPU layouts (docs/facts.md#1) and on a GPU.

    ## Example
    ```python
    x = tf.keras.layers.Conv2D(30, 3, padding="same")(x)
    x = tf.keras.layers.Dense(100, activation="relu")(x)
    ```

    ## Use instead
    ```python
    x = tf.keras.layers.Conv2D(32, 3, padding="same")(x)
    x = tf.keras.layers.Dense(104, activation="relu")(x)   # or 128
    ```

    ## Fix safety
    Unsafe: rounding a width up changes the model (more parameters, a different
    checkpoint) although the following layers adapt to it. Only a literal at the call
    site is rewritten; a width that comes from a named constant is reported without a
    fix, since that constant may also size other tensors (a residual branch, a
    reshape). `tf.nn` kernel variables are never fixed: their bias and the next
    kernel's input dim must change with them. Heads are never fixed.

    ## References
    docs/facts.md#1, #2, #3, #8, #17, #18; Cloud TPU performance guide ("TensorFlow ops",
    padding); NVIDIA Deep Learning Performance guide (channels divisible by 8).
    """

    code = "KF102"
    build_evidence = "feature-padding"
    name = "channel-multiple"
    message = "Filter/unit count is not a multiple of 8 and is padded on the accelerator"
    fix_title = "Round the width up to a multiple of 8"
    fix_safety = Applicability.UNSAFE

    VALID = (
        """
        import tensorflow as tf

        def conv_block(x, filters):
            return tf.keras.layers.Conv2D(filters, 3, padding='same')(x)

        def backbone(x):
            return conv_block(conv_block(x, 32), 64)
        """,
        """
        import tensorflow as tf
        x = tf.keras.layers.Conv2D(64, 3)(x)
        y = tf.keras.layers.Dense(256)(x)
        """,
        # input channels (3) and depth multipliers are not output widths
        """
        import keras
        inp = keras.Input((224, 224, 3))
        x = keras.layers.DepthwiseConv2D(3, depth_multiplier=3)(inp)
        x = keras.layers.SeparableConv2D(64, 3, depth_multiplier=3)(x)
        """,
        # a user's own Dense is not Keras
        """
        class Dense:
            def __init__(self, units):
                pass
        d = Dense(100)
        """,
        # the width comes from a parameter: callers decide
        """
        from tensorflow.keras import layers

        def block(x, filters=30):
            return layers.Conv2D(filters, 3)(x)
        """,
        # unknown at lint time
        "import tensorflow as tf\nx = tf.keras.layers.Dense(cfg.hidden)(x)\n",
        Valid("import keras\nx = keras.layers.Dense(200)(x)\n", target="tpu-v6e"),
        # a test's model (a test class, or any function of a test_*.py / *_test.py file): tests
        # build it to check it, never to train it fast (semantic.roles.host_functions)
        "import keras\nfrom absl.testing import parameterized\n\n"
        "class TaskTest(parameterized.TestCase):\n"
        "    def test_fit(self):\n"
        "        model = keras.Sequential([keras.layers.Dense(5)])\n",
        # a demo under `if __name__ == "__main__":` that does not train (semantic.roles.demo_blocks)
        "import keras\n\n"
        "if __name__ == '__main__':\n"
        "    inp = keras.Input((32,))\n"
        "    keras.Model(inp, keras.layers.Dense(100)(inp)).summary()\n",
        # float32 (Keras's default policy): TF32 tensor cores take multiples of 4 (docs/facts.md#18)
        Valid("import keras\nx = keras.layers.Conv2D(60, 3, padding='same')(x)\n", target="gpu"),
        Valid(
            "import keras\nkeras.config.set_dtype_policy('mixed_float16')\n"
            "x = keras.layers.Conv2D(60, 3, dtype='float32')(x)\n",
            target="gpu",
        ),
        "import tensorflow.compat.v1 as tf\nw = tf.get_variable('w', [3, 3, 3, 64])\ny = tf.nn.conv2d(x, w, [1, 1, 1, 1], 'SAME')\n",
        # 1-wide internal layers whose output weighs another tensor: a gate (a shared expert's
        # in an MoE, a spatial gate) or an attention-pooling score — the width is what it
        # computes, nothing to change
        """
        import keras
        from keras import ops

        class SharedExpert(keras.layers.Layer):
            def __init__(self, dim):
                super().__init__()
                self.dense = keras.layers.Dense(dim)
                self.gate = keras.layers.Dense(1, use_bias=False)

            def call(self, x):
                out = self.dense(x)
                out *= ops.sigmoid(self.gate(x))
                return out
        """,
        "from keras import layers\n\n"
        "def spatial_gate(x):\n"
        "    g = layers.Conv2D(1, 7, padding='same', activation='sigmoid')(x)\n"
        "    return x * g\n",
        "from keras import layers, ops\n\n"
        "class AttentionPooling(layers.Layer):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.score = layers.Dense(1)\n\n"
        "    def call(self, h):\n"
        "        w = ops.softmax(self.score(h), axis=1)\n"
        "        return ops.sum(h * w, axis=1)\n",
    )
    INVALID = (
        # a width passed by name through two functions: reported at the layer; 4 wide, but its
        # output feeds another conv, so a narrow internal layer, not an output head
        Invalid(
            """
            from keras import layers

            def encoder(inputs, ff_dim):
                x = layers.Conv1D(filters=ff_dim, kernel_size=1, activation="relu")(inputs)
                x = layers.Dropout(0.1)(x)
                return layers.Conv1D(filters=64, kernel_size=1)(x)

            def build(inputs, ff_dim):
                return encoder(inputs, ff_dim)

            out = build(features, ff_dim=4)
            """,
            fields={"feeds": "Conv1D"},
            at=Range(4, 30, 4, 36),
        ),
        # a literal handed to a block of many layers: its output head is reported at the layer
        Invalid(
            """
            import keras

            def coupling(input_shape):
                inp = keras.layers.Input(shape=input_shape)
                h = keras.layers.Dense(256, activation="relu")(inp)
                h = keras.layers.Dense(256, activation="relu")(h)
                out = keras.layers.Dense(input_shape, activation="linear")(h)
                return keras.Model(inp, out)

            layers_list = [coupling(2) for _ in range(6)]
            """,
            finding="CallSiteHead", fields={"width": 2, "callee": "coupling", "param": "input_shape", "layer": "Dense"},
            at=Range(7, 29, 7, 40),
        ),
        # Dense widths from a module-level constant list, walked in a loop
        Invalid(
            """
                from keras import layers

                HIDDEN = [256, 100]

                def mlp(x):
                    for units in HIDDEN:
                        x = layers.Dense(units, activation="relu")(x)
                    return x
                """,
            finding="LoopWidth", fields={"width": 100, "layer": "Dense", "loop": "units"},
            at=Range(3, 15, 3, 18),
        ),
        Invalid(
            """
            import tensorflow as tf
            x = tf.keras.layers.Dense(100, activation='relu')(x)
            """,
            expected_fix="""
            import tensorflow as tf
            x = tf.keras.layers.Dense(104, activation='relu')(x)
            """,
            unsafe=True,
            fields={"target": "tpu-v5e", "rounded": 104, "padded_to": (104, 128), "wasted": 22},
            at=Range(2, 26, 2, 29),
        ),
        # Keras 1 spells the width nb_filter= / output_dim=
        Invalid(
            """
            from keras.layers import Convolution2D, Dense

            def block(x):
                x = Convolution2D(nb_filter=12, nb_row=3, nb_col=3, border_mode="same")(x)
                return Dense(output_dim=100, activation="relu")(x)
            """,
            expected_fix="""
            from keras.layers import Convolution2D, Dense

            def block(x):
                x = Convolution2D(nb_filter=16, nb_row=3, nb_col=3, border_mode="same")(x)
                return Dense(output_dim=104, activation="relu")(x)
            """,
            unsafe=True,
            at=(Range(4, 32, 4, 34), Range(5, 28, 5, 31)),
        ),
        Invalid(
            "import tensorflow as tf\ntf.keras.mixed_precision.set_global_policy('mixed_float16')\n"
            "x = tf.keras.layers.Dense(units=100)(x)\n",
            expected_fix="import tensorflow as tf\ntf.keras.mixed_precision.set_global_policy('mixed_float16')\n"
            "x = tf.keras.layers.Dense(units=104)(x)\n",
            unsafe=True,
            target="gpu",
            fields={"target": "gpu", "multiple": 8, "rounded": 104, "dtype": "float16"},
            at=Range(3, 32, 3, 35),
        ),
        # float32 too, at TF32's multiple of 4 (docs/facts.md#18, #27)
        Invalid(
            "import keras\nx = keras.layers.Conv2D(30, 3, padding='same')(x)\n",
            expected_fix="import keras\nx = keras.layers.Conv2D(32, 3, padding='same')(x)\n",
            unsafe=True,
            target="gpu",
            fields={"target": "gpu", "multiple": 4, "rounded": 32, "dtype": "float32", "conv": True},
            at=Range(2, 24, 2, 26),
        ),
        Invalid(
            "import keras\nx = keras.layers.Conv2D(30, 3, dtype='mixed_bfloat16')(x)\n",
            expected_fix="import keras\nx = keras.layers.Conv2D(32, 3, dtype='mixed_bfloat16')(x)\n",
            unsafe=True,
            target="gpu",
            at=Range(2, 24, 2, 26),
        ),
        Invalid(
            "import tensorflow.compat.v1 as tf\n\nnet = tf.layers.conv2d(images, 30, 3, padding='same')\n",
            expected_fix="import tensorflow.compat.v1 as tf\n\nnet = tf.layers.conv2d(images, 32, 3, padding='same')\n",
            unsafe=True,
            at=Range(3, 31, 3, 33),
        ),
        # a `__main__` block that trains is the user's training script
        Invalid(
            "import keras\n\n"
            "if __name__ == '__main__':\n"
            "    inp = keras.Input((32,))\n"
            "    h = keras.layers.Dense(100, activation='relu')(inp)\n"
            "    model = keras.Model(inp, keras.layers.Dense(8)(h))\n"
            "    model.fit(x, y)\n",
            expected_fix="import keras\n\n"
            "if __name__ == '__main__':\n"
            "    inp = keras.Input((32,))\n"
            "    h = keras.layers.Dense(104, activation='relu')(inp)\n"
            "    model = keras.Model(inp, keras.layers.Dense(8)(h))\n"
            "    model.fit(x, y)\n",
            unsafe=True,
            at=Range(5, 27, 5, 30),
        ),
        # named constant: reported, not rewritten (it may size other tensors too)
        Invalid(
            """
            from keras import layers

            WIDTH = 48 + 2
            x = layers.Conv2D(WIDTH, 3)(x)
            """,
            fields={"not_fixed": "`WIDTH` may size other tensors too"},
            at=Range(4, 18, 4, 23),
        ),
        # heads: info severity, no fix
        Invalid(
            """
            import keras

            def build(num_classes=10):
                inp = keras.Input((32,))
                x = keras.layers.Dense(64)(inp)
                out = keras.layers.Dense(10)(x)
                return keras.Model(inp, out)
            """,
            fields={"head": "the model's last layer"},
            at=Range(6, 29, 6, 31),
        ),
        Invalid(
            """
            import keras
            NUM_CLASSES = 10
            x = keras.layers.Dense(NUM_CLASSES)(x)
            """,
            fields={"head": "sized by `NUM_CLASSES`"},
            at=Range(3, 23, 3, 34),
        ),
        Invalid("import keras\nx = keras.layers.Dense(12, activation='sigmoid')(x)\n", fields={"head": "softmax/sigmoid activation", "width": 12}, at=Range(2, 23, 2, 25)),
        Invalid(
            """
            import keras
            x = keras.layers.Dense(12, activation='sigmoid')(x)
            """,
            fields={"head": "softmax/sigmoid activation"},
            at=Range(2, 23, 2, 25),
        ),
        Invalid(
            """
            import tensorflow as tf
            logits = tf.keras.layers.Dense(10)(h)
            loss = tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
            """,
            fields={"head": "stored as `logits`"},
            at=Range(2, 31, 2, 33),
        ),
        Invalid(
            """
            import keras
            m = keras.Sequential([keras.layers.Dense(50), keras.layers.Dense(24), keras.layers.Dense(1)])
            """,
            expected_fix="""
            import keras
            m = keras.Sequential([keras.layers.Dense(56), keras.layers.Dense(24), keras.layers.Dense(1)])
            """,
            unsafe=True,
                at=(Range(2, 41, 2, 43), Range(2, 89, 2, 90)),
        ),
        Invalid(
            """
            import tensorflow.compat.v1 as tf
            w = tf.get_variable('w', [3, 3, 3, 30])
            y = tf.nn.conv2d(x, w, [1, 1, 1, 1], 'SAME')
            """,
            finding="KernelWidth", fields={"width": 30, "rounded": 32},
            at=Range(3, 20, 3, 21),
        ),
        # the width is a helper's parameter: reported (and fixed) at the call site
        Invalid(
            """
            import tensorflow as tf


            def conv_block(x, filters):
                x = tf.keras.layers.Conv2D(filters, 3, padding='same')(x)
                return tf.keras.layers.ReLU()(x)


            def backbone(x):
                x = conv_block(x, 30)
                return conv_block(x, 64)
            """,
            expected_fix="""
            import tensorflow as tf


            def conv_block(x, filters):
                x = tf.keras.layers.Conv2D(filters, 3, padding='same')(x)
                return tf.keras.layers.ReLU()(x)


            def backbone(x):
                x = conv_block(x, 32)
                return conv_block(x, 64)
            """,
            unsafe=True,
            finding="CallSiteWidth", fields={"width": 30, "callee": "conv_block", "param": "filters", "at_call_site": True},
            at=Range(10, 22, 10, 24),
        ),
    )

    # A width reached from several layers (a call site, an element of a literal two loops
    # walk) is reported ``once``, and module-level code's head facts are a file fact: what
    # one statement reports does not depend on what the walk saw before it.
    reads = frozenset({Reads.STATEMENT, Reads.FILE_FACTS, Reads.PROJECT})

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__(ctx)
        self._facts: dict[int, _ScopeFacts] = {}  # per function (a cache: one walk of each)
        self._wrappers: dict[int, tuple[cst.FunctionDef, bool]] = {}  # per function: builds one layer

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.call_name(node)
        if name is None:
            if node.args and type(node.func) in _NAMED:  # exact types: every unresolved call passes here
                self._check_factory(node)
            return
        spec = _LAYERS.get(name)
        if (spec is not None or name in _NN_CONVS) and self.ctx.is_host_function(self.ctx.enclosing_callable(node)):
            return  # a test builds the layer to check it, never to train it (semantic.roles.host_functions)
        if spec is not None:
            arg = get_arg(node, *spec)
            if arg is None and name.startswith("keras."):
                arg = get_arg(node, KERAS1_WIDTH_KEYWORDS[spec[0]])  # Keras 1: nb_filter=, output_dim=
            if arg is not None:
                self._check_layer(node, name, arg.value, "units" if name in DENSE_LAYERS else "filters")
        elif name in _NN_CONVS:
            arg = get_arg(node, "filters", 1) or get_arg(node, "filter")
            if arg is not None:
                self._check_kernel(node, name, arg.value)

    # ---- checks -------------------------------------------------------------
    def _multiple(self, layer: cst.Call | None) -> int:
        """What a width must be a multiple of here: the target's, or on a GPU the tensor
        cores' for the layer's compute dtype (docs/facts.md#18): 8 for float16/bfloat16, 4
        for float32 (TF32)."""
        if self.ctx.target.family == "gpu":
            return tensor_core_multiple(self.ctx.compute_dtype(layer))
        return self.ctx.target.channel_multiple

    def _check_layer(self, call: cst.Call, name: str, expr: cst.BaseExpression, unit: str) -> None:
        if isinstance(expr, cst.Name):
            b = self.ctx.lookup(expr.value, at=expr)
            fn = self.ctx.enclosing_function(call)
            if b is not None and b.kind == "param" and fn is not None:
                self._check_call_sites(call, name, fn, expr, unit)
                return
        v = self.ctx.int_const(expr)
        if v is None:
            self._check_iterated(call, name, expr, unit)
            return
        if v <= 0 or v % self._multiple(call) == 0:
            return
        if self.ctx.depends_on_param(expr):
            return
        short = label(name)
        fate = self._fate(v, call, name in CONV_LAYERS)
        if v == 1:
            unit = unit[:-1]
        if v <= 4 and _weighs_another(self.ctx, call):
            return  # a gate or pooling score: its width is what it computes, nothing to change
        head = self._head_reason(call, expr, v)
        if head is not None:
            self.report(expr, OutputHead(short, unit, head, **fate), severity=Severity.INFO)
            return
        if isinstance(expr, cst.Integer):
            self.report(
                expr,
                OffMultiple(short, unit, **fate),
                fix=self.make_fix(Replace(expr, cst.Integer(str(fate["rounded"])))),
            )
            return
        src = dotted_name(expr)
        why = f"`{src}` may size other tensors too" if src else "it is computed"
        self.report(expr, OffMultiple(short, unit, why, **fate))

    def _check_iterated(self, call: cst.Call, name: str, expr: cst.BaseExpression, unit: str) -> None:
        """``for units in HIDDEN: Dense(units)``: every width of the literal the loop walks,
        reported (and fixed) at the element."""
        elements = self.ctx.iterated_elements(expr)
        m = self._multiple(call)
        for el in elements or ():
            v = self.ctx.int_const(el)
            if v is None or v <= 4 or v % m == 0:
                continue  # (a width of 4 or less is a task's output, not a hidden width)
            fate = self._fate(v, call, name in CONV_LAYERS)
            src = self.ctx.code(expr)
            fix = self.make_fix(Replace(el, cst.Integer(str(fate["rounded"])))) if isinstance(el, cst.Integer) else None
            self.report(el, LoopWidth(label(name), unit, src, **fate), fix=fix, once=True)

    def _check_call_sites(self, call: cst.Call, name: str, fn: cst.FunctionDef, width: cst.Name, unit: str) -> None:
        """``def block(x, filters): Conv2D(filters)`` called as ``block(x, 30)``: the width is
        decided at each same-file call site. A literal handed to a function that builds this
        one layer (a conv wrapper) is reported (and fixed) at the call site; a width a call
        site passes by name (a constant, its own parameter), or to a block of many layers
        (``Coupling(2)``, whose output head is one of ten), is reported at the layer."""
        m = self._multiple(call)
        short = label(name)
        param = width.value
        cls = self.ctx.enclosing_class(fn) if fn.name.value == "__init__" else None
        who = cls.name.value if cls is not None else fn.name.value  # a class is called by its name
        feeds: str | None = None  # the layer a narrow one feeds (asked once, only if needed)
        for pv in self.ctx.param_values(fn, param):
            v = pv.const
            if not pv.passed or pv.value is None or not isinstance(v, int) or isinstance(v, bool):
                continue
            if v <= 0 or v % m == 0:
                continue
            fate = self._fate(v, call, name in CONV_LAYERS)
            if v <= 4 and feeds is None:
                feeds = _feeds_layer(self.ctx, call) or ""
            at: cst.BaseExpression = width
            # at the layer: one finding per value of the parameter, at the first layer it sizes
            once: Hashable = (who, param, v)
            if isinstance(pv.value, cst.Integer) and self._one_layer(fn):
                at, once = pv.value, True
            if (v <= 4 and not feeds) or _SEMANTIC_SIZE.search(param):
                self.report(at, CallSiteHead(who, param, short, unit, **fate), severity=Severity.INFO, once=once)
                continue
            finding = CallSiteWidth(who, param, short, unit, feeds or None, at is pv.value, **fate)
            if at is pv.value:
                fix = self.make_fix(Replace(pv.value, cst.Integer(str(fate["rounded"]))))
                self.report(at, finding, fix=fix, once=once)
            else:
                self.report(at, finding, once=once)

    def _one_layer(self, fn: cst.FunctionDef) -> bool:
        """Whether ``fn`` builds one conv or dense layer (a wrapper, maybe picking it in
        branches), not a block of them: no model, at most one such layer outside branches."""
        key = id(fn)
        hit = self._wrappers.get(key)
        if hit is None or hit[0] is not fn:
            ctx = self.ctx
            calls = [c for c in walk(fn.body) if isinstance(c, cst.Call)]
            model = any(ctx.call_name(c) in MODEL_CONSTRUCTORS for c in calls)
            straight = sum(1 for c in calls if ctx.call_name(c) in _LAYERS and not self._branched(c, fn))
            hit = self._wrappers[key] = (fn, not model and straight <= 1)
        return hit[1]

    def _branched(self, node: cst.CSTNode, fn: cst.FunctionDef) -> bool:
        """Whether ``node`` sits under an ``if`` of ``fn``."""
        for a in reversed(self.ctx.ancestors(node)):
            if a is fn:
                return False
            if isinstance(a, cst.If):
                return True
        return False

    def _check_factory(self, call: cst.Call) -> None:
        """``NanoConv2D_BN_Relu6(150, (1, 1))``: a project factory (this file or another of
        the tree) that forwards a literal width to the conv or dense layer it builds."""
        m = self._multiple(None)
        # only a literal that is off the multiple can be reported: ask nothing otherwise
        if not any(
            type(a.value) is cst.Integer and not a.star and (self.ctx.int_const(a.value) or 0) % m
            for a in call.args
        ):
            return
        layer = self.ctx.built_layer(call)
        if layer is None:
            return
        name = canonical(layer.name)
        spec = _LAYERS.get(name)
        if spec is None:
            return
        width = layer.arg(*spec)
        if not isinstance(width, frozenset) or len(width) != 1:
            return
        v = next(iter(width))
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0 or v % m == 0:
            return
        # the call-site argument the width came from: the one literal that folds to it
        sites = [a for a in call.args if not a.star and isinstance(a.value, cst.Integer) and self.ctx.int_const(a.value) == v]
        if len(sites) != 1:
            return
        expr = sites[0].value
        factory = layer.via[0]
        unit = "units" if name in DENSE_LAYERS else "filters"
        fate = self._fate(v, None, name in CONV_LAYERS)
        head = self._head_reason(call, expr, v)
        if head is not None:
            self.report(expr, FactoryHead(factory, label(name), unit, head, **fate), severity=Severity.INFO, once=True)
            return
        fix = self.make_fix(Replace(expr, cst.Integer(str(fate["rounded"]))))
        self.report(expr, FactoryWidth(factory, label(name), unit, **fate), fix=fix, once=True)

    def _check_kernel(self, call: cst.Call, name: str, expr: cst.BaseExpression) -> None:
        shape = self.ctx.shape_of_variable(expr)
        if not shape or len(shape) < 3:
            return
        v = shape[_NN_CONVS[name]]
        if v <= 0 or v % self._multiple(None) == 0:
            return
        fate = self._fate(v, None, True)
        short = label(name)
        if v <= 4:
            self.report(expr, KernelHead(short, **fate), severity=Severity.INFO)
            return
        self.report(expr, KernelWidth(short, **fate))

    def _fate(self, v: int, layer: cst.Call | None, conv: bool) -> _Fate:
        """What the target does with a width off its multiple, and the width to use: the
        fields every :class:`_Width` finding carries.

        TPU and Gaudi: the sizes come from the padding rule the build's simulator uses
        (``kerasfit.core.types.width_padding``): on a TPU a width pads to the small multiple
        in some passes of a step and to the MXU's in the others (docs/facts.md#1–3), Gaudi
        in 16-bit (docs/facts.md#17). GPU: the tensor cores want the multiple of the layer's
        compute dtype (docs/facts.md#18), and the figure is the GPU cost model's, the
        build report's (``kerasfit.core.gpumodel.width_speedup``, docs/facts.md#27).
        """
        target = self.ctx.target
        m = self._multiple(layer)
        rounded = -(-v // m) * m
        if target.family == "gpu":
            dtype = self.ctx.compute_dtype(layer)
            _, speedup = width_speedup(target, v, dtype, conv)
            return _Fate(width=v, target=target.name, multiple=m, rounded=rounded, padded_to=(), wasted=None,
                         dtype=dtype, slowdown=speedup, conv=conv)
        low, high = width_padding(target, v, "float32" if target.family == "tpu" else "bfloat16")
        return _Fate(width=v, target=target.name, multiple=m, rounded=rounded, padded_to=(low, high),
                     wasted=round(100 * (high - v) / high), dtype=None, slowdown=None, conv=conv)

    # ---- output-head detection ------------------------------------------------
    def _head_reason(self, call: cst.Call, expr: cst.BaseExpression, v: int) -> str | None:
        if v <= 4:
            return f"{v} wide"
        for n in walk(expr):
            if isinstance(n, (cst.Name, cst.Attribute)):
                dn = dotted_name(n)
                if dn and _SEMANTIC_SIZE.search(dn.rsplit(".", 1)[-1]):
                    return f"sized by `{dn}`"
        act = keyword_value(call, "activation")
        if act is not None:
            a = self.ctx.const(act)
            if (isinstance(a, str) and a.lower() in HEAD_ACTIVATIONS) or self.ctx.resolve(act) in HEAD_CONSUMERS:
                return "softmax/sigmoid activation"
        stack = self.ctx.ancestors(call)
        # The node that yields the layer's output: `Dense(10)(x)` or `tf.layers.dense(x, 10)`.
        i = len(stack)
        if stack and isinstance(stack[-1], cst.Call) and stack[-1].func is call:
            i -= 1
        app = call if i == len(stack) else stack[i]
        parent = stack[i - 1] if i >= 1 else None
        grand = stack[i - 2] if i >= 2 else None
        target: str | None = None
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            target = dotted_name(parent.targets[0].target)
        elif isinstance(parent, cst.Arg) and isinstance(grand, cst.Call):
            consumer = self.ctx.call_name(grand)
            if consumer is not None and consumer in HEAD_CONSUMERS:
                return "feeds " + consumer.rsplit(".", 1)[-1]
        elif isinstance(parent, cst.Element) and isinstance(grand, cst.List) and grand.elements[-1] is parent:
            if i >= 4 and isinstance(stack[i - 3], cst.Arg) and self.ctx.call_name(stack[i - 4]) == "keras.Sequential":
                return "last layer of the Sequential model"
        if target:
            if _HEAD_TARGET.search(target.rsplit(".", 1)[-1]):
                return f"stored as `{target}`"
            if "." not in target and self._consumed_by_head_op(target, call):
                return f"`{target}` feeds a softmax/loss"
        if app is not None and self._last_layer_of_model(call):
            return "the model's last layer"
        return None

    def _scope_facts(self, at: cst.CSTNode) -> _ScopeFacts:
        """For the function around ``at`` (or the module), computed once: names passed to a
        head op, whether it builds a model, and its last layer call."""
        fn = self.ctx.enclosing_function(at)
        if fn is None:
            # the module's walk covers every statement: a whole-file fact
            facts: _ScopeFacts = self.ctx.file_fact("KF102.module_heads", _module_facts)
            return facts
        hit = self._facts.get(id(fn))
        if hit is None:
            consumed, builds, last = _calls_facts(self.ctx, fn)
            if fn.name.value in ("__init__", "build"):
                cls = self.ctx.enclosing_class(at)
                if cls is not None and any(self.ctx.resolve(b.value) == "keras.Model" for b in cls.bases):
                    builds = True
            hit = self._facts[id(fn)] = (consumed, builds, last)
        return hit

    def _consumed_by_head_op(self, var: str, at: cst.CSTNode) -> bool:
        # bound once, so the consumer reads this layer's result
        return var in self._scope_facts(at)[0] and self.ctx.lookup(var, at=at) is not None

    def _last_layer_of_model(self, call: cst.Call) -> bool:
        _, builds, last = self._scope_facts(call)
        return builds and last is call



# names passed to a head op, whether the scope builds a model, its last layer call
_ScopeFacts = tuple[set[str], bool, "cst.Call | None"]


def _calls_facts(ctx: RuleContext, scope: cst.CSTNode) -> _ScopeFacts:
    consumed: set[str] = set()
    builds = False
    last = None
    for n in walk(scope):
        if not isinstance(n, cst.Call):
            continue
        cn = ctx.call_name(n)
        if cn in HEAD_CONSUMERS:
            consumed.update(a.value.value for a in n.args if isinstance(a.value, cst.Name))
        elif cn in MODEL_CONSTRUCTORS:
            builds = True
        elif cn in _LAYERS:
            last = n
    return consumed, builds, last


def _module_facts(ctx: RuleContext) -> _ScopeFacts:
    return _calls_facts(ctx, ctx.module)


# ---- internal 1-wide layers ----------------------------------------------------------
_MULTIPLY = frozenset({"tf.multiply", "tf.math.multiply", "keras.ops.multiply", "keras.layers.Multiply", "keras.layers.multiply"})
_WEIGHT_ACTIVATIONS = frozenset({"softmax", "sigmoid", "hard_sigmoid"})


def _weighs_another(ctx: RuleContext, layer: cst.Call) -> bool:
    """Whether a narrow layer's output scales another tensor: a gate (squeeze-excitation
    style) or an attention-pooling score. Followed from the layer's application
    (``Conv2D(1, 1)(x)``, or ``self.att(h)`` for a layer kept as ``self.att``) through
    names and activations, up to a multiply."""
    return any(_scales_another(ctx, app, 0) for app in _applications(ctx, layer))


def _feeds_layer(ctx: RuleContext, layer: cst.Call) -> str | None:
    """The conv or dense layer a layer's output goes into (``x = Conv1D(4, 1)(h); x =
    Dropout(r)(x); Conv1D(64, 1)(x)``), through up to three other layer applications, as the
    finding names it, or the next layer of the ``Sequential([...])`` list it is in; else None."""
    nxt = _next_in_sequential(ctx, layer)
    if nxt is not None:
        return nxt
    for app in _applications(ctx, layer):
        found = _next_layer(ctx, app, 0)
        if found is not None:
            return found
    return None


def _next_in_sequential(ctx: RuleContext, layer: cst.Call) -> str | None:
    """``Sequential([Dense(4), Dense(64)])``: the conv or dense layer right after ``layer``."""
    el = ctx.parent(layer)
    seq = ctx.parent(el) if isinstance(el, cst.Element) else None
    arg = ctx.parent(seq) if isinstance(seq, (cst.List, cst.Tuple)) else None
    call = ctx.parent(arg) if isinstance(arg, cst.Arg) else None
    if not isinstance(call, cst.Call) or ctx.call_name_anywhere(call) != "keras.Sequential":
        return None
    items = [e.value for e in seq.elements]  # type: ignore[union-attr]
    i = next((k for k, v in enumerate(items) if v is layer), len(items))
    after = items[i + 1] if i + 1 < len(items) else None
    name = ctx.call_name_anywhere(after) if isinstance(after, cst.Call) else None
    return label(name) if name in _LAYERS else None


def _next_layer(ctx: RuleContext, expr: cst.BaseExpression, depth: int) -> str | None:
    if depth > 3:
        return None
    for n in ctx.uses_of(expr) or ():
        arg = ctx.parent(n)
        call = ctx.parent(arg) if isinstance(arg, cst.Arg) else None
        if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Call):
            continue  # only a layer application: ``Layer(..)(x)``
        name = ctx.call_name_anywhere(call)
        if name in _LAYERS:
            return label(name)
        found = _next_layer(ctx, call, depth + 1) if name is not None else None
        if found is not None:
            return found
    return None


def _applications(ctx: RuleContext, layer: cst.Call) -> list[cst.Call]:
    parent = ctx.parent(layer)
    if isinstance(parent, cst.Call) and parent.func is layer:
        return [parent]
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        attr = dotted_name(parent.targets[0].target)
        cls = next((sc for sc in ctx.scopes_of(parent) if isinstance(sc, cst.ClassDef)), None)
        if attr is not None and attr.startswith("self.") and cls is not None:
            return [c for c in walk(cls, into_defs=True) if isinstance(c, cst.Call) and dotted_name(c.func) == attr]
    return []


def _scales_another(ctx: RuleContext, expr: cst.BaseExpression, depth: int) -> bool:
    if depth > 4:
        return False
    parent = ctx.parent(expr)
    if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Multiply):
        return True
    if isinstance(parent, cst.AugAssign) and isinstance(parent.operator, cst.MultiplyAssign):
        return True  # ``out *= ops.sigmoid(gate(x))``
    if isinstance(parent, (cst.Element, cst.Arg)):
        holder = ctx.parent(parent)
        if isinstance(holder, (cst.List, cst.Tuple)):  # layers.Multiply()([x, g])
            call = ctx.parent(ctx.parent(holder) or holder)
            return isinstance(call, cst.Call) and ctx.call_name_anywhere(call) in _MULTIPLY
        if not isinstance(holder, cst.Call):
            return False
        name = ctx.call_name_anywhere(holder) or ""
        if name in _MULTIPLY:
            return True
        short = name.rsplit(".", 1)[-1]
        if name in HEAD_CONSUMERS and short in _WEIGHT_ACTIVATIONS | {"softmax"} or short == "Activation":
            return _scales_another(ctx, holder, depth + 1)
        return False
    return any(_scales_another(ctx, n, depth + 1) for n in ctx.uses_of(expr) or ())
