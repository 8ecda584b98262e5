from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from kerasfit.ruleapi import Applicability, Finding, Invalid, Range, Reads, Rule
from kerasfit.ruleapi.fixes import FixSpec
from kerasfit.ruleapi.syntax import get_arg

# method -> positional index of drop_remainder
_BATCH_METHODS = {"batch": 1, "padded_batch": 3}
_MAP_AND_BATCH = {"tf.data.experimental.map_and_batch": 4, "tf.contrib.data.map_and_batch": 4}


@dataclass(frozen=True)
class PartialLastBatch(Finding):
    call: str  # ".batch", ".padded_batch" (a dataset method) or "map_and_batch"
    repeats: bool = False  # the data repeats without end before it is batched: nothing is dropped
    batch_size: int | None = None  # the batch size, when it folds to a number
    batch_spelled: str | None = None  # else its source text, when it is given
    shuffled: bool = False  # the data is shuffled first: different examples dropped each epoch

    def message(self) -> str:
        head = (f"`{self.call}(...)` without `drop_remainder=True`: the last partial batch makes the batch dim dynamic, "
                "so the TPU step is compiled again for it; ")
        if self.repeats:
            return head + "`drop_remainder=True` makes it static and drops nothing here: the data repeats without end before it is batched"
        n = self.batch_size
        spelled = str(n) if n is not None else f"`{self.batch_spelled}`" if self.batch_spelled is not None else "the batch size"
        upto = f"up to {n - 1}" if n is not None else f"up to {spelled} - 1"
        which = ("different ones each epoch (the data is shuffled first)" if self.shuffled
                 else "the same ones every epoch (never trained on)")
        return head + (f"`drop_remainder=True` makes it static by dropping that batch: the last (dataset size mod {spelled}) "
                       f"examples of each pass ({upto}), {which}")

class NoDropRemainder(Rule):
    """
    ## What it does
    Flags `.batch(...)` / `.padded_batch(...)` on a `tf.data` pipeline (started by
    `tf.data.Dataset.*`, `TFRecordDataset`, `tfds.load`, `image_dataset_from_directory`
    …, followed across lines, reassignments and same-file helpers) and
    `tf.data.experimental.map_and_batch(...)` without `drop_remainder`.

    A dataset handed in by a parameter or a project loader counts when the chain
    itself is `tf.data`: it names a `tf.data` symbol (`.prefetch(tf.data.AUTOTUNE)`),
    uses a method only `tf.data` has (`padded_batch`, `apply`, `interleave` …), or
    chains two dataset methods (`load(...).map(f).batch(n)`) in a file that uses
    `tf.data`; chains rooted in `datasets`, `torch` or NumPy do not.

    Not flagged: any explicit `drop_remainder=` (including a variable such as
    `is_training`), `.batch` on objects that are not `tf.data` datasets, and datasets
    that may feed evaluation or prediction (`val_ds`, `eval_input_fn`,
    `predict_input_fn`, the not-training branch of `if is_training:`, a dataset handed to
    `.predict(...)`, `.evaluate(...)` or `validation_data=`), including one made by a
    helper that evaluation shares: the helper's callers in the file are followed, so the
    batching helper behind a model's `fit`, `evaluate` and `predict`, or the one that
    also batches the test set whose predictions are written out, is left alone. Dropping
    their last batch would skip examples and change the metric or the predictions, so
    the trade-off is not the linter's to make. Nor datasets no training step sees: ones
    Python only gathers on the host (`np.concatenate(list(ds))` building a vocabulary),
    and those of a script that runs inference (`predict`, `generate`), trains nothing and
    no other file imports.

    ## Why is this slow on the accelerator
    Without `drop_remainder=True` the batch dimension is unknown (`None`): the last,
    partial batch has another shape, so XLA compiles the training step again for it
    (and TPUEstimator / older TPUStrategy refuse dynamic shapes outright). TPUs want
    static shapes (docs/facts.md#24).

    ## Example
    ```python
    ds = tf.data.TFRecordDataset(files).map(parse).batch(1024)
    ```

    ## Use instead
    ```python
    ds = tf.data.TFRecordDataset(files).map(parse).batch(1024, drop_remainder=True)
    ```

    ## Fix safety
    Unsafe: each pass over the data drops its last (dataset size mod batch size)
    examples — up to `batch_size - 1` — the same ones every epoch unless the data is
    shuffled before batching (then different ones each epoch). The finding says which,
    with the batch size where it is the same at every run (not a flag's default), and
    says that nothing is dropped where the data repeats without end before the batch.

    ## References
    docs/facts.md#24; Cloud TPU performance guide and Keras TPU guide ("static shapes").
    """

    code = "KF201"
    name = "no-drop-remainder"
    message = "tf.data batch without drop_remainder=True gives a dynamic batch dim"
    fix_title = "Add drop_remainder=True"
    fix_safety = Applicability.UNSAFE
    targets = frozenset({"tpu"})
    reads = frozenset({Reads.STATEMENT, Reads.FILE_FACTS, Reads.PROJECT})  # whether the file uses tf.data (a file fact); a loader may be another module's

    VALID = (
        # a script that only runs inference: a generation benchmark
        """
        import tensorflow as tf

        ds = tf.data.Dataset.from_tensor_slices(prompts).batch(8)
        outputs = model.generate(ds)
        """,
        # gathered on the host (a vocabulary), never fed to a step
        """
        import numpy as np
        import tensorflow as tf

        ds = tf.data.Dataset.from_tensor_slices(features)
        words = ds.batch(10_000).map(lambda x: x["word"])
        vocabulary = np.unique(np.concatenate(list(words)))
        """,
        """
        import tensorflow as tf
        ds = tf.data.Dataset.from_tensor_slices(x).batch(64, drop_remainder=True)
        """,
        """
        import tensorflow as tf

        def make(is_training):
            return tf.data.TFRecordDataset('f').batch(64, drop_remainder=is_training)
        """,
        # not a tf.data chain
        """
        import tensorflow as tf
        rows = table.batch(32)
        """,
        """
        import tensorflow as tf

        def input_fn(ds):
            return ds.batch(32)
        """,
        # a Hugging Face dataset shares map/batch with tf.data
        """
        import tensorflow as tf
        import datasets
        AUTO = tf.data.AUTOTUNE
        ds = datasets.load_dataset('glue', 'mrpc')['train'].map(tok).shuffle(seed=0).batch(32)
        """,
        # dataset methods, but the chain ends in something else first
        """
        import tensorflow as tf

        def rows(table):
            return table.select(cols).batch(32)
        """,
        # evaluation only
        """
        import tensorflow as tf
        val_ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(128)
        """,
        """
        import tensorflow as tf

        def eval_input_fn():
            return tf.data.TFRecordDataset('val').batch(128)
        """,
        # prediction: dropping the last batch would skip examples' predictions
        """
        import tensorflow as tf

        def predict_input_fn(params):
            return tf.data.TFRecordDataset('test.tfrecords').take(10).batch(params['batch_size'])
        """,
        """
        import tensorflow as tf

        def make(files, is_training):
            ds = tf.data.TFRecordDataset(files)
            if is_training:
                ds = ds.shuffle(1000).batch(64, drop_remainder=True)
            else:
                ds = ds.batch(64)
            return ds
        """,
        # a batching helper that a model's fit, evaluate and predict share
        """
        import keras
        import tensorflow as tf

        def _to_dataset(x, y, batch_size):
            ds = tf.data.Dataset.from_tensor_slices((x, y))
            return ds.batch(batch_size or 32)

        class Task(keras.Model):
            def fit(self, x, y, batch_size=None, **kwargs):
                return super().fit(_to_dataset(x, y, batch_size), **kwargs)

            def predict(self, x, batch_size=None, **kwargs):
                return super().predict(_to_dataset(x, None, batch_size), **kwargs)
        """,
        # a dataset handed to predict(): the predictions of its last examples are kept
        """
        import tensorflow as tf
        ds = tf.data.Dataset.from_tensor_slices(images).map(resize).batch(64)
        predictions = model.predict(ds)
        """,
    )
    INVALID = (
        Invalid(
            """
            import tensorflow as tf
            ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1000).batch(128)
            """,
            expected_fix="""
            import tensorflow as tf
            ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1000).batch(128, drop_remainder=True)
            """,
            fields={"batch_size": 128, "shuffled": True, "repeats": False},
            unsafe=True,
            at=Range(2, 62, 2, 67),
        ),
        # repeated without end before the batch: nothing is dropped, the shape still is dynamic
        Invalid(
            """
            import tensorflow as tf
            ds = tf.data.TFRecordDataset(files).repeat().batch(128)
            """,
            expected_fix="""
            import tensorflow as tf
            ds = tf.data.TFRecordDataset(files).repeat().batch(128, drop_remainder=True)
            """,
            fields={"repeats": True},
            unsafe=True,
            at=Range(2, 45, 2, 50),
        ),
        # a chain split over lines
        Invalid(
            """
            import tensorflow as tf

            def train_input_fn(files, batch_size):
                ds = tf.data.TFRecordDataset(files)
                ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
                ds = ds.batch(batch_size)
                return ds.prefetch(tf.data.AUTOTUNE)
            """,
            expected_fix="""
            import tensorflow as tf

            def train_input_fn(files, batch_size):
                ds = tf.data.TFRecordDataset(files)
                ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
                ds = ds.batch(batch_size, drop_remainder=True)
                return ds.prefetch(tf.data.AUTOTUNE)
            """,
            unsafe=True,
            at=Range(6, 12, 6, 17),
        ),
        Invalid(
            """
            import tensorflow_datasets as tfds
            ds = tfds.load('mnist', split='train', as_supervised=True)
            ds = ds.padded_batch(32, padded_shapes=([None], []))
            """,
            expected_fix="""
            import tensorflow_datasets as tfds
            ds = tfds.load('mnist', split='train', as_supervised=True)
            ds = ds.padded_batch(32, padded_shapes=([None], []), drop_remainder=True)
            """,
            unsafe=True,
            at=Range(3, 8, 3, 20),
        ),
        Invalid(
            """
            import tensorflow.compat.v1 as tf
            ds = tf.data.TFRecordDataset(files).apply(tf.data.experimental.map_and_batch(parse, 128))
            """,
            expected_fix="""
            import tensorflow.compat.v1 as tf
            ds = tf.data.TFRecordDataset(files).apply(tf.data.experimental.map_and_batch(parse, 128, drop_remainder=True))
            """,
            unsafe=True,
            at=Range(2, 42, 2, 88),
        ),
        # a dataset handed in by a parameter: the chain itself is tf.data
        Invalid(
            """
            import tensorflow as tf

            def preprocess(fn, dataset, batch_size):
                return dataset.map(fn).batch(batch_size).prefetch(tf.data.AUTOTUNE)
            """,
            expected_fix="""
            import tensorflow as tf

            def preprocess(fn, dataset, batch_size):
                return dataset.map(fn).batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
            """,
            unsafe=True,
            at=Range(4, 27, 4, 32),
        ),
        # a project loader from another module, then methods only tf.data has
        Invalid(
            """
            import tensorflow as tf
            from mylib.data import load
            ds = load('train').apply(tf.data.experimental.ignore_errors()).batch(64)
            """,
            expected_fix="""
            import tensorflow as tf
            from mylib.data import load
            ds = load('train').apply(tf.data.experimental.ignore_errors()).batch(64, drop_remainder=True)
            """,
            unsafe=True,
            at=Range(3, 63, 3, 68),
        ),
        Invalid(
            """
            import tensorflow as tf

            def batches(ds):
                return ds.padded_batch(32)
            """,
            expected_fix="""
            import tensorflow as tf

            def batches(ds):
                return ds.padded_batch(32, drop_remainder=True)
            """,
            unsafe=True,
            at=Range(4, 14, 4, 26),
        ),
        # the dataset comes from a same-file helper
        Invalid(
            """
            import tensorflow as tf

            def load(files):
                return tf.data.TFRecordDataset(files).map(parse)

            train_ds = load(files).batch(256)
            """,
            expected_fix="""
            import tensorflow as tf

            def load(files):
                return tf.data.TFRecordDataset(files).map(parse)

            train_ds = load(files).batch(256, drop_remainder=True)
            """,
            unsafe=True,
            at=Range(6, 23, 6, 28),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _BATCH_METHODS:
            if get_arg(node, "drop_remainder", _BATCH_METHODS[func.attr.value]) is not None:
                return
            if self.ctx.raw_name(func) is not None:
                return  # tf.data.Dataset.batch(ds, n) style or a module function: rare, skip
            if not self.ctx.is_tf_data_chain(node) or self.ctx.reaches_evaluation(node):
                return
            what = f".{func.attr.value}"
            at: cst.CSTNode = func.attr  # a chain spans many lines: point at the method
            size = get_arg(node, "batch_size", 0)
        else:
            name = self.ctx.call_name(node)
            if name not in _MAP_AND_BATCH:
                return
            if get_arg(node, "drop_remainder", _MAP_AND_BATCH[name]) is not None or self.ctx.reaches_evaluation(node):
                return
            what = "map_and_batch"
            at = node
            size = get_arg(node, "batch_size", 1)
        self.report(at, self._finding(node, what, size), fix=self._fix(node))

    def _finding(self, node: cst.Call, call: str, size: cst.Arg | None) -> PartialLastBatch:
        """What ``drop_remainder=True`` drops here."""
        chain = self.ctx.call_chain(node)
        before = [c.func.attr.value for c in chain[:-1] if isinstance(c.func, cst.Attribute)]
        if "repeat" in before and not next(c for c in chain if isinstance(c.func, cst.Attribute) and c.func.attr.value == "repeat").args:
            return PartialLastBatch(call, repeats=True)
        with self.ctx.every_construction():  # a flag's or a parameter's default is not the size it runs at
            n = self.ctx.int_const(size.value) if size is not None else None
        spelled = self.ctx.code(size.value) if size is not None and n is None else None
        return PartialLastBatch(call, batch_size=n, batch_spelled=spelled, shuffled="shuffle" in before)

    def _fix(self, node: cst.Call) -> FixSpec | None:
        change = self.ctx.insert_keyword(node, "drop_remainder", "True")
        return self.make_fix(change) if change is not None else None
