"""The statement-level facts of one file, read with CPython's ``ast``: its imports, its
functions and classes, its module constants, and the names it binds in branches (a
backend chosen at import time). The project index (:mod:`.index`) reads other files
through them."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Iterable

from ..core.symbols import ROOT_MODULES, VENDORED_CLASSES
from .names import ast_dotted
from .treescan import digest


@dataclass
class ModuleFacts:
    """The statement-level facts of one file (module level only)."""

    path: str
    digest: str
    tree: ast.Module
    # local name -> raw dotted target; relative imports keep their dots (".compat.layers")
    imports: dict[str, str] = field(default_factory=dict)
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    # NAME = <expr> bound exactly once at module level
    consts: dict[str, ast.expr] = field(default_factory=dict)
    star_modules: list[str] = field(default_factory=list)
    # a name bound more than once at module level (a backend chosen in branches:
    # `if tf: from . import tf_ops as ops` / `else: from .torch import ops`): every
    # binding in order, an import's raw target or "=" + the dotted name assigned
    bindings: dict[str, list[str]] = field(default_factory=dict)


def build_facts(path: str, source: str | bytes) -> ModuleFacts | None:
    """Facts of one file's source; None when it does not parse."""
    data = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return facts_of(path, digest(data), tree)


def facts_of(path: str, digest: str, tree: ast.Module) -> ModuleFacts:
    facts = ModuleFacts(path, digest, tree)
    counts: dict[str, int] = {}
    seen: dict[str, list[str]] = {}
    for stmt in _module_statements(tree.body):
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.asname:
                    # a version switch (`import shim as keras` / `else: import keras`)
                    # keeps the framework binding
                    if facts.imports.get(a.asname, "").split(".")[0] not in ROOT_MODULES:
                        facts.imports[a.asname] = a.name
                    seen.setdefault(a.asname, []).append(a.name)
                else:
                    top = a.name.split(".")[0]
                    if top in ROOT_MODULES:
                        facts.imports[top] = top
                    else:
                        facts.imports.setdefault(top, top)
        elif isinstance(stmt, ast.ImportFrom):
            mod = "." * stmt.level + (stmt.module or "")
            for a in stmt.names:
                if a.name == "*":
                    facts.star_modules.append(mod)
                    continue
                sep = "" if mod.endswith(".") else "."
                local, target = a.asname or a.name, f"{mod}{sep}{a.name}"
                if facts.imports.get(local, "").split(".")[0] not in ROOT_MODULES:
                    facts.imports[local] = target  # (as above: the framework binding is kept)
                seen.setdefault(local, []).append(target)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            facts.functions[stmt.name] = stmt  # type: ignore[assignment]
        elif isinstance(stmt, ast.ClassDef):
            facts.classes[stmt.name] = stmt
        elif isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                if isinstance(t, ast.Name):
                    counts[t.id] = counts.get(t.id, 0) + 1
                    facts.consts[t.id] = stmt.value
                    dotted = ast_dotted(stmt.value)
                    if dotted is not None and dotted.split(".")[0] != t.id:
                        seen.setdefault(t.id, []).append("=" + dotted)
    for name, n in counts.items():
        if n != 1:
            facts.consts.pop(name, None)
    facts.bindings = {k: v for k, v in seen.items() if len(v) > 1}
    return facts


def vendored_class(facts: ModuleFacts, name: str) -> str | None:
    """The framework class a module-level class of ``facts`` is a kept copy of (a vendored
    ``tpu_estimator.py``'s ``TPUEstimator``): its name is in the table and it has a base (a
    copy or a subclass, not a stand-in written from scratch); else None."""
    cls = facts.classes.get(name)
    return VENDORED_CLASSES.get(name) if cls is not None and cls.bases else None


def _module_statements(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    """Module-level statements, looking inside ``if``/``try`` (version-dependent imports)."""
    for stmt in body:
        if isinstance(stmt, (ast.If, ast.Try)):
            yield from _module_statements(stmt.body)
            for h in getattr(stmt, "handlers", ()):
                yield from _module_statements(h.body)
            yield from _module_statements(stmt.orelse)
        else:
            yield stmt
