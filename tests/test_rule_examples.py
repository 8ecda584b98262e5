"""Every example of every rule is a test case (STYLE 4)."""

from __future__ import annotations

import pytest

from kerasfit.registry import all_rules
from kerasfit.testing import check_invalid, check_valid

RULES = all_rules()
STATIC = {code: r for code, r in RULES.items() if not r.build_only}
VALID_CASES = [
    pytest.param(rule, ex, id=f"{code}-{rule.name}-valid-{i}")
    for code, rule in STATIC.items()
    for i, ex in enumerate(rule.VALID)
]
INVALID_CASES = [
    pytest.param(rule, ex, id=f"{code}-{rule.name}-invalid-{i}")
    for code, rule in STATIC.items()
    for i, ex in enumerate(rule.INVALID)
]


@pytest.mark.parametrize("rule,example", VALID_CASES)
def test_valid_example(rule, example):
    check_valid(rule, example)


@pytest.mark.parametrize("rule,example", INVALID_CASES)
def test_invalid_example(rule, example):
    check_invalid(rule, example)


@pytest.mark.parametrize("code", list(RULES))
def test_rule_has_examples_and_docs(code):
    rule = RULES[code]
    assert rule.VALID, f"{code} has no VALID examples"
    assert rule.INVALID, f"{code} has no INVALID examples"
    if rule.fix_safety is not None and rule.fix_safety.value != "display-only":
        assert any(ex.expected_fix for ex in rule.INVALID), f"{code} is fixable but shows no fixed example"
    assert not rule.missing_doc_sections(), f"{code} docstring lacks: {rule.missing_doc_sections()}"
    assert rule.message and rule.name and rule.targets


def test_codes_and_names_unique():
    codes = [r.code for r in RULES.values()]
    names = [r.name for r in RULES.values()]
    assert len(set(codes)) == len(codes)
    assert len(set(names)) == len(names)
