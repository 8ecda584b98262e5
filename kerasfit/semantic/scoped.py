"""References of a name grouped by the scope they sit in, built once per file index.

The file index lists every reference of a spelling across the whole file; a question
about one function or class that filters that list costs the whole file each time, so a
long file with the same names in every class (``self.convs``, ``x``) was quadratic. The
groups keep the index's source order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, Sequence

import libcst as cst

if TYPE_CHECKING:
    from .fileindex import FileIndex

_Ref = tuple[Any, Any, tuple[Any, ...]]  # (node, the call it is the callee of or None, scopes innermost first), as the index keeps them


class ScopedMemo(Protocol):
    """Where the groups are kept (the model's memos: semantic.caches)."""

    scoped_index: Any  # the file index the groups were made from
    scoped_refs: dict[tuple[str, str], dict[int, list[Any]]]


class Grouped(Protocol):
    """What the groups are made from: the file index, and the memo keeping them (the
    scopes part, the model)."""

    @property
    def index(self) -> FileIndex: ...
    @property
    def caches(self) -> ScopedMemo: ...


def _groups(ctx: Grouped, key: tuple[str, str], refs: Sequence[_Ref], innermost_only: bool) -> dict[int, list[_Ref]]:
    idx = ctx.index
    memo = ctx.caches.scoped_refs
    if ctx.caches.scoped_index is not idx:  # a new index (another lint of the file): regroup
        memo.clear()
        ctx.caches.scoped_index = idx
    hit: dict[int, list[_Ref]] | None = memo.get(key)
    if hit is None:
        hit = {}
        memo[key] = hit
        for ref in refs:
            scopes = ref[2]
            for s in scopes[:1] if innermost_only else scopes:
                hit.setdefault(id(s), []).append(ref)
    return hit


def name_refs_in(ctx: Grouped, name: str, scope: cst.CSTNode) -> list[_Ref]:
    """The index's references of the bare name ``name`` whose innermost scope is ``scope``."""
    refs = ctx.index.name_refs.get(name)
    if not refs:
        return []
    return _groups(ctx, ("name", name), refs, True).get(id(scope), [])


def attr_refs_within(ctx: Grouped, attr: str, scope: cst.CSTNode) -> list[_Ref]:
    """The index's ``<expr>.attr`` references with ``scope`` among their enclosing scopes."""
    refs = ctx.index.attr_refs.get(attr)
    if not refs:
        return []
    return _groups(ctx, ("attr", attr), refs, False).get(id(scope), [])
