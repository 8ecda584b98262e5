"""Light data-flow questions rules ask (public: built-in rules and packs import them through kerasfit.ruleapi).

All of these are local and syntactic: "the assignment that reaches this use in the same
block", "how often a name is read", "what ``self.attr`` was set to in the class". They
answer None whenever the answer is not certain, so rules stay precise.
"""

from __future__ import annotations

from typing import Any, Sequence

import libcst as cst

from . import containers
from .nodes import ScopeNode, class_index, get_arg, self_attr, walk
from .views import ModelView

Block = cst.IndentedBlock | cst.Module


def current_statement(ctx: ModelView, node: cst.CSTNode) -> tuple[cst.SimpleStatementLine, Block, int] | None:
    """The statement line holding ``node``, its block and its index there."""
    stack = ctx.scopes.ancestors(node)
    for i in range(len(stack) - 1, 0, -1):
        line = stack[i]
        if isinstance(line, cst.SimpleStatementLine):
            block = stack[i - 1]
            if isinstance(block, (cst.IndentedBlock, cst.Module)):
                for j, s in enumerate(block.body):
                    if s is line:
                        return line, block, j
            return None
        if isinstance(line, (cst.BaseCompoundStatement, cst.Lambda)):
            return None
    return None


def reaching_assignment(ctx: ModelView, name: str, at: cst.CSTNode) -> tuple[cst.SimpleStatementLine, cst.BaseExpression] | None:
    """The ``name = value`` statement that a use of ``name`` at ``at`` reads.

    Walks back through earlier statements of the same block; gives up (None) when a
    compound statement in between may rebind the name or the block starts first.
    Falls back to the single binding in the enclosing scope when the name is bound once.
    """
    cur = current_statement(ctx, at)
    if cur is not None:
        line, block, idx = cur
        mine = list(line.body)
        path = ctx.scopes.ancestors(at)
        pos = next((k for k, s in enumerate(mine) if any(a is s for a in path)), len(mine))
        if any(ctx.syntax.binds(s, name) for s in mine[:pos]):
            return None
        for j in range(idx - 1, -1, -1):
            stmt = block.body[j]
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in reversed(stmt.body):
                    if (
                        isinstance(small, cst.Assign)
                        and len(small.targets) == 1
                        and isinstance(small.targets[0].target, cst.Name)
                        and small.targets[0].target.value == name
                    ):
                        return (stmt, small.value) if len(stmt.body) == 1 else None
                    if ctx.syntax.binds(small, name):
                        return None
            elif ctx.syntax.binds(stmt, name):
                return None
    scopes = ctx.scopes.scopes_of(at)
    b = ctx.scopes.lookup(name, scopes)
    if b is not None and b.kind == "assign" and isinstance(b.value, cst.BaseExpression):
        found = _line_of(ctx, b.node, scopes)
        if found is not None:
            return found, b.value
    return None


def _line_of(ctx: ModelView, small: cst.CSTNode, scopes: Sequence[ScopeNode]) -> cst.SimpleStatementLine | None:
    """The line that is ``small`` alone, when it lies in one of ``scopes`` (not in a def or
    class nested in them): its parent in the file index, not a walk of the scopes."""
    index = ctx.scopes.index
    line = index.parent.get(id(small))
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1 or line.body[0] is not small:
        return None
    home = index.scopes_of(line)[0]  # the def, class or module whose own code holds the line
    return line if any(s is home for s in scopes) else None


def value_of(ctx: ModelView, expr: cst.BaseExpression) -> cst.BaseExpression:
    """Follow a Name to the assignment that reaches it (once); else the expression."""
    if isinstance(expr, cst.Name):
        hit = reaching_assignment(ctx, expr.value, expr)
        if hit is not None:
            return hit[1]
    return expr


def class_attr_assignments(cls: cst.ClassDef, attr: str) -> list[cst.BaseExpression]:
    """Every value assigned to ``self.<attr>`` in the methods of ``cls``."""
    return class_index(cls)[0].get(attr, [])


def class_attr_uses(cls: cst.ClassDef, attr: str) -> int:
    """How often ``self.<attr>`` is read in ``cls``."""
    return class_index(cls)[1].get(attr, 0)


def layer_constructor(ctx: ModelView, func: cst.BaseExpression) -> tuple[cst.Call, str] | None:
    """For a layer application ``f(x)``: the constructor call of ``f`` and its canonical name,
    when ``f`` is a framework layer (see :func:`constructor_call` for what ``f`` may be)."""
    ctor = constructor_call(ctx, func)
    if ctor is not None:
        name = ctx.names.call_name(ctor)
        if name is not None:
            return ctor, name
    return None


def constructor_call(ctx: ModelView, func: cst.BaseExpression) -> cst.Call | None:
    """For a layer application ``f(x)``: the call that built ``f`` (a framework layer or not).

    Handles ``Conv2D(...)(x)``, ``conv = Conv2D(...); conv(x)`` and ``self.conv(x)`` with
    ``self.conv = Conv2D(...)`` assigned exactly once in the class (besides ``None``), and
    layers kept in a container when the element is determined: ``self.convs[i](x)`` with
    ``self.convs = [Conv2D(...) for ...]``, ``for conv in self.convs: conv(x)``,
    ``self.down[k + 1](x)`` where the appends repeat ``[pad, conv]`` and ``k`` counts by two.
    """
    ctor: cst.BaseExpression | None = None
    if isinstance(func, cst.Call):
        ctor = func
    elif isinstance(func, cst.Subscript) or (isinstance(func, cst.Name) and loop_source(ctx, func) is not None):
        ctor = container_element(ctx, func)
    elif isinstance(func, cst.Name):
        ctor = value_of(ctx, func)
    else:
        attr = self_attr(func)
        cls = ctx.scopes.enclosing_class(func)
        if attr is not None and cls is not None:
            # ``self.pad = None`` beside the one layer it may hold: applying it means it is the layer
            values = [v for v in ctx.syntax.class_attr_assignments(cls, attr) if not _is_none(v)]
            if len(values) == 1:
                ctor = values[0]
    return ctor if isinstance(ctor, cst.Call) else None


def _is_none(value: cst.BaseExpression) -> bool:
    return type(value) is cst.Name and value.value == "None"


def container_element(ctx: ModelView, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The one element expression ``C[i]`` or a loop variable over ``C`` is, when the
    container's construction fixes it (see :mod:`kerasfit.semantic.containers`)."""
    cands = element_candidates(ctx, expr)
    if not cands or len(cands) != 1:
        return None
    el = cands[0]
    if isinstance(el, cst.Name):  # conv = Conv2D(...); self.convs.append(conv)
        b = ctx.scopes.lookup(el.value, ctx.scopes.scopes_of(el))
        return b.value if b is not None and b.kind == "assign" else None
    return el


def element_candidates(ctx: ModelView, expr: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """Every element expression ``C[i]`` / a loop variable over ``C`` may be (a may-answer)."""
    return containers.element_candidates(ctx, expr)


def container_contents(ctx: ModelView, expr: cst.BaseExpression) -> containers.Contents | None:
    """One period of what a layer container holds, in construction order (``adjacent()``
    gives the layers that follow each other when it is iterated)."""
    return containers.contents(ctx, expr)


def applied_in_order(ctx: ModelView, call: cst.Call) -> containers.Order | None:
    """``x = layer(x)`` in ``for layer in C:``: the container whose layers feed each other."""
    return containers.applied_in_order(ctx, call)


def loop_source(ctx: ModelView, name: cst.Name) -> cst.BaseExpression | None:
    """The container a loop variable iterates (``for l in C``, ``enumerate``, ``zip``)."""
    return containers.loop_source(ctx, name)


def shape_of_variable(ctx: ModelView, expr: cst.BaseExpression, _depth: int = 0) -> tuple[Any, ...] | None:
    """The constant shape of a weight created by ``tf.Variable(init(shape))``,
    ``tf.get_variable(name, shape)`` or ``self.add_weight(shape=...)``, else None."""
    if _depth > 4:
        return None
    cls = ctx.scopes.enclosing_class(expr)
    expr = value_of(ctx, expr)
    attr = self_attr(expr)
    if attr is not None:
        values = ctx.syntax.class_attr_assignments(cls, attr) if cls is not None else []
        return shape_of_variable(ctx, values[0], _depth + 1) if len(values) == 1 else None
    if not isinstance(expr, cst.Call):
        return None
    shape_arg: cst.Arg | None = None
    name = ctx.names.call_name(expr)
    if name in ("tf.get_variable", "tf.Variable", "tf.random.normal", "tf.random.truncated_normal",
                "tf.random.uniform", "tf.random_normal", "tf.truncated_normal", "tf.random_uniform",
                "tf.zeros", "tf.ones", "tf.placeholder"):
        if name == "tf.Variable":
            init = get_arg(expr, "initial_value", 0)
            return shape_of_variable(ctx, init.value, _depth + 1) if init is not None else None
        shape_arg = get_arg(expr, "shape", 1 if name in ("tf.get_variable", "tf.placeholder") else 0)
    elif isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "add_weight":
        shape_arg = get_arg(expr, "shape")
    elif isinstance(expr.func, cst.Call) and (ctx.names.call_name(expr.func) or "").startswith("keras.initializers."):
        shape_arg = get_arg(expr, "shape", 0)
    if shape_arg is None:
        return None
    shape = ctx.values.const(shape_arg.value)
    if isinstance(shape, (list, tuple)) and all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        return tuple(shape)
    return None


def depends_on_param(ctx: ModelView, expr: cst.BaseExpression, _depth: int = 0) -> bool:
    """True when a name in ``expr`` is (or is computed from) a function parameter:
    its default is only what callers get when they pass nothing."""
    if _depth > 8:
        return True
    for n in walk(expr):
        if isinstance(n, cst.Name):
            b = ctx.scopes.lookup(n.value, at=n)
            if b is None:
                continue
            if b.kind == "param":
                return True
            if b.kind == "assign" and b.value is not None and depends_on_param(ctx, b.value, _depth + 1):
                return True
    return False


def label(name: str) -> str:
    """How a finding names a callee: ``Conv2D`` for Keras layers, else the canonical name."""
    return name.rsplit(".", 1)[-1] if name.startswith("keras.layers.") else name


def class_attr_assignment_line(cls: cst.ClassDef, attr: str) -> cst.SimpleStatementLine | None:
    """The line ``self.<attr> = ...`` when it is the only assignment of that attribute."""
    found = None
    for n in walk(cls.body, into_defs=True):
        if isinstance(n, cst.SimpleStatementLine):
            for small in n.body:
                if isinstance(small, cst.Assign) and any(self_attr(t.target) == attr for t in small.targets):
                    if found is not None or len(n.body) != 1 or len(small.targets) != 1:
                        return None
                    found = n
    return found


def uses_of(ctx: ModelView, value: cst.BaseExpression) -> list[cst.Name] | None:
    """Where the value of ``name = value`` is read: the loads of ``name`` (in the
    assignment's scope) that this assignment reaches. None when ``value`` is not the
    whole right-hand side of an assignment to one plain name."""
    parent = ctx.scopes.parent(value)
    if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name)):
        return None
    target = parent.targets[0].target
    return [
        n for n, _, _s in ctx.scopes.name_refs_in(target.value, ctx.scopes.scopes_of(parent)[0])
        if n is not target and not isinstance(ctx.scopes.parent(n), cst.AssignTarget)
        and any(b.node is parent or b.value is value for b in ctx.scopes.reaching_bindings(n))
    ]
