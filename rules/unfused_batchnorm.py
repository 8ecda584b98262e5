from __future__ import annotations

import libcst as cst

from ..context import get_arg
from ..rule import Invalid, Replace, Rule, Valid
from ..symbols import BATCHNORM_LAYERS
from ..types import Applicability

from ._util import remove_arg

# tf-keras refuses fused=True together with these (TPU_FACTS 21).
_FUSED_BLOCKERS = ("renorm", "virtual_batch_size", "adjustment", "synchronized")


class UnfusedBatchnorm(Rule):
    """
    ## What it does
    Flags batch normalization that does not use the fused kernel:
    `tf.nn.batch_normalization`, and `BatchNormalization(fused=False)` /
    `tf.compat.v1.layers.batch_normalization(fused=False)`. Under Keras 3 any `fused=`
    argument is flagged too: Keras 3's `BatchNormalization` has no such argument and
    raises `ValueError` when it is given.

    ## Why is this slow on the accelerator
    The unfused form is a chain of separate mean, variance, subtract, multiply and
    add ops, each a pass over the activations in HBM; the fused op does it in one
    (TPU_FACTS 10). The Cloud TPU performance guide names the fused variant as the one
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
    Safe. tf-keras and `tf.compat.v1.layers` get `fused=True` (only where the fused
    kernel is legal: no `renorm`, `virtual_batch_size`, `adjustment` or
    `synchronized`); Keras 3 gets the argument dropped, which is the fused path. The
    normalization computed is the same. `tf.nn.batch_normalization` has no automatic
    fix: the fused op's signature and outputs differ.

    ## References
    TPU_FACTS 10, 21; Cloud TPU performance guide, "TensorFlow ops".
    """

    code = "KF101"
    name = "unfused-batchnorm"
    message = "Batch norm does not use the fused kernel"
    fix_title = "Use the fused batch-norm kernel"
    fix_safety = Applicability.SAFE

    VALID = (
        "import tensorflow as tf\nx = tf.keras.layers.BatchNormalization()(x)\n",
        "import tensorflow as tf\ny = tf.compat.v1.layers.batch_normalization(x, fused=True, training=True)\n",
        "import tensorflow.compat.v1 as tf\ny, m, v = tf.nn.fused_batch_norm(x, scale, offset)\n",
        "from tf_keras import layers\nbn = layers.BatchNormalization(fused=None)\n",
        # a user's own class of the same name is not Keras
        "class BatchNormalization:\n    def __init__(self, fused):\n        pass\nbn = BatchNormalization(fused=False)\n",
        # fused cannot be used with renorm: fused=False there is required, not slow by choice
        "import tf_keras as keras\nbn = keras.layers.BatchNormalization(renorm=True, fused=False)\n",
    )
    INVALID = (
        Invalid(
            "import tensorflow as tf\ny = tf.nn.batch_normalization(x, mean, var, beta, gamma, 1e-3)\n",
            message_contains="fused_batch_norm",
        ),
        Invalid(
            "import tensorflow.compat.v1 as tf\n\nh = tf.layers.batch_normalization(h, training=is_training, fused=False)\n",
            expected_fix="import tensorflow.compat.v1 as tf\n\nh = tf.layers.batch_normalization(h, training=is_training, fused=True)\n",
        ),
        Invalid(
            "import tf_keras as keras\nbn = keras.layers.BatchNormalization(axis=-1, fused=False)\n",
            expected_fix="import tf_keras as keras\nbn = keras.layers.BatchNormalization(axis=-1, fused=True)\n",
        ),
        Invalid(
            "import keras\nbn = keras.layers.BatchNormalization(momentum=0.9, fused=True)\n",
            expected_fix="import keras\nbn = keras.layers.BatchNormalization(momentum=0.9)\n",
            message_contains="Keras 3",
        ),
        Invalid(
            "from tensorflow.keras.layers import BatchNormalization as BN\n\nx = BN(fused=False, axis=3)(x)\n",
            expected_fix="from tensorflow.keras.layers import BatchNormalization as BN\n\nx = BN(axis=3)(x)\n",
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.call_name(node)
        if name is None:
            return
        if name == "tf.nn.batch_normalization":
            self.report(
                node,
                "`tf.nn.batch_normalization` runs unfused; use `tf.compat.v1.nn.fused_batch_norm` "
                "or a BatchNormalization layer",
            )
            return
        if name not in BATCHNORM_LAYERS:
            return
        fused = get_arg(node, "fused")
        if fused is None:
            return
        flavour = self.ctx.flavour(node)
        keras3 = flavour == "keras3" or (flavour == "tf.keras" and not self.ctx.uses_legacy_keras)
        if keras3:
            self.report(
                node,
                "Keras 3 `BatchNormalization` takes no `fused` argument (it raises ValueError); "
                "drop it — Keras 3 uses the fused kernel",
                fix=self.make_fix(Replace(node, remove_arg(node, fused)), title="Remove the `fused` argument"),
            )
            return
        value = self.ctx.const(fused.value)
        if value is not False:
            return
        if any(get_arg(node, k) is not None for k in _FUSED_BLOCKERS):
            return
        self.report(
            node,
            "Batch norm with `fused=False` runs as separate unfused ops; use `fused=True`",
            fix=self.make_fix(Replace(fused.value, cst.Name("True"))),
        )
