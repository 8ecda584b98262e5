"""Constant folding's arithmetic and its budgets: one place for both evaluators.

kerasfit folds values in two tree walkers: the per-file model folds libcst expressions
(:meth:`kerasfit.semantic.values.Values.const`, ``Values.possible_values``) and the
project summaries interpret project functions over stdlib ``ast``
(:mod:`kerasfit.semantic.summaries`), as does the build cross-check's script reader. Two
walkers remain because the project index parses every file of a tree with ``ast`` — several
times faster than libcst, and no concrete syntax is needed to summarise another file —
while the checked file is a libcst tree the rules and fixes work on. What an operator
*means*, which results are too large to compute, and how far a walker may follow values are
decided here only.

Operators are keyed by their spelling (``"+"``, ``"**"``, ``"=="``); both libcst's and
ast's operator node classes map to it by class name, so this module imports neither
library's nodes (the build child reads ``ast`` and must not import libcst):
``BINARY[type(node.operator)]`` for libcst, ``BINARY[type(node.op)]`` for ``ast``.
Every operation answers :data:`UNKNOWN` rather than raising or building a huge value.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Concatenate, ParamSpec, Protocol, TypeVar, cast


class _Unknown:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:
        return False


UNKNOWN: Any = _Unknown()
"""A value that could not be folded (falsy, so ``if v:`` reads it as "not known true")."""

# ---- limits: every evaluator's, in one place ---------------------------------------------
# libcst folding of the checked file follows names, parameters and helper returns: counted
# per file, and per question so that one pathological question does not starve the rest.
FILE_STEPS = 100_000
QUESTION_STEPS = 10_000
FOLD_DEPTH = 12  # nested expressions and names one libcst fold follows
ORIGIN_DEPTH = 8  # names and helper returns one origin question follows
VALUES_DEPTH = 8  # branches and bindings a libcst value-set question follows
# ast interpretation of a project function, per call site asked about
CALL_STEPS = 120  # statements interpreted: factories are short, model builders are not
CALL_DEPTH = 6  # project functions called one inside another
CONST_DEPTH = 4  # module constants defined by other module constants
MAX_VALUES = 16  # possible values a set holds before it is unknown (both may-analyses)
# results not computed (their size, not their meaning, is the problem)
MAX_EXPONENT = 64  # ``a ** b`` with a larger ``b``
MAX_INT_BITS = 4_096  # an integer power larger than this
MAX_SEQUENCE = 100_000  # a str, bytes, list or tuple built by ``*`` or ``+`` longer than this


# ---- arithmetic ----------------------------------------------------------------------------
_SEQUENCES = (str, bytes, list, tuple)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _safe(op: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def fold(a: Any, b: Any) -> Any:
        try:
            return op(a, b)
        except Exception:  # division by zero, mismatched types, overflow: not known
            return UNKNOWN

    return fold


def _add(a: Any, b: Any) -> Any:
    if isinstance(a, _SEQUENCES) and isinstance(b, _SEQUENCES) and len(a) + len(b) > MAX_SEQUENCE:
        return UNKNOWN
    return a + b


def _mul(a: Any, b: Any) -> Any:
    for seq, n in ((a, b), (b, a)):
        if isinstance(seq, _SEQUENCES) and isinstance(n, int) and len(seq) * n > MAX_SEQUENCE:
            return UNKNOWN
    return a * b


def _pow(a: Any, b: Any) -> Any:
    if isinstance(b, (int, float)) and b > MAX_EXPONENT:
        return UNKNOWN
    if isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a).bit_length() * b > MAX_INT_BITS:
        return UNKNOWN
    return a**b


def _neg(v: Any) -> Any:
    return -v if _number(v) else UNKNOWN


def _pos(v: Any) -> Any:
    return v if _number(v) else UNKNOWN


_BINARY_BY_SPELLING: dict[str, Callable[[Any, Any], Any]] = {
    "+": _safe(_add),
    "-": _safe(operator.sub),
    "*": _safe(_mul),
    "/": _safe(operator.truediv),
    "//": _safe(operator.floordiv),
    "%": _safe(operator.mod),
    "**": _safe(_pow),
}
_UNARY_BY_SPELLING: dict[str, Callable[[Any], Any]] = {"-": _neg, "+": _pos}  # numbers only
_COMPARE_BY_SPELLING: dict[str, Callable[[Any, Any], Any]] = {
    "==": _safe(operator.eq),
    "!=": _safe(operator.ne),
    "<": _safe(operator.lt),
    "<=": _safe(operator.le),
    ">": _safe(operator.gt),
    ">=": _safe(operator.ge),
    "is": _safe(operator.is_),
    "is not": _safe(operator.is_not),
    "in": _safe(lambda a, b: a in b),
    "not in": _safe(lambda a, b: a not in b),
}

# operator node class name -> spelling; libcst's name first where the two differ. Shifts,
# bitwise and matrix operators are not folded: no rule reads a value built by them.
_BINARY_NAMES = {
    "Add": "+", "Subtract": "-", "Sub": "-", "Multiply": "*", "Mult": "*", "Divide": "/", "Div": "/",
    "FloorDivide": "//", "FloorDiv": "//", "Modulo": "%", "Mod": "%", "Power": "**", "Pow": "**",
}
_UNARY_NAMES = {"Minus": "-", "USub": "-", "Plus": "+", "UAdd": "+"}
_COMPARE_NAMES = {
    "Equal": "==", "Eq": "==", "NotEqual": "!=", "NotEq": "!=", "LessThan": "<", "Lt": "<",
    "LessThanEqual": "<=", "LtE": "<=", "GreaterThan": ">", "Gt": ">", "GreaterThanEqual": ">=",
    "GtE": ">=", "Is": "is", "IsNot": "is not", "In": "in", "NotIn": "not in",
}
_NODE_MODULES = ("libcst", "ast", "_ast")

_F = TypeVar("_F")


class _ByNodeClass(dict[type, _F | None]):
    """Operation of a libcst or ast operator node class (None: not folded), found by the
    class's name on first use and remembered, so a lookup is one dict probe."""

    def __init__(self, names: dict[str, str], by_spelling: dict[str, _F]) -> None:
        super().__init__()
        self._names = names
        self._by_spelling = by_spelling

    def __missing__(self, cls: type) -> _F | None:
        found = None
        if cls.__module__.split(".", 1)[0] in _NODE_MODULES:
            found = self._by_spelling.get(self._names.get(cls.__name__, ""))
        self[cls] = found
        return found


BINARY: _ByNodeClass[Callable[[Any, Any], Any]] = _ByNodeClass(_BINARY_NAMES, _BINARY_BY_SPELLING)
"""``BINARY[type(op)](a, b)``: the value, or UNKNOWN (error, or too large to build)."""
UNARY: _ByNodeClass[Callable[[Any], Any]] = _ByNodeClass(_UNARY_NAMES, _UNARY_BY_SPELLING)
"""``UNARY[type(op)](v)``: ``-v`` / ``+v`` of a number (not a bool), else UNKNOWN."""
COMPARE: _ByNodeClass[Callable[[Any, Any], Any]] = _ByNodeClass(_COMPARE_NAMES, _COMPARE_BY_SPELLING)
"""``COMPARE[type(op)](a, b)``: the comparison's value, or UNKNOWN when it raises."""


# Builtins folded when every argument is a number (a caller checks the name is not rebound).
_BUILTINS: dict[str, Callable[..., Any]] = {"int": int, "round": round, "max": max, "min": min, "abs": abs}
BUILTIN_NAMES = frozenset(_BUILTINS)


def builtin(name: str, args: list[Any]) -> Any:
    """``name(*args)`` for a numeric builtin of :data:`BUILTIN_NAMES` over numbers, else UNKNOWN."""
    if not (args and all(_number(v) for v in args)):
        return UNKNOWN
    try:
        return _BUILTINS[name](*args)
    except Exception:
        return UNKNOWN


# ---- budgets -------------------------------------------------------------------------------
class OutOfBudget(Exception):
    """Raised inside a :func:`bounded` question once its budget is spent; the outermost
    bounded call catches it and answers its fallback."""


class Budget:
    """How far one evaluator may follow values.

    ``depth``: nested steps one walk takes (the walker answers unknown beyond it, at that
    level only). ``steps``: steps in all over the budget's life (a checked file; one call
    site's interpretation). ``per_question``: steps one outermost :func:`bounded` question
    may take. Once steps are spent, :meth:`spend` says no (the ``ast`` interpreter gives up
    the statement it is on) and a :func:`bounded` question unwinds to its outermost call,
    which answers "not followed".
    """

    __slots__ = ("depth", "steps", "per_question", "spent", "_start", "_active")

    def __init__(self, depth: int, steps: int, per_question: int | None = None) -> None:
        self.depth = depth
        self.steps = steps
        self.per_question = steps if per_question is None else per_question
        self.spent = 0
        self._start = 0  # ``spent`` when the current outermost question began
        self._active = 0  # bounded calls under way

    @classmethod
    def for_file(cls) -> Budget:
        """The libcst model's, for every question about one checked file."""
        return cls(FOLD_DEPTH, FILE_STEPS, QUESTION_STEPS)

    @classmethod
    def for_call_site(cls) -> Budget:
        """The ``ast`` interpreter's, for one call of a project function."""
        return cls(CALL_DEPTH, CALL_STEPS)

    def spend(self) -> bool:
        """Count one step; False (nothing counted) once the budget or the question's share is spent."""
        if self.spent >= self.steps or self.spent - self._start >= self.per_question:
            return False
        self.spent += 1
        return True


class Budgeted(Protocol):
    @property
    def budget(self) -> Budget: ...


_B = TypeVar("_B", bound=Budgeted)
_P = ParamSpec("_P")
_R = TypeVar("_R")


def bounded(fallback: Callable[[], object]) -> Callable[[Callable[Concatenate[_B, _P], _R]], Callable[Concatenate[_B, _P], _R]]:
    """Count each call of a method against its owner's :class:`Budget`; the outermost call
    of a question answers ``fallback()`` ("not followed") once the budget is spent (inner
    calls unwind to it)."""

    def wrap(fn: Callable[Concatenate[_B, _P], _R]) -> Callable[Concatenate[_B, _P], _R]:
        def bounded_call(owner: _B, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            budget = owner.budget
            if not budget._active:
                budget._start = budget.spent
            if not budget.spend():
                if budget._active:
                    raise OutOfBudget
                # (the fallback is "nothing found" in the decorated method's own return
                # type; mypy cannot tie the two when the decorator is applied)
                return cast(_R, fallback())
            budget._active += 1
            try:
                return fn(owner, *args, **kwargs)
            except OutOfBudget:
                if budget._active > 1:
                    raise
                return cast(_R, fallback())
            finally:
                budget._active -= 1

        # (a plain function has no declared __wrapped__; functools.wraps would copy more)
        bounded_call.__doc__, bounded_call.__name__, bounded_call.__wrapped__ = fn.__doc__, fn.__name__, fn  # type: ignore[attr-defined]
        return bounded_call

    return wrap
