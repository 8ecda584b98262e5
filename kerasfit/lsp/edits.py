"""Pure helpers for the language server: positions, text edits, suppression comments,
hover text. No pygls here, so these are testable (and importable) without the extra.

Positions are LSP dicts (0-based line, UTF-16 ``character``). The server always
negotiates UTF-16 — the encoding every client must support — so these agree with
``kerasfit check --output-format lsp``.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable, Mapping, Sequence

from ..project.reporters import utf16_col
from ..engine.suppressions import with_noqa
from ..core.types import Applicability, Diagnostic

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """Lines as LSP counts them (``\\n``, ``\\r\\n`` and ``\\r`` all end a line), without terminators."""
    return _LINE_BREAK.split(text)


def from_utf16(line: str, character: int) -> int:
    """A client's UTF-16 column on ``line`` as a Python (code point) column."""
    units = 0
    for i, ch in enumerate(line):
        if units >= character:
            return i
        units += 2 if ord(ch) > 0xFFFF else 1
    return len(line)


def offset_to_position(text: str, offset: int) -> dict[str, int]:
    """A character offset into ``text`` as an LSP position."""
    line = 0
    start = 0
    for m in _LINE_BREAK.finditer(text, 0, offset):
        if m.end() > offset:  # offset sits inside a "\r\n"
            break
        line += 1
        start = m.end()
    brk = _LINE_BREAK.search(text, start)
    line_text = text[start : brk.start() if brk else len(text)]
    return {"line": line, "character": utf16_col(line_text, offset - start)}


def minimal_edit(old: str, new: str) -> dict[str, Any] | None:
    """One LSP TextEdit turning ``old`` into ``new`` (common prefix and suffix kept), or None."""
    if old == new:
        return None
    n = min(len(old), len(new))
    p = 0
    while p < n and old[p] == new[p]:
        p += 1
    s = 0
    while s < n - p and old[len(old) - 1 - s] == new[len(new) - 1 - s]:
        s += 1
    # Never cut a "\r\n" in two: a position between them is not on any line.
    if 0 < p < len(old) and old[p - 1] == "\r" and old[p] == "\n":
        p -= 1
    end = len(old) - s
    if 0 < end < len(old) and old[end - 1] == "\r" and old[end] == "\n":
        end += 1
        s -= 1
    return {
        "range": {"start": offset_to_position(old, p), "end": offset_to_position(old, end)},
        "newText": new[p : len(new) - s],
    }


def noqa_edit(line_no: int, line: str, code: str, comment_at: int | None) -> dict[str, Any]:
    """The TextEdit that suppresses ``code`` on ``line`` (0-based ``line_no``, no terminator;
    its comment, if any, starts at ``comment_at``), as ``kerasfit check --add-noqa`` writes
    it (:func:`kerasfit.engine.suppressions.with_noqa`)."""
    edit = minimal_edit(line, with_noqa(line, [code], comment_at))
    if edit is None:  # already suppressed there: an empty edit at the end of the line
        end = {"line": 0, "character": utf16_col(line, len(line))}
        edit = {"range": {"start": end, "end": dict(end)}, "newText": ""}
    for pos in edit["range"].values():
        pos["line"] = line_no
    return edit


def quickfix_title(d: Diagnostic) -> str:
    assert d.fix is not None
    return d.fix.title + (" (unsafe)" if d.fix.applicability is Applicability.UNSAFE else "")


def lines_overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Do two LSP ranges share a line? (A range ending at character 0 does not reach its end line.)"""

    def last(r: dict[str, Any]) -> int:
        end = r["end"]
        line: int = end["line"]
        return line - 1 if end["character"] == 0 and line > r["start"]["line"] else line

    return bool(a["start"]["line"] <= last(b) and b["start"]["line"] <= last(a))


# ---- hover ----------------------------------------------------------------------------


def rule_paragraph(doc: str) -> str:
    """The rule's "What it does" section as one paragraph (else the first paragraph)."""
    m = re.search(r"^#*\s*What it does\s*$\n(?P<body>.*?)(?=^#+\s|\Z)", doc, re.M | re.S)
    body = m.group("body") if m else doc
    paras = [p for p in re.split(r"\n\s*\n", body.strip()) if p.strip()]
    if not paras:
        return ""
    return " ".join(line.strip() for line in paras[0].splitlines() if line.strip())


def _get(obj: Any, *names: str, default: Any = None) -> Any:
    """The first of ``names`` that ``obj`` has (as a key or attribute) and that is not None."""
    for n in names:
        v = obj.get(n) if isinstance(obj, dict) else getattr(obj, n, None)
        if v is not None:
            return v
    return default


def _shape(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return "×".join(str(x) for x in v)
    return str(v)


def _fit(v: Any) -> str:
    try:
        return f"{float(v):.0%}"
    except (TypeError, ValueError):
        return str(v)


def build_lines_for_diagnostic(d: Diagnostic) -> list[str]:
    """What the build cross-check attached to a diagnostic, as markdown bullets."""
    b = d.build
    if not b:
        return []
    out = []
    status = b.get("status")
    if status:
        out.append(f"- build: **{status}**" + (f" — {b['detail']}" if b.get("detail") else ""))
    shape, padded = b.get("shape"), b.get("padded_shape")
    if shape is not None and padded is not None:
        fit = f", fit {_fit(b['fit'])}" if b.get("fit") is not None else ""
        out.append(f"- `{b.get('op_name') or b.get('layer') or 'op'}`: {_shape(shape)} → {_shape(padded)}{fit}")
    return out


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return a == b


def _op_rows(op: Any, filename: str | None) -> tuple[int, int] | None:
    src = _get(op, "source", "site")
    where = src if src is not None else op
    line = _get(where, "line", "row")
    if not isinstance(line, int):
        return None
    file = _get(where, "file")
    if filename and isinstance(file, str) and not _same_file(file, filename):
        return None  # an op built from another module
    end = _get(where, "end_line", "end_row")
    return line, end if isinstance(end, int) else line


def build_lines_for_row(report: Any, row: int, filename: str | None = None) -> list[str]:
    """Ops of a cached build report that map to 1-based ``row`` of ``filename``:
    shape → padded shape, and fit.

    Duck-typed: the report may be a dataclass (``kerasfit.crosscheck.records.BuildReport``)
    or its ``to_dict()``, with flat op records or ``(HloOp, OpSim)`` pairs.
    """
    ops = _get(report, "ops")
    if ops is None:
        sim = _get(report, "simulation")
        ops = _get(sim, "ops") if sim is not None else None
    out: list[str] = []
    for item in ops or ():
        op, sim = (item if isinstance(item, tuple) and len(item) == 2 else (item, item))
        rows = _op_rows(op, filename) or _op_rows(sim, filename)
        if rows is None or not rows[0] <= row <= rows[1]:
            continue
        shape, padded = _get(sim, "shape"), _get(sim, "padded_shape")
        if shape is None or padded is None:
            continue
        name = _get(op, "layer", "op_name", "name", default="op")
        pass_ = _get(op, "pass_", "pass")
        fit = _get(sim, "fit")
        out.append(
            f"- `{name}`" + (f" ({pass_})" if pass_ else "") + f": {_shape(shape)} → {_shape(padded)}"
            + (f", fit {_fit(fit)}" if fit is not None else "")
        )
        if len(out) >= 8:
            out.append("- …")
            break
    return out


def hover_markdown(
    diags: Sequence[Diagnostic], docs: dict[str, str], build_rows: Iterable[str] = (), build_title: str = "",
    pages: Mapping[str, str | None] | None = None,
) -> str:
    parts = []
    for d in diags:
        text = f"**{d.code}** `{d.name}` — {d.message}"
        para = docs.get(d.code)
        if para:
            text += f"\n\n{para}"
        extra = build_lines_for_diagnostic(d)
        if extra:
            text += "\n\n" + "\n".join(extra)
        page = (pages or {}).get(d.code)
        if page is not None:  # engine codes (KF0xx) and rule packs have no page
            text += f"\n\nMore: `kerasfit explain {d.code}` ([rule page]({page}))"
        parts.append(text)
    rows = list(build_rows)
    if rows:
        parts.append(f"**Build report** ({build_title or 'cached'})\n\n" + "\n".join(rows))
    return "\n\n---\n\n".join(parts)
