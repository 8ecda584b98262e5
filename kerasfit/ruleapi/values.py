"""What the context's value questions answer with (``Layer``, ``TensorShape``,
``Origin``), and the value helpers that need no file model.

    from kerasfit.ruleapi.values import TensorShape, round_up
"""

from __future__ import annotations

from ..semantic.dataflow import class_attr_assignment_line
from ..semantic.pipeline import round_up
from ..semantic.shapes import TensorShape
from ..semantic.summaries import Layer
from ..semantic.valueflow import Origin

__all__ = ["Layer", "Origin", "TensorShape", "class_attr_assignment_line", "round_up"]
