"""Reusing a top-level statement's findings between checks of an edited document.

The language server checks a document after every edit, and most edits change one
top-level statement. Walking every statement with every rule again was most of the
cost of a check (issue 12). :class:`StatementMemo` keeps, per top-level statement node,
the findings the rules made while walking it, and walks again only the statements an
edit can have changed the findings of. It is the engine's ``StatementReuse``: the
language server hands it to the engine in the document's ``ParseCache``; the command
line never makes one.

Which rules' findings are kept comes from what each rule declares it reads
(``Rule.reads``, :class:`~kerasfit.ruleapi.rule.Reads`): a rule reading only what is tracked
below (the statement and what it reaches by name, whole-file facts, the project) has
its findings kept; any other -- one that gathers across statements, or declares
nothing -- walks every statement on every check, kept ones included.

What a kept finding can depend on, and how each dependency is tracked (whole-file facts
and the project guard every kept finding: the model reads them on every rule's behalf,
dropping demo code by a whole-file fact and resolving names through the project):

- its own text: :class:`~kerasfit.engine.parse.ParseCache` gives an unchanged statement the
  same node in every module, so a statement is "changed" exactly when its node is new;
- other statements, through names: rules follow names to their bindings, functions to
  their call sites, attributes and dict keys to where they are stored. A statement is
  linked to another when one binds a name the other spells (:func:`signature`); the
  statements linked to a changed one, and transitively those linked to them, are walked
  again. The walk stops at an unchanged import or literal constant: what others learn
  through it depends on its text alone;
- facts about the whole file (does it use a TPU, which functions are input pipelines,
  the core count, what its text spells): computed through
  :meth:`SemanticModel.file_fact`, recomputed after every check and compared with the
  values the reused findings were made with; likewise what the context reads when it
  is created (imports, the Keras flavour, module-level names);
- the imports (framework flavour, aliases): an edit that adds, changes or removes an
  import anywhere checks the whole file;
- other files of the project: the digests of the files the last check consulted;
- the settings: any change checks the whole file.

Any doubt is a whole-file check, which is what a check without a memo does. The
hypothesis sessions in tests/test_lsp_memo.py hold the two equal.
"""

from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import libcst as cst

from ..ruleapi.reads import UNTRACKED
from ..ruleapi.rule import Report, Rule
from ..semantic.fileindex import FileIndex
from ..semantic.index import ProjectIndex
from ..semantic.indexparts import Joined, join_parts
from ..semantic.model import ModelHints, SemanticModel
from ..semantic.nodes import string_key, child_fields, is_node
from ..core.symbols import FLAG_DEFINERS

# When more statements than this share must be walked again, a whole-file walk is as cheap.
_MOST = 0.5


@dataclass(frozen=True)
class Signature:
    """What links a top-level statement to the others (see the module docstring)."""

    binds: frozenset[str]  # module names it binds; defs, attributes, keys it defines at any depth
    reads: frozenset[str]  # every name, attribute and keyword it spells
    inert: bool  # an import or literal constant: nothing reaches others through it
    imports: bool  # holds an import statement at any depth


_DEFS = (cst.FunctionDef, cst.Lambda)


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
        self.binds.add(_STAR)


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
    return Signature(frozenset(signer.binds), frozenset(signer.reads), only_imports or literal, signer.imports)


_STAR = "*"


def affected(
    body: Sequence[cst.CSTNode], changed: set[int], removed: Sequence[Signature], sigs: dict[int, Signature]
) -> set[int] | None:
    """ids of the statements of ``body`` to walk again: the changed ones and those linked
    to them (see the module docstring); None when the whole file must be walked."""
    binders: dict[str, list[int]] = {}
    readers: dict[str, list[int]] = {}
    star: list[int] = []
    for i, st in enumerate(body):
        sig = sigs[id(st)]
        for n in sig.binds:
            binders.setdefault(n, []).append(i)
        for n in sig.reads:
            readers.setdefault(n, []).append(i)
        if _STAR in sig.binds:
            star.append(i)
    out: set[int] = set()
    todo: list[Signature] = list(removed)
    for i, st in enumerate(body):
        if id(st) in changed:
            out.add(i)
            todo.append(sigs[id(st)])
    if any(_STAR in s.binds for s in todo):
        return None
    limit = _MOST * len(body)
    while todo:
        sig = todo.pop()
        near: set[int] = set(star)
        for n in sig.binds:
            near.update(readers.get(n, ()))
        for n in sig.reads:
            near.update(binders.get(n, ()))
        for i in near:
            if i in out:
                continue
            s = sigs[id(body[i])]
            if s.inert:
                continue  # unchanged: its findings and what others learn from it are its text's
            out.add(i)
            if len(out) > limit:
                return None
            todo.append(s)
    return {id(body[i]) for i in out}


# A finding kept without its rule instance (which holds the whole check's context):
# (index of the rule in the settings, node, message, severity, fix, once)
_Kept = tuple[int, Report]


def reusable(rule: type[Rule]) -> bool:
    """Whether ``rule``'s findings for a statement can be kept while what they rest on is
    unchanged: it reads nothing untracked, by its own word and by its code (a module
    visitor of its own sees every statement)."""
    return not (rule.reads & UNTRACKED) and not hasattr(rule, "visit_Module") and not hasattr(rule, "leave_Module")


class StatementMemo:
    """Per document: each top-level statement's findings from the checks so far."""

    def __init__(self) -> None:
        self.key: object = None
        self.module: cst.Module | None = None  # keeps the nodes the ids below name alive
        # the signatures of ``module``'s statements: set with it by a committed check only,
        # since a check stopped mid-walk (the server's, superseded) leaves ``module`` as it was
        self.sigs: dict[int, Signature] = {}
        self._for: cst.Module | None = None  # the module ``_fresh`` holds the signatures of
        self._fresh: dict[int, Signature] = {}
        self.found: dict[int, tuple[list[_Kept], list[tuple[int, BaseException]]]] = {}
        self.facts: dict[str, tuple[Callable[[SemanticModel], Any], Any, bool]] = {}
        self.deps: dict[str, str] = {}
        self.read_facts: object = None  # what the context reads on creation (_read_facts)
        # the statements' own file indexes, joined (semantic.indexparts)
        self.index_parts = Joined()
        # what the last check did (for tests and the benchmark): statements walked by
        # every rule, statements whose findings were kept, rules walked over every statement
        self.walked = 0
        self.reused = 0
        self.rewalked: tuple[str, ...] = ()

    def forget(self) -> None:
        """Drop every kept finding (the statements' indexes stay: they depend on nothing else)."""
        parts = self.index_parts
        self.__init__()  # type: ignore[misc]
        self.index_parts = parts

    def hints(self, module: cst.Module) -> ModelHints:
        """What the model of ``module`` is told: the statements holding no import, and its
        file index joined from the statements' kept indexes."""
        return ModelHints(self.import_free(module), self._join)

    def _join(self, module: cst.Module) -> FileIndex:
        return join_parts(module, self.index_parts)

    def signatures(self, module: cst.Module) -> dict[int, Signature]:
        """Each top-level statement's signature (kept ones reused; computed once per module)."""
        if self._for is module:
            return self._fresh
        sigs = self.sigs
        fresh: dict[int, Signature] = {}
        for st in module.body:
            s = sigs.get(id(st))
            fresh[id(st)] = s if s is not None else signature(st)
        self._for, self._fresh = module, fresh
        return fresh

    def import_free(self, module: cst.Module) -> frozenset[int]:
        """ids of the top-level statements of ``module`` that hold no import at any depth."""
        return frozenset(i for i, s in self.signatures(module).items() if not s.imports)

    def plan(self, module: cst.Module, key: object, rules: Sequence[Rule], crashes: list[tuple[Rule, BaseException]],
             ctx: SemanticModel) -> Plan | None:
        """How to walk ``module``: which statements keep their findings, for which rules;
        None when no rule's findings can be kept (then nothing is kept either)."""
        keep = [reusable(type(r)) for r in rules]
        if not any(keep):
            return None
        project = ctx.project
        sigs = self.sigs
        fresh = self.signatures(module)
        reuse: set[int] = set()
        if self.module is not None and key == self.key and self._deps_hold(project):
            old = {id(st) for st in self.module.body}
            changed = {id(st) for st in module.body if id(st) not in old}
            now = {id(st) for st in module.body}
            removed = [sigs[id(st)] for st in self.module.body if id(st) not in now]
            if not any(fresh[i].imports for i in changed) and not any(s.imports for s in removed):
                again = affected(module.body, changed, removed, fresh)
                if again is not None:
                    reuse = {i for i in now if i not in again and i in self.found}
        return Plan(self, module, key, rules, keep, crashes, reuse)

    def _deps_hold(self, index: ProjectIndex) -> bool:
        if not self.deps:
            return True
        # (by content hash: a file of the tree a tree-wide answer rests on need not parse)
        return all(index.digest_of(path) == digest for path, digest in self.deps.items())


def _read_facts(ctx: SemanticModel) -> object:
    """What every context reads when created: the imports and the Keras flavour (which
    an environment variable set anywhere in the file changes). Its module-level names
    need no comparing: a statement binding one is linked to every statement spelling it."""
    return ctx.names.uses_legacy_keras, sorted(ctx.names.imports.items())


class Plan:
    """One check's walk (the engine's ``StatementPlan``): restores kept findings of the
    reusable rules, records new ones."""

    def __init__(
        self, memo: StatementMemo, module: cst.Module, key: object, rules: Sequence[Rule], keep: list[bool],
        crashes: list[tuple[Rule, BaseException]], reuse: set[int],
    ) -> None:
        self.memo, self.module, self.key, self.rules, self.crashes = memo, module, key, rules, crashes
        self.keep = keep
        self.rewalk: Sequence[Rule] = [r for r, k in zip(rules, keep) if not k]
        self.reuse = reuse
        self.found: dict[int, tuple[list[_Kept], list[tuple[int, BaseException]]]] = {}
        self._marks: list[int] = []
        self._crash_mark = 0
        self._rule_index = {id(r): i for i, r in enumerate(rules)}

    def restore(self, stmt: cst.CSTNode) -> bool:
        """Restore ``stmt``'s findings instead of walking it; False: walk it."""
        if id(stmt) not in self.reuse:
            return False
        kept, crashed = self.memo.found[id(stmt)]
        for i, rep in kept:
            rule = self.rules[i]
            rule.reports.append(dataclasses.replace(rep, rule=type(rule)))
        for i, exc in crashed:
            self.crashes.append((self.rules[i], exc))
        self.found[id(stmt)] = (kept, crashed)
        return True

    def begin(self, stmt: cst.CSTNode) -> None:
        self._marks = [len(r.reports) for r in self.rules]
        self._crash_mark = len(self.crashes)

    def end(self, stmt: cst.CSTNode) -> None:
        kept: list[_Kept] = []
        for i, (r, mark) in enumerate(zip(self.rules, self._marks)):
            if self.keep[i]:
                kept.extend((i, rep) for rep in r.reports[mark:])
        crashed = [
            (i, exc) for r, exc in self.crashes[self._crash_mark :] if self.keep[i := self._rule_index[id(r)]]
        ]
        self.found[id(stmt)] = (kept, crashed)

    def holds(self, ctx: SemanticModel) -> bool:
        """The whole-file facts the kept findings were made with still hold."""
        if not self.reuse:
            return True
        body = self.module.body
        index = ctx.index
        starts = [index.order[id(st)] for st in body]
        kept_at = [id(st) in self.reuse for st in body]
        order = index.order

        def in_kept(i: int) -> bool:
            o = order.get(i)
            return o is not None and kept_at[bisect.bisect_right(starts, o) - 1]

        if self.memo.read_facts != _read_facts(ctx):
            return False
        for key, (compute, old, by_node) in self.memo.facts.items():
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

    def commit(self, ctx: SemanticModel) -> None:
        memo = self.memo
        memo.key, memo.module, memo.found = self.key, self.module, self.found
        memo.sigs = memo.signatures(self.module)
        memo.facts = dict(ctx.facts)
        memo.read_facts = _read_facts(ctx)
        memo.walked = len(self.found) - len(self.reuse)
        memo.reused = len(self.reuse)
        memo.rewalked = tuple(r.code for r in self.rewalk)
        memo.deps = ctx.project.deps_of(ctx.filename) if ctx.filename else {}
