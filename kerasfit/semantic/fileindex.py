"""The file index: one walk of a module recording parents, source order, scopes and the
references, stores and calls the model's questions look up (public: ``ctx.index``), and
each statement's nodes in the order met, which the engine's rule walk replays rather than
walk again."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

import libcst as cst

from .nodes import _IS_NODE, ScopeNode, string_key, child_fields, dotted_name, get_arg, is_node

# ``flags.DEFINE_integer("batch_size", 64, ...)``: the flag's default is its value.
from ..core.symbols import FLAG_DEFINERS

# ``nodes.child_fields`` by node type, last field first (the walk's stack takes them so)
_FIELDS_BACK: dict[type, tuple[str, ...]] = {}


class FileIndex:
    """One walk of a module: parents, source order, and the facts reach needs."""

    def __init__(self, module: cst.Module, root: cst.CSTNode | None = None, *, build: bool = True) -> None:
        """The index of ``module``; with ``root``, of that node alone; with ``build=False``,
        empty (``indexparts.join_parts`` fills it from the statements' kept indexes)."""
        self.module = module
        self.parent: dict[int, cst.CSTNode] = {}
        self.order: dict[int, int] = {}
        # each top-level statement's nodes in source order (pre-order, the statement first),
        # which the engine's rule walk replays; a statement's own index: its one run
        self.runs: list[list[cst.CSTNode]] = []
        self.calls: list[tuple[cst.Call, tuple[ScopeNode, ...]]] = []
        # each reference with the call whose callee it is (None when not called)
        self.name_refs: dict[str, list[tuple[cst.Name, cst.Call | None, tuple[ScopeNode, ...]]]] = {}
        self.attr_refs: dict[str, list[tuple[cst.Attribute, cst.Call | None, tuple[ScopeNode, ...]]]] = {}
        self.attr_stores: dict[str, list[tuple[cst.BaseExpression | None, tuple[ScopeNode, ...]]]] = {}
        self.subscript_stores: dict[tuple[str, str], list[tuple[cst.BaseExpression | None, tuple[ScopeNode, ...]]]] = {}
        self.dict_keys: dict[str, list[tuple[cst.BaseExpression, tuple[ScopeNode, ...]]]] = {}
        self.flag_defaults: dict[str, list[tuple[cst.BaseExpression, tuple[ScopeNode, ...]]]] = {}
        self.method_class: dict[int, cst.ClassDef] = {}
        self.functions: list[cst.FunctionDef | cst.Lambda] = []
        self.classes: list[cst.ClassDef] = []
        self._scope_cache: dict[int, tuple[ScopeNode, ...]] = {}
        self._calls_cached = 0  # how many of ``calls`` are in ``_scope_cache``
        if build:
            self._build(root)

    def _build(self, root: cst.CSTNode | None = None) -> None:
        parent, order = self.parent, self.order
        nodes: list[cst.CSTNode] = []
        # a statement's own index (root) records scopes without the module: joined
        # indexes add the module of the day (kerasfit.indexparts)
        stack: list[tuple[cst.CSTNode, cst.CSTNode | None, tuple[ScopeNode, ...]]] = (
            [(self.module, None, (self.module,))] if root is None else [(root, None, ())]
        )
        # every node of the file passes here (~8% of a check): names bound locally, the
        # field lists and node types read from their caches without a call
        pop, push, add_node = stack.pop, stack.append, nodes.append
        fields_back, known = _FIELDS_BACK, _IS_NODE
        # what is recorded of a node, by its exact type (cheaper than isinstance on this hot
        # path); most nodes (arguments, statement lines, literals, ...) have nothing
        record: dict[type[cst.CSTNode], Callable[[Any, cst.CSTNode | None, tuple[ScopeNode, ...]], tuple[ScopeNode, ...] | None]] = {
            cst.Name: self._on_name, cst.Call: self._on_call, cst.Attribute: self._on_attribute,
            cst.Assign: self._on_assign, cst.AnnAssign: self._on_ann_assign, cst.AugAssign: self._on_aug_assign,
            cst.Dict: self._on_dict, cst.FunctionDef: self._on_function, cst.Lambda: self._on_function,
            cst.ClassDef: self._on_class,
        }
        n = 0
        while stack:
            node, par, scopes = pop()
            nid = id(node)
            if par is not None:
                parent[nid] = par
            order[nid] = n
            n += 1
            add_node(node)
            tp = type(node)
            on = record.get(tp)
            # the scopes a def's, class's or lambda's body sits in
            inner = on(node, par, scopes) if on is not None else None
            # children pushed last field first, each list from its end: popped in source order
            names = fields_back.get(tp)
            if names is None:
                names = fields_back[tp] = child_fields(tp)[::-1]
            for name in names:
                v = getattr(node, name)
                sc = inner if inner is not None and name == "body" else scopes
                tv = type(v)
                if tv is list or tv is tuple:
                    for c in reversed(v):
                        if known.get(type(c)) or is_node(c):
                            push((c, node, sc))
                elif v is not None and (known.get(tv) or is_node(v)):
                    push((v, node, sc))
        if root is None:
            starts = [order[id(st)] for st in self.module.body]
            self.runs = [nodes[a:b] for a, b in zip(starts, [*starts[1:], len(nodes)])]
        else:
            self.runs = [nodes]

    # ---- what the walk records, per node type (each returns the scopes of the node's body
    # when it opens a scope, else None) ---------------------------------------------
    def _on_attribute(self, node: cst.Attribute, par: cst.CSTNode | None, scopes: tuple[ScopeNode, ...]) -> None:
        call = par if type(par) is cst.Call and par.func is node else None
        self.attr_refs.setdefault(node.attr.value, []).append((node, call, scopes))

    def _on_assign(self, node: cst.Assign, par: cst.CSTNode | None, scopes: tuple[ScopeNode, ...]) -> None:
        for t in node.targets:
            self._on_store(t.target, node.value, scopes)

    def _on_ann_assign(self, node: cst.AnnAssign, par: cst.CSTNode | None, scopes: tuple[ScopeNode, ...]) -> None:
        self._on_store(node.target, node.value, scopes)

    def _on_aug_assign(self, node: cst.AugAssign, par: cst.CSTNode | None, scopes: tuple[ScopeNode, ...]) -> None:
        self._on_store(node.target, None, scopes)

    def _on_dict(self, node: cst.Dict, par: cst.CSTNode | None, scopes: tuple[ScopeNode, ...]) -> None:
        for el in node.elements:
            k = string_key(el.key) if isinstance(el, cst.DictElement) else None
            if k is not None:
                self.dict_keys.setdefault(k, []).append((el.value, scopes))

    def _on_function(self, node: cst.FunctionDef | cst.Lambda, par: cst.CSTNode | None,
                     scopes: tuple[ScopeNode, ...]) -> tuple[ScopeNode, ...]:
        self.functions.append(node)
        if type(node) is cst.FunctionDef and isinstance(par, cst.IndentedBlock):
            gp = self.parent.get(id(par))
            if isinstance(gp, cst.ClassDef):
                self.method_class[id(node)] = gp
        return (node, *scopes)

    def _on_class(self, node: cst.ClassDef, par: cst.CSTNode | None, scopes: tuple[ScopeNode, ...]) -> tuple[ScopeNode, ...]:
        self.classes.append(node)
        return (node, *scopes)

    def _on_call(self, node: cst.Call, par: cst.CSTNode | None, scopes: tuple[ScopeNode, ...]) -> None:
        self.calls.append((node, scopes))
        func = node.func
        attr = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        if attr in FLAG_DEFINERS and len(node.args) >= 2:
            name = string_key(get_arg(node, "name", 0).value)  # type: ignore[union-attr]
            default = get_arg(node, "default", 1)
            if name is not None and default is not None:
                self.flag_defaults.setdefault(name, []).append((default.value, scopes))
        elif attr == "dict" and isinstance(func, cst.Name):
            for a in node.args:
                if a.keyword is not None:
                    self.dict_keys.setdefault(a.keyword.value, []).append((a.value, scopes))

    def _on_name(self, node: cst.Name, par: cst.CSTNode | None, scopes: tuple[ScopeNode, ...]) -> None:
        # exact types (libcst's node classes have no subclasses): an isinstance against
        # libcst's ABC-based classes costs ~10x, and every Name of the file passes here
        tp = type(par)
        if (tp is cst.FunctionDef or tp is cst.ClassDef or tp is cst.Param) and par.name is node:  # type: ignore[union-attr]
            return
        if tp is cst.ImportAlias or tp is cst.AsName:
            return
        call = par if type(par) is cst.Call and par.func is node else None
        self.name_refs.setdefault(node.value, []).append((node, call, scopes))

    def _on_store(self, target: cst.BaseExpression, value: cst.BaseExpression | None, scopes: tuple[ScopeNode, ...]) -> None:
        if isinstance(target, cst.Attribute):
            d = dotted_name(target)
            if d is not None:
                self.attr_stores.setdefault(d, []).append((value, scopes))
        elif isinstance(target, cst.Subscript) and len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index):
            base, key = dotted_name(target.value), string_key(target.slice[0].slice.value)
            if base is not None and key is not None:
                self.subscript_stores.setdefault((base, key), []).append((value, scopes))

    # ---- queries ---------------------------------------------------------------
    def all_calls(self) -> Iterator[cst.Call]:
        """Every call of the file, in source order (public: rules ask it for file facts)."""
        return (call for call, _ in self.calls)

    def scopes_of(self, node: cst.CSTNode) -> tuple[ScopeNode, ...]:
        hit = self._scope_cache.get(id(node))
        if hit is not None:
            return hit
        if type(node) is cst.Call and self._calls_cached < len(self.calls):
            # the walk recorded every call's scopes: take them instead of climbing the
            # parents (name resolution asks this of most calls of the file)
            cache = self._scope_cache
            for call, scopes in self.calls[self._calls_cached:]:
                cache[id(call)] = scopes
            self._calls_cached = len(self.calls)
            hit = cache.get(id(node))
            if hit is not None:
                return hit
        out: list[ScopeNode] = []
        child, p = node, self.parent.get(id(node))
        while p is not None:
            if (type(p) is cst.FunctionDef or type(p) is cst.ClassDef or type(p) is cst.Lambda) and child is p.body:
                out.append(p)
            child, p = p, self.parent.get(id(p))
        out.append(self.module)
        res = tuple(out)
        tp = type(node)
        if tp is cst.FunctionDef or tp is cst.ClassDef or tp is cst.Lambda or tp is cst.Call:
            self._scope_cache[id(node)] = res
        return res

    def hosts(self, nodes: Iterable[cst.CSTNode]) -> dict[int, cst.CSTNode]:
        """Parents of nodes in the fields the walk does not descend into (``Attribute.attr``,
        ``Arg.keyword``, ``Arg.comma``): a finding on ``ds.batch`` is reported on ``batch``."""
        out: dict[int, cst.CSTNode] = {}
        for n in nodes:
            tp = type(n)
            if (tp is not cst.Name and tp is not cst.Comma) or id(n) in self.parent:
                continue
            host: cst.CSTNode | None = None
            if isinstance(n, cst.Name):
                host = next((a for a, _, _ in self.attr_refs.get(n.value, ()) if a.attr is n), None)
            if host is None:
                host = next((a for c, _ in self.calls for a in c.args if a.keyword is n or a.comma is n), None)
            if host is not None:
                out[id(n)] = host
        return out

    def def_scopes(self, node: cst.CSTNode) -> tuple[ScopeNode, ...]:
        """Where a def's defaults and decorators are evaluated: its enclosing scopes."""
        return self.scopes_of(node)

    def ancestors(self, node: cst.CSTNode) -> set[int]:
        out = set()
        p = self.parent.get(id(node))
        while p is not None:
            out.add(id(p))
            p = self.parent.get(id(p))
        return out

    def block_of(self, stmt: cst.CSTNode) -> cst.CSTNode | None:
        p = self.parent.get(id(stmt))
        while p is not None and not isinstance(p, (cst.IndentedBlock, cst.Module, cst.SimpleStatementSuite)):
            p = self.parent.get(id(p))
        return p

    def encloses_block_of(self, stmt: cst.CSTNode, use_ancestors: set[int]) -> bool:
        block = self.block_of(stmt)
        return block is not None and id(block) in use_ancestors
