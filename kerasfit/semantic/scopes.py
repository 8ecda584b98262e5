"""Scopes and bindings of one file: the scopes part of the semantic model.

Every question takes the node it is about, and none depends on where the engine's walk
is: ``ancestors(node)`` answers from the file index's parent links (each enclosing node's
path kept once, so the nodes of one statement share their climb).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Iterator, Sequence

import libcst as cst

from .fileindex import FileIndex
from .nodes import CALLABLE_TYPES, SCOPE_TYPES, ScopeNode, dotted_name, iter_statements, walk
from .scoped import ScopedMemo, name_refs_in

_SEQUENCE_TYPES = frozenset({cst.Tuple, cst.List})
_FUNCTION_DEF: frozenset[type[cst.CSTNode]] = frozenset({cst.FunctionDef})
_CLASS_DEF: frozenset[type[cst.CSTNode]] = frozenset({cst.ClassDef})


@dataclass
class Binding:
    """One assignment of a name in a scope."""

    value: cst.BaseExpression | None  # None: bound by something we do not follow
    node: cst.CSTNode  # the statement / parameter that binds it
    kind: str = "assign"  # assign | param | import | def | class | other


@dataclass
class ScopeIndex:
    bindings: dict[str, list[Binding]] = field(default_factory=dict)

    def add(self, name: str, binding: Binding) -> None:
        self.bindings.setdefault(name, []).append(binding)


def module_dotted(node: cst.BaseExpression | None) -> str:
    if node is None:
        return ""
    return dotted_name(node) or ""


def _parallel_assignment(target: cst.BaseExpression, value: cst.BaseExpression) -> list[tuple[cst.Name, cst.BaseExpression]] | None:
    """``a, b = 1, 2``: names on the left, as many plain elements on the right; each
    name with its element's value, else None."""
    if not (
        type(target) in _SEQUENCE_TYPES
        and type(value) in _SEQUENCE_TYPES
        and len(target.elements) == len(value.elements)  # type: ignore[attr-defined]
    ):
        return None
    pairs: list[tuple[cst.Name, cst.BaseExpression]] = []
    for t, v in zip(target.elements, value.elements):  # type: ignore[attr-defined]
        if not (type(t) is cst.Element and type(t.value) is cst.Name and type(v) is cst.Element):
            return None
        pairs.append((t.value, v.value))
    return pairs


def _target_names(target: cst.BaseExpression) -> Iterator[cst.Name]:
    tp = type(target)
    if tp is cst.Name:
        yield target  # type: ignore[misc]
    elif tp in _SEQUENCE_TYPES:
        for el in target.elements:  # type: ignore[attr-defined]
            yield from _target_names(el.value)
    elif tp is cst.StarredElement:
        yield from _target_names(target.value)  # type: ignore[attr-defined]


def _exhaustive_if(idx: FileIndex, bindings: Sequence[Binding], use_ancestors: set[int]) -> bool:
    """True when the bindings cover every branch of one ``if``/``elif``/``else`` chain
    whose block encloses the use (so one of them always ran)."""
    blocks = {id(idx.block_of(b.node)) for b in bindings if b.kind == "assign"}
    top = idx.parent.get(id(idx.block_of(bindings[0].node)))
    if not isinstance(top, (cst.If, cst.Else)):
        return False
    while isinstance(idx.parent.get(id(top)), (cst.If, cst.Else)):
        top = idx.parent[id(top)]  # climb elif / else to the chain's first ``if``
    if not isinstance(top, cst.If) or not idx.encloses_block_of(top, use_ancestors):
        return False
    node: cst.If | cst.Else | None = top
    while node is not None:
        if id(node.body) not in blocks:
            return False
        if isinstance(node, cst.Else):
            return True
        node = node.orelse
    return False  # no ``else``: every branch may be skipped


# ---- what each binding statement binds in its scope (Scopes._build_index) -------------
_Add = Callable[[str, Binding], None]


def _bind_assign(stmt: cst.Assign, add: _Add) -> None:
    value = stmt.value
    for t in stmt.targets:
        if type(t.target) is cst.Name:
            add(t.target.value, Binding(value, stmt))
        elif (pairs := _parallel_assignment(t.target, value)) is not None:
            # F_H, F_W = 5, 5: each name gets its own element
            # (anchored on the target name: folds are memoised per binding node)
            for name, v in pairs:
                add(name.value, Binding(v, name))
        else:
            for n in _target_names(t.target):
                add(n.value, Binding(None, stmt, "other"))


def _bind_ann_assign(stmt: cst.AnnAssign, add: _Add) -> None:
    if type(stmt.target) is cst.Name:
        add(stmt.target.value, Binding(stmt.value, stmt))


def _bind_aug_assign(stmt: cst.AugAssign, add: _Add) -> None:
    if type(stmt.target) is cst.Name:
        add(stmt.target.value, Binding(None, stmt, "other"))


def _bind_for(stmt: cst.For, add: _Add) -> None:
    for n in _target_names(stmt.target):
        add(n.value, Binding(None, stmt, "other"))


def _bind_with(stmt: cst.With, add: _Add) -> None:
    for item in stmt.items:
        if item.asname is not None:
            for n in _target_names(item.asname.name):
                add(n.value, Binding(None, stmt, "other"))


def _bind_def(stmt: cst.FunctionDef, add: _Add) -> None:
    add(stmt.name.value, Binding(None, stmt, "def"))


def _bind_class(stmt: cst.ClassDef, add: _Add) -> None:
    add(stmt.name.value, Binding(None, stmt, "class"))


def _bind_import(stmt: cst.Import | cst.ImportFrom, add: _Add) -> None:
    names = stmt.names if type(stmt.names) is not cst.ImportStar else ()
    for alias in names:  # type: ignore[union-attr]
        if alias.asname is not None and type(alias.asname.name) is cst.Name:
            add(alias.asname.name.value, Binding(None, stmt, "import"))
        else:
            add(module_dotted(alias.name).split(".")[0], Binding(None, stmt, "import"))


# the statements that bind a name in their scope, by exact type
_BINDERS: dict[type[cst.CSTNode], Callable[[Any, _Add], None]] = {
    cst.Assign: _bind_assign, cst.AnnAssign: _bind_ann_assign, cst.AugAssign: _bind_aug_assign, cst.For: _bind_for,
    cst.With: _bind_with, cst.FunctionDef: _bind_def, cst.ClassDef: _bind_class, cst.Import: _bind_import,
    cst.ImportFrom: _bind_import,
}


@dataclass(frozen=True)
class ModelHints:
    """What a caller checking one document again and again (the language server) already
    knows about it, so the model does not find it out again; no answer depends on them."""

    # ids of top-level statements that hold no import at any depth (skipped when the
    # imports are read)
    import_free: Collection[int] = ()
    # builds the file index (from the statements' kept indexes); None: one walk of the module
    build_index: Callable[[cst.Module], FileIndex] | None = None


NO_HINTS = ModelHints()


class Scopes:
    """Scope indexes, parent links and binding lookups of one module."""

    __slots__ = ("module", "caches", "_make_index", "_index", "_scopes", "_paths")

    def __init__(self, module: cst.Module, caches: ScopedMemo, hints: ModelHints | None = None) -> None:
        """``hints.build_index``: how a caller that keeps per-statement indexes (the language
        server) builds the file index instead of walking the module again."""
        self.module = module
        self.caches = caches
        self._make_index = (hints or NO_HINTS).build_index
        self._index: FileIndex | None = None
        self._scopes: dict[int, ScopeIndex] = {}
        # per enclosing node: its ancestors and itself, outermost first (see ancestors)
        self._paths: dict[int, tuple[cst.CSTNode, ...]] = {}

    # ---- the file index: one lazy walk of the whole module ---------------------------
    @property
    def index(self) -> FileIndex:
        if self._index is None:
            build = self._make_index
            self._index = build(self.module) if build is not None else FileIndex(self.module)
        return self._index

    @property
    def built_index(self) -> FileIndex | None:
        """The file index when a question already built it, else None."""
        return self._index

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.index.parent.get(id(node))

    def ancestors(self, node: cst.CSTNode) -> Sequence[cst.CSTNode]:
        """The nodes enclosing ``node``, outermost (the module) first."""
        parent = self.index.parent
        p = parent.get(id(node))
        if p is None:
            return ()
        paths = self._paths
        hit = paths.get(id(p))
        if hit is not None:
            return hit
        # climb to the first enclosing node whose path is kept (rules ask about most
        # nodes of a statement, which share their enclosing nodes), keeping each one met
        climb = [p]
        q = parent.get(id(p))
        while q is not None and id(q) not in paths:
            climb.append(q)
            q = parent.get(id(q))
        path = paths[id(q)] if q is not None else ()
        for n in reversed(climb):
            path = paths[id(n)] = (*path, n)
        return path

    def scopes_of(self, node: cst.CSTNode) -> list[ScopeNode]:
        """Scopes enclosing ``node``, innermost first (module last).

        A function's decorators, defaults and annotations belong to the enclosing scope.
        """
        return list(self.index.scopes_of(node))

    def chain(self, within: Sequence[cst.CSTNode]) -> list[ScopeNode]:
        """The scopes on an ancestor path (outermost first), innermost first, then the
        module: every function, class and lambda on it."""
        out: list[ScopeNode] = [s for s in reversed(within) if type(s) in SCOPE_TYPES]  # type: ignore[misc]
        out.append(self.module)
        return out

    def within(self, scopes: Sequence[ScopeNode]) -> list[ScopeNode]:
        """``scopes`` (innermost first) as an enclosing chain, outermost first, without the
        module: the form name resolution takes (``Names.raw_name(..., within=)``)."""
        return [s for s in reversed(scopes) if type(s) is not cst.Module]

    def _innermost(self, node: cst.CSTNode, kinds: frozenset[type[cst.CSTNode]]) -> Any:
        for a in reversed(self.ancestors(node)):
            if type(a) in kinds:
                return a
        return None

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The innermost ``def`` around ``node`` (its decorators and defaults included)."""
        fn: cst.FunctionDef | None = self._innermost(node, _FUNCTION_DEF)
        return fn

    def enclosing_class(self, node: cst.CSTNode) -> cst.ClassDef | None:
        cls: cst.ClassDef | None = self._innermost(node, _CLASS_DEF)
        return cls

    def enclosing_callable(self, node: cst.CSTNode) -> cst.FunctionDef | cst.Lambda | None:
        """The innermost function or lambda around ``node``."""
        fn: cst.FunctionDef | cst.Lambda | None = self._innermost(node, CALLABLE_TYPES)
        return fn

    def callable_of(self, node: cst.CSTNode) -> cst.FunctionDef | cst.Lambda | None:
        """The innermost function or lambda whose body holds ``node``, else None (module level)."""
        return next((s for s in self.scopes_of(node) if type(s) in CALLABLE_TYPES), None)  # type: ignore[return-value]

    def name_refs_in(self, name: str, scope: ScopeNode) -> list[tuple[cst.Name, bool, tuple[ScopeNode, ...]]]:
        """The file index's references of ``name`` whose innermost scope is ``scope``
        (grouped once per file: filtering the whole file's list per question was quadratic)."""
        return name_refs_in(self, name, scope)

    # ---- scopes and bindings ----------------------------------------------
    def scope_index(self, scope: ScopeNode) -> ScopeIndex:
        key = id(scope)
        idx = self._scopes.get(key)
        if idx is None:
            idx = self._scopes[key] = self._build_index(scope)
        return idx

    def _build_index(self, scope: ScopeNode) -> ScopeIndex:
        idx = ScopeIndex()
        add = idx.add
        tp = type(scope)
        if tp is cst.FunctionDef or tp is cst.Lambda:
            params = scope.params  # type: ignore[union-attr]
            for p in (*params.posonly_params, *params.params, *params.kwonly_params):
                add(p.name.value, Binding(p.default, p, "param"))
            for star in (params.star_arg, params.star_kwarg):
                if type(star) is cst.Param:
                    add(star.name.value, Binding(None, star, "param"))
            if tp is cst.Lambda:
                return idx
        # exact types (see nodes.dotted_name): most statements of a file bind nothing, and
        # each isinstance against libcst's ABC-based classes costs ~10x a type test
        for stmt in iter_statements(scope.body):
            bind = _BINDERS.get(type(stmt))
            if bind is not None:
                bind(stmt, add)
        return idx

    def lookup(self, name: str, scopes: Sequence[ScopeNode] | None = None, *, at: cst.CSTNode | None = None) -> Binding | None:
        """The single binding of ``name`` visible from ``at`` (or from ``scopes``,
        innermost first, as :meth:`scopes_of` gives), or None when ambiguous/unknown.
        Class scopes are skipped for lookups from inside their methods, as in Python."""
        return self.lookup_in(name, self._chain(scopes, at))[0]

    def _chain(self, scopes: Sequence[ScopeNode] | None, at: cst.CSTNode | None) -> Sequence[ScopeNode]:
        if scopes is not None:
            return scopes
        if at is None:
            raise TypeError("lookup needs the node it looks from (at=) or its scopes")
        return self.scopes_of(at)

    def lookup_in(self, name: str, scopes: Sequence[ScopeNode]) -> tuple[Binding | None, Sequence[ScopeNode]]:
        """The single binding and the scope chain it lives in (for evaluating its value)."""
        bs, i = self._binder(name, scopes)
        if not bs:
            return None, ()
        return (bs[0] if len(bs) == 1 else None), scopes[i:]

    def bindings(self, name: str, *, at: cst.CSTNode) -> Sequence[Binding]:
        """Every binding of ``name`` in the innermost scope around ``at`` that binds it
        (class scopes skipped from inside their methods, as in Python); empty when none
        does. Cheaper than :meth:`reaching_bindings`: no statement order is looked at."""
        return self._binder(name, self.scopes_of(at))[0]

    def _binder(self, name: str, scopes: Sequence[ScopeNode]) -> tuple[Sequence[Binding], int]:
        """The bindings of ``name`` in the first scope of ``scopes`` (innermost first) that
        binds it, and that scope's place in the chain; ((), -1) when none does."""
        for i, scope in enumerate(scopes):
            if i and type(scope) is cst.ClassDef:
                continue
            bs = self.scope_index(scope).bindings.get(name)
            if bs:
                return bs, i
        return (), -1

    def rebound_reaching(self, name: cst.Name) -> tuple[Binding, Sequence[ScopeNode]] | None:
        """For a use of a name bound more than once in its function, the one binding that
        surely reaches it when that binding refines the name from itself
        (``data_format = standardize(data_format)``: still the one setting), with the
        scopes to evaluate it in. None for a node not in this file, when several bindings
        may reach it, or for a name reused for another value (``pad = k // 2`` twice with
        different ``k``: the rules' may-analysis, ``possible_values``, judges those)."""
        idx = self.index
        if idx.parent.get(id(name)) is None:
            return None
        bindings, exhaustive = self.reaching(name)
        if len(bindings) != 1 or not exhaustive:
            return None
        b = bindings[0]
        if b.kind == "assign" and not (b.value is not None and any(
                isinstance(n, cst.Name) and n.value == name.value for n in walk(b.value))):
            return None
        return b, idx.scopes_of(name)

    # ---- data flow -------------------------------------------------------------
    def reaching_bindings(self, name: cst.Name) -> list[Binding]:
        """The bindings of a Name that may reach this use, latest first.

        Within the innermost scope binding the name: the last binding before the use
        whose block encloses the use (an unconditional one) ends the list; conditional
        ones after it (in an ``if`` / loop / ``try`` not enclosing the use) come first.
        A binding statement that contains the use (``x = f(x)``) does not reach it.
        A name read inside a nested function but rebound in an outer one gives [].
        """
        return self.reaching(name)[0]

    def reaching(self, name: cst.Name) -> tuple[list[Binding], bool]:
        """(bindings, exhaustive): exhaustive when one of them surely ran."""
        idx = self.index
        bs, i = self._binder(name.value, idx.scopes_of(name))
        if not bs:
            return [], False
        if len(bs) == 1:
            return list(bs), True
        if i > 0:
            return [], False  # rebound in an outer scope: depends on when it is called
        anc = idx.ancestors(name)
        use = idx.order.get(id(name), 0)
        earlier = [b for b in bs if b.kind == "param" or (idx.order.get(id(b.node), 0) < use and id(b.node) not in anc)]
        earlier.sort(key=lambda b: -1 if b.kind == "param" else idx.order.get(id(b.node), 0), reverse=True)
        out: list[Binding] = []
        for b in earlier:
            out.append(b)
            if b.kind == "param" or idx.encloses_block_of(b.node, anc):
                return out, True
        return out, bool(out) and _exhaustive_if(idx, out, anc)
