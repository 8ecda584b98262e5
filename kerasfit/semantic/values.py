"""Values of expressions in one file: the values part of the semantic model.

One constant folder (``const``) with its budgets, and the questions built on it: the
values a name may take, the same-file call sites of a function and what each passes,
where a value comes from (``origins``, ``call_chain``, ``const_sources``). Every
question takes its node; a node is evaluated where it sits unless ``scopes`` say
otherwise.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import libcst as cst

from ..core.symbols import IMAGE_DATA_FORMAT_CALLS, SET_IMAGE_DATA_FORMAT_CALLS, STANDARDIZE_DATA_FORMAT
from .bridge import project_flag_default
from .folding import BINARY, BUILTIN_NAMES, UNARY, Budget, bounded, builtin
from .naming import Names
from .nodes import UNKNOWN, ScopeNode, string_key, dotted_name, get_arg, string_value
from .scopes import Binding, Scopes
from . import callsites, valueflow, valuesets
from .valueflow import Origin
from .views import CallSites, ParamValue

if TYPE_CHECKING:
    from .views import ModelView


class Values:
    """The file's constant folder and value questions."""

    __slots__ = ("_m", "scopes", "names", "module", "options", "_folds", "_call_sites", "budget", "_pinning", "_blocked")

    def __init__(self, model: ModelView, scopes: Scopes, names: Names) -> None:
        self._m = model
        self.scopes = scopes
        self.names = names
        self.module = model.module
        self.options = model.options
        self._folds: dict[tuple[int | str | bool | None, ...], tuple[Any, int, cst.CSTNode]] = {}  # see _memo_fold
        self._call_sites: dict[int, CallSites] = {}
        self.budget = Budget.for_file()  # of following values (kerasfit.semantic.folding)
        # inside ``every_construction``: why values were not followed, in the order met
        self._pinning: list[str] | None = None
        self._blocked: dict[tuple[int | str | bool | None, ...], str] = {}  # a pinned fold's key -> its first blocker

    def iterated_elements(self, node: cst.BaseExpression) -> list[cst.BaseExpression] | None:
        """``units`` in ``for units in HIDDEN:`` (or ``HIDDEN[i]`` with ``i`` a loop
        variable), ``HIDDEN`` a list or tuple literal, maybe bound once elsewhere (a
        module constant): the literal's elements, each a value ``node`` takes; else None."""
        scopes = self.scopes.scopes_of(node)
        if isinstance(node, cst.Name):
            b = self.scopes.lookup(node.value, scopes)
            loop = b.node if b is not None and b.kind == "other" else None
            if isinstance(loop, cst.For) and isinstance(loop.target, cst.Name) and loop.target.value == node.value:
                return self._literal_elements(loop.iter)
        elif isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            index = node.slice[0].slice.value
            b = self.scopes.lookup(index.value, scopes) if isinstance(index, cst.Name) else None
            if b is not None and b.kind == "other" and isinstance(b.node, cst.For):
                return self._literal_elements(node.value)
        return None

    def _literal_elements(self, node: cst.BaseExpression) -> list[cst.BaseExpression] | None:
        if isinstance(node, cst.Name):
            b = self.scopes.lookup(node.value, self.scopes.scopes_of(node))
            node = b.value if b is not None and b.kind == "assign" and b.value is not None else node
        if isinstance(node, (cst.List, cst.Tuple)) and not any(isinstance(e, cst.StarredElement) for e in node.elements):
            return [e.value for e in node.elements]
        return None

    def binding_value(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        """For a Name bound once to an expression in a visible scope, that expression."""
        if isinstance(node, cst.Name):
            b = self.scopes.lookup(node.value, at=node)
            if b is not None and b.kind == "assign":
                return b.value
        return None

    # ---- memo and budget for following values ----------------------------------
    # Folding follows names into parameters and every call site of the function, so a
    # parameter threaded through helper levels that each call the next several times
    # is exponential without a memo (8 sites x 9 levels took minutes). Results are kept
    # per file, and every step of following is counted against ``self.budget``: once it
    # is spent the file's remaining questions are answered "not followed" (UNKNOWN / no
    # origin) at once.

    def _memo_fold(self, node: cst.BaseExpression, _depth: int, scopes: Sequence[ScopeNode]) -> Any:
        where: Sequence[ScopeNode] = scopes
        anchor: cst.CSTNode = node
        if isinstance(node, cst.Name):
            # every use of one binding folds alike: key on the binding, not the use (its
            # name too: `a, b = 5, 32` binds two names in one statement)
            b, where = self.scopes.lookup_in(node.value, scopes)
            if b is None:
                if not where or self.scopes.rebound_reaching(node) is None:  # unbound here, or no one binding
                    return UNKNOWN
                # bound more than once: this use's own reaching binding decides
            else:
                anchor = b.node
        pins = self._pinning
        key = (pins is not None, id(anchor), node.value if isinstance(node, cst.Name) else None, *map(id, where))
        hit = self._folds.get(key)
        # an UNKNOWN found deeper (less depth left) may be known from higher up
        if hit is not None and hit[2] is anchor and (hit[0] is not UNKNOWN or hit[1] <= _depth):
            if pins is not None and key in self._blocked:
                pins.append(self._blocked[key])  # what blocked it the first time blocks it again
            return hit[0]
        if hit is not None and hit[1] == -1:
            return UNKNOWN  # a cycle: this value depends on itself
        self._folds[key] = (UNKNOWN, -1, anchor)
        met = len(pins) if pins is not None else 0
        try:
            value = self._const_ref(node, _depth, scopes)
        except BaseException:
            del self._folds[key]
            raise
        self._folds[key] = (value, _depth, anchor)
        if pins is not None and len(pins) > met:
            self._blocked[key] = pins[met]
        return value

    # ---- values at every construction -------------------------------------------
    @contextmanager
    def every_construction(self) -> Iterator[list[str]]:
        """Inside, ``const`` (and what is built on it) answers only with a value that holds
        wherever the code runs: a fix may rest on it. A parameter is followed only into a
        function private to the project whose every call is found (callsites.pinned_param),
        never to its default; a command-line flag, a config record's field or a dict passed
        in is not followed at all. The list yielded collects, in the order met, why a value
        was not followed ("`strides` is a parameter of `CBABlock`, …")."""
        outer = self._pinning
        pins: list[str] = []
        self._pinning = pins
        try:
            yield pins
        finally:
            self._pinning = outer
            if outer is not None:
                outer.extend(pins)

    def imported_elsewhere(self) -> bool:
        """Whether another file of the tree imports this one (a text checked alone: no)."""
        name = self._m.filename
        return bool(name) and not name.startswith("<") and self._m.project.imported_by_others(name)

    def _block(self, why: str) -> list[tuple[cst.BaseExpression | None, Sequence[ScopeNode]]]:
        if self._pinning is not None:
            self._pinning.append(why)
        return []

    # ---- constants ---------------------------------------------------------
    def const(self, node: cst.BaseExpression | None, _depth: int = 0, *, scopes: Sequence[ScopeNode] | None = None) -> Any:
        """Fold ``node`` to a Python value, or UNKNOWN.

        Names follow their single binding; a parameter folds to the value every same-file
        call site agrees on (its default where a site omits it, or where the function is
        never called here / escapes); ``self.x``, ``config.x``, ``FLAGS.x``, ``Class.x``
        and ``params['x']`` follow a single same-file definition (see :meth:`_deref`).
        ``scopes`` evaluates ``node`` as if it sat elsewhere (default: where it sits).
        """
        if node is None or _depth > self.budget.depth:
            return UNKNOWN
        if isinstance(node, cst.Integer):
            return int(node.value.replace("_", ""), 0)
        if isinstance(node, cst.Float):
            return float(node.value.replace("_", ""))
        if isinstance(node, cst.SimpleString):
            return string_value(node)
        if isinstance(node, cst.ConcatenatedString):
            v = node.evaluated_value
            return v if v is not None else UNKNOWN
        if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[node.value]
        if scopes is None:
            # (what the node folds to nests no scope: one chain serves the whole expression)
            scopes = self.scopes.scopes_of(node)
        if isinstance(node, (cst.Name, cst.Attribute, cst.Subscript)):
            return self._memo_fold(node, _depth, scopes)
        return self._const_rest(node, _depth, scopes)

    @bounded(lambda: UNKNOWN)
    def _const_ref(self, node: cst.BaseExpression, _depth: int, scopes: Sequence[ScopeNode]) -> Any:
        cands = self.deref(node, scopes)
        if not cands:
            return UNKNOWN
        value: Any = UNKNOWN
        for expr, where in cands:
            v = self.const(expr, _depth + 1, scopes=where)
            if v is UNKNOWN or (value is not UNKNOWN and (v != value or type(v) is not type(value))):
                return UNKNOWN
            value = v
        return value

    def _const_rest(self, node: cst.BaseExpression, _depth: int, scopes: Sequence[ScopeNode]) -> Any:
        if isinstance(node, cst.UnaryOperation):
            v = self.const(node.expression, _depth + 1, scopes=scopes)
            unary = UNARY[type(node.operator)]
            return UNKNOWN if unary is None else unary(v)
        if isinstance(node, cst.BinaryOperation):
            op = BINARY[type(node.operator)]
            if op is None:
                return UNKNOWN
            a = self.const(node.left, _depth + 1, scopes=scopes)
            if a is UNKNOWN:
                return UNKNOWN
            b = self.const(node.right, _depth + 1, scopes=scopes)
            return UNKNOWN if b is UNKNOWN else op(a, b)
        if isinstance(node, (cst.Tuple, cst.List)):
            out = []
            for el in node.elements:
                if isinstance(el, cst.StarredElement):
                    return UNKNOWN
                v = self.const(el.value, _depth + 1, scopes=scopes)
                if v is UNKNOWN:
                    return UNKNOWN
                out.append(v)
            return tuple(out) if isinstance(node, cst.Tuple) else out
        if isinstance(node, cst.Call):
            v = self._default_config_value(node, _depth, scopes)
            if v is not UNKNOWN:
                return v
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in BUILTIN_NAMES:
            if node.args and all(a.keyword is None and not a.star for a in node.args):
                v = builtin(node.func.value, [self.const(a.value, _depth + 1, scopes=scopes) for a in node.args])
                if v is not UNKNOWN and self.scopes.lookup_in(node.func.value, scopes)[0] is None:  # not shadowed in this file
                    return v
        return UNKNOWN

    def _default_config_value(self, call: cst.Call, _depth: int, scopes: Sequence[ScopeNode]) -> Any:
        """What a configuration query answers under Keras's defaults: ``image_data_format()``
        is 'channels_last' (or the one format this file sets), ``standardize_data_format(x)``
        is ``x`` lower-cased, or that default for None. Else UNKNOWN."""
        tail = (dotted_name(call.func) or "").rsplit(".", 1)[-1]
        if tail == STANDARDIZE_DATA_FORMAT:
            arg = get_arg(call, "data_format", 0)
            v = self.const(arg.value, _depth + 1, scopes=scopes) if arg is not None else None
            if v is None:
                return self.image_data_format()
            return v.lower() if isinstance(v, str) else UNKNOWN
        if tail == "image_data_format" and not call.args and self.names.call_name_anywhere(call) in IMAGE_DATA_FORMAT_CALLS:
            return self.image_data_format()
        return UNKNOWN

    def image_data_format(self) -> Any:
        formats: frozenset[Any] = self._m.file_fact("image_data_format", _set_image_data_formats)
        if not formats:
            return "channels_last"
        return next(iter(formats)) if len(formats) == 1 else UNKNOWN

    def int_const(self, node: cst.BaseExpression | None) -> int | None:
        v = self.const(node)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        if isinstance(v, float) and v.is_integer():
            return int(v)
        return None

    # ---- what may give a name, attribute or subscript its value ---------------------
    def deref(self, node: cst.BaseExpression, scopes: Sequence[ScopeNode]) -> list[tuple[cst.BaseExpression | None, Sequence[ScopeNode]]]:
        """The expressions that may give ``node`` its value, each with its scopes.

        Empty when unknown. An entry's expression is None when a site's value is not
        visible (``*args``).
        """
        if isinstance(node, cst.Name):
            b, where = self.scopes.lookup_in(node.value, scopes)
            if b is None:
                found = self.scopes.rebound_reaching(node) if where else None
                if found is None:
                    return []
                b, where = found
            if b.kind == "assign":
                return [(b.value, where)]
            if b.kind == "param" and self.options.get("const_through_defaults", True):
                func = where[0] if where else None
                if isinstance(func, (cst.FunctionDef, cst.Lambda)) and isinstance(b.node, cst.Param):
                    if self._pinning is not None:
                        pinned, why = callsites.pinned_param(self, func, b.node)
                        return pinned if why is None else self._block(why)
                    return callsites.param_candidates(self, func, b.node)
            return []
        if isinstance(node, cst.Attribute):
            return self._attr_candidates(node, scopes)
        if isinstance(node, cst.Subscript):
            return self._subscript_candidates(node, scopes)
        return []

    # ---- parameters and call sites -------------------------------------------
    def call_sites(self, func: cst.FunctionDef | cst.ClassDef) -> CallSites:
        """Same-file calls of a function (or of a method through ``self.m(...)``, or of
        a class, whose sites feed ``__init__``).

        ``complete`` is False when the function is also used as a value (passed to
        ``map``, stored, subclassed, decorated by something unknown, called on another
        receiver), so the sites seen may not be all of them.
        """
        key = id(func)
        hit = self._call_sites.get(key)
        if hit is None:
            hit = self._call_sites[key] = callsites.find_call_sites(self, func)
        return hit

    def param_values(self, func: cst.FunctionDef | cst.Lambda, param: str | cst.Param) -> list[ParamValue]:
        """What each same-file call site passes for ``param`` of ``func`` (one ParamValue
        per site, ``const`` folded in the caller's scope; see callsites.param_values).
        Pair with :meth:`call_sites` to know whether the list is complete."""
        return callsites.param_values(self, func, param)

    # ---- attributes and subscripts -------------------------------------------
    def _attr_candidates(self, node: cst.Attribute, scopes: Sequence[ScopeNode]) -> list[tuple[cst.BaseExpression | None, Sequence[ScopeNode]]]:
        dotted = dotted_name(node)
        if dotted is None:
            return []
        head, _, rest = dotted.partition(".")
        if head in ("self", "cls"):
            return self._member_candidates(dotted, rest, scopes)
        b, where = self.scopes.lookup_in(head, scopes)
        if where and not isinstance(where[0], cst.Module):
            return []  # a local or a parameter: which object it is depends on the caller
        stores: list[tuple[cst.BaseExpression | None, Sequence[ScopeNode]]]
        stores = [(v, w) for v, w in self.scopes.index.attr_stores.get(dotted, ()) if self._is_global(head, w)]
        if stores:
            return stores if len(stores) == 1 else []
        if b is None or b.kind == "import":
            if self.names.imports.get(head, "").endswith("FLAGS") and "." not in rest:
                return self._flag_default(rest)
            return []
        return self._global_attr(b, where, dotted, rest)

    def _member_candidates(self, dotted: str, rest: str, scopes: Sequence[ScopeNode]) -> list[tuple[cst.BaseExpression | None, Sequence[ScopeNode]]]:
        """``self.x`` / ``cls.x`` inside a class: its one store (``self.x = ...``) or class
        attribute."""
        cls = next((s for s in scopes if isinstance(s, cst.ClassDef)), None)
        if cls is None:
            return []
        idx = self.scopes.index
        found: list[tuple[cst.BaseExpression | None, Sequence[ScopeNode]]]
        found = [(v, w) for v, w in idx.attr_stores.get(dotted, ()) if cls in w]
        if "." not in rest:
            for cb in self.scopes.scope_index(cls).bindings.get(rest, ()):
                if self._pinning is not None and not found and not cls.name.value.startswith("_"):
                    return self._block(f"`{dotted}` is a class attribute of `{cls.name.value}`, which a subclass "
                                       "or a caller may set to another value")
                found.append((cb.value if cb.kind == "assign" else None, (cls, *idx.scopes_of(cls))))
        return found if len(found) == 1 else []

    def _global_attr(self, b: Binding, where: Sequence[ScopeNode], dotted: str,
                     rest: str) -> list[tuple[cst.BaseExpression | None, Sequence[ScopeNode]]]:
        """``C.x`` of a module-level class, ``FLAGS.x``, ``cfg.x`` of a config record bound
        at module level (``b``, living in ``where``)."""
        if isinstance(b.node, cst.ClassDef) and "." not in rest:  # (kind "class")
            inner = self.scopes.scope_index(b.node).bindings.get(rest, ())
            if len(inner) == 1 and inner[0].kind == "assign":
                return [(inner[0].value, (b.node, *where))]
            return []
        if b.kind == "assign" and isinstance(b.value, cst.Call):
            d = dotted_name(b.value.func) or ""
            if d.endswith("FLAGS"):
                return self._flag_default(rest)
            if "." not in rest and self._is_record_ctor(b.value, where):
                if self._pinning is not None:
                    return self._block(f"`{dotted}` is a field of a config object, which the program may set")
                kw = get_arg(b.value, rest)
                return [(kw.value, where)] if kw is not None else []
        if b.kind == "assign" and b.value is not None and (dotted_name(b.value) or "").endswith("FLAGS") and "." not in rest:
            return self._flag_default(rest)
        return []

    def _is_global(self, head: str, scopes: Sequence[ScopeNode]) -> bool:
        b, where = self.scopes.lookup_in(head, scopes)
        return not where or isinstance(where[0], cst.Module)

    def _is_record_ctor(self, call: cst.Call, scopes: Sequence[ScopeNode]) -> bool:
        """``HParams(a=1)``, ``ConfigDict(...)``, ``SimpleNamespace(...)``, ``Namespace(...)``."""
        d = dotted_name(call.func) or ""
        return d.rsplit(".", 1)[-1] in _RECORD_CTORS

    def _flag_default(self, name: str) -> list[tuple[cst.BaseExpression | None, Sequence[ScopeNode]]]:
        if self._pinning is not None:
            return self._block(f"`FLAGS.{name}` is a command-line flag: its default is not its value at every run")
        defs = self.scopes.index.flag_defaults.get(name, ())
        if not defs:
            # defined in a project module this file imports (a shared flags module)
            default = project_flag_default(self._m, name)
            return [(default, (self.module,))] if default is not None else []
        return list(defs) if len(defs) == 1 else []

    def _subscript_candidates(self, node: cst.Subscript, scopes: Sequence[ScopeNode]) -> list[tuple[cst.BaseExpression | None, Sequence[ScopeNode]]]:
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return []
        key_node = node.slice[0].slice.value
        if not isinstance(key_node, cst.SimpleString):
            return []
        key = key_node.evaluated_value
        base = dotted_name(node.value)
        if base is None or not isinstance(key, str):
            return []
        idx = self.scopes.index
        head = base.split(".")[0]
        b, where = self.scopes.lookup_in(head, scopes) if "." not in base else (None, ())
        found: list[tuple[cst.BaseExpression | None, Sequence[ScopeNode]]] = list(idx.subscript_stores.get((base, key), ()))
        if b is None and where:
            return found if len(found) == 1 else []  # bound more than once
        if b is not None and b.kind == "assign" and "." not in base:
            entry = _dict_entry(b.value, key)
            if entry is not None:
                found.append((entry, where))
            elif not _is_dict_ctor(b.value):
                return found if len(found) == 1 else []
        elif b is None or b.kind == "param":
            if self._pinning is not None:
                return self._block(f"`{base}[{key!r}]` is read from a dict handed in, which callers fill")
            # ``params['batch_size']`` in a model_fn / input_fn: the dicts this file defines
            found.extend(idx.dict_keys.get(key, ()))
        if not found:
            return []
        return found

    def same_file_function(self, func: cst.BaseExpression, scopes: Sequence[ScopeNode]) -> cst.FunctionDef | None:
        if isinstance(func, cst.Name):
            b, _ = self.scopes.lookup_in(func.value, scopes)
            if b is not None and b.kind == "def" and isinstance(b.node, cst.FunctionDef):
                return b.node
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            cls = next((s for s in scopes if isinstance(s, cst.ClassDef)), None)
            if cls is not None:
                bs = self.scopes.scope_index(cls).bindings.get(func.attr.value)
                if bs and len(bs) == 1 and isinstance(bs[0].node, cst.FunctionDef):  # (kind "def")
                    return bs[0].node
        return None


    # ---- the value questions of kerasfit.semantic.valueflow / valuesets -------------
    def possible_values(self, node: cst.BaseExpression | None) -> frozenset[Any] | None:
        """``const`` lifted to a set of possible values (branches, conditional bindings)."""
        return valuesets.possible_values(self, node)

    def off_by_default(self, node: cst.CSTNode) -> cst.BaseExpression | None:
        """The ``if`` test that switches ``node`` off when parameters keep their defaults."""
        return valuesets.off_by_default(self, node)

    def origins(self, expr: cst.BaseExpression) -> list[Origin]:
        """Every call that may have produced ``expr``'s value (valueflow.origins)."""
        return valueflow.origins(self, expr)

    def origin(self, expr: cst.BaseExpression) -> Origin | None:
        """The one producer of ``expr``: the first of :meth:`origins` when every path
        agrees on the callee's canonical name (e.g. both branches of an ``if`` call
        ``tf.pad``), else None. ``conditional`` is set when a path bypasses it."""
        os_ = self.origins(expr)
        if not os_ or os_[0].name is None or any(o.name != os_[0].name for o in os_):
            return None
        return os_[0]._replace(conditional=any(o.conditional for o in os_))

    def origin_call(self, expr: cst.BaseExpression) -> cst.Call | None:
        """Shorthand: the call that produced ``expr`` (see :meth:`origin`)."""
        o = self.origin(expr)
        return o.call if o is not None else None

    def call_chain(self, expr: cst.BaseExpression) -> list[cst.Call]:
        """The method chain ending at ``expr``, root call first (valueflow.call_chain)."""
        return valueflow.call_chain(self, expr)

    def const_sources(self, expr: cst.BaseExpression) -> list[cst.BaseExpression]:
        """The expressions a value comes from (valueflow.const_sources)."""
        return valueflow.const_sources(self, expr)

    def function_defined_as(self, expr: cst.BaseExpression, scopes: Sequence[ScopeNode] | None = None) -> cst.FunctionDef | None:
        """The same-file ``def`` a name (or ``self.method``) refers to, seen from ``scopes``
        (default: where ``expr`` is)."""
        return self.same_file_function(expr, self.scopes.index.scopes_of(expr) if scopes is None else scopes)


# ``cfg = HParams(batch_size=64)``: attribute reads fold to the keyword's value.
_RECORD_CTORS = frozenset({"HParams", "ConfigDict", "FrozenConfigDict", "SimpleNamespace", "Namespace", "EasyDict", "edict", "Bunch", "AttrDict"})
def _set_image_data_formats(ctx: ModelView) -> frozenset[Any]:
    """The formats this file passes to ``set_image_data_format`` (UNKNOWN for one it
    computes), so that ``image_data_format()`` is folded only where the file keeps the
    default or sets a single constant."""
    out: set[Any] = set()
    for call, _scopes in ctx.index.calls:
        if ctx.names.call_name_anywhere(call) in SET_IMAGE_DATA_FORMAT_CALLS:
            arg = get_arg(call, "data_format", 0)
            out.add(ctx.values.const(arg.value, scopes=ctx.scopes.scopes_of(arg.value)) if arg is not None else UNKNOWN)
    return frozenset(out)


def _dict_entry(value: cst.BaseExpression | None, key: str) -> cst.BaseExpression | None:
    """``{'k': v}`` / ``dict(k=v)`` → v."""
    if isinstance(value, cst.Dict):
        for el in value.elements:
            if isinstance(el, cst.DictElement) and string_key(el.key) == key:
                return el.value
    elif _is_dict_ctor(value):
        kw = get_arg(value, key)  # type: ignore[arg-type]
        return kw.value if kw is not None else None
    return None


def _is_dict_ctor(value: cst.BaseExpression | None) -> bool:
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict"
