"""Layers kept in containers (kerasfit.semantic.containers): which element an index or a
loop variable is, and the order a loop applies them in. Asked of ``kerasfit.semantic.dataflow``
(what a rule's ``ctx.container_contents`` / ``applied_in_order`` / ``layer_constructor`` ask,
and ``element_candidates``) on a real parse of each file."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from kerasfit.semantic.model import SemanticModel
from kerasfit.semantic.dataflow import applied_in_order, container_contents, element_candidates, layer_constructor


def _ctx(src: str) -> SemanticModel:
    src = textwrap.dedent(src)
    return SemanticModel(cst.parse_module(src), "<string>", source=src)


def _calls(ctx: SemanticModel) -> list[cst.Call]:
    """Every call of the file whose callee is an index or a plain name, in source order."""
    out = []
    for node, _ in ctx.index.calls:
        if isinstance(node.func, (cst.Subscript, cst.Name)) and node.args:
            out.append(node)
    return sorted(out, key=lambda c: ctx.index.order[id(c)])


def _layer(ctx: SemanticModel, call: cst.Call) -> str | None:
    found = layer_constructor(ctx, call.func)
    return found[1].rsplit(".", 1)[-1] if found else None


def _code(ctx: SemanticModel, node: cst.CSTNode) -> str:
    return ctx.module.code_for_node(node)


PERIODIC = """
    import keras

    class Encoder(keras.layers.Layer):
        def __init__(self, widths):
            super().__init__()
            self.down = []
            for w in widths:
                self.down.append(keras.layers.ZeroPadding2D(1))
                self.down.append(keras.layers.Conv2D(w, 3, strides=2))
                self.down.append(keras.layers.ReLU())

        def call(self, x, j):
            k = 0
            for _ in range(2):
                x = self.down[k](x)
                x = self.down[k + 1](x)
                x = self.down[k + 2](x)
                k += 3
            x = self.down[-1](x)
            x = self.down[j](x)
            return self.down[2 * j + 1](x)
"""


def test_index_into_a_repeated_period():
    ctx = _ctx(PERIODIC)
    apps = [c for c in _calls(ctx) if isinstance(c.func, cst.Subscript)]
    # k counts by the period (3): k, k + 1, k + 2, then -1 (the last of a period);
    # an unknown j is any element; 2 * j + 1 is not fixed modulo 3 either
    assert [_layer(ctx, c) for c in apps] == ["ZeroPadding2D", "Conv2D", "ReLU", "ReLU", None, None]
    assert len(element_candidates(ctx, apps[4].func)) == 3
    c = container_contents(ctx, apps[0].func.value)
    assert c is not None and c.repeats and len(c.items) == 3


def test_even_index_in_a_period_of_two():
    ctx = _ctx("""
        import keras

        class Down(keras.layers.Layer):
            def __init__(self, n):
                super().__init__()
                self.steps = []
                for _ in range(n):
                    self.steps.append(keras.layers.ZeroPadding2D(1))
                    self.steps.append(keras.layers.Conv2D(8, 3))

            def call(self, x):
                for i in range(0, len(self.steps), 2):
                    x = self.steps[i](x)
                    x = self.steps[i + 1](x)
                for j in range(len(self.steps) // 2):
                    x = self.steps[2 * j + 1](x)
                return x
    """)
    assert [_layer(ctx, c) for c in _calls(ctx) if isinstance(c.func, cst.Subscript)] == ["ZeroPadding2D", "Conv2D", "Conv2D"]


@pytest.mark.parametrize("src", [
    # extend(): changed other than by one append at a time
    """
    import keras
    class L(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.s = []
            self.s.append(keras.layers.ZeroPadding2D(1))
            self.s.extend([keras.layers.Conv2D(8, 3)])
        def call(self, x):
            return self.s[1](self.s[0](x))
    """,
    # appended from two blocks: no single period
    """
    import keras
    class L(keras.layers.Layer):
        def __init__(self, n):
            super().__init__()
            self.s = []
            self.s.append(keras.layers.ZeroPadding2D(1))
            for _ in range(n):
                self.s.append(keras.layers.Conv2D(8, 3))
        def call(self, x):
            return self.s[1](self.s[0](x))
    """,
    # a `continue` between the appends may skip the second one
    """
    import keras
    class L(keras.layers.Layer):
        def __init__(self, n):
            super().__init__()
            self.s = []
            for i in range(n):
                self.s.append(keras.layers.ZeroPadding2D(1))
                if i:
                    continue
                self.s.append(keras.layers.Conv2D(8, 3))
        def call(self, x):
            return self.s[1](self.s[0](x))
    """,
    # assigned twice
    """
    import keras
    class L(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.s = [keras.layers.ZeroPadding2D(1), keras.layers.Conv2D(8, 3)]
        def build(self, shape):
            self.s = [keras.layers.Conv2D(8, 3), keras.layers.ZeroPadding2D(1)]
        def call(self, x):
            return self.s[1](self.s[0](x))
    """,
    # aliased: the alias may be changed anywhere
    """
    import keras
    class L(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.s = [keras.layers.ZeroPadding2D(1), keras.layers.Conv2D(8, 3)]
            other = self.s
        def call(self, x):
            return self.s[1](self.s[0](x))
    """,
    # an element replaced by index with a computed key
    """
    import keras
    class L(keras.layers.Layer):
        def __init__(self, k):
            super().__init__()
            self.s = [keras.layers.ZeroPadding2D(1), keras.layers.Conv2D(8, 3)]
            self.s[k] = keras.layers.ReLU()
        def call(self, x):
            return self.s[1](self.s[0](x))
    """,
])
def test_unknown_containers_answer_nothing(src):
    ctx = _ctx(src)
    apps = [c for c in _calls(ctx) if isinstance(c.func, cst.Subscript)]
    assert apps and all(_layer(ctx, c) is None for c in apps)
    assert container_contents(ctx, apps[0].func.value) is None


def test_literal_list_dict_and_local_alias():
    ctx = _ctx("""
        import keras
        from keras import layers

        class Net(keras.Model):
            def __init__(self):
                super().__init__()
                self.pair = [layers.ZeroPadding2D(1), layers.Conv2D(8, 3)]
                self.parts = {"pad": layers.ZeroPadding2D(2), "conv": layers.Conv2D(16, 5)}
                blocks = []
                for _ in range(3):
                    conv = layers.Conv2D(32, 3)
                    blocks.append(conv)
                self.blocks = blocks

            def call(self, x):
                x = self.pair[1](self.pair[0](x))
                x = self.pair[-1](x)
                x = self.parts["conv"](self.parts["pad"](x))
                return self.blocks[7](x)
    """)
    apps = [c for c in _calls(ctx) if isinstance(c.func, cst.Subscript)]
    assert [_layer(ctx, c) for c in apps] == ["Conv2D", "ZeroPadding2D", "Conv2D", "Conv2D", "ZeroPadding2D", "Conv2D"]
    # the local's appended element is a name bound to the constructor
    assert _code(ctx, layer_constructor(ctx, apps[-1].func)[0]) == "layers.Conv2D(32, 3)"


def test_loop_variables_over_containers():
    ctx = _ctx("""
        import keras

        class Fuse(keras.layers.Layer):
            def __init__(self, n):
                super().__init__()
                self.pads = [keras.layers.ZeroPadding2D(1) for _ in range(n)]
                self.convs = [keras.layers.Conv2D(64, 3) for _ in range(n)]
                self.mixed = [keras.layers.ZeroPadding2D(1), keras.layers.Conv2D(8, 3)]

            def call(self, xs):
                ys = [conv(x) for conv, x in zip(self.convs, xs)]
                for i, pad in enumerate(self.pads):
                    ys[i] = pad(ys[i])
                for layer in self.mixed:
                    ys[0] = layer(ys[0])
                return ys
    """)
    by_text = {_code(ctx, c): c for c in _calls(ctx)}
    assert _layer(ctx, by_text["conv(x)"]) == "Conv2D"
    assert _layer(ctx, by_text["pad(ys[i])"]) == "ZeroPadding2D"
    assert _layer(ctx, by_text["layer(ys[0])"]) is None  # either of two layers
    assert len(element_candidates(ctx, by_text["layer(ys[0])"].func)) == 2


def test_applied_in_order_needs_a_chain():
    ctx = _ctx("""
        import keras

        class Stack(keras.layers.Layer):
            def __init__(self):
                super().__init__()
                self.stages = [keras.layers.ZeroPadding2D(1), keras.layers.Conv2D(8, 3), keras.layers.ReLU()]

            def call(self, x, y):
                for stage in self.stages:
                    x = stage(x)
                for i in range(len(self.stages)):
                    x = self.stages[i](x, training=False)
                for stage in self.stages:
                    y = stage(x)
                for stage in self.stages:
                    x = stage(x)
                    x = x * 2
                for stage in self.stages:
                    if y is None:
                        break
                    x = stage(x)
                return x
    """)
    apps = [c for c in _calls(ctx) if _code(ctx, c.func) in ("stage", "self.stages[i]")]
    orders = [applied_in_order(ctx, c) for c in apps]
    assert [o is not None for o in orders] == [True, True, False, False, False]
    pairs = [(_code(ctx, a), _code(ctx, b)) for a, b in orders[0].adjacent()]
    # a literal list is applied once: no pair wraps around from the last layer to the first
    assert pairs == [("keras.layers.ZeroPadding2D(1)", "keras.layers.Conv2D(8, 3)"), ("keras.layers.Conv2D(8, 3)", "keras.layers.ReLU()")]


def test_sequential_built_with_add_is_a_container():
    ctx = _ctx("""
        from keras.models import Sequential
        from keras.layers import Conv2D, ZeroPadding2D

        model = Sequential()
        model.add(ZeroPadding2D((1, 1)))
        model.add(Conv2D(64, (3, 3)))
        model.add(ZeroPadding2D((1, 1)))
        model.add(Conv2D(64, (3, 3)))
    """)
    c = container_contents(ctx, ctx.module.body[2].body[0].targets[0].target)
    assert c is not None and not c.repeats and len(c.items) == 4


def test_a_container_handed_to_other_code_is_unknown():
    ctx = _ctx("""
        from keras.models import Sequential
        from keras.layers import BatchNormalization, Conv2D, ZeroPadding2D

        def add_norm(model):
            model.add(BatchNormalization())

        model = Sequential()
        model.add(ZeroPadding2D((1, 1)))
        add_norm(model)
        model.add(Conv2D(64, (3, 3)))
        print(len(model.layers))
    """)
    target = ctx.module.body[3].body[0].targets[0].target
    assert container_contents(ctx, target) is None


def test_comprehension_index_takes_its_own_range():
    ctx = _ctx("""
        import keras

        class Down(keras.layers.Layer):
            def __init__(self, n):
                super().__init__()
                self.steps = []
                for _ in range(n):
                    self.steps.append(keras.layers.ZeroPadding2D(1))
                    self.steps.append(keras.layers.Conv2D(8, 3))

            def call(self, x):
                i = 0  # a different `i` from the comprehensions' own
                odd = [self.steps[i](x) for i in range(1, len(self.steps), 2)]
                any_ = [self.steps[i](x) for i in range(len(self.steps))]
                return odd, any_, self.steps[i](x)
    """)
    apps = [c for c in _calls(ctx) if isinstance(c.func, cst.Subscript)]
    assert [_layer(ctx, c) for c in apps] == ["Conv2D", None, "ZeroPadding2D"]
