"""Which dtype a layer computes in: the question the ``gpu`` target's width findings
rest on (docs/facts.md#18: XLA's GPU backend pads only half-precision channels).

``compute_dtype(ctx, layer_call)`` answers, first found wins: the layer's own
``dtype=`` (a policy name or a dtype), the mixed-precision policy this file sets
(``mixed_precision.set_global_policy("mixed_float16")``, ``keras.config.
set_dtype_policy(...)``, TF 2.3's ``experimental.set_policy``), one the other files
of the tree set (the project index), the ``dtype`` of ``[tool.kerasfit.build]``
(``ctx.options["dtype"]``), else ``"float32"`` — Keras's default policy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import libcst as cst

from ..core.symbols import POLICY_SETTERS, policy_dtype
from .nodes import get_arg

if TYPE_CHECKING:
    from .model import SemanticModel


def compute_dtype(ctx: SemanticModel, layer: cst.Call | None = None) -> str:
    """'float16', 'bfloat16' or 'float32' (also for a dtype we cannot name)."""
    if layer is not None:
        arg = get_arg(layer, "dtype")
        if arg is not None:
            own = _policy_value(ctx, arg.value)
            if own is not None:
                return own
    policies: frozenset[Any] = ctx.file_fact("dtype_policy", _file_policies)
    if len(policies) == 1:
        return str(next(iter(policies)))
    if not policies and ctx.filename and not ctx.filename.startswith("<"):
        tree = ctx.project.dtype_policies()
        if len(tree) == 1:
            return tree[0]
    configured = ctx.options.get("dtype")
    return policy_dtype(configured) if isinstance(configured, str) else "float32"


def _policy_value(ctx: SemanticModel, expr: cst.BaseExpression) -> str | None:
    """A policy or dtype argument's compute dtype: ``"mixed_float16"``, ``tf.float16``,
    ``Policy("mixed_bfloat16")``; None when it does not fold."""
    if isinstance(expr, cst.Call) and expr.args:  # Policy("mixed_float16") / DTypePolicy(...)
        expr = expr.args[0].value
    v = ctx.values.const(expr, scopes=ctx.scopes.scopes_of(expr))
    if isinstance(v, str):
        return policy_dtype(v)
    dotted = ctx.names.framework_raw(ctx.names.raw_name_anywhere(expr)) if isinstance(expr, (cst.Name, cst.Attribute)) else None
    if dotted is not None:
        return policy_dtype(dotted.rsplit(".", 1)[-1])
    return None


def _file_policies(ctx: SemanticModel) -> frozenset[Any]:
    out: set[str] = set()
    for call, _scopes in ctx.index.calls:
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in POLICY_SETTERS and call.args:
            name = ctx.names.call_name_anywhere(call)
            if name is None:
                continue
            v = _policy_value(ctx, call.args[0].value)
            if v is not None:
                out.add(v)
    return frozenset(out)
