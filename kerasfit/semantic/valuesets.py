"""Value sets of libcst expressions in the checked file (a may-analysis).

``possible_values(values, node)`` is ``Values.const`` lifted to sets: ``a if c else b`` is
both branches unless ``c`` folds, a name bound on several paths is the union of what
reaches it. None means unknown (some possible value could not be folded).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import libcst as cst

from ..core.symbols import BACKEND_CALLS, XLA_BACKENDS
from .folding import BINARY, COMPARE, MAX_VALUES, UNARY, VALUES_DEPTH
from .nodes import UNKNOWN, walk

if TYPE_CHECKING:
    from .views import ValueFlow


def possible_values(ctx: ValueFlow, node: cst.BaseExpression | None, _depth: int = 0) -> frozenset[Any] | None:
    if node is None or _depth > VALUES_DEPTH:
        return None
    if isinstance(node, cst.IfExp):
        test = ctx.const(node.test)
        if test is not UNKNOWN:
            return possible_values(ctx, node.body if test else node.orelse, _depth + 1)
        a = possible_values(ctx, node.body, _depth + 1)
        b = possible_values(ctx, node.orelse, _depth + 1)
        return a | b if a is not None and b is not None and len(a | b) <= MAX_VALUES else None
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
    if isinstance(node, (cst.BinaryOperation, cst.UnaryOperation)):
        return _arithmetic(ctx, node, _depth)
    values = _bound_values(ctx, node)
    if not values:
        return None
    out: set[Any] = set()
    for value in values:
        s = possible_values(ctx, value, _depth + 1)
        if s is None:
            return None
        out |= s
    return frozenset(out) if len(out) <= MAX_VALUES else None


def _bound_values(ctx: ValueFlow, node: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """What a name or ``self.<attr>`` may hold: every binding that may reach the name (several
    on branches, or one whose value is itself a set: ``padding = "valid" if s > 1 else
    "same"``), every value the class stores in the attribute; None when not all are
    assignments."""
    if isinstance(node, cst.Name):
        bindings = ctx.scopes.reaching_bindings(node)
        if bindings and all(b.kind == "assign" and b.value is not None for b in bindings):
            return [b.value for b in bindings if b.value is not None]
    elif isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return _self_attr_values(ctx, node)
    return None


def _self_attr_values(ctx: ValueFlow, node: cst.Attribute) -> list[cst.BaseExpression] | None:
    """Every value the class stores in ``self.<attr>`` (``self.padding = "same"``, then
    ``self.padding = "valid"`` under ``if strides > 1:``), when the class stores it only
    by plain assignment; else None."""
    cls = ctx.scopes.enclosing_class(node)
    dotted = f"self.{node.attr.value}"
    if cls is None:
        return None
    stores = [(v, w) for v, w in ctx.scopes.index.attr_stores.get(dotted, ()) if cls in w]
    if not stores or any(v is None for v, _ in stores):
        return None
    return [v for v, _ in stores if v is not None]


def _arithmetic(ctx: ValueFlow, node: cst.BinaryOperation | cst.UnaryOperation, depth: int) -> frozenset[Any] | None:
    """Arithmetic over value sets: every combination of the operands' possible values."""
    if isinstance(node, cst.UnaryOperation):
        unary = UNARY[type(node.operator)]
        inner = possible_values(ctx, node.expression, depth + 1) if unary is not None else None
        out = {unary(v) for v in inner} if unary is not None and inner is not None else None
    else:
        binary = BINARY[type(node.operator)]
        a = possible_values(ctx, node.left, depth + 1) if binary is not None else None
        b = possible_values(ctx, node.right, depth + 1) if a is not None else None
        out = {binary(x, y) for x in a for y in b} if binary is not None and a is not None and b is not None else None
    if out is None or UNKNOWN in out or len(out) > MAX_VALUES:
        return None
    try:
        return frozenset(out)
    except TypeError:
        return None


# How many callers deep ``off_by_default`` follows a function reached only from off branches.
_CALLERS_DEPTH = 3


def off_by_default(ctx: ValueFlow, node: cst.CSTNode, _depth: int = 0, _backend: bool = False) -> cst.BaseExpression | None:
    """The ``if`` test that keeps ``node`` from running when every parameter has its
    default (``if data_format == "channels_first":`` with ``data_format="channels_last"``,
    ``if keras.backend.backend() == "torch":``), else None. Tests that do not fold are
    assumed to run either way. A function every same-file call of which sits under a
    backend test XLA never takes (``roi_align_torch`` called only in the torch branch) is
    off as a whole: the first caller's test is returned. (Only backend tests: a helper
    called under ``if cache is not None:`` still runs whenever a caller passes a cache.)"""
    child = node
    parent = ctx.scopes.parent(child)
    while parent is not None and not isinstance(parent, (cst.FunctionDef, cst.Module, cst.Lambda)):
        if isinstance(parent, cst.If) and child is not parent.test:
            taken = _fold_test(ctx, parent.test)
            if taken is not UNKNOWN and not isinstance(taken, (list, tuple, dict)):
                in_body = child is parent.body
                if bool(taken) != in_body and (not _backend or _tests_backend(ctx, parent.test)):
                    return parent.test
        child, parent = parent, ctx.scopes.parent(parent)
    if not isinstance(parent, cst.FunctionDef) or _depth >= _CALLERS_DEPTH:
        return None
    sites = ctx.call_sites(parent)
    if not sites.complete or not sites.calls:
        return None
    tests = [off_by_default(ctx, call, _depth + 1, True) for call, _scopes in sites.calls]
    return tests[0] if all(t is not None for t in tests) else None


def _backend_values(ctx: ValueFlow, node: cst.BaseExpression) -> tuple[str, ...]:
    """``keras.config.backend()``: any backend XLA compiles (symbols.XLA_BACKENDS), so a
    test is decided only when every one of them answers it alike."""
    if isinstance(node, cst.Call) and not node.args and ctx.names.call_name_anywhere(node) in BACKEND_CALLS:
        return XLA_BACKENDS
    return ()


def _tests_backend(ctx: ValueFlow, test: cst.BaseExpression) -> bool:
    """``test`` reads ``keras.config.backend()``."""
    return any(isinstance(n, cst.Call) and _backend_values(ctx, n) for n in walk(test))


_FORMATS = ("channels_last", "channels_first")


def _fold_test(ctx: ValueFlow, test: cst.BaseExpression) -> Any:
    scopes = ctx.scopes.scopes_of(test)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        op = COMPARE[type(test.comparisons[0].operator)]
        left, right = test.left, test.comparisons[0].comparator
        sides = [_backend_values(ctx, left) or (ctx.const(left, scopes=scopes),),
                 _backend_values(ctx, right) or (ctx.const(right, scopes=scopes),)]
        if op is None or any(v is UNKNOWN for side in sides for v in side):
            return UNKNOWN
        # a data format of None is Keras's default one (layers standardize it)
        if any(v in _FORMATS for side in sides for v in side):
            sides = [tuple(ctx.image_data_format() if v is None else v for v in side) for side in sides]
        folded = [op(a, b) for a in sides[0] for b in sides[1]]
        if any(v is UNKNOWN for v in folded):
            return UNKNOWN
        answers = {bool(v) for v in folded}
        return answers.pop() if len(answers) == 1 else UNKNOWN
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        v = _fold_test(ctx, test.expression)
        return UNKNOWN if v is UNKNOWN else not v
    return ctx.const(test, scopes=scopes)
