"""The one table of TensorFlow / Keras spellings (STYLE 9).

Every raw dotted name that the resolver produces from imports (``tensorflow.keras.
layers.Conv2D``, ``tf_keras.layers.Convolution2D``, ``tensorflow.compat.v1.layers.
conv2d`` …) is rewritten here to one canonical name, so rules compare against a single
spelling: ``keras.layers.Conv2D``, ``tf.layers.conv2d``, ``tf.nn.conv2d``, ``tf.pad``.
"""

from __future__ import annotations

from functools import lru_cache

# Top-level modules whose import makes a file worth parsing (the prefilter) and whose
# names the resolver follows.
ROOT_MODULES = ("tensorflow", "keras", "tf_keras")

# Prefix rewrites, applied in order, longest first within each step.
_PREFIXES: tuple[tuple[str, str], ...] = (
    ("tensorflow.compat.v1.", "tf."),
    ("tensorflow.compat.v2.", "tf."),
    ("tensorflow._api.v2.", "tf."),
    ("tensorflow.python.keras.", "keras."),
    ("tensorflow.keras.", "keras."),
    ("tensorflow.", "tf."),
    ("tf.keras.", "keras."),
    ("tf_keras.", "keras."),
    ("keras.api.", "keras."),
    ("keras._tf_keras.keras.", "keras."),
    # slim (tf.contrib.slim, and the tf_slim package, see IMPORT_SPELLINGS) and the
    # contrib.layers implementation modules re-export tf.contrib.layers' ops and regularizers
    ("tf.contrib.keras.", "keras."),  # tf.keras before it left contrib (TF 1.3)
    ("tf.contrib.slim.layers.regularizers.", "tf.contrib.layers."),
    ("tf.contrib.slim.layers.layers.", "tf.contrib.layers."),
    ("tf.contrib.slim.layers.", "tf.contrib.layers."),
    ("tf.contrib.slim.", "tf.contrib.layers."),
    ("tf.contrib.layers.python.layers.regularizers.", "tf.contrib.layers."),
    ("tf.contrib.layers.python.layers.layers.", "tf.contrib.layers."),
    ("tf.contrib.layers.python.layers.", "tf.contrib.layers."),
    # TensorFlow's internal modules behind the public ops (tensorflow/python/ops/*)
    ("tf.python.ops.array_ops.", "tf."),
    ("tf.python.ops.gen_array_ops.", "tf."),
    ("tf.python.ops.math_ops.", "tf."),
    ("tf.python.ops.gen_math_ops.", "tf."),
    ("tf.python.ops.nn_ops.", "tf.nn."),
    ("tf.python.ops.gen_nn_ops.", "tf.nn."),
    ("tf.python.ops.nn_impl.", "tf.nn."),
    ("tf.python.ops.nn.", "tf.nn."),
    ("tf.python.layers.convolutional.", "tf.layers."),
    ("tf.python.layers.layers.", "tf.layers."),
    ("tf.math.", "tf."),
    ("tf.linalg.matmul", "tf.matmul"),
    ("tf.compat.v1.", "tf."),
)

# Packages that are TensorFlow under another top-level name: an import of the key is
# read as an import of the value (``import tf_slim as slim`` is ``tf.contrib.slim``).
IMPORT_SPELLINGS: dict[str, str] = {"tf_slim": "tensorflow.contrib.slim"}


# The name everyone binds TensorFlow to: a file that reads it without binding it anywhere
# (its import dropped by an export, or made by a project module's ``import *``) means TF.
UNBOUND_FRAMEWORK_NAMES: dict[str, str] = {"tf": "tensorflow"}


def import_spelling(module: str) -> str:
    """The dotted module an import names, with :data:`IMPORT_SPELLINGS` applied."""
    head, dot, rest = module.partition(".")
    new = IMPORT_SPELLINGS.get(head)
    return f"{new}{dot}{rest}" if new is not None else module


# absl / tf.compat.v1.flags definers: ``DEFINE_integer("batch_size", 64, "..")``.
FLAG_DEFINERS = frozenset({"DEFINE_integer", "DEFINE_float", "DEFINE_string", "DEFINE_bool", "DEFINE_boolean", "DEFINE_enum"})

# Keras sub-namespaces whose public members are re-exported at the family root:
# keras.layers.convolutional.Conv2D -> keras.layers.Conv2D.
_FAMILIES = ("layers", "regularizers", "optimizers", "ops", "backend", "losses", "activations", "mixed_precision")

# Old or alternative spellings of one symbol.
_SYNONYMS: dict[str, str] = {
    "keras.layers.Convolution1D": "keras.layers.Conv1D",
    "keras.layers.Convolution2D": "keras.layers.Conv2D",
    "keras.layers.Convolution3D": "keras.layers.Conv3D",
    "keras.layers.Convolution1DTranspose": "keras.layers.Conv1DTranspose",
    "keras.layers.Convolution2DTranspose": "keras.layers.Conv2DTranspose",
    "keras.layers.Convolution3DTranspose": "keras.layers.Conv3DTranspose",
    "keras.layers.Deconvolution2D": "keras.layers.Conv2DTranspose",
    "keras.layers.Deconvolution3D": "keras.layers.Conv3DTranspose",
    "keras.layers.SeparableConvolution1D": "keras.layers.SeparableConv1D",
    "keras.layers.SeparableConvolution2D": "keras.layers.SeparableConv2D",
    "keras.layers.DepthwiseConvolution2D": "keras.layers.DepthwiseConv2D",
    "keras.layers.MaxPool1D": "keras.layers.MaxPooling1D",
    "keras.layers.MaxPool2D": "keras.layers.MaxPooling2D",
    "keras.layers.MaxPool3D": "keras.layers.MaxPooling3D",
    "keras.layers.AvgPool1D": "keras.layers.AveragePooling1D",
    "keras.layers.AvgPool2D": "keras.layers.AveragePooling2D",
    "keras.layers.AvgPool3D": "keras.layers.AveragePooling3D",
    "keras.layers.experimental.SyncBatchNormalization": "keras.layers.BatchNormalization",
    "keras.regularizers.L2": "keras.regularizers.l2",
    "keras.regularizers.L1L2": "keras.regularizers.l1_l2",
    "keras.backend.permute_dimensions": "keras.ops.transpose",
    "keras.backend.concatenate": "keras.ops.concatenate",
    "tf.layers.Conv2D": "tf.layers.conv2d",
    "tf.layers.Dense": "tf.layers.dense",
    "tf.layers.BatchNormalization": "tf.layers.batch_normalization",
    "tf.random.multinomial": "tf.random.categorical",
    "tf.multinomial": "tf.random.categorical",
    "tf.space_to_depth": "tf.nn.space_to_depth",
    "tf.depth_to_space": "tf.nn.depth_to_space",
    "tf.space_to_batch": "tf.space_to_batch_nd",
    "tf.nn.space_to_batch": "tf.space_to_batch_nd",
    "tf.batch_to_space": "tf.batch_to_space_nd",
    "tf.nn.batch_to_space": "tf.batch_to_space_nd",
    "tf.concat_v2": "tf.concat",
    "tf.nn.convolution": "tf.nn.conv2d",
    "tf.nn.conv2d_v2": "tf.nn.conv2d",
    "tf.nn.conv1d_v2": "tf.nn.conv1d",
    "tf.mul": "tf.multiply",
    "tf.div": "tf.divide",
    "tf.truediv": "tf.divide",
    "tf.negative": "tf.negative",
    "tf.numpy_function": "tf.numpy_function",
    "tf.py_func": "tf.py_func",
    "keras.layers.Layer": "keras.layers.Layer",
    "keras.models.Model": "keras.Model",
    "keras.engine.training.Model": "keras.Model",
    "keras.models.Sequential": "keras.Sequential",
    "tf.distribute.experimental.TPUStrategy": "tf.distribute.TPUStrategy",
    "tf.contrib.tpu.TPUEstimator": "tf.estimator.tpu.TPUEstimator",
    "tf.compat.v1.estimator.tpu.TPUEstimator": "tf.estimator.tpu.TPUEstimator",
}


@lru_cache(maxsize=4096)
def canonical(raw: str) -> str:
    """Map a fully-qualified raw dotted name to its canonical spelling."""
    name = raw
    for old, new in _PREFIXES:
        if name.startswith(old):
            name = new + name[len(old) :]
    if name in ("tensorflow", "tensorflow.compat.v1", "tensorflow.compat.v2"):
        return "tf"
    if name in ("tensorflow.keras", "tf.keras", "tf_keras"):
        return "keras"
    parts = name.split(".")
    # keras.layers.convolutional.conv2d.Conv2D / keras.src.layers... -> keras.layers.Conv2D
    if parts[0] == "keras" and len(parts) > 3:
        rest = parts[2:] if parts[1] == "src" else parts[1:]
        if rest and rest[0] in _FAMILIES and (len(rest) > 2 or parts[1] == "src"):
            name = f"keras.{rest[0]}.{rest[-1]}"
    return _SYNONYMS.get(name, name)


def flavour(raw: str) -> str:
    """Which Keras a raw name comes from: 'keras3', 'tf_keras', 'tf.keras' or 'tf'.

    ``tf.keras`` is Keras 3 under TF >= 2.16 and tf-keras before, or with
    ``TF_USE_LEGACY_KERAS=1`` (docs/facts.md#22); rules that care decide per file.
    """
    if raw.startswith("tf_keras") or raw.startswith("tensorflow.python.keras"):
        return "tf_keras"
    if raw.startswith(("tensorflow.compat.v1.keras", "tensorflow.keras", "tensorflow.compat.v2.keras")):
        return "tf.keras"
    if raw.startswith("keras"):
        return "keras3"
    return "tf"


# Convolution-like layer classes and functions and where their output-channel
# argument sits: canonical name -> (keyword, positional index).
CONV_LAYERS: dict[str, tuple[str, int]] = {
    "keras.layers.Conv1D": ("filters", 0),
    "keras.layers.Conv2D": ("filters", 0),
    "keras.layers.Conv3D": ("filters", 0),
    "keras.layers.Conv1DTranspose": ("filters", 0),
    "keras.layers.Conv2DTranspose": ("filters", 0),
    "keras.layers.Conv3DTranspose": ("filters", 0),
    "keras.layers.SeparableConv1D": ("filters", 0),
    "keras.layers.SeparableConv2D": ("filters", 0),
    "keras.layers.ConvLSTM2D": ("filters", 0),
    "tf.layers.conv1d": ("filters", 1),
    "tf.layers.conv2d": ("filters", 1),
    "tf.layers.conv3d": ("filters", 1),
    "tf.layers.conv2d_transpose": ("filters", 1),
    "tf.layers.conv3d_transpose": ("filters", 1),
    "tf.layers.separable_conv2d": ("filters", 1),
    "tf.layers.separable_conv1d": ("filters", 1),
}
DENSE_LAYERS: dict[str, tuple[str, int]] = {
    "keras.layers.Dense": ("units", 0),
    "tf.layers.dense": ("units", 1),
    "keras.layers.LSTM": ("units", 0),
    "keras.layers.GRU": ("units", 0),
    "keras.layers.SimpleRNN": ("units", 0),
}
# Keras 1 keywords for the output width (`Convolution2D(nb_filter=12, nb_row=3, nb_col=3)`,
# `Dense(output_dim=10)`): the first positional argument is the width in both versions.
KERAS1_WIDTH_KEYWORDS = {"filters": "nb_filter", "units": "output_dim"}
# Ops that consume a tensor as a convolution input: canonical -> (input kw, index).
CONV_CALLS = {
    **{k: ("inputs", 0) for k in CONV_LAYERS},
    "keras.layers.DepthwiseConv2D": ("inputs", 0),
    "tf.nn.conv1d": ("input", 0),
    "tf.nn.conv2d": ("input", 0),
    "tf.nn.conv3d": ("input", 0),
    "tf.nn.depthwise_conv2d": ("input", 0),
    "tf.nn.separable_conv2d": ("input", 0),
    "tf.nn.atrous_conv2d": ("value", 0),
}
# Layers and ops whose output has a known rank (batch and channels included): what a
# fused batch norm after them may rely on (it takes 4-D or 5-D input only). Keras'
# 2-D convolutions accept extra leading batch dimensions, so this is the rank for the
# ordinary image input they are written for.
SPATIAL_OUTPUT_RANK = {
    **{f"keras.layers.{n}": 4 for n in (
        "Conv2D", "Conv2DTranspose", "SeparableConv2D", "DepthwiseConv2D", "MaxPooling2D",
        "AveragePooling2D", "ZeroPadding2D", "UpSampling2D", "Cropping2D",
    )},
    **{f"keras.layers.{n}": 5 for n in (
        "Conv3D", "Conv3DTranspose", "MaxPooling3D", "AveragePooling3D", "ZeroPadding3D", "UpSampling3D", "Cropping3D",
    )},
    **{f"tf.layers.{n}": 4 for n in ("conv2d", "conv2d_transpose", "separable_conv2d", "max_pooling2d", "average_pooling2d")},
    **{f"tf.layers.{n}": 5 for n in ("conv3d", "conv3d_transpose", "max_pooling3d", "average_pooling3d")},
}
# Functional convolutions (semantic.shapes): output rank, and where the output width sits.
FUNCTIONAL_CONV_RANK = {"tf.contrib.layers.conv2d": 4, "tf.nn.conv2d": 4, "tf.nn.conv1d": 3, "tf.nn.conv3d": 5,
                        "tf.contrib.layers.conv2d_transpose": 4, "tf.contrib.layers.separable_conv2d": 4}
FUNCTIONAL_CONVS = {"tf.contrib.layers.conv2d": ("num_outputs", 1), "tf.contrib.layers.conv2d_transpose": ("num_outputs", 1)}
# Layers whose output has their input's shape (semantic.shapes).
SAME_SHAPE_LAYERS = frozenset({
    "BatchNormalization", "LayerNormalization", "GroupNormalization", "Dropout", "SpatialDropout2D", "Activation",
    "ReLU", "LeakyReLU", "PReLU", "ELU", "Softmax", "GaussianNoise", "batch_normalization", "dropout",
})
# Ops (by short name, in tf / keras.ops / keras.backend) whose result has their operands'
# broadcast shape, and reductions (semantic.shapes).
SAME_SHAPE_OPS = frozenset({
    "cast", "exp", "log", "log1p", "expm1", "sigmoid", "tanh", "relu", "relu6", "gelu", "silu", "swish", "elu",
    "selu", "leaky_relu", "softplus", "softsign", "softmax", "log_softmax", "abs", "square", "sqrt", "rsqrt",
    "negative", "sign", "sin", "cos", "erf", "floor", "ceil", "round", "clip_by_value", "clip", "cumsum", "cumprod",
    "identity", "stop_gradient", "dropout", "ones_like", "zeros_like", "reciprocal", "roll", "reverse", "flip",
    "l2_normalize", "normalize", "bias_add", "add", "subtract", "multiply", "divide", "true_divide", "maximum",
    "minimum", "pow", "power", "where", "greater", "less", "greater_equal", "less_equal", "equal", "not_equal",
    "logical_and", "logical_or", "logical_not", "floor_divide", "mod", "squared_difference", "sort", "triu", "tril",
    "isnan", "isinf", "isfinite",
})
ELEMENTWISE_NARY = frozenset({
    "add", "subtract", "multiply", "divide", "true_divide", "maximum", "minimum", "pow", "power", "where", "greater",
    "less", "greater_equal", "less_equal", "equal", "not_equal", "logical_and", "logical_or", "floor_divide", "mod",
    "squared_difference",
})
SHAPE_REDUCTIONS = frozenset({
    "sum", "mean", "max", "min", "prod", "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod",
    "reduce_any", "reduce_all", "reduce_logsumexp", "logsumexp", "std", "var", "any", "all",
})
BATCHNORM_LAYERS = {
    "keras.layers.BatchNormalization",
    "tf.layers.batch_normalization",
    "keras.layers.SyncBatchNormalization",
}
ZERO_PADDING_LAYERS = {
    "keras.layers.ZeroPadding1D": 1,
    "keras.layers.ZeroPadding2D": 2,
    "keras.layers.ZeroPadding3D": 3,
}
MODEL_BASES = {"keras.Model", "keras.layers.Layer", "keras.Sequential"}

# Ops that consume a model's output (activations, losses, pixel shuffle): a layer
# feeding one directly has a width fixed by the task, not by the architect (KF102).
HEAD_CONSUMERS = {
    "tf.nn.softmax",
    "tf.nn.log_softmax",
    "tf.nn.sigmoid",
    "tf.sigmoid",
    "keras.activations.softmax",
    "keras.activations.sigmoid",
    "keras.ops.softmax",
    "keras.ops.sigmoid",
    "keras.ops.log_softmax",
    "tf.nn.softmax_cross_entropy_with_logits",
    "tf.nn.softmax_cross_entropy_with_logits_v2",
    "tf.nn.sparse_softmax_cross_entropy_with_logits",
    "tf.nn.sigmoid_cross_entropy_with_logits",
    "tf.nn.depth_to_space",
}
HEAD_ACTIVATIONS = {"softmax", "sigmoid", "log_softmax"}
# What builds a model (or a TF1 model_fn's result) from layers (KF102 "last layer").
MODEL_CONSTRUCTORS = {
    "keras.Model",
    "keras.Sequential",
    "tf.estimator.EstimatorSpec",
    "tf.estimator.tpu.TPUEstimatorSpec",
}
# L2 weight penalties (KF104): canonical callee -> keyword carrying the L2 factor.
L2_REGULARIZERS = {
    "keras.regularizers.l2": "l2",
    "keras.regularizers.l1_l2": "l2",
    "tf.contrib.layers.l2_regularizer": "scale",
    "tf.keras.regularizers.l2": "l2",
}
L2_REGULARIZER_STRINGS = {"l2", "l1_l2"}
# Layer/function arguments that take a weight regularizer (activity_regularizer
# penalizes activations, which no optimizer setting can replace).
WEIGHT_REGULARIZER_ARGS = (
    "kernel_regularizer",
    "bias_regularizer",
    "depthwise_regularizer",
    "pointwise_regularizer",
    "recurrent_regularizer",
    "embeddings_regularizer",
    "beta_regularizer",
    "gamma_regularizer",
    "regularizer",  # tf.get_variable / add_weight
    # Keras 1 spellings (still in old model zoos): W = kernel, b = bias, U = recurrent
    "W_regularizer",
    "b_regularizer",
    "U_regularizer",
    # tf.contrib.layers / slim spellings (also as `slim.arg_scope` defaults)
    "weights_regularizer",
    "biases_regularizer",
)
REGULARIZATION_LOSS_CALLS = {"tf.losses.get_regularization_loss", "tf.losses.get_regularization_losses"}
# Batch-norm ops that run unfused (KF101): the textbook formula and its deprecated sibling.
UNFUSED_BATCHNORM_OPS = {"tf.nn.batch_normalization", "tf.nn.batch_norm_with_global_normalization"}
# Concatenations and splits (KF105): canonical -> (values kw, values index, axis kw, axis index, axis default).
CONCAT_CALLS = {
    "tf.concat": ("values", 0, "axis", 1, None),
    "keras.ops.concatenate": ("xs", 0, "axis", 1, 0),
    "keras.layers.concatenate": ("inputs", 0, "axis", 1, -1),
}
SPLIT_CALLS = {
    "tf.split": ("value", 0, "axis", 2, 0),
    "keras.ops.split": ("x", 0, "axis", 2, 0),
    "tf.unstack": ("value", 0, "axis", 2, 0),
    "keras.ops.unstack": ("x", 0, "axis", 2, 0),
}

# ---- reach (context.function_role / uses_tpu) and the KF106-KF109, KF2xx, KF901 pack ----
# Calls whose presence in a function marks it as model-building code.
_MODEL_BUILDING_PREFIXES = ("keras.layers.", "tf.layers.", "keras.applications.", "tf.contrib.layers.", "tf.nn.conv")
_MODEL_BUILDING = {
    "keras.Model", "keras.Sequential", "keras.Input", "tf.get_variable", "tf.GradientTape",
    "tf.estimator.EstimatorSpec", "tf.estimator.tpu.TPUEstimatorSpec", "tf.contrib.tpu.TPUEstimatorSpec",
}
# Calls that mark input-pipeline code (parsing, decoding, tf.data).
_INPUT_PREFIXES = (
    "tf.data.", "tf.io.parse_", "tf.parse_", "tf.io.decode_", "tf.decode_", "tf.image.decode_",
    "tf.io.read_file", "tf.read_file", "tf.io.FixedLenFeature", "tf.FixedLenFeature", "tf.io.VarLenFeature",
    "tf.VarLenFeature", "tf.contrib.data.", "keras.utils.image_dataset_from_directory",
    "keras.preprocessing.image_dataset_from_directory", "keras.utils.text_dataset_from_directory",
)
# f(fn, ...) runs fn in Python on the host (a deliberate host callback).
HOST_CALLBACK_WRAPPERS = {
    "tf.py_function", "tf.numpy_function", "tf.py_func", "tf.tpu.outside_compilation",
    "tf.contrib.tpu.outside_compilation",
}
# f(fn, ...) runs fn as input-pipeline code.
# Dataset methods whose function argument runs in the input pipeline (tf.data traces it
# into the host-side dataset graph), called on a receiver no import names.
DATASET_FN_METHODS = frozenset({"map", "filter", "interleave", "flat_map", "parallel_interleave", "map_with_legacy_function"})
INPUT_FN_TAKERS = {
    "tf.data.experimental.map_and_batch", "tf.contrib.data.map_and_batch",
    "tf.data.experimental.parallel_interleave", "tf.contrib.data.parallel_interleave",
}
# f(fn, ...) compiles fn for the accelerator.
STEP_FN_TAKERS = {
    "tf.function", "tf.tpu.rewrite", "tf.contrib.tpu.rewrite", "tf.tpu.shard", "tf.contrib.tpu.shard",
    "tf.tpu.replicate", "tf.contrib.tpu.replicate", "tf.tpu.batch_parallel", "tf.contrib.tpu.batch_parallel",
}


def is_model_building(name: str) -> bool:
    return name in _MODEL_BUILDING or name.startswith(_MODEL_BUILDING_PREFIXES)


def is_input_pipeline(name: str) -> bool:
    return name.startswith(_INPUT_PREFIXES)


def is_tpu_symbol(name: str) -> bool:
    """TPUStrategy, TPUClusterResolver, TPUEstimator, tf.tpu.*, tf.contrib.tpu.* ..."""
    # a dotted component that starts with "tpu" (tf.tpu, TPUStrategy, tpu_strategy),
    # not any substring ("compute_output_spec" contains "tpu")
    return any(part.lower().startswith("tpu") for part in name.split("."))


# Framework classes projects keep a copy of in their own tree (a vendored
# ``tpu_estimator.py``): a project class of this name with a base is taken for the framework's.
VENDORED_CLASSES = {"TPUEstimator": "tensorflow.estimator.tpu.TPUEstimator"}

# KF106: ops that move data between the (padded) feature dim and spatial / batch dims.
SPACE_DEPTH_OPS = {
    "tf.nn.space_to_depth", "tf.nn.depth_to_space", "tf.space_to_batch_nd", "tf.batch_to_space_nd",
    "keras.ops.space_to_depth", "keras.ops.depth_to_space",
}
RESHAPE_CALLS = {"tf.reshape": ("tensor", 0, "shape", 1), "keras.ops.reshape": ("x", 0, "new_shape", 1)}
# KF107: transposes: canonical -> (operand kw, index, perm kw, index).
TRANSPOSE_CALLS = {
    "tf.transpose": ("a", 0, "perm", 1),
    "keras.ops.transpose": ("x", 0, "axes", 1),
}
# Ops that only move or regroup a tensor's data (KF106 follows a hand-written shuffle
# through them): canonical -> (tensor kw, index). Splits and concats: SPLIT_CALLS, CONCAT_CALLS.
RELAYOUT_CALLS = {
    "tf.squeeze": ("input", 0), "keras.ops.squeeze": ("x", 0),
    "tf.expand_dims": ("input", 0), "keras.ops.expand_dims": ("x", 0),
    "tf.stack": ("values", 0), "keras.ops.stack": ("x", 0),
}
MATMUL_CALLS = {"tf.matmul", "keras.ops.matmul", "tf.einsum", "keras.ops.einsum", "tf.tensordot", "keras.ops.tensordot", "keras.ops.dot", "keras.backend.dot", "keras.backend.batch_dot", "tf.linalg.matmul"}
CHANNELS_FIRST_VALUES = {"channels_first", "NCHW", "NCW", "NCDHW"}
# Mixed precision: the calls that set the global policy (TF 2.4+ / Keras 3, TF 2.3's
# experimental.set_policy), and the compute dtype a policy or dtype name gives.
POLICY_SETTERS = frozenset({"set_global_policy", "set_policy", "set_dtype_policy"})


def policy_dtype(name: str) -> str:
    """'float16' for "mixed_float16"/"float16"/"half", 'bfloat16' likewise, else 'float32'."""
    n = name.lower()
    if n in ("mixed_float16", "float16", "half", "fp16"):
        return "float16"
    if n in ("mixed_bfloat16", "bfloat16", "bf16"):
        return "bfloat16"
    return "float32"


# What the default configuration answers, for folding tests of code paths that it
# switches off (`if image_data_format() == "channels_first":`). Keras's default image
# data format is channels_last unless the file sets another (keras.config docs).
IMAGE_DATA_FORMAT_CALLS = {"keras.backend.image_data_format", "keras.config.image_data_format"}
SET_IMAGE_DATA_FORMAT_CALLS = {"keras.backend.set_image_data_format", "keras.config.set_image_data_format"}
# `keras.backend.standardize_data_format(None)` is the default format; projects keep
# copies of it under the same name (keras-hub's utils), so the last name part decides.
STANDARDIZE_DATA_FORMAT = "standardize_data_format"
# The Keras 3 backends whose programs XLA compiles for a TPU/GPU (tensorflow, the
# default, and jax): a test of `keras.config.backend()` is folded over these, so a
# `== "torch"` / `== "numpy"` branch is off on the path kerasfit models, while
# `== "jax"` may run.
BACKEND_CALLS = {"keras.config.backend", "keras.backend.backend"}
XLA_BACKENDS = ("tensorflow", "jax")
# KF108: samplers the TPU guide calls expensive (docs/facts.md#14).
EXPENSIVE_RANDOM = {"tf.random.categorical", "tf.random.stateless_categorical", "keras.random.categorical"}
# KF109: reductions -> which elementwise ops may move into their input.
# "linear": scaling by any constant and negation commute; "order": only scaling by a
# positive constant does (max/min).
REDUCTIONS = {
    "tf.reduce_sum": "linear", "tf.reduce_mean": "linear", "keras.ops.sum": "linear", "keras.ops.mean": "linear",
    "keras.backend.sum": "linear", "keras.backend.mean": "linear",
    "tf.reduce_max": "order", "tf.reduce_min": "order", "keras.ops.max": "order", "keras.ops.min": "order",
    "keras.backend.max": "order", "keras.backend.min": "order",
}
SCALE_CALLS = {"tf.multiply": "mul", "keras.ops.multiply": "mul", "tf.divide": "div", "keras.ops.divide": "div", "keras.ops.true_divide": "div"}
NEGATE_CALLS = {"tf.negative", "keras.ops.negative"}
# KF202: Python callbacks with no accelerator kernel.
HOST_OPS = {"tf.py_function", "tf.numpy_function", "tf.py_func", "tf.contrib.eager.py_func"}
# KF901: windowed max pooling (its gradient is a scatter; docs/facts.md#16).
MAX_POOLING = {
    "keras.layers.MaxPooling1D", "keras.layers.MaxPooling2D", "keras.layers.MaxPooling3D",
    "tf.layers.max_pooling1d", "tf.layers.max_pooling2d", "tf.layers.max_pooling3d",
    "tf.nn.max_pool", "tf.nn.max_pool2d", "tf.nn.max_pool1d", "tf.nn.max_pool3d", "tf.nn.max_pool_v2",
    "keras.ops.max_pool",
}
