from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from kerasfit.ruleapi import Finding, Invalid, Range, Reads, Rule
from kerasfit.ruleapi.symbols import EXPENSIVE_RANDOM


@dataclass(frozen=True)
class ExpensiveSampling(Finding):
    op: str  # the sampling op's last name: "categorical"
    where: str  # "model/step code" or "graph code" (a helper traced into the step)

    template = ("`{op}` in {where} is one of the TPU's expensive random ops; sample with the Gumbel-max "
                "trick on `tf.random.uniform` noise: `argmax(logits - log(-log(u)))`")


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
    reads = frozenset({Reads.STATEMENT, Reads.FILE_FACTS, Reads.PROJECT})  # whether the function is model code (roles, a file fact over the project)

    VALID = (
        """
        import numpy as np
        import tensorflow as tf
        idx = np.random.choice(10, p=probs)
        """,
        # input pipeline (host)
        """
        import tensorflow as tf

        def pick_crop(image):
            k = tf.random.categorical(tf.math.log([[0.5, 0.5]]), 1)
            return image

        ds = tf.data.Dataset.from_tensor_slices(x).map(pick_crop)
        """,
        # plain eager helper, not step code
        """
        import tensorflow as tf

        def sample_text(logits):
            return tf.random.categorical(logits, 1)
        """,
        """
        import tensorflow as tf

        @tf.function
        def step(logits):
            return tf.random.uniform(tf.shape(logits))
        """,
        # TF1 graph code, but the host side of it: an input_fn and a driver
        """
        import tensorflow.compat.v1 as tf

        def train_input_fn(params):
            ds = tf.data.TFRecordDataset(params['files'])
            k = tf.random.categorical(tf.log([[0.5, 0.5]]), 1)
            return ds.batch(params['batch_size'], drop_remainder=True)
        """,
        """
        import tensorflow.compat.v1 as tf

        def main(_):
            with tf.Session() as sess:
                ids = sess.run(tf.random.categorical(logits, 1))
        """,
        # Keras 3 at module level: an eager script
        """
        import keras
        ids = keras.random.categorical(keras.ops.log(probs), 1)
        """,
    )
    INVALID = (
        Invalid(
            """
            import tensorflow as tf

            @tf.function
            def generate_step(logits):
                return tf.random.categorical(logits / 0.8, num_samples=1)
            """,
            fields={"op": "categorical", "where": "model/step code"},
            at=Range(5, 11, 5, 61),
        ),
        Invalid(
            """
            import tensorflow.compat.v1 as tf

            def model_fn(features, labels, mode, params):
                logits = tf.layers.dense(features, 100)
                return tf.multinomial(logits, 1)
            """,
            at=Range(5, 11, 5, 36),
        ),
        Invalid(
            """
            import keras

            class Sampler(keras.layers.Layer):
                def call(self, logits):
                    return keras.random.categorical(logits, 1, seed=self.seed_generator)
            """,
            at=Range(5, 15, 5, 76),
        ),
        # a Keras 3 sampler: backend-agnostic ops, traced into the compiled generate loop
        Invalid(
            """
            from keras import ops
            from keras import random

            class TopKSampler(Sampler):
                def get_next_token(self, probabilities):
                    top_p, top_i = ops.top_k(probabilities, k=self.k, sorted=False)
                    picked = random.categorical(ops.log(top_p), 1, seed=self.seed_generator)
                    return ops.take_along_axis(top_i, picked, axis=-1)
            """,
            fields={"where": "graph code"},
            at=Range(7, 17, 7, 80),
        ),
        # a TF1 graph helper that a model_fn in another file calls
        Invalid(
            """
            import tensorflow.compat.v1 as tf

            def mask(inputs, proposal, n):
                logits = tf.log(proposal * tf.cast(inputs.mask, tf.float32))
                return tf.random.categorical(logits, n, dtype=tf.int32)
            """,
            at=Range(5, 11, 5, 59),
        ),
        # the body of in-graph control flow
        Invalid(
            """
            import tensorflow as tf

            def sample(logits_fn, context, length):
                def body(i, out):
                    nxt = tf.random.categorical(logits_fn(out)[:, -1, :], 1)
                    return i + 1, tf.concat([out, nxt], axis=1)
                return tf.while_loop(lambda i, out: i < length, body, [0, context])
            """,
            at=Range(5, 14, 5, 64),
        ),
        Invalid(
            """
            import tensorflow as tf

            class Policy(tf.keras.Model):
                def train_step(self, data):
                    actions = tf.random.stateless_categorical(self(data), 1, seed=[1, 2])
                    return {}
            """,
            at=Range(5, 18, 5, 77),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.call_name(node)
        if name not in EXPENSIVE_RANDOM:
            return
        ctx = self.ctx
        fn = ctx.enclosing_callable(node)
        role = ctx.role_of(node)
        if role == "model":
            where = "model/step code"
        elif role == "other" and not ctx.is_host_function(fn) and ctx.is_graph_code(fn):
            where = "graph code"  # a helper traced into the step: a sampler, a masking helper
        else:
            return
        op = name.rsplit(".", 1)[-1]
        self.report(node, ExpensiveSampling(op, where))
