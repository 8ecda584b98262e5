"""over_budget skips statements too short to exceed the depth budget: it must answer
exactly what the full walk answers, on shallow and deep sources alike."""

from __future__ import annotations

import ast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kerasfit.engine.parseguard import _over_budget_exact, over_budget


def _key(found: list[tuple[ast.stmt, int]]) -> list[tuple[int, int, int]]:
    return [(s.lineno, s.col_offset, d) for s, d in found]


def _expr(kind: str, n: int) -> str:
    if kind == "binop":
        return "+".join(["1"] * n)
    if kind == "brackets":
        return "[" * n + "]" * n
    if kind == "and":
        return " and ".join(["a"] * n)
    if kind == "or":
        return "(" + "or ".join(["b"] * n) + ")"
    if kind == "strings":
        return "(" + " ".join(['"x"'] * n) + ")"
    if kind == "fstrings":
        return "(" + " ".join(['f"{a}"', '"y"'] * n) + ")"
    if kind == "calls":
        return "f(" * n + ")" * n
    if kind == "unary":
        return "-" * n + "x"
    return "lambda: " * n + "0"


KINDS = ["binop", "brackets", "and", "or", "strings", "fstrings", "calls", "unary", "lambda"]


@st.composite
def sources(draw: st.DrawFn) -> str:
    out: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        indent = ""
        for _ in range(draw(st.integers(0, 4))):  # nested defs / classes / blocks
            head = draw(st.sampled_from(["def f(a, b=1):", "class C(B):", "if a:", "for x in y:", "with a as b:"]))
            out.append(indent + head)
            indent += "    "
        for _ in range(draw(st.integers(1, 3))):
            kind = draw(st.sampled_from(KINDS))
            n = draw(st.one_of(st.integers(1, 12), st.integers(30, 140)))
            stmt = draw(st.sampled_from(["x = {}", "{}", "return {}", "print({}, sep='')"]))
            out.append(indent + stmt.format(_expr(kind, n)))
    return "\n".join(out) + "\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sources(), st.sampled_from([None, 10, 25, 60, 120]))
def test_pruned_walk_answers_what_the_full_walk_answers(src: str, budget: int | None) -> None:
    try:
        tree = ast.parse(src)
    except (SyntaxError, RecursionError, MemoryError):
        return  # not Python CPython accepts: no AST to measure
    assert _key(over_budget(tree, src, budget)) == _key(_over_budget_exact(tree, src, budget))


def test_short_statements_are_pruned_and_deep_ones_still_found() -> None:
    """A deep chain among short statements is found at the same depth; a form feed
    (a line break to str.splitlines, not to CPython) turns pruning off, same answer."""
    deep = "+".join(["1"] * 300)
    for sep in ("\n", "\n\x0c"):
        src = f"import os{sep}def f():{sep}    y = 1{sep}    x = {deep}{sep}z = 2\n"
        tree = ast.parse(src)
        got = _key(over_budget(tree, src))
        assert got == _key(_over_budget_exact(tree, src)) and len(got) == 1 and got[0][0] == 4
