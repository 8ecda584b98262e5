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
import dis
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import json
import os
import re
import sys
import textwrap
import time
import traceback
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any, Callable, Iterable, Iterator, ClassVar, Literal, NoReturn, NotRequired, Sequence, TypedDict

from kerasfit.crosscheck.hlo import ELEMENTWISE, classify_pass, memory_ops, parse_hlo, strip_scopes
from kerasfit.crosscheck.options import parse_input_shapes
from kerasfit.crosscheck.slicing import (DISCOVERY_FUNCTIONS, Candidate, ScriptSizes, Slice, bound_names,
                                         mutated_names, script_sizes, slice_source, trained_names,
                                         used_names)

DEFAULT_BATCH = 128
# A ``None`` dim the script states no size for: a stated default per modality.
DEFAULT_IMAGE = 224
DEFAULT_SEQUENCE = 128
_NEEDS_SHAPE = "its shape is read from data: pass --input-shape with its non-batch dims"
# tf.data.Dataset's methods that give a dataset: a for loop over one yields a batch.
_DATASET_METHODS = frozenset({"take", "batch", "shuffle", "prefetch", "map", "skip", "repeat", "cache",
                              "unbatch", "padded_batch", "filter"})
# How a note about an array's shape read from data not loaded starts (_Unloaded).
_DATA_SHAPE = "the shape of "
# A count the script reads from its data (classes, vocabulary): a stated default.
DEFAULT_CLASSES = 10
DEFAULT_VOCABULARY = 1000
_CLASSY = re.compile(r"class|label|categor", re.I)
_COUNT_NAME = re.compile(
    r"^(num|n|nb|number_of|count|total)_?\w*(classes|labels|categories|users|movies|items|tokens|words|"
    r"chars|characters|vocab\w*|outputs|targets)$|^vocab(ulary)?_?size$|^max_?(features|tokens|words)$",
    re.I)
# Import names whose pip name differs.
_PIP_NAMES = {"tensorflow_addons": "tensorflow-addons", "tensorflow_probability": "tensorflow-probability",
              "tensorflow_datasets": "tensorflow-datasets", "tensorflow_hub": "tensorflow-hub",
              "tensorflow_io": "tensorflow-io", "tensorflow_text": "tensorflow-text",
              "tensorflow_docs": "git+https://github.com/tensorflow/docs", "keras_nlp": "keras-nlp",
              "keras_cv": "keras-cv", "keras_hub": "keras-hub", "cv2": "opencv-python",
              "sklearn": "scikit-learn", "PIL": "pillow", "tensorflow_decision_forests":
              "tensorflow-decision-forests", "tensorflow_similarity": "tensorflow-similarity"}

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
    input_shape: list[list[int]] | None  # each input's non-batch dims
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


class NeedsPackage(ChildError):
    """The script fails inside an installed package itself, as it would for anyone who runs
    it: no flag helps, another version of the package does. No other candidate is tried."""


# Failures inside a package's own code on the way to a published script's model, each
# checked against the versions named: (the package's file and function the exception
# passes through, what fails and since when, the requirement that builds the script).
_KNOWN_FAILURES = (
    ("keras/src/backend/tensorflow/numpy.py", "tile",
     "keras.ops.tile with a tensor of repeats fails while a model is built on the TensorFlow "
     "backend from Keras 3.13 (which iterates the repeats; Keras 3.12 builds it)", "keras<3.13"),
)


def _known_failure(exc: BaseException) -> str | None:
    """The installed package's own known failure this exception (or one it chains) comes
    from, as "what; pip install REQUIREMENT"; None when it is not one."""
    seen: set[int] = set()
    err: BaseException | None = exc
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        for fr in traceback.extract_tb(err.__traceback__):
            where = fr.filename.replace(os.sep, "/")
            for path, function, what, requirement in _KNOWN_FAILURES:
                if where.endswith(path) and fr.name == function:
                    return f"{what}; the script builds with pip install '{requirement}'"
        err = err.__cause__ or err.__context__
    return None


def _user_error(exc: BaseException, sites: Sites, doing: str) -> ChildError:
    where = ""
    for fr in reversed(traceback.extract_tb(exc.__traceback__)):
        if sites.is_user(fr.filename):
            where = f" (line {fr.lineno})"
            break
    known = _known_failure(exc)
    if known:
        return NeedsPackage(f"{doing}{where}: {type(exc).__name__} inside the installed package, as for "
                            f"anyone who runs the script: {known}")
    return ChildError(f"{doing}{where}: {type(exc).__name__}: {_one_line(exc)}")


# Never stubbed: without these there is no model to build.
_NEVER_STUB = frozenset({"tensorflow", "keras", "tf_keras", "numpy"})
# How many discovered candidates to try before giving up.
MAX_CANDIDATES = 3


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


class DataNotLoaded(Exception):
    """The model read something that comes from data the build does not load, or from a
    statement that failed: ``line`` and ``why`` are the root cause."""

    def __init__(self, name: str, line: int, why: str):
        super().__init__(f"{name!r} depends on line {line}, which the build does not run ({why})")
        self.line, self.why = line, why


class _Unloaded:
    """Stands for a name the slice did not bind: a skipped data statement's, or a failed
    statement's. Reading into it (an item, an attribute, a method call: ``df["col"].unique()``)
    gives another stand-in from the same root; using it as a number, a truth value or in
    arithmetic raises and names the line it came from. The two uses with a stated default:
    ``len()`` (a count of classes or tokens) and iterating it (a vocabulary: that many
    distinct tokens), each said in a note.

    An array's shape is followed as far as the script states it: ``x.reshape((x.shape[0],
    x.shape[1], 1))`` gives a stand-in of shape ``(None, None, 1)``, whose ``x.shape[1:]``
    is the real tuple ``(128, 1)``: a dim only the data knows, other than the rows, gets the
    stated default of its modality (a model's layers may need it concrete while it is
    built), said in a note."""

    given: ClassVar[list[int] | None] = None  # --input-shape: an array's shape the data would give

    def __init__(self, name: str, line: int, why: str, notes: list[str],
                 shape: tuple[int | None, ...] | None = None, kind: str = "value"):
        object.__setattr__(self, "_kf", (name, line, why, notes))
        # kind: "value" (anything), "shape" (an array's shape of unknown rank), "dim" (one of its dims)
        object.__setattr__(self, "_kf_shape", (shape, kind))

    def _fail(self, *args: object, **kwargs: object) -> NoReturn:
        name, line, why, _ = object.__getattribute__(self, "_kf")
        raise DataNotLoaded(name, line, why)

    def _derived(self, *args: object, **kwargs: object) -> _Unloaded:
        return self

    def _like(self, shape: tuple[int | None, ...] | None = None, kind: str = "value") -> _Unloaded:
        name, line, why, notes = object.__getattribute__(self, "_kf")
        return _Unloaded(name, line, why, notes, shape, kind)

    def _reshape(self, *args: Any, **kwargs: Any) -> _Unloaded:
        dims = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
        return self._like(tuple(d if isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                else None for d in dims))

    def _shape(self, shape: tuple[int | None, ...] | None) -> tuple[int | None, ...]:
        """The shape the script reads: its rows stay unknown (the batch); the other dims
        only the data knows come from --input-shape, else the stated default of their
        modality, said in a note. ``shape`` is None when not even its rank is known."""
        if shape is not None and all(d is not None for d in shape[1:]):
            return shape
        name, line, why, notes = object.__getattribute__(self, "_kf")
        if self.given and (shape is None or len(self.given) == len(shape) - 1):
            note = f"{_DATA_SHAPE}{name} is read from data (line {line}): --input-shape gives it"
            if note not in notes:
                notes.append(note)
            return (None, *self.given)
        assert shape is not None  # the caller asks only with a rank or with --input-shape
        image = len(shape) == 4 and shape[-1] is not None  # (rows, H, W, C)
        n = DEFAULT_IMAGE if image else DEFAULT_SEQUENCE
        filled = shape[:1] + tuple(n if d is None else d for d in shape[1:])
        shown = ", ".join("rows" if i == 0 else str(d) for i, d in enumerate(filled))
        note = (f"{_DATA_SHAPE}{name} is read from data (line {line}: {why}): built as ({shown}), "
                f"{n} a stated default for {'images' if image else 'sequences'}; --input-shape to change")
        if note not in notes:
            notes.append(note)
        return filled

    def __getattr__(self, attr: str) -> Any:
        # Not a mapping: ``dict(df)`` must not make a real object of stand-ins.
        if attr.startswith("__") and attr.endswith("__") or attr in ("keys", "items", "values"):
            raise AttributeError(attr)
        shape, kind = object.__getattribute__(self, "_kf_shape")
        if attr == "shape" and kind == "value":
            if shape is not None or self.given:
                return self._shape(shape)
            # Its shape is read, and only the data knows it: whatever fails from here names the flag.
            name, line, why, notes = object.__getattribute__(self, "_kf")
            if _NEEDS_SHAPE not in why:
                object.__setattr__(self, "_kf", (name, line, f"{why}; {_NEEDS_SHAPE}", notes))
            return self._like(kind="shape")
        if attr == "reshape" and kind == "value":
            return self._reshape
        if attr in _DATASET_METHODS:
            return self._like(kind="dataset")
        return self

    def __iter__(self) -> Iterator[Any]:
        # What the script does with it, from the instruction that asks: unpacking it into n
        # names (a batch's ``inputs, targets``) gives n stand-ins; a for loop over a dataset
        # (``for batch in ds.take(1)``) one batch; anything else a vocabulary of stated size.
        _, kind = object.__getattribute__(self, "_kf_shape")
        frame = sys._getframe(1)
        asked = next((i for i in dis.get_instructions(frame.f_code) if i.offset == frame.f_lasti), None)
        if asked is not None and asked.opname == "UNPACK_SEQUENCE" and asked.arg is not None:
            return iter([self._like() for _ in range(asked.arg)])
        if asked is not None and asked.opname == "GET_ITER" and kind == "dataset":
            return iter([self._like()])
        return iter([f"token{i}" for i in range(self._default("the vocabulary"))])

    __call__ = _derived

    def __getitem__(self, key: object) -> Any:
        # A column by name reads on; a position is a value (numpy walks a sequence by them).
        shape, kind = object.__getattribute__(self, "_kf_shape")
        if isinstance(key, str):
            return self
        if kind == "shape":  # a dim, or dims, of unknown rank
            return self._like(kind="shape" if isinstance(key, slice) else "dim")
        if kind == "value" and shape and (isinstance(key, slice) or hasattr(key, "__len__")):
            return self._like((None,) + shape[1:])  # rows picked or shuffled: same row shape
        self._fail()
        return self

    __bool__ = __index__ = __int__ = __float__ = __array__ = _fail  # numpy must not make it an array
    __add__ = __radd__ = __mul__ = __rmul__ = __sub__ = __rsub__ = __truediv__ = __floordiv__ = _fail
    __lt__ = __le__ = __gt__ = __ge__ = _fail

    def _default(self, what: str) -> int:
        name, line, why, notes = object.__getattribute__(self, "_kf")
        n = DEFAULT_CLASSES if _CLASSY.search(name) else DEFAULT_VOCABULARY
        note = f"{what} of {name} is read from data (line {line}: {why}): built with a stated default of {n}"
        if note not in notes:
            notes.append(note)
        return n

    def __len__(self) -> int:
        return self._default("the count")

    def __repr__(self) -> str:
        return f"<{object.__getattribute__(self, '_kf')[0]}: not loaded>"


def _patch_adapt(keras_module: Any, notes: list[str]) -> None:
    """A preprocessing layer adapted to data the build does not load keeps a stated default:
    a lookup gets a vocabulary of that many tokens, a normalization mean 0 and variance 1."""
    layers = getattr(keras_module, "layers", None)
    for name in ("StringLookup", "IntegerLookup", "TextVectorization", "Normalization", "Discretization"):
        cls = getattr(layers, name, None)
        original = getattr(cls, "adapt", None)
        if cls is None or original is None or getattr(original, "_kerasfit", False):
            continue

        def adapt(self: Any, data: Any = None, *args: Any, _original: Any = original, _name: str = name,
                  **kwargs: Any) -> Any:
            if not isinstance(data, _Unloaded):
                return _original(self, data, *args, **kwargs)
            if hasattr(self, "set_vocabulary"):
                ints = _name == "IntegerLookup"
                vocab = list(range(1, DEFAULT_VOCABULARY + 1)) if ints else list(data)
                self.set_vocabulary(vocab[:DEFAULT_VOCABULARY])
            note = (f"{_name}.adapt() reads data the build does not load ({data!r}): "
                    f"{'a vocabulary of ' + str(DEFAULT_VOCABULARY) if hasattr(self, 'set_vocabulary') else 'defaults'}"
                    " (stated default)")
            if note not in notes:
                notes.append(note)
            return None

        adapt._kerasfit = True  # type: ignore[attr-defined]  # patched once
        cls.adapt = adapt


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


def _count_default(name: str) -> int | None:
    if not _COUNT_NAME.match(name):
        return None
    return DEFAULT_CLASSES if _CLASSY.search(name) else DEFAULT_VOCABULARY


def _exec_slice(path: Path, plan: Slice, sites: Sites, notes: list[str]) -> ModuleType:
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
        module.__dict__[var] = _Unloaded(var, line, why, notes)
    for stmt in plan.tree.body:
        code = compile(ast.Module(body=[stmt], type_ignores=[]), str(path), "exec")
        try:
            exec(code, module.__dict__)
            # ``n = len(chars)`` of a set the skipped data loop never filled: 0 classes or
            # tokens build no model; the stated default does.
            for var in bound_names(stmt) if isinstance(stmt, ast.Assign) else ():
                default = _count_default(var)
                if default is not None and module.__dict__.get(var) == 0 and plan.skipped:
                    module.__dict__[var] = default
                    notes.append(f"{var} is 0 without the data the build does not load (line "
                                 f"{stmt.lineno}): built with a stated default of {default}")
        except BaseException as exc:  # user code: anything, including SystemExit
            known = _known_failure(exc)
            if known:
                raise NeedsPackage(f"line {stmt.lineno} failed inside the installed package, as for anyone "
                                   f"who runs the script ({type(exc).__name__}): {known}") from None
            why = f"{type(exc).__name__}: {_one_line(exc, 160)}"
            binds, mutates = _stmt_names(stmt)
            if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                    and isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr == "compile"):
                notes.append(f"line {stmt.lineno} (compile) failed, the model is unchanged: {why}")
                continue
            held = [b for b in binds if b in module.__dict__
                    and not isinstance(module.__dict__[b], _Unloaded)]
            changed = mutated_names(stmt)
            if changed and all(isinstance(module.__dict__.get(n), _Unloaded) for n in changed) and not held:
                continue  # it changes data that is not loaded: the stand-in stays as it is
            # The root cause: a stand-in the statement read (data not loaded, an earlier failure).
            roots = [object.__getattribute__(v, "_kf") for n in sorted(used_names(stmt))
                     if isinstance(v := module.__dict__.get(n), _Unloaded)]
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
                default = _count_default(var)
                if default is not None:
                    module.__dict__[var] = default
                    notes.append(f"{var} is read from data (line {stmt.lineno}): built with a stated "
                                 f"default of {default}")
                else:  # the root cause, not the chain
                    module.__dict__[var] = _Unloaded(var, root[0], root[1], notes)
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


def _fill_none(shape: list[int | None], input_shape: list[int] | None, sizes: ScriptSizes | None,
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
        if sizes is not None and sizes.image is not None:
            h, w = sizes.image.value
            why = f"from the script (line {sizes.image.line}: {sizes.image.what})"
        else:
            h = w = DEFAULT_IMAGE
            why = "a stated default for images (the script states no size)"
        filled[-3] = filled[-3] if filled[-3] is not None else h
        filled[-2] = filled[-2] if filled[-2] is not None else w
        said.append(f"input {shown}: {filled[-3]}×{filled[-2]}, {why}; --input-shape to change")
    elif len(dims) in (1, 2) and dims[0] is None and all(d is not None for d in dims[1:]):
        if sizes is not None and sizes.sequence is not None:
            n = sizes.sequence.value[0]
            why = f"from the script (line {sizes.sequence.line}: {sizes.sequence.what})"
        else:
            n, why = DEFAULT_SEQUENCE, "a stated default for sequences (the script states no length)"
        filled[0] = n
        said.append(f"input {shown}: sequence length {n}, {why}; --input-shape to change")
    if any(d is None for d in filled):
        raise ChildError(
            f"the model's input shape {tuple(shape)} has unknown non-batch dims: pass "
            f"--input-shape {','.join(str(d) if d is not None else 'N' for d in dims)} "
            "with N filled in")
    return [shape[0]] + filled


def _input_specs(model: Any, input_shape: list[list[int]] | None = None, sizes: ScriptSizes | None = None,
                 said: list[str] | None = None) -> tuple[list[list[int | None]], list[str]]:
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
            shape = [[None] + list(dims) for dims in input_shape]
        if shape is None:
            # A subclassed wrapper around one functional model (``call`` returns
            # ``self.net(x)``): that model's input.
            inner = [v for v in vars(model).values() if v is not model and _functional_inputs(v)]
            if len(inner) == 1:
                shape = _functional_inputs(inner[0])
                (said if said is not None else []).append(
                    f"input {tuple(shape)}: that of the model inside it, {inner[0].name}")
        first = _first_layer(model)
        token_ids = False
        if shape is None and first in _IMAGE_FIRST:
            # Its first layer resizes, crops or convolves images: an image of unknown size,
            # filled in below from the script's sizes or the stated default.
            shape = [None, None, None, 3]
            (said if said is not None else []).append(
                f"input unknown (a subclassed model): an RGB image, as its first layer ({first}) takes")
        elif shape is None and first == "Embedding":
            # Token ids: a sequence of unknown length, filled in like any other.
            shape, token_ids = [None, None], True
            (said if said is not None else []).append(
                "input unknown (a subclassed model): token ids, as its first layer (Embedding) takes")
        if shape is None:
            reads = _call_inputs(model)
            if len(reads) > 1:
                raise ChildError(
                    f"the model has no known input shape and its call() takes {len(reads)} inputs "
                    f"({', '.join(reads)}): pass --input-shape with each one's dims, separated by ';' "
                    f"(e.g. {';'.join(['100,80', '50', '10', '1'][:len(reads)])}), or build it "
                    "(call it once, or use keras.Input) inside the entry")
            raise ChildError(
                "the model has no known input shape: pass --input-shape (e.g. 224,224,3), "
                "or build it (call it once, or use keras.Input) inside the entry"
            )
        shapes = [list(s) for s in shape] if shape and isinstance(shape[0], (list, tuple)) else [list(shape)]
        dtypes = ["int32" if token_ids else "float32"] * len(shapes)
    said = [] if said is None else said
    # One --input-shape fills every input's None dims (of its rank); several, one input each.
    given: list[list[int] | None] = (
        [input_shape[0]] * len(shapes) if input_shape and len(input_shape) == 1
        else [input_shape[i] if input_shape and i < len(input_shape) else None for i in range(len(shapes))])
    return [_fill_none(s, g, sizes, said) for s, g in zip(shapes, given)], dtypes


def _call_inputs(model: Any) -> list[str]:
    """The inputs a subclassed model's ``call`` takes apart: ``inputs[0]``, ``inputs[1]`` or
    ``a, b = inputs`` of its first argument, as written; one name when it reads it whole."""
    klass = _user_method(model, "call")
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


def _first_layer(model: Any) -> str | None:
    """The class of a model's first leaf layer, in the order its attributes made them."""
    try:
        layers = list(model._flatten_layers(include_self=False, recursive=True))
    except Exception:
        return None
    leaves = [layer for layer in layers if not list(getattr(layer, "_layers", []) or [])]
    return type(leaves[0]).__name__ if leaves else None


def _functional_inputs(value: Any) -> list[int | None] | None:
    """The one input shape of a functional Keras model (else None)."""
    classes = _model_classes()
    try:
        inputs: Any = getattr(value, "inputs", None) if classes and isinstance(value, classes) else None
    except Exception:
        return None
    return list(inputs[0].shape) if inputs and len(inputs) == 1 else None


def _batched(shape: list[int | None], batch: int) -> list[int]:
    """An input of ``shape`` at ``batch``; _input_specs has filled in or refused every
    unknown dim after the batch one."""
    dims = [int(d) for d in shape[1:] if d is not None]
    if len(dims) != len(shape) - 1:
        raise ChildError(f"the input shape {tuple(shape)} has unknown non-batch dims")
    return [batch] + dims


# Keras preprocessing layers backed by lookup tables or strings. XLA compiles neither, and a
# TPU runs them in the input pipeline (tf.data), outside the program the chip runs.
_TABLE_LAYERS = frozenset({"StringLookup", "IntegerLookup", "TextVectorization", "Hashing", "HashedCrossing"})


def _outside_tables(net: Any) -> tuple[Any, list[str]] | None:
    """A functional network with table layers: the same network from their outputs on
    (the inputs other layers read kept as they are), and the table layers left out. None
    when it has none, or when it is not a Keras 3 functional network that can be cut."""
    inputs = getattr(net, "inputs", None)
    ops = getattr(net, "operations", None)  # Keras 3's functional graph; tf-keras has none
    if not inputs or not ops:
        return None
    tables = [op for op in ops if type(op).__name__ in _TABLE_LAYERS]
    if not tables:
        return None
    try:
        cut = [t for op in tables for node in op._inbound_nodes for t in node.output_tensors]
        read = {id(t) for op in ops if op not in tables and type(op).__name__ != "InputLayer"
                for node in op._inbound_nodes for t in node.input_tensors}
        kept = [t for t in inputs if id(t) in read]
        model_cls = importlib.import_module(type(net).__module__.split(".")[0]).Model  # keras's own
        return model_cls(kept + cut, net.outputs), sorted({type(op).__name__ for op in tables})
    except Exception:
        return None


def _loss_layer_input(layer: Any) -> int | None:
    """A user layer that only adds the script's loss: its ``call`` calls ``self.add_loss``
    and returns one of its arguments unchanged. Which argument (its position), else None."""
    klass = _user_method(layer, "call")
    if klass is None:
        return None
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(vars(klass)["call"])))
    except (OSError, TypeError, SyntaxError):
        return None
    fn = tree.body[0]
    if not isinstance(fn, ast.FunctionDef):
        return None
    params = [a.arg for a in fn.args.args[1:]]
    adds = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add_loss"
               for n in ast.walk(fn))
    returned = {n.value.id if isinstance(n.value, ast.Name) else None
                for n in ast.walk(fn) if isinstance(n, ast.Return)}
    if not adds or len(returned) != 1:
        return None
    name = returned.pop()
    return params.index(name) if name in params else None


def _without_loss_layers(net: Any) -> tuple[Any, list[str]] | None:
    """A Keras 3 functional network whose output passes through layers that only add the
    script's loss: the same network ending at what those layers return (the inputs only
    they read dropped), and the layers left out. None when it has none."""
    ops = getattr(net, "operations", None)
    outputs = getattr(net, "outputs", None)
    if not ops or not outputs:
        return None
    passed: dict[int, Any] = {}  # a loss layer's output -> the input it returns
    names: list[str] = []
    try:
        for op in ops:
            at = _loss_layer_input(op)
            if at is None:
                continue
            for node in op._inbound_nodes:
                args = list(node.arguments.args)
                if at < len(args) and len(node.output_tensors) == 1:
                    passed[id(node.output_tensors[0])] = args[at]
                    names.append(f"{type(op).__name__} (line {getattr(op, '_kerasfit_site', {}).get('line', '?')})")
        if not passed:
            return None
        ends = []
        for t in outputs:
            while id(t) in passed:
                t = passed[id(t)]
            ends.append(t)
        model_cls = importlib.import_module(type(net).__module__.split(".")[0]).Model  # keras's own
        inputs = [t for t in net.inputs if _reaches(t, ends)]
        return model_cls(inputs, ends), names
    except Exception:
        return None


def _reaches(tensor: Any, ends: list[Any]) -> bool:
    """Whether a Keras 3 symbolic tensor is among the inputs that ``ends`` are computed from."""
    seen: set[int] = set()
    stack = list(ends)
    while stack:
        t = stack.pop()
        if t is tensor:
            return True
        if id(t) in seen:
            continue
        seen.add(id(t))
        history = getattr(t, "_keras_history", None)
        if history is not None:
            node = history.operation._inbound_nodes[history.node_index]
            stack.extend(node.input_tensors)
    return False


def _trace_and_lower(step: Any, args: list[Any]) -> tuple[Any, str]:
    """Trace the stand-in step on ``args`` and lower it to HLO text, marking both phases."""
    concrete = step.get_concrete_function(*args)
    _mark("trace")
    hlo = step.experimental_get_compiler_ir(*args)(stage="hlo")
    _mark("lower")
    return concrete, hlo


def _standin_step(networks: list[tuple[Any, int]], variables: list[Any], tf: Any) -> Any:
    """One step of every network on a stand-in loss (the mean square of its outputs)."""

    def step(*inputs: Any) -> tuple[Any, Any, list[Any]]:
        with tf.GradientTape() as tape:
            losses, outs, i = [], [], 0
            for net, n in networks:
                ins = inputs[i:i + n]
                i += n
                out = net(_structured(net, list(ins)), training=True)
                outs.append(out)
                flat = [o for o in tf.nest.flatten(out) if o.dtype.is_floating]
                losses += [tf.reduce_mean(tf.square(tf.cast(o, tf.float32))) for o in flat]
            loss = tf.add_n(losses)
        grads = tape.gradient(loss, variables)
        return loss, outs[0] if len(outs) == 1 else outs, [g for g in grads if g is not None]

    # called, not used as a decorator: TensorFlow's untyped decorator would untype ``step``
    return tf.function(step, jit_compile=True, autograph=False)


def _structured(net: Any, inputs: list[Any]) -> Any:
    """The inputs as the network takes them: one tensor, a list, or its dict of named
    inputs (``model.inputs`` flattens a dict in sorted-key order, in Keras 3 and tf-keras)."""
    for attr in ("_inputs_struct", "_nested_inputs"):  # Keras 3, tf-keras
        struct = getattr(net, attr, None)
        if isinstance(struct, dict) and len(struct) == len(inputs):
            return dict(zip(sorted(struct), inputs))
    return inputs[0] if len(inputs) == 1 else inputs


def _user_method(obj: Any, name: str) -> Any:
    """The class in ``obj``'s MRO that defines ``name``, if it is the user's (not Keras's)."""
    for klass in type(obj).__mro__:
        if name in vars(klass):
            mod = klass.__module__ or ""
            return None if mod.split(".")[0] in ("keras", "tf_keras", "tensorflow", "builtins") else klass
    return None


def _networks(model: Any) -> list[tuple[str, Any]]:
    """The networks a training wrapper trains: a Model with its own ``train_step`` and no
    ``call`` (a GAN, a VAE). Those whose weights its train_step differentiates, else those
    it calls, in the order the class names them."""
    if _user_method(model, "call") is not None or _user_method(model, "train_step") is None:
        return []
    layer_cls = tuple(c for c in (getattr(sys.modules.get(m), "layers", None) for m in ("keras", "tf_keras"))
                      if c is not None)
    layer_types = tuple(getattr(c, "Layer") for c in layer_cls)

    def network(attr: str) -> Any:
        try:
            value = getattr(model, attr, None)
        except Exception:
            return None
        ok = isinstance(value, layer_types) and value is not model and bool(_trainable(value))
        return value if ok else None

    names: list[str] = []
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(type(model))))
    except (OSError, TypeError, SyntaxError):
        tree = None
    if tree is not None:
        step = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "train_step"), None)
        weights = [n.value.attr for n in ast.walk(step or tree) if isinstance(n, ast.Attribute)
                   and n.attr in ("trainable_weights", "trainable_variables")
                   and isinstance(n.value, ast.Attribute) and isinstance(n.value.value, ast.Name)
                   and n.value.value.id == "self"]
        called = [n.func.attr for n in ast.walk(step or tree) if isinstance(n, ast.Call)
                  and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
                  and n.func.value.id == "self"]
        for attr in weights or called:
            if attr not in names and network(attr) is not None:
                names.append(attr)
    if not names:
        names = [a for a in vars(model) if not a.startswith("_") and network(a) is not None]
    return [(a, getattr(model, a)) for a in names]


def _trainable(model: Any) -> list[Any]:
    try:
        return list(model.trainable_variables)
    except Exception:
        return []


def _batch(opts: _Options, fixed: int | None, sizes: ScriptSizes | None, said: list[str]) -> int:
    """The global batch: --batch-size, else the model's input spec, else the script's."""
    if opts.batch_size:
        said.append(f"batch {opts.batch_size} from --batch-size")
        return opts.batch_size
    if fixed:
        said.append(f"batch {fixed}: the model's input fixes it")
        return fixed
    if sizes is not None and sizes.batch is not None:
        b = sizes.batch
        if b.per_replica:
            said.append(f"batch {b.value[0]} per replica from the script (line {b.line}: {b.what}) "
                        f"× {opts.cores} core{'s' if opts.cores != 1 else ''}")
            return b.value[0] * max(1, opts.cores)
        said.append(f"batch {b.value[0]} from the script (line {b.line}: {b.what})")
        return b.value[0]
    said.append(f"batch {DEFAULT_BATCH}: a stated default (the script states none; --batch-size to change)")
    return DEFAULT_BATCH


_RESHAPE = re.compile(r"Input to reshape is a tensor with (\d+) values, but the requested shape has (\d+)|"
                      r"Cannot reshape a tensor with (\d+) elements to shape \S* \((\d+) elements\)")


def _trace_error(exc: BaseException, sites: Sites, batch: int) -> ChildError:
    """A failed trace; a reshape that hard-codes the batch says which --batch-size fits."""
    err = _user_error(exc, sites, "tracing the training step failed")
    m = _RESHAPE.search(str(exc))
    if m or "reshape" in str(exc).lower():
        hint = "a reshape in the script may hard-code its batch: pass --batch-size N with that batch"
        have, want = (int(g) for g in (m.groups()[:2] if m and m.group(1) else m.groups()[2:])) if m else (0, 0)
        if have:
            wanted = want * batch / have
            if wanted == int(wanted) and wanted >= 1:
                hint = f"a reshape in the script hard-codes batch {int(wanted)}: pass --batch-size {int(wanted)}"
        return ChildError(f"{err} ({hint})")
    return err


def _train_step_hlo(wrapper: Any, specs: list[tuple[list[list[int | None]], list[str]]], per_core: int,
                    tf: Any) -> tuple[str | None, str, list[int] | None, Any]:
    """Lower one step of the script's own ``train_step`` on a batch shaped like a network's
    input (the real data a GAN's discriminator or a VAE's encoder eats). (hlo, why not, batch
    shape, the traced function: its graph sources the ops a user-written call() makes)."""
    why = ""
    tried: set[tuple[int, ...]] = set()
    for shapes, dtypes in specs:
        shape = _batched(shapes[0], per_core)
        if tuple(shape) in tried:
            continue
        tried.add(tuple(shape))
        x = tf.zeros(shape, dtype=dtypes[0])
        fn = tf.function(lambda data: wrapper.train_step(data), jit_compile=True)
        try:
            concrete = fn.get_concrete_function(x)  # creates the optimizer's slots on the first trace
            hlo: str = fn.experimental_get_compiler_ir(x)(stage="hlo")
            return hlo, "", shape, concrete
        except Exception as exc:
            why = f"{type(exc).__name__}: {_one_line(exc, 160)}"
    return None, why, None, None


def _build_keras(model: Any, opts: _Options, sites: Sites, tf: Any, result: dict[str, Any],
                 sizes: ScriptSizes | None = None, label: str = "model",
                 others: list[tuple[str, Any]] | None = None) -> str:
    """Lower one training step of ``model`` (and ``others`` the script also trains): a
    training wrapper's own ``train_step`` when it traces, else every network on a
    stand-in loss."""
    # A shape read from data that is not loaded is where an input's size came from: the header's.
    notes = result.setdefault("notes", [])
    said: list[str] = [n for n in notes if n.startswith(_DATA_SHAPE)]
    notes[:] = [n for n in notes if n not in said]
    nets: list[tuple[str, Any]] = []
    wrapper = None
    for name, m in [(label, model)] + list(others or []):
        sub = _networks(m)
        if sub and not others:
            wrapper = m
        nets += [(f"{name}.{a}" if others else a, n) for a, n in sub] or [(name, m)]
    # The program each network runs: from its table layers' outputs on, where it has any.
    programs = [net for _, net in nets]
    outside: list[str] = []
    if wrapper is None:
        for i, (_, net) in enumerate(nets):
            cut = _outside_tables(net)
            if cut is not None:
                programs[i] = cut[0]
                outside += [c for c in cut[1] if c not in outside]
    at = len(said)
    specs = [_input_specs(net, opts.input_shape, sizes, said) for net in programs]
    said_specs = len(said) - at
    fixed = specs[0][0][0][0] if specs[0][0] and specs[0][0][0] else None
    global_batch = _batch(opts, fixed, sizes, said)
    per_core = max(1, global_batch // max(1, opts.cores))
    layers: list[Any] = []
    for _, net in nets:
        layers += [layer for layer in _layers_of(net) if all(layer is not seen for seen in layers)]
    scopes = _record_scopes(layers, tf)
    for (_, net), (shapes, dtypes) in zip(nets, specs):
        if not _trainable(net):
            # A subclassed model makes its weights on its first call: one call at batch 1.
            try:
                net(_structured(net, [tf.zeros(_batched(s, 1), dtype=dt) for s, dt in zip(shapes, dtypes)]))
            except Exception as exc:
                raise _user_error(exc, sites, "calling the model once to make its weights failed") from None
    variables: list[Any] = []
    for _, net in nets:
        variables += [v for v in _trainable(net) if all(v is not seen for seen in variables)]
    if not variables:
        raise ChildError("the model has no trainable variables")
    hlo = None
    args: list[Any] = []
    how = "a stand-in loss (the mean square of its outputs)"
    if wrapper is not None:
        klass = _user_method(wrapper, "train_step")
        hlo, why, shape, concrete = _train_step_hlo(wrapper, specs, per_core, tf)
        if hlo is not None:
            how = (f"one step of the script's {klass.__name__}.train_step on a batch of shape "
                   f"{tuple(shape or ())}")
            args = [tf.zeros(shape)]
            _mark("trace")
            _mark("lower")
            result["outputs"] = [list(o.shape) for _, net in nets for o in (getattr(net, "outputs", None) or [])]
        else:
            how = (f"each network with a stand-in loss (the mean square of its outputs): the script's "
                   f"{klass.__name__}.train_step did not trace on a batch of the networks' inputs ({why})")
    if hlo is None:
        args = [tf.zeros(_batched(s, per_core), dtype=dt) for shapes, dtypes in specs
                for s, dt in zip(shapes, dtypes)]
        step = _standin_step([(net, len(sp[0])) for net, sp in zip(programs, specs)], variables, tf)
        if outside:
            how += (f"; lowered from the outputs of its {', '.join(outside)} layers on: lookup tables, "
                    "which XLA does not compile and a TPU runs in the input pipeline")
        try:
            concrete, hlo = _trace_and_lower(step, args)
        except ChildError:
            raise
        except Exception as exc:
            # A layer that only adds the script's loss, which XLA cannot compile (a CTC loss):
            # the stand-in loss stands for it as for any other loss of the script's.
            cuts = [_without_loss_layers(p) if "unsupported operations" in str(exc) else None
                    for p in programs]
            if not any(cuts):
                raise _trace_error(exc, sites, per_core) from None
            dropped = [n for c in cuts if c for n in c[1]]
            programs = [c[0] if c else p for c, p in zip(cuts, programs)]
            now: list[str] = []
            specs = [_input_specs(net, opts.input_shape, sizes, now) for net in programs]
            said[at:at + said_specs] = now
            args = [tf.zeros(_batched(s, per_core), dtype=dt) for shapes, dtypes in specs
                    for s, dt in zip(shapes, dtypes)]
            step = _standin_step([(net, len(sp[0])) for net, sp in zip(programs, specs)], variables, tf)
            rejected = sorted(set(re.findall(r"(\w+) \(No registered '", str(exc)))) or ["ops"]
            how += (f"; without {', '.join(dropped)}, which only adds the script's loss: XLA cannot "
                    f"compile its {', '.join(rejected)}, and the stand-in loss stands for it")
            try:
                concrete, hlo = _trace_and_lower(step, args)
            except Exception:
                raise _trace_error(exc, sites, per_core) from None
        outs = concrete.structured_outputs[1]
        result["outputs"] = [list(o.shape) for o in tf.nest.flatten(outs)]
    result["networks"] = [{"name": name, "how": how,
                           "layers": sorted({layer.name for layer in _layers_of(net)}),
                           "classes": sorted({type(layer).__name__ for layer in _layers_of(net)})}
                          for name, net in nets]
    result["built_how"] = how
    result["said"] = said
    result["output_layers"] = [n for _, net in nets for n in _output_layers(net)]
    # Where the batch enters the model: KF302 points there.
    result["input_sites"] = [site for _, net in nets for site in (getattr(layer, "_kerasfit_site", None)
                             for layer in _endpoint_layers(net, "inputs")) if site]
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
    if opts.probe_outputs and wrapper is None:
        shapes, dtypes = specs[0]
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
                 result: dict[str, Any], state: _GraphState, sizes: ScriptSizes | None = None) -> str:
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
        for value in model if isinstance(model, tuple) else (model,):
            if isinstance(value, _Unloaded):
                name, line, why, _ = object.__getattribute__(value, "_kf")
                raise ChildError(f"{description}: {DataNotLoaded(name, line, why)}")
        labels = _tuple_names(description)
        if (labels and isinstance(model, tuple) and len(model) == len(labels)
                and all(isinstance(m, _model_classes()) for m in model)):
            # every model the script trains, built together
            result["mode"] = "tf-keras" if type(model[0]).__module__.startswith("tf_keras") else "keras"
            _mark("build")
            return _build_keras(model[0], opts, sites, tf, result, sizes, label=labels[0],
                                others=list(zip(labels[1:], model[1:])))
        if not isinstance(model, _model_classes()):
            raise ChildError(
                f"{description} returned {type(model).__module__}.{type(model).__name__}, not a Keras model "
                "(TF1 graph code is built when the file uses tf.compat.v1 / tf.layers)"
            )
        result["mode"] = "tf-keras" if type(model).__module__.startswith("tf_keras") else "keras"
        _mark("build")
        hlo = _build_keras(model, opts, sites, tf, result, sizes, label=description)
    return hlo


def _tuple_names(expr: str) -> list[str]:
    """``"(a, b)"`` -> ["a", "b"]; anything else -> []."""
    try:
        node = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return []
    if isinstance(node, ast.Tuple) and all(isinstance(e, ast.Name) for e in node.elts):
        return [e.id for e in node.elts if isinstance(e, ast.Name)]
    return []


_GUARD_HINT = ('put the training, data and plotting code under `if __name__ == "__main__":`, '
               "or pass --entry 'function' or an expression that builds the model")


def _install_hint(stubs: list[str], error: str) -> str | None:
    """A missing package the failed build needed: name the one to install.

    Its stub stood in at import; the model path reaching it (a layer subclassing a stub,
    a stub called while building) is what failed, so the error or its traceback names it.
    """
    # Named in the error: a stub's objects carry their package's module name.
    named = [n for n in stubs if re.search(rf"\b{re.escape(n)}\b", error)]
    for name in named:
        return f"the model needs {name}, which is not installed: pip install {_PIP_NAMES.get(name, name)}"
    return None


def _build_script(path: Path, opts: _Options, sites: Sites, tf: Any, keras: Any, result: dict[str, Any],
                  state: _GraphState) -> str:
    """Slice the script, then build its entry (or the discovered candidates, best first)."""
    sys.path.insert(0, str(path.parent))
    source = path.read_text(encoding="utf-8", errors="replace")
    try:
        plan = slice_source(source, str(path))
    except SyntaxError as exc:
        raise ChildError(f"the file does not parse (line {exc.lineno}): {exc.msg}") from None
    tree = ast.parse(source)
    trained = trained_names(tree)
    finder = _StubFinder(plan.imported - _NEVER_STUB)
    sys.meta_path.append(finder)
    candidates = [] if opts.entry else plan.candidates[:MAX_CANDIDATES]
    fitted = sorted((c for c in plan.candidates if c.kind == "variable" and trained.get(c.expr, (False,))[0]),
                    key=lambda c: c.line)
    if len(fitted) > 1 and candidates:
        # A script that trains several models (a baseline, then the one it is about; a
        # two-stage VQ-VAE and its prior): all of them, each labelled, then each alone.
        joint = Candidate("(" + ", ".join(c.expr for c in fitted) + ")", fitted[0].line, "joint")
        candidates = [joint] + candidates
    result["candidates"] = [c.label for c in plan.candidates]
    errors: list[str] = []
    hlo = None
    built: Candidate | None = None
    tries: list[Candidate | None] = [*candidates] or [None]
    for candidate in list(tries):
        if candidate not in tries:
            continue
        notes: list[str] = []
        attempt = dict(result, notes=notes)
        var = candidate.expr if candidate is not None and candidate.kind == "variable" else None
        sizes = script_sizes(tree, var)
        try:
            _phase("import")
            _, module = _load_script(path, opts, sites, notes, candidate)
            _phase("build")
            hlo = _build_entry(module, candidate.expr if candidate else opts.entry, opts, sites,
                               tf, attempt, state, sizes)
        except NeedsPackage:
            raise
        except ChildError as exc:
            why = str(exc)
            errors.append(f"{candidate.expr}: {why}" if candidate else why)
            _reset_graphs(tf, keras)
            # The model the script trains failed: a candidate it does not train is not
            # what it trains; another model it trains is, and the note says so.
            if candidate is not None and (candidate.kind == "joint" or var in trained):
                pending = tries[tries.index(candidate) + 1:]
                tries[tries.index(candidate) + 1:] = [c for c in pending if c is not None and (
                    c.kind == "variable" and c.expr in trained)]
            continue
        attempt["notes"] = result["notes"] + notes + [f"tried first, failed: {e}" for e in errors]
        result.update(attempt)
        built = candidate
        break
    stubs = ", ".join(finder.used)
    if hlo is None:
        install = _install_hint(finder.used, " ".join(errors))
        if install:
            raise ChildError(f"{errors[-1]}; {install}")
        stubbed = f" (not installed, stubbed: {stubs})" if stubs else ""
        if len(errors) > 1:
            raise ChildError(f"no candidate built{stubbed}: " + " | ".join(errors) + "; " + _GUARD_HINT)
        raise ChildError(f"{errors[0]}{stubbed}; {_GUARD_HINT}" if "--" not in errors[0]
                         else f"{errors[0]}{stubbed}")
    if stubs:
        result["notes"].append(f"not installed, stubbed (the model does not use them): {stubs}")
    if len(plan.candidates) > 1 and not opts.entry:
        done = set(_tuple_names(built.expr)) | {built.expr} if built is not None else set()
        others = ", ".join(c.label for c in plan.candidates if c.expr not in done)
        if others:
            result["notes"].append(f"other candidates, not built: {others} (pick one with --entry)")
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
    _Unloaded.given = opts.input_shape[0] if opts.input_shape and len(opts.input_shape) == 1 else None
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
        _patch_adapt(tf_keras, result["notes"])
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
    _patch_adapt(keras, result["notes"])
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


def _shape_arg(text: str) -> list[list[int]]:
    try:
        return [list(dims) for dims in parse_input_shapes(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a shape like 256,256,3 (inputs separated by ';')") from None


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
