"""Where a value comes from and what it is: the light data flow over the file model
(``self.ctx``) that rules share.

    from kerasfit.ruleapi.values import value_of, layer_constructor
"""

from __future__ import annotations

from ..semantic.dataflow import (
    applied_in_order,
    class_attr_assignment_line,
    constructor_call,
    container_contents,
    current_statement,
    depends_on_param,
    layer_constructor,
    loop_source,
    reaching_assignment,
    shape_of_variable,
    uses_of,
    value_of,
)
from ..semantic.pipeline import number, round_up
from ..semantic.precision import compute_dtype
from ..semantic.shapes import TensorShape, shape_of
from ..semantic.summaries import Layer
from ..semantic.valueflow import Origin

__all__ = [
    "Layer",
    "TensorShape",
    "Origin",
    "applied_in_order",
    "class_attr_assignment_line",
    "compute_dtype",
    "constructor_call",
    "container_contents",
    "current_statement",
    "depends_on_param",
    "layer_constructor",
    "loop_source",
    "number",
    "reaching_assignment",
    "round_up",
    "shape_of",
    "shape_of_variable",
    "uses_of",
    "value_of",
]
