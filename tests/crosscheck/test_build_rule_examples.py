"""The build-only rules' own examples (KF301, KF302), built with real TensorFlow.

Static examples of every other rule run in tests/test_rule_examples.py; these need a
build, so they live with the build suite.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kerasfit.project.check import CheckOptions, check_source
from kerasfit.crosscheck.api import BuildOptions, build_report
from kerasfit.crosscheck.verdicts import cross_check
from kerasfit.project.buildstage import evidence
from kerasfit.engine.registry import all_rules
from kerasfit.engine.testing import check_finding
from kerasfit.ruleapi.rule import Valid

pytestmark = pytest.mark.build

BUILD_RULES = {code: r for code, r in all_rules().items() if r.build_only}
CASES = [
    pytest.param(rule, ex, id=f"{code}-{kind}-{i}")
    for code, rule in BUILD_RULES.items()
    for kind, examples in (("valid", rule.VALID), ("invalid", rule.INVALID))
    for i, ex in enumerate(examples)
]


def test_build_only_rules_exist():
    assert {"KF301", "KF302"} <= set(BUILD_RULES)


@pytest.mark.parametrize("rule,example", CASES)
def test_build_rule_example(rule, example, tmp_path: Path):
    path = tmp_path / "model.py"
    path.write_text(example.code)
    opts = example.options
    report = build_report(
        path, BuildOptions(batch_size=opts.get("batch_size"), cores=opts.get("cores", 1), use_cache=False),
        tmp_path / "cache")
    static = check_source(example.code, str(path), CheckOptions(isolated=True)).diagnostics
    found = [d for d in cross_check(static, report, str(path), evidence()) if d.code == rule.code]
    if isinstance(example, Valid):
        assert not found, [d.message for d in found]
    else:
        assert len(found) == example.count, [d.message for d in found]
        check_finding(rule, example, found)
        assert all(d.name == rule.name for d in found)
