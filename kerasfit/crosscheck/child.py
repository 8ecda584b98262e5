"""The build child: import the user's file, build the model, lower a training step to HLO.

Run as ``python -m kerasfit.crosscheck.child --file model.py --out result.json ...``; the
parent (``kerasfit.crosscheck.api.run_child``, through ``kerasfit.crosscheck.sandbox``) owns the
time and memory limits. This is the only kerasfit module that imports TensorFlow or Keras.
It writes one JSON object to ``--out``: ``{"ok": true, ...}`` with the ops, or
``{"ok": false, "error": "<one line>"}``.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import json
import os
import re
import sys
import time
import traceback
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any, Callable, Iterable, Iterator, Literal, NotRequired, Sequence, TypedDict

from kerasfit.crosscheck.hlo import ELEMENTWISE, classify_pass, memory_ops, parse_hlo, strip_scopes
from kerasfit.crosscheck.slicing import DISCOVERY_FUNCTIONS, Candidate, Slice, slice_source
DEFAULT_BATCH = 128

# TensorFlow and Keras ship no type stubs: the modules, models, layers and tensors this
# child handles are Any to mypy (pyproject's ignore_missing_imports).


class _Options(argparse.Namespace):
    """The command line, as ``main`` parses it."""

    file: str
    out: str
    entry: str | None
    batch_size: int | None
    cores: int
    dtype: str
    input_shape: list[int] | None
    legacy: bool
    keras2: bool
    probe_weights: str | None
    probe_outputs: str | None
    dump_hlo: str | None


class Site(TypedDict):
    """A place in the user's file (1-based lines, 0-based columns), as the report gets it."""

    file: str
    line: int
    end_line: int
    column: int
    end_column: int
    callers: NotRequired[list[int]]  # outer user-file lines (a helper's call sites)
    # the library layer (MultiHeadAttention, an application) whose insides made the op:
    # its name in the model; "blocks" in the result describes it
    block: NotRequired[str]


# An HLO op name -> (the layer it belongs to, where that layer was created)
Locate = Callable[[str], tuple[str | None, Site | None]]


class _GraphState(TypedDict, total=False):
    """What the patched TF1 ``placeholder`` learns while the user's graph is built."""

    global_batch: int
    per_core_batch: int
    declared: int | None  # the batch the script's placeholders hard-code
    input_sites: list[Site]
    notes: list[str]


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


_MARKS: dict[str, float] = {}  # phase -> perf_counter() when it ended (the report's timings)


# the phase that starts when one ends: what a waiting terminal is told (api._Progress)
_NEXT_PHASE = {"build": "trace", "trace": "lower", "lower": "parse"}


def _mark(phase: str) -> None:
    _MARKS[phase] = time.perf_counter()
    if phase in _NEXT_PHASE:
        _phase(_NEXT_PHASE[phase])


def _one_line(text: object, limit: int = 300) -> str:
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

    def from_frames(self, skip_self: object = None) -> Site | None:
        """The innermost user-file frame of the current stack.

        Frames running the object's own ``__init__`` (a user-defined layer calling
        ``super().__init__``) are skipped: the interesting line is the one that
        constructs the object, not its class body.
        """
        frame: FrameType | None = sys._getframe(2)
        while frame is not None:
            if self.is_user(frame.f_code.co_filename) and (
                skip_self is None or frame.f_locals.get("self") is not skip_self
            ):
                site = self._site(frame)
                site["callers"] = self._callers(frame.f_back)
                return site
            frame = frame.f_back
        return None

    def _callers(self, frame: FrameType | None) -> list[int]:
        """Outer user-file lines: where a helper that made the layer was called."""
        lines: list[int] = []
        while frame is not None and len(lines) < 8:
            if self.is_user(frame.f_code.co_filename):
                lines.append(frame.f_lineno)
            frame = frame.f_back
        return lines

    def _site(self, frame: FrameType) -> Site:
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

    def from_traceback(self, tb: Iterable[Any] | None) -> Site | None:
        """The innermost user-file frame of a TF op's creation stack (``op.traceback``:
        entries with ``filename`` and ``lineno``)."""
        user = [fr for fr in reversed(list(tb or ())) if self.is_user(fr.filename)]
        if not user:
            return None
        # TF1 helpers (a ``_conv2d`` wrapper): the outer lines are the callers.
        return {"file": self.user_file, "line": user[0].lineno, "end_line": user[0].lineno,
                "column": 0, "end_column": 0, "callers": [fr.lineno for fr in user[1:9]]}


def _constructed_by_user(layer: Any, sites: Sites) -> bool:
    """Is the code constructing ``layer`` (past its own ``__init__`` chain) the user's file?
    A library layer's insides (MultiHeadAttention's projections, an application's convs)
    are not."""
    frame: FrameType | None = sys._getframe(2)
    # its __init__ chain and the decorators wrapping it (tf-keras's take the layer as an argument)
    while frame is not None and any(v is layer for v in frame.f_locals.values()):
        frame = frame.f_back
    return frame is not None and sites.is_user(frame.f_code.co_filename)


def _patch_layer_init(layer_cls: Any, sites: Sites) -> None:
    original = layer_cls.__init__
    if getattr(original, "_kerasfit", False):
        return

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        site = sites.from_frames(skip_self=self)
        by_user = _constructed_by_user(self, sites)
        original(self, *args, **kwargs)
        if site is not None and not hasattr(self, "_kerasfit_site"):
            object.__setattr__(self, "_kerasfit_site", site)
        if not hasattr(self, "_kerasfit_by_user"):
            object.__setattr__(self, "_kerasfit_by_user", by_user)

    __init__._kerasfit = True  # type: ignore[attr-defined]  # a marker on the function object: patched once
    layer_cls.__init__ = __init__


# ---------------------------------------------------------------- the user's code


def _user_error(exc: BaseException, sites: Sites, doing: str) -> ChildError:
    where = ""
    for fr in reversed(traceback.extract_tb(exc.__traceback__)):
        if sites.is_user(fr.filename):
            where = f" (line {fr.lineno})"
            break
    return ChildError(f"{doing}{where}: {type(exc).__name__}: {_one_line(exc)}")


# Never stubbed: without these there is no model to build.
_NEVER_STUB = frozenset({"tensorflow", "keras", "tf_keras", "numpy"})
# How many discovered candidates to try before giving up.
MAX_CANDIDATES = 3


class _Inert:
    """What a stubbed module hands out: callable, subclassable, indexable, iterable as empty."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __call__(self, *args: object, **kwargs: object) -> _Inert:
        return _Inert()

    def __getattr__(self, name: str) -> _Inert:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __getitem__(self, key: object) -> _Inert:
        return _Inert()

    def __enter__(self) -> _Inert:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        return False


class _StubModule(ModuleType):
    def __getattr__(self, name: str) -> type[_Inert]:
        if name.startswith("__"):
            raise AttributeError(name)
        # A class, so ``class Foo(tfa.layers.Base)`` and ``isinstance`` still work.
        return type(name, (_Inert,), {"__module__": self.__name__})


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Stands in for third-party packages the script imports that are not installed.

    Sits last on ``sys.meta_path``: a package that is installed is always the real one.
    Whatever the model really needs from a stub fails at build time, and the error
    names the stub.
    """

    def __init__(self, names: set[str]):
        self.names = names
        self.used: list[str] = []

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        top = fullname.split(".")[0]
        if top not in self.names:
            return None
        if top not in self.used:
            self.used.append(top)
        return importlib.util.spec_from_loader(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: ModuleType) -> None:
        pass


def _no_download_applications(keras_module: Any, notes: list[str]) -> None:
    """``keras.applications.X(weights="imagenet")`` builds with random weights: padding
    does not depend on them, and a build never downloads."""
    apps = getattr(keras_module, "applications", None)
    if apps is None:
        return
    for name in dir(apps):
        fn = getattr(apps, name, None)
        if not (callable(fn) and name[:1].isupper() and isinstance(fn, type(_one_line))):
            continue

        def wrapper(*args: Any, _fn: Callable[..., Any] = fn, _name: str = name, **kwargs: Any) -> Any:
            weights = kwargs.get("weights", "imagenet")
            if isinstance(weights, str) and not os.path.exists(weights):
                kwargs["weights"] = None
                note = f"{_name}(weights={weights!r}) built with random weights (no download)"
                if note not in notes:
                    notes.append(note)
            return _fn(*args, **kwargs)

        wrapper.__wrapped__ = fn  # type: ignore[attr-defined]  # what functools.wraps would set, for inspect
        try:
            setattr(apps, name, wrapper)
        except (AttributeError, TypeError):
            pass


class _Refused(RuntimeError):
    pass


def _refuse_training(keras_module: Any, notes: list[str]) -> None:
    """Belt and braces under the slicer: a build never trains, predicts or downloads."""
    model = getattr(keras_module, "Model", None)
    for name in ("fit", "fit_generator", "evaluate", "predict", "train_on_batch"):
        if model is not None and hasattr(model, name):
            def refuse(self: Any, *a: object, _name: str = name, **k: object) -> None:
                notes.append(f"refused a call to Model.{_name}()")
                raise _Refused(f"kerasfit does not run Model.{_name}() while building")
            setattr(model, name, refuse)
    utils = getattr(keras_module, "utils", None)
    if utils is not None and hasattr(utils, "get_file"):
        def get_file(*a: object, **k: object) -> None:
            notes.append("refused a download (keras.utils.get_file)")
            raise _Refused("kerasfit does not download while building")
        utils.get_file = get_file


def _exec_slice(path: Path, plan: Slice, sites: Sites, notes: list[str]) -> ModuleType:
    """Run the sliced script as a fresh module, one top-level statement at a time.

    A statement that fails (it read a name whose data loading was skipped) is noted
    and passed over: the entry fails later only if it really needed it.
    """
    name = path.stem if path.stem.isidentifier() else "kerasfit_user_module"
    module = ModuleType(name)
    module.__file__ = str(path)
    module.__dict__["__builtins__"] = __builtins__
    sys.modules[name] = module
    failed: list[str] = []
    for stmt in plan.tree.body:
        code = compile(ast.Module(body=[stmt], type_ignores=[]), str(path), "exec")
        try:
            exec(code, module.__dict__)
        except BaseException as exc:  # user code: anything, including SystemExit
            failed.append(f"line {stmt.lineno}: {type(exc).__name__}: {_one_line(exc, 120)}")
    if failed:
        notes.append("script statements that failed and were passed over: " + "; ".join(failed[:3])
                     + (f" (+{len(failed) - 3} more)" if len(failed) > 3 else ""))
    return module


def _load_script(path: Path, opts: _Options, sites: Sites, notes: list[str],
                 candidate: Candidate | None) -> tuple[Slice, ModuleType]:
    """Slice the script for the entry (or a candidate) and run the slice."""
    source = path.read_text(encoding="utf-8", errors="replace")
    entry = opts.entry
    if entry and ":" in entry and entry.split(":", 1)[1].isidentifier():
        entry = entry.split(":", 1)[1]
    try:
        plan = slice_source(source, str(path), entry=entry, candidate=candidate)
    except SyntaxError as exc:
        raise ChildError(f"the file does not parse (line {exc.lineno}): {exc.msg}") from None
    if plan.skipped:
        skipped = ", ".join(f"line {ln} ({why})" for ln, why in sorted(plan.skipped.items())[:4])
        notes.append(f"not run: {skipped}")
    return plan, _exec_slice(path, plan, sites, notes)


def _no_required_args(fn: Callable[..., Any]) -> bool:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    return all(
        p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        for p in sig.parameters.values()
    )


def _model_classes() -> tuple[type, ...]:
    classes: list[type] = []
    for mod in ("keras", "tf_keras"):
        m = sys.modules.get(mod)
        if m is not None and hasattr(m, "Model"):
            classes.append(m.Model)
    return tuple(classes)


def _resolve_entry(module: ModuleType, entry: str | None, sites: Sites) -> tuple[str, Callable[[], Any]]:
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


def _layers_of(model: Any) -> list[Any]:
    seen: set[int] = set()
    out: list[Any] = []
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


def _is_random_augmentation(layer: Any) -> bool:
    name = type(layer).__name__
    module = type(layer).__module__
    return name.startswith("Random") and ("preprocessing" in module or "augment" in module)


def _record_scopes(layers: list[Any], tf: Any) -> dict[str, Any]:
    """Wrap each layer's ``call`` to see the name scope its ops get while tracing.

    HLO op names carry TF name scopes, which Keras uniquifies per graph ("dense" may
    become "dense_1"), so layer names alone cannot be matched reliably.
    """
    scopes: dict[str, Any] = {}
    for layer in layers:
        original = layer.call
        if _is_random_augmentation(layer):
            # Random image augmentations (RandomRotation's ImageProjectiveTransform) have
            # no XLA kernel and no MXU work: trace them as the identity.
            object.__setattr__(layer, "call", lambda inputs, *a, **k: inputs)
            continue

        def call(*args: Any, _layer: Any = layer, _original: Any = original, **kwargs: Any) -> Any:
            scope = tf.compat.v1.get_default_graph().get_name_scope()
            if scope:
                scopes[scope] = _layer
            return _original(*args, **kwargs)

        object.__setattr__(layer, "call", call)
    return scopes


def _input_specs(model: Any, input_shape: list[int] | None = None) -> tuple[list[list[int | None]], list[str]]:
    shapes: list[list[int | None]] = []
    dtypes: list[str] = []
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
        shape: Any = getattr(model, "input_shape", None)  # Keras's: one shape, a list of them, or None
        if shape is None:
            try:
                shape = model._build_shapes_dict  # keras 3 subclassed, built via build()
                shape = next(iter(shape.values())) if shape else None
            except Exception:
                shape = None
        if shape is None and input_shape:
            shape = [None] + list(input_shape)
        if shape is None:
            raise ChildError(
                "the model has no known input shape: pass --input-shape (e.g. 224,224,3), "
                "or build it (call it once, or use keras.Input) inside the entry"
            )
        shapes = [list(s) for s in shape] if shape and isinstance(shape[0], (list, tuple)) else [list(shape)]
        dtypes = ["float32"] * len(shapes)
    for i, s in enumerate(shapes):
        if not any(d is None for d in s[1:]):
            continue
        if input_shape and len(input_shape) == len(s) - 1:
            shapes[i] = [s[0]] + [given if d is None else d for d, given in zip(s[1:], input_shape)]
            continue
        raise ChildError(
            f"the model's input shape {tuple(s)} has unknown non-batch dims: pass "
            f"--input-shape {','.join(str(d) if d is not None else 'N' for d in s[1:])} "
            "with N filled in")
    return shapes, dtypes


def _batched(shape: list[int | None], batch: int) -> list[int]:
    """An input of ``shape`` at ``batch``; _input_specs has filled in or refused every
    unknown dim after the batch one."""
    dims = [int(d) for d in shape[1:] if d is not None]
    if len(dims) != len(shape) - 1:
        raise ChildError(f"the input shape {tuple(shape)} has unknown non-batch dims")
    return [batch] + dims


def _keras_step(model: Any, tf: Any) -> tuple[Any, list[Any]]:
    variables = list(model.trainable_variables)
    if not variables:
        raise ChildError("the model has no trainable variables")

    def step(*inputs: Any) -> tuple[Any, Any, list[Any]]:
        with tf.GradientTape() as tape:
            outputs = model(inputs[0] if len(inputs) == 1 else list(inputs), training=True)
            flat = [o for o in tf.nest.flatten(outputs) if o.dtype.is_floating]
            loss = tf.add_n([tf.reduce_mean(tf.square(tf.cast(o, tf.float32))) for o in flat])
        grads = tape.gradient(loss, variables)
        return loss, outputs, [g for g in grads if g is not None]

    # called, not used as a decorator: TensorFlow's untyped decorator would untype ``step``
    return tf.function(step, jit_compile=True, autograph=False), variables


def _build_keras(model: Any, opts: _Options, sites: Sites, tf: Any, result: dict[str, Any]) -> str:
    shapes, dtypes = _input_specs(model, opts.input_shape)
    fixed = shapes[0][0] if shapes and shapes[0] else None
    global_batch = opts.batch_size or fixed or DEFAULT_BATCH
    per_core = max(1, global_batch // max(1, opts.cores))
    args = [tf.zeros(_batched(s, per_core), dtype=dt) for s, dt in zip(shapes, dtypes)]
    layers = _layers_of(model)
    scopes = _record_scopes(layers, tf)
    step, variables = _keras_step(model, tf)
    try:
        concrete = step.get_concrete_function(*args)
        _mark("trace")
        hlo: str = step.experimental_get_compiler_ir(*args)(stage="hlo")
        _mark("lower")
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

    blocks, block_of = _library_blocks(model, sites)
    result["blocks"] = blocks
    # op tracebacks only where a user-written call() can have made ops
    written = _written_sites(concrete.graph, sites) if any(_user_call(l, sites) for l in layers) else {}

    def site_of(layer: Any) -> Site | None:
        site: Site | None = getattr(layer, "_kerasfit_site", None)
        if site is not None and id(layer) in block_of:
            site = Site(**site, block=block_of[id(layer)])
        return site

    # Longest scope first so an op lands in its innermost layer.
    ordered = sorted(scopes.items(), key=lambda kv: len(kv[0]), reverse=True)

    def locate(op_name: str) -> tuple[str | None, Site | None]:
        name = strip_scopes(op_name)
        for scope, layer in ordered:
            if name == scope or name.startswith(scope + "/"):
                site = site_of(layer)
                if site is not None:
                    return layer.name, _in_own_call(layer, site, name, written, sites)
        for scope, layer in ordered:
            if name.startswith(scope + "/"):
                return layer.name, None
        return None, None

    result["_locate"] = locate
    if opts.probe_outputs:
        _probe(model, shapes, dtypes, per_core, opts.probe_weights, opts.probe_outputs, tf)
    return hlo


def _library_blocks(model: Any, sites: Sites) -> tuple[dict[str, dict[str, Any]], dict[int, str]]:
    """Library layers with layers the library made inside them (MultiHeadAttention, a
    keras.applications model, the built model itself when it is one; not a Sequential
    of the user's own layers).

    Their insides are not the user's to change; the report names the block and the
    arguments it was made with, the levers the user does have. Returns the blocks by
    name and, for every layer inside one (the block included), the block's name.
    """
    blocks: dict[str, dict[str, Any]] = {}
    block_of: dict[int, str] = {}

    def user_class(layer: Any) -> bool:
        try:
            return sites.is_user(inspect.getfile(type(layer)))
        except (TypeError, OSError):
            return False

    def visit(layer: Any, block: str | None) -> None:
        try:
            children = list(layer._flatten_layers(include_self=False, recursive=False))
        except Exception:
            children = []
        # layers with weights only: a Sequential's own InputLayer, tf-keras's TFOpLambda
        # wrapping the user's `x + y` are made by the library but hold nothing of it
        made_inside = [c for c in children if not getattr(c, "_kerasfit_by_user", True)
                       and getattr(c, "weights", None)]
        if block is None and made_inside and not user_class(layer):
            block = layer.name
            try:
                config = layer.get_config()
            except Exception:
                config = {}
            blocks[block] = {"class": type(layer).__name__,
                             "config": {k: v for k, v in config.items()
                                        if isinstance(v, int) and not isinstance(v, bool)}}
        if block is not None:
            block_of[id(layer)] = block
        for child in children:
            if id(child) not in block_of:
                visit(child, block)

    visit(model, None)
    return blocks, block_of


def _written_sites(graph: Any, sites: Sites) -> dict[str, Site]:
    """TF op name -> the user-file line that ran it while tracing (a custom layer's call())."""
    out: dict[str, Site] = {}
    for op in graph.get_operations():
        site = sites.from_traceback(getattr(op, "traceback", None))
        if site is not None:
            out[op.name] = site
    return out


def _in_own_call(layer: Any, site: Site, op_name: str, written: dict[str, Site], sites: Sites) -> Site:
    """An op a user-defined layer's call() writes is sourced at that line, not at the
    line constructing the layer (which becomes its first caller): KF107 on a transpose
    inside call() is judged by the transposes it makes. Gradient ops take their forward
    op's line (the longest op-name prefix that has one)."""
    if not _user_call(layer, sites):
        return site
    parts = op_name.split("/")
    for i in range(len(parts), 0, -1):
        hit = written.get("/".join(parts[:i]))
        if hit is not None:
            if hit["line"] == site["line"]:
                return site
            out = Site(**{**hit, "callers": [*hit.get("callers", []), site["line"], *site.get("callers", [])]})
            if "block" in site:
                out["block"] = site["block"]
            return out
    return site


def _user_call(layer: Any, sites: Sites) -> bool:
    try:
        return sites.is_user(inspect.getfile(type(layer).call))
    except (TypeError, OSError):
        return False


def _endpoint_layers(model: Any, attr: str) -> list[Any]:
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


def _output_layers(model: Any) -> list[str]:
    """Names of the layers producing the model's outputs: their width is the task's."""
    return [layer.name for layer in _endpoint_layers(model, "outputs") if getattr(layer, "name", None)]


def _probe(model: Any, shapes: list[list[int | None]], dtypes: list[str], per_core: int,
           weights: str | None, outputs: str, tf: Any) -> None:
    """Save/load weights and record outputs on a fixed input (fix-equivalence tests)."""
    import numpy as np

    if weights:
        if os.path.exists(weights):
            with np.load(weights) as data:
                model.set_weights([data[f"arr_{i}"] for i in range(len(data.files))])
        else:
            np.savez(weights, *model.get_weights())
    rng = np.random.RandomState(0)
    xs = [rng.standard_normal(_batched(s, per_core)).astype(dt) for s, dt in zip(shapes, dtypes)]
    out = model(xs[0] if len(xs) == 1 else xs, training=False)
    np.savez(outputs, *[np.asarray(o) for o in tf.nest.flatten(out)])


# ---------------------------------------------------------------- TF1 graphs


def _patch_tf1(tf: Any, opts: _Options, state: _GraphState, sites: Sites) -> None:
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


def _build_tf1(thunk: Callable[[], Any], opts: _Options, sites: Sites, tf: Any, result: dict[str, Any],
               state: _GraphState) -> str | None:
    outputs_box: dict[str, Any] = {}

    def fn() -> list[Any]:
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
    _mark("build")
    _mark("trace")  # a graph is built and differentiated in one go
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
        raise ChildError(f"lowering the graph to HLO failed: {type(exc).__name__}: {_one_line(exc)}") from None
    _mark("lower")
    sites_by_op: dict[str, Site] = {}
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

    def locate(op_name: str) -> tuple[str | None, Site | None]:
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


def _build_entry(module: ModuleType, entry: str | None, opts: _Options, sites: Sites, tf: Any,
                 result: dict[str, Any], state: _GraphState) -> str:
    """Resolve the entry in the (sliced) module and lower its training step to HLO."""
    description, thunk = _resolve_entry(module, entry, sites)
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
        _mark("build")
        hlo = _build_keras(model, opts, sites, tf, result)
    return hlo


_GUARD_HINT = ('put the training, data and plotting code under `if __name__ == "__main__":`, '
               "or pass --entry 'function' or an expression that builds the model")


def _build_script(path: Path, opts: _Options, sites: Sites, tf: Any, keras: Any, result: dict[str, Any],
                  state: _GraphState) -> str:
    """Slice the script, then build its entry (or the discovered candidates, best first)."""
    sys.path.insert(0, str(path.parent))
    try:
        plan = slice_source(path.read_text(encoding="utf-8", errors="replace"), str(path))
    except SyntaxError as exc:
        raise ChildError(f"the file does not parse (line {exc.lineno}): {exc.msg}") from None
    finder = _StubFinder(plan.imported - _NEVER_STUB)
    sys.meta_path.append(finder)
    candidates = [] if opts.entry else plan.candidates[:MAX_CANDIDATES]
    result["candidates"] = [c.label for c in plan.candidates]
    errors: list[str] = []
    hlo = None
    tries: list[Candidate | None] = [*candidates] or [None]
    for candidate in tries:
        notes: list[str] = []
        attempt = dict(result, notes=notes)
        try:
            _phase("import")
            _, module = _load_script(path, opts, sites, notes, candidate)
            _phase("build")
            hlo = _build_entry(module, candidate.expr if candidate else opts.entry, opts, sites,
                               tf, attempt, state)
        except ChildError as exc:
            why = str(exc)
            failed = [n for n in notes if n.startswith("script statements that failed")]
            if failed and "is not defined" in why:
                why += f" ({failed[0][len('script statements that failed and were passed over: '):]})"
            errors.append(f"{candidate.expr}: {why}" if candidate else why)
            _reset_graphs(tf, keras)
            continue
        attempt["notes"] = result["notes"] + notes
        result.update(attempt)
        break
    stubs = ", ".join(finder.used)
    if hlo is None:
        stubbed = f" (not installed, stubbed: {stubs})" if stubs else ""
        if len(errors) > 1:
            raise ChildError(f"no candidate built{stubbed}: " + " | ".join(errors) + "; " + _GUARD_HINT)
        raise ChildError(f"{errors[0]}{stubbed}; {_GUARD_HINT}" if "--entry" not in errors[0]
                         else f"{errors[0]}{stubbed}")
    if stubs:
        result["notes"].append(f"not installed, stubbed (the model does not use them): {stubs}")
    if len(plan.candidates) > 1 and not opts.entry:
        others = ", ".join(c.expr for c in plan.candidates if c.expr != (candidates[0].expr if candidates else ""))
        result["notes"].append(f"built {result['entry']}; other candidates: {others} (pick one with --entry)")
    return hlo


def _reset_graphs(tf: Any, keras: Any) -> None:
    try:
        keras.backend.clear_session()
        tf.compat.v1.reset_default_graph()
    except Exception:
        pass


def run(opts: _Options) -> dict[str, Any]:
    t0 = time.perf_counter()
    path = Path(opts.file).resolve()
    sites = Sites(str(path))
    result: dict[str, Any] = {"ok": True, "file": str(path), "notes": []}
    if opts.legacy or opts.keras2:
        os.environ["TF_USE_LEGACY_KERAS"] = "1"
    _phase("tensorflow")
    try:
        import tensorflow as tf
    except ImportError as exc:
        raise ChildError(f"TensorFlow is not installed ({exc}); pip install \"kerasfit[build]\"") from None
    import keras

    tf.get_logger().setLevel("ERROR")
    _patch_layer_init(keras.layers.Layer, sites)
    try:
        uses_tf_keras = "tf_keras" in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        uses_tf_keras = False
    if opts.legacy or uses_tf_keras or opts.keras2:
        import tf_keras

        _patch_layer_init(tf_keras.layers.Layer, sites)
        _no_download_applications(tf_keras, result["notes"])
        _refuse_training(tf_keras, result["notes"])
    if opts.dtype == "bfloat16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
        if opts.legacy or opts.keras2:
            tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")
    state: _GraphState = {}
    if opts.legacy:
        _patch_tf1(tf, opts, state, sites)
    if opts.keras2:
        # Keras 3's rejection is evidence of its own (KF101's `fused=`), whatever tf-keras does
        result["keras3_error"] = os.environ.get(_FIRST_ERROR, "")
        result["notes"].append("built with tf-keras (Keras 2, the script's era); under Keras 3: "
                               + _one_line(os.environ.get(_FIRST_ERROR, ""), 160))
    result["tf_version"] = tf.__version__
    result["keras_version"] = getattr(keras, "__version__", "")
    t_import = time.perf_counter()
    _no_download_applications(keras, result["notes"])
    _refuse_training(keras, result["notes"])
    hlo = _build_script(path, opts, sites, tf, keras, result, state)
    t_hlo = time.perf_counter()
    ops, pads = parse_hlo(hlo)
    locate: Locate = result.pop("_locate")
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
    out_mem = []
    for mem in memory_ops(hlo):
        layer, site = locate(mem.op_name)
        d = mem.to_dict()
        d["layer"], d["source"] = layer, site
        out_mem.append(d)
    result["ops"] = out_ops
    result["pads"] = out_pads
    result["mem_ops"] = out_mem
    result["elementwise_bytes"] = sum(m.bytes for m in memory_ops(hlo, elementwise=True)
                                      if m.opcode in ELEMENTWISE)
    result["notes"] += state.get("notes", [])
    result["cores"] = opts.cores
    result["dtype"] = opts.dtype
    if opts.dump_hlo:
        Path(opts.dump_hlo).write_text(hlo)
    # Seconds per phase: TensorFlow's import, the user's model, tracing forward and
    # backward, XLA's lowering to HLO, and reading the HLO here.
    ends = {"import": t_import, **{k: _MARKS.get(k, t_hlo) for k in ("build", "trace", "lower")},
            "parse": time.perf_counter()}
    start = t0
    result["timings"] = {}
    for phase, end in ends.items():
        result["timings"][phase] = round(max(0.0, end - start), 3)
        start = max(start, end)
    return result


def _shape_arg(text: str) -> list[int]:
    try:
        dims = [int(d) for d in text.replace("x", ",").split(",") if d.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a shape like 256,256,3") from None
    if not dims or any(d <= 0 for d in dims):
        raise argparse.ArgumentTypeError(f"{text!r} is not a shape like 256,256,3")
    return dims


_FIRST_ERROR = "KERASFIT_KERAS3_ERROR"
_TF_KERAS = re.compile(r"\btf\.keras\b|\btensorflow\.keras\b|from tensorflow import keras")


def _retry_with_keras2(argv: list[str] | None, opts: _Options, error: str) -> None:
    """A script that reaches Keras through ``tf.keras`` and fails under Keras 3 was most
    likely written for Keras 2 (TF < 2.16): build it again with tf-keras.

    The same process image is replaced (``exec``), so the parent's time limit and kill
    still apply to it; the Keras 3 error is kept for the message if this fails too.
    """
    if opts.keras2 or opts.legacy or opts.entry is None and "found nothing to build" in error:
        return
    try:
        source = Path(opts.file).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    if not _TF_KERAS.search(source):
        return
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1")
    env[_FIRST_ERROR] = error
    args = list(sys.argv[1:] if argv is None else argv) + ["--keras2"]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "kerasfit.crosscheck.child", *args], env)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kerasfit.crosscheck.child")
    p.add_argument("--file", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--entry")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--cores", type=int, default=1)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--input-shape", type=_shape_arg, help="non-batch input dims for None ones, e.g. 256,256,3")
    p.add_argument("--legacy", action="store_true", help="TF1 graph code: TF_USE_LEGACY_KERAS=1")
    p.add_argument("--keras2", action="store_true",
                   help="tf.keras is tf-keras (Keras 2): the retry for scripts written before Keras 3")
    p.add_argument("--probe-weights")
    p.add_argument("--probe-outputs")
    p.add_argument("--dump-hlo")
    opts = p.parse_args(argv, namespace=_Options())
    global _PHASE_FILE
    _PHASE_FILE = Path(f"{opts.out}.phase")
    try:
        result = run(opts)
        code = 0
    except ChildError as exc:
        _retry_with_keras2(argv, opts, str(exc))
        first = os.environ.get(_FIRST_ERROR)
        if first and "--input-shape" in str(exc):
            # tf-keras got as far as the input: what to do next is the useful message
            error = f"{exc} (built with tf-keras; under Keras 3: {_one_line(first, 160)})"
        else:
            error = f"{first} (with tf-keras too: {_one_line(exc, 200)})" if first else str(exc)
        result, code = {"ok": False, "error": error}, 3
    except BaseException as exc:  # the parent wants one line, whatever happened
        result, code = {"ok": False, "error": f"{type(exc).__name__}: {_one_line(exc)}"}, 3
    Path(opts.out).write_text(json.dumps(result))
    sys.stdout.flush()
    # Skip interpreter teardown: TensorFlow's can take seconds or crash.
    os._exit(code)


if __name__ == "__main__":
    main()
