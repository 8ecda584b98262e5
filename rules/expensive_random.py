from __future__ import annotations

import libcst as cst

from ..rule import Invalid, Rule
from ..symbols import EXPENSIVE_RANDOM


class ExpensiveRandom(Rule):
    """
    ## What it does
    Flags categorical / multinomial sampling — `tf.random.categorical`,
    `tf.multinomial`, `tf.random.stateless_categorical`, `keras.random.categorical` —
    in code that runs on the accelerator: a Keras `call` / `train_step`, a
    `tf.function`, a TF1 `model_fn`, a `strategy.run` step — and in helpers traced
    into such a step: functions of TF1 graph code (a file that imports
    `tensorflow.compat.v1` or spells `tf.placeholder`, `tf.multinomial` …), bodies of
    in-graph control flow (`tf.while_loop`, `tf.map_fn`, `keras.ops.scan` …) and Keras 3
    functions written with `keras.ops` / `keras.random` (a sampler's
    `get_next_token`). Sampling in the input pipeline, in host code (a TPUEstimator
    `metric_fn`, a `serving_input_fn`, a `main` that drives training), at module level
    of a script or with NumPy is not flagged; nor is a plain TF2 eager helper.

    ## Why is this slow on the accelerator
    The Cloud TPU guide ranks random ops: uniform and Bernoulli are fast, normal is a
    bit slower, categorical and multinomial are expensive (TPU_FACTS 14).

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
    TPU_FACTS 14; Cloud TPU performance guide, "TensorFlow ops".
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
        # TF1 graph code, but the host side of it: an input_fn and a driver
        "import tensorflow.compat.v1 as tf\n\n"
        "def train_input_fn(params):\n"
        "    ds = tf.data.TFRecordDataset(params['files'])\n"
        "    k = tf.random.categorical(tf.log([[0.5, 0.5]]), 1)\n"
        "    return ds.batch(params['batch_size'], drop_remainder=True)\n",
        "import tensorflow.compat.v1 as tf\n\n"
        "def main(_):\n"
        "    with tf.Session() as sess:\n"
        "        ids = sess.run(tf.random.categorical(logits, 1))\n",
        # Keras 3 at module level: an eager script
        "import keras\nids = keras.random.categorical(keras.ops.log(probs), 1)\n",
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
        # a Keras 3 sampler: backend-agnostic ops, traced into the compiled generate loop
        Invalid(
            "from keras import ops\nfrom keras import random\n\n"
            "class TopKSampler(Sampler):\n"
            "    def get_next_token(self, probabilities):\n"
            "        top_p, top_i = ops.top_k(probabilities, k=self.k, sorted=False)\n"
            "        picked = random.categorical(ops.log(top_p), 1, seed=self.seed_generator)\n"
            "        return ops.take_along_axis(top_i, picked, axis=-1)\n",
            message_contains="graph code",
        ),
        # a TF1 graph helper that a model_fn in another file calls
        Invalid(
            "import tensorflow.compat.v1 as tf\n\n"
            "def mask(inputs, proposal, n):\n"
            "    logits = tf.log(proposal * tf.cast(inputs.mask, tf.float32))\n"
            "    return tf.random.categorical(logits, n, dtype=tf.int32)\n",
        ),
        # the body of in-graph control flow
        Invalid(
            "import tensorflow as tf\n\n"
            "def sample(logits_fn, context, length):\n"
            "    def body(i, out):\n"
            "        nxt = tf.random.categorical(logits_fn(out)[:, -1, :], 1)\n"
            "        return i + 1, tf.concat([out, nxt], axis=1)\n"
            "    return tf.while_loop(lambda i, out: i < length, body, [0, context])\n",
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
        if name not in EXPENSIVE_RANDOM:
            return
        ctx = self.ctx
        fn = ctx.enclosing_callable()
        role = ctx.role()
        if role == "model":
            where = "model/step code"
        elif role == "other" and not ctx.is_host_function(fn) and ctx.is_graph_code(fn):
            where = "graph code"  # a helper traced into the step: a sampler, a masking helper
        else:
            return
        op = name.rsplit(".", 1)[-1]
        self.report(
            node,
            f"`{op}` in {where} is one of the TPU's expensive random ops; sample with the Gumbel-max "
            "trick on `tf.random.uniform` noise: `argmax(logits - log(-log(u)))`",
        )
