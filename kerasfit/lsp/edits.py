"""Pure helpers for the language server: positions, text edits, suppression comments,
hover text. No pygls here, so these are testable (and importable) without the extra.

Positions are LSP dicts (0-based line, UTF-16 ``character``). The server always
negotiates UTF-16 — the encoding every client must support — so these agree with
``kerasfit check --output-format lsp``.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

from ..reporters import utf16_col
from ..types import Applicability, Diagnostic

# Same shape as the engine's suppression regex: "# noqa" optionally followed by codes.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_NOQA_RE = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.I)


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
    m = _LINE_BREAK.search(text, start)
    line_text = text[start : m.start() if m else len(text)]
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


def noqa_edit(line_no: int, line: str, code: str) -> dict[str, Any]:
    """The TextEdit that suppresses ``code`` on ``line`` (0-based ``line_no``, no terminator).

    Extends an existing ``# noqa: X1, X2`` list; otherwise appends ``  # noqa: CODE``.
    """
    for m in _NOQA_RE.finditer(line):
        if m.group("codes"):
            at = m.end("codes")
            pos = {"line": line_no, "character": utf16_col(line, at)}
            return {"range": {"start": pos, "end": pos}, "newText": f", {code}"}
    body = line.rstrip()
    start = {"line": line_no, "character": utf16_col(line, len(body))}
    end = {"line": line_no, "character": utf16_col(line, len(line))}
    return {"range": {"start": start, "end": end}, "newText": f"{body and '  '}# noqa: {code}"}


def quickfix_title(d: Diagnostic) -> str:
    assert d.fix is not None
    return d.fix.title + (" (unsafe)" if d.fix.applicability is Applicability.UNSAFE else "")


def ranges_overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Inclusive overlap: a cursor (empty range) touching a diagnostic counts."""

    def key(p: dict[str, int]) -> tuple[int, int]:
        return (p["line"], p["character"])

    return key(a["start"]) <= key(b["end"]) and key(b["start"]) <= key(a["end"])


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
    for n in names:
        if isinstance(obj, dict) and n in obj:
            return obj[n]
        if not isinstance(obj, dict) and hasattr(obj, n):
            return getattr(obj, n)
    return default


def _shape(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(str(x) for x in v) + "]"
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


def _op_rows(op: Any) -> tuple[int, int] | None:
    src = _get(op, "source", "site")
    line = _get(src, "line") if src is not None else _get(op, "line", "row")
    if not isinstance(line, int):
        return None
    end = _get(src, "end_line") if src is not None else _get(op, "end_line", "end_row")
    return line, end if isinstance(end, int) else line


def build_lines_for_row(report: Any, row: int) -> list[str]:
    """Ops of a cached build report that map to 1-based ``row``: shape → padded shape, fit.

    Duck-typed on purpose: the report may be a dataclass or a dict, with ops as
    ``(HloOp, OpSim)`` pairs or flat records.
    """
    ops = _get(report, "ops", default=None)
    if ops is None:
        sim = _get(report, "simulation", default=None)
        ops = _get(sim, "ops", default=None) if sim is not None else None
    out: list[str] = []
    for item in ops or ():
        op, sim = (item if isinstance(item, tuple) and len(item) == 2 else (item, item))
        rows = _op_rows(op) or _op_rows(sim)
        if rows is None or not rows[0] <= row <= rows[1]:
            continue
        shape = _get(sim, "shape", default=None)
        padded = _get(sim, "padded_shape", default=None)
        if shape is None or padded is None:
            continue
        name = _get(op, "layer", "op_name", "name", default="op")
        fit = _get(sim, "fit", default=None)
        out.append(f"- `{name}`: {_shape(shape)} → {_shape(padded)}" + (f", fit {_fit(fit)}" if fit is not None else ""))
        if len(out) >= 8:
            out.append("- …")
            break
    return out


def hover_markdown(diags: Sequence[Diagnostic], docs: dict[str, str], build_rows: Iterable[str] = ()) -> str:
    parts = []
    for d in diags:
        text = f"**{d.code}** `{d.name}` — {d.message}"
        para = docs.get(d.code)
        if para:
            text += f"\n\n{para}"
        extra = build_lines_for_diagnostic(d)
        if extra:
            text += "\n\n" + "\n".join(extra)
        if d.code[2:3] != "0":  # KF0xx are the engine's own (syntax error, crashed rule): no page
            text += f"\n\n[{d.code} documentation]({d.url})"
        parts.append(text)
    rows = list(build_rows)
    if rows:
        parts.append("**Build report** (cached)\n\n" + "\n".join(rows))
    return "\n\n---\n\n".join(parts)
