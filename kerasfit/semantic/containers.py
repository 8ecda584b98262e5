"""Layers kept in containers: what ``self.blocks[i]`` or ``for layer in self.layers`` is.

Model code often builds its layers into a list or dict attribute in ``__init__`` /
``build`` and applies them by index or in a loop in ``call``::

    self.convs = [Conv2D(32, 3) for _ in range(n)]     # one constructor for every element
    self.down = []
    for i in range(n):
        self.down.append(ZeroPadding2D(1))              # a period of two, repeated
        self.down.append(Conv2D(32, 3, strides=2))
    ...
    x = self.convs[i](x)                                # the Conv2D
    x = self.down[k](x); x = self.down[k + 1](x)        # pad, then conv (k counts by 2)

:func:`contents` describes a container by one *period* of element expressions in
construction order (``repeats`` when a loop or comprehension repeats it);
:func:`element_candidates` says which element an index or a loop variable may be.
Everything is syntactic and answers None when unsure: a container that is assigned
more than once, aliased, or mutated other than by ``append`` (``add`` for a
``Sequential``), or appended to from more than one block, is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Literal, Sequence

import libcst as cst

from .nodes import SCOPE_TYPES, UNKNOWN, get_arg, iter_children
from .scoped import attr_refs_within, name_refs_in

if TYPE_CHECKING:
    from .views import ModelView

_COMPS = (cst.ListComp, cst.GeneratorExp, cst.SetComp)
# exact node types for the climbs through every ancestor below (an isinstance against a
# tuple of libcst's ABC-based classes costs ~30x a set look-up; libcst's concrete node
# classes have no subclasses)
_LOOP_STOPS = SCOPE_TYPES | {cst.Module}
_COMP_TYPES = frozenset({*_COMPS, cst.DictComp})
_LOOPS = (cst.For, cst.While)
# Methods that change a list other than by appending at its end.
_MUTATORS = frozenset({"extend", "insert", "pop", "remove", "clear", "reverse", "sort", "update", "setdefault", "popitem", "__setitem__"})
_SEQUENTIAL = "keras.Sequential"


@dataclass(frozen=True)
class Contents:
    """One period of a container's elements, in construction order."""

    items: tuple[cst.BaseExpression, ...]
    repeats: bool  # the period repeats an unknown number of times (built in a loop / comprehension)
    keys: tuple[object, ...] | None = None  # a dict's constant keys, one per item

    def adjacent(self) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
        """Pairs of elements that follow each other when the container is iterated."""
        pairs = list(zip(self.items, self.items[1:]))
        if self.repeats and self.items:
            pairs.append((self.items[-1], self.items[0]))
        return pairs


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(iter_children(n))


def _self_attr(expr: cst.CSTNode) -> str | None:
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        return expr.attr.value
    return None


def _same(a: cst.CSTNode, b: cst.CSTNode) -> bool:
    """``self.x`` / ``name`` spelled the same (the receiver the container is known by)."""
    if isinstance(a, cst.Name) and isinstance(b, cst.Name):
        return a.value == b.value
    return _self_attr(a) is not None and _self_attr(a) == _self_attr(b)


def _enclosing(ctx: ModelView, node: cst.CSTNode, kinds: type[cst.CSTNode] | tuple[type[cst.CSTNode], ...]) -> cst.CSTNode | None:
    p = ctx.scopes.parent(node)
    while p is not None and not isinstance(p, kinds):
        p = ctx.scopes.parent(p)
    return p


def _uses(ctx: ModelView, base: cst.BaseExpression, where: cst.CSTNode) -> Iterator[cst.Name | cst.Attribute]:
    """Every occurrence of the container's spelling in ``where`` (its class or function)."""
    attr = _self_attr(base)
    if attr is not None:
        for a, _, _scopes in attr_refs_within(ctx, attr, where):
            if _self_attr(a) == attr:
                yield a
        return
    if not isinstance(base, cst.Name):  # (contents takes only self.attr or a name)
        return
    for n, _, _scopes in name_refs_in(ctx, base.value, where):
        yield n


def contents(ctx: ModelView, base: cst.BaseExpression, _depth: int = 0, _alias: cst.Assign | None = None) -> Contents | None:
    """What the container ``base`` (``self.attr`` or a local name) holds, or None."""
    if _depth > 3:
        return None
    attr = _self_attr(base)
    if attr is not None:
        where = _enclosing(ctx, base, cst.ClassDef)
        spelling = attr
    elif isinstance(base, cst.Name):
        where = _enclosing(ctx, base, (cst.FunctionDef, cst.Lambda))
        where = where if where is not None else ctx.module
        spelling = f"name:{base.value}"
    else:
        return None
    if where is None:
        return None
    key = (id(where), spelling, id(_alias))
    memo = ctx.caches.containers
    if key in memo:
        hit: Contents | None = memo[key]
        return hit
    memo[key] = None  # a cycle (``a = b; b = a``) is unknown
    memo[key] = found = _contents(ctx, base, where, _depth, _alias)
    return found


class _Found:
    """What a container's uses in its scope show: its one assignment, the appends to it
    and the constant-key stores into it."""

    __slots__ = ("init", "appends", "stores")

    def __init__(self) -> None:
        self.init: cst.Assign | None = None
        self.appends: list[tuple[cst.Call, cst.CSTNode]] = []
        self.stores: list[tuple[object, cst.BaseExpression]] = []


def _contents(ctx: ModelView, base: cst.BaseExpression, where: cst.CSTNode, depth: int, alias: cst.Assign | None) -> Contents | None:
    found = _Found()
    for n in _uses(ctx, base, where):
        if not _record_use(ctx, found, n, alias):
            return None
    if found.init is None:
        return None
    return _built(ctx, base, found.init, found, depth)


def _record_use(ctx: ModelView, found: _Found, n: cst.Name | cst.Attribute, alias: cst.Assign | None) -> bool:
    """Record one use of the container in ``found``; False for a use that may change it
    in a way not followed."""
    par = ctx.scopes.parent(n)
    if isinstance(par, cst.AssignTarget):
        stmt = ctx.scopes.parent(par)
        if found.init is not None or not isinstance(stmt, cst.Assign) or len(stmt.targets) != 1:
            return False
        found.init = stmt
        return True
    if isinstance(par, cst.Attribute) and par.value is n:
        return _method_use(ctx, found, par)
    if isinstance(par, cst.Subscript) and par.value is n:
        return _subscript_use(ctx, found, par)
    if isinstance(par, (cst.AugAssign, cst.Del)) or (isinstance(par, cst.Assign) and par.value is n and par is not alias):
        return False  # ``self.x += [...]`` / an alias that may be mutated elsewhere
    if isinstance(par, cst.Arg) and not _reads_only(ctx, ctx.scopes.parent(par)):
        return False  # handed to code that may change it (``add_block(model)``)
    return True


def _method_use(ctx: ModelView, found: _Found, par: cst.Attribute) -> bool:
    """``x.append(v)`` (recorded), ``x.sort()`` (False), any other attribute (ignored)."""
    call = ctx.scopes.parent(par)
    if isinstance(call, cst.Call) and call.func is par:
        method = par.attr.value
        if method in _MUTATORS:
            return False
        if method in ("append", "add"):
            stmt = ctx.scopes.parent(call)
            if not isinstance(stmt, cst.Expr) or len(call.args) != 1 or call.args[0].keyword or call.args[0].star:
                return False
            found.appends.append((call, stmt))
    return True


def _subscript_use(ctx: ModelView, found: _Found, par: cst.Subscript) -> bool:
    """``x[k] = v`` with a constant ``k`` (recorded), another store or ``del`` (False), a read."""
    target_of = ctx.scopes.parent(par)
    if not isinstance(target_of, (cst.AssignTarget, cst.AugAssign, cst.Del)):
        return True
    if isinstance(target_of, cst.AssignTarget) and len(par.slice) == 1 and isinstance(par.slice[0].slice, cst.Index):
        k = ctx.values.const(par.slice[0].slice.value, scopes=ctx.scopes.scopes_of(par))
        stmt = ctx.scopes.parent(target_of)
        if k is not UNKNOWN and isinstance(stmt, cst.Assign) and len(stmt.targets) == 1:
            found.stores.append((k, stmt.value))
            return True
    return False


def _built(ctx: ModelView, base: cst.BaseExpression, init: cst.Assign, found: _Found, depth: int) -> Contents | None:
    """The contents the assignment ``init`` and the recorded appends and stores build."""
    appends, stores = found.appends, found.stores
    value = init.value
    if isinstance(value, cst.Name) and depth < 3 and _self_attr(base) is not None:
        # layers = []; layers.append(...); self.layers = layers
        if appends or stores:
            return None
        return contents(ctx, value, depth + 1, init)
    empty_seq = _is_empty(ctx, value)
    if appends:
        if not empty_seq or stores:
            return None
        return _appended(ctx, init, appends)
    if stores:
        if not (isinstance(value, cst.Dict) and not value.elements):
            return None
        keys = tuple(k for k, _ in stores)
        if len(set(map(repr, keys))) != len(keys):
            return None
        return Contents(tuple(v for _, v in stores), False, keys)
    return _assigned(ctx, value, depth)


def _assigned(ctx: ModelView, value: cst.BaseExpression, depth: int) -> Contents | None:
    """The contents of the value a container is assigned (nothing appended or stored)."""
    if isinstance(value, (cst.List, cst.Tuple)):
        if any(isinstance(e, cst.StarredElement) for e in value.elements):
            return None
        return Contents(tuple(e.value for e in value.elements), False)
    if isinstance(value, cst.ListComp):
        return Contents((value.elt,), True)
    if isinstance(value, cst.Dict):
        return _dict_literal(ctx, value)
    if isinstance(value, cst.DictComp):
        return Contents((value.value,), True)
    if isinstance(value, cst.Call) and ctx.names.call_name_anywhere(value) == _SEQUENTIAL:
        layers = get_arg(value, "layers", 0)
        if layers is not None and isinstance(layers.value, (cst.List, cst.Tuple)):
            return contents_of_literal(layers.value)
        if layers is not None and (isinstance(layers.value, cst.Name) or _self_attr(layers.value)):
            return contents(ctx, layers.value, depth + 1)  # Sequential(blocks), blocks built above
    return None


def _dict_literal(ctx: ModelView, value: cst.Dict) -> Contents | None:
    dict_keys: list[object] = []
    dict_values: list[cst.BaseExpression] = []
    for e in value.elements:
        if not isinstance(e, cst.DictElement):
            return None
        k = ctx.values.const(e.key, scopes=ctx.scopes.scopes_of(e))
        if k is UNKNOWN:
            return None
        dict_keys.append(k)
        dict_values.append(e.value)
    return Contents(tuple(dict_values), False, tuple(dict_keys))


# Builtins that only read the container they are given.
_READERS = frozenset({"len", "zip", "enumerate", "reversed", "list", "tuple", "iter", "range", "print", "isinstance", "sorted", "any", "all", "map", "filter", "sum", "min", "max"})


def _reads_only(ctx: ModelView, call: cst.CSTNode | None) -> bool:
    """A call that does not change a container passed to it: a reading builtin, or a
    framework call (``keras.Sequential(layers)``, ``tf.concat(parts)``)."""
    if not isinstance(call, cst.Call):
        return True
    if isinstance(call.func, cst.Name) and call.func.value in _READERS:
        return True
    return ctx.names.call_name_anywhere(call) is not None


def contents_of_literal(value: cst.List | cst.Tuple) -> Contents | None:
    if any(isinstance(e, cst.StarredElement) for e in value.elements):
        return None
    return Contents(tuple(e.value for e in value.elements), False)


def _is_empty(ctx: ModelView, value: cst.BaseExpression) -> bool:
    if isinstance(value, (cst.List, cst.Tuple)) and not value.elements:
        return True
    if isinstance(value, cst.Call) and not value.args:
        if isinstance(value.func, cst.Name) and value.func.value == "list":
            return True
        return ctx.names.call_name_anywhere(value) == _SEQUENTIAL
    return False


def _appended(ctx: ModelView, init: cst.Assign, appends: list[tuple[cst.Call, cst.CSTNode]]) -> Contents | None:
    """The period the appends build: they must sit in one block, run together (nothing
    between them leaves the block), after the container is created in the same function."""
    lines: list[cst.SimpleStatementLine] = []
    for _, expr_stmt in appends:
        line = ctx.scopes.parent(expr_stmt)
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
            return None
        lines.append(line)
    block = ctx.scopes.parent(lines[0])
    if not isinstance(block, (cst.IndentedBlock, cst.Module)) or any(ctx.scopes.parent(ln) is not block for ln in lines[1:]):
        return None
    body = list(block.body)
    pos = [next(i for i, s in enumerate(body) if s is ln) for ln in lines]
    for s in body[min(pos) : max(pos) + 1]:
        if not isinstance(s, cst.SimpleStatementLine) or any(
            isinstance(small, (cst.Return, cst.Break, cst.Continue, cst.Raise)) for small in s.body
        ):
            return None
    init_line = ctx.scopes.parent(init)
    init_block = ctx.scopes.parent(init_line) if isinstance(init_line, cst.SimpleStatementLine) else None
    func = _enclosing(ctx, init, (cst.FunctionDef, cst.Lambda, cst.ClassDef))
    if init_block is None or _enclosing(ctx, lines[0], (cst.FunctionDef, cst.Lambda, cst.ClassDef)) is not func:
        return None
    order = ctx.index.order
    if order.get(id(init), 0) > order.get(id(appends[0][0]), 0):
        return None
    # The appends' block must lie inside the block that creates the container; a loop
    # between the two repeats the period, a loop around both recreates the list.
    repeats = False
    node: cst.CSTNode | None = block
    while node is not None and node is not init_block:
        if isinstance(node, _LOOPS):
            repeats = True
        if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.Module)):
            return None
        node = ctx.scopes.parent(node)
    if node is None:
        return None
    ordered = sorted(zip(pos, (c.args[0].value for c, _ in appends)), key=lambda t: t[0])
    return Contents(tuple(v for _, v in ordered), repeats)


# ---- which element --------------------------------------------------------------
def element_candidates(ctx: ModelView, expr: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """The element expressions ``expr`` may be: ``C[i]`` (by index or key) or a loop
    variable over ``C`` (``for l in C``, ``enumerate(C)``, ``zip(C1, C2)``, also in
    comprehensions). One candidate when the element is determined; None when ``expr``
    is not a container element or the container is unknown."""
    if isinstance(expr, cst.Subscript):
        if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
            return None
        c = contents(ctx, expr.value)
        if c is None or not c.items:
            return None
        return _at(ctx, c, expr.slice[0].slice.value)
    if isinstance(expr, cst.Name):
        src = loop_source(ctx, expr)
        if src is None:
            return None
        c = contents(ctx, src)
        return _distinct(c.items) if c is not None and c.items else None
    return None


def _distinct(items: Sequence[cst.BaseExpression]) -> list[cst.BaseExpression]:
    out: list[cst.BaseExpression] = []
    for it in items:
        if not any(it is o for o in out):
            out.append(it)
    return out


def _at(ctx: ModelView, c: Contents, index: cst.BaseExpression) -> list[cst.BaseExpression]:
    scopes = ctx.scopes.scopes_of(index)
    if c.keys is not None:
        k = ctx.values.const(index, scopes=scopes)
        if k is not UNKNOWN and not c.repeats:
            hits = [v for key, v in zip(c.keys, c.items) if key == k]
            return hits if hits else _distinct(c.items)
        return _distinct(c.items)
    p = len(c.items)
    r = residue(ctx, index, p)
    return [c.items[r]] if r is not None else _distinct(c.items)


def residue(ctx: ModelView, expr: cst.BaseExpression, p: int, _depth: int = 0) -> int | None:
    """``expr mod p`` when the code fixes it (``k + 1`` with ``k = 0`` and ``k += 2``,
    ``2 * i``, a ``range`` start with a step that is a multiple of ``p``), else None."""
    if p == 1:
        return 0
    if _depth > 6:
        return None
    if isinstance(expr, cst.Integer):
        return int(expr.value.replace("_", ""), 0) % p
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        r = residue(ctx, expr.expression, p, _depth + 1)
        return None if r is None else -r % p
    if isinstance(expr, cst.BinaryOperation):
        a = residue(ctx, expr.left, p, _depth + 1)
        b = residue(ctx, expr.right, p, _depth + 1)
        if isinstance(expr.operator, cst.Multiply):
            if a == 0 or b == 0:
                return 0
            return None if a is None or b is None else a * b % p
        if a is None or b is None:
            return None
        if isinstance(expr.operator, cst.Add):
            return (a + b) % p
        if isinstance(expr.operator, cst.Subtract):
            return (a - b) % p
        return None
    if isinstance(expr, cst.Name):
        comp = _comprehension_binding(ctx, expr)
        if comp is not None:  # a comprehension variable: its own ``range``, not the function's name
            return _range_residue(ctx, comp.iter, p, _depth) if isinstance(comp.target, cst.Name) else None
        v = ctx.values.const(expr, scopes=ctx.scopes.scopes_of(expr))
        if isinstance(v, int) and not isinstance(v, bool):
            return v % p
        return _name_residue(ctx, expr, p, _depth)
    return None


def _comprehension_binding(ctx: ModelView, name: cst.Name) -> cst.CompFor | None:
    for node in _ancestors(ctx, name):
        if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return None
        if isinstance(node, (*_COMPS, cst.DictComp)):
            comp: cst.CompFor | None = node.for_in
            while comp is not None:
                if _mentions(comp.target, name.value):
                    return comp
                comp = comp.inner_for_in
    return None


def _name_residue(ctx: ModelView, name: cst.Name, p: int, depth: int) -> int | None:
    scopes = ctx.scopes.scopes_of(name)
    scope = scopes[0] if scopes else None
    if not isinstance(scope, cst.FunctionDef):
        return None
    bindings = ctx.scopes.scope_index(scope).bindings.get(name.value)
    if not bindings:
        return None
    found: set[int] = set()
    for b in bindings:
        node = b.node
        if b.kind == "assign" and b.value is not None:
            r = residue(ctx, b.value, p, depth + 1) if not _mentions(b.value, name.value) else None
        elif isinstance(node, cst.AugAssign) and isinstance(node.operator, (cst.AddAssign, cst.SubtractAssign)):
            step = residue(ctx, node.value, p, depth + 1) if not _mentions(node.value, name.value) else None
            if step != 0:
                return None
            continue
        elif isinstance(node, cst.For) and isinstance(node.target, cst.Name) and node.target.value == name.value:
            r = _range_residue(ctx, node.iter, p, depth)
        else:
            return None
        if r is None:
            return None
        found.add(r)
    return found.pop() if len(found) == 1 else None


def _range_residue(ctx: ModelView, it: cst.BaseExpression, p: int, depth: int) -> int | None:
    if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "range"):
        return None
    args = [a.value for a in it.args if a.keyword is None and not a.star]
    if len(args) != len(it.args) or len(args) < 2:
        return None
    step = residue(ctx, args[2], p, depth + 1) if len(args) == 3 else 1 % p
    if step != 0:
        return None
    return residue(ctx, args[0], p, depth + 1)


def _mentions(expr: cst.CSTNode, name: str) -> bool:
    return any(isinstance(n, cst.Name) and n.value == name for n in _walk(expr))


def loop_source(ctx: ModelView, name: cst.Name) -> cst.BaseExpression | None:
    """The container a loop variable iterates: ``C`` in ``for name in C``, ``for i, name
    in enumerate(C)`` or ``for a, name in zip(A, C)`` — the innermost comprehension
    binding ``name``, else the one ``for`` statement binding it in its function."""
    for node in _ancestors(ctx, name):
        tp = type(node)
        if tp in _LOOP_STOPS:
            break
        if tp in _COMP_TYPES:
            comp: cst.CompFor | None = node.for_in  # type: ignore[attr-defined]
            while comp is not None:
                src = _iterated(comp.target, comp.iter, name.value)
                if src is not False:
                    return src
                comp = comp.inner_for_in
    bound = _for_binding(ctx, name)
    return bound[1] if bound is not None else None


def _iterated(target: cst.BaseExpression, it: cst.BaseExpression, name: str) -> cst.BaseExpression | None | Literal[False]:
    """The container ``name`` takes its elements from; None if not one; False if the
    target does not bind ``name``."""
    if isinstance(target, cst.Name):
        return it if target.value == name else False
    if not isinstance(target, (cst.Tuple, cst.List)):
        return False
    names = [e.value.value if isinstance(e.value, cst.Name) else None for e in target.elements]
    if name not in names:
        return False
    pos = names.index(name)
    if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Name)):
        return None
    args = [a.value for a in it.args if a.keyword is None and not a.star]
    if it.func.value == "enumerate" and len(args) >= 1 and len(names) == 2:
        return args[0] if pos == 1 else None
    if it.func.value == "zip" and len(args) == len(names):
        return args[pos]
    return None


@dataclass(frozen=True)
class Order:
    """A container whose elements a loop applies one after the other."""

    container: cst.BaseExpression
    contents: Contents

    def adjacent(self) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
        return self.contents.adjacent()


def applied_in_order(ctx: ModelView, call: cst.Call) -> Order | None:
    """For ``x = layer(x)`` in ``for layer in C:`` (or ``enumerate(C)``, or ``x = C[i](x)``
    under ``for i in range(len(C))``): the container, whose elements then feed each other
    in construction order. None unless the loop body is that chain: the statement sits
    directly in the loop's body, nothing else there rebinds ``x``, and no ``break`` /
    ``continue`` skips a layer."""
    looped = _looped_container(ctx, call.func)
    if looped is None:
        return None
    loop, container = looped
    assign = ctx.scopes.parent(call)
    if not (isinstance(assign, cst.Assign) and assign.value is call and len(assign.targets) == 1):
        return None
    target = assign.targets[0].target
    first = call.args[0] if call.args else None
    if not (isinstance(target, cst.Name) and first is not None and first.keyword is None and not first.star
            and isinstance(first.value, cst.Name) and first.value.value == target.value):
        return None
    line = ctx.scopes.parent(assign)
    if not isinstance(line, cst.SimpleStatementLine) or ctx.scopes.parent(line) is not loop.body:
        return None
    if not _only_chain(loop, line, target.value):
        return None
    c = contents(ctx, container)
    return Order(container, c) if c is not None and len(c.items) > 1 or (c is not None and c.repeats) else None


def _looped_container(ctx: ModelView, func: cst.BaseExpression) -> tuple[cst.For, cst.BaseExpression] | None:
    """For the callee ``layer`` of ``for layer in C`` (or ``enumerate(C)``) or ``C[i]`` of
    ``for i in range(len(C))``: the loop and ``C``."""
    if isinstance(func, cst.Name):
        bound = _for_binding(ctx, func)
        if bound is None:
            return None
        loop, container = bound
        if not (isinstance(loop.target, cst.Name) or _enumerate_value(loop, func.value)):
            return None
        return loop, container
    if isinstance(func, cst.Subscript) and len(func.slice) == 1 and isinstance(func.slice[0].slice, cst.Index):
        index = func.slice[0].slice.value
        if not isinstance(index, cst.Name):
            return None
        bound = _for_binding(ctx, index)
        if bound is None:
            return None
        loop, it = bound
        if not isinstance(loop.target, cst.Name) or not _range_len_of(it, func.value):
            return None
        return loop, func.value
    return None


def _only_chain(loop: cst.For, line: cst.SimpleStatementLine, name: str) -> bool:
    """Nothing in the loop's body but ``line`` rebinds ``name``, and no ``break`` /
    ``continue`` skips an element."""
    for stmt in loop.body.body:
        if stmt is line:
            continue
        for n in _walk(stmt):
            if isinstance(n, (cst.Break, cst.Continue)):
                return False
            if isinstance(n, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For)) and _mentions(n.target, name):
                return False
    return True


def _for_binding(ctx: ModelView, name: cst.Name) -> tuple[cst.For, cst.BaseExpression] | None:
    """The innermost ``for`` statement around ``name`` that binds it (and nothing in its
    body rebinds it), and what it iterates (the container itself for ``enumerate(C)``);
    None when there is none or it iterates something unknown."""
    for node in _ancestors(ctx, name):
        if type(node) in SCOPE_TYPES:
            break
        if type(node) is cst.For and node.body is not None:
            src = _iterated(node.target, node.iter, name.value)
            if src is False:
                continue

            if any(ctx.syntax.binds(stmt, name.value) for stmt in node.body.body):
                return None  # rebound inside the loop
            return (node, src) if src is not None else None
    return None


def _ancestors(ctx: ModelView, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``node``'s ancestors, innermost first."""
    return reversed(ctx.scopes.ancestors(node))


def _enumerate_value(loop: cst.For, name: str) -> bool:
    t = loop.target
    return (isinstance(t, (cst.Tuple, cst.List)) and len(t.elements) == 2 and isinstance(t.elements[1].value, cst.Name)
            and t.elements[1].value.value == name and isinstance(loop.iter, cst.Call)
            and isinstance(loop.iter.func, cst.Name) and loop.iter.func.value == "enumerate")


def _range_len_of(it: cst.BaseExpression | None, container: cst.BaseExpression) -> bool:
    """``range(len(C))``."""
    if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "range" and len(it.args) == 1):
        return False
    inner = it.args[0].value
    return (isinstance(inner, cst.Call) and isinstance(inner.func, cst.Name) and inner.func.value == "len"
            and len(inner.args) == 1 and type(inner.args[0].value) is type(container) and _same(inner.args[0].value, container))
