"""What to build from a script, without running it: the entry, else the candidates the
slicer found, best first; every model the script trains, together, else each alone (said).

A failure is never a silently smaller model: the model the script trains failing stops
every candidate it does not train, and the message names what failed and what to do.
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from .childbase import (ChildError, Lowered, import_roots, own_modules, NeedsPackage, Options, Sites, keras_mode, mark, model_classes,
                        phase, user_error)
from .messages import one_line
from .childdata import DataNotLoaded, Unloaded
from .childkeras import build_keras
from .childscript import NEVER_STUB, StubFinder, load_script, resolve_entry
from .childtf1 import GraphState, build_tf1
from .candidates import Candidate, trained_names
from .sizes import ScriptSizes, Size, script_sizes
from .slicing import slice_source

# How many discovered candidates to try before giving up.
MAX_CANDIDATES = 3
# Import names whose pip name differs.
PIP_NAMES = {"tensorflow_addons": "tensorflow-addons", "tensorflow_probability": "tensorflow-probability",
             "tensorflow_datasets": "tensorflow-datasets", "tensorflow_hub": "tensorflow-hub",
             "tensorflow_io": "tensorflow-io", "tensorflow_text": "tensorflow-text",
             "tensorflow_docs": "git+https://github.com/tensorflow/docs", "keras_nlp": "keras-nlp",
             "keras_cv": "keras-cv", "keras_hub": "keras-hub", "cv2": "opencv-python",
             "sklearn": "scikit-learn", "PIL": "pillow", "tensorflow_decision_forests":
             "tensorflow-decision-forests", "tensorflow_similarity": "tensorflow-similarity",
             "tensorflow_model_optimization": "tensorflow-model-optimization", "keras_contrib":
             "git+https://www.github.com/keras-team/keras-contrib.git"}
# Packages whose layers work only with Keras 2 (tf-keras), never with Keras 3 (docs/facts.md#28):
# installing one does not make a Keras 3 build work; building the script with tf-keras does.
KERAS2_ONLY = frozenset({"tensorflow_addons", "tensorflow_hub", "tensorflow_model_optimization", "keras_contrib"})

GUARD_HINT = ('put the training, data and plotting code under `if __name__ == "__main__":`, '
              "or pass --entry 'function' or an expression that builds the model")


@dataclass
class Built:
    """What the script's build lowered (one step, or one per model built alone), and what
    the result says about it."""

    lowered: list[Lowered]
    entry: str
    notes: list[str] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- one entry


def build_entry(module: ModuleType, entry: str | None, labels: list[str] | None, opts: Options, sites: Sites,
                tf: Any, state: GraphState, sizes: ScriptSizes | None, notes: list[str]) -> Lowered:
    """Resolve the entry in the (sliced) module and lower its training step."""
    description, thunk = resolve_entry(module, entry)
    if opts.legacy:
        graph = build_tf1(thunk, opts, sites, tf, state)
        if graph is not None:
            graph.info["entry"] = description
            return graph
    try:
        value = thunk()
    except ChildError:
        raise
    except BaseException as exc:
        raise user_error(exc, sites, f"calling {description} failed") from None
    models = _models_in(value, description, labels or _tuple_names(description))
    if sizes is not None and entry and sizes.entry_input is None:
        sizes.entry_input = _entry_input(entry, module)
    mark("build")
    lowered = build_keras(models[0][1], opts, sites, tf, notes, sizes, label=models[0][0], others=models[1:])
    lowered.info.update(entry=description, mode=keras_mode(models[0][1]))
    return lowered


_SHAPE_PARAM = re.compile(r"^(input_?shape|shape|input_?size|img_?shape|image_?shape|input_?dims?)$", re.I)


def _entry_input(entry: str, module: ModuleType, line: int | None = None) -> Size | None:
    """The input shape the entry expression passes its builder (``mnist_model((28, 28, 1))``
    to ``def mnist_model(input_shape)``), read from arguments that are plain values; with
    ``line``, the call that script line makes its model with (``model = make_model(...)``)."""
    try:
        node = ast.parse(entry, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Call) or any(isinstance(n, ast.Call) for a in node.args for n in ast.walk(a)):
        return None
    try:
        namespace = dict(module.__dict__)
        fn = eval(compile(ast.Expression(node.func), "<entry>", "eval"), namespace)  # the builder: a name
        args = [eval(compile(ast.Expression(a), "<entry>", "eval"), namespace) for a in node.args
                if not isinstance(a, ast.Starred)]
        bound = inspect.signature(fn).bind_partial(*args).arguments
    except BaseException:  # the script's names: anything
        return None
    for name, value in bound.items():
        if (_SHAPE_PARAM.match(name) and isinstance(value, (tuple, list)) and value
                and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in value)):
            who = "the entry passes" if line is None else f"line {line} passes its builder"
            return Size(tuple(value), line or node.lineno, f"the shape {who} ({name}={tuple(value)})")
    return None


def _made_by(tree: ast.Module, var: str, line: int) -> str | None:
    """The call the script's ``var = builder(...)`` on ``line`` makes its model with."""
    for node in ast.walk(tree):
        if (isinstance(node, (ast.Assign, ast.AnnAssign)) and node.lineno == line
                and isinstance(node.value, ast.Call)
                and any(isinstance(t, ast.Name) and t.id == var
                        for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))):
            return ast.unparse(node.value)
    return None


def _models_in(value: Any, description: str, labels: list[str]) -> list[tuple[str, Any]]:
    """The Keras models an entry gave, labelled: one model, or the models of a tuple (every
    model the script trains, built together; a builder that also returns its optimizer)."""
    for item in value if isinstance(value, (tuple, list)) else (value,):
        if isinstance(item, Unloaded):
            name, line, why, _ = object.__getattribute__(item, "_kf")
            raise ChildError(f"{description}: {DataNotLoaded(name, line, why)}")
    classes = model_classes()
    if isinstance(value, classes):
        return [(description, value)]
    if isinstance(value, (tuple, list)):
        models = [(labels[i] if len(labels) == len(value) else f"{description}[{i}]", item)
                  for i, item in enumerate(value) if isinstance(item, classes)]
        if models:
            return models
    raise ChildError(f"{description} returned {type(value).__module__}.{type(value).__name__}, not a Keras model "
                     "(TF1 graph code is built when the file uses tf.compat.v1 / tf.layers)")


def _tuple_names(expr: str) -> list[str]:
    """``"(a, b)"`` -> ["a", "b"]; anything else -> []."""
    try:
        node = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return []
    if isinstance(node, ast.Tuple) and all(isinstance(e, ast.Name) for e in node.elts):
        return [e.id for e in node.elts if isinstance(e, ast.Name)]
    return []


def config_batch(sizes: ScriptSizes, module: ModuleType) -> ScriptSizes:
    """A batch the script reads from a configuration it imports or defines (``config.BATCH_SIZE``
    of its own config module, ``FLAGS.batch_size``), when it states none it can fold."""
    if sizes.batch is not None:
        return sizes
    for expr, line in sizes.batch_reads:
        try:
            value = eval(compile(expr, "<batch>", "eval"), dict(module.__dict__))  # the script's own attribute
        except BaseException:  # the script's code: anything
            continue
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            sizes.batch = Size((value,), line, f"{expr} = {value}")
            break
    return sizes


# ---------------------------------------------------------------- the script


@dataclass
class _Script:
    path: Path
    tree: ast.Module
    candidates: list[Candidate]
    trained: dict[str, tuple[bool, int]]
    fitted: list[Candidate]
    finder: StubFinder


def _read(path: Path) -> _Script:
    source = path.read_text(encoding="utf-8", errors="replace")
    try:
        plan = slice_source(source, str(path))
    except SyntaxError as exc:
        raise ChildError(f"the file does not parse (line {exc.lineno}): {exc.msg}") from None
    tree = ast.parse(source)
    trained = trained_names(tree)
    fitted = sorted((c for c in plan.candidates if c.kind == "variable" and trained.get(c.expr, (False,))[0]),
                    key=lambda c: c.line)
    finder = StubFinder((plan.imported | _own_imports(path)) - NEVER_STUB)
    sys.meta_path.append(finder)
    return _Script(path, tree, plan.candidates, trained, fitted, finder)


def _own_imports(path: Path) -> set[str]:
    """The packages the script's own modules (files beside it it imports) import: one that is
    not installed stands in as a stub as the script's own imports do."""
    found: set[str] = set()
    for module in own_modules(path):
        try:
            tree = ast.parse(module.read_text(encoding="utf-8", errors="replace"))
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
    return found


def _build_one(script: _Script, candidate: Candidate | None, opts: Options, sites: Sites, tf: Any,
               state: GraphState, notes: list[str]) -> Lowered:
    var = candidate.expr if candidate is not None and candidate.kind == "variable" else None
    expr = candidate.expr if candidate is not None else opts.entry
    sizes = script_sizes(script.tree, var, expr)
    phase("import")
    _, module = load_script(script.path, opts, notes, candidate)
    sizes = config_batch(sizes, module)
    if candidate is not None:
        sizes.network_inputs = dict(candidate.inputs)
    if var is not None and candidate is not None:
        made = _made_by(script.tree, var, candidate.line)
        if made is not None:  # the shape the script's own call passes its builder
            sizes.entry_input = _entry_input(made, module, candidate.line)
    phase("build")
    labels = candidate.labels if candidate is not None else None
    return build_entry(module, expr, labels, opts, sites, tf, state, sizes, notes)


def build_script(path: Path, opts: Options, sites: Sites, tf: Any, keras: Any, state: GraphState) -> Built:
    """Slice the script, then build its entry (or the discovered candidates, best first)."""
    sys.path[:0] = import_roots(path)
    script = _read(path)
    candidates = [] if opts.entry else script.candidates[:MAX_CANDIDATES]
    if len(script.fitted) > 1 and candidates:
        # A script that trains several models (a baseline, then the one it is about; a
        # two-stage VQ-VAE and its prior): all of them, each labelled, then each alone.
        joint = Candidate("(" + ", ".join(c.expr for c in script.fitted) + ")", script.fitted[0].line, "joint",
                          labels=[c.expr for c in script.fitted])
        candidates = [joint] + candidates
    errors: list[str] = []
    tries: list[Candidate | None] = [*candidates] or [None]
    built: Built | None = None
    for candidate in list(tries):
        if candidate not in tries:
            continue
        notes: list[str] = []
        try:
            lowered = _build_one(script, candidate, opts, sites, tf, state, notes)
        except NeedsPackage:
            raise
        except ChildError as exc:
            errors.append(f"{candidate.expr}: {exc}" if candidate else str(exc))
            _reset_graphs(tf, keras)
            if candidate is not None and candidate.kind == "joint":
                built = _each_alone(script, candidate, str(exc), opts, sites, tf, keras, state)
                if built is not None:
                    break
            # The model the script trains failed: a candidate it does not train is not
            # what it trains; another model it trains is, and the note says so.
            if candidate is not None and (candidate.kind == "joint" or candidate.expr in script.trained):
                pending = tries[tries.index(candidate) + 1:]
                tries[tries.index(candidate) + 1:] = [c for c in pending if c is not None and (
                    c.kind == "variable" and c.expr in script.trained)]
            continue
        built = Built([lowered], str(lowered.info.get("entry", "")),
                      notes + [f"tried first, failed: {e}" for e in errors])
        break
    if built is None:
        raise _failure(errors, script.finder.used)
    return _finish(built, script, opts)


def _each_alone(script: _Script, joint: Candidate, why: str, opts: Options, sites: Sites, tf: Any, keras: Any,
                state: GraphState) -> Built | None:
    """The models the script trains did not build together: build each alone and keep every
    one that builds; the header says so, and names any that did not build."""
    lowered: list[Lowered] = []
    notes: list[str] = []
    failed: list[str] = []
    for member in script.fitted:
        own: list[str] = []
        try:
            one = _build_one(script, member, opts, sites, tf, state, own)
        except NeedsPackage:
            raise
        except ChildError as exc:
            failed.append(f"{member.expr} (line {member.line}), which did not build alone ({exc})")
            _reset_graphs(tf, keras)
            continue
        lowered.append(one)
        notes += [n for n in own if n not in notes]
    if not lowered:
        return None
    together = f"each model the script trains built alone, as {joint.expr} did not build together ({one_line(why, 200)})"
    for one in lowered:
        one.info["built_how"] = f"{together}; {one.info.get('built_how', '')}"
        one.info["assumptions"] = list(one.info.get("assumptions", [])) + [
            f"the script also trains {f}: it is not in this report" for f in failed]
        failed = []  # said once
    entry = ", ".join(str(one.info.get("entry", "")) for one in lowered)
    return Built(lowered, entry, notes)


def _finish(built: Built, script: _Script, opts: Options) -> Built:
    built.candidates = [c.label for c in script.candidates]
    stubs = ", ".join(script.finder.used)
    if stubs:
        built.notes.append(f"not installed, stubbed (the model does not use them): {stubs}")
    if len(script.candidates) > 1 and not opts.entry:
        done = {name for one in built.lowered for name in _tuple_names(str(one.info.get("entry", "")))}
        done |= {str(one.info.get("entry", "")) for one in built.lowered}
        others = ", ".join(c.label for c in script.candidates if c.expr not in done)
        if others:
            built.notes.append(f"other candidates, not built: {others} (pick one with --entry)")
    return built


def _failure(errors: list[str], stubs: list[str]) -> ChildError:
    install = install_hint(stubs, " ".join(errors))
    if install:
        return ChildError(f"{errors[-1]}; {install}")
    stubbed = f" (not installed, stubbed: {', '.join(stubs)})" if stubs else ""
    if len(errors) > 1:
        return ChildError(f"no candidate built{stubbed}: " + " | ".join(errors) + "; " + GUARD_HINT)
    if "--" not in errors[0]:
        return ChildError(f"{errors[0]}{stubbed}; {GUARD_HINT}")
    return ChildError(f"{errors[0]}{stubbed}")


def install_hint(stubs: list[str], error: str) -> str | None:
    """A missing package the failed build needed: name the one to install, when it imports
    with the installed Keras; one that works only with Keras 2 says how to build with that.

    Its stub stood in at import; the model path reaching it (a layer subclassing a stub,
    a stub called while building) is what failed, so the error or its traceback names it.
    """
    # Named in the error: a stub's objects carry their package's module name.
    for name in (n for n in stubs if re.search(rf"\b{re.escape(n)}\b", error)):
        pip = PIP_NAMES.get(name, name)
        if name in KERAS2_ONLY:
            return (f"the model needs {name}, which is not installed and works only with Keras 2 (tf-keras), "
                    f"not with Keras 3: the script needs Keras 2; pip install {pip} tf-keras, then run kerasfit "
                    "with TF_USE_LEGACY_KERAS=1 in the environment (tf.keras is then tf-keras)")
        return f"the model needs {name}, which is not installed: pip install {pip}"
    return None


def _reset_graphs(tf: Any, keras: Any) -> None:
    try:
        keras.backend.clear_session()
        tf.compat.v1.reset_default_graph()
    except Exception:
        pass
