from __future__ import annotations

import re
from dataclasses import dataclass

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from kerasfit.ruleapi import RuleContext

from kerasfit.ruleapi import Applicability, Finding, Invalid, Range, Reads, Rule
from kerasfit.ruleapi.fixes import Replace, remove_arg
from kerasfit.ruleapi.symbols import BATCHNORM_LAYERS, SPATIAL_OUTPUT_RANK, UNFUSED_BATCHNORM_OPS
from kerasfit.ruleapi.syntax import get_arg

# tf-keras refuses fused=True together with these (docs/facts.md#21).
_FUSED_BLOCKERS = ("renorm", "virtual_batch_size", "adjustment", "synchronized")
# `tf.nn.batch_normalization` is also the textbook helper for other normalizations,
# which the fused batch-norm kernel cannot compute.
_OTHER_NORM = re.compile(r"(layer|group|instance|rms|pixel|channel)_?norm", re.I)
_MOMENTS = {"tf.nn.moments", "tf.nn.weighted_moments"}
# The channel axes the fused kernel accepts, by input rank (tf-keras raises on others).
_FUSED_AXES = {4: {-1, 1, 3, -3}, 5: {-1, 1, 4, -4}}


@dataclass(frozen=True)
class UnfusedOp(Finding):
    op: str  # "tf.nn.batch_normalization"

    template = "`{op}` runs unfused; use `tf.compat.v1.nn.fused_batch_norm` or a BatchNormalization layer"


@dataclass(frozen=True)
class FusedRejectedByKeras3(Finding):
    template = ("Keras 3 `BatchNormalization` takes no `fused` argument (it raises ValueError); "
                "drop it — Keras 3 uses the fused kernel")


@dataclass(frozen=True)
class FusedIsKeras2(Finding):
    """tf.keras is Keras 3 only from TF 2.16 on; Keras 2.x code accepts `fused`."""

    template = ("`fused` is a Keras 2 argument: Keras 3 (tf.keras from TF 2.16) rejects it, and "
                "tf-keras 2.x picks the fused kernel without it; drop it")


@dataclass(frozen=True)
class FusedFalse(Finding):
    not_fixed: str | None = None  # why no fix is offered; None: fixed

    def message(self) -> str:
        text = "Batch norm with `fused=False` runs as separate unfused ops; use `fused=True`"
        return f"{text} (not auto-fixed: {self.not_fixed})" if self.not_fixed else text


class UnfusedBatchnorm(Rule):
    """
    ## What it does
    Flags batch normalization that does not use the fused kernel:
    `tf.nn.batch_normalization` (and its deprecated sibling
    `tf.nn.batch_norm_with_global_normalization`), and `BatchNormalization(fused=False)` /
    `tf.compat.v1.layers.batch_normalization(fused=False)`. Under Keras 3 any `fused=`
    argument is flagged too: Keras 3's `BatchNormalization` has no such argument and
    raises `ValueError` when it is given.

    ## Why is this slow on the accelerator
    The unfused form is a chain of separate mean, variance, subtract, multiply and
    add ops, each a pass over the activations in HBM; the fused op does it in one
    (docs/facts.md#10). The Cloud TPU performance guide names the fused variant as the one
    to use.

    ## Example
    ```python
    x = tf.keras.layers.BatchNormalization(fused=False)(x)
    y = tf.nn.batch_normalization(x, mean, var, beta, gamma, 1e-3)
    ```

    ## Use instead
    ```python
    x = tf.keras.layers.BatchNormalization()(x)          # fused when possible
    y, _, _ = tf.compat.v1.nn.fused_batch_norm(x, gamma, beta, mean, var, 1e-3, is_training=False)
    ```

    ## Fix safety
    Keras 3 gets the argument dropped: safe, since Keras 3 raises on any `fused=`
    argument and uses the fused path by itself.

    tf-keras and `tf.compat.v1.layers` get `fused=True`, which computes the same
    normalization but raises unless the input is 4-D or 5-D with the channels on an
    axis the kernel takes (1 or 3 for 4-D, 1 or 4 for 5-D, or -1), and the layer has no
    `renorm`, `virtual_batch_size`, `adjustment`, `synchronized` or `dtype`. The fix is
    safe only where that is proven here: the layer is applied directly (or through a
    name bound once) to the output of a 2-D/3-D convolution, pooling, padding,
    cropping or upsampling layer, and `axis` is absent or one of those. Elsewhere (a
    `Dense` output, an input of unknown rank) the fix is unsafe: check the input rank.
    `fused` and `axis` count only as they are at every construction: `fused=fused` whose
    default is False, in a public function or class (callers may pass True, or
    `renorm=True` through `**kwargs`), is reported without a fix, and an `axis` that is
    a parameter's default makes the fix unsafe.
    `tf.nn.batch_normalization` has no automatic fix: the fused op's signature and
    outputs differ.

    ## References
    docs/facts.md#10, #21; Cloud TPU performance guide, "TensorFlow ops".
    """

    code = "KF101"
    build_evidence = "build-failure"
    build_failure_pattern = r"\bfused\b"
    name = "unfused-batchnorm"
    message = "Batch norm does not use the fused kernel"
    fix_title = "Use the fused batch-norm kernel"
    fix_safety = Applicability.SAFE
    reads = frozenset({Reads.STATEMENT, Reads.FILE_FACTS})  # the Keras flavour, which `TF_USE_LEGACY_KERAS` anywhere in the file sets

    VALID = (
        """
        import tensorflow as tf
        x = tf.keras.layers.BatchNormalization()(x)
        """,
        """
        import tensorflow as tf
        y = tf.compat.v1.layers.batch_normalization(x, fused=True, training=True)
        """,
        """
        import tensorflow.compat.v1 as tf
        y, m, v = tf.nn.fused_batch_norm(x, scale, offset)
        """,
        """
        from tf_keras import layers
        bn = layers.BatchNormalization(fused=None)
        """,
        # a user's own class of the same name is not Keras
        """
        class BatchNormalization:
            def __init__(self, fused):
                pass
        bn = BatchNormalization(fused=False)
        """,
        # fused cannot be used with renorm: fused=False there is required, not slow by choice
        """
        import tf_keras as keras
        bn = keras.layers.BatchNormalization(renorm=True, fused=False)
        """,
        # layer norm written with the batch-norm formula: statistics over the features
        """
        import tensorflow as tf

        def norm(x, g, b):
            mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
            return tf.nn.batch_normalization(x, mean, var, b, g, 1e-5)
        """,
        """
        import tensorflow as tf

        class GroupNorm(tf.keras.layers.Layer):
            def call(self, x):
                m, v = tf.nn.moments(x, self.axes, keepdims=True)
                return tf.nn.batch_normalization(x, m, v, None, None, 1e-5)
        """,
    )
    INVALID = (
        # the deprecated sibling of tf.nn.batch_normalization, in a hand-written batch-norm layer
        Invalid(
            """
            import tensorflow.compat.v1 as tf

            class BatchNorm:
                def __call__(self, x, train=True):
                    mean, var = tf.nn.moments(x, [0, 1, 2])
                    return tf.nn.batch_norm_with_global_normalization(
                        x, mean, var, self.beta, self.gamma, 1e-5, scale_after_normalization=True)
            """,
            fields={"op": "tf.nn.batch_norm_with_global_normalization"},
            at=Range(6, 15, 7, 86),
        ),
        # the input comes from conv layers kept in a list: 4-D, so fused=True is identical (safe)
        Invalid(
            """
            import tf_keras as keras

            class Tower(keras.layers.Layer):
                def __init__(self):
                    super().__init__()
                    self.convs = [keras.layers.Conv2D(32, 3, padding="same") for _ in range(3)]

                def call(self, x):
                    for conv in self.convs:
                        x = keras.layers.BatchNormalization(fused=False)(conv(x))
                    return x
            """,
            expected_fix="""
            import tf_keras as keras

            class Tower(keras.layers.Layer):
                def __init__(self):
                    super().__init__()
                    self.convs = [keras.layers.Conv2D(32, 3, padding="same") for _ in range(3)]

                def call(self, x):
                    for conv in self.convs:
                        x = keras.layers.BatchNormalization(fused=True)(conv(x))
                    return x
            """,
            at=Range(10, 16, 10, 60),
        ),
        Invalid(
            """
            import tensorflow as tf
            y = tf.nn.batch_normalization(x, mean, var, beta, gamma, 1e-3)
            """,
            finding="UnfusedOp",
            at=Range(2, 4, 2, 62),
        ),
        Invalid(
            """
            import tensorflow as tf

            def bn(x, g, b):
                mean, var = tf.nn.moments(x, axes=[0, 1, 2])
                return tf.nn.batch_normalization(x, mean, var, b, g, 1e-3)
            """,
            at=Range(5, 11, 5, 62),
        ),
        Invalid(
            """
            import tensorflow.compat.v1 as tf

            h = tf.layers.batch_normalization(h, training=is_training, fused=False)
            """,
            expected_fix="""
            import tensorflow.compat.v1 as tf

            h = tf.layers.batch_normalization(h, training=is_training, fused=True)
            """,
            unsafe=True,
            at=Range(3, 4, 3, 71),
        ),
        Invalid(
            """
            import tf_keras as keras
            bn = keras.layers.BatchNormalization(axis=-1, fused=False)
            """,
            expected_fix="""
            import tf_keras as keras
            bn = keras.layers.BatchNormalization(axis=-1, fused=True)
            """,
            unsafe=True,  # the input's rank is not known here
            at=Range(2, 5, 2, 58),
        ),
        Invalid(
            """
            import tf_keras as keras

            def build_model():
                inp = keras.Input((16, 16, 3))
                x = keras.layers.Conv2D(8, 3)(inp)
                x = keras.layers.BatchNormalization(fused=False)(x)
                return keras.Model(inp, x)
            """,
            expected_fix="""
            import tf_keras as keras

            def build_model():
                inp = keras.Input((16, 16, 3))
                x = keras.layers.Conv2D(8, 3)(inp)
                x = keras.layers.BatchNormalization(fused=True)(x)
                return keras.Model(inp, x)
            """,
            at=Range(6, 8, 6, 52),
        ),
        Invalid(
            # the reproducer: after a Dense the input is 2-D and fused=True raises
            """
            import tf_keras as keras

            def build():
                inp = keras.Input((16,))
                x = keras.layers.Dense(64)(inp)
                x = keras.layers.BatchNormalization(fused=False)(x)
                return keras.Model(inp, x)
            """,
            expected_fix="""
            import tf_keras as keras

            def build():
                inp = keras.Input((16,))
                x = keras.layers.Dense(64)(inp)
                x = keras.layers.BatchNormalization(fused=True)(x)
                return keras.Model(inp, x)
            """,
            unsafe=True,
            at=Range(6, 8, 6, 52),
        ),
        # `fused` is False by a public function's default: `True` in its place would
        # override what every caller passes, so no fix
        Invalid(
            """
            import tf_keras as keras
            def conv_bn(x, fused=False):
                x = keras.layers.Conv2D(8, 3)(x)
                return keras.layers.BatchNormalization(fused=fused)(x)
            """,
            fields={"not_fixed": "`fused` is a parameter of `conv_bn`, which code outside this file can call "
                                 "with another value than its default False"},
            at=Range(4, 11, 4, 55),
        ),
        Invalid(
            """
            import keras
            bn = keras.layers.BatchNormalization(momentum=0.9, fused=True)
            """,
            expected_fix="""
            import keras
            bn = keras.layers.BatchNormalization(momentum=0.9)
            """,
            finding="FusedRejectedByKeras3",
            at=Range(2, 5, 2, 62),
        ),
        # tf.keras 2.x-era code: Keras 3's ValueError is not claimed
        Invalid(
            """
            import tensorflow as tf
            from keras_applications import imagenet_utils

            bn = tf.keras.layers.BatchNormalization(fused=True)
            """,
            expected_fix="""
            import tensorflow as tf
            from keras_applications import imagenet_utils

            bn = tf.keras.layers.BatchNormalization()
            """,
            finding="FusedIsKeras2",
            at=Range(4, 5, 4, 51),
        ),
        Invalid(
            """
            from tensorflow.keras.layers import BatchNormalization as BN

            x = BN(fused=False, axis=3)(x)
            """,
            expected_fix="""
            from tensorflow.keras.layers import BatchNormalization as BN

            x = BN(axis=3)(x)
            """,
            at=Range(3, 4, 3, 27),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.call_name(node)
        if name is None:
            return
        if name in UNFUSED_BATCHNORM_OPS:
            if self._other_normalization(node):
                return
            self.report(node, UnfusedOp(name))
            return
        if name not in BATCHNORM_LAYERS:
            return
        fused = get_arg(node, "fused")
        if fused is None:
            return
        flavour = self.ctx.flavour(node)
        keras3 = flavour == "keras3" or (flavour == "tf.keras" and not self.ctx.uses_legacy_keras())
        if keras3:
            rejected = flavour == "keras3" and not _keras2_era(self.ctx)
            self.report(
                node,
                FusedRejectedByKeras3() if rejected else FusedIsKeras2(),
                fix=self.make_fix(Replace(node, remove_arg(node, fused)), title="Remove the `fused` argument"),
            )
            return
        value = self.ctx.const(fused.value)
        if value is not False:
            return
        if any(get_arg(node, k) is not None for k in _FUSED_BLOCKERS):
            return
        with self.ctx.every_construction() as why:
            pinned = self.ctx.const(fused.value)
        star = next((a for a in node.args if a.star), None)
        if star is not None:  # `**kwargs` may hold `renorm=True`, which fused=True refuses
            why.insert(0, f"the layer also takes `{star.star}{self.ctx.code(star.value)}`, which may set `renorm` or `virtual_batch_size`")
            pinned = None
        if pinned is not False:  # False by a parameter's default: `True` in its place would override every caller
            self.report(node, FusedFalse(why[0] if why else "it is not False everywhere"))
            return
        if self._fused_proven_legal(node):
            fix = self.make_fix(Replace(fused.value, cst.Name("True")))
        else:
            fix = self.make_fix(
                Replace(fused.value, cst.Name("True")),
                applicability=Applicability.UNSAFE,
                title="Use the fused batch-norm kernel (needs a 4-D or 5-D input)",
            )
        self.report(node, FusedFalse(), fix=fix)

    def _fused_proven_legal(self, node: cst.Call) -> bool:
        """Is ``fused=True`` legal here: input of a known rank 4/5 with a channel axis it takes?"""
        if get_arg(node, "dtype") is not None:
            return False  # float64 has no fused kernel
        stack = self.ctx.ancestors(node)
        if self.ctx.call_name(node) == "tf.layers.batch_normalization":
            inp = get_arg(node, "inputs", 0)
        elif stack and isinstance(stack[-1], cst.Call) and stack[-1].func is node:
            inp = get_arg(stack[-1], "inputs", 0)  # BatchNormalization(...)(x)
        else:
            return False  # a layer object called elsewhere: its input is not known here
        rank = self._rank(inp.value) if inp is not None else None
        if rank is None:
            return False
        axis = get_arg(node, "axis")
        with self.ctx.every_construction():  # the axis wherever the layer is built, not a default
            value = -1 if axis is None else self.ctx.const(axis.value)
        if isinstance(value, (list, tuple)) and len(value) == 1:
            value = value[0]
        return isinstance(value, int) and not isinstance(value, bool) and value in _FUSED_AXES[rank]

    def _rank(self, expr: cst.BaseExpression) -> int | None:
        expr = self.ctx.value_of(expr)  # the assignment that reaches this use of a name
        if not isinstance(expr, cst.Call):
            return None
        layer = expr.func if isinstance(expr.func, cst.Call) else expr  # Conv2D(...)(x) or tf.layers.conv2d(x)
        name = self.ctx.call_name(layer)
        if name is None and expr.args and isinstance(expr.func, (cst.Attribute, cst.Subscript, cst.Name)):
            found = self.ctx.layer_constructor(expr.func)  # self.conv(x), self.convs[i](x), conv(x)
            name = found[1] if found is not None else None
        return SPATIAL_OUTPUT_RANK.get(name or "")

    def _other_normalization(self, call: cst.Call) -> bool:
        """Layer / group / instance norm computed with the batch-norm formula."""
        for scope in (self.ctx.enclosing_class(call), self.ctx.enclosing_function(call)):
            if scope is not None and _OTHER_NORM.search(scope.name.value):
                return True
        mean = get_arg(call, "mean", 1)
        if mean is None or not isinstance(mean.value, cst.Name):
            return False
        b = self.ctx.lookup(mean.value.value, at=mean.value)
        stmt = b.node if b is not None else None
        if not (isinstance(stmt, cst.Assign) and isinstance(stmt.value, cst.Call)) or self.ctx.call_name(stmt.value) not in _MOMENTS:
            return False
        axes = get_arg(stmt.value, "axes", 1)
        value = self.ctx.const(axes.value) if axes is not None else None
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if isinstance(value, (list, tuple)) and all(isinstance(a, int) for a in value):
            return 0 not in value  # statistics not over the batch: not batch norm
        return False


# Import spellings that exist only in Keras 2.x / tf-keras-era code.
_KERAS2_IMPORTS = ("keras.engine", "keras.layers.experimental", "keras_applications", "keras.legacy",
                   "keras.backend.tensorflow_backend", "keras.utils.generic_utils", "tensorflow.python.keras",
                   "tensorflow.keras.layers.experimental", "tensorflow.compat.v1", "tf_keras")


def _keras2_era(ctx: RuleContext) -> bool:
    """The file's imports show Keras 2.x (or tf-keras) code."""
    return any(raw.startswith(_KERAS2_IMPORTS) for raw in ctx.imports().values())
