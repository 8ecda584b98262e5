"""Value sets of libcst expressions in the checked file (a may-analysis).

``possible_values(ctx, node)`` is ``ctx.const`` lifted to sets: ``a if c else b`` is
both branches unless ``c`` folds, a name bound on several paths is the union of what
reaches it. None means unknown (some possible value could not be folded).
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from ..context import UNKNOWN

_MAX = 16


def possible_values(ctx, node: cst.BaseExpression | None, _depth: int = 0) -> frozenset | None:
    if node is None or _depth > 8:
        return None
    if isinstance(node, cst.IfExp):
        test = ctx.const(node.test)
        if test is not UNKNOWN:
            return possible_values(ctx, node.body if test else node.orelse, _depth + 1)
        a = possible_values(ctx, node.body, _depth + 1)
        b = possible_values(ctx, node.orelse, _depth + 1)
        return a | b if a is not None and b is not None and len(a | b) <= _MAX else None
    if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.Or):
        # `padding or "valid"`: either operand
        a = possible_values(ctx, node.left, _depth + 1)
        b = possible_values(ctx, node.right, _depth + 1)
        return a | b if a is not None and b is not None else None
    v: Any = ctx.const(node)
    if v is not UNKNOWN:
        try:
            return frozenset([v])
        except TypeError:
            return None
    if isinstance(node, cst.Name):
        bindings = ctx.reaching_bindings(node)
        if len(bindings) > 1 and all(b.kind == "assign" and b.value is not None for b in bindings):
            out: set = set()
            for b in bindings:
                s = possible_values(ctx, b.value, _depth + 1)
                if s is None:
                    return None
                out |= s
            return frozenset(out) if len(out) <= _MAX else None
    return None
