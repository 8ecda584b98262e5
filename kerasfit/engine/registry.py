"""Finds rules: every Rule subclass in the built-in pack and in entry-point packs.

Nothing keeps a hand-written list (STYLE 1): a module under ``rules/`` is a rule.

Importing the rules means importing libcst (~0.25 s). A run whose every file is
answered from the cache needs only the rules' metadata, so that is kept in a small
manifest keyed by the rule files' fingerprint (see ``manifest``).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import pkgutil
import re
import sys
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from .. import __version__

if TYPE_CHECKING:
    from ..core.cachefs import CacheDir
    from ..ruleapi.rule import Rule  # defers libcst (rule.py imports it): a run answered from the cache never loads the rules

ENTRY_POINT_GROUP = "kerasfit.rules"
BUILTIN_PACK = "kerasfit.rules"


class RuleRegistryError(Exception):
    pass


@dataclass(frozen=True)
class RuleMeta:
    """What selection (and the build cross-check) need to know of a rule, without importing it."""

    code: str
    name: str
    default_enabled: bool
    targets: tuple[str, ...]
    # what the build can weigh of it (Rule.build_evidence, build_only, build_failure_pattern)
    build_evidence: str | None = None
    build_only: bool = False
    build_failure_pattern: str | None = None

    def applies_to(self, family: str) -> bool:
        return family in self.targets


def _rules_in(module: ModuleType) -> list[type[Rule]]:
    from ..ruleapi.rule import Rule  # defers libcst (rule.py imports it): a run answered from the cache never loads the rules

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


BUILTIN_PREFIX = "KF"
# A pack's entry-point name is its code prefix, as flake8 plugins' are: `TEAM = my_rules`
# makes my_rules' codes TEAM001..TEAM999. Letters only, so a code's digits start after it.
PREFIX_RE = re.compile(r"^[A-Z]{2,8}$")


@lru_cache(maxsize=1)
def _pack_prefixes() -> tuple[tuple[str, str], ...]:
    """(package, code prefix) for the built-in pack and every installed pack."""
    packs = [(BUILTIN_PACK, BUILTIN_PREFIX)]
    for name, value in _entry_point_values(ENTRY_POINT_GROUP):
        if value == BUILTIN_PACK or any(value == p for p, _ in packs):
            continue
        prefix = name.strip().upper()
        if not PREFIX_RE.match(prefix):
            raise RuleRegistryError(
                f"rule pack {value}: entry-point name {name!r} must be its code prefix (2-8 letters, e.g. TEAM = {value})"
            )
        for other_pack, other in packs:
            if prefix.startswith(other) or other.startswith(prefix):
                raise RuleRegistryError(
                    f"rule pack {value}: code prefix {prefix} collides with {other_pack}'s {other}"
                    " (a selector for one would select the other)"
                )
        packs.append((value, prefix))
    return tuple(packs)


def _packs() -> tuple[str, ...]:
    return tuple(p for p, _ in _pack_prefixes())


def _installed_path() -> list[str]:
    """sys.path without the working directory: ``python -m kerasfit`` puts '' (the cwd)
    first, and a checked-out tree must not name packages for kerasfit to import."""
    try:
        cwd = os.path.realpath(os.getcwd())
    except OSError:
        cwd = None
    return [e for e in sys.path if os.path.isabs(e) and os.path.realpath(e) != cwd]


def _entry_point_values(group: str) -> list[tuple[str, str]]:
    """Entry points of ``group`` from installed distributions' metadata.

    importlib.metadata costs ~30 ms of start-up (it parses every distribution's
    METADATA); the entry_points.txt files are all that is needed here.
    """
    header = f"[{group}]"
    values: list[tuple[str, str]] = []
    for entry in _installed_path():
        try:
            it = os.scandir(entry)
        except OSError:
            continue
        with it:
            for d in it:
                if not d.name.endswith((".dist-info", ".egg-info")):
                    continue
                try:
                    text = Path(d.path, "entry_points.txt").read_text(encoding="utf-8")
                except OSError:
                    continue
                if header not in text:
                    continue
                section = False
                for line in text.splitlines():
                    line = line.strip()
                    if line.startswith("["):
                        section = line == header
                    elif section and "=" in line and not line.startswith(("#", ";")):
                        name, _, value = line.partition("=")
                        values.append((name.strip(), value.strip().split(":", 1)[0].strip()))
    return values


@lru_cache(maxsize=1)
def all_rules() -> dict[str, type[Rule]]:
    """code -> rule class, for the built-in pack plus third-party packs."""
    from ..ruleapi.rule import NAME_RE  # defers libcst, as above

    rules: dict[str, type[Rule]] = {}
    names: dict[str, str] = {}
    for pkg, prefix in _pack_prefixes():
        for rule in _walk_package(pkg):
            if not re.fullmatch(rf"{prefix}\d{{3}}", getattr(rule, "code", "")):
                raise RuleRegistryError(
                    f"rule {rule.__module__}.{rule.__qualname__}: code {getattr(rule, 'code', None)!r} "
                    f"does not match its pack's prefix ({prefix}nnn)"
                )
            if not NAME_RE.match(rule.name):
                raise RuleRegistryError(f"rule {rule.code}: name {rule.name!r} is not kebab-case")
            if (why := rule.reads_error()) is not None:
                raise RuleRegistryError(why)
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


@lru_cache(maxsize=1)
def fingerprint() -> str:
    """Changes whenever kerasfit's code or any rule pack's files change (no imports)."""
    h = hashlib.sha256(__version__.encode())
    root = Path(__file__).parent.parent
    # every part that decides findings, and the name tables (not the cross-check or the server)
    dirs = [root, *(root / part for part in ("core", "semantic", "ruleapi", "engine", "project", "front", "data"))]
    for pkg in _packs():
        spec = importlib.util.find_spec(pkg)
        if spec is not None and spec.submodule_search_locations:
            dirs.extend(Path(p) for p in spec.submodule_search_locations)
        elif spec is not None and spec.origin:
            dirs.append(Path(spec.origin))
    for d in dirs:
        files = sorted([*d.glob("*.py"), *d.glob("*.json")]) if d.is_dir() else [d]
        for f in files:
            st = f.stat()
            h.update(f"{f}:{st.st_mtime_ns}:{st.st_size}".encode())
    return h.hexdigest()[:24]


MANIFEST = "rules-manifest.json"


def manifest(cache_dir: CacheDir | None = None) -> dict[str, RuleMeta]:
    """Rule metadata, from ``cache_dir/rules-manifest.json`` when still current."""
    fp = fingerprint() if cache_dir is not None else ""  # stats every source file: only for the cache
    raw = cache_dir.read(MANIFEST) if cache_dir is not None else None
    if raw is not None:
        try:
            data = json.loads(raw)
            if data.get("fingerprint") == fp:
                metas = {m["code"]: RuleMeta(m["code"], m["name"], m["default_enabled"], tuple(m["targets"]),
                                             m["build_evidence"], m["build_only"], m["build_failure_pattern"])
                         for m in data["rules"]}
                # an empty or malformed list would silently switch every rule off
                if metas and all(isinstance(m.code, str) and isinstance(m.name, str) and isinstance(m.default_enabled, bool) and all(isinstance(t, str) for t in m.targets) for m in metas.values()):
                    return metas
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            pass
    metas = {
        code: RuleMeta(code, r.name, r.default_enabled, tuple(sorted(r.targets)), r.build_evidence, r.build_only,
                       r.build_failure_pattern)
        for code, r in all_rules().items()
    }
    if cache_dir is not None:
        cache_dir.write(MANIFEST, json.dumps({"fingerprint": fp, "rules": [asdict(m) for m in metas.values()]}).encode(), gitignore=True)
    return metas

