from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kerasfit.ruleapi import RuleContext

from kerasfit.ruleapi import Applicability, Finding, Invalid, Range, Reads, Rule
from kerasfit.ruleapi.fixes import Replace
from kerasfit.ruleapi.syntax import get_arg


_KEYWORDS = ("steps_per_execution", "experimental_steps_per_execution")
# What Keras's compile takes: a call with none of these is not a Keras compile.
_COMPILE_ARGS = ("optimizer", "loss", "metrics", "jit_compile", "run_eagerly")
SUGGESTED = 32


@dataclass(frozen=True)
class OneStepPerLaunch(Finding):
    suggested: int  # the steps_per_execution the fix sets

    template = ("Keras runs one TPU step per launch here (`steps_per_execution` unset or 1): host overhead "
                "between steps idles the TPU; set `steps_per_execution` (e.g. {suggested})")


class MissingStepsPerExecution(Rule):
    """
    ## What it does
    Flags `model.compile(...)` without `steps_per_execution` (or with
    `steps_per_execution=1`) in a file that sets up a TPU (a `TPUStrategy`,
    `TPUClusterResolver`, …).

    ## Why is this slow on the accelerator
    By default Keras launches one TPU program per training step and goes back to
    Python between steps; the host overhead and the device idling between launches
    dominate small and medium models. `steps_per_execution=N` runs N steps per launch
    inside one compiled loop — the Keras TPU guide's first recommendation
    (docs/facts.md#24).

    ## Example
    ```python
    with strategy.scope():
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    ```

    ## Use instead
    ```python
    with strategy.scope():
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                      steps_per_execution=32)
    ```

    ## Fix safety
    Unsafe: the model's math is unchanged, but batch-level callbacks (`on_train_batch_*`,
    TensorBoard's per-batch logging, progress bars) then run once every 32 steps, and
    an epoch shorter than 32 steps runs as one execution.

    ## References
    docs/facts.md#24; Keras "Training on TPU" guide; `Model.compile` reference.
    """

    code = "KF204"
    name = "missing-steps-per-execution"
    message = "Keras compile on TPU without steps_per_execution"
    fix_title = f"Set steps_per_execution={SUGGESTED}"
    fix_safety = Applicability.UNSAFE
    targets = frozenset({"tpu"})
    reads = frozenset({Reads.STATEMENT, Reads.FILE_FACTS, Reads.PROJECT})  # whether the file sets up a TPU (a file fact; a strategy may come from another module)

    VALID = (
        """
        import tensorflow as tf
        strategy = tf.distribute.TPUStrategy(r)
        model.compile(optimizer='adam', loss='mse', steps_per_execution=50)
        """,
        # no TPU in this file
        """
        import tensorflow as tf
        model.compile(optimizer='adam', loss='mse')
        """,
        """
        import re
        import tensorflow as tf
        strategy = tf.distribute.TPUStrategy(r)
        pat = re.compile('x')
        """,
        """
        import tensorflow as tf
        strategy = tf.distribute.TPUStrategy(r)
        fn = graph.compile()
        """,
    )
    INVALID = (
        Invalid(
            """
            import tensorflow as tf
            strategy = tf.distribute.TPUStrategy(resolver)
            with strategy.scope():
                model.compile(
                    optimizer='adam',
                    loss='mse',
                )
            """,
            expected_fix="""
            import tensorflow as tf
            strategy = tf.distribute.TPUStrategy(resolver)
            with strategy.scope():
                model.compile(
                    optimizer='adam',
                    loss='mse',
                    steps_per_execution=32,
                )
            """,
            unsafe=True,
            at=Range(4, 4, 7, 5),
        ),
        Invalid(
            """
            import tensorflow as tf
            strategy = tf.distribute.TPUStrategy(tf.distribute.cluster_resolver.TPUClusterResolver())
            with strategy.scope():
                model.compile(optimizer='adam', loss='mse')
            """,
            expected_fix="""
            import tensorflow as tf
            strategy = tf.distribute.TPUStrategy(tf.distribute.cluster_resolver.TPUClusterResolver())
            with strategy.scope():
                model.compile(optimizer='adam', loss='mse', steps_per_execution=32)
            """,
            unsafe=True,
            at=Range(4, 4, 4, 47),
        ),
        Invalid(
            """
            import keras
            import tensorflow as tf
            strategy = tf.distribute.TPUStrategy(resolver)
            model.compile(
                optimizer=keras.optimizers.Adam(1e-3),
                loss='sparse_categorical_crossentropy',
                steps_per_execution=1,
            )
            """,
            expected_fix="""
            import keras
            import tensorflow as tf
            strategy = tf.distribute.TPUStrategy(resolver)
            model.compile(
                optimizer=keras.optimizers.Adam(1e-3),
                loss='sparse_categorical_crossentropy',
                steps_per_execution=32,
            )
            """,
            unsafe=True,
            at=Range(4, 0, 8, 1),
        ),
    )

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__(ctx)
        self._tpu: bool | None = None

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "compile") or not node.args:
            return
        if not any(a.keyword is None or a.keyword.value in _COMPILE_ARGS + _KEYWORDS for a in node.args):
            return
        if self.ctx.raw_name(func) is not None:
            return  # re.compile, tf.compile... : a module function, not Model.compile
        spe = next((get_arg(node, k) for k in _KEYWORDS if get_arg(node, k) is not None), None)
        if spe is not None and self.ctx.const(spe.value) != 1:
            return
        if self._tpu is None:
            self._tpu = self.ctx.uses_tpu()
        if not self._tpu:
            return
        change = (
            Replace(spe.value, str(SUGGESTED)) if spe is not None
            else self.ctx.insert_keyword(node, "steps_per_execution", str(SUGGESTED))
        )
        self.report(
            node,
            OneStepPerLaunch(SUGGESTED),
            fix=self.make_fix(change) if change is not None else None,
        )
