"""Parse once, walk once, report, suppress, fix (STYLE 5).

The engine knows nothing about any particular rule. It runs every enabled rule in one
traversal of the libcst tree, turns reports into Diagnostics with positions computed
only for the reported nodes, drops suppressed ones, and applies fixes as text edits so
everything around them keeps its formatting.
"""

from __future__ import annotations

import ast
import bisect
import re
import threading
from collections import ChainMap
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol, Sequence, cast

import libcst as cst
from libcst._nodes.internal import CodegenState

from . import parseguard
from .layout import for_libcst
from .parseguard import budget_mask, parse_module
from .imports import ImportTable, may_orphan
from .incremental import IncrementalAST, cut_offsets, row_shift, statement_start_row
from .incremental import line_starts as incremental_line_starts
from .fixes import FixSpec, Remove, Replace
from .rule import Report, Rule
from .semantic.fileindex import FileIndex
from .semantic.index import ProjectIndex
from .semantic.model import ModelHints, SemanticModel
from .semantic.scopes import Scopes
from .semantic.nodes import iter_children
from .suppressions import Suppressions
from .types import DEFAULT_TARGET, TARGETS, Applicability, Diagnostic, Edit, Fix, Severity, Target

SYNTAX_ERROR_CODE = "KF001"
SYNTAX_ERROR_NAME = "syntax-error"
INTERNAL_ERROR_CODE = "KF002"
INTERNAL_ERROR_NAME = "rule-crashed"
MAX_FIX_PASSES = 10


@dataclass
class LintSettings:
    """What one file is checked with (resolved from config and flags)."""

    rules: Sequence[type[Rule]]
    target: Target = field(default_factory=lambda: TARGETS[DEFAULT_TARGET])
    options: dict[str, Any] = field(default_factory=dict)
    # Codes whose fixes are dropped (config ``fixable`` / ``unfixable``): still reported.
    unfixable: frozenset[str] = frozenset()
    # The project index of the running check (other files of the tree, read lazily);
    # None: the file is checked alone (an empty index of its own).
    project: ProjectIndex | None = None
    # Set from another thread (the language server's, when the document closes or
    # changes again): the check ends at the next top-level statement with Stopped.
    stop: threading.Event | None = None


class Stopped(Exception):
    """A check was told to stop (``LintSettings.stop``); nothing it found is kept."""


def _stop_now(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise Stopped


# ---- findings kept between checks ----------------------------------------------


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

    def holds(self, ctx: SemanticModel) -> bool:
        """After the walk: what the kept findings rest on still holds (else the whole file
        is walked again, without a plan)."""

    def commit(self, ctx: SemanticModel) -> None:
        """The check is done: keep its findings for the next one."""


class StatementReuse(Protocol):
    """What a caller checking one document again and again hands :func:`lint_module`
    (through its :class:`ParseCache`); a check without one walks everything."""

    def hints(self, module: cst.Module) -> ModelHints:
        """What the model of ``module`` need not find out again."""

    def plan(self, module: cst.Module, key: object, rules: Sequence[Rule], crashes: list[tuple[Rule, BaseException]],
             ctx: SemanticModel) -> StatementPlan | None:
        """How to walk ``module`` checked with ``key`` (the settings); None: walk it all."""

    def forget(self) -> None:
        """Drop every kept finding."""


# ---- traversal -----------------------------------------------------------------

# a rule's bound visit_/leave_ method
_Visitor = Callable[[cst.CSTNode], None]
# libcst's node classes by name (a visit_X method names X)
_NODE_TYPES = {name: t for name, t in vars(cst).items() if isinstance(t, type) and issubclass(t, cst.CSTNode)}


def _dispatch(rules: Iterable[Rule]) -> tuple[dict[str, list[_Visitor]], dict[str, list[_Visitor]]]:
    """The rules' visit_ and leave_ methods by node type name."""
    visit: dict[str, list[_Visitor]] = {}
    leave: dict[str, list[_Visitor]] = {}
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
    scopes = ctx.scopes  # the walk path is handed to the model as a cache of parent links
    index = scopes.index
    anc = scopes.walk_path
    anc.clear()
    scopes.visiting = module
    _visit(visit.get("Module", ()), module, on_error)
    anc.append(module)
    replay = _Replay(index, scopes, visit, leave, on_error)
    rereplay = _Replay(index, scopes, *rewalk, on_error) if rewalk[0] or rewalk[1] else None
    for top, run in zip(module.body, index.runs, strict=True):
        _stop_now(stop)
        if plan is not None:
            if plan.restore(top):
                if rereplay is not None:
                    rereplay.run(run)
                continue
            plan.begin(top)
        replay.run(run)
        if plan is not None:
            plan.end(top)
    del anc[1:]
    scopes.visiting = module
    _visit(leave.get("Module", ()), module, on_error)
    anc.clear()
    scopes.visiting = None


class _Replay:
    """The visitors over the file index's runs of nodes (one top-level statement and
    everything under it; the walk path holds the module). ``scopes.walk_path`` is made
    the visited node's ancestors from the index's parent links, climbing only as far as
    the path of the node visited before; ``scopes.visiting`` names the node whose
    visitors run, so the model answers ``ancestors(node)`` for it from the path."""

    def __init__(
        self, index: FileIndex, scopes: Scopes, visit: dict[str, list[_Visitor]], leave: dict[str, list[_Visitor]],
        on_error: Callable[[Rule, BaseException], None],
    ) -> None:
        self.parent, self.scopes, self.on_error = index.parent, scopes, on_error
        # each node type some rule visits or leaves: its visit_ and leave_ methods
        self.kinds = {
            _NODE_TYPES[name]: (visit.get(name), leave.get(name)) for name in {*visit, *leave} if name in _NODE_TYPES
        }
        # a node's place on the walk path while it is there (the module's, for good)
        self.at: dict[int, int] = {id(index.module): 0}

    def run(self, nodes: list[cst.CSTNode]) -> None:
        """The visitors of ``nodes``, a top-level statement and its subtree in source order."""
        scopes, on_error, parent, at, kinds = self.scopes, self.on_error, self.parent, self.at, self.kinds
        anc = scopes.walk_path
        opened: list[tuple[int, cst.CSTNode, list[_Visitor]]] = []  # (place on the path, node, leave_ methods)
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
                scopes.visiting = left
                _visit(gone, left, on_error)
            del anc[k + 1 :]
            if missing is not None:
                for p in reversed(missing):
                    at[id(p)] = len(anc)
                    anc.append(p)
            fns, leaves = kinds[type(node)]
            if fns is not None:
                scopes.visiting = node
                _visit(fns, node, on_error)
            if leaves is not None:
                opened.append((len(anc), node, leaves))
            at[id(node)] = len(anc)
            anc.append(node)
        while opened:
            kl, left, fns = opened.pop()
            del anc[kl:]
            scopes.visiting = left
            _visit(fns, left, on_error)
        del anc[1:]


def _visit(fns: Iterable[_Visitor], node: cst.CSTNode, on_error: Callable[[Rule, BaseException], None]) -> None:
    for fn in fns:
        try:
            fn(node)
        except Exception as exc:  # one broken rule must not hide the others' findings
            on_error(fn.__self__, exc)  # type: ignore[attr-defined]  # a bound method of the rule


# ---- positions -----------------------------------------------------------------


class _PositionState(CodegenState):
    """Codegen that records offsets for a chosen set of nodes only.

    libcst's PositionProvider records every node (about 2x a parse); we only need the
    handful a rule reported or a fix touches.
    """

    def __init__(self, module: cst.Module, wanted: set[int]) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.wanted = wanted
        self.off = 0
        self.full: dict[int, tuple[int, int]] = {}
        self.syntactic: dict[int, tuple[int, int]] = {}
        self._open: dict[int, int] = {}

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.off += len(value)

    def add_indent_tokens(self) -> None:
        for t in self.indent_tokens:
            self.tokens.append(t)
            self.off += len(t)

    def pop_trailing_newline(self) -> None:
        if self.tokens:
            self.off -= len(self.tokens.pop())

    def before_codegen(self, node: cst.CSTNode) -> None:
        if id(node) in self.wanted:
            self._open[id(node)] = self.off

    def after_codegen(self, node: cst.CSTNode) -> None:
        key = id(node)
        if key in self.wanted and key in self._open:
            self.full[key] = (self._open.pop(key), self.off)

    def record_syntactic_position(  # type: ignore[override]  # a context manager object, not a generator
        self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None, end_node: cst.CSTNode | None = None
    ) -> _Syntactic | _Noop:
        if id(node) in self.wanted:
            return _Syntactic(self, id(node))
        return _NOOP


class _Noop:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NOOP = _Noop()


class _Syntactic:
    """Records where a statement's own text starts and ends (without leading lines)."""

    __slots__ = ("state", "key", "start")

    def __init__(self, state: _PositionState, key: int) -> None:
        self.state, self.key = state, key

    def __enter__(self) -> None:
        self.start = self.state.off

    def __exit__(self, *exc: object) -> None:
        self.state.syntactic[self.key] = (self.start, self.state.off)


_STATEMENT = (cst.SimpleStatementLine, cst.BaseCompoundStatement)
_AST_KIND = {
    cst.FunctionDef: (ast.FunctionDef, ast.AsyncFunctionDef),
    cst.ClassDef: (ast.ClassDef,),
    cst.If: (ast.If,),
    cst.For: (ast.For, ast.AsyncFor),
    cst.While: (ast.While,),
    cst.With: (ast.With, ast.AsyncWith),
    cst.Try: (ast.Try,),
    cst.TryStar: (getattr(ast, "TryStar", ast.Try),),
    cst.Match: (ast.Match,),
}


def _statement_rows(stmts: Sequence[cst.CSTNode]) -> dict[int, int]:
    """id of each statement in ``stmts`` -> the index of its first AST statement."""
    rows: dict[int, int] = {}
    j = 0
    for s in stmts:
        rows.setdefault(id(s), j)
        j += len(s.body) if isinstance(s, cst.SimpleStatementLine) else 1
    return rows


def _rows(stmts: Sequence[cst.CSTNode], memo: dict[int, dict[int, int]] | None) -> dict[int, int]:
    # Each statement list is counted once per Positions, not once per placed node: a
    # long module with a finding in every function made placement quadratic.
    if memo is None:
        return _statement_rows(stmts)
    rows = memo.get(id(stmts))
    if rows is None:
        rows = memo[id(stmts)] = _statement_rows(stmts)
    return rows


def _match_statement(
    stmts: Sequence[cst.CSTNode], astmts: Sequence[ast.stmt], target: cst.CSTNode,
    memo: dict[int, dict[int, int]] | None = None,
) -> ast.stmt | None:
    """The AST statement where ``target`` (one of ``stmts``) starts."""
    j = _rows(stmts, memo).get(id(target))
    if j is None or j >= len(astmts):
        return None
    a = astmts[j]
    kinds = _AST_KIND.get(type(target))
    if kinds is not None and not isinstance(a, kinds):
        return None
    return a


_Block = tuple[Sequence[cst.CSTNode], Sequence[ast.stmt], list[str]]


def _blocks(s: cst.CSTNode, stmt: ast.stmt, default: str) -> list[_Block]:
    """The statement lists nested in a compound statement, paired with the AST's, and
    the indentation each adds."""
    out: list[_Block] = []
    a: Any = stmt  # matched to ``s`` (_match_statement): the same kind, with the same fields

    def indent(b: cst.IndentedBlock) -> str:
        return default if b.indent is None else b.indent

    def block(b: object, al: Sequence[ast.stmt], extra: tuple[str, ...] = ()) -> None:
        if isinstance(b, cst.IndentedBlock):
            out.append((b.body, al, [*extra, indent(b)]))

    if isinstance(s, (cst.FunctionDef, cst.ClassDef, cst.With, cst.While, cst.For)):
        block(s.body, a.body)
        orelse = getattr(s, "orelse", None)
        if isinstance(orelse, cst.Else):
            block(orelse.body, a.orelse)
    elif isinstance(s, cst.If):
        block(s.body, a.body)
        if isinstance(s.orelse, cst.Else):
            block(s.orelse.body, a.orelse)
        elif isinstance(s.orelse, cst.If):
            out.append(([s.orelse], a.orelse, []))  # elif: same indentation
    elif isinstance(s, (cst.Try, cst.TryStar)):
        block(s.body, a.body)
        handlers: Sequence[cst.ExceptHandler | cst.ExceptStarHandler] = s.handlers
        for h, ah in zip(handlers, a.handlers):
            block(h.body, ah.body)
        if s.orelse is not None:
            block(s.orelse.body, a.orelse)
        if s.finalbody is not None:
            block(s.finalbody.body, a.finalbody)
    elif isinstance(s, cst.Match):
        # cases sit one indent deeper than `match`, their bodies deeper again
        case_indent = default if s.indent is None else s.indent
        for c, ac in zip(s.cases, a.cases):
            block(c.body, ac.body, (case_indent,))
    return out


_Unit = tuple[cst.CSTNode, ast.stmt, tuple[str, ...], int]


def _unit_of(
    node: cst.CSTNode, module: cst.Module, tree: ast.Module, parent: Mapping[int, cst.CSTNode],
    memo: dict[int, dict[int, int]] | None = None,
) -> _Unit | None:
    """(innermost statement holding ``node``, its AST statement, enclosing indents, row shift).
    ``memo`` keeps each statement list's rows across the calls of one placement."""
    chain: list[cst.CSTNode] = []
    x: cst.CSTNode | None = node
    while x is not None and x is not module:
        if isinstance(x, _STATEMENT):
            chain.append(x)
        x = parent.get(id(x))
    if x is None or not chain:
        return None
    chain.reverse()
    stmts: Sequence[cst.CSTNode] = module.body
    astmts: Sequence[ast.stmt] = tree.body
    indents: list[str] = []
    shift = 0
    for k, s in enumerate(chain):
        a = _match_statement(stmts, astmts, s, memo)
        if a is None:
            return None
        if k == 0:
            shift = row_shift(a)  # an incrementally parsed tree: see kerasfit.incremental
        if k == len(chain) - 1 or isinstance(s, cst.SimpleStatementLine):
            return s, a, tuple(indents), shift
        nxt = chain[k + 1]
        for cl, al, more in _blocks(s, a, module.default_indent):
            if id(nxt) in _rows(cl, memo):
                stmts, astmts = cl, al
                indents.extend(more)
                break
        else:
            return s, a, tuple(indents), shift  # nested somewhere unmapped: generate this statement whole
    return None


# What libcst may leave out of its output, in front of a statement's first token.
_DROPPABLE = frozenset(" \t\f\\\r\n")


class SourceAlignment:
    """Maps offsets in libcst's generated text onto the source it was parsed from.

    The two agree on every character but whitespace, form feeds and backslash
    continuations in front of a statement: libcst leaves some out (a form feed at a
    line start, a lone backslash line) and sometimes moves a form feed to the next
    line's indentation. Where such runs differ, their common tail (the indentation
    before the next token) is aligned; break points record where the offset between
    the two texts changes.
    """

    __slots__ = ("gen", "src")

    def __init__(self, gen: list[int], src: list[int]) -> None:
        self.gen, self.src = gen, src

    @classmethod
    def of(cls, gen: str, src: str) -> SourceAlignment | None:
        gpts, spts = [0], [0]
        i = j = 0
        n, m = len(gen), len(src)
        while i < n or j < m:
            k = _common_prefix(gen, i, src, j)
            i += k
            j += k
            if i >= n and j >= m:
                break
            i2, j2 = i, j
            while i2 < n and gen[i2] in _DROPPABLE:
                i2 += 1
            while j2 < m and src[j2] in _DROPPABLE:
                j2 += 1
            if (i2, j2) == (i, j) or (i2 < n) != (j2 < m) or (i2 < n and gen[i2] != src[j2]):
                return None  # a difference that is not layout: no offset is trusted
            c = 0
            while c < i2 - i and c < j2 - j and gen[i2 - 1 - c] == src[j2 - 1 - c]:
                c += 1
            gpts.append(i)
            spts.append(j)
            gpts.append(i2 - c)
            spts.append(j2 - c)
            i, j = i2, j2
        return cls(gpts, spts)

    def start(self, g: int) -> int:
        """A start offset: where the generated character at ``g`` sits in the source."""
        k = bisect.bisect_right(self.gen, g) - 1
        s = self.src[k] + g - self.gen[k]
        return min(s, self.src[k + 1]) if k + 1 < len(self.src) else s

    def end(self, g: int) -> int:
        """An end offset: just after the source character generated at ``g - 1``."""
        k = max(bisect.bisect_left(self.gen, g) - 1, 0)
        s = self.src[k] + g - self.gen[k]
        return min(s, self.src[k + 1]) if k + 1 < len(self.src) else s

    def span(self, a: int, b: int) -> tuple[int, int]:
        start = self.start(a)
        return start, max(start, self.end(b))


def _common_prefix(a: str, i: int, b: str, j: int) -> int:
    """Length of the common prefix of ``a[i:]`` and ``b[j:]`` (compares in doubling blocks)."""
    k, step = 0, 64
    while True:
        if a[i + k : i + k + step] == b[j + k : j + k + step]:
            if i + k + step >= len(a) or j + k + step >= len(b):
                return min(len(a) - i, len(b) - j)
            k += step
            step *= 2
            continue
        if step == 1:
            return k
        step //= 2


# a statement generated for positions: (statement, indents, the nodes it placed, its
# text, full spans, syntactic spans), offsets relative to the text
_Generated = tuple[
    cst.CSTNode, tuple[str, ...], set[int] | frozenset[int], str, dict[int, tuple[int, int]], dict[int, tuple[int, int]]
]


class Positions:
    """Character offsets of chosen nodes.

    With CPython's AST of the same source (which the syntax pre-check produces anyway)
    and the file index's parent links, only the innermost statements holding the
    chosen nodes are generated: each is placed by its AST line/column, and the text it
    generates is compared with the source there. Anything that does not line up falls
    back to generating the whole module, so positions are never guessed.
    """

    def __init__(
        self,
        module: cst.Module,
        source: str,
        nodes: Iterable[cst.CSTNode],
        tree: ast.Module | None = None,
        parent: Mapping[int, cst.CSTNode] | None = None,
        units: dict[int, _Generated] | None = None,
    ) -> None:
        """``units``: the language server's per-document cache of generated statements
        (left holding this check's), so a statement whose findings are kept is not
        generated again."""
        nodes = list(nodes)
        self.units = units
        wanted = {id(n) for n in nodes}
        self.source = source
        self.line_starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", source)]
        self.full_spans: dict[int, tuple[int, int]] = {}
        self.syntactic: dict[int, tuple[int, int]] = {}
        # What libcst generates for each chosen node: the text a fix expects to replace.
        self.generated: dict[int, str] = {}
        self.generated_syntactic: dict[int, str] = {}
        if not wanted:
            return
        if tree is not None and parent is not None and self._by_statement(module, tree, nodes, parent, wanted):
            return
        state = _PositionState(module, wanted)
        module._codegen(state)
        text = "".join(state.tokens)
        self.generated = {k: text[a:b] for k, (a, b) in state.full.items()}
        self.generated_syntactic = {k: text[a:b] for k, (a, b) in state.syntactic.items()}
        if text == source:
            self.full_spans, self.syntactic = state.full, state.syntactic
            return
        # libcst does not give every file back byte for byte: it drops a form feed (and
        # whitespace, a lone backslash line) in front of a statement. Offsets in its
        # output are mapped onto the source, or nothing is placed at all.
        align = SourceAlignment.of(text, source)
        if align is None:
            # Findings keep approximate places; no fix can be placed (each is refused by name).
            self.full_spans, self.syntactic = state.full, state.syntactic
            self.generated = {k: "\0" for k in self.generated}
            self.generated_syntactic = {k: "\0" for k in self.generated_syntactic}
            return
        self.full_spans = {k: align.span(a, b) for k, (a, b) in state.full.items()}
        self.syntactic = {k: align.span(a, b) for k, (a, b) in state.syntactic.items()}

    # -- the statement-local path --------------------------------------------------
    def _by_statement(
        self, module: cst.Module, tree: ast.Module, nodes: list[cst.CSTNode], parent: Mapping[int, cst.CSTNode], wanted: set[int]
    ) -> bool:
        units: dict[int, tuple[cst.CSTNode, ast.stmt, tuple[str, ...], int]] = {}
        memo: dict[int, dict[int, int]] = {}
        inside: dict[int, set[int]] = {}
        for n in nodes:
            found = _unit_of(n, module, tree, parent, memo)
            if found is None:
                return False
            units.setdefault(id(found[0]), found)
            inside.setdefault(id(found[0]), set()).add(id(n))
        full: dict[int, tuple[int, int]] = {}
        syn: dict[int, tuple[int, int]] = {}
        kept = self.units
        now: dict[int, _Generated] = {}
        for unit, anode, indents, shift in units.values():
            # a unit's generated text and the nodes' offsets in it depend on the unit,
            # its indents and the nodes asked for: kept per document while all three hold
            ask = frozenset(inside[id(unit)])
            hit = kept.get(id(unit)) if kept is not None else None
            if hit is None or hit[0] is not unit or hit[1] != indents or not ask <= hit[2]:
                # the unit joins ``wanted`` for its own codegen only (a copy of the set
                # per unit was quadratic in the findings of a long file)
                extra = id(unit) not in wanted
                if extra:
                    wanted.add(id(unit))
                try:
                    state = _PositionState(module, wanted)
                    state.indent_tokens = list(indents)
                    unit._codegen(state)
                finally:
                    if extra:
                        wanted.discard(id(unit))
                hit = (unit, indents, state.full.keys() & wanted, "".join(state.tokens), state.full, state.syntactic)
            now[id(unit)] = hit
            text, sfull, ssyn = hit[3], hit[4], hit[5]
            rel = ssyn.get(id(unit))
            if rel is None:
                return False
            start = self._ast_offset(anode, shift)
            if start is None:
                return False
            delta = start - rel[0]
            # The whole generated text (leading lines and indentation included) must be
            # the source at that place, or the offsets are not trusted.
            if delta < 0 or self.source[delta : delta + len(text)] != text:
                return False
            for k, (a, b) in sfull.items():
                full[k] = (a + delta, b + delta)
                self.generated[k] = text[a:b]
            for k, (a, b) in ssyn.items():
                syn[k] = (a + delta, b + delta)
                self.generated_syntactic[k] = text[a:b]
        if kept is not None:
            kept.clear()
            kept.update(now)
        if not wanted <= full.keys():
            return False
        self.full_spans, self.syntactic = full, syn
        return True

    def _ast_offset(self, node: ast.stmt, shift: int = 0) -> int | None:
        row = node.lineno - 1 + shift
        if not 0 <= row < len(self.line_starts):
            return None
        ls = self.line_starts[row]
        line_end = self.line_starts[row + 1] if row + 1 < len(self.line_starts) else len(self.source)
        line = self.source[ls:line_end]
        col = node.col_offset  # UTF-8 bytes
        if not line.isascii():
            col = len(line.encode("utf-8")[:col].decode("utf-8", errors="ignore"))
        return ls + col

    def full(self, node: cst.CSTNode) -> tuple[int, int]:
        return self.full_spans[id(node)]

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        """The node's own text: syntactic range for statements, else the full range."""
        s = self.syntactic.get(id(node))
        if s is not None:
            return s
        start, end = self.full_spans[id(node)]
        # Skip leading blank lines / comments owned by the node (statements, params).
        src = self.source
        while start < end:
            ch = src[start]
            if ch in " \t\r\n\f\\":
                start += 1
            elif ch == "#":
                nl = src.find("\n", start, end)
                start = end if nl < 0 else nl + 1
            else:
                break
        while end > start and src[end - 1] in " \t\r\n\f,":
            end -= 1
        return start, end

    def row_col(self, offset: int) -> tuple[int, int]:
        row = bisect.bisect_right(self.line_starts, offset) - 1
        return row + 1, offset - self.line_starts[row]


def _nodes_of(spec: FixSpec) -> Iterator[cst.CSTNode]:
    for ch in spec.changes:
        yield ch.node


# ---- linting -------------------------------------------------------------------


@dataclass
class LintOutput:
    diagnostics: list[Diagnostic]
    module: cst.Module | None
    # linted around syntax errors: ``module`` is the file with the broken statements blanked
    recovered: bool = False


def syntax_error_diagnostic(
    filename: str, exc: cst.ParserSyntaxError | None, cpython: SyntaxError | None = None
) -> Diagnostic:
    row, col, msg = 1, 0, "invalid syntax"
    if exc is not None:
        msg = str(exc.message if hasattr(exc, "message") else exc).splitlines()[0]
        msg = re.sub(r"^(parser error: )?(error at \d+:\d+: )?", "", msg)
        row, col = exc.raw_line, exc.raw_column
    # libcst's native parser often points at the token after the error (`def f(:` is
    # reported on the next line); CPython's position and message are the ones users know.
    if cpython is not None and cpython.lineno:
        row, col, msg = cpython.lineno, max((cpython.offset or 1) - 1, 0), cpython.msg or msg
    return Diagnostic(
        SYNTAX_ERROR_CODE, SYNTAX_ERROR_NAME, f"Cannot parse: {msg}", Severity.ERROR, filename, row, col, row, col
    )


def _cpython_parse(source: str) -> tuple[ast.Module | None, SyntaxError | None]:
    """CPython's verdict on the source (RecursionError / MemoryError propagate).

    libcst's native parser overflows the C stack -- a segfault that kills the whole run,
    not an exception -- on nesting a few thousand deep; CPython's parser refuses such
    input cleanly and sooner, and costs about a tenth of a libcst parse.
    """
    try:
        return cast(ast.Module, compile(source, "<kerasfit>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)), None
    except SyntaxError as exc:
        return None, exc
    except ValueError:  # NUL bytes: libcst gives the error
        return None, None


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_LEADING_WS = re.compile(r"[ \t\f]*")


def lint_source(
    source: str, filename: str, settings: LintSettings, parse_cache: ParseCache | None = None
) -> LintOutput:
    # the tree-wide answers parsed most files with CPython already: their AST is this text's
    known = settings.project.known_tree(filename, source) if parse_cache is None and settings.project is not None else None
    module, tree, refused, text = parse_guarded(source, filename, parse_cache, settings.stop, known)
    if known is None and tree is not None and parse_cache is None and settings.project is not None:
        # and the other way round: the index's facts of this text (and its share of the
        # tree-wide answers) take this parse instead of parsing the text again
        settings.project.offer_tree(filename, source, tree)
    if module is None:
        if tree is None:  # CPython refuses the file: keep what parses around the error
            recovered = lint_around_syntax_errors(source, filename, settings, parse_cache)
            if recovered is not None:
                return recovered
        return LintOutput(refused, None)
    # ``text`` is ``source`` with refused statements blanked (same offsets everywhere):
    # the module's own text, which positions and edits are checked against
    kept = parse_cache if parse_cache is not None and text is source and not refused else None
    diags = lint_module(module, text, filename, settings, tree, kept)
    if refused:
        diags = sorted(diags + refused, key=Diagnostic.sort_key)
    return LintOutput(diags, module)


def parse_guarded(
    source: str, filename: str, parse_cache: ParseCache | None = None, stop: threading.Event | None = None,
    known: ast.Module | None = None,
) -> tuple[cst.Module | None, ast.Module | None, list[Diagnostic], str]:
    """libcst's tree of ``source`` without risking the process (see parseguard).

    Returns (module, CPython's AST, diagnostics, the text libcst parsed). A statement too deep for libcst is
    parsed as ``...`` and gets a KF001 saying why; module is None when the file does
    not parse at all (then the diagnostics hold its one KF001). ``known``: CPython's AST of
    ``source``, already parsed (it is then not parsed again).
    """
    if parse_cache is not None and for_libcst(source) is source:
        inc = parse_cache.ast.tree(source)
        if inc is not None:
            module = parse_cache.parse(source, inc[0], inc[1], stop)
            if module is not None:
                return module, inc[0], [], source
            parse_cache.ast.forget()
    tree, cpython = (known, None) if known is not None else _cpython_parse(source)
    if cpython is not None and any(s in (cpython.msg or "") for s in ("too many", "too complex")):
        # "too many nested parentheses" / "levels of indentation": do not hand it to libcst
        return None, None, [syntax_error_diagnostic(filename, None, cpython)], source
    # libcst parses the text without the layout CPython ignores (form feeds, lone backslash lines)
    parse_text = for_libcst(source) if cpython is None else source
    module = None
    refusals: list[parseguard.Refusal] = []
    text = source
    if parse_cache is not None and tree is not None and parse_text is source:
        text, refusals = parseguard.budget_mask(source, tree)
        module = parse_cache.parse(text, tree, stop=stop)
        if module is not None and not refusals:
            parse_cache.ast.remember(source, tree)
        else:
            parse_cache.ast.forget()
    if module is None:
        g = parseguard.guarded_parse(parse_text, tree)
        if g.module is None:
            return None, tree, [syntax_error_diagnostic(filename, g.error, cpython)], source
        module, refusals = g.module, g.refusals
        # a masked statement in a file whose form feeds were taken out: the texts no longer
        # align, so findings stay and fixes are refused (SourceAlignment)
        text = g.text if parse_text is source else source
    return module, tree, [
        Diagnostic(
            SYNTAX_ERROR_CODE, SYNTAX_ERROR_NAME, r.reason, Severity.ERROR, filename,
            r.row, r.column, r.row, r.column,
        )
        for r in refusals
    ], text


# ---- a syntax error costs only the statements it breaks --------------------------

MAX_MERGED_PIECES = 16
# a line at column 0 that continues the statement above, never starts one
_CONTINUES = re.compile(r"[)\]}]|(?:else|elif|except|finally)\b")


def _compile_error(text: str) -> SyntaxError | None:
    try:
        compile(text, "<kerasfit>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        return exc
    except (ValueError, RecursionError, MemoryError):
        return SyntaxError("cannot parse")
    return None


def lint_around_syntax_errors(
    source: str, filename: str, settings: LintSettings, parse_cache: ParseCache | None = None
) -> LintOutput | None:
    """Lint a file that does not parse, losing only the top-level statements that do not.

    CPython's AST is unavailable for such a file, so it is cut by indentation: a line
    at column 0 (not a comment, closing bracket or ``else``/``except`` clause) may start
    a statement. Each piece is verified by compiling it alone; a piece that does not
    compile is retried joined with the next ones (a string or bracket spanning a cut),
    and if none of those compile it is the broken statement: its characters become
    spaces, so every offset, row and column elsewhere stays what it is in the file, and
    the rest is linted as usual, with KF001 where CPython places each error. None when
    nothing parses around the error (the caller reports the file's one error).
    """
    lines = _LINE.findall(source)
    starts = [0] + [i for i, ln in enumerate(lines) if i and ln[:1] not in ("", " ", "\t", "\f", "#", "\r", "\n")
                    and not _CONTINUES.match(ln)]
    bounds = list(zip(starts, starts[1:] + [len(lines)]))
    if len(bounds) < 2:
        return None
    broken: list[tuple[int, int, SyntaxError]] = []
    any_good = False
    i = 0
    while i < len(bounds):
        a = bounds[i][0]
        alone = SyntaxError("cannot parse")  # the piece's own error, set on the first try
        for j in range(i, min(len(bounds), i + MAX_MERGED_PIECES)):
            err = _compile_error("".join(lines[a : bounds[j][1]]))
            if err is None:
                any_good = True
                i = j + 1
                break
            if j == i:
                alone = err
        else:
            broken.append((a, bounds[i][1], alone))
            i += 1
    if not broken or not any_good:
        return None
    blank: set[int] = set()
    for a, b, _ in broken:
        blank.update(range(a, b))
    kept = "".join(re.sub(r"[^\r\n]", " ", ln) if k in blank else ln for k, ln in enumerate(lines))
    if _compile_error(kept) is not None:
        return None
    out = lint_source(kept, filename, settings, parse_cache)
    if out.module is None:
        return None
    for a, _, err in broken:
        row = a + (err.lineno or 1)
        err = SyntaxError(err.msg, (filename, row, err.offset or 1, None))
        out.diagnostics.append(syntax_error_diagnostic(filename, None, err))
    out.diagnostics.sort(key=Diagnostic.sort_key)
    out.recovered = True
    return out


class ParseCache:
    """Re-parses only the top-level statements an edit touched (the language server's).

    The text is cut where CPython's AST says a top-level statement starts; each piece
    is parsed on its own (libcst nodes carry no positions, so a piece's nodes are valid
    in any module) and kept by its text. Pieces are joined back into one Module; any
    doubt (mixed indentation or newlines, a piece libcst refuses) returns None and the
    caller parses the whole file.
    """

    def __init__(self, max_pieces: int = 4096, reuse: StatementReuse | None = None) -> None:
        self.pieces: dict[str, cst.Module] = {}
        self.max_pieces = max_pieces
        # a piece's first statement with the piece's leading lines moved onto it, kept so
        # an unchanged statement is the same node in every module (``reuse`` keys on it)
        self.heads: dict[int, tuple[cst.Module, tuple[cst.EmptyLine, ...], cst.SimpleStatementLine | cst.BaseCompoundStatement]] = {}
        # findings per top-level statement, reused while nothing they depend on changed
        # (the language server keeps them); None: every check walks everything
        self.reuse = reuse
        # per statement holding findings: its generated text and their offsets in it (Positions)
        self.units: dict[int, _Generated] = {}
        # CPython's side: only the statements an edit touched are compiled again
        self.ast = IncrementalAST()

    def parse(self, source: str, tree: ast.Module, cuts: list[int] | None = None,
              stop: threading.Event | None = None) -> cst.Module | None:
        """libcst's module of ``source``; ``cuts`` (piece starts) when already known.

        ``stop``: checked before each piece is parsed (raises Stopped)."""
        if not tree.body or "\r" in source.replace("\r\n", ""):
            return None
        if cuts is None:
            starts = sorted({statement_start_row(st) for st in tree.body})
            line_starts = incremental_line_starts(source)
            if starts[-1] > len(line_starts):
                return None
            # Cut above the blank and comment lines that lead into a statement, so no piece
            # ends with trailing comments (libcst does not always give those back as written).
            cuts = cut_offsets(source, starts, line_starts)
        cuts = [*cuts, len(source)]
        mods: list[cst.Module] = []
        fresh: dict[str, cst.Module] = {}
        keep: dict[str, cst.Module] = {}
        used: set[int] = set()
        for a, b in zip(cuts, cuts[1:]):
            _stop_now(stop)
            text = source[a:b]
            m = self.pieces.get(text) or fresh.get(text)
            if m is not None and id(m) in used:
                m = None  # the same text twice: the engine tells nodes apart by identity
            if m is None:
                try:
                    m = _parse_piece(text)
                except cst.ParserSyntaxError:
                    return None
                # A piece must give back its text exactly (libcst drops a blank line
                # before an indented comment that ends a module, for one).
                if m.code != text:
                    return None
                fresh.setdefault(text, m)
            used.add(id(m))
            if not m.body:
                return None
            mods.append(m)
            keep.setdefault(text, m)
        indents = {m.default_indent for m in mods if any(isinstance(x, cst.BaseCompoundStatement) for x in m.body)}
        newlines = {m.default_newline for m in mods}
        if len(indents) > 1 or len(newlines) > 1:
            return None
        # Keep only this text's pieces: the ones an edit replaced would otherwise pile
        # up (a long editing session of a big file held hundreds of MB of dead trees).
        self.pieces = keep if len(keep) <= self.max_pieces else {}
        body: list[cst.SimpleStatementLine | cst.BaseCompoundStatement] = []
        carry: list[cst.EmptyLine] = []
        heads: dict[int, tuple[cst.Module, tuple[cst.EmptyLine, ...], cst.SimpleStatementLine | cst.BaseCompoundStatement]] = {}
        for i, m in enumerate(mods):
            stmts = list(m.body)
            lead = (*carry, *(m.header if i else ()))
            if lead:
                hit = self.heads.get(id(m))
                if hit is None or hit[0] is not m or hit[1] != lead:
                    hit = (m, lead, stmts[0].with_changes(leading_lines=[*lead, *stmts[0].leading_lines]))
                heads[id(m)] = hit
                stmts[0] = hit[2]
            body.extend(stmts)
            carry = list(m.footer)
        self.heads = heads
        return cst.Module(
            body=body,
            header=mods[0].header,
            footer=carry,
            encoding=mods[0].encoding,
            default_indent=indents.pop() if indents else mods[0].default_indent,
            default_newline=newlines.pop(),
            has_trailing_newline=mods[-1].has_trailing_newline,
        )


def _parse_piece(text: str) -> cst.Module:
    return parse_module(text)


def lint_module(
    module: cst.Module, source: str, filename: str, settings: LintSettings, tree: ast.Module | None = None,
    cache: ParseCache | None = None,
) -> list[Diagnostic]:
    """Every finding of ``module``. ``cache``: the document's (the language server's),
    whose ``reuse`` keeps findings between checks and walks only what an edit can have
    changed."""
    reuse = cache.reuse if cache is not None else None
    while True:
        ctx = SemanticModel(module, filename, settings.target, settings.options, source,
                            hints=reuse.hints(module) if reuse is not None else None, project=settings.project)
        rules = [r(ctx) for r in settings.rules]
        crashes: list[tuple[Rule, BaseException]] = []
        plan = reuse.plan(module, _settings_key(filename, settings), rules, crashes, ctx) if reuse is not None else None
        walk(module, ctx, rules, lambda rule, exc: crashes.append((rule, exc)), plan, settings.stop)
        if plan is None:
            break
        if plan.holds(ctx):
            plan.commit(ctx)
            break
        assert reuse is not None  # a plan comes from it
        reuse.forget()  # what kept findings rest on changed: check the whole file
    reports = _first_once([rep for r in rules for rep in r.reports])
    diags: list[Diagnostic] = []
    if reports:
        wanted: list[cst.CSTNode] = []
        for rep in reports:
            wanted.append(rep.node)
            if rep.fix is not None:
                wanted.extend(_nodes_of(rep.fix))
        index = ctx.scopes.built_index  # parent links, when a rule already needed the file index
        parent: Mapping[int, cst.CSTNode] | None = None
        if index is not None:
            # a name the index walk skips (``ds.batch``'s ``batch``) gets its host, so its
            # statement alone is generated, not the whole module
            hosts = index.hosts(wanted)
            parent = ChainMap(hosts, index.parent) if hosts else index.parent
        pos = Positions(module, source, wanted, tree, parent, cache.units if cache is not None else None)
        sup = Suppressions.scan(source)
        indents = _Indents(module)
        seen: set[tuple[str, int, int, str]] = set()
        for rep in reports:
            try:
                start, end = pos.span(rep.node)
            except KeyError:
                continue
            row, col = pos.row_col(start)
            end_row, end_col = pos.row_col(end)
            code = rep.rule.code
            key = (code, start, end, rep.message)
            if key in seen:
                continue
            seen.add(key)
            if sup.suppressed(code, {row, end_row}):
                continue
            fix = _to_fix(rep.fix, pos, module, indents) if rep.fix is not None and code not in settings.unfixable else None
            diags.append(
                Diagnostic(
                    code, rep.rule.name, rep.message, rep.severity, filename,
                    row, col, end_row, end_col, fix, start, end,
                )
            )
    for rule, exc in crashes:
        diags.append(
            Diagnostic(
                INTERNAL_ERROR_CODE, INTERNAL_ERROR_NAME,
                f"{rule.code} crashed on this file: {type(exc).__name__}: {exc}".splitlines()[0],
                Severity.ERROR, filename, 1, 0, 1, 0,
            )
        )
    diags.sort(key=Diagnostic.sort_key)
    return diags


def _first_once(reports: list[Report]) -> list[Report]:
    """``reports`` without a rule's ``once`` reports of a node after its first (the
    reports are in source order per rule)."""
    if not any(rep.once for rep in reports):
        return reports
    seen: set[tuple[int, int]] = set()
    out: list[Report] = []
    for rep in reports:
        if rep.once:
            key = (id(rep.rule), id(rep.node))
            if key in seen:
                continue
            seen.add(key)
        out.append(rep)
    return out


def _settings_key(filename: str, settings: LintSettings) -> tuple[object, ...]:
    return (
        filename, tuple(settings.rules), settings.target,
        repr(sorted(settings.options.items(), key=lambda kv: kv[0])), settings.unfixable,
    )


class _Indents:
    """The block indentation around nodes, for rendering replacements that span lines:
    libcst writes a continuation line's "indent" flag as the enclosing blocks' indent,
    which a node rendered on its own does not have."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self._of: dict[int, tuple[str, ...]] | None = None
        # the module's imports, read once for all of a lint's fixes (per fix was quadratic)
        self.imports = ImportTable(module)

    def of(self, node: cst.CSTNode) -> tuple[str, ...] | None:
        if self._of is None:
            self._of = {}
            default = self.module.default_indent
            stack: list[tuple[cst.CSTNode, tuple[str, ...]]] = [(self.module, ())]
            while stack:
                n, ind = stack.pop()
                self._of[id(n)] = ind
                if isinstance(n, cst.IndentedBlock):
                    ind = (*ind, default if n.indent is None else n.indent)
                for c in iter_children(n):
                    stack.append((c, ind))
        return self._of.get(id(node))

    def render(self, new: cst.CSTNode, old: cst.CSTNode) -> str:
        text = self.module.code_for_node(new)
        if "\n" not in text and "\r" not in text:
            return text
        indents = self.of(old)
        if not indents:
            return text
        state = CodegenState(default_indent=self.module.default_indent, default_newline=self.module.default_newline)
        state.indent_tokens = list(indents)
        new._codegen(state)
        return "".join(state.tokens)


def _to_fix(spec: FixSpec, pos: Positions, module: cst.Module, indents: _Indents | None = None) -> Fix | None:
    indents = indents or _Indents(module)
    edits: list[Edit] = []
    for ch in spec.changes:
        try:
            start, end = pos.full(ch.node)
        except KeyError:
            return None
        # The text the edit replaces, as libcst generates the node: if the offsets are
        # off, the source there differs and the fix is refused when applied.
        expected = pos.generated.get(id(ch.node))
        if isinstance(ch, Replace):
            content = ch.new if isinstance(ch.new, str) else indents.render(ch.new, ch.node)
        elif isinstance(ch, Remove):
            wide = _removal_range(pos, ch.node, start, end)
            if wide != (start, end):  # a statement's line: its own text must be where it was placed
                s_start, s_end = pos.span(ch.node)
                own = pos.generated_syntactic.get(id(ch.node))
                expected = pos.source[wide[0] : wide[1]] if own == pos.source[s_start:s_end] else own
            start, end = wide
            content = ""
        else:  # pragma: no cover - FixSpec only holds these two
            raise TypeError(ch)
        r, c = pos.row_col(start)
        er, ec = pos.row_col(end)
        edits.append(Edit(start, end, content, r, c, er, ec, expected))
    edits.sort()
    for a, b in zip(edits, edits[1:]):
        if b.start < a.end:
            return None  # a rule asked for overlapping edits: show without a fix
    orphans = may_orphan(module, [ch.node for ch in spec.changes], [ch.new for ch in spec.changes if isinstance(ch, Replace)], indents.imports)
    return Fix(spec.applicability, spec.title, tuple(edits), spec.imports, orphans)


def _removal_range(pos: Positions, node: cst.CSTNode, start: int, end: int) -> tuple[int, int]:
    """Widen a statement's removal to its whole line when it stands alone there."""
    src = pos.source
    if isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement, cst.SimpleStatementLine)):
        s_start, s_end = pos.span(node)
        # lines end at \n, \r\n or a lone \r (as Python reads them)
        starts = pos.line_starts
        row = bisect.bisect_right(starts, s_start) - 1
        end_row = bisect.bisect_right(starts, max(s_end - 1, s_start)) - 1
        line_start = starts[row]
        line_end = starts[end_row + 1] if end_row + 1 < len(starts) else len(src)
        before = src[line_start:s_start]
        after = src[s_end:line_end]
        if not before.strip() and (not after.strip() or after.strip().startswith("#")):
            return line_start, line_end
        return s_start, s_end
    return start, end


# ---- fixing --------------------------------------------------------------------


def allowed(fix: Fix | None, unsafe: bool) -> bool:
    if fix is None or not fix.edits:
        return False
    if fix.applicability is Applicability.SAFE:
        return True
    return unsafe and fix.applicability is Applicability.UNSAFE


def apply_fixes(source: str, fixes: Sequence[Fix]) -> tuple[str, list[Fix]]:
    """Apply non-overlapping fixes, outermost first; return the new text and what was applied."""
    chosen: list[Fix] = []
    taken: list[tuple[int, int]] = []
    for fix in sorted(fixes, key=lambda f: (f.span[0], -f.span[1])):
        if not fix.matches(source):
            continue  # its offsets do not point at the text it was made for
        if any(not (e.end <= s or e.start >= t) or (e.start == e.end == s) for e in fix.edits for s, t in taken):
            continue
        chosen.append(fix)
        taken.extend((e.start, e.end) for e in fix.edits)
    edits = sorted((e for f in chosen for e in f.edits), key=lambda e: (e.start, e.end), reverse=True)
    out = source
    for e in edits:
        out = out[: e.start] + e.content + out[e.end :]
    return out, chosen


@dataclass
class FixOutcome:
    source: str
    applied: int
    diagnostics: list[Diagnostic]
    error: str | None = None


def fix_source(source: str, filename: str, settings: LintSettings, unsafe: bool = False) -> FixOutcome:
    """Lint, apply allowed fixes, re-lint; repeat until stable (bounded).

    A fix whose result does not parse is dropped (and named in ``error``); the other
    fixes of that round still apply.
    """
    current = source
    applied = 0
    out = lint_source(current, filename, settings)
    if out.recovered:  # never fix a file that does not parse (like ruff): the user is mid-edit
        return FixOutcome(current, 0, out.diagnostics)
    broken: dict[tuple[object, ...], str] = {}  # fix -> the code of the rule that offered it
    misplaced: set[str] = set()  # rules whose fix did not find its text where it pointed
    for _ in range(MAX_FIX_PASSES):
        offered = {_fix_key(d.fix): d.code for d in out.diagnostics if d.fix is not None and allowed(d.fix, unsafe)}
        fixes = [d.fix for d in out.diagnostics if d.fix is not None and allowed(d.fix, unsafe) and _fix_key(d.fix) not in broken]
        for f in fixes:
            if not f.matches(current):
                misplaced.add(offered.get(_fix_key(f), "?"))
        fixes = [f for f in fixes if f.matches(current)]
        if not fixes:
            break
        candidate, chosen, new_out = _try_fixes(current, fixes, filename, settings)
        if candidate == current:
            break
        if new_out is None:
            # Find the culprits one by one; keep the fixes that parse on their own.
            good = []
            for f in chosen:
                c, _, o = _try_fixes(current, [f], filename, settings)
                if c != current and o is None:
                    broken[_fix_key(f)] = offered.get(_fix_key(f), "?")
                elif c != current:
                    good.append(f)
            if not good:
                continue
            candidate, chosen, new_out = _try_fixes(current, good, filename, settings)
            if candidate == current:
                break
            if new_out is None:
                broken.update((_fix_key(f), offered.get(_fix_key(f), "?")) for f in good)
                continue
        current, out = candidate, new_out
        applied += len(chosen)
    errors = []
    if broken:
        errors.append(
            f"{filename}: a fix produced code that does not parse and was not applied "
            f"({', '.join(sorted(set(broken.values())))})"
        )
    if misplaced:
        errors.append(
            f"{filename}: a fix did not find the text it replaces at its position and was not applied "
            f"({', '.join(sorted(misplaced))})"
        )
    return FixOutcome(current, applied, out.diagnostics, "; ".join(errors) or None)


def _fix_key(fix: Fix) -> tuple[object, ...]:
    return (fix.title, tuple((e.content, e.row, e.column, e.end_row, e.end_column) for e in fix.edits))


def _try_fixes(
    current: str, fixes: Sequence[Fix], filename: str, settings: LintSettings
) -> tuple[str, list[Fix], LintOutput | None]:
    """Apply ``fixes`` to ``current``: (new text, fixes applied, its lint or None if it does not parse)."""
    candidate, chosen = apply_fixes(current, fixes)
    imports = {imp for f in chosen for imp in f.imports}
    orphans = {imp for f in chosen for imp in f.orphan_imports}
    if imports or orphans:
        with_imports = add_imports(candidate, imports, orphans)
        if with_imports is not None:
            candidate = with_imports
        elif imports:
            return current, [], None  # a fix without the import it needs would not run
        # (an orphaned import that cannot be removed, e.g. in a file with a masked
        # syntax error, stays: the fix itself still applies)
    if candidate == current:
        return candidate, chosen, None
    new_out = lint_source(candidate, filename, settings)
    return candidate, chosen, (new_out if new_out.module is not None and not new_out.recovered else None)


def add_imports(
    source: str,
    imports: set[tuple[str, str | None, str | None]],
    orphans: set[tuple[str, str | None, str | None]] = frozenset(),  # type: ignore[assignment]
) -> str | None:
    """Add the imports fixes need; remove the ones they orphaned if nothing else uses them."""
    from libcst.codemod import CodemodContext
    from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor

    tree, _ = _cpython_parse(source)
    if tree is None or budget_mask(source, tree)[1]:
        return None  # too deep for libcst's visitors: no import is added, so no fix applies
    # libcst does not give form feeds in indentation back as written: transform the text
    # without them (same lines), then carry only the lines the visitors changed back
    parse_text = for_libcst(source)
    try:
        module = parse_module(parse_text)
    except cst.ParserSyntaxError:
        return None
    if module.code != parse_text:
        return None  # libcst would not give the rest of the file back as written

    def order(specs: Iterable[tuple[str, str | None, str | None]]) -> list[tuple[str, str | None, str | None]]:
        return sorted(specs, key=lambda t: tuple(x or "" for x in t))

    if imports:
        context = CodemodContext()
        for mod, obj, asname in order(imports):
            AddImportsVisitor.add_needed_import(context, mod, obj, asname)
        module = AddImportsVisitor(context).transform_module(module)
    if orphans:
        context = CodemodContext()
        for mod, obj, asname in order(orphans):
            RemoveImportsVisitor.remove_unused_import(context, mod, obj, asname)
        module = RemoveImportsVisitor(context).transform_module(module)
    if parse_text is source:
        return module.code
    return _carry_line_changes(source, parse_text, module.code)


def _carry_line_changes(original: str, before: str, after: str) -> str:
    """``original`` with the lines that changed from ``before`` to ``after``.

    ``before`` has ``original``'s lines one for one (only ignored whitespace differs), so
    a line the change left alone keeps its original spelling."""
    import difflib

    # lines end at newlines only (str.splitlines would also split at a form feed)
    orig, old, new = _LINE.findall(original), _LINE.findall(before), _LINE.findall(after)
    out: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        out.extend(orig[i1:i2] if tag == "equal" else new[j1:j2])
    return "".join(out)
