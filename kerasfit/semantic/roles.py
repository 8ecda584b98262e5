"""Which functions of a file run on the host, never on the accelerator.

A TPUEstimator ``metric_fn`` (handed over as ``eval_metrics=(metric_fn, args)``) and a
``host_call`` run on the host CPU after the step; a ``serving_input_fn`` builds the
placeholders of an exported graph; a ``main`` that drives training and a function
that calls ``.numpy()`` run eagerly in Python; an image augmentation module (it calls
``tf.image.random_*`` / ``adjust_*`` … and builds no layer) is input-pipeline code.
Their TF ops are real, but no accelerator executes them, so rules about the
accelerator's layout must not report there.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Sequence

import libcst as cst

from ..symbols import is_model_building
from .nodes import walk

if TYPE_CHECKING:
    from .model import FileContext
    from .nodes import ScopeNode

# Estimator arguments whose function runs on the host: a (fn, args) pair or a fn.
_HOST_PAIR_KEYWORDS = frozenset({"eval_metrics", "host_call"})
_HOST_FN_KEYWORDS = frozenset({"serving_input_receiver_fn", "serving_input_fn", "metric_fn"})
_HOST_NAME = re.compile(r"(^|_)(metric_fn|metrics_fn|serving_input_fn|serving_input_receiver_fn|host_call_fn|host_call)$")
# Calls that only a serving-input function makes.
_SERVING_PREFIXES = ("tf.estimator.export.",)


# Methods that run training or inference from the outside (the driver's side).
_DRIVER_METHODS = frozenset({"fit", "fit_generator", "evaluate", "predict", "train", "train_and_evaluate", "run"})
# Image augmentation ops: per-example preprocessing that tf.data runs on the host.
_AUGMENTATION_PREFIXES = (
    "tf.image.random_", "tf.image.stateless_random_", "tf.image.adjust_", "tf.image.flip_", "tf.image.rgb_to_",
    "tf.image.grayscale_to_rgb", "tf.image.hsv_to_rgb", "tf.image.yuv_to_rgb", "tf.image.sample_distorted_bounding_box",
    "tf.image.crop_to_bounding_box", "tf.image.pad_to_bounding_box", "tf.image.per_image_standardization",
    "tf.image.central_crop", "tf.image.convert_image_dtype", "tf.image.rot90", "tf.contrib.image.",
)


def host_functions(ctx: FileContext) -> frozenset[int]:
    """ids of the functions and lambdas of ``ctx``'s file that run on the host."""
    idx = ctx.index
    host: set[int] = set()

    def mark(expr: cst.BaseExpression | None, scopes: Sequence[ScopeNode]) -> None:
        if isinstance(expr, cst.Lambda):
            host.add(id(expr))
        elif isinstance(expr, (cst.Name, cst.Attribute)):
            fn = ctx.function_defined_as(expr, scopes)
            if fn is not None:
                host.add(id(fn))

    calls_driver: set[int] = set()
    builds: set[int] = set()
    builds_anything = augments = False
    for call, scopes in idx.calls:
        for a in call.args:
            if a.keyword is None:
                continue
            kw = a.keyword.value
            if kw in _HOST_PAIR_KEYWORDS and isinstance(a.value, (cst.Tuple, cst.List)) and a.value.elements:
                mark(a.value.elements[0].value, scopes)
            elif kw in _HOST_FN_KEYWORDS:
                mark(a.value, scopes)
        owner = next((s for s in scopes if isinstance(s, (cst.FunctionDef, cst.Lambda))), None)
        name = ctx.call_name_anywhere(call)
        if name is None:
            if isinstance(call.func, cst.Attribute):
                if call.func.attr.value in _DRIVER_METHODS and owner is not None:
                    calls_driver.add(id(owner))
                elif not augments:
                    augments = (ctx.raw_name_anywhere(call.func) or "").startswith("tensorflow_addons.image.")
            continue
        if is_model_building(name):
            builds_anything = True
            if owner is not None:
                builds.add(id(owner))
        elif name.startswith(_AUGMENTATION_PREFIXES):
            augments = True
        elif name.startswith(_SERVING_PREFIXES) and owner is not None:
            host.add(id(owner))
    for f in idx.functions:
        if not isinstance(f, cst.FunctionDef):
            continue
        if _HOST_NAME.search(f.name.value):
            host.add(id(f))
        elif (f.name.value == "main" or id(f) in calls_driver) and id(f) not in builds and ctx.function_role(f) != "model":
            host.add(id(f))  # drives a model from the host: main, model.fit, estimator.train
    if augments and not builds_anything:
        # an image augmentation module (AutoAugment, crop-and-flip helpers): per-example
        # preprocessing that tf.data runs on the host
        host |= {id(f) for f in idx.functions if ctx.function_role(f) != "model"}
    # `.numpy()` only works eagerly, on the host: a function calling it is host code
    for node, numpy_call, scopes in idx.attr_refs.get("numpy", ()):
        owner = next((s for s in scopes if isinstance(s, (cst.FunctionDef, cst.Lambda))), None)
        if numpy_call is not None and owner is not None and ctx.raw_name_anywhere(node) is None:
            host.add(id(owner))
    # functions nested in a host function run there too
    for f in idx.functions:
        if id(f) not in host and any(id(s) in host for s in idx.scopes_of(f)):
            host.add(id(f))
    return frozenset(host)


# TF1-only spellings (``tf.placeholder``): a file using them builds graphs, so its
# tensor helpers run wherever the graph runs — on the accelerator when a model_fn calls them.
_TF1_ONLY = frozenset(
    {"placeholder", "Session", "InteractiveSession", "variable_scope", "get_variable", "AUTO_REUSE", "to_float",
     "to_int32", "to_int64", "multinomial", "contrib", "layers", "log", "app", "logging", "random_uniform",
     "random_normal", "truncated_normal", "squared_difference", "get_collection", "global_variables_initializer"}
)
# In-graph control flow: the function argument is traced into the caller's graph.
_CONTROL_FLOW = frozenset(
    {"tf.while_loop", "tf.map_fn", "tf.scan", "tf.foldl", "tf.foldr", "tf.cond", "tf.switch_case", "tf.case",
     "tf.vectorized_map", "keras.ops.while_loop", "keras.ops.fori_loop", "keras.ops.scan", "keras.ops.map",
     "keras.ops.cond", "keras.ops.switch", "keras.ops.vectorized_map"}
)
_CONTROL_FLOW_KEYWORDS = frozenset({"body", "cond", "fn", "true_fn", "false_fn", "body_fun", "cond_fun", "f", "branch_fns"})


def graph_file(ctx: FileContext) -> bool:
    """The file is TF1 graph code: it imports ``tensorflow.compat.v1`` or spells a
    TF1-only symbol (``tf.placeholder``, ``tf.variable_scope``, ``tf.multinomial`` …)."""
    if any(raw.startswith("tensorflow.compat.v1") for raw in ctx.imports.values()):
        return True
    for attr in _TF1_ONLY:
        for node, _call, _scopes in ctx.index.attr_refs.get(attr, ()):
            raw = ctx.raw_name_anywhere(node)
            if raw == f"tensorflow.{attr}" or (raw or "").startswith(f"tensorflow.{attr}."):
                return True
    return False


def traced_functions(ctx: FileContext) -> frozenset[int]:
    """Functions traced into a graph by the code around them: the bodies of in-graph
    control flow (``tf.while_loop(cond, body, ...)``, ``keras.ops.scan(f, ...)``),
    and Keras 3 functions written with ``keras.ops`` / ``keras.random`` (backend-agnostic
    code that the backend compiles: a sampler's ``get_next_token``)."""
    idx = ctx.index
    out: set[int] = set()
    for call, scopes in idx.calls:
        name = ctx.call_name_anywhere(call)
        if name is None:
            continue
        owner = next((s for s in scopes if isinstance(s, (cst.FunctionDef, cst.Lambda))), None)
        if owner is not None and name.startswith(("keras.ops.", "keras.random.")):
            raw = ctx.raw_name_anywhere(call.func) or ""
            if raw.startswith("keras.") or raw == "keras":  # Keras 3 itself, not tf.keras
                out.add(id(owner))
        if name in _CONTROL_FLOW:
            for a in call.args:
                if a.keyword is None or a.keyword.value in _CONTROL_FLOW_KEYWORDS:
                    v = a.value
                    if isinstance(v, cst.Lambda):
                        out.add(id(v))
                    elif isinstance(v, (cst.Name, cst.Attribute)):
                        fn = ctx.function_defined_as(v, scopes)
                        if fn is not None:
                            out.add(id(fn))
    return frozenset(out)


# ---- demo blocks -------------------------------------------------------------------
# Calls that make a ``__main__`` block a training script rather than a demo: the Keras
# and Estimator drivers, absl/TF's ``app.run(main)``, and a project ``main()`` /
# ``train*()`` / ``run*()``.
_TRAINING_ATTRS = frozenset({"fit", "fit_generator", "train", "train_on_batch", "train_and_evaluate", "run"})
_TRAINING_NAMES = re.compile(r"^(main|train\w*|run\w*)$")


def demo_blocks(ctx: FileContext) -> frozenset[int]:
    """Ids of the module-level ``if __name__ == "__main__":`` blocks that are demo code:
    the module is a library — another file of the tree imports it — or the block does
    not train (no ``fit``/``train``/``run`` call, no ``main()``/``train*()``), e.g. it
    builds the model and prints its summary. Findings there are dropped (issue 21): a
    demo runs once by hand, never in the user's training."""
    out: set[int] = set()
    imported: bool | None = None
    for stmt in ctx.module.body:
        if not (isinstance(stmt, cst.If) and _is_main_test(stmt.test)):
            continue
        if _trains(stmt.body):
            if imported is None:
                imported = bool(ctx.filename) and not ctx.filename.startswith("<") and ctx.project.imported_by_others(ctx.filename)
            if not imported:
                continue
        out.add(id(stmt.body))
    return frozenset(out)


def _is_main_test(test: cst.BaseExpression) -> bool:
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.Equal)):
        return False
    sides = (test.left, test.comparisons[0].comparator)
    names = [s.value for s in sides if isinstance(s, cst.Name)]
    strings = [s.evaluated_value for s in sides if isinstance(s, cst.SimpleString)]
    return names == ["__name__"] and strings == ["__main__"]


def _trains(body: cst.BaseSuite) -> bool:
    for n in walk(body):
        if isinstance(n, cst.Call):
            f = n.func
            if isinstance(f, cst.Attribute) and f.attr.value in _TRAINING_ATTRS:
                return True
            if isinstance(f, cst.Name) and _TRAINING_NAMES.match(f.value):
                return True
    return False
