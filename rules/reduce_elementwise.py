from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from kerasfit.ruleapi import Finding, Invalid, Range, Reads, Rule, RuleContext, Severity
from kerasfit.ruleapi.symbols import NEGATE_CALLS, REDUCTIONS, SCALE_CALLS
from kerasfit.ruleapi.syntax import get_arg, name_loads, walk

# Calls that make a function the training step: its losses are computed on the accelerator.
_TRAINS = frozenset({"minimize", "apply_gradients", "compute_gradients", "gradient", "gradients"})
# Where a reduction's input sits: keyword names used by tf / keras.ops / keras.backend.
_INPUT_KWS = ("input_tensor", "x", "input")
# the scalings a reduction commutes with (libcst's node classes have no subclasses: a type
# test, as isinstance against them costs ~10x)
_SCALINGS = frozenset({cst.Multiply, cst.Divide})
# Operands that need parentheses once they become one side of ``*`` or ``/``.
_LOOSE = (cst.BinaryOperation, cst.BooleanOperation, cst.Comparison, cst.IfExp, cst.Lambda, cst.NamedExpr)


def _paren(expr: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(expr, _LOOSE) and not expr.lpar:
        return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return expr


def _keeps_axes(call: cst.Call, ctx: RuleContext) -> bool:
    """The reduction names axes to reduce (its result is a tensor, not one scalar)."""
    arg = get_arg(call, "axis", 1) or get_arg(call, "reduction_indices")
    return arg is not None and ctx.const(arg.value, scopes=ctx.scopes_of(arg.value)) is not None


@dataclass(frozen=True)
class ScaledApart(Finding):
    op: str  # "*" or "/"
    reduction: str  # "reduce_sum"

    template = ("`{op}` after `{reduction}` (a reduction of another statement or scaling): reductions fuse elementwise "
                "ops into their input, not their output — scale inside the reduction (the scaling is apart from the reduction)")


@dataclass(frozen=True)
class ScaledAfterReduction(Finding):
    scaling: str  # what scales the result: "`*` by a constant of", "`negative` of"
    reduction: str
    # the reduction ends in a scalar, so negating it is cheaper than negating the input
    scalar_negation: bool = False
    off_accelerator: bool = False  # not model or loss code
    suggested: str | None = None  # the reduction of the scaled input, as code

    def message(self) -> str:
        text = (f"{self.scaling} `{self.reduction}`: reductions fuse elementwise ops into their input, not their output "
                "— scale inside the reduction")
        if self.scalar_negation:
            return text + " (the reduction ends in a scalar, so negating it is one op while negating the input is one per element)"
        if self.off_accelerator:
            return text + " (not model or loss code, so the scaling is not on the accelerator's hot path)"
        return text + (f": `{self.suggested}`" if self.suggested is not None else "")

class ReduceElementwise(Rule):
    """
    ## What it does
    Flags an elementwise scaling applied to the *output* of a reduction when it could be
    applied to its input: `tf.reduce_sum(x) * c`, `c * tf.reduce_mean(x, axis=1)`,
    `tf.reduce_sum(x) / c`, `-tf.reduce_sum(x)`, `tf.multiply(tf.reduce_sum(x), c)`
    (also `keras.ops.sum` / `mean`, and `reduce_max` / `reduce_min` scaled by a
    positive constant). Only when the other operand is a numeric constant (a literal,
    a folded name, `tf.constant(2.0)`, a name bound to numbers on every path), which
    cannot depend on the reduced axes.

    Also when the two are apart — the reduction bound in another statement and read only
    there (`ce = tf.reduce_sum(..)` then `ce * 0.5`), or another scaling in between
    (`tf.reduce_sum(x) / n / 2.`) — found, not rewritten.

    Not flagged: `tf.sqrt(tf.reduce_mean(x))`, `tf.reduce_sum(x) + eps`, `tf.reduce_sum(x) * 0.0`
    (a zero kept on the graph), softmax-style
    `x / tf.reduce_sum(x)`, a tensor operand (a weighted mean's denominator), input-pipeline code (functions handed to
    `Dataset.map` in any file of the tree, what they call, preprocessing layers), and
    host code (a TPUEstimator `metric_fn`, a `serving_input_fn`).

    ## Why is this slow on the accelerator
    XLA on TPU fuses elementwise ops into a reduction's input but not into its output
    (docs/facts.md#15): the scaling after the reduction is a separate fusion — another
    kernel launch and another pass over the reduced tensor in HBM. Moved inside, it is
    free. The Cloud TPU guide gives exactly `tf.multiply(tf.reduce_sum(x), y)` →
    `tf.reduce_sum(tf.multiply(x, y))`.

    ## Example
    ```python
    loss = tf.reduce_sum(per_example_loss) * (1.0 / 1024)
    ```

    ## Use instead
    ```python
    loss = tf.reduce_sum(per_example_loss * (1.0 / 1024))
    ```

    ## Fix safety
    No automatic fix. Moving the scaling into the input is advice, not a rewrite kerasfit
    makes for you: it rounds differently (every element scaled before summing, and a
    float16/bfloat16 input may overflow or underflow where the sum did not), it adds one
    elementwise op per input element to save one per output element, and what it saves —
    a pass over the reduction's result, often a scalar or a per-example vector — is small
    next to the reduction itself. Read on real code, the rewrite was churn: make it where a
    profile shows the separate pass.

    ## References
    docs/facts.md#15; Cloud TPU performance guide, "TensorFlow ops".
    """

    code = "KF109"
    name = "reduce-elementwise"
    message = "Elementwise op on a reduction's output; move it into the input"
    severity = Severity.INFO
    reads = frozenset({Reads.STATEMENT, Reads.FILE_FACTS, Reads.PROJECT})  # roles, and whether a function is reached from model code in the tree

    VALID = (
        "import tensorflow as tf\ny = tf.sqrt(tf.reduce_mean(x))\n",
        "import tensorflow as tf\ny = tf.reduce_sum(x) + 1e-6\n",
        "import tensorflow as tf\ny = x / tf.reduce_sum(x, axis=-1, keepdims=True)\n",
        "import tensorflow as tf\ny = tf.reduce_sum(x) * weights\n",
        "import tensorflow as tf\ny = 2.0 / tf.reduce_sum(x)\n",
        "import tensorflow as tf\ny = tf.reduce_max(x) * -1.0\n",
        "import tensorflow as tf\ny = -tf.reduce_max(x)\n",
        "import tensorflow as tf\ny = tf.reduce_prod(x) * 2.0\n",
        # a zero that keeps the graph connected: nothing to move
        "from keras import ops\nloss = ops.sum(unused) * 0.0\n",
        # a function the input pipeline maps over
        "import tensorflow as tf\n\n"
        "def parse(example):\n"
        "    n = tf.reduce_max(example['lengths']) * 4\n"
        "    return example['audio'][:n]\n\n"
        "ds = tf.data.TFRecordDataset(files).map(parse)\n",
        # a preprocessing layer runs in the tf.data pipeline (keras-hub style)
        "import keras\nimport tensorflow as tf\n\n"
        "class AudioPreprocessor(keras.layers.Layer):\n"
        "    def call(self, token_ids, audio):\n"
        "        n = tf.reduce_max(tf.reduce_sum(tf.cast(token_ids == 7, tf.int32), axis=1)) * 4\n"
        "        return audio[:, :n]\n",
        # a TPUEstimator metric_fn runs on the host after the step
        """
        import tensorflow.compat.v1 as tf

        def model_fn(features, labels, mode, params):
            def metric_fn(per_example_loss, is_real):
                mean_loss = -tf.reduce_mean(per_example_loss) * 0.5
                return {'loss': tf.metrics.mean(mean_loss)}
            return tf.estimator.tpu.TPUEstimatorSpec(mode, eval_metrics=(metric_fn, [loss, w]))
        """,
        # a weighted mean: the denominator is a tensor, and the sum is read twice
        """
            import tensorflow as tf

            def masked_loss(per_example, weights):
                numerator = tf.reduce_sum(weights * per_example)
                denominator = tf.reduce_sum(weights) + 1e-5
                tf.summary.scalar("numerator", numerator)
                return numerator / denominator, numerator * 0.5
            """,
    )
    INVALID = (
        # a sign picked on each path: the factor is a number either way
        Invalid(
            """
                import tensorflow as tf

                def log_det(s, training):
                    direction = 1
                    if training:
                        direction = -1
                    gate = (direction - 1) / 2
                    return gate * tf.reduce_sum(s, [1])
                """,
            finding="ScaledAfterReduction", fields={"scaling": "`*` after", "reduction": "reduce_sum"},
            at=Range(8, 11, 8, 39),
        ),
        # a hand-written loss: the sum in one statement, its scaling in the next
        Invalid(
            """
                import tensorflow as tf

                def loss_fn(labels, logits):
                    ce = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
                    return ce * 0.5
                """,
            finding="ScaledApart",
            at=Range(5, 11, 5, 19),
        ),
        # a constant scaling after a normalisation by a tensor
        Invalid(
            """
                import tensorflow as tf

                def box_loss(true_xy, pred_xy, mask, nb_boxes):
                    return tf.reduce_sum(tf.square(true_xy - pred_xy) * mask) / (nb_boxes + 1e-6) / 2.
                """,
            finding="ScaledApart", fields={"op": "/", "reduction": "reduce_sum"},
            at=Range(4, 11, 4, 86),
        ),
        Invalid(
            """
            import tensorflow as tf
            loss = tf.reduce_sum(per_example) * (1.0 / 1024)
            """,
            fields={"reduction": "reduce_sum", "suggested": "tf.reduce_sum(per_example * (1.0 / 1024))"},
            at=Range(2, 7, 2, 48),
        ),
        Invalid(
            """
            import tensorflow as tf
            GLOBAL_BATCH = 1024
            loss = tf.reduce_sum(a - b, axis=1) / GLOBAL_BATCH
            """,
            at=Range(3, 7, 3, 50),
        ),
        Invalid(
            """
            import tensorflow.compat.v1 as tf
            y = tf.multiply(tf.reduce_sum(x), 0.5)
            """,
            at=Range(2, 4, 2, 38),
        ),
        Invalid(
            """
            import tensorflow as tf
            kl = -0.5 * tf.reduce_mean(1 + logvar - mu ** 2, axis=-1)
            """,
            at=Range(2, 5, 2, 57),
        ),
        Invalid(
            """
            from keras import ops
            loss = -ops.mean(log_probs, axis=-1)
            """,
            at=Range(2, 7, 2, 36),
        ),
        # a scalar's negation: reported, with why moving it in is more work
        Invalid("from keras import ops\nloss = -ops.mean(log_probs)\n", fields={"reduction": "mean", "scalar_negation": True}, at=Range(2, 7, 2, 27)),
        # generation code: not on the accelerator's hot path
        Invalid(
            "from keras import ops\n\n"
            "def strip_prompt(prompt_mask, seq_len):\n"
            "    return ops.mod(-ops.sum(prompt_mask, axis=1), seq_len)\n",
            fields={"off_accelerator": True},
            at=Range(4, 19, 4, 48),
        ),
        Invalid(
            "from keras import ops\n\n"
            "def sigmoid_loss(loglike):\n"
            "    return -ops.sum(loglike, axis=-1)\n",
            at=Range(4, 11, 4, 37),
        ),
        Invalid(
            """
            import tensorflow as tf
            y = tf.reduce_max(x, axis=1) * tf.constant(2.0)
            """,
            at=Range(2, 4, 2, 47),
        ),
    )

    # ---- matching ----------------------------------------------------------------
    def _reduction(self, expr: cst.BaseExpression) -> tuple[cst.Call, str, cst.Arg] | None:
        if type(expr) is not cst.Call:
            return None
        name = self.ctx.call_name(expr)
        kind = REDUCTIONS.get(name or "")
        if kind is None:
            return None
        arg = next((a for a in expr.args if a.keyword is not None and a.keyword.value in _INPUT_KWS), None)
        if arg is None and expr.args and expr.args[0].keyword is None and not expr.args[0].star:
            arg = expr.args[0]
        if arg is None:
            return None
        return expr, kind, arg

    def _scalable(self, kind: str, const: cst.BaseExpression) -> bool:
        """``const`` is a number, which cannot depend on the reduced axes: a literal, a folded
        name, ``tf.constant(2.0)``, or a name bound to numbers on every path
        (``gate = (d - 1) / 2`` with ``d`` 1 or -1). Not a tensor: a weighted mean's
        denominator (``tf.reduce_sum(w) + eps``) divides the sum because that is the mean."""
        v = self.ctx.number(const)
        if v == 0:
            return False  # `sum(x) * 0.0`: a zero kept on the graph, no scaling to move
        if v is None:
            values = self.ctx.possible_values(const)
            if not values or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in values):
                return False
            v = min(values)
        return kind == "linear" or v > 0

    def _may_hold_reduction(self, name: cst.Name) -> bool:
        """Whether the innermost scope binding ``name`` assigns it a reduction somewhere: the
        one reaching assignment is among those, and most names hold none (a few lookups,
        before the file's statements are ordered to find the reaching one)."""
        return any(b.kind == "assign" and self._reduction(b.value) is not None  # type: ignore[arg-type]
                   for b in self.ctx.bindings(name.value, at=name))

    def _bound_once(self, name: cst.Name) -> cst.BaseExpression | None:
        """The value of the one assignment that reaches ``name``, else None."""
        bindings = self.ctx.reaching_bindings(name)
        if len(bindings) != 1 or bindings[0].kind != "assign":
            return None
        return bindings[0].value

    def _split_reduction(self, expr: cst.BaseExpression) -> cst.Call | None:
        """A reduction reached through statements or a scaling chain: ``r = tf.reduce_sum(x)``
        then ``r * 0.5`` (``r`` read only there), or ``tf.reduce_sum(x) / weights / 2.``."""
        # exact types: every operand of a scaling passes here
        if type(expr) is cst.Name:
            if not self._may_hold_reduction(expr):
                return None
            bound = self._bound_once(expr)
            scope = self.ctx.callable_of(expr) or self.ctx.module
            if bound is None or self._reduction(bound) is None or name_loads(scope, expr.value) != 1:
                return None
            return self._reduction(bound)[0]  # type: ignore[index]
        if type(expr) is cst.BinaryOperation and type(expr.operator) in _SCALINGS:
            # (when the inner operand is a constant too, the inner scaling is the finding)
            hit = self._reduction(expr.left)
            if hit is not None and hit[1] == "linear" and not self._scalable(hit[1], expr.right):
                return hit[0]
        return None

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        op = node.operator
        if type(op) not in _SCALINGS:  # exact types: every binary operation of the file passes here
            return
        for red_side, other, red_left in ((node.left, node.right, True), (node.right, node.left, False)):
            if isinstance(op, cst.Divide) and not red_left:
                continue  # c / reduce(x) does not move
            hit = self._reduction(red_side)
            if hit is None:
                split = self._split_reduction(red_side)
                if split is not None and self._scalable("linear", other):
                    self._report_split(node, split)
                    return
                continue
            if not self._scalable(hit[1], other):
                continue
            call, _, arg = hit
            inner = arg.value
            if not (red_left and isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, (cst.Multiply, cst.Divide))):
                inner = _paren(inner)  # (a * b) * c == a * b * c: left-associative, no parens needed
            new_input = (
                cst.BinaryOperation(inner, op, _paren(other)) if red_left else cst.BinaryOperation(_paren(other), op, inner)
            )
            self._report(node, call, arg, new_input, "`{}` after".format("*" if isinstance(op, cst.Multiply) else "/"))
            return

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        if not isinstance(node.operator, cst.Minus):
            return
        hit = self._reduction(node.expression)
        if hit is None or hit[1] != "linear":
            return
        call, _, arg = hit
        val = arg.value
        new_input = cst.UnaryOperation(cst.Minus(), _paren(val) if not isinstance(val, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) else val)
        self._report(node, call, arg, new_input, "negation after")

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.call_name(node)
        if name is None or (name not in SCALE_CALLS and name not in NEGATE_CALLS) or not node.args:
            return
        first = node.args[0]
        hit = self._reduction(first.value)
        if hit is None:
            return
        call, kind, arg = hit
        if name in NEGATE_CALLS:
            if kind != "linear" or len(node.args) != 1:
                return
            new_input = node.with_changes(args=[first.with_changes(value=arg.value)])
        else:
            if len(node.args) != 2 or not self._scalable(kind, node.args[1].value):
                return
            new_input = node.with_changes(args=[first.with_changes(value=arg.value), node.args[1]])
        self._report(node, call, arg, new_input, f"`{name.rsplit('.', 1)[-1]}` of")

    def _report_split(self, outer: cst.BinaryOperation, call: cst.Call) -> None:
        """The scaling and its reduction are apart (another statement, or another scaling in
        between): found, never rewritten."""
        if self.ctx.role_of(outer) == "input" or self.ctx.is_host_function(self.ctx.callable_of(outer)):
            return
        red = (self.ctx.call_name(call) or "").rsplit(".", 1)[-1]
        op = "*" if isinstance(outer.operator, cst.Multiply) else "/"
        self.report(outer, ScaledApart(op, red))

    def _report(self, outer: cst.BaseExpression, call: cst.Call, arg: cst.Arg, new_input: cst.BaseExpression, what: str) -> None:
        ctx = self.ctx
        fn = next((s for s in ctx.scopes_of(outer) if isinstance(s, (cst.FunctionDef, cst.Lambda))), None)
        if ctx.function_role(fn) == "input" or ctx.is_host_function(fn):
            return
        new_call = call.with_deep_changes(arg, value=new_input).with_changes(lpar=outer.lpar, rpar=outer.rpar)
        red = (ctx.call_name(call) or "").rsplit(".", 1)[-1]
        text = ctx.code(new_call)
        if (isinstance(outer, cst.UnaryOperation) or ctx.call_name(outer) in NEGATE_CALLS) and not _keeps_axes(call, ctx):
            finding = ScaledAfterReduction(what, red, scalar_negation=True)
        elif not self._on_accelerator(fn):
            finding = ScaledAfterReduction(what, red, off_accelerator=True)
        else:
            finding = ScaledAfterReduction(what, red, suggested=text if "\n" not in text else None)
        self.report(outer, finding)

    def _on_accelerator(self, fn: cst.FunctionDef | cst.Lambda | None) -> bool:
        """Module-level code (a TF1 graph, a script's loss), model code, or a function
        named or shaped like a loss, or called from model code anywhere in the tree."""
        ctx = self.ctx
        if fn is None or ctx.function_role(fn) == "model":
            return True
        func = fn if isinstance(fn, cst.FunctionDef) else next(
            (s for s in ctx.scopes_of(fn) if isinstance(s, cst.FunctionDef)), None)
        if func is None:
            return True
        if ctx.function_role(func) == "model" or "loss" in func.name.value.lower():
            return True
        if {"y_true", "y_pred"} <= {p.name.value for p in func.params.params}:
            return True
        if any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in _TRAINS for n in walk(func)):
            return True  # it builds the training step (a TF1 graph's `minimize`, a tape's `gradient`)
        return ctx.scopes_of(func)[0] is ctx.module and ctx.reached_from_model(func)
