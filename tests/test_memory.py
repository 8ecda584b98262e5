"""A checked file's tree is freed by reference counting when its check returns.

A batch check runs with the cyclic collector's thresholds raised (``api.tune_gc``) and
collects nothing per file, so a reference cycle anywhere between the semantic model, its
parts, the rules and their reports would keep each file's whole libcst tree alive until
the collector happens to run: peak memory would grow with the files checked.
"""

from __future__ import annotations

import gc
from pathlib import Path

import libcst as cst
import pytest

from kerasfit.project.check import CheckOptions, Selection, check_paths, check_source
from kerasfit.ruleapi.context import RuleContext
from kerasfit.ruleapi.rule import Rule
from kerasfit.semantic.model import SemanticModel

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted((ROOT / "fixtures").rglob("*.py"))


def _cyclic_garbage(run) -> list[object]:
    """What ``run()`` left for the cyclic collector: objects only a cycle kept alive."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run()
        gc.collect()
        return list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()


def _ours(objs: list[object]) -> list[str]:
    """The trees, models, rules and their contexts among ``objs`` (ast.literal_eval's own closures, which
    hold no tree, are the standard library's)."""
    return sorted({
        type(o).__qualname__ for o in objs
        if isinstance(o, (cst.CSTNode, SemanticModel, Rule, RuleContext))
    })


def test_the_fixtures_leave_no_tree_model_or_rule_to_the_cyclic_collector() -> None:
    assert len(FIXTURES) > 20
    options = CheckOptions(use_cache=False, jobs=1, selection=Selection(select=["ALL"]))
    found: dict[str, list[str]] = {}
    for path in FIXTURES:
        garbage = _ours(_cyclic_garbage(lambda: check_paths([str(path)], options)))
        if garbage:
            found[str(path.relative_to(ROOT))] = garbage
    assert found == {}


@pytest.mark.parametrize("name", ["tf_keras/resnet_functional.py", "keras3/super_resolution.py"])
def test_a_check_that_computes_fixes_leaves_no_tree_to_the_cyclic_collector(name: str) -> None:
    path = ROOT / "fixtures" / name
    source = path.read_text(encoding="utf-8")
    options = CheckOptions(use_cache=False, selection=Selection(select=["ALL"]))
    results = []
    garbage = _cyclic_garbage(lambda: results.append(check_source(source, path, options, fix=True, unsafe=True)))
    assert results[0].fixed_source not in (None, source)  # a fix was computed
    assert _ours(garbage) == []
