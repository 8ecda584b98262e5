"""Property: fix edits are placed on the exact source text (issue 8, item 3).

Every fixture and every rule example with a fix is fixed (`--fix --unsafe-fixes`)
clean, and again after a layout-only change that Python ignores: form feeds at line
starts, CRLF line endings, tab indentation, a BOM. Undoing that change on the fixed
result must give the clean file's fixed result, byte for byte, and the line endings
must stay the file's own. A longer run: KERASFIT_FUZZ_EXAMPLES=2000.
"""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kerasfit.project.check import CheckOptions, check_source
from kerasfit.engine.registry import all_rules

pytestmark = pytest.mark.slow  # a long property run

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = int(os.environ.get("KERASFIT_FUZZ_EXAMPLES", "60"))


def _cases() -> list[tuple[str, str]]:
    out = []
    for path in sorted((ROOT / "fixtures").rglob("*.py")):
        if "hlo" not in path.parts:
            out.append((path.relative_to(ROOT).as_posix(), path.read_text()))
    for code, rule in sorted(all_rules().items()):
        for i, ex in enumerate(rule.INVALID):
            if ex.expected_fix is not None:
                out.append((f"{code}-invalid-{i}", ex.code))
    # layout already present would make the undo ambiguous
    return [(n, s) for n, s in out if not re.search(r"[\f\r\t\ufeff]", s)]


CASES = _cases()


def _fix(name: str, text: str) -> str:
    res = check_source(text, f"{name.replace('/', '_')}.py", CheckOptions(isolated=True), fix=True, unsafe=True)
    assert res.error is None, res.error
    return res.fixed_source if res.fixed_source is not None else text


@lru_cache(maxsize=None)
def _clean(index: int) -> str:
    name, src = CASES[index]
    return _fix(name, src)


def _free_line_starts(src: str) -> list[int]:
    """Lines (0-based) that do not start inside a multi-line string."""
    inside: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
            inside.update(range(tok.start[0], tok.end[0]))  # rows start+1..end, 0-based
    n = src.count("\n") + (not src.endswith("\n"))
    return [i for i in range(n) if i not in inside]


def _indent_unit(src: str) -> int:
    widths = {len(line) - len(line.lstrip(" ")) for line in src.splitlines() if line.strip()}
    widths.discard(0)
    return min(widths) if widths else 4


def _tabify(src: str, lines: set[int], unit: int) -> str:
    out = src.splitlines(keepends=True)
    for i in lines:
        if i < len(out):
            line = out[i]
            width = len(line) - len(line.lstrip(" "))
            out[i] = "\t" * (width // unit) + line[width - width % unit :]
    return "".join(out)


def _untab(text: str, unit: int) -> str:
    return re.sub(r"(?m)^\t+", lambda m: " " * (unit * len(m.group(0))), text)


def _add_form_feeds(src: str, lines: set[int]) -> str:
    out = src.splitlines(keepends=True)
    for i in lines:
        if i < len(out):
            out[i] = "\f" + out[i]
    return "".join(out)


@st.composite
def layouts(draw):
    index = draw(st.integers(0, len(CASES) - 1))
    free = _free_line_starts(CASES[index][1])
    feeds = draw(st.sets(st.sampled_from(free), max_size=6)) if free else set()
    return index, feeds, draw(st.booleans()), draw(st.booleans()), draw(st.booleans())


def test_the_property_covers_every_fixture_and_fix_example():
    names = {n for n, _ in CASES}
    assert sum(1 for n in names if n.startswith("fixtures/")) >= 20
    assert {"KF101", "KF102", "KF103", "KF204"} <= {n.split("-")[0] for n in names}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts())
def test_layout_never_moves_a_fix(case):
    index, feeds, crlf, tabs, bom = case
    name, src = CASES[index]
    unit = _indent_unit(src)
    text = src
    if tabs:
        text = _tabify(text, set(_free_line_starts(text)), unit)
    text = _add_form_feeds(text, feeds)
    if crlf:
        text = text.replace("\n", "\r\n")
    if bom:
        text = "\ufeff" + text
    try:
        same = ast.dump(ast.parse(text.lstrip("\ufeff"))) == ast.dump(ast.parse(src))
    except SyntaxError:
        same = False
    if not same:
        return  # not a layout-only change for this file (a tab inside brackets, say)
    fixed = _fix(name, text)
    if crlf:
        body = fixed.lstrip("\ufeff")
        assert body.count("\n") == body.count("\r\n"), f"{name}: a fix wrote a bare LF into a CRLF file"
    undone = fixed
    if bom:
        assert undone.startswith("\ufeff")
        undone = undone[1:]
    undone = undone.replace("\r\n", "\n").replace("\f", "")
    if tabs:
        undone = _untab(undone, unit)
    assert undone == _clean(index), f"{name}: fixing with form feeds={sorted(feeds)} crlf={crlf} tabs={tabs} bom={bom} differs"


@pytest.mark.parametrize("index", range(len(CASES)), ids=[n for n, _ in CASES])
def test_a_form_feed_before_every_line(index):
    """The extreme case, on every file: a form feed at the start of every free line."""
    name, src = CASES[index]
    text = _add_form_feeds(src, set(_free_line_starts(src)))
    assert ast.dump(ast.parse(text)) == ast.dump(ast.parse(src))
    assert _fix(name, text).replace("\f", "") == _clean(index)
