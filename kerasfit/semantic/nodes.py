"""Syntax-only helpers over libcst nodes: the bottom of the semantic model.

Nothing here knows a file's names or scopes; everything above builds on these walks,
argument lookups and literal readers.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator

import libcst as cst

from .folding import UNKNOWN as UNKNOWN  # (re-exported: the parts read it from here)


_IS_NODE: dict[type, bool] = {}


def is_node(v: object) -> bool:
    tp = type(v)
    r = _IS_NODE.get(tp)
    if r is None:
        r = _IS_NODE[tp] = isinstance(v, cst.CSTNode)
    return r


def string_value(node: cst.SimpleString) -> Any:
    """A string literal's value. libcst's ``evaluated_value`` runs ``literal_eval``
    (a compile per call); plain literals without escapes are just their inner text."""
    raw = node.value
    q = raw[-1]
    if raw[0] == q and "\\" not in raw and "\r" not in raw:  # source newlines normalize
        n = 3 if raw.startswith(q * 3) and len(raw) >= 6 else 1
        return raw[n:-n]
    try:
        return node.evaluated_value
    except Exception:
        return UNKNOWN


ScopeNode = cst.Module | cst.FunctionDef | cst.ClassDef | cst.Lambda

# The helpers below answer for most nodes of every file: they test node types with
# ``type(n) is C`` (libcst's concrete node classes have no subclasses), as an
# ``isinstance`` against libcst's ABC-based classes costs ~10x as much.
_Attribute, _Name = cst.Attribute, cst.Name
# the nodes that open a scope, and those of them that are callables (exact types: libcst's
# node classes have no subclasses, and a type test is ~10x cheaper than isinstance on them)
SCOPE_TYPES: frozenset[type[cst.CSTNode]] = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})
CALLABLE_TYPES: frozenset[type[cst.CSTNode]] = frozenset({cst.FunctionDef, cst.Lambda})
_BLOCK_TYPES = frozenset({cst.IndentedBlock, cst.SimpleStatementSuite})
_CLAUSE_TYPES = frozenset({cst.Else, cst.If, cst.ExceptHandler, cst.Finally})


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    tp = type(node)
    if tp is _Name:
        return node.value  # type: ignore[attr-defined, no-any-return]
    parts: list[str] = []
    while tp is _Attribute:
        parts.append(node.attr.value)  # type: ignore[attr-defined]
        node = node.value  # type: ignore[attr-defined]
        tp = type(node)
    if tp is _Name:
        parts.append(node.value)  # type: ignore[attr-defined]
        return ".".join(reversed(parts))
    return None


def iter_statements(body: Any) -> Iterator[cst.CSTNode]:
    """Statements of one scope, descending into compound statements but not defs."""
    stack = [body]
    while stack:
        item = stack.pop()
        tp = type(item)
        if tp is list or tp is tuple:
            stack.extend(reversed(item))
            continue
        if tp in _BLOCK_TYPES:
            stack.append(item.body)
            continue
        if tp is cst.SimpleStatementLine:
            yield from item.body
            continue
        yield item
        if tp is cst.FunctionDef or tp is cst.ClassDef:
            continue
        for attr in ("body", "orelse", "finalbody", "handlers", "cases"):
            sub = getattr(item, attr, None)
            if sub is None:
                continue
            if type(sub) in _CLAUSE_TYPES:
                sub = [sub]
            stack.append(sub)


def get_arg(call: cst.Call, keyword: str | None, position: int | None = None) -> cst.Arg | None:
    """The argument passed as ``keyword`` or at ``position`` (positional only)."""
    if keyword is not None:
        for a in call.args:
            if a.keyword is not None and a.keyword.value == keyword:
                return a
    if position is not None:
        i = 0
        for a in call.args:
            if a.keyword is not None or a.star:
                break
            if i == position:
                return a
            i += 1
    return None


# Fields that hold only whitespace, punctuation, operators or non-reference names
# (``Arg.keyword``, ``Attribute.attr``): no traversal descends into them.
_SKIP_FIELDS = frozenset(
    {
        "lpar", "rpar", "comma", "leading_lines", "lines_after_decorators", "header", "footer",
        "trailing_whitespace", "semicolon", "colon", "equal", "star", "operator", "dot",
        "lbracket", "rbracket", "lbrace", "rbrace", "newline", "asynchronous", "keyword", "attr",
        "arrow", "default_indent", "default_newline", "encoding", "has_trailing_newline", "indent",
    }
)
_FIELDS: dict[type, tuple[str, ...]] = {}


def child_fields(tp: type) -> tuple[str, ...]:
    """The fields of node type ``tp`` that can hold code, in source order (cached)."""
    names = _FIELDS.get(tp)
    if names is None:
        # a field typed ``str`` (``Name.value``, ``Integer.value``) never holds a node: the
        # leaves of every file (a third of its nodes) then have no field to read
        names = _FIELDS[tp] = tuple(
            f.name for f in dataclasses.fields(tp)
            if f.name not in _SKIP_FIELDS and not f.name.startswith("whitespace") and f.type is not str
        )
    return names


def string_key(node: cst.BaseExpression | None) -> str | None:
    if isinstance(node, cst.SimpleString):
        v = string_value(node)
        return v if isinstance(v, str) else None
    return None


def iter_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Children that can hold code (not whitespace or tokens), in source order: the one
    child list of every walk (:func:`walk`; the file index's walk, which the engine's rule
    walk replays, reads the same fields)."""
    tp = type(node)
    names = _FIELDS.get(tp)
    if names is None:
        names = child_fields(tp)
    known = _IS_NODE
    kids: list[cst.CSTNode] = []
    for name in names:
        v = getattr(node, name)
        tv = type(v)
        if tv is list or tv is tuple:
            for item in v:
                if known.get(type(item)) or is_node(item):
                    kids.append(item)
        elif known.get(tv) or (v is not None and is_node(v)):
            kids.append(v)
    return kids


def walk(node: cst.CSTNode, *, into_defs: bool = False) -> Iterator[cst.CSTNode]:
    """Pre-order walk of code nodes (not nested defs/classes/lambdas unless asked).

    Uses the engine's child list, which skips whitespace, tokens, ``Attribute.attr``
    and ``Arg.keyword`` — so every Name seen is a reference or a binding.
    """
    stack = [node]
    pop = stack.pop
    while stack:
        n = pop()
        yield n
        tp = type(n)
        if n is not node and not into_defs and tp in SCOPE_TYPES:
            continue
        kids = iter_children(n)
        if kids:
            kids.reverse()
            stack.extend(kids)


def name_loads(node: cst.CSTNode, name: str) -> int:
    """How often ``name`` is read inside ``node`` (plain assignment targets excluded)."""
    targets: set[int] = set()
    count = 0
    for n in walk(node):
        if isinstance(n, cst.Assign):
            targets.update(id(t.target) for t in n.targets if isinstance(t.target, cst.Name))
        elif isinstance(n, (cst.AnnAssign, cst.AugAssign)) and isinstance(n.target, cst.Name):
            targets.add(id(n.target))
        elif isinstance(n, cst.Name) and n.value == name and id(n) not in targets:
            count += 1
    return count


def binds(node: cst.CSTNode, name: str) -> bool:
    """True when ``node`` (a statement) may rebind ``name``."""
    return name in bound_names(node)


def bound_names(node: cst.CSTNode) -> frozenset[str]:
    """The names ``node`` (a statement) may bind (uncached; a file's model keeps a
    :class:`SyntaxMemo` for the questions it asks again and again)."""
    names: set[str] = set()
    for n in walk(node):
        if isinstance(n, cst.AssignTarget) or isinstance(n, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor)):
            names.update(t.value for t in walk(n.target) if isinstance(t, cst.Name))
        elif isinstance(n, cst.AsName) and isinstance(n.name, cst.Name):
            names.add(n.name.value)
        elif isinstance(n, (cst.FunctionDef, cst.ClassDef)):
            names.add(n.name.value)
        elif isinstance(n, cst.NamedExpr) and isinstance(n.target, cst.Name):
            names.add(n.target.value)
    return frozenset(names)


def self_attr(expr: cst.BaseExpression) -> str | None:
    """``X`` for ``self.X``."""
    if type(expr) is cst.Attribute and type(expr.value) is cst.Name and expr.value.value == "self":
        return expr.attr.value
    return None


ClassIndex = tuple[dict[str, list[cst.BaseExpression]], dict[str, int]]


def class_index(cls: cst.ClassDef) -> ClassIndex:
    """``self.<attr>`` assignments and reads in ``cls`` (uncached; see SyntaxMemo)."""
    assigned: dict[str, list[cst.BaseExpression]] = {}
    reads: dict[str, int] = {}
    stores: set[int] = set()
    for n in walk(cls.body, into_defs=True):
        if type(n) is cst.Assign:
            for t in n.targets:
                attr = self_attr(t.target)
                if attr is not None:
                    assigned.setdefault(attr, []).append(n.value)
                    stores.add(id(t.target))
        elif type(n) is cst.AnnAssign or type(n) is cst.AugAssign:
            attr = self_attr(n.target)
            if attr is not None:
                assigned.setdefault(attr, []).append(n.value if n.value is not None else cst.Name("None"))
                stores.add(id(n.target))
        elif type(n) is cst.Attribute and id(n) not in stores:
            attr = self_attr(n)
            if attr is not None:
                reads[attr] = reads.get(attr, 0) + 1
    return assigned, reads


class SyntaxMemo:
    """One file's memo of syntax answers asked again and again: the names each
    statement binds (once per later use of each name) and each class's ``self.<attr>``
    table. Entries keep their node, so an id is never reused while the memo lives."""

    __slots__ = ("bound", "classes")

    def __init__(self) -> None:
        self.bound: dict[int, tuple[cst.CSTNode, frozenset[str]]] = {}
        self.classes: dict[int, tuple[cst.ClassDef, ClassIndex]] = {}

    def bound_names(self, node: cst.CSTNode) -> frozenset[str]:
        hit = self.bound.get(id(node))
        if hit is None or hit[0] is not node:
            hit = self.bound[id(node)] = (node, bound_names(node))
        return hit[1]

    def binds(self, node: cst.CSTNode, name: str) -> bool:
        """True when ``node`` (a statement) may rebind ``name``."""
        return name in self.bound_names(node)

    def class_index(self, cls: cst.ClassDef) -> ClassIndex:
        hit = self.classes.get(id(cls))
        if hit is None or hit[0] is not cls:
            hit = self.classes[id(cls)] = (cls, class_index(cls))
        return hit[1]

    def class_attr_assignments(self, cls: cst.ClassDef, attr: str) -> list[cst.BaseExpression]:
        """Values assigned to ``self.<attr>`` anywhere in ``cls`` (all methods)."""
        return self.class_index(cls)[0].get(attr, [])

    def class_attr_uses(self, cls: cst.ClassDef, attr: str) -> int:
        """How often ``self.<attr>`` is read in ``cls``."""
        return self.class_index(cls)[1].get(attr, 0)
