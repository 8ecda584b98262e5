"""A rule's fix as text edits: each changed node's offsets, its replacement rendered in
place, and the imports the removed code may orphan."""

from __future__ import annotations

import bisect

import libcst as cst
from libcst._nodes.internal import CodegenState

from ..core.fixes import FixSpec, Remove, Replace
from ..core.types import Edit, Fix
from ..semantic.nodes import iter_children
from .imports import ImportTable, may_orphan
from .positions import Positions


class Indents:
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


def to_fix(spec: FixSpec, pos: Positions, module: cst.Module, indents: Indents | None = None) -> Fix | None:
    indents = indents or Indents(module)
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

