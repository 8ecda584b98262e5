"""Findings kept between checks: the protocol a caller that checks one document again and
again implements (the language server's memo) and hands the engine through its
:class:`~kerasfit.engine.parse.ParseCache`, and what the engine offers such a caller about
a check, so that it needs nothing of the semantic model:

- :func:`signature`: what links a top-level statement to the others (the names it binds
  and spells), from which the caller tells which statements an edit can have changed the
  findings of;
- :class:`CheckedFile`: what the findings of one check rested on beyond their statements'
  text (whole-file facts, what the model reads when created, other files of the project),
  recorded as a :class:`Rested` the caller keeps, and compared with a later check.

The engine knows only the protocol; the caller keeps the bookkeeping (which statements
changed, which findings are kept).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Callable, Collection, Mapping, Protocol, Sequence

import libcst as cst

from ..core.symbols import FLAG_DEFINERS
from ..ruleapi.rule import Rule
from ..semantic.model import SemanticModel
from ..semantic.nodes import child_fields, is_node, string_key


class StatementPlan(Protocol):
    """One check's walk as planned by a caller that keeps findings between checks of a
    document (the language server)."""

    # rules walked over every statement, kept ones included (their findings are not kept)
    rewalk: Sequence[Rule]

    def restore(self, stmt: cst.CSTNode) -> bool:
        """Put back the kept findings of ``stmt`` and say True; False: walk it."""

    def begin(self, stmt: cst.CSTNode) -> None:
        """``stmt`` is about to be walked by every rule."""

    def end(self, stmt: cst.CSTNode) -> None:
        """``stmt`` was walked by every rule (the rules' reports since ``begin`` are its)."""

    def holds(self) -> bool:
        """After the walk: what the kept findings rest on still holds (else the whole file
        is walked again, without a plan)."""

    def commit(self) -> None:
        """The check is done: keep its findings for the next one."""


class StatementReuse(Protocol):
    """What a caller checking one document again and again hands :func:`lint_module`
    (through its :class:`ParseCache`); a check without one walks everything."""

    def import_free(self, module: cst.Module) -> frozenset[int]:
        """ids of the top-level statements of ``module`` that hold no import at any depth
        (the model need not look for imports there)."""

    def plan(self, module: cst.Module, key: object, rules: Sequence[Rule], crashes: list[tuple[Rule, BaseException]],
             checked: CheckedFile) -> StatementPlan | None:
        """How to walk ``module`` checked with ``key`` (the settings); None: walk it all.
        ``checked``: what this check's findings rest on, asked after the walk."""

    def forget(self) -> None:
        """Drop every kept finding."""


# ---- what links a statement to the others -------------------------------------------


@dataclass(frozen=True)
class Signature:
    """What links a top-level statement to the others: a statement binding a name another
    spells can change what the other's findings say."""

    binds: frozenset[str]  # module names it binds; defs, attributes, keys it defines at any depth
    reads: frozenset[str]  # every name, attribute and keyword it spells
    inert: bool  # an import or literal constant: nothing reaches others through it
    imports: bool  # holds an import statement at any depth
    links_all: bool = False  # binds names no walk here follows (match captures): linked to every statement


def _string_name(node: cst.CSTNode | None) -> str | None:
    key = string_key(node) if isinstance(node, cst.BaseExpression) else None
    return key if key is not None and key.isidentifier() else None


class _Signer:
    """The names one statement binds and reads, gathered node by node (see :func:`signature`)."""

    def __init__(self) -> None:
        self.binds: set[str] = set()
        self.reads: set[str] = set()
        self.imports = False
        self.calls = False
        self.links_all = False

    def store(self, target: cst.CSTNode, local: bool) -> None:
        if isinstance(target, cst.Name):
            if not local:
                self.binds.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self.store(el.value, local)
        elif isinstance(target, cst.StarredElement):
            self.store(target.value, local)
        elif isinstance(target, cst.Attribute):
            self.binds.add(target.attr.value)
        elif isinstance(target, cst.Subscript):
            for sub in target.slice:
                if isinstance(sub.slice, cst.Index):
                    key = _string_name(sub.slice.value)
                    if key is not None:
                        self.binds.add(key)

    def name(self, node: Any, local: bool) -> None:
        self.reads.add(node.value)

    def attribute(self, node: Any, local: bool) -> None:
        self.reads.add(node.attr.value)

    def arg(self, node: Any, local: bool) -> None:
        if node.keyword is not None:
            self.reads.add(node.keyword.value)

    def call(self, node: Any, local: bool) -> None:
        self.calls = True
        func = node.func
        attr = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        if attr == "dict":
            self.binds.update(a.keyword.value for a in node.args if a.keyword is not None)
        elif attr in FLAG_DEFINERS or attr == "setattr":
            i = 1 if attr == "setattr" else 0
            key = _string_name(node.args[i].value) if len(node.args) > i else None
            if key is not None:
                self.binds.add(key)

    def dict_element(self, node: Any, local: bool) -> None:
        key = _string_name(node.key)
        if key is not None:
            self.binds.add(key)

    def definition(self, node: Any, local: bool) -> None:
        self.binds.add(node.name.value)

    def assign(self, node: Any, local: bool) -> None:
        for t in node.targets:
            self.store(t.target, local)

    def target(self, node: Any, local: bool) -> None:  # AnnAssign, AugAssign, NamedExpr, For, Del
        self.store(node.target, local)

    def with_item(self, node: Any, local: bool) -> None:
        if node.asname is not None:
            self.store(node.asname.name, local)

    def handler(self, node: Any, local: bool) -> None:
        if node.name is not None:
            self.store(node.name.name, local)

    def declaration(self, node: Any, local: bool) -> None:  # global, nonlocal
        self.binds.update(n.name.value for n in node.names)

    def import_(self, node: Any, local: bool) -> None:
        self.imports = True
        names = node.names
        if local or isinstance(names, cst.ImportStar):
            return
        for alias in names:
            if alias.asname is not None:
                self.store(alias.asname.name, local)
            else:
                n = alias.name
                while isinstance(n, cst.Attribute):
                    n = n.value
                self.store(n, local)

    def match(self, node: Any, local: bool) -> None:
        # match captures bind names this walk does not follow: link it to everything
        self.links_all = True


_SIGN: dict[type[cst.CSTNode], Callable[[_Signer, Any, bool], None]] = {
    cst.Name: _Signer.name, cst.Attribute: _Signer.attribute, cst.Arg: _Signer.arg, cst.Call: _Signer.call,
    cst.DictElement: _Signer.dict_element, cst.FunctionDef: _Signer.definition, cst.ClassDef: _Signer.definition,
    cst.Assign: _Signer.assign, cst.AnnAssign: _Signer.target, cst.AugAssign: _Signer.target,
    cst.NamedExpr: _Signer.target, cst.For: _Signer.target, cst.Del: _Signer.target,
    cst.WithItem: _Signer.with_item, cst.ExceptHandler: _Signer.handler, cst.ExceptStarHandler: _Signer.handler,
    cst.Global: _Signer.declaration, cst.Nonlocal: _Signer.declaration,
    cst.Import: _Signer.import_, cst.ImportFrom: _Signer.import_, cst.Match: _Signer.match,
}


def signature(stmt: cst.CSTNode) -> Signature:
    """:class:`Signature` of one top-level statement (one walk of its nodes)."""
    signer = _Signer()
    stack: list[tuple[cst.CSTNode, bool]] = [(stmt, False)]
    while stack:
        node, local = stack.pop()  # local: inside a function body (its names are its own)
        tp = type(node)
        sign = _SIGN.get(tp)
        if sign is not None:
            sign(signer, node, local)
        inner = local or tp is cst.FunctionDef or tp is cst.Lambda
        for name in child_fields(tp):
            v = getattr(node, name)
            sc = inner if name == "body" else local
            if type(v) is list or type(v) is tuple:
                for c in v:
                    if is_node(c):
                        stack.append((c, sc))
            elif v is not None and is_node(v):
                stack.append((v, sc))
    only_imports = isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
    )
    literal = isinstance(stmt, cst.SimpleStatementLine) and not signer.calls and signer.reads <= signer.binds
    return Signature(frozenset(signer.binds), frozenset(signer.reads), only_imports or literal, signer.imports,
                     signer.links_all)


# ---- what a check's findings rested on ----------------------------------------------

# a whole-file fact as the model keeps it (SemanticModel.file_fact): (compute, value, keyed by node ids)
_Fact = tuple[Callable[[SemanticModel], Any], Any, bool]


@dataclass(frozen=True)
class Rested:
    """What one check's findings rested on beyond their statements' text; kept by the
    caller for :meth:`CheckedFile.holds` to compare a later check with."""

    facts: Mapping[str, _Fact]  # the whole-file facts the rules asked for
    created: object  # what the model reads when created (:func:`_created_with`)
    deps: Mapping[str, str]  # the other files of the project consulted (path -> digest)


def _created_with(ctx: SemanticModel) -> object:
    """What every model reads when created: the imports and the Keras flavour (which
    an environment variable set anywhere in the file changes). Its module-level names
    need no comparing: a statement binding one is linked to every statement spelling it."""
    return ctx.names.uses_legacy_keras, sorted(ctx.names.imports.items())


class CheckedFile:
    """One check of a document, as a caller keeping its findings sees it (the engine makes
    it; the caller asks it, never the model)."""

    __slots__ = ("_ctx",)

    def __init__(self, ctx: SemanticModel) -> None:
        self._ctx = ctx

    def deps_hold(self, rested: Rested | None) -> bool:
        """The other files ``rested`` consulted are as they were (by content hash: a file of
        the tree a tree-wide answer rests on need not parse)."""
        if rested is None:
            return True
        project = self._ctx.project
        return all(project.digest_of(path) == digest for path, digest in rested.deps.items())

    def holds(self, rested: Rested, kept: Collection[int]) -> bool:
        """What findings kept from the check that ``rested`` records still holds in this
        one: what the model read when created, and every whole-file fact, recomputed now
        and compared (a fact keyed by node ids only on the nodes of the ``kept``
        top-level statements, by id)."""
        ctx = self._ctx
        if rested.created != _created_with(ctx):
            return False
        body = ctx.module.body
        order = ctx.index.order
        starts = [order[id(st)] for st in body]
        kept_at = [id(st) in kept for st in body]

        def in_kept(i: int) -> bool:
            o = order.get(i)
            return o is not None and kept_at[bisect.bisect_right(starts, o) - 1]

        for key, (compute, old, by_node) in rested.facts.items():
            new = ctx.file_fact(key, compute, by_node=by_node)
            if not by_node:
                if new != old:
                    return False
            elif isinstance(old, dict):
                if {k: v for k, v in old.items() if in_kept(k)} != {k: v for k, v in new.items() if in_kept(k)}:
                    return False
            elif {k for k in old if in_kept(k)} != {k for k in new if in_kept(k)}:
                return False
        return True

    def rested(self) -> Rested:
        """What this check's findings rest on (once its walk is done)."""
        ctx = self._ctx
        return Rested(dict(ctx.facts), _created_with(ctx), ctx.project.deps_of(ctx.filename) if ctx.filename else {})
