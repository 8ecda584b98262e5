"""What every part of the build child shares: its options, its errors, its phases, and where
in the user's file things were made.

The child (``python -m kerasfit.crosscheck.child``) is split by what it builds:
:mod:`.childscript` slices and runs a script, :mod:`.childtrace` runs one to its first
training step, :mod:`.childkeras` lowers a Keras model's step, :mod:`.childtf1` a TF1 graph.
Only those modules import TensorFlow, and only when they run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Callable, Iterable, NotRequired, TypedDict

from .messages import reason

DEFAULT_BATCH = 128
# A ``None`` dim the script states no size for: a stated default per modality.
DEFAULT_IMAGE = 224
DEFAULT_SEQUENCE = 128
# A count the script reads from its data (classes, vocabulary): a stated default.
DEFAULT_CLASSES = 10
DEFAULT_VOCABULARY = 1000

# TensorFlow and Keras ship no type stubs: the modules, models, layers and tensors this
# child handles are Any to mypy (pyproject's ignore_missing_imports).


class Options(argparse.Namespace):
    """The command line, as ``child.main`` parses it."""

    file: str
    out: str
    entry: str | None
    batch_size: int | None
    cores: int
    dtype: str
    input_shape: list[list[int]] | None  # each input's non-batch dims
    legacy: bool
    keras2: bool
    trace_script: bool
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


@dataclass
class Lowered:
    """One lowered training step: its HLO, how to place its ops in the user's file, and
    what the result says about it (networks, shapes, batch; the keys of the child's JSON)."""

    hlo: str
    locate: Locate
    info: dict[str, Any] = field(default_factory=dict)


class ChildError(Exception):
    """A failure to report as one line (no traceback)."""


class NeedsPackage(ChildError):
    """The script fails inside an installed package itself, as it would for anyone who runs
    it: no flag helps, another version of the package does. No other candidate is tried."""


# ---------------------------------------------------------------- phases

_PHASE_FILE: list[Path] = []  # where the phase goes (set once by child.main)
_MARKS: dict[str, float] = {}  # phase -> perf_counter() when it ended (the report's timings)
# the phase that starts when one ends: what a waiting terminal is told (api._Progress)
_NEXT_PHASE = {"build": "trace", "trace": "lower", "lower": "parse"}


def set_phase_file(path: Path) -> None:
    _PHASE_FILE[:] = [path]


def phase(name: str) -> None:
    """Say what the child is doing, so an exit without a result still has a reason.

    User code can end the process with ``os._exit`` or a signal, skipping every handler;
    the parent then reads the last phase written here ("tensorflow", "import", "build").
    """
    for path in _PHASE_FILE:
        try:
            path.write_text(name)
        except OSError:
            pass


def mark(name: str) -> None:
    _MARKS[name] = time.perf_counter()
    if name in _NEXT_PHASE:
        phase(_NEXT_PHASE[name])


def marked(name: str, default: float) -> float:
    return _MARKS.get(name, default)


# ---------------------------------------------------------------- messages

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
                site = self.site(frame)
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

    def site(self, frame: FrameType) -> Site:
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

    def line_of(self, exc: BaseException) -> int | None:
        """The innermost line of the user's file an exception passed through."""
        for fr in reversed(traceback.extract_tb(exc.__traceback__)):
            if self.is_user(fr.filename):
                return fr.lineno
        return None


def _constructed_by_user(layer: Any, sites: Sites) -> bool:
    """Is the code constructing ``layer`` (past its own ``__init__`` chain) the user's file?
    A library layer's insides (MultiHeadAttention's projections, an application's convs)
    are not."""
    frame: FrameType | None = sys._getframe(2)
    # its __init__ chain and the decorators wrapping it (tf-keras's take the layer as an argument)
    while frame is not None and any(v is layer for v in frame.f_locals.values()):
        frame = frame.f_back
    return frame is not None and sites.is_user(frame.f_code.co_filename)


def patch_layer_init(layer_cls: Any, sites: Sites) -> None:
    """Every layer remembers the user-file line that made it, and whether the user's code
    (not a library layer's insides) did."""
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


# ---------------------------------------------------------------- the user's failures


# Failures inside a package's own code on the way to a published script's model, each
# checked against the versions named: (the package's file and function the exception
# passes through, what fails and since when, the requirement that builds the script).
_KNOWN_FAILURES = (
    ("keras/src/backend/tensorflow/numpy.py", "tile",
     "keras.ops.tile with a tensor of repeats fails while a model is built on the TensorFlow "
     "backend from Keras 3.13 (which iterates the repeats; Keras 3.12 builds it)", "keras<3.13"),
)


def known_failure(exc: BaseException) -> str | None:
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


def user_error(exc: BaseException, sites: Sites, doing: str) -> ChildError:
    line = sites.line_of(exc)
    where = f" (line {line})" if line is not None else ""
    known = known_failure(exc)
    if known:
        return NeedsPackage(f"{doing}{where}: {type(exc).__name__} inside the installed package, as for "
                            f"anyone who runs the script: {known}")
    return ChildError(f"{doing}{where}: {reason(exc, 300)}")


# ---------------------------------------------------------------- Keras objects


def model_classes() -> tuple[type, ...]:
    """``keras.Model`` and ``tf_keras.Model``, those of the two that are imported."""
    classes: list[type] = []
    for mod in ("keras", "tf_keras"):
        m = sys.modules.get(mod)
        if m is not None and hasattr(m, "Model"):
            classes.append(m.Model)
    return tuple(classes)


def layer_classes() -> tuple[type, ...]:
    return tuple(c.Layer for c in (getattr(sys.modules.get(m), "layers", None) for m in ("keras", "tf_keras"))
                 if c is not None and hasattr(c, "Layer"))


def user_method(obj: Any, name: str) -> Any:
    """The class in ``obj``'s MRO that defines ``name``, if it is the user's (not Keras's)."""
    for klass in type(obj).__mro__:
        if name in vars(klass):
            mod = klass.__module__ or ""
            return None if mod.split(".")[0] in ("keras", "tf_keras", "tensorflow", "builtins") else klass
    return None


def trainable(model: Any) -> list[Any]:
    try:
        return list(model.trainable_variables)
    except Exception:
        return []


def layers_of(model: Any) -> list[Any]:
    """The model and every layer inside it, each once."""
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


def keras_mode(model: Any) -> str:
    return "tf-keras" if type(model).__module__.startswith("tf_keras") else "keras"


# ---------------------------------------------------------------- the script's own files


def import_roots(path: Path) -> list[str]:
    """Where the script's own imports resolve: its folder (``python script.py``), and, for a
    script inside a package, the folder above the package (``python -m pkg.sub.script``, from
    which its ``from pkg.sub import x`` works)."""
    roots = [str(path.parent)]
    top = path.parent
    while (top / "__init__.py").is_file() and top.parent != top:
        top = top.parent
    if top != path.parent:
        roots.append(str(top))
    return roots


def own_modules(path: Path, depth: int = 2) -> list[Path]:
    """The files of the script's own modules it imports (beside it), and theirs, ``depth`` deep."""
    import ast

    found: list[Path] = []
    todo = [path]
    for _ in range(depth):
        more: list[Path] = []
        for source in todo:
            try:
                tree = ast.parse(source.read_text(encoding="utf-8", errors="replace"))
            except (OSError, SyntaxError, ValueError):
                continue
            names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            names |= {n.module.split(".")[0] for n in ast.walk(tree)
                      if isinstance(n, ast.ImportFrom) and n.module and not n.level}
            for name in sorted(names):
                for candidate in (path.parent / f"{name}.py", path.parent / name / "__init__.py"):
                    if candidate.is_file() and candidate not in found and candidate != path:
                        found.append(candidate)
                        more.append(candidate)
        todo = more
    return found


def script_text(path: Path) -> str:
    """The script's source and its own modules' (what decides which Keras it was written for)."""
    texts = []
    for p in [path, *own_modules(path)]:
        try:
            texts.append(p.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            pass
    return "\n".join(texts)
