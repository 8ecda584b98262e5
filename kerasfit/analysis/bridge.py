"""From a libcst call site in the checked file to the ast-level analyses of the index."""

from __future__ import annotations

import libcst as cst

from .flow import TOP, Layer, built_layer


def _dotted(node: cst.BaseExpression) -> str | None:
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


def built_layer_at(ctx, call: cst.Call) -> Layer | None:
    cache = ctx.__dict__.setdefault("_built_layers", {})
    hit = cache.get(id(call))
    if hit is not None and hit[0] is call:
        return hit[1]
    out = _built_layer(ctx, call)
    cache[id(call)] = (call, out)
    return out


def _built_layer(ctx, call: cst.Call) -> Layer | None:
    dotted = _dotted(call.func)
    if dotted is None or ctx.call_name(call) is not None:
        return None
    head = dotted.split(".")[0]
    b = ctx.lookup(head)
    # a module-level def or an import; anything bound locally is not followed
    if b is not None and b.kind not in ("def", "import"):
        return None
    if b is None and head not in ctx.imports:
        return None
    facts = ctx.project.facts(ctx.filename or "<string>", source=ctx.source)
    if facts is None:
        return None
    args: list = []
    kwargs: dict = {}
    for a in call.args:
        if a.star:
            if a.star == "*":
                return None  # positions unknown
            kwargs["**"] = TOP
            continue
        vals = ctx.possible_values(a.value)
        v = vals if vals is not None else TOP
        if a.keyword is not None:
            kwargs[a.keyword.value] = v
        else:
            args.append(v)
    return built_layer(ctx.project, facts, dotted, args, kwargs)
