"""The guarded parse: libcst's tree without risking the process, CPython's verdict, the
KF001 of a file that does not parse, and the language server's parse cache."""

from __future__ import annotations

import ast
import re
import threading
from typing import TYPE_CHECKING, cast

import libcst as cst

from ..core.types import Diagnostic, Severity
from ..semantic.fileindex import FileIndex
from ..semantic.indexparts import Joined, join_parts
from ..semantic.scopes import ModelHints
from . import parseguard
from .incremental import IncrementalAST, cut_offsets, statement_start_row
from .incremental import line_starts as incremental_line_starts
from .layout import for_libcst
from .parseguard import parse_module
from .settings import SYNTAX_ERROR_CODE, SYNTAX_ERROR_NAME, stop_now

if TYPE_CHECKING:
    from .positions import Generated
    from .reuse import StatementReuse


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


def cpython_parse(source: str) -> tuple[ast.Module | None, SyntaxError | None]:
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


LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


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
    tree, cpython = (known, None) if known is not None else cpython_parse(source)
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


def compile_error(text: str) -> SyntaxError | None:
    try:
        compile(text, "<kerasfit>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        return exc
    except (ValueError, RecursionError, MemoryError):
        return SyntaxError("cannot parse")
    return None


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
        self.units: dict[int, Generated] = {}
        # CPython's side: only the statements an edit touched are compiled again
        self.ast = IncrementalAST()
        # with ``reuse``: the statements' own file indexes, joined into the file's
        # (semantic.indexparts; they depend on their nodes alone, kept while their text is)
        self.indexes = Joined()

    def hints(self, module: cst.Module) -> ModelHints | None:
        """What the model of ``module`` is told when findings are kept between checks
        (``reuse``): the statements holding no import, and its file index joined from
        the statements' kept indexes. None without ``reuse``: the model finds out itself."""
        if self.reuse is None:
            return None
        return ModelHints(self.reuse.import_free(module), self._joined_index)

    def _joined_index(self, module: cst.Module) -> FileIndex:
        return join_parts(module, self.indexes)

    def parse(self, source: str, tree: ast.Module, cuts: list[int] | None = None,
              stop: threading.Event | None = None) -> cst.Module | None:
        """libcst's module of ``source``; ``cuts`` (piece starts) when already known.

        ``stop``: checked before each piece is parsed (raises Stopped)."""
        if not tree.body or "\r" in source.replace("\r\n", ""):
            return None
        if cuts is None:
            cuts = _statement_cuts(source, tree)
            if cuts is None:
                return None
        parsed = self._parse_pieces(source, [*cuts, len(source)], stop)
        if parsed is None:
            return None
        mods, keep = parsed
        indents = {m.default_indent for m in mods if any(isinstance(x, cst.BaseCompoundStatement) for x in m.body)}
        newlines = {m.default_newline for m in mods}
        if len(indents) > 1 or len(newlines) > 1:
            return None
        # Keep only this text's pieces: the ones an edit replaced would otherwise pile
        # up (a long editing session of a big file held hundreds of MB of dead trees).
        self.pieces = keep if len(keep) <= self.max_pieces else {}
        body, footer = self._join(mods)
        return cst.Module(
            body=body,
            header=mods[0].header,
            footer=footer,
            encoding=mods[0].encoding,
            default_indent=indents.pop() if indents else mods[0].default_indent,
            default_newline=newlines.pop(),
            has_trailing_newline=mods[-1].has_trailing_newline,
        )

    def _parse_pieces(self, source: str, bounds: list[int], stop: threading.Event | None
                      ) -> tuple[list[cst.Module], dict[str, cst.Module]] | None:
        """Each piece between ``bounds`` as a module (kept ones reused), and the pieces
        to keep by text; None when a piece cannot stand on its own."""
        mods: list[cst.Module] = []
        fresh: dict[str, cst.Module] = {}
        keep: dict[str, cst.Module] = {}
        used: set[int] = set()
        for a, b in zip(bounds, bounds[1:]):
            stop_now(stop)
            text = source[a:b]
            m = self.pieces.get(text) or fresh.get(text)
            if m is not None and id(m) in used:
                m = None  # the same text twice: the engine tells nodes apart by identity
            if m is None:
                m = _fresh_piece(text)
                if m is None:
                    return None
                fresh.setdefault(text, m)
            used.add(id(m))
            if not m.body:
                return None
            mods.append(m)
            keep.setdefault(text, m)
        return mods, keep

    def _join(self, mods: list[cst.Module]
              ) -> tuple[list[cst.SimpleStatementLine | cst.BaseCompoundStatement], list[cst.EmptyLine]]:
        """The pieces' statements as one body (each piece's leading lines moved onto its
        first statement, kept per piece so an unchanged one is the same node), and the
        last piece's footer."""
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
        return body, carry


def _statement_cuts(source: str, tree: ast.Module) -> list[int] | None:
    """Where each top-level statement's piece starts: above the blank and comment lines
    that lead into it, so no piece ends with trailing comments (libcst does not always
    give those back as written). None when the tree does not fit the text."""
    starts = sorted({statement_start_row(st) for st in tree.body})
    line_starts = incremental_line_starts(source)
    if starts[-1] > len(line_starts):
        return None
    return cut_offsets(source, starts, line_starts)


def _fresh_piece(text: str) -> cst.Module | None:
    """``text`` parsed on its own; None when libcst refuses it or does not give back its
    text exactly (it drops a blank line before an indented comment that ends a module,
    for one)."""
    try:
        m = parse_module(text)
    except cst.ParserSyntaxError:
        return None
    return m if m.code == text else None

