"""Where libcst's generated code puts chosen nodes, through libcst's public API only.

The engine needs the offsets of a few nodes (the ones a rule reported or a fix touches).
libcst's position providers are public but record every node of the module they run
on (about 2x a parse for a whole file), so the engine hands them one statement at a
time: the statement is placed in a synthetic module that reproduces the indentation
of the blocks around it, which makes libcst generate exactly the text it generates
for that statement inside the real module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Collection, Mapping, Sequence, Union, cast

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider, WhitespaceInclusivePositionProvider

# How libcst's position providers split lines (per token; a token never ends in a lone
# "\r" that the next one continues with "\n", so counting on the joined text agrees).
_NEWLINE = re.compile(r"\r\n?|\n")

# Nodes for which libcst records a syntactic range (their own text, without the leading
# lines, indentation, parentheses, commas or whitespace they own). PositionProvider
# gives every other node its whole range; where the two ranges coincide this table
# says which one it is. tests/test_codegen.py fails if libcst starts recording a
# syntactic range for a node type missing here.
SYNTACTIC_KINDS: tuple[type[cst.CSTNode], ...] = (
    cst.BaseExpression, cst.BaseStatement, cst.BaseSmallStatement, cst.BaseSuite,
    cst.BaseBinaryOp, cst.BaseBooleanOp, cst.BaseCompOp, cst.BaseAugOp, cst.MatchPattern,
    cst.Annotation, cst.Arg, cst.AssignEqual, cst.AssignTarget, cst.Asynchronous, cst.Colon,
    cst.Comma, cst.Decorator, cst.DictElement, cst.Dot, cst.Element, cst.Else,
    cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.From, cst.ImportAlias,
    cst.MatchCase, cst.MatchKeywordElement, cst.MatchMappingElement, cst.MatchOrElement,
    cst.MatchSequenceElement, cst.MatchStar, cst.NameItem, cst.Param, cst.ParamSpec,
    cst.Semicolon, cst.StarredDictElement, cst.SubscriptElement, cst.TypeVar,
    cst.TypeVarTuple, cst.WithItem,
)

Span = tuple[int, int]


@dataclass
class Generated:
    """Generated text and the spans of the chosen nodes in it (keyed by ``id``)."""

    text: str
    full: dict[int, Span]  # leading lines, indentation and owned whitespace included
    syntactic: dict[int, Span]  # only for nodes libcst gives a syntactic range


Statement = Union[cst.SimpleStatementLine, cst.BaseCompoundStatement]


def in_blocks(stmt: Statement, indents: Sequence[str], module: cst.Module) -> cst.Module:
    """A module whose code holds ``stmt`` as libcst writes it inside ``module``'s blocks
    indented by ``indents`` (outermost first): one synthetic ``if`` whose block indent is
    their sum, with the module's default indent and newline."""
    body: Statement = stmt
    if indents:
        body = cst.If(test=cst.Name("_"), body=cst.IndentedBlock(body=[stmt], indent="".join(indents)))
    return cst.Module(body=[body], default_indent=module.default_indent, default_newline=module.default_newline)


def positions(module: cst.Module, nodes: Collection[cst.CSTNode], base: cst.CSTNode | None = None) -> Generated | None:
    """Generate ``module`` and place ``nodes`` (the ones found in it). With ``base`` (a
    node of the module), the text and the spans are those of ``base`` alone.

    None when libcst's line count disagrees with the text (nothing is guessed)."""
    # One resolve for both: each resolve also walks the whole tree once.
    found = MetadataWrapper(module, unsafe_skip_copy=True).resolve_many([WhitespaceInclusivePositionProvider, PositionProvider])
    # (resolve_many's annotation forgets each provider's value type)
    whole = cast("Mapping[cst.CSTNode, CodeRange]", found[WhitespaceInclusivePositionProvider])
    own = cast("Mapping[cst.CSTNode, CodeRange]", found[PositionProvider])
    text = module.code
    # Without a trailing newline libcst drops the last newline token after the last
    # statement's range is recorded; count lines as if it were there, as the providers do.
    counted = text if module.has_trailing_newline else module.with_changes(has_trailing_newline=True).code
    starts = [0] + [m.end() for m in _NEWLINE.finditer(counted)]
    end = whole.get(module)
    if end is None or end.end.line != len(starts):
        return None

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + column

    shift, stop = 0, len(text)
    if base is not None:
        r = whole.get(base)
        if r is None:
            return None
        shift, stop = offset(r.start.line, r.start.column), offset(r.end.line, r.end.column)
    full: dict[int, Span] = {}
    syntactic: dict[int, Span] = {}
    for n in nodes:
        r = whole.get(n)
        if r is None:
            continue
        span = (offset(r.start.line, r.start.column) - shift, offset(r.end.line, r.end.column) - shift)
        full[id(n)] = span
        s = own[n]
        a, b = offset(s.start.line, s.start.column), offset(s.end.line, s.end.column)
        if (a - shift, b - shift) == span and not isinstance(n, SYNTACTIC_KINDS):
            continue
        # libcst moves a statement's syntactic start or end onto its first or last
        # child's own range (a line ends at its last statement, before a ";"); the
        # engine takes the text libcst writes for the node, so those children count
        # whole: a removed line takes its ";" along, a block its last newline.
        a0, b0 = a, b
        for c in n.children:
            cs = own.get(c)
            if cs is None:
                continue
            cw = whole[c]
            if offset(cs.start.line, cs.start.column) == a0:
                a = min(a, offset(cw.start.line, cw.start.column))
            if offset(cs.end.line, cs.end.column) == b0:
                b = max(b, offset(cw.end.line, cw.end.column))
        syntactic[id(n)] = (a - shift, b - shift)
    return Generated(text[shift:stop], full, syntactic)


class _BlockIndent(cst.CSTTransformer):
    """Writes the enclosing blocks' indentation into a node where libcst would add it
    from its surroundings: continuation lines and comment lines flagged ``indent``, and
    the blocks nested in the node (whose own indent is added on top)."""

    def __init__(self, indent: str, default: str) -> None:
        super().__init__()
        self.indent, self.default = indent, default
        self.depth = 0  # inside a nested block the block's own indent carries ours

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> bool:
        self.depth += 1
        return True

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        self.depth -= 1
        if self.depth:
            return updated
        return updated.with_changes(indent=self.indent + (self.default if updated.indent is None else updated.indent))

    def leave_ParenthesizedWhitespace(
        self, original: cst.ParenthesizedWhitespace, updated: cst.ParenthesizedWhitespace
    ) -> cst.ParenthesizedWhitespace:
        if self.depth or not updated.indent:
            return updated
        return updated.with_changes(indent=False, last_line=cst.SimpleWhitespace(self.indent + updated.last_line.value))

    def leave_EmptyLine(self, original: cst.EmptyLine, updated: cst.EmptyLine) -> cst.EmptyLine:
        if self.depth or not updated.indent:
            return updated
        return updated.with_changes(indent=False, whitespace=cst.SimpleWhitespace(self.indent + updated.whitespace.value))


def render_in_blocks(module: cst.Module, node: cst.CSTNode, indents: Sequence[str]) -> str:
    """``node``'s code as libcst writes it inside blocks indented by ``indents``."""
    if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        placed = positions(in_blocks(node, indents, module), (), node)
        if placed is not None:
            return placed.text
    indent = "".join(indents)
    indented = node.visit(_BlockIndent(indent, module.default_indent))
    if not isinstance(indented, cst.CSTNode):  # pragma: no cover - the transformer removes nothing
        indented = node
    text = module.code_for_node(indented)
    if isinstance(indented, _CLAUSES):
        # a clause's header line is indented like its statement, after its leading lines
        lead = len("".join(module.code_for_node(line) for line in indented.leading_lines))
        text = text[:lead] + indent + text[lead:]
    return text


# Parts of compound statements that start a line of their own (``else:``, ``except ...:``).
_CLAUSES = (cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.MatchCase, cst.Decorator)
