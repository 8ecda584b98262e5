"""The statement-local position path must agree with generating the whole module."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest

from kerasfit.semantic.model import SemanticModel
from kerasfit.engine.positions import Positions
from kerasfit.semantic.nodes import iter_children

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted(p for p in (ROOT / "fixtures").rglob("*.py")) + [ROOT / "examples" / "model.py"]

TRICKY = '''\
# header comment
import tensorflow as tf  # trailing


@tf.function(jit_compile=True)  # decorated
async def step(x):
    """doc"""
    if x:  # branch
        y = tf.nn.relu(x); z = tf.pad(y, [[0, 0]])
    elif x is None:
        pass
    else:
        for i in range(3):
            while i:
                try:
                    w = tf.concat([x], -1)
                except ValueError as e:
                    w = e
                else:
                    w = 1
                finally:
                    i -= 1
    with tf.device("/cpu:0"):
        s = "é🚀"; t = tf.transpose(x, [0, 3, 1, 2])
    match x:
        case 1:
            q = tf.reduce_sum(x) * 2
    if x: r = tf.nn.softmax(x)
    return [tf.keras.layers.Dense(
        100,
    )(x) for _ in range(2)]


class M(tf.keras.Model):
    def call(self, x):
        return tf.keras.layers.Conv2D(30, 3)(x)
'''


def _all_nodes(module: cst.Module) -> list[cst.CSTNode]:
    out, stack = [], [module]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(iter_children(n))
    return [n for n in out if n is not module]


@pytest.mark.parametrize("source", [p.read_text() for p in FILES] + [TRICKY], ids=[p.name for p in FILES] + ["tricky"])
def test_statement_local_positions_match_whole_module(source):
    module = cst.parse_module(source)
    tree = ast.parse(source)
    ctx = SemanticModel(module, "x.py", source=source)
    parent = ctx.index.parent
    nodes = [n for n in _all_nodes(module) if isinstance(n, (cst.Call, cst.Arg, cst.Name, cst.BaseSmallStatement, cst.SimpleStatementLine, cst.Integer))]
    slow = Positions(module, source, nodes)
    for n in nodes:  # one node at a time, so each takes the statement-local path on its own
        fast = Positions(module, source, [n], tree, parent)
        assert fast.full(n) == slow.full(n), (type(n).__name__, module.code_for_node(n))
        assert fast.span(n) == slow.span(n)


def test_statement_local_path_is_taken_for_ordinary_code():
    module = cst.parse_module(TRICKY)
    ctx = SemanticModel(module, "x.py", source=TRICKY)
    calls = [n for n in _all_nodes(module) if isinstance(n, cst.Call)]
    pos = Positions(module, TRICKY, calls, ast.parse(TRICKY), ctx.index.parent)
    # the whole-module path fills spans for every wanted node too; tell them apart by
    # checking that a statement-local run did not generate unrelated statements
    assert pos._by_statement(module, ast.parse(TRICKY), calls, ctx.index.parent, {id(c) for c in calls})


@pytest.mark.parametrize("source", [p.read_text() for p in FILES] + [TRICKY], ids=[p.name for p in FILES] + ["tricky"])
def test_names_the_index_walk_skips_are_placed_by_their_statement(source):
    # ``ds.batch``'s ``batch``, a keyword's name and an argument's comma are not in the
    # index's parent links; their hosts are, so their statements alone are generated
    from collections import ChainMap

    module = cst.parse_module(source)
    tree = ast.parse(source)
    index = SemanticModel(module, "x.py", source=source).index
    everything = _all_nodes(module)
    nodes = [n.attr for n in everything if isinstance(n, cst.Attribute)]
    nodes += [part for n in everything if isinstance(n, cst.Arg) for part in (n.keyword, n.comma)
              if isinstance(part, (cst.Name, cst.Comma))]
    if not nodes:
        return  # (a fixture with no attribute and no keyword argument)
    assert not any(id(n) in index.parent for n in nodes)
    hosts = index.hosts(nodes)
    assert len(hosts) == len({id(n) for n in nodes})
    parent = ChainMap(hosts, index.parent)
    fast = Positions(module, source, nodes, tree, parent)
    assert fast._by_statement(module, tree, nodes, parent, {id(n) for n in nodes})
    slow = Positions(module, source, nodes)
    for n in nodes:
        assert fast.full(n) == slow.full(n) and fast.span(n) == slow.span(n), module.code_for_node(n)
