"""Turns rules' own VALID / INVALID examples into checks and pytest tests: the built-in
pack's suite uses it, and so can a third-party pack's::

    # my_team_rules/tests/test_examples.py
    from kerasfit.engine.testing import pack_tests

    test_valid, test_invalid, test_metadata = pack_tests("my_team_rules", prefix="TEAM")

Each example becomes one test with a readable id (``TEAM101-unnamed-dense-invalid-0``):
findings and their count, the fix against ``expected_fix``, the fixed code re-parsing,
a second fix changing nothing, and the docstring sections ``kerasfit explain`` shows.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import types
import typing
from typing import Any, Callable, Sequence

import libcst as cst

from .settings import LintSettings
from .fix import fix_source
from .lint import lint_source
from .registry import _walk_package
from ..ruleapi.finding import Finding
from ..ruleapi.rule import NAME_RE, Invalid, Range, Rule, Valid
from ..core.types import DEFAULT_TARGET, TARGETS, Diagnostic


def _settings(rule: type[Rule], target: str | None, options: dict[str, Any]) -> LintSettings:
    return LintSettings([rule], TARGETS[target or DEFAULT_TARGET], dict(options))


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
    want = ex.ranges
    count = ex.count if want is None else len(want)
    assert len(mine) == count, (
        f"{rule.code}: expected {count} finding(s), got {len(mine)} on INVALID example:\n{ex.code}\n"
        + "\n".join(f"  {d.row}:{d.column} {d.message}" for d in mine)
    )
    if want is not None:
        got = [Range(d.row, d.column, d.end_row if w.end_line is not None else None,
                     d.end_column if w.end_column is not None else None) for d, w in zip(mine, want)]
        assert got == list(want), f"{rule.code}: findings land at {got}, the example pins {list(want)}:\n{ex.code}"
    check_finding(rule, ex, mine)
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


def check_finding(rule: type[Rule], ex: Invalid, found: Sequence[Diagnostic]) -> None:
    """What an INVALID example pins of its findings: every one of kind ``ex.finding``, and
    some finding whose fields hold every item of ``ex.fields``."""
    if ex.finding is not None:
        assert all(d.finding == ex.finding for d in found), (
            f"{rule.code}: findings are {[d.finding for d in found]}, the example pins {ex.finding}"
        )
    if ex.fields:
        assert any(all(k in d.fields and d.fields[k] == v for k, v in ex.fields.items()) for d in found), (
            f"{rule.code}: no finding has the fields {ex.fields}: {[d.fields for d in found]}"
        )


def check_metadata(rule: type[Rule], prefix: str | None = None) -> None:
    """What every rule must carry: examples, a page with every section, a code in its pack's band."""
    if prefix is not None:
        assert re.fullmatch(rf"{prefix}\d{{3}}", rule.code), f"{rule.code} does not match the pack prefix {prefix}nnn"
    assert NAME_RE.match(rule.name), f"{rule.code}: name {rule.name!r} is not kebab-case"
    assert rule.message, f"{rule.code} has no message"
    assert rule.reads_error() is None, rule.reads_error()
    assert rule.VALID, f"{rule.code} has no VALID examples"
    assert rule.INVALID, f"{rule.code} has no INVALID examples"
    if rule.fix_safety is not None and rule.fix_safety.value != "display-only":
        assert any(ex.expected_fix for ex in rule.INVALID), f"{rule.code} is fixable but shows no fixed example"
    assert not rule.missing_doc_sections(), f"{rule.code} docstring lacks: {rule.missing_doc_sections()}"
    check_findings(rule)


_PLAIN = (int, str, bool, float, type(None))


def _plain(hint: Any) -> bool:
    """A field type output and tests can hold: ints, strs, bools, floats, None, tuples of them."""
    origin = typing.get_origin(hint)
    if origin is tuple:
        return all(a is Ellipsis or _plain(a) for a in typing.get_args(hint))
    if origin in (typing.Union, types.UnionType):
        return all(_plain(a) for a in typing.get_args(hint))
    return hint in _PLAIN


def check_findings(rule: type[Rule]) -> None:
    """The findings a rule's module declares are frozen dataclasses of plain typed fields."""
    module = sys.modules[rule.__module__]
    for cls in vars(module).values():
        if not (isinstance(cls, type) and issubclass(cls, Finding) and cls.__module__ == module.__name__):
            continue
        # declared itself (a subclass of a frozen dataclass is frozen, or refused, by Python)
        assert "__dataclass_params__" in vars(cls), f"{rule.code}: {cls.__name__} is not a frozen dataclass"
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            assert _plain(hints[f.name]), f"{rule.code}: {cls.__name__}.{f.name} is a {hints[f.name]}, not a plain field type"


def rules_of(pack: str) -> list[type[Rule]]:
    """The rule classes in a pack (a package of rule modules, or one module)."""
    rules = sorted(_walk_package(pack), key=lambda r: r.code)
    assert rules, f"no Rule subclasses found in {pack}"
    return rules


def pack_tests(
    pack: str | Sequence[type[Rule]], prefix: str | None = None
) -> tuple[Callable[..., None], Callable[..., None], Callable[..., None]]:
    """Three pytest test functions over every rule of ``pack``: valid examples, invalid
    examples (with their fixes), and metadata. Assign them to ``test_*`` names."""
    import pytest

    rules = rules_of(pack) if isinstance(pack, str) else list(pack)
    static = [r for r in rules if not r.build_only]
    valid = [
        pytest.param(r, ex, id=f"{r.code}-{r.name}-valid-{i}") for r in static for i, ex in enumerate(r.VALID)
    ]
    invalid = [
        pytest.param(r, ex, id=f"{r.code}-{r.name}-invalid-{i}") for r in static for i, ex in enumerate(r.INVALID)
    ]
    meta = [pytest.param(r, id=f"{r.code}-{r.name}") for r in rules]

    @pytest.mark.parametrize("rule,example", valid)
    def test_valid_example(rule: type[Rule], example: Any) -> None:
        check_valid(rule, example)

    @pytest.mark.parametrize("rule,example", invalid)
    def test_invalid_example(rule: type[Rule], example: Invalid) -> None:
        check_invalid(rule, example)

    @pytest.mark.parametrize("rule", meta)
    def test_rule_metadata(rule: type[Rule]) -> None:
        check_metadata(rule, prefix)

    return test_valid_example, test_invalid_example, test_rule_metadata
