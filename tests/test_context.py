"""The engine's reach (kerasfit/semantic/model.py), on real parsed code."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from kerasfit.semantic.model import SemanticModel
from kerasfit.semantic.nodes import UNKNOWN


def _ctx(src: str, **options) -> SemanticModel:
    src = textwrap.dedent(src)
    return SemanticModel(cst.parse_module(src), "t.py", options=options, source=src)


def _nodes(ctx: SemanticModel, kind: type, code: str | None = None) -> list:
    out = []

    class V(cst.CSTVisitor):
        def on_visit(self, node):
            if isinstance(node, kind) and (code is None or ctx.module.code_for_node(node) == code):
                out.append(node)
            return True

    ctx.module.visit(V())
    return out


def _one(ctx: SemanticModel, kind: type, code: str):
    found = _nodes(ctx, kind, code)
    assert found, f"no {kind.__name__} {code!r}"
    return found[0]


def _const(ctx: SemanticModel, node) -> object:
    return ctx.values.const(node, scopes=ctx.scopes.scopes_of(node))


def _func(ctx: SemanticModel, name: str) -> cst.FunctionDef:
    return next(f for f in _nodes(ctx, cst.FunctionDef) if f.name.value == name)


def _kw(ctx: SemanticModel, call_code_prefix: str, kw: str) -> cst.BaseExpression:
    for call in _nodes(ctx, cst.Call):
        if ctx.module.code_for_node(call).startswith(call_code_prefix):
            for a in call.args:
                if a.keyword is not None and a.keyword.value == kw:
                    return a.value
    raise AssertionError(f"{call_code_prefix}(... {kw}=) not found")


# ---- constants ---------------------------------------------------------------


def test_param_folds_to_the_constant_every_call_site_passes():
    ctx = _ctx(
        """
        import tensorflow as tf
        def _conv_block(x, dim):
            return tf.keras.layers.Conv2D(filters=dim, kernel_size=3)(x)
        y = _conv_block(x, 30)
        z = _conv_block(y, dim=30)
        """
    )
    assert _const(ctx, _kw(ctx, "tf.keras.layers.Conv2D", "filters")) == 30


def test_param_with_disagreeing_call_sites_is_unknown_but_param_values_lists_them():
    ctx = _ctx(
        """
        import tensorflow as tf
        def block(x, dim=64):
            return tf.keras.layers.Conv2D(dim, 3)(x)
        a = block(x, 30)
        b = block(a)
        """
    )
    dim = _one(ctx, cst.Name, "dim")  # first occurrence is the parameter
    use = [n for n in _nodes(ctx, cst.Name, "dim") if n is not dim][0]
    assert _const(ctx, use) is UNKNOWN
    vals = ctx.values.param_values(_func(ctx, "block"), "dim")
    assert [(v.const, v.passed) for v in vals] == [(30, True), (64, False)]
    assert [ctx.module.code_for_node(v.call) for v in vals] == ["block(x, 30)", "block(a)"]
    assert ctx.values.call_sites(_func(ctx, "block")).complete


def test_escaping_function_falls_back_to_its_default():
    ctx = _ctx(
        """
        import tensorflow as tf
        def block(x, dim=64):
            return tf.keras.layers.Conv2D(dim, 3)(x)
        a = block(x, 30)
        layers = list(map(block, xs))
        """
    )
    assert not ctx.values.call_sites(_func(ctx, "block")).complete
    use = [n for n in _nodes(ctx, cst.Name, "dim")][1]
    assert _const(ctx, use) == 64


def test_method_params_through_self_calls_and_init_through_instantiation():
    ctx = _ctx(
        """
        import tensorflow as tf
        class Block(tf.keras.layers.Layer):
            def __init__(self, filters, kernel=3):
                super().__init__()
                self.filters = filters
                self.kernel = kernel
            def call(self, x):
                return self._conv(x, 48)
            def _conv(self, x, width):
                return tf.nn.relu(x) * width
        b = Block(24)
        c = Block(filters=24, kernel=5)
        """
    )
    assert _const(ctx, _one(ctx, cst.Attribute, "self.filters")) == 24
    width = [n for n in _nodes(ctx, cst.Name, "width")][1]
    assert _const(ctx, width) == 48
    # kernel disagrees (3 by default vs 5)
    kernel_param_use = _nodes(ctx, cst.Name, "kernel")[1]
    assert _const(ctx, kernel_param_use) is UNKNOWN


def test_class_attributes_module_constants_flags_config_and_params_dicts():
    ctx = _ctx(
        """
        import tensorflow as tf
        from absl import flags
        FLAGS = flags.FLAGS
        flags.DEFINE_integer("train_batch_size", 1024, "Global batch.")
        BASE = 16
        class Config:
            filters = BASE * 2
        config = tf.contrib.training.HParams(num_cores=8)
        settings = Settings()
        settings.width = 96
        params = {"batch_size": 128}
        def model_fn(features, labels, mode, params):
            a = params["batch_size"]
            b = FLAGS.train_batch_size
            c = Config.filters
            d = config.num_cores
            e = settings.width
        """
    )
    assert _const(ctx, _one(ctx, cst.Subscript, 'params["batch_size"]')) == 128
    assert _const(ctx, _one(ctx, cst.Attribute, "FLAGS.train_batch_size")) == 1024
    assert _const(ctx, _one(ctx, cst.Attribute, "Config.filters")) == 32
    assert _const(ctx, _one(ctx, cst.Attribute, "config.num_cores")) == 8
    assert _const(ctx, [n for n in _nodes(ctx, cst.Attribute, "settings.width")][1]) == 96


def test_attribute_assigned_twice_or_on_a_parameter_is_unknown():
    ctx = _ctx(
        """
        cfg = Cfg()
        cfg.batch = 32
        def f(other):
            cfg.batch = 64
            return other.batch, cfg.batch
        """
    )
    assert _const(ctx, _nodes(ctx, cst.Attribute, "cfg.batch")[-1]) is UNKNOWN
    assert _const(ctx, _one(ctx, cst.Attribute, "other.batch")) is UNKNOWN


def test_builtins_fold_unless_shadowed():
    ctx = _ctx("a = max(8, 1024 // 8)\ndef g():\n    def max(*a):\n        return 0\n    return max(1, 2)\n")
    assert _const(ctx, _one(ctx, cst.Call, "max(8, 1024 // 8)")) == 128
    assert _const(ctx, _one(ctx, cst.Call, "max(1, 2)")) is UNKNOWN


def test_const_sources_points_at_the_defining_literal():
    ctx = _ctx(
        """
        import tensorflow as tf
        DATA_FORMAT = "channels_first"
        def conv(x, data_format=DATA_FORMAT):
            return tf.layers.conv2d(x, 64, 3, data_format=data_format)
        """
    )
    srcs = ctx.values.const_sources(_kw(ctx, "tf.layers.conv2d", "data_format"))
    assert [ctx.module.code_for_node(s) for s in srcs] == ['"channels_first"']


# ---- data flow ---------------------------------------------------------------

RESNET = """
import tensorflow.compat.v1 as tf

def fixed_padding(inputs, kernel_size, data_format):
    pad_total = kernel_size - 1
    pad_beg = pad_total // 2
    pad_end = pad_total - pad_beg
    if data_format == "channels_first":
        padded_inputs = tf.pad(inputs, [[0, 0], [0, 0], [pad_beg, pad_end], [pad_beg, pad_end]])
    else:
        padded_inputs = tf.pad(inputs, [[0, 0], [pad_beg, pad_end], [pad_beg, pad_end], [0, 0]])
    return padded_inputs

def conv2d_fixed_padding(inputs, filters, kernel_size, strides, data_format):
    if strides > 1:
        inputs = fixed_padding(inputs, kernel_size, data_format)
    return tf.layers.conv2d(
        inputs=inputs, filters=filters, kernel_size=kernel_size, strides=strides,
        padding=("SAME" if strides == 1 else "VALID"), use_bias=False, data_format=data_format)

def stem(images):
    x = fixed_padding(images, 7, "channels_last")
    return tf.layers.conv2d(x, 64, 7, strides=2, padding="VALID")
"""


def test_origin_follows_a_same_file_padding_helper():
    ctx = _ctx(RESNET)
    stem_conv = _one(ctx, cst.Call, 'tf.layers.conv2d(x, 64, 7, strides=2, padding="VALID")')
    o = ctx.values.origin(stem_conv.args[0].value)
    assert o is not None and o.name == "tf.pad"
    assert not o.conditional  # both branches of the helper's if/else pad
    assert ctx.module.code_for_node(o.via[0]) == 'fixed_padding(images, 7, "channels_last")'
    assert ctx.values.origin_call(stem_conv.args[0].value) is o.call


def test_origin_is_conditional_when_a_path_skips_the_pad():
    ctx = _ctx(RESNET)
    inputs = _kw(ctx, "tf.layers.conv2d(\n", "inputs")
    o = ctx.values.origin(inputs)
    assert o is not None and o.name == "tf.pad" and o.conditional
    assert len(ctx.values.origins(inputs)) == 2


def test_origin_through_a_layer_application_and_a_direct_call():
    ctx = _ctx(
        """
        import tensorflow as tf
        from tensorflow.keras import layers
        x = layers.ZeroPadding2D(1)(inputs)
        y = layers.Conv2D(64, 3)(x)
        """
    )
    x_use = _one(ctx, cst.Call, "layers.Conv2D(64, 3)(x)").args[0].value
    o = ctx.values.origin(x_use)
    assert o is not None and o.name == "keras.layers.ZeroPadding2D" and o.via == ()


def test_reaching_bindings_in_straight_line_and_branches():
    ctx = _ctx(
        """
        def f(ds, training):
            ds = ds.map(parse)
            ds = ds.batch(32)
            if training:
                ds = ds.repeat()
            return ds
        """
    )
    ret = _nodes(ctx, cst.Return)[0].value
    bs = ctx.scopes.reaching_bindings(ret)
    assert [ctx.module.code_for_node(b.value) for b in bs] == ["ds.repeat()", "ds.batch(32)"]
    batch_recv = _one(ctx, cst.Call, "ds.batch(32)").func.value
    assert [ctx.module.code_for_node(b.value) for b in ctx.scopes.reaching_bindings(batch_recv)] == ["ds.map(parse)"]


def test_call_chain_across_lines_and_a_helper():
    ctx = _ctx(
        """
        import tensorflow as tf
        def load(files):
            return tf.data.TFRecordDataset(files).map(parse)
        ds = load(files)
        ds = ds.shuffle(1000)
        ds = ds.batch(64)
        """
    )
    chain = ctx.values.call_chain(_one(ctx, cst.Call, "ds.batch(64)"))
    assert [ctx.module.code_for_node(c.func) for c in chain] == [
        "tf.data.TFRecordDataset", "tf.data.TFRecordDataset(files).map", "ds.shuffle", "ds.batch",
    ]


# ---- roles -----------------------------------------------------------------------

ROLES = """
import tensorflow as tf
import tensorflow_datasets as tfds

def parse(record):
    return tf.io.parse_single_example(record, FEATURES)

def augment(image, label):
    return tf.image.random_flip_left_right(image), label

def make_dataset(files):
    return tf.data.TFRecordDataset(files).map(parse).map(augment).map(lambda x, y: (x / 255, y))

def conv_bn(x, filters):
    x = tf.keras.layers.Conv2D(filters, 3)(x)
    return tf.keras.layers.BatchNormalization()(x)

def scale(x):
    return x * 2

def build_model():
    inputs = tf.keras.Input((32, 32, 3))
    return tf.keras.Model(inputs, scale(conv_bn(inputs, 64)))

class Net(tf.keras.Model):
    def call(self, x):
        return self.helper(x)
    def helper(self, x):
        return x
    def summary_text(self):
        return "net"

@tf.function
def train_step(batch):
    def step_fn(inputs):
        return inputs
    return strategy.run(step_fn, args=(batch,))

def replica_fn(x):
    return x

def model_fn(features, labels, mode, params):
    return tf.estimator.EstimatorSpec(mode)

def host_log(x):
    return x

def main():
    ds = make_dataset(FILES)
    model = build_model()
    model.compile("adam", "mse")
    model.fit(ds)
    tf.py_function(host_log, [1], [])
"""


@pytest.mark.parametrize(
    "name,role",
    [
        ("parse", "input"),
        ("augment", "input"),
        ("make_dataset", "input"),
        ("conv_bn", "model"),
        ("scale", "model"),  # a helper called only from model code
        ("build_model", "model"),
        ("call", "model"),
        ("helper", "model"),
        ("summary_text", "other"),
        ("train_step", "model"),
        ("step_fn", "model"),
        ("model_fn", "model"),
        ("host_log", "other"),
        ("main", "other"),
    ],
)
def test_function_roles(name, role):
    ctx = _ctx(ROLES)
    assert ctx.roles.function_role(_func(ctx, name)) == role


def test_lambda_given_to_dataset_map_is_input():
    ctx = _ctx(ROLES)
    lam = _nodes(ctx, cst.Lambda)[0]
    assert ctx.roles.function_role(lam) == "input"
    assert ctx.roles.function_role(None) == "other"


def test_uses_tpu():
    assert _ctx("import tensorflow as tf\nr = tf.distribute.cluster_resolver.TPUClusterResolver()\n").roles.uses_tpu
    assert _ctx("import tensorflow.compat.v1 as tf\ne = tf.estimator.tpu.TPUEstimator(model_fn=f)\n").roles.uses_tpu
    assert not _ctx("import tensorflow as tf\ns = tf.distribute.MirroredStrategy()\n# tpu later\n").roles.uses_tpu
    assert not _ctx("TPUStrategy = object\ns = TPUStrategy()\n").roles.uses_tpu


def test_index_is_built_once_and_only_on_demand():
    ctx = _ctx("import tensorflow as tf\nx = 1\ny = x + 1\n")
    assert ctx.scopes.built_index is None
    assert ctx.values.const(_one(ctx, cst.BinaryOperation, "x + 1"), scopes=[ctx.module]) == 2
    assert ctx.scopes.built_index is None  # a module constant needs no index
    first = ctx.index
    ctx.roles.function_role(None)
    assert ctx.index is first


def test_names_unpacked_from_one_statement_fold_to_their_own_values():
    # the fold memo is keyed by binding statement; two names of one tuple assignment
    # must not share an entry (C_OUT once folded to F_H's 5)
    ctx = _ctx(
        """
        F_H, F_W, C_OUT = 5, 5, 32
        a = F_H
        b = C_OUT
        c = F_W
        """
    )
    names = [n for n in _nodes(ctx, cst.Name) if n.value in ("F_H", "C_OUT", "F_W")][3:]
    assert [_const(ctx, n) for n in names] == [5, 32, 5]


def test_an_empty_subclass_is_its_first_framework_base_renamed():
    ctx = _ctx('''
        import tensorflow.compat.v1 as tf

        class DepthwiseConv2D(tf.keras.layers.DepthwiseConv2D, tf.layers.Layer):
            """Wrap keras DepthwiseConv2D to tf.layers."""
            pass

        class Conv2D(tf.layers.Conv2D):
            def _bias_activation(self, outputs):
                return outputs

        class Plain(object):
            pass

        a = DepthwiseConv2D(3)
        b = Conv2D(8, 3)
        c = Plain()
    ''')
    names = {ctx.module.code_for_node(c.func): ctx.names.call_name(c) for c in _nodes(ctx, cst.Call)}
    assert names["DepthwiseConv2D"] == "keras.layers.DepthwiseConv2D"
    assert names["Conv2D"] is None  # it overrides a method: not a mere rename
    assert names["Plain"] is None
