"""The file index of an edited document, joined from its top-level statements' indexes.

Building the whole-file index (parents, source order, calls, references and stores;
``context._FileIndex``) is one walk of every node, the largest cost left in a language
server check once findings are reused per statement (kerasfit.reuse). A statement's
own index depends only on its nodes, which stay the same objects while its text is
unchanged (engine.ParseCache), so each is built once and the file's is joined:

- parent links and method classes: one ``dict.update`` per statement;
- source order: each statement's numbers start at a base kept with its index, and
  bases leave wide gaps, so an edit renumbers only the statements it inserts;
- scopes: a statement's index records scope chains without the module, and the join
  appends the module being checked (each check has a new module object);
- the lists by name (references, stores, dict keys): joined on first use of a name.
"""

from __future__ import annotations

from typing import Any, Iterable

import libcst as cst

from .context import _FileIndex

_GAP = 1 << 32  # room between two statements' numbers for statements inserted later


class IndexPart:
    """One top-level statement's index and the base of its source-order numbers."""

    __slots__ = ("index", "base", "order", "size")

    def __init__(self, stmt: cst.CSTNode) -> None:
        self.index = _FileIndex(None, root=stmt)  # type: ignore[arg-type]
        self.size = len(self.index.order)
        self.base = -1
        self.order: dict[int, int] = {}

    def place(self, base: int) -> None:
        self.base = base
        self.order = {k: base + v for k, v in self.index.order.items()}


class _Joined:
    """``name -> [(..., scopes)]`` over every statement, joined a name at a time."""

    __slots__ = ("parts", "field", "tail", "cache")

    def __init__(self, parts: list[IndexPart], field: str, tail: tuple[cst.Module]) -> None:
        self.parts, self.field, self.tail = parts, field, tail
        self.cache: dict[Any, list[tuple[Any, ...]]] = {}

    def get(self, key: Any, default: Any = None) -> Any:
        hit = self.cache.get(key)
        if hit is None:
            tail = self.tail
            hit = []
            for p in self.parts:
                got = getattr(p.index, self.field).get(key)
                if got:
                    hit.extend((*e[:-1], e[-1] + tail) for e in got)
            self.cache[key] = hit
        return hit if hit else default

    def __getitem__(self, key: Any) -> Any:
        hit = self.get(key)
        if hit is None:
            raise KeyError(key)
        return hit


def _place(parts: list[IndexPart]) -> None:
    """Give each part a base above the previous part's numbers, keeping kept bases."""
    end = 0  # the module itself is number 0
    for i, p in enumerate(parts):
        if p.base > end:
            end = p.base + p.size
            continue
        nxt = next((q.base for q in parts[i + 1 :] if q.base > end), None)
        room = None if nxt is None else nxt - end - p.size
        p.place(end + 1 + room // 2 if room is not None and room > 2 else end + _GAP)
        end = p.base + p.size


def join_parts(index: _FileIndex, cache: dict[int, Any]) -> None:
    """Fill ``index`` (of ``index.module``) from the statements' kept indexes in ``cache``,
    building the missing ones; ``cache`` is left holding this module's statements only."""
    module = index.module
    body: Iterable[cst.CSTNode] = module.body
    parts: list[IndexPart] = []
    fresh: dict[int, IndexPart] = {}
    for st in body:
        p = cache.get(id(st))
        if p is None or id(st) in fresh:
            p = IndexPart(st)
        fresh[id(st)] = p
        parts.append(p)
    cache.clear()
    cache.update(fresh)
    _place(parts)
    tail = (module,)
    parent, order = index.parent, index.order
    order[id(module)] = 0
    for st, p in zip(body, parts):
        parent.update(p.index.parent)
        parent[id(st)] = module
        order.update(p.order)
        index.method_class.update(p.index.method_class)
        index.functions.extend(p.index.functions)
        index.classes.extend(p.index.classes)
        index.calls.extend((c, s + tail) for c, s in p.index.calls)
    for field in ("name_refs", "attr_refs", "attr_stores", "subscript_stores", "dict_keys", "flag_defaults"):
        setattr(index, field, _Joined(parts, field, tail))
