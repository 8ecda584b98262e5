"""Imports and names of one file: the names part of the semantic model.

What a spelling in the file refers to — ``raw_name`` (the dotted name as imported),
``resolve`` / ``call_name`` (the canonical TF/Keras name, symbols.canonical) — asked
about a node, seen from where that node sits.
"""

from __future__ import annotations

from typing import Any, Collection, Iterator, Sequence

import libcst as cst

from ..core.symbols import ROOT_MODULES, UNBOUND_FRAMEWORK_NAMES, VENDORED_CLASSES, canonical, flavour, import_spelling
from .names import by_name, injected_submodule, star_names
from .nodes import CALLABLE_TYPES, SCOPE_TYPES, ScopeNode, dotted_name, iter_statements
from .scopes import Scopes, module_dotted
from .views import FileView, NameMemos

# exact node types on the hot paths (see nodes.dotted_name)
_Call = cst.Call
# how a head's base joins the rest of a dotted name (Names._head)
_PLAIN, _INJECTION, _INJECTED = object(), object(), object()


class Names:
    """The file's imports and what its names refer to."""

    __slots__ = ("module", "source", "filename", "caches", "_m", "_scopes", "_import_free",
                 "imports", "module_shadowed", "uses_legacy_keras", "_call_names", "_branches")

    def __init__(self, model: FileView, scopes: Scopes, *, import_free: Collection[int] = ()) -> None:
        """``import_free``: ids of top-level statements known to hold no import (the
        language server's), skipped when reading imports."""
        self._m = model
        self.module = model.module
        self.source = model.source
        self.filename = model.filename
        self.caches: NameMemos = model.caches
        self._scopes = scopes
        self._import_free = import_free
        # local name -> raw dotted name from imports (e.g. "L" -> "tensorflow.keras.layers")
        self.imports: dict[str, str] = {}
        # a name imported in branches (a backend chosen at import time): the spelling
        # ``imports`` keeps -> the other ones, tried when it is no framework name
        self._branches: dict[str, list[str]] = {}
        # names bound at module level by something other than an import
        self.module_shadowed: set[str] = set()
        self.uses_legacy_keras = False
        self._call_names: dict[int, tuple[cst.Call, str | None]] = {}
        self._scan_imports()

    def _bind(self, local: str, raw: str) -> None:
        """``local`` imported as ``raw``. Bound again in another branch (``if tf: import
        tensorflow as F`` / ``else: import torch as F``), the framework spelling is kept and
        the others are remembered for the project index (:meth:`framework_raw`)."""
        old = self.imports.get(local)
        if old is None or old == raw:
            self.imports[local] = raw
            return
        keep, other = (old, raw) if old.split(".")[0] in ROOT_MODULES else (raw, old)
        self.imports[local] = keep
        self._branches.setdefault(keep, []).append(other)

    def _scan_imports(self) -> None:
        module_index = self._scopes.scope_index(self.module)
        for stmt in self._all_import_statements():
            if isinstance(stmt, cst.Import):
                for alias in stmt.names:
                    full = import_spelling(module_dotted(alias.name))
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                        self._bind(alias.asname.name.value, full)
                    else:
                        top = module_dotted(alias.name).split(".")[0]
                        self.imports[top] = import_spelling(top)
            elif isinstance(stmt, cst.ImportFrom):
                if isinstance(stmt.names, cst.ImportStar) and not stmt.relative:
                    self._star_import(module_dotted(stmt.module))
                    continue
                if stmt.relative or isinstance(stmt.names, cst.ImportStar):
                    self._relative_import(stmt)
                    continue
                mod = import_spelling(module_dotted(stmt.module))
                for alias in stmt.names:
                    obj = module_dotted(alias.name)
                    local = obj
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                        local = alias.asname.name.value
                    self._bind(local, f"{mod}.{obj}")
        for name, bindings in module_index.bindings.items():
            if any(b.kind in ("def", "class") for b in bindings):
                self.module_shadowed.add(name)
            elif any(b.kind == "assign" for b in bindings) and name not in self.imports:
                self.module_shadowed.add(name)
        raws = set(self.imports.values())
        self.uses_legacy_keras = any(r.startswith(("tf_keras", "tensorflow.compat.v1")) for r in raws) or (
            "TF_USE_LEGACY_KERAS" in self.source
        )

    def _star_import(self, module: str) -> None:
        """``from keras.layers import *``: bind the framework's public names (a data table)."""
        for name in star_names(module) or ():
            self.imports.setdefault(name, f"{module}.{name}")

    def _relative_import(self, stmt: cst.ImportFrom) -> None:
        """``from .compat import layers``: kept with its dots; the project index resolves it."""
        if isinstance(stmt.names, cst.ImportStar):
            return
        dots = "." * len(stmt.relative)
        mod = dots + (module_dotted(stmt.module) if stmt.module is not None else "")
        for alias in stmt.names:
            obj = module_dotted(alias.name)
            local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else obj
            self._bind(local, f"{mod}{'' if mod.endswith('.') else '.'}{obj}")

    def _all_import_statements(self) -> Iterator[cst.CSTNode]:
        skip = self._import_free
        stack: list[Any] = [[st for st in self.module.body if id(st) not in skip] if skip else self.module.body]
        while stack:
            item = stack.pop()
            for stmt in iter_statements(item):
                tp = type(stmt)  # exact types: see nodes.dotted_name
                if tp is cst.Import or tp is cst.ImportFrom:
                    yield stmt
                elif tp is cst.FunctionDef or tp is cst.ClassDef:
                    stack.append(stmt.body)  # type: ignore[attr-defined]

    def raw_name(self, node: cst.BaseExpression, within: Sequence[cst.CSTNode] | None = None) -> str | None:
        """The fully-qualified dotted name an expression refers to, if it is imported.
        ``within``: the nodes enclosing the place ``node`` is seen from, outermost first
        (default: ``node``'s own ancestors)."""
        if type(node) is _Call:  # exact type: see nodes.dotted_name
            return None
        dotted = dotted_name(node)
        if dotted is None:
            return None
        if within is None:
            within = self._scopes.ancestors(node)
        # What a head stands for depends only on the defs, classes and lambdas around it,
        # which its innermost one determines: answer each (head, innermost scope) once.
        scope = None
        for s in reversed(within):
            if type(s) in SCOPE_TYPES:
                scope = s
                break
        return self._raw(dotted, scope, within)

    def _raw(self, dotted: str, scope: cst.CSTNode | None, within: Sequence[cst.CSTNode] | None,
             scopes: Sequence[ScopeNode] = ()) -> str | None:
        """:meth:`raw_name` of ``dotted`` seen from inside ``scope`` (the innermost def, class
        or lambda of ``within``, or None); ``within`` None: built from ``scopes`` (innermost
        first) when the head's meaning must be worked out."""
        head, _, rest = dotted.partition(".")
        key = (head, id(scope))
        memo = self.caches.heads
        hit = memo.get(key)
        if hit is None or hit[0] is not scope:
            if within is None:
                within = self._scopes.within(scopes)
            hit = memo[key] = [scope, *self._head(head, within)]
        base: str | None = hit[1]
        how = hit[2]
        if how is _PLAIN:
            return f"{base}.{rest}" if rest else base
        if not rest:  # a bare name is no submodule's member
            return None
        if how is _INJECTION:
            # ``backend.mean`` where ``backend`` is a submodule handed in at run time
            # (keras_applications' ``get_submodules_from_kwargs`` idiom, see semantic.names);
            # asked only once a head is followed by an attribute
            if within is None:
                within = self._scopes.within(scopes)
            base = hit[1] = injected_submodule(self._m, head, within)
            hit[2] = _INJECTED
        return f"{base}.{rest}" if base else None

    def _head(self, head: str, within: Sequence[cst.CSTNode]) -> tuple[str | None, object]:
        """(base, how): what ``head`` stands for seen from ``within`` — an imported or aliased
        spelling (``_PLAIN``), or only possibly a submodule handed in at run time
        (``_INJECTION``: not looked for yet)."""
        if head in self.module_shadowed and head not in self.imports:
            renamed = self._renamed_layer(head) or self._alias(head, self.module)
            return (renamed, _PLAIN) if renamed is not None else (None, _INJECTION)
        if self._locally_rebound(head, within):
            fn = next((s for s in reversed(within) if type(s) in CALLABLE_TYPES), None)
            alias = self._alias(head, fn) if fn is not None else None  # type: ignore[arg-type]
            return (alias, _PLAIN) if alias is not None else (None, _INJECTION)
        base = self.imports.get(head)
        if base is None:
            base = self._module_alias(head) or UNBOUND_FRAMEWORK_NAMES.get(head)
            if base is None:
                return None, _INJECTION
        return base, _PLAIN

    def _locally_rebound(self, name: str, within: Sequence[cst.CSTNode]) -> bool:
        """True when the innermost function scope of ``within`` assigns ``name`` itself."""
        for scope in reversed(within):
            tp = type(scope)  # exact types: see nodes.dotted_name
            if tp is cst.FunctionDef or tp is cst.Lambda:
                idx = self._scopes.scope_index(scope)  # type: ignore[arg-type]
                bs = idx.bindings.get(name)
                if bs:
                    return not all(b.kind == "import" for b in bs)
        return False

    def _module_alias(self, name: str) -> str | None:
        return self._alias(name, self.module)

    def _alias(self, name: str, scope: ScopeNode) -> str | None:
        """``Conv = tf.keras.layers.Conv2D`` / ``reg = regularizers.l2``, bound once in
        ``scope``, makes the name an alias of what the file imports."""
        bindings = self._scopes.scope_index(scope).bindings.get(name)
        if not bindings or len(bindings) != 1 or bindings[0].value is None or bindings[0].kind != "assign":
            return None
        value = bindings[0].value
        if type(value) is cst.Name or type(value) is cst.Attribute:
            dotted = dotted_name(value)
            if dotted and dotted.split(".")[0] != name:
                head, _, rest = dotted.partition(".")
                base = self.imports.get(head)
                if base:
                    return f"{base}.{rest}" if rest else base
        return None

    def _renamed_layer(self, name: str) -> str | None:
        """``class DepthwiseConv2D(tf.keras.layers.DepthwiseConv2D, tf.layers.Layer): pass``:
        a module-level subclass with an empty body is its first base under another name; a
        kept copy of a framework class (``class TPUEstimator(estimator_lib.Estimator): ...``,
        symbols.VENDORED_CLASSES) is the framework's."""
        bindings = self._scopes.scope_index(self.module).bindings.get(name)
        if not bindings or len(bindings) != 1 or bindings[0].kind != "class":
            return None
        cls = bindings[0].node
        if not isinstance(cls, cst.ClassDef):
            return None
        if name in VENDORED_CLASSES and cls.bases:
            return VENDORED_CLASSES[name]
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else []
        for stmt in body:
            small = stmt.body if isinstance(stmt, cst.SimpleStatementLine) else None
            if small is None or not all(
                isinstance(x, cst.Pass) or (isinstance(x, cst.Expr) and isinstance(x.value, (cst.SimpleString, cst.ConcatenatedString)))
                for x in small
            ):
                return None
        if not cls.bases or cls.bases[0].keyword is not None:
            return None
        dotted = dotted_name(cls.bases[0].value)
        head, _, rest = (dotted or "").partition(".")
        base = self.imports.get(head)
        if base is None or base.split(".")[0] not in ROOT_MODULES:
            return None
        return f"{base}.{rest}" if rest else base

    def resolve(self, node: cst.BaseExpression) -> str | None:
        """Canonical name (symbols.canonical) of a Name/Attribute, or None.

        Beyond the file's own imports: a project module that re-exports the framework
        (``from mylib.backend import keras``) through the project index, and, for a
        receiver nothing resolves, an attribute only Keras/TF spell ("resolved by name",
        see :meth:`resolved_by_name`)."""
        within = self._scopes.ancestors(node)
        return self._canonical(node, self.raw_name(node, within), within, ())

    def _canonical(self, node: cst.BaseExpression, raw: str | None, within: Sequence[cst.CSTNode] | None,
                   scopes: Sequence[ScopeNode]) -> str | None:
        """The canonical name of ``node`` whose raw dotted name is ``raw``, seen from
        ``within`` (else from ``scopes``, innermost first): what a project module re-exports
        followed to the framework, and a receiver nothing resolves taken by its spelling."""
        if raw is not None and raw.partition(".")[0] not in ROOT_MODULES:
            raw = self.framework_raw(raw)
            if raw is None:
                return None
        if raw is None:
            if type(node) is not cst.Attribute:
                return None  # only an attribute is taken by its spelling: no chain of scopes to make
            return self._by_name(node, within if within is not None else self._scopes.within(scopes))
        return canonical(raw)  # (memoised in symbols)

    # ---- beyond the file: the project index, and spellings only the framework uses -----
    def framework_raw(self, raw: str | None) -> str | None:
        """The raw framework name a raw dotted name stands for: itself when it is one, else
        what a project module it comes from binds — re-exports (``from mylib.backend import
        keras``) and backends chosen in branches, in this file or that module, whichever
        branch binds the framework (``from .backend import functional`` then
        ``functional.transpose``); None for anything else. Every part that maps a spelling
        to the framework asks here (cached per name)."""
        if raw is None or raw.partition(".")[0] in ROOT_MODULES:
            return raw
        cache = self.caches.project_raws
        if raw not in cache:
            cache[raw] = None
            if self.filename and not self.filename.startswith("<"):
                for cand in (raw, *self._other_branches(raw)):
                    if cand.partition(".")[0] in ROOT_MODULES:
                        cache[raw] = cand
                        break
                    sym = self._m.project.resolve(self.filename, cand)
                    if sym is not None and sym.kind == "framework":
                        cache[raw] = sym.raw
                        break
        return cache[raw]

    def _other_branches(self, raw: str) -> Iterator[str]:
        """``raw`` spelled with the other imports of its head's name (see :meth:`_bind`)."""
        for base, others in self._branches.items():
            if raw == base or raw.startswith(base + "."):
                for other in others:
                    yield other + raw[len(base):]

    def _by_name(self, node: cst.BaseExpression, within: Sequence[cst.CSTNode]) -> str | None:
        if not isinstance(node, cst.Attribute):
            return None
        attrs: list[str] = []
        base: cst.BaseExpression = node
        while isinstance(base, cst.Attribute):
            attrs.append(base.attr.value)
            base = base.value
        if isinstance(base, cst.Name):
            if base.value in ("self", "cls") or (base.value in self.imports and not self._locally_rebound(base.value, within)
                                                 and base.value not in self.module_shadowed):
                return None  # an import we could not map is a project object, not the framework
        elif not isinstance(base, (cst.Call, cst.Subscript)):
            return None
        hit = by_name(".".join(reversed(attrs)))
        if hit is not None:
            self.caches.by_name_hits[id(node)] = (node, hit)
        return hit

    def resolved_by_name(self, node: cst.BaseExpression) -> bool:
        """True when :meth:`resolve` answered for ``node`` (or a call of it) by spelling only."""
        if isinstance(node, cst.Call):
            node = node.func
        hit = self.caches.by_name_hits.get(id(node))
        return hit is not None and hit[0] is node

    def call_name(self, node: cst.CSTNode) -> str | None:
        """Canonical name of the callee when ``node`` is a call of a TF/Keras symbol."""
        if type(node) is _Call:
            # every rule asks about every call: resolve each once (the entry keeps the
            # node alive, so its id cannot be reused by a transient node)
            hit = self._call_names.get(id(node))
            if hit is not None and hit[0] is node:
                return hit[1]
            # the callee is seen from the call's scopes, which the file index recorded for
            # every call: no climb to the module for the ancestors
            func = node.func
            name = self._canonical(func, self.raw_name_anywhere(func), None, self._scopes.index.scopes_of(node))
            self._call_names[id(node)] = (node, name)
            return name
        return None

    def flavour(self, node: cst.BaseExpression) -> str | None:
        raw = self.raw_name(node.func if isinstance(node, cst.Call) else node, self._scopes.ancestors(node))
        return flavour(raw) if raw else None

    def raw_name_anywhere(self, node: cst.BaseExpression) -> str | None:
        """:meth:`raw_name` for a node anywhere in the file (not only the visited one)."""
        if type(node) is _Call:
            return None
        dotted = dotted_name(node)
        if dotted is None:
            return None
        index = self._scopes.index
        par = index.parent.get(id(node))
        # a callee is in its call's scopes, which the index knows without climbing
        at = par if type(par) is _Call and par.func is node else node
        scopes = index.scopes_of(at)  # innermost first
        inner = scopes[0] if scopes and type(scopes[0]) is not cst.Module else None
        return self._raw(dotted, inner, None, scopes)

    def _call_name_anywhere(self, call: cst.Call) -> str | None:
        raw = self.framework_raw(self.raw_name_anywhere(call.func))  # (re-exports, as resolve() follows)
        if raw is None:
            if isinstance(call.func, cst.Call):  # a layer application: Conv2D(...)(x)
                inner = self._call_name_anywhere(call.func)
                return inner
            return None
        return canonical(raw)

    def canonical_dotted(self, dotted: str, scopes: Sequence[ScopeNode]) -> str | None:
        head, _, rest = dotted.partition(".")
        base = self.imports.get(head)
        if base is None:
            return None
        raw = f"{base}.{rest}" if rest else base
        return canonical(raw) if raw.split(".")[0] in ROOT_MODULES else None
    def call_name_anywhere(self, call: cst.Call) -> str | None:
        """:meth:`call_name` for a call anywhere in the file (a layer application
        ``Dense(8)(x)`` answers its layer's name)."""
        # asked of most calls by several whole-file questions (uses a TPU, roles, the
        # input pipeline): resolved once per call (the entry keeps the call alive)
        memo = self.caches.call_names_anywhere
        hit = memo.get(id(call))
        if hit is None or hit[0] is not call:
            hit = memo[id(call)] = (call, self._call_name_anywhere(call))
        return hit[1]

    def raw_name_in(self, node: cst.BaseExpression, scopes: Sequence[ScopeNode]) -> str | None:
        """:meth:`raw_name` of ``node`` seen from ``scopes`` (outermost first), without
        building the file index."""
        return self.raw_name(node, [s for s in scopes if type(s) is not cst.Module])
