"""The TF/Keras names rules match, in canonical spelling (``canonical`` maps any import
spelling to it; ``ctx`` answers ``call_name`` in the same spelling), and how a finding
names them.

    from kerasfit.ruleapi.symbols import CONV_LAYERS, canonical
"""

from __future__ import annotations

from ..semantic.dataflow import label
from ..core.symbols import (
    BATCHNORM_LAYERS,
    CHANNELS_FIRST_VALUES,
    CONCAT_CALLS,
    CONV_LAYERS,
    DENSE_LAYERS,
    EXPENSIVE_RANDOM,
    HEAD_ACTIVATIONS,
    HEAD_CONSUMERS,
    HOST_OPS,
    KERAS1_WIDTH_KEYWORDS,
    L2_REGULARIZER_STRINGS,
    L2_REGULARIZERS,
    MATMUL_CALLS,
    MAX_POOLING,
    MODEL_BASES,
    MODEL_CONSTRUCTORS,
    NEGATE_CALLS,
    REDUCTIONS,
    REGULARIZATION_LOSS_CALLS,
    RELAYOUT_CALLS,
    RESHAPE_CALLS,
    ROOT_MODULES,
    SCALE_CALLS,
    SPACE_DEPTH_OPS,
    SPATIAL_OUTPUT_RANK,
    SPLIT_CALLS,
    TRANSPOSE_CALLS,
    UNFUSED_BATCHNORM_OPS,
    WEIGHT_REGULARIZER_ARGS,
    ZERO_PADDING_LAYERS,
    canonical,
)

__all__ = [
    "BATCHNORM_LAYERS",
    "CHANNELS_FIRST_VALUES",
    "CONCAT_CALLS",
    "CONV_LAYERS",
    "DENSE_LAYERS",
    "EXPENSIVE_RANDOM",
    "HEAD_ACTIVATIONS",
    "HEAD_CONSUMERS",
    "HOST_OPS",
    "KERAS1_WIDTH_KEYWORDS",
    "L2_REGULARIZERS",
    "L2_REGULARIZER_STRINGS",
    "MATMUL_CALLS",
    "MAX_POOLING",
    "MODEL_BASES",
    "MODEL_CONSTRUCTORS",
    "NEGATE_CALLS",
    "REDUCTIONS",
    "REGULARIZATION_LOSS_CALLS",
    "RELAYOUT_CALLS",
    "RESHAPE_CALLS",
    "ROOT_MODULES",
    "SCALE_CALLS",
    "SPACE_DEPTH_OPS",
    "SPATIAL_OUTPUT_RANK",
    "SPLIT_CALLS",
    "TRANSPOSE_CALLS",
    "UNFUSED_BATCHNORM_OPS",
    "WEIGHT_REGULARIZER_ARGS",
    "ZERO_PADDING_LAYERS",
    "canonical",
    "label",
]
