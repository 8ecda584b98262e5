from __future__ import annotations

import re
from textwrap import dedent

import libcst as cst

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kerasfit.ruleapi import FileContext

from kerasfit.ruleapi import (
    Applicability,
    CONV_LAYERS,
    DENSE_LAYERS,
    HEAD_ACTIVATIONS,
    HEAD_CONSUMERS,
    Invalid,
    KERAS1_WIDTH_KEYWORDS,
    MODEL_CONSTRUCTORS,
    Replace,
    Rule,
    Severity,
    Valid,
    canonical,
    depends_on_param,
    dotted_name,
    get_arg,
    keyword_value,
    label,
    shape_of_variable,
    walk,
)

# tf.nn convolutions whose kernel is a variable: canonical -> index of the output-channel dim.
_NN_CONVS = {
    "tf.nn.conv1d": -1,
    "tf.nn.conv2d": -1,
    "tf.nn.conv3d": -1,
    "tf.nn.conv1d_transpose": -2,
    "tf.nn.conv2d_transpose": -2,
    "tf.nn.conv3d_transpose": -2,
}
# A size named like one of these is fixed by the task (classes, vocabulary, anchors...).
_SEMANTIC_SIZE = re.compile(
    r"class|label|categor|vocab|action|anchor|keypoint|joint|landmark|n_?out|out_?dim|outputs?\b|output_|target|token",
    re.I,
)
# A layer whose result is stored under one of these names is the model's output.
_HEAD_TARGET = re.compile(r"logit|^outputs?$|^output_|pred|prob|classif|head$|^head|score", re.I)
_LAYERS = {**CONV_LAYERS, **DENSE_LAYERS}


class ChannelMultiple(Rule):
    """
    ## What it does
    Flags the output width of a convolution or dense layer — `filters` of
    `Conv1D/2D/3D`, `Conv*Transpose`, `SeparableConv*`, `tf.layers.conv2d`…, `units`
    of `Dense`, `tf.layers.dense` and recurrent layers (Keras 1's `nb_filter=` /
    `output_dim=` too), and the output-channel dim of a `tf.nn.conv2d` kernel
    variable — that folds to a constant which is not a
    multiple of 8. The message says what the dim pads to on the selected target and
    the share of the padded work that is wasted. A width taken from a list or tuple
    literal walked by a loop (`for units in HIDDEN: Dense(units)`, `HIDDEN` maybe a module
    constant) is reported at each element that is not a multiple (1–4 wide ones skipped).

    Output heads, whose width the task fixes, are reported at `info` severity and
    never fixed: the model's last layer (last element of a `Sequential`, last layer
    built in a function that builds a `Model`/`EstimatorSpec`, or in a `keras.Model`
    subclass's `__init__`), sizes named like `num_classes`/`vocab_size`/`num_anchors`,
    layers with `activation='softmax'`/`'sigmoid'` or whose result goes straight into
    a softmax/sigmoid, a cross-entropy or `depth_to_space`, results stored as
    `logits`/`outputs`/`predictions`, and 1–4 wide outputs (image channels,
    regression targets). Sizes that come from a function parameter are skipped:
    callers may pass another value.

    ## Why is this slow on the accelerator
    The TPU pads the feature dims of every convolution and matmul operand to 8 or
    128, and the MXU-facing kernel dim to 128 (256 on v6e) (docs/facts.md#1–3, #8): a
    `Dense(100)` computes as if it had 128 units, wasting 22% of that op. Tensor cores
    want channels divisible by 8 for fp16 and XLA's GPU pass pads them (docs/facts.md#18);
    Gaudi's matrix engine wants 64/128 (docs/facts.md#17). A multiple of 8 is
    unpadded in at least one of the two TPU layouts (docs/facts.md#1) and on GPU.

    ## Example
    ```python
    x = tf.keras.layers.Conv2D(30, 3, padding="same")(x)
    x = tf.keras.layers.Dense(100, activation="relu")(x)
    ```

    ## Use instead
    ```python
    x = tf.keras.layers.Conv2D(32, 3, padding="same")(x)
    x = tf.keras.layers.Dense(104, activation="relu")(x)   # or 128
    ```

    ## Fix safety
    Unsafe: rounding a width up changes the model (more parameters, a different
    checkpoint) although the following layers adapt to it. Only a literal at the call
    site is rewritten; a width that comes from a named constant is reported without a
    fix, since that constant may also size other tensors (a residual branch, a
    reshape). `tf.nn` kernel variables are never fixed: their bias and the next
    kernel's input dim must change with them. Heads are never fixed.

    ## References
    docs/facts.md#1, #2, #3, #8, #17, #18; Cloud TPU performance guide ("TensorFlow ops",
    padding); NVIDIA Deep Learning Performance guide (channels divisible by 8).
    """

    code = "KF102"
    build_evidence = "feature-padding"
    name = "channel-multiple"
    message = "Filter/unit count is not a multiple of 8 and is padded on the accelerator"
    fix_title = "Round the width up to a multiple of 8"
    fix_safety = Applicability.UNSAFE

    VALID = (
        "import tensorflow as tf\n\ndef conv_block(x, filters):\n"
        "    return tf.keras.layers.Conv2D(filters, 3, padding='same')(x)\n\n"
        "def backbone(x):\n    return conv_block(conv_block(x, 32), 64)\n",
        "import tensorflow as tf\nx = tf.keras.layers.Conv2D(64, 3)(x)\ny = tf.keras.layers.Dense(256)(x)\n",
        # input channels (3) and depth multipliers are not output widths
        "import keras\ninp = keras.Input((224, 224, 3))\nx = keras.layers.DepthwiseConv2D(3, depth_multiplier=3)(inp)\n"
        "x = keras.layers.SeparableConv2D(64, 3, depth_multiplier=3)(x)\n",
        # a user's own Dense is not Keras
        "class Dense:\n    def __init__(self, units):\n        pass\nd = Dense(100)\n",
        # the width comes from a parameter: callers decide
        "from tensorflow.keras import layers\n\ndef block(x, filters=30):\n    return layers.Conv2D(filters, 3)(x)\n",
        # unknown at lint time
        "import tensorflow as tf\nx = tf.keras.layers.Dense(cfg.hidden)(x)\n",
        Valid("import keras\nx = keras.layers.Dense(200)(x)\n", target="tpu-v6e"),
        "import tensorflow.compat.v1 as tf\nw = tf.get_variable('w', [3, 3, 3, 64])\ny = tf.nn.conv2d(x, w, [1, 1, 1, 1], 'SAME')\n",
    )
    INVALID = (
        # Dense widths from a module-level constant list, walked in a loop
        Invalid(
            dedent("""\
                from keras import layers

                HIDDEN = [256, 100]

                def mlp(x):
                    for units in HIDDEN:
                        x = layers.Dense(units, activation="relu")(x)
                    return x
                """),
            message_contains="`Dense` built in a loop with `units` = 100 units",
        ),
        Invalid(
            "import tensorflow as tf\nx = tf.keras.layers.Dense(100, activation='relu')(x)\n",
            expected_fix="import tensorflow as tf\nx = tf.keras.layers.Dense(104, activation='relu')(x)\n",
            unsafe=True,
            message_contains="pad to 128 on tpu-v5e (22% of the padded work wasted)",
        ),
        # Keras 1 spells the width nb_filter= / output_dim=
        Invalid(
            dedent("""\
                from keras.layers import Convolution2D, Dense

                def block(x):
                    x = Convolution2D(nb_filter=12, nb_row=3, nb_col=3, border_mode="same")(x)
                    return Dense(output_dim=100, activation="relu")(x)
                """),
            expected_fix=dedent("""\
                from keras.layers import Convolution2D, Dense

                def block(x):
                    x = Convolution2D(nb_filter=16, nb_row=3, nb_col=3, border_mode="same")(x)
                    return Dense(output_dim=104, activation="relu")(x)
                """),
            count=2,
            unsafe=True,
        ),
        Invalid(
            "import tensorflow as tf\nx = tf.keras.layers.Dense(units=100)(x)\n",
            expected_fix="import tensorflow as tf\nx = tf.keras.layers.Dense(units=104)(x)\n",
            unsafe=True,
            target="gpu",
            message_contains="pad to 104 on gpu (4%",
        ),
        Invalid(
            "import tensorflow.compat.v1 as tf\n\nnet = tf.layers.conv2d(images, 30, 3, padding='same')\n",
            expected_fix="import tensorflow.compat.v1 as tf\n\nnet = tf.layers.conv2d(images, 32, 3, padding='same')\n",
            unsafe=True,
        ),
        # named constant: reported, not rewritten (it may size other tensors too)
        Invalid(
            "from keras import layers\n\nWIDTH = 48 + 2\nx = layers.Conv2D(WIDTH, 3)(x)\n",
            message_contains="`WIDTH`",
        ),
        # heads: info severity, no fix
        Invalid(
            "import keras\n\ndef build(num_classes=10):\n    inp = keras.Input((32,))\n    x = keras.layers.Dense(64)(inp)\n"
            "    out = keras.layers.Dense(10)(x)\n    return keras.Model(inp, out)\n",
            message_contains="output head",
        ),
        Invalid(
            "import keras\nNUM_CLASSES = 10\nx = keras.layers.Dense(NUM_CLASSES)(x)\n",
            message_contains="sized by `NUM_CLASSES`",
        ),
        Invalid("import keras\nx = keras.layers.Dense(12, activation='sigmoid')(x)\n", message_contains="softmax/sigmoid"),
        Invalid(
            "import tensorflow as tf\nlogits = tf.keras.layers.Dense(10)(h)\nloss = tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)\n",
            message_contains="output head",
        ),
        Invalid(
            "import keras\nm = keras.Sequential([keras.layers.Dense(50), keras.layers.Dense(24), keras.layers.Dense(1)])\n",
            expected_fix="import keras\nm = keras.Sequential([keras.layers.Dense(56), keras.layers.Dense(24), keras.layers.Dense(1)])\n",
            unsafe=True,
            count=2,
        ),
        Invalid(
            "import tensorflow.compat.v1 as tf\nw = tf.get_variable('w', [3, 3, 3, 30])\ny = tf.nn.conv2d(x, w, [1, 1, 1, 1], 'SAME')\n",
            message_contains="30 output channels",
        ),
        # the width is a helper's parameter: reported (and fixed) at the call site
        Invalid(
            "import tensorflow as tf\n\n\ndef conv_block(x, filters):\n"
            "    x = tf.keras.layers.Conv2D(filters, 3, padding='same')(x)\n"
            "    return tf.keras.layers.ReLU()(x)\n\n\n"
            "def backbone(x):\n    x = conv_block(x, 30)\n    return conv_block(x, 64)\n",
            expected_fix="import tensorflow as tf\n\n\ndef conv_block(x, filters):\n"
            "    x = tf.keras.layers.Conv2D(filters, 3, padding='same')(x)\n"
            "    return tf.keras.layers.ReLU()(x)\n\n\n"
            "def backbone(x):\n    x = conv_block(x, 32)\n    return conv_block(x, 64)\n",
            unsafe=True,
            message_contains="conv_block(..., filters=30)",
        ),
    )

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._facts: dict[int, tuple[set[str], bool, cst.Call | None]] = {}
        self._reported_sites: set[int] = set()

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.call_name(node)
        if name is None:
            if node.args and isinstance(node.func, (cst.Name, cst.Attribute)):
                self._check_factory(node)
            return
        spec = _LAYERS.get(name)
        if spec is not None:
            arg = get_arg(node, *spec)
            if arg is None and name.startswith("keras."):
                arg = get_arg(node, KERAS1_WIDTH_KEYWORDS[spec[0]])  # Keras 1: nb_filter=, output_dim=
            if arg is not None:
                self._check_layer(node, name, arg.value, "units" if name in DENSE_LAYERS else "filters")
        elif name in _NN_CONVS:
            arg = get_arg(node, "filters", 1) or get_arg(node, "filter")
            if arg is not None:
                self._check_kernel(node, name, arg.value)

    # ---- checks -------------------------------------------------------------
    def _check_layer(self, call: cst.Call, name: str, expr: cst.BaseExpression, unit: str) -> None:
        if isinstance(expr, cst.Name):
            b = self.ctx.lookup(expr.value)
            fn = self.ctx.enclosing_function()
            if b is not None and b.kind == "param" and fn is not None:
                self._check_call_sites(call, name, fn, expr.value, unit)
                return
        v = self.ctx.int_const(expr)
        if v is None:
            self._check_iterated(call, name, expr, unit)
            return
        if v <= 0 or v % self.ctx.target.channel_multiple == 0:
            return
        if depends_on_param(self.ctx, expr):
            return
        short = label(name)
        pad, rounded, waste = self._numbers(v)
        if v == 1:
            unit = unit[:-1]
        where = f"{v} {unit} pad to {pad} on {self.ctx.target.name} ({waste}% of the padded work wasted)"
        head = self._head_reason(call, expr, v)
        if head is not None:
            self.report(
                expr,
                f"`{short}` output head ({head}): {where}; its width is set by the task, so not fixed",
                severity=Severity.INFO,
            )
            return
        advice = f"round up to {rounded} (a multiple of {self.ctx.target.channel_multiple})"
        if pad != rounded:
            advice += f", or {pad} to fill the MXU"
        if isinstance(expr, cst.Integer):
            self.report(
                expr,
                f"`{short}`: {where}; {advice}",
                fix=self.make_fix(Replace(expr, cst.Integer(str(rounded)))),
            )
            return
        src = dotted_name(expr)
        why = f"`{src}` may size other tensors too" if src else "it is computed"
        self.report(expr, f"`{short}`: {where}; {advice} (not auto-fixed: {why})")

    def _check_iterated(self, call: cst.Call, name: str, expr: cst.BaseExpression, unit: str) -> None:
        """``for units in HIDDEN: Dense(units)``: every width of the literal the loop walks,
        reported (and fixed) at the element."""
        elements = self.ctx.iterated_elements(expr)
        m = self.ctx.target.channel_multiple
        for el in elements or ():
            v = self.ctx.int_const(el)
            if v is None or v <= 4 or v % m == 0 or id(el) in self._reported_sites:
                continue  # (a width of 4 or less is a task's output, not a hidden width)
            self._reported_sites.add(id(el))
            pad, rounded, waste = self._numbers(v)
            src = self.ctx.module.code_for_node(expr)
            where = (f"`{label(name)}` built in a loop with `{src}` = {v} {unit}, which pad to {pad} on "
                     f"{self.ctx.target.name} ({waste}% of the padded work wasted)")
            advice = f"round up to {rounded} (a multiple of {m})" + (f", or {pad} to fill the MXU" if pad != rounded else "")
            fix = self.make_fix(Replace(el, cst.Integer(str(rounded)))) if isinstance(el, cst.Integer) else None
            self.report(el, f"{where}; {advice}", fix=fix)

    def _check_call_sites(self, call: cst.Call, name: str, fn: cst.FunctionDef, param: str, unit: str) -> None:
        """``def block(x, filters): Conv2D(filters)`` called as ``block(x, 30)``: the
        width is decided at each same-file call site, so report (and fix) there."""
        m = self.ctx.target.channel_multiple
        short = label(name)
        for pv in self.ctx.param_values(fn, param):
            v = pv.const
            if not pv.passed or pv.value is None or not isinstance(v, int) or isinstance(v, bool):
                continue
            if v <= 0 or v % m == 0 or id(pv.value) in self._reported_sites:
                continue
            self._reported_sites.add(id(pv.value))
            pad, rounded, waste = self._numbers(v)
            where = (
                f"`{fn.name.value}(..., {param}={v})` builds a `{short}` with {v} {unit} that pad to {pad} "
                f"on {self.ctx.target.name} ({waste}% of the padded work wasted)"
            )
            if v <= 4 or _SEMANTIC_SIZE.search(param):
                self.report(pv.value, f"{where}; an output head, so not fixed", severity=Severity.INFO)
                continue
            advice = f"pass {rounded} (a multiple of {m})" + (f", or {pad} to fill the MXU" if pad != rounded else "")
            if isinstance(pv.value, cst.Integer):
                self.report(pv.value, f"{where}; {advice}", fix=self.make_fix(Replace(pv.value, cst.Integer(str(rounded)))))
            else:
                self.report(pv.value, f"{where}; {advice}")

    def _check_factory(self, call: cst.Call) -> None:
        """``NanoConv2D_BN_Relu6(150, (1, 1))``: a project factory (this file or another of
        the tree) that forwards a literal width to the conv or dense layer it builds."""
        m = self.ctx.target.channel_multiple
        # only a literal that is off the multiple can be reported: ask nothing otherwise
        if not any(
            isinstance(a.value, cst.Integer) and not a.star and (self.ctx.int_const(a.value) or 0) % m
            for a in call.args
        ):
            return
        layer = self.ctx.built_layer(call)
        if layer is None:
            return
        name = canonical(layer.name)
        spec = _LAYERS.get(name)
        if spec is None:
            return
        width = layer.arg(*spec)
        if not isinstance(width, frozenset) or len(width) != 1:
            return
        v = next(iter(width))
        m = self.ctx.target.channel_multiple
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0 or v % m == 0:
            return
        # the call-site argument the width came from: the one literal that folds to it
        sites = [a for a in call.args if not a.star and isinstance(a.value, cst.Integer) and self.ctx.int_const(a.value) == v]
        if len(sites) != 1 or id(sites[0].value) in self._reported_sites:
            return
        expr = sites[0].value
        self._reported_sites.add(id(expr))
        factory = layer.via[0]
        unit = "units" if name in DENSE_LAYERS else "filters"
        pad, rounded, waste = self._numbers(v)
        where = (
            f"`{factory}(...)` builds a `{label(name)}` with {v} {unit} that pad to {pad} "
            f"on {self.ctx.target.name} ({waste}% of the padded work wasted)"
        )
        head = self._head_reason(call, expr, v)
        if head is not None:
            self.report(expr, f"{where}; an output head ({head}), so not fixed", severity=Severity.INFO)
            return
        advice = f"pass {rounded} (a multiple of {m})" + (f", or {pad} to fill the MXU" if pad != rounded else "")
        self.report(expr, f"{where}; {advice}", fix=self.make_fix(Replace(expr, cst.Integer(str(rounded)))))

    def _check_kernel(self, call: cst.Call, name: str, expr: cst.BaseExpression) -> None:
        shape = shape_of_variable(self.ctx, expr)
        if not shape or len(shape) < 3:
            return
        v = shape[_NN_CONVS[name]]
        if v <= 0 or v % self.ctx.target.channel_multiple == 0:
            return
        pad, rounded, waste = self._numbers(v)
        where = f"pad to {pad} on {self.ctx.target.name} ({waste}% of the padded work wasted)"
        short = label(name)
        if v <= 4:
            self.report(
                expr,
                f"`{short}` kernel has {v} output channels (an output head): {where}; set by the task, so not fixed",
                severity=Severity.INFO,
            )
            return
        self.report(
            expr,
            f"`{short}` kernel has {v} output channels: {where}; make it {rounded} "
            "(not auto-fixed: its bias and the next kernel's input dim must change too)",
        )

    def _numbers(self, v: int) -> tuple[int, int, int]:
        m = self.ctx.target.channel_multiple
        large = self.ctx.target.large
        pad = -(-v // large) * large
        rounded = -(-v // m) * m
        return pad, rounded, round(100 * (pad - v) / pad)

    # ---- output-head detection ------------------------------------------------
    def _head_reason(self, call: cst.Call, expr: cst.BaseExpression, v: int) -> str | None:
        if v <= 4:
            return f"{v} wide"
        for n in walk(expr):
            if isinstance(n, (cst.Name, cst.Attribute)):
                dn = dotted_name(n)
                if dn and _SEMANTIC_SIZE.search(dn.rsplit(".", 1)[-1]):
                    return f"sized by `{dn}`"
        act = keyword_value(call, "activation")
        if act is not None:
            a = self.ctx.const(act)
            if (isinstance(a, str) and a.lower() in HEAD_ACTIVATIONS) or self.ctx.resolve(act) in HEAD_CONSUMERS:
                return "softmax/sigmoid activation"
        stack = self.ctx.stack
        # The node that yields the layer's output: `Dense(10)(x)` or `tf.layers.dense(x, 10)`.
        i = len(stack)
        if stack and isinstance(stack[-1], cst.Call) and stack[-1].func is call:
            i -= 1
        app = call if i == len(stack) else stack[i]
        parent = stack[i - 1] if i >= 1 else None
        grand = stack[i - 2] if i >= 2 else None
        target: str | None = None
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            target = dotted_name(parent.targets[0].target)
        elif isinstance(parent, cst.Arg) and isinstance(grand, cst.Call):
            consumer = self.ctx.call_name(grand)
            if consumer is not None and consumer in HEAD_CONSUMERS:
                return "feeds " + consumer.rsplit(".", 1)[-1]
        elif isinstance(parent, cst.Element) and isinstance(grand, cst.List) and grand.elements[-1] is parent:
            if i >= 4 and isinstance(stack[i - 3], cst.Arg) and self.ctx.call_name(stack[i - 4]) == "keras.Sequential":
                return "last layer of the Sequential model"
        if target:
            if _HEAD_TARGET.search(target.rsplit(".", 1)[-1]):
                return f"stored as `{target}`"
            if "." not in target and self._consumed_by_head_op(target):
                return f"`{target}` feeds a softmax/loss"
        if app is not None and self._last_layer_of_model(call):
            return "the model's last layer"
        return None

    def _scope_facts(self) -> tuple[set[str], bool, cst.Call | None]:
        """For the enclosing function (or module), computed once: names passed to a
        head op, whether it builds a model, and its last layer call."""
        fn = self.ctx.enclosing_function()
        scope: cst.CSTNode = fn if fn is not None else self.ctx.module
        facts = self._facts.get(id(scope))
        if facts is None:
            consumed: set[str] = set()
            builds = False
            last = None
            for n in walk(scope):
                if not isinstance(n, cst.Call):
                    continue
                cn = self.ctx.call_name(n)
                if cn in HEAD_CONSUMERS:
                    consumed.update(a.value.value for a in n.args if isinstance(a.value, cst.Name))
                elif cn in MODEL_CONSTRUCTORS:
                    builds = True
                elif cn in _LAYERS:
                    last = n
            if fn is not None and fn.name.value in ("__init__", "build"):
                cls = self.ctx.enclosing_class()
                if cls is not None and any(self.ctx.resolve(b.value) == "keras.Model" for b in cls.bases):
                    builds = True
            facts = self._facts[id(scope)] = (consumed, builds, last)
        return facts

    def _consumed_by_head_op(self, var: str) -> bool:
        # bound once, so the consumer reads this layer's result
        return var in self._scope_facts()[0] and self.ctx.lookup(var) is not None

    def _last_layer_of_model(self, call: cst.Call) -> bool:
        _, builds, last = self._scope_facts()
        return builds and last is call

