"""Messages as one whole line: what the build child and the parent say about a failure.
Pure Python (the build child imports it before TensorFlow)."""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]")
# Where a long message may be cut and still end whole: after a sentence or a clause.
_BREAK = re.compile(r"(?<=[.;:!?])\s|\s(?=\()")
HARD_LIMIT = 2000


def one_line(text: object, limit: int = 300) -> str:
    """An exception's text as one line: no terminal escapes, whitespace collapsed, and,
    when longer than ``limit``, ended at the last sentence or clause before it (never
    inside one); a text with none is kept whole up to ``HARD_LIMIT`` characters."""
    flat = " ".join(_ANSI.sub("", str(text)).split())
    if len(flat) <= limit:
        return flat
    cuts = [m.start() for m in _BREAK.finditer(flat, 0, limit)]
    if cuts and cuts[-1] >= limit // 3:
        return flat[:cuts[-1]].rstrip(" :;,")
    if len(flat) <= HARD_LIMIT:
        return flat
    words = flat[:HARD_LIMIT].rsplit(" ", 1)[0]
    return f"{words} [{len(flat) - len(words)} more characters]"


def reason(exc: BaseException, limit: int = 200) -> str:
    """``Type: message`` of an exception, as one line; of a TensorFlow error that quotes the
    user code it passed through (``in user code: File …``), only its own last line."""
    text = str(exc).split("Arguments received by", 1)[0]  # Keras's list of the call's arguments
    if "in user code:" in text:
        text = next((line for line in reversed(text.strip().splitlines()) if line.strip()), text)
    return f"{type(exc).__name__}: {one_line(text, limit)}"
