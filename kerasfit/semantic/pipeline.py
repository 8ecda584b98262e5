"""Input-pipeline questions (is this a tf.data chain, does it feed evaluation only) and
expression shapes (a scalar constant, a layer application) several rules ask; public
through kerasfit.ruleapi.
"""

from __future__ import annotations

import re

import libcst as cst

from ..core.fixes import Replace
from ..core.symbols import canonical
from .dataflow import uses_of
from .model import SemanticModel
from .nodes import UNKNOWN, dotted_name, get_arg

# Dataset constructors outside TensorFlow's own namespace (raw import names).
_DATASET_ROOT_RAW = ("tensorflow_datasets.",)
_DATASET_ROOT_CANONICAL = (
    "tf.data.",
    "tf.contrib.data.",
    "keras.utils.image_dataset_from_directory",
    "keras.utils.text_dataset_from_directory",
    "keras.utils.timeseries_dataset_from_array",
    "keras.preprocessing.image_dataset_from_directory",
)
# A name or function that says "evaluation" (or prediction, which must not skip examples
# either): val_ds, eval_dataset, test_input_fn, dev_set, predict_input_fn.
_EVAL_RE = re.compile(
    r"(^|_)(val|valid|validation|eval|evaluation|evaluate|test|testing|dev|holdout|predict|prediction|inference)"
    r"(_|$|\d|s\b|set|ds|data)",
    re.I,
)
_TRAIN_RE = re.compile(r"train|training", re.I)


def round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def tf_data_root(ctx: SemanticModel, call: cst.Call) -> cst.Call | None:
    """The tf.data constructor a method chain ending at ``call`` starts from, or None."""
    chain = ctx.values.call_chain(call)
    if not chain:
        return None
    root = chain[0]
    raw = ctx.names.raw_name_anywhere(root.func)
    if raw is None:
        return None
    if raw.startswith(_DATASET_ROOT_RAW):
        return root
    fw = ctx.names.framework_raw(raw)
    if fw is not None and canonical(fw).startswith(_DATASET_ROOT_CANONICAL):
        return root
    return None


# Methods only a tf.data.Dataset has (among the libraries a TF file imports): HF
# `datasets` and torchdata share map/filter/shuffle/batch, not these.
_TF_DATASET_ONLY_METHODS = frozenset({"padded_batch", "interleave", "unbatch", "with_options", "apply", "prefetch", "cache", "flat_map", "shard"})
# Methods of the tf.data vocabulary that other pipelines share.
_DATASET_METHODS = frozenset({"map", "filter", "shuffle", "batch", "repeat", "take", "skip", "zip"}) | _TF_DATASET_ONLY_METHODS
# Roots that are not tf.data even when their methods look alike.
_OTHER_PIPELINE_ROOTS = ("torch", "torchdata", "datasets", "numpy", "pandas", "ray", "jax", "grain")


def _outer_methods(ctx: SemanticModel, call: cst.Call) -> list[cst.Call]:
    """The method calls chained after ``call`` (``.prefetch`` in ``ds.batch(8).prefetch(2)``)."""
    out: list[cst.Call] = []
    stack = ctx.scopes.ancestors(call)
    cur: cst.CSTNode = call
    i = len(stack) - 1
    while i >= 1:
        attr, outer = stack[i], stack[i - 1]
        if not (isinstance(attr, cst.Attribute) and attr.value is cur and isinstance(outer, cst.Call) and outer.func is attr):
            break
        out.append(outer)
        cur = outer
        i -= 2
    return out


def _names_tf_data(ctx: SemanticModel, call: cst.Call) -> bool:
    """An argument of ``call`` is a ``tf.data`` symbol (``tf.data.AUTOTUNE``,
    ``tf.data.experimental.ignore_errors()``)."""
    for a in call.args:
        v = a.value.func if isinstance(a.value, cst.Call) else a.value
        if isinstance(v, (cst.Name, cst.Attribute)):
            raw = ctx.names.framework_raw(ctx.names.raw_name_anywhere(v))
            if raw is not None and canonical(raw).startswith(("tf.data.", "tf.contrib.data.")):
                return True
    return False


def is_tf_data_chain(ctx: SemanticModel, call: cst.Call) -> bool:
    """True when the method chain through ``call`` is a ``tf.data`` pipeline.

    Either it starts at a ``tf.data`` constructor (:func:`tf_data_root`), or — for a
    dataset handed in by a parameter or a project loader (``load(...).map(f).batch(n)``)
    — the chain itself says so: an argument is a ``tf.data`` symbol
    (``.prefetch(tf.data.AUTOTUNE)``), a method only ``tf.data`` has (``padded_batch``,
    ``apply``, ``interleave``, ``prefetch`` …), or two dataset methods in a file that
    uses ``tf.data``. Chains rooted in another data library are not.
    """
    if tf_data_root(ctx, call) is not None:
        return True
    chain = ctx.values.call_chain(call)
    calls = chain + _outer_methods(ctx, call)
    if chain:
        base: cst.BaseExpression = chain[0].func
        while isinstance(base, (cst.Attribute, cst.Subscript, cst.Call)):
            base = base.func if isinstance(base, cst.Call) else base.value
        raw = ctx.names.raw_name_anywhere(base) if isinstance(base, cst.Name) else None
        if raw is not None and raw.split(".")[0] in _OTHER_PIPELINE_ROOTS:
            return False
    inner = [c.func.attr.value for c in chain if isinstance(c.func, cst.Attribute)]
    if any(m not in _DATASET_METHODS for m in inner[1:]):
        return False  # something else is chained in between: not a dataset chain
    outer: list[str] = []
    for c in calls[len(chain):]:  # _outer_methods' calls are all method calls
        if not isinstance(c.func, cst.Attribute) or c.func.attr.value not in _DATASET_METHODS:
            break  # ds.batch(8).as_numpy_iterator(): the dataset part ends here
        outer.append(c.func.attr.value)
    calls = calls[: len(chain) + len(outer)]
    methods = inner + outer
    if any(_names_tf_data(ctx, c) for c in calls):
        return True
    if any(m in _TF_DATASET_ONLY_METHODS for m in methods):
        return True
    return len(set(methods) & _DATASET_METHODS) >= 2 and bool(ctx.file_fact("uses_tf_data", _file_uses_tf_data))


def _file_uses_tf_data(ctx: SemanticModel) -> bool:
    for raw in ctx.names.imports.values():
        if raw.startswith(("tensorflow_datasets", "tensorflow.data", "tensorflow.compat.v1.data")):
            return True
    return "tf.data." in ctx.source or "tfds." in ctx.source


def _names_in_chain(ctx: SemanticModel, call: cst.Call) -> list[str]:
    """Names a dataset goes by: the receivers of the chain and the assignment target."""
    out: list[str] = []
    node: cst.BaseExpression = call
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        node = node.func.value
    if isinstance(node, cst.Name):
        out.append(node.value)
    for anc in reversed(ctx.scopes.ancestors(call)):
        if isinstance(anc, cst.Assign):
            for t in anc.targets:
                if isinstance(t.target, cst.Name):
                    out.append(t.target.value)
            break
        if isinstance(anc, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            break
    return out


def feeds_evaluation(ctx: SemanticModel, call: cst.Call) -> bool:
    """True when a dataset is for evaluation only: its name or its function's name says
    so (``val_ds``, ``eval_input_fn``), or it sits in the not-training branch of an
    ``if is_training`` / ``if mode == ModeKeys.TRAIN`` — or when it feeds no training step
    at all: Python gathers it on the host (``np.concatenate(list(ds))`` building a
    vocabulary), or the file runs inference, trains nothing and no other file imports it
    (a generation benchmark)."""
    if any(_EVAL_RE.search(n) for n in _names_in_chain(ctx, call)) or _iterated_on_host(ctx, call):
        return True
    if ctx.file_fact("inference_script", _inference_script):
        return True
    stack = ctx.scopes.ancestors(call)
    for anc in stack:
        if isinstance(anc, cst.FunctionDef) and _EVAL_RE.search(anc.name.value):
            return True
    for i, anc in enumerate(stack):
        if not isinstance(anc, cst.If) or i + 1 >= len(stack):
            continue
        test = ctx.module.code_for_node(anc.test)
        negated = isinstance(anc.test, cst.UnaryOperation) and isinstance(anc.test.operator, cst.Not)
        in_body = stack[i + 1] is anc.body
        if _TRAIN_RE.search(test):
            if in_body == negated:  # else-branch of "if training", body of "if not training"
                return True
        elif _EVAL_RE.search(test) or "EVAL" in test or "PREDICT" in test:
            if in_body and not negated:
                return True
    return False


# Python's own consumers of an iterable: a dataset handed only to these is read on the host.
# (a `for` loop or `enumerate` may feed a training step: not these)
_HOST_ITERATORS = frozenset({"list", "tuple", "sorted", "set"})


# Calls that train: a Keras driver, an estimator, a custom loop's tape and optimizer.
_TRAINING_CALLS = frozenset({"fit", "fit_generator", "train", "train_on_batch", "train_and_evaluate", "apply_gradients",
                             "minimize", "gradient", "gradients", "compute_gradients"})
_INFERENCE_CALLS = frozenset({"predict", "predict_on_batch", "generate", "evaluate"})


def _inference_script(ctx: SemanticModel) -> bool:
    """The file runs inference (``predict``, ``generate``, ``evaluate``), trains nothing
    and no other file imports it (a generation benchmark, a predict script): its datasets
    feed inference only."""
    infers = False
    for call in ctx.index.all_calls():
        func = call.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if name in _TRAINING_CALLS or _TRAIN_RE.search(name):
            return False
        infers = infers or name in _INFERENCE_CALLS
    if not infers or not ctx.filename or ctx.filename.startswith("<"):
        return False
    return not ctx.project.imported_by_others(ctx.filename)


def _iterated_on_host(ctx: SemanticModel, call: cst.Call) -> bool:
    """The dataset the chain through ``call`` makes is bound to a name that Python only
    gathers into a host collection (``list(ds)``, ``sorted(ds)``)."""
    outer = _outer_methods(ctx, call)
    whole = outer[-1] if outer else call
    uses = uses_of(ctx, whole)
    if not uses:
        return False
    for use in uses:
        parent = ctx.scopes.parent(use)
        if isinstance(parent, cst.Arg):
            consumer = ctx.scopes.parent(parent)
            if not (isinstance(consumer, cst.Call) and isinstance(consumer.func, cst.Name) and consumer.func.value in _HOST_ITERATORS):
                return False
        else:
            return False
    return True


# Keras calls that evaluate or predict on a dataset handed to them, and fit's keyword for one.
_EVAL_CALLS = frozenset({"predict", "evaluate", "predict_on_batch", "test_on_batch", "predict_generator", "evaluate_generator"})
_EVAL_KEYWORDS = frozenset({"validation_data"})
_FOLLOW_DEPTH = 4  # names, returns and callers followed from a dataset to where it is used


def reaches_evaluation(ctx: SemanticModel, call: cst.Call) -> bool:
    """``feeds_evaluation``, or the dataset ``call`` makes may reach evaluation or
    prediction: followed through the names it is assigned to, the return of the function
    that makes it and that function's callers in this file (a helper shared by ``fit``,
    ``evaluate`` and ``predict``), a few levels deep, it is handed to ``.predict(...)`` /
    ``.evaluate(...)`` / ``validation_data=``, or taken by code ``feeds_evaluation`` calls
    evaluation (``val_ds = batches(...)``, a ``predict`` method)."""
    return feeds_evaluation(ctx, call) or _flows_to_evaluation(ctx, call, _FOLLOW_DEPTH, set())


def _flows_to_evaluation(ctx: SemanticModel, node: cst.BaseExpression, depth: int, seen: set[int]) -> bool:
    if depth < 0 or id(node) in seen:
        return False
    seen.add(id(node))
    node = _chain_top(ctx, node)
    parent = ctx.scopes.parent(node)
    if isinstance(parent, cst.Arg):
        user = ctx.scopes.parent(parent)
        if parent.keyword is not None and parent.keyword.value in _EVAL_KEYWORDS:
            return True
        return isinstance(user, cst.Call) and isinstance(user.func, cst.Attribute) and user.func.attr.value in _EVAL_CALLS
    if isinstance(parent, cst.Assign):
        return any(_flows_to_evaluation(ctx, use, depth - 1, seen) for use in uses_of(ctx, node) or ())
    if isinstance(parent, cst.Return):
        fn = ctx.scopes.callable_of(node)
        if not isinstance(fn, cst.FunctionDef):
            return False
        for site, _scopes in ctx.values.call_sites(fn).calls:
            if feeds_evaluation(ctx, site) or _flows_to_evaluation(ctx, site, depth - 1, seen):
                return True
    return False


def _chain_top(ctx: SemanticModel, node: cst.BaseExpression) -> cst.BaseExpression:
    """The outermost call of the method chain ``node`` starts (``ds`` in ``ds.batch(8).prefetch(2)``
    gives the prefetch call): what holds the dataset as the statement leaves it."""
    while True:
        attr = ctx.scopes.parent(node)
        if not isinstance(attr, cst.Attribute) or attr.value is not node or attr.attr.value not in _DATASET_METHODS:
            return node
        call = ctx.scopes.parent(attr)
        if not (isinstance(call, cst.Call) and call.func is attr):
            return node
        node = call


def number(ctx: SemanticModel, expr: cst.BaseExpression) -> float | int | None:
    """A numeric scalar constant: a literal, a folded name, ``tf.constant(2.0)``,
    ``tf.cast(8, tf.float32)``; else None."""
    if isinstance(expr, cst.Call):
        name = ctx.names.call_name(expr)
        if name in ("tf.constant", "tf.cast", "keras.ops.cast", "keras.ops.convert_to_tensor", "tf.convert_to_tensor"):
            arg = get_arg(expr, None, 0)
            return number(ctx, arg.value) if arg is not None else None
        return None
    v = ctx.values.const(expr)
    if v is UNKNOWN or isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return v


def short(name: str) -> str:
    """How a canonical name reads in a message."""
    return name


def is_method_call(call: cst.Call, *methods: str) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in methods


def receiver_dotted(call: cst.Call) -> str | None:
    return dotted_name(call.func.value) if isinstance(call.func, cst.Attribute) else None


def insert_keyword(ctx: SemanticModel, call: cst.Call, keyword: str, value: str) -> Replace | None:
    """A Replace that adds ``keyword=value`` after the last argument of ``call`` by a
    minimal edit, keeping the call's own layout (a whole-call replacement would
    re-render nested newlines without their block indentation). None when the last
    argument spans lines."""
    if not call.args:
        return Replace(call, call.with_changes(args=[cst.Arg(cst.parse_expression(value), keyword=cst.Name(keyword), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))]))
    last = call.args[-1]
    comma = last.comma
    if (
        isinstance(comma, cst.Comma)
        and isinstance(comma.whitespace_before, cst.SimpleWhitespace)
        and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace)
    ):
        # one argument per line with a trailing comma: add a line in the same style (a
        # comma on a line of its own falls through to the inline edit below)
        before = call.args[-2].comma.whitespace_after if len(call.args) > 1 and isinstance(call.args[-2].comma, cst.Comma) else call.whitespace_before_args
        if not isinstance(before, cst.ParenthesizedWhitespace):
            return None
        block = "".join(
            (b.indent if b.indent is not None else ctx.module.default_indent)
            for b in ctx.scopes.ancestors(call)
            if isinstance(b, cst.IndentedBlock)
        )
        nl = ctx.module.default_newline
        arg_indent = (block if before.indent else "") + before.last_line.value
        after = comma.whitespace_after
        # The new line goes right after the comma's own line, which keeps a comment
        # there (`loss="mse",  # tuned`) and the lines before the closing paren.
        rest = "".join(_empty_line(e, block, nl) for e in after.empty_lines)
        rest += (block if after.indent else "") + after.last_line.value
        return Replace(
            comma,
            f"{comma.whitespace_before.value},{_trailing(after.first_line, nl)}{arg_indent}{keyword}={value},{nl}{rest}",
        )
    text = ctx.module.code_for_node(last.value)
    if "\n" in text:
        return None
    return Replace(last.value, f"{text}, {keyword}={value}")


def _trailing(tw: cst.TrailingWhitespace, nl: str) -> str:
    return tw.whitespace.value + (tw.comment.value if tw.comment else "") + (tw.newline.value or nl)


def _empty_line(line: cst.EmptyLine, block: str, nl: str) -> str:
    return (block if line.indent else "") + line.whitespace.value + (line.comment.value if line.comment else "") + (line.newline.value or nl)
