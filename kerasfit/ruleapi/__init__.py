"""The public API for writing rules (STYLE 7: rules ask questions through this API, never
through the engine's or the semantic model's private parts). Small and namespaced:

- ``kerasfit.ruleapi`` — the rule itself: ``Rule``, ``Finding`` (what it reports: one
  frozen dataclass per message shape, its typed fields rendered to the message), ``Valid``, ``Invalid``, ``Range``,
  ``Severity``, ``Applicability``, ``Reads`` (what its findings depend on); the per-file model rules are handed (``self.ctx``, a ``SemanticModel``: ask its parts
  ``ctx.names``, ``ctx.scopes``, ``ctx.values``, ``ctx.layers``, ``ctx.roles`` about a node); the
  chip a check is for (``Target``, ``TARGETS``, ``width_padding``; a GPU's multiple and the
  GPU cost model's figure for a width, ``tensor_core_multiple``, ``width_speedup``).
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

Every name is used by a built-in rule or listed here.
``kerasfit.engine.testing`` turns a pack's own examples into pytest tests.
"""

from __future__ import annotations

from .finding import Finding
from .rule import Invalid, Range, Reads, Rule, Valid
from ..semantic.model import SemanticModel
from ..core.gpumodel import tensor_core_multiple, width_speedup
from ..core.types import TARGETS, Applicability, Role, Severity, Target, width_padding
from . import fixes, roles, symbols, syntax, values

__all__ = [
    "Applicability",
    "Finding",
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
    "tensor_core_multiple",
    "values",
    "width_padding",
    "width_speedup",
]
