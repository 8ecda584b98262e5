"""The shortcuts that keep long files linear give the answers of the whole-file scans
they replace, on every fixture: references grouped by scope, ancestors read off the
walk, the module's imports read once, and the ``global`` pre-check."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from kerasfit.semantic import names
from kerasfit.semantic.fileindex import FileIndex
from kerasfit.semantic.scoped import attr_refs_within, name_refs_in
from kerasfit.semantic.model import SemanticModel
from kerasfit.engine.walk import walk
from kerasfit.engine.imports import ImportTable, may_orphan, top_level_imports

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted((ROOT / "fixtures").rglob("*.py"))


def _ctx(path: Path) -> SemanticModel:
    src = path.read_text(encoding="utf-8")
    return SemanticModel(cst.parse_module(src), str(path), source=src)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(ROOT)))
def test_grouped_references_equal_the_filtered_whole_file_lists(path: Path) -> None:
    ctx = _ctx(path)
    idx = ctx.index
    scopes = {id(s): s for refs in idx.name_refs.values() for _, _, sc in refs for s in sc}
    scopes.update({id(s): s for refs in idx.attr_refs.values() for _, _, sc in refs for s in sc})
    assert scopes
    for name, refs in idx.name_refs.items():
        for scope in scopes.values():
            assert name_refs_in(ctx, name, scope) == [r for r in refs if r[2] and r[2][0] is scope]
    for attr, refs in idx.attr_refs.items():
        for scope in scopes.values():
            assert attr_refs_within(ctx, attr, scope) == [r for r in refs if any(s is scope for s in r[2])]
    assert name_refs_in(ctx, "no_such_name_anywhere", ctx.module) == []


class _AncestorProbe:
    """A rule-shaped visitor: at each call, the ancestors the model answers for the call,
    its children and its arguments' values must be the parent links' chain (of an index
    of its own)."""

    def __init__(self, ctx: SemanticModel) -> None:
        self.ctx = ctx
        self.parents = FileIndex(ctx.module).parent  # a separate index, not the walk's
        self.checked = 0

    def visit_Call(self, node: cst.Call) -> None:
        for n in (node, node.func, *(a for a in node.args), *(a.value for a in node.args)):
            chain = []
            p = self.parents.get(id(n))
            while p is not None:
                chain.append(p)
                p = self.parents.get(id(p))
            walked = self.ctx.scopes.ancestors(n)
            assert [id(x) for x in walked] == [id(x) for x in reversed(chain)]
            self.checked += 1


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(ROOT)))
def test_ancestors_read_off_the_walk_are_the_parent_chain(path: Path) -> None:
    ctx = _ctx(path)
    probe = _AncestorProbe(ctx)
    errors: list[BaseException] = []
    walk(ctx.module, ctx, [probe], lambda rule, exc: errors.append(exc))  # type: ignore[list-item]
    assert not errors, errors[0]
    assert probe.checked or "(" not in path.read_text(encoding="utf-8")


def test_a_node_elsewhere_gets_its_own_ancestors_not_the_walks() -> None:
    """No question depends on where the walk is: asked while the walk visits a call in
    ``f``, the model answers for a call in ``h`` (and the model keeps no walk state)."""
    src = "def f(x):\n    return g(x)\n\ndef h(y):\n    return k(y)\n"
    ctx = SemanticModel(cst.parse_module(src), "m.py", source=src)
    f, h = ctx.module.body
    ret_h = h.body.body[0]
    call_in_h = ret_h.body[0].value
    call_in_f = f.body.body[0].body[0].value
    scopes = ctx.scopes
    answers: list[object] = []

    class Probe:
        def visit_Call(self, node: cst.Call) -> None:
            if node is call_in_f:
                answers.extend([list(scopes.ancestors(call_in_h)), scopes.scopes_of(call_in_h),
                                scopes.enclosing_function(call_in_h), ctx.roles.callable_of(call_in_h)])

    errors: list[BaseException] = []
    walk(ctx.module, ctx, [Probe()], lambda rule, exc: errors.append(exc))  # type: ignore[list-item]
    assert not errors, errors[0]
    assert answers == [[ctx.module, h, h.body, ret_h, ret_h.body[0]], [h, ctx.module], h, h]
    assert not any(hasattr(scopes, gone) for gone in ("walk_path", "visiting"))


def test_global_precheck_reads_the_word_and_falls_back_without_text() -> None:
    with_global = "B = None\n\ndef f():\n    global B\n    B = 1\n"
    without = "B = None\n\ndef f():\n    B = 1  # a global average pool\n"
    for src, expect in ((with_global, frozenset({"B"})), (without, frozenset()), ("x = 1\n", frozenset())):
        module = cst.parse_module(src)
        func = next((s for s in module.body if isinstance(s, cst.FunctionDef)), None)
        for ctx in (SemanticModel(module, "m.py", source=src), SemanticModel(module, "m.py")):
            if func is not None:
                assert names._globals_of(func, ctx) == expect
    assert not names._may_declare_globals(SemanticModel(cst.parse_module(without), "m.py", source=without.replace("global ", "")))
    assert names._may_declare_globals(SemanticModel(cst.parse_module("x = 1\n"), "m.py"))  # no text: ask the tree


@pytest.mark.parametrize("path", FIXTURES[:20], ids=lambda p: str(p.relative_to(ROOT)))
def test_import_table_is_the_module_imports(path: Path) -> None:
    module = cst.parse_module(path.read_text(encoding="utf-8"))
    table = ImportTable(module)
    assert table.get() == top_level_imports(module)
    assert table.get() is table.get()
    names_used = [n for n in module.body if isinstance(n, cst.SimpleStatementLine)][-3:]
    assert may_orphan(module, list(names_used), [], table) == may_orphan(module, list(names_used), [])
    other = cst.parse_module("import numpy as np\n")
    assert may_orphan(other, [other.body[0]], [], table) == may_orphan(other, [other.body[0]], [])


def test_orphaned_imports_of_one_module_in_both_spellings_sort() -> None:
    # `import tensorflow as tf` and `from tensorflow import keras` both orphaned: their
    # specs compared None with "keras" and raised TypeError
    src = "import tensorflow as tf\nfrom tensorflow import keras\ny = tf.pad(keras.layers.Dense(1)(x))\n"
    module = cst.parse_module(src)
    assert may_orphan(module, [module.body[2]], []) == (("tensorflow", None, "tf"), ("tensorflow", "keras", None))
