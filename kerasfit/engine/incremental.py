"""CPython's verdict on an edited document, re-parsing only what the edit touched.

The language server checks the same document after every keystroke. CPython's parse of
the whole file is the largest fixed cost of a check (about a quarter of it on a
2,000-line file), and nearly all of it repeats the last one: an edit touches one or two
top-level statements. So the document is kept as pieces, each one top-level statement
with the blank and comment lines that lead into it, and each with the AST CPython made
of it. After an edit, the pieces wholly before and after the changed text are kept;
only the region between them is compiled, on its own.

Why a region compiled alone means what it means in the file: every kept piece starts at
a line start where the previous statement is complete (CPython put a top-level
statement there). If the region compiles alone, its first code line is at column 0
(else "unexpected indent"), so it cannot continue the statement before it, and it ends
with every bracket, string and block closed, so it cannot swallow the statement after
it. A region that does not compile alone is widened by a piece on each side and tried
again; past a few tries, or with anything unusual (a ``__future__`` import away from the
top, form feeds, lone carriage returns, a statement too deep for libcst), the caller
parses the whole file as before.

Kept pieces move when an edit adds or removes lines above them. Renumbering their AST
would cost as much as parsing them again, so each top-level statement carries the rows
to add instead (``row_shift``); the consumers of line numbers (statement cuts, positions)
add it.
"""

from __future__ import annotations

import ast
import bisect
import re
from dataclasses import dataclass
from typing import cast

from .parseguard import over_budget

# attribute set on top-level AST statements: rows to add to every line number beneath
SHIFT_ATTR = "_kerasfit_row_shift"
# widen a region that does not compile alone at most this many times
MAX_WIDEN = 3

_NEWLINE = re.compile(r"\r\n|\n")


def row_shift(stmt: ast.AST) -> int:
    return cast(int, getattr(stmt, SHIFT_ATTR, 0))


def line_starts(source: str) -> list[int]:
    return [0] + [m.end() for m in _NEWLINE.finditer(source)]


def statement_start_row(stmt: ast.stmt) -> int:
    """1-based row where a top-level statement begins (its first decorator)."""
    decorators: list[ast.expr] = getattr(stmt, "decorator_list", [])
    rows = [stmt.lineno, *(d.lineno for d in decorators)]
    return min(rows) + row_shift(stmt)


def cut_offsets(source: str, starts: list[int], base: list[int] | None = None) -> list[int]:
    """Offsets where pieces begin: above the blank and comment lines that lead into each
    statement start (1-based ``starts``, ascending), so no piece ends with trailing
    comments (libcst does not always give those back as written). The first cut is 0."""
    ls = base if base is not None else line_starts(source)

    def blank_or_comment(n: int) -> bool:
        a = ls[n - 1]
        b = ls[n] if n < len(ls) else len(source)
        text = source[a:b].strip()
        return not text or text.startswith("#")

    cuts = [0]
    for prev, n in zip(starts, starts[1:]):
        while n - 1 > prev and blank_or_comment(n - 1):
            n -= 1
        cuts.append(ls[n - 1])
    return cuts


@dataclass
class _Piece:
    start: int  # offset in the document; a piece ends where the next one starts
    stmts: list[ast.stmt]  # top-level statements starting in this piece


class IncrementalAST:
    """One document's pieces and their ASTs, from the last successful parse."""

    def __init__(self) -> None:
        self.source: str | None = None
        self.pieces: list[_Piece] = []
        # how the last tree was made, for tests: "whole file", "unchanged", "region of N chars"
        self.last: str = ""

    def forget(self) -> None:
        self.source, self.pieces = None, []

    # -- the whole file ------------------------------------------------------------
    def remember(self, source: str, tree: ast.Module) -> None:
        """Record a tree CPython made of the whole ``source`` (row shifts zero)."""
        self.last = "whole file"
        if not tree.body or not _plain(source):
            self.forget()
            return
        for s in tree.body:
            setattr(s, SHIFT_ATTR, 0)
        self.source = source
        self.pieces = _pieces(source, tree.body, line_starts(source))

    # -- an edit ---------------------------------------------------------------------
    def tree(self, source: str) -> tuple[ast.Module, list[int]] | None:
        """CPython's tree of ``source`` and its piece cuts, compiling only the region an
        edit changed; None when that cannot be done safely (parse the whole file)."""
        old = self.source
        if old is None or not self.pieces or not _plain(source):
            return None
        if source == old:
            self.last = "unchanged"
            return self._result()
        found = self._compile_changed_region(old, source)
        if found is None:
            return None  # the caller parses (and reports on) the whole file
        tree, i, j, a, b_old = found
        region = source[a : b_old + len(source) - len(old)]
        if over_budget(tree, region):
            return None  # a statement too deep for libcst: the whole-file path masks it
        new = self._splice(old, source, tree, i, j, a, b_old)
        if not new:
            self.forget()
            return None
        new[0].start = 0
        self.pieces, self.source = new, source
        self.last = f"region of {len(region)} chars"
        return self._result()

    def _compile_changed_region(self, old: str, source: str) -> tuple[ast.Module, int, int, int, int] | None:
        """The tree of the pieces an edit of ``old`` into ``source`` touched, compiled on
        their own, widened by a piece each side while that does not compile (at most
        MAX_WIDEN times): (tree, first piece, first kept piece after, the region's start,
        its end in ``old``); None when no region compiles."""
        n_old, n_new = len(old), len(source)
        p = _common_prefix(old, source)
        s = _common_suffix(old, source, min(n_old, n_new) - p)
        pieces = self.pieces
        starts = [pc.start for pc in pieces]
        # the piece the change begins in (a change at a piece's very start begins in it)
        i = max(bisect.bisect_right(starts, p) - 1, 0)
        # the first piece that starts inside the unchanged tail (not at its edge: text
        # inserted there may end mid-line and run into the piece's first line)
        j = max(bisect.bisect_right(starts, n_old - s), i + 1)
        delta = n_new - n_old
        for _ in range(MAX_WIDEN + 1):
            a = pieces[i].start
            b_old = pieces[j].start if j < len(pieces) else n_old
            region = source[a : b_old + delta]
            tree = None if a > 0 and "__future__" in region else _compile(region)
            if tree is not None:
                return tree, i, j, a, b_old
            if i == 0 and j >= len(pieces):
                return None  # the whole file does not compile
            i, j = max(i - 1, 0), min(j + 1, len(pieces))
        return None

    def _splice(self, old: str, source: str, tree: ast.Module, i: int, j: int, a: int, b_old: int) -> list[_Piece]:
        """The pieces of ``source``: the kept ones before piece ``i``, the region's new
        statements, and the kept ones from piece ``j`` on (moved by the edit's length and
        rows), each new piece and the one after cut as a parse of the whole file would."""
        pieces = self.pieces
        delta = len(source) - len(old)
        region = source[a : b_old + delta]
        ls = line_starts(source)
        base_row = bisect.bisect_right(ls, a) - 1  # rows before the region
        for st in tree.body:
            setattr(st, SHIFT_ATTR, base_row)
        # rows the edit added or removed move the pieces after the region
        row_delta = region.count("\n") - old[a:b_old].count("\n")
        tail = pieces[j:]
        if row_delta:
            for pc in tail:
                for st in pc.stmts:
                    setattr(st, SHIFT_ATTR, row_shift(st) + row_delta)
        tail = [_Piece(pc.start + delta, pc.stmts) for pc in tail]
        head = pieces[:i]
        middle = _group(tree.body)
        # Cut the new statements, and the one after them, as a parse of the whole file
        # would: above the blank and comment lines leading into each, back to the
        # statement before.
        around = [*head[-1:], *middle, *tail[:1]]
        cuts = cut_offsets(source, [_start_row(pc) for pc in around], ls)
        for pc, cut in zip(around, cuts):
            if pc is not (head[-1] if head else None):
                pc.start = cut
        return [*head, *middle, *tail]

    def _result(self) -> tuple[ast.Module, list[int]]:
        body = [st for pc in self.pieces for st in pc.stmts]
        return ast.Module(body=body, type_ignores=[]), [pc.start for pc in self.pieces]


def _plain(source: str) -> bool:
    # form feeds change how libcst is fed the text; lone CRs split lines differently
    return "\f" not in source and "\r" not in source.replace("\r\n", "")


def _compile(text: str) -> ast.Module | None:
    try:
        return cast(ast.Module, compile(text, "<kerasfit>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _group(stmts: list[ast.stmt]) -> list[_Piece]:
    """Top-level statements grouped by the row they start on (``a = 1; b = 2`` is one
    piece), in order; starts are set by the caller."""
    by_row: dict[int, list[ast.stmt]] = {}
    for st in stmts:
        by_row.setdefault(statement_start_row(st), []).append(st)
    return [_Piece(0, by_row[r]) for r in sorted(by_row)]


def _start_row(pc: _Piece) -> int:
    return min(statement_start_row(st) for st in pc.stmts)


def _pieces(source: str, stmts: list[ast.stmt], ls: list[int]) -> list[_Piece]:
    """The pieces of a whole file."""
    pieces = _group(stmts)
    for pc, cut in zip(pieces, cut_offsets(source, [_start_row(pc) for pc in pieces], ls)):
        pc.start = cut
    return pieces


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    lo, hi = 0, n
    while lo < hi:  # binary search on slices: C-speed comparisons
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: str, b: str, limit: int) -> int:
    lo, hi = 0, max(limit, 0)
    la, lb = len(a), len(b)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[la - mid :] == b[lb - mid :]:
            lo = mid
        else:
            hi = mid - 1
    return lo
