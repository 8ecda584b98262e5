"""Which project functions are reached from model-building or training code, across files.

A function is *model code* when it calls a Keras/TF model-building API, is a Keras
``Layer``/``Model`` method, or is named like a model / step function (``model_fn``,
``train_step``, ``call``). Reach propagates from model code to every project function it
calls (same file or imported from the tree), to a fixed point.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from ..symbols import canonical, is_model_building
from .names import ast_dotted

if TYPE_CHECKING:
    from .index import ModuleFacts, ProjectIndex

_STEP_NAMES = {"model_fn", "train_step", "test_step", "call", "build", "training_step", "loss_fn", "compute_loss"}


def _calls(fn: ast.AST) -> Iterator[ast.Call]:
    for n in ast.walk(fn):
        if isinstance(n, ast.Call):
            yield n


def _functions(facts: ModuleFacts) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for name, fn in facts.functions.items():
        yield name, fn
    for cname, cls in facts.classes.items():
        for stmt in cls.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f"{cname}.{stmt.name}", stmt


def compute_reach(index: ProjectIndex, files: list[str]) -> dict[tuple[str, str], bool]:
    edges: dict[tuple[str, str], set[tuple[str, str]]] = {}
    model: set[tuple[str, str]] = set()
    for path in files:
        facts = index.facts(path)
        if facts is None:
            continue
        for name, fn in _functions(facts):
            key = (facts.path, name)
            out = edges.setdefault(key, set())
            if name.rsplit(".", 1)[-1] in _STEP_NAMES:
                model.add(key)
            for call in _calls(fn):
                dotted = ast_dotted(call.func)
                if dotted is None:
                    continue
                head = dotted.split(".")[0]
                if head in facts.functions and "." not in dotted:
                    out.add((facts.path, head))
                    continue
                target = facts.imports.get(head)
                if target is None:
                    continue
                sym = index.resolve(facts.path, ".".join([target, *dotted.split(".")[1:]]))
                if sym is None:
                    continue
                if sym.kind == "framework":
                    if is_model_building(canonical(sym.raw)):
                        model.add(key)
                elif sym.facts is not None and sym.node is not None:
                    out.add((sym.facts.path, sym.node.name))
    reached = set(model)
    todo = list(model)
    while todo:
        k = todo.pop()
        for callee in edges.get(k, ()):
            if callee not in reached:
                reached.add(callee)
                todo.append(callee)
    return {k: True for k in reached}
