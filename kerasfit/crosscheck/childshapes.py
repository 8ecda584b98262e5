"""The shapes a built model is traced at: each input's unknown dims and the batch, from
--input-shape, the model, the script's own sizes, else a stated default (always said)."""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

from .childbase import (DEFAULT_BATCH, DEFAULT_IMAGE, DEFAULT_SEQUENCE, ChildError, Options, model_classes,
                        user_method)
from .sizes import ScriptSizes


def fill_none(shape: list[int | None], input_shape: list[int] | None, sizes: ScriptSizes | None,
              said: list[str]) -> list[int | None]:
    """Fill an input's unknown non-batch dims: ``--input-shape``, else the script's own
    sizes (resize/crop, sequence length), else a stated default per modality."""
    dims = shape[1:]
    if not any(d is None for d in dims):
        return shape
    if input_shape and len(input_shape) == len(dims):
        return [shape[0]] + [given if d is None else d for d, given in zip(dims, input_shape)]
    shown = "(" + ", ".join(str(d) for d in shape) + ")"
    filled = list(dims)
    if len(dims) in (3, 4) and dims[-1] is not None and all(d is not None for d in dims[:-3]):
        # images (H, W, C) or volumes/videos with a known depth (D, H, W, C)
        h, w, why = _image_size(sizes)
        filled[-3] = filled[-3] if filled[-3] is not None else h
        filled[-2] = filled[-2] if filled[-2] is not None else w
        said.append(f"input {shown}: {filled[-3]}×{filled[-2]}, {why}; --input-shape to change")
    elif len(dims) in (1, 2) and dims[0] is None and all(d is not None for d in dims[1:]):
        filled[0], why = _sequence_length(sizes)
        said.append(f"input {shown}: sequence length {filled[0]}, {why}; --input-shape to change")
    if any(d is None for d in filled):
        raise ChildError(
            f"the model's input shape {tuple(shape)} has unknown non-batch dims: pass "
            f"--input-shape {','.join(str(d) if d is not None else 'N' for d in dims)} "
            "with N filled in")
    return [shape[0]] + filled


def _image_size(sizes: ScriptSizes | None) -> tuple[int, int, str]:
    if sizes is not None and sizes.image is not None:
        h, w = sizes.image.value[:2]
        return h, w, f"from the script (line {sizes.image.line}: {sizes.image.what})"
    return DEFAULT_IMAGE, DEFAULT_IMAGE, "a stated default for images (the script states no size)"


def _sequence_length(sizes: ScriptSizes | None) -> tuple[int, str]:
    if sizes is not None and sizes.sequence is not None:
        return sizes.sequence.value[0], f"from the script (line {sizes.sequence.line}: {sizes.sequence.what})"
    return DEFAULT_SEQUENCE, "a stated default for sequences (the script states no length)"


def input_specs(model: Any, input_shape: list[list[int]] | None = None, sizes: ScriptSizes | None = None,
                said: list[str] | None = None, stated: tuple[tuple[int, ...], str] | None = None
                ) -> tuple[list[list[int | None]], list[str]]:
    """Each input's shape (batch first, unknown dims filled in) and dtype. ``stated``: the
    input's non-batch dims as the script's own step feeds it, and where that is said."""
    said = [] if said is None else said
    declared = _declared(model)
    if declared is not None:
        shapes, dtypes = declared
    else:
        shape, token_ids = _undeclared(model, input_shape, sizes, said, stated)
        shapes = [list(s) for s in shape] if shape and isinstance(shape[0], (list, tuple)) else [list(shape)]
        dtypes = ["int32" if token_ids else "float32"] * len(shapes)
    # One --input-shape fills every input's None dims (of its rank); several, one input each.
    given: list[list[int] | None] = (
        [input_shape[0]] * len(shapes) if input_shape and len(input_shape) == 1
        else [input_shape[i] if input_shape and i < len(input_shape) else None for i in range(len(shapes))])
    return [fill_none(s, g, sizes, said) for s, g in zip(shapes, given)], dtypes


def _declared(model: Any) -> tuple[list[list[int | None]], list[str]] | None:
    """The shapes and dtypes of a model's declared inputs (functional, Sequential with an Input)."""
    try:
        inputs = model.inputs
    except Exception:
        inputs = None
    if not inputs:
        return None
    return [list(t.shape) for t in inputs], [str(getattr(t.dtype, "name", t.dtype)) for t in inputs]


def _built_shape(model: Any) -> Any:
    shape: Any = getattr(model, "input_shape", None)  # Keras's: one shape, a list of them, or None
    if shape is None:
        try:
            built = model._build_shapes_dict  # keras 3 subclassed, built via build()
            shape = next(iter(built.values())) if built else None
        except Exception:
            shape = None
    return shape


def _undeclared(model: Any, input_shape: list[list[int]] | None, sizes: ScriptSizes | None,
                said: list[str], stated: tuple[tuple[int, ...], str] | None = None) -> tuple[Any, bool]:
    """The input shape of a model that declares none (subclassed, a Sequential with no Input):
    built, given, what the script's own step feeds it, the shape the entry passes, the one of
    the functional model inside it, the array the script fits, else what its first layer
    takes; (shape, whether it takes token ids)."""
    shape = _built_shape(model)
    if shape is None and input_shape:
        shape = [[None] + list(dims) for dims in input_shape]
    if shape is not None:
        return shape, False
    for given in (stated, (sizes.entry_input.value, sizes.entry_input.what) if sizes and sizes.entry_input else None):
        if given is not None:
            said.append(f"input (rows, {', '.join(map(str, given[0]))}): {given[1]}")
            return [None, *given[0]], False
    # A subclassed wrapper around one functional model (``call`` returns ``self.net(x)``).
    inner = [v for v in vars(model).values() if v is not model and functional_inputs(v)]
    if inner and all(functional_inputs(v) == functional_inputs(inner[0]) for v in inner):
        shape = functional_inputs(inner[0])
        names = ", ".join(v.name for v in inner)
        said.append(f"input {tuple(shape or ())}: that of the model{'s' if len(inner) > 1 else ''} inside it, {names}")
        return shape, False
    if sizes is not None and sizes.fitted is not None:
        said.append(f"input (rows, {', '.join(map(str, sizes.fitted.value))}): the array the script fits "
                    f"(line {sizes.fitted.line}: {sizes.fitted.what})")
        return [None, *sizes.fitted.value], False
    first = first_layer(model)
    if first in _IMAGE_FIRST:
        # Its first layer resizes, crops or convolves images: an image of unknown size,
        # filled in from the script's sizes or the stated default.
        said.append(f"input unknown (a subclassed model): an RGB image, as its first layer ({first}) takes")
        return [None, None, None, 3], False
    if first == "Embedding":
        # Token ids: a sequence of unknown length, filled in like any other.
        said.append("input unknown (a subclassed model): token ids, as its first layer (Embedding) takes")
        return [None, None], True
    reads = call_inputs(model)
    if len(reads) > 1:
        raise ChildError(
            f"the model has no known input shape and its call() takes {len(reads)} inputs "
            f"({', '.join(reads)}): pass --input-shape with each one's dims, separated by ';' "
            f"(e.g. {';'.join(['100,80', '50', '10', '1'][:len(reads)])}), or build it "
            "(call it once, or use keras.Input) inside the entry")
    raise ChildError(
        "the model has no known input shape: pass --input-shape (e.g. 224,224,3), "
        "or build it (call it once, or use keras.Input) inside the entry")


def call_inputs(model: Any) -> list[str]:
    """The inputs a subclassed model's ``call`` takes apart: ``inputs[0]``, ``inputs[1]`` or
    ``a, b = inputs`` of its first argument, as written; one name when it reads it whole."""
    klass = user_method(model, "call")
    try:
        fn = ast.parse(textwrap.dedent(inspect.getsource(vars(klass)["call"]))).body[0] if klass else None
    except (OSError, TypeError, SyntaxError):
        fn = None
    if not isinstance(fn, ast.FunctionDef) or len(fn.args.args) < 2:
        return []
    arg = fn.args.args[1].arg
    items = sorted({n.slice.value for n in ast.walk(fn) if isinstance(n, ast.Subscript)
                    and isinstance(n.value, ast.Name) and n.value.id == arg
                    and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, int)})
    if items == list(range(len(items))) and items:
        return [f"{arg}[{i}]" for i in items]
    for n in ast.walk(fn):
        if (isinstance(n, ast.Assign) and isinstance(n.value, ast.Name) and n.value.id == arg
                and isinstance(n.targets[0], ast.Tuple)):
            return [ast.unparse(e) for e in n.targets[0].elts]
    return [arg]


_IMAGE_FIRST = frozenset({"Resizing", "RandomCrop", "CenterCrop", "RandomFlip", "Rescaling", "Conv2D",
                          "DepthwiseConv2D", "SeparableConv2D", "RandomRotation", "RandomZoom"})


def first_layer(model: Any) -> str | None:
    """The class of a model's first leaf layer, in the order its attributes made them."""
    try:
        layers = list(model._flatten_layers(include_self=False, recursive=True))
    except Exception:
        return None
    leaves = [layer for layer in layers if not list(getattr(layer, "_layers", []) or [])]
    return type(leaves[0]).__name__ if leaves else None


def functional_inputs(value: Any) -> list[int | None] | None:
    """The one input shape of a functional Keras model (else None)."""
    classes = model_classes()
    try:
        inputs: Any = getattr(value, "inputs", None) if classes and isinstance(value, classes) else None
    except Exception:
        return None
    return list(inputs[0].shape) if inputs and len(inputs) == 1 else None


def batched(shape: list[int | None], batch: int) -> list[int]:
    """An input of ``shape`` at ``batch``; input_specs has filled in or refused every
    unknown dim after the batch one."""
    dims = [int(d) for d in shape[1:] if d is not None]
    if len(dims) != len(shape) - 1:
        raise ChildError(f"the input shape {tuple(shape)} has unknown non-batch dims")
    return [batch] + dims


def global_batch_of(opts: Options, fixed: int | None, sizes: ScriptSizes | None, said: list[str]) -> int:
    """The global batch: --batch-size, else the model's input spec, else the script's."""
    if opts.batch_size:
        said.append(f"batch {opts.batch_size} from --batch-size")
        return opts.batch_size
    if fixed:
        said.append(f"batch {fixed}: the model's input fixes it")
        return fixed
    if sizes is not None and sizes.batch is not None:
        b = sizes.batch
        if b.fit_default:
            said.append(f"batch {b.value[0]}: fit()'s default, as the script's fit (line {b.line}) passes no "
                        "batch_size (--batch-size to change)")
            return b.value[0]
        if b.per_replica:
            said.append(f"batch {b.value[0]} per replica from the script (line {b.line}: {b.what}) "
                        f"× {opts.cores} core{'s' if opts.cores != 1 else ''}")
            return b.value[0] * max(1, opts.cores)
        said.append(f"batch {b.value[0]} from the script (line {b.line}: {b.what})")
        return b.value[0]
    said.append(f"batch {DEFAULT_BATCH}: a stated default (the script states none; --batch-size to change)")
    return DEFAULT_BATCH

