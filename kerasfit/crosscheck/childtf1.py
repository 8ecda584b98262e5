"""Lower a TF1 graph's training step (``tf.compat.v1`` placeholders, ``tf.layers``) to HLO.

The script's graph is built inside ``wrap_function`` (eager execution must stay on for
``experimental_get_compiler_ir``), differentiated on a stand-in loss over the float
tensors the entry returns, pruned to its placeholders and lowered at the per-core batch.
"""

from __future__ import annotations

from typing import Any, Callable, TypedDict

from .childbase import (DEFAULT_BATCH, ChildError, Lowered, Options, Site, Sites, mark, model_classes,
                        user_error)
from .messages import one_line
from .hlo import strip_scopes


class GraphState(TypedDict, total=False):
    """What the patched TF1 ``placeholder`` learns while the user's graph is built."""

    global_batch: int
    per_core_batch: int
    declared: int | None  # the batch the script's placeholders hard-code
    input_sites: list[Site]
    notes: list[str]


def patch_tf1(tf: Any, opts: Options, state: GraphState, sites: Sites) -> None:
    """Placeholders get the per-core batch; eager-disabling calls become no-ops.

    The HLO must be traced at the per-core batch while TF1 code usually hard-codes the
    global one into its placeholders. Eager execution has to stay on for
    ``experimental_get_compiler_ir``; the graph is built inside ``wrap_function``.
    """
    v1 = tf.compat.v1
    original = v1.placeholder

    def placeholder(dtype: Any, shape: Any = None, name: str | None = None) -> Any:
        if shape is not None:
            dims = list(tf.TensorShape(shape).as_list()) if tf.TensorShape(shape).rank is not None else None
            if dims:
                if state.get("global_batch") is None:
                    state["global_batch"] = opts.batch_size or dims[0] or DEFAULT_BATCH
                    state["per_core_batch"] = max(1, state["global_batch"] // max(1, opts.cores))
                if dims[0] is None or dims[0] == state["global_batch"] or (
                    opts.batch_size and dims[0] == state.get("declared")
                ):
                    state.setdefault("declared", dims[0])
                    dims[0] = state["per_core_batch"]
                    shape = dims
                    site = sites.from_frames()
                    if site is not None:
                        state.setdefault("input_sites", []).append(site)
        return original(dtype, shape=shape, name=name)

    v1.placeholder = placeholder
    for fn in ("disable_eager_execution", "disable_v2_behavior"):
        if hasattr(v1, fn):
            setattr(v1, fn, lambda *a, **k: state.setdefault("notes", []).append(
                "ignored tf.compat.v1.disable_eager_execution/disable_v2_behavior"))


def build_tf1(thunk: Callable[[], Any], opts: Options, sites: Sites, tf: Any,
              state: GraphState) -> Lowered | None:
    """The entry's graph, lowered; None when the entry returns a Keras model instead."""
    outputs_box: dict[str, Any] = {}

    def fn() -> list[Any]:
        try:
            outputs = thunk()
        except ChildError:
            raise
        except BaseException as exc:
            raise user_error(exc, sites, "building the graph failed") from None
        if isinstance(outputs, model_classes()):
            outputs_box["model"] = outputs
            return []
        flat = [o for o in tf.nest.flatten(outputs) if hasattr(o, "dtype") and hasattr(o, "op")]
        floats = [o for o in flat if o.dtype.is_floating]
        if not floats:
            raise ChildError("the entry returned no Keras model and no floating-point tensors")
        outputs_box["shapes"] = [o.shape.as_list() for o in floats]
        # The layer scope of each returned tensor ("unet/output/BiasAdd" -> "unet/output").
        outputs_box["layers"] = sorted({o.op.name.rsplit("/", 1)[0] for o in floats if "/" in o.op.name})
        loss = tf.add_n([tf.reduce_mean(tf.square(tf.cast(o, tf.float32))) for o in floats])
        variables = tf.compat.v1.trainable_variables()
        if not variables:
            raise ChildError("the graph has no trainable variables")
        outputs_box["variables"] = [v.shape.as_list() for v in variables]
        grads = tf.compat.v1.gradients(loss, variables)
        return [loss] + [tf.convert_to_tensor(g) for g in grads if g is not None]

    wrapped = tf.compat.v1.wrap_function(fn, [])
    if "model" in outputs_box:
        return None
    mark("build")
    mark("trace")  # a graph is built and differentiated in one go
    graph = wrapped.graph
    feeds = []
    captured = {id(t) for t in graph.internal_captures}
    for op in graph.get_operations():
        if op.type != "Placeholder":
            continue
        t = op.outputs[0]
        if t.dtype == tf.resource or id(t) in captured:
            continue
        if not t.shape.is_fully_defined():
            raise ChildError(f"placeholder {op.name!r} has an unknown shape {t.shape}; give it a static one")
        feeds.append(t)
    pruned = wrapped.prune(feeds=feeds, fetches=wrapped.structured_outputs)

    def step(*args: Any) -> Any:
        return pruned(*args)

    compiled = tf.function(step, jit_compile=True, autograph=False)

    args = [tf.ones(t.shape, t.dtype) if t.dtype == tf.bool else tf.zeros(t.shape, t.dtype) for t in feeds]
    try:
        hlo: str = compiled.experimental_get_compiler_ir(*args)(stage="hlo")
    except Exception as exc:
        raise ChildError(f"lowering the graph to HLO failed: {type(exc).__name__}: {one_line(exc)}") from None
    mark("lower")
    sites_by_op: dict[str, Site] = {}
    for op in graph.get_operations():
        site = sites.from_traceback(getattr(op, "traceback", None))
        if site is not None:
            sites_by_op[op.name] = site
    global_batch = state.get("global_batch") or opts.batch_size or DEFAULT_BATCH
    info = {"outputs": outputs_box["shapes"], "output_layers": outputs_box["layers"],
            "input_sites": state.get("input_sites", []), "inputs": [t.shape.as_list() for t in feeds],
            "variables": outputs_box["variables"], "global_batch": global_batch,
            "per_core_batch": state.get("per_core_batch") or max(1, global_batch // max(1, opts.cores)),
            "mode": "tf1-graph"}

    def locate(op_name: str) -> tuple[str | None, Site | None]:
        name = strip_scopes(op_name)
        parts = name.split("/")
        for i in range(len(parts), 0, -1):
            site = sites_by_op.get("/".join(parts[:i]))
            if site is not None:
                layer = "/".join(parts[: i - 1]) or parts[0]
                return layer, site
        return ("/".join(parts[:-1]) or None), None

    return Lowered(hlo, locate, info)

