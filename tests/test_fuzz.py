"""Fuzzing ``check`` and ``--fix --unsafe-fixes``: generated programs (hypothesmith),
generated Keras code, and mutated fixture files.

Every input must be answered without an exception; a fixed file must parse, be a fixed
point of a second ``--fix``, and keep every top-level statement no fix touched.
Bounded by default (CI); ``KERASFIT_FUZZ_EXAMPLES=N`` runs N examples per test.
"""

from __future__ import annotations

import ast
import os
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kerasfit.engine.settings import LintSettings
from kerasfit.core.types import allowed
from kerasfit.engine.fix import fix_source
from kerasfit.engine.lint import lint_source
from kerasfit.engine.registry import all_rules

pytestmark = pytest.mark.slow  # long fuzz runs

hypothesmith = pytest.importorskip("hypothesmith")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = int(os.environ.get("KERASFIT_FUZZ_EXAMPLES", "20"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,  # a shared 2-core runner: time is not the property; hangs hit CI's limit
    suppress_health_check=list(HealthCheck),
    derandomize=not os.environ.get("KERASFIT_FUZZ_EXAMPLES"),  # CI: the same programs each run
    database=None,
)
SETTINGS = LintSettings(list(all_rules().values()))
FIXTURES = sorted(p for p in (ROOT / "fixtures").rglob("*.py") if "crosscheck" not in p.parts or p.parent.name == "crosscheck")


def _parses(text: str) -> bool:
    try:
        compile(text, "<fuzz>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def _stmt_dumps(text: str, skip_lines: set[int]) -> Counter:
    tree = ast.parse(text)
    out: Counter = Counter()
    for s in tree.body:
        first = min([s.lineno, *(d.lineno for d in getattr(s, "decorator_list", ()))])
        if skip_lines.isdisjoint(range(first, (s.end_lineno or s.lineno) + 1)):
            out[ast.dump(s)] += 1
    return out


def check_invariants(source: str) -> None:
    """What must hold for any input text."""
    out = lint_source(source, "fuzz.py", SETTINGS)
    for d in out.diagnostics:
        assert "\n" not in d.message, d
        assert d.code != "KF002", d  # a rule crashed
    fixed = fix_source(source, "fuzz.py", SETTINGS, unsafe=True)
    if not _parses(source) or out.module is None:
        assert fixed.source == source
        return
    assert _parses(fixed.source), fixed.source
    again = fix_source(fixed.source, "fuzz.py", SETTINGS, unsafe=True)
    assert again.source == fixed.source, "a second --fix changed the file"
    # statements no offered fix touches keep their meaning
    touched: set[int] = set()
    for d in out.diagnostics:
        if allowed(d.fix, True):
            for e in d.fix.edits:
                touched.update(range(e.row, e.end_row + 1))
    if fixed.applied and not touched:
        return
    before = _stmt_dumps(source, touched)
    after = Counter(ast.dump(s) for s in ast.parse(fixed.source).body)
    missing = before - after
    assert not missing, f"fix changed untouched statements: {list(missing)[:1]}"


@FUZZ
@given(hypothesmith.from_grammar())
def test_generated_programs(source):
    check_invariants(source)


@FUZZ
@given(hypothesmith.from_node())
def test_generated_syntax_trees(source):
    check_invariants(source)


# ---- generated Keras code: programs the rules actually have something to say about -----

_MODULES = ["import tensorflow as tf\nL = tf.keras.layers", "import tf_keras as keras\nL = keras.layers", "import keras\nL = keras.layers"]
_INT = st.sampled_from([1, 3, 7, 8, 16, 30, 32, 64, 100, 127, 128, 130, 256, 1000])


@st.composite
def _layer(draw) -> str:
    kind = draw(st.sampled_from(["Conv2D", "Dense", "BatchNormalization", "Conv1D", "DepthwiseConv2D", "Permute", "ZeroPadding2D", "MaxPooling2D", "LSTM", "Embedding"]))
    n = draw(_INT)
    if kind == "Conv2D":
        pad = draw(st.sampled_from(["'same'", "'valid'", "padding"]))
        fmt = draw(st.sampled_from(["", ", data_format='channels_first'", ", data_format=fmt"]))
        return f"L.Conv2D({n}, {draw(st.sampled_from([1, 3, 7]))}, padding={pad}{fmt})"
    if kind == "Dense":
        return f"L.Dense({n}, activation='relu')"
    if kind == "BatchNormalization":
        return f"L.BatchNormalization({draw(st.sampled_from(['', 'fused=False', 'fused=True', 'momentum=0.9, fused=False  # keep']))})"
    if kind == "Conv1D":
        return f"L.Conv1D(filters={n}, kernel_size=3)"
    if kind == "DepthwiseConv2D":
        return "L.DepthwiseConv2D(3)"
    if kind == "Permute":
        return f"L.Permute({draw(st.sampled_from(['(2, 1)', '(3, 1, 2)', '(1, 2, 3)']))})"
    if kind == "ZeroPadding2D":
        return "L.ZeroPadding2D(1)"
    if kind == "MaxPooling2D":
        return "L.MaxPooling2D()"
    if kind == "LSTM":
        return f"L.LSTM({n})"
    return f"L.Embedding({n}, {draw(_INT)})"


@st.composite
def keras_programs(draw) -> str:
    lines = [draw(st.sampled_from(_MODULES)), f"fmt = {draw(st.sampled_from(['channels_first', 'channels_last']))!r}"]
    lines.append(f"padding = {draw(st.sampled_from(['same', 'valid']))!r}")
    body = []
    for _ in range(draw(st.integers(1, 8))):
        body.append(f"x = {draw(_layer())}(x)")
    style = draw(st.sampled_from(["function", "module", "helper"]))
    if style == "function":
        lines.append("def build_model(x):")
        lines.extend("    " + b for b in body)
        lines.append("    return x")
    elif style == "helper":
        lines.append(f"def block(x, n={draw(_INT)}):")
        lines.extend("    " + b.replace(f"({draw(_INT)}", "(n") for b in body)
        lines.append("    return x")
        for _ in range(draw(st.integers(1, 3))):
            lines.append(f"x = block(x, {draw(_INT)})")
    else:
        lines.append("x = L.Input((32, 32, 3))")
        lines.extend(body)
    if draw(st.booleans()):
        lines.append(f"ds = tf.data.Dataset.range(10).batch({draw(_INT)})")
    if draw(st.booleans()):
        lines.append("model.compile(optimizer='adam', loss='mse',  # keep: tuned\n)")
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    return newline.join(lines) + newline


@FUZZ
@given(keras_programs())
def test_generated_keras_code(source):
    check_invariants(source)


# ---- mutated fixtures ------------------------------------------------------------------------


@st.composite
def mutated_fixture(draw) -> str:
    path = draw(st.sampled_from(FIXTURES))
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "bytes", "truncate", "indent"]))
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "bytes":
            junk = draw(st.binary(min_size=1, max_size=8)).decode("latin-1")
            k = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:k] + junk + lines[i][k:]
        elif op == "truncate":
            k = draw(st.integers(0, len(lines[i])))
            lines = lines[:i] + [lines[i][:k]]
        else:
            lines[i] = draw(st.sampled_from([" ", "\t", "    "])) + lines[i]
    return "".join(lines)


@FUZZ
@given(mutated_fixture())
def test_mutated_fixtures(source):
    check_invariants(source)


def test_every_fixture_holds_the_invariants():
    for path in FIXTURES:
        check_invariants(path.read_text(encoding="utf-8"))
