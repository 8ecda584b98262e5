"""The pages kerasfit ships (rule pages and the facts they cite) and the links to them.

A finding's link must open from the user's project, not from this repository: it is
the installed page as a ``file://`` URI (the wheel carries ``docs/`` as the
``kerasfit.docs`` package data), or, for a team that serves those pages itself, the
same page under its ``docs-url``. Engine codes (KF0xx) and rule packs' codes have no
page and get no link rather than one that points nowhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .types import rule_url

_FACTS = "facts.md"
_FACT_ANCHOR = re.compile(r'^<a id="(\d+)"></a>\s*$', re.M)
_ANY_ANCHOR = re.compile(r'^<a id="[^"]*"></a>\s*$', re.M)
# what `kerasfit explain` takes for the facts: the messages cite them as docs/facts.md#N
FACTS_TOPIC = re.compile(r"^(?:(?:docs/)?facts(?:\.md)?)(?:#(?P<n>\S*))?$", re.I)


@cache
def docs_dir() -> Path | None:
    """The shipped docs: ``kerasfit/docs`` when installed from the wheel, else the
    checkout's ``docs/`` (an editable install maps the package there)."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "docs", package.parent / "docs"):
        if (candidate / _FACTS).is_file():
            return candidate
    return None


def facts_file() -> Path | None:
    d = docs_dir()
    return d / _FACTS if d is not None else None


def _relative(code: str) -> str | None:
    """A rule's page relative to the docs directory (``rules/KF101.md``), or None."""
    page = rule_url(code)
    return page.split("/", 1)[1] if page is not None else None


@dataclass(frozen=True)
class Links:
    """Where pages open: ``base`` is a ``docs-url`` (None: the installed files)."""

    base: str | None = None

    def page(self, relative: str, anchor: str = "") -> str | None:
        frag = f"#{anchor}" if anchor else ""
        if self.base:
            return self.base.rstrip("/") + "/" + relative + frag
        uri = _installed(relative)
        return uri + frag if uri is not None else None

    def rule(self, code: str) -> str | None:
        rel = _relative(code)
        return self.page(rel) if rel is not None else None

    def facts(self, number: int | None = None) -> str | None:
        return self.page(_FACTS, str(number) if number is not None else "")


@cache
def _installed(relative: str) -> str | None:
    """The installed page's file:// URI (looked up once per page: a report may link it thousands of times)."""
    d = docs_dir()
    if d is None or not (d / relative).is_file():
        return None
    return (d / relative).as_uri()


def fact_section(text: str, number: int) -> str | None:
    """Fact ``number`` of facts.md's text: from its anchor to the next anchor."""
    for m in _FACT_ANCHOR.finditer(text):
        if int(m.group(1)) == number:
            nxt = _ANY_ANCHOR.search(text, m.end())
            return text[m.end() : nxt.start() if nxt else len(text)].strip("\n") + "\n"
    return None


def fact_numbers(text: str) -> list[int]:
    return [int(m.group(1)) for m in _FACT_ANCHOR.finditer(text)]
