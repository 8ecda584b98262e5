"""Jupyter notebooks: the code cells checked as one module, findings mapped back to cells.

A notebook is read with the standard library's ``json`` (checking stays as fast as for a
``.py`` file); ``nbformat`` (the ``notebook`` extra) validates what ``--fix`` writes.

The module handed to the engine is every code cell in order, each under a marker
comment line, with IPython syntax masked line for line as IPython's input transformers
read it (``%magic``, ``!shell``, ``x = !cmd``, ``obj?``, the auto-call escapes ``/f a``,
``,f a``, ``;f a``, automagic ``pip install x`` where the line is no Python, each with the
lines it continues with a trailing backslash; a
``%%cell`` magic whose body is not Python masks the cell). Masking never adds or removes a
line, so a module row maps back to a cell and a row in it by subtraction; columns are
untouched. A cell whose first line is indented (code pasted from a function body) runs in
IPython, which takes the first line's indentation off every line that has it: its marker
line opens an ``if True:`` block instead, which holds the same statements at the same
columns. After fixing, the module is cut at the markers again and every masked line is
put back as written, so magics survive ``--fix``. The markers' words are ones no cell
holds, so a user's line is never taken for one.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import warnings
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ..core.types import Diagnostic

# The marker comment before each cell and the tag ending each masked line. A notebook
# whose text already holds one of them (a user's `# kerasfit-magic 3`) gets others, with
# a suffix no cell holds (Notebook.from_cells), so no user line is ever taken for one.
CELL_MARK = "kerasfit-cell"
MAGIC_MARK = "kerasfit-magic"
# %%magics whose body is Python (it runs in the kernel); any other cell magic (%%bash,
# %%writefile, %%html, ...) holds another language and the whole cell is masked.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "tensorflow_version"})
# IPython's escapes at the start of a logical line: `!cmd`, `!!cmd`, `%magic`, `?obj`,
# `??obj`, and the explicit auto-call ones `/f a b` (f(a, b)), `,f a b` (f("a", "b")) and
# `;f a b` (f("a b")); no Python statement starts with one of these.
_ESCAPES = ("!", "%", "?", "/", ",", ";")
# IPython's automagic (on by default): a line magic or a shell alias called without its
# `%` (`pip install datasets`, `cd data`); as IPython's own checks, not when an `=` or `,`
# (an assignment) or an opening bracket follows the name, and here only where the line
# is no Python statement.
_AUTOMAGIC = re.compile(
    r"^\s*(pip|conda|mamba|cd|env|load_ext|reload_ext|unload_ext|matplotlib|pylab|timeit|time|run|pwd|who|whos|"
    r"history|config|autoreload|tensorflow_version|ls|ll|cat|cp|mv|rm|mkdir|rmdir|less|more|man|clear)\s+[^\s=,(\[{]"
)
_ASSIGN_MAGIC = re.compile(r"^(\s*)([A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*)\s*=\s*[!%]")
_HELP = re.compile(r"^\s*\?{0,2}[A-Za-z_][\w.]*\?{1,2}\s*$")


class NotebookError(Exception):
    """The file is not a notebook kerasfit can read or write back (one line)."""


@dataclass
class Cell:
    number: int  # 1-based position among all the notebook's cells (markdown included)
    source: str  # as written
    masked: str  # as the module holds it


def unused_mark(base: str, texts: Iterable[str]) -> str:
    """``base``, or ``base-2``, ``base-3`` … : the first no text holds."""
    texts = list(texts)
    mark, n = base, 1
    while any(mark in t for t in texts):
        n += 1
        mark = f"{base}-{n}"
    return mark


def mask(source: str, originals: dict[int, str], mark: str = MAGIC_MARK) -> str:
    """IPython-only lines of one cell replaced, one line for one line, as IPython's input
    transformers read the cell: an escape only at the start of a logical line (not inside
    brackets, a string or a backslash continuation of Python), with the lines it continues
    with a trailing backslash; ``x = !cmd`` / ``x = %magic``; ``obj?``.

    Each replacement ends with a tag (``# <mark> N``) naming its original (stored in
    ``originals``); a continuation line keeps the indentation of the line it continues.
    """
    lines = source.split("\n")

    def tag(i: int) -> str:
        k = len(originals)
        originals[k] = lines[i]
        return f"# {mark} {k}"

    first = next((ln for ln in lines if ln.strip()), "")
    stripped = first.lstrip()
    if stripped.startswith("%%"):
        name = stripped[2:].split(None, 1)[0] if stripped[2:].strip() else ""
        if name not in PYTHON_CELL_MAGICS:
            return "\n".join(tag(i) for i in range(len(lines)))
    out: list[str] = []
    scan = _Logical()
    i = 0
    while i < len(lines):
        line = lines[i]
        body = line.lstrip()
        indent = line[: len(line) - len(body)]
        assign = _ASSIGN_MAGIC.match(line) if scan.at_start else None
        if scan.at_start and (body.startswith(_ESCAPES) or _HELP.match(line) or assign is not None
                              or (_AUTOMAGIC.match(line) and not _is_python(body))):
            out.append(f"{indent}{assign.group(2) + ' = None' if assign else 'pass'}  {tag(i)}")
            while lines[i].endswith("\\") and i + 1 < len(lines):  # continued, as IPython joins it
                i += 1
                out.append(f"{indent}pass  {tag(i)}")
        else:
            scan.feed(line)
            out.append(line)
        i += 1
    return "\n".join(out)


# The head of a cell marker for an indented cell (see the module's docstring).
_BLOCK = "if True:  "


def _indented(masked: str) -> bool:
    """Whether the cell needs a block to parse as IPython runs it: its first line with text
    is indented (IPython then takes that indentation off), and so is its first statement
    (an indented comment alone is no matter to Python)."""
    lines = [ln for ln in masked.split("\n") if ln.strip()]
    if not lines or not lines[0][0].isspace():
        return False
    code = next((ln for ln in lines if not ln.lstrip().startswith("#")), "")
    return code[:1].isspace()


def _is_python(line: str) -> bool:
    """Whether one line compiles as Python on its own (a backslash join is left off)."""
    try:
        compile(line.rstrip("\\"), "<cell>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


class _Logical:
    """Where Python's logical lines start, fed one physical line at a time: open brackets,
    an open string (triple-quoted, or continued with a backslash) and a backslash line
    join all continue a logical line. Enough of the tokenizer for that, and linear."""

    __slots__ = ("depth", "quote", "joined")

    def __init__(self) -> None:
        self.depth = 0
        self.quote = ""  # the delimiter that closes the open string, or ""
        self.joined = False  # the last line ended with a backslash outside a string

    @property
    def at_start(self) -> bool:
        return self.depth == 0 and not self.quote and not self.joined

    def feed(self, line: str) -> None:
        quote, depth = self.quote, self.depth
        self.joined = False
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if quote:
                if c == "\\":
                    i += 2
                elif line.startswith(quote, i):
                    i += len(quote)
                    quote = ""
                else:
                    i += 1
                continue
            if c == "#":
                break
            if c in "\"'":
                quote = c * 3 if line.startswith(c * 3, i) else c
                i += len(quote)
                continue
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth = max(0, depth - 1)
            elif c == "\\" and i == n - 1:
                self.joined = True
            i += 1
        if len(quote) == 1 and i <= n:
            quote = ""  # a one-quote string the line leaves open without a backslash: an error, ended here
        self.quote, self.depth = quote, depth


class Notebook:
    """A notebook's code cells as one module (``module``) and the way back."""

    def __init__(self, cells: Sequence[Cell], originals: dict[int, str], raw: dict[str, Any] | None = None,
                 text: str = "", marks: tuple[str, str] = (CELL_MARK, MAGIC_MARK)) -> None:
        """``marks``: the cell marker's and the magic tag's words, which no cell holds."""
        self.cells = list(cells)
        self.originals = originals
        self.raw = raw
        self.text = text
        cell_mark, magic_mark = marks
        self._cell_re = re.compile(rf"^(?:{_BLOCK})?# {re.escape(cell_mark)} (\d+)$")
        self._magic_re = re.compile(rf"# {re.escape(magic_mark)} (\d+)$")
        parts: list[str] = []
        self.starts: list[int] = []  # module row of each cell's first line
        row = 1
        for c in self.cells:
            body = c.masked if c.masked.endswith("\n") or not c.masked else c.masked + "\n"
            parts.append(f"{_BLOCK if _indented(c.masked) else ''}# {cell_mark} {c.number}\n{body}")
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
        sources = list(sources)
        texts = [s for _, s in sources]
        marks = (unused_mark(CELL_MARK, texts), unused_mark(MAGIC_MARK, texts))
        cells = [Cell(n, s, mask(s.replace("\r\n", "\n"), originals, marks[1])) for n, s in sources]
        return cls(cells, originals, raw, text, marks)

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
        marks = [(i, m) for i, ln in enumerate(lines) if (m := self._cell_re.match(ln)) is not None]
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
        m = self._magic_re.search(line)
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
