from __future__ import annotations

import libcst as cst

from kerasfit.ruleapi import EXPENSIVE_RANDOM, Invalid, Rule


class ExpensiveRandom(Rule):
    """
    ## What it does
    Flags categorical / multinomial sampling — `tf.random.categorical`,
    `tf.multinomial`, `tf.random.stateless_categorical`, `keras.random.categorical` —
    in code that runs on the accelerator: a Keras `call` / `train_step`, a
    `tf.function`, a TF1 `model_fn`, a `strategy.run` step. Sampling in the input
    pipeline or with NumPy on the host is not flagged.

    ## Why is this slow on the accelerator
    The Cloud TPU guide ranks random ops: uniform and Bernoulli are fast, normal is a
    bit slower, categorical and multinomial are expensive (docs/facts.md#14).

    ## Example
    ```python
    @tf.function
    def sample_step(logits):
        return tf.random.categorical(logits, num_samples=1)
    ```

    ## Use instead
    The Gumbel-max trick draws the same distribution from uniform noise:
    ```python
    @tf.function
    def sample_step(logits):
        u = tf.random.uniform(tf.shape(logits), minval=1e-9, maxval=1.0)
        return tf.argmax(logits - tf.math.log(-tf.math.log(u)), axis=-1)
    ```

    ## Fix safety
    No automatic fix: the samples drawn differ (same distribution, different stream).

    ## References
    docs/facts.md#14; Cloud TPU performance guide, "TensorFlow ops".
    """

    code = "KF108"
    name = "expensive-random"
    message = "Categorical sampling is expensive on the TPU"
    targets = frozenset({"tpu"})

    VALID = (
        "import numpy as np\nimport tensorflow as tf\nidx = np.random.choice(10, p=probs)\n",
        # input pipeline (host)
        "import tensorflow as tf\n\n"
        "def pick_crop(image):\n"
        "    k = tf.random.categorical(tf.math.log([[0.5, 0.5]]), 1)\n"
        "    return image\n\n"
        "ds = tf.data.Dataset.from_tensor_slices(x).map(pick_crop)\n",
        # plain eager helper, not step code
        "import tensorflow as tf\n\ndef sample_text(logits):\n    return tf.random.categorical(logits, 1)\n",
        "import tensorflow as tf\n\n@tf.function\ndef step(logits):\n    return tf.random.uniform(tf.shape(logits))\n",
    )
    INVALID = (
        Invalid(
            "import tensorflow as tf\n\n"
            "@tf.function\n"
            "def generate_step(logits):\n"
            "    return tf.random.categorical(logits / 0.8, num_samples=1)\n",
            message_contains="Gumbel",
        ),
        Invalid(
            "import tensorflow.compat.v1 as tf\n\n"
            "def model_fn(features, labels, mode, params):\n"
            "    logits = tf.layers.dense(features, 100)\n"
            "    return tf.multinomial(logits, 1)\n",
        ),
        Invalid(
            "import keras\n\n"
            "class Sampler(keras.layers.Layer):\n"
            "    def call(self, logits):\n"
            "        return keras.random.categorical(logits, 1, seed=self.seed_generator)\n",
        ),
        Invalid(
            "import tensorflow as tf\n\n"
            "class Policy(tf.keras.Model):\n"
            "    def train_step(self, data):\n"
            "        actions = tf.random.stateless_categorical(self(data), 1, seed=[1, 2])\n"
            "        return {}\n",
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.call_name(node)
        if name not in EXPENSIVE_RANDOM or self.ctx.role() != "model":
            return
        op = name.rsplit(".", 1)[-1]
        self.report(
            node,
            f"`{op}` in model/step code is one of the TPU's expensive random ops; sample with the Gumbel-max "
            "trick on `tf.random.uniform` noise: `argmax(logits - log(-log(u)))`",
        )
