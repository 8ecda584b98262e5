"""Finds rules: every Rule subclass in the built-in pack and in entry-point packs.

Nothing keeps a hand-written list (STYLE 1): a module under ``rules/`` is a rule.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from types import ModuleType

from .rule import CODE_RE, NAME_RE, Rule

ENTRY_POINT_GROUP = "kerasfit.rules"


class RuleRegistryError(Exception):
    pass


def _rules_in(module: ModuleType) -> list[type[Rule]]:
    found = []
    for obj in vars(module).values():
        if isinstance(obj, type) and issubclass(obj, Rule) and obj is not Rule and obj.__module__ == module.__name__:
            found.append(obj)
    return found


def _walk_package(pkg_name: str) -> list[type[Rule]]:
    pkg = importlib.import_module(pkg_name)
    rules = _rules_in(pkg)
    for info in pkgutil.iter_modules(getattr(pkg, "__path__", []), prefix=pkg_name + "."):
        if info.name.rsplit(".", 1)[-1].startswith("_"):
            continue
        rules.extend(_rules_in(importlib.import_module(info.name)))
    return rules


@lru_cache(maxsize=1)
def all_rules() -> dict[str, type[Rule]]:
    """code -> rule class, for the built-in pack plus third-party packs."""
    packages = ["kerasfit.rules"]
    try:
        from importlib.metadata import entry_points

        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.value not in packages:
                packages.append(ep.value)
    except Exception:  # a broken third-party distribution must not stop the linter
        pass
    rules: dict[str, type[Rule]] = {}
    names: dict[str, str] = {}
    for pkg in packages:
        for rule in _walk_package(pkg):
            if not CODE_RE.match(rule.code):
                raise RuleRegistryError(f"rule {rule.__qualname__}: code {rule.code!r} is not KFnnn")
            if not NAME_RE.match(rule.name):
                raise RuleRegistryError(f"rule {rule.code}: name {rule.name!r} is not kebab-case")
            if rule.code in rules and rules[rule.code] is not rule:
                raise RuleRegistryError(f"two rules claim {rule.code}: {rules[rule.code].__qualname__}, {rule.__qualname__}")
            if rule.name in names and names[rule.name] != rule.code:
                raise RuleRegistryError(f"two rules are named {rule.name}: {names[rule.name]}, {rule.code}")
            rules[rule.code] = rule
            names[rule.name] = rule.code
    return dict(sorted(rules.items()))


def rule_by_name_or_code(key: str) -> type[Rule] | None:
    rules = all_rules()
    if key.upper() in rules:
        return rules[key.upper()]
    for r in rules.values():
        if r.name == key:
            return r
    return None
