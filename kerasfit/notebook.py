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
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from .types import Diagnostic, Edit, FileResult, Fix

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


@dataclass
class Masked:
    text: str
    originals: dict[int, str]


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
        """The notebook's JSON with only the code cells' sources replaced."""
        if self.raw is None:
            raise NotebookError("no notebook to write back to")
        raw = self.raw
        by_number = {c.number: s for c, s in zip(self.cells, new_sources)}
        for i, c in enumerate(raw["cells"], start=1):
            if i in by_number:
                new = by_number[i]
                if isinstance(c.get("source"), list):
                    c["source"] = new.splitlines(keepends=True)
                else:
                    c["source"] = new
        return _dump_like(raw, self.text)


def _language(raw: dict[str, Any]) -> str:
    meta = _table(raw.get("metadata"))
    info = _table(meta.get("language_info"))
    kernel = _table(meta.get("kernelspec"))
    return str(info.get("name") or kernel.get("language") or "").lower()


def _table(value: object) -> dict[str, Any]:
    """A JSON object, or an empty one for whatever else a hand-edited notebook holds there."""
    return value if isinstance(value, dict) else {}


def _dump_like(raw: dict[str, Any], original: str) -> str:
    """JSON written the way the original was (indent, ASCII escapes, final newline)."""
    m = re.match(r"\{\r?\n([ \t]+)", original)
    indent: int | str | None = None
    if m is not None:
        ws = m.group(1)
        indent = len(ws) if set(ws) == {" "} else ws
    ascii_only = original.isascii() and "\\u" in original
    out = json.dumps(raw, indent=indent, ensure_ascii=ascii_only)
    if "\r\n" in original:
        out = out.replace("\n", "\r\n")
    if original.endswith("\n"):
        out += "\r\n" if original.endswith("\r\n") else "\n"
    return out


def validate(text: str, filename: str) -> None:
    """nbformat's verdict on a notebook about to be written (when the extra is installed)."""
    try:
        import nbformat
    except ImportError:
        return
    try:
        nb = nbformat.reads(text, as_version=nbformat.NO_CONVERT)  # type: ignore[no-untyped-call]  # nbformat's reads is unannotated
        nbformat.validate(nb)
    except Exception as exc:  # nbformat raises several kinds; any of them means do not write
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise NotebookError(f"{filename}: the fixed notebook does not validate ({msg}); nothing written") from None
