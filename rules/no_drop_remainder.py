from __future__ import annotations

import libcst as cst

from kerasfit.ruleapi import (
    Applicability,
    FixSpec,
    Invalid,
    Rule,
    feeds_evaluation,
    get_arg,
    insert_keyword,
    is_tf_data_chain,
)

# method -> positional index of drop_remainder
_BATCH_METHODS = {"batch": 1, "padded_batch": 3}
_MAP_AND_BATCH = {"tf.data.experimental.map_and_batch": 4, "tf.contrib.data.map_and_batch": 4}


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
    that only feed evaluation or prediction (`val_ds`, `eval_input_fn`,
    `predict_input_fn`, the not-training branch of `if is_training:`): dropping their
    last batch would skip examples and change the metric or the predictions, so the
    trade-off is not the linter's to make.

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
    Unsafe: each epoch drops up to `batch_size - 1` training examples.

    ## References
    docs/facts.md#24; Cloud TPU performance guide and Keras TPU guide ("static shapes").
    """

    code = "KF201"
    name = "no-drop-remainder"
    message = "tf.data batch without drop_remainder=True gives a dynamic batch dim"
    fix_title = "Add drop_remainder=True"
    fix_safety = Applicability.UNSAFE
    targets = frozenset({"tpu"})

    VALID = (
        "import tensorflow as tf\nds = tf.data.Dataset.from_tensor_slices(x).batch(64, drop_remainder=True)\n",
        "import tensorflow as tf\n\ndef make(is_training):\n"
        "    return tf.data.TFRecordDataset('f').batch(64, drop_remainder=is_training)\n",
        # not a tf.data chain
        "import tensorflow as tf\nrows = table.batch(32)\n",
        "import tensorflow as tf\n\ndef input_fn(ds):\n    return ds.batch(32)\n",
        # a Hugging Face dataset shares map/batch with tf.data
        "import tensorflow as tf\nimport datasets\nAUTO = tf.data.AUTOTUNE\n"
        "ds = datasets.load_dataset('glue', 'mrpc')['train'].map(tok).shuffle(seed=0).batch(32)\n",
        # dataset methods, but the chain ends in something else first
        "import tensorflow as tf\n\ndef rows(table):\n    return table.select(cols).batch(32)\n",
        # evaluation only
        "import tensorflow as tf\nval_ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(128)\n",
        "import tensorflow as tf\n\ndef eval_input_fn():\n    return tf.data.TFRecordDataset('val').batch(128)\n",
        # prediction: dropping the last batch would skip examples' predictions
        "import tensorflow as tf\n\ndef predict_input_fn(params):\n"
        "    return tf.data.TFRecordDataset('test.tfrecords').take(10).batch(params['batch_size'])\n",
        "import tensorflow as tf\n\ndef make(files, is_training):\n"
        "    ds = tf.data.TFRecordDataset(files)\n"
        "    if is_training:\n"
        "        ds = ds.shuffle(1000).batch(64, drop_remainder=True)\n"
        "    else:\n"
        "        ds = ds.batch(64)\n"
        "    return ds\n",
    )
    INVALID = (
        Invalid(
            "import tensorflow as tf\nds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1000).batch(128)\n",
            expected_fix="import tensorflow as tf\nds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1000).batch(128, drop_remainder=True)\n",
            unsafe=True,
        ),
        # a chain split over lines
        Invalid(
            "import tensorflow as tf\n\n"
            "def train_input_fn(files, batch_size):\n"
            "    ds = tf.data.TFRecordDataset(files)\n"
            "    ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)\n"
            "    ds = ds.batch(batch_size)\n"
            "    return ds.prefetch(tf.data.AUTOTUNE)\n",
            expected_fix="import tensorflow as tf\n\n"
            "def train_input_fn(files, batch_size):\n"
            "    ds = tf.data.TFRecordDataset(files)\n"
            "    ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)\n"
            "    ds = ds.batch(batch_size, drop_remainder=True)\n"
            "    return ds.prefetch(tf.data.AUTOTUNE)\n",
            unsafe=True,
        ),
        Invalid(
            "import tensorflow_datasets as tfds\n"
            "ds = tfds.load('mnist', split='train', as_supervised=True)\n"
            "ds = ds.padded_batch(32, padded_shapes=([None], []))\n",
            expected_fix="import tensorflow_datasets as tfds\n"
            "ds = tfds.load('mnist', split='train', as_supervised=True)\n"
            "ds = ds.padded_batch(32, padded_shapes=([None], []), drop_remainder=True)\n",
            unsafe=True,
        ),
        Invalid(
            "import tensorflow.compat.v1 as tf\n"
            "ds = tf.data.TFRecordDataset(files).apply(tf.data.experimental.map_and_batch(parse, 128))\n",
            expected_fix="import tensorflow.compat.v1 as tf\n"
            "ds = tf.data.TFRecordDataset(files).apply(tf.data.experimental.map_and_batch(parse, 128, drop_remainder=True))\n",
            unsafe=True,
        ),
        # a dataset handed in by a parameter: the chain itself is tf.data
        Invalid(
            "import tensorflow as tf\n\n"
            "def preprocess(fn, dataset, batch_size):\n"
            "    return dataset.map(fn).batch(batch_size).prefetch(tf.data.AUTOTUNE)\n",
            expected_fix="import tensorflow as tf\n\n"
            "def preprocess(fn, dataset, batch_size):\n"
            "    return dataset.map(fn).batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)\n",
            unsafe=True,
        ),
        # a project loader from another module, then methods only tf.data has
        Invalid(
            "import tensorflow as tf\nfrom mylib.data import load\n"
            "ds = load('train').apply(tf.data.experimental.ignore_errors()).batch(64)\n",
            expected_fix="import tensorflow as tf\nfrom mylib.data import load\n"
            "ds = load('train').apply(tf.data.experimental.ignore_errors()).batch(64, drop_remainder=True)\n",
            unsafe=True,
        ),
        Invalid(
            "import tensorflow as tf\n\ndef batches(ds):\n    return ds.padded_batch(32)\n",
            expected_fix="import tensorflow as tf\n\ndef batches(ds):\n    return ds.padded_batch(32, drop_remainder=True)\n",
            unsafe=True,
        ),
        # the dataset comes from a same-file helper
        Invalid(
            "import tensorflow as tf\n\n"
            "def load(files):\n"
            "    return tf.data.TFRecordDataset(files).map(parse)\n\n"
            "train_ds = load(files).batch(256)\n",
            expected_fix="import tensorflow as tf\n\n"
            "def load(files):\n"
            "    return tf.data.TFRecordDataset(files).map(parse)\n\n"
            "train_ds = load(files).batch(256, drop_remainder=True)\n",
            unsafe=True,
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _BATCH_METHODS:
            if get_arg(node, "drop_remainder", _BATCH_METHODS[func.attr.value]) is not None:
                return
            if self.ctx.raw_name(func) is not None:
                return  # tf.data.Dataset.batch(ds, n) style or a module function: rare, skip
            if not is_tf_data_chain(self.ctx, node) or feeds_evaluation(self.ctx, node):
                return
            what = f"`.{func.attr.value}(...)`"
            at: cst.CSTNode = func.attr  # a chain spans many lines: point at the method
        else:
            name = self.ctx.call_name(node)
            if name not in _MAP_AND_BATCH:
                return
            if get_arg(node, "drop_remainder", _MAP_AND_BATCH[name]) is not None or feeds_evaluation(self.ctx, node):
                return
            what = "`map_and_batch(...)`"
            at = node
        self.report(
            at,
            f"{what} without `drop_remainder=True`: the last partial batch makes the batch dim dynamic, "
            "so the TPU step is compiled again for it; drop it for static shapes",
            fix=self._fix(node),
        )

    def _fix(self, node: cst.Call) -> FixSpec | None:
        change = insert_keyword(self.ctx, node, "drop_remainder", "True")
        return self.make_fix(change) if change is not None else None
