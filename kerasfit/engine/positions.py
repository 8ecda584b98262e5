"""Offsets of the reported nodes only: libcst's PositionProvider records every node
(about 2x a parse); a check needs the handful a rule reported or a fix touches."""

from __future__ import annotations

import ast
import bisect
import re
from typing import Any, Iterable, Mapping, Sequence

import libcst as cst
from libcst._nodes.internal import CodegenState

from .incremental import row_shift


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
            shift = row_shift(a)  # an incrementally parsed tree: see kerasfit.engine.incremental
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
Generated = tuple[
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
        units: dict[int, Generated] | None = None,
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
        now: dict[int, Generated] = {}
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

