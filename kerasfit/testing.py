"""Turns a rule's own VALID / INVALID examples into checks (used by the test suite,
and usable by third-party rule packs)."""

from __future__ import annotations

import libcst as cst

from .engine import LintSettings, fix_source, lint_source
from .rule import Invalid, Rule, Valid
from .types import TARGETS


def _settings(rule: type[Rule], target: str | None, options: dict) -> LintSettings:
    return LintSettings([rule], TARGETS[target or "tpu-v5e"], dict(options))


def check_valid(rule: type[Rule], example: str | Valid) -> None:
    ex = example if isinstance(example, Valid) else Valid(example)
    diags = lint_source(ex.code, "example.py", _settings(rule, ex.target, ex.options)).diagnostics
    assert not diags, f"{rule.code} flagged a VALID example:\n{ex.code}\n" + "\n".join(
        f"  {d.row}:{d.column} {d.code} {d.message}" for d in diags
    )


def check_invalid(rule: type[Rule], ex: Invalid) -> None:
    settings = _settings(rule, ex.target, ex.options)
    diags = lint_source(ex.code, "example.py", settings).diagnostics
    mine = [d for d in diags if d.code == rule.code]
    assert not [d for d in diags if d.code != rule.code], [d.message for d in diags]
    assert len(mine) == ex.count, (
        f"{rule.code}: expected {ex.count} finding(s), got {len(mine)} on INVALID example:\n{ex.code}\n"
        + "\n".join(f"  {d.row}:{d.column} {d.message}" for d in mine)
    )
    if ex.message_contains is not None:
        assert any(ex.message_contains in d.message for d in mine), [d.message for d in mine]
    if ex.expected_fix is None:
        # nothing applies without the flag that was not asked for
        outcome = fix_source(ex.code, "example.py", settings, unsafe=ex.unsafe)
        if outcome.source != ex.code:
            raise AssertionError(f"{rule.code}: example has a fix but no expected_fix:\n{outcome.source}")
        return
    if ex.unsafe:
        safe_only = fix_source(ex.code, "example.py", settings, unsafe=False)
        assert safe_only.source == ex.code, f"{rule.code}: unsafe fix applied without --unsafe-fixes"
    outcome = fix_source(ex.code, "example.py", settings, unsafe=ex.unsafe)
    assert outcome.error is None, outcome.error
    assert outcome.source == ex.expected_fix, (
        f"{rule.code}: fix mismatch\n--- got ---\n{outcome.source}\n--- expected ---\n{ex.expected_fix}"
    )
    cst.parse_module(outcome.source)  # the fixed code parses
    again = fix_source(outcome.source, "example.py", settings, unsafe=ex.unsafe)
    assert again.source == outcome.source, f"{rule.code}: fix is not idempotent"
