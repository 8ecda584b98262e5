from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from kerasfit.ruleapi import RuleContext

from kerasfit.ruleapi import Applicability, Finding, Invalid, Range, Reads, Rule
from kerasfit.ruleapi.fixes import Remove
from kerasfit.ruleapi.symbols import (
    L2_REGULARIZERS,
    L2_REGULARIZER_STRINGS,
    REGULARIZATION_LOSS_CALLS,
    WEIGHT_REGULARIZER_ARGS,
)
from kerasfit.ruleapi.syntax import UNKNOWN, dotted_name, get_arg

_WEIGHTISH = re.compile(r"^(w|W|w\d+|W\d+|v|var|p|param)$|kernel|weight|filter", re.I)
_COLLECTIONISH = re.compile(r"variables|vars|var_list|weights|trainable|params|kernels", re.I)
_FLATTENERS = {"tf.concat", "keras.ops.concatenate", "tf.stack", "keras.ops.stack", "tf.reshape", "keras.ops.reshape"}
_SUMS = {"tf.add_n", "tf.reduce_sum", "keras.ops.sum", "tf.reduce_mean"}
_ADVICE = "use the optimizer's decoupled `weight_decay` instead"


def _fmt(x: float) -> str:
    return f"{x:g}"


def _decay(coefficient: float | None) -> str:
    return f" ({_fmt(coefficient)} matches it for plain SGD)" if coefficient is not None else ""


@dataclass(frozen=True)
class RegularizationLossCall(Finding):
    call: str  # "tf.losses.get_regularization_loss"

    template = ("`{call}()` adds every layer's regularization penalty to the loss each step; "
                "remove the layers' regularizers and " + _ADVICE)


@dataclass(frozen=True)
class RegularizationCollection(Finding):
    template = ("the REGULARIZATION_LOSSES collection is summed into the loss each step; "
                "remove the layers' regularizers and " + _ADVICE)


@dataclass(frozen=True)
class LayerLossesSummed(Finding):
    losses: str  # the summed attribute: "model.losses"

    template = ("`{losses}` (the layers' regularization penalties) is added to the loss "
                "every step; remove the layers' regularizers and " + _ADVICE)


@dataclass(frozen=True)
class L2LossOfWeights(Finding):
    decay: float | None  # the decoupled weight decay that matches it for plain SGD, when known

    def message(self) -> str:
        return f"`tf.nn.l2_loss` over the weights adds an L2 penalty to the loss every step; {_ADVICE}{_decay(self.decay)}"


@dataclass(frozen=True)
class Regularizer(Finding):
    keyword: str  # "kernel_regularizer"
    value: str  # its source text
    coefficient: float | None  # λ, when it folds to a number
    halved: bool  # the penalty is λ·Σw²/2 (tf.nn.l2_loss's), not λ·Σw²
    coefficient_from: str | None  # the parameter or setting λ comes from
    decay: float | None  # the decoupled weight decay that matches it for plain SGD

    def message(self) -> str:
        if self.coefficient_from is not None:
            penalty = f"an L2 penalty (coefficient from `{self.coefficient_from}`)"
        elif self.coefficient is None:
            penalty = "an L2 penalty"
        else:
            penalty = f"{_fmt(self.coefficient)}·Σw²" + ("/2" if self.halved else "")
        return (f"`{self.keyword}={self.value}` adds {penalty} to the loss every forward pass; "
                f"drop it and {_ADVICE}{_decay(self.decay)}")


class L2InForward(Rule):
    """
    ## What it does
    Flags L2 weight penalties computed as part of the loss: `tf.nn.l2_loss` over the
    weights (usually `tf.add_n([tf.nn.l2_loss(v) for v in model.trainable_variables])`),
    `sum(model.losses)` / `tf.add_n(model.losses)`,
    `tf.compat.v1.losses.get_regularization_loss(es)()` and the
    `REGULARIZATION_LOSSES` collection, and weight regularizers on layers:
    `kernel_regularizer=l2(...)` (also as a kwargs dict entry `{'kernel_regularizer': l2(...)}`
    or `kwargs['bias_regularizer'] = l2(...)`), `regularizers.L2(...)`, `'l2'`, `l1_l2`,
    `tf.contrib.layers.l2_regularizer` / slim's (also as a `slim.arg_scope` default
    `weights_regularizer=`; a factory bound to another name, `reg = regularizers.l2`, counts;
    given to a layer of a library kerasfit does not name, such as `keras_hub.layers.*` or a
    pruning library's conv, too)
    (on kernels, biases, depthwise/pointwise,
    recurrent, embedding and batch-norm weights, Keras 1's `W_regularizer` /
    `b_regularizer` / `U_regularizer` included; `activity_regularizer` is left
    alone — it penalizes activations, which no optimizer setting can replace).

    A coefficient that is a parameter or a setting (`l2(l2_weight)`, `l2(params["wd"])`) is
    named, not folded from a default that callers override (a `weight_decay=0.` default
    included): the penalty costs the same whatever the number. `tf.nn.l2_loss` counts over a variable collection, a filtered copy
    of one under any name, or a concat of the flattened variables.

    Every occurrence is its own finding, with its own line and `# noqa`: an inline
    `kernel_regularizer=l2(WEIGHT_DECAY)` in fifty layers is fifty findings (count
    them with `--statistics`). A shared object (`reg = l2(1e-4)` passed to many
    layers) is one finding at its definition, the one place to change; a helper such
    as `def conv(x, f): return Conv2D(f, 3, kernel_regularizer=l2(WD))(x)` is one
    finding because it is one line of source. `sum(model.losses)` is not flagged in a
    file that calls `add_loss` and attaches no regularizer: there the losses are
    likely a KL or auxiliary term.

    ## Why is this slow on the accelerator
    A regularizer adds `λ·Σw²` for every weight to the loss each step: one more pass
    over every weight in the forward pass, a reduction, and its gradient added back
    in the backward pass (docs/facts.md#23). Habana's Gaudi guide recommends adding
    `weight_decay * var` to the update instead of computing L2 loss in the forward
    pass (docs/facts.md#17); every Keras 3 optimizer (and tf-keras's since TF 2.11) has
    a `weight_decay` argument that does that, fused into the update.

    ## Example
    ```python
    x = layers.Conv2D(64, 3, kernel_regularizer=regularizers.l2(1e-4))(x)
    loss = ce + 5e-4 * tf.add_n([tf.nn.l2_loss(v) for v in model.trainable_variables])
    ```

    ## Use instead
    ```python
    x = layers.Conv2D(64, 3)(x)
    optimizer = keras.optimizers.SGD(0.1, momentum=0.9, weight_decay=2e-4)  # 2·λ for l2(λ)
    loss = ce                     # and weight_decay=5e-4 for 5e-4 * l2_loss (Σw²/2)
    ```

    ## Fix safety
    Display only: moving the penalty to the optimizer changes training. Decoupled
    weight decay equals L2 regularization only for plain SGD (with momentum or Adam
    it is a different, usually better, regularizer), and Keras's `weight_decay`
    applies to every variable unless you `exclude_from_weight_decay` (biases,
    batch-norm). `l2(λ)` adds `λ·Σw²`, whose gradient is `2λ·w`, so the SGD-equivalent
    decay is `2λ`; `c * tf.nn.l2_loss(w)` is `c·Σw²/2`, equivalent to `c`. The
    finding names these numbers when it can fold λ.

    ## References
    docs/facts.md#17, #23; Habana Gaudi TensorFlow optimization guide; Loshchilov & Hutter,
    "Decoupled Weight Decay Regularization" (AdamW).
    """

    code = "KF104"
    name = "l2-in-forward"
    message = "L2 weight penalty is computed in the forward pass"
    fix_title = "Drop the penalty and set `weight_decay` on the optimizer"
    fix_safety = Applicability.DISPLAY
    reads = frozenset({Reads.STATEMENT, Reads.FILE_FACTS})  # a shared regularizer's first use is found from its definition's uses, not the walk so far

    VALID = (
        """
        import keras
        opt = keras.optimizers.AdamW(1e-3, weight_decay=1e-4)
        x = keras.layers.Dense(64)(x)
        """,
        # a data loss that happens to use l2_loss
        """
        import tensorflow as tf
        loss = tf.nn.l2_loss(predictions - labels)
        """,
        # activity regularization penalizes activations, not weights
        """
        from tensorflow.keras import layers, regularizers
        x = layers.Dense(64, activity_regularizer=regularizers.l2(1e-5))(x)
        """,
        # L1 only
        """
        from keras import layers, regularizers
        x = layers.Dense(64, kernel_regularizer=regularizers.L1(1e-5))(x)
        """,
        # add_loss-only model: model.losses is a KL term here
        """
        import tensorflow as tf

        class VAE(tf.keras.Model):
            def call(self, x):
                self.add_loss(kl(x))
                return x

        def step(model, x):
            return recon(x) + sum(model.losses)
        """,
        # a user's own l2
        """
        from tensorflow.keras import layers
        def l2(x):
            return None
        x = layers.Dense(8, kernel_regularizer=l2(1e-4))(x)
        """,
        # a coefficient of 0 written out disables the regularizer (contrib's returns None)
        """
        import tensorflow.compat.v1 as tf
        from sparse_layers import sparse_conv2d

        def conv(x):
            return sparse_conv2d(x, 64, kernel_regularizer=tf.contrib.layers.l2_regularizer(0.0))
        """,
        # a library layer given an L1 penalty only
        """
        import keras
        import keras_hub

        emb = keras_hub.layers.ReversibleEmbedding(1000, 64, embeddings_regularizer=keras.regularizers.L1(1e-5))
        """,
    )
    INVALID = (
        # a layer of a library kerasfit does not name, given a framework L2 regularizer
        Invalid(
            """
                import keras
                import keras_hub

                emb = keras_hub.layers.ReversibleEmbedding(
                    input_dim=1000, output_dim=64, embeddings_regularizer=keras.regularizers.l2(0.001))
                """,
            fields={"keyword": "embeddings_regularizer", "coefficient": 0.001, "halved": False},
            at=Range(5, 58, 5, 86),
        ),
        # a shared regularizer whose coefficient is a parameter with a 0 default that callers
        # override (a TPU model_fn passes the flag), given to a pruning library's conv
        Invalid(
            """
                from tensorflow.contrib import layers as contrib_layers
                from pruning_layers import sparse_conv2d

                def conv(inputs, filters, weight_decay=0.):
                    kernel_regularizer = contrib_layers.l2_regularizer(weight_decay)
                    return sparse_conv2d(x=inputs, units=filters, kernel_size=[3, 3], kernel_regularizer=kernel_regularizer)
                """,
            fields={"coefficient_from": "weight_decay"},
            at=Range(5, 25, 5, 68),
        ),
        # the penalties added in a TPU model_fn whose file reads `tf` without binding it (an
        # export that dropped its import): `tf` is TensorFlow
        Invalid(
            """
                from tensorflow.contrib.tpu.python.tpu import tpu_estimator

                def model_fn(features, labels, mode, params):
                    cross_loss = tf.losses.softmax_cross_entropy(labels, features)
                    loss = cross_loss + tf.losses.get_regularization_loss()
                    return tpu_estimator.TPUEstimatorSpec(mode, loss=loss)
                """,
            fields={"call": "tf.losses.get_regularization_loss"},
            at=Range(5, 24, 5, 59),
        ),
        # over a filtered copy of the trainable variables, kept under a name that says nothing
        Invalid(
            """
                import tensorflow as tf

                def loss_fn(model, ce, wd):
                    vs = [v for v in model.trainable_variables if "bias" not in v.name]
                    return ce + wd * tf.add_n([tf.nn.l2_loss(x) for x in vs])
                """,
            finding="L2LossOfWeights",
            at=Range(5, 31, 5, 47),
        ),
        # a custom step run by a distribution strategy: L2 over a concat of the flattened variables
        Invalid(
            """
                import tensorflow as tf

                def train(strategy, model, optimizer, weight_decay, dataset):
                    @tf.function
                    def step_fn(images, labels):
                        with tf.GradientTape() as tape:
                            loss = tf.reduce_mean(tf.square(model(images, training=True) - labels))
                            flat = tf.concat([tf.reshape(v, [-1]) for v in model.trainable_variables], axis=0)
                            loss += weight_decay * tf.nn.l2_loss(flat)
                        grads = tape.gradient(loss, model.trainable_variables)
                        optimizer.apply_gradients(zip(grads, model.trainable_variables))

                    for images, labels in dataset:
                        strategy.run(step_fn, args=(images, labels))
                """,
            finding="L2LossOfWeights",
            at=Range(9, 35, 9, 54),
        ),
        # slim's arg_scope default, with `regularizers` from the tf_slim package
        Invalid(
            """
                import tf_slim as slim
                from tf_slim.layers import regularizers

                def net(images, wd):
                    with slim.arg_scope([slim.conv2d], weights_regularizer=regularizers.l2_regularizer(wd)):
                        return slim.conv2d(images, 64, [3, 3])
                """,
            fields={"keyword": "weights_regularizer", "value": "regularizers.l2_regularizer(wd)", "coefficient_from": "wd"},
            at=Range(5, 59, 5, 90),
        ),
        # the coefficient is a parameter with no default: the penalty is paid whatever it is
        Invalid(
            """
                import keras

                def build(x, l2_weight):
                    e = keras.layers.Embedding(1000, 64, embeddings_regularizer=keras.regularizers.L2(l2_weight))(x)
                    return keras.layers.Dense(64, kernel_regularizer=keras.regularizers.l2(l2_weight))(e)
                """,
            fields={"coefficient_from": "l2_weight"},
            count=2,
            at=(Range(4, 64, 4, 96), Range(5, 53, 5, 85)),
        ),
        # a regularizer factory bound to another name, called later with a default every caller overrides
        Invalid(
            """
                from tensorflow.keras import layers, regularizers

                def head(x, weight_decay=1e-4):
                    reg = regularizers.l2
                    return layers.Dense(10, kernel_regularizer=reg(weight_decay))(x)

                logits = head(features, weight_decay=5e-4)
                """,
            fields={"coefficient_from": "weight_decay"},
            at=Range(5, 47, 5, 64),
        ),
        # values from a hyper-parameter dict
        Invalid(
            """
                import tensorflow as tf

                def block(x, params):
                    return tf.keras.layers.SeparableConv2D(
                        32, 3, pointwise_regularizer=tf.keras.regularizers.l2(params["weight_decay"]))(x)
                """,
            fields={"coefficient_from": 'params["weight_decay"]'},
            at=Range(5, 37, 5, 85),
        ),
        Invalid(
            """
            import tensorflow as tf

            def loss_fn(model, ce):
                return ce + 5e-4 * tf.add_n([tf.nn.l2_loss(v) for v in model.trainable_variables])
            """,
            fields={"decay": 0.0005},
            at=Range(4, 33, 4, 49),
        ),
        # the weights come from a method named for variables (`self._freeze_vars()`), as in
        # EfficientDet's Keras train step
        Invalid(
            """
            import re
            import tensorflow as tf

            class Train(tf.keras.Model):
                def _reg_l2_loss(self, weight_decay, regex=r'.*(kernel|weight):0$'):
                    var_match = re.compile(regex)
                    return weight_decay * tf.add_n(
                        [tf.nn.l2_loss(v) for v in self._freeze_vars() if var_match.match(v.name)])
            """,
            finding="L2LossOfWeights",
            at=Range(8, 13, 8, 29),
        ),
        # a filtered variable list, TF's `var_list` convention (Mask R-CNN, detection models)
        Invalid(
            """
            import tensorflow.compat.v1 as tf

            def total_loss(model_loss, params):
                var_list = [v for v in tf.trainable_variables() if 'bias' not in v.name]
                return model_loss + params['l2_weight_decay'] * tf.add_n([tf.nn.l2_loss(v) for v in var_list])
            """,
            finding="L2LossOfWeights",
            at=Range(5, 62, 5, 78),
        ),
        # Keras 1: W_ (kernel) and b_ (bias) regularizers, as in old DenseNet / VGG zoos
        Invalid(
            """
            from keras.layers import Convolution2D, Dense
            from keras.regularizers import l2

            def head(x, weight_decay=1e-4):
                x = Convolution2D(16, 3, 3, border_mode='same', W_regularizer=l2(weight_decay))(x)
                return Dense(10, W_regularizer=l2(weight_decay), b_regularizer=l2(weight_decay))(x)
            """,
            fields={"keyword": "W_regularizer", "value": "l2(weight_decay)"},
            at=(Range(5, 66, 5, 82), Range(6, 35, 6, 51), Range(6, 67, 6, 83)),
        ),
        # every site is its own finding (its own line, squiggle and noqa)
        Invalid(
            """
            from tensorflow.keras import layers, regularizers

            x = layers.Conv2D(64, 3, kernel_regularizer=regularizers.l2(1e-4))(x)
            x = layers.Conv2D(64, 3, kernel_regularizer=regularizers.l2(1e-4))(x)
            x = layers.Conv2D(64, 3, kernel_regularizer=regularizers.l2(1e-4))(x)
            """,
            fields={"keyword": "kernel_regularizer", "value": "regularizers.l2(1e-4)"},
            at=(Range(3, 44, 3, 65), Range(4, 44, 4, 65), Range(5, 44, 5, 65)),
        ),
        Invalid(
            """
            import keras

            reg = keras.regularizers.L2(5e-5)
            a = keras.layers.Dense(64, kernel_regularizer=reg)
            b = keras.layers.Dense(64, kernel_regularizer=reg)
            """,
            fields={"decay": 0.0001},
            at=Range(3, 6, 3, 33),
        ),
        Invalid(
            """
            from keras import layers
            x = layers.Dense(64, kernel_regularizer='l2')(x)
            """,
            fields={"coefficient": 0.01},
            at=Range(2, 40, 2, 44),
        ),
        # layer kwargs built as a dict in a conv wrapper
        Invalid(
            """
            from tensorflow.keras.layers import Conv2D
            from tensorflow.keras.regularizers import l2

            def DarknetConv2D(*args, **kwargs):
                conv_kwargs = {'kernel_regularizer': l2(5e-4)}
                conv_kwargs['bias_regularizer'] = l2(5e-4)
                conv_kwargs.update(kwargs)
                return Conv2D(*args, **conv_kwargs)
            """,
            fields={"keyword": "kernel_regularizer", "value": "l2(5e-4)"},
            at=(Range(5, 41, 5, 49), Range(6, 38, 6, 46)),
        ),
        Invalid(
            """
            import tensorflow.compat.v1 as tf
            loss = ce + tf.losses.get_regularization_loss()
            """,
            finding="RegularizationLossCall",
            at=Range(2, 12, 2, 47),
        ),
        Invalid(
            """
            import tensorflow.compat.v1 as tf
            reg = tf.add_n(tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES))
            """,
            at=Range(2, 15, 2, 68),
        ),
        Invalid(
            """
            import tensorflow as tf

            @tf.function
            def train_step(model, x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x)) + sum(model.losses)
                return tape.gradient(loss, model.trainable_variables)
            """,
            fields={"losses": "model.losses"},
            at=Range(6, 38, 6, 55),
        ),
        Invalid(
            """
            import tensorflow.compat.v1 as tf

            net = tf.layers.conv2d(x, 64, 3, kernel_regularizer=tf.contrib.layers.l2_regularizer(scale=1e-4))
            """,
            fields={"coefficient": 0.0001, "halved": True},
            at=Range(3, 52, 3, 96),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.call_name(node)
        if name is None:
            if isinstance(node.func, cst.Name) and node.func.value == "sum" and node.args:
                if self.ctx.lookup("sum", at=node) is None:
                    self._check_losses_sum(node, node.args[0].value)
            # a layer of a library kerasfit does not name (``keras_hub.layers.ReversibleEmbedding``,
            # a pruning library's ``sparse_conv2d``) given a framework L2 regularizer
            if any(a.keyword is not None and a.keyword.value in WEIGHT_REGULARIZER_ARGS for a in node.args):
                self._collect_regularizers(node)
            return
        if name == "tf.nn.l2_loss":
            self._check_l2_loss(node)
        elif name in REGULARIZATION_LOSS_CALLS:
            self.report(node, RegularizationLossCall(name))
        elif name in ("tf.get_collection", "tf.get_collection_ref") and node.args:
            key = node.args[0].value
            if self.ctx.resolve(key) == "tf.GraphKeys.REGULARIZATION_LOSSES" or self.ctx.const(key) == "regularization_losses":
                self.report(node, RegularizationCollection())
        elif name in _SUMS and node.args:
            self._check_losses_sum(node, node.args[0].value)
        if any(a.keyword is not None and a.keyword.value in WEIGHT_REGULARIZER_ARGS for a in node.args):
            self._collect_regularizers(node)

    def _report_regularizer(self, at: cst.CSTNode, kw: str, text: str, lam: float | None, factor: float,
                            fix_arg: cst.Arg | None, source: str | None = None) -> None:
        # a coefficient from a parameter / setting: whatever it is, the cost is paid
        known = lam if source is None else None
        fix = self.make_fix(Remove(fix_arg)) if fix_arg is not None else None
        finding = Regularizer(kw, text, known, known is not None and factor == 1.0, source,
                              known * factor if known is not None else None)
        self.report(at, finding, fix=fix)

    # ---- loss-side patterns -----------------------------------------------
    def _check_l2_loss(self, call: cst.Call) -> None:
        arg = get_arg(call, "t", 0)
        if arg is None or not self._is_weight(arg.value, call):
            return
        coef = None
        for anc in reversed(self.ctx.ancestors(call)):
            if isinstance(anc, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                break
            if isinstance(anc, cst.BinaryOperation) and isinstance(anc.operator, cst.Multiply):
                for side in (anc.left, anc.right):
                    v = self.ctx.const(side)
                    if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 1:
                        coef = float(v)
                break
        self.report(call, L2LossOfWeights(coef))

    def _is_weight(self, expr: cst.BaseExpression, at: cst.Call) -> bool:
        """(``at``: the call being visited, whose enclosing loops may bind ``expr``.)"""
        dn = dotted_name(expr)
        if dn is None:
            return False
        last = dn.rsplit(".", 1)[-1]
        if isinstance(expr, cst.Name):
            for anc in reversed(self.ctx.ancestors(at)):
                fors: list[cst.CompFor | cst.For] = []
                if isinstance(anc, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
                    comp: cst.CompFor | None = anc.for_in
                    while comp is not None:
                        fors.append(comp)
                        comp = comp.inner_for_in
                elif isinstance(anc, cst.For):
                    fors.append(anc)
                for f in fors:
                    if isinstance(f.target, cst.Name) and f.target.value == expr.value:
                        return self._collection(f.iter)
            b = self.ctx.lookup(expr.value, at=expr)
            if b is not None and b.kind == "assign" and isinstance(b.value, cst.Call):
                if self.ctx.call_name(b.value) in ("tf.Variable", "tf.get_variable"):
                    return True
                if self._flattened_weights(b.value):
                    return True
        return bool(_WEIGHTISH.search(last))

    def _collection(self, it: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether a loop iterates over a variable collection (``model.trainable_variables``,
        ``tf.trainable_variables()``), also through a name bound to one or to a filtered copy
        (``vs = [v for v in model.trainable_weights if "bn" not in v.name]``)."""
        src = dotted_name(it.func if isinstance(it, cst.Call) else it) or ""
        if _COLLECTIONISH.search(src):
            return True
        if isinstance(it, cst.Name) and depth < 3:
            b = self.ctx.lookup(it.value, self.ctx.scopes_of(it))
            value = b.value if b is not None and b.kind == "assign" else None
            if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
                return self._collection(value.for_in.iter, depth + 1)
            if value is not None:
                return self._collection(value, depth + 1)
        return False

    def _flattened_weights(self, value: cst.Call, depth: int = 0) -> bool:
        """``tf.concat([tf.reshape(v, [-1]) for v in model.trainable_variables], 0)``: every
        weight flattened into one tensor (reshape / concat / stack over a variable collection)."""
        name = self.ctx.call_name(value)
        if name not in _FLATTENERS or not value.args or depth > 3:
            return False
        first = value.args[0].value
        if isinstance(first, (cst.ListComp, cst.GeneratorExp)):
            return self._collection(first.for_in.iter)
        if isinstance(first, cst.Call):
            return self._flattened_weights(first, depth + 1)
        return False

    def _check_losses_sum(self, call: cst.Call, arg: cst.BaseExpression) -> None:
        if not (isinstance(arg, cst.Attribute) and arg.attr.value == "losses"):
            return
        if self.ctx.file_fact("KF104.add_loss_only", _add_loss_only):
            return
        self.report(call, LayerLossesSummed(dotted_name(arg) or "losses"))

    # ---- layer-side regularizers -------------------------------------------
    def visit_DictElement(self, node: cst.DictElement) -> None:
        """``{'kernel_regularizer': l2(WD)}``: layer kwargs built as a dict (a conv wrapper)."""
        self._keyed_regularizer(node.key, node.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        """``kwargs['bias_regularizer'] = l2(WD)``."""
        for t in node.targets:
            target = t.target
            if isinstance(target, cst.Subscript) and len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index):
                self._keyed_regularizer(target.slice[0].slice.value, node.value)

    def _keyed_regularizer(self, key: cst.BaseExpression, value: cst.BaseExpression) -> None:
        kw = self.ctx.const(key) if isinstance(key, cst.SimpleString) else None
        if not isinstance(kw, str) or kw not in WEIGHT_REGULARIZER_ARGS:
            return
        info = self._l2(value)
        if info is not None:
            text = re.sub(r"\s+", "", self.ctx.code(value))
            self._report_regularizer(value, kw, text, info[0], info[1], None, self._coefficient_source(value))

    def _collect_regularizers(self, call: cst.Call) -> None:
        for a in call.args:
            if a.keyword is None or a.keyword.value not in WEIGHT_REGULARIZER_ARGS:
                continue
            value = a.value
            shared = None
            if isinstance(value, cst.Name):
                b = self.ctx.lookup(value.value, at=value)
                if b is None or b.kind != "assign" or b.value is None:
                    continue
                shared, value = value.value, b.value
            info = self._l2(value)
            if info is None:
                continue
            lam, factor = info
            if shared is None:
                # an inline regularizer: this site is the occurrence
                text = re.sub(r"\s+", "", self.ctx.code(value))
                self._report_regularizer(value, a.keyword.value, text, lam, factor, a, self._coefficient_source(value))
                continue
            # a shared regularizer is reported once, at its definition, by its first use
            if self._first_use(shared, value) is a:
                self._report_regularizer(value, a.keyword.value, shared, lam, factor, None, self._coefficient_source(value))

    def _first_use(self, name: str, value: cst.BaseExpression) -> cst.Arg | None:
        """The first argument in the file (source order) that passes ``name``, bound to
        ``value``, as a weight regularizer of a call kerasfit names. Found from the
        definition's uses, not from the walk so far, so each statement's findings stand
        on their own (the language server reuses them per statement)."""
        ctx = self.ctx
        best: tuple[int, cst.Arg] | None = None
        for ref, _, scopes in ctx.name_refs(name):
            arg = ctx.parent(ref)
            if not (isinstance(arg, cst.Arg) and arg.value is ref and arg.keyword is not None
                    and arg.keyword.value in WEIGHT_REGULARIZER_ARGS):
                continue
            call = ctx.parent(arg)
            if not isinstance(call, cst.Call):
                continue
            b = ctx.lookup(name, scopes)
            if b is None or b.value is not value:
                continue
            at = ctx.source_order(arg)
            if best is None or at < best[0]:
                best = (at, arg)
        return best[1] if best is not None else None

    def _coefficient_source(self, value: cst.BaseExpression) -> str | None:
        """``l2(l2_weight)`` with ``l2_weight`` a parameter (its default, if any, may be
        overridden by every caller) or ``l2(params["wd"])``: the spelling the coefficient
        comes from, else None (a constant, folded to a number)."""
        if not isinstance(value, cst.Call) or not value.args:
            return None
        first = value.args[0]
        if first.keyword is not None and first.keyword.value not in ("l2", "scale", "l"):
            return None
        arg = first.value
        if isinstance(arg, cst.Name):
            b = self.ctx.lookup(arg.value, self.ctx.scopes_of(arg))
            return arg.value if b is not None and b.kind == "param" else None
        if isinstance(arg, (cst.Subscript, cst.Attribute)) and self.ctx.const(arg) in (None, UNKNOWN):
            return re.sub(r"\s+", "", self.ctx.code(arg))
        return None

    def _l2(self, value: cst.BaseExpression) -> tuple[float | None, float] | None:
        """(λ or None, SGD-equivalent weight-decay factor) for an L2 regularizer, else None."""
        s = self.ctx.const(value)
        if isinstance(s, str):
            return (0.01, 2.0) if s.lower() in L2_REGULARIZER_STRINGS else None
        if not isinstance(value, cst.Call):
            return None
        name = self.ctx.call_name(value)
        kw = L2_REGULARIZERS.get(name or "")
        if kw is None:
            return None
        factor = 1.0 if name == "tf.contrib.layers.l2_regularizer" else 2.0
        arg = get_arg(value, kw, 0 if name != "keras.regularizers.l1_l2" else 1)
        if arg is None:
            return (0.01, factor) if name == "keras.regularizers.l2" else (None, factor)
        lam = self.ctx.const(arg.value)
        if isinstance(lam, (int, float)) and not isinstance(lam, bool):
            if lam == 0:
                # ``l2_regularizer(weight_decay)`` with ``weight_decay=0.`` a default callers
                # override (a TPU model_fn passes the flag): the penalty is there all the same
                return (None, factor) if self.ctx.depends_on_param(arg.value) else None
            return float(lam), factor
        return None, factor


def _add_loss_only(ctx: RuleContext) -> bool:
    """The file adds losses of its own (``add_loss``) and spells no regularizer: its
    ``model.losses`` are those, not weight penalties."""
    return "add_loss" in ctx.source and "regularizer" not in ctx.source
