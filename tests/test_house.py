"""The house's size bars (issue 31; STYLE): no module of kerasfit/ over 900 lines and no
function over cyclomatic complexity 25, as radon measures it. ``rules/`` (kerasfit.rules)
is outside both bars: a rule's examples live beside its code, and a rule visitor is one
switch over the patterns it knows.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from radon.complexity import cc_visit  # the dev extra's
from radon.visitors import Class, Function

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 900
MAX_COMPLEXITY = 25


def _modules() -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "kerasfit").rglob("*.py"))


def _lines(module: str) -> int:
    return len((ROOT / module).read_text(encoding="utf-8").splitlines())


def _functions(blocks: list[Function | Class]) -> Iterator[Function]:
    """Every function radon found: ``cc_visit`` lists the functions and each class's
    methods; here also the functions nested in them and the methods of nested classes."""
    for block in blocks:
        if isinstance(block, Function):
            yield block
            yield from _functions(block.closures)
        elif isinstance(block, Class):
            for inner in block.inner_classes:
                yield from _functions([*inner.methods, *inner.inner_classes])


def _over_complexity(module: str) -> list[str]:
    """``name (line): complexity`` of each function of ``module`` over the bar."""
    blocks = cc_visit((ROOT / module).read_text(encoding="utf-8"))
    return [f"{f.fullname} (line {f.lineno}): {f.complexity}" for f in _functions(blocks)
            if f.complexity > MAX_COMPLEXITY]


def test_no_module_is_over_900_lines() -> None:
    over = {m: _lines(m) for m in _modules() if _lines(m) > MAX_LINES}
    assert not over, f"split by job (STYLE): {over}"


def test_no_function_is_over_complexity_25() -> None:
    over = {m: found for m in _modules() if (found := _over_complexity(m))}
    assert not over, f"split by job (STYLE): {over}"


def test_the_complexity_measure_sees_a_planted_function() -> None:
    # a function with 30 branches, a method with 2, a closure and a nested class's method with
    # 27 each: radon measures every one
    branches = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(30))
    closure = "".join(f"        if y == {i}:\n            return {i}\n" for i in range(27))
    code = (f"def big(x):\n{branches}    return -1\n\n"
            "class C:\n    def m(self, x):\n        if x:\n            return 1\n        return 2 if x else 3\n\n"
            f"def outer():\n    def inner(y):\n{closure}        return -1\n    return inner\n\n"
            f"class D:\n    class E:\n        def n(self, y):\n{closure.replace('        ', '            ')}"
            "            return -1\n")
    found = {f.fullname: f.complexity for f in _functions(cc_visit(code))}
    assert found == {"big": 31, "C.m": 3, "outer": 1, "inner": 28, "E.n": 28}
