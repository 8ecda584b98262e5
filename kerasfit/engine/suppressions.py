"""Suppression comments, read as Python reads them: ``# noqa``, ``# noqa: KF101`` or
``# kerasfit: ignore[KF101]`` on a line, ``# kerasfit: ignore-file[...]`` anywhere.

Only a comment counts, as the tokenizer finds comments: ``"# noqa"`` inside a string
literal suppresses nothing. Rows are the physical lines Python counts (``\\n``, ``\\r\\n``
or ``\\r`` ends one; a form feed, or a U+2028 inside a string, does not). A text that does
not tokenize (an unterminated string, a bad dedent) is read in pieces: the tokenizer
starts again at the next line that begins a statement at column 0, so the statements
around a syntax error keep their comments. The standard library's tokenizer, no parser:
the language server's editing helpers share this module without importing libcst, and a
text that names neither ``noqa`` nor ``kerasfit:`` is not tokenized at all.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Iterable, Iterator

NOQA_RE = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.I)
_IGNORE_RE = re.compile(r"#\s*kerasfit:\s*ignore(?P<file>-file)?(?:\[(?P<codes>[^\]]*)\])?", re.I)
_ANY_SUPPRESSION_RE = re.compile(r"noqa|kerasfit:", re.I)
ALL = "*"

# Python's physical lines, each with its terminator
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
# a line at column 0 that continues the statement above, never starts one
_CONTINUES = re.compile(r"[)\]}]|(?:else|elif|except|finally)\b")


def _starts_statement(line: str) -> bool:
    return line[:1] not in ("", " ", "\t", "\f", "#", "\r", "\n") and not _CONTINUES.match(line)


def tokens(source: str, last_row: int | None = None) -> Iterator[tokenize.TokenInfo]:
    """The tokens of ``source``, rows as in the whole text (up to ``last_row`` when given).

    Where the tokenizer gives up, it starts again at the next line after the one it
    stopped on that begins a statement at column 0; what it read before stopping stands."""
    lines: list[str] | None = None
    offset = 0  # rows of the text before the piece being read
    text = source
    while True:
        try:
            for tok in tokenize.generate_tokens(io.StringIO(text, newline=None).readline):
                if last_row is not None and tok.start[0] + offset > last_row:
                    return
                if offset:
                    tok = tok._replace(start=(tok.start[0] + offset, tok.start[1]),
                                       end=(tok.end[0] + offset, tok.end[1]))
                yield tok
            return
        except tokenize.TokenError as exc:
            stopped = exc.args[1][0] if len(exc.args) > 1 and exc.args[1] else 0
        except SyntaxError as exc:  # IndentationError: a dedent to no enclosing level
            stopped = exc.lineno or 0
        if lines is None:
            lines = _LINE.findall(source)
        stopped += offset  # 1-based row of the text
        nxt = next((i for i in range(max(stopped, offset + 1), len(lines)) if _starts_statement(lines[i])), None)
        if nxt is None:
            return
        offset = nxt
        text = "".join(lines[nxt:])


@dataclass
class Comments:
    """The comments of a text (row -> (column, text)) and the rows whose end is code,
    where a comment may be added (NEWLINE, NL or COMMENT tokens end them)."""

    by_row: dict[int, tuple[int, str]] = field(default_factory=dict)
    open_rows: set[int] = field(default_factory=set)

    def column(self, row: int) -> int | None:
        """Where the comment on ``row`` starts (None: no comment there)."""
        hit = self.by_row.get(row)
        return hit[0] if hit is not None else None

    @classmethod
    def of(cls, source: str) -> Comments:
        out = cls()
        for tok in tokens(source):
            if tok.type == tokenize.COMMENT:
                out.by_row[tok.start[0]] = (tok.start[1], tok.string)
            if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT):
                out.open_rows.add(tok.start[0])
        return out


@dataclass
class Suppressions:
    by_line: dict[int, set[str]] = field(default_factory=dict)
    file: set[str] = field(default_factory=set)

    @classmethod
    def scan(cls, source: str) -> Suppressions:
        sup = cls()
        if not _ANY_SUPPRESSION_RE.search(source):  # as case-insensitive as the patterns
            return sup
        last = _last_candidate_row(source)
        if last is None:
            return sup
        for tok in tokens(source, last):
            if tok.type != tokenize.COMMENT:
                continue
            row, text = tok.start[0], tok.string
            for m in NOQA_RE.finditer(text):
                codes = m.group("codes")
                sup.by_line.setdefault(row, set()).update(_split_codes(codes) if codes else {ALL})
            for m in _IGNORE_RE.finditer(text):
                codes = _split_codes(m.group("codes")) if m.group("codes") else {ALL}
                (sup.file if m.group("file") else sup.by_line.setdefault(row, set())).update(codes)
        return sup

    def suppressed(self, code: str, rows: Iterable[int]) -> bool:
        if ALL in self.file or code in self.file:
            return True
        for r in rows:
            s = self.by_line.get(r)
            if s and (ALL in s or code in s):
                return True
        return False


def _last_candidate_row(source: str) -> int | None:
    """The last physical row where a suppression could be (the tokenizer stops there)."""
    last = None
    for pattern in (NOQA_RE, _IGNORE_RE):
        for m in pattern.finditer(source):
            last = max(last or 0, m.start())
    if last is None:
        return None
    head = source[:last]
    return head.count("\n") + head.count("\r") - head.count("\r\n") + 1


def _split_codes(text: str) -> set[str]:
    return {c.strip().upper() for c in re.split(r"[\s,]+", text) if c.strip()}


def with_noqa(line: str, codes: Iterable[str], comment_at: int | None = None) -> str:
    """``line`` (without its terminator) suppressing ``codes`` too, as the scanner above
    reads it. ``comment_at``: the column where the line's comment starts (None: it has
    none; a ``# noqa`` elsewhere on it is in a string): an existing ``# noqa: X1`` list
    there is extended, a bare ``# noqa`` already covers everything, otherwise
    ``  # noqa: CODES`` goes at the end (after any comment)."""
    wanted = list(dict.fromkeys(codes))
    if comment_at is not None:
        for m in NOQA_RE.finditer(line, comment_at):
            have = m.group("codes")
            if not have:
                return line
            missing = [c for c in wanted if c.upper() not in _split_codes(have)]
            if not missing:
                return line
            at = m.end("codes")
            return line[:at] + ", " + ", ".join(missing) + line[at:]
    body = line.rstrip()
    return body + ("  " if body else "") + "# noqa: " + ", ".join(wanted)
