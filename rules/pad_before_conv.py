from __future__ import annotations

import re
from collections.abc import Set
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Hashable, Sequence

import libcst as cst

if TYPE_CHECKING:
    from kerasfit.ruleapi import RuleContext
    from kerasfit.ruleapi.syntax import ScopeNode
    from kerasfit.ruleapi.values import Layer

from kerasfit.ruleapi import Applicability, Finding, Invalid, Range, Reads, Rule, Severity
from kerasfit.ruleapi.fixes import Remove, Replace, set_keyword
from kerasfit.ruleapi.symbols import CONV_LAYERS, RESHAPE_CALLS, TRANSPOSE_CALLS, ZERO_PADDING_LAYERS, canonical, label
from kerasfit.ruleapi.syntax import UNKNOWN, dotted_name, get_arg, name_loads, self_attr
from kerasfit.ruleapi.values import class_attr_assignment_line

@dataclass(frozen=True)
class _ConvSpec:
    """Where a convolution keeps its arguments: keyword and positional index."""

    kernel: tuple[str, int | None] | None  # None: the kernel size comes from a variable
    strides: tuple[str, int | None]
    padding: tuple[str, int | None]
    dilation: tuple[str, int | None]
    data_format: tuple[str, int | None]
    default_padding: str | None  # None: the argument is required
    upper: bool  # tf.nn spells 'SAME' / 'VALID'


_KERAS = _ConvSpec(("kernel_size", 1), ("strides", 2), ("padding", 3), ("dilation_rate", 5), ("data_format", 4), "valid", False)
_KERAS_DW = _ConvSpec(("kernel_size", 0), ("strides", 1), ("padding", 2), ("dilation_rate", 5), ("data_format", 4), "valid", False)
_TF_LAYERS = _ConvSpec(("kernel_size", 2), ("strides", 3), ("padding", 4), ("dilation_rate", 6), ("data_format", 5), "valid", False)
_NN = _ConvSpec(None, ("strides", 2), ("padding", 3), ("dilations", None), ("data_format", None), None, True)
_NN_OTHER = _ConvSpec(None, ("strides", None), ("padding", 3), ("dilations", None), ("data_format", None), None, True)

# Transposed and recurrent convolutions pad differently; they are left alone.
_SPECS: dict[str, _ConvSpec] = {
    **{n: (_TF_LAYERS if n.startswith("tf.") else _KERAS) for n in CONV_LAYERS if "ranspose" not in n and "LSTM" not in n},
    "keras.layers.DepthwiseConv2D": _KERAS_DW,
    "keras.layers.DepthwiseConv1D": _KERAS_DW,
    "tf.nn.conv1d": _NN,
    "tf.nn.conv2d": _NN,
    "tf.nn.conv3d": _NN,
    "tf.nn.depthwise_conv2d": _NN,
    "tf.nn.atrous_conv2d": _NN_OTHER,
    # slim / tf.contrib.layers: conv2d(inputs, num_outputs, kernel_size, stride=1, padding='SAME', data_format, rate)
    "tf.contrib.layers.conv2d": _ConvSpec(("kernel_size", 2), ("stride", 3), ("padding", 4), ("rate", 6), ("data_format", 5), "SAME", True),
    # separable_conv2d(inputs, num_outputs, kernel_size, depth_multiplier=1, stride=1, padding='SAME', data_format, rate)
    "tf.contrib.layers.separable_conv2d": _ConvSpec(("kernel_size", 2), ("stride", 4), ("padding", 5), ("rate", 7), ("data_format", 6), "SAME", True),
    "tf.nn.separable_conv2d": _ConvSpec(None, ("strides", None), ("padding", 4), ("dilations", None), ("data_format", None), None, True),
}
_NO_KERNEL_VAR = ("tf.nn.atrous_conv2d", "tf.nn.separable_conv2d")
_PADS = {"tf.pad", "keras.ops.pad"}
_NOT_ZERO = "the conv's own padding pads with zeros"
_RANK = re.compile(r"([123])d", re.I)


@dataclass(frozen=True)
class _PadFinding(Finding):
    pad: str  # the pad's name: "ZeroPadding2D", "tf.pad", a helper's
    conv: str  # the 'valid' conv it feeds
    # a helper known by its name only: the project module kerasfit cannot read
    unread_module: str | None = field(default=None, kw_only=True)
    # a pad made inside these helpers: one finding, at the first 'valid' conv it feeds
    helpers: tuple[str, ...] = field(default=(), kw_only=True)
    # the test (source text) that switches this path on; it is off by default (an info finding)
    off_when: str | None = field(default=None, kw_only=True)

    def _who(self) -> str:
        unread = f" (a pad by its name: kerasfit cannot read `{self.unread_module}`)" if self.unread_module else ""
        return f"`{self.pad}`{unread}"

    def _tail(self) -> str:
        where = " / ".join(f"`{h}`" for h in self.helpers)
        once = f"; one finding for the pad inside {where}, at the first 'valid' conv it feeds" if self.helpers else ""
        return once + (f"; only when `{self.off_when}`, which is off by default" if self.off_when else "")


@dataclass(frozen=True)
class PadFeedsValidConv(_PadFinding):
    not_folded: str | None = None  # why XLA cannot fold the pad at all (REFLECT, a non-zero constant)
    not_fixed: str | None = None  # why padding='same' is not offered; None: it is (the fix)

    def message(self) -> str:
        if self.not_folded:
            head = (f"{self._who()} feeds a 'valid' `{self.conv}`: {self.not_folded}, so XLA cannot fold it into the conv; "
                    "the padded copy is written to and read back from HBM in the forward and backward pass")
        else:
            head = (f"{self._who()} feeds a 'valid' `{self.conv}`: XLA folds a zero pad into the conv's forward pass only, "
                    "the kernel-gradient conv still reads the padded copy")
        if self.not_fixed is None:
            return f"{head}; use the conv's padding='same' (identical here)"
        return f"{head}; not auto-fixed: {self.not_fixed}{self._tail()}"


@dataclass(frozen=True)
class PadThroughLayoutOp(_PadFinding):
    between: tuple[str, ...]  # the layout ops between the pad and the conv, in data order
    conditional: bool  # the pad is made on one path only

    def message(self) -> str:
        between = " and ".join(f"`{o}`" for o in self.between)
        why = "; the pad is conditional" if self.conditional else ""
        return (f"{self._who()} feeds a 'valid' `{self.conv}` through {between}: with an op in between XLA cannot "
                "fold the pad into the conv, so the padded copy is written to and read back from HBM in the forward "
                "and the backward pass, and the layout op moves the padded copy again; not auto-fixed: the pad is "
                f"not the conv's spatial padding here, so padding='same' is not the same model{why}{self._tail()}")
# (label, padded input, per-dim (before, after) pairs or None, why it is not a zero pad or None)
_PadInfo = tuple[str, cst.BaseExpression, list[tuple[int, int]] | None, str | None]
# a pad made inside a project helper: as _PadInfo, labelled with the helper (its input may be unnamed)
_HelperPad = tuple[str, cst.BaseExpression | None, list[tuple[int, int]] | None, str | None]


# a project helper kerasfit cannot read is taken for a pad by its name: `pad`, `fixed_padding`, `pad_input`
_PAD_NAME = re.compile(r"(^|_)(pad|padding|padded)(_|$)", re.I)
_NOT_PAD_NAME = re.compile(r"mask|unpad|crop|conv|pool", re.I)
_REFLECT_NAME = re.compile(r"reflect|symmetric|replicat", re.I)
_REFLECT_BY_NAME = "a pad that reflects (by its name) is not zero padding"
_PAD_CLASS = re.compile(r"^(?=[A-Z]).*Pad(ding|ded)?([A-Z0-9]|$)")  # a layer class: `ReflectionPadding2D`, `Pad`
# a callee named for a (non-transposed) convolution: `_conv2d`, `conv_layer`, `sparse_conv2d`
_CONV_NAME = re.compile(r"conv", re.I)
_NOT_CONV_NAME = re.compile(r"transpose|deconv|upconv|conv_?t\b|lstm|gru", re.I)
# a conv's own keywords (never its input): `_by_signature` looks for the input among the others
_CONV_SETTINGS = frozenset({"kernel_size", "strides", "stride", "padding", "dilation_rate", "dilations", "rate",
                            "data_format", "filters", "units", "num_outputs", "name", "scope", "activation",
                            "use_bias", "kernel_initializer", "kernel_regularizer", "bias_initializer"})
# layers that only move a tensor's data between dims (a pad before them is no conv's own pad)
_LAYOUT_LAYERS = frozenset({"keras.layers.Permute", "keras.layers.Reshape"})
# the callees a layer application or a wrapper call can have (PadBeforeConv.visit_Call)
_CALLEES = frozenset({cst.Call, cst.Name, cst.Attribute, cst.Subscript})
# Keras 1 conv keywords: `Convolution2D(64, 3, 3, border_mode="same", subsample=(2, 2))`.
_KERAS1_KEYWORDS = frozenset({"border_mode", "subsample", "nb_filter", "nb_row", "nb_col", "init", "dim_ordering", "W_regularizer"})


def _padding_arg(call: cst.Call, spec: "_ConvSpec") -> cst.Arg | None:
    """The conv's padding argument (Keras 1 spells it `border_mode`)."""
    return get_arg(call, *spec.padding) or (get_arg(call, "border_mode") if not spec.upper else None)


def _keras1_signature(ctx: RuleContext, call: cst.Call) -> bool:
    """Keras 1 (and Keras 2's legacy interface) read `Convolution2D(64, 3, 3)` as a 3x3
    kernel, tf.keras as kernel 3, strides 3: positions cannot be trusted for a rewrite."""
    if any(a.keyword is not None and a.keyword.value in _KERAS1_KEYWORDS for a in call.args):
        return True
    positional = [a for a in call.args if a.keyword is None and not a.star]
    raw = ctx.raw_name(call.func) or ""
    return len(positional) >= 3 and raw.rsplit(".", 1)[-1].startswith("Convolution")


def _per_dim(value: object, n: int) -> tuple[int, ...] | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,) * n
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
        if len(value) == n:
            return tuple(value)
        if len(value) == 1:
            return (value[0],) * n
        if len(value) == n + 2:  # tf.nn: one entry per dim, batch and channels included
            return tuple(value[1:-1])
    return None


class PadBeforeConv(Rule):
    """
    ## What it does
    Flags `tf.pad` / `keras.ops.pad` / `ZeroPadding1D/2D/3D` whose result feeds a
    convolution with `padding='valid'` (the default of Keras and `tf.layers` conv
    layers) in the same function: nested (`conv(tf.pad(x, p))`), through the
    assignment that reaches the conv (`x = tf.pad(x, p)` then `conv(x)`), or Keras
    functional style (`x = ZeroPadding2D(1)(x)` then `x = Conv2D(..)(x)`), including
    layer objects built in `__init__` and applied in `call`.

    It is a may-analysis: a pad under an `if` that reaches the conv, a padding that is
    one of several values (`"valid" if stride > 1 else "same"`), a conv built by a
    project factory in this or another file of the tree (`DarknetConv2D_BN_Leaky(..,
    strides=(2, 2))` whose wrapper sets 'valid' for stride 2), adjacent layers of
    `compose(...)` / `Sequential([...])` / `model.add(...)`, a pad made by a project
    helper in this or another file of the tree (the reference ResNets'
    `fixed_padding(x, k)`, whose every return is a `tf.pad`), and layers kept in a list or
    dict attribute and applied by index (`self.convs[i](self.pads[i](x))`, appends that
    repeat `[pad, conv]` indexed by a counter stepping by two) or in a loop (`for layer in
    self.stem: x = layer(x)`) all count, as do a project wrapper (this or another file, or a
    closure) that applies a 'valid' conv to the padded argument, first or not
    (`_conv2d(ops.pad(x, 1), w, padding="VALID")`, `_conv2d(inputs=x, ...)`), a layer class
    whose `call` is a pad of its input (`Pad(1)` in a `Sequential` list, or a list built
    before it; a REFLECT / SYMMETRIC one has no 'same' equivalent, which the finding says),
    a conv of a library kerasfit cannot see into, known by its keywords (`kernel_size=`,
    `strides=`, `padding="VALID"`, the input given by position or keyword) or by a name that
    says conv handed a 'VALID' padding (`_conv2d("conv0", x, k, 64, "VALID")`), a project
    subclass of a conv layer that keeps its constructor (`class StandardizedConv2D(Conv2D)`
    overriding `build` only), a pad layer class whose amount is a parameter with a `0`
    default its callers override, and a helper or a layer class of a project module that
    is not in the tree kerasfit reads, taken for a pad by its name (`ops.pad`,
    `fixed_padding`, `ReflectionPadding2D`, which reflects by its name; the finding says so). Where the branch that pads also makes the padding
    'valid' (`padding = "same"`, then `if strides > 1: padding = "valid"; x =
    ZeroPadding2D(..)(x)`; `padding = "valid" if strides > 1 else "same"`; a layer whose
    `__init__` builds the pad layer and sets `self.padding = "valid"` in one branch and
    whose `call` applies the pad when it is not `None`), the finding says so; where that
    branch makes it 'same', the pad is a deliberate extra border and is not reported. A
    transpose or reshape between the pad and the conv (`tf.transpose`, `Permute`,
    `Reshape`) is reported with no fix: the pad is no longer the conv's spatial padding, and
    nothing is folded. Such findings are not auto-fixed. A pad made inside a helper of this
    file is one finding, at the first 'valid' conv it feeds. A causal pad (the time dim of a
    1-D conv, on the left only) is not reported: Keras's own `padding='causal'` is that very
    explicit pad, so the code has nothing better to use.
    A pad on a path the parameters' defaults switch off (`if data_format ==
    "channels_first":`) is reported at info severity.

    ## Why is this slow on the accelerator
    XLA folds a zero spatial pad into the following convolution's window in the
    forward pass only: the kernel-gradient convolution still reads the materialized,
    padded copy of the activations, an extra HBM round trip every step. It is not
    folded at all for a REFLECT pad, a non-zero constant or a pad on channels
    (docs/facts.md#19). Intel's Gaudi guide says the same: use the convolution's own
    padding instead of `tf.pad` (docs/facts.md#17).

    ## Example
    ```python
    x = tf.keras.layers.ZeroPadding2D(1)(x)
    x = tf.keras.layers.Conv2D(64, 3)(x)
    y = tf.nn.conv2d(tf.pad(x, [[0, 0], [2, 2], [2, 2], [0, 0]]), w5x5, 1, "VALID")
    ```

    ## Use instead
    ```python
    x = tf.keras.layers.Conv2D(64, 3, padding="same")(x)
    y = tf.nn.conv2d(x, w5x5, 1, "SAME")
    ```

    ## Fix safety
    Safe, and offered only when the result is provably identical: a zero constant
    pad of the spatial dims only, `(k - 1) / 2` on both sides of every spatial dim for
    an odd (effective, dilated) kernel size `k`, stride 1, a known data format, the
    padded tensor used by this convolution only, and a conv layer object applied only
    here. TensorFlow's 'same' pads `max((ceil(n / s) - 1) * s + k - n, 0)` in total, the
    smaller half before: with stride 1 that is `k - 1` for every input size `n` (odd
    ones included), so an odd kernel gets exactly `(k - 1) / 2` per side (the build
    tests compare outputs before and after the fix on odd-sized inputs). Otherwise the finding says why it is not fixed — with stride 2, for instance,
    'same' pads asymmetrically by an amount that depends on the input size. A
    `ZeroPadding` layer object built in `__init__` that served only this conv is
    removed with it.

    Every value the rewrite rests on — strides, dilation, data format, padding, kernel
    size, the pad's widths and mode — must hold wherever the code runs, not only at a
    parameter's default: a block whose `strides=1` is a parameter of a public class or
    function is not fixed (a backbone may build it with `constructor(**block_kwargs)` at
    stride 2, a user or `from_config` with anything); a parameter counts only in a
    private (underscore) function or class, or a closure, whose every call in the file is
    found and passes it visibly. A conv or pad that takes `**kwargs`, a public class's
    class attribute (a subclass may set another), a command-line flag and a config dict
    handed in are never taken at their defaults either. The finding names the value that
    blocks the fix.

    ## References
    docs/facts.md#17, #19; Habana Gaudi TensorFlow optimization guide ("avoid tf.pad").
    """

    code = "KF103"
    build_evidence = "spatial-pad"
    name = "pad-before-conv"
    message = "Explicit pad feeds a 'valid' convolution"
    fix_title = "Use the convolution's own 'same' padding"
    fix_safety = Applicability.SAFE
    reads = frozenset({Reads.STATEMENT, Reads.FILE_FACTS, Reads.PROJECT})  # project factories and wrappers; a pad layer used in several sequences is reported `once`

    VALID = (
        """
        import tensorflow as tf
        x = tf.keras.layers.Conv2D(64, 3, padding='same')(x)
        """,
        # the pad and the valid conv are built in different branches: never applied together
        """
        import keras

        class Up(keras.layers.Layer):
            def __init__(self, factor):
                super().__init__()
                if factor < 1:
                    self.pad = keras.layers.ZeroPadding2D(1)
                    self.resize = keras.layers.Conv2D(32, 3, padding='same')
                else:
                    self.pad = keras.layers.Identity()
                    self.resize = keras.layers.Conv2D(32, 1)

            def call(self, x):
                return self.resize(self.pad(x))
        """,
        # the conv pads itself ('same'): the explicit pad is a deliberate extra border
        """
        import tensorflow as tf
        x = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])
        x = tf.nn.conv2d(x, w, 1, 'SAME')
        """,
        # something in between: nothing to fold
        """
        import tensorflow as tf
        x = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])
        x = tf.nn.relu(x)
        x = tf.keras.layers.Conv2D(8, 3)(x)
        """,
        # channel-only pad: the conv's padding cannot express it
        """
        import tensorflow as tf
        x = tf.pad(x, [[0, 0], [0, 0], [0, 0], [0, 5]])
        y = tf.keras.layers.Conv2D(8, 1)(x)
        """,
        # a user's own pad function
        """
        from tensorflow.keras import layers
        def pad(x):
            return x
        x = layers.Conv2D(8, 3)(pad(x))
        """,
        # transposed convolutions pad differently
        """
        import keras
        x = keras.layers.ZeroPadding2D(1)(x)
        x = keras.layers.Conv2DTranspose(16, 3)(x)
        """,
        # heterogeneous list applied at indexes the code does not fix: which layer runs is unknown
        """
        import keras

        class Pick(keras.layers.Layer):
            def __init__(self):
                super().__init__()
                self.options = [keras.layers.ZeroPadding2D(1), keras.layers.Conv2D(8, 3)]

            def call(self, x, i, j):
                y = self.options[i](x)
                return self.options[j](y)
        """,
        # the period appended is [conv, pad]: at k (counting by two) the conv, at k + 1 the pad
        """
        import keras

        class Down(keras.layers.Layer):
            def __init__(self, n):
                super().__init__()
                self.steps = []
                for _ in range(n):
                    self.steps.append(keras.layers.Conv2D(16, 3))
                    self.steps.append(keras.layers.ZeroPadding2D(1))

            def call(self, x):
                k = 0
                while k < len(self.steps):
                    x = self.steps[k](x)
                    x = self.steps[k + 1](x)
                    k += 2
                return x
        """,
        # a loop over the layers that also rebinds the tensor in between: the pad feeds the relu
        """
        import keras

        class Stack(keras.layers.Layer):
            def __init__(self):
                super().__init__()
                self.stages = [keras.layers.ZeroPadding2D(1), keras.layers.Conv2D(8, 3)]

            def call(self, x):
                for stage in self.stages:
                    x = stage(x)
                    x = keras.activations.relu(x)
                return x
        """,
        # a helper that pads the channels only: the conv's padding could not do that
        """
        import tensorflow as tf

        def pad_channels(x, extra):
            return tf.pad(x, [[0, 0], [0, 0], [0, 0], [0, 4]])

        def head(x):
            return tf.keras.layers.Conv2D(8, 1)(pad_channels(x, 4))
        """,
        # a helper that pads and then does more: the conv reads the relu, not the pad
        """
        import tensorflow as tf

        def pad_relu(x):
            return tf.nn.relu(tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]]))

        def block(x):
            return tf.keras.layers.Conv2D(8, 3)(pad_relu(x))
        """,
        # a subclass with its own constructor is not the base under another name
        """
        import tensorflow as tf

        class SameConv(tf.keras.layers.Conv2D):
            def __init__(self, filters):
                super().__init__(filters, 3, padding="same")

        def block(x):
            return SameConv(8)(tf.keras.layers.ZeroPadding2D(1)(x))
        """,
        # Keras 1: border_mode="same" is the conv's own padding
        """
        from keras.models import Sequential
        from keras.layers import Convolution2D, ZeroPadding2D

        model = Sequential()
        model.add(ZeroPadding2D((1, 1), input_shape=(3, 64, 64)))
        model.add(Convolution2D(64, 3, 3, border_mode="same"))
        """,
        # a list changed by insert(): its order is not the construction order any more
        """
        import keras

        class Stack(keras.layers.Layer):
            def __init__(self):
                super().__init__()
                self.stages = [keras.layers.ZeroPadding2D(1), keras.layers.Conv2D(8, 3)]
                self.stages.insert(1, keras.layers.ReLU())

            def call(self, x):
                for stage in self.stages:
                    x = stage(x)
                return x
        """,
        # a library's function named `pad` (NumPy's) is no project helper taken for a pad by its name
        """
            import numpy as np
            import tensorflow as tf

            def stem(x, w):
                return tf.nn.conv2d(np.pad(x, 1), w, 1, "VALID")
            """,
        # the branch that pads makes the padding 'same': the pad is a deliberate extra border
        """
            from keras import layers

            def block(x, filters, strides=1):
                padding = "valid"
                if strides > 1:
                    padding = "same"
                    x = layers.ZeroPadding2D(1)(x)
                return layers.Conv2D(filters, 3, strides=strides, padding=padding)(x)
            """,
        # a causal pad (left only) before a 1-D conv: Keras's padding='causal' is this same
        # explicit pad, so there is nothing to change
        """
            from keras import layers, ops

            class CausalDepthwise(layers.Layer):
                def __init__(self, kernel_size):
                    super().__init__()
                    self.kernel_size = kernel_size
                    self.conv = layers.DepthwiseConv1D(kernel_size)

                def call(self, x):
                    x = ops.pad(x, [(0, 0), (self.kernel_size - 1, 0), (0, 0)])
                    return self.conv(x)

            def tcn(x):
                return layers.Conv1D(64, 3, dilation_rate=2)(layers.ZeroPadding1D((4, 0))(x))
            """,
        # a reshape between a layer and the conv, with no pad before it
        """
            import tensorflow as tf

            def head(x):
                x = tf.keras.layers.Dense(64)(x)
                x = tf.reshape(x, [-1, 8, 8, 1])
                return tf.keras.layers.Conv2D(8, 3)(x)
            """,
        # a wrapper whose conv reads something else than the padded argument
        """
            import tensorflow as tf

            def conv_relu(x, w):
                return tf.nn.conv2d(tf.nn.relu(x), w, 1, "VALID")

            def block(x, w):
                return conv_relu(tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]]), w)
            """,
        # the same signature with 'same' padding: the pad is a deliberate extra border
        """
            import tensorflow as tf
            from tensorlayer.layers import conv2d

            def down(x):
                x = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])
                return conv2d(x, 64, kernel_size=3, strides=2, padding="SAME")
            """,
    )
    INVALID = (
        # `padding` becomes 'valid' only in the branch that pads (the statement form)
        Invalid(
            """
                from keras import layers

                def block(x, filters, strides=1):
                    padding = "same"
                    if strides > 1:
                        padding = "valid"
                        x = layers.ZeroPadding2D(((0, 1), (0, 1)))(x)
                    return layers.Conv2D(filters, 3, strides=strides, padding=padding)(x)
                """,
            fields={"not_fixed": "the pad is conditional, and where it pads the conv's padding is 'valid'"},
            at=Range(7, 12, 7, 53),
        ),
        # the same with a conditional expression
        Invalid(
            """
                from keras import layers

                def block(x, filters, strides=1):
                    padding = "valid" if strides > 1 else "same"
                    if strides > 1:
                        x = layers.ZeroPadding2D(((0, 1), (0, 1)))(x)
                    return layers.Conv2D(filters, 3, strides=strides, padding=padding)(x)
                """,
            fields={"not_fixed": "the pad is conditional, and where it pads the conv's padding is 'valid'"},
            at=Range(6, 12, 6, 53),
        ),
        # the layer form: the pad layer is None unless the conv's padding is 'valid'
        Invalid(
            """
                from keras import layers

                class ConvBlock(layers.Layer):
                    def __init__(self, filters, strides=1):
                        super().__init__()
                        self.zero_padding = None
                        self.padding = "same"
                        if strides > 1:
                            self.padding = "valid"
                            self.zero_padding = layers.ZeroPadding2D(((0, 1), (0, 1)))
                        self.conv = layers.Conv2D(filters, 3, strides=strides, padding=self.padding)

                    def call(self, x):
                        if self.zero_padding is not None:
                            x = self.zero_padding(x)
                        return self.conv(x)
                """,
            fields={"not_fixed": "the pad is conditional, and where it pads the conv's padding is 'valid'"},
            at=Range(15, 16, 15, 36),
        ),
        # a transpose between the pad and the conv: no pad is folded, and 'same' is not the same model
        Invalid(
            """
                import tensorflow as tf

                def stem(x, w):
                    x = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])
                    x = tf.transpose(x, [0, 3, 1, 2])
                    return tf.nn.conv2d(x, w, 1, "VALID", data_format="NCHW")
                """,
            fields={"between": ("tf.transpose",)},
            at=Range(4, 8, 4, 51),
        ),
        # a reshape layer between them, the pad a layer too
        Invalid(
            """
                from tensorflow.keras import layers

                def head(x):
                    x = layers.ZeroPadding1D(2)(x)
                    x = layers.Reshape((36, 4, 1))(x)
                    return layers.Conv2D(8, 3)(x)
                """,
            fields={"between": ("Reshape",)},
            at=Range(4, 8, 4, 34),
        ),
        # a conv layer class with a pad amount whose default (0) its callers override
        Invalid(
            """
                from tensorflow import keras

                class PaddedConv2D(keras.layers.Layer):
                    def __init__(self, channels, kernel_size, padding=0, stride=1):
                        super().__init__()
                        self.padding2d = keras.layers.ZeroPadding2D((padding, padding))
                        self.conv2d = keras.layers.Conv2D(channels, kernel_size, strides=(stride, stride))

                    def call(self, x):
                        x = self.padding2d(x)
                        return self.conv2d(x)
                """,
            fields={"not_fixed": "its paddings are not constant"},
            at=Range(10, 12, 10, 29),
        ),
        # a conv subclass that keeps the conv's constructor, after a pad layer class, in a list
        # built before the Sequential that stacks it
        Invalid(
            """
                import tensorflow as tf

                class Pad(tf.keras.layers.Layer):
                    def __init__(self, k):
                        super().__init__()
                        self.p = (k - 1) // 2

                    def call(self, x):
                        return tf.pad(x, [[0, 0], [self.p, self.p], [self.p, self.p], [0, 0]])

                class StandardizedConv2D(tf.keras.layers.Conv2D):
                    def build(self, input_shape):
                        super().build(input_shape)

                def root(filters):
                    layers = [Pad(7), StandardizedConv2D(filters, 7, strides=2, use_bias=False)]
                    return tf.keras.Sequential(layers)
                """,
            fields={"pad": "Pad", "conv": "StandardizedConv2D"},
            at=Range(16, 14, 16, 20),
        ),
        # a conv of a library kerasfit cannot see into, known by its keywords, its input given by keyword
        Invalid(
            """
                import tensorflow.compat.v1 as tf
                from pruning_layers import sparse_conv2d

                def conv(inputs, filters, strides):
                    if strides > 1:
                        inputs = tf.pad(inputs, [[0, 0], [1, 1], [1, 1], [0, 0]])
                    return sparse_conv2d(x=inputs, units=filters, kernel_size=[3, 3], strides=[strides, strides],
                                         padding="SAME" if strides == 1 else "VALID")
                """,
            fields={"conv": "sparse_conv2d", "not_fixed": "`sparse_conv2d` is a conv by its signature (kernel size, strides, padding 'valid'), not one kerasfit can rewrite; the pad is conditional"},
            at=Range(6, 17, 6, 65),
        ),
        # a conv layer class of a library kerasfit cannot see into, known by its keywords
        Invalid(
            """
                import tensorflow as tf
                from tensorlayer.layers import Conv2d

                def stem(x):
                    x = tf.keras.layers.ZeroPadding2D(1)(x)
                    return Conv2d(64, kernel_size=3, strides=2, padding="VALID")(x)
                """,
            fields={"conv": "Conv2d", "not_fixed": "`Conv2d` is a conv by its signature (kernel size, strides, padding 'valid'), not one kerasfit can rewrite"},
            at=Range(5, 8, 5, 43),
        ),
        # a wrapper of this file that applies a 'VALID' conv to its keyword argument, fed a pad
        # made by a helper of a project module kerasfit cannot read, known by its name
        Invalid(
            """
                import tensorflow.compat.v1 as tf
                from . import ops

                def _conv2d(inputs, filters, kernel_size, stride):
                    return tf.layers.conv2d(inputs, filters, kernel_size, strides=stride, padding="VALID")

                def down(net):
                    net = ops.pad(net, 1)
                    return _conv2d(inputs=net, filters=128, kernel_size=4, stride=2)
                """,
            fields={"pad": "ops.pad", "unread_module": ".ops"},
            at=Range(8, 10, 8, 25),
        ),
        # a callee named for a conv, handed 'VALID' as a positional argument, which kerasfit
        # cannot follow (a closure over a library layer)
        Invalid(
            """
                import tensorflow.compat.v1 as tf
                from gan_layers import custom_conv2d

                def generator(z, h, w):
                    def _conv2d(scope, x, kernel_size, filters, padding="SAME"):
                        return custom_conv2d(x=x, filters=filters, kernel_size=kernel_size, padding=padding, scope=scope)

                    x = tf.expand_dims(tf.expand_dims(z, 1), 1)
                    x = tf.pad(x, [[0, 0], [h - 1, h - 1], [w - 1, w - 1], [0, 0]])
                    return _conv2d("conv0", x, (h, w), 512, "VALID")
                """,
            fields={"conv": "_conv2d", "not_fixed": "`_conv2d` is a conv by its name and its padding 'valid', not one kerasfit can rewrite"},
            at=Range(9, 8, 9, 67),
        ),
        # slim's separable conv
        Invalid(
            """
                import tensorflow.compat.v1 as tf
                from tensorflow.contrib import layers as contrib_layers

                def dw(x):
                    x = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])
                    return contrib_layers.separable_conv2d(inputs=x, num_outputs=None, kernel_size=3, stride=2, padding="VALID")
                """,
            fields={"not_fixed": "with stride 2 'same' pads asymmetrically, by an amount that depends on the input size"},
            at=Range(5, 8, 5, 51),
        ),
        # kept found: a pad and a conv built in `build` and applied in `call` (3-D), and a
        # pad before a Conv1D
        Invalid(
            """
                import keras

                class Block(keras.layers.Layer):
                    def build(self, input_shape):
                        self.pad = keras.layers.ZeroPadding3D(1)
                        self.conv = keras.layers.Conv3D(8, 3)

                    def call(self, x):
                        return self.conv(self.pad(x))

                def seq(x):
                    x = keras.layers.ZeroPadding1D(2)(x)
                    return keras.layers.Conv1D(16, 5)(x)
                """,
            expected_fix="""
                import keras

                class Block(keras.layers.Layer):
                    def build(self, input_shape):
                        self.conv = keras.layers.Conv3D(8, 3, padding="same")

                    def call(self, x):
                        return self.conv(x)

                def seq(x):
                    return keras.layers.Conv1D(16, 5, padding="same")(x)
                """,
            at=(Range(9, 25, 9, 36), Range(12, 8, 12, 40)),
        ),
        # a layer class that reflects: XLA folds nothing, and the conv's padding cannot reflect
        Invalid(
            """
                import tensorflow as tf

                class ReflectPad(tf.keras.layers.Layer):
                    def call(self, x):
                        return tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="REFLECT")

                model = tf.keras.Sequential([ReflectPad(), tf.keras.layers.Conv2D(32, 3)])
                """,
            fields={"not_folded": "REFLECT mode is not zero padding"},
            at=Range(7, 29, 7, 41),
        ),
        # one pad inside a helper of this file, used by two convs: one finding, at the first
        Invalid(
            """
                import tensorflow as tf

                def _padding(x, p):
                    return tf.pad(x, [[0, 0], p, p, [0, 0]])

                def down(x, w):
                    return tf.nn.conv2d(_padding(x, [1, 1]), w, 2, "VALID")

                def down_dw(x, w):
                    return tf.nn.depthwise_conv2d(_padding(x, [1, 1]), w, [1, 2, 2, 1], "VALID")
                """,
            fields={"pad": "_padding", "helpers": ("_padding",)},
            at=Range(7, 24, 7, 43),
        ),
        # a conv from a layer library kerasfit cannot see into, known by its keywords;
        # the pad spelled with keywords
        Invalid(
            """
                import tensorflow as tf
                from tensorlayer.layers import conv2d

                def down(x):
                    x = tf.pad(tensor=x, paddings=[[0, 0], [1, 1], [1, 1], [0, 0]])
                    return conv2d(x, 64, kernel_size=3, strides=2, padding="VALID")
                """,
            fields={"conv": "conv2d", "not_fixed": "`conv2d` is a conv by its signature (kernel size, strides, padding 'valid'), not one kerasfit can rewrite"},
            at=Range(5, 8, 5, 67),
        ),
        # TensorFlow's internal op modules and contrib's layers module, as library code imports them
        Invalid(
            """
                from tensorflow.python.ops import array_ops, nn_ops
                from tensorflow.contrib.layers.python.layers import layers as layers_lib

                def stem(x, w):
                    y = nn_ops.conv2d(array_ops.pad(x, [[0, 0], [2, 2], [2, 2], [0, 0]]), w, [1, 2, 2, 1], "VALID")
                    z = array_ops.pad(y, [[0, 0], [1, 1], [1, 1], [0, 0]])
                    return layers_lib.conv2d(z, 64, 3, padding="VALID")
                """,
            expected_fix="""
                from tensorflow.python.ops import array_ops, nn_ops
                from tensorflow.contrib.layers.python.layers import layers as layers_lib

                def stem(x, w):
                    y = nn_ops.conv2d(array_ops.pad(x, [[0, 0], [2, 2], [2, 2], [0, 0]]), w, [1, 2, 2, 1], "VALID")
                    return layers_lib.conv2d(y, 64, 3, padding="SAME")
                """,
            count=2,
            at=(Range(5, 22, 5, 72), Range(6, 8, 6, 58)),
        ),
        # a layer class whose `call` is a zero pad, before a 'valid' conv in a Sequential list
        Invalid(
            """
                import tensorflow as tf

                class Pad(tf.keras.layers.Layer):
                    def __init__(self, p=1):
                        super().__init__()
                        self.p = p

                    def call(self, x):
                        return tf.pad(x, [[0, 0], [self.p, self.p], [self.p, self.p], [0, 0]])

                model = tf.keras.Sequential([Pad(1), tf.keras.layers.Conv2D(32, 3, strides=2)])
                """,
            fields={"pad": "Pad", "conv": "Conv2D"},
            at=Range(11, 29, 11, 35),
        ),
        # a same-file conv wrapper given padding="VALID", fed a pad
        Invalid(
            """
                import tensorflow as tf

                def _conv2d(x, w, stride, padding="SAME"):
                    return tf.nn.conv2d(x, w, [1, stride, stride, 1], padding=padding)

                def block(x, w):
                    y = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])
                    return _conv2d(y, w, 2, padding="VALID")
                """,
            fields={"not_fixed": "the conv is applied inside `_conv2d`, which gives it padding 'valid' here"},
            at=Range(7, 8, 7, 51),
        ),
        # the reference ResNets' `fixed_padding`: the pad is made by a helper of this file
        # (both data-format branches pad), only for stride 2, where the conv is 'VALID'
        Invalid(
            """
            import tensorflow.compat.v1 as tf

            def fixed_padding(inputs, kernel_size, data_format):
                pad_beg = (kernel_size - 1) // 2
                pad_end = kernel_size - 1 - pad_beg
                if data_format == "channels_first":
                    return tf.pad(inputs, [[0, 0], [0, 0], [pad_beg, pad_end], [pad_beg, pad_end]])
                return tf.pad(inputs, [[0, 0], [pad_beg, pad_end], [pad_beg, pad_end], [0, 0]])

            def conv2d_fixed_padding(inputs, filters, kernel_size, strides, data_format="channels_last"):
                if strides > 1:
                    inputs = fixed_padding(inputs, kernel_size, data_format)
                return tf.layers.conv2d(
                    inputs=inputs, filters=filters, kernel_size=kernel_size, strides=strides,
                    padding=("SAME" if strides == 1 else "VALID"), data_format=data_format)
            """,
            fields={"pad": "fixed_padding", "conv": "tf.layers.conv2d", "helpers": ("fixed_padding",)},
            at=Range(12, 17, 12, 64),
        ),
        # a helper of a helper, unconditionally before a 'VALID' tf.nn.conv2d: never rewritten
        Invalid(
            """
            import tensorflow as tf

            def _padding(inputs, paddings):
                return tf.pad(inputs, [[0, 0], paddings, paddings, [0, 0]])

            def space_to_depth_fixed_padding(inputs, kernel_size, block_size=2):
                return _padding(inputs, ((kernel_size // 2 + 1) // block_size, (kernel_size // 2) // block_size))

            def conv0(inputs, kernel):
                inputs = space_to_depth_fixed_padding(inputs, 7)
                return tf.nn.conv2d(inputs, kernel, [1, 1, 1, 1], "VALID")
            """,
            fields={"pad": "space_to_depth_fixed_padding", "not_fixed": "the pad is made inside `space_to_depth_fixed_padding`, which other convs may call too"},
            at=Range(10, 13, 10, 52),
        ),
        # a layer renamed by an empty subclass (tensorflow/tpu wraps Keras' DepthwiseConv2D so)
        Invalid(
            '''
            import tensorflow.compat.v1 as tf

            class DepthwiseConv2D(tf.keras.layers.DepthwiseConv2D, tf.layers.Layer):
                """Wrap keras DepthwiseConv2D to tf.layers."""
                pass

            def depthwise_down(inputs):
                inputs = tf.pad(inputs, [[0, 0], [1, 1], [1, 1], [0, 0]])
                return DepthwiseConv2D([3, 3], strides=2, padding="valid", use_bias=False)(inputs)
            ''',
            fields={"pad": "tf.pad", "conv": "DepthwiseConv2D"},
            at=Range(8, 13, 8, 61),
        ),
        # layers in two comprehension-built lists, applied pairwise by index
        Invalid(
            """
            import keras

            class Fuse(keras.layers.Layer):
                def __init__(self, n):
                    super().__init__()
                    self.pads = [keras.layers.ZeroPadding2D(1) for _ in range(n)]
                    self.convs = [keras.layers.Conv2D(64, 3, use_bias=False) for _ in range(n)]

                def call(self, xs):
                    return [self.convs[i](self.pads[i](x)) for i, x in enumerate(xs)]
            """,
            fields={"not_fixed": "the layers are kept in `self.convs` and applied by index or in a loop"},
            at=Range(10, 30, 10, 45),
        ),
        # the same lists walked with zip()
        Invalid(
            """
            import keras

            class Fuse(keras.layers.Layer):
                def __init__(self, n):
                    super().__init__()
                    self.pads = [keras.layers.ZeroPadding2D(1) for _ in range(n)]
                    self.convs = [keras.layers.Conv2D(64, 3) for _ in range(n)]

                def call(self, x):
                    for pad, conv in zip(self.pads, self.convs):
                        x = conv(pad(x))
                    return x
            """,
            fields={"not_fixed": "the layers are kept in `self.convs` and applied by index or in a loop"},
            at=Range(11, 21, 11, 27),
        ),
        # appends repeat [pad, conv]; the index counts by two, so k is a pad and k + 1 its conv
        Invalid(
            """
            import keras

            class Encoder(keras.layers.Layer):
                def __init__(self, widths):
                    super().__init__()
                    self.down = []
                    for w in widths:
                        self.down.append(keras.layers.ZeroPadding2D(((0, 1), (0, 1))))
                        self.down.append(keras.layers.Conv2D(w, 3, strides=2))

                def call(self, x):
                    k = 0
                    for _ in range(len(self.down) // 2):
                        x = self.down[k](x)
                        x = self.down[k + 1](x)
                        k += 2
                    return x
            """,
            fields={"not_fixed": "with stride 2 'same' pads asymmetrically, by an amount that depends on the input size"},
            at=Range(14, 16, 14, 31),
        ),
        # a stem list applied in a loop: its pad and conv follow each other
        Invalid(
            """
            import tensorflow as tf

            class Stem(tf.keras.layers.Layer):
                def __init__(self):
                    super().__init__()
                    self.stem = [tf.keras.layers.ZeroPadding2D(3), tf.keras.layers.Conv2D(64, 7, strides=2)]

                def call(self, x):
                    for layer in self.stem:
                        x = layer(x)
                    return x
            """,
            fields={"not_fixed": "consecutive layers of `self.stem`, applied in a loop"},
            at=Range(6, 21, 6, 53),
        ),
        # the same by index, under range(len(...)), with the list built in a local first
        Invalid(
            """
            import tensorflow as tf

            class Stem(tf.keras.layers.Layer):
                def __init__(self):
                    super().__init__()
                    stem = []
                    stem.append(tf.keras.layers.ZeroPadding2D(1))
                    stem.append(tf.keras.layers.Conv2D(64, 3))
                    self.stem = stem

                def call(self, x):
                    for i in range(len(self.stem)):
                        x = self.stem[i](x)
                    return x
            """,
            fields={"not_fixed": "consecutive layers of `self.stem`, applied in a loop"},
            at=Range(7, 20, 7, 52),
        ),
        # Keras 1 `Convolution2D(n, rows, cols)`: found, never rewritten from positions
        Invalid(
            """
            from keras.layers import Convolution2D, ZeroPadding2D

            def block(x):
                x = ZeroPadding2D((1, 1))(x)
                return Convolution2D(64, 3, 1, activation="relu")(x)
            """,
            fields={"not_fixed": "a Keras 1 signature (`Convolution2D(n, rows, cols)`, `border_mode=`) is not rewritten"},
            at=Range(4, 8, 4, 32),
        ),
        # layers in a dict, applied by constant key
        Invalid(
            """
            from keras import layers

            class Head(layers.Layer):
                def __init__(self):
                    super().__init__()
                    self.parts = {"pad": layers.ZeroPadding2D(1), "conv": layers.Conv2D(32, 3)}

                def call(self, x):
                    return self.parts["conv"](self.parts["pad"](x))
            """,
            fields={"not_fixed": "the layers are kept in `self.parts` and applied by index or in a loop"},
            at=Range(9, 34, 9, 54),
        ),
        # a Sequential model stacked with add()
        Invalid(
            """
            from keras.models import Sequential
            from keras.layers import Conv2D, ZeroPadding2D

            def vgg_block():
                model = Sequential()
                model.add(ZeroPadding2D((1, 1), input_shape=(224, 224, 3)))
                model.add(Conv2D(64, (3, 3), activation="relu"))
                return model
            """,
            fields={"not_fixed": "the pad and the conv are separate layers of a sequence"},
            at=Range(6, 14, 6, 62),
        ),
        # layers picked by a branch in __init__: the pad and the conv built together
        Invalid(
            """
            import keras

            class Reassemble(keras.layers.Layer):
                def __init__(self, factor):
                    super().__init__()
                    if factor < 1:
                        self.pad = keras.layers.ZeroPadding2D(1)
                        self.resize = keras.layers.Conv2D(32, 3, strides=int(1 / factor))
                    else:
                        self.pad = keras.layers.Identity()
                        self.resize = keras.layers.Identity()

                def call(self, x):
                    x = self.pad(x)
                    return self.resize(x)
            """,
            fields={"not_fixed": "`__init__` builds this pad and conv in one branch (another branch builds different layers)"},
            at=Range(14, 12, 14, 23),
        ),
        # the fix leaves no use of ZeroPadding2D, so its import goes too (Dense was unused before: kept)
        Invalid(
            """
            from tensorflow.keras.layers import Conv2D, Dense, ZeroPadding2D

            def block(x):
                x = ZeroPadding2D(1)(x)
                return Conv2D(64, 3)(x)
            """,
            expected_fix="""
            from tensorflow.keras.layers import Conv2D, Dense

            def block(x):
                return Conv2D(64, 3, padding="same")(x)
            """,
            at=Range(4, 8, 4, 27),
        ),
        # the pad only when downsampling, and a padding that is one of two values
        Invalid(
            """
            import keras

            def block(x, stride):
                if stride > 1:
                    x = keras.layers.ZeroPadding2D(1)(x)
                return keras.layers.Conv2D(64, 3, strides=stride, padding='valid' if stride > 1 else 'same')(x)
            """,
            fields={"not_fixed": "the pad is conditional, and where it pads the conv's padding is 'valid'"},
            at=Range(5, 12, 5, 44),
        ),
        Invalid(
            """
            from tensorflow.keras import layers

            def block(x):
                x = layers.ZeroPadding2D(1)(x)
                x = layers.Conv2D(64, 3, use_bias=False)(x)
                return x
            """,
            expected_fix="""
            from tensorflow.keras import layers

            def block(x):
                x = layers.Conv2D(64, 3, use_bias=False, padding="same")(x)
                return x
            """,
            at=Range(4, 8, 4, 34),
        ),
        Invalid(
            """
            import tensorflow as tf
            y = tf.nn.conv2d(tf.pad(x, [[0, 0], [2, 2], [2, 2], [0, 0]]), w, strides=1, padding='VALID')
            """,
            fields={"not_fixed": "the kernel size is not a constant here"},
            at=Range(2, 17, 2, 60),
        ),
        Invalid(
            """
            import tensorflow.compat.v1 as tf

            def net(x):
                w = tf.get_variable('w', [5, 5, 16, 32])
                y = tf.nn.conv2d(tf.pad(x, [[0, 0], [2, 2], [2, 2], [0, 0]]), w, [1, 1, 1, 1], 'VALID')
                return y
            """,
            expected_fix="""
            import tensorflow.compat.v1 as tf

            def net(x):
                w = tf.get_variable('w', [5, 5, 16, 32])
                y = tf.nn.conv2d(x, w, [1, 1, 1, 1], 'SAME')
                return y
            """,
            at=Range(5, 21, 5, 64),
        ),
        Invalid(
            """
            import keras

            class Stem(keras.layers.Layer):
                def __init__(self):
                    super().__init__()
                    self.pad = keras.layers.ZeroPadding2D(3)
                    self.conv = keras.layers.Conv2D(64, 7, strides=2)

                def call(self, x):
                    return self.conv(self.pad(x))
            """,
            fields={"not_fixed": "with stride 2 'same' pads asymmetrically, by an amount that depends on the input size"},
            at=Range(10, 25, 10, 36),
        ),
        Invalid(
            """
            import keras

            class Block(keras.layers.Layer):
                def __init__(self):
                    super().__init__()
                    self.pad = keras.layers.ZeroPadding2D(1)
                    self.conv = keras.layers.Conv2D(64, 3)

                def call(self, x):
                    return self.conv(self.pad(x))
            """,
            expected_fix="""
            import keras

            class Block(keras.layers.Layer):
                def __init__(self):
                    super().__init__()
                    self.conv = keras.layers.Conv2D(64, 3, padding="same")

                def call(self, x):
                    return self.conv(x)
            """,
            at=Range(10, 25, 10, 36),
        ),
        Invalid(
            """
            import tensorflow as tf

            def f(x):
                x = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]], mode='REFLECT')
                return tf.keras.layers.Conv2D(32, 3)(x)
            """,
            # never described as a zero pad XLA folds
            fields={"not_folded": "REFLECT mode is not zero padding"},
            at=Range(4, 8, 4, 67),
        ),
        Invalid(
            """
            import tensorflow as tf

            def f(x):
                p = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])
                y = tf.keras.layers.Conv2D(32, 3)(p)
                return y + p[:, 1:-1, 1:-1, :]
            """,
            fields={"not_fixed": "the padded tensor is used elsewhere too"},
            at=Range(4, 8, 4, 51),
        ),
        Invalid(
            """
            import tensorflow as tf

            def f(x):
                p = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])
                return tf.compat.v1.layers.conv2d(p, 32, 3)
            """,
            expected_fix="""
            import tensorflow as tf

            def f(x):
                return tf.compat.v1.layers.conv2d(x, 32, 3, padding="same")
            """,
            at=Range(4, 8, 4, 51),
        ),
        Invalid(
            # odd input size, a 5-wide kernel and a dilated 3-wide one (5 wide in effect):
            # 'same' pads 2 per side for both, whatever the input size, at stride 1
            """
            import keras
            from keras import layers


            def build_model():
                inp = keras.Input((7, 9, 4))
                x = layers.ZeroPadding2D(2)(inp)
                x = layers.Conv2D(8, 5)(x)
                x = layers.ZeroPadding2D((2, 2))(x)
                x = layers.Conv2D(8, 3, dilation_rate=2)(x)
                return keras.Model(inp, x)
            """,
            expected_fix="""
            import keras
            from keras import layers


            def build_model():
                inp = keras.Input((7, 9, 4))
                x = layers.Conv2D(8, 5, padding="same")(inp)
                x = layers.Conv2D(8, 3, dilation_rate=2, padding="same")(x)
                return keras.Model(inp, x)
            """,
                at=(Range(7, 8, 7, 36), Range(9, 8, 9, 39)),
        ),
        Invalid(
            """
            from keras import layers

            def f(x):
                x = layers.ZeroPadding2D(((0, 1), (0, 1)))(x)
                return layers.Conv2D(32, 3, padding='valid')(x)
            """,
            fields={"not_fixed": "the pad is asymmetric (0, 1) while 'same' pads 1 per side"},
            at=Range(4, 8, 4, 49),
        ),
        # a public block's `strides` default is 1, but its users (a backbone's
        # `constructor(**block_kwargs)`, `from_config`) build it at stride 2 too: not fixed
        Invalid(
            """
            import keras

            class ConvBlock(keras.layers.Layer):
                def __init__(self, filters, strides=1):
                    super().__init__()
                    self.pad = keras.layers.ZeroPadding2D(1)
                    self.conv = keras.layers.Conv2D(filters, 3, strides=strides)

                def call(self, x):
                    return self.conv(self.pad(x))
            """,
            fields={"not_fixed": "`strides` is a parameter of `ConvBlock`, which code outside this file can call with another value than its default 1"},
            at=Range(10, 25, 10, 36),
        ),
        # the conv's other arguments come through `**kwargs`: strides 2 may be among them
        Invalid(
            """
            from keras import layers

            def _block(x, **conv_kwargs):
                x = layers.ZeroPadding2D(1)(x)
                return layers.Conv2D(8, 3, **conv_kwargs)(x)

            y = _block(x)
            """,
            fields={"not_fixed": "the conv also takes `**conv_kwargs`, which may set any of its arguments"},
            at=Range(4, 8, 4, 34),
        ),
        # a private helper whose every call in the file keeps stride 1: fixed
        Invalid(
            """
            from keras import layers

            def _stem(x, filters, strides=1):
                x = layers.ZeroPadding2D(1)(x)
                return layers.Conv2D(filters, 3, strides=strides)(x)

            def build(x):
                return _stem(_stem(x, 16), 32, strides=1)
            """,
            expected_fix="""
            from keras import layers

            def _stem(x, filters, strides=1):
                return layers.Conv2D(filters, 3, strides=strides, padding="same")(x)

            def build(x):
                return _stem(_stem(x, 16), 32, strides=1)
            """,
            at=Range(4, 8, 4, 34),
        ),
        # a conv written one argument per line gets its padding on a line of its own
        Invalid(
            """
            import tensorflow as tf

            def stem(inputs):
                x = tf.keras.layers.ZeroPadding2D(padding=((1, 1), (1, 1)))(inputs)
                return tf.keras.layers.Conv2D(
                    64,
                    kernel_size=3,
                    use_bias=False,
                )(x)
            """,
            expected_fix="""
            import tensorflow as tf

            def stem(inputs):
                return tf.keras.layers.Conv2D(
                    64,
                    kernel_size=3,
                    use_bias=False,
                    padding="same",
                )(inputs)
            """,
            at=Range(4, 8, 4, 71),
        ),
        # ... and one call at stride 2: not fixed
        Invalid(
            """
            from keras import layers

            def _stem(x, filters, strides=1):
                x = layers.ZeroPadding2D(1)(x)
                return layers.Conv2D(filters, 3, strides=strides)(x)

            def build(x):
                return _stem(_stem(x, 16), 32, strides=2)
            """,
            fields={"not_fixed": "the strides or dilation are not constant"},
            at=Range(4, 8, 4, 34),
        ),
    )

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__(ctx)
        self._attr_cache: dict[tuple[int, str], tuple[int, int]] = {}
        self._off: cst.BaseExpression | None = None  # the default-off test of the pad just found
        self._helpers: dict[int, tuple[cst.Call, _HelperPad | None]] = {}  # call -> what the helper pads
        self._unseen: dict[int, tuple[cst.Call, str]] = {}  # a helper taken for a pad by its name -> its module
        self._pad_keys: dict[int, tuple[cst.Call, tuple[str, Any]]] = {}  # a same-file helper's call -> its pads' key

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.call_name(node)
        ctor: cst.Call | None = None
        subclass: str | None = None  # a project class that is the conv under its own name
        if name == "keras.Sequential":
            self._sequential(node)
            return
        if name is None:
            # exact types (every call of the file passes here): libcst's node classes have
            # no subclasses, and isinstance against them costs ~10x a type test
            func = node.func
            tp = type(func)
            if not node.args or tp not in _CALLEES:
                return
            if tp is cst.Call:
                self._sequence(func)  # type: ignore[arg-type]
            elif tp is cst.Subscript or tp is cst.Name:
                order = self.ctx.applied_in_order(node)
                if order is not None:
                    self._adjacent(order.adjacent(), f"consecutive layers of `{self._code(order.container)}`, applied in a loop")
            if (tp is cst.Name or tp is cst.Attribute) and (self._wrapped(node) or self._by_signature(node)):
                return
            if tp is cst.Name:
                b = self.ctx.lookup(func.value, at=func)  # type: ignore[attr-defined]
                if b is None or b.kind != "assign" or type(b.value) is not cst.Call:
                    if self.ctx.loop_source(func) is None:  # type: ignore[arg-type]
                        return
                # a name bound once, to a call: its constructor is that call when the
                # assignment reaches here, so a call of no framework symbol is no layer
                # (answered before following the statements back to the assignment)
                elif (self.ctx.call_name(b.value) is None and self.ctx.loop_source(func) is None  # type: ignore[arg-type]
                      and self._conv_subclass(b.value) is None):
                    return
            elif tp is cst.Attribute and self_attr(func) is None:
                return
            found = self.ctx.layer_constructor(func)
            if found is None:
                built = self.ctx.constructor_call(func)
                base = self._conv_subclass(built) if built is not None else None
                if built is not None and base is not None:
                    found, subclass = (built, base), dotted_name(built.func)
            if found is None or not found[1].startswith("keras.layers."):
                if tp is cst.Call:
                    self._built(node, func)  # type: ignore[arg-type]
                elif found is None:
                    self._branch_layers(node)
                return
            ctor, name = found
        spec = _SPECS.get(name)
        if spec is None:
            return
        args_of = ctor if ctor is not None else node  # where the conv's settings live
        inp = get_arg(node, "inputs", 0) if ctor is not None else get_arg(node, "input", 0) or get_arg(node, "inputs") or get_arg(node, "value")
        if inp is None:
            return
        pad_arg = _padding_arg(args_of, spec)
        paddings = self._paddings(pad_arg, spec)
        if paddings is None or "VALID" not in paddings:
            return
        self._check(node, name, spec, ctor, args_of, inp, pad_arg, paddings, subclass)

    def _conv_subclass(self, ctor: cst.Call) -> str | None:
        """``StandardizedConv2D(...)`` with ``class StandardizedConv2D(tf.keras.layers.Conv2D)``
        in this file defining no ``__init__`` (it keeps the conv's constructor, so its
        ``padding``; it may override ``build`` or ``call``): the conv's canonical name."""
        ctx = self.ctx
        func: cst.BaseExpression = ctor.func
        at: cst.CSTNode = ctor
        for _ in range(3):  # a subclass of such a subclass
            if type(func) is not cst.Name:
                return None
            b = ctx.lookup(func.value, at=at)
            cls = b.node if b is not None and b.kind == "class" else None
            if not isinstance(cls, cst.ClassDef) or not cls.bases or cls.bases[0].keyword is not None:
                return None
            if any(isinstance(st, cst.FunctionDef) and st.name.value == "__init__" for st in cls.body.body):
                return None
            func = at = cls.bases[0].value
            name = ctx.resolve(func)
            if name is not None:
                return name if name in _SPECS else None
        return None

    def _paddings(self, pad_arg: cst.Arg | None, spec: _ConvSpec) -> set[str] | None:
        """Every padding the conv may get, upper-cased (``"valid" if s > 1 else "same"`` is both)."""
        if pad_arg is None:
            return {spec.default_padding.upper()} if spec.default_padding else None
        values = self.ctx.possible_values(pad_arg.value)
        if not values or not all(isinstance(v, str) for v in values):
            return None
        return {v.upper() for v in values}

    # ---- convs built by project factories, and layer sequences ---------------------
    def _built(self, app: cst.Call, ctor: cst.Call) -> None:
        """``Factory(..)(x)``: a project function (any file of the tree) that builds a conv first."""
        inp = get_arg(app, "inputs", 0)
        if inp is None:
            return
        found = self._find_pad(inp.value)  # first: most inputs are not padded
        if found is None:
            return
        pad, conditional = found
        off = self._off
        conv = self._factory_conv(ctor)
        self._off = off
        if conv is not None:
            self._report_factory(pad, conv, conditional)
            return
        # a conv layer class of a library kerasfit cannot see into: ``Conv2d(64, 3, padding="VALID")(x)``
        callee = dotted_name(ctor.func)
        sign = self._conv_sign(ctor, callee) if callee is not None and self.ctx.call_name(ctor) is None else None
        if callee is not None and sign is not None:
            why = f"`{callee}` is a conv by {sign}, not one kerasfit can rewrite"
            self._report_maybe_off(pad, self._head(callee, pad, why + ("; the pad is conditional" if conditional else "")))

    def _factory_conv(self, ctor: cst.Call) -> tuple[str, set[str], str] | None:
        """For a call of a project factory that builds a conv whose padding may be
        'valid': (the conv's name, its possible paddings, the factory's name)."""
        layer = self.ctx.built_layer(ctor)
        return self._layer_conv(layer) if layer is not None else None

    @staticmethod
    def _layer_conv(layer: Layer) -> tuple[str, set[str], str] | None:
        """A conv reached through project code whose padding may be 'valid': (its name, its
        possible paddings, the outermost project function crossed), else None."""
        name = canonical(layer.name)
        spec = _SPECS.get(name)
        if spec is None:
            return None
        key, pos = spec.padding
        raw = layer.arg(key, pos, frozenset([spec.default_padding]) if spec.default_padding else None)
        if not isinstance(raw, frozenset) or not raw or not all(isinstance(v, str) for v in raw):
            return None
        paddings = {v.upper() for v in raw}
        return (name, paddings, layer.via[0]) if "VALID" in paddings else None

    def _wrapped(self, call: cst.Call) -> bool:
        """``_conv2d(ops.pad(x, 1), w, padding="VALID")``: a project wrapper (this or another
        file of the tree) that applies a conv to an argument which is a pad — its first, or
        another (``_conv2d(inputs=x, ...)``, ``_conv2d("conv0", x, ...)``)."""
        for arg in call.args[:3]:
            if arg.star or (arg.keyword is not None and arg.keyword.value in _CONV_SETTINGS):
                continue
            # first whether the argument may come from a pad at all (a few lookups), then the
            # callee: most calls are not project wrappers, and finding that out is a few lookups
            # (or one interpretation), while looking for a pad behind the argument follows its bindings
            if not self._may_be_pad(arg.value):
                continue
            conv = next((c for c in map(self._layer_conv, self.ctx.ops_fed(call, arg)) if c is not None), None)
            if conv is None:
                continue
            found = self._find_pad(arg.value)
            if found is None:
                continue
            pad, conditional = found
            self._report_factory(pad, conv, conditional, applied=True)
            return True
        return False

    def _by_signature(self, call: cst.Call) -> bool:
        """``conv_layer(fixed_padding(x, k), 64, kernel_size=k, strides=s, padding="VALID")``: a
        callee kerasfit cannot see into (a third-party layer library) that takes a conv's
        keywords — a kernel size, strides and a 'valid' padding — fed a pad."""
        callee = dotted_name(call.func) or "the callee"
        sign = self._conv_sign(call, callee)
        if sign is None:
            return False
        # the input is one of the first positional arguments (tensorpack names the layer first),
        # or given by keyword (``sparse_conv2d(x=inputs, ...)``)
        given = [a.value for a in call.args if a.keyword is None and not a.star][:2]
        given += [a.value for a in call.args if a.keyword is not None and a.keyword.value not in _CONV_SETTINGS]
        found = next((f for f in map(self._find_pad, given) if f is not None), None)
        if found is None:
            return False
        pad, conditional = found
        why = f"`{callee}` is a conv by {sign}, not one kerasfit can rewrite"
        if conditional:
            why += "; the pad is conditional"
        self._report_maybe_off(pad, self._head(callee, pad, why))
        return True

    def _conv_sign(self, call: cst.Call, callee: str) -> str | None:
        """What tells that a callee kerasfit cannot see into is a conv given 'valid' padding:
        its keywords (a kernel size, strides and the padding), or a name that says conv
        handed a 'valid' padding (by keyword, or a positional "VALID":
        ``_conv2d("conv0", x, (h, w), 64, "VALID")``). None when nothing does."""
        kws = {a.keyword.value: a for a in call.args if a.keyword is not None}
        last = callee.rsplit(".", 1)[-1]
        if "kernel_size" in kws and "padding" in kws and {"strides", "stride"} & set(kws):
            valid = self._may_be_valid(kws["padding"].value)
            return "its signature (kernel size, strides, padding 'valid')" if valid else None
        if not _CONV_NAME.search(last) or _NOT_CONV_NAME.search(last):
            return None
        if "padding" in kws:
            valid = self._may_be_valid(kws["padding"].value)
        else:
            valid = any(a.keyword is None and isinstance(a.value, cst.SimpleString)
                        and self.ctx.const(a.value) in ("VALID", "valid") for a in call.args)
        return "its name and its padding 'valid'" if valid else None

    def _may_be_valid(self, padding: cst.BaseExpression) -> bool:
        values = self.ctx.possible_values(padding)
        return bool(values) and all(isinstance(v, str) for v in values) and "VALID" in {v.upper() for v in values}  # type: ignore[union-attr]

    def _sequence(self, seq: cst.Call) -> None:
        """``compose(ZeroPadding2D(..), Conv(..))`` / ``Sequential([...])``: adjacent pad → valid conv."""
        callee = seq.func
        last = callee.attr.value if isinstance(callee, cst.Attribute) else callee.value if isinstance(callee, cst.Name) else None
        if last == "compose":
            items = [a.value for a in seq.args if not a.star and a.keyword is None]
        elif self.ctx.call_name(seq) == "keras.Sequential" and seq.args and isinstance(seq.args[0].value, (cst.List, cst.Tuple)):
            items = [e.value for e in seq.args[0].value.elements if not isinstance(e, cst.StarredElement)]
        else:
            return
        self._adjacent(list(zip(items, items[1:])), "the pad and the conv are separate layers of a sequence")

    def _sequential(self, seq: cst.Call) -> None:
        """``model = Sequential([...])`` and ``model.add(ZeroPadding2D(..))`` then
        ``model.add(Conv2D(..))``: the layers a Sequential model stacks, wherever it is applied."""
        par = self.ctx.parent(seq)
        order = None
        if isinstance(par, cst.Assign) and len(par.targets) == 1:
            order = self.ctx.container_contents(par.targets[0].target)
        if order is None:
            layers = get_arg(seq, "layers", 0)
            if layers is not None and isinstance(layers.value, cst.Name):
                order = self.ctx.container_contents(layers.value)  # ``Sequential(layers)``, a list built before
            if order is not None:
                self._adjacent(order.adjacent(), "the pad and the conv are separate layers of a sequence")
                return
            if layers is None or not isinstance(layers.value, (cst.List, cst.Tuple)):
                return
            items = [e.value for e in layers.value.elements if not isinstance(e, cst.StarredElement)]
            self._adjacent(list(zip(items, items[1:])), "the pad and the conv are separate layers of a sequence")
            return
        self._adjacent(order.adjacent(), "the pad and the conv are separate layers of a sequence")

    def _adjacent(self, pairs: Sequence[tuple[cst.BaseExpression, cst.BaseExpression]], why_pair: str) -> None:
        """Report each (pad, valid conv) pair of layers applied one after the other; the
        layers are constructor calls (or names bound once to one)."""
        for first_layer, second_layer in pairs:
            first, second = self._ctor(first_layer), self._ctor(second_layer)
            if first is None or second is None:
                continue
            if self.ctx.call_name(first) not in ZERO_PADDING_LAYERS and self._layer_pad(first) is None:
                continue
            name = self.ctx.call_name(second)
            shown = label(name) if name is not None else None
            if name is None:
                name = self._conv_subclass(second)
                shown = dotted_name(second.func)
            if name is not None:
                spec = _SPECS.get(name)
                if spec is None:
                    continue
                paddings = self._paddings(_padding_arg(second, spec), spec)
                if paddings is None or "VALID" not in paddings:
                    continue
                why = "its padding is one of several values" if len(paddings) > 1 else why_pair
                # a pad layer bound once and used in several sequences: reported by the first
                self.report(first, self._head(shown or label(name), first, why), once=True)
                continue
            conv = self._factory_conv(second)
            if conv is not None:
                self._off = None  # no pad was followed here: no default-off test is known
                self._report_factory(first, conv, False, once=True)

    def _ctor(self, expr: cst.BaseExpression) -> cst.Call | None:
        if isinstance(expr, cst.Name):
            b = self.ctx.lookup(expr.value, self.ctx.scopes_of(expr))
            bound = b.value if b is not None and b.kind == "assign" else None
            return bound if isinstance(bound, cst.Call) else None
        return expr if isinstance(expr, cst.Call) else None

    def _code(self, node: cst.CSTNode) -> str:
        return self.ctx.code(node)

    def _branch_layers(self, app: cst.Call) -> None:
        """``self.conv(self.pad(x))`` where ``__init__`` picks both layers in one branch
        (``if factor < 1: self.pad = ZeroPadding2D(..); self.conv = Conv2D(..)`` and
        ``Identity`` elsewhere): the pair that is built together is checked."""
        ctx = self.ctx
        attr = self_attr(app.func)
        cls = ctx.enclosing_class(app)
        inp = get_arg(app, "inputs", 0)
        if attr is None or cls is None or inp is None:
            return
        convs = self.ctx.class_attr_assignments(cls, attr)
        if len(convs) < 2:
            return
        src = inp.value
        if isinstance(src, cst.Name):
            hit = ctx.reaching_assignment(src.value, src)
            src = hit[1] if hit is not None else src
        pad_attr = self_attr(src.func) if isinstance(src, cst.Call) else None
        if pad_attr is None:
            return
        for conv in convs:
            if not isinstance(conv, cst.Call):
                continue
            name = ctx.call_name(conv)
            spec = _SPECS.get(name) if name is not None else None
            if name is None or spec is None or not name.startswith("keras.layers."):
                continue
            paddings = self._paddings(_padding_arg(conv, spec), spec)
            if paddings is None or "VALID" not in paddings:
                continue
            block = self._block_of(conv)
            for pad in self.ctx.class_attr_assignments(cls, pad_attr):
                if (
                    isinstance(pad, cst.Call)
                    and ctx.call_name(pad) in ZERO_PADDING_LAYERS
                    and block is not None
                    and self._block_of(pad) is block
                ):
                    why = "`__init__` builds this pad and conv in one branch (another branch builds different layers)"
                    self.report(src, self._head(label(name), pad, why))
                    return

    def _block_of(self, value: cst.CSTNode) -> cst.CSTNode | None:
        """The block holding the assignment statement of ``value``."""
        node = self.ctx.parent(value)
        for _ in range(4):
            if node is None or isinstance(node, (cst.IndentedBlock, cst.Module)):
                return node
            node = self.ctx.parent(node)
        return None

    def _find_pad(self, expr: cst.BaseExpression) -> tuple[cst.Call, bool] | None:
        """The pad that may produce ``expr``: inline, through the reaching assignment, or
        through one of several bindings that may reach (a pad under an ``if``)."""
        conditional = False
        self._off = None
        if not self._may_be_pad(expr):
            return None
        if isinstance(expr, cst.Name):
            hit = self.ctx.reaching_assignment(expr.value, expr)
            if hit is not None:
                expr = hit[1]
            else:
                for b in self.ctx.reaching_bindings(expr):
                    if b.kind == "assign" and isinstance(b.value, cst.Call) and (
                        self._pad(b.value) is not None or self._helper_pad(b.value) is not None
                    ):
                        self._off = self.ctx.off_by_default(b.node)
                        return b.value, True
                return None
        if isinstance(expr, cst.Call) and (self._pad(expr) is not None or self._helper_pad(expr) is not None):
            return expr, conditional
        return None

    def _may_be_pad(self, expr: cst.BaseExpression) -> bool:
        """Whether ``expr`` may be what a pad returns: a call that is no framework op but a
        pad (a pad, a layer application, a project helper), or a name whose innermost
        binding scope assigns it one. Else no pad produces it — a parameter, an attribute,
        ``tf.nn.relu(x)`` — which a few lookups tell, before following the name's statements
        back (``_find_pad``) or interpreting a wrapper it is handed to."""
        tp = type(expr)  # exact types: libcst's node classes have no subclasses
        if tp is cst.Call:
            name = self.ctx.call_name(expr)
            return name is None or name in _PADS
        if tp is not cst.Name:
            return False
        return any(b.kind == "assign" and b.value is not None and type(b.value) is cst.Call and self._may_be_pad(b.value)
                   for b in self.ctx.bindings(expr.value, at=expr))  # type: ignore[attr-defined]

    def _head(self, conv_label: str, pad: cst.Call, not_fixed: str | None, pad_name: str | None = None,
              problem: str | None = None) -> PadFeedsValidConv:
        """The finding of ``pad`` feeding a 'valid' conv (``not_fixed``: why there is no fix)."""
        if pad_name is None:
            info = self._pad(pad) or self._helper_pad(pad) or self._layer_pad(pad)
            ctor = self.ctx.call_name(pad)
            pad_name = info[0] if info else label(ctor) if ctor else "pad"
            problem = info[3] if info else None
        # REFLECT / SYMMETRIC / non-zero constant: nothing is folded
        return PadFeedsValidConv(pad_name, conv_label, problem or None, not_fixed, unread_module=self._by_its_name(pad))

    def _by_its_name(self, pad: cst.Call) -> str | None:
        """The module a pad helper known by its name only comes from (a file of the
        project kerasfit cannot read); None for any other pad."""
        for node in (pad, self.ctx.constructor_call(pad.func)):  # a call, or a layer applied
            hit = self._unseen.get(id(node)) if node is not None else None
            if hit is not None and hit[0] is node:
                return hit[1]
        return None

    def _report_factory(self, pad: cst.Call, conv: tuple[str, set[str], str], conditional: bool, applied: bool = False,
                        once: bool = False) -> None:
        name, paddings, factory = conv
        info = self._pad(pad) or self._helper_pad(pad)
        problem = info[3] if info else None
        made = "applied inside" if applied else "built by"
        why = _NOT_ZERO if problem else f"the conv is {made} `{factory}`, which gives it padding 'valid' here"
        if len(paddings) > 1:
            why = f"`{factory}` may give the conv padding 'valid'"
        if conditional:
            why += "; the pad is conditional"
        self._report_maybe_off(pad, self._head(label(name), pad, why), once)

    # ------------------------------------------------------------------------
    def _check(self, conv: cst.Call, name: str, spec: _ConvSpec, ctor: cst.Call | None, args_of: cst.Call, inp: cst.Arg,
               pad_arg: cst.Arg | None, paddings: Set[str] = frozenset({"VALID"}), subclass: str | None = None) -> None:
        """``subclass``: the project class the conv is built as (see ``_conv_subclass``)."""
        ctx = self.ctx
        conv_label = subclass or label(name)
        via: str | None = None
        pad_line: cst.SimpleStatementLine | None = None
        pad = inp.value
        if isinstance(pad, cst.Name):
            hit = ctx.reaching_assignment(pad.value, pad)
            if hit is None:
                found = self._find_pad(pad)
                if found is not None:
                    self._conditional_pad(found[0], conv_label, pad_arg, paddings)
                return
            via, (pad_line, pad) = pad.value, hit
        if not isinstance(pad, cst.Call):
            return
        if self._through_layout(pad, conv_label):
            return
        pad_info = self._pad(pad)
        if pad_info is None:
            helper = self._helper_pad(pad)
            if helper is not None:
                self._report_helper(pad, name, conv_label, args_of, spec, helper, paddings)
            return
        pad_name, pad_input, pairs, problem = pad_info

        rank_match = _RANK.search(name)
        rank = int(rank_match.group(1)) if rank_match else None
        fmt = self._data_format(args_of, spec)
        if rank == 1 and fmt is not None and not problem and self._causal(pad, pairs, fmt):
            return  # Keras's own padding='causal' is this very pad: nothing to change
        reasons: list[str] = []
        spatial: list[tuple[int, int]] | None = None
        if pairs is None:
            reasons.append("its paddings are not constant")
        elif fmt is None or rank is None or len(pairs) != rank + 2:
            reasons.append("cannot tell which dims are spatial")
        else:
            chan = 1 if fmt == "first" else rank + 1
            spatial = [p for i, p in enumerate(pairs) if i not in (0, chan)]
            if all(p == (0, 0) for p in spatial):
                return  # nothing the conv's own padding could do
            if pairs[0] != (0, 0) or pairs[chan] != (0, 0):
                reasons.append("it also pads the batch or channel dim")
        if ctx.call_name(pad) is None and ctx.layer_constructor(pad.func) is None:
            reasons.insert(0, f"the pad is made inside the layer class `{pad_name}`, which other convs may follow too")
        if problem:
            reasons.insert(0, _NOT_ZERO)
        if len(paddings) > 1:
            reasons.append("the conv's padding is one of several values ('valid' on one path)")
        if subclass is not None:
            reasons.append(f"`{subclass}` is a project subclass of `{label(name)}`, not rewritten")
        if not reasons and spatial is not None and rank is not None:  # (spatial is only known with the rank)
            if _keras1_signature(self.ctx, args_of):
                reasons.append("a Keras 1 signature (`Convolution2D(n, rows, cols)`, `border_mode=`) is not rewritten")
            else:
                reasons.extend(self._geometry(name, spec, args_of, rank, spatial))
        if not reasons:
            reasons.extend(self._exclusive(via, pad_line, pad_input, ctor, conv, pad))
        if not reasons:
            reasons.extend(self._unpinned(pad, pad_info, name, spec, args_of, pad_arg))

        if reasons:
            self.report(pad, self._head(conv_label, pad, reasons[0], pad_name, problem))
            return
        changes: list[Replace | Remove] = []
        same = cst.SimpleString(self._quote(args_of) + ("SAME" if spec.upper else "same") + self._quote(args_of))
        new_input = None
        if pad_line is None or not (isinstance(pad_input, cst.Name) and pad_input.value == via):
            new_input = pad_input
        if pad_line is not None:
            changes.append(Remove(pad_line))
        if pad_arg is not None:
            changes.append(Replace(pad_arg.value, same))
        elif args_of is conv and new_input is not None:
            # one edit: the input and the new keyword live in the same call
            changes.append(Replace(conv, set_keyword(conv.with_deep_changes(inp, value=new_input), "padding", same)))
            new_input = None
        else:
            # a minimal edit keeps a one-argument-per-line call in that style
            changes.append(self.ctx.insert_keyword(args_of, "padding", same.value)
                           or Replace(args_of, set_keyword(args_of, "padding", same)))
        if new_input is not None:
            changes.append(Replace(inp.value, new_input))
        # a ZeroPadding layer object that only served this conv goes too
        attr = self_attr(pad.func)
        cls = self.ctx.enclosing_class(conv)
        if attr is not None and cls is not None and self._layer_uses(pad.func, conv) == 1:
            line = class_attr_assignment_line(cls, attr)
            if line is not None:
                changes.append(Remove(line))
        self.report(pad, self._head(conv_label, pad, None, pad_name, problem), fix=self.make_fix(*changes))

    def _conditional_pad(self, pad: cst.Call, conv_label: str, pad_arg: cst.Arg | None, paddings: Set[str]) -> None:
        """A pad under an ``if`` that may reach a conv whose padding may be 'valid'."""
        why = "the pad is conditional"
        if len(paddings) > 1:
            on_path = self._padding_on_pad_path(pad, pad_arg)
            if on_path is not None and "VALID" not in on_path:
                return  # where it pads, the conv pads itself: a deliberate extra border
            why = ("the pad is conditional, and where it pads the conv's padding is 'valid'" if on_path
                   else "the pad is conditional and so is the conv's padding ('valid' on one path)")
        self._report_simple(pad, conv_label, why)

    def _padding_on_pad_path(self, pad: cst.Call, pad_arg: cst.Arg | None) -> set[str] | None:
        """The conv's paddings on the path where a conditional pad runs, when the code ties
        them together: the branch that pads also sets the padding (``if strides > 1:
        padding = "valid"; x = ZeroPadding2D(..)(x)``, or ``self.padding = "valid"`` beside the
        pad layer's construction), or the padding is ``a if t else b`` with the pad's own
        test ``t``. Upper-cased; None where nothing ties them."""
        if pad_arg is None:
            return None
        target = dotted_name(pad_arg.value) or ""  # "": written in place (``"valid" if s > 1 else "same"``)
        if target.count(".") > (1 if target.startswith("self.") else 0):
            return None
        anchors: list[cst.CSTNode] = [pad]
        built = self.ctx.constructor_call(pad.func) if type(pad.func) is cst.Attribute else None
        if built is not None:
            anchors.append(built)  # ``self.zero_padding(x)``: where the pad layer is built
        for anchor in anchors:
            branch = self._branch_of(anchor)
            if branch is None:
                continue
            found: set[str] = set()
            for v in self._set_in_branch(pad_arg.value, target, *branch):
                vs = self.ctx.possible_values(v)
                if not vs or not all(isinstance(x, str) for x in vs):
                    return None
                found |= {x.upper() for x in vs}
            if found:
                return found
        return None

    def _set_in_branch(self, padding: cst.BaseExpression, target: str, test: cst.BaseExpression,
                       block: cst.IndentedBlock, taken: bool) -> list[cst.BaseExpression]:
        """What the branch (``test``, its ``block``, body or not) gives ``target``, the conv's
        ``padding``: its own assignments of it, or the side of ``padding = a if test else b``."""
        values = [small.value for line in block.body if isinstance(line, cst.SimpleStatementLine)
                  for small in line.body if isinstance(small, cst.Assign)
                  and any(dotted_name(t.target) == target for t in small.targets)] if target else []
        if not values and "." not in target:
            bound = padding if isinstance(padding, cst.IfExp) else self.ctx.binding_value(padding)
            if isinstance(bound, cst.IfExp) and _same_code(self.ctx, bound.test, test):
                values = [bound.body if taken else bound.orelse]
        return values

    def _branch_of(self, node: cst.CSTNode) -> tuple[cst.BaseExpression, cst.IndentedBlock, bool] | None:
        """The innermost ``if`` branch ``node`` runs in: (its test, the branch's block, True
        for the body / False for the ``else``), within ``node``'s function."""
        ctx = self.ctx
        child: cst.CSTNode = node
        parent = ctx.parent(child)
        while parent is not None and not isinstance(parent, (cst.FunctionDef, cst.Module, cst.Lambda, cst.ClassDef)):
            if isinstance(parent, cst.If) and isinstance(child, cst.IndentedBlock):
                return parent.test, child, child is parent.body
            if isinstance(parent, cst.Else) and isinstance(child, cst.IndentedBlock):
                grand = ctx.parent(parent)
                if isinstance(grand, cst.If):
                    return grand.test, child, False
            child, parent = parent, ctx.parent(parent)
        return None

    def _through_layout(self, expr: cst.Call, conv_label: str) -> bool:
        """``conv(tf.transpose(tf.pad(x, p), perm))`` (or a reshape, a ``Permute`` /
        ``Reshape`` layer, a chain of them, through names): the pad is no longer the
        conv's own spatial pad, and XLA folds no pad with an op in between. Reported with
        no fix; True when ``expr`` is such a layout op (whatever it reads)."""
        ops: list[str] = []
        cur: cst.BaseExpression = expr
        for _ in range(4):
            step = self._layout_input(cur) if isinstance(cur, cst.Call) else None
            if step is None:
                break
            op, cur = step
            ops.append(op)
        if not ops:
            return False
        found = self._find_pad(cur)
        if found is None:
            return True
        pad, conditional = found
        info = self._pad(pad) or self._helper_pad(pad) or self._layer_pad(pad)
        pad_name = info[0] if info else "pad"
        between = tuple(dict.fromkeys(reversed(ops)))
        self._report_maybe_off(
            pad, PadThroughLayoutOp(pad_name, conv_label, between, conditional, unread_module=self._by_its_name(pad)),
        )
        return True

    def _layout_input(self, call: cst.Call) -> tuple[str, cst.BaseExpression] | None:
        """(the op's label, the tensor it reads) for a transpose / reshape op or an applied
        ``Permute`` / ``Reshape`` layer, else None."""
        name = self.ctx.call_name(call)
        if name in TRANSPOSE_CALLS or name in RESHAPE_CALLS:
            kw, idx = (TRANSPOSE_CALLS.get(name) or RESHAPE_CALLS[name])[:2]
            arg = get_arg(call, kw, idx)
            return (label(name), arg.value) if arg is not None else None
        if name is None and call.args and type(call.func) in _CALLEES:
            found = self.ctx.layer_constructor(call.func)
            arg = get_arg(call, "inputs", 0)
            if found is not None and found[1] in _LAYOUT_LAYERS and arg is not None:
                return label(found[1]), arg.value
        return None

    def _causal(self, pad: cst.Call, pairs: list[tuple[int, int]] | None, fmt: str) -> bool:
        """A pad of a 1-D conv's time dim on the left only (``[[0, 0], [k - 1, 0], [0, 0]]``,
        ``ZeroPadding1D((k - 1, 0))``): a causal conv, whose Keras ``padding='causal'`` pads
        the same way explicitly. Read from the constant pairs, or from the literal when only
        the left amount is not constant."""
        time = 2 if fmt == "first" else 1
        if pairs is not None:
            return len(pairs) == 3 and pairs[time][1] == 0 and pairs[time][0] > 0
        if self.ctx.call_name(pad) in _PADS:
            p_arg = get_arg(pad, "paddings", 1) or get_arg(pad, "pad_width", 1)
            value = p_arg.value if p_arg is not None else None
            if not isinstance(value, (cst.List, cst.Tuple)) or len(value.elements) != 3:
                return False
            value = value.elements[time].value
        else:  # ``ZeroPadding1D((k - 1, 0))(x)``
            ctor = self.ctx.constructor_call(pad.func)
            p_arg = get_arg(ctor, "padding", 0) if ctor is not None else None
            value = p_arg.value if p_arg is not None else None
        if not isinstance(value, (cst.List, cst.Tuple)) or len(value.elements) != 2:
            return False
        left, right = (self.ctx.const(e.value) for e in value.elements)
        return bool(right == 0 and left != 0)

    def _report_helper(
        self, pad: cst.Call, conv_name: str, conv_label: str, args_of: cst.Call, spec: _ConvSpec, info: _HelperPad,
        paddings: Set[str],
    ) -> None:
        """The conv's input is a helper's pad: found, never rewritten (the pad lives in
        the helper, which other convs may call)."""
        helper, _, pairs, problem = info
        m = _RANK.search(conv_name)
        rank = int(m.group(1)) if m else None
        fmt = self._data_format(args_of, spec)
        if pairs is not None and fmt is not None and rank is not None and len(pairs) == rank + 2:
            chan = 1 if fmt == "first" else rank + 1
            if all(p == (0, 0) for i, p in enumerate(pairs) if i not in (0, chan)):
                return  # channels only: nothing the conv's own padding could do
        why = _NOT_ZERO if problem else f"the pad is made inside `{helper}`, which other convs may call too"
        if len(paddings) > 1:
            why += "; the conv's padding is one of several values ('valid' on one path)"
        key, helpers = self._once(pad)
        self.report(pad, replace(self._head(conv_label, pad, why), helpers=helpers), once=key)

    def _report_simple(self, pad: cst.Call, conv_label: str, why: str) -> None:
        info = self._pad(pad) or self._helper_pad(pad)
        problem = info[3] if info else None
        self._report_maybe_off(pad, self._head(conv_label, pad, _NOT_ZERO if problem else why))

    def _once(self, pad: cst.Call, once: bool = False) -> tuple[Hashable, tuple[str, ...]]:
        """A pad made inside a helper of this file is one finding, at the first call site
        that feeds a 'valid' conv: the pad is the one place it is written. (the ``once``
        of the report, the helpers the finding names)"""
        hit = self._pad_keys.get(id(pad))
        if hit is None or hit[0] is not pad:
            return once, ()
        return hit[1], tuple(dict.fromkeys(fn for fn, _ in hit[1][1]))

    def _report_maybe_off(self, pad: cst.Call, finding: _PadFinding, once: bool = False) -> None:
        """A pad on a path its defaults switch off (a ``channels_first`` branch) is info."""
        key, helpers = self._once(pad, once)
        off, self._off = self._off, None
        if off is not None:
            test = re.sub(r"\s+", " ", self.ctx.code(off))
            self.report(pad, replace(finding, helpers=helpers, off_when=test), severity=Severity.INFO, once=key)
        else:
            self.report(pad, replace(finding, helpers=helpers), once=key)

    # ---- the pad ------------------------------------------------------------
    def _pad(self, call: cst.Call, scopes: Sequence[ScopeNode] | None = None) -> _PadInfo | None:
        """(label, padded input, per-dim (before, after) pairs or None, problem or None).
        ``scopes``: fold the arguments where the call sits (a pad inside a helper)."""
        ctx = self.ctx

        def const(node: cst.BaseExpression) -> Any:
            return ctx.const(node, scopes=scopes) if scopes is not None else ctx.const(node)

        name = ctx.call_name(call)
        if name in _PADS:
            tensor = get_arg(call, "tensor" if name == "tf.pad" else "x", 0)
            if tensor is None:
                return None
            p_arg = get_arg(call, "paddings" if name == "tf.pad" else "pad_width", 1)
            m_arg = get_arg(call, "mode", 2)
            c_arg = get_arg(call, "constant_values", 3 if name == "tf.pad" else None)
            mode = const(m_arg.value) if m_arg is not None else "CONSTANT"
            cval = const(c_arg.value) if c_arg is not None else 0
            problem = None
            if not isinstance(mode, str) or mode.upper() != "CONSTANT":
                problem = f"{mode.upper() if isinstance(mode, str) else 'a non-constant'} mode is not zero padding"
            elif cval not in (0, None):
                problem = "it pads with a non-zero constant"
            raw = const(p_arg.value) if p_arg is not None else None
            pairs: list[tuple[int, int]] | None = None
            if isinstance(raw, (list, tuple)) and all(
                isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(v, int) for v in p) for p in raw
            ):
                pairs = self._unless_default_zero([(p[0], p[1]) for p in raw], p_arg)
            return label(name), tensor.value, pairs, problem
        if name is not None or not call.args:
            return None
        found = ctx.layer_constructor(call.func)
        if found is None:
            ctor = ctx.constructor_call(call.func)  # ``Pad(1)(x)``, ``pad(x)``, ``self.pad(x)``
            custom = self._layer_pad(ctor) if ctor is not None else None
            tensor = get_arg(call, "inputs", 0)
            if custom is None or tensor is None:
                return None
            return custom[0], tensor.value, custom[2], custom[3]
        if found[1] not in ZERO_PADDING_LAYERS:
            return None
        ctor, lname = found
        n = ZERO_PADDING_LAYERS[lname]
        tensor = get_arg(call, "inputs", 0)
        if tensor is None:
            return None
        p_arg = get_arg(ctor, "padding", 0)
        raw = const(p_arg.value) if p_arg is not None else 1
        spatial = self._unless_default_zero(self._zero_padding_pairs(raw, n), p_arg)
        pairs = None
        if spatial is not None:
            fmt_arg = get_arg(ctor, "data_format")
            fmt = const(fmt_arg.value) if fmt_arg is not None else "channels_last"
            if fmt in (None, "channels_last"):
                pairs = [(0, 0), *spatial, (0, 0)]
            elif fmt == "channels_first":
                pairs = [(0, 0), (0, 0), *spatial]
        return label(lname), tensor.value, pairs, None

    def _helper_pad(self, call: cst.BaseExpression) -> _HelperPad | None:
        """``fixed_padding(x, k)``: a call of a project function whose every return is a
        pad. A function of this file is followed through its returns (helpers of helpers
        too); one of another file of the tree through its summary. Returns ``_pad``'s
        shape with the helper's name as the label, else None."""
        if not isinstance(call, cst.Call) or not isinstance(call.func, (cst.Name, cst.Attribute)):
            return None
        cache = self._helpers
        hit = cache.get(id(call))
        if hit is not None and hit[0] is call:
            return hit[1]
        out = self._helper_pad_uncached(call) if self.ctx.call_name(call) is None else None
        cache[id(call)] = (call, out)
        return out

    def _helper_pad_uncached(self, call: cst.Call) -> _HelperPad | None:
        ctx = self.ctx
        helper = dotted_name(call.func) or "helper"
        tensor = get_arg(call, None, 0)
        origins = ctx.origins(call)
        if origins and all(o.via for o in origins):
            if any(o.name not in _PADS and o.name not in ZERO_PADDING_LAYERS for o in origins):
                return None
            found = [self._pad(o.call, scopes=ctx.scopes_of(o.call)) for o in origins]
            infos = [i for i in found if i is not None]
            if len(infos) < len(found):
                return None
            pairs = infos[0][2] if all(i[2] == infos[0][2] for i in infos) else None
            problems = {i[3] for i in infos}
            problem = problems.pop() if len(problems) == 1 else None
            # the pads themselves, by where they are: one finding per pad of this file, at the
            # first call site that feeds a 'valid' conv (a key of code, never of node ids)
            key = tuple(sorted((_def_name(ctx.enclosing_function(o.call)), ctx.code(o.call)) for o in origins))
            self._pad_keys[id(call)] = (call, ("helper-pad", key))
            return helper, tensor.value if tensor else None, pairs, problem
        layer = ctx.built_layer(call)  # a function of another file of the tree
        if layer is None and self._pad_by_name(call, helper):
            return helper, tensor.value if tensor else None, None, _REFLECT_BY_NAME if _REFLECT_NAME.search(helper) else None
        if layer is None or canonical(layer.name) not in _PADS:
            return None
        mode = layer.arg("mode", 2, frozenset({"CONSTANT"}))
        problem = None
        if isinstance(mode, frozenset) and len(mode) == 1:
            m = next(iter(mode))
            if not isinstance(m, str) or m.upper() != "CONSTANT":
                problem = f"{m.upper() if isinstance(m, str) else 'a non-constant'} mode is not zero padding"
        return helper, tensor.value if tensor else None, None, problem

    def _pad_by_name(self, call: cst.Call, helper: str) -> bool:
        """``ops.pad(x, 1)``, ``ops`` a module of the project kerasfit cannot read (not in the
        tree): a pad by its name, which findings say."""
        last = helper.rsplit(".", 1)[-1]
        if not (_PAD_NAME.search(last) or _PAD_CLASS.search(last)) or _NOT_PAD_NAME.search(helper):
            return False
        module = self.ctx.unseen_project_callee(call)
        if module is None:
            return False
        self._unseen[id(call)] = (call, module)
        return True

    def _layer_pad(self, ctor: cst.Call) -> _HelperPad | None:
        """``Pad(1)``: a layer class of this file whose ``call`` returns a pad of its input
        (a REFLECT / SYMMETRIC one too: XLA folds none of it, and it has no 'same'
        equivalent, which the finding says)."""
        ctx = self.ctx
        rets = ctx.layer_call_returns(ctor)
        if rets is None and ctx.call_name(ctor) is None:
            name = dotted_name(ctor.func) or "pad"
            if ctx.imported_zero_pad_layer(ctor):
                return name, None, None, None
            if self._pad_by_name(ctor, name):
                return name, None, None, _REFLECT_BY_NAME if _REFLECT_NAME.search(name) else None
        if not rets or not isinstance(ctor.func, cst.Name):
            return None
        infos = []
        for ret in rets:
            origins = ctx.origins(ret)
            if not origins or any(o.name not in _PADS or o.via or o.conditional for o in origins):
                return None
            for o in origins:
                scopes = ctx.scopes_of(o.call)
                info = self._pad(o.call, scopes=scopes)
                if info is None or not isinstance(info[1], cst.Name):
                    return None
                b = ctx.lookup(info[1].value, scopes)  # the pad's input is the layer's input
                if b is None or b.kind != "param":
                    return None
                infos.append(info)
        pairs = infos[0][2] if all(i[2] == infos[0][2] for i in infos) else None
        problems = {i[3] for i in infos}
        return ctor.func.value, None, pairs, problems.pop() if len(problems) == 1 else "it may not pad with zeros"

    def _unless_default_zero(self, pairs: list[tuple[int, int]] | None, arg: cst.Arg | None) -> list[tuple[int, int]] | None:
        """None (amounts unknown) for a pad of nothing whose amounts come from a parameter
        (``ZeroPadding2D((padding, padding))`` in a layer class whose ``padding=0`` default
        its callers override): nobody writes a pad to pad nothing."""
        if pairs is None or arg is None or any(p != (0, 0) for p in pairs):
            return pairs
        return None if self.ctx.depends_on_param(arg.value) else pairs

    @staticmethod
    def _zero_padding_pairs(raw: object, n: int) -> list[tuple[int, int]] | None:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return [(raw, raw)] * n
        if isinstance(raw, (list, tuple)):
            if n == 1 and len(raw) == 2 and all(isinstance(v, int) for v in raw):
                return [(raw[0], raw[1])]
            if len(raw) == n and all(isinstance(v, int) for v in raw):
                return [(v, v) for v in raw]
            if len(raw) == n and all(isinstance(v, (list, tuple)) and len(v) == 2 for v in raw):
                return [(v[0], v[1]) for v in raw]
        return None

    # ---- the conv ------------------------------------------------------------
    def _data_format(self, call: cst.Call, spec: _ConvSpec) -> str | None:
        arg = get_arg(call, *spec.data_format)
        if arg is None:
            return "last"
        v = self.ctx.const(arg.value)
        if v in (None, "channels_last", "NHWC", "NWC", "NDHWC"):
            return "last"
        if v in ("channels_first", "NCHW", "NCW", "NCDHW"):
            return "first"
        return None

    def _geometry(self, name: str, spec: _ConvSpec, call: cst.Call, rank: int, spatial: list[tuple[int, int]]) -> list[str]:
        ctx = self.ctx
        if spec.kernel is not None:
            k_arg = get_arg(call, *spec.kernel)
            kernel = _per_dim(ctx.const(k_arg.value), rank) if k_arg is not None else None
        elif name in _NO_KERNEL_VAR:
            return [f"`{label(name)}` is not rewritten automatically"]
        else:
            f_arg = get_arg(call, "filters", 1) or get_arg(call, "filter")
            shape = ctx.shape_of_variable(f_arg.value) if f_arg is not None else None
            kernel = tuple(shape[:rank]) if shape and len(shape) == rank + 2 else None
        if kernel is None:
            return ["the kernel size is not a constant here"]
        s_arg = get_arg(call, *spec.strides)
        strides = _per_dim(ctx.const(s_arg.value), rank) if s_arg is not None else (1,) * rank
        d_arg = get_arg(call, *spec.dilation) or (get_arg(call, "rate") if spec.upper else None)
        dil = _per_dim(ctx.const(d_arg.value), rank) if d_arg is not None else (1,) * rank
        if strides is None or dil is None:
            return ["the strides or dilation are not constant"]
        if any(s != 1 for s in strides):
            return [
                f"with stride {max(strides)} 'same' pads asymmetrically, by an amount that depends on the input size"
            ]
        for k, d, (a, b) in zip(kernel, dil, spatial):
            k_eff = d * (k - 1) + 1
            if k_eff % 2 == 0:
                return [f"the {k_eff}-wide (effective) kernel makes 'same' pad asymmetrically"]
            if a != b:
                return [f"the pad is asymmetric ({a}, {b}) while 'same' pads {(k_eff - 1) // 2} per side"]
            if a != (k_eff - 1) // 2:
                return [f"it pads {a} per side while 'same' pads {(k_eff - 1) // 2} for a {k_eff}-wide kernel"]
        return []

    # ---- is the rewrite local? ------------------------------------------------
    def _exclusive(self, via: str | None, pad_line: cst.SimpleStatementLine | None, pad_input: cst.BaseExpression,
                   ctor: cst.Call | None, conv: cst.Call, pad: cst.Call | None = None) -> list[str]:
        ctx = self.ctx
        for app in (conv, pad):
            func = app.func if isinstance(app, cst.Call) else None
            held = func.value if isinstance(func, cst.Subscript) else ctx.loop_source(func) if isinstance(func, cst.Name) else None
            if held is not None:
                return [f"the layers are kept in `{self._code(held)}` and applied by index or in a loop"]
        if ctor is not None and not isinstance(conv.func, cst.Call):
            uses = self._layer_uses(conv.func, conv)
            if uses != 1:
                return ["the conv layer object is applied elsewhere too"]
        if via is None:
            return []
        cur = ctx.current_statement(conv)
        if cur is None:
            return ["the padded tensor may be used elsewhere"]
        line, block, idx = cur
        pad_idx = next((i for i, s in enumerate(block.body) if s is pad_line), None)
        if pad_idx is None:
            return ["the pad is in another block"]
        between = block.body[pad_idx + 1 : idx]
        if any(name_loads(s, via) for s in between) or name_loads(line, via) != 1:
            return ["the padded tensor is used elsewhere too"]
        if not (isinstance(pad_input, cst.Name) and pad_input.value == via):
            if not isinstance(pad_input, cst.Name):
                return ["the pad's input is an expression, not a variable"]
            if any(self.ctx.binds(s, pad_input.value) for s in between):
                return ["the pad's input is rebound before the conv"]
        if self.ctx.binds(line, via):
            return []
        for s in block.body[idx + 1 :]:
            if name_loads(s, via):
                return ["the padded tensor is used elsewhere too"]
            if self.ctx.binds(s, via):
                return []
        fn = ctx.enclosing_function(conv)
        if fn is not None and block is fn.body:
            return []
        return ["the padded tensor may be used elsewhere"]

    def _unpinned(self, pad: cst.Call, pad_info: _PadInfo, name: str, spec: _ConvSpec, args_of: cst.Call,
                  pad_arg: cst.Arg | None) -> list[str]:
        """Why the rewrite may not be identical wherever this code runs: the checks above
        read a parameter at its default (``strides=1`` of a public block that a factory
        builds with ``strides=2``), a flag or a config dict. Each value the rewrite rests on
        is asked again for its value at every construction (``Values.every_construction``),
        the strides first, as what most often differs; [] when every one holds."""
        ctx = self.ctx
        pad_ctor = ctx.layer_constructor(pad.func)
        for call, what in ((args_of, "conv"), (pad, "pad"), (pad_ctor[0] if pad_ctor else pad, "pad")):
            star = next((a for a in call.args if a.star), None)
            if star is not None:  # `Conv2D(64, 3, **kwargs)`: the strides may be in there
                return [f"the {what} also takes `{star.star}{self._code(star.value)}`, which may set any of its arguments"]
        conv_args = [
            get_arg(args_of, *spec.strides),
            get_arg(args_of, *spec.dilation) or (get_arg(args_of, "rate") if spec.upper else None),
            get_arg(args_of, *spec.data_format),
            pad_arg,
            get_arg(args_of, *spec.kernel) if spec.kernel is not None else None,
        ]
        for arg in conv_args:
            if arg is None:
                continue
            with ctx.every_construction() as why:
                if ctx.const(arg.value) is UNKNOWN:
                    return [why[0] if why else f"`{self._code(arg.value)}` is not the same at every construction"]
        with ctx.every_construction() as why:
            if spec.kernel is None and name not in _NO_KERNEL_VAR:
                f_arg = get_arg(args_of, "filters", 1) or get_arg(args_of, "filter")
                if f_arg is not None and ctx.shape_of_variable(f_arg.value) is None:
                    return [why[0] if why else "the kernel's shape is not the same at every construction"]
            again = self._pad(pad)
            if again is None or again[2:] != pad_info[2:]:
                return [why[0] if why else f"the pad `{self._code(pad)}` is not the same at every construction"]
        return []

    def _layer_uses(self, func: cst.BaseExpression, at: cst.CSTNode) -> int:
        """How often the layer object ``func`` is applied where ``at`` is (its function or class)."""
        ctx = self.ctx
        if isinstance(func, cst.Name):
            scope = ctx.enclosing_function(at) or ctx.module
            return name_loads(scope, func.value)
        attr = self_attr(func)
        cls = ctx.enclosing_class(at)
        if attr is None or cls is None:
            return 0
        key = (id(cls), attr)
        if key not in self._attr_cache:
            self._attr_cache[key] = (len(self.ctx.class_attr_assignments(cls, attr)), self.ctx.class_attr_uses(cls, attr))
        return self._attr_cache[key][1]

    @staticmethod
    def _quote(call: cst.Call) -> str:
        for a in call.args:
            if isinstance(a.value, cst.SimpleString):
                return a.value.quote[0] if a.value.quote else '"'
        return '"'


def _def_name(fn: cst.FunctionDef | None) -> str:
    return fn.name.value if fn is not None else ""


def _same_code(ctx: RuleContext, a: cst.CSTNode, b: cst.CSTNode) -> bool:
    """Two expressions spelled alike (whitespace aside)."""
    code = ctx.code
    return re.sub(r"\s+", "", code(a)) == re.sub(r"\s+", "", code(b))
