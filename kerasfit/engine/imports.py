"""Which imports a fix may leave unused (STYLE 12).

A fix that removes or replaces code can orphan an import (KF103 deletes the only
``ZeroPadding2D(...)`` call). The fix carries the imports its removed code used, next to
the ones it needs added; ``engine.fix.add_imports`` applies both after the fix's edits, and
libcst's RemoveImportsVisitor drops a carried import only when nothing uses it any more.
An import that was unused before the fix is never carried, so never removed.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterator

import libcst as cst

from ..semantic.nodes import dotted_name

ImportSpec = tuple[str, "str | None", "str | None"]  # (module, obj or None, asname or None)


def _dotted(expr: cst.BaseExpression) -> str:
    return dotted_name(expr) or ""


def top_level_imports(module: cst.Module) -> dict[str, ImportSpec]:
    """Bound name -> how to name its import to libcst's import visitors (module level only:
    a function-local import is left alone). Read once per check through ImportTable."""
    out: dict[str, ImportSpec] = {}
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                if small.relative or small.module is None:
                    continue  # relative imports: RemoveImportsVisitor cannot name them
                mod = _dotted(small.module)
                for alias in small.names:
                    name = _dotted(alias.name)
                    asname = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else None
                    out[asname or name] = (mod, name, asname)
            elif isinstance(small, cst.Import):
                for alias in small.names:
                    full = _dotted(alias.name)
                    asname = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else None
                    out[asname or full.split(".")[0]] = (full, None, asname)
    return out


def _names(node: cst.CSTNode) -> Iterator[str]:
    """Names read in ``node`` (never the ``.attr`` of an attribute, nor a keyword)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name):
            yield n.value
        elif isinstance(n, cst.Attribute):
            stack.append(n.value)
        elif isinstance(n, cst.Arg):
            stack.append(n.value)
        else:
            stack.extend(n.children)


class ImportTable:
    """A module's top-level imports, read once however many fixes ask (each fix asking
    anew made a long file with a fix per function quadratic)."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self._table: dict[str, ImportSpec] | None = None

    def get(self) -> dict[str, ImportSpec]:
        if self._table is None:
            self._table = top_level_imports(self.module)
        return self._table


def may_orphan(
    module: cst.Module, removed: list[cst.CSTNode], added: list[cst.CSTNode | str], table: ImportTable | None = None
) -> tuple[ImportSpec, ...]:
    """Imports used by the code a fix removes and not by the code it puts in its place.
    ``table``: the module's imports when the caller asks for several fixes."""
    used = {name for node in removed for name in _names(node)}
    if not used:
        return ()
    imports = table.get() if table is not None and table.module is module else top_level_imports(module)
    used &= imports.keys()
    for new in added:
        if isinstance(new, str):
            used -= set(re.findall(r"[A-Za-z_]\w*", new))
        else:
            used -= set(_names(new))
    # None (a plain ``import m``) sorts first: compared with a name it raised TypeError
    return tuple(sorted((imports[n] for n in used), key=lambda spec: tuple(v or "" for v in spec)))


def still_read(module: cst.Module, orphans: set[ImportSpec]) -> set[ImportSpec]:
    """The carried imports whose bound name the module still reads outside its top-level
    imports: kept without asking libcst's RemoveImportsVisitor (which resolves every scope
    of the module, and leaves cyclic garbage behind)."""
    reads: Counter[str] = Counter()
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body):
            continue
        reads.update(_names(stmt))
    return {spec for spec in orphans if reads[spec[2] or (spec[1] if spec[1] else spec[0].split(".")[0])] > 0}
