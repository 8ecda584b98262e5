"""Syntax questions a rule asks of a libcst node: no file model, no data flow.

    from kerasfit.ruleapi.syntax import get_arg, dotted_name, walk
"""

from __future__ import annotations

from ..semantic.nodes import UNKNOWN, ScopeNode, dotted_name, get_arg, name_loads, self_attr, walk

__all__ = ["UNKNOWN", "ScopeNode", "dotted_name", "get_arg", "name_loads", "self_attr", "walk"]
