"""Pads and convs both behind project wrappers (issue 21, class 5): the wrapper is
interpreted with the padded tensor as its input, and the ops it applies to that input are
checked like a conv written in place."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from kerasfit.project.check import CheckOptions, check_paths
from kerasfit.project.config import Selection


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))


def _findings(root: Path, *names: str) -> list[tuple[str, int, dict[str, Any]]]:
    """(file, row, the finding's fields) of KF103's findings, in file and row order."""
    res = check_paths([str(root / n) for n in names], CheckOptions(selection=Selection(select=["KF103"]), use_cache=False, jobs=1))
    return sorted(((Path(d.filename).name, d.row, d.fields) for d in res.diagnostics), key=lambda f: f[:2])


def test_pad_helper_of_another_module_feeds_a_same_file_conv_wrapper(tmp_path):
    _write(tmp_path, {
        "ops.py": """
            import tensorflow as tf

            def pad(x, p):
                return tf.pad(x, [[0, 0], [p, p], [p, p], [0, 0]])
        """,
        "net.py": """
            import tensorflow as tf
            import ops

            def _conv2d(x, w, stride, padding="SAME"):
                return tf.nn.conv2d(x, w, [1, stride, stride, 1], padding=padding)

            def block(x, w):
                y = ops.pad(x, 1)
                return _conv2d(y, w, 2, padding="VALID")

            def same(x, w):
                return _conv2d(ops.pad(x, 1), w, 1)
        """,
    })
    found = _findings(tmp_path, "net.py")
    assert [(f, r) for f, r, _ in found] == [("net.py", 9)]
    assert found[0][2]["not_fixed"] == "the conv is applied inside `_conv2d`, which gives it padding 'valid' here"
    assert (found[0][2]["pad"], found[0][2]["conv"]) == ("ops.pad", "tf.nn.conv2d")


def test_two_hop_closure_into_a_project_conv(tmp_path):
    _write(tmp_path, {
        "layers_lib.py": """
            import tensorflow as tf

            def conv(x, filters, k, s):
                y = tf.keras.layers.Conv2D(filters, k, strides=s, padding="valid")(x)
                return tf.nn.relu(y)
        """,
        "net.py": """
            import tensorflow as tf
            from layers_lib import conv

            def make_block(filters):
                def inner(x):
                    return conv(x, filters, 3, 2)

                def outer(x):
                    x = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])
                    return inner(x)

                return outer

            def not_padded(filters):
                def inner(x):
                    return conv(tf.nn.relu(x), filters, 3, 2)

                def outer(x):
                    x = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])
                    return inner(x)

                return outer
        """,
    })
    found = _findings(tmp_path, "net.py")
    assert [(f, r) for f, r, _ in found] == [("net.py", 10)]
    assert (found[0][2]["pad"], found[0][2]["conv"]) == ("tf.pad", "Conv2D")


def test_cross_file_fixed_padding_feeds_a_conv_known_by_its_signature(tmp_path):
    _write(tmp_path, {
        "layers_util.py": """
            import tensorflow as tf

            def fixed_padding(inputs, kernel_size):
                pad_total = kernel_size - 1
                pad_beg = pad_total // 2
                return tf.pad(inputs, [[0, 0], [pad_beg, pad_total - pad_beg], [pad_beg, pad_total - pad_beg], [0, 0]])
        """,
        "net.py": """
            import tensorflow as tf
            from layers_util import fixed_padding
            from tensorpack import Conv2D

            def block(x, k, s):
                x = fixed_padding(x, k)
                return Conv2D("conv", x, 64, kernel_size=k, strides=s, padding="VALID")

            def same(x, k, s):
                x = fixed_padding(x, k)
                return Conv2D("conv", x, 64, kernel_size=k, strides=s, padding="SAME")
        """,
    })
    found = _findings(tmp_path, "net.py")
    assert [(f, r) for f, r, _ in found] == [("net.py", 7)]
    assert found[0][2]["not_fixed"] == "`Conv2D` is a conv by its signature (kernel size, strides, padding 'valid'), not one kerasfit can rewrite"


# ---- settings in another module (issue 21, class 4) ----------------------------------
def _codes(root: Path, *names: str, select: str) -> list[tuple[str, int, dict[str, Any]]]:
    res = check_paths([str(root / n) for n in names], CheckOptions(selection=Selection(select=[select]), use_cache=False, jobs=1))
    return sorted(((Path(d.filename).name, d.row, d.fields) for d in res.diagnostics), key=lambda f: f[:2])


def test_tpu_strategy_from_a_helper_and_batch_flag_from_another_module(tmp_path):
    _write(tmp_path, {
        "tpu_lib.py": """
            import tensorflow as tf

            def _resolver(name):
                return tf.distribute.cluster_resolver.TPUClusterResolver(name)

            def get_strategy(name=None):
                resolver = _resolver(name)
                tf.config.experimental_connect_to_cluster(resolver)
                return tf.distribute.experimental.TPUStrategy(resolver)
        """,
        "flags_def.py": """
            from absl import flags

            flags.DEFINE_integer("batch_size", 32, "global batch")
        """,
        "train.py": """
            import tensorflow as tf
            from absl import flags
            import flags_def
            from tpu_lib import get_strategy

            FLAGS = flags.FLAGS

            def main(_):
                strategy = get_strategy()
                return tf.data.Dataset.range(10).batch(FLAGS.batch_size, drop_remainder=True)
        """,
        # the same without a TPU anywhere: nothing to say
        "gpu_lib.py": """
            import tensorflow as tf

            def get_strategy():
                return tf.distribute.MirroredStrategy()
        """,
        "gpu_train.py": """
            import tensorflow as tf
            from absl import flags
            import flags_def
            from gpu_lib import get_strategy

            FLAGS = flags.FLAGS

            def main(_):
                strategy = get_strategy()
                return tf.data.Dataset.range(10).batch(FLAGS.batch_size, drop_remainder=True)
        """,
    })
    found = _codes(tmp_path, "train.py", "gpu_train.py", select="KF203")
    assert [(f, r) for f, r, _ in found] == [("train.py", 11)]
    assert found[0][2] == {"batch": 32, "large": 128}  # GlobalBatchBelow64


def test_a_tpu_helper_is_looked_up_once_per_spelling(tmp_path):
    """Whether a call sets up a TPU through a project helper is asked of every call of the
    file; the project is asked once per callee spelling (the file's model keeps it)."""
    import libcst as cst

    from kerasfit.semantic.index import ProjectIndex
    from kerasfit.semantic.model import SemanticModel

    _write(tmp_path, {
        "tpu_lib.py": """
            import tensorflow as tf

            def get_strategy():
                resolver = tf.distribute.cluster_resolver.TPUClusterResolver()
                return tf.distribute.TPUStrategy(resolver)
        """,
        "train.py": """
            import numpy as np
            import tpu_lib

            a = np.zeros(3)
            b = np.zeros(4)
            strategy = tpu_lib.get_strategy()
        """,
    })
    path = tmp_path / "train.py"
    src = path.read_text()
    ctx = SemanticModel(cst.parse_module(src), str(path), source=src, project=ProjectIndex([tmp_path]))
    assert ctx.roles.uses_tpu
    assert ctx.caches.tpu_makers == {"np.zeros": False, "tpu_lib.get_strategy": True}


def test_pad_layer_class_of_another_module_before_a_conv_in_a_sequential_list(tmp_path):
    _write(tmp_path, {
        "pads.py": """
            import tensorflow as tf

            class ZeroPad(tf.keras.layers.Layer):
                def call(self, x):
                    return tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])

            class ReflectPad(tf.keras.layers.Layer):
                def call(self, x):
                    return tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="REFLECT")
        """,
        "net.py": """
            import tensorflow as tf
            from pads import ZeroPad, ReflectPad

            model = tf.keras.Sequential([ZeroPad(), tf.keras.layers.Conv2D(32, 3, strides=2)])
            other = tf.keras.Sequential([ReflectPad(), tf.keras.layers.Conv2D(32, 3, strides=2)])
        """,
    })
    found = _findings(tmp_path, "net.py")
    assert [(f, r) for f, r, _ in found] == [("net.py", 5)]
    assert (found[0][2]["pad"], found[0][2]["conv"]) == ("ZeroPad", "Conv2D")


def test_a_wrapper_called_alike_is_interpreted_once(tmp_path):
    """Calls of a wrapper with the same argument values share one interpretation (the
    file's model keeps it); other values get their own, and each call is still checked."""
    import libcst as cst

    from kerasfit.semantic.index import ProjectIndex
    from kerasfit.semantic.model import SemanticModel

    _write(tmp_path, {
        "net.py": """
            import tensorflow as tf

            def _conv2d(x, w, stride, padding="SAME"):
                return tf.nn.conv2d(x, w, [1, stride, stride, 1], padding=padding)

            def block(x, w):
                a = _conv2d(tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]]), w, 2, padding="VALID")
                b = _conv2d(tf.pad(a, [[0, 0], [1, 1], [1, 1], [0, 0]]), w, 2, padding="VALID")
                return _conv2d(b, w, 1)
        """,
    })
    found = _findings(tmp_path, "net.py")
    assert [r for _, r, _ in found] == [8, 9]

    path = tmp_path / "net.py"
    src = path.read_text()
    ctx = SemanticModel(cst.parse_module(src), str(path), source=src, project=ProjectIndex([tmp_path]))
    calls = [c for c, _ in ctx.index.calls if cst.Module([]).code_for_node(c.func) == "_conv2d"]
    fed = [ctx.layers.ops_fed(c) for c in calls]
    assert [[layer.name for layer in f] for f in fed] == [["tensorflow.nn.conv2d"]] * 3
    assert len(ctx.caches.wrapper_ops) == 2  # (2, 'VALID') twice, then (1, default)


def test_a_wrapper_fed_what_no_pad_made_is_not_interpreted(tmp_path):
    """A wrapper's first argument that no pad can have produced (a parameter, an
    attribute, a name bound to another framework op) is no pad: the rule does not interpret
    the wrapper for it (no interpretation is kept), while a padded argument is still
    followed into the wrapper."""
    import libcst as cst

    from kerasfit.engine.walk import walk
    from kerasfit.ruleapi.context import RuleContext
    from kerasfit.rules.pad_before_conv import PadBeforeConv
    from kerasfit.semantic.index import ProjectIndex
    from kerasfit.semantic.model import SemanticModel

    _write(tmp_path, {
        "net.py": """
            import tensorflow as tf

            def _conv2d(x, w, stride, padding="SAME"):
                return tf.nn.conv2d(x, w, [1, stride, stride, 1], padding=padding)

            class Net:
                def call(self, x, w):
                    a = _conv2d(x, w, 1, padding="VALID")
                    r = tf.nn.relu(a)
                    b = _conv2d(r, w, 4, padding="VALID")
                    return _conv2d(self.cache, w, 2, padding="VALID")

            def padded(x, w):
                y = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])
                return _conv2d(y, w, 3, padding="VALID")
        """,
    })
    assert [r for _, r, _ in _findings(tmp_path, "net.py")] == [15]  # the pad

    path = tmp_path / "net.py"
    src = path.read_text()
    ctx = SemanticModel(cst.parse_module(src), str(path), source=src, project=ProjectIndex([tmp_path]))
    rule = PadBeforeConv(RuleContext(ctx, PadBeforeConv.code, PadBeforeConv.reads))
    walk(ctx.module, ctx, [rule], lambda r, exc: (_ for _ in ()).throw(exc))
    assert [ctx.module.code_for_node(rep.node) for rep in rule.reports] == ["tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])"]
    # one interpretation, for stride 3: ``x``, ``r`` and ``self.cache`` are no pad's result
    # (the key's arguments hold the wrapper's input where the call passes it: first here)
    assert [key[1][2] for key in ctx.caches.wrapper_ops] == [frozenset({3})]


def test_a_pad_helper_of_an_unread_project_module_is_known_by_its_name(tmp_path):
    # ``ops.py`` of the package is not in the tree (a file left out of the check's sources):
    # its ``pad`` is taken for a pad by its name, and the finding says so; a library's
    # (NumPy's) and a readable module's function of that name are not guessed
    _write(tmp_path, {
        "gan/readable.py": """
            def pad(x, p):
                return x
        """,
        "gan/net.py": """
            import numpy as np
            import tensorflow.compat.v1 as tf
            from gan import ops, readable

            def _conv2d(inputs, filters, stride):
                return tf.layers.conv2d(inputs, filters, 4, strides=stride, padding="VALID")

            def down(net):
                net = ops.pad(net, 1)
                net = _conv2d(inputs=net, filters=128, stride=2)
                net = _conv2d(inputs=readable.pad(net, 1), filters=128, stride=2)
                return _conv2d(np.pad(net, 1), 128, 2)
        """,
    })
    found = _findings(tmp_path, "gan/net.py")
    assert [(f, r) for f, r, _ in found] == [("net.py", 10)]
    assert (found[0][2]["pad"], found[0][2]["unread_module"]) == ("ops.pad", "gan.ops")
    assert found[0][2]["not_fixed"] == "the conv is applied inside `_conv2d`, which gives it padding 'valid' here"


def test_a_wrapper_applies_its_conv_to_a_later_argument(tmp_path):
    # the padded tensor is the wrapper's second positional argument, or a keyword one
    _write(tmp_path, {
        "convs.py": """
            import tensorflow as tf

            def conv(name, x, filters, padding="SAME"):
                with tf.name_scope(name):
                    return tf.keras.layers.Conv2D(filters, 3, padding=padding)(x)
        """,
        "net.py": """
            import tensorflow as tf
            import convs

            def stem(x):
                y = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])
                a = convs.conv("a", y, 32, padding="valid")
                z = tf.pad(a, [[0, 0], [1, 1], [1, 1], [0, 0]])
                b = convs.conv("b", x=z, filters=32, padding="valid")
                w = tf.pad(b, [[0, 0], [1, 1], [1, 1], [0, 0]])
                return convs.conv("c", w, 32)
        """,
    })
    found = _findings(tmp_path, "net.py")
    assert [(f, r) for f, r, _ in found] == [("net.py", 6), ("net.py", 8)]
    assert all(f["not_fixed"] == "the conv is applied inside `conv`, which gives it padding 'valid' here" for _, _, f in found)


def test_a_pad_layer_class_of_an_unread_project_module_is_known_by_its_name(tmp_path):
    # ``layers.py`` and ``ops.py`` of the package are not in the tree: their pad layer classes
    # and pad function are taken for pads by their names (one that reflects, by its name, is
    # no zero pad); a class named for a padded conv is not a pad
    _write(tmp_path, {
        "gan/net.py": """
            import tensorflow as tf
            from gan.layers import PaddedConv2D, ReflectionPadding2D, ZeroPad
            from gan.ops import pad

            def block(x):
                y = ReflectionPadding2D(1)(x)
                y = tf.keras.layers.Conv2D(32, 3)(y)
                z = ZeroPad(1)(y)
                z = tf.keras.layers.Conv2D(32, 3)(z)
                w = PaddedConv2D(32, 3)(z)
                w = tf.keras.layers.Conv2D(32, 3)(w)
                return tf.keras.layers.Conv2D(32, 3)(pad(w, 1))
        """,
    })
    found = _findings(tmp_path, "gan/net.py")
    assert [(f, r) for f, r, _ in found] == [("net.py", 7), ("net.py", 9), ("net.py", 13)]
    assert (found[0][2]["pad"], found[0][2]["unread_module"]) == ("ReflectionPadding2D", "gan.layers")
    assert found[0][2]["not_folded"] == "a pad that reflects (by its name) is not zero padding"
    assert found[1][2]["pad"] == "ZeroPad" and found[1][2]["unread_module"] and found[1][2]["not_folded"] is None
    assert (found[2][2]["pad"], found[2][2]["unread_module"]) == ("pad", "gan.ops")
