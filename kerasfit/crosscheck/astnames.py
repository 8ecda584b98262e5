"""The names a statement binds, reads and changes, read from its ``ast``. Pure Python; what
the slicer, the candidates and the build child ask of a script's statements."""

from __future__ import annotations

import ast
import builtins
from typing import Iterator

# Methods that finish a needed object without training it ("compile is fine"), and the
# option definitions a needed command-line parser is made of.
MUTATORS = frozenset({"add", "build", "compile", "append", "extend", "insert", "update",
                      "pop", "setdefault", "add_argument", "add_argument_group",
                      "add_mutually_exclusive_group", "set_defaults"})

_BUILTINS = frozenset(dir(builtins))


def root_name(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call, ast.Starred)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def terminal(func: ast.expr) -> str | None:
    """The last name of a callee: ``f`` of ``f(...)`` and of ``a.b.f(...)``."""
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _target_names(target: ast.expr, out: set[str]) -> None:
    if isinstance(target, ast.Name):
        out.add(target.id)
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            _target_names(elt, out)
    elif isinstance(target, ast.Starred):
        _target_names(target.value, out)


def bound_names(stmt: ast.stmt) -> set[str]:
    """Names a top-level statement binds (its nested blocks included, defs' bodies not)."""
    out: set[str] = set()
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        out.add(stmt.name)
        return out
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        for alias in stmt.names:
            out.add((alias.asname or alias.name).split(".")[0])
        return out
    for node in walk_scope(stmt, enter_root=True):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                _target_names(t, out)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            _target_names(node.target, out)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            _target_names(node.target, out)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            _target_names(node.optional_vars, out)
        elif isinstance(node, ast.NamedExpr):
            _target_names(node.target, out)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                out.add((alias.asname or alias.name).split(".")[0])
    return out


def used_names(node: ast.AST) -> set[str]:
    """Every name read anywhere inside (function bodies too: the globals they read)."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def free_names(node: ast.AST) -> set[str]:
    """The names a statement reads from the module: like :func:`used_names`, but a
    function's own locals (parameters, names it assigns) are not the module's
    (``fake = self.generator(z)`` in a ``train_step`` needs no module-level ``fake``)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return _function_free(node)
    if isinstance(node, ast.ClassDef):
        out: set[str] = set()
        for expr in [*node.bases, *(k.value for k in node.keywords), *node.decorator_list]:
            out |= used_names(expr)
        for stmt in node.body:
            out |= free_names(stmt)
        return out
    out = set()
    for n in walk_scope(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            out.add(n.id)
        elif isinstance(n, _SCOPES):
            out |= free_names(n)
    return out


def _function_free(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    a = node.args
    outer: set[str] = set()
    for expr in [*a.defaults, *(d for d in a.kw_defaults if d is not None),
                 *getattr(node, "decorator_list", []),
                 *(x.annotation for x in [*a.posonlyargs, *a.args, *a.kwonlyargs] if x.annotation)]:
        outer |= used_names(expr)
    params = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x}
    body: list[ast.AST] = list(node.body) if isinstance(node.body, list) else [node.body]
    local, loads, declared = set(params), set[str](), set[str]()
    for stmt in body:
        for n in walk_scope(stmt):
            if isinstance(n, ast.Name):
                (local if isinstance(n.ctx, ast.Store) else loads if isinstance(n.ctx, ast.Load) else set()).add(n.id)
            elif isinstance(n, (ast.Global, ast.Nonlocal)):
                declared |= set(n.names)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                local |= {(x.asname or x.name).split(".")[0] for x in n.names}
            elif isinstance(n, _SCOPES):
                if not isinstance(n, ast.Lambda):
                    local.add(n.name)
                loads |= free_names(n)
    return outer | (loads - (local - declared))


def walk_scope(node: ast.AST, enter_root: bool = False) -> Iterator[ast.AST]:
    """ast.walk that yields functions, classes and lambdas but does not enter them
    (``enter_root``: except ``node`` itself)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if not isinstance(n, _SCOPES) or (enter_root and n is node):
            stack.extend(ast.iter_child_nodes(n))


def mutated_names(stmt: ast.stmt) -> set[str]:
    """Names whose object a statement changes in place (``m.trainable = False``, ``m.compile()``)."""
    out: set[str] = set()
    if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        for t in targets:
            if isinstance(t, (ast.Attribute, ast.Subscript)):
                root = root_name(t)
                if root:
                    out.add(root)
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        if isinstance(func, ast.Attribute) and func.attr in MUTATORS:
            root = root_name(func.value)
            if root:
                out.add(root)
    elif isinstance(stmt, (ast.For, ast.While, ast.With)):
        for child in stmt.body:
            out |= mutated_names(child)
    return out


# Methods that finish a needed object without training it ("compile is fine").


__all__ = ["MUTATORS", "bound_names", "free_names", "mutated_names", "root_name", "used_names", "walk_scope"]
