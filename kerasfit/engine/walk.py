"""One traversal of a module running every rule's visitors (STYLE 5)."""

from __future__ import annotations

import threading
from typing import Callable, Iterable

import libcst as cst

from ..ruleapi.rule import Rule
from ..semantic.fileindex import FileIndex
from ..semantic.model import SemanticModel
from .reuse import StatementPlan
from .settings import stop_now


# a rule's bound visit_/leave_ method
Visitor = Callable[[cst.CSTNode], None]


# libcst's node classes by name (a visit_X method names X)
_NODE_TYPES = {name: t for name, t in vars(cst).items() if isinstance(t, type) and issubclass(t, cst.CSTNode)}


def _dispatch(rules: Iterable[Rule]) -> tuple[dict[str, list[Visitor]], dict[str, list[Visitor]]]:
    """The rules' visit_ and leave_ methods by node type name."""
    visit: dict[str, list[Visitor]] = {}
    leave: dict[str, list[Visitor]] = {}
    for rule in rules:
        for attr in dir(type(rule)):
            if attr.startswith("visit_"):
                visit.setdefault(attr[6:], []).append(getattr(rule, attr))
            elif attr.startswith("leave_"):
                leave.setdefault(attr[6:], []).append(getattr(rule, attr))
    return visit, leave


def walk(
    module: cst.Module, ctx: SemanticModel, rules: Iterable[Rule], on_error: Callable[[Rule, BaseException], None],
    plan: StatementPlan | None = None, stop: threading.Event | None = None,
) -> None:
    """Every rule's visitors over ``module``, in source order; ``plan`` (the language
    server's) restores the findings of statements it keeps instead of walking them with
    every rule (the rules it names in ``rewalk`` still walk them).

    The walk replays the file index's node runs (``FileIndex.runs``: every check builds the
    index anyway) instead of enumerating each node's children again, and stops only at
    the nodes some rule visits or leaves."""
    visit, leave = _dispatch(rules)
    if not visit and not leave:
        return
    rewalk = _dispatch(plan.rewalk) if plan is not None else ({}, {})
    index = ctx.index
    _visit(visit.get("Module", ()), module, on_error)
    replay = _Replay(index, visit, leave, on_error)
    rereplay = _Replay(index, *rewalk, on_error) if rewalk[0] or rewalk[1] else None
    for top, run in zip(module.body, index.runs, strict=True):
        stop_now(stop)
        if plan is not None:
            if plan.restore(top):
                if rereplay is not None:
                    rereplay.run(run)
                continue
            plan.begin(top)
        replay.run(run)
        if plan is not None:
            plan.end(top)
    _visit(leave.get("Module", ()), module, on_error)


class _Replay:
    """The visitors over the file index's runs of nodes (one top-level statement and
    everything under it). The walk's own path (``path``: the module, then the ancestors
    of the node visited last that are on its way) is made from the index's parent links,
    climbing only as far as the path of the node visited before; it tells when the walk
    leaves the subtree of a node some rule leaves. The walk owns it: the model answers
    no question from it."""

    def __init__(
        self, index: FileIndex, visit: dict[str, list[Visitor]], leave: dict[str, list[Visitor]],
        on_error: Callable[[Rule, BaseException], None],
    ) -> None:
        self.parent, self.on_error = index.parent, on_error
        self.path: list[cst.CSTNode] = [index.module]
        # each node type some rule visits or leaves: its visit_ and leave_ methods
        self.kinds = {
            _NODE_TYPES[name]: (visit.get(name), leave.get(name)) for name in {*visit, *leave} if name in _NODE_TYPES
        }
        # a node's place on the walk path while it is there (the module's, for good)
        self.at: dict[int, int] = {id(index.module): 0}

    def run(self, nodes: list[cst.CSTNode]) -> None:
        """The visitors of ``nodes``, a top-level statement and its subtree in source order."""
        on_error, parent, at, kinds, anc = self.on_error, self.parent, self.at, self.kinds, self.path
        opened: list[tuple[int, cst.CSTNode, list[Visitor]]] = []  # (place on the path, node, leave_ methods)
        for node in [n for n in nodes if type(n) in kinds]:
            p = parent[id(node)]
            k = at.get(id(p))
            missing = None
            if k is None or k >= len(anc) or anc[k] is not p:
                # the ancestors not on the path yet, up to the first one that is
                missing = [p]
                while True:
                    p = parent[id(p)]
                    k = at.get(id(p))
                    if k is not None and k < len(anc) and anc[k] is p:
                        break
                    missing.append(p)
            while opened and opened[-1][0] > k:  # left the subtrees of nodes with leave_ methods
                kl, left, gone = opened.pop()
                del anc[kl:]
                _visit(gone, left, on_error)
            del anc[k + 1 :]
            if missing is not None:
                for p in reversed(missing):
                    at[id(p)] = len(anc)
                    anc.append(p)
            fns, leaves = kinds[type(node)]
            if fns is not None:
                _visit(fns, node, on_error)
            if leaves is not None:
                opened.append((len(anc), node, leaves))
            at[id(node)] = len(anc)
            anc.append(node)
        while opened:
            kl, left, fns = opened.pop()
            del anc[kl:]
            _visit(fns, left, on_error)
        del anc[1:]


def _visit(fns: Iterable[Visitor], node: cst.CSTNode, on_error: Callable[[Rule, BaseException], None]) -> None:
    for fn in fns:
        try:
            fn(node)
        except Exception as exc:  # one broken rule must not hide the others' findings
            on_error(fn.__self__, exc)  # type: ignore[attr-defined]  # a bound method of the rule

