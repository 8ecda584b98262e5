"""Suppression comments: ``# noqa``, ``# noqa: KF101``, ``# kerasfit: ignore[KF101]``
on a line, ``# kerasfit: ignore-file[...]`` anywhere. Plain text scanning, no parser,
so the language server's editing helpers share it without importing libcst."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

NOQA_RE = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.I)
_IGNORE_RE = re.compile(r"#\s*kerasfit:\s*ignore(?P<file>-file)?(?:\[(?P<codes>[^\]]*)\])?", re.I)
_ANY_SUPPRESSION_RE = re.compile(r"noqa|kerasfit:", re.I)
ALL = "*"


@dataclass
class Suppressions:
    by_line: dict[int, set[str]] = field(default_factory=dict)
    file: set[str] = field(default_factory=set)

    @classmethod
    def scan(cls, source: str) -> Suppressions:
        sup = cls()
        if not _ANY_SUPPRESSION_RE.search(source):  # as case-insensitive as the patterns
            return sup
        for i, line in enumerate(source.splitlines(), start=1):
            if "#" not in line:
                continue
            for m in NOQA_RE.finditer(line):
                codes = m.group("codes")
                sup.by_line.setdefault(i, set()).update(_split_codes(codes) if codes else {ALL})
            for m in _IGNORE_RE.finditer(line):
                codes = _split_codes(m.group("codes")) if m.group("codes") else {ALL}
                (sup.file if m.group("file") else sup.by_line.setdefault(i, set())).update(codes)
        return sup

    def suppressed(self, code: str, rows: Iterable[int]) -> bool:
        if ALL in self.file or code in self.file:
            return True
        for r in rows:
            s = self.by_line.get(r)
            if s and (ALL in s or code in s):
                return True
        return False


def _split_codes(text: str) -> set[str]:
    return {c.strip().upper() for c in re.split(r"[\s,]+", text) if c.strip()}


def with_noqa(line: str, codes: Iterable[str]) -> str:
    """``line`` (without its terminator) suppressing ``codes`` too, as the scanner above
    reads it: an existing ``# noqa: X1`` list is extended, a bare ``# noqa`` already
    covers everything, otherwise ``  # noqa: CODES`` goes at the end (after any comment)."""
    wanted = list(dict.fromkeys(codes))
    for m in NOQA_RE.finditer(line):
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
