from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kerasfit.ruleapi import RuleContext

from kerasfit.ruleapi import Finding, Invalid, Range, Reads, Rule, Severity
from kerasfit.ruleapi.symbols import MAX_POOLING, canonical

# Evidence that the file trains what it builds.
_TRAIN_METHODS = ("fit", "minimize", "apply_gradients", "train_on_batch", "fit_generator")
_TRAIN_NAMES = {"tf.GradientTape", "tf.estimator.tpu.TPUEstimator", "tf.contrib.tpu.TPUEstimator", "tf.estimator.Estimator"}


@dataclass(frozen=True)
class SlowPoolGradient(Finding):
    template = ("Max pooling's gradient is a select-and-scatter, slower on the TPU than average pooling's; "
                "where accuracy allows, use average pooling or a strided convolution")


class MaxpoolGradient(Rule):
    """
    ## What it does
    Flags windowed max pooling (`MaxPooling1D/2D/3D`, `tf.nn.max_pool*`,
    `tf.compat.v1.layers.max_pooling2d`, `keras.ops.max_pool`) in a file that trains a
    model (`fit`, `GradientTape`, `minimize`, an Estimator). Off by default: max
    pooling is often the right layer, and this is a speed trade-off to consider, not a
    mistake.

    ## Why is this slow on the accelerator
    The gradient of max pooling is a select-and-scatter (routing each gradient to the
    argmax of its window), which the Cloud TPU guide notes can be slower than average
    pooling's plain strided broadcast (docs/facts.md#16). Inference is unaffected.

    ## Example
    ```python
    x = tf.keras.layers.MaxPooling2D(2)(x)
    ```

    ## Use instead
    ```python
    x = tf.keras.layers.AveragePooling2D(2)(x)       # or a stride-2 convolution
    ```

    ## Fix safety
    No automatic fix: a different pooling changes what the model learns.

    ## References
    docs/facts.md#16; Cloud TPU performance guide, "TensorFlow ops".
    """

    code = "KF901"
    name = "maxpool-gradient"
    message = "Max pooling in a trained model: its gradient is slower than average pooling's"
    default_enabled = False
    targets = frozenset({"tpu"})
    severity = Severity.INFO
    reads = frozenset({Reads.STATEMENT, Reads.FILE_FACTS, Reads.PROJECT})  # whether the file trains (a file fact) and the function's role

    VALID = (
        # inference only
        """
        import tensorflow as tf
        model = tf.keras.Sequential([tf.keras.layers.MaxPooling2D(2)])
        model.predict(x)
        """,
        """
        import tensorflow as tf
        x = tf.keras.layers.AveragePooling2D(2)(x)
        model.fit(ds)
        """,
        """
        import tensorflow as tf
        x = tf.keras.layers.GlobalMaxPooling2D()(x)
        model.fit(ds)
        """,
    )
    INVALID = (
        Invalid(
            """
            import tensorflow as tf
            x = tf.keras.layers.MaxPooling2D(2)(x)
            model.fit(ds, epochs=3)
            """,
            at=Range(2, 4, 2, 35),
        ),
        Invalid(
            """
            import tensorflow.compat.v1 as tf

            def model_fn(features, labels, mode, params):
                net = tf.layers.max_pooling2d(features, 3, 2, padding='same')
                train_op = tf.train.MomentumOptimizer(0.1, 0.9).minimize(loss)
            """,
            at=Range(4, 10, 4, 65),
        ),
        Invalid(
            """
            import keras

            class Net(keras.Model):
                def call(self, x):
                    return keras.ops.max_pool(x, 2)

            Net().fit(ds)
            """,
            at=Range(5, 15, 5, 39),
        ),
    )

    def _file_trains(self) -> bool:
        return bool(self.ctx.file_fact("KF901.trains", _file_trains))

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.call_name(node)
        if name not in MAX_POOLING or self.ctx.role_of(node) == "input" or not self._file_trains():
            return
        self.report(node, SlowPoolGradient())


def _file_trains(ctx: RuleContext) -> bool:
    """The file runs training: a ``fit``-like method call or a TF training symbol."""
    for call in ctx.all_calls():
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _TRAIN_METHODS:
            return True
        raw = ctx.raw_name_anywhere(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
        if raw is not None and raw.split(".")[0] == "tensorflow" and canonical(raw) in _TRAIN_NAMES:
            return True
    return False
