"""The analysis package: names the imports do not show, the project index across files,
factory summaries as a may-analysis, reach from model code, and the cache's dependencies."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import libcst as cst

from kerasfit.semantic.index import ProjectIndex
from kerasfit.semantic.names import by_name, star_names
from kerasfit.semantic.summaries import built_layer
from kerasfit.project.check import CheckOptions, check_paths
from kerasfit.project.config import Selection
from kerasfit.semantic.model import SemanticModel


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))


def _codes(root: Path, *names: str, select: tuple[str, ...] = ("ALL",)) -> list[tuple[str, int, str]]:
    res = check_paths([str(root / n) for n in names], CheckOptions(selection=Selection(select=list(select)), use_cache=False, jobs=1))
    return sorted((Path(d.filename).name, d.row, d.code) for d in res.diagnostics)


# ---- names ----------------------------------------------------------------------------
def test_star_names_come_from_the_data_table():
    names = star_names("tensorflow.keras.layers")
    assert names is not None and {"Conv2D", "ZeroPadding2D", "BatchNormalization"} <= names
    assert star_names("tensorflow.compat.v1.keras.layers") == names
    assert star_names("numpy") is None


def test_by_name_only_for_framework_spellings():
    assert by_name("ZeroPadding2D") == "keras.layers.ZeroPadding2D"
    assert by_name("random.categorical") == "tf.random.categorical"
    assert by_name("depth_to_space") == "tf.nn.depth_to_space"
    # torch and slim spell these too: never taken by name
    assert by_name("conv2d") is None and by_name("Linear") is None


def test_star_import_resolves_layers():
    src = "from tensorflow.keras.layers import *\n\nx = ZeroPadding2D(1)(x)\nx = Conv2D(8, 3)(x)\n"
    ctx = SemanticModel(cst.parse_module(src), "<string>", source=src)
    assert ctx.names.resolve(cst.Name("ZeroPadding2D")) == "keras.layers.ZeroPadding2D"


def test_star_import_finds_pad_before_conv(tmp_path):
    _write(tmp_path, {"m.py": """
        from keras.layers import *

        def block(x):
            x = ZeroPadding2D(1)(x)
            return Conv2D(16, 3)(x)
    """})
    assert ("m.py", 5, "KF103") in _codes(tmp_path, "m.py", select=("KF103",))


def test_unresolved_receiver_resolved_by_name(tmp_path):
    _write(tmp_path, {"m.py": """
        import tensorflow as tf
        from mylib import VersionAwareLayers

        layers = VersionAwareLayers()

        def stem(x):
            x = layers.ZeroPadding2D(3)(x)
            return layers.Conv2D(64, 7, strides=2)(x)
    """})
    src = (tmp_path / "m.py").read_text()
    ctx = SemanticModel(cst.parse_module(src), str(tmp_path / "m.py"), source=src)
    node = cst.parse_expression("layers.Conv2D")
    assert ctx.names.resolve(node) == "keras.layers.Conv2D" and ctx.names.resolved_by_name(node)
    assert ("m.py", 8, "KF103") in _codes(tmp_path, "m.py", select=("KF103",))


def test_self_attribute_is_never_taken_by_name():
    src = "import keras\nclass A:\n    def f(self):\n        return self.Conv2D\n"
    ctx = SemanticModel(cst.parse_module(src), "<string>", source=src)
    assert ctx.names.resolve(cst.parse_expression("self.Conv2D")) is None


# ---- the project index ----------------------------------------------------------------
def test_reexport_through_a_project_module(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/compat.py": "from tensorflow.keras import layers\nimport tensorflow as tf\n",
        "pkg/model.py": """
            from .compat import layers

            def block(x):
                x = layers.ZeroPadding2D(1)(x)
                return layers.Conv2D(32, 3)(x)
        """,
        "app.py": "from pkg.compat import tf\ny = tf.nn.depth_to_space(x, 2)\n",
    })
    index = ProjectIndex()
    sym = index.resolve(str(tmp_path / "pkg/model.py"), ".compat.layers.Conv2D")
    assert sym is not None and sym.kind == "framework" and sym.raw == "tensorflow.keras.layers.Conv2D"
    codes = _codes(tmp_path, "pkg/model.py", "app.py", select=("KF103", "KF106"))
    assert ("model.py", 5, "KF103") in codes and ("app.py", 2, "KF106") in codes


def test_a_backend_module_chosen_in_branches_resolves_to_the_framework_any_branch_binds(tmp_path):
    # a zoo's own backend module picks its ops module at import time (a TF module, a torch
    # one, a Keras 3 one); model code reaches TensorFlow only through it
    _write(tmp_path, {
        "zoo/__init__.py": "",
        "zoo/tf_functional.py": "from tensorflow import concat, split, transpose\nfrom tensorflow.nn import relu\n",
        "zoo/torch_functional.py": "import torch\n\ndef transpose(x, perm):\n    return x.permute(*perm)\n",
        "zoo/backend.py": """
            import os

            if os.environ.get("ZOO_BACKEND", "tensorflow") == "tensorflow":
                import tensorflow as tf
                from zoo import tf_functional as functional
            else:
                from zoo import torch_functional as functional
        """,
        "zoo/model.py": """
            from zoo.backend import functional

            def attention(x):
                q, k = functional.split(x, 2, axis=-1)
                return functional.transpose(q, [0, 3, 1, 2])
        """,
        "zoo/other.py": """
            import os
            if os.environ.get("ZOO_BACKEND") == "torch":
                from zoo import torch_functional as F
            else:
                from zoo import tf_functional as F

            def to_nchw(x):
                return F.transpose(x, [0, 3, 1, 2])
        """,
    })
    index = ProjectIndex()
    sym = index.resolve(str(tmp_path / "zoo/model.py"), "zoo.backend.functional.transpose")
    assert sym is not None and sym.kind == "framework" and sym.raw == "tensorflow.transpose"
    src = (tmp_path / "zoo/model.py").read_text()
    ctx = SemanticModel(cst.parse_module(src), str(tmp_path / "zoo/model.py"), source=src, project=index)
    calls = [n for n in ctx.index.all_calls()]
    assert {ctx.names.call_name(c) for c in calls} == {"tf.split", "tf.transpose"}
    codes = _codes(tmp_path, "zoo/model.py", "zoo/other.py", select=("KF107",))
    assert codes == [("model.py", 6, "KF107"), ("other.py", 9, "KF107")]


def test_a_vendored_tpu_estimator_is_the_framework_one(tmp_path):
    _write(tmp_path, {
        "third_party/__init__.py": "",
        "third_party/tpu_estimator.py": "from tensorflow.python.estimator import estimator as estimator_lib\n\n"
        "class TPUEstimator(estimator_lib.Estimator):\n    pass\n",
        "train.py": """
            from third_party import tpu_estimator

            estimator = tpu_estimator.TPUEstimator(model_fn=model_fn, train_batch_size=32)
            estimator.train(input_fn=input_fn, max_steps=10)
        """,
    })
    codes = _codes(tmp_path, "train.py", select=("KF203",))
    assert codes == [("train.py", 4, "KF203")]


def test_factory_in_another_file_is_summarised(tmp_path):
    _write(tmp_path, {
        "nets/__init__.py": "",
        "nets/conv_lib.py": """
            from tensorflow.keras.layers import Conv2D

            def Conv(*args, **kwargs):
                conv_kwargs = {'padding': 'valid' if kwargs.get('strides') == (2, 2) else 'same'}
                conv_kwargs.update(kwargs)
                return Conv2D(*args, **conv_kwargs)
        """,
        "nets/backbone.py": "from nets.conv_lib import Conv\n",
    })
    index = ProjectIndex()
    facts = index.facts(tmp_path / "nets/backbone.py")
    from kerasfit.semantic.summaries import consts

    down = built_layer(index, facts, "Conv", [consts(64), consts((3, 3))], {"strides": consts((2, 2))})
    keep = built_layer(index, facts, "Conv", [consts(64), consts((3, 3))], {})
    assert down.name == "tensorflow.keras.layers.Conv2D" and down.via == ("Conv",)
    assert down.kwargs["padding"] == consts("valid") and keep.kwargs["padding"] == consts("same")
    assert down.args[0] == consts(64)


def test_unknown_branch_joins_both_values(tmp_path):
    _write(tmp_path, {"lib.py": """
        import tensorflow as tf

        def conv(filters, stride, pad):
            if pad:
                padding = 'valid'
            else:
                padding = 'same'
            return tf.keras.layers.Conv2D(filters, 3, strides=stride, padding=padding)
    """})
    index = ProjectIndex()
    from kerasfit.semantic.summaries import TOP, consts

    layer = built_layer(index, index.facts(tmp_path / "lib.py"), "conv", [consts(8), consts(1), TOP], {})
    assert layer.kwargs["padding"] == consts("valid", "same")


def _same_file_factory(body: str) -> tuple[SemanticModel, cst.Call]:
    src = textwrap.dedent("""
        import tensorflow as tf

        def conv_bn(filters, kind):
        %s

        def build(x):
            return conv_bn(150, "a")(x)
    """) % textwrap.indent(textwrap.dedent(body), "    ")
    module = cst.parse_module(src)
    call = cst.ensure_type(module.body[-1], cst.FunctionDef).body.body[0]
    ret = cst.ensure_type(cst.ensure_type(call, cst.SimpleStatementLine).body[0], cst.Return)
    return SemanticModel(module, "<string>", source=src), cst.ensure_type(cst.ensure_type(ret.value, cst.Call).func, cst.Call)


def test_same_file_factory_with_elif_is_summarised():
    # the libcst pre-filter once iterated an ``elif`` (an If, not a block) and crashed
    ctx, call = _same_file_factory("""
        if kind == "a":
            return tf.keras.layers.Conv2D(filters, 3)
        elif kind == "b":
            return tf.keras.layers.Conv2D(filters, 1)
    """)
    layer = ctx.layers.built_layer(call)
    assert layer is not None and layer.name == "tensorflow.keras.layers.Conv2D" and layer.args[1] == frozenset({3})


def test_same_file_factory_returning_from_a_one_line_suite_is_summarised():
    # ``if c: return Conv2D(...)``: the return sits in a one-line suite, not a statement line
    ctx, call = _same_file_factory("""
        if kind == "a": return tf.keras.layers.Conv2D(filters, 3)
        raise ValueError(kind)
    """)
    layer = ctx.layers.built_layer(call)
    assert layer is not None and layer.args[0] == frozenset({150})


def test_elif_factory_does_not_crash_the_check(tmp_path):
    _write(tmp_path, {"m.py": """
        import tensorflow as tf

        def conv_bn(filters, kind):
            if kind == "a":
                return tf.keras.layers.Conv2D(filters, 3)
            elif kind == "b":
                return tf.keras.layers.Conv2D(filters, 1)

        def build(x):
            return conv_bn(150, "a")(x)
    """})
    assert _codes(tmp_path, "m.py", select=("KF102",)) == [("m.py", 11, "KF102")]


def test_reached_from_model_across_files(tmp_path):
    _write(tmp_path, {
        "util.py": "def helper(x):\n    return x\n\ndef unused(x):\n    return x\n",
        "model.py": """
            import tensorflow as tf
            from util import helper

            def build(x):
                x = tf.keras.layers.Dense(8)(x)
                return helper(x)
        """,
    })
    index = ProjectIndex([tmp_path])
    assert index.reached_from_model(tmp_path / "util.py", "helper")
    assert not index.reached_from_model(tmp_path / "util.py", "unused")


def test_reached_from_a_function_that_only_builds_layers(tmp_path):
    # no step name: model code because it calls a Keras layer (a framework Symbol)
    _write(tmp_path, {
        "util.py": "def helper(x):\n    return x\n",
        "model.py": """
            import tensorflow as tf
            from util import helper

            def make_net(x):
                x = tf.keras.layers.Dense(8)(x)
                return helper(x)
        """,
    })
    assert ProjectIndex([tmp_path]).reached_from_model(tmp_path / "util.py", "helper")


_BOX_HELPER = """
    import tensorflow as tf

    def to_corners(boxes):
        xy = boxes[..., :2]
        wh = boxes[..., 2:4]
        return tf.concat([xy - wh / 2.0, xy + wh / 2.0], axis=-1)
"""


def test_helper_mapped_over_a_dataset_in_another_file_is_input_code(tmp_path):
    # issue 21 item 8: `ds.map(preprocess)` in data.py makes boxes.to_corners host code
    _write(tmp_path, {
        "boxes.py": _BOX_HELPER,
        "data.py": """
            import tensorflow as tf
            from boxes import to_corners

            def preprocess(image, boxes):
                return image, to_corners(boxes)

            def make_dataset(files):
                return tf.data.TFRecordDataset(files).map(preprocess).batch(8, drop_remainder=True)
        """,
    })
    index = ProjectIndex([tmp_path])
    assert index.input_only(tmp_path / "boxes.py", "to_corners")
    assert _codes(tmp_path, "boxes.py", "data.py", select=("KF105",)) == []


def test_helper_mapped_in_a_lambda_inside_the_training_driver_is_input_code(tmp_path):
    # the lambda given to .map runs in the pipeline, although main() also calls fit()
    _write(tmp_path, {
        "boxes.py": _BOX_HELPER,
        "train.py": """
            import tensorflow as tf
            import boxes

            def main(files):
                model = tf.keras.Sequential([tf.keras.layers.Dense(8)])
                ds = tf.data.TFRecordDataset(files).map(lambda x, y: (x, boxes.to_corners(y)))
                model.fit(ds)
        """,
    })
    assert ProjectIndex([tmp_path]).input_only(tmp_path / "boxes.py", "to_corners")


def test_helper_mapped_in_a_lambda_and_also_called_by_a_layer_stays_model_code(tmp_path):
    _write(tmp_path, {
        "boxes.py": _BOX_HELPER,
        "data.py": """
            from boxes import to_corners

            def make_dataset(ds):
                return ds.map(lambda image, boxes: (image, to_corners(boxes)))
        """,
        "head.py": """
            import tensorflow as tf
            from boxes import to_corners

            class Head(tf.keras.layers.Layer):
                def call(self, boxes):
                    return to_corners(boxes)
        """,
    })
    assert not ProjectIndex([tmp_path]).input_only(tmp_path / "boxes.py", "to_corners")
    assert _codes(tmp_path, "boxes.py", "data.py", "head.py", select=("KF105",)) == [("boxes.py", 5, "KF105"), ("boxes.py", 6, "KF105")]


def _gpu_codes(root: Path, *names: str) -> list[tuple[str, int, str]]:
    opts = CheckOptions(selection=Selection(select=["KF102"]), target="gpu", use_cache=False, jobs=1)
    return sorted((Path(d.filename).name, d.row, d.code) for d in check_paths([str(root / n) for n in names], opts).diagnostics)


_GPU_MODEL = """
    import keras

    def build(x):
        return keras.layers.Conv2D(60, 3, padding="same")(x)
"""


def test_gpu_width_multiple_follows_the_precision_set_somewhere(tmp_path):
    # issue 21 item 12, issue 28: 60 float32 filters are whole TF32 groups of 4, 60 16-bit
    # ones miss the tensor cores' 8 (docs/facts.md#18)
    _write(tmp_path, {"model.py": _GPU_MODEL, "train.py": "import keras\nfrom model import build\n"})
    assert _gpu_codes(tmp_path, "model.py", "train.py") == []
    # the policy set in another file of the tree
    _write(tmp_path, {"train.py": "import keras\nfrom model import build\nkeras.mixed_precision.set_global_policy('mixed_float16')\n"})
    assert ProjectIndex([tmp_path]).dtype_policies() == ("float16",)
    assert _gpu_codes(tmp_path, "model.py", "train.py") == [("model.py", 5, "KF102")]


def test_gpu_width_from_the_dtype_setting(tmp_path):
    _write(tmp_path, {
        "model.py": _GPU_MODEL,
        "pyproject.toml": "[tool.kerasfit.build]\ndtype = \"bfloat16\"\n",
    })
    assert _gpu_codes(tmp_path, "model.py") == [("model.py", 5, "KF102")]


def test_main_block_of_a_library_module_is_demo_code(tmp_path):
    # issue 21 item 9: net.py's `__main__` block trains a toy model, but train.py
    # imports net: net is a library and its block a demo
    demo = """
        import tensorflow as tf

        def build(x):
            return tf.keras.layers.Dense(64)(x)

        if __name__ == "__main__":
            inp = tf.keras.Input((32,))
            m = tf.keras.Model(inp, tf.keras.layers.Dense(100, activation="relu")(build(inp)))
            m.fit(x, y)
    """
    _write(tmp_path, {"net.py": demo})
    assert _codes(tmp_path, "net.py", select=("KF102",)) == [("net.py", 9, "KF102")]  # a training script
    _write(tmp_path, {"train.py": "from net import build\n"})
    assert ProjectIndex([tmp_path]).imported_by_others(tmp_path / "net.py")
    assert _codes(tmp_path, "net.py", "train.py", select=("KF102",)) == []


def test_cached_result_is_dropped_when_a_helper_changes(tmp_path):
    _write(tmp_path, {
        "conv_lib.py": """
            from tensorflow.keras.layers import Conv2D

            def Conv(*args, **kwargs):
                return Conv2D(*args, **kwargs)
        """,
        "net.py": """
            from tensorflow.keras.layers import ZeroPadding2D
            from conv_lib import Conv

            def down(x):
                x = ZeroPadding2D(((1, 0), (1, 0)))(x)
                return Conv(64, 3, strides=2)(x)
        """,
    })
    opts = CheckOptions(selection=Selection(select=["KF103"]), cache_dir=tmp_path / ".cache", jobs=1)
    first = check_paths([str(tmp_path / "net.py")], opts)
    assert [d.row for d in first.diagnostics] == [6]
    entry = json.loads(next((tmp_path / ".cache").glob("results-*.json")).read_text())["files"]
    assert str((tmp_path / "conv_lib.py").resolve()) in next(iter(entry.values()))["deps"]
    # the helper now pads itself: the cached finding of net.py must not survive
    (tmp_path / "conv_lib.py").write_text(
        "from tensorflow.keras.layers import Conv2D\n\ndef Conv(*args, **kwargs):\n"
        "    kwargs['padding'] = 'same'\n    return Conv2D(*args, **kwargs)\n"
    )
    second = check_paths([str(tmp_path / "net.py")], opts)
    assert second.diagnostics == [] and not any(r.cached for r in second.files)


def test_the_project_index_is_passed_in_not_global(tmp_path):
    """Each model answers from the index it was given; a file checked alone gets its own
    (an index left over from another check could answer with the wrong tree)."""
    import libcst as cst

    _write(tmp_path, {"helpers.py": "from tensorflow.keras import layers as L\n"})
    module = cst.parse_module("from helpers import L\nL.Dense(100)\n")
    given = ProjectIndex([tmp_path])
    ctx = SemanticModel(module, str(tmp_path / "m.py"), project=given)
    assert ctx.project is given
    alone, other = SemanticModel(module, "m.py"), SemanticModel(module, "m.py")
    assert alone.project is not given and alone.project is not other.project and alone.project.roots == []


def test_parallel_assignment_binds_each_name():
    src = "import tensorflow as tf\nF_H, F_W, C_OUT = 5, 3, 32\nK = [F_H, F_W, C_OUT]\n"
    ctx = SemanticModel(cst.parse_module(src), "<string>", source=src)
    assert ctx.values.const(cst.parse_expression("K")) == [5, 3, 32]


# ---- framework submodules handed in at run time (keras_applications' idiom) ------------------
def test_submodules_from_kwargs_resolve(tmp_path):
    _write(tmp_path, {"m.py": """
        from keras_applications import get_submodules_from_kwargs


        def gather_channels(x, indexes, **kwargs):
            backend = kwargs['backend']
            x = backend.permute_dimensions(x, (3, 0, 1, 2))
            x = backend.gather(x, indexes)
            return backend.permute_dimensions(x, (1, 2, 3, 0))


        def focal(gt, pr, **kwargs):
            backend = kwargs.get('backend')
            return - backend.mean(gt * backend.log(pr))


        def Stem(input_shape=None, **kwargs):
            backend, layers, models, keras_utils = get_submodules_from_kwargs(kwargs)
            x = layers.Input(input_shape)
            y = backend.permute_dimensions(x, (0, 3, 1, 2))
            return models.Model(x, y)
    """})
    assert _codes(tmp_path, "m.py", select=("KF107", "KF109")) == [
        ("m.py", 7, "KF107"), ("m.py", 9, "KF107"), ("m.py", 14, "KF109"), ("m.py", 20, "KF107"),
    ]


def test_submodule_search_is_skipped_where_nothing_can_hand_one_in():
    """The search for an injected submodule runs only in a file where a function takes
    ``**kwargs`` or the injector is named; its answers are the same either way."""
    def resolve(src: str) -> tuple[str | None, bool | None]:
        module = cst.parse_module(src)
        ctx = SemanticModel(module, "<string>", source=src)
        call = next(c for c, _ in ctx.index.calls if cst.Module([]).code_for_node(c.func) == "backend.mean")
        return ctx.names.raw_name_anywhere(call.func), ctx.caches.may_inject

    handed = "def focal(gt, **kw):\n    backend = kw['backend']\n    return backend.mean(gt)\n"
    assert resolve(handed) == ("keras.backend.mean", True)
    plain = "def focal(gt, kw):\n    backend = kw['backend']\n    return backend.mean(gt)\n"
    assert resolve(plain) == (None, False)


def test_only_a_global_statement_makes_functions_be_searched_for_one():
    """Functions are walked for ``global`` declarations (name resolution's injected-submodule
    search) only in a file with a ``global`` statement, not one whose prose says "global"."""
    from kerasfit.semantic.names import _may_declare_globals

    def says(src: str) -> bool:
        return _may_declare_globals(SemanticModel(cst.parse_module(src), "<string>", source=src))

    assert not says("# scale the global batch size\nx = 1  # global\ns = 'global'\n")
    assert says("def f():\n    global G\n    G = 1\n")
    assert says("def f(): global G; G = 1\n")
    assert says("x = 1; global G\n")
    assert says("def f():\r    global G\r    G = 1\r")  # old Mac line ends


def test_submodules_filled_into_module_globals(tmp_path):
    _write(tmp_path, {"m.py": """
        from keras_applications import get_submodules_from_kwargs

        backend = None
        layers = None
        models = None
        keras_utils = None


        def block(x):
            return backend.permute_dimensions(x, (0, 3, 1, 2))


        def Net(**kwargs):
            global backend, layers, models, keras_utils
            backend, layers, models, keras_utils = get_submodules_from_kwargs(kwargs)
            return block(layers.Input((32, 32, 3)))
    """})
    assert _codes(tmp_path, "m.py", select=("KF107",)) == [("m.py", 11, "KF107")]


def test_other_backend_names_are_not_the_framework(tmp_path):
    _write(tmp_path, {"m.py": """
        import tensorflow as tf

        backend = None


        def a(x, config, **kwargs):
            backend = config['backend']  # a user's setting, not the **kwargs idiom
            return backend.permute_dimensions(x, (0, 3, 1, 2))


        def b(x, **kwargs):
            backend, layers, models, utils = load_plugins(kwargs)  # not the keras_applications helper
            return backend.permute_dimensions(x, (0, 3, 1, 2))


        def c(x):
            return backend.permute_dimensions(x, (0, 3, 1, 2))  # a None global nobody fills


        def d(x, **kwargs):
            backend = kwargs['engine']
            return backend.permute_dimensions(x, (0, 3, 1, 2))
    """})
    assert _codes(tmp_path, "m.py", select=("KF107",)) == []


def test_pad_helper_in_another_file_feeds_a_valid_conv(tmp_path):
    # tensorflow/tpu's Mask R-CNN: `spatial_transform_ops.fixed_padding` pads per data
    # format in a helper of a helper; the conv that reads it is in another file
    _write(tmp_path, {
        "spatial_transform_ops.py": """
            import tensorflow.compat.v1 as tf

            def _padding(inputs, paddings, data_format):
                if data_format == 'channels_first':
                    padded_inputs = tf.pad(inputs, [[0, 0], [0, 0], paddings, paddings])
                else:
                    padded_inputs = tf.pad(inputs, [[0, 0], paddings, paddings, [0, 0]])
                return padded_inputs

            def fixed_padding(inputs, kernel_size, data_format='channels_last'):
                pad_total = kernel_size - 1
                return _padding(inputs, (pad_total // 2, pad_total - pad_total // 2), data_format)

            def reflect(inputs):
                return tf.pad(inputs, [[0, 0], [1, 1], [1, 1], [0, 0]], mode='REFLECT')
        """,
        "resnet.py": """
            import tensorflow.compat.v1 as tf

            import spatial_transform_ops

            def conv2d_fixed_padding(inputs, filters, kernel_size, strides, data_format='channels_last'):
                if strides > 1:
                    inputs = spatial_transform_ops.fixed_padding(inputs, kernel_size, data_format=data_format)
                return tf.layers.conv2d(
                    inputs=inputs, filters=filters, kernel_size=kernel_size, strides=strides,
                    padding=('SAME' if strides == 1 else 'VALID'), data_format=data_format)

            def smooth(inputs):
                return tf.layers.conv2d(spatial_transform_ops.reflect(inputs), 16, 3)

            def not_a_pad(inputs):
                return tf.layers.conv2d(tf.nn.relu(inputs), 16, 3)
        """,
    })
    res = check_paths([str(tmp_path / "resnet.py")], CheckOptions(selection=Selection(select=["KF103"]), use_cache=False, jobs=1))
    found = sorted(((d.row, d.fields) for d in res.diagnostics), key=lambda f: f[0])
    assert [row for row, _ in found] == [8, 14]
    assert (found[0][1]["pad"], found[0][1]["conv"]) == ("spatial_transform_ops.fixed_padding", "tf.layers.conv2d")
    assert found[1][1]["not_folded"] == "REFLECT mode is not zero padding"


def test_one_op_on_both_branches_joins_its_arguments(tmp_path):
    _write(tmp_path, {"lib.py": """
        import tensorflow as tf

        def conv(filters, fmt):
            if fmt == 'channels_first':
                return tf.keras.layers.Conv2D(filters, 3, padding='valid', data_format=fmt)
            return tf.keras.layers.Conv2D(filters, 3, padding='same')
    """})
    index = ProjectIndex()
    from kerasfit.semantic.summaries import TOP, consts

    layer = built_layer(index, index.facts(tmp_path / "lib.py"), "conv", [consts(8), TOP], {})
    assert layer is not None and layer.name == "tensorflow.keras.layers.Conv2D"
    assert layer.args == (consts(8), consts(3))
    assert layer.kwargs["padding"] == consts("valid", "same")
    assert layer.kwargs["data_format"] is TOP  # given on one path only


def test_version_switch_in_a_backend_module_keeps_the_framework(tmp_path):
    # keras-cv: `from keras_cv.src.backend import keras`, where the backend package binds
    # `keras` to a Keras 2 shim module on one branch and to `keras` itself on the other
    _write(tmp_path, {
        "kcv/__init__.py": "",
        "kcv/backend/__init__.py": """
            from kcv.backend import config

            if not config.keras_3():
                import kcv.backend.keras2 as keras
            else:
                import keras
        """,
        "kcv/backend/config.py": "def keras_3():\n    return True\n",
        "kcv/backend/keras2.py": "from tensorflow import keras\nfrom tensorflow.keras import *\n",
        "kcv/models/block.py": """
            from kcv.backend import keras

            def apply_conv_bn(inputs, filters, kernel_size=3, strides=1):
                if kernel_size > 1:
                    inputs = keras.layers.ZeroPadding2D(padding=kernel_size // 2)(inputs)
                return keras.layers.Conv2D(filters, kernel_size, strides=strides, padding="valid")(inputs)
        """,
    })
    index = ProjectIndex()
    sym = index.resolve(str(tmp_path / "kcv/models/block.py"), "kcv.backend.keras.layers.Conv2D")
    assert sym is not None and sym.kind == "framework" and sym.raw == "keras.layers.Conv2D"
    assert _codes(tmp_path, "kcv/models/block.py", select=("KF103",)) == [("block.py", 6, "KF103")]


# ---- the tree-wide answers, computed once per run ------------------------------------------
_REACH_TREE = {
    "boxes.py": _BOX_HELPER,
    "enc.py": """
        def encode(y):
            return y

        def scale(x):
            return x
    """,
    "model.py": """
        import functools
        import tensorflow as tf
        from boxes import to_corners
        from enc import encode, scale

        class Net(tf.keras.Model):
            def call(self, x):
                # lambdas handed over by position and by keyword run in the input pipeline
                self.ds = self.ds.map(lambda a, b: (a, encode(b)))
                self.ds = self.ds.filter(predicate=lambda a, b: to_corners(b))
                return scale(x)

        def make(ds):
            return ds.map(functools.partial(scale, 2))

        tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")
    """,
}


def test_tree_wide_answers_from_per_file_parts_are_the_whole_trees(tmp_path):
    from kerasfit.semantic.index import join_reach

    _write(tmp_path, _REACH_TREE)
    whole = ProjectIndex([tmp_path])
    enc, boxes = tmp_path / "enc.py", tmp_path / "boxes.py"
    assert whole.input_only(enc, "encode") and whole.input_only(boxes, "to_corners")
    assert whole.reached_from_model(enc, "scale") and not whole.input_only(enc, "scale")
    assert not whole.reached_from_model(enc, "encode")
    assert whole.dtype_policies() == ("bfloat16",) and whole.imported_by_others(enc)
    # each file's part computed by an index of its own (as a worker process does), joined
    files = whole.reach_files()
    joined = join_reach([ProjectIndex([tmp_path]).reach_part(f) for f in files])
    assert joined == whole._reached_quietly()


def test_a_parallel_check_computes_the_tree_wide_answers_once_from_its_workers_parts(tmp_path):
    from kerasfit.project.check import _Job, _execute, settings_for

    _write(tmp_path, _REACH_TREE)
    for i in range(5):  # enough files for worker processes
        _write(tmp_path, {f"extra{i}.py": "import tensorflow as tf\ndef f(a, b):\n    return tf.concat([a, b], -1)[..., 1:]\n"})
    # a package's __init__ is imported by `from . import x`, which no scan sees: its
    # answers need the whole tree's
    _write(tmp_path, {"__init__.py": "import tensorflow as tf\ndef g(x):\n    return tf.nn.relu(x)\n"})
    paths = sorted(str(p) for p in tmp_path.glob("*.py"))
    work = [(_Job(p, settings_for(p), False, False), Path(p).read_text()) for p in paths]
    index = ProjectIndex([tmp_path])
    results = _execute(work, 2, index, tree_wide=True)
    assert all(r.error is None for r in results)
    # the parent holds the answers its workers' parts made, equal to computing them here
    assert index._reach is not None and index._reach == ProjectIndex([tmp_path])._reached_quietly()
    # and a file whose checks asked for them depends on every file of the tree
    assert any(r.tree_wide for r in results) and set(index.tree_digests()) == set(paths)
    # rules reading no project: nothing is computed ahead, and the workers, asking for
    # the answers themselves, find the same
    lazy_index = ProjectIndex([tmp_path])
    lazy = _execute(work, 2, lazy_index, tree_wide=False)
    assert lazy_index._reach is None and lazy_index.scanned_files() == 0
    assert [[d.to_dict() for d in r.diagnostics] for r in lazy] == [[d.to_dict() for d in r.diagnostics] for r in results]


def test_a_parallel_check_of_files_few_others_import_starts_the_checks_at_once(tmp_path):
    from kerasfit.project.check import _Job, _execute, settings_for

    # (under a directory not named like a module: the files beside it are read, not the
    # whole disk's, to know that none imports into the tree)
    tmp_path = tmp_path / "a-project"
    _write(tmp_path, _REACH_TREE)
    for i in range(5):
        _write(tmp_path, {f"extra{i}.py": "import tensorflow as tf\ndef f(a, b):\n    return tf.concat([a, b], -1)[..., 1:]\n"})
    paths = sorted(str(p) for p in tmp_path.glob("*.py"))
    work = [(_Job(p, settings_for(p), False, False), Path(p).read_text()) for p in paths]
    index = ProjectIndex([tmp_path])
    results = _execute(work, 2, index, tree_wide=True)
    # no pass over the whole tree before the checks: each worker answered from the few
    # files that decide each answer, and found what one process finds
    assert index._reach is None
    alone = _execute(work, 1, ProjectIndex([tmp_path]), tree_wide=True)
    assert [[d.to_dict() for d in r.diagnostics] for r in results] == [[d.to_dict() for d in r.diagnostics] for r in alone]
    assert [r.tree_wide for r in results] == [r.tree_wide for r in alone] and any(r.tree_wide for r in results)
    assert set(index.tree_digests()) == set(paths)


def test_the_checked_texts_facts_are_reused_when_the_tree_read_the_same_text(tmp_path):
    _write(tmp_path, {"enc.py": "def encode(y):\n    return y\n"})
    index = ProjectIndex([tmp_path])
    read = index.facts(tmp_path / "enc.py")
    assert read is not None
    assert index.facts(tmp_path / "enc.py", source="def encode(y):\n    return y\n") is read
    edited = index.facts(tmp_path / "enc.py", source="def encode(y):\n    return 2 * y\n")
    assert edited is not None and edited is not read and edited.digest != read.digest
    # the same text under another path is that path's own facts
    other = index.facts(tmp_path / "copy.py", source="def encode(y):\n    return y\n")
    assert other is not None and other is not read and other.path.endswith("copy.py")


def test_a_result_resting_on_the_whole_tree_names_the_tree_kept_once_in_the_cache(tmp_path):
    _write(tmp_path, _REACH_TREE)
    for i in range(3):
        _write(tmp_path, {f"extra{i}.py": "import tensorflow as tf\ndef f(a, b):\n    return tf.concat([a, b], -1)[..., 1:]\n"})
    opts = CheckOptions(cache_dir=tmp_path / ".cache", jobs=1)
    first = check_paths([str(tmp_path)], opts)
    data = json.loads(next((tmp_path / ".cache").glob("results-*.json")).read_text())
    files = sorted(str(p.resolve()) for p in tmp_path.glob("*.py"))
    named = {e["tree"] for e in data["files"].values() if "tree" in e}
    # the tree's hashes once, not in every entry's own dependencies
    assert len(named) == 1 and sorted(data["trees"][named.pop()]) == files
    assert all(len(e.get("deps", {})) < len(files) - 1 for e in data["files"].values())
    second = check_paths([str(tmp_path)], opts)
    assert all(r.cached for r in second.files if not r.skipped)
    # another file of the tree changes: every result resting on the tree is checked again
    (tmp_path / "enc.py").write_text("def encode(y):\n    return y + 1\n\ndef scale(x):\n    return x\n")
    third = {Path(r.filename).name: r for r in check_paths([str(tmp_path)], opts).files}
    tree_wide = {Path(r.filename).name for r in first.files if r.tree_wide}
    assert tree_wide and all(not third[n].cached for n in tree_wide)
    assert [d.to_dict() for r in first.files for d in r.diagnostics] == [d.to_dict() for r in third.values() for d in r.diagnostics]
