"""The static rank and last-axis size of a tensor expression, where the code spells them.

Rules that judge an axis by its spelling (``x[:, :, k]`` is the last axis only of a 3-D
tensor; ``tf.split(x, 3, 3)`` only of a 4-D one) or a slice by its size (a slice at a
multiple of 128 lanes keeps the tiling; four box coordinates are no feature dim) ask
here. Answers come only from what the code says:

- ``keras.Input(shape=...)``, ``tf.placeholder(shape=...)``, a reshape to a literal shape;
- layers of a fixed output rank (``Conv2D`` gives 4-D, ``Flatten`` 2-D), ``Dense`` /
  ``Embedding`` / ``Reshape`` / ``Permute``, a conv's constant ``filters``, a ``Dense``'s
  ``units``;
- ops that keep their operand's shape (elementwise math, ``cast``, ``cumsum``, ``pad`` to
  a literal paddings list), ``einsum``'s output subscripts, ``stack`` / ``concat`` /
  ``expand_dims`` / ``squeeze`` / ``one_hot`` / reductions, and slicing;
- the bindings that reach a name (every one must agree), its pieces when it is unpacked
  from a split, and what every same-file call site passes for a parameter.

Nothing is guessed: where the code does not say, the answer is None.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Sequence

import libcst as cst

from ..core.symbols import (
    CONV_LAYERS,
    DENSE_LAYERS,
    ELEMENTWISE_NARY,
    FUNCTIONAL_CONV_RANK,
    FUNCTIONAL_CONVS,
    SAME_SHAPE_LAYERS,
    SAME_SHAPE_OPS,
    SHAPE_REDUCTIONS,
    SPATIAL_OUTPUT_RANK,
)
from .dataflow import layer_constructor
from .nodes import get_arg

if TYPE_CHECKING:
    from .model import SemanticModel

_MAX_DEPTH = 12


class TensorShape(NamedTuple):
    """What is known of a tensor's shape: its rank and its last axis's size (None: not known)."""

    rank: int | None = None
    last: int | None = None


UNKNOWN_SHAPE = TensorShape()
_OP_FAMILIES = ("tf.", "keras.ops.", "keras.backend.")


def shape_of(ctx: SemanticModel, expr: cst.BaseExpression, _depth: int = 0) -> TensorShape:
    """The rank and last-axis size of ``expr`` (a node of ``ctx``'s file) as far as the
    code says them; :data:`UNKNOWN_SHAPE` parts where it does not."""
    caches = ctx.caches
    hit = caches.shapes.get(id(expr))
    if hit is not None and hit[0] is expr:
        return hit[1]
    if _depth > _MAX_DEPTH or id(expr) in caches.shapes_busy:
        # a cycle through bindings (a loop's `x = f(x)`) or the depth budget: unknown here,
        # and what is worked out from this answer is not remembered (asked from elsewhere,
        # it may be known)
        caches.shapes_cut = True
        return UNKNOWN_SHAPE
    outer, caches.shapes_cut = caches.shapes_cut, False
    caches.shapes_busy.add(id(expr))
    try:
        found = _shape(ctx, expr, _depth + 1)
    finally:
        caches.shapes_busy.discard(id(expr))
    if not caches.shapes_cut:
        caches.shapes[id(expr)] = (expr, found)
    caches.shapes_cut = caches.shapes_cut or outer
    return found


def _shape(ctx: SemanticModel, expr: cst.BaseExpression, depth: int) -> TensorShape:
    tp = type(expr)
    if tp is cst.Name:
        return _name(ctx, expr, depth)  # type: ignore[arg-type]
    if tp is cst.Call:
        return _call(ctx, expr, depth)  # type: ignore[arg-type]
    if tp is cst.Subscript:
        return _subscript(ctx, expr, depth)  # type: ignore[arg-type]
    if tp is cst.BinaryOperation:
        return _broadcast([shape_of(ctx, s, depth) for s in (expr.left, expr.right)  # type: ignore[attr-defined]
                           if not _number(ctx, s)])
    if tp is cst.UnaryOperation:
        return shape_of(ctx, expr.expression, depth)  # type: ignore[attr-defined]
    if tp is cst.Attribute:
        found = ctx.values.deref(expr, ctx.scopes.scopes_of(expr))
        return _agree([shape_of(ctx, v, depth) for v, _ in found if v is not None]) if len(found) == 1 else UNKNOWN_SHAPE
    return UNKNOWN_SHAPE


# ---- names ------------------------------------------------------------------------------
def _name(ctx: SemanticModel, name: cst.Name, depth: int) -> TensorShape:
    found = _bound(ctx, name, depth)
    if found.last is None:
        guarded = _guarded_last(ctx, name)
        if guarded is not None:
            return TensorShape(found.rank, guarded)
    return found


def _guarded_last(ctx: SemanticModel, name: cst.Name) -> int | None:
    """Inside ``if ops.shape(x)[-1] == 4:`` (or ``x.shape[-1] == 4``), ``x``'s last axis is 4."""
    child: cst.CSTNode = name
    for anc in reversed(ctx.scopes.ancestors(name)):
        if isinstance(anc, cst.If) and child is anc.body:
            test = anc.test
            if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.Equal):
                size = ctx.values.const(test.comparisons[0].comparator)
                if _positive_int(size) and _last_of(ctx, test.left) == name.value:
                    return int(size)
        if isinstance(anc, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            break
        child = anc
    return None


def _last_of(ctx: SemanticModel, expr: cst.BaseExpression) -> str | None:
    """``x`` for ``ops.shape(x)[-1]`` / ``x.shape[-1]`` / ``K.int_shape(x)[-1]``."""
    if not (isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index)):
        return None
    if ctx.values.const(expr.slice[0].slice.value) != -1:
        return None
    base = expr.value
    if isinstance(base, cst.Attribute) and base.attr.value == "shape" and isinstance(base.value, cst.Name):
        return base.value.value
    if isinstance(base, cst.Call) and base.args and isinstance(base.args[0].value, cst.Name) and _op(ctx, base) in ("shape", "int_shape"):
        return base.args[0].value.value
    return None


def _bound(ctx: SemanticModel, name: cst.Name, depth: int) -> TensorShape:
    bindings, _ = ctx.scopes.reaching(name)
    if not bindings:
        return UNKNOWN_SHAPE
    shapes: list[TensorShape] = []
    for b in bindings:
        if b.kind == "assign" and b.value is not None:
            shapes.append(shape_of(ctx, b.value, depth))
        elif b.kind == "param":
            shapes.append(_param(ctx, name, depth))
        elif b.kind == "other" and isinstance(b.node, cst.Assign):
            shapes.append(_unpacked(ctx, b.node, name.value, depth))
        else:
            return UNKNOWN_SHAPE
    return _agree(shapes)


def _param(ctx: SemanticModel, name: cst.Name, depth: int) -> TensorShape:
    """What every same-file call site passes (all of them seen), else unknown."""
    fn = ctx.scopes.callable_of(name)
    if not isinstance(fn, cst.FunctionDef) or not ctx.values.call_sites(fn).complete:
        return UNKNOWN_SHAPE
    passed = ctx.values.param_values(fn, name.value)
    if not passed or any(p.value is None for p in passed):
        return UNKNOWN_SHAPE
    return _agree([shape_of(ctx, p.value, depth) for p in passed if p.value is not None])


def _unpacked(ctx: SemanticModel, assign: cst.Assign, target: str, depth: int) -> TensorShape:
    """``target``, one piece of ``a, b = tf.split(x, 2, axis)`` / ``tf.unstack(x)``: its shape."""
    value = assign.value
    targets = assign.targets[0].target
    if not isinstance(value, cst.Call) or not isinstance(targets, (cst.Tuple, cst.List)):
        return UNKNOWN_SHAPE
    op = _op(ctx, value)
    if op not in ("split", "unstack"):
        return UNKNOWN_SHAPE
    whole = _first(ctx, value, depth)
    axis = _const_arg(ctx, value, "axis", 2, 0)
    rank = whole.rank
    last_axis = isinstance(axis, int) and rank is not None and axis in (-1, rank - 1)
    if op == "unstack":
        return TensorShape(rank - 1 if rank is not None else None, None if last_axis else whole.last)
    if not last_axis:
        return TensorShape(rank, whole.last)
    pieces = _const_arg(ctx, value, "num_or_size_splits", 1, None)
    names = [e.value.value if isinstance(e.value, cst.Name) else None for e in targets.elements]
    if isinstance(pieces, (list, tuple)) and len(pieces) == len(names) and target in names:
        size = pieces[names.index(target)]  # tf.split's sizes, one per piece
        return TensorShape(rank, size if _positive_int(size) else None)
    n = pieces if _positive_int(pieces) else None
    return TensorShape(rank, whole.last // n if n and whole.last is not None and whole.last % n == 0 else None)


# ---- calls ------------------------------------------------------------------------------
def _op(ctx: SemanticModel, call: cst.Call) -> str | None:
    """The short name of a TF / keras.ops / keras.backend op (``"reshape"``), else None."""
    name = ctx.names.call_name_anywhere(call) if type(call.func) is not cst.Call else None
    if name is None or not name.startswith(_OP_FAMILIES) or name.startswith("tf.keras."):
        return None
    return name.rsplit(".", 1)[-1]


def _call(ctx: SemanticModel, call: cst.Call, depth: int) -> TensorShape:
    layer = _layer(ctx, call, depth)
    if layer is not None:
        return layer
    op = _op(ctx, call)
    if op is None:
        return UNKNOWN_SHAPE
    if op in SAME_SHAPE_OPS:
        # elementwise of two or three operands (`maximum(a, b)`, `where(c, a, b)`), else of the first
        n = 3 if op in ELEMENTWISE_NARY else 1
        args = [a.value for a in call.args[:n] if a.keyword is None]
        return _broadcast([shape_of(ctx, v, depth) for v in args if not _number(ctx, v)])
    if op in SHAPE_REDUCTIONS:
        return _reduced(ctx, call, depth)
    builder = _OPS.get(op)
    return builder(ctx, call, depth) if builder is not None else UNKNOWN_SHAPE


def _reshape(ctx: SemanticModel, call: cst.Call, depth: int) -> TensorShape:
    shape = get_arg(call, "shape", 1) or get_arg(call, "new_shape", 1)
    return _literal_shape(ctx, shape.value) if shape is not None else UNKNOWN_SHAPE


def _literal_shape(ctx: SemanticModel, node: cst.BaseExpression, extra: int = 0) -> TensorShape:
    """A shape written out (``(b, h, -1, 64)``): its length, and its last entry when a
    constant (not -1). ``extra``: dims the literal leaves out (Keras's batch)."""
    if isinstance(node, cst.Name):
        found = ctx.values.deref(node, ctx.scopes.scopes_of(node))
        if len(found) == 1 and found[0][0] is not None and not isinstance(found[0][0], cst.Name):
            return _literal_shape(ctx, found[0][0], extra)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        # `x_shape[:-1] + (d, 2)`: the tail is spelled, the rank is not
        return TensorShape(None, _literal_shape(ctx, node.right).last)
    if isinstance(node, (cst.Tuple, cst.List)):
        els = node.elements
        if not els or isinstance(els[-1], cst.StarredElement):
            return UNKNOWN_SHAPE
        last = ctx.values.const(els[-1].value, scopes=ctx.scopes.scopes_of(els[-1].value))
        rank = None if any(isinstance(e, cst.StarredElement) for e in els) else len(els) + extra
        return TensorShape(rank, last if _positive_int(last) else None)
    value = ctx.values.const(node, scopes=ctx.scopes.scopes_of(node))
    if isinstance(value, (list, tuple)) and value and all(isinstance(d, int) or d is None for d in value):
        return TensorShape(len(value) + extra, value[-1] if _positive_int(value[-1]) else None)
    return UNKNOWN_SHAPE


def _pad(ctx: SemanticModel, call: cst.Call, depth: int) -> TensorShape:
    paddings = get_arg(call, "paddings", 1) or get_arg(call, "pad_width", 1)
    whole = _first(ctx, call, depth)
    if paddings is not None and isinstance(paddings.value, (cst.List, cst.Tuple)):
        return TensorShape(len(paddings.value.elements), None)
    return TensorShape(whole.rank, None)


def _transpose(ctx: SemanticModel, call: cst.Call, depth: int) -> TensorShape:
    perm = get_arg(call, "perm", 1) or get_arg(call, "axes", 1) or get_arg(call, "pattern", 1)
    value = ctx.values.const(perm.value, scopes=ctx.scopes.scopes_of(perm.value)) if perm is not None else None
    return TensorShape(len(value), None) if isinstance(value, (list, tuple)) else UNKNOWN_SHAPE


def _expand_dims(ctx: SemanticModel, call: cst.Call, depth: int) -> TensorShape:
    whole = _first(ctx, call, depth)
    axis = _const_arg(ctx, call, "axis", 1, None)
    if whole.rank is None:
        return TensorShape(None, 1 if axis == -1 else None)
    return TensorShape(whole.rank + 1, 1 if axis == -1 or axis == whole.rank else whole.last)


def _squeeze(ctx: SemanticModel, call: cst.Call, depth: int) -> TensorShape:
    whole = _first(ctx, call, depth)
    axis = _const_arg(ctx, call, "axis", 1, None)
    if whole.rank is None or not isinstance(axis, (int, list, tuple)) or isinstance(axis, bool):
        return UNKNOWN_SHAPE
    axes = [axis] if isinstance(axis, int) else list(axis)
    rank = whole.rank - len(axes)
    return TensorShape(rank, None if any(a in (-1, whole.rank - 1) for a in axes) else whole.last)


def _stack(ctx: SemanticModel, call: cst.Call, depth: int) -> TensorShape:
    parts = get_arg(call, "values", 0) or get_arg(call, "x", 0) or get_arg(call, "arrays", 0)
    if parts is None or not isinstance(parts.value, (cst.List, cst.Tuple)) or any(
            isinstance(e, cst.StarredElement) for e in parts.value.elements):
        return UNKNOWN_SHAPE
    each = _agree([shape_of(ctx, e.value, depth) for e in parts.value.elements])
    axis = _const_arg(ctx, call, "axis", 1, 0)
    if each.rank is None or not isinstance(axis, int):
        return UNKNOWN_SHAPE
    last = axis in (-1, each.rank)
    return TensorShape(each.rank + 1, len(parts.value.elements) if last else each.last)


def _concat(ctx: SemanticModel, call: cst.Call, depth: int) -> TensorShape:
    parts = get_arg(call, "values", 0) or get_arg(call, "xs", 0) or get_arg(call, "tensors", 0)
    if parts is None or not isinstance(parts.value, (cst.List, cst.Tuple)) or any(
            isinstance(e, cst.StarredElement) for e in parts.value.elements):
        return UNKNOWN_SHAPE
    shapes = [shape_of(ctx, e.value, depth) for e in parts.value.elements]
    rank = _agree(shapes).rank
    axis = _const_arg(ctx, call, "axis", 1, -1)
    if rank is None or not isinstance(axis, int):
        return TensorShape(rank, None)
    if axis in (-1, rank - 1):
        lasts = [s.last for s in shapes if s.last is not None]
        return TensorShape(rank, sum(lasts) if len(lasts) == len(shapes) else None)
    return TensorShape(rank, _agree(shapes).last)


def _einsum(ctx: SemanticModel, call: cst.Call, depth: int) -> TensorShape:
    spec = call.args[0].value if call.args else None
    value = ctx.values.const(spec, scopes=ctx.scopes.scopes_of(spec)) if spec is not None else None
    if not isinstance(value, str) or "->" not in value or "." in value:
        return UNKNOWN_SHAPE
    return TensorShape(len(value.split("->")[1].strip()), None)


def _matmul(ctx: SemanticModel, call: cst.Call, depth: int) -> TensorShape:
    if len(call.args) < 2:
        return UNKNOWN_SHAPE
    a, b = shape_of(ctx, call.args[0].value, depth), shape_of(ctx, call.args[1].value, depth)
    if a.rank is None or b.rank is None:
        return UNKNOWN_SHAPE
    return TensorShape(max(a.rank, b.rank), b.last)


def _one_hot(ctx: SemanticModel, call: cst.Call, depth: int) -> TensorShape:
    whole = _first(ctx, call, depth)
    size = _const_arg(ctx, call, "depth", 1, None)
    if whole.rank is None:
        return UNKNOWN_SHAPE
    return TensorShape(whole.rank + 1, size if _positive_int(size) else None)


def _tf_slice(ctx: SemanticModel, call: cst.Call, depth: int) -> TensorShape:
    size = _const_arg(ctx, call, "size", 2, None)
    if not isinstance(size, (list, tuple)) or not size:
        return UNKNOWN_SHAPE
    return TensorShape(len(size), size[-1] if _positive_int(size[-1]) else None)


def _placeholder(ctx: SemanticModel, call: cst.Call, depth: int) -> TensorShape:
    shape = get_arg(call, "shape", 1)
    return _literal_shape(ctx, shape.value) if shape is not None else UNKNOWN_SHAPE


def _keeps_first(ctx: SemanticModel, call: cst.Call, depth: int) -> TensorShape:
    return _first(ctx, call, depth)


def _filled(ctx: SemanticModel, call: cst.Call, depth: int) -> TensorShape:
    """``ones(shape)`` / ``zeros(shape)`` / ``full(shape, v)``: the shape spelled."""
    shape = get_arg(call, "shape", 0)
    return _literal_shape(ctx, shape.value) if shape is not None else UNKNOWN_SHAPE


def _gathered(ctx: SemanticModel, call: cst.Call, depth: int) -> TensorShape:
    """``take_along_axis(x, indices, axis)``: the indices' shape."""
    indices = get_arg(call, "indices", 1)
    return shape_of(ctx, indices.value, depth) if indices is not None else UNKNOWN_SHAPE


def _literal_array(ctx: SemanticModel, call: cst.Call, depth: int) -> TensorShape:
    """``ops.array([w, h])`` / ``tf.constant([[1, 2]])``: the nesting and the innermost length."""
    node = call.args[0].value if call.args else None
    rank = 0
    while isinstance(node, (cst.List, cst.Tuple)) and node.elements and not any(
            isinstance(e, cst.StarredElement) for e in node.elements):
        rank, last, node = rank + 1, len(node.elements), node.elements[0].value
    return TensorShape(rank, last) if rank else UNKNOWN_SHAPE


def _shape_vector(ctx: SemanticModel, call: cst.Call, depth: int) -> TensorShape:
    """``tf.shape(x)``: a vector of one entry per axis."""
    return TensorShape(1, _first(ctx, call, depth).rank)


_OPS = {
    "reshape": _reshape, "pad": _pad, "transpose": _transpose, "permute_dimensions": _transpose,
    "expand_dims": _expand_dims, "squeeze": _squeeze, "stack": _stack, "concat": _concat,
    "concatenate": _concat, "einsum": _einsum, "matmul": _matmul, "dot": _matmul, "one_hot": _one_hot,
    "slice": _tf_slice, "placeholder": _placeholder, "top_k": _keeps_first, "ones": _filled, "zeros": _filled,
    "full": _filled, "take_along_axis": _gathered, "shape": _shape_vector, "array": _literal_array,
    "constant": _literal_array, "convert_to_tensor": _literal_array,
}


def _reduced(ctx: SemanticModel, call: cst.Call, depth: int) -> TensorShape:
    whole = _first(ctx, call, depth)
    keep = _const_arg(ctx, call, "keepdims", 2, False) or _const_arg(ctx, call, "keep_dims", 2, False)
    arg = get_arg(call, "axis", 1) or get_arg(call, "reduction_indices", 1)
    if arg is None:
        return TensorShape(whole.rank, None) if keep is True else TensorShape(0, None)
    axis = ctx.values.const(arg.value, scopes=ctx.scopes.scopes_of(arg.value))
    if whole.rank is None or not isinstance(axis, (int, list, tuple)) or isinstance(axis, bool):
        return UNKNOWN_SHAPE
    axes = [axis] if isinstance(axis, int) else list(axis)
    touches_last = any(a in (-1, whole.rank - 1) for a in axes)
    if keep is True:
        return TensorShape(whole.rank, 1 if touches_last else whole.last)
    return TensorShape(whole.rank - len(axes), None if touches_last else whole.last)


# ---- layers -----------------------------------------------------------------------------
def _layer(ctx: SemanticModel, call: cst.Call, depth: int) -> TensorShape | None:
    """A Keras layer applied (``Conv2D(8, 3)(x)``, ``self.conv(x)``) or an input made."""
    func = call.func
    if type(func) is cst.Call or type(func) is cst.Subscript or (type(func) is cst.Attribute and
                                                                 isinstance(func.value, cst.Name) and func.value.value == "self"):
        found = layer_constructor(ctx, func)
        if found is None:
            return None
        ctor, name = found
    else:
        name = ctx.names.call_name_anywhere(call) or ""
        if name in ("keras.Input", "keras.layers.Input"):
            shape = get_arg(call, "shape", 0)
            batch = get_arg(call, "batch_shape")
            return (_literal_shape(ctx, shape.value, extra=1) if shape is not None else
                    _literal_shape(ctx, batch.value) if batch is not None else UNKNOWN_SHAPE)
        if not name.startswith(("keras.layers.", "tf.layers.")) and name not in FUNCTIONAL_CONV_RANK:
            return None
        ctor = call
    return _layer_output(ctx, ctor, name, call, depth)


def _layer_output(ctx: SemanticModel, ctor: cst.Call, name: str, call: cst.Call, depth: int) -> TensorShape:
    inp = call.args[0].value if call.args else None
    short = name.rsplit(".", 1)[-1]
    width = CONV_LAYERS.get(name) or DENSE_LAYERS.get(name) or FUNCTIONAL_CONVS.get(name)
    units = _const_arg(ctx, ctor, width[0], width[1], None) if width is not None else None
    last = units if _positive_int(units) else None
    rank = SPATIAL_OUTPUT_RANK.get(name) or FUNCTIONAL_CONV_RANK.get(name)
    if rank is None and name.startswith("keras.layers.") and short[-2:] in ("1D", "2D", "3D") and not short.startswith("Global"):
        rank = int(short[-2]) + 2  # Conv1D, MaxPooling1D, UpSampling3D ...: batch, space, channels
    if rank is not None:
        return TensorShape(rank, last)
    before = shape_of(ctx, inp, depth) if inp is not None else UNKNOWN_SHAPE
    if name in DENSE_LAYERS:
        return TensorShape(before.rank, last)
    if short == "Embedding":
        size = _const_arg(ctx, ctor, "output_dim", 1, None)
        return TensorShape(before.rank + 1 if before.rank is not None else None, size if _positive_int(size) else None)
    if short == "Flatten":
        return TensorShape(2, None)
    if short in ("Reshape", "Permute"):
        arg = get_arg(ctor, "target_shape" if short == "Reshape" else "dims", 0)
        found = _literal_shape(ctx, arg.value, extra=1) if arg is not None else UNKNOWN_SHAPE
        return found if short == "Reshape" else TensorShape(found.rank, None)
    return before if short in SAME_SHAPE_LAYERS else UNKNOWN_SHAPE


# ---- slicing ----------------------------------------------------------------------------
def _subscript(ctx: SemanticModel, node: cst.Subscript, depth: int) -> TensorShape:
    base = shape_of(ctx, node.value, depth)
    if base.rank is None:
        return UNKNOWN_SHAPE
    dropped = added = 0
    for el in node.slice:
        s = el.slice
        if isinstance(s, cst.Index):
            v = s.value
            if isinstance(v, cst.Ellipsis):
                continue
            if (isinstance(v, cst.Name) and v.value == "None") or (isinstance(v, cst.Attribute) and v.attr.value == "newaxis"):
                added += 1
            else:
                dropped += 1
    last = node.slice[-1].slice
    keeps_last = isinstance(last, cst.Slice) and last.lower is None and last.upper is None and last.step is None
    return TensorShape(base.rank - dropped + added, base.last if keeps_last else None)


# ---- helpers ----------------------------------------------------------------------------
def _first(ctx: SemanticModel, call: cst.Call, depth: int) -> TensorShape:
    return shape_of(ctx, call.args[0].value, depth) if call.args and call.args[0].keyword is None else UNKNOWN_SHAPE


def _const_arg(ctx: SemanticModel, call: cst.Call, kw: str, index: int, default: Any) -> Any:
    arg = get_arg(call, kw, index)
    if arg is None:
        return default
    return ctx.values.const(arg.value, scopes=ctx.scopes.scopes_of(arg.value))


def _positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _number(ctx: SemanticModel, expr: cst.BaseExpression) -> bool:
    if isinstance(expr, (cst.Integer, cst.Float)):
        return True
    v = ctx.values.const(expr, scopes=ctx.scopes.scopes_of(expr))
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _agree(shapes: Sequence[TensorShape]) -> TensorShape:
    """What all of several possible shapes say alike."""
    if not shapes:
        return UNKNOWN_SHAPE
    ranks = {s.rank for s in shapes}
    lasts = {s.last for s in shapes}
    return TensorShape(ranks.pop() if len(ranks) == 1 else None, lasts.pop() if len(lasts) == 1 else None)


def _broadcast(shapes: Sequence[TensorShape]) -> TensorShape:
    """Operands combined elementwise: the highest rank when every rank is known. The last
    size broadcasts: one operand's known size above 1 is the result's (every other is that
    or 1, or the program would fail); all 1 gives 1."""
    if not shapes:
        return UNKNOWN_SHAPE
    tensors = [s for s in shapes if s.rank != 0]  # (a scalar broadcasts into any axis)
    known = {s.last for s in tensors if s.last is not None and s.last != 1}
    if len(known) == 1:
        last: int | None = known.pop()
    else:
        last = 1 if tensors and not known and all(s.last == 1 for s in tensors) else None
    ranks = [s.rank for s in shapes]
    return TensorShape(None if None in ranks else max(r for r in ranks if r is not None), last)
