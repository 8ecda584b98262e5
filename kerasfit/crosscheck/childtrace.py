"""``--trace-script``: run the script as ``python script.py`` would, to its first training step,
and trace that step: the real networks, on the script's real first batch.

The first ``Model.fit`` / ``fit_generator`` / ``train_on_batch``, or the first optimizer step of
a custom ``GradientTape`` loop (``apply_gradients`` / ``apply``), is where the run stops,
before any weight changes: the model(s) and one batch are captured there and the script
goes no further. A ``fit`` is lowered through the model's own ``train_step`` on that batch;
a custom loop through the script's own step function (the ``tf.function`` it calls) on its
real arguments, else each network it trains on a stand-in loss at the shapes it was called
with, which the header states as an assumption. A script that fails before its first step
(the network, data that is not here) fails the build with its line.
"""

from __future__ import annotations

import hashlib
import re
import runpy
import sys
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Callable

from .childbase import (ChildError, import_roots, Lowered, Options, Sites, keras_mode, layers_of, phase,
                        trainable)
from .messages import reason
from .childbuild import Built
from .childkeras import network_info, standin_step, trace_and_lower
from .childsource import input_sites, locator, network_layers, output_layers, record_scopes
from .candidates import trained_names
from .sizes import FIT_DEFAULT_BATCH

_TRAINING_CALLS = ("fit", "fit_generator", "train_on_batch")
# Exception classes that say the script reached for something that is not here.
_ABSENT = ("URLError", "HTTPError", "ConnectionError", "ConnectionRefusedError", "gaierror", "timeout",
           "TimeoutError", "FileNotFoundError", "NotFoundError", "DatasetNotFoundError", "PermissionError")


# What a failed download says, whatever it raises (Keras's get_file: "URL fetch failure on …").
_NO_NETWORK = re.compile(r"URL fetch failure|urlopen error|name resolution|Name or service not known|"
                         r"Network is unreachable|Connection refused|Max retries exceeded", re.I)


class _Stop(BaseException):
    """The script reached its first training step (a BaseException: the script's own
    ``except Exception`` does not swallow it)."""


@dataclass
class _Capture:
    """The first training step, as the script was about to run it."""

    kind: str  # "fit" | "fit_generator" | "train_on_batch" | "optimizer"
    line: int | None
    models: list[Any]  # the models it trains
    data: Any = None  # fit / train_on_batch: one batch, (x, y) as the model's train_step takes it
    step: Callable[..., Any] | None = None  # a custom loop's step function (its python function)
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)  # id(model) -> the script's name for it
    inline: str = ""  # why a custom step is not traced as the script's own function


class _Tracer:
    """The patches that stop the script at its first training step."""

    def __init__(self, sites: Sites, tf: Any):
        self.sites, self.tf = sites, tf
        self.capture: _Capture | None = None
        self.passing = False  # lowering the captured step: the optimizer runs as usual
        self.called: dict[int, Any] = {}  # id(model) -> weakref of every model called
        self.shapes: dict[int, list[Any]] = {}  # id(model) -> its last call's input tensors

    def install(self) -> None:
        for name in ("keras", "tf_keras"):
            module = sys.modules.get(name)
            if module is None:
                continue
            model = module.Model
            for call in _TRAINING_CALLS:
                if hasattr(model, call):
                    setattr(model, call, self._training(call, getattr(model, call)))
            model.__call__ = self._recording(model.__call__)
            for cls in _optimizer_classes(module):
                for method in ("apply_gradients", "apply"):
                    if method in dir(cls):
                        setattr(cls, method, self._stepping(getattr(cls, method)))

    # -- the patches

    def _training(self, call: str, original: Callable[..., Any]) -> Callable[..., Any]:
        tracer = self

        def training(model: Any, *args: Any, **kwargs: Any) -> Any:
            if tracer.passing:
                return original(model, *args, **kwargs)
            frame = sys._getframe(1)
            tracer.capture = _Capture(call, tracer._user_line(frame), [model],
                                      data=_first_batch(call, args, kwargs, tracer.tf),
                                      names=_names_in(frame, [model]))
            raise _Stop

        return training

    def _recording(self, original: Callable[..., Any]) -> Callable[..., Any]:
        tracer = self

        def __call__(model: Any, *args: Any, **kwargs: Any) -> Any:
            if not tracer.passing and args:
                tracer.called[id(model)] = weakref.ref(model)
                seen = [t for t in tracer.tf.nest.flatten(args[0]) if hasattr(t, "shape")]
                if seen and all(type(t).__name__ != "KerasTensor" for t in seen):  # not a functional model's making
                    tracer.shapes[id(model)] = seen
            return original(model, *args, **kwargs)

        return __call__

    def _stepping(self, original: Callable[..., Any]) -> Callable[..., Any]:
        tracer = self

        def step(optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            if tracer.passing or tracer.capture is not None:
                return original(optimizer, *args, **kwargs)
            variables = _updated(original.__name__, args, kwargs)
            frame = sys._getframe(1)
            models = tracer._trained(variables)
            fn, fn_args, fn_kwargs = _step_function(frame)
            tracer.capture = _Capture("optimizer", tracer._user_line(frame), models, step=fn, args=fn_args,
                                      kwargs=fn_kwargs, names=_names_in(frame, models),
                                      inline="" if fn is not None else "it runs inline, not in a tf.function")
            raise _Stop

        step.__name__ = original.__name__
        return step

    # -- what the patches read

    def _user_line(self, frame: FrameType | None) -> int | None:
        while frame is not None:
            if self.sites.is_user(frame.f_code.co_filename):
                return frame.f_lineno
            frame = frame.f_back
        return None

    def _trained(self, variables: list[Any]) -> list[Any]:
        """The models called so far whose trainable weights the step updates."""
        wanted = {id(v) for v in variables}
        models = [m for ref in self.called.values() if (m := ref()) is not None]
        trained = [m for m in models if any(id(v) in wanted for v in trainable(m))]
        # a model inside another trained one is the outer one's
        inner = {id(layer) for m in trained for layer in layers_of(m) if layer is not m}
        return [m for m in trained if id(m) not in inner]


def _optimizer_classes(module: Any) -> list[type]:
    optimizers = getattr(module, "optimizers", None)
    classes = [getattr(optimizers, "Optimizer", None), getattr(getattr(optimizers, "legacy", None), "Optimizer", None)]
    return [c for c in classes if isinstance(c, type)]


def _updated(method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The variables an optimizer call updates: ``apply_gradients(zip(grads, vars))`` or
    ``apply(grads, vars)``."""
    if method == "apply":
        variables = args[1] if len(args) > 1 else kwargs.get("trainable_variables") or []
        return list(variables)
    pairs = args[0] if args else kwargs.get("grads_and_vars") or []
    return [v for _, v in list(pairs)]


def _step_function(frame: FrameType | None) -> tuple[Callable[..., Any] | None, tuple[Any, ...], dict[str, Any]]:
    """The ``tf.function`` the optimizer step runs in, with the real arguments it was called
    with (its frames hold them while the script's step is traced): (its python function,
    args, kwargs); (None, (), {}) when the step runs eagerly, outside any tf.function."""
    while frame is not None:
        owner: Any = frame.f_locals.get("self")
        if (frame.f_code.co_name == "__call__" and type(owner).__name__ == "Function"
                and "polymorphic_function" in type(owner).__module__):
            return (owner.python_function, tuple(frame.f_locals.get("args") or ()),
                    dict(frame.f_locals.get("kwds") or {}))
        frame = frame.f_back
    return None, (), {}


def _names_in(frame: FrameType | None, models: list[Any]) -> dict[int, str]:
    """The script's own names for the models: a variable, or an attribute of ``self``."""
    names: dict[int, str] = {}
    while frame is not None and len(names) < len(models):
        spaces = [frame.f_locals, frame.f_globals]
        owner = frame.f_locals.get("self")
        if owner is not None and hasattr(owner, "__dict__"):
            spaces.append(vars(owner))
        for space in spaces:
            for name, value in list(space.items()):
                for m in models:
                    if value is m and id(m) not in names and not name.startswith("_"):
                        names[id(m)] = name
        frame = frame.f_back
    return names


def _first_batch(call: str, args: tuple[Any, ...], kwargs: dict[str, Any], tf: Any) -> Any:
    """One batch of what ``fit`` / ``train_on_batch`` was given, as ``train_step`` takes it."""
    x: Any = args[0] if args else kwargs.get("x", kwargs.get("generator"))
    y = args[1] if len(args) > 1 and call != "fit_generator" else kwargs.get("y")
    if isinstance(x, tf.data.Dataset):
        return next(iter(x.take(1)))
    if hasattr(x, "__next__"):  # a generator
        return next(x)
    if hasattr(x, "__getitem__") and hasattr(x, "__len__") and not _arraylike(x, tf):  # a keras Sequence
        return x[0]
    size = kwargs.get("batch_size") or (args[2] if len(args) > 2 and call == "fit" else None)
    n = size or (None if call == "train_on_batch" else FIT_DEFAULT_BATCH)
    rows = (lambda a: a[:n]) if n else (lambda a: a)
    xb = tf.nest.map_structure(rows, x)
    return (xb,) if y is None else (xb, tf.nest.map_structure(rows, y))


def _arraylike(x: Any, tf: Any) -> bool:
    return hasattr(x, "shape") or isinstance(x, (list, tuple, dict)) and all(
        hasattr(a, "shape") for a in tf.nest.flatten(x))


# ---------------------------------------------------------------- running the script


def _run(path: Path, tracer: _Tracer) -> None:
    """Run the script as ``__main__`` until its first training step."""
    sys.path[:0] = import_roots(path)
    phase("import")
    try:
        runpy.run_path(str(path), run_name="__main__")
    except _Stop:
        return
    except SystemExit as exc:
        if tracer.capture is None and exc.code not in (None, 0):
            raise ChildError(f"the script exited with status {exc.code} before its first training step") from None
    except BaseException as exc:  # the script's own failure, before its first training step
        if tracer.capture is not None:
            return
        line = tracer.sites.line_of(exc)
        where = f" at line {line}" if line is not None else ""
        absent = type(exc).__name__ in _ABSENT or isinstance(exc, OSError) or bool(_NO_NETWORK.search(str(exc)))
        hint = ": it needs the network or data that is not here" if absent else ""
        raise ChildError(f"the script failed{where} before its first training step{hint} "
                         f"({reason(exc, 240)}); without --trace-script the "
                         "model is built without running the script") from None
    if tracer.capture is None:
        raise ChildError("the script ran to its end without a training step (Model.fit, train_on_batch or "
                         "an optimizer's apply_gradients); without --trace-script the model is built "
                         "without running it")


def trace_script(path: Path, opts: Options, sites: Sites, tf: Any) -> Built:
    """Run the script to its first training step and lower that step."""
    tracer = _Tracer(sites, tf)
    tracer.install()
    _run(path, tracer)
    capture = tracer.capture
    assert capture is not None  # _run raised otherwise
    if not capture.models:
        raise ChildError(f"the script's first optimizer step (line {capture.line}) updates no Keras model's "
                         "weights: nothing to trace")
    phase("build")
    tracer.passing = True
    lowered = _lower(capture, opts, sites, tf, tracer)
    lowered.info["weights_sha256"] = {_name(capture, m): weights_digest(m) for m in capture.models}
    notes = _later_training(path, capture)
    if capture.kind != "optimizer":
        entry = f"{_name(capture, capture.models[0])}.{capture.kind} (line {capture.line})"
    elif capture.step is not None:
        entry = f"{getattr(capture.step, '__name__', 'step')}(), whose optimizer step it is (called at line {capture.line})"
    else:
        entry = f"the optimizer step at line {capture.line}"
    return Built([lowered], entry, notes)


def _name(capture: _Capture, model: Any) -> str:
    return capture.names.get(id(model)) or str(getattr(model, "name", "model"))


def weights_digest(model: Any) -> str:
    """SHA-256 of the model's weights' bytes, in ``get_weights()`` order."""
    digest = hashlib.sha256()
    for w in model.get_weights():
        digest.update(w.tobytes())
    return digest.hexdigest()


def _later_training(path: Path, capture: _Capture) -> list[str]:
    """The script trains more after the step traced: say so (the build without
    --trace-script builds every model it trains)."""
    import ast

    try:
        trained = trained_names(ast.parse(path.read_text(encoding="utf-8", errors="replace")))
    except SyntaxError:
        return []
    later = sorted(name for name, (_, line) in trained.items() if capture.line is None or line > capture.line)
    if not later:
        return []
    return [f"the script trains more after line {capture.line} ({', '.join(later)}): only its first training "
            "step is traced; without --trace-script every model it trains is built"]


# ---------------------------------------------------------------- lowering the captured step


def _lower(capture: _Capture, opts: Options, sites: Sites, tf: Any, tracer: _Tracer) -> Lowered:
    frozen = [m for ref in tracer.called.values() if (m := ref()) is not None
              and all(m is not t for t in capture.models)
              and not any(m is layer for t in capture.models for layer in layers_of(t))]
    nets = capture.models + frozen
    layers = network_layers(nets)
    scopes = record_scopes(layers, tf)
    assumptions: list[str] = []
    if capture.kind == "optimizer":
        hlo, concrete, args, how, batch = _lower_loop(capture, opts, tf, tracer, assumptions)
    else:
        hlo, concrete, args, how, batch = _lower_fit(capture, opts, tf, tracer, assumptions)
    locate, blocks = locator(capture.models[0], scopes, layers, concrete.graph, sites)
    per_core = max(1, batch // max(1, opts.cores))
    said = [f"batch {batch}: the script's own first batch (line {capture.line})" if not opts.batch_size else
            f"batch {batch} from --batch-size: the script's own first batch (line {capture.line}), its rows "
            "repeated or cut to it"]
    if frozen:
        said.append(f"also run in the step, not trained: {', '.join(_name(capture, m) for m in frozen)}")
    info: dict[str, Any] = {
        "networks": [network_info(_name(capture, m), m, how) for m in capture.models],
        "built_how": how, "said": said, "assumptions": assumptions, "way": "traced",
        "output_layers": output_layers(capture.models), "input_sites": input_sites(capture.models),
        "inputs": [list(a.shape) for a in tf.nest.flatten(args) if hasattr(a, "shape")],
        "global_batch": batch, "per_core_batch": per_core,
        "variables": [v.shape.as_list() for m in capture.models for v in trainable(m)], "blocks": blocks,
        "mode": keras_mode(capture.models[0]),
    }
    return Lowered(hlo, locate, info)


def _rows(data: Any, batch: int, n: int, tf: Any) -> Any:
    """The captured batch at ``n`` rows: every array whose rows are the batch's, cut, or its
    rows repeated (the per-core share of the batch; --batch-size)."""

    def resized(a: Any) -> Any:
        if not (hasattr(a, "shape") and len(a.shape) and a.shape[0] == batch) or n == batch:
            return a
        if n < batch:
            return a[:n]
        return tf.tile(a, [-(-n // batch)] + [1] * (len(a.shape) - 1))[:n]

    return tf.nest.map_structure(resized, data)


def _sizes(captured: int, opts: Options) -> tuple[int, int]:
    """(the global batch, the per-core rows traced): the script's, else --batch-size."""
    batch = opts.batch_size or captured
    return batch, max(1, batch // max(1, opts.cores))


def _batch_of(data: Any, tf: Any) -> int:
    dims = [int(a.shape[0]) for a in tf.nest.flatten(data) if hasattr(a, "shape") and len(a.shape)]
    return dims[0] if dims else 1


def _lower_fit(capture: _Capture, opts: Options, tf: Any, tracer: _Tracer, assumptions: list[str]
               ) -> tuple[str, Any, Any, str, int]:
    """A fit / train_on_batch: one step of the model's own train_step on the captured batch."""
    model = capture.models[0]
    data = tf.nest.map_structure(tf.convert_to_tensor, capture.data)
    data = data if isinstance(data, tuple) else (data,)
    captured = _batch_of(data, tf)
    batch, rows = _sizes(captured, opts)
    share = _rows(data, captured, rows, tf)
    fn = tf.function(lambda d: model.train_step(d), jit_compile=True)
    where = f"{_name(capture, model)}.{capture.kind} (line {capture.line})"
    shape = tuple(tf.nest.flatten(share)[0].shape)
    try:
        concrete, hlo = trace_and_lower(fn, [share])
        return hlo, concrete, share, f"traced: one step of the model's own train_step, as {where} runs it, on " \
                                     f"the script's first batch (inputs {shape})", batch
    except Exception as exc:
        why = reason(exc, 200)
    assumptions.append(f"the model's train_step, as {where} runs it, did not trace ({why}): the model is "
                       "traced on a stand-in loss (the mean square of its outputs) on the script's first batch")
    return (*_standin([model], [list(tf.nest.flatten(share[0]))], tf), "traced: a stand-in step on the "
            f"script's first batch ({where})", batch)


def _lower_loop(capture: _Capture, opts: Options, tf: Any, tracer: _Tracer, assumptions: list[str]
                ) -> tuple[str, Any, Any, str, int]:
    """A custom loop's optimizer step: the script's own step function on its real arguments,
    else each trained network on a stand-in loss at the inputs it was last called with."""
    why = capture.inline
    if capture.step is not None:
        captured = _batch_of((capture.args, capture.kwargs), tf)
        batch, rows = _sizes(captured, opts)
        args, kwargs = _rows((capture.args, capture.kwargs), captured, rows, tf)
        fn = tf.function(capture.step, jit_compile=True)
        try:
            concrete, hlo = trace_and_lower(fn, list(args), kwargs)
            name = getattr(capture.step, "__name__", "step")
            return hlo, concrete, (args, kwargs), (
                f"traced: one step of the script's own {name}(), the tf.function it calls at line {capture.line} "
                "for its optimizer step, on its real arguments"), batch
        except Exception as exc:
            why = f"it did not trace as its own function ({reason(exc)})"
    inputs = [tracer.shapes.get(id(m), []) for m in capture.models]
    if not all(inputs):
        raise ChildError(f"the script's optimizer step at line {capture.line} could not be traced ({why}), "
                         "and a network it trains was not called before it")
    captured = _batch_of(inputs, tf)
    batch, rows = _sizes(captured, opts)
    inputs = _rows(inputs, captured, rows, tf)
    assumptions.append(f"the script's optimizer step at line {capture.line} is not traced as written ({why}): "
                       "each network it trains is traced on a stand-in loss (the mean square of its outputs) at "
                       "the inputs the script last called it with")
    hlo, concrete, args = _standin(capture.models, inputs, tf)
    return hlo, concrete, args, "traced: each network the script's optimizer step trains, on a stand-in loss", batch


def _standin(models: list[Any], inputs: list[list[Any]], tf: Any) -> tuple[str, Any, list[Any]]:
    args = [tf.zeros([int(d) if d is not None else 1 for d in t.shape], dtype=t.dtype) for ins in inputs for t in ins]
    variables = [v for m in models for v in trainable(m)]
    step = standin_step([(m, len(ins)) for m, ins in zip(models, inputs)], variables, tf)
    concrete, hlo = trace_and_lower(step, args)
    return hlo, concrete, args

