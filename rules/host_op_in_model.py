from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from kerasfit.ruleapi import Finding, Invalid, Range, Reads, Rule, Severity
from kerasfit.ruleapi.symbols import HOST_OPS

_MODEL_WHY = {
    "tpu": "it has no TPU kernel, so the step cannot compile for the TPU without an outside-compilation host round trip",
    "gpu": "it runs in Python on the host: every step copies the tensors to the CPU and back and holds the GIL",
    "gaudi": "it runs in Python on the host: every step copies the tensors to the CPU and back and holds the GIL",
}


@dataclass(frozen=True)
class HostOpInStep(Finding):
    op: str  # "numpy_function"
    family: str  # the target's family, which says why

    @property
    def why(self) -> str:
        return _MODEL_WHY[self.family]

    template = "`{op}` in model/step code: {why}; use TensorFlow ops"


@dataclass(frozen=True)
class HostOpInInput(Finding):
    op: str

    template = ("`{op}` in the input pipeline runs Python on the host: it holds the GIL (capping "
                "num_parallel_calls) and cannot run on a remote TPU host; prefer TensorFlow ops")


class HostOpInModel(Rule):
    """
    ## What it does
    Flags `tf.py_function`, `tf.numpy_function` and `tf.py_func` in code that runs on the
    accelerator: a Keras `call`, a `train_step`, a `tf.function` step, a function given
    to `strategy.run`, a TF1 `model_fn`. In an input pipeline (a function given to
    `Dataset.map`) it is reported as a lower-severity note. Calls wrapped on purpose in
    `tpu.outside_compilation` are not flagged.

    ## Why is this slow on the accelerator
    These ops call back into the Python interpreter. They have no TPU kernel (docs/facts.md#24),
    so a TPU step containing one fails to compile or is split around a host round
    trip; on a GPU every step copies the tensors to the host and back and serializes on
    the GIL. In `Dataset.map` they run on the host anyway, but hold the GIL (limiting
    `num_parallel_calls`) and cannot run on a remote TPU host or in tf.data service.

    ## Example
    ```python
    class Augment(tf.keras.layers.Layer):
        def call(self, x):
            return tf.numpy_function(scipy_rotate, [x], tf.float32)
    ```

    ## Use instead
    Write the computation with TensorFlow ops (`tf.image`, `keras.layers.RandomRotation`),
    or move it into the input pipeline.

    ## Fix safety
    No automatic fix.

    ## References
    docs/facts.md#24; Cloud TPU guide ("unsupported ops"), tf.data performance guide.
    """

    code = "KF202"
    name = "host-op-in-model"
    message = "Python callback op in accelerator code"
    severity = Severity.ERROR
    reads = frozenset({Reads.STATEMENT, Reads.FILE_FACTS, Reads.PROJECT})  # whether the function is model code (roles, a file fact over the project)

    VALID = (
        # eager host code
        """
        import tensorflow as tf

        def report(x):
            return tf.py_function(print, [x], [])
        """,
        """
        import tensorflow as tf
        y = tf.numpy_function(np.sort, [x], tf.float32)
        """,
        # deliberate host callback on TPU
        """
        import tensorflow.compat.v1 as tf

        def model_fn(features, labels, mode, params):
            def host_log(x):
                return tf.py_func(log_fn, [x], [])
            tf.tpu.outside_compilation(host_log, features)
            return tf.layers.dense(features, 10)
        """,
        """
        import tensorflow as tf

        def py_function(f, x):
            return x

        @tf.function
        def step(x):
            return py_function(abs, x)
        """,
    )
    INVALID = (
        Invalid(
            """
            import tensorflow as tf

            class Augment(tf.keras.layers.Layer):
                def call(self, x):
                    return tf.numpy_function(rotate, [x], tf.float32)
            """,
            finding="HostOpInStep",
            fields={"op": "numpy_function", "family": "tpu"},
            at=Range(5, 15, 5, 57),
        ),
        Invalid(
            """
            import tensorflow as tf

            @tf.function
            def train_step(images, labels):
                labels = tf.py_function(remap, [labels], tf.int64)
                return labels
            """,
            at=Range(5, 13, 5, 54),
        ),
        Invalid(
            """
            import tensorflow.compat.v1 as tf

            def model_fn(features, labels, mode, params):
                ids = tf.py_func(tokenize, [features], tf.int64)
                return tf.layers.dense(tf.cast(ids, tf.float32), 10)
            """,
            at=Range(4, 10, 4, 52),
        ),
        Invalid(
            """
            import tensorflow as tf

            def load(path):
                return tf.numpy_function(read_npy, [path], tf.float32)

            ds = tf.data.Dataset.list_files('*.npy').map(load)
            """,
            finding="HostOpInInput",
            at=Range(4, 11, 4, 58),
        ),
        Invalid(
            """
            import tensorflow as tf

            class Augment(tf.keras.layers.Layer):
                def call(self, x):
                    return tf.numpy_function(rotate, [x], tf.float32)
            """,
            target="gpu",
            fields={"family": "gpu"},
            at=Range(5, 15, 5, 57),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.call_name(node)
        if name not in HOST_OPS:
            return
        role = self.ctx.role_of(node)
        op = name.rsplit(".", 1)[-1]
        if role == "model":
            family = self.ctx.target.family
            self.report(
                node, HostOpInStep(op, family), severity=Severity.ERROR if family == "tpu" else Severity.WARNING,
            )
        elif role == "input":
            self.report(node, HostOpInInput(op), severity=Severity.INFO)
