"""Values a safe fix rests on hold at every construction (issue 26, item 1): inside
``Values.every_construction`` a parameter is never its default unless the callable is
private to the project and every call of it is found; flags, config records and dicts
handed in are not followed; and the blocker is said in words a finding can quote."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst

from kerasfit.semantic.index import ProjectIndex
from kerasfit.semantic.model import SemanticModel
from kerasfit.semantic.nodes import UNKNOWN


def _model(src: str, filename: str = "m.py", project: ProjectIndex | None = None) -> SemanticModel:
    source = textwrap.dedent(src)
    return SemanticModel(cst.parse_module(source), filename, source=source, project=project)


def _kwarg(m: SemanticModel, keyword: str) -> cst.BaseExpression:
    """The value of the first ``keyword=`` argument in the file."""
    for call, _ in m.index.calls:
        for a in call.args:
            if a.keyword is not None and a.keyword.value == keyword:
                return a.value
    raise AssertionError(f"no {keyword}= in the file")


def _pinned(m: SemanticModel, node: cst.BaseExpression) -> tuple[object, list[str]]:
    with m.values.every_construction() as why:
        value = m.values.const(node)
    return value, list(why)


def test_a_public_classes_parameter_is_not_its_default():
    m = _model(
        """
        import keras

        class Block(keras.layers.Layer):
            def __init__(self, strides=1):
                super().__init__()
                self.conv = keras.layers.Conv2D(8, 3, strides=strides)
        """
    )
    node = _kwarg(m, "strides")
    assert m.values.const(node) == 1  # what detection reads (a may-analysis)
    value, why = _pinned(m, node)
    assert value is UNKNOWN
    assert why == ["`strides` is a parameter of `Block`, which code outside this file can call with another value "
                   "than its default 1"]
    # asked again (a memo hit), the blocker is said again
    assert _pinned(m, node) == (UNKNOWN, why)


def test_through_an_attribute_set_from_the_parameter():
    m = _model(
        """
        import keras

        def conv_block(x, dilation=1):
            return keras.layers.Conv2D(8, 3, dilation_rate=dilation)(x)
        """
    )
    value, why = _pinned(m, _kwarg(m, "dilation_rate"))
    assert value is UNKNOWN and why[0].startswith("`dilation` is a parameter of `conv_block`")


def test_a_private_functions_calls_decide():
    src = """
        import keras

        def _stem(x, strides=1):
            return keras.layers.Conv2D(8, 3, strides=strides)(x)

        def build(x):
            return _stem(_stem(x), strides={second})
        """
    same = _model(src.format(second=1))
    assert _pinned(same, _kwarg(same, "strides")) == (1, [])
    differ = _model(src.format(second=2))
    assert _pinned(differ, _kwarg(differ, "strides"))[0] is UNKNOWN


def test_a_call_that_forwards_kwargs_blocks():
    m = _model(
        """
        import keras

        def _stem(x, strides=1):
            return keras.layers.Conv2D(8, 3, strides=strides)(x)

        def build(x, **block_kwargs):
            return _stem(x, **block_kwargs)
        """
    )
    value, why = _pinned(m, _kwarg(m, "strides"))
    assert value is UNKNOWN and "passes its arguments through `*args`/`**kwargs`" in why[0]


def test_a_private_function_used_as_a_value_is_not_fully_called_here():
    m = _model(
        """
        import keras

        def _stem(x, strides=1):
            return keras.layers.Conv2D(8, 3, strides=strides)(x)

        BLOCKS = {"stem": _stem}
        y = _stem(x)
        """
    )
    value, why = _pinned(m, _kwarg(m, "strides"))
    assert value is UNKNOWN and "also used as a value" in why[0]


def test_a_closure_is_private():
    m = _model(
        """
        import keras

        def build(x):
            def stem(y, strides=1):
                return keras.layers.Conv2D(8, 3, strides=strides)(y)
            return stem(stem(x))
        """
    )
    assert _pinned(m, _kwarg(m, "strides")) == (1, [])


def test_a_private_function_of_a_module_the_tree_imports_is_not_private(tmp_path: Path):
    lib = tmp_path / "blocks.py"
    lib.write_text(textwrap.dedent(
        """
        import keras

        def _stem(x, strides=1):
            return keras.layers.Conv2D(8, 3, strides=strides)(x)

        y = _stem(x)
        """
    ))
    (tmp_path / "model.py").write_text("from blocks import _stem\nz = _stem(x, strides=2)\n")
    m = _model(lib.read_text(), str(lib), ProjectIndex([tmp_path]))
    value, why = _pinned(m, _kwarg(m, "strides"))
    assert value is UNKNOWN and why[0].startswith("`strides` is a parameter of `_stem`")
    alone = _model(lib.read_text(), str(lib), ProjectIndex([lib]))
    assert _pinned(alone, _kwarg(alone, "strides")) == (1, [])


def test_flags_config_records_and_dicts_handed_in_are_not_followed():
    m = _model(
        """
        import keras
        from absl import flags

        flags.DEFINE_integer("stride", 1, "conv stride")
        FLAGS = flags.FLAGS
        hp = HParams(dilation=1)

        def model_fn(features, params):
            a = keras.layers.Conv2D(8, 3, strides=FLAGS.stride)
            b = keras.layers.Conv2D(8, 3, dilation_rate=hp.dilation)
            return keras.layers.Conv2D(8, 3, groups=params["groups"])
        CFG = {"groups": 1}
        """
    )
    for keyword, said in (("strides", "`FLAGS.stride` is a command-line flag"),
                          ("dilation_rate", "`hp.dilation` is a field of a config object"),
                          ("groups", "`params['groups']` is read from a dict handed in")):
        node = _kwarg(m, keyword)
        assert m.values.const(node) == 1, keyword
        value, why = _pinned(m, node)
        assert value is UNKNOWN and why[0].startswith(said), (keyword, why)


def test_constants_and_literals_hold_everywhere():
    m = _model(
        """
        import keras
        STRIDES = 1

        class Block(keras.layers.Layer):
            def __init__(self):
                super().__init__()
                self.conv = keras.layers.Conv2D(8, 3, strides=STRIDES, dilation_rate=(1, 1))
        """
    )
    assert _pinned(m, _kwarg(m, "strides")) == (1, [])
    assert _pinned(m, _kwarg(m, "dilation_rate")) == ((1, 1), [])


def test_a_public_classes_class_attribute_is_not_its_value_everywhere():
    src = """
        import keras

        class {name}(keras.layers.Layer):
            strides = 1

            def __init__(self):
                super().__init__()
                self.conv = keras.layers.Conv2D(8, 3, strides=self.strides)
        """
    public = _model(src.format(name="Block"))
    value, why = _pinned(public, _kwarg(public, "strides"))
    assert value is UNKNOWN and why[0].startswith("`self.strides` is a class attribute of `Block`")
    private = _model(src.format(name="_Block"))
    assert _pinned(private, _kwarg(private, "strides")) == (1, [])
