"""Jupyter notebooks: the code cells checked as one module, findings mapped back to cells.

A notebook is read with the standard library's ``json`` (checking stays as fast as for a
``.py`` file); ``nbformat`` (the ``notebook`` extra) validates what ``--fix`` writes.

The module handed to the engine is every code cell in order, each under a marker
comment line, with IPython syntax masked line for line (``%magic``, ``!shell``,
``x = !cmd``, ``obj?``; a ``%%cell`` magic whose body is not Python masks the cell). Masking
never adds or removes a line, so a module row maps back to a cell and a row in it by
subtraction; columns are untouched. After fixing, the module is cut at the markers
again and every masked line is put back as written, so magics survive ``--fix``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import warnings
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ..core.types import Diagnostic

MARK = "# kerasfit-cell {}"
_MARK_RE = re.compile(r"^# kerasfit-cell (\d+)$")
_MASK_TAG = "# kerasfit-magic {}"
_MASK_RE = re.compile(r"# kerasfit-magic (\d+)$")
# %%magics whose body is Python (it runs in the kernel); any other cell magic (%%bash,
# %%writefile, %%html, ...) holds another language and the whole cell is masked.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "tensorflow_version"})
_ASSIGN_MAGIC = re.compile(r"^(\s*)([A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*)\s*=\s*[!%]")
_HELP = re.compile(r"^\s*\?{0,2}[A-Za-z_][\w.]*\?{1,2}\s*$|^\s*\?{1,2}[A-Za-z_][\w.]*\s*$")


class NotebookError(Exception):
    """The file is not a notebook kerasfit can read or write back (one line)."""


@dataclass
class Cell:
    number: int  # 1-based position among all the notebook's cells (markdown included)
    source: str  # as written
    masked: str  # as the module holds it


def mask(source: str, originals: dict[int, str]) -> str:
    """IPython-only lines of one cell replaced, one line for one line.

    Each replacement ends with a tag naming its original (stored in ``originals``).
    """
    lines = source.split("\n")

    def tag(i: int) -> str:
        k = len(originals)
        originals[k] = lines[i]
        return _MASK_TAG.format(k)

    first = next((ln for ln in lines if ln.strip()), "")
    stripped = first.lstrip()
    if stripped.startswith("%%"):
        name = stripped[2:].split(None, 1)[0] if stripped[2:].strip() else ""
        if name not in PYTHON_CELL_MAGICS:
            return "\n".join(tag(i) for i in range(len(lines)))
    out: list[str] = []
    continued = False
    for i, line in enumerate(lines):
        body = line.lstrip()
        indent = line[: len(line) - len(body)]
        if continued or body.startswith(("%", "!")) or _HELP.match(line):
            out.append(f"{indent}pass  {tag(i)}")
            continued = line.rstrip().endswith("\\")
            continue
        m = _ASSIGN_MAGIC.match(line)
        if m is not None:
            out.append(f"{m.group(1)}{m.group(2)} = None  {tag(i)}")
            continued = line.rstrip().endswith("\\")
            continue
        out.append(line)
    return "\n".join(out)


class Notebook:
    """A notebook's code cells as one module (``module``) and the way back."""

    def __init__(self, cells: Sequence[Cell], originals: dict[int, str], raw: dict[str, Any] | None = None,
                 text: str = "") -> None:
        self.cells = list(cells)
        self.originals = originals
        self.raw = raw
        self.text = text
        parts: list[str] = []
        self.starts: list[int] = []  # module row of each cell's first line
        row = 1
        for c in self.cells:
            body = c.masked if c.masked.endswith("\n") or not c.masked else c.masked + "\n"
            parts.append(MARK.format(c.number) + "\n" + body)
            self.starts.append(row + 1)
            row += 1 + body.count("\n")
        self.module = "".join(parts)
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", self.module)]

    # ---- reading ---------------------------------------------------------------------

    @classmethod
    def from_json(cls, text: str, filename: str = "notebook") -> Notebook:
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise NotebookError(f"{filename}: not a valid notebook (JSON error: {exc})") from None
        except RecursionError:
            raise NotebookError(f"{filename}: not a valid notebook (JSON nested too deeply to read), skipped") from None
        cells_raw = raw.get("cells") if isinstance(raw, dict) else None
        if not isinstance(cells_raw, list):
            raise NotebookError(f"{filename}: not a valid notebook (no list of cells; nbformat 4 expected)")
        lang = _language(raw)
        if lang not in ("python", ""):
            raise NotebookError(f"{filename}: a {lang} notebook, not Python, skipped")
        sources = []
        for i, c in enumerate(cells_raw, start=1):
            if not isinstance(c, dict):
                raise NotebookError(f"{filename}: not a valid notebook (cell {i} is not an object)")
            if c.get("cell_type") != "code":
                continue
            src = c.get("source", "")
            if isinstance(src, list) and all(isinstance(s, str) for s in src):
                src = "".join(src)
            if not isinstance(src, str):
                raise NotebookError(f"{filename}: not a valid notebook (cell {i} has no text source)")
            sources.append((i, src))
        return cls.from_cells(sources, raw=raw, text=text)

    @classmethod
    def from_cells(cls, sources: Iterable[tuple[int, str]], raw: dict[str, Any] | None = None, text: str = "") -> Notebook:
        originals: dict[int, str] = {}
        cells = [Cell(n, s, mask(s.replace("\r\n", "\n"), originals)) for n, s in sources]
        return cls(cells, originals, raw, text)

    # ---- positions -------------------------------------------------------------------

    def locate(self, row: int) -> tuple[int, int]:
        """(index into ``cells``, 1-based row in that cell) of a module row."""
        if not self.cells:
            return 0, 1
        k = 0
        for i, s in enumerate(self.starts):
            if s <= row:
                k = i
            else:
                break
        local = row - self.starts[k] + 1
        n_lines = self.cells[k].masked.count("\n") + 1
        return k, min(max(local, 1), n_lines)

    def to_cell(self, d: Diagnostic) -> tuple[int, Diagnostic]:
        """The diagnostic with rows inside its cell and ``cell`` set; (cell index, diagnostic).

        A fix whose edits leave the cell (an import added in another cell) keeps its
        module offsets but shows no rows of its own: it is applied to the whole notebook.
        """
        k, row = self.locate(d.row)
        shift = self.starts[k] - 1 if self.cells else 0
        end_row = max(row, d.end_row - shift)
        fix = d.fix
        if fix is not None and fix.edits:
            if all(self.locate(e.row)[0] == k and self.locate(e.end_row)[0] == k and e.row >= self.starts[k] for e in fix.edits):
                fix = dataclasses.replace(
                    fix, edits=tuple(dataclasses.replace(e, row=e.row - shift, end_row=e.end_row - shift) for e in fix.edits)
                )
        number = self.cells[k].number if self.cells else 1
        return k, dataclasses.replace(d, row=row, end_row=end_row, cell=number, fix=fix)

    # ---- writing back ----------------------------------------------------------------

    def split(self, module: str) -> list[str]:
        """A fixed module cut back into the cells' texts, magics restored.

        Raises NotebookError when the markers did not survive one for one.
        """
        # each chunk between markers is then a cell's lines without the newline the
        # module ended it with
        lines = (module[:-1] if module.endswith("\n") else module).split("\n")
        marks = [(i, m) for i, ln in enumerate(lines) if (m := _MARK_RE.match(ln)) is not None]
        heads = [i for i, _ in marks]
        numbers = [int(m.group(1)) for _, m in marks]
        if numbers != [c.number for c in self.cells]:
            raise NotebookError("the fixed code lost a cell boundary; nothing written")
        out: list[str] = []
        for j, (i, cell) in enumerate(zip(heads, self.cells)):
            end = heads[j + 1] if j + 1 < len(heads) else len(lines)
            chunk = lines[i + 1 : end]
            if j == 0 and i > 0:
                chunk = lines[:i] + chunk  # an import placed above the first cell
            text = "\n".join(self._unmask(ln) for ln in chunk)
            if cell.masked.endswith("\n"):
                text += "\n"
            out.append(text)
        return out

    def _unmask(self, line: str) -> str:
        m = _MASK_RE.search(line)
        if m is None:
            return line
        return self.originals.get(int(m.group(1)), line)

    def dumps(self, new_sources: Sequence[str]) -> str:
        """The notebook's text with only the changed code cells' ``source`` values replaced.

        Every other byte stays as it was: escapes, numbers, key order, duplicate keys, a
        BOM, the indentation and line endings of the file and of untouched sources.
        """
        if self.raw is None:
            raise NotebookError("no notebook to write back to")
        spans = _source_spans(self.text)
        edits: list[tuple[int, int, str]] = []
        for cell, new in zip(self.cells, new_sources):
            if new in (cell.source, cell.source.replace("\r\n", "\n")):  # the module reads CRLF as LF
                continue
            span = spans.get(cell.number)
            if span is None:
                raise NotebookError(f"cannot find the source of cell {cell.number} in the file; nothing written")
            start, end = span
            edits.append((start, end, _encode_source(self.text, start, end, new, cell.source)))
        out = self.text
        for start, end, value in sorted(edits, reverse=True):
            out = out[:start] + value + out[end:]
        return out


# ---- the original text's layout --------------------------------------------------------
# A notebook is written back by splicing new ``source`` values into the original text, so
# the scanner below only needs each value's span; it walks nested values with a depth
# counter rather than recursion, so no nesting depth can exhaust the stack.

_WS = re.compile(r"[ \t\n\r]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_SCALAR = re.compile(r"[^,:\[\]{}\s\"]+")


def _skip_ws(text: str, i: int) -> int:
    m = _WS.match(text, i)
    return m.end() if m else i


def _value_end(text: str, i: int) -> int:
    """The offset just past the JSON value that starts at ``i``."""
    depth = 0
    while True:
        i = _skip_ws(text, i)
        c = text[i]
        if c == '"':
            m = _STRING.match(text, i)
            if m is None:
                raise NotebookError("unterminated string")
            i = m.end()
        elif c in "[{":
            depth += 1
            i += 1
            continue
        elif c in "]}":
            depth -= 1
            i += 1
        elif c in ",:":
            i += 1
            continue
        else:
            m = _SCALAR.match(text, i)
            if m is None:
                raise NotebookError(f"unexpected character at offset {i}")
            i = m.end()
        if depth <= 0:
            return i


def _items(text: str, i: int, close: str) -> Iterable[tuple[str | None, int, int]]:
    """(key or None, start, end) of each member of the object or array opening at ``i``."""
    i = _skip_ws(text, i) + 1
    while True:
        i = _skip_ws(text, i)
        if text[i] == close:
            return
        key: str | None = None
        if close == "}":
            m = _STRING.match(text, i)
            if m is None:
                raise NotebookError(f"expected a key at offset {i}")
            key = json.loads(m.group())
            i = _skip_ws(text, m.end()) + 1  # the colon
            i = _skip_ws(text, i)
        end = _value_end(text, i)
        yield key, i, end
        i = _skip_ws(text, end)
        if text[i] == ",":
            i += 1


def _last(text: str, i: int, name: str) -> tuple[int, int] | None:
    """The span of the object's member ``name`` (the last one, as ``json.loads`` keeps)."""
    found = None
    for key, start, end in _items(text, i, "}"):
        if key == name:
            found = (start, end)
    return found


def _source_spans(text: str) -> dict[int, tuple[int, int]]:
    """Cell number (1-based, every cell) → span of its ``source`` value in ``text``."""
    try:
        top = _skip_ws(text, 1 if text.startswith("\ufeff") else 0)
        cells = _last(text, top, "cells")
        spans: dict[int, tuple[int, int]] = {}
        if cells is None or text[cells[0]] != "[":
            return spans
        for number, (_, start, _end) in enumerate(_items(text, cells[0], "]"), start=1):
            if text[start] == "{":
                src = _last(text, start, "source")
                if src is not None:
                    spans[number] = src
        return spans
    except (IndexError, ValueError) as exc:
        raise NotebookError(f"cannot read the notebook's layout ({exc}); nothing written") from None


def _line_indent(text: str, i: int) -> str:
    start = text.rfind("\n", 0, i) + 1
    line = text[start:i]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _encode_source(text: str, start: int, end: int, new: str, old: str) -> str:
    """``new`` as a JSON value written the way the value at ``start:end`` was."""
    if "\r\n" in old and "\n" not in old.replace("\r\n", ""):
        new = new.replace("\r\n", "\n").replace("\n", "\r\n")
    ascii_only = text.isascii() and "\\u" in text
    if text[start] != "[":
        return json.dumps(new, ensure_ascii=ascii_only)
    lines = re.findall(r"[^\n]*\n|[^\n]+$", new)
    items = [json.dumps(ln, ensure_ascii=ascii_only) for ln in lines]
    body = text[start + 1 : end - 1]
    eol = "\r\n" if "\r\n" in text else "\n"
    if body.strip():
        lead = body[: len(body) - len(body.lstrip())]
        trail = body[len(body.rstrip()):]
        m = re.search(r",([ \t\r\n]*)\"", body)
        sep = "," + (m.group(1) if m else lead)
    else:
        key_indent = _line_indent(text, start)
        unit = _indent_unit(text)
        lead, trail = (eol + key_indent + unit, eol + key_indent) if unit is not None else ("", "")
        sep = "," + (lead if unit is not None else " ")
    if not items:
        return "[]"
    return "[" + lead + sep.join(items) + trail + "]"


def _indent_unit(text: str) -> str | None:
    m = re.match(r"\ufeff?\{\r?\n([ \t]+)", text)
    return m.group(1) if m else None


def _language(raw: dict[str, Any]) -> str:
    meta = _table(raw.get("metadata"))
    info = _table(meta.get("language_info"))
    kernel = _table(meta.get("kernelspec"))
    return str(info.get("name") or kernel.get("language") or "").lower()


def _table(value: object) -> dict[str, Any]:
    """A JSON object, or an empty one for whatever else a hand-edited notebook holds there."""
    return value if isinstance(value, dict) else {}


def validate(text: str, filename: str) -> None:
    """nbformat's verdict on a notebook about to be written (when the extra is installed)."""
    try:
        import nbformat
    except ImportError:
        return
    try:
        # nbformat warns (MissingIDFieldWarning, …) on notebooks Jupyter itself accepts;
        # its warnings are not the user's findings, so they stay off the output
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nb = nbformat.reads(text, as_version=nbformat.NO_CONVERT)  # type: ignore[no-untyped-call]  # nbformat's reads is unannotated
            nbformat.validate(nb)
    except Exception as exc:  # nbformat raises several kinds; any of them means do not write
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise NotebookError(f"{filename}: the fixed notebook does not validate ({msg}); nothing written") from None
