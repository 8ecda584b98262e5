"""Where a value comes from (the values part's questions that cross helper calls:
``origins``, ``call_chain``, ``const_sources``), counted against the values part's
budget (kerasfit.semantic.folding)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, NamedTuple

import libcst as cst

from .folding import ORIGIN_DEPTH, bounded
from .nodes import iter_statements

if TYPE_CHECKING:
    from .views import ValueFlow


class Origin(NamedTuple):
    """The call that produced a value (see Values.origins)."""

    call: cst.Call  # the producing call (may sit inside a same-file helper)
    name: str | None  # its canonical TF/Keras name; for ``Layer(...)(x)`` the layer class
    via: tuple[cst.Call, ...]  # same-file helper calls crossed, outermost first
    conditional: bool  # another path may reach the use without this call


def returns(func: cst.FunctionDef) -> Iterator[cst.BaseExpression]:
    """The values a function returns (not those of nested defs)."""
    stack: list[Any] = [func.body]
    while stack:
        for stmt in iter_statements(stack.pop()):
            if isinstance(stmt, cst.Return) and stmt.value is not None:
                yield stmt.value


@bounded(list)
def origins(self: ValueFlow, expr: cst.BaseExpression, _depth: int = 0, _via: tuple[cst.Call, ...] = ()) -> list[Origin]:
    """Every call that may have produced ``expr``'s value.

    Follows a Name to the assignment(s) reaching it, and a call of a same-file
    function into that function's ``return`` expressions (recorded in ``via``, the
    helper calls crossed, outermost first — report at ``via[0]`` to point at the
    caller's line). ``conditional`` marks a path that is not the only one (an
    ``if`` may skip the assignment, or the name may still hold a parameter).
    """
    if _depth > ORIGIN_DEPTH:
        return []
    if isinstance(expr, cst.Call):
        name = self.names.call_name_anywhere(expr)
        if name is not None:
            return [Origin(expr, name, _via, False)]
        helper = self.same_file_function(expr.func, self.scopes.index.scopes_of(expr))
        if helper is not None:
            rets = list(returns(helper))
            out: list[Origin] = []
            for r in rets:
                out.extend(origins(self, r, _depth + 1, _via + (expr,)))
            return out
        return [Origin(expr, None, _via, False)]
    if isinstance(expr, cst.Name):
        bs, exhaustive = self.scopes.reaching(expr)
        bypass = not exhaustive or any(b.kind != "assign" or b.value is None for b in bs)
        out = []
        for b in bs:
            if b.kind == "assign" and b.value is not None:
                for o in origins(self, b.value, _depth + 1, _via):
                    out.append(o._replace(conditional=True) if bypass else o)
        return out
    return []


def call_chain(self: ValueFlow, expr: cst.BaseExpression, _depth: int = 0) -> list[cst.Call]:
    """The method chain ending at ``expr``, root call first.

    ``ds.shuffle(n).batch(b)`` → [root, shuffle, batch], where the chain may be split
    over lines (``ds = ds.map(f)``), through the latest assignment reaching each
    name, and into a same-file helper's return (``ds = make_dataset(files)``). The
    root is the first call that is not a method call on a value: a TF symbol such as
    ``tf.data.TFRecordDataset(...)``, ``tfds.load(...)``, or an unknown call.
    """
    out: list[cst.Call] = []
    node: cst.BaseExpression | None = expr
    depth = 0
    while node is not None and depth < 40:
        depth += 1
        if isinstance(node, cst.Call):
            out.append(node)
            func = node.func
            if self.names.raw_name_anywhere(func) is not None:
                break
            helper = self.same_file_function(func, self.scopes.index.scopes_of(node)) if isinstance(func, cst.Name) else None
            if helper is not None:
                out.pop()
                rets = list(returns(helper))
                node = rets[-1] if rets else None
                continue
            node = func.value if isinstance(func, cst.Attribute) else None
        elif isinstance(node, cst.Name):
            bs = self.scopes.reaching_bindings(node)
            node = bs[0].value if bs and bs[0].kind == "assign" else None
        else:
            break
    out.reverse()
    return out


@bounded(list)
def const_sources(self: ValueFlow, expr: cst.BaseExpression, _depth: int = 0) -> list[cst.BaseExpression]:
    """The expressions a value comes from, following names, parameters (one per call
    site), attributes and subscripts — e.g. the ``'channels_first'`` literal behind
    ``data_format=fmt``. Report or fix at these to touch the definition once."""
    if _depth > self.budget.depth:
        return []
    if isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript)) and not (
        isinstance(expr, cst.Name) and expr.value in ("True", "False", "None")
    ):
        scopes = self.scopes.index.scopes_of(expr)
        out: list[cst.BaseExpression] = []
        for e, _ in self.deref(expr, scopes):
            if e is None:
                return []
            out.extend(const_sources(self, e, _depth + 1) or [])
        return out
    return [expr]
