"""What a call of a project function builds: a may-analysis over its body.

``built_layer(index, facts, func_dotted, args, kwargs)`` interprets the function a call
site names (in the same file or, through the :class:`~.index.ProjectIndex`, in another
file of the tree) with the call's argument values bound to its parameters, and answers
the *first* framework layer the returned object applies (following returns through
helper factories, ``compose(...)`` and ``Sequential([...])``) with every argument as a
set of possible values.

Values are sets: an ``if`` whose test is not known joins both branches, ``a if c else b``
is both unless ``c`` folds. Unknown is :data:`TOP`. Keyword dicts are tracked through
``d = {...}``, ``d[k] = v``, ``d.update(kwargs)``, ``kwargs.get(k)``. What an operator
means, the size limits and the budget (statements per call site, call depth) are
:mod:`.folding`'s, shared with the libcst model.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator

from .folding import BINARY, COMPARE, CONST_DEPTH, MAX_VALUES, UNARY, UNKNOWN, Budget
from .names import ast_dotted

if TYPE_CHECKING:
    from .index import ProjectIndex
    from .modulefacts import ModuleFacts


class _Top:
    def __repr__(self) -> str:
        return "TOP"


TOP: Any = _Top()


@dataclass(frozen=True)
class Layer:
    """A framework layer/op call reached through factories.

    ``name`` is the raw dotted framework name (``tensorflow.keras.layers.Conv2D``);
    ``args`` / ``kwargs`` hold value sets (frozensets) or TOP; ``via`` the factory
    functions traversed, outermost first."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(hash=False)
    via: tuple[str, ...] = ()

    def arg(self, keyword: str, position: int | None, default: Any = TOP) -> Any:
        if keyword in self.kwargs:
            return self.kwargs[keyword]
        if position is not None and position < len(self.args):
            return self.args[position]
        return default


class _Input:
    """The tensor a caller hands a wrapper (see :func:`ops_fed`): followed to the ops it
    feeds directly."""

    def __repr__(self) -> str:
        return "INPUT"


INPUT: Any = _Input()


@dataclass
class _Dict:
    items: dict[Any, Any]  # constant key -> abstract value
    open: bool = False  # may hold keys we do not know


def consts(*values: Any) -> frozenset[Any]:
    return frozenset(values)


def _join(a: Any, b: Any) -> Any:
    if a is TOP or b is TOP:
        return TOP
    if isinstance(a, frozenset) and isinstance(b, frozenset):
        u = a | b
        return u if len(u) <= MAX_VALUES else TOP
    if isinstance(a, _Dict) and isinstance(b, _Dict):
        keys = set(a.items) | set(b.items)
        return _Dict({k: _join(a.items.get(k, TOP), b.items.get(k, TOP)) for k in keys}, a.open or b.open)
    if a is b or a == b:
        return a
    if isinstance(a, Layer) and isinstance(b, Layer) and a.name == b.name and a.via == b.via:
        # one op on both paths of an ``if`` (``tf.pad`` per data format): the same op,
        # each argument the join of both; one given on a single path only is unknown
        n = max(len(a.args), len(b.args))
        args = tuple(_join(a.args[i], b.args[i]) if i < min(len(a.args), len(b.args)) else TOP for i in range(n))
        kwargs = {k: _join(a.kwargs.get(k, TOP), b.kwargs.get(k, TOP)) for k in set(a.kwargs) | set(b.kwargs)}
        return Layer(a.name, args, kwargs, a.via)
    return TOP


_COMPOSERS = {"compose"}  # function composition helpers: the first function applies first


def _pairwise(op: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    """``op`` (of :mod:`.folding`) over every pair of two value sets."""
    if not (isinstance(a, frozenset) and isinstance(b, frozenset)) or len(a) * len(b) > MAX_VALUES:
        return TOP
    out: set[Any] = set()
    for x in a:
        for y in b:
            v = op(x, y)
            if v is UNKNOWN:
                return TOP
            try:
                out.add(v)
            except TypeError:  # unhashable (a list): no set of it
                return TOP
    return frozenset(out)


class Interpreter:
    def __init__(self, index: ProjectIndex) -> None:
        self.index = index
        self.budget = Budget.for_call_site()
        # framework ops (and applied layers) whose input is :data:`INPUT`, in order met
        self.fed: list[Layer] = []

    # ---- entry ---------------------------------------------------------------------
    def call(self, facts: ModuleFacts, dotted: str, args: list[Any], kwargs: dict[str, Any], depth: int = 0,
             via: tuple[str, ...] = ()) -> Any:
        """Value of calling ``dotted`` (as written in ``facts``' module) with abstract args."""
        if depth > self.budget.depth:
            return TOP
        sym = self.index.local(facts, dotted)
        if sym is None:
            return TOP
        if sym.kind == "framework":
            op = Layer(sym.raw, tuple(args), dict(kwargs), via)
            if any(v is INPUT for v in (*args[:1], kwargs.get("input"), kwargs.get("inputs"), kwargs.get("x"))):
                self.fed.append(op)
            return op
        if sym.node is None or sym.facts is None:
            return TOP
        return self.run(sym.facts, sym.node, args, kwargs, depth + 1, via + (sym.node.name,))

    def run(self, facts: ModuleFacts, fn: ast.FunctionDef, args: list[Any], kwargs: dict[str, Any], depth: int,
            via: tuple[str, ...]) -> Any:
        env = self._bind(facts, fn, args, kwargs)
        if env is None:
            return TOP
        state = _Frame(facts, env, depth, via)
        self._block(fn.body, state)
        result: Any = None
        for r in state.returns:
            result = r if result is None else _join(result, r)
        return TOP if result is None else result

    def _bind(self, facts: ModuleFacts, fn: ast.FunctionDef, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any] | None:
        a = fn.args
        env: dict[str, Any] = {}
        params = [*a.posonlyargs, *a.args]
        defaults = [None] * (len(params) - len(a.defaults)) + list(a.defaults)
        rest = list(args)
        kw = dict(kwargs)
        for p, d in zip(params, defaults):
            if rest:
                env[p.arg] = rest.pop(0)
            elif p.arg in kw:
                env[p.arg] = kw.pop(p.arg)
            elif d is not None:
                env[p.arg] = self._expr(d, _Frame(facts, {}, 0, ()))
            else:
                env[p.arg] = TOP
        if a.vararg is not None:
            env[a.vararg.arg] = tuple(rest)
        for p, d in zip(a.kwonlyargs, a.kw_defaults):
            if p.arg in kw:
                env[p.arg] = kw.pop(p.arg)
            else:
                env[p.arg] = self._expr(d, _Frame(facts, {}, 0, ())) if d is not None else TOP
        if a.kwarg is not None:
            env[a.kwarg.arg] = _Dict(kw, kwargs.get("**") is TOP)
        return env

    # ---- statements --------------------------------------------------------------------
    def _block(self, body: list[ast.stmt], st: _Frame) -> None:
        for stmt in body:
            if st.done:
                return
            self._stmt(stmt, st)

    def _stmt(self, s: ast.stmt, st: _Frame) -> None:
        if not self.budget.spend():  # a model builder, not a factory: give up early
            st.returns.append(TOP)
            st.done = True
            return
        if isinstance(s, ast.Return):
            st.returns.append(self._expr(s.value, st) if s.value is not None else consts(None))
            st.done = True
        elif isinstance(s, ast.Assign):
            v = self._expr(s.value, st)
            for t in s.targets:
                if isinstance(t, ast.Name):
                    st.env[t.id] = v
                elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                    d = st.env.get(t.value.id)
                    key = self._expr(t.slice, st)
                    if isinstance(d, _Dict) and isinstance(key, frozenset) and len(key) == 1:
                        d.items[next(iter(key))] = v
                    elif isinstance(d, _Dict):
                        d.open = True
                else:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            st.env[n.id] = TOP
        elif isinstance(s, (ast.AugAssign, ast.AnnAssign)) and isinstance(s.target, ast.Name):
            st.env[s.target.id] = TOP if isinstance(s, ast.AugAssign) or s.value is None else self._expr(s.value, st)
        elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            self._effect(s.value, st)
        elif isinstance(s, ast.If):
            test = self._expr(s.test, st)
            truth = _truth(test)
            if truth is True:
                self._block(s.body, st)
            elif truth is False:
                self._block(s.orelse, st)
            else:
                a, b = st.fork(), st.fork()
                self._block(s.body, a)
                self._block(s.orelse, b)
                st.merge(a, b)
        elif isinstance(s, ast.With):
            # ``with tf.variable_scope(name):``: the body runs once, in order (a name it binds is
            # the context manager's value, unknown)
            for item in s.items:
                for n in ast.walk(item.optional_vars) if item.optional_vars is not None else ():
                    if isinstance(n, ast.Name):
                        st.env[n.id] = TOP
            self._block(s.body, st)
        elif isinstance(s, (ast.For, ast.While, ast.Try)):
            # bodies are not iterated: what they bind is unknown afterwards
            for n in _statements([s]):
                targets: list[ast.expr] = []
                if isinstance(n, ast.Assign):
                    targets = n.targets
                elif isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.For)):
                    targets = [n.target]
                elif isinstance(n, ast.With):
                    targets = [i.optional_vars for i in n.items if i.optional_vars is not None]
                elif isinstance(n, ast.Return):
                    st.returns.append(TOP)
                for t in targets:
                    for name in ast.walk(t):
                        if isinstance(name, ast.Name):
                            st.env[name.id] = TOP
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            st.env[s.name] = TOP

    def _effect(self, call: ast.Call, st: _Frame) -> None:
        f = call.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            d = st.env.get(f.value.id)
            if isinstance(d, _Dict):
                if f.attr == "update" and len(call.args) == 1 and not call.keywords:
                    other = self._expr(call.args[0], st)
                    if isinstance(other, _Dict):
                        d.items.update(other.items)
                        d.open = d.open or other.open
                    else:
                        d.open = True
                elif f.attr == "update":
                    for k in call.keywords:
                        if k.arg is not None:
                            d.items[k.arg] = self._expr(k.value, st)
                        else:
                            d.open = True
                elif f.attr in ("pop", "setdefault", "clear", "popitem"):
                    d.open = True

    # ---- expressions -----------------------------------------------------------------
    def _expr(self, e: ast.expr | None, st: _Frame) -> Any:
        if e is None:
            return TOP
        if isinstance(e, ast.Constant):
            try:
                return consts(e.value)
            except TypeError:
                return TOP
        if isinstance(e, ast.Name):
            if e.id in st.env:
                return st.env[e.id]
            value = st.facts.consts.get(e.id)
            if value is not None and st.const_depth < CONST_DEPTH:
                st.const_depth += 1
                try:
                    return self._expr(value, _Frame(st.facts, {}, st.depth, st.via, st.const_depth))
                finally:
                    st.const_depth -= 1
            return TOP
        if isinstance(e, (ast.Tuple, ast.List)):
            parts = [self._expr(x, st) for x in e.elts]
            if all(isinstance(p, frozenset) and len(p) == 1 for p in parts):
                try:
                    return consts(tuple(next(iter(p)) for p in parts))
                except TypeError:
                    return TOP
            return tuple(parts) if isinstance(e, ast.Tuple) else list(parts)
        if isinstance(e, ast.Dict):
            items: dict[Any, Any] = {}
            open_ = False
            for k, v in zip(e.keys, e.values):
                if k is None:
                    other = self._expr(v, st)
                    if isinstance(other, _Dict):
                        items.update(other.items)
                        open_ = open_ or other.open
                    else:
                        open_ = True
                    continue
                key = self._expr(k, st)
                if isinstance(key, frozenset) and len(key) == 1:
                    items[next(iter(key))] = self._expr(v, st)
                else:
                    open_ = True
            return _Dict(items, open_)
        if isinstance(e, ast.IfExp):
            truth = _truth(self._expr(e.test, st))
            if truth is True:
                return self._expr(e.body, st)
            if truth is False:
                return self._expr(e.orelse, st)
            return _join(self._expr(e.body, st), self._expr(e.orelse, st))
        if isinstance(e, ast.Compare) and len(e.ops) == 1:
            op = COMPARE[type(e.ops[0])]
            if op is None:
                return TOP
            return _pairwise(op, self._expr(e.left, st), self._expr(e.comparators[0], st))
        if isinstance(e, ast.BinOp):
            op = BINARY[type(e.op)]
            return _pairwise(op, self._expr(e.left, st), self._expr(e.right, st)) if op else TOP
        if isinstance(e, ast.UnaryOp):
            v = self._expr(e.operand, st)
            if isinstance(e.op, ast.Not):
                t = _truth(v)
                return TOP if t is None else consts(not t)
            unary = UNARY[type(e.op)]
            if unary is None or not isinstance(v, frozenset):
                return TOP
            out = frozenset(unary(x) for x in v)
            return TOP if UNKNOWN in out else out
        if isinstance(e, ast.BoolOp):
            vals = [_truth(self._expr(x, st)) for x in e.values]
            if isinstance(e.op, ast.And):
                if any(v is False for v in vals):
                    return consts(False)
                return consts(True) if all(v is True for v in vals) else TOP
            if any(v is True for v in vals):
                return consts(True)
            return consts(False) if all(v is False for v in vals) else TOP
        if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name):
            d = st.env.get(e.value.id)
            key = self._expr(e.slice, st)
            if isinstance(d, _Dict) and isinstance(key, frozenset) and len(key) == 1:
                return d.items.get(next(iter(key)), TOP)
            return TOP
        if isinstance(e, ast.Call):
            return self._call(e, st)
        return TOP

    def _call(self, e: ast.Call, st: _Frame) -> Any:
        f = e.func
        if isinstance(f, ast.Call):  # ``Conv2D(..)(x)``: a layer applied to a tensor
            layer = self._call(f, st)
            applied = [self._expr(a, st) for a in e.args[:1]]
            if isinstance(layer, Layer) and applied and applied[0] is INPUT:
                self.fed.append(layer)
            return TOP
        # dict.get on a tracked keyword dict
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.attr == "get":
            d = st.env.get(f.value.id)
            if isinstance(d, _Dict) and e.args:
                key = self._expr(e.args[0], st)
                default = self._expr(e.args[1], st) if len(e.args) > 1 else consts(None)
                if isinstance(key, frozenset) and len(key) == 1:
                    k = next(iter(key))
                    if k in d.items:
                        return d.items[k]
                    return _join(default, TOP) if d.open else default
                return TOP
        dotted = ast_dotted(f)
        if dotted is None:
            return TOP
        if dotted in st.env:
            return TOP  # a local callable: not followed
        args: list[Any] = []
        for a in e.args:
            if isinstance(a, ast.Starred):
                v = self._expr(a.value, st)
                if isinstance(v, tuple):
                    args.extend(v)
                    continue
                return self._unknown_call(dotted, st)
            args.append(self._expr(a, st))
        kwargs: dict[str, Any] = {}
        for k in e.keywords:
            if k.arg is None:
                v = self._expr(k.value, st)
                if isinstance(v, _Dict):
                    kwargs.update(v.items)
                    if v.open:
                        kwargs["**"] = TOP
                else:
                    kwargs["**"] = TOP
            else:
                kwargs[k.arg] = self._expr(k.value, st)
        last = dotted.rsplit(".", 1)[-1]
        if last in _COMPOSERS or last == "Sequential":
            first = args[0] if args else TOP
            if last == "Sequential" and isinstance(first, list):
                first = first[0] if first else TOP
            return first if isinstance(first, Layer) else TOP
        return self.call(st.facts, dotted, args, kwargs, st.depth, st.via)

    def _unknown_call(self, dotted: str, st: _Frame) -> Any:
        return TOP


class _Frame:
    def __init__(self, facts: ModuleFacts, env: dict[str, Any], depth: int, via: tuple[str, ...], const_depth: int = 0) -> None:
        self.facts = facts
        self.env = env
        self.depth = depth
        self.via = via
        self.const_depth = const_depth
        self.returns: list[Any] = []
        self.done = False

    def fork(self) -> _Frame:
        env = {k: (_Dict(dict(v.items), v.open) if isinstance(v, _Dict) else v) for k, v in self.env.items()}
        return _Frame(self.facts, env, self.depth, self.via, self.const_depth)

    def merge(self, a: _Frame, b: _Frame) -> None:
        self.returns.extend(a.returns)
        self.returns.extend(b.returns)
        live = [x for x in (a, b) if not x.done]
        if not live:
            self.done = True
            return
        if len(live) == 1:
            self.env = live[0].env
            return
        keys = set(a.env) | set(b.env)
        self.env = {k: _join(a.env.get(k, TOP), b.env.get(k, TOP)) for k in keys}


def _truth(v: Any) -> bool | None:
    if isinstance(v, frozenset) and v:
        ts = {bool(x) for x in v}
        if len(ts) == 1:
            return ts.pop()
    return None


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of a function body, nested blocks included, nested defs excluded
    (cheaper than ``ast.walk``, which also visits every expression node)."""
    for s in body:
        yield s
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        for name in ("body", "orelse", "finalbody"):
            sub = getattr(s, name, None)
            if isinstance(sub, list):
                yield from _statements(sub)
        for h in getattr(s, "handlers", ()) or ():
            yield from _statements(h.body)


def may_return_layer(fn: ast.FunctionDef) -> bool:
    """Cheap syntactic filter: a function whose every return applies a layer to a
    tensor (``return Activation("relu")(x)``) or returns a constant builds no layer
    object for its caller, so it is never interpreted."""
    answer = False
    # what each local name is assigned: a layer application (f(..)(x)) is a tensor
    tensors: dict[str, bool] = {}
    stmts = list(_statements(fn.body))
    for n in stmts:
        if isinstance(n, ast.Assign):
            applied = isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Call)
            for t in n.targets:
                if isinstance(t, ast.Name):
                    tensors[t.id] = tensors.get(t.id, True) and applied
    for n in stmts:
        if isinstance(n, ast.Return) and n.value is not None:
            v = n.value
            if isinstance(v, ast.Call) and not isinstance(v.func, ast.Call):
                answer = True
            elif isinstance(v, ast.Name):
                answer = not tensors.get(v.id, True) if v.id in tensors else False
            elif isinstance(v, (ast.IfExp, ast.Attribute)):
                answer = True
        if answer:
            break
    return answer


def built_layer(index: ProjectIndex, facts: ModuleFacts, dotted: str, args: list[Any], kwargs: dict[str, Any]) -> Layer | None:
    """The first framework layer a call of project function ``dotted`` builds, or None."""
    v = Interpreter(index).call(facts, dotted, args, kwargs)
    return v if isinstance(v, Layer) and v.via else None


def ops_fed(index: ProjectIndex, facts: ModuleFacts, dotted: str, args: list[Any], kwargs: dict[str, Any]) -> list[Layer]:
    """The framework ops a call of project function ``dotted`` applies directly to the
    argument given as :data:`INPUT` (a wrapper's ``tf.nn.conv2d(x, ..)`` or
    ``Conv2D(..)(x)``), each with its arguments as value sets; empty when none is seen."""
    interp = Interpreter(index)
    interp.call(facts, dotted, args, kwargs)
    return interp.fed
