"""A baseline: the findings a team accepts when it turns kerasfit on in an existing
codebase, so that only new ones fail.

A finding is keyed by its rule, its file (relative to the baseline file's directory),
the text of the statement it sits in with the layout normalised (tokens joined by one
space, comments dropped), and its occurrence number among the file's findings with that
rule and text. Line numbers are not in the key: an edit elsewhere in the file, a
re-indent, a reflowed call or a new comment does not wake an accepted finding; a change
to the flagged statement itself, or one more copy of it, does.
"""

from __future__ import annotations

import io
import json
import os
import re
import tokenize
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from .config import ConfigError
from .notebook import Notebook, NotebookError
from ..core.sourcefile import DEFAULT_MAX_FILE_SIZE, NotRegularFile, TooLarge, read_regular
from ..core.types import Diagnostic, FileResult

FORMAT = "kerasfit-baseline"
VERSION = 1
# a baseline is a few hundred bytes a finding: more than this is not one (and is not read)
MAX_BYTES = 32 * DEFAULT_MAX_FILE_SIZE
_WORD_END = re.compile(r"\w$")
_WORD_START = re.compile(r"^\w|^['\"]")
_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING}


@dataclass(frozen=True, order=True)
class Key:
    code: str
    path: str
    statement: str
    occurrence: int


def _join(toks: Sequence[tokenize.TokenInfo]) -> str:
    """Tokens with a space only where two words would otherwise merge (``not in``,
    ``lambda x``): ``y=f(a,b)`` however the statement was laid out."""
    out = toks[0].string
    for t in toks[1:]:
        if _WORD_END.search(out) and _WORD_START.match(t.string):
            out += " "
        out += t.string
    return out


def statements_by_row(source: str) -> dict[int, str]:
    """Each physical row's logical line, normalised. Rows outside any logical line (blank,
    comment-only) and a source that does not tokenize fall back to the row's own words."""
    rows = {i: " ".join(line.split()) for i, line in enumerate(source.splitlines(), start=1)}
    toks: list[tokenize.TokenInfo] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source, newline=None).readline):
            if tok.type in _SKIP:
                continue
            if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                if toks:
                    text = _join(toks)
                    for r in range(toks[0].start[0], toks[-1].end[0] + 1):
                        rows[r] = text
                toks = []
                continue
            toks.append(tok)
    except (tokenize.TokenError, SyntaxError):  # a file that does not parse (KF001): its rows' words
        pass
    return rows


def _sources(filename: str, text: str) -> dict[int | None, str]:
    """The texts a file's findings count rows in: the file, or each notebook cell."""
    if not filename.endswith(".ipynb"):
        return {None: text[1:] if text.startswith("\ufeff") else text}
    try:
        nb = Notebook.from_json(text.lstrip("\ufeff"), filename)
    except NotebookError:
        return {}
    return {c.number: c.masked for c in nb.cells}


def keys(filename: str, relpath: str, text: str, diags: Sequence[Diagnostic]) -> list[Key]:
    """The key of each of ``diags`` (in their order), found in ``text``, the file's content."""
    by_source = {k: statements_by_row(src) for k, src in _sources(filename, text).items()}
    seen: Counter[tuple[str, str]] = Counter()
    out: dict[int, Key] = {}
    for i in sorted(range(len(diags)), key=lambda i: (diags[i].cell or 0, diags[i].row, diags[i].column, diags[i].code)):
        d = diags[i]
        stmt = by_source.get(d.cell, {}).get(d.row, "")
        seen[(d.code, stmt)] += 1
        out[i] = Key(d.code, relpath, stmt, seen[(d.code, stmt)])
    return [out[i] for i in range(len(diags))]


def _relpath(filename: str, root: Path) -> str:
    return Path(os.path.relpath(Path(filename).resolve(), root.resolve())).as_posix()


def _read(filename: str) -> str | None:
    try:
        return read_regular(filename).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def file_keys(result: FileResult, root: Path, text: str | None = None) -> list[Key] | None:
    """``result``'s keys against a baseline in ``root``; None when the file cannot be read."""
    text = text if text is not None else _read(result.filename)
    if text is None:
        return None
    return keys(result.filename, _relpath(result.filename, root), text, result.diagnostics)


class Baseline:
    """The accepted findings of one baseline file."""

    def __init__(self, path: Path, entries: Iterable[Key]) -> None:
        self.path = path
        self.root = path.resolve().parent
        self.entries = set(entries)

    @classmethod
    def load(cls, path: Path, where: str = "--baseline") -> Baseline:
        """Every way the file can be missing or wrong is one ConfigError line (exit 2):
        an absent baseline is never read as an empty one, which would fail every finding."""
        try:
            data = json.loads(read_regular(path, MAX_BYTES).decode("utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{where} {path}: no such file (create it with --write-baseline {path})") from None
        except NotRegularFile as exc:
            raise ConfigError(f"{where} {path}: {exc.kind}, not a regular file") from None
        except TooLarge as exc:
            raise ConfigError(f"{where} {path}: {exc.size:,} bytes, too large for a baseline "
                              f"(at most {MAX_BYTES:,})") from None
        except OSError as exc:
            raise ConfigError(f"{where} {path}: cannot read: {exc.strerror or exc}") from None
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise ConfigError(f"{where} {path}: not a kerasfit baseline (invalid JSON)") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("findings"), list):
            raise ConfigError(f"{where} {path}: not a kerasfit baseline (written by --write-baseline)")
        if data.get("version") != VERSION:
            raise ConfigError(f"{where} {path}: baseline version {data.get('version')!r}, this kerasfit reads {VERSION}")
        entries = []
        for e in data["findings"]:
            try:
                k = Key(e["code"], e["path"], e["statement"], e["occurrence"])
            except (KeyError, TypeError):
                raise ConfigError(f"{where} {path}: a finding without code, path, statement and occurrence") from None
            if not (isinstance(k.code, str) and isinstance(k.path, str) and isinstance(k.statement, str)
                    and isinstance(k.occurrence, int) and not isinstance(k.occurrence, bool)):
                raise ConfigError(f"{where} {path}: a finding whose fields have the wrong types")
            entries.append(k)
        return cls(path, entries)

    def accept(self, result: FileResult, text: str | None = None) -> int:
        """Drop ``result``'s accepted findings; how many were dropped."""
        if not result.diagnostics:
            return 0
        ks = file_keys(result, self.root, text)
        if ks is None:
            return 0
        kept = [d for d, k in zip(result.diagnostics, ks) if k not in self.entries]
        accepted = len(result.diagnostics) - len(kept)
        result.diagnostics = kept
        return accepted


def render(path: Path, files: Sequence[FileResult]) -> tuple[str, int]:
    """The baseline file accepting every finding of ``files`` (sorted, so it diffs well),
    and how many findings it holds."""
    root = path.resolve().parent
    rows = []
    for f in files:
        ks = file_keys(f, root)
        if ks is None:
            continue
        for d, k in zip(f.diagnostics, ks):
            rows.append((k, d.message))
    rows.sort(key=lambda r: r[0])
    data = {
        "format": FORMAT,
        "version": VERSION,
        "findings": [
            {"code": k.code, "path": k.path, "statement": k.statement, "occurrence": k.occurrence, "message": msg}
            for k, msg in rows
        ],
    }
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n", len(rows)
