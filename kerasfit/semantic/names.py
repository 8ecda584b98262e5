"""Framework names kerasfit cannot see in the import lines of a file.

Two questions, both answered from ``kerasfit/data/framework_names.json`` (generated once
from the installed keras / tf_keras by ``scripts/gen_framework_names.py``; TensorFlow is
never imported at check time):

- :func:`star_names` — which names ``from <module> import *`` binds, for a framework
  module (``keras.layers``, ``tensorflow.keras.layers``, ``tf_keras.layers`` …);
- :func:`by_name` — the canonical API an *unresolved* receiver followed by a spelling
  only Keras/TF use stands for (``layers.ZeroPadding2D`` with ``layers =
  VersionAwareLayers()`` → ``keras.layers.ZeroPadding2D``). Such a resolution is marked
  "resolved by name" wherever it is shown.
"""

from __future__ import annotations

import ast
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

_DATA = Path(__file__).resolve().parent.parent / "data" / "framework_names.json"
# tensorflow.compat.v1.keras.layers binds what tensorflow.keras.layers binds.
_PREFIX_ALIASES = (("tensorflow.compat.v1.keras.", "tensorflow.keras."), ("tensorflow.compat.v2.keras.", "tensorflow.keras."),
                   ("tensorflow.python.keras.", "tensorflow.keras."), ("keras.api.", "keras."))


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    with open(_DATA, encoding="utf-8") as fh:
        data = json.load(fh)
    return {"star": {k: frozenset(v) for k, v in data["star"].items()}, "by_name": data["by_name"]}


def star_names(module: str) -> frozenset[str] | None:
    """The public names ``from module import *`` binds, or None for a non-framework module."""
    for old, new in _PREFIX_ALIASES:
        if module.startswith(old):
            module = new + module[len(old):]
    found: frozenset[str] | None = _table()["star"].get(module)
    return found


def by_name(tail: str) -> str | None:
    """Canonical name for an attribute path only Keras/TF spell (``"Conv2D"``,
    ``"random.categorical"``), else None. ``tail`` is the dotted path after the receiver."""
    table = _table()["by_name"]
    hit: str | None = table.get(tail)
    if hit is not None:
        return hit
    # layers().Conv2D / ns.layers.Conv2D: the last component alone when it is a layer class
    last = tail.rsplit(".", 1)[-1]
    hit = table.get(last)
    return hit if hit is not None and last[:1].isupper() else None


def ast_dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a Name/Attribute chain of CPython's AST, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


# keras_applications hands the framework's submodules to model code at run time:
# ``backend, layers, models, utils = get_submodules_from_kwargs(kwargs)`` (also into
# module globals declared ``global``), or ``backend = kwargs['backend']`` /
# ``kwargs.get('layers', ...)``. Which module each name holds is the position or key.
INJECTED_SUBMODULES = ("backend", "layers", "models", "utils")
_INJECTOR = "get_submodules_from_kwargs"


def injected_submodule(ctx: Any, head: str, within: Any) -> str | None:
    """``keras.backend`` (etc.) when ``head`` is bound, where it is used (``within``: the
    enclosing scopes, outermost first), only to a submodule handed in at run time; None otherwise."""
    import libcst as cst  # defers libcst: the project index imports this module without it

    from .nodes import SCOPE_TYPES  # defers libcst, as above

    if not _may_inject(ctx):
        return None
    scopes = [s for s in reversed(within) if type(s) in SCOPE_TYPES]
    for i, scope in enumerate(scopes):
        if i and type(scope) is cst.ClassDef:
            continue
        bs = ctx.scopes.scope_index(scope).bindings.get(head)
        if bs:
            if type(scope) is cst.ClassDef:
                return None
            if _declared_global(scope, head, ctx):
                break
            found = {_injection(ctx, b, head, within) for b in bs}
            return found.pop() if len(found) == 1 else None
    # module level: `backend = None`, filled by functions that declare it global
    bs = ctx.scopes.scope_index(ctx.module).bindings.get(head)
    if not bs or not all(b.kind == "assign" and isinstance(b.value, cst.Name) and b.value.value == "None" for b in bs):
        return None
    injected: dict[str, str] = ctx.file_fact("global_injections", _global_injections)
    return injected.get(head)


def _may_inject(ctx: Any) -> bool:
    """False when nothing in the file can hand a submodule in — no function or lambda
    takes ``**kwargs`` (the subscript / ``.get`` idiom reads one) and the text never names
    the injector: then the search is skipped for every name the file resolves."""
    hit: bool | None = ctx.caches.may_inject
    if hit is None:
        src = getattr(ctx, "source", "")
        hit = ctx.caches.may_inject = (
            not src or _INJECTOR in src or any(f.params.star_kwarg is not None for f in ctx.index.functions)
        )
    return hit


def _injection(ctx: Any, b: Any, head: str, within: Any) -> str | None:
    import libcst as cst  # defers libcst, as above

    if b.kind == "assign" and b.value is not None:
        v = b.value
        key = None
        if isinstance(v, cst.Subscript) and len(v.slice) == 1 and isinstance(v.slice[0].slice, cst.Index):
            base, k = v.value, v.slice[0].slice.value
            key = k.evaluated_value if isinstance(k, cst.SimpleString) else None
        elif (isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "get"
              and v.args and isinstance(v.args[0].value, cst.SimpleString)):
            base, key = v.func.value, v.args[0].value.evaluated_value
        else:
            return None
        if key not in INJECTED_SUBMODULES or not isinstance(base, cst.Name):
            return None
        pb = ctx.scopes.lookup(base.value, ctx.scopes.chain(within))
        if pb is None or pb.kind != "param" or not _is_star_kwarg(pb.node):
            return None
        return f"keras.{key}"
    node = b.node
    if b.kind == "other" and isinstance(node, cst.Assign):
        return _unpacked(node, head)
    return None


def _is_star_kwarg(param: Any) -> bool:
    import libcst as cst

    return isinstance(param, cst.Param) and param.star == "**"


def _unpacked(assign: Any, head: str) -> str | None:
    """``backend, layers, models, utils = get_submodules_from_kwargs(kwargs)``: head's module."""
    import libcst as cst

    v = assign.value
    if not (isinstance(v, cst.Call) and len(assign.targets) == 1 and isinstance(assign.targets[0].target, (cst.Tuple, cst.List))):
        return None
    callee = v.func.attr.value if isinstance(v.func, cst.Attribute) else v.func.value if isinstance(v.func, cst.Name) else None
    els = assign.targets[0].target.elements
    if callee != _INJECTOR or len(els) != len(INJECTED_SUBMODULES):
        return None
    names = [e.value.value if isinstance(e.value, cst.Name) else None for e in els]
    return f"keras.{INJECTED_SUBMODULES[names.index(head)]}" if head in names else None


def _declared_global(func: Any, head: str, ctx: Any = None) -> bool:
    return head in _globals_of(func, ctx)


def _globals_of(func: Any, ctx: Any = None) -> frozenset[str]:
    """Names a function declares ``global`` (one walk per function and file)."""
    import libcst as cst  # defers libcst: the project index imports this module without it

    from .nodes import walk  # defers libcst (nodes imports it), as above

    memo: dict[int, frozenset[str]] = ctx.caches.declared_globals if ctx is not None else {}
    hit = memo.get(id(func))
    if hit is None and ctx is not None and not _may_declare_globals(ctx):
        hit = memo[id(func)] = frozenset()
    if hit is None:
        hit = memo[id(func)] = frozenset(
            g.name.value for n in walk(func.body) if type(n) is cst.Global for g in n.names  # exact: see nodes.dotted_name
        )
    return hit


# A ``global`` statement starts a logical line or follows ``:`` / ``;`` (``def f(): global G``);
# the word in prose (``# the global batch``, a docstring's sentence) does not.
_GLOBAL_WORD = re.compile(r"(?:^|[:;\r])[ \t\f]*global\b", re.MULTILINE)


def _may_declare_globals(ctx: Any) -> bool:
    """False when the file's text has no ``global`` statement: then no function declares
    one, and walking each function's body to find out (most of a keras_applications
    file's name resolution) is skipped."""
    src = getattr(ctx, "source", "")
    if not src:  # a context built without its text: ask the tree
        return True
    hit: bool | None = ctx.caches.may_declare_globals
    if hit is None:
        hit = ctx.caches.may_declare_globals = _GLOBAL_WORD.search(src) is not None
    return hit


def _global_injections(ctx: Any) -> dict[str, str]:
    """Module globals every function that fills them (``global`` + unpacking) agrees on."""
    import libcst as cst

    found: dict[str, set[str | None]] = {}
    for call, _ in ctx.index.calls:
        func = call.func
        callee = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        if callee != _INJECTOR:
            continue
        assign = ctx.scopes.parent(call)
        if not isinstance(assign, cst.Assign):
            continue
        fn = ctx.index.scopes_of(call)[0]
        if not isinstance(fn, cst.FunctionDef):
            continue
        for el in assign.targets[0].target.elements if isinstance(assign.targets[0].target, (cst.Tuple, cst.List)) else ():
            if isinstance(el.value, cst.Name) and _declared_global(fn, el.value.value, ctx):
                found.setdefault(el.value.value, set()).add(_unpacked(assign, el.value.value))
    memo = {k: str(next(iter(v))) for k, v in found.items() if len(v) == 1 and None not in v}
    return memo
