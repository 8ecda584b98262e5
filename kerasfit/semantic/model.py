"""What rules may ask about the file being checked: names, constants, scopes.

libcst's QualifiedNameProvider and ScopeProvider cost ~7x a parse on a real corpus, so
the engine keeps its own cheap model instead: one statement-level scan for imports and
module bindings, and per-scope binding indexes built lazily on the first question.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Collection, Iterator, NamedTuple, Sequence

import libcst as cst

from ..symbols import (
    DATASET_FN_METHODS,
    HOST_CALLBACK_WRAPPERS,
    IMAGE_DATA_FORMAT_CALLS,
    INPUT_FN_TAKERS,
    SET_IMAGE_DATA_FORMAT_CALLS,
    STANDARDIZE_DATA_FORMAT,
    STEP_FN_TAKERS,
    canonical,
    flavour,
    import_spelling,
    is_input_pipeline,
    is_model_building,
    is_tpu_symbol,
)
from ..types import TARGETS, Role, Target
from .nodes import (
    UNKNOWN,
    ScopeNode,
    SyntaxMemo,
    _string_key,
    child_fields,
    dotted_name,
    get_arg,
    is_node,
    iter_statements,
    string_value,
    walk,
)

from .bridge import built_layer_at, ops_fed_at, project_flag_default, project_makes_tpu, project_zero_pad_layer
from .caches import ModelCaches
from .fileindex import FileIndex
from .folding import BINARY, BUILTIN_NAMES, ORIGIN_DEPTH, UNARY, Budget, bounded, builtin
from .index import ProjectIndex
from .names import by_name, injected_submodule, star_names
from .scoped import name_refs_in
from .summaries import Layer
from .tensors import TensorNames
from .values import off_by_default, possible_values


@dataclass
class Binding:
    """One assignment of a name in a scope."""

    value: cst.BaseExpression | None  # None: bound by something we do not follow
    node: cst.CSTNode  # the statement / parameter that binds it
    kind: str = "assign"  # assign | param | import | def | class | other


@dataclass
class ScopeIndex:
    bindings: dict[str, list[Binding]] = field(default_factory=dict)

    def add(self, name: str, binding: Binding) -> None:
        self.bindings.setdefault(name, []).append(binding)


def _module_dotted(node: cst.BaseExpression | None) -> str:
    if node is None:
        return ""
    return dotted_name(node) or ""


def _parallel_assignment(target: cst.BaseExpression, value: cst.BaseExpression) -> list[tuple[cst.Name, cst.BaseExpression]] | None:
    """``a, b = 1, 2``: names on the left, as many plain elements on the right; each
    name with its element's value, else None."""
    if not (
        isinstance(target, (cst.Tuple, cst.List))
        and isinstance(value, (cst.Tuple, cst.List))
        and len(target.elements) == len(value.elements)
    ):
        return None
    pairs: list[tuple[cst.Name, cst.BaseExpression]] = []
    for t, v in zip(target.elements, value.elements):
        if not (isinstance(t, cst.Element) and isinstance(t.value, cst.Name) and isinstance(v, cst.Element)):
            return None
        pairs.append((t.value, v.value))
    return pairs


def _target_names(target: cst.BaseExpression) -> Iterator[cst.Name]:
    if isinstance(target, cst.Name):
        yield target
    elif isinstance(target, (cst.Tuple, cst.List)):
        for el in target.elements:
            yield from _target_names(el.value)
    elif isinstance(target, cst.StarredElement):
        yield from _target_names(target.value)


@dataclass(frozen=True)
class ModelHints:
    """What a caller checking one document again and again (the language server) already
    knows about it, so the model does not find it out again; no answer depends on them."""

    # ids of top-level statements that hold no import at any depth (skipped when the
    # imports are read)
    import_free: Collection[int] = ()
    # builds the file index (from the statements' kept indexes); None: one walk of the module
    build_index: Callable[[cst.Module], FileIndex] | None = None


_NO_HINTS = ModelHints()


class FileContext:
    """Per-file facts shared by all rules, built once per parse."""

    def __init__(
        self,
        module: cst.Module,
        filename: str,
        target: Target | None = None,
        options: dict[str, Any] | None = None,
        source: str = "",
        *,
        hints: ModelHints | None = None,
        project: ProjectIndex | None = None,
    ):
        self.module = module
        self._project = project
        self._hints = hints or _NO_HINTS
        self.source = source
        self.filename = filename
        self.target = target or TARGETS["tpu-v5e"]
        self.options = options or {}
        # local name -> raw dotted name from imports (e.g. "L" -> "tensorflow.keras.layers")
        self.imports: dict[str, str] = {}
        # names bound at module level by something other than an import
        self.module_shadowed: set[str] = set()
        self._scopes: dict[int, ScopeIndex] = {}
        self.uses_legacy_keras = False
        # reach: built lazily on the first question that needs the whole file
        self._index: FileIndex | None = None
        self._call_sites: dict[int, CallSites] = {}
        # whole-file facts (see file_fact): key -> (compute, value, keyed by node ids)
        self.facts: dict[str, tuple[Callable[[FileContext], Any], Any, bool]] = {}
        self._call_names: dict[int, tuple[cst.Call, str | None]] = {}
        self._folds: dict[tuple[int | str | None, ...], tuple[Any, int, cst.CSTNode]] = {}  # see _memo_fold
        self.budget = Budget.for_file()  # of following values (kerasfit.semantic.folding)
        # memos of the parts (kerasfit.semantic.caches) and of syntax answers (nodes.SyntaxMemo)
        self.caches = ModelCaches()
        self.syntax = SyntaxMemo()
        self._scan_imports()
        # The engine's walk: the ancestors of the node it is visiting (``visiting``),
        # outermost first. Read through ``ancestors(node)``, which checks the node.
        self.walk_path: list[cst.CSTNode] = []
        self.visiting: cst.CSTNode | None = None

    # ---- imports and names -------------------------------------------------
    def _scan_imports(self) -> None:
        module_index = self.scope_index(self.module)
        for stmt in self._all_import_statements():
            if isinstance(stmt, cst.Import):
                for alias in stmt.names:
                    full = import_spelling(_module_dotted(alias.name))
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                        self.imports[alias.asname.name.value] = full
                    else:
                        top = _module_dotted(alias.name).split(".")[0]
                        self.imports[top] = import_spelling(top)
            elif isinstance(stmt, cst.ImportFrom):
                if isinstance(stmt.names, cst.ImportStar) and not stmt.relative:
                    self._star_import(_module_dotted(stmt.module))
                    continue
                if stmt.relative or isinstance(stmt.names, cst.ImportStar):
                    self._relative_import(stmt)
                    continue
                mod = import_spelling(_module_dotted(stmt.module))
                for alias in stmt.names:
                    obj = _module_dotted(alias.name)
                    local = obj
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                        local = alias.asname.name.value
                    self.imports[local] = f"{mod}.{obj}"
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
        mod = dots + (_module_dotted(stmt.module) if stmt.module is not None else "")
        for alias in stmt.names:
            obj = _module_dotted(alias.name)
            local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else obj
            self.imports[local] = f"{mod}{'' if mod.endswith('.') else '.'}{obj}"

    def _all_import_statements(self) -> Iterator[cst.CSTNode]:
        skip = self._hints.import_free
        stack: list[Any] = [[st for st in self.module.body if id(st) not in skip] if skip else self.module.body]
        while stack:
            item = stack.pop()
            for stmt in iter_statements(item):
                if isinstance(stmt, (cst.Import, cst.ImportFrom)):
                    yield stmt
                elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                    stack.append(stmt.body)

    def raw_name(self, node: cst.BaseExpression, within: Sequence[cst.CSTNode] | None = None) -> str | None:
        """The fully-qualified dotted name an expression refers to, if it is imported.
        ``within``: the scopes ``node`` is seen from, outermost first (default: where the
        walk is)."""
        within = self.walk_path if within is None else within
        if isinstance(node, cst.Call):
            return None
        dotted = dotted_name(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        if head in self.module_shadowed and head not in self.imports:
            renamed = self._renamed_layer(head) or self._alias(head, self.module)
            if renamed is not None:
                return f"{renamed}.{rest}" if rest else renamed
            return self._injected(head, rest, within)
        if self._locally_rebound(head, within):
            fn = next((s for s in reversed(within) if isinstance(s, (cst.FunctionDef, cst.Lambda))), None)
            alias = self._alias(head, fn) if fn is not None else None
            if alias is not None:
                return f"{alias}.{rest}" if rest else alias
            return self._injected(head, rest, within)
        base = self.imports.get(head)
        if base is None:
            alias = self._module_alias(head)
            if alias is None:
                return self._injected(head, rest, within)
            base = alias
        return f"{base}.{rest}" if rest else base

    def _injected(self, head: str, rest: str, within: Sequence[cst.CSTNode]) -> str | None:
        """``backend.mean`` where ``backend`` is a submodule handed in at run time
        (keras_applications' ``get_submodules_from_kwargs`` idiom, see semantic.names)."""
        if not rest:
            return None
        base = injected_submodule(self, head, within)
        return f"{base}.{rest}" if base else None

    def _locally_rebound(self, name: str, within: Sequence[cst.CSTNode]) -> bool:
        """True when the innermost function scope of ``within`` assigns ``name`` itself."""
        for scope in reversed(within):
            if isinstance(scope, (cst.FunctionDef, cst.Lambda)):
                idx = self.scope_index(scope)
                bs = idx.bindings.get(name)
                if bs:
                    return not all(b.kind == "import" for b in bs)
        return False

    def _module_alias(self, name: str) -> str | None:
        return self._alias(name, self.module)

    def _alias(self, name: str, scope: ScopeNode) -> str | None:
        """``Conv = tf.keras.layers.Conv2D`` / ``reg = regularizers.l2``, bound once in
        ``scope``, makes the name an alias of what the file imports."""
        bindings = self.scope_index(scope).bindings.get(name)
        if not bindings or len(bindings) != 1 or bindings[0].value is None or bindings[0].kind != "assign":
            return None
        value = bindings[0].value
        if isinstance(value, (cst.Name, cst.Attribute)):
            dotted = dotted_name(value)
            if dotted and dotted.split(".")[0] != name:
                head, _, rest = dotted.partition(".")
                base = self.imports.get(head)
                if base:
                    return f"{base}.{rest}" if rest else base
        return None

    def _renamed_layer(self, name: str) -> str | None:
        """``class DepthwiseConv2D(tf.keras.layers.DepthwiseConv2D, tf.layers.Layer): pass``:
        a module-level subclass with an empty body is its first base under another name."""
        bindings = self.scope_index(self.module).bindings.get(name)
        if not bindings or len(bindings) != 1 or bindings[0].kind != "class":
            return None
        cls = bindings[0].node
        if not isinstance(cls, cst.ClassDef):
            return None
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
        if base is None or base.split(".")[0] not in ("tensorflow", "keras", "tf_keras"):
            return None
        return f"{base}.{rest}" if rest else base

    def resolve(self, node: cst.BaseExpression) -> str | None:
        """Canonical name (symbols.canonical) of a Name/Attribute, or None.

        Beyond the file's own imports: a project module that re-exports the framework
        (``from mylib.backend import keras``) through the project index, and, for a
        receiver nothing resolves, an attribute only Keras/TF spell ("resolved by name",
        see :meth:`resolved_by_name`)."""
        raw = self.raw_name(node)
        if raw is not None and raw.split(".")[0] not in ("tensorflow", "keras", "tf_keras"):
            raw = self._project_raw(raw)
        if raw is None:
            return self._by_name(node)
        if raw.split(".")[0] not in ("tensorflow", "keras", "tf_keras"):
            return None
        return canonical(raw)

    # ---- the other parts of kerasfit/semantic, reached through this facade ---------
    @property
    def project(self) -> ProjectIndex:
        """The project index of the running check (passed in; without one, the file is
        checked alone against an empty index of its own)."""
        if self._project is None:
            self._project = ProjectIndex()
        return self._project

    def _project_raw(self, raw: str) -> str | None:
        """The framework name a project import re-exports, else None (cached per name)."""
        cache = self.caches.project_raws
        if raw not in cache:
            cache[raw] = None
            if self.filename and not self.filename.startswith("<"):
                sym = self.project.resolve(self.filename, raw)
                if sym is not None and sym.kind == "framework":
                    cache[raw] = sym.raw
        return cache[raw]

    def _by_name(self, node: cst.BaseExpression) -> str | None:
        if not isinstance(node, cst.Attribute):
            return None
        attrs: list[str] = []
        base: cst.BaseExpression = node
        while isinstance(base, cst.Attribute):
            attrs.append(base.attr.value)
            base = base.value
        if isinstance(base, cst.Name):
            if base.value in ("self", "cls") or (base.value in self.imports and not self._locally_rebound(base.value, self.walk_path)
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

    def possible_values(self, node: cst.BaseExpression | None) -> frozenset[Any] | None:
        """``const`` lifted to a set of possible values (branches, conditional bindings)."""
        return possible_values(self, node)

    def off_by_default(self, node: cst.CSTNode) -> cst.BaseExpression | None:
        """The ``if`` test that switches ``node`` off when parameters keep their defaults."""
        return off_by_default(self, node)

    def built_layer(self, call: cst.Call) -> Layer | None:
        """For a call of a project function (same file or another file of the tree), the
        first framework layer it builds (``semantic.summaries.Layer``: raw name, argument value
        sets, factories traversed), else None."""
        return built_layer_at(self, call)

    def layer_call_returns(self, ctor: cst.Call) -> list[cst.BaseExpression] | None:
        """For ``MyLayer(..)``, a call of a class of this file that defines ``call``: what
        that ``call`` method returns (the layer's output when applied), else None."""
        if not isinstance(ctor.func, cst.Name):
            return None
        b = self.lookup(ctor.func.value, self.scopes_of(ctor))
        if b is None or b.kind != "class" or not isinstance(b.node, cst.ClassDef):
            return None
        for stmt in b.node.body.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "call":
                return list(_returns(stmt))
        return None

    def imported_zero_pad_layer(self, ctor: cst.Call) -> bool:
        """``Pad(1)``, ``Pad`` a layer class of another project module whose ``call`` is a
        zero pad of its input."""
        return project_zero_pad_layer(self, ctor)

    def ops_fed(self, call: cst.Call) -> list[Layer]:
        """For ``wrapper(x, ..)``, a call of a project function (same file or another file
        of the tree): the framework ops it applies directly to ``x`` (``tf.nn.conv2d(x, ..)``,
        ``Conv2D(..)(x)``), arguments as value sets, in the order met."""
        return ops_fed_at(self, call)

    def reached_from_model(self, func: cst.FunctionDef) -> bool:
        """Whether a function of this file is called from model/training code anywhere in the tree."""
        return self.project.reached_from_model(self.filename, func.name.value)

    def call_name(self, node: cst.CSTNode) -> str | None:
        """Canonical name of the callee when ``node`` is a call of a TF/Keras symbol."""
        if isinstance(node, cst.Call):
            # every rule asks about every call: resolve each once (the entry keeps the
            # node alive, so its id cannot be reused by a transient node)
            hit = self._call_names.get(id(node))
            if hit is not None and hit[0] is node:
                return hit[1]
            name = self.resolve(node.func)
            self._call_names[id(node)] = (node, name)
            return name
        return None

    def flavour(self, node: cst.BaseExpression) -> str | None:
        raw = self.raw_name(node.func if isinstance(node, cst.Call) else node)
        return flavour(raw) if raw else None

    # ---- scopes and bindings ----------------------------------------------
    def scope_index(self, scope: ScopeNode) -> ScopeIndex:
        key = id(scope)
        idx = self._scopes.get(key)
        if idx is None:
            idx = self._scopes[key] = self._build_index(scope)
        return idx

    def _build_index(self, scope: ScopeNode) -> ScopeIndex:
        idx = ScopeIndex()
        if isinstance(scope, (cst.FunctionDef, cst.Lambda)):
            params = scope.params
            for p in (*params.posonly_params, *params.params, *params.kwonly_params):
                idx.add(p.name.value, Binding(p.default, p, "param"))
            for star in (params.star_arg, params.star_kwarg):
                if isinstance(star, cst.Param):
                    idx.add(star.name.value, Binding(None, star, "param"))
            if isinstance(scope, cst.Lambda):
                return idx
        for stmt in iter_statements(scope.body):
            if isinstance(stmt, cst.Assign):
                for t in stmt.targets:
                    if isinstance(t.target, cst.Name):
                        idx.add(t.target.value, Binding(stmt.value, stmt))
                    elif (pairs := _parallel_assignment(t.target, stmt.value)) is not None:
                        # F_H, F_W = 5, 5: each name gets its own element
                        # (anchored on the target name: folds are memoised per binding node)
                        for name, v in pairs:
                            idx.add(name.value, Binding(v, name))
                    else:
                        for n in _target_names(t.target):
                            idx.add(n.value, Binding(None, stmt, "other"))
            elif isinstance(stmt, cst.AnnAssign) and isinstance(stmt.target, cst.Name):
                idx.add(stmt.target.value, Binding(stmt.value, stmt))
            elif isinstance(stmt, cst.AugAssign) and isinstance(stmt.target, cst.Name):
                idx.add(stmt.target.value, Binding(None, stmt, "other"))
            elif isinstance(stmt, (cst.For,)):
                for n in _target_names(stmt.target):
                    idx.add(n.value, Binding(None, stmt, "other"))
            elif isinstance(stmt, (cst.With,)):
                for item in stmt.items:
                    if item.asname is not None:
                        for n in _target_names(item.asname.name):
                            idx.add(n.value, Binding(None, stmt, "other"))
            elif isinstance(stmt, cst.FunctionDef):
                idx.add(stmt.name.value, Binding(None, stmt, "def"))
            elif isinstance(stmt, cst.ClassDef):
                idx.add(stmt.name.value, Binding(None, stmt, "class"))
            elif isinstance(stmt, (cst.Import, cst.ImportFrom)):
                names = stmt.names if not isinstance(stmt.names, cst.ImportStar) else ()
                for alias in names:
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                        idx.add(alias.asname.name.value, Binding(None, stmt, "import"))
                    else:
                        idx.add(_module_dotted(alias.name).split(".")[0], Binding(None, stmt, "import"))
        return idx

    def scopes(self, within: Sequence[cst.CSTNode] | None = None) -> list[ScopeNode]:
        """Enclosing scopes, innermost first, of the visited node (or of the nodes
        ``within``, outermost first)."""
        out: list[ScopeNode] = [
            s for s in reversed(self.walk_path if within is None else within)
            if isinstance(s, (cst.FunctionDef, cst.ClassDef, cst.Lambda))
        ]
        out.append(self.module)
        return out

    def enclosing_function(self) -> cst.FunctionDef | None:
        for node in reversed(self.walk_path):
            if isinstance(node, cst.FunctionDef):
                return node
        return None

    def enclosing_class(self) -> cst.ClassDef | None:
        for node in reversed(self.walk_path):
            if isinstance(node, cst.ClassDef):
                return node
        return None

    def lookup(self, name: str, scopes: Sequence[ScopeNode] | None = None) -> Binding | None:
        """The single binding of ``name`` visible here, or None when ambiguous/unknown.

        ``scopes`` (innermost first, as :meth:`scopes_of` gives) looks from elsewhere
        than the visited node. Class scopes are skipped for lookups from inside their
        methods, as in Python.
        """
        return self._lookup_in(name, scopes)[0]

    def _lookup_in(self, name: str, scopes: Sequence[ScopeNode] | None) -> tuple[Binding | None, Sequence[ScopeNode]]:
        """The single binding and the scope chain it lives in (for evaluating its value)."""
        if scopes is None:
            scopes = self.scopes()
        for i, scope in enumerate(scopes):
            if isinstance(scope, cst.ClassDef) and i > 0:
                continue
            bs = self.scope_index(scope).bindings.get(name)
            if bs:
                return (bs[0] if len(bs) == 1 else None), scopes[i:]
        return None, ()

    def iterated_elements(self, node: cst.BaseExpression) -> list[cst.BaseExpression] | None:
        """``units`` in ``for units in HIDDEN:`` (or ``HIDDEN[i]`` with ``i`` a loop
        variable), ``HIDDEN`` a list or tuple literal, maybe bound once elsewhere (a
        module constant): the literal's elements, each a value ``node`` takes; else None."""
        scopes = self.scopes_of(node)
        if isinstance(node, cst.Name):
            b = self.lookup(node.value, scopes)
            loop = b.node if b is not None and b.kind == "other" else None
            if isinstance(loop, cst.For) and isinstance(loop.target, cst.Name) and loop.target.value == node.value:
                return self._literal_elements(loop.iter)
        elif isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            index = node.slice[0].slice.value
            b = self.lookup(index.value, scopes) if isinstance(index, cst.Name) else None
            if b is not None and b.kind == "other" and isinstance(b.node, cst.For):
                return self._literal_elements(node.value)
        return None

    def _literal_elements(self, node: cst.BaseExpression) -> list[cst.BaseExpression] | None:
        if isinstance(node, cst.Name):
            b = self.lookup(node.value, self.scopes_of(node))
            node = b.value if b is not None and b.kind == "assign" and b.value is not None else node
        if isinstance(node, (cst.List, cst.Tuple)) and not any(isinstance(e, cst.StarredElement) for e in node.elements):
            return [e.value for e in node.elements]
        return None

    def binding_value(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        """For a Name bound once to an expression in a visible scope, that expression."""
        if isinstance(node, cst.Name):
            b = self.lookup(node.value)
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

    def _memo_fold(self, node: cst.BaseExpression, _depth: int, scopes: Sequence[ScopeNode] | None) -> Any:
        if scopes is None:
            scopes = self.scopes()
        where: Sequence[ScopeNode] = scopes
        anchor: cst.CSTNode = node
        if isinstance(node, cst.Name):
            # every use of one binding folds alike: key on the binding, not the use (its
            # name too: `a, b = 5, 32` binds two names in one statement)
            b, where = self._lookup_in(node.value, scopes)
            if b is None:
                if not where or self._rebound_reaching(node) is None:  # unbound here, or no one binding
                    return UNKNOWN
                # bound more than once: this use's own reaching binding decides
            else:
                anchor = b.node
        key = (id(anchor), node.value if isinstance(node, cst.Name) else None, *map(id, where))
        hit = self._folds.get(key)
        # an UNKNOWN found deeper (less depth left) may be known from higher up
        if hit is not None and hit[2] is anchor and (hit[0] is not UNKNOWN or hit[1] <= _depth):
            return hit[0]
        if hit is not None and hit[1] == -1:
            return UNKNOWN  # a cycle: this value depends on itself
        self._folds[key] = (UNKNOWN, -1, anchor)
        try:
            value = self._const_ref(node, _depth, scopes)
        except BaseException:
            del self._folds[key]
            raise
        self._folds[key] = (value, _depth, anchor)
        return value

    # ---- constants ---------------------------------------------------------
    def const(self, node: cst.BaseExpression | None, _depth: int = 0, *, scopes: Sequence[ScopeNode] | None = None) -> Any:
        """Fold ``node`` to a Python value, or UNKNOWN.

        Names follow their single binding; a parameter folds to the value every same-file
        call site agrees on (its default where a site omits it, or where the function is
        never called here / escapes); ``self.x``, ``config.x``, ``FLAGS.x``, ``Class.x``
        and ``params['x']`` follow a single same-file definition (see :meth:`_deref`).
        ``scopes`` evaluates ``node`` as if it sat elsewhere (default: the visited node).
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
        if isinstance(node, (cst.Name, cst.Attribute, cst.Subscript)):
            return self._memo_fold(node, _depth, scopes)
        return self._const_rest(node, _depth, scopes)

    @bounded(lambda: UNKNOWN)
    def _const_ref(self, node: cst.BaseExpression, _depth: int, scopes: Sequence[ScopeNode] | None) -> Any:
        cands = self._deref(node, scopes)
        if not cands:
            return UNKNOWN
        value: Any = UNKNOWN
        for expr, where in cands:
            v = self.const(expr, _depth + 1, scopes=where)
            if v is UNKNOWN or (value is not UNKNOWN and (v != value or type(v) is not type(value))):
                return UNKNOWN
            value = v
        return value

    def _const_rest(self, node: cst.BaseExpression, _depth: int, scopes: Sequence[ScopeNode] | None) -> Any:
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
                if v is not UNKNOWN and self._lookup_in(node.func.value, scopes)[0] is None:  # not shadowed in this file
                    return v
        return UNKNOWN

    def _default_config_value(self, call: cst.Call, _depth: int, scopes: Sequence[ScopeNode] | None) -> Any:
        """What a configuration query answers under Keras's defaults: ``image_data_format()``
        is 'channels_last' (or the one format this file sets), ``standardize_data_format(x)``
        is ``x`` lower-cased, or that default for None. Else UNKNOWN."""
        tail = (dotted_name(call.func) or "").rsplit(".", 1)[-1]
        if tail == STANDARDIZE_DATA_FORMAT:
            arg = get_arg(call, "data_format", 0)
            v = self.const(arg.value, _depth + 1, scopes=scopes) if arg is not None else None
            if v is None:
                return self._image_data_format()
            return v.lower() if isinstance(v, str) else UNKNOWN
        if tail == "image_data_format" and not call.args and self._call_name_anywhere(call) in IMAGE_DATA_FORMAT_CALLS:
            return self._image_data_format()
        return UNKNOWN

    def _image_data_format(self) -> Any:
        formats: frozenset[Any] = self.file_fact("image_data_format", _set_image_data_formats)
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


    # ---- reach: one lazy index of the whole file ---------------------------
    # Everything below looks beyond the visited node: the callers of a function, the
    # assignment that reaches a use, the role of a function. It is built on the first
    # question by one walk of the module (parents, source order, calls, attribute and
    # subscript stores) and cached for the file.

    @property
    def index(self) -> FileIndex:
        if self._index is None:
            build = self._hints.build_index
            self._index = build(self.module) if build is not None else FileIndex(self.module)
        return self._index

    def scopes_of(self, node: cst.CSTNode) -> list[ScopeNode]:
        """Scopes enclosing any node of this file, innermost first (module last).

        A function's decorators, defaults and annotations belong to the enclosing scope.
        """
        return list(self.index.scopes_of(node))

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.index.parent.get(id(node))

    def ancestors(self, node: cst.CSTNode) -> Sequence[cst.CSTNode]:
        """The nodes enclosing ``node``, outermost (the module) first; read-only. For the
        node the engine is visiting this is the walk's own path (free); for any other
        node, the file index's parent links."""
        if node is self.visiting:
            return self.walk_path
        parent = self.index.parent
        out: list[cst.CSTNode] = []
        p = parent.get(id(node))
        while p is not None:
            out.append(p)
            p = parent.get(id(p))
        out.reverse()
        return out

    def name_refs_in(self, name: str, scope: ScopeNode) -> list[tuple[cst.Name, bool, tuple[ScopeNode, ...]]]:
        """The file index's references of ``name`` whose innermost scope is ``scope``
        (grouped once per file: filtering the whole file's list per question was quadratic)."""
        return name_refs_in(self, name, scope)

    def _deref(self, node: cst.BaseExpression, scopes: Sequence[ScopeNode] | None) -> list[tuple[cst.BaseExpression | None, Sequence[ScopeNode]]]:
        """The expressions that may give ``node`` its value, each with its scopes.

        Empty when unknown. An entry's expression is None when a site's value is not
        visible (``*args``).
        """
        if isinstance(node, cst.Name):
            b, where = self._lookup_in(node.value, scopes)
            if b is None:
                found = self._rebound_reaching(node) if where else None
                if found is None:
                    return []
                b, where = found
            if b.kind == "assign":
                return [(b.value, where)]
            if b.kind == "param" and self.options.get("const_through_defaults", True):
                func = where[0] if where else None
                if isinstance(func, (cst.FunctionDef, cst.Lambda)) and isinstance(b.node, cst.Param):
                    return self._param_candidates(func, b.node)
            return []
        if scopes is None:
            scopes = self.scopes()
        if isinstance(node, cst.Attribute):
            return self._attr_candidates(node, scopes)
        if isinstance(node, cst.Subscript):
            return self._subscript_candidates(node, scopes)
        return []

    def _rebound_reaching(self, name: cst.Name) -> tuple[Binding, Sequence[ScopeNode]] | None:
        """For a use of a name bound more than once in its function, the one binding that
        surely reaches it when that binding refines the name from itself
        (``data_format = standardize(data_format)``: still the one setting), with the
        scopes to evaluate it in. None for a node not in this file, when several bindings
        may reach it, or for a name reused for another value (``pad = k // 2`` twice with
        different ``k``: the rules' may-analysis, ``possible_values``, judges those)."""
        idx = self.index
        if idx.parent.get(id(name)) is None:
            return None
        bindings, exhaustive = self._reaching(name)
        if len(bindings) != 1 or not exhaustive:
            return None
        b = bindings[0]
        if b.kind == "assign" and not (b.value is not None and any(
                isinstance(n, cst.Name) and n.value == name.value for n in walk(b.value))):
            return None
        return b, idx.scopes_of(name)

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
            hit = self._call_sites[key] = self._find_call_sites(func)
        return hit

    def _find_call_sites(self, func: cst.FunctionDef | cst.ClassDef) -> CallSites:
        idx = self.index
        if isinstance(func, cst.FunctionDef) and func.name.value == "__init__":
            cls = idx.method_class.get(id(func))
            if cls is None:
                return CallSites((), False)
            inner = self._find_call_sites(cls)
            return CallSites(inner.calls, inner.complete, skip_self=True)
        name = func.name.value
        cls = idx.method_class.get(id(func)) if isinstance(func, cst.FunctionDef) else None
        complete = True
        if isinstance(func, cst.FunctionDef):
            for dec in func.decorators:
                d = dotted_name(dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator) or ""
                if d not in ("staticmethod", "classmethod", "property") and self._canonical_dotted(d, idx.def_scopes(func)) != "tf.function":
                    complete = False
        calls: list[tuple[cst.Call, tuple[ScopeNode, ...]]] = []
        skip_self = False
        if cls is not None:
            # a method: self.m(...) from inside the class; any other reference escapes
            static = any(dotted_name(d.decorator) == "staticmethod" for d in func.decorators)
            skip_self = not static
            for ref, call, scopes in idx.attr_refs.get(name, ()):
                recv = ref.value
                if call is not None and isinstance(recv, cst.Name) and recv.value in ("self", "cls") and cls in scopes:
                    calls.append((call, scopes))
                else:
                    complete = False
        else:
            for _ref, call, scopes in idx.name_refs.get(name, ()):
                b, _ = self._lookup_in(name, scopes)
                if b is None or b.node is not func:
                    continue
                if call is not None:
                    calls.append((call, scopes))
                else:
                    complete = False
        return CallSites(tuple(calls), complete, skip_self=skip_self)

    def param_values(self, func: cst.FunctionDef | cst.Lambda, param: str | cst.Param) -> list[ParamValue]:
        """What each same-file call site passes for ``param`` of ``func``.

        One ParamValue per call site (``value`` is the argument expression, or the
        default when that site omits it, or None when it is hidden in ``*args``), with
        ``const`` already folded in the caller's scope. Empty when there are no sites.
        Pair with :meth:`call_sites` to know whether the list is complete.
        """
        p = self._param_node(func, param)
        if p is None or not isinstance(func, cst.FunctionDef):
            return []
        out = []
        for call, scopes in self.call_sites(func).calls:
            expr, where = self._arg_for(func, p, call, scopes)
            out.append(ParamValue(call, expr, self.const(expr, scopes=where) if expr is not None else UNKNOWN, expr is not None and where is scopes))
        return out

    def _param_node(self, func: cst.FunctionDef | cst.Lambda, param: str | cst.Param) -> cst.Param | None:
        if isinstance(param, cst.Param):
            return param
        ps = func.params
        for p in (*ps.posonly_params, *ps.params, *ps.kwonly_params):
            if p.name.value == param:
                return p
        return None

    def _arg_for(self, func: cst.FunctionDef, p: cst.Param, call: cst.Call, scopes: Sequence[ScopeNode]) -> tuple[cst.BaseExpression | None, Sequence[ScopeNode]]:
        ps = func.params
        positional = [*ps.posonly_params, *ps.params]
        if self.call_sites(func).skip_self and positional:
            positional = positional[1:]
        for a in call.args:
            if a.keyword is not None and a.keyword.value == p.name.value:
                return a.value, scopes
        pos = next((i for i, q in enumerate(positional) if q is p), None)
        i = 0
        for a in call.args:
            if a.keyword is not None:
                break
            if a.star:
                return None, scopes  # *args / **kwargs: not visible
            if i == pos:
                return a.value, scopes
            i += 1
        if any(a.star == "**" for a in call.args):
            return None, scopes
        if p.default is not None:
            return p.default, self.index.def_scopes(func)
        return None, scopes

    def _param_candidates(self, func: cst.FunctionDef | cst.Lambda, p: cst.Param) -> list[tuple[cst.BaseExpression | None, Sequence[ScopeNode]]]:
        if isinstance(func, cst.FunctionDef) and p.star not in ("*", "**"):
            sites = self.call_sites(func)
            if sites.complete and sites.calls:
                return [self._arg_for(func, p, call, scopes) for call, scopes in sites.calls]
        if p.default is not None:
            return [(p.default, self.index.def_scopes(func))]
        return []

    # ---- attributes and subscripts -------------------------------------------
    def _attr_candidates(self, node: cst.Attribute, scopes: Sequence[ScopeNode]) -> list[tuple[cst.BaseExpression | None, Sequence[ScopeNode]]]:
        dotted = dotted_name(node)
        if dotted is None:
            return []
        idx = self.index
        head, _, rest = dotted.partition(".")
        if head in ("self", "cls"):
            cls = next((s for s in scopes if isinstance(s, cst.ClassDef)), None)
            if cls is None:
                return []
            found: list[tuple[cst.BaseExpression | None, Sequence[ScopeNode]]]
            found = [(v, w) for v, w in idx.attr_stores.get(dotted, ()) if cls in w]
            if "." not in rest:
                for cb in self.scope_index(cls).bindings.get(rest, ()):
                    found.append((cb.value if cb.kind == "assign" else None, (cls, *idx.scopes_of(cls))))
            return found if len(found) == 1 else []
        b, where = self._lookup_in(head, scopes)
        if where and not isinstance(where[0], cst.Module):
            return []  # a local or a parameter: which object it is depends on the caller
        stores: list[tuple[cst.BaseExpression | None, Sequence[ScopeNode]]]
        stores = [(v, w) for v, w in idx.attr_stores.get(dotted, ()) if self._is_global(head, w)]
        if stores:
            return stores if len(stores) == 1 else []
        if b is None or b.kind == "import":
            if self.imports.get(head, "").endswith("FLAGS") and "." not in rest:
                return self._flag_default(rest)
            return []
        if isinstance(b.node, cst.ClassDef) and "." not in rest:  # (kind "class")
            inner = self.scope_index(b.node).bindings.get(rest, ())
            if len(inner) == 1 and inner[0].kind == "assign":
                return [(inner[0].value, (b.node, *where))]
            return []
        if b.kind == "assign" and isinstance(b.value, cst.Call):
            d = dotted_name(b.value.func) or ""
            if d.endswith("FLAGS"):
                return self._flag_default(rest)
            if "." not in rest and self._is_record_ctor(b.value, where):
                kw = get_arg(b.value, rest)
                return [(kw.value, where)] if kw is not None else []
        if b.kind == "assign" and b.value is not None and (dotted_name(b.value) or "").endswith("FLAGS") and "." not in rest:
            return self._flag_default(rest)
        return []

    def _is_global(self, head: str, scopes: Sequence[ScopeNode]) -> bool:
        b, where = self._lookup_in(head, scopes)
        return not where or isinstance(where[0], cst.Module)

    def _is_record_ctor(self, call: cst.Call, scopes: Sequence[ScopeNode]) -> bool:
        """``HParams(a=1)``, ``ConfigDict(...)``, ``SimpleNamespace(...)``, ``Namespace(...)``."""
        d = dotted_name(call.func) or ""
        return d.rsplit(".", 1)[-1] in _RECORD_CTORS

    def _flag_default(self, name: str) -> list[tuple[cst.BaseExpression | None, Sequence[ScopeNode]]]:
        defs = self.index.flag_defaults.get(name, ())
        if not defs:
            # defined in a project module this file imports (a shared flags module)
            default = project_flag_default(self, name)
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
        idx = self.index
        head = base.split(".")[0]
        b, where = self._lookup_in(head, scopes) if "." not in base else (None, ())
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
            # ``params['batch_size']`` in a model_fn / input_fn: the dicts this file defines
            found.extend(idx.dict_keys.get(key, ()))
        if not found:
            return []
        return found

    # ---- data flow -------------------------------------------------------------
    def reaching_bindings(self, name: cst.Name) -> list[Binding]:
        """The bindings of a Name that may reach this use, latest first.

        Within the innermost scope binding the name: the last binding before the use
        whose block encloses the use (an unconditional one) ends the list; conditional
        ones after it (in an ``if`` / loop / ``try`` not enclosing the use) come first.
        A binding statement that contains the use (``x = f(x)``) does not reach it.
        A name read inside a nested function but rebound in an outer one gives [].
        """
        return self._reaching(name)[0]

    def _reaching(self, name: cst.Name) -> tuple[list[Binding], bool]:
        """(bindings, exhaustive): exhaustive when one of them surely ran."""
        idx = self.index
        scopes = idx.scopes_of(name)
        for i, scope in enumerate(scopes):
            if isinstance(scope, cst.ClassDef) and i > 0:
                continue
            bs = self.scope_index(scope).bindings.get(name.value)
            if not bs:
                continue
            if len(bs) == 1:
                return list(bs), True
            if i > 0:
                return [], False  # rebound in an outer scope: depends on when it is called
            anc = idx.ancestors(name)
            use = idx.order.get(id(name), 0)
            earlier = [b for b in bs if b.kind == "param" or (idx.order.get(id(b.node), 0) < use and id(b.node) not in anc)]
            earlier.sort(key=lambda b: -1 if b.kind == "param" else idx.order.get(id(b.node), 0), reverse=True)
            out: list[Binding] = []
            for b in earlier:
                out.append(b)
                if b.kind == "param" or idx.encloses_block_of(b.node, anc):
                    return out, True
            return out, bool(out) and _exhaustive_if(idx, out, anc)
        return [], False

    @bounded(list)
    def origins(self, expr: cst.BaseExpression, _depth: int = 0, _via: tuple[cst.Call, ...] = ()) -> list[Origin]:
        """Every call that may have produced ``expr``'s value.

        Follows a Name to the assignment(s) reaching it, and a call of a same-file
        function into that function's ``return`` expressions (recorded in ``via``, the
        helper calls crossed, outermost first — report at ``via[0]`` to point at the
        caller's line). ``conditional`` marks a path that is not the only one (an
        ``if`` may skip the assignment, or the name may still hold a parameter).
        """
        if _depth > ORIGIN_DEPTH:
            return []
        if isinstance(expr, cst.Call):
            name = self._call_name_anywhere(expr)
            if name is not None:
                return [Origin(expr, name, _via, False)]
            helper = self._same_file_function(expr.func, self.index.scopes_of(expr))
            if helper is not None:
                rets = list(_returns(helper))
                out: list[Origin] = []
                for r in rets:
                    out.extend(self.origins(r, _depth + 1, _via + (expr,)))
                return out
            return [Origin(expr, None, _via, False)]
        if isinstance(expr, cst.Name):
            bs, exhaustive = self._reaching(expr)
            bypass = not exhaustive or any(b.kind != "assign" or b.value is None for b in bs)
            out = []
            for b in bs:
                if b.kind == "assign" and b.value is not None:
                    for o in self.origins(b.value, _depth + 1, _via):
                        out.append(o._replace(conditional=True) if bypass else o)
            return out
        return []

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

    def call_chain(self, expr: cst.BaseExpression, _depth: int = 0) -> list[cst.Call]:
        """The method chain ending at ``expr``, root call first.

        ``ds.shuffle(n).batch(b)`` → [root, shuffle, batch], where the chain may be split
        over lines (``ds = ds.map(f)``), through the latest assignment reaching each
        name, and into a same-file helper's return (``ds = make_dataset(files)``). The
        root is the first call that is not a method call on a value: a TF symbol such as
        ``tf.data.TFRecordDataset(...)``, ``tfds.load(...)``, or an unknown call.
        """
        out: list[cst.Call] = []
        node: cst.BaseExpression | None = expr
        depth = 0
        while node is not None and depth < 40:
            depth += 1
            if isinstance(node, cst.Call):
                out.append(node)
                func = node.func
                if self.raw_name_anywhere(func) is not None:
                    break
                helper = self._same_file_function(func, self.index.scopes_of(node)) if isinstance(func, cst.Name) else None
                if helper is not None:
                    out.pop()
                    rets = list(_returns(helper))
                    node = rets[-1] if rets else None
                    continue
                node = func.value if isinstance(func, cst.Attribute) else None
            elif isinstance(node, cst.Name):
                bs = self.reaching_bindings(node)
                node = bs[0].value if bs and bs[0].kind == "assign" else None
            else:
                break
        out.reverse()
        return out

    def raw_name_anywhere(self, node: cst.BaseExpression) -> str | None:
        """:meth:`raw_name` for a node anywhere in the file (not only the visited one)."""
        return self.raw_name(node, [s for s in reversed(self.index.scopes_of(node)) if not isinstance(s, cst.Module)])

    def _call_name_anywhere(self, call: cst.Call) -> str | None:
        raw = self.raw_name_anywhere(call.func)
        if raw is not None and raw.split(".")[0] not in ("tensorflow", "keras", "tf_keras"):
            raw = self._project_raw(raw)  # a project module re-exporting the framework, as resolve() follows
        if raw is None or raw.split(".")[0] not in ("tensorflow", "keras", "tf_keras"):
            if isinstance(call.func, cst.Call):  # a layer application: Conv2D(...)(x)
                inner = self._call_name_anywhere(call.func)
                return inner
            return None
        return canonical(raw)

    def _canonical_dotted(self, dotted: str, scopes: Sequence[ScopeNode]) -> str | None:
        head, _, rest = dotted.partition(".")
        base = self.imports.get(head)
        if base is None:
            return None
        raw = f"{base}.{rest}" if rest else base
        return canonical(raw) if raw.split(".")[0] in ("tensorflow", "keras", "tf_keras") else None

    def _same_file_function(self, func: cst.BaseExpression, scopes: Sequence[ScopeNode]) -> cst.FunctionDef | None:
        if isinstance(func, cst.Name):
            b, _ = self._lookup_in(func.value, scopes)
            if b is not None and b.kind == "def" and isinstance(b.node, cst.FunctionDef):
                return b.node
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            cls = next((s for s in scopes if isinstance(s, cst.ClassDef)), None)
            if cls is not None:
                bs = self.scope_index(cls).bindings.get(func.attr.value)
                if bs and len(bs) == 1 and isinstance(bs[0].node, cst.FunctionDef):  # (kind "def")
                    return bs[0].node
        return None

    @bounded(list)
    def const_sources(self, expr: cst.BaseExpression, _depth: int = 0) -> list[cst.BaseExpression]:
        """The expressions a value comes from, following names, parameters (one per call
        site), attributes and subscripts — e.g. the ``'channels_first'`` literal behind
        ``data_format=fmt``. Report or fix at these to touch the definition once."""
        if _depth > self.budget.depth:
            return []
        if isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript)) and not (
            isinstance(expr, cst.Name) and expr.value in ("True", "False", "None")
        ):
            scopes = self.index.scopes_of(expr)
            out: list[cst.BaseExpression] = []
            for e, _ in self._deref(expr, scopes):
                if e is None:
                    return []
                out.extend(self.const_sources(e, _depth + 1) or [])
            return out
        return [expr]

    # ---- what a function is for ------------------------------------------------
    def function_role(self, func: cst.FunctionDef | cst.Lambda | None) -> Role:
        """'model' (runs on the accelerator: a Layer/Model ``call``/``build``, a
        ``train_step``, a ``tf.function``, a TF1 ``model_fn``, a function that builds
        layers, a ``strategy.run`` step), 'input' (the input pipeline: functions given
        to ``Dataset.map``/``filter``/``interleave``, parsers, ``input_fn``s) or
        'other'. Helpers without evidence of their own take their enclosing function's
        role, else their same-file callers' when those agree. Computed once per file."""
        if func is None:
            return Role.OTHER
        roles: dict[int, Role] = self.file_fact("roles", _compute_roles, by_node=True)
        return roles.get(id(func), Role.OTHER)

    def enclosing_callable(self) -> cst.FunctionDef | cst.Lambda | None:
        """The innermost function or lambda around the visited node."""
        for node in reversed(self.walk_path):
            if isinstance(node, (cst.FunctionDef, cst.Lambda)):
                return node
        return None

    def callable_of(self, node: cst.CSTNode) -> cst.FunctionDef | cst.Lambda | None:
        """The innermost function or lambda around ``node``, else None (module level)."""
        return next((s for s in self.index.scopes_of(node) if isinstance(s, (cst.FunctionDef, cst.Lambda))), None)

    def role_of(self, node: cst.CSTNode) -> Role:
        """:meth:`function_role` of the code around ``node``; MODULE at module level."""
        f = self.callable_of(node)
        return Role.MODULE if f is None else self.function_role(f)

    def role(self) -> Role:
        """:meth:`function_role` of the code being visited; 'module' at module level."""
        f = self.enclosing_callable()
        return Role.MODULE if f is None else self.function_role(f)

    @property
    def uses_tpu(self) -> bool:
        """The file sets up a TPU: a TPU strategy / cluster resolver / TPUEstimator /
        ``tpu.rewrite`` etc. (symbols.TPU_SYMBOLS), resolved through imports."""
        return bool(self.file_fact("uses_tpu", _uses_tpu))

    def file_fact(self, key: str, compute: Callable[[FileContext], Any], *, by_node: bool = False) -> Any:
        """``compute(self)``, once per check: a fact about the whole file that findings
        anywhere may rest on (the file uses a TPU, which functions are input pipelines).

        Rules keep whole-file facts here, never in their own attributes: the language
        server reuses a statement's findings only while every fact they were made with
        still holds (kerasfit.lsp.memo). ``key`` names the fact (prefix it with the rule's
        code); ``compute`` must be a module-level function of the context. ``by_node``:
        the value is a set or dict keyed by node ids, compared only on unchanged nodes."""
        hit = self.facts.get(key)
        if hit is None:
            hit = self.facts[key] = (compute, compute(self), by_node)
        return hit[1]

    # ---- analyses in kerasfit.semantic (lazy; rules ask only through these) -----------
    def call_name_anywhere(self, call: cst.Call) -> str | None:
        """:meth:`call_name` for a call anywhere in the file (a layer application
        ``Dense(8)(x)`` answers its layer's name)."""
        return self._call_name_anywhere(call)

    def raw_name_in(self, node: cst.BaseExpression, scopes: Sequence[ScopeNode]) -> str | None:
        """:meth:`raw_name` of ``node`` seen from ``scopes`` (outermost first), without
        building the file index."""
        return self.raw_name(node, [s for s in scopes if not isinstance(s, cst.Module)])

    def function_defined_as(self, expr: cst.BaseExpression, scopes: Sequence[ScopeNode] | None = None) -> cst.FunctionDef | None:
        """The same-file ``def`` a name (or ``self.method``) refers to, seen from ``scopes``
        (default: where ``expr`` is)."""
        return self._same_file_function(expr, self.index.scopes_of(expr) if scopes is None else scopes)

    def tensor_names(self, func: cst.FunctionDef | cst.Lambda) -> Any:
        """The names of ``func`` that may hold TF tensors (semantic.tensors.TensorNames)."""
        cache = self.caches.tensor_names
        hit = cache.get(id(func))
        if hit is None or hit.fn is not func:
            hit = cache[id(func)] = TensorNames(self, func)
        return hit

    def is_host_function(self, func: cst.FunctionDef | cst.Lambda | None) -> bool:
        """True for code that runs on the host, never on the accelerator: a TPUEstimator
        ``metric_fn`` / ``host_call``, a ``serving_input_fn``, and what they nest
        (semantic.roles)."""
        if func is None:
            return False
        from .roles import host_functions  # defers the role tables (semantic.roles, ~5 ms of name sets) until asked

        return id(func) in self.file_fact("host_functions", host_functions, by_node=True)

    def in_demo_block(self, node: cst.CSTNode) -> bool:
        """True inside an ``if __name__ == "__main__":`` block of a library module or one
        that does not train (analysis.roles.demo_blocks): demo code."""
        from .roles import demo_blocks  # defers the role tables, as above

        blocks: frozenset[int] = self.file_fact("demo_blocks", demo_blocks, by_node=True)
        if not blocks:
            return False
        n: cst.CSTNode | None = node
        while n is not None:
            if id(n) in blocks:
                return True
            n = self.parent(n)
        return False

    def is_graph_code(self, func: cst.FunctionDef | cst.Lambda | None) -> bool:
        """True when ``func`` builds or runs inside a traced graph although no role says
        so: TF1 graph code (the file spells ``tf.compat.v1`` / TF1-only symbols), a body
        of in-graph control flow, or a Keras 3 function written with ``keras.ops``
        (semantic.roles)."""
        if func is None:
            return False
        from .roles import graph_file, traced_functions  # defers the role tables, as above

        traced = self.file_fact("traced_functions", traced_functions, by_node=True)
        if self.file_fact("graph_file", graph_file) or id(func) in traced:
            return True
        # nested in a traced function: traced with it
        return any(id(s) in traced for s in self.index.scopes_of(func))


# ---- reach: types and the file index --------------------------------------------


class CallSites(NamedTuple):
    """Same-file calls of a function, each with the scopes it sits in."""

    calls: tuple[tuple[cst.Call, tuple[ScopeNode, ...]], ...]
    complete: bool  # False: the function is also used as a value; callers may be unseen
    skip_self: bool = False  # a method / __init__: the call passes no ``self``


class ParamValue(NamedTuple):
    """What one call site passes for a parameter."""

    call: cst.Call
    value: cst.BaseExpression | None  # the argument, the default when omitted, None if hidden
    const: Any  # ``value`` folded in the caller's scope (or the def's), or UNKNOWN
    passed: bool  # True when the site passes it explicitly (False: the default)


class Origin(NamedTuple):
    """The call that produced a value (see FileContext.origins)."""

    call: cst.Call  # the producing call (may sit inside a same-file helper)
    name: str | None  # its canonical TF/Keras name; for ``Layer(...)(x)`` the layer class
    via: tuple[cst.Call, ...]  # same-file helper calls crossed, outermost first
    conditional: bool  # another path may reach the use without this call


# ``cfg = HParams(batch_size=64)``: attribute reads fold to the keyword's value.
_RECORD_CTORS = frozenset({"HParams", "ConfigDict", "FrozenConfigDict", "SimpleNamespace", "Namespace", "EasyDict", "edict", "Bunch", "AttrDict"})
def _set_image_data_formats(ctx: FileContext) -> frozenset[Any]:
    """The formats this file passes to ``set_image_data_format`` (UNKNOWN for one it
    computes), so that ``image_data_format()`` is folded only where the file keeps the
    default or sets a single constant."""
    out: set[Any] = set()
    for call, _scopes in ctx.index.calls:
        if ctx.call_name_anywhere(call) in SET_IMAGE_DATA_FORMAT_CALLS:
            arg = get_arg(call, "data_format", 0)
            out.add(ctx.const(arg.value, scopes=ctx.scopes_of(arg.value)) if arg is not None else UNKNOWN)
    return frozenset(out)


def _dict_entry(value: cst.BaseExpression | None, key: str) -> cst.BaseExpression | None:
    """``{'k': v}`` / ``dict(k=v)`` → v."""
    if isinstance(value, cst.Dict):
        for el in value.elements:
            if isinstance(el, cst.DictElement) and _string_key(el.key) == key:
                return el.value
    elif _is_dict_ctor(value):
        kw = get_arg(value, key)  # type: ignore[arg-type]
        return kw.value if kw is not None else None
    return None


def _is_dict_ctor(value: cst.BaseExpression | None) -> bool:
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict"


def _returns(func: cst.FunctionDef) -> Iterator[cst.BaseExpression]:
    """The values a function returns (not those of nested defs)."""
    stack: list[Any] = [func.body]
    while stack:
        for stmt in iter_statements(stack.pop()):
            if isinstance(stmt, cst.Return) and stmt.value is not None:
                yield stmt.value


def _exhaustive_if(idx: FileIndex, bindings: Sequence[Binding], use_ancestors: set[int]) -> bool:
    """True when the bindings cover every branch of one ``if``/``elif``/``else`` chain
    whose block encloses the use (so one of them always ran)."""
    blocks = {id(idx.block_of(b.node)) for b in bindings if b.kind == "assign"}
    top = idx.parent.get(id(idx.block_of(bindings[0].node)))
    if not isinstance(top, (cst.If, cst.Else)):
        return False
    while isinstance(idx.parent.get(id(top)), (cst.If, cst.Else)):
        top = idx.parent[id(top)]  # climb elif / else to the chain's first ``if``
    if not isinstance(top, cst.If) or not idx.encloses_block_of(top, use_ancestors):
        return False
    node: cst.If | cst.Else | None = top
    while node is not None:
        if id(node.body) not in blocks:
            return False
        if isinstance(node, cst.Else):
            return True
        node = node.orelse
    return False  # no ``else``: every branch may be skipped


_MODEL_METHODS = frozenset({"call", "build"})
# Layers named for preprocessing (keras-hub's `Preprocessor`, `Tokenizer`,
# `ImageConverter`; Keras's `PreprocessingLayer`) run where their docs put them: in the
# tf.data pipeline (`ds.map(preprocessor)`), not in the model.
_PREPROCESSING = re.compile(r"Preprocess|Tokenizer|Converter")


def _preprocessing_class(cls: cst.ClassDef) -> bool:
    names = [cls.name.value, *(dotted_name(b.value) or "" for b in cls.bases if b.keyword is None)]
    return any(_PREPROCESSING.search(n.rsplit(".", 1)[-1]) for n in names)


_STEP_NAMES = frozenset({"train_step", "test_step", "eval_step", "predict_step", "step_fn", "train_step_fn", "eval_step_fn", "replica_fn"})
# Training drivers: a function calling these runs training, it is not an input pipeline.
_DRIVER_METHODS = frozenset(
    {"fit", "compile", "evaluate", "fit_generator", "train", "train_and_evaluate", "minimize", "apply_gradients", "compute_gradients"}
)


def _uses_tpu(ctx: FileContext) -> bool:
    low = ctx.source.lower()
    if "tpu" not in low:
        # a helper of another module may make the TPU strategy the file uses
        return "strateg" in low and any(project_makes_tpu(ctx, call) for call, _ in ctx.index.calls)
    for call, _ in ctx.index.calls:
        raw = ctx.raw_name_anywhere(call.func)
        if raw and raw.split(".")[0] in ("tensorflow", "keras", "tf_keras") and is_tpu_symbol(canonical(raw)):
            return True
        if raw and canonical(raw).startswith("keras.distribution."):
            # Keras 3: ``keras.distribution.list_devices("tpu")`` feeding ``DataParallel``
            if any(isinstance(v, str) and v.lower().startswith("tpu") for v in (ctx.const(a.value) for a in call.args)):
                return True
    for call, _ in ctx.index.calls:
        if project_makes_tpu(ctx, call):  # a strategy made by a helper of another module
            return True
    return False


def _compute_roles(ctx: FileContext) -> dict[int, Role]:
    """function_role for every function and lambda of the file (see FileContext)."""
    idx = ctx.index
    forced: dict[int, Role] = {}
    direct: dict[int, Role] = {}
    body_model: set[int] = set()
    body_input: set[int] = set()
    driver: set[int] = set()

    def fn_of(expr: cst.BaseExpression | None, scopes: Sequence[ScopeNode]) -> cst.FunctionDef | cst.Lambda | None:
        if isinstance(expr, cst.Lambda):
            return expr
        if isinstance(expr, cst.Call) and (dotted_name(expr.func) or "").endswith("partial") and expr.args:
            return fn_of(expr.args[0].value, scopes)
        if isinstance(expr, (cst.Name, cst.Attribute)):
            return ctx._same_file_function(expr, scopes)
        return None

    for call, scopes in idx.calls:
        func = call.func
        raw = ctx.raw_name_anywhere(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
        name = canonical(raw) if raw and raw.split(".")[0] in ("tensorflow", "keras", "tf_keras") else None
        owner = scopes[0] if isinstance(scopes[0], (cst.FunctionDef, cst.Lambda)) else None
        first = call.args[0].value if call.args and call.args[0].keyword is None else None
        if name is not None:
            if owner is not None:
                if is_model_building(name):
                    body_model.add(id(owner))
                elif is_input_pipeline(name):
                    body_input.add(id(owner))
            target = fn_of(first, scopes) or fn_of(_kw(call, "func", "fn", "map_func", "computation"), scopes)
            if target is not None:
                if name in HOST_CALLBACK_WRAPPERS:
                    forced[id(target)] = Role.OTHER  # runs in Python on the host, by design
                elif name in INPUT_FN_TAKERS:
                    direct.setdefault(id(target), Role.INPUT)
                elif name in STEP_FN_TAKERS or name == "keras.layers.Lambda":
                    direct.setdefault(id(target), Role.MODEL)
        elif raw is not None and raw.startswith("tensorflow_datasets"):
            if owner is not None:
                body_input.add(id(owner))
        elif isinstance(func, cst.Attribute) and raw is None:
            meth = func.attr.value
            if meth in DATASET_FN_METHODS:
                target = fn_of(first, scopes) or fn_of(_kw(call, "map_func", "predicate", "func"), scopes)
                if target is not None:
                    direct[id(target)] = Role.INPUT
            elif meth in ("run", "experimental_run_v2", "experimental_run"):
                target = fn_of(first, scopes) or fn_of(_kw(call, "fn"), scopes)
                if target is not None:
                    direct.setdefault(id(target), Role.MODEL)
            elif meth in _DRIVER_METHODS and owner is not None:
                driver.add(id(owner))
        for a in call.args:
            if a.keyword is not None and a.keyword.value in ("input_fn", "model_fn"):
                target = fn_of(a.value, scopes)
                if target is not None:
                    direct.setdefault(id(target), Role.INPUT if a.keyword.value == "input_fn" else Role.MODEL)

    keras_classes: dict[int, bool] = {}

    def is_keras_class(cls: cst.ClassDef, depth: int = 0) -> bool:
        key = id(cls)
        if key not in keras_classes:
            keras_classes[key] = False
            ok = False
            for base in cls.bases:
                if base.keyword is not None:
                    continue
                raw = ctx.raw_name_anywhere(base.value)
                if raw is not None:
                    ok = raw.split(".")[0] in ("tensorflow", "keras", "tf_keras") and canonical(raw).startswith(("keras.", "tf.Module"))
                else:
                    scopes = idx.scopes_of(cls)
                    b = ctx.lookup(dotted_name(base.value) or "", scopes) if isinstance(base.value, cst.Name) else None
                    if b is not None and b.kind == "class" and depth < 8:
                        ok = is_keras_class(b.node, depth + 1)  # type: ignore[arg-type]
                    else:
                        ok = (dotted_name(base.value) or "").endswith(("Layer", "Model", "Block", "Module"))
                if ok:
                    break
            keras_classes[key] = ok
        return keras_classes[key]

    roles: dict[int, Role] = {}
    undecided: list[cst.FunctionDef | cst.Lambda] = []
    for f in idx.functions:  # source order: an enclosing function comes first
        k = id(f)
        role = forced.get(k) or direct.get(k)
        if role is None and isinstance(f, cst.FunctionDef):
            fname = f.name.value
            cls = idx.method_class.get(k)
            params = [p.name.value for p in f.params.params]
            if any(ctx._canonical_dotted(dotted_name(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) or "", ()) == "tf.function" for d in f.decorators):
                role = Role.MODEL
            elif cls is not None and _preprocessing_class(cls):
                role = Role.INPUT
            elif fname in _STEP_NAMES or (cls is not None and fname in _MODEL_METHODS and is_keras_class(cls)):
                role = Role.MODEL
            elif fname == "model_fn" or fname.endswith("_model_fn") or params[:3] == ["features", "labels", "mode"]:
                role = Role.MODEL
            elif fname == "input_fn" or fname.endswith("_input_fn"):
                role = Role.INPUT
        if role is None:
            m, i = k in body_model, k in body_input
            if m and not i:
                role = Role.MODEL
            elif i and not m and k not in driver:
                role = Role.INPUT
            elif m or i or k in driver:
                role = Role.OTHER
        if role is None:
            outer = next((s for s in idx.scopes_of(f) if isinstance(s, (cst.FunctionDef, cst.Lambda))), None)
            if outer is not None and roles.get(id(outer)) in (Role.MODEL, Role.INPUT):
                role = roles[id(outer)]
        if role is None:
            undecided.append(f)
        else:
            roles[k] = role
    # helpers without evidence: the role all their same-file callers share
    for _ in range(6):
        changed = False
        for f in undecided:
            if id(f) in roles or not isinstance(f, cst.FunctionDef):
                continue
            sites = ctx.call_sites(f)
            caller_roles: set[Role | None] = set()  # None: a caller whose role is undecided
            for call, scopes in sites.calls:
                owner = next((s for s in scopes if isinstance(s, (cst.FunctionDef, cst.Lambda))), None)
                caller_roles.add(roles.get(id(owner)) if owner is not None else Role.MODULE)
            shared = next(iter(caller_roles)) if len(caller_roles) == 1 else None
            if shared in (Role.MODEL, Role.INPUT):
                assert shared is not None
                roles[id(f)] = shared
                changed = True
                # nested functions of a newly decided helper follow it
                for g in undecided:
                    if id(g) not in roles and f in idx.scopes_of(g):
                        roles[id(g)] = roles[id(f)]
        if not changed:
            break
    # a module-level helper nothing here decides: input-only when the project hands it
    # (or a caller of it) to a Dataset method in another file and no model code reaches it
    if ctx.filename and not ctx.filename.startswith("<"):
        for f in undecided:
            if id(f) not in roles and isinstance(f, cst.FunctionDef) and idx.scopes_of(f)[0] is ctx.module:
                if ctx.project.input_only(ctx.filename, f.name.value):
                    roles[id(f)] = Role.INPUT
                    for g in undecided:
                        if id(g) not in roles and f in idx.scopes_of(g):
                            roles[id(g)] = Role.INPUT
    return roles


def _kw(call: cst.Call, *names: str) -> cst.BaseExpression | None:
    for a in call.args:
        if a.keyword is not None and a.keyword.value in names:
            return a.value
    return None
