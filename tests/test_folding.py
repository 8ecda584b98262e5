"""One constant folder (kerasfit.semantic.folding): the same arithmetic, limits and budget
for the libcst model of the checked file and the ``ast`` summaries of project functions.

Each limit is shown through both walkers on real parsed code: ``SemanticModel.values.const`` /
``lint_source`` for libcst, ``built_layer`` over a real ``ProjectIndex`` for ``ast``."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import libcst as cst
import pytest

from kerasfit.crosscheck.sizes import script_sizes
from kerasfit.engine.settings import LintSettings
from kerasfit.engine.lint import lint_source
from kerasfit.engine.registry import all_rules
from kerasfit.semantic.folding import (
    BINARY,
    CALL_DEPTH,
    CALL_STEPS,
    COMPARE,
    CONST_DEPTH,
    FOLD_DEPTH,
    MAX_EXPONENT,
    MAX_INT_BITS,
    MAX_SEQUENCE,
    MAX_VALUES,
    UNARY,
    UNKNOWN,
    VALUES_DEPTH,
    Budget,
    bounded,
)
from kerasfit.semantic.index import ProjectIndex
from kerasfit.semantic.model import SemanticModel
from kerasfit.semantic.nodes import walk
from kerasfit.semantic.summaries import TOP, Layer, built_layer, consts


# ---- helpers: one libcst file, one project function ------------------------------------------
def _fold(source: str) -> Any:
    """What the libcst model folds the last statement's value to (``y = <expr>``)."""
    module = cst.parse_module(textwrap.dedent(source))
    ctx = SemanticModel(module, "m.py", source=module.code)
    stmt = cst.ensure_type(module.body[-1], cst.SimpleStatementLine).body[0]
    return ctx.values.const(cst.ensure_type(stmt, cst.Assign).value)


def _filters_found(expr: str) -> list[str]:
    """KF102's findings for ``Conv2D(<expr>, 3)`` in a checked file."""
    src = f"import tensorflow as tf\nx = tf.keras.layers.Conv2D({expr}, 3)\n"
    return [f"{d.fields['width']} {d.fields['unit']}" for d in lint_source(src, "m.py", LintSettings([all_rules()["KF102"]])).diagnostics]


def _summary(tmp_path: Path, source: str, *args: Any, fn: str = "conv") -> Layer | None:
    """The layer a call of project function ``fn`` builds, read through the project index."""
    (tmp_path / "lib.py").write_text("import tensorflow as tf\n" + textwrap.dedent(source))
    index = ProjectIndex()
    return built_layer(index, index.facts(tmp_path / "lib.py"), fn, list(args), {})


def _first_arg(tmp_path: Path, expr: str, *args: Any) -> Any:
    """The value set of the first argument of ``Conv2D(<expr>, 3)`` built by ``conv(n)``."""
    layer = _summary(tmp_path, f"def conv(n):\n    return tf.keras.layers.Conv2D({expr}, 3)\n", *args)
    assert layer is not None
    return layer.args[0]


# ---- one table for both trees ---------------------------------------------------------------
@pytest.mark.parametrize(("table", "cst_op", "ast_op"), [
    (BINARY, cst.Add, ast.Add), (BINARY, cst.Subtract, ast.Sub), (BINARY, cst.Multiply, ast.Mult),
    (BINARY, cst.Divide, ast.Div), (BINARY, cst.FloorDivide, ast.FloorDiv), (BINARY, cst.Modulo, ast.Mod),
    (BINARY, cst.Power, ast.Pow), (UNARY, cst.Minus, ast.USub), (UNARY, cst.Plus, ast.UAdd),
    (COMPARE, cst.Equal, ast.Eq), (COMPARE, cst.NotEqual, ast.NotEq), (COMPARE, cst.LessThan, ast.Lt),
    (COMPARE, cst.LessThanEqual, ast.LtE), (COMPARE, cst.GreaterThan, ast.Gt),
    (COMPARE, cst.GreaterThanEqual, ast.GtE), (COMPARE, cst.Is, ast.Is), (COMPARE, cst.IsNot, ast.IsNot),
    (COMPARE, cst.In, ast.In), (COMPARE, cst.NotIn, ast.NotIn),
])
def test_libcst_and_ast_operators_share_one_operation(table: Any, cst_op: type, ast_op: type) -> None:
    assert table[cst_op] is not None and table[cst_op] is table[ast_op]


def test_operators_not_folded_and_foreign_classes_have_no_operation() -> None:
    class Add:  # not a node class of either tree
        pass

    for op in (cst.LeftShift, ast.LShift, cst.BitOr, ast.BitOr, cst.MatrixMultiply, ast.MatMult, Add):
        assert BINARY[op] is None
    assert UNARY[cst.Not] is None and UNARY[ast.Invert] is None


def test_the_build_child_can_read_it_without_libcst() -> None:
    # the cross-check's script reader (run in the build child) folds with it
    code = "import sys, kerasfit.crosscheck.slicing; print('libcst' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# ---- arithmetic and its limits, through both walkers ----------------------------------------
def test_arithmetic_folds_alike_in_both_walkers(tmp_path: Path) -> None:
    assert _fold("y = 2 ** 6 + 36\n") == 100 and _filters_found("2 ** 6 + 36") == ["100 filters"]
    assert _first_arg(tmp_path, "2 ** n + 36", consts(6)) == consts(100)  # ``**`` in a summary too
    assert _fold("y = -(-100)\n") == 100 and _first_arg(tmp_path, "-n", consts(-100)) == consts(100)
    assert _fold("y = +100\n") == 100 and _first_arg(tmp_path, "+n", consts(100)) == consts(100)
    assert _fold("y = 7 % 4 + 7 // 2 + 1 / 2\n") == 6.5 and _first_arg(tmp_path, "n % 4 + n // 2 + 1 / 2", consts(7)) == consts(6.5)


def test_a_power_past_the_exponent_limit_is_unknown(tmp_path: Path) -> None:
    assert _fold(f"y = 2 ** {MAX_EXPONENT}\n") == 2**MAX_EXPONENT
    assert _fold(f"y = 2 ** {MAX_EXPONENT + 1}\n") is UNKNOWN
    assert _filters_found(f"100 + 0 * 2 ** {MAX_EXPONENT + 1}") == []
    assert _first_arg(tmp_path, "2 ** n", consts(MAX_EXPONENT)) == consts(2**MAX_EXPONENT)
    assert _first_arg(tmp_path, "2 ** n", consts(MAX_EXPONENT + 1)) is TOP


def test_an_integer_power_past_the_size_limit_is_unknown(tmp_path: Path) -> None:
    big = 2**MAX_EXPONENT  # 65 bits: 65 * 64 > MAX_INT_BITS
    assert (big.bit_length() * MAX_EXPONENT > MAX_INT_BITS) and (2 ** 63).bit_length() * MAX_EXPONENT <= MAX_INT_BITS
    assert _fold(f"y = (2 ** 63) ** {MAX_EXPONENT}\n") == (2**63) ** MAX_EXPONENT
    assert _fold(f"y = (2 ** {MAX_EXPONENT}) ** {MAX_EXPONENT}\n") is UNKNOWN
    assert _first_arg(tmp_path, f"n ** {MAX_EXPONENT}", consts(big)) is TOP


def test_repetition_and_concatenation_past_the_sequence_limit_are_unknown(tmp_path: Path) -> None:
    assert _fold(f'y = "ab" * {MAX_SEQUENCE // 2}\n') == "ab" * (MAX_SEQUENCE // 2)
    assert _fold(f'y = "ab" * {MAX_SEQUENCE // 2 + 1}\n') is UNKNOWN
    assert _fold(f"y = {MAX_SEQUENCE} * (0,)\n") == (0,) * MAX_SEQUENCE  # either side may repeat
    assert _fold(f"y = {MAX_SEQUENCE + 1} * (0,)\n") is UNKNOWN
    assert _fold(f'a = "a" * {MAX_SEQUENCE}\ny = a + "b"\n') is UNKNOWN
    layer = _summary(tmp_path, 'def conv(n):\n    return tf.keras.layers.Conv2D(8, 3, name="c" * n)\n', consts(MAX_SEQUENCE + 1))
    assert layer is not None and layer.kwargs["name"] is TOP
    layer = _summary(tmp_path, 'def conv(n):\n    return tf.keras.layers.Conv2D(8, 3, name="c" * n)\n', consts(3))
    assert layer is not None and layer.kwargs["name"] == consts("ccc")


def test_division_by_zero_and_mismatched_types_are_unknown(tmp_path: Path) -> None:
    assert _fold("y = 100 // 0\n") is UNKNOWN and _filters_found("100 // 0") == []
    assert _fold('y = 100 + "a"\n') is UNKNOWN
    assert _first_arg(tmp_path, "64 // n", consts(0)) is TOP
    assert _first_arg(tmp_path, "64 // n", consts(0, 2)) is TOP  # one bad pair spoils the set


def test_negating_a_bool_or_a_string_is_unknown(tmp_path: Path) -> None:
    assert _fold("y = -True\n") is UNKNOWN and _fold('y = -"a"\n') is UNKNOWN
    assert _first_arg(tmp_path, "-n", consts(True)) is TOP
    assert _first_arg(tmp_path, "-n", consts("a")) is TOP


def test_a_comparison_that_raises_decides_nothing(tmp_path: Path) -> None:
    body = """
        def conv(n):
            if n < "a":
                f = 8
            else:
                f = 16
            return tf.keras.layers.Conv2D(f, 3)
    """
    layer = _summary(tmp_path, body, consts(1))  # 1 < "a" raises: both branches
    assert layer is not None and layer.args[0] == consts(8, 16)
    layer = _summary(tmp_path, body, consts("b"))
    assert layer is not None and layer.args[0] == consts(16)
    # the libcst side: a test that does not fold keeps nothing from running
    def kept_off(n: str) -> cst.BaseExpression | None:
        module = cst.parse_module(f'n = {n}\nif n < "a":\n    x = conv(100)\n')
        ctx = SemanticModel(module, "m.py", source=module.code)
        if_ = cst.ensure_type(module.body[1], cst.If)
        return ctx.values.off_by_default(if_.body.body[0])

    assert kept_off("1") is None
    assert kept_off('"b"') is not None  # "b" < "a": the body never runs


def test_numeric_builtins_fold_only_over_numbers() -> None:
    assert _fold("y = max(8, 1024 // 8)\n") == 128
    assert _fold('y = max("a", "b")\n') is UNKNOWN
    assert _fold("y = int(2 ** 65)\n") is UNKNOWN


def test_the_script_reader_drops_sizes_it_cannot_know() -> None:
    # (it once read a huge power or a division by zero as 0 and 2 ** -1 as 0.5, so that
    # ``b + 32`` and ``b * 64`` below made up a batch of 32)
    assert script_sizes(ast.parse("b = 2 ** 5\nbatch_size = b + 32\n")).batch.value == (64,)
    for bad in (f"2 ** {MAX_EXPONENT + 1}", "64 // 0"):
        assert script_sizes(ast.parse(f"b = {bad}\nbatch_size = b + 32\n")).batch is None
    assert script_sizes(ast.parse("n = 1\nb = 2 ** (0 - n)\nbatch_size = b * 64\n")).batch is None


# ---- value sets -----------------------------------------------------------------------------
def test_a_value_set_past_max_values_is_unknown(tmp_path: Path) -> None:
    assert _first_arg(tmp_path, "n + 1", consts(*range(MAX_VALUES))) == consts(*range(1, MAX_VALUES + 1))
    assert _first_arg(tmp_path, "n + 1", consts(*range(MAX_VALUES + 1))) is TOP

    def reaching(k: int) -> frozenset[Any] | None:
        src = "x = 0\n" + "".join(f"if c{i}:\n    x = {i + 1}\n" for i in range(k - 1)) + "y = x\n"
        module = cst.parse_module(src)
        ctx = SemanticModel(module, "m.py", source=src)
        use = cst.ensure_type(cst.ensure_type(module.body[-1], cst.SimpleStatementLine).body[0], cst.Assign).value
        return ctx.values.possible_values(use)

    assert reaching(MAX_VALUES) == frozenset(range(MAX_VALUES))
    assert reaching(MAX_VALUES + 1) is None


def test_a_value_set_of_one_binding_to_a_conditional_and_of_an_attribute_the_class_stores() -> None:
    src = (
        "def block(strides):\n"
        "    padding = 'valid' if strides > 1 else 'same'\n"
        "    return padding\n"
        "class Block:\n"
        "    def __init__(self, strides):\n"
        "        self.padding = 'same'\n"
        "        if strides > 1:\n"
        "            self.padding = 'valid'\n"
        "        self.conv = conv(padding=self.padding)\n"
        "        self.mode = mode()\n"
        "        self.kind = self.mode\n"
    )
    module = cst.parse_module(src)
    ctx = SemanticModel(module, "m.py", source=src)
    loads = {ctx.module.code_for_node(n): n for n in walk(module, into_defs=True) if isinstance(n, (cst.Name, cst.Attribute))}
    ret = next(n for n in walk(module, into_defs=True) if isinstance(n, cst.Return))
    assert ctx.values.possible_values(ret.value) == frozenset({"valid", "same"})  # type: ignore[arg-type]
    assert ctx.values.possible_values(loads["self.padding"]) == frozenset({"valid", "same"})
    assert ctx.values.possible_values(loads["self.mode"]) is None  # a store that does not fold


# ---- depths ---------------------------------------------------------------------------------
def test_a_libcst_fold_follows_names_to_fold_depth() -> None:
    def chain(k: int) -> str:  # y = a_k, a_k = a_(k-1), ..., a0 = 7: k + 1 nested folds to the literal
        return "a0 = 7\n" + "".join(f"a{i} = a{i - 1}\n" for i in range(1, k + 1)) + f"y = a{k}\n"

    assert _fold(chain(FOLD_DEPTH - 1)) == 7
    assert _fold(chain(FOLD_DEPTH)) is UNKNOWN


def test_a_value_set_follows_branches_to_values_depth() -> None:
    def nested(k: int) -> frozenset[Any] | None:
        e = "7"
        for i in range(k):
            e = f"(1 if c{i} else {e})"
        module = cst.parse_module(f"y = {e}\n")
        ctx = SemanticModel(module, "m.py", source=module.code)
        return ctx.values.possible_values(cst.ensure_type(cst.ensure_type(module.body[0], cst.SimpleStatementLine).body[0], cst.Assign).value)

    assert nested(VALUES_DEPTH) == frozenset({1, 7})
    assert nested(VALUES_DEPTH + 1) is None


def test_a_summary_follows_calls_to_call_depth(tmp_path: Path) -> None:
    def chain(k: int) -> Layer | None:  # f0 -> f1 -> ... -> f(k-1), which builds the layer: k functions
        src = "".join(f"def f{i}(n):\n    return f{i + 1}(n)\n" for i in range(k - 1))
        return _summary(tmp_path, src + f"def f{k - 1}(n):\n    return tf.keras.layers.Conv2D(n, 3)\n", consts(8), fn="f0")

    layer = chain(CALL_DEPTH)
    assert layer is not None and layer.args[0] == consts(8) and len(layer.via) == CALL_DEPTH
    assert chain(CALL_DEPTH + 1) is None


def test_a_summary_follows_module_constants_to_const_depth(tmp_path: Path) -> None:
    def chain(k: int) -> Any:  # A_k = A_(k-1) ... A0 = 8
        src = "A0 = 8\n" + "".join(f"A{i} = A{i - 1}\n" for i in range(1, k + 1))
        layer = _summary(tmp_path, src + f"def conv():\n    return tf.keras.layers.Conv2D(A{k}, 3)\n")
        assert layer is not None
        return layer.args[0]

    assert chain(CONST_DEPTH - 1) == consts(8)
    assert chain(CONST_DEPTH) is TOP


# ---- steps ----------------------------------------------------------------------------------
def test_a_summary_interprets_call_steps_statements_per_call_site(tmp_path: Path) -> None:
    def factory(statements: int) -> Layer | None:
        body = "".join(f"    x{i} = {i}\n" for i in range(statements - 1))
        return _summary(tmp_path, f"def conv(n):\n{body}    return tf.keras.layers.Conv2D(n, 3)\n", consts(8))

    assert factory(CALL_STEPS) is not None
    assert factory(CALL_STEPS + 1) is None  # a model builder, not a factory


def test_a_spent_file_budget_answers_not_followed_and_literals_still_fold() -> None:
    src = "a = 3\nb = a\ny = b + 5\nz = 2 + 5\n"
    module = cst.parse_module(src)
    ctx = SemanticModel(module, "m.py", source=src)
    y, z = (cst.ensure_type(cst.ensure_type(s, cst.SimpleStatementLine).body[0], cst.Assign).value for s in module.body[2:])
    ctx.values.budget = Budget(FOLD_DEPTH, steps=1, per_question=1)  # (a file that has spent all but one step)
    assert ctx.values.const(y) is UNKNOWN  # following b then a needs two steps
    assert ctx.values.budget.spent == 1
    assert ctx.values.const(z) == 7  # no name to follow: no step


def test_a_question_past_its_share_is_not_followed_and_the_next_is_answered() -> None:
    src = "a = 3\nb = a\ny = b + 5\nw = a\n"
    module = cst.parse_module(src)
    ctx = SemanticModel(module, "m.py", source=src)
    y, w = (cst.ensure_type(cst.ensure_type(s, cst.SimpleStatementLine).body[0], cst.Assign).value for s in (module.body[2], module.body[3]))
    ctx.values.budget = Budget(FOLD_DEPTH, steps=100, per_question=1)
    assert ctx.values.const(y) is UNKNOWN
    assert ctx.values.const(w) == 3  # one step: within its own share


class _Asker:
    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.calls = 0

    @bounded(lambda: "not followed")
    def ask(self, n: int) -> str:
        self.calls += 1
        return "found" if n == 0 else self.ask(n - 1)


def test_bounded_unwinds_to_the_outermost_question() -> None:
    asker = _Asker(Budget(depth=1, steps=10, per_question=3))
    assert asker.ask(2) == "found" and asker.budget.spent == 3
    assert asker.ask(3) == "not followed" and asker.calls == 6  # the 4th nested call is refused
    assert asker.ask(0) == "found"  # a new question has its own share
    asker.budget.spent = asker.budget.steps
    assert asker.ask(0) == "not followed" and asker.calls == 7  # spent: not even begun


def test_spend_refuses_past_the_steps_and_keeps_refusing() -> None:
    b = Budget.for_call_site()
    assert all(b.spend() for _ in range(CALL_STEPS))
    assert not b.spend() and not b.spend() and b.spent == CALL_STEPS
