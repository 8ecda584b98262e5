"""The rule API as an object (``self.ctx``, a ``RuleContext``): its questions are the ones
the built-in rules ask, and it holds a rule to the reads it declares."""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from kerasfit.engine.lint import lint_source
from kerasfit.engine.settings import INTERNAL_ERROR_CODE, LintSettings
from kerasfit.ruleapi import Finding, Reads, Rule, RuleContext, UndeclaredRead
from kerasfit.semantic.model import SemanticModel

ROOT = Path(__file__).resolve().parent.parent
SRC = "import tensorflow as tf\n\ndef f(x):\n    return tf.nn.relu(x)\n\ny = f(tf.ones([2]))\n"


@dataclass(frozen=True)
class Calls(Finding):
    n: int
    template = "{n} calls in the file"


def _count_calls(ctx: RuleContext) -> int:
    return sum(1 for _ in ctx.all_calls())


class _CountsCalls(Rule):
    """Reports, at each ``def``, how many calls the file makes: a whole-file fact."""

    code, name, message = "KF990", "counts-calls", "calls"
    reads = frozenset({Reads.STATEMENT, Reads.FILE_FACTS})

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.report(node, Calls(self.ctx.file_fact("KF990.calls", _count_calls)))


class _ForgetsFileFacts(_CountsCalls):
    code, name = "KF991", "forgets-file-facts"
    reads = frozenset({Reads.STATEMENT})


def test_a_rule_that_declares_file_facts_gets_them_computed_from_its_context() -> None:
    found = lint_source(SRC, "m.py", LintSettings(rules=[_CountsCalls])).diagnostics
    assert [(d.code, d.fields) for d in found] == [("KF990", {"n": 3})]


def test_a_rule_asking_a_file_fact_it_did_not_declare_gets_an_error_naming_both() -> None:
    found = lint_source(SRC, "m.py", LintSettings(rules=[_ForgetsFileFacts])).diagnostics
    assert [d.code for d in found] == [INTERNAL_ERROR_CODE]
    assert "KF991 crashed on this file: UndeclaredRead: KF991 asks ctx.file_fact('KF990.calls')" in found[0].message
    assert "Reads.FILE_FACTS" in found[0].message
    # the error is the rule API's own class, raised before anything is computed
    model = SemanticModel(cst.parse_module(SRC), "m.py", source=SRC)
    ctx = RuleContext(model, "KF991", _ForgetsFileFacts.reads)
    try:
        ctx.file_fact("KF990.calls", _count_calls)
    except UndeclaredRead as e:
        assert (e.rule, e.read) == ("KF991", Reads.FILE_FACTS)
    else:
        raise AssertionError("no UndeclaredRead")
    assert model.facts == {}


def test_a_kept_fact_is_recomputed_on_another_model_through_a_context() -> None:
    """The model keeps a fact's compute as a function of the model (the language server's
    memo recomputes it on the next check's model); it asks through a fresh context."""
    first = SemanticModel(cst.parse_module(SRC), "m.py", source=SRC)
    assert RuleContext(first, "KF990", _CountsCalls.reads).file_fact("KF990.calls", _count_calls) == 3
    compute, value, by_node = first.facts["KF990.calls"]
    edited = SRC + "z = f(y)\n"
    second = SemanticModel(cst.parse_module(edited), "m.py", source=edited)
    assert (value, by_node) == (3, False) and second.file_fact("KF990.calls", compute) == 4


def _asked_by_rules() -> set[str]:
    """Every attribute read off ``ctx`` / ``self.ctx`` in rules/ and in the Rule base class."""
    asked: set[str] = set()
    files = [*sorted((ROOT / "rules").glob("*.py")), ROOT / "kerasfit" / "ruleapi" / "rule.py"]
    for f in files:
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute):
                base = node.value
                if (isinstance(base, ast.Name) and base.id == "ctx") or (
                    isinstance(base, ast.Attribute) and base.attr == "ctx" and isinstance(base.value, ast.Name)
                ):
                    asked.add(node.attr)
    return asked


def test_the_context_asks_exactly_what_the_built_in_rules_ask() -> None:
    """Each public question is asked by a built-in rule (or ``Rule.report``), has a one-line
    summary, and the rules ask nothing else of their context."""
    public = {n for n in dir(RuleContext) if not n.startswith("_")}
    asked = _asked_by_rules()
    assert asked <= public, sorted(asked - public)
    assert public - asked == {"filename"}, sorted(public - asked)  # the file's name: for a pack's messages
    for n in sorted(public):
        doc = inspect.getdoc(getattr(RuleContext, n))
        assert doc and doc.strip(), n
    ctx = RuleContext(SemanticModel(cst.parse_module(SRC), "m.py", source=SRC), "KF990", frozenset(Reads))
    assert not hasattr(ctx, "__dict__")  # slots: a context per rule per file stays small
