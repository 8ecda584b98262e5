"""Where a value comes from, and the budgets of following values (the values part's
questions that cross helper calls: ``origins``, ``call_chain``, ``const_sources``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Concatenate, Iterator, NamedTuple, ParamSpec, TypeVar, cast

import libcst as cst

from .nodes import iter_statements

if TYPE_CHECKING:
    from .values import Values

# Steps of following names, parameters and helper returns: per question (so one
# pathological question does not starve the rest) and per file.
QUESTION_BUDGET = 10_000
FOLD_BUDGET = 100_000


class _OutOfBudget(Exception):
    pass


_P = ParamSpec("_P")
_R = TypeVar("_R")


def bounded(
    fallback: Callable[[], object],
) -> Callable[[Callable[Concatenate[Values, _P], _R]], Callable[Concatenate[Values, _P], _R]]:
    """Count each call against the budgets; the outermost call of a question answers
    ``fallback()`` ("not followed") once one is spent (inner calls unwind to it)."""

    def wrap(fn: Callable[Concatenate[Values, _P], _R]) -> Callable[Concatenate[Values, _P], _R]:
        def bounded(self: Values, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            spent = self.fold_spent
            if self.fold_active:
                if spent >= FOLD_BUDGET or spent - self.fold_start >= QUESTION_BUDGET:
                    raise _OutOfBudget
            elif spent >= FOLD_BUDGET:
                # (the fallback is "nothing found" in the decorated method's own return
                # type; mypy cannot tie the two when the decorator is applied)
                return cast(_R, fallback())
            else:
                self.fold_start = spent
            self.fold_spent = spent + 1
            self.fold_active += 1
            try:
                return fn(self, *args, **kwargs)
            except _OutOfBudget:
                if self.fold_active > 1:
                    raise
                return cast(_R, fallback())
            finally:
                self.fold_active -= 1

        # (a plain function has no declared __wrapped__; functools.wraps would copy more)
        bounded.__doc__, bounded.__name__, bounded.__wrapped__ = fn.__doc__, fn.__name__, fn  # type: ignore[attr-defined]
        return bounded

    return wrap


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
def origins(self: Values, expr: cst.BaseExpression, _depth: int = 0, _via: tuple[cst.Call, ...] = ()) -> list[Origin]:
    """Every call that may have produced ``expr``'s value.

    Follows a Name to the assignment(s) reaching it, and a call of a same-file
    function into that function's ``return`` expressions (recorded in ``via``, the
    helper calls crossed, outermost first — report at ``via[0]`` to point at the
    caller's line). ``conditional`` marks a path that is not the only one (an
    ``if`` may skip the assignment, or the name may still hold a parameter).
    """
    if _depth > 8:
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


def call_chain(self: Values, expr: cst.BaseExpression, _depth: int = 0) -> list[cst.Call]:
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
def const_sources(self: Values, expr: cst.BaseExpression, _depth: int = 0) -> list[cst.BaseExpression]:
    """The expressions a value comes from, following names, parameters (one per call
    site), attributes and subscripts — e.g. the ``'channels_first'`` literal behind
    ``data_format=fmt``. Report or fix at these to touch the definition once."""
    if _depth > 12:
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
