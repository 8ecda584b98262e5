"""Which functions of a file run on the host, never on the accelerator.

A TPUEstimator ``metric_fn`` (handed over as ``eval_metrics=(metric_fn, args)``) and a
``host_call`` run on the host CPU after the step; a ``serving_input_fn`` builds the
placeholders of an exported graph; a ``main`` that drives training and a function
that calls ``.numpy()`` run eagerly in Python; an image augmentation module (it calls
``tf.image.random_*`` / ``adjust_*`` … and builds no layer) is input-pipeline code; a
test calls a model once to check it.
Their TF ops are real, but no accelerator executes them, so rules about the
accelerator's layout must not report there.

The roles part of the semantic model (``Roles``) answers from these facts and from each
function's role (``Role``: what its code is for), computed once per file.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Sequence

import libcst as cst

from ..core.symbols import (
    DATASET_FN_METHODS,
    HOST_CALLBACK_WRAPPERS,
    INPUT_FN_TAKERS,
    STEP_FN_TAKERS,
    canonical,
    is_input_pipeline,
    is_model_building,
    is_tpu_symbol,
)
from ..core.types import Role
from .bridge import project_makes_tpu
from .nodes import ScopeNode, dotted_name, walk

if TYPE_CHECKING:
    from .views import ModelView

# Estimator arguments whose function runs on the host: a (fn, args) pair or a fn.
_HOST_PAIR_KEYWORDS = frozenset({"eval_metrics", "host_call"})
_HOST_FN_KEYWORDS = frozenset({"serving_input_receiver_fn", "serving_input_fn", "metric_fn"})
_HOST_NAME = re.compile(r"(^|_)(metric_fn|metrics_fn|serving_input_fn|serving_input_receiver_fn|host_call_fn|host_call)$")
# Calls that only a serving-input function makes (a model_fn names its `export_outputs`
# with `tf.estimator.export.PredictOutput`: not these).
_SERVING_PREFIXES = ("tf.estimator.export.ServingInputReceiver", "tf.estimator.export.TensorServingInputReceiver",
                     "tf.estimator.export.build_")


# Methods that run training or inference from the outside (the driver's side).
_DRIVER_METHODS = frozenset({"fit", "fit_generator", "evaluate", "predict", "train", "train_and_evaluate", "run"})
# Image augmentation ops: per-example preprocessing that tf.data runs on the host.
_AUGMENTATION_PREFIXES = (
    "tf.image.random_", "tf.image.stateless_random_", "tf.image.adjust_", "tf.image.flip_", "tf.image.rgb_to_",
    "tf.image.grayscale_to_rgb", "tf.image.hsv_to_rgb", "tf.image.yuv_to_rgb", "tf.image.sample_distorted_bounding_box",
    "tf.image.crop_to_bounding_box", "tf.image.pad_to_bounding_box", "tf.image.per_image_standardization",
    "tf.image.central_crop", "tf.image.convert_image_dtype", "tf.image.rot90", "tf.contrib.image.",
)


def function_role(ctx: ModelView, func: cst.FunctionDef | cst.Lambda | None) -> Role:
    """``Roles.function_role`` of ``func`` in ``ctx``'s file (computed once per file)."""
    if func is None:
        return Role.OTHER
    roles: dict[int, Role] = ctx.file_fact("roles", _compute_roles, by_node=True)
    return roles.get(id(func), Role.OTHER)


def host_functions(ctx: ModelView) -> frozenset[int]:
    """ids of the functions and lambdas of ``ctx``'s file that run on the host."""
    idx = ctx.index
    host: set[int] = set()
    scan = _HostScan()
    for call, scopes in idx.calls:
        _host_handed(ctx, host, call, scopes)
        _scan_for_host(ctx, scan, host, call, scopes)
    for f in idx.functions:
        if not isinstance(f, cst.FunctionDef):
            continue
        if _HOST_NAME.search(f.name.value):
            host.add(id(f))
        elif (f.name.value == "main" or id(f) in scan.calls_driver) and id(f) not in scan.builds and function_role(ctx, f) != "model":
            host.add(id(f))  # drives a model from the host: main, model.fit, estimator.train
    if scan.augments and not scan.builds_anything:
        # an image augmentation module (AutoAugment, crop-and-flip helpers): per-example
        # preprocessing that tf.data runs on the host
        host |= {id(f) for f in idx.functions if function_role(ctx, f) != "model"}
    # `.numpy()` only works eagerly, on the host: a function calling it is host code
    for node, numpy_call, scopes in idx.attr_refs.get("numpy", ()):
        owner = next((s for s in scopes if isinstance(s, (cst.FunctionDef, cst.Lambda))), None)
        if numpy_call is not None and owner is not None and ctx.names.raw_name_anywhere(node) is None:
            host.add(id(owner))
    host |= _test_functions(ctx)
    # functions nested in a host function run there too
    for f in idx.functions:
        if id(f) not in host and any(id(s) in host for s in idx.scopes_of(f)):
            host.add(id(f))
    return frozenset(host)


class _HostScan:
    """What the file's calls tell of host code (``host_functions``)."""

    __slots__ = ("calls_driver", "builds", "builds_anything", "augments")

    def __init__(self) -> None:
        self.calls_driver: set[int] = set()  # functions driving training or inference
        self.builds: set[int] = set()  # functions building a model
        self.builds_anything = False
        self.augments = False  # the file calls image augmentation ops


def _host_handed(ctx: ModelView, host: set[int], call: cst.Call, scopes: Sequence[ScopeNode]) -> None:
    """The functions an Estimator argument hands over to run on the host."""
    for a in call.args:
        if a.keyword is None:
            continue
        kw = a.keyword.value
        if kw in _HOST_PAIR_KEYWORDS and isinstance(a.value, (cst.Tuple, cst.List)) and a.value.elements:
            _mark_function(ctx, host, a.value.elements[0].value, scopes)
        elif kw in _HOST_FN_KEYWORDS:
            _mark_function(ctx, host, a.value, scopes)


def _mark_function(ctx: ModelView, into: set[int], expr: cst.BaseExpression | None, scopes: Sequence[ScopeNode]) -> None:
    """Add the id of the function ``expr`` hands over (a lambda, or a name of a function of
    the file) to ``into``."""
    if isinstance(expr, cst.Lambda):
        into.add(id(expr))
    elif isinstance(expr, (cst.Name, cst.Attribute)):
        fn = ctx.values.function_defined_as(expr, scopes)
        if fn is not None:
            into.add(id(fn))


def _scan_for_host(ctx: ModelView, scan: _HostScan, host: set[int], call: cst.Call, scopes: Sequence[ScopeNode]) -> None:
    owner = next((s for s in scopes if isinstance(s, (cst.FunctionDef, cst.Lambda))), None)
    name = ctx.names.call_name_anywhere(call)
    if name is None:
        if isinstance(call.func, cst.Attribute):
            if call.func.attr.value in _DRIVER_METHODS and owner is not None:
                scan.calls_driver.add(id(owner))
            elif not scan.augments:
                scan.augments = (ctx.names.raw_name_anywhere(call.func) or "").startswith("tensorflow_addons.image.")
        return
    if is_model_building(name):
        scan.builds_anything = True
        if owner is not None:
            scan.builds.add(id(owner))
    elif name.startswith(_AUGMENTATION_PREFIXES):
        scan.augments = True
    elif name.startswith(_SERVING_PREFIXES) and owner is not None:
        host.add(id(owner))


_TEST_FILE = re.compile(r"^(test_.*|.*_test)\.py$")


def _test_functions(ctx: ModelView) -> set[int]:
    """Tests call a model once to check it, on the host: every function of a test file,
    and the methods of a test class anywhere (never a model's own ``test_step``)."""
    idx = ctx.index
    test_file = bool(_TEST_FILE.search(ctx.filename.replace("\\", "/").rsplit("/", 1)[-1]))
    return {id(f) for f in idx.functions if isinstance(f, cst.FunctionDef) and (
        test_file or _test_class(idx.method_class.get(id(f))))}


def _test_class(cls: cst.ClassDef | None) -> bool:
    """A unittest / pytest class: named ``Test*`` / ``*Test(s)``, or deriving a ``*TestCase``."""
    if cls is None:
        return False
    name = cls.name.value
    return (name.startswith("Test") or name.endswith(("Test", "Tests"))
            or any((dotted_name(b.value) or "").endswith("TestCase") for b in cls.bases))


def construction_functions(ctx: ModelView) -> frozenset[int]:
    """ids of the functions that run only while a layer or model is constructed: ``__init__``
    methods, and same-file helpers every caller of which is one (``self.index =
    relative_position_index(h, w)`` in ``__init__``). They run once, eagerly, not per step."""
    idx = ctx.index
    out = {id(f) for f in idx.functions if isinstance(f, cst.FunctionDef) and f.name.value == "__init__"
           and idx.method_class.get(id(f)) is not None}
    for _ in range(3):
        before = len(out)
        for f in idx.functions:
            if not isinstance(f, cst.FunctionDef) or id(f) in out or f.name.value.startswith("__"):
                continue
            sites = ctx.values.call_sites(f)
            if sites.complete and sites.calls and all(any(id(s) in out for s in scopes) for _call, scopes in sites.calls):
                out.add(id(f))
        if len(out) == before:
            break
    return frozenset(out)


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


def graph_file(ctx: ModelView) -> bool:
    """The file is TF1 graph code: it imports ``tensorflow.compat.v1`` or spells a
    TF1-only symbol (``tf.placeholder``, ``tf.variable_scope``, ``tf.multinomial`` …)."""
    if any(raw.startswith("tensorflow.compat.v1") for raw in ctx.names.imports.values()):
        return True
    for attr in _TF1_ONLY:
        for node, _call, _scopes in ctx.index.attr_refs.get(attr, ()):
            raw = ctx.names.raw_name_anywhere(node)
            if raw == f"tensorflow.{attr}" or (raw or "").startswith(f"tensorflow.{attr}."):
                return True
    return False


def traced_functions(ctx: ModelView) -> frozenset[int]:
    """Functions traced into a graph by the code around them: the bodies of in-graph
    control flow (``tf.while_loop(cond, body, ...)``, ``keras.ops.scan(f, ...)``),
    and Keras 3 functions written with ``keras.ops`` / ``keras.random`` (backend-agnostic
    code that the backend compiles: a sampler's ``get_next_token``)."""
    idx = ctx.index
    out: set[int] = set()
    for call, scopes in idx.calls:
        name = ctx.names.call_name_anywhere(call)
        if name is None:
            continue
        owner = next((s for s in scopes if isinstance(s, (cst.FunctionDef, cst.Lambda))), None)
        if owner is not None and name.startswith(("keras.ops.", "keras.random.")):
            raw = ctx.names.raw_name_anywhere(call.func) or ""
            if raw.startswith("keras.") or raw == "keras":  # Keras 3 itself, not tf.keras
                out.add(id(owner))
        if name in _CONTROL_FLOW:
            for a in call.args:
                if a.keyword is None or a.keyword.value in _CONTROL_FLOW_KEYWORDS:
                    _mark_function(ctx, out, a.value, scopes)
    return frozenset(out)


# ---- demo blocks -------------------------------------------------------------------
# Calls that make a ``__main__`` block a training script rather than a demo: the Keras
# and Estimator drivers, absl/TF's ``app.run(main)``, and a project ``main()`` /
# ``train*()`` / ``run*()``.
_TRAINING_ATTRS = frozenset({"fit", "fit_generator", "train", "train_on_batch", "train_and_evaluate", "run"})
_TRAINING_NAMES = re.compile(r"^(main|train\w*|run\w*)$")


def demo_blocks(ctx: ModelView) -> frozenset[int]:
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


class Roles:
    """What each function of the file is for, and which code runs on the host."""

    __slots__ = ("_m",)

    def __init__(self, model: ModelView) -> None:
        self._m = model

    def function_role(self, func: cst.FunctionDef | cst.Lambda | None) -> Role:
        """MODEL (runs on the accelerator: a Layer/Model ``call``/``build``, a
        ``train_step``, a ``tf.function``, a TF1 ``model_fn``, a function that builds
        layers, a ``strategy.run`` step), INPUT (the input pipeline: functions given
        to ``Dataset.map``/``filter``/``interleave``, parsers, ``input_fn``s) or
        OTHER. Helpers without evidence of their own take their enclosing function's
        role, else their same-file callers' when those agree. Computed once per file."""
        return function_role(self._m, func)

    def callable_of(self, node: cst.CSTNode) -> cst.FunctionDef | cst.Lambda | None:
        """The innermost function or lambda whose body holds ``node``, else None (module level)."""
        return self._m.scopes.callable_of(node)

    def of(self, node: cst.CSTNode) -> Role:
        """:meth:`function_role` of the code around ``node``; MODULE at module level."""
        f = self.callable_of(node)
        return Role.MODULE if f is None else self.function_role(f)

    @property
    def uses_tpu(self) -> bool:
        """The file sets up a TPU: a TPU strategy / cluster resolver / TPUEstimator /
        ``tpu.rewrite`` etc. (symbols.TPU_SYMBOLS), resolved through imports."""
        return bool(self._m.file_fact("uses_tpu", _uses_tpu))

    def is_host_function(self, func: cst.FunctionDef | cst.Lambda | None) -> bool:
        """True for code that runs on the host, never on the accelerator: a TPUEstimator
        ``metric_fn`` / ``host_call``, a ``serving_input_fn``, tests, and what they nest."""
        if func is None:
            return False
        return id(func) in self._m.file_fact("host_functions", host_functions, by_node=True)

    def is_construction(self, func: cst.FunctionDef | cst.Lambda | None) -> bool:
        """True for code that runs once while a layer or model is built, not in its steps:
        an ``__init__`` and the helpers only it calls (:func:`construction_functions`). Not
        what they nest: a ``Lambda`` layer's function made there runs in every step."""
        if func is None:
            return False
        found: frozenset[int] = self._m.file_fact("construction_functions", construction_functions, by_node=True)
        return id(func) in found

    def in_demo_block(self, node: cst.CSTNode) -> bool:
        """True inside an ``if __name__ == "__main__":`` block of a library module or one
        that does not train (:func:`demo_blocks`): demo code."""
        blocks: frozenset[int] = self._m.file_fact("demo_blocks", demo_blocks, by_node=True)
        if not blocks:
            return False
        n: cst.CSTNode | None = node
        while n is not None:
            if id(n) in blocks:
                return True
            n = self._m.scopes.parent(n)
        return False

    def is_graph_code(self, func: cst.FunctionDef | cst.Lambda | None) -> bool:
        """True when ``func`` builds or runs inside a traced graph although no role says
        so: TF1 graph code (the file spells ``tf.compat.v1`` / TF1-only symbols), a body
        of in-graph control flow, or a Keras 3 function written with ``keras.ops``."""
        if func is None:
            return False
        traced = self._m.file_fact("traced_functions", traced_functions, by_node=True)
        if self._m.file_fact("graph_file", graph_file) or id(func) in traced:
            return True
        # nested in a traced function: traced with it
        return any(id(s) in traced for s in self._m.index.scopes_of(func))


# ---- the role of every function ----------------------------------------------------

_MODEL_METHODS = frozenset({"call", "build"})
# Layers named for preprocessing (keras-hub's `Preprocessor`, `Tokenizer`,
# `ImageConverter`; Keras's `PreprocessingLayer`) run where their docs put them: in the
# tf.data pipeline (`ds.map(preprocessor)`), not in the model.
_PREPROCESSING = re.compile(r"Preprocess|Tokenizer|Converter")


def _preprocessing_class(cls: cst.ClassDef) -> bool:
    names = [cls.name.value, *(dotted_name(b.value) or "" for b in cls.bases if b.keyword is None)]
    return any(_PREPROCESSING.search(n.rsplit(".", 1)[-1]) for n in names)


_STEP_NAMES = frozenset({"train_step", "test_step", "eval_step", "predict_step", "step_fn", "train_step_fn", "eval_step_fn", "replica_fn"})
# Training drivers: a function calling these runs training, it is not an input pipeline.
_TRAIN_DRIVERS = frozenset(
    {"fit", "compile", "evaluate", "fit_generator", "train", "train_and_evaluate", "minimize", "apply_gradients", "compute_gradients"}
)


def _uses_tpu(ctx: ModelView) -> bool:
    low = ctx.source.lower()
    if "tpu" not in low:
        # a helper of another module may make the TPU strategy the file uses
        return "strateg" in low and any(project_makes_tpu(ctx, call) for call, _ in ctx.index.calls)
    for call, _ in ctx.index.calls:
        raw = ctx.names.framework_raw(ctx.names.raw_name_anywhere(call.func))
        if raw and is_tpu_symbol(canonical(raw)):
            return True
        if raw and canonical(raw).startswith("keras.distribution."):
            # Keras 3: ``keras.distribution.list_devices("tpu")`` feeding ``DataParallel``
            if any(isinstance(v, str) and v.lower().startswith("tpu") for v in (ctx.values.const(a.value) for a in call.args)):
                return True
    for call, _ in ctx.index.calls:
        if project_makes_tpu(ctx, call):  # a strategy made by a helper of another module
            return True
    return False


class _Evidence:
    """What the file's calls tell of its functions (the first pass of ``_compute_roles``)."""

    __slots__ = ("forced", "direct", "body_model", "body_input", "driver")

    def __init__(self) -> None:
        self.forced: dict[int, Role] = {}  # a role no other evidence changes
        self.direct: dict[int, Role] = {}  # handed to a framework call that runs it so
        self.body_model: set[int] = set()  # builds a model
        self.body_input: set[int] = set()  # builds an input pipeline
        self.driver: set[int] = set()  # drives training


def _compute_roles(ctx: ModelView) -> dict[int, Role]:
    """function_role for every function and lambda of the file (see Roles)."""
    ev = _Evidence()
    for call, scopes in ctx.index.calls:
        _read_call(ctx, ev, call, scopes)
    roles, undecided = _decide(ctx, ev)
    _follow_callers(ctx, roles, undecided)
    _input_only(ctx, roles, undecided)
    return roles


def _read_call(ctx: ModelView, ev: _Evidence, call: cst.Call, scopes: Sequence[ScopeNode]) -> None:
    func = call.func
    raw = ctx.names.framework_raw(ctx.names.raw_name_anywhere(func)) if isinstance(func, (cst.Name, cst.Attribute)) else None
    name = canonical(raw) if raw else None
    owner = scopes[0] if isinstance(scopes[0], (cst.FunctionDef, cst.Lambda)) else None
    first = call.args[0].value if call.args and call.args[0].keyword is None else None
    if name is not None:
        _framework_call(ctx, ev, call, scopes, name, owner, first)
    elif raw is not None and raw.startswith("tensorflow_datasets"):
        if owner is not None:
            ev.body_input.add(id(owner))
    elif isinstance(func, cst.Attribute) and raw is None:
        _method_call(ctx, ev, call, scopes, func.attr.value, owner, first)
    for a in call.args:
        if a.keyword is not None and a.keyword.value in ("input_fn", "model_fn"):
            target = _function_given(ctx, a.value, scopes)
            if target is not None:
                ev.direct.setdefault(id(target), Role.INPUT if a.keyword.value == "input_fn" else Role.MODEL)


def _framework_call(ctx: ModelView, ev: _Evidence, call: cst.Call, scopes: Sequence[ScopeNode], name: str,
                    owner: ScopeNode | None, first: cst.BaseExpression | None) -> None:
    """A call of the framework: what it says of the function it sits in and of the
    function it is handed."""
    if owner is not None:
        if is_model_building(name):
            ev.body_model.add(id(owner))
        elif is_input_pipeline(name):
            ev.body_input.add(id(owner))
    target = _function_given(ctx, first, scopes) or _function_given(ctx, _kw(call, "func", "fn", "map_func", "computation"), scopes)
    if target is None:
        return
    if name in HOST_CALLBACK_WRAPPERS:
        ev.forced[id(target)] = Role.OTHER  # runs in Python on the host, by design
    elif name in INPUT_FN_TAKERS:
        ev.direct.setdefault(id(target), Role.INPUT)
    elif name in STEP_FN_TAKERS or name == "keras.layers.Lambda":
        ev.direct.setdefault(id(target), Role.MODEL)


def _method_call(ctx: ModelView, ev: _Evidence, call: cst.Call, scopes: Sequence[ScopeNode], meth: str,
                 owner: ScopeNode | None, first: cst.BaseExpression | None) -> None:
    """A method call on an unknown receiver: a Dataset method, a strategy's ``run``, a
    training driver."""
    if meth in DATASET_FN_METHODS:
        target = _function_given(ctx, first, scopes) or _function_given(ctx, _kw(call, "map_func", "predicate", "func"), scopes)
        if target is not None:
            ev.direct[id(target)] = Role.INPUT
    elif meth in ("run", "experimental_run_v2", "experimental_run"):
        target = _function_given(ctx, first, scopes) or _function_given(ctx, _kw(call, "fn"), scopes)
        if target is not None:
            ev.direct.setdefault(id(target), Role.MODEL)
    elif meth in _TRAIN_DRIVERS and owner is not None:
        ev.driver.add(id(owner))


def _decide(ctx: ModelView, ev: _Evidence) -> tuple[dict[int, Role], list[cst.FunctionDef | cst.Lambda]]:
    """The roles the evidence, a function's own name and decorators, or its enclosing
    function decide; and the functions left undecided, in source order."""
    idx = ctx.index
    keras_classes: dict[int, bool] = {}
    roles: dict[int, Role] = {}
    undecided: list[cst.FunctionDef | cst.Lambda] = []
    for f in idx.functions:  # source order: an enclosing function comes first
        k = id(f)
        role = ev.forced.get(k) or ev.direct.get(k)
        if role is None and isinstance(f, cst.FunctionDef):
            role = _declared_role(ctx, f, keras_classes)
        if role is None:
            role = _body_role(ev, k)
        if role is None:
            outer = next((s for s in idx.scopes_of(f) if isinstance(s, (cst.FunctionDef, cst.Lambda))), None)
            if outer is not None and roles.get(id(outer)) in (Role.MODEL, Role.INPUT):
                role = roles[id(outer)]
        if role is None:
            undecided.append(f)
        else:
            roles[k] = role
    return roles, undecided


def _declared_role(ctx: ModelView, f: cst.FunctionDef, keras_classes: dict[int, bool]) -> Role | None:
    """The role a ``def`` declares by its decorators, its class or its name."""
    fname = f.name.value
    cls = ctx.index.method_class.get(id(f))
    params = [p.name.value for p in f.params.params]
    if any(ctx.names.canonical_dotted(dotted_name(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) or "", ()) == "tf.function" for d in f.decorators):
        return Role.MODEL
    if cls is not None and _preprocessing_class(cls):
        return Role.INPUT
    if fname in _STEP_NAMES or (cls is not None and fname in _MODEL_METHODS and _is_keras_class(ctx, cls, keras_classes)):
        return Role.MODEL
    if fname == "model_fn" or fname.endswith("_model_fn") or params[:3] == ["features", "labels", "mode"]:
        return Role.MODEL
    if fname == "input_fn" or fname.endswith("_input_fn"):
        return Role.INPUT
    return None


def _body_role(ev: _Evidence, k: int) -> Role | None:
    """The role what a function's body builds or drives gives it."""
    m, i = k in ev.body_model, k in ev.body_input
    if m and not i:
        return Role.MODEL
    if i and not m and k not in ev.driver:
        return Role.INPUT
    if m or i or k in ev.driver:
        return Role.OTHER
    return None


def _follow_callers(ctx: ModelView, roles: dict[int, Role], undecided: list[cst.FunctionDef | cst.Lambda]) -> None:
    """Helpers without evidence: the role all their same-file callers share."""
    idx = ctx.index
    for _ in range(6):
        changed = False
        for f in undecided:
            if id(f) in roles or not isinstance(f, cst.FunctionDef):
                continue
            shared = _callers_role(ctx, roles, f)
            if shared in (Role.MODEL, Role.INPUT):
                assert shared is not None
                roles[id(f)] = shared
                changed = True
                # nested functions of a newly decided helper follow it
                for g in undecided:
                    if id(g) not in roles and f in idx.scopes_of(g):
                        roles[id(g)] = roles[id(f)]
        if not changed:
            break


def _callers_role(ctx: ModelView, roles: dict[int, Role], f: cst.FunctionDef) -> Role | None:
    """The role every same-file caller of ``f`` has (module level: MODULE), else None."""
    caller_roles: set[Role | None] = set()  # None: a caller whose role is undecided
    for call, scopes in ctx.values.call_sites(f).calls:
        owner = next((s for s in scopes if isinstance(s, (cst.FunctionDef, cst.Lambda))), None)
        caller_roles.add(roles.get(id(owner)) if owner is not None else Role.MODULE)
    return next(iter(caller_roles)) if len(caller_roles) == 1 else None


def _input_only(ctx: ModelView, roles: dict[int, Role], undecided: list[cst.FunctionDef | cst.Lambda]) -> None:
    """A module-level helper nothing here decides: input-only when the project hands it
    (or a caller of it) to a Dataset method in another file and no model code reaches it."""
    if not ctx.filename or ctx.filename.startswith("<"):
        return
    idx = ctx.index
    for f in undecided:
        if id(f) not in roles and isinstance(f, cst.FunctionDef) and idx.scopes_of(f)[0] is ctx.module:
            if ctx.project.input_only(ctx.filename, f.name.value):
                roles[id(f)] = Role.INPUT
                for g in undecided:
                    if id(g) not in roles and f in idx.scopes_of(g):
                        roles[id(g)] = Role.INPUT


# (module-level, not closures of _compute_roles: a recursive closure is a reference
# cycle holding the model, and so the file's tree, until the cyclic collector runs)
def _function_given(ctx: ModelView, expr: cst.BaseExpression | None,
                    scopes: Sequence[ScopeNode]) -> cst.FunctionDef | cst.Lambda | None:
    """The same-file function (or lambda) ``expr`` hands over, through ``partial``."""
    if isinstance(expr, cst.Lambda):
        return expr
    if isinstance(expr, cst.Call) and (dotted_name(expr.func) or "").endswith("partial") and expr.args:
        return _function_given(ctx, expr.args[0].value, scopes)
    if isinstance(expr, (cst.Name, cst.Attribute)):
        return ctx.values.same_file_function(expr, scopes)
    return None


def _is_keras_class(ctx: ModelView, cls: cst.ClassDef, memo: dict[int, bool], depth: int = 0) -> bool:
    """``cls`` subclasses a Keras layer or model (or tf.Module), through same-file bases."""
    key = id(cls)
    if key not in memo:
        memo[key] = False
        ok = False
        for base in cls.bases:
            if base.keyword is not None:
                continue
            raw = ctx.names.raw_name_anywhere(base.value)
            if raw is not None:
                fw = ctx.names.framework_raw(raw)
                ok = fw is not None and canonical(fw).startswith(("keras.", "tf.Module"))
            else:
                scopes = ctx.index.scopes_of(cls)
                b = ctx.scopes.lookup(dotted_name(base.value) or "", scopes) if isinstance(base.value, cst.Name) else None
                if b is not None and b.kind == "class" and depth < 8:
                    ok = _is_keras_class(ctx, b.node, memo, depth + 1)  # type: ignore[arg-type]
                else:
                    ok = (dotted_name(base.value) or "").endswith(("Layer", "Model", "Block", "Module"))
            if ok:
                break
        memo[key] = ok
    return memo[key]


def _kw(call: cst.Call, *names: str) -> cst.BaseExpression | None:
    for a in call.args:
        if a.keyword is not None and a.keyword.value in names:
            return a.value
    return None
