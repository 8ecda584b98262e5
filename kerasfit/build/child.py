"""The build child: import the user's file, build the model, lower a training step to HLO.

Run as ``python -m kerasfit.build.child --file model.py --out result.json ...``; the
parent (``kerasfit.build.api.run_child``, through ``kerasfit.build.sandbox``) owns the
time and memory limits. This is the only kerasfit module that imports TensorFlow or Keras.
It writes one JSON object to ``--out``: ``{"ok": true, ...}`` with the ops, or
``{"ok": false, "error": "<one line>"}``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from kerasfit.build.hlo import classify_pass, parse_hlo, strip_scopes

DISCOVERY_FUNCTIONS = ("build_model", "create_model", "get_model", "make_model")
DEFAULT_BATCH = 128


class ChildError(Exception):
    """A failure to report as one line (no traceback)."""


_PHASE_FILE: Path | None = None


def _phase(name: str) -> None:
    """Say what the child is doing, so an exit without a result still has a reason.

    User code can end the process with ``os._exit`` or a signal, skipping every handler;
    the parent then reads the last phase written here ("tensorflow", "import", "build").
    """
    if _PHASE_FILE is not None:
        try:
            _PHASE_FILE.write_text(name)
        except OSError:
            pass


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---------------------------------------------------------------- source sites


class Sites:
    """Where in the user's file things were created."""

    def __init__(self, user_file: str):
        self.user_file = os.path.realpath(user_file)
        self._is_user: dict[str, bool] = {}

    def is_user(self, filename: str) -> bool:
        hit = self._is_user.get(filename)
        if hit is None:
            hit = self._is_user[filename] = os.path.realpath(filename) == self.user_file
        return hit

    def from_frames(self, skip_self: object = None) -> dict[str, Any] | None:
        """The innermost user-file frame of the current stack.

        Frames running the object's own ``__init__`` (a user-defined layer calling
        ``super().__init__``) are skipped: the interesting line is the one that
        constructs the object, not its class body.
        """
        frame = sys._getframe(2)
        while frame is not None:
            if self.is_user(frame.f_code.co_filename) and (
                skip_self is None or frame.f_locals.get("self") is not skip_self
            ):
                return self._site(frame)
            frame = frame.f_back
        return None

    def _site(self, frame) -> dict[str, Any]:
        line, end_line, col, end_col = frame.f_lineno, frame.f_lineno, 0, 0
        try:
            pos = list(frame.f_code.co_positions())[frame.f_lasti // 2]
            if pos[0] is not None:
                line, end_line = pos[0], pos[1] or pos[0]
                col, end_col = pos[2] or 0, pos[3] or 0
        except (AttributeError, IndexError):
            pass
        return {"file": self.user_file, "line": line, "end_line": end_line,
                "column": col, "end_column": end_col}

    def from_traceback(self, tb) -> dict[str, Any] | None:
        """The innermost user-file frame of a TF op's creation stack."""
        for fr in reversed(list(tb or ())):
            if self.is_user(fr.filename):
                return {"file": self.user_file, "line": fr.lineno, "end_line": fr.lineno,
                        "column": 0, "end_column": 0}
        return None


def _patch_layer_init(layer_cls, sites: Sites) -> None:
    original = layer_cls.__init__
    if getattr(original, "_kerasfit", False):
        return

    def __init__(self, *args, **kwargs):
        site = sites.from_frames(skip_self=self)
        original(self, *args, **kwargs)
        if site is not None and not hasattr(self, "_kerasfit_site"):
            object.__setattr__(self, "_kerasfit_site", site)

    __init__._kerasfit = True  # type: ignore[attr-defined]
    layer_cls.__init__ = __init__


# ---------------------------------------------------------------- the user's code


def _user_error(exc: BaseException, sites: Sites, doing: str) -> ChildError:
    where = ""
    for fr in reversed(traceback.extract_tb(exc.__traceback__)):
        if sites.is_user(fr.filename):
            where = f" (line {fr.lineno})"
            break
    return ChildError(f"{doing}{where}: {type(exc).__name__}: {_one_line(exc)}")


def _import_user_module(path: Path, sites: Sites):
    sys.path.insert(0, str(path.parent))
    name = path.stem if path.stem.isidentifier() else "kerasfit_user_module"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ChildError(f"cannot import {path.name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # user code: anything, including SystemExit
        raise _user_error(exc, sites, "importing the file failed") from None
    return module


def _no_required_args(fn) -> bool:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    return all(
        p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        for p in sig.parameters.values()
    )


def _model_classes():
    classes = []
    for mod in ("keras", "tf_keras"):
        m = sys.modules.get(mod)
        if m is not None and hasattr(m, "Model"):
            classes.append(m.Model)
    return tuple(classes)


def _resolve_entry(module, entry: str | None, sites: Sites):
    """(description, thunk) for what to build; the thunk runs the user's code."""
    if entry:
        if ":" in entry and entry.split(":", 1)[1].isidentifier():
            mod_name, attr = entry.split(":", 1)
            target = module if mod_name in ("", module.__name__) else importlib.import_module(mod_name)
            if not hasattr(target, attr):
                raise ChildError(f"entry {entry!r}: {mod_name or module.__name__} has no {attr!r}")
            obj = getattr(target, attr)
            return f"{entry}()", (lambda: obj() if callable(obj) and not isinstance(obj, _model_classes()) else obj)
        if entry.isidentifier():
            if not hasattr(module, entry):
                raise ChildError(f"entry {entry!r} is not defined in the file")
            obj = getattr(module, entry)
            if callable(obj) and not isinstance(obj, _model_classes()):
                return f"{entry}()", obj
            return entry, lambda: obj
        try:
            code = compile(entry, "<entry>", "eval")
        except SyntaxError as exc:
            raise ChildError(f"entry {entry!r} is not a valid expression: {exc.msg}") from None
        return entry, lambda: eval(code, module.__dict__)
    for name in DISCOVERY_FUNCTIONS:
        fn = getattr(module, name, None)
        if callable(fn) and _no_required_args(fn):
            return f"{name}()", fn
    classes = _model_classes()
    for name, value in vars(module).items():
        if classes and isinstance(value, classes):
            return name, lambda v=value: v
    tried = ", ".join(f"{n}()" for n in DISCOVERY_FUNCTIONS)
    raise ChildError(
        f"found nothing to build: tried no-argument functions {tried} and module-level "
        "Keras models; pass --entry 'function' or an expression"
    )


# ---------------------------------------------------------------- Keras models


def _layers_of(model) -> list:
    seen, out = set(), []
    stack = [model]
    while stack:
        layer = stack.pop()
        if id(layer) in seen:
            continue
        seen.add(id(layer))
        out.append(layer)
        try:
            children = list(layer._flatten_layers(include_self=False, recursive=False))
        except Exception:
            children = list(getattr(layer, "layers", []) or [])
        stack.extend(children)
    return out


def _record_scopes(layers, tf) -> dict[str, Any]:
    """Wrap each layer's ``call`` to see the name scope its ops get while tracing.

    HLO op names carry TF name scopes, which Keras uniquifies per graph ("dense" may
    become "dense_1"), so layer names alone cannot be matched reliably.
    """
    scopes: dict[str, Any] = {}
    for layer in layers:
        original = layer.call

        def call(*args, _layer=layer, _original=original, **kwargs):
            scope = tf.compat.v1.get_default_graph().get_name_scope()
            if scope:
                scopes[scope] = _layer
            return _original(*args, **kwargs)

        object.__setattr__(layer, "call", call)
    return scopes


def _input_specs(model):
    shapes, dtypes = [], []
    inputs = None
    try:
        inputs = model.inputs
    except Exception:
        inputs = None
    if inputs:
        for t in inputs:
            shapes.append(list(t.shape))
            dtypes.append(str(getattr(t.dtype, "name", t.dtype)))
    else:
        shape = getattr(model, "input_shape", None)
        if shape is None:
            try:
                shape = model._build_shapes_dict  # keras 3 subclassed, built via build()
                shape = next(iter(shape.values())) if shape else None
            except Exception:
                shape = None
        if shape is None:
            raise ChildError(
                "the model has no known input shape: build it (call it once, or use "
                "keras.Input) inside the entry"
            )
        shapes = [list(s) for s in shape] if shape and isinstance(shape[0], (list, tuple)) else [list(shape)]
        dtypes = ["float32"] * len(shapes)
    for s in shapes:
        if any(d is None for d in s[1:]):
            raise ChildError(f"the model's input shape {tuple(s)} has unknown non-batch dims")
    return shapes, dtypes


def _keras_step(model, tf):
    variables = list(model.trainable_variables)
    if not variables:
        raise ChildError("the model has no trainable variables")

    @tf.function(jit_compile=True, autograph=False)
    def step(*inputs):
        with tf.GradientTape() as tape:
            outputs = model(inputs[0] if len(inputs) == 1 else list(inputs), training=True)
            flat = [o for o in tf.nest.flatten(outputs) if o.dtype.is_floating]
            loss = tf.add_n([tf.reduce_mean(tf.square(tf.cast(o, tf.float32))) for o in flat])
        grads = tape.gradient(loss, variables)
        return loss, outputs, [g for g in grads if g is not None]

    return step, variables


def _build_keras(model, opts, sites: Sites, tf, result: dict) -> str:
    shapes, dtypes = _input_specs(model)
    fixed = shapes[0][0] if shapes and shapes[0] else None
    global_batch = opts.batch_size or fixed or DEFAULT_BATCH
    per_core = max(1, global_batch // max(1, opts.cores))
    args = []
    for s, dt in zip(shapes, dtypes):
        s = [per_core] + [int(d) for d in s[1:]]
        args.append(tf.zeros(s, dtype=dt))
    layers = _layers_of(model)
    scopes = _record_scopes(layers, tf)
    step, variables = _keras_step(model, tf)
    try:
        concrete = step.get_concrete_function(*args)
        hlo = step.experimental_get_compiler_ir(*args)(stage="hlo")
    except ChildError:
        raise
    except Exception as exc:
        raise _user_error(exc, sites, "tracing the training step failed") from None
    outs = concrete.structured_outputs[1]
    result["outputs"] = [list(o.shape) for o in tf.nest.flatten(outs)]
    result["output_layers"] = _output_layers(model)
    # Where the batch enters the model: KF302 points there.
    result["input_sites"] = [site for site in (getattr(layer, "_kerasfit_site", None)
                                               for layer in _endpoint_layers(model, "inputs")) if site]
    result["inputs"] = [a.shape.as_list() for a in args]
    result["global_batch"] = global_batch
    result["per_core_batch"] = per_core
    result["variables"] = [v.shape.as_list() for v in variables]

    def site_of(layer):
        return getattr(layer, "_kerasfit_site", None)

    # Longest scope first so an op lands in its innermost layer.
    ordered = sorted(scopes.items(), key=lambda kv: len(kv[0]), reverse=True)

    def locate(op_name: str):
        name = strip_scopes(op_name)
        for scope, layer in ordered:
            if name == scope or name.startswith(scope + "/"):
                if site_of(layer) is not None:
                    return layer.name, site_of(layer)
        for scope, layer in ordered:
            if name.startswith(scope + "/"):
                return layer.name, None
        return None, None

    result["_locate"] = locate
    if opts.probe_outputs:
        _probe(model, shapes, dtypes, per_core, opts, tf)
    return hlo


def _endpoint_layers(model, attr: str) -> list:
    """The layers producing ``model.inputs`` / ``model.outputs`` (functional models)."""
    layers = []
    try:
        tensors = getattr(model, attr) or []
    except Exception:
        tensors = []
    for t in tensors:
        history = getattr(t, "_keras_history", None)
        layer = getattr(history, "operation", None) or getattr(history, "layer", None)
        if layer is None and isinstance(history, tuple) and history:
            layer = history[0]
        if layer is not None:
            layers.append(layer)
    return layers


def _output_layers(model) -> list[str]:
    """Names of the layers producing the model's outputs: their width is the task's."""
    return [layer.name for layer in _endpoint_layers(model, "outputs") if getattr(layer, "name", None)]


def _probe(model, shapes, dtypes, per_core, opts, tf) -> None:
    """Save/load weights and record outputs on a fixed input (fix-equivalence tests)."""
    import numpy as np

    if opts.probe_weights:
        if os.path.exists(opts.probe_weights):
            with np.load(opts.probe_weights) as data:
                model.set_weights([data[f"arr_{i}"] for i in range(len(data.files))])
        else:
            np.savez(opts.probe_weights, *model.get_weights())
    rng = np.random.RandomState(0)
    xs = [rng.standard_normal([per_core] + [int(d) for d in s[1:]]).astype(dt)
          for s, dt in zip(shapes, dtypes)]
    out = model(xs[0] if len(xs) == 1 else xs, training=False)
    np.savez(opts.probe_outputs, *[np.asarray(o) for o in tf.nest.flatten(out)])


# ---------------------------------------------------------------- TF1 graphs


def _patch_tf1(tf, opts, state: dict, sites: Sites) -> None:
    """Placeholders get the per-core batch; eager-disabling calls become no-ops.

    The HLO must be traced at the per-core batch while TF1 code usually hard-codes the
    global one into its placeholders. Eager execution has to stay on for
    ``experimental_get_compiler_ir``; the graph is built inside ``wrap_function``.
    """
    v1 = tf.compat.v1
    original = v1.placeholder

    def placeholder(dtype, shape=None, name=None):
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


def _build_tf1(thunk, opts, sites: Sites, tf, result: dict, state: dict):
    outputs_box: dict[str, Any] = {}

    def fn():
        try:
            outputs = thunk()
        except ChildError:
            raise
        except BaseException as exc:
            raise _user_error(exc, sites, "building the graph failed") from None
        if isinstance(outputs, _model_classes()):
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

    @tf.function(jit_compile=True, autograph=False)
    def step(*args):
        return pruned(*args)

    args = [tf.ones(t.shape, t.dtype) if t.dtype == tf.bool else tf.zeros(t.shape, t.dtype) for t in feeds]
    try:
        hlo = step.experimental_get_compiler_ir(*args)(stage="hlo")
    except Exception as exc:
        raise ChildError(f"lowering the graph to HLO failed: {type(exc).__name__}: {_one_line(exc)}") from None
    sites_by_op = {}
    for op in graph.get_operations():
        site = sites.from_traceback(getattr(op, "traceback", None))
        if site is not None:
            sites_by_op[op.name] = site
    result["outputs"] = outputs_box["shapes"]
    result["output_layers"] = outputs_box["layers"]
    result["input_sites"] = state.get("input_sites", [])
    result["inputs"] = [t.shape.as_list() for t in feeds]
    result["variables"] = outputs_box["variables"]
    result["global_batch"] = state.get("global_batch") or opts.batch_size or DEFAULT_BATCH
    result["per_core_batch"] = state.get("per_core_batch") or max(
        1, result["global_batch"] // max(1, opts.cores))

    def locate(op_name: str):
        name = strip_scopes(op_name)
        parts = name.split("/")
        for i in range(len(parts), 0, -1):
            site = sites_by_op.get("/".join(parts[:i]))
            if site is not None:
                layer = "/".join(parts[: i - 1]) or parts[0]
                return layer, site
        return ("/".join(parts[:-1]) or None), None

    result["_locate"] = locate
    return hlo


# ---------------------------------------------------------------- main


def run(opts) -> dict[str, Any]:
    t0 = time.perf_counter()
    path = Path(opts.file).resolve()
    sites = Sites(str(path))
    result: dict[str, Any] = {"ok": True, "file": str(path), "notes": []}
    if opts.legacy:
        os.environ["TF_USE_LEGACY_KERAS"] = "1"
    _phase("tensorflow")
    try:
        import tensorflow as tf
    except ImportError as exc:
        raise ChildError(f"TensorFlow is not installed ({exc}); install kerasfit[build]") from None
    import keras

    tf.get_logger().setLevel("ERROR")
    _patch_layer_init(keras.layers.Layer, sites)
    try:
        uses_tf_keras = "tf_keras" in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        uses_tf_keras = False
    if opts.legacy or uses_tf_keras:
        import tf_keras

        _patch_layer_init(tf_keras.layers.Layer, sites)
    if opts.dtype == "bfloat16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
        if opts.legacy:
            tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")
    state: dict[str, Any] = {}
    if opts.legacy:
        _patch_tf1(tf, opts, state, sites)
    result["tf_version"] = tf.__version__
    result["keras_version"] = getattr(keras, "__version__", "")
    t_import = time.perf_counter()
    _phase("import")
    module = _import_user_module(path, sites)
    _phase("build")
    description, thunk = _resolve_entry(module, opts.entry, sites)
    result["entry"] = description
    hlo = None
    if opts.legacy:
        hlo = _build_tf1(thunk, opts, sites, tf, result, state)
        if hlo is not None:
            result["mode"] = "tf1-graph"
    if hlo is None:
        try:
            model = thunk()
        except ChildError:
            raise
        except BaseException as exc:
            raise _user_error(exc, sites, f"calling {description} failed") from None
        if not isinstance(model, _model_classes()):
            raise ChildError(
                f"{description} returned {type(model).__name__}, not a Keras model "
                "(TF1 graph code is built when the file uses tf.compat.v1 / tf.layers)"
            )
        result["mode"] = "tf-keras" if type(model).__module__.startswith("tf_keras") else "keras"
        hlo = _build_keras(model, opts, sites, tf, result)
    t_hlo = time.perf_counter()
    ops, pads = parse_hlo(hlo)
    locate = result.pop("_locate")
    variables = result.get("variables", [])
    out_ops = []
    for op in ops:
        op.pass_ = classify_pass(op, variables)
        layer, site = locate(op.op_name)
        d = op.to_dict()
        d["layer"], d["source"] = layer, site
        out_ops.append(d)
    out_pads = []
    for pad in pads:
        layer, site = locate(pad.op_name)
        d = dict(pad.__dict__)
        d["layer"], d["source"] = layer, site
        out_pads.append(d)
    result["ops"] = out_ops
    result["pads"] = out_pads
    result["notes"] += state.get("notes", [])
    result["cores"] = opts.cores
    result["dtype"] = opts.dtype
    if opts.dump_hlo:
        Path(opts.dump_hlo).write_text(hlo)
    result["timings"] = {"import": round(t_import - t0, 3), "build_and_lower": round(t_hlo - t_import, 3),
                         "parse": round(time.perf_counter() - t_hlo, 3)}
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kerasfit.build.child")
    p.add_argument("--file", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--entry")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--cores", type=int, default=1)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--legacy", action="store_true", help="TF1 graph code: TF_USE_LEGACY_KERAS=1")
    p.add_argument("--probe-weights")
    p.add_argument("--probe-outputs")
    p.add_argument("--dump-hlo")
    opts = p.parse_args(argv)
    global _PHASE_FILE
    _PHASE_FILE = Path(f"{opts.out}.phase")
    try:
        result = run(opts)
        code = 0
    except ChildError as exc:
        result, code = {"ok": False, "error": str(exc)}, 3
    except BaseException as exc:  # the parent wants one line, whatever happened
        result, code = {"ok": False, "error": f"{type(exc).__name__}: {_one_line(exc)}"}, 3
    Path(opts.out).write_text(json.dumps(result))
    sys.stdout.flush()
    # Skip interpreter teardown: TensorFlow's can take seconds or crash.
    os._exit(code)


if __name__ == "__main__":
    main()
