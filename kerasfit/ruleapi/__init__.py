"""The public API for writing rules (STYLE 7: rules ask questions through this API, never
through the engine's or the semantic model's private parts). Small and namespaced:

- ``kerasfit.ruleapi`` — the rule itself: ``Rule``, ``Valid``, ``Invalid``, ``Range``,
  ``Severity``, ``Applicability``, ``Reads`` (what its findings depend on); the per-file model rules are handed (``self.ctx``, a ``SemanticModel``: ask its parts
  ``ctx.names``, ``ctx.scopes``, ``ctx.values``, ``ctx.layers``, ``ctx.roles`` about a node); the
  chip a check is for (``Target``, ``TARGETS``, ``width_padding``).
- :mod:`kerasfit.ruleapi.syntax` — questions of one node (``get_arg``, ``dotted_name``, ``walk`` …).
- :mod:`kerasfit.ruleapi.values` — where a value comes from (``value_of``,
  ``layer_constructor``, ``reaching_assignment`` …).
- :mod:`kerasfit.ruleapi.roles` — what code is for (``Role``, ``is_tf_data_chain``,
  ``feeds_evaluation``, ``reaches_evaluation``).
- :mod:`kerasfit.ruleapi.fixes` — the edits fixes are made of (``Replace``, ``Remove``,
  ``set_keyword`` …).
- :mod:`kerasfit.ruleapi.symbols` — the TF/Keras names rules match (``CONV_LAYERS``,
  ``canonical`` …).

    from kerasfit.ruleapi import Invalid, Range, Rule, Valid
    from kerasfit.ruleapi.syntax import get_arg

Every name is used by a built-in rule or listed here. A name keeps its meaning across
minor versions. The flat names of the previous release (``from kerasfit.ruleapi import
get_arg``) still work for one release and warn with the name's new home.
``kerasfit.engine.testing`` turns a pack's own examples into pytest tests.
"""

from __future__ import annotations

import warnings
from typing import Any

from .rule import Invalid, Range, Reads, Rule, Valid
from ..semantic import dataflow as _dataflow
from ..semantic import nodes as _nodes
from ..semantic import pipeline as _pipeline
from ..semantic.model import SemanticModel
from ..core.symbols import (
    CONV_CALLS,
    HOST_CALLBACK_WRAPPERS,
    INPUT_FN_TAKERS,
    STEP_FN_TAKERS,
    flavour,
    is_input_pipeline,
    is_model_building,
    is_tpu_symbol,
)
from ..core.types import TARGETS, Applicability, Role, Severity, Target, width_padding
from . import fixes, roles, symbols, syntax, values

__all__ = [
    "Applicability",
    "Invalid",
    "Range",
    "Reads",
    "Role",
    "Rule",
    "SemanticModel",
    "Severity",
    "TARGETS",
    "Target",
    "Valid",
    "fixes",
    "roles",
    "symbols",
    "syntax",
    "values",
    "width_padding",
]

# The previous release's flat names: where each lives now (a namespace), or, for the
# names no built-in rule used, the internal object it was (kept one release, then gone).
_MOVED: dict[str, Any] = {
    **{n: syntax for n in syntax.__all__},
    **{n: values for n in values.__all__},
    **{n: fixes for n in fixes.__all__},
    **{n: symbols for n in symbols.__all__},
    **{n: roles for n in roles.__all__ if n != "Role"},
}
_DROPPED: dict[str, Any] = {
    "binds": _nodes.binds,
    "bound_names": _nodes.bound_names,
    "iter_children": _nodes.iter_children,
    "string_value": _nodes.string_value,
    "class_attr_assignments": _dataflow.class_attr_assignments,
    "class_attr_uses": _dataflow.class_attr_uses,
    "container_element": _dataflow.container_element,
    "element_candidates": _dataflow.element_candidates,
    "is_method_call": _pipeline.is_method_call,
    "receiver_dotted": _pipeline.receiver_dotted,
    "short": _pipeline.short,
    "tf_data_root": _pipeline.tf_data_root,
    "CONV_CALLS": CONV_CALLS,
    "HOST_CALLBACK_WRAPPERS": HOST_CALLBACK_WRAPPERS,
    "INPUT_FN_TAKERS": INPUT_FN_TAKERS,
    "STEP_FN_TAKERS": STEP_FN_TAKERS,
    "flavour": flavour,
    "is_input_pipeline": is_input_pipeline,
    "is_model_building": is_model_building,
    "is_tpu_symbol": is_tpu_symbol,
}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        home = _MOVED[name]
        warnings.warn(
            f"kerasfit.ruleapi.{name} is deprecated; import it from {home.__name__}",
            DeprecationWarning, stacklevel=2,
        )
        return getattr(home, name)
    if name == "FileContext":
        # the per-file model before it was split into parts; SemanticModel's own
        # __getattr__ forwards the old method names to their parts, with a warning
        warnings.warn("kerasfit.ruleapi.FileContext is deprecated; use kerasfit.ruleapi.SemanticModel",
                      DeprecationWarning, stacklevel=2)
        return SemanticModel
    if name in _DROPPED:
        warnings.warn(
            f"kerasfit.ruleapi.{name} is deprecated and goes in the next release (no built-in rule uses it)",
            DeprecationWarning, stacklevel=2,
        )
        return _DROPPED[name]
    raise AttributeError(f"module 'kerasfit.ruleapi' has no attribute {name!r}")
