"""Same-file call sites of a function and what each passes for a parameter (the values
part's questions about callers: ``Values.call_sites``, ``Values.param_values``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import libcst as cst

from .nodes import UNKNOWN, ScopeNode, dotted_name
from .views import CallSites, ParamValue

if TYPE_CHECKING:
    from .views import ValueFlow


def find_call_sites(v: ValueFlow, func: cst.FunctionDef | cst.ClassDef) -> CallSites:
    idx = v.scopes.index
    if isinstance(func, cst.FunctionDef) and func.name.value == "__init__":
        cls = idx.method_class.get(id(func))
        if cls is None:
            return CallSites((), False)
        inner = find_call_sites(v, cls)
        return CallSites(inner.calls, inner.complete, skip_self=True)
    name = func.name.value
    cls = idx.method_class.get(id(func)) if isinstance(func, cst.FunctionDef) else None
    complete = True
    if isinstance(func, cst.FunctionDef):
        for dec in func.decorators:
            d = dotted_name(dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator) or ""
            if d not in ("staticmethod", "classmethod", "property") and v.names.canonical_dotted(d, idx.def_scopes(func)) != "tf.function":
                complete = False
    calls: list[tuple[cst.Call, tuple[ScopeNode, ...]]] = []
    skip_self = False
    if cls is not None:
        # a method: self.m(...) from inside the class; any other reference escapes
        static = any(dotted_name(d.decorator) == "staticmethod" for d in func.decorators)
        skip_self = not static
        for ref, call, scopes in idx.attr_refs.get(name, ()):
            recv = ref.value
            if call is not None and isinstance(recv, cst.Name) and recv.value in ("self", "cls") and cls in scopes:
                calls.append((call, scopes))
            else:
                complete = False
    else:
        for _ref, call, scopes in idx.name_refs.get(name, ()):
            b, _ = v.scopes.lookup_in(name, scopes)
            if b is None or b.node is not func:
                continue
            if call is not None:
                calls.append((call, scopes))
            else:
                complete = False
    return CallSites(tuple(calls), complete, skip_self=skip_self)


def param_values(v: ValueFlow, func: cst.FunctionDef | cst.Lambda, param: str | cst.Param) -> list[ParamValue]:
    """What each same-file call site passes for ``param`` of ``func``.

    One ParamValue per call site (``value`` is the argument expression, or the
    default when that site omits it, or None when it is hidden in ``*args``), with
    ``const`` already folded in the caller's scope. Empty when there are no sites.
    Pair with ``Values.call_sites`` to know whether the list is complete.
    """
    p = _param_node(func, param)
    if p is None or not isinstance(func, cst.FunctionDef):
        return []
    out = []
    for call, scopes in v.call_sites(func).calls:
        expr, where = arg_for(v, func, p, call, scopes)
        out.append(ParamValue(call, expr, v.const(expr, scopes=where) if expr is not None else UNKNOWN, expr is not None and where is scopes))
    return out


def _param_node(func: cst.FunctionDef | cst.Lambda, param: str | cst.Param) -> cst.Param | None:
    if isinstance(param, cst.Param):
        return param
    ps = func.params
    for p in (*ps.posonly_params, *ps.params, *ps.kwonly_params):
        if p.name.value == param:
            return p
    return None


def arg_for(v: ValueFlow, func: cst.FunctionDef, p: cst.Param, call: cst.Call, scopes: Sequence[ScopeNode]) -> tuple[cst.BaseExpression | None, Sequence[ScopeNode]]:
    ps = func.params
    positional = [*ps.posonly_params, *ps.params]
    if v.call_sites(func).skip_self and positional:
        positional = positional[1:]
    for a in call.args:
        if a.keyword is not None and a.keyword.value == p.name.value:
            return a.value, scopes
    pos = next((i for i, q in enumerate(positional) if q is p), None)
    i = 0
    for a in call.args:
        if a.keyword is not None:
            break
        if a.star:
            return None, scopes  # *args / **kwargs: not visible
        if i == pos:
            return a.value, scopes
        i += 1
    if any(a.star == "**" for a in call.args):
        return None, scopes
    if p.default is not None:
        return p.default, v.scopes.index.def_scopes(func)
    return None, scopes


def param_candidates(v: ValueFlow, func: cst.FunctionDef | cst.Lambda, p: cst.Param) -> list[tuple[cst.BaseExpression | None, Sequence[ScopeNode]]]:
    if isinstance(func, cst.FunctionDef) and p.star not in ("*", "**"):
        sites = v.call_sites(func)
        if sites.complete and sites.calls:
            return [arg_for(v, func, p, call, scopes) for call, scopes in sites.calls]
    if p.default is not None:
        return [(p.default, v.scopes.index.def_scopes(func))]
    return []


def pinned_param(v: ValueFlow, func: cst.FunctionDef | cst.Lambda, p: cst.Param) -> tuple[list[tuple[cst.BaseExpression | None, Sequence[ScopeNode]]], str | None]:
    """What ``p`` is at every call of ``func``, for a value a fix rests on: (the argument
    each call passes, None) when ``func`` is private to the project (an underscore name not
    imported elsewhere in the tree, or a closure) and every call of it is found here and
    passes ``p`` visibly; else ([], why not). A default is a value only where a found call
    leaves the parameter out: code that is not found (users of a public function or class,
    ``from_config``) may pass anything."""
    name = p.name.value
    if isinstance(func, cst.Lambda) or p.star in ("*", "**"):
        return [], f"`{name}` is a parameter of a callable whose callers are not known here"
    owner, private = _owner(v, func)
    default = f" than its default {v.module.code_for_node(p.default)}" if p.default is not None else ""
    if not private:
        return [], f"`{name}` is a parameter of `{owner}`, which code outside this file can call with another value{default}"
    sites = v.call_sites(func)
    if not sites.complete or not sites.calls:
        return [], f"`{name}` is a parameter of `{owner}`, which is also used as a value here, so not every call of it is known"
    found = [arg_for(v, func, p, call, scopes) for call, scopes in sites.calls]
    if any(expr is None for expr, _ in found):
        return [], f"a call of `{owner}` passes its arguments through `*args`/`**kwargs`, so `{name}` is not known there"
    return found, None


def _owner(v: ValueFlow, func: cst.FunctionDef) -> tuple[str, bool]:
    """How a message names ``func`` (a method by its class, ``__init__`` by the class), and
    whether it is private to the project: a closure, or an underscore name (a method's or
    its class's) in a module no other file of the tree imports."""
    idx = v.scopes.index
    scopes = idx.def_scopes(func)
    cls = idx.method_class.get(id(func))
    if cls is not None:
        label = cls.name.value if func.name.value == "__init__" else f"{cls.name.value}.{func.name.value}"
        outer = idx.def_scopes(cls)
        if any(isinstance(s, (cst.FunctionDef, cst.Lambda)) for s in outer):
            return label, True  # a class made inside a function: only that function sees it
        dunder = func.name.value.startswith("__") and func.name.value.endswith("__")
        hidden = cls.name.value.startswith("_") or (not dunder and func.name.value.startswith("_"))
        return label, hidden and not v.imported_elsewhere()
    if any(isinstance(s, (cst.FunctionDef, cst.Lambda)) for s in scopes):
        return func.name.value, True  # a closure
    return func.name.value, func.name.value.startswith("_") and not v.imported_elsewhere()
