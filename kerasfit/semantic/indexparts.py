"""The file index of an edited document, joined from its top-level statements' indexes.

Building the whole-file index (parents, source order, calls, references and stores;
``fileindex.FileIndex``) is one walk of every node, the largest cost left in a language
server check once findings are reused per statement (kerasfit.lsp.memo). A statement's
own index depends only on its nodes, which stay the same objects while its text is
unchanged (engine.parse.ParseCache, which keeps the parts), so each is built once and
the file's is joined:

- parent links and source order: one dict each, kept for the document; a check removes
  the entries of the statements that left and adds the new ones'. Each statement's
  numbers start at a base kept with its index, and bases leave wide gaps, so an edit
  numbers only the statements it inserts;
- the node runs the engine's walk replays: each statement's own;
- scopes: a statement's index records scope chains without the module, and the join
  appends the module being checked (each check has a new module object);
- the lists by name (references, stores, dict keys): joined on first use of a name.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from .fileindex import FileIndex

_GAP = 1 << 32  # room between two statements' numbers for statements inserted later


class IndexPart:
    """One top-level statement's index and the base of its source-order numbers."""

    __slots__ = ("index", "base", "order", "size")

    def __init__(self, stmt: cst.CSTNode) -> None:
        self.index = FileIndex(None, root=stmt)  # type: ignore[arg-type]
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


def _place(parts: list[IndexPart]) -> list[IndexPart]:
    """Give each part a base above the previous part's numbers, keeping kept bases;
    returns the parts given a new one."""
    moved = []
    end = 0  # the module itself is number 0
    for i, p in enumerate(parts):
        if p.base > end:
            end = p.base + p.size
            continue
        nxt = next((q.base for q in parts[i + 1 :] if q.base > end), None)
        room = None if nxt is None else nxt - end - p.size
        p.place(end + 1 + room // 2 if room is not None and room > 2 else end + _GAP)
        moved.append(p)
        end = p.base + p.size
    return moved


class Joined:
    """A document's joined parent links and source order, kept between checks: a check
    removes the entries of the statements that left and adds those of the new ones."""

    def __init__(self) -> None:
        self.parts: dict[int, IndexPart] = {}
        self.module: cst.Module | None = None
        self.parent: dict[int, cst.CSTNode] = {}
        self.order: dict[int, int] = {}


def join_parts(module: cst.Module, state: Joined) -> FileIndex:
    """The index of ``module`` joined from the statements' kept indexes in ``state``,
    building the missing ones."""
    index = FileIndex(module, build=False)
    body = module.body
    parts: list[IndexPart] = []
    fresh: dict[int, IndexPart] = {}
    old = state.parts
    for st in body:
        p = old.get(id(st))
        if p is None or id(st) in fresh:
            p = IndexPart(st)
        fresh[id(st)] = p
        parts.append(p)
    parent, order = state.parent, state.order
    if state.module is not module:
        # statements that left: their entries go before new nodes (which may reuse ids) come
        kept = {id(p) for p in parts}
        for p in old.values():
            if id(p) not in kept:
                for k in p.index.parent:
                    parent.pop(k, None)
                for k in p.order:
                    order.pop(k, None)
                for st_id, q in old.items():
                    if q is p:
                        parent.pop(st_id, None)
                        order.pop(st_id, None)
        if state.module is not None:
            order.pop(id(state.module), None)
        before = {id(q) for q in old.values()}
        added = {id(p) for p in parts if id(p) not in before}
        for p in _place(parts):
            added.add(id(p))
        for p in parts:
            if id(p) in added:
                parent.update(p.index.parent)
                order.update(p.order)
        for st in body:
            parent[id(st)] = module
        order[id(module)] = 0
        state.parts, state.module = fresh, module
    index.parent, index.order = parent, order
    index.runs = [p.index.runs[0] for p in parts]  # what the engine's walk replays
    tail = (module,)
    for p in parts:
        index.method_class.update(p.index.method_class)
        index.functions.extend(p.index.functions)
        index.classes.extend(p.index.classes)
        index.calls.extend((c, s + tail) for c, s in p.index.calls)
    for field in ("name_refs", "attr_refs", "attr_stores", "subscript_stores", "dict_keys", "flag_defaults"):
        setattr(index, field, _Joined(parts, field, tail))
    return index
