"""Keeps libcst's native parser inside what it can survive.

libcst's parser recurses once per nesting level of the concrete tree, and an operator
chain is a nesting level per operand there (``a and a and ...`` is flat in CPython's AST
and 10,000 levels deep in libcst's). Past about 7,000 levels on an 8 MB stack it
overflows the C stack: a segfault, which no ``except`` can catch. Long chains are also
slow to parse (a 1,000-operand ``+`` chain takes seconds; the time grows faster than
the length) and libcst's own Python code (codegen, visitors) recurses per level and
raises RecursionError near 500.

So before the native parser runs, each statement's depth *as libcst will build it* is
measured on CPython's AST (which the engine computes anyway). A statement past
``DEPTH_BUDGET`` is masked: its text is replaced by ``...`` and blanks of the same
length and line structure, so every other statement keeps its offsets and is checked
as usual; the masked one gets a one-line KF001 saying why. The parse itself runs on a
thread with a large stack of its own (kerasfit.core.parsestack), so the margin does not
depend on the caller's thread (a language-server worker, a small ``ulimit -s``).
"""

from __future__ import annotations

import ast
import io
from bisect import bisect_left
import re
import tokenize
from dataclasses import dataclass

import libcst as cst

from ..core.parsestack import on_parse_stack

# libcst's Python-side recursion (codegen of a statement) fails between 400 and 600
# levels under the default recursion limit (measured with libcst 1.9); the callers'
# own frames need room too.
DEPTH_BUDGET = 250
# libcst refusing code CPython accepts: mask the statement and retry, this many times.
MAX_RETRIES = 8


@dataclass(frozen=True)
class Refusal:
    """A statement libcst was not given; checked as if it were ``...``."""

    row: int
    column: int
    reason: str


@dataclass
class Guarded:
    module: cst.Module | None  # None: libcst refused the (masked) text; see ``error``
    text: str  # what libcst parsed (the source with refused statements masked)
    refusals: list[Refusal]
    error: cst.ParserSyntaxError | None = None


# ---- the budget --------------------------------------------------------------------


def _stmt_start(s: ast.stmt) -> tuple[int, int]:
    decos = getattr(s, "decorator_list", None)
    if decos:
        d = min(decos, key=lambda x: (x.lineno, x.col_offset))
        return d.lineno, max(d.col_offset - 1, 0)  # the "@"
    return s.lineno, s.col_offset


def _string_pieces(node: ast.expr, lines: list[str], budget: int, room: int | None = None) -> int:
    """How many literals an implicit concatenation joins (libcst nests one level each).
    With ``room``, any count up to ``room`` may be answered as 1 (it decides nothing)."""
    end = node.end_lineno or node.lineno
    if end == node.lineno and (node.end_col_offset or 0) - node.col_offset < 2 * budget:
        return 1  # too short to hold that many pieces: skip the tokenizer
    text = "".join(lines[node.lineno - 1 : end])
    if room is not None and (text.count('"') + text.count("'")) // 2 <= room:
        return 1  # each piece has two quotes at least: too few here to exceed the room
    seg = ast.get_source_segment(text, _shift(node)) or ""
    if len(seg) < 2 * budget:
        return 1
    try:
        toks = tokenize.generate_tokens(io.StringIO("(" + seg + ")").readline)
        return sum(1 for t in toks if t.type == tokenize.STRING or t.type == getattr(tokenize, "FSTRING_START", -1))
    except (tokenize.TokenError, SyntaxError):
        return 1


def _shift(node: ast.expr) -> ast.expr:
    """A copy of ``node``'s position relative to its first line (for get_source_segment)."""
    n = ast.Constant(None)
    n.lineno, n.col_offset = 1, node.col_offset
    n.end_lineno, n.end_col_offset = (node.end_lineno or node.lineno) - node.lineno + 1, node.end_col_offset
    return n


_FIELDS: dict[type, tuple[str, ...]] = {}


# An f-string prefix: CPython 3.11 reports the parts of an f-string at the whole string's
# position, so a string piece count there need not be bounded by its own text.
_FSTRING = re.compile(r"[fF][rR]?['\"]")
# Characters str.splitlines breaks at and CPython does not: ``lines`` (and so the piece
# counts) no longer follow the AST's line numbers in a file holding one.
# Cheaper to walk than to measure (a Name has one child, a Constant none).
_LEAFISH = (ast.Name, ast.Constant)
_ODD_BREAK = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def over_budget(tree: ast.Module, source: str, budget: int | None = None) -> list[tuple[ast.stmt, int]]:
    """Statements whose libcst nesting (blocks around them included) exceeds ``budget``,
    each with the depth found, outermost first and never one inside another.

    Short statements are not walked: the walk's depth below a node is at most
    ``2 * len(text) + 1`` characters of its source text. Each AST child spans strictly
    less text than its parent except a few same-text wrappers (Expr, withitem and
    MatchValue over their expression, arguments over a lone parameter, a format spec
    over its only part), and no wrapper wraps another; a child without children (ctx,
    operators) adds one level. A BoolOp of k operands steps k levels and spends at least
    3 characters per extra operand; a string's piece count is at most half its text
    (two quotes a piece). So a statement at depth ``d`` with ``d + 2*len + 1 <= budget``
    cannot be flagged, nor can anything in it. Not applied where positions may not
    bound the piece counts: statements holding an f-string prefix, and files holding a
    character ``str.splitlines`` breaks at and CPython does not. Identical results to
    ``_over_budget_exact`` (tests/test_parseguard_property.py)."""
    return _walk(tree, source, budget, prune=True)


def _over_budget_exact(tree: ast.Module, source: str, budget: int | None = None) -> list[tuple[ast.stmt, int]]:
    """``over_budget`` walking every node (the reference the pruned walk is tested against)."""
    return _walk(tree, source, budget, prune=False)


class _SpanBound:
    """What lets the pruned walk skip a node: the depth below it is bounded by its text's
    length (see ``over_budget``), measured from line-start offsets. A node is never
    skipped when an f-string prefix lies in its text, nor inside an f-string (CPython
    3.11 gives an f-string's parts the whole string's position)."""

    __slots__ = ("budget", "starts", "fstrings", "ascii_only", "in_fstring")

    def __init__(self, source: str, budget: int) -> None:
        self.budget = budget
        self.starts = _line_starts(source)
        self.fstrings = [m.start() for m in _FSTRING.finditer(source)]  # sorted
        self.ascii_only = source.isascii()  # then a column (bytes) counts characters exactly
        self.in_fstring: set[int] = set()  # nodes inside an f-string: not pruned (positions)

    def _fits(self, depth: int, a: int, b: int) -> bool:
        """Whether text from offset ``a`` to ``b``, at ``depth``, cannot exceed the budget."""
        fstrings = self.fstrings
        i = bisect_left(fstrings, a)
        return depth + 2 * (b - a) + 1 <= self.budget and (i == len(fstrings) or fstrings[i] >= b)

    def statement_fits(self, node: ast.stmt, depth: int) -> bool:
        row = _stmt_start(node)[0] if getattr(node, "decorator_list", None) else node.lineno
        a = self.starts[row - 1]  # from the line's start: a longer text only prunes less
        last = node.end_lineno or node.lineno
        b = self.starts[last - 1] + (node.end_col_offset or 0)  # bytes >= characters
        return self._fits(depth, a, b)

    def node_fits(self, node: ast.AST, depth: int) -> bool:
        """For a node below a statement (an expression, pattern, argument, handler)."""
        if id(node) in self.in_fstring:
            return False
        end_row = getattr(node, "end_lineno", None)
        if end_row is None:  # not positioned
            return False
        if isinstance(node, ast.JoinedStr):  # its parts' positions are the whole string's
            self.in_fstring.update(map(id, ast.walk(node)))
            return False
        a = self.starts[node.lineno - 1] + (node.col_offset if self.ascii_only else 0)  # type: ignore[attr-defined]
        b = self.starts[end_row - 1] + (node.end_col_offset or 0)  # type: ignore[attr-defined]
        return self._fits(depth, a, b)


_STRINGS = (ast.Constant, ast.JoinedStr)


def _walk(tree: ast.Module, source: str, budget: int | None, prune: bool) -> list[tuple[ast.stmt, int]]:
    if budget is None:
        budget = DEPTH_BUDGET
    lines = source.splitlines(keepends=True)
    bound = _SpanBound(source, budget) if prune and not _ODD_BREAK.search(source) else None
    found: list[tuple[ast.stmt, int]] = []
    # (node, depth, owning statement); iterative: the tree may be thousands deep. The
    # module's statements are one level below it.
    stack: list[tuple[ast.AST, int, ast.stmt]] = [(s, 1, s) for s in tree.body]
    flagged: set[int] = set()
    while stack:
        node, depth, owner = stack.pop()
        if isinstance(node, ast.stmt):
            owner = node
            if bound is not None and bound.statement_fits(node, depth):
                continue
        elif bound is not None and type(node) not in _LEAFISH and bound.node_fits(node, depth):
            continue
        if id(owner) in flagged:
            continue
        reach = _string_reach(node, depth, lines, budget) if isinstance(node, _STRINGS) else depth
        if reach > budget:
            flagged.add(id(owner))
            found.append((owner, reach))
            continue
        step = len(node.values) if isinstance(node, ast.BoolOp) else 1  # libcst: a left-nested chain, one level per operand
        # ast.iter_child_nodes, without its generators (this walk is ~5% of a check)
        tp = type(node)
        names = _FIELDS.get(tp)
        if names is None:
            names = _FIELDS[tp] = tp._fields
        for name in names:
            v = getattr(node, name, None)
            if isinstance(v, ast.AST):
                stack.append((v, depth + step, owner))
            elif type(v) is list:
                for child in v:
                    if isinstance(child, ast.AST):
                        stack.append((child, depth + step, owner))
    return _outermost(found)


def _string_reach(node: ast.Constant | ast.JoinedStr, depth: int, lines: list[str], budget: int) -> int:
    """How deep libcst nests a string literal at ``depth``: one level per piece of an
    implicit concatenation (only counted while within the budget)."""
    if depth <= budget and isinstance(getattr(node, "value", ""), (str, bytes)):
        return depth + _string_pieces(node, lines, budget, budget - depth)
    return depth


def _outermost(found: list[tuple[ast.stmt, int]]) -> list[tuple[ast.stmt, int]]:
    """The flagged statements in source order, without those inside another flagged one
    (the outer mask covers them)."""
    found.sort(key=lambda t: _stmt_start(t[0]))
    out: list[tuple[ast.stmt, int]] = []
    end = (0, 0)
    for s, d in found:
        if _stmt_start(s) < end:
            continue
        out.append((s, d))
        end = (s.end_lineno or s.lineno, s.end_col_offset or 0)
    return out


# ---- masking -----------------------------------------------------------------------


def _offset(line_starts: list[int], source: str, row: int, col_bytes: int) -> int:
    ls = line_starts[row - 1]
    le = line_starts[row] if row < len(line_starts) else len(source)
    line = source[ls:le]
    if line.isascii():
        return ls + col_bytes
    return ls + len(line.encode("utf-8")[:col_bytes].decode("utf-8", errors="ignore"))


def _line_starts(source: str) -> list[int]:
    return [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", source)]


def mask(source: str, statements: list[ast.stmt]) -> str:
    """Replace each statement's text by ``...`` and blanks, keeping every line break
    (and so every other statement's offset and line)."""
    if not statements:
        return source
    line_starts = _line_starts(source)
    parts: list[str] = []
    prev = 0
    spans = []
    for s in statements:
        row, col = _stmt_start(s)
        a = _offset(line_starts, source, row, col)
        b = _offset(line_starts, source, s.end_lineno or s.lineno, s.end_col_offset or 0)
        spans.append((a, b))
    for a, b in sorted(spans):
        if a < prev:
            continue
        seg = source[a:b]
        blank = "".join(c if c in "\r\n" else " " for c in seg)
        filler = "..." if len(seg) >= 3 and "\n" not in seg[:3] and "\r" not in seg[:3] else "0"
        if len(seg) >= len(filler) and not any(c in "\r\n" for c in seg[: len(filler)]):
            blank = filler + blank[len(filler) :]
        parts.append(source[prev:a])
        parts.append(blank)
        prev = b
    parts.append(source[prev:])
    return "".join(parts)


# ---- parsing -----------------------------------------------------------------------


def parse_module(text: str) -> cst.Module:
    """``libcst.parse_module`` on a thread with a large stack (exceptions re-raised)."""
    return on_parse_stack(lambda: cst.parse_module(text))


def _innermost_statement(tree: ast.Module, row: int) -> ast.stmt | None:
    best = None
    body: list[ast.stmt] = list(tree.body)
    while body:
        nxt: list[ast.stmt] = []
        for s in body:
            start = _stmt_start(s)[0]
            if start <= row <= (s.end_lineno or s.lineno):
                best = s
                for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                    for c in getattr(s, field, ()) or ():
                        if isinstance(c, ast.stmt):
                            nxt.append(c)
                        else:  # handlers / match cases hold statements
                            nxt.extend(x for x in getattr(c, "body", ()) if isinstance(x, ast.stmt))
                break
        body = nxt
    return best


def _budget(source: str, tree: ast.Module) -> tuple[list[ast.stmt], list[Refusal]]:
    masked: list[ast.stmt] = []
    refusals: list[Refusal] = []
    for s, depth in over_budget(tree, source):
        masked.append(s)
        row, col = _stmt_start(s)
        refusals.append(
            Refusal(row, col, f"Not checked: this statement nests more than {DEPTH_BUDGET} levels deep for the parser")
        )
    return masked, refusals


def budget_mask(source: str, tree: ast.Module) -> tuple[str, list[Refusal]]:
    """The text libcst may be given (over-budget statements masked) and why."""
    masked, refusals = _budget(source, tree)
    return mask(source, masked), refusals


def guarded_parse(source: str, tree: ast.Module | None) -> Guarded:
    """Parse ``source`` with libcst without risking the process.

    ``tree`` is CPython's AST of the same source (None when CPython refused it; then
    there is no budget to measure and libcst's own error is the answer).
    """
    if tree is None:
        try:
            return Guarded(parse_module(source), source, [])
        except cst.ParserSyntaxError as exc:
            return Guarded(None, source, [], exc)
    masked, refusals = _budget(source, tree)
    text = mask(source, masked)
    for _ in range(MAX_RETRIES):
        try:
            return Guarded(parse_module(text), text, refusals)
        except cst.ParserSyntaxError as exc:
            # CPython accepted this text: libcst's limitation, not the user's error
            # libcst's raw_line is often the token after the problem; its message names
            # the position where the rule failed ("error at 3:20012")
            rows = [int(m) for m in re.findall(r"error at (\d+):\d+", str(exc))] + [exc.raw_line]
            s = next(
                (x for x in (_innermost_statement(tree, r) for r in rows) if x is not None and not any(x is m for m in masked)),
                None,
            )
            if s is None:
                return Guarded(None, text, refusals, exc)
            masked.append(s)
            row, col = _stmt_start(s)
            refusals.append(Refusal(row, col, "Not checked: valid Python that libcst cannot parse"))
            text = mask(source, masked)
    return Guarded(None, text, refusals)
