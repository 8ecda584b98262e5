"""No function of the checked packages over cyclomatic complexity 25 (radon's measure,
STYLE's limit): a function that does several jobs is split by job."""

from __future__ import annotations

from pathlib import Path
from textwrap import indent

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 25
# the packages held to the limit so far (issue 31 renovates the others)
CHECKED = ("semantic",)


def over_limit(source: str, limit: int = LIMIT) -> list[tuple[str, int]]:
    """(qualified name, complexity) of each function or method of ``source`` over ``limit``."""
    complexity = pytest.importorskip("radon.complexity", reason="the dev extra installs radon")
    out = []
    for block in complexity.cc_visit(source):  # functions and methods (and classes: their sum)
        if not hasattr(block, "methods") and block.complexity > limit:
            out.append((block.fullname, block.complexity))
    return out


@pytest.mark.parametrize("package", CHECKED)
def test_no_function_over_the_limit(package: str) -> None:
    found = {
        f"{path.relative_to(ROOT)}:{name}": cc
        for path in sorted((ROOT / "kerasfit" / package).rglob("*.py"))
        for name, cc in over_limit(path.read_text(encoding="utf-8"))
    }
    assert found == {}


def test_a_function_over_the_limit_is_found() -> None:
    body = "".join(f"if x == {i}:\n    return {i}\n" for i in range(LIMIT)) + "return -1\n"
    source = f"def plain(x):\n{indent(body, '    ')}\n\nclass C:\n    def m(self, x):\n{indent(body, ' ' * 8)}"
    assert over_limit(source) == [("plain", LIMIT + 1), ("C.m", LIMIT + 1)]
    assert over_limit(source, LIMIT + 1) == []
