"""Which names of a function hold TF tensors: a flow-insensitive may-analysis.

Real model code slices tensors that no rule can see being created: a loss helper's
parameters (``b_true[..., :2]``), the unpacked outputs of a project function
(``grid, raw_pred = decode(...)``), a box tensor whose slices are combined and stacked
(``x1 = boxes[:, :, 0] + ...``; ``tf.stack([x1, ...])``). A name is taken to hold a
tensor when, anywhere in its function:

- it is bound to the result of a TF/Keras op (``h = tf.nn.relu(x)``);
- it is bound to a slice or arithmetic of a tensor name (``wh = box[..., 2:4]``);
- it, or a slice or arithmetic of it, is an argument of a TF/Keras op
  (``K.maximum(b_mins, ...)``, ``K.dtype(y_true[0])``) — ops that turn host data into
  tensors (``tf.constant``, ``tf.convert_to_tensor``, ``tf.data``, ``tf.io`` …) excepted;
- it is part of the slice or arithmetic bound to a tensor name (``x1 = boxes[:, :, 0] * s``
  with ``x1`` a tensor makes ``boxes`` one);
- it is a list that tensors are appended to (``parts.append(t)``: ``parts[0]`` is one).

Names bound only to NumPy/pandas values or Python literals never hold tensors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import libcst as cst

from ..core.symbols import canonical
from .nodes import dotted_name, iter_children

if TYPE_CHECKING:
    from .model import SemanticModel
    from .nodes import ScopeNode

# Ops whose arguments are host data being converted, not tensors being computed on.
_CONVERTERS = (
    "tf.constant", "tf.convert_to_tensor", "tf.Variable", "tf.data.", "tf.io.", "tf.py_function",
    "tf.numpy_function", "tf.py_func", "tf.summary.", "tf.train.", "tf.estimator.", "tf.saved_model.",
    "keras.ops.convert_to_tensor", "keras.utils.", "keras.backend.constant", "keras.backend.variable",
    "keras.preprocessing.", "keras.datasets.",
)
# Shape queries: their results are a handful of integers, not feature data.
_SHAPE_OPS = frozenset({"tf.shape", "tf.shape_n", "keras.backend.shape", "keras.backend.int_shape", "keras.ops.shape", "tf.rank", "keras.ops.ndim", "keras.backend.ndim"})
# Methods only host arrays have (or that leave the graph).
_HOST_METHODS = frozenset({"numpy", "tolist", "to_numpy", "item", "astype", "as_numpy_iterator"})
# Keyword arguments that never take the tensor being computed on.
_NON_TENSOR_KEYWORDS = frozenset({"axis", "dtype", "name", "shape", "keepdims", "from_logits", "seed", "output_shape", "arguments"})
_HOST_ROOTS = ("numpy", "np", "pandas", "scipy", "cv2", "PIL", "math", "random")

_Fn = cst.FunctionDef | cst.Lambda


def _code_nodes(fn: _Fn) -> Iterator[cst.CSTNode]:
    """The nodes of ``fn``'s own body (nested defs, classes and lambdas excluded)."""
    stack: list[cst.CSTNode] = [fn.body]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(iter_children(n))


def roots(expr: cst.BaseExpression) -> set[str]:
    """Names whose value flows into ``expr`` by slicing and arithmetic (not calls)."""
    out: set[str] = set()
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, cst.Name):
            out.add(e.value)
        elif isinstance(e, cst.Subscript):
            stack.append(e.value)
        elif isinstance(e, cst.BinaryOperation):
            stack.extend((e.left, e.right))
        elif isinstance(e, cst.UnaryOperation):
            stack.append(e.expression)
        elif isinstance(e, (cst.Tuple, cst.List)):
            stack.extend(el.value for el in e.elements)
        elif isinstance(e, cst.IfExp):
            stack.extend((e.body, e.orelse))
    return out


class TensorNames:
    """The tensor-holding names of one function (see the module docstring)."""

    def __init__(self, ctx: SemanticModel, fn: _Fn) -> None:
        self.ctx = ctx
        self.fn = fn
        # the scopes names in fn's body resolve in, outermost first
        self._scopes: list[ScopeNode] = [
            n for n in (*ctx.scopes.ancestors(fn), fn) if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda))
        ]
        self.names, self.host = self._solve()

    def _raw(self, expr: cst.BaseExpression) -> str | None:
        return self.ctx.names.raw_name_in(expr, self._scopes)

    def _name(self, expr: cst.BaseExpression) -> str | None:
        """The canonical TF/Keras name ``expr`` refers to (see Names.resolve)."""
        raw = self.ctx.names.framework_raw(self._raw(expr))
        return canonical(raw) if raw is not None else None

    def holds_tensor(self, expr: cst.BaseExpression) -> bool:
        """True when a name flowing into ``expr`` (by slicing/arithmetic) holds a tensor."""
        return bool(roots(expr) & self.names)

    def host_data(self, expr: cst.BaseExpression) -> bool:
        """True when ``expr`` is host data by the code's own word: every name flowing into it
        is bound only to NumPy (or pandas, or literals), or it reads ``self.<attr>`` whose
        every store is (an anchor table built with ``np.zeros`` in ``__init__``)."""
        rs = roots(expr)
        if rs:
            return rs <= self.host
        base = expr
        while isinstance(base, cst.Subscript):
            base = base.value
        dotted = dotted_name(base) if isinstance(base, cst.Attribute) else None
        if dotted is None or not dotted.startswith("self.") or dotted.count(".") != 1:
            return False
        stores = self.ctx.index.attr_stores.get(dotted, ())
        return bool(stores) and all(v is not None and self._is_host_value(v, set()) and not isinstance(v, cst.Name)
                                    for v, _ in stores)

    # ---- the analysis -----------------------------------------------------------
    def _op(self, call: cst.Call) -> str | None:
        """'tensor' for a TF/Keras op computing on tensors, 'shape' for a shape query
        (its argument is a tensor, its result is not feature data), 'host' for NumPy & co
        and converters, None for anything else (a project function, a method)."""
        func = call.func
        if isinstance(func, cst.Call):  # a layer application: Dense(8)(x)
            inner = func.func
            return "tensor" if isinstance(inner, (cst.Name, cst.Attribute)) and self._name(inner) is not None else None
        if isinstance(func, cst.Attribute) and func.attr.value in _HOST_METHODS:
            return "host"
        raw = self._raw(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
        if raw is None:
            return None
        if raw.split(".")[0] in _HOST_ROOTS:
            return "host"
        fw = self.ctx.names.framework_raw(raw)
        if fw is None:
            return None
        name = canonical(fw)
        if name in _SHAPE_OPS:
            return "shape"  # takes a tensor, gives a few integers
        return "host" if name.startswith(_CONVERTERS) else "tensor"

    def _solve(self) -> tuple[frozenset[str], frozenset[str]]:
        # name -> the expressions bound to it (targets of tuple unpacking share the value)
        bound: dict[str, list[cst.BaseExpression | None]] = {}
        seeds: set[str] = set()
        for n in _code_nodes(self.fn):
            if isinstance(n, cst.Assign):
                for t in n.targets:
                    self._bind(t.target, n.value, bound)
            elif isinstance(n, (cst.AnnAssign, cst.AugAssign)) and isinstance(n.target, cst.Name) and n.value is not None:
                bound.setdefault(n.target.value, []).append(n.value if isinstance(n, cst.AnnAssign) else cst.BinaryOperation(n.target, cst.Add(), n.value))
            elif isinstance(n, (cst.For, cst.CompFor)):
                for loop_name in _names_in(n.target):
                    bound.setdefault(loop_name, []).append(None)
            elif isinstance(n, cst.Call) and self._op(n) in ("tensor", "shape"):
                for a in n.args:
                    if a.keyword is not None and a.keyword.value in _NON_TENSOR_KEYWORDS:
                        continue
                    seeds |= roots(a.value)
        self._appended(bound)
        params = set(_params(self.fn))
        host: set[str] = set()
        for _ in range(20):  # host data sliced or combined stays host data (also `x = x[..., :3]`)
            before = len(host)
            for name, values in bound.items():
                if name not in host and name not in params and values and all(self._is_host_value(v, host | {name}) for v in values):
                    host.add(name)
            if len(host) == before:
                break
        tensors = seeds - host
        for name, values in bound.items():
            if any(isinstance(v, cst.BaseExpression) and self._produces_tensor(v, frozenset()) for v in values):
                tensors.add(name)
        tensors -= host
        # forward (a slice of a tensor is a tensor) and backward (what a tensor is
        # computed from by slicing/arithmetic is a tensor) to a fixed point
        for _ in range(20):
            before = len(tensors)
            for name, values in bound.items():
                if name in host:
                    continue
                for v in values:
                    if v is None:
                        continue
                    rs = roots(v) - host
                    if name not in tensors and rs & tensors and _slice_or_math(v):
                        tensors.add(name)
                    if name in tensors and _slice_or_math(v):
                        tensors |= rs
            if len(tensors) == before:
                break
        return frozenset(tensors), frozenset(host)

    def _appended(self, bound: dict[str, list[cst.BaseExpression | None]]) -> None:
        """``parts.append(t)`` in the function's own body: a list filled with tensors holds
        tensors (``parts[0]`` is one), so the element is bound to the list's name."""
        for ref, call, scopes in self.ctx.index.attr_refs.get("append", ()):
            if call is not None and call.args and scopes and scopes[0] is self.fn and isinstance(ref.value, cst.Name):
                bound.setdefault(ref.value.value, []).append(call.args[-1].value)

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression | None,
              bound: dict[str, list[cst.BaseExpression | None]]) -> None:
        if isinstance(target, cst.Name):
            bound.setdefault(target.value, []).append(value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            els = [e.value for e in target.elements]
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(els) and not any(
                isinstance(e, cst.StarredElement) for e in value.elements
            ):
                for t, v in zip(els, value.elements):
                    self._bind(t, v.value, bound)
            else:
                # unpacking one value: every part is whatever the whole is
                for t in els:
                    self._bind(t.value if isinstance(t, cst.StarredElement) else t, value, bound)

    def _is_host_value(self, v: cst.BaseExpression | None, host: set[str]) -> bool:
        if v is None:
            return False
        if _slice_or_math(v) and not isinstance(v, cst.Name):
            rs = roots(v)
            if rs and rs <= host:
                return True
            if isinstance(v, cst.BinaryOperation):
                return any(self._is_host_value(side, host) for side in (v.left, v.right)) and not any(
                    isinstance(side, cst.Call) and self._op(side) == "tensor" for side in (v.left, v.right)
                )
            if isinstance(v, cst.Subscript):
                return self._is_host_value(v.value, host)
        if isinstance(v, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.Dict)):
            return True
        if isinstance(v, (cst.List, cst.Tuple)):
            return all(not isinstance(e.value, (cst.Name, cst.Call, cst.Subscript, cst.Attribute)) for e in v.elements)
        if isinstance(v, cst.Call):
            return self._op(v) in ("host", "shape")
        if isinstance(v, cst.Attribute) and v.attr.value == "shape":
            return True
        return False

    def _produces_tensor(self, v: cst.BaseExpression, seen: frozenset[str]) -> bool:
        if isinstance(v, cst.Call):
            return self._op(v) == "tensor"
        if isinstance(v, cst.BinaryOperation):
            return self._produces_tensor(v.left, seen) or self._produces_tensor(v.right, seen)
        if isinstance(v, cst.UnaryOperation):
            return self._produces_tensor(v.expression, seen)
        if isinstance(v, cst.Subscript):
            return self._produces_tensor(v.value, seen)
        return False


def _slice_or_math(v: cst.BaseExpression) -> bool:
    """The value is the names' data, sliced or combined (not a call's result, not a
    container of unrelated things)."""
    return isinstance(v, (cst.Name, cst.Subscript, cst.BinaryOperation, cst.UnaryOperation, cst.IfExp))


def _names_in(target: cst.BaseExpression) -> Iterator[str]:
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for e in target.elements:
            yield from _names_in(e.value)


def _params(fn: _Fn) -> list[str]:
    ps = fn.params
    out = [p.name.value for p in (*ps.posonly_params, *ps.params, *ps.kwonly_params)]
    if isinstance(ps.star_arg, cst.Param):
        out.append(ps.star_arg.name.value)
    if ps.star_kwarg is not None:
        out.append(ps.star_kwarg.name.value)
    return out
