"""Input-pipeline questions (is this a tf.data chain, does it feed evaluation only) and
expression shapes (a scalar constant, a layer application) several rules ask; public
through kerasfit.ruleapi.
"""

from __future__ import annotations

import re

import libcst as cst

from .context import UNKNOWN, FileContext, dotted_name, get_arg

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
# A name or function that says "evaluation": val_ds, eval_dataset, test_input_fn, dev_set.
_EVAL_RE = re.compile(r"(^|_)(val|valid|validation|eval|evaluation|evaluate|test|testing|dev|holdout)(_|$|\d|s\b|set|ds|data)", re.I)
_TRAIN_RE = re.compile(r"train|training", re.I)


def round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def tf_data_root(ctx: FileContext, call: cst.Call) -> cst.Call | None:
    """The tf.data constructor a method chain ending at ``call`` starts from, or None."""
    chain = ctx.call_chain(call)
    if not chain:
        return None
    root = chain[0]
    raw = ctx.raw_name_anywhere(root.func)
    if raw is None:
        return None
    if raw.startswith(_DATASET_ROOT_RAW):
        return root
    if raw.split(".")[0] in ("tensorflow", "keras", "tf_keras"):
        from .symbols import canonical

        if canonical(raw).startswith(_DATASET_ROOT_CANONICAL):
            return root
    return None


def _names_in_chain(ctx: FileContext, call: cst.Call) -> list[str]:
    """Names a dataset goes by: the receivers of the chain and the assignment target."""
    out: list[str] = []
    node: cst.BaseExpression = call
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        node = node.func.value
    if isinstance(node, cst.Name):
        out.append(node.value)
    for anc in reversed(ctx.stack):
        if isinstance(anc, cst.Assign):
            for t in anc.targets:
                if isinstance(t.target, cst.Name):
                    out.append(t.target.value)
            break
        if isinstance(anc, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            break
    return out


def feeds_evaluation(ctx: FileContext, call: cst.Call) -> bool:
    """True when a dataset is for evaluation only: its name or its function's name says
    so (``val_ds``, ``eval_input_fn``), or it sits in the not-training branch of an
    ``if is_training`` / ``if mode == ModeKeys.TRAIN``."""
    if any(_EVAL_RE.search(n) for n in _names_in_chain(ctx, call)):
        return True
    for anc in ctx.stack:
        if isinstance(anc, cst.FunctionDef) and _EVAL_RE.search(anc.name.value):
            return True
    stack = ctx.stack
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


def number(ctx: FileContext, expr: cst.BaseExpression) -> float | int | None:
    """A numeric scalar constant: a literal, a folded name, ``tf.constant(2.0)``,
    ``tf.cast(8, tf.float32)``; else None."""
    if isinstance(expr, cst.Call):
        name = ctx.call_name(expr)
        if name in ("tf.constant", "tf.cast", "keras.ops.cast", "keras.ops.convert_to_tensor", "tf.convert_to_tensor"):
            arg = get_arg(expr, None, 0)
            return number(ctx, arg.value) if arg is not None else None
        return None
    v = ctx.const(expr)
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


def insert_keyword(ctx: FileContext, call: cst.Call, keyword: str, value: str):
    """A Replace that adds ``keyword=value`` after the last argument of ``call`` by a
    minimal edit, keeping the call's own layout (a whole-call replacement would
    re-render nested newlines without their block indentation). None when the last
    argument spans lines."""
    from .rule import Replace

    if not call.args:
        return Replace(call, call.with_changes(args=[cst.Arg(cst.parse_expression(value), keyword=cst.Name(keyword), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))]))
    last = call.args[-1]
    comma = last.comma
    if isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace):
        # one argument per line with a trailing comma: add a line in the same style
        before = call.args[-2].comma.whitespace_after if len(call.args) > 1 and isinstance(call.args[-2].comma, cst.Comma) else call.whitespace_before_args
        if not isinstance(before, cst.ParenthesizedWhitespace):
            return None
        block = "".join(
            (b.indent if b.indent is not None else ctx.module.default_indent)
            for b in ctx.stack
            if isinstance(b, cst.IndentedBlock)
        )
        arg_indent = (block if before.indent else "") + before.last_line.value
        closing = comma.whitespace_after
        close_indent = (block if closing.indent else "") + closing.last_line.value
        return Replace(comma, f",\n{arg_indent}{keyword}={value},\n{close_indent}")
    text = ctx.module.code_for_node(last.value)
    if "\n" in text:
        return None
    return Replace(last.value, f"{text}, {keyword}={value}")
