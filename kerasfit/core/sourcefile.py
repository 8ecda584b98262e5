"""Reading a file a checked tree names, and what parsing a text costs.

A path in a repository can name a FIFO (a read blocks forever), a device (``/dev/zero``
never ends), a symbolic link to either, or a regular file of any size. :func:`read_regular`
opens without blocking, reads only a regular file, and never more than it is allowed.

:func:`parse_cost` is what a text counts toward ``max-file-size``. A check's peak memory
is libcst's tree, which grows with tokens and lines, not bytes: real code (about 34 bytes
a line, one punctuation mark in 10 bytes) peaks near 0.35 KB a byte, a file of
one-character lines near 4.7 KB a byte, a call of one-letter arguments near 3.2 KB a byte
(``benchmarks/large_file.py --shapes``). So a text counts its bytes, but at
least ``PER_LINE`` a line and ``PER_MARK`` a punctuation mark: nine real files in ten count
exactly their bytes, and the limit bounds the peak whatever the text's shape (README).
"""

from __future__ import annotations

import os
import stat
from typing import NamedTuple

# 2 MiB of real code (~60,000 lines) peaks near 0.7 GB; a text of any shape that counts
# 2 MiB, under 1.7 GB (README, "Big inputs")
DEFAULT_MAX_FILE_SIZE = 2 * 1024 * 1024
PER_LINE = 32
PER_MARK = 8

_MARKS = bytes(c for c in range(0x21, 0x7F) if not (chr(c).isalnum() or c == 0x5F))
_NOT_MARKS = bytes(c for c in range(256) if c not in _MARKS)
_CHUNK = 1 << 20


class NotRegularFile(OSError):
    """The path names a FIFO, a device, a socket or a directory (``kind`` says which)."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


class TooLarge(OSError):
    """The file holds more bytes than the reader was allowed (``size``: its size)."""

    def __init__(self, size: int) -> None:
        super().__init__(f"{size} bytes")
        self.size = size


def kind_of(mode: int) -> str:
    """What a file that is not a regular one is, for a message."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def open_regular(path: str | os.PathLike[str]) -> tuple[int, os.stat_result]:
    """A descriptor of the regular file at ``path`` (a link is followed) and its stat;
    NotRegularFile for anything else. Opening a FIFO this way does not block."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(kind_of(st.st_mode))
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_regular(path: str | os.PathLike[str], limit: int | None = None) -> bytes:
    """The bytes of the regular file at ``path``; TooLarge when it holds more than
    ``limit`` (None: its size, whatever that is), NotRegularFile, or the OSError."""
    fd, st = open_regular(path)
    try:
        if limit is not None and st.st_size > limit:
            raise TooLarge(st.st_size)
        want = (limit if limit is not None else st.st_size) + 1  # one more: a file growing meanwhile
        chunks = []
        got = 0
        while got < want:
            b = os.read(fd, min(_CHUNK, want - got))
            if not b:
                break
            chunks.append(b)
            got += len(b)
        if limit is not None and got > limit:
            raise TooLarge(max(got, os.fstat(fd).st_size))
        return b"".join(chunks)
    finally:
        os.close(fd)


def regular_file_contains(path: str | os.PathLike[str], needles: tuple[bytes, ...]) -> bool:
    """Whether the regular file at ``path`` holds any of ``needles``, read a chunk at a
    time (a file too large to read whole is still told apart); False when unreadable."""
    try:
        fd, _ = open_regular(path)
    except OSError:
        return False
    keep = max(len(n) for n in needles) - 1
    tail = b""
    try:
        while b := os.read(fd, _CHUNK):
            window = tail + b
            if any(n in window for n in needles):
                return True
            tail = window[-keep:] if keep else b""
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


class Cost(NamedTuple):
    """What a text counts toward ``max-file-size`` (see the module docstring)."""

    size: int  # bytes
    lines: int
    marks: int  # punctuation marks

    @property
    def total(self) -> int:
        return max(self.size, PER_LINE * self.lines, PER_MARK * self.marks)

    def describe(self) -> str:
        """``1,234 bytes of source``, and what it counts as when that is more."""
        said = f"{self.size:,} bytes of source"
        if self.total == self.size:
            return said
        return (f"{said} in {self.lines:,} lines with {self.marks:,} punctuation marks, counted as "
                f"{self.total:,} ({PER_LINE} a line, {PER_MARK} a mark)")


def parse_cost(data: bytes) -> Cost:
    lines = data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")
    return Cost(len(data), lines, len(data.translate(None, _NOT_MARKS)))


def over_limit(data: bytes, limit: int) -> Cost | None:
    """``data``'s cost when over ``limit``, else None (cheap for a short text: it cannot
    hold more lines or marks than bytes)."""
    if len(data) * max(PER_LINE, PER_MARK) <= limit:
        return None
    cost = parse_cost(data)
    return cost if cost.total > limit else None
