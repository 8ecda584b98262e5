"""The engine's rule walk replays the file index's node list: every visit and leave comes
in the order of a walk that enumerates each node's children (``iter_children``), and the
model answers each visited node's ancestors as that walk's path; for whole-file indexes
and for the language server's index joined from kept statement parts, with every node
type visited or only a few."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Callable

import libcst as cst
import pytest

from kerasfit.engine.parse import ParseCache
from kerasfit.engine.walk import walk
from kerasfit.lsp.memo import StatementMemo
from kerasfit.semantic.model import SemanticModel
from kerasfit.semantic.nodes import iter_children

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted((ROOT / "fixtures").rglob("*.py"))
ALL_TYPES = frozenset(
    t.__name__ for t in vars(cst).values() if isinstance(t, type) and issubclass(t, cst.CSTNode) and t is not cst.Module
)
# a few types, nested in one another (a call's argument holding a call), so the replay
# skips most nodes and must climb to the visited ones' ancestors
SOME_VISITS = frozenset({"Call", "Subscript", "FunctionDef", "Lambda"})
SOME_LEAVES = frozenset({"Call", "Arg", "ClassDef", "IndentedBlock"})

Event = tuple[str, int, tuple[int, ...]]


def _enumerated(module: cst.Module, visits: frozenset[str], leaves: frozenset[str]) -> list[Event]:
    """The events of a walk that asks every node for its children."""
    events: list[Event] = []
    path: list[cst.CSTNode] = [module]
    # (node, True) to leave it once its children are done
    stack: list[tuple[cst.CSTNode, bool]] = [(c, False) for c in reversed(iter_children(module))]
    while stack:
        node, done = stack.pop()
        name = type(node).__name__
        if done:
            path.pop()
            if name in leaves:
                events.append(("leave", id(node), tuple(map(id, path))))
            continue
        if name in visits:
            events.append(("visit", id(node), tuple(map(id, path))))
        path.append(node)
        stack.append((node, True))
        stack.extend((c, False) for c in reversed(iter_children(node)))
    return events


def _assert_index_lists_the_walk(ctx: SemanticModel) -> None:
    """The index's node runs, one per top-level statement, are the enumerating walk's
    pre-order."""
    module = ctx.module
    runs = ctx.index.runs
    expected = [e[1] for e in _enumerated(module, ALL_TYPES, frozenset())]
    assert [id(n) for run in runs for n in run] == expected
    assert [id(run[0]) for run in runs] == list(map(id, module.body))


def _probe(ctx: SemanticModel, visits: frozenset[str], leaves: frozenset[str], events: list[Event]) -> object:
    """A rule-shaped visitor recording each event with what the model answers as the
    visited node's ancestors (the enumerating walk's path)."""

    def record(kind: str) -> Callable[[Any, cst.CSTNode], None]:
        def method(self: Any, node: cst.CSTNode) -> None:
            events.append((kind, id(node), tuple(map(id, ctx.scopes.ancestors(node)))))

        return method

    methods = {f"visit_{n}": record("visit") for n in visits}
    methods.update({f"leave_{n}": record("leave") for n in leaves})
    return type("Probe", (), methods)()


def _replayed(ctx: SemanticModel, visits: frozenset[str], leaves: frozenset[str]) -> list[Event]:
    events: list[Event] = []
    errors: list[BaseException] = []
    walk(ctx.module, ctx, [_probe(ctx, visits, leaves, events)], lambda rule, exc: errors.append(exc))  # type: ignore[list-item]
    assert not errors, errors[0]
    return events


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(ROOT)))
def test_replayed_walk_is_the_enumerating_walk(path: Path) -> None:
    src = path.read_text(encoding="utf-8")
    module = cst.parse_module(src)
    for visits, leaves in ((ALL_TYPES, ALL_TYPES), (SOME_VISITS, SOME_LEAVES), (SOME_VISITS, frozenset())):
        expected = _enumerated(module, visits, leaves)
        assert expected or visits is not ALL_TYPES or not module.body
        ctx = SemanticModel(module, str(path), source=src)
        _assert_index_lists_the_walk(ctx)
        assert _replayed(ctx, visits, leaves) == expected


@pytest.mark.parametrize("path", FIXTURES[::4], ids=lambda p: str(p.relative_to(ROOT)))
def test_replayed_walk_over_a_joined_index_is_the_enumerating_walk(path: Path) -> None:
    """The language server's model joins its file index from the statements' kept indexes:
    first all new, then after an edit that inserts a statement, most of them kept."""
    memo = StatementMemo()
    cache = ParseCache(reuse=memo)
    src = path.read_text(encoding="utf-8")
    lines = src.splitlines(keepends=True)
    middle = ast.parse(src).body[len(ast.parse(src).body) // 2]
    cut = min([middle.lineno, *(d.lineno for d in getattr(middle, "decorator_list", ()))]) - 1
    edited = "".join([*lines[:cut], "inserted = tf.reshape(x, [-1])\n", *lines[cut:]])
    for text in (src, edited):
        module = cache.parse(text, ast.parse(text))
        if module is None:
            pytest.skip("the parse cache declines this text")
        ctx = SemanticModel(module, str(path), source=text, hints=cache.hints(module))
        assert type(ctx.index.name_refs).__name__ == "_Joined"  # the joined index, not a walk
        _assert_index_lists_the_walk(ctx)
        for visits, leaves in ((ALL_TYPES, ALL_TYPES), (SOME_VISITS, SOME_LEAVES)):
            assert _replayed(ctx, visits, leaves) == _enumerated(module, visits, leaves)


def test_fields_left_out_as_str_hold_no_node() -> None:
    """``child_fields`` leaves out the fields typed ``str`` (``Name.value``): on every node of
    every fixture they hold text, never a node, so no walk misses code by skipping them."""
    import dataclasses

    from kerasfit.semantic.nodes import _SKIP_FIELDS, child_fields

    left_out = 0
    for path in FIXTURES:
        for run in SemanticModel(cst.parse_module(path.read_text(encoding="utf-8")), str(path)).index.runs:
            for node in run:
                kept = child_fields(type(node))
                for f in dataclasses.fields(node):
                    if f.name in kept or f.name in _SKIP_FIELDS or f.name.startswith("whitespace"):
                        continue
                    left_out += 1
                    assert f.type is str and type(getattr(node, f.name)) is str, (type(node).__name__, f.name)
    assert left_out > 1000  # the names and literals of the fixtures
