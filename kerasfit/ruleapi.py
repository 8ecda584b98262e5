"""The public API for writing rules: everything a built-in rule uses, and all a
third-party rule pack should import (STYLE 7: rules ask questions through this facade,
never through the engine's or the analysis's private parts).

    from kerasfit.ruleapi import Invalid, Rule, Valid, get_arg

A name here keeps its meaning across minor versions; anything not listed in ``__all__``
may change. ``kerasfit.testing`` turns a pack's own examples into pytest tests.
"""

from __future__ import annotations

import warnings
from typing import Any

from .callargs import (
    remove_arg,
    set_keyword,
    keyword_value,
)
from .fixes import FixSpec, Remove, Replace
from .semantic.model import SemanticModel
from .semantic.summaries import Layer
from .semantic.nodes import (
    UNKNOWN,
    ScopeNode,
    binds,
    bound_names,
    dotted_name,
    get_arg,
    iter_children,
    name_loads,
    self_attr,
    string_value,
    walk,
)
from .semantic.precision import compute_dtype
from .semantic.dataflow import (
    current_statement,
    reaching_assignment,
    value_of,
    class_attr_assignments,
    class_attr_uses,
    layer_constructor,
    container_element,
    element_candidates,
    container_contents,
    loop_source,
    applied_in_order,
    shape_of_variable,
    depends_on_param,
    label,
    class_attr_assignment_line,
    uses_of,
)
from .semantic.pipeline import (
    round_up,
    tf_data_root,
    is_tf_data_chain,
    feeds_evaluation,
    number,
    short,
    is_method_call,
    receiver_dotted,
    insert_keyword,
)
from .rule import Invalid, Range, Rule, Valid
from .symbols import (
    BATCHNORM_LAYERS,
    CHANNELS_FIRST_VALUES,
    CONCAT_CALLS,
    CONV_CALLS,
    CONV_LAYERS,
    DENSE_LAYERS,
    EXPENSIVE_RANDOM,
    HEAD_ACTIVATIONS,
    HEAD_CONSUMERS,
    HOST_CALLBACK_WRAPPERS,
    HOST_OPS,
    INPUT_FN_TAKERS,
    KERAS1_WIDTH_KEYWORDS,
    L2_REGULARIZERS,
    L2_REGULARIZER_STRINGS,
    MATMUL_CALLS,
    MAX_POOLING,
    MODEL_BASES,
    MODEL_CONSTRUCTORS,
    NEGATE_CALLS,
    REDUCTIONS,
    REGULARIZATION_LOSS_CALLS,
    RESHAPE_CALLS,
    ROOT_MODULES,
    SCALE_CALLS,
    SPACE_DEPTH_OPS,
    SPATIAL_OUTPUT_RANK,
    SPLIT_CALLS,
    STEP_FN_TAKERS,
    TRANSPOSE_CALLS,
    WEIGHT_REGULARIZER_ARGS,
    ZERO_PADDING_LAYERS,
    canonical,
    flavour,
    is_input_pipeline,
    is_model_building,
    is_tpu_symbol,
)
from .types import TARGETS, Applicability, Role, Severity, Target, width_padding

__all__ = [
    "uses_of",
    "compute_dtype",
    "ScopeNode",
    "Layer",
    "string_value",
    "Applicability",
    "BATCHNORM_LAYERS",
    "CHANNELS_FIRST_VALUES",
    "CONCAT_CALLS",
    "CONV_CALLS",
    "CONV_LAYERS",
    "DENSE_LAYERS",
    "EXPENSIVE_RANDOM",
    "SemanticModel",
    "FixSpec",
    "HEAD_ACTIVATIONS",
    "HEAD_CONSUMERS",
    "HOST_CALLBACK_WRAPPERS",
    "HOST_OPS",
    "INPUT_FN_TAKERS",
    "Invalid",
    "KERAS1_WIDTH_KEYWORDS",
    "L2_REGULARIZERS",
    "Range",
    "L2_REGULARIZER_STRINGS",
    "MATMUL_CALLS",
    "MAX_POOLING",
    "MODEL_BASES",
    "MODEL_CONSTRUCTORS",
    "NEGATE_CALLS",
    "REDUCTIONS",
    "REGULARIZATION_LOSS_CALLS",
    "RESHAPE_CALLS",
    "ROOT_MODULES",
    "Remove",
    "Replace",
    "Rule",
    "SCALE_CALLS",
    "SPACE_DEPTH_OPS",
    "SPATIAL_OUTPUT_RANK",
    "SPLIT_CALLS",
    "STEP_FN_TAKERS",
    "Role",
    "Severity",
    "TARGETS",
    "TRANSPOSE_CALLS",
    "Target",
    "width_padding",
    "UNKNOWN",
    "Valid",
    "WEIGHT_REGULARIZER_ARGS",
    "ZERO_PADDING_LAYERS",
    "binds",
    "bound_names",
    "canonical",
    "class_attr_assignment_line",
    "class_attr_assignments",
    "class_attr_uses",
    "current_statement",
    "depends_on_param",
    "dotted_name",
    "feeds_evaluation",
    "flavour",
    "get_arg",
    "insert_keyword",
    "is_input_pipeline",
    "is_method_call",
    "is_model_building",
    "is_tf_data_chain",
    "is_tpu_symbol",
    "iter_children",
    "keyword_value",
    "label",
    "layer_constructor",
    "container_element",
    "element_candidates",
    "container_contents",
    "loop_source",
    "applied_in_order",
    "name_loads",
    "number",
    "reaching_assignment",
    "receiver_dotted",
    "remove_arg",
    "round_up",
    "self_attr",
    "set_keyword",
    "shape_of_variable",
    "short",
    "tf_data_root",
    "value_of",
    "walk",
]


def __getattr__(name: str) -> Any:
    """``FileContext``, the name of the per-file model before it was split into parts:
    deprecated, answers :class:`SemanticModel` (whose ``__getattr__`` forwards the old
    method names to their parts, with a warning)."""
    if name == "FileContext":
        warnings.warn("kerasfit.ruleapi.FileContext is deprecated; use kerasfit.ruleapi.SemanticModel",
                      DeprecationWarning, stacklevel=2)
        return SemanticModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
