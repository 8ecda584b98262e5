"""The text libcst is given: the source with the layout CPython ignores rewritten.

libcst's tokenizer refuses, drops or moves some layout that CPython accepts: form feeds
in indentation (see ``without_form_feeds``) and a line holding only a backslash
in front of a statement (``\\`` then ``    return x`` inside a function: "expected
INDENT"). Both rewrites keep every line where it is and change nothing but that
whitespace and those backslashes, so the meaning is CPython's; the engine maps offsets
in libcst's output back onto the real source.
"""

from __future__ import annotations

import io
import re
import tokenize

_LONE_BACKSLASH = re.compile(r"^[ \t\f]*\\\r?$", re.M)
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_LEADING_WS = re.compile(r"[ \t\f]*")
# Tokens after which the next line starts a statement (when no bracket is open).
_LINE_ENDS = frozenset({tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING, tokenize.COMMENT})


def for_libcst(source: str) -> str:
    return without_lone_backslashes(without_form_feeds(source))


def without_lone_backslashes(source: str) -> str:
    """Lone backslash lines in front of a statement, joined the way CPython joins them.

    At the start of a statement CPython takes the indentation from the first backslash
    line when the backslash is indented, else from the line the continuation reaches
    (tokenizer: "indentation cannot be split over multiple physical lines"). Each such
    line becomes an empty line, and the statement's line gets that indentation; a
    backslash line inside brackets, after a continued line or inside a string is kept.
    """
    if "\\" not in source or not _LONE_BACKSLASH.search(source) or re.search(r"\r(?!\n)", source):
        return source
    lines = _LINE.findall(source)
    lone = {i for i, ln in enumerate(lines) if _LONE_BACKSLASH.match(ln.rstrip("\n"))}
    starts = _statement_rows(source, len(lines))
    if starts is None:
        return source
    out = list(lines)
    i = 0
    while i < len(lines):
        if i not in lone or i not in starts:
            i += 1
            continue
        ws = _indent(lines[i])
        j = i
        while j in lone:  # a run of backslash lines reaching the statement's line
            out[j] = "\r\n" if lines[j].endswith("\r\n") else "\n"
            j += 1
        if j < len(lines) and ws:
            body = lines[j]
            lead = _leading(body)
            rest = body[len(lead) :]
            if rest.strip() and not rest.startswith("#"):  # the first backslash's column is the statement's
                out[j] = ws + rest
        i = j + 1
    return "".join(out)


def _indent(line: str) -> str:
    """The indentation CPython counts: the whitespace after the last form feed."""
    ws = _leading(line)
    return ws[ws.rindex("\f") + 1 :] if "\f" in ws else ws


def _leading(line: str) -> str:
    m = _LEADING_WS.match(line)  # matches every string (possibly empty)
    return m.group() if m is not None else ""


def _statement_rows(source: str, n: int) -> set[int] | None:
    """0-based rows where a new statement may start: not inside a string or brackets,
    and not continuing the line above. None when the tokenizer gives up."""
    inside: set[int] = set()
    free = set(range(n))
    depth = 0
    last_end_row, last_type = 0, tokenize.ENCODING
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            row = tok.start[0] - 1
            # rows between the previous token and this one start a statement only when
            # the previous token ended a line outside brackets
            if not (last_type in _LINE_ENDS and depth == 0):
                inside.update(range(last_end_row + 1, row + 1))
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                inside.update(range(tok.start[0], tok.end[0]))
            if tok.type == tokenize.OP and tok.string in "([{":
                depth += 1
            elif tok.type == tokenize.OP and tok.string in ")]}":
                depth = max(depth - 1, 0)
            last_end_row, last_type = tok.end[0] - 1, tok.type
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    return free - inside


def without_form_feeds(source: str) -> str:
    """The source with form feeds taken out of line indentation, for libcst to parse.

    CPython resets the indentation column at a form feed, so only the whitespace after
    the last one counts; libcst's tokenizer drops such form feeds from its output,
    moves them to another line, or refuses valid code ("no matching outer block").
    What is removed here is only that ignored whitespace, never inside a string, so the
    meaning is the same; the engine maps offsets back onto the real source.
    """
    if "\f" not in source or re.search(r"\r(?!\n)", source):
        return source
    inside: set[int] = set()  # 1-based rows that start inside a multi-line string
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                inside.update(range(tok.start[0] + 1, tok.end[0] + 1))
    except (tokenize.TokenError, SyntaxError):
        return source
    out = []
    for row, m in enumerate(_LINE.finditer(source), 1):
        line = m.group()
        lead = _LEADING_WS.match(line)
        ws = lead.group() if lead is not None else ""
        if "\f" in ws and row not in inside:
            line = ws[ws.rindex("\f") + 1 :] + line[len(ws) :]
        out.append(line)
    return "".join(out)
