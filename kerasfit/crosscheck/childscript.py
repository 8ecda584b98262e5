"""Run a sliced script as a module: packages that are not installed stand in as inert
stubs, training and downloads are refused, a statement that fails on the way to the model
either fails the build with its line or leaves a stand-in naming it (:mod:`.childdata`)."""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator, Literal, Sequence

from .childbase import ChildError, NeedsPackage, Options, known_failure, model_classes
from .messages import one_line
from .childdata import DataNotLoaded, Unloaded, count_default
from .astnames import bound_names, mutated_names, used_names
from .candidates import DISCOVERY_FUNCTIONS, Candidate
from .slicing import Slice, slice_source

# Never stubbed: without these there is no model to build.
NEVER_STUB = frozenset({"tensorflow", "keras", "tf_keras", "numpy"})


class _InertMeta(type):
    """Stub classes answer attribute reads too (``tfa.layers.GroupNormalization``)."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _InertMeta(name, (cls,), {"__module__": cls.__module__})


class _Inert(metaclass=_InertMeta):
    """What a stubbed module hands out: callable, subclassable, indexable, iterable as empty.

    Its objects keep the stubbed package's module name, so an error that shows one names
    the package.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __call__(self, *args: object, **kwargs: object) -> _Inert:
        return self

    def __getattr__(self, name: str) -> _Inert:
        if name.startswith("__"):
            raise AttributeError(name)
        stub: _Inert = _InertMeta(name, (_Inert,), {"__module__": type(self).__module__})()
        return stub

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __getitem__(self, key: object) -> _Inert:
        return self

    def __enter__(self) -> _Inert:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        return False


class _StubModule(ModuleType):
    def __getattr__(self, name: str) -> type[_Inert]:
        if name.startswith("__"):
            raise AttributeError(name)
        # A class, so ``class Foo(tfa.layers.Base)`` and ``isinstance`` still work.
        return _InertMeta(name, (_Inert,), {"__module__": self.__name__})  # type: ignore[return-value]  # an _Inert subclass


class StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
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


def no_download_applications(keras_module: Any, notes: list[str]) -> None:
    """``keras.applications.X(weights="imagenet")`` builds with random weights: padding
    does not depend on them, and a build never downloads."""
    apps = getattr(keras_module, "applications", None)
    if apps is None:
        return
    for name in dir(apps):
        fn = getattr(apps, name, None)
        if not (callable(fn) and name[:1].isupper() and isinstance(fn, type(one_line))):
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


def quiet_summaries(tf: Any, notes: list[str]) -> None:
    """A build writes no logs: ``tf.summary`` calls (a layer that records its activations)
    are no-ops, which they are anyway outside a summary writer; they need TensorBoard
    installed only to be written."""
    def quiet(*args: Any, **kwargs: Any) -> bool:
        note = "tf.summary calls not run: they only write logs"
        if note not in notes:
            notes.append(note)
        return False

    # tf.summary and the same API as tf.compat.v2 spells it (its own module object)
    for summary in (getattr(tf, "summary", None), getattr(getattr(tf.compat, "v2", None), "summary", None)):
        for name in ("scalar", "image", "histogram", "audio", "text"):
            if getattr(summary, name, None) is not None:
                setattr(summary, name, quiet)


def patch_upsampling(tf_keras: Any, notes: list[str]) -> None:
    """tf-keras upsamples by a nearest-neighbour resize, whose gradient XLA on the CPU has no
    kernel for: an integer factor's nearest resize repeats each row and column, the same
    values, which it traces as."""
    backend: Any = sys.modules.get("tf_keras.src.backend")
    original = getattr(backend, "resize_images", None)
    if original is None or getattr(original, "_kerasfit", False):
        return

    def resize_images(x: Any, height_factor: int, width_factor: int, data_format: str,
                      interpolation: str = "nearest") -> Any:
        if interpolation != "nearest" or not (isinstance(height_factor, int) and isinstance(width_factor, int)):
            return original(x, height_factor, width_factor, data_format, interpolation=interpolation)
        rows, cols = (2, 3) if data_format == "channels_first" else (1, 2)
        note = ("UpSampling2D (nearest) traced as repeated rows and columns, the same values: XLA on the CPU has "
                "no kernel for the gradient of tf-keras's resize")
        if note not in notes:
            notes.append(note)
        return backend.repeat_elements(backend.repeat_elements(x, height_factor, rows), width_factor, cols)

    resize_images._kerasfit = True  # type: ignore[attr-defined]  # patched once
    backend.resize_images = resize_images


class Refused(RuntimeError):
    pass


def refuse_training(keras_module: Any, notes: list[str]) -> None:
    """Belt and braces under the slicer: a build never trains, predicts or downloads."""
    model = getattr(keras_module, "Model", None)
    for name in ("fit", "fit_generator", "evaluate", "predict", "train_on_batch"):
        if model is not None and hasattr(model, name):
            def refuse(self: Any, *a: object, _name: str = name, **k: object) -> None:
                notes.append(f"refused a call to Model.{_name}()")
                raise Refused(f"kerasfit does not run Model.{_name}() while building")
            setattr(model, name, refuse)
    utils = getattr(keras_module, "utils", None)
    if utils is not None and hasattr(utils, "get_file"):
        def get_file(*a: object, **k: object) -> None:
            notes.append("refused a download (keras.utils.get_file)")
            raise Refused("kerasfit does not download while building")
        utils.get_file = get_file


def _stmt_names(stmt: ast.stmt) -> tuple[set[str], bool]:
    """(names a top-level statement binds, whether it may change an existing object)."""
    binds = bound_names(stmt)
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return binds, bool(mutated_names(stmt)) or isinstance(stmt, ast.AugAssign)
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return binds, False
    if isinstance(stmt, (ast.For, ast.While, ast.With, ast.If, ast.Try)):
        return binds, bool(mutated_names(stmt))  # a loop that only binds and prints
    return binds, True


def _exec_slice(path: Path, plan: Slice, notes: list[str]) -> ModuleType:
    """Run the sliced script as a fresh module, one top-level statement at a time.

    Never a silently smaller model: a statement that fails while rebinding a name that
    has a value (``x = block(x)``) or changing an object in place fails the build with
    its line. One that binds only new names leaves them "not loaded" (any use fails
    later, naming this line), or, for a count read from the data (``num_classes =
    len(np.unique(y))``), binds a stated default with a note. ``compile`` is the one
    in-place change allowed to fail: it adds nothing to the model.
    """
    name = path.stem if path.stem.isidentifier() else "kerasfit_user_module"
    module = ModuleType(name)
    module.__file__ = str(path)
    module.__dict__["__builtins__"] = __builtins__
    sys.modules[name] = module
    for var, (line, why) in plan.skipped_names.items():
        module.__dict__[var] = Unloaded(var, line, why, notes)
    for stmt in plan.tree.body:
        code = compile(ast.Module(body=[stmt], type_ignores=[]), str(path), "exec")
        try:
            exec(code, module.__dict__)
        except BaseException as exc:  # user code: anything, including SystemExit
            _failed(stmt, exc, module, notes)
            continue
        # ``n = len(chars)`` of a set the skipped data loop never filled: 0 classes or
        # tokens build no model; the stated default does.
        for var in bound_names(stmt) if isinstance(stmt, ast.Assign) else ():
            default = count_default(var)
            if default is not None and module.__dict__.get(var) == 0 and plan.skipped:
                module.__dict__[var] = default
                notes.append(f"{var} is 0 without the data the build does not load (line "
                             f"{stmt.lineno}): built with a stated default of {default}")
    parse_flags()
    return module


def _failed(stmt: ast.stmt, exc: BaseException, module: ModuleType, notes: list[str]) -> None:
    """A statement of the slice failed: fail the build with its line when the model depends
    on it, else bind what it would have bound to stand-ins (or stated counts)."""
    known = known_failure(exc)
    if known:
        raise NeedsPackage(f"line {stmt.lineno} failed inside the installed package, as for anyone "
                           f"who runs the script ({type(exc).__name__}): {known}") from None
    if isinstance(exc, ScriptArguments):
        raise ChildError(f"line {stmt.lineno}: {exc}") from None
    why = f"{type(exc).__name__}: {one_line(exc, 160)}"
    binds, mutates = _stmt_names(stmt)
    if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr == "compile"):
        notes.append(f"line {stmt.lineno} (compile) failed, the model is unchanged: {why}")
        return
    held = [b for b in binds if b in module.__dict__ and not isinstance(module.__dict__[b], Unloaded)]
    changed = mutated_names(stmt)
    if changed and all(isinstance(module.__dict__.get(n), Unloaded) for n in changed) and not held:
        return  # it changes data that is not loaded: the stand-in stays as it is
    # The root cause: a stand-in the statement read (data not loaded, an earlier failure).
    roots = [object.__getattribute__(v, "_kf") for n in sorted(used_names(stmt))
             if isinstance(v := module.__dict__.get(n), Unloaded)]
    if isinstance(exc, DataNotLoaded):
        root = (exc.line, exc.why)
    elif roots:
        root = (roots[0][1], roots[0][2])
    else:
        root = (stmt.lineno, f"it failed: {why}")
    if mutates or held or not binds:
        cause = (f" ({roots[0][0]!r} depends on line {roots[0][1]}, which the build does not run: "
                 f"{roots[0][2]})") if roots and not isinstance(exc, DataNotLoaded) else ""
        raise ChildError(f"line {stmt.lineno} failed and the model depends on it: {why}{cause}") from None
    for var in binds:
        default = count_default(var)
        if default is not None:
            module.__dict__[var] = default
            notes.append(f"{var} is read from data (line {stmt.lineno}): built with a stated "
                         f"default of {default}")
        else:  # the root cause, not the chain
            module.__dict__[var] = Unloaded(var, root[0], root[1], notes)


# ---------------------------------------------------------------- the script's command line


class ScriptArguments(Exception):
    """The script's own command line (argparse) cannot be read without arguments."""


def patch_argparse() -> None:
    """The script sees the command line ``python script.py`` would give it: no arguments, so
    every option takes its default; one it requires fails naming itself, not exiting."""

    def error(self: argparse.ArgumentParser, message: str) -> Any:
        raise ScriptArguments(f"the script's command line cannot be read without arguments ({message}); "
                              "pass --entry with an expression that builds the model")

    argparse.ArgumentParser.error = error  # type: ignore[method-assign]  # the child's own process


def parse_flags() -> None:
    """absl flags the script defines take their defaults, as ``app.run`` would parse an empty
    command line (the slice never calls ``app.run``)."""
    flags = sys.modules.get("absl.flags")
    values = getattr(flags, "FLAGS", None)
    if values is not None and not values.is_parsed():
        try:
            values.mark_as_parsed()
        except Exception:
            pass


def load_script(path: Path, opts: Options, notes: list[str], candidate: Candidate | None
                ) -> tuple[Slice, ModuleType]:
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
    return plan, _exec_slice(path, plan, notes)


def _no_required_args(fn: Callable[..., Any]) -> bool:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    return all(
        p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        for p in sig.parameters.values()
    )


def resolve_entry(module: ModuleType, entry: str | None) -> tuple[str, Callable[[], Any]]:
    """(description, thunk) for what to build; the thunk runs the user's code."""
    if entry:
        if ":" in entry and entry.split(":", 1)[1].isidentifier():
            mod_name, attr = entry.split(":", 1)
            target = module if mod_name in ("", module.__name__) else importlib.import_module(mod_name)
            if not hasattr(target, attr):
                raise ChildError(f"entry {entry!r}: {mod_name or module.__name__} has no {attr!r}")
            obj = getattr(target, attr)
            return f"{entry}()", (lambda: obj() if callable(obj) and not isinstance(obj, model_classes()) else obj)
        if entry.isidentifier():
            if not hasattr(module, entry):
                raise ChildError(f"entry {entry!r} is not defined in the file")
            obj = getattr(module, entry)
            if callable(obj) and not isinstance(obj, model_classes()):
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
    classes = model_classes()
    for name, value in vars(module).items():
        if classes and isinstance(value, classes):
            return name, lambda v=value: v
    tried = ", ".join(f"{n}()" for n in DISCOVERY_FUNCTIONS)
    raise ChildError(
        f"found nothing to build: tried no-argument functions {tried} and module-level "
        "Keras models; pass --entry 'function' or an expression"
    )

