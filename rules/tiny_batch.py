from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kerasfit.ruleapi import RuleContext

from kerasfit.ruleapi import Finding, Invalid, Range, Reads, Rule, Valid
from kerasfit.ruleapi.syntax import dotted_name, get_arg
from kerasfit.ruleapi.values import round_up

# Names a file uses for its TPU core count (module constants or absl flags).
_CORE_NAMES = ("num_cores", "num_shards", "tpu_cores", "num_tpu_cores", "num_replicas")
_ESTIMATORS = {"tf.estimator.tpu.TPUEstimator", "tf.contrib.tpu.TPUEstimator"}


@dataclass(frozen=True)
class GlobalBatchBelow64(Finding):
    batch: int  # the global batch: at most this many per core
    large: int  # what kernel-gradient ops pad the per-core batch to

    template = ("Global batch {batch} leaves at most {batch} per core, below 64: kernel-gradient convs and matmuls pad "
                "the per-core batch to {large} (at most {batch}/{large} of the MXU rows used) and forward "
                "ones pad features to {large}; use at least 64 per core")


@dataclass(frozen=True)
class _PerCore(Finding):
    per_core: int
    small: int  # the target's small padding multiple
    large: int  # and its large one
    global_batch: int | None = None  # the global batch split over the cores; None: a per-replica batch
    cores: int | None = None
    configured: bool = False  # the global batch is the configured one, not a constant of the code

    @property
    def detail(self) -> str:
        if self.global_batch is None:
            return "per replica"
        return f"{'configured ' if self.configured else ''}global {self.global_batch} ÷ {self.cores} cores"


@dataclass(frozen=True)
class PerCoreBatchBelow64(_PerCore):
    @property
    def padded_to(self) -> int:
        """What kernel-gradient ops pad the per-core batch to."""
        return round_up(self.per_core, self.large)

    def message(self) -> str:
        per, small, large = self.per_core, self.small, self.large
        fwd = f"batch {per}→{round_up(per, small)} and " if per % small else ""
        return (f"Per-core batch {per} ({self.detail}) is below 64: kernel-gradient convs and matmuls pad the batch "
                f"{per}→{self.padded_to} ({per}/{self.padded_to} of the MXU rows used) and forward ones pad "
                f"{fwd}features to {large}; use at least 64 per core, a multiple of {small}")


@dataclass(frozen=True)
class PerCoreBatchOffMultiple(_PerCore):
    def message(self) -> str:
        per, small, large = self.per_core, self.small, self.large
        return (f"Per-core batch {per} ({self.detail}) is not a multiple of {small}: forward convolutions pad it "
                f"to {round_up(per, large)} and kernel-gradient ones to {round_up(per, small)}; "
                f"use a multiple of {small} (ideally of {large})")

class TinyBatch(Rule):
    """
    ## What it does
    Computes the per-core batch size from constants in the file and flags it when it is
    below 64 or not a multiple of 8, at the number to change (the constant or flag default
    the batch comes from, else where it is used). A parameter's default in a function or
    class this file never calls is not taken for the batch: its callers' is unknown. Batch sizes come from a training `tf.data`
    `.batch(...)`, `model.fit(batch_size=...)` and `TPUEstimator(train_batch_size=...)`
    (in a file that trains an estimator: one built only to export or predict never uses
    it), folded through constants, flags and config dicts. The per-core batch is
    `N` for `.batch(N * strategy.num_replicas_in_sync)`, else the global batch divided
    by the core count (`--cores` / `cores` in the config, `TPUConfig(num_shards=...)`,
    or a `NUM_CORES`-style constant or flag). With no core count, a global batch below
    64 is still flagged: no slice gives a core more than the whole batch.

    Only in files that set up a TPU (a TPU strategy, resolver or estimator — also a
    `TPUEstimator` kept as a copy in the project's own tree) or when `cores` is configured;
    evaluation and prediction datasets are skipped.

    ## Why is this slow on the accelerator
    XLA picks convolution padding from the most common batch size (docs/facts.md#1): with a
    per-core batch below 64, forward convolutions pad the batch to 8 and the features to
    128, and kernel-gradient (weight-update) convolutions pad the batch to 128 — a
    per-core batch of 16 leaves 7/8 of the MXU idle in every weight gradient (docs/facts.md#6).
    At 64 or more, batch pads to 128 in the forward pass and to 8 in the kernel
    gradient, so it should be a multiple of 8 (ideally of 128).

    ## Example
    ```python
    strategy = tf.distribute.TPUStrategy(resolver)
    ds = ds.batch(16 * strategy.num_replicas_in_sync)
    ```

    ## Use instead
    ```python
    ds = ds.batch(128 * strategy.num_replicas_in_sync, drop_remainder=True)
    ```

    ## Fix safety
    No automatic fix: the batch size changes the optimization (learning rate schedule,
    memory).

    ## References
    docs/facts.md#1, #6, #24; Cloud TPU performance guide ("batch size and feature size").
    """

    code = "KF203"
    build_evidence = "per-core-batch"
    name = "tiny-batch"
    message = "Per-core batch size below 64 or not a multiple of 8"
    targets = frozenset({"tpu"})
    reads = frozenset({Reads.STATEMENT, Reads.FILE_FACTS, Reads.PROJECT})  # the core count and whether the file trains or uses a TPU (file facts)

    VALID = (
        Valid(
            """
            import tensorflow as tf


            def input_fn(params):
                ds = tf.data.Dataset.from_tensor_slices(features)
                return ds.batch(params['batch_size'], drop_remainder=True)
            """,
            options={"batch_size": 1024, "cores": 8},
        ),
        """
        import tensorflow as tf
        strategy = tf.distribute.TPUStrategy(resolver)
        ds = tf.data.Dataset.range(10).batch(128 * strategy.num_replicas_in_sync, drop_remainder=True)
        """,
        # no TPU in sight
        """
        import tensorflow as tf
        ds = tf.data.Dataset.range(10).batch(32, drop_remainder=True)
        """,
        Valid(
            """
            import tensorflow as tf
            strategy = tf.distribute.TPUStrategy(resolver)
            ds = tf.data.Dataset.range(10).batch(1024, drop_remainder=True)
            """,
            options={"cores": 8},
        ),
        # evaluation batch
        """
        import tensorflow as tf
        strategy = tf.distribute.TPUStrategy(resolver)
        val_ds = tf.data.Dataset.range(10).batch(8)
        """,
        """
        import tensorflow as tf
        strategy = tf.distribute.TPUStrategy(resolver)
        model.fit(ds, batch_size=batch_size)
        """,
        # an evaluation driver's default: what its callers (in other files) pass is unknown here
        """
        import tensorflow as tf
        strategy = tf.distribute.TPUStrategy(resolver)

        class EvalDriver:
            def __init__(self, batch_size=1):
                self.batch_size = batch_size

            def dataset(self, files):
                return tf.data.TFRecordDataset(files).batch(self.batch_size, drop_remainder=True)
        """,
        # an estimator built only to export a SavedModel: its train_batch_size never runs
        """
        import tensorflow.compat.v1 as tf

        def export(model_fn, export_dir, serving_input_fn):
            estimator = tf.estimator.tpu.TPUEstimator(
                model_fn=model_fn,
                config=tf.estimator.tpu.RunConfig(tpu_config=tf.estimator.tpu.TPUConfig(100)),
                use_tpu=True, train_batch_size=1, predict_batch_size=1, export_to_tpu=True)
            estimator.export_saved_model(export_dir, serving_input_fn)
        """,
    )
    INVALID = (
        # a TPUEstimator kept in the project's own tree (a vendored copy) is the TPU one
        Invalid(
            """
            import tensorflow.compat.v1 as tf
            from tensorflow.python.estimator import estimator as estimator_lib

            class TPUEstimator(estimator_lib.Estimator):
                def __init__(self, model_fn, train_batch_size, config=None):
                    super().__init__(model_fn=model_fn, config=config)

            est = TPUEstimator(model_fn=model_fn, train_batch_size=32, config=tf.estimator.tpu.RunConfig(
                tpu_config=tf.estimator.tpu.TPUConfig(100, num_shards=8)))
            est.train(input_fn=input_fn, max_steps=1000)
            """,
            finding="PerCoreBatchBelow64", fields={"per_core": 4, "global_batch": 32, "cores": 8},
            at=Range(8, 55, 8, 57),
        ),
        # the flag's default is the number to change: reported there
        Invalid(
            """
            from absl import flags
            import tensorflow.compat.v1 as tf

            flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
            FLAGS = flags.FLAGS

            def main(_):
                config = tf.estimator.tpu.RunConfig(tpu_config=tf.estimator.tpu.TPUConfig(100, num_shards=8))
                est = tf.estimator.tpu.TPUEstimator(model_fn=model_fn, config=config, train_batch_size=FLAGS.train_batch_size)
                est.train(input_fn=input_fn, max_steps=1000)
            """,
            finding="PerCoreBatchBelow64", fields={"per_core": 4, "global_batch": 32, "cores": 8},
            at=Range(4, 41, 4, 43),
        ),
        # a TPU set up through Keras 3's keras.distribution
        Invalid(
            """
                import keras

                devices = keras.distribution.list_devices("tpu")
                keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
                model.fit(x, y, batch_size=16)
                """,
            fields={"batch": 16},
            at=Range(5, 27, 5, 29),
        ),
        Invalid(
            """
            import tensorflow as tf
            strategy = tf.distribute.TPUStrategy(resolver)
            PER_REPLICA = 16
            ds = tf.data.Dataset.range(10).batch(PER_REPLICA * strategy.num_replicas_in_sync, drop_remainder=True)
            """,
            fields={"per_core": 16, "global_batch": None, "large": 128},
            at=Range(3, 14, 3, 16),
        ),
        Invalid(
            """
            import tensorflow as tf
            strategy = tf.distribute.TPUStrategy(resolver)
            ds = tf.data.Dataset.range(10).batch(128, drop_remainder=True)
            """,
            options={"cores": 8},
            fields={"per_core": 16, "global_batch": 128, "cores": 8},
            at=Range(3, 37, 3, 40),
        ),
        Invalid(
            """
            import tensorflow.compat.v1 as tf
            config = tf.estimator.tpu.RunConfig(tpu_config=tf.estimator.tpu.TPUConfig(100, num_shards=8))
            est = tf.estimator.tpu.TPUEstimator(model_fn=model_fn, config=config, train_batch_size=800)
            est.train(input_fn=train_input_fn, max_steps=1000)
            """,
            finding="PerCoreBatchOffMultiple", fields={"per_core": 100, "small": 8},
            at=Range(3, 87, 3, 90),
        ),
        Invalid(
            """
            import tensorflow as tf
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver()
            model.fit(x, y, batch_size=32, epochs=3)
            """,
            finding="GlobalBatchBelow64", fields={"batch": 32},
            at=Range(3, 27, 3, 29),
        ),
        # the batch is not a constant in the file: --batch-size / --cores (or config) decide
        Invalid(
            """
            import tensorflow as tf


            def input_fn(params):
                ds = tf.data.Dataset.from_tensor_slices(features)
                return ds.batch(params['batch_size'], drop_remainder=True)
            """,
            options={"batch_size": 128, "cores": 8},
            fields={"global_batch": 128, "cores": 8, "configured": True},
            at=Range(6, 20, 6, 40),
        ),
    )

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__(ctx)
        self._applies: bool | None = None

    def _enabled(self) -> bool:
        if self._applies is None:
            self._applies = bool(self.ctx.options.get("cores")) or self.ctx.uses_tpu()
        return self._applies

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("batch", "padded_batch"):
            arg = get_arg(node, "batch_size", 0)
            if arg is None or not self._enabled() or self.ctx.raw_name(func) is not None:
                return
            if not self.ctx.is_tf_data_chain(node) or self.ctx.feeds_evaluation(node):
                return
            self._check(arg.value, arg.value)
        elif isinstance(func, cst.Attribute) and func.attr.value == "fit":
            arg = get_arg(node, "batch_size")
            if arg is not None and self.ctx.raw_name(func) is None and self._enabled():
                self._check(arg.value, arg.value)
        elif any(a.keyword is not None and a.keyword.value == "train_batch_size" for a in node.args):
            if self.ctx.call_name(node) in _ESTIMATORS and self.ctx.file_fact("KF203.trains", _file_trains):
                arg = get_arg(node, "train_batch_size")
                assert arg is not None
                self._check(arg.value, arg.value)

    # ---- the arithmetic -------------------------------------------------------
    def _per_replica_factor(self, expr: cst.BaseExpression, depth: int = 0) -> cst.BaseExpression | None:
        """``N`` in ``N * strategy.num_replicas_in_sync`` (through one or two names)."""
        if isinstance(expr, cst.Name) and depth < 3:
            value = self.ctx.binding_value(expr)
            return self._per_replica_factor(value, depth + 1) if value is not None else None
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
            for a, b in ((expr.left, expr.right), (expr.right, expr.left)):
                if (dotted_name(b) or "").endswith("num_replicas_in_sync"):
                    return a
        return None

    def _cores(self) -> int | None:
        cores: int | None = self.ctx.file_fact("KF203.cores", _file_cores)
        return cores

    def _literal(self, expr: cst.BaseExpression, fallback: cst.CSTNode) -> cst.CSTNode:
        """Where the batch size is written: the one number its value comes from (a constant,
        a flag's default), which is what to change; else where it is used."""
        sources = self.ctx.const_sources(expr)
        if len(sources) == 1 and isinstance(sources[0], cst.Integer) and self.ctx.parent(sources[0]) is not None:
            return sources[0]
        return fallback  # (a flag defined in another module: reported where this file uses it)

    def _unseen_default(self, expr: cst.BaseExpression) -> bool:
        """The value is a parameter's default in a function (or class) this file never
        calls: what its callers pass is not known here (``EvalDriver(batch_size=1)``)."""
        for src in self.ctx.const_sources(expr):
            param = self.ctx.parent(src)
            params = self.ctx.parent(param) if isinstance(param, cst.Param) else None
            fn = self.ctx.parent(params) if params is not None else None  # Param -> Parameters -> def
            if isinstance(fn, cst.FunctionDef) and not self.ctx.call_sites(fn).calls:
                return True
        return False

    def _check(self, report_at: cst.CSTNode, expr: cst.BaseExpression) -> None:
        ctx = self.ctx
        if self._unseen_default(expr):
            return
        factor = self._per_replica_factor(expr)
        if factor is not None:
            per = ctx.int_const(factor)
            if per is None:
                return
            self._report(self._literal(factor, report_at), per, exact=True)
            return
        total = ctx.int_const(expr)
        configured = False
        if total is not None:
            report_at = self._literal(expr, report_at)
        else:
            # not a constant here (a flag, a parameter): the configured global batch
            # (--batch-size / [tool.kerasfit] batch-size) says what it will be
            option = ctx.options.get("batch_size")
            if not isinstance(option, int) or isinstance(option, bool):
                return
            total, configured = option, True
        if total <= 0:
            return
        cores = self._cores()
        if cores is None:
            if total < 64:
                self._report(report_at, total, exact=False)
            return
        if total % cores:
            return  # the strategy itself rejects an uneven split
        self._report(report_at, total // cores, exact=True, split=(total, cores, configured))

    def _report(self, node: cst.CSTNode, per: int, exact: bool, split: tuple[int, int, bool] | None = None) -> None:
        """``split``: the global batch, the cores it is split over, and whether it is the
        configured one; None for a per-replica batch."""
        t = self.ctx.target
        small, large = t.small, t.large
        if per >= 64 and per % small == 0:
            return
        if not exact:
            self.report(node, GlobalBatchBelow64(per, large))
            return
        total, cores, configured = split if split is not None else (None, None, False)
        kind = PerCoreBatchBelow64 if per < 64 else PerCoreBatchOffMultiple
        self.report(node, kind(per, small, large, total, cores, configured))


def _file_trains(ctx: RuleContext) -> bool:
    """The file trains an estimator (``.train(...)``, ``train_and_evaluate``): an
    estimator built only to export or predict never runs its ``train_batch_size``."""
    for call in ctx.all_calls():
        func = call.func
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if last in ("train", "train_and_evaluate"):
            return True
    return False


def _file_cores(ctx: RuleContext) -> int | None:
    """The core count the options give, else the one number the file spells for it."""
    cores = ctx.options.get("cores")
    if not isinstance(cores, int) or cores <= 0:
        cores = None
        found: set[int] = set()
        for call in ctx.all_calls():
            for a in call.args:
                if a.keyword is not None and a.keyword.value in _CORE_NAMES:
                    v = ctx.const(a.value)
                    if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                        found.add(v)
        for name in _CORE_NAMES:
            for cand in (name, name.upper()):
                b = ctx.lookup(cand, [ctx.module])
                if b is not None and b.kind == "assign":
                    v = ctx.const(b.value, scopes=[ctx.module])
                    if isinstance(v, int) and v > 0:
                        found.add(v)
            for value, _ in ctx.flag_defaults(name):
                v = ctx.const(value, scopes=[ctx.module])
                if isinstance(v, int) and v > 0:
                    found.add(v)
        if len(found) == 1:
            cores = found.pop()
    return cores
