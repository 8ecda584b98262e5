"""Reusing a top-level statement's findings between checks of an edited document.

The language server checks a document after every edit, and most edits change one
top-level statement. Walking every statement with every rule again was most of the
cost of a check (issue 12). :class:`StatementMemo` keeps, per top-level statement node,
the findings the rules made while walking it, and walks again only the statements an
edit can have changed the findings of. It is the engine's ``StatementReuse``: the
language server hands it to the engine in the document's ``ParseCache``; the command
line never makes one. It keeps the bookkeeping (which statements changed, which findings
are kept) and asks the engine (:mod:`kerasfit.engine.reuse`) everything about the code:
the statements' signatures, and what a check's findings rested on.

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
  linked to another when one binds a name the other spells (the engine's
  :func:`~kerasfit.engine.reuse.signature`); the
  statements linked to a changed one, and transitively those linked to them, are walked
  again. The walk stops at an unchanged import or literal constant: what others learn
  through it depends on its text alone;
- facts about the whole file (does it use a TPU, which functions are input pipelines,
  the core count, what its text spells): the rules ask the model for them; the engine
  records them with each check (:class:`~kerasfit.engine.reuse.Rested`), and after a
  check that kept findings recomputes them and compares them with the values the kept
  findings were made with (:meth:`~kerasfit.engine.reuse.CheckedFile.holds`); likewise
  what the model reads when it is created (imports, the Keras flavour);
- the imports (framework flavour, aliases): an edit that adds, changes or removes an
  import anywhere checks the whole file;
- other files of the project: the digests of the files the last check consulted
  (:meth:`~kerasfit.engine.reuse.CheckedFile.deps_hold`);
- the settings: any change checks the whole file.

Any doubt is a whole-file check, which is what a check without a memo does. The
hypothesis sessions in tests/test_lsp_memo.py hold the two equal.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import libcst as cst

from ..engine.reuse import CheckedFile, Rested, Signature, signature
from ..ruleapi.reads import UNTRACKED
from ..ruleapi.rule import Report, Rule

# When more statements than this share must be walked again, a whole-file walk is as cheap.
_MOST = 0.5


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
        if sig.links_all:
            star.append(i)
    out: set[int] = set()
    todo: list[Signature] = list(removed)
    for i, st in enumerate(body):
        if id(st) in changed:
            out.add(i)
            todo.append(sigs[id(st)])
    if any(s.links_all for s in todo):
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
        # what the kept findings rested on beyond their statements' text (the engine's record)
        self.rested: Rested | None = None
        # what the last check did (for tests and the benchmark): statements walked by
        # every rule, statements whose findings were kept, rules walked over every statement
        self.walked = 0
        self.reused = 0
        self.rewalked: tuple[str, ...] = ()

    def forget(self) -> None:
        """Drop every kept finding."""
        self.__init__()  # type: ignore[misc]

    @property
    def deps(self) -> dict[str, str]:
        """The other files of the project the kept findings rest on (path -> digest)."""
        return dict(self.rested.deps) if self.rested is not None else {}

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
             checked: CheckedFile) -> Plan | None:
        """How to walk ``module``: which statements keep their findings, for which rules;
        None when no rule's findings can be kept (then nothing is kept either)."""
        keep = [reusable(type(r)) for r in rules]
        if not any(keep):
            return None
        sigs = self.sigs
        fresh = self.signatures(module)
        reuse: set[int] = set()
        if self.module is not None and key == self.key and checked.deps_hold(self.rested):
            old = {id(st) for st in self.module.body}
            changed = {id(st) for st in module.body if id(st) not in old}
            now = {id(st) for st in module.body}
            removed = [sigs[id(st)] for st in self.module.body if id(st) not in now]
            if not any(fresh[i].imports for i in changed) and not any(s.imports for s in removed):
                again = affected(module.body, changed, removed, fresh)
                if again is not None:
                    reuse = {i for i in now if i not in again and i in self.found}
        return Plan(self, module, key, rules, keep, crashes, reuse, checked)


class Plan:
    """One check's walk (the engine's ``StatementPlan``): restores kept findings of the
    reusable rules, records new ones."""

    def __init__(
        self, memo: StatementMemo, module: cst.Module, key: object, rules: Sequence[Rule], keep: list[bool],
        crashes: list[tuple[Rule, BaseException]], reuse: set[int], checked: CheckedFile,
    ) -> None:
        self.memo, self.module, self.key, self.rules, self.crashes = memo, module, key, rules, crashes
        self.checked = checked
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

    def holds(self) -> bool:
        """What the kept findings were made with still holds."""
        rested = self.memo.rested
        return not self.reuse or (rested is not None and self.checked.holds(rested, self.reuse))

    def commit(self) -> None:
        memo = self.memo
        memo.key, memo.module, memo.found = self.key, self.module, self.found
        memo.sigs = memo.signatures(self.module)
        memo.rested = self.checked.rested()
        memo.walked = len(self.found) - len(self.reuse)
        memo.reused = len(self.reuse)
        memo.rewalked = tuple(r.code for r in self.rewalk)
