"""Property tests: on generated Keras-ish sources, linting never crashes, positions stay inside
the file, and fixes always re-parse and are idempotent."""

from __future__ import annotations

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kerasfit.engine.settings import LintSettings
from kerasfit.engine.fix import fix_source
from kerasfit.engine.lint import lint_source
from kerasfit.engine.registry import all_rules
from kerasfit.core.types import TARGETS

pytestmark = pytest.mark.slow  # long property runs

IMPORTS = [
    "import tensorflow as tf",
    "import tensorflow.compat.v1 as tf",
    "import tf_keras as keras",
    "import keras",
    "from tensorflow import keras",
    "from tensorflow.keras import layers as L",
    "from tensorflow.keras import layers",
    "from tf_keras.layers import BatchNormalization as BN",
    "from keras.layers import BatchNormalization, Conv2D, Dense",
    "from tensorflow.keras.layers import *",
]
CALLEES = [
    "tf.keras.layers.BatchNormalization", "keras.layers.BatchNormalization", "L.BatchNormalization",
    "layers.BatchNormalization", "BN", "BatchNormalization", "tf.layers.batch_normalization",
    "tf.compat.v1.layers.batch_normalization", "tf.nn.batch_normalization", "layers.Conv2D", "Conv2D",
    "keras.layers.Dense", "Dense", "tf.keras.layers.Conv2D", "L.Dense", "tf.pad", "tf.data.Dataset.from_tensor_slices",
    "model.fit", "tf.keras.Sequential", "tf.keras.mixed_precision.set_global_policy",
]
VALUES = ["False", "True", "None", "FUSED", "30", "32", "3", "(3, 3)", "'same'", "'valid'", "x", "-1", "0.9",
          "7 * 4", "n // 2", "'bfloat16'", "[1, 2]", "lambda: 0"]
KEYWORDS = ["fused", "axis", "filters", "units", "kernel_size", "padding", "momentum", "renorm", "name",
            "batch_size", "dtype", "activation", "strides", "training"]
COMMENTS = ["", "  # noqa", "  # noqa: KF101", "  # noqa: E501", "  # kerasfit: ignore[KF101]", "  # note: é 🚀"]

ident = st.sampled_from(["x", "y", "h", "bn", "conv", "out", "n", "FUSED", "model", "ds"])


@st.composite
def call(draw, depth=0):
    fn = draw(st.sampled_from(CALLEES))
    args = draw(st.lists(st.sampled_from(VALUES + ["x", "h"]), max_size=2))
    kws = draw(st.lists(st.tuples(st.sampled_from(KEYWORDS), st.sampled_from(VALUES)), max_size=3, unique_by=lambda t: t[0]))
    parts = args + [f"{k}={v}" for k, v in kws]
    sep = draw(st.sampled_from([", ", ",\n    ", " ,", ","]))
    trailing = draw(st.sampled_from(["", ","])) if parts else ""
    text = f"{fn}({sep.join(parts)}{trailing})"
    if depth < 1 and draw(st.booleans()):
        text = f"{text}({draw(call(depth + 1))})"
    return text


@st.composite
def statement(draw):
    kind = draw(st.integers(0, 6))
    c = draw(call())
    comment = draw(st.sampled_from(COMMENTS))
    name = draw(ident)
    if kind == 0:
        return [f"{name} = {c}{comment}"]
    if kind == 1:
        return [f"def build_{name}(x, n=4):", f"    {name} = {c}{comment}", f"    return {name}"]
    if kind == 2:
        return ["class Block(tf.keras.Model):", "    def call(self, x):", f"        return {c}{comment}"]
    if kind == 3:
        return [f"{name} = [{c} for _ in range(3)]{comment}"]
    if kind == 4:
        return [f"{name} = {draw(st.sampled_from(VALUES))}"]
    if kind == 5:
        return [f"if {name}:", f"    {c}{comment}", "else:", "    pass"]
    return [f"{name} = {c}.{draw(ident)}{comment}"]


@st.composite
def source(draw):
    lines = draw(st.lists(st.sampled_from(IMPORTS), min_size=1, max_size=3))
    for stmt in draw(st.lists(statement(), min_size=1, max_size=6)):
        lines.extend(stmt)
        if draw(st.integers(0, 4)) == 0:
            lines.append("")
    newline = draw(st.sampled_from(["\n", "\n", "\r\n"]))
    text = newline.join(lines) + draw(st.sampled_from([newline, ""]))
    if draw(st.integers(0, 9)) == 0:  # sometimes break it
        pos = draw(st.integers(0, len(text)))
        text = text[:pos] + draw(st.sampled_from(["(", ":", "def", "\t", "'"])) + text[pos:]
    return text


def check_properties(src: str, lint_settings: LintSettings) -> None:
    out = lint_source(src, "gen.py", lint_settings)
    crashed = [d.message for d in out.diagnostics if d.code == "KF002"]
    assert not crashed, crashed
    line_starts = [0]
    for i, ch in enumerate(src):
        if ch == "\n" or (ch == "\r" and src[i + 1 : i + 2] != "\n"):
            line_starts.append(i + 1)
    lines = src.splitlines(keepends=True) or [""]
    for d in out.diagnostics:
        assert 1 <= d.row <= len(lines) + 1 and 1 <= d.end_row <= len(lines) + 1, d
        assert (d.row, d.column) <= (d.end_row, d.end_column), d
        if d.row <= len(lines):
            assert 0 <= d.column <= len(lines[d.row - 1]), d
        if d.code != "KF001":
            assert 0 <= d.start <= d.end <= len(src), d
            assert line_starts[d.row - 1] + d.column == d.start, d
            assert line_starts[d.end_row - 1] + d.end_column == d.end, d
        if d.fix is not None:
            for e in d.fix.edits:
                assert 0 <= e.start <= e.end <= len(src), e
    if out.module is None:
        assert [d.code for d in out.diagnostics] == ["KF001"]
        return
    if out.recovered:  # linted around a syntax error: reported, never fixed
        assert "KF001" in [d.code for d in out.diagnostics]
        assert fix_source(src, "gen.py", lint_settings, unsafe=True).source == src
        return
    for unsafe in (False, True):
        fixed = fix_source(src, "gen.py", lint_settings, unsafe=unsafe)
        assert fixed.error is None, fixed.error
        cst.parse_module(fixed.source)
        again = fix_source(fixed.source, "gen.py", lint_settings, unsafe=unsafe)
        assert again.source == fixed.source, f"not idempotent:\n{fixed.source}\n---\n{again.source}"
        assert again.applied == 0


COMMON = settings(max_examples=120, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


@COMMON
@given(source())
def test_kf101_properties(src):
    check_properties(src, LintSettings([all_rules()["KF101"]]))


@COMMON
@given(source(), st.sampled_from(sorted(TARGETS)))
def test_all_rules_properties(src, target):
    """Every registered rule, every target (rules being written may surface here first)."""
    check_properties(src, LintSettings(list(all_rules().values()), TARGETS[target]))
