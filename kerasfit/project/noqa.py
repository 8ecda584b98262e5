"""``kerasfit check --add-noqa``: a ``# noqa: CODE`` comment on each line with a finding,
so a team can turn kerasfit on in an existing codebase and fix the old findings later.

A comment goes on a row the engine reads suppressions from (the finding's first or last
row) and only where Python allows one: not on a row that ends inside a multi-line
string, and not after a backslash that continues the line. A finding with no such row
is left and counted. An existing ``# noqa: X`` list is extended, never duplicated, so a
second run changes nothing; a file whose commented text would not parse is not written.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from .notebook import Notebook, NotebookError, validate
from ..core.sourcefile import read_regular
from ..engine.suppressions import Comments, with_noqa
from ..core.types import Diagnostic, FileResult
from .writeback import Snapshot, stat_or_none, write_fixed

_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")
_ENGINE_CODE = re.compile(r"^KF0\d\d$")  # syntax errors and crashes: no comment silences them


@dataclass
class NoqaOutcome:
    added: int = 0  # findings that got a comment
    files: int = 0  # files written
    left: list[tuple[Diagnostic, str]] = field(default_factory=list)  # (finding, why it got none)
    errors: list[str] = field(default_factory=list)  # files that could not be written (one line each)


def _split(source: str) -> list[tuple[str, str]]:
    """(text, terminator) per row, rows counted as Python counts them."""
    out = []
    for m in _LINES.finditer(source):
        line = m.group(0)
        if not line:
            break
        body = line.rstrip("\r\n")
        out.append((body, line[len(body):]))
    return out


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def comment_source(source: str, diags: Sequence[Diagnostic]) -> tuple[str, int, list[tuple[Diagnostic, str]]]:
    """``source`` with the comments that suppress ``diags``; how many got one; the rest, with why."""
    rows = _split(source)
    comments = Comments.of(source)  # (a text that does not tokenize is read in pieces)
    ok = comments.open_rows
    wanted: dict[int, list[str]] = defaultdict(list)
    left: list[tuple[Diagnostic, str]] = []
    added = 0
    for d in diags:
        if _ENGINE_CODE.match(d.code):
            left.append((d, "not a rule's finding (noqa does not silence it)"))
            continue
        row = next((r for r in (d.row, d.end_row) if r in ok and 0 < r <= len(rows)), None)
        if row is None:
            text = rows[d.row - 1][0] if 0 < d.row <= len(rows) else ""
            why = "its line is continued with a backslash" if text.rstrip().endswith("\\") else "its line ends inside a multi-line string"
            left.append((d, why))
            continue
        wanted[row].append(d.code)
        added += 1
    if not wanted:
        return source, 0, left
    out = []
    for r, (text, end) in enumerate(rows, start=1):
        out.append((with_noqa(text, wanted[r], comments.column(r)) if r in wanted else text) + end)
    new = "".join(out)
    if _parses(source) and not _parses(new):  # never break code: leave the file as it is
        return source, 0, left + [(d, "the commented file would not parse") for d in diags if all(d is not x for x, _ in left)]
    return new, added, left


def _comment_notebook(text: str, filename: str, diags: Sequence[Diagnostic]) -> tuple[str, int, list[tuple[Diagnostic, str]]]:
    nb = Notebook.from_json(text, filename)
    by_cell: dict[int | None, list[Diagnostic]] = defaultdict(list)
    for d in diags:
        by_cell[d.cell].append(d)
    sources, added, left = [], 0, []
    for cell in nb.cells:
        mine = by_cell.pop(cell.number, [])
        if not mine:
            sources.append(cell.source)
            continue
        # the masked text tokenizes (magics are placeholders), rows match the source's one for one
        masked, n, why = comment_source(cell.masked, mine)
        added += n
        left += why
        if n:
            # carry the masked text's comments onto the cell as written (its magics intact)
            src_rows, new_rows = _split(cell.source), _split(masked)
            sources.append("".join(
                (new[0] if new[0] != old_m[0] else old[0]) + old[1]
                for old, new, old_m in zip(src_rows, new_rows, _split(cell.masked))
            ))
        else:
            sources.append(cell.source)
    for rest in by_cell.values():
        left += [(d, "its cell is not in the notebook") for d in rest]
    if not added:
        return text, 0, left
    out = nb.dumps(sources)
    validate(out, filename)
    return out, added, left


def add_noqa(files: Sequence[FileResult], trees: Sequence[Path] = ()) -> NoqaOutcome:
    """Comment every finding of ``files`` in place (``trees``: where writing is allowed)."""
    outcome = NoqaOutcome()
    for f in files:
        if not f.diagnostics:
            continue
        path = Path(f.filename)
        before = stat_or_none(path)
        try:
            data = read_regular(path)
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            outcome.errors.append(f"{f.filename}: cannot read: {exc}")
            continue
        bom = "\ufeff" if text.startswith("\ufeff") else ""
        try:
            if f.filename.endswith(".ipynb"):
                new, added, left = _comment_notebook(text[len(bom):], f.filename, f.diagnostics)
            else:
                new, added, left = comment_source(text[len(bom):], f.diagnostics)
        except NotebookError as exc:
            outcome.errors.append(f"{f.filename}: {exc}")
            continue
        outcome.left += left
        if not added:
            continue
        problem = write_fixed(path, bom + new, Snapshot.take(before, data), trees)
        if problem is not None:
            outcome.errors.append(problem)
            outcome.left += [(d, "the file could not be written") for d in f.diagnostics if all(d is not x for x, _ in left)]
            continue
        outcome.added += added
        outcome.files += 1
    return outcome
