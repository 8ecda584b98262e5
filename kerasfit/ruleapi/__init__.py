"""The public API for writing rules (STYLE 7: rules ask questions through this API, never
through the engine's or the semantic model's parts). Small and namespaced:

- ``kerasfit.ruleapi`` — the rule itself: ``Rule``, ``Finding`` (what it reports: one
  frozen dataclass per message shape, its typed fields rendered to the message), ``Valid``,
  ``Invalid``, ``Range``, ``Severity``, ``Applicability``, ``Reads`` (what its findings
  depend on; asking for an undeclared read raises ``UndeclaredRead``), ``Role``; the chip a
  check is for (``Target``, ``TARGETS``, ``width_padding``; a GPU's multiple and the GPU
  cost model's figure for a width, ``tensor_core_multiple``, ``width_speedup``).
- ``self.ctx``, a :class:`RuleContext` the engine builds for each rule and file: its
  methods are the questions a rule may ask, each about a node passed in (no question
  depends on where the walk is): ``ctx.call_name(call)``, ``ctx.const(expr)``,
  ``ctx.parent(node)``, ``ctx.lookup(name, at=node)``, ``ctx.value_of(expr)``,
  ``ctx.layer_constructor(func)``, ``ctx.role_of(node)``, ``ctx.code(node)`` …; the file's
  ``target``, ``options``, ``filename``, ``source`` and ``module``; and
  ``ctx.file_fact(key, compute)`` for a fact about the whole file (``compute`` a function
  of the context; needs ``Reads.FILE_FACTS``).
- :mod:`kerasfit.ruleapi.syntax` — questions of one node (``get_arg``, ``dotted_name``, ``walk`` …).
- :mod:`kerasfit.ruleapi.values` — what value questions answer with (``TensorShape``,
  ``Layer``, ``Origin``) and helpers that need no file (``round_up`` …).
- :mod:`kerasfit.ruleapi.fixes` — the edits fixes are made of (``Replace``, ``Remove``,
  ``set_keyword`` …).
- :mod:`kerasfit.ruleapi.symbols` — the TF/Keras names rules match (``CONV_LAYERS``,
  ``canonical``, ``label`` …).

    from kerasfit.ruleapi import Invalid, Range, Rule, Valid
    from kerasfit.ruleapi.syntax import get_arg

Every name is used by a built-in rule or listed here.
``kerasfit.engine.testing`` turns a pack's own examples into pytest tests.
"""

from __future__ import annotations

from .context import RuleContext
from .finding import Finding
from .reads import Reads, UndeclaredRead
from .rule import Invalid, Range, Rule, Valid
from ..core.gpumodel import tensor_core_multiple, width_speedup
from ..core.types import TARGETS, Applicability, Role, Severity, Target, width_padding
from . import fixes, symbols, syntax, values

__all__ = [
    "Applicability",
    "Finding",
    "Invalid",
    "Range",
    "Reads",
    "Role",
    "Rule",
    "RuleContext",
    "Severity",
    "TARGETS",
    "Target",
    "UndeclaredRead",
    "Valid",
    "fixes",
    "symbols",
    "syntax",
    "tensor_core_multiple",
    "values",
    "width_padding",
    "width_speedup",
]
