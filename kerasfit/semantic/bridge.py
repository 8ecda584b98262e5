"""From a libcst call site in the checked file to the ast-level analyses of the index;
the layers part of the semantic model (``Layers``) asks through it."""

from __future__ import annotations

import ast
import os
from typing import TYPE_CHECKING, Any, Hashable, Sequence

import libcst as cst

from ..core.symbols import ROOT_MODULES
from .nodes import dotted_name
from .summaries import INPUT, TOP, Layer, built_layer, may_return_layer, ops_fed
from .tensors import TensorNames
from .valueflow import returns

if TYPE_CHECKING:
    from .modulefacts import ModuleFacts
    from .model import SemanticModel


class Layers:
    """What the file's calls build and apply: framework layers made by project helpers
    (same file or another file of the tree), and the tensor-holding names of a function."""

    __slots__ = ("_m",)

    def __init__(self, model: SemanticModel) -> None:
        self._m = model

    def built_layer(self, call: cst.Call) -> Layer | None:
        """For a call of a project function (same file or another file of the tree), the
        first framework layer it builds (``semantic.summaries.Layer``: raw name, argument value
        sets, factories traversed), else None."""
        return built_layer_at(self._m, call)

    def layer_call_returns(self, ctor: cst.Call) -> list[cst.BaseExpression] | None:
        """For ``MyLayer(..)``, a call of a class of this file that defines ``call``: what
        that ``call`` method returns (the layer's output when applied), else None."""
        if not isinstance(ctor.func, cst.Name):
            return None
        scopes = self._m.scopes
        b = scopes.lookup(ctor.func.value, scopes.scopes_of(ctor))
        if b is None or b.kind != "class" or not isinstance(b.node, cst.ClassDef):
            return None
        for stmt in b.node.body.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "call":
                return list(returns(stmt))
        return None

    def imported_zero_pad_layer(self, ctor: cst.Call) -> bool:
        """``Pad(1)``, ``Pad`` a layer class of another project module whose ``call`` is a
        zero pad of its input."""
        return project_zero_pad_layer(self._m, ctor)

    def ops_fed(self, call: cst.Call, arg: cst.Arg | None = None) -> list[Layer]:
        """For ``wrapper(x, ..)``, a call of a project function (same file or another file
        of the tree): the framework ops it applies directly to ``x`` (``tf.nn.conv2d(x, ..)``,
        ``Conv2D(..)(x)``), arguments as value sets, in the order met. ``arg``: the argument
        of ``call`` that is the tensor (``wrapper(inputs=x)``, ``wrapper("name", x)``);
        default the first positional one."""
        return ops_fed_at(self._m, call, arg)

    def unseen_project_callee(self, call: cst.Call) -> str | None:
        """For ``ops.pad(x, 1)`` with ``ops`` imported from the file's own package (a relative
        import, or a package whose name is a directory above the file) whose module is not
        in the tree kerasfit reads (or ``pad(x, 1)`` imported from such a module): the
        module's dotted name, else None. What such a callee
        does is unknown; only its name can tell (a rule that trusts a name says so)."""
        return unseen_project_module(self._m, call)

    def reached_from_model(self, func: cst.FunctionDef) -> bool:
        """Whether a function of this file is called from model/training code anywhere in the tree."""
        return self._m.project.reached_from_model(self._m.filename, func.name.value)

    def tensor_names(self, func: cst.FunctionDef | cst.Lambda) -> TensorNames:
        """The names of ``func`` that may hold TF tensors (semantic.tensors.TensorNames)."""
        cache = self._m.caches.tensor_names
        hit = cache.get(id(func))
        if hit is None or hit.fn is not func:
            hit = cache[id(func)] = TensorNames(self._m, func)
        return hit


def built_layer_at(ctx: SemanticModel, call: cst.Call) -> Layer | None:
    cache = ctx.caches.built_layers
    hit = cache.get(id(call))
    if hit is not None and hit[0] is call:
        return hit[1]
    out = _built_layer(ctx, call)
    cache[id(call)] = (call, out)
    return out


def _built_layer(ctx: SemanticModel, call: cst.Call) -> Layer | None:
    dotted = dotted_name(call.func)
    if dotted is None or ctx.names.call_name(call) is not None:
        return None
    head = dotted.split(".")[0]
    b = ctx.scopes.lookup(head, at=call)
    # a module-level def or an import; anything bound locally is not followed
    if b is not None and b.kind not in ("def", "import"):
        return None
    if b is None and head not in ctx.names.imports:
        return None
    if b is not None and b.kind == "def" and isinstance(b.node, cst.FunctionDef) and not _cst_may_return_layer(ctx, b.node):
        return None  # decided without parsing the file again
    facts = _facts(ctx)
    if facts is None:
        return None
    # only a name that leads to a project function is worth interpreting
    if not _project_function(ctx, facts, dotted):
        return None
    sym = ctx.project.local(facts, dotted)
    if sym is None or sym.node is None or not _project_may_return_layer(ctx, sym.node):
        return None
    called = _call_args(ctx, call.args)
    if called is None:
        return None  # positions unknown
    return built_layer(ctx.project, facts, dotted, *called)


def _project_function(ctx: SemanticModel, facts: ModuleFacts, dotted: str) -> bool:
    """Whether ``dotted`` names a project function (this file or another of the tree),
    once per spelling: most callees are asked about at many call sites."""
    known = ctx.caches.factory_callees
    hit = known.get(dotted)
    if hit is None:
        sym = ctx.project.local(facts, dotted)
        hit = known[dotted] = sym is not None and sym.kind == "function"
    return hit


def _call_args(ctx: SemanticModel, given: Sequence[cst.Arg]) -> tuple[list[Any], dict[str, Any]] | None:
    """The abstract values of a call's arguments, positional and by keyword; None when a
    ``*args`` leaves the positions unknown (a ``**kwargs`` may hold anything: TOP)."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for a in given:
        if a.star:
            if a.star == "*":
                return None
            kwargs["**"] = TOP
            continue
        v = _arg_value(ctx, a.value)
        if a.keyword is not None:
            kwargs[a.keyword.value] = v
        else:
            args.append(v)
    return args, kwargs


def ops_fed_at(ctx: SemanticModel, call: cst.Call, arg: cst.Arg | None = None) -> list[Layer]:
    """For ``wrapper(x, ..)``, a call of a project function (this or another file of the
    tree): the framework ops the wrapper applies directly to the argument ``arg`` (default:
    its first positional one)."""
    if arg is None:
        arg = call.args[0] if call.args and call.args[0].keyword is None and not call.args[0].star else None
        if arg is None:
            return []
    cache = ctx.caches.ops_fed
    key = (id(call), id(arg))
    hit = cache.get(key)
    if hit is not None and hit[0] is call:
        return hit[1]
    cache[key] = (call, [])  # a closure that calls itself ends here
    out = _ops_fed(ctx, call, arg)
    cache[key] = (call, out)
    return out


def _ops_fed(ctx: SemanticModel, call: cst.Call, arg: cst.Arg) -> list[Layer]:
    dotted = dotted_name(call.func)
    if dotted is None or ctx.names.call_name(call) is not None or arg.star:
        return []
    scopes = ctx.scopes.scopes_of(call)
    b = ctx.scopes.lookup(dotted.split(".")[0], scopes)
    if b is not None and b.kind not in ("def", "import"):
        return []
    if b is not None and isinstance(b.node, cst.FunctionDef) and len(ctx.scopes.scopes_of(b.node)) > 1 and dotted == b.node.name.value:
        return _closure_fed(ctx, b.node, _param_given(b.node, call, arg))
    if b is None and dotted.split(".")[0] not in ctx.names.imports:
        return []
    facts = _facts(ctx)
    if facts is None or not _project_function(ctx, facts, dotted):
        return []
    called = _call_args(ctx, [a for a in call.args if a is not arg])
    if called is None:
        return []
    args, kwargs = called
    if arg.keyword is not None:
        kwargs[arg.keyword.value] = INPUT
    else:
        args.insert(sum(1 for a in call.args[: call.args.index(arg)] if a.keyword is None), INPUT)
    # a wrapper called again with the same argument values feeds the same ops: interpret it once
    try:
        key: Hashable = (dotted, tuple(args), tuple(sorted(kwargs.items())))
        hash(key)
    except TypeError:
        return ops_fed(ctx.project, facts, dotted, args, kwargs)
    memo = ctx.caches.wrapper_ops
    if key not in memo:
        memo[key] = ops_fed(ctx.project, facts, dotted, args, kwargs)
    return list(memo[key])


def _param_given(fn: cst.FunctionDef, call: cst.Call, arg: cst.Arg) -> str | None:
    """The parameter of ``fn`` that ``arg`` of ``call`` binds."""
    if arg.keyword is not None:
        return arg.keyword.value
    pos = sum(1 for a in call.args[: call.args.index(arg)] if a.keyword is None)
    params = [*fn.params.posonly_params, *fn.params.params]
    return params[pos].name.value if pos < len(params) else None


def _closure_fed(ctx: SemanticModel, fn: cst.FunctionDef, param: str | None) -> list[Layer]:
    """A function defined inside another (a closure the project index does not summarise):
    the ops fed by the project calls in its body that take its parameter ``param``."""
    if param is None:
        return []
    out: list[Layer] = []
    for inner in _calls(fn.body):
        for a in inner.args:
            if isinstance(a.value, cst.Name) and a.value.value == param and not a.star:
                out.extend(ops_fed_at(ctx, inner, a))
                break
    return out


class _CallsOfBody(cst.CSTVisitor):
    """Collects the calls of a body, nested defs and classes excluded (a module-level
    class: one made per call is a reference cycle, and a class built each time)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[cst.Call] = []

    def visit_Call(self, c: cst.Call) -> None:
        self.found.append(c)

    def visit_FunctionDef(self, d: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, d: cst.ClassDef) -> bool:
        return False


def _calls(node: cst.CSTNode) -> list[cst.Call]:
    """The calls in a function body, nested defs and classes excluded."""
    collect = _CallsOfBody()
    node.visit(collect)
    return collect.found


def unseen_project_module(ctx: SemanticModel, call: cst.Call) -> str | None:
    dotted = dotted_name(call.func)
    if dotted is None or ctx.names.call_name(call) is not None:
        return None
    first, _, rest = dotted.partition(".")
    raw = ctx.names.imports.get(first)
    b = ctx.scopes.lookup(first, at=call)
    if raw is None or b is None or b.kind != "import":
        return None
    # ``ops.pad`` (``from pkg import ops``) or ``pad`` itself (``from pkg.ops import pad``)
    module, _, member = (f"{raw}.{rest}" if rest else raw).rpartition(".")
    if not module.strip("."):
        return None
    filename = ctx.filename
    if not filename or filename.startswith("<"):
        return None
    if not module.startswith("."):
        top = module.split(".")[0]
        if top in ROOT_MODULES or top not in os.path.abspath(filename).split(os.sep)[:-1]:
            return None  # a library, not the project's own package
    if ctx.project.resolve(filename, f"{module}.{member}") is not None or ctx.project.module_file(filename, module) is not None:
        return None  # kerasfit reads it: what it does is known, not guessed from its name
    return module


def project_flag_default(ctx: SemanticModel, name: str) -> cst.BaseExpression | None:
    """The literal default of absl flag ``name`` defined in a project module the file
    imports, as an expression (a number, string or bool), else None."""
    facts = _facts(ctx)
    expr = ctx.project.flag_default(facts, name) if facts is not None else None
    if not isinstance(expr, ast.Constant) or not isinstance(expr.value, (int, float, str, bool)):
        return None
    return cst.parse_expression(repr(expr.value))


def project_zero_pad_layer(ctx: SemanticModel, ctor: cst.Call) -> bool:
    """``Pad(1)`` with ``Pad`` imported from another project module whose ``call`` is a
    zero pad of its input (see :meth:`ProjectIndex.zero_pad_layer`)."""
    dotted = dotted_name(ctor.func)
    if dotted is None or dotted.split(".")[0] not in ctx.names.imports:
        return False
    facts = _facts(ctx)
    return facts is not None and ctx.project.zero_pad_layer(facts, dotted)


def project_makes_tpu(ctx: SemanticModel, call: cst.Call) -> bool:
    """``strategy = tpu_lib.get_strategy()``: a call of a project function of another
    module that sets up a TPU (see :meth:`ProjectIndex.makes_tpu`)."""
    dotted = dotted_name(call.func)
    if dotted is None or dotted.split(".")[0] not in ctx.names.imports or ctx.names.call_name_anywhere(call) is not None:
        return False
    # asked of every call of a file that may use a TPU: answered once per spelling
    known = ctx.caches.tpu_makers
    hit = known.get(dotted)
    if hit is None:
        facts = _facts(ctx)
        hit = known[dotted] = facts is not None and ctx.project.makes_tpu(facts, dotted)
    return hit


def _facts(ctx: SemanticModel) -> ModuleFacts | None:
    """The checked file's own index facts (its source parsed once with ``ast``)."""
    caches = ctx.caches
    if not caches.index_facts_read:
        caches.index_facts = ctx.project.facts(ctx.filename or "<string>", source=ctx.source)
        caches.index_facts_read = True
    facts: ModuleFacts | None = caches.index_facts
    return facts


def _arg_value(ctx: SemanticModel, expr: cst.BaseExpression) -> Any:
    # a parameter of the caller stays unknown here: folding it through every call
    # site of the caller costs more than a factory summary is worth
    if isinstance(expr, cst.Name):
        b = ctx.scopes.lookup(expr.value, at=expr)
        if b is None or b.kind == "param":
            return TOP
    vals = ctx.values.possible_values(expr)
    return vals if vals is not None else TOP


def _project_may_return_layer(ctx: SemanticModel, fn: ast.FunctionDef) -> bool:
    cache = ctx.caches.project_may_return_layer
    hit = cache.get(id(fn))
    if hit is None or hit[0] is not fn:
        hit = cache[id(fn)] = (fn, may_return_layer(fn))
    return hit[1]


def _cst_may_return_layer(ctx: SemanticModel, fn: cst.FunctionDef) -> bool:
    cache = ctx.caches.may_return_layer
    hit = cache.get(id(fn))
    if hit is not None and hit[0] is fn:
        return hit[1]
    answer = _cst_scan(fn)
    cache[id(fn)] = (fn, answer)
    return answer


def _cst_scan(fn: cst.FunctionDef) -> bool:
    """``summaries.may_return_layer`` on the libcst tree: some ``return`` hands back a call
    that is not a layer application, a conditional or a name (same cheap filter)."""
    stack: list[Sequence[cst.BaseStatement | cst.BaseSmallStatement]] = [fn.body.body]
    while stack:
        for stmt in stack.pop():
            if isinstance(stmt, cst.SimpleStatementLine):
                if any(_hands_back_maker(small) for small in stmt.body):
                    return True
            elif isinstance(stmt, cst.Return):  # in a one-line suite: ``if c: return f()``
                if _hands_back_maker(stmt):
                    return True
            elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                continue
            else:
                for name in ("body", "orelse", "finalbody"):
                    sub = getattr(stmt, name, None)
                    if isinstance(sub, cst.If):  # an ``elif``: a statement, not a block
                        stack.append((sub,))
                    elif isinstance(sub, (cst.Else, cst.Finally)):
                        stack.append(sub.body.body)
                    elif isinstance(sub, (cst.IndentedBlock, cst.SimpleStatementSuite)):
                        stack.append(sub.body)
                for h in getattr(stmt, "handlers", ()) or ():
                    stack.append(h.body.body)
    return False


def _hands_back_maker(small: cst.BaseSmallStatement) -> bool:
    if isinstance(small, cst.Return) and small.value is not None:
        v = small.value
        if isinstance(v, cst.Call) and not isinstance(v.func, cst.Call):
            return True
        if isinstance(v, (cst.Name, cst.IfExp, cst.Attribute)):
            return True
    return False
