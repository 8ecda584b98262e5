"""What rules may ask about the file being checked: names, constants, scopes.

libcst's QualifiedNameProvider and ScopeProvider cost ~7x a parse on a real corpus, so
the engine keeps its own cheap model instead: one statement-level scan for imports and
module bindings, and per-scope binding indexes built lazily on the first question.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, Iterator

import libcst as cst

from .symbols import canonical, flavour
from .types import TARGETS, Target


class _Unknown:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:
        return False


UNKNOWN: Any = _Unknown()

ScopeNode = cst.Module | cst.FunctionDef | cst.ClassDef | cst.Lambda

_BINOPS = {
    cst.Add: operator.add,
    cst.Subtract: operator.sub,
    cst.Multiply: operator.mul,
    cst.Divide: operator.truediv,
    cst.FloorDivide: operator.floordiv,
    cst.Modulo: operator.mod,
    cst.Power: operator.pow,
}


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


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


def _module_dotted(node: cst.BaseExpression | None) -> str:
    if node is None:
        return ""
    return dotted_name(node) or ""


def _target_names(target: cst.BaseExpression) -> Iterator[cst.Name]:
    if isinstance(target, cst.Name):
        yield target
    elif isinstance(target, (cst.Tuple, cst.List)):
        for el in target.elements:
            yield from _target_names(el.value)
    elif isinstance(target, cst.StarredElement):
        yield from _target_names(target.value)


def iter_statements(body: Any) -> Iterator[cst.CSTNode]:
    """Statements of one scope, descending into compound statements but not defs."""
    stack = [body]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(reversed(item))
            continue
        if isinstance(item, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            stack.append(item.body)
            continue
        if isinstance(item, cst.SimpleStatementLine):
            yield from item.body
            continue
        yield item
        if isinstance(item, (cst.FunctionDef, cst.ClassDef)):
            continue
        for attr in ("body", "orelse", "finalbody", "handlers", "cases"):
            sub = getattr(item, attr, None)
            if sub is None:
                continue
            if isinstance(sub, (cst.Else, cst.If, cst.ExceptHandler, cst.Finally)):
                sub = [sub]
            stack.append(sub)


class FileContext:
    """Per-file facts shared by all rules, built once per parse."""

    def __init__(
        self,
        module: cst.Module,
        filename: str,
        target: Target | None = None,
        options: dict | None = None,
        source: str = "",
    ):
        self.module = module
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
        self._scan_imports()
        # Filled by the engine's walk: ancestors of the node being visited.
        self.stack: list[cst.CSTNode] = []

    # ---- imports and names -------------------------------------------------
    def _scan_imports(self) -> None:
        module_index = self.scope_index(self.module)
        for stmt in self._all_import_statements():
            if isinstance(stmt, cst.Import):
                for alias in stmt.names:
                    full = _module_dotted(alias.name)
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                        self.imports[alias.asname.name.value] = full
                    else:
                        top = full.split(".")[0]
                        self.imports[top] = top
            elif isinstance(stmt, cst.ImportFrom):
                if stmt.relative or isinstance(stmt.names, cst.ImportStar):
                    continue
                mod = _module_dotted(stmt.module)
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

    def _all_import_statements(self) -> Iterator[cst.CSTNode]:
        stack: list[Any] = [self.module.body]
        while stack:
            item = stack.pop()
            for stmt in iter_statements(item):
                if isinstance(stmt, (cst.Import, cst.ImportFrom)):
                    yield stmt
                elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                    stack.append(stmt.body)

    def raw_name(self, node: cst.BaseExpression) -> str | None:
        """The fully-qualified dotted name an expression refers to, if it is imported."""
        if isinstance(node, cst.Call):
            return None
        dotted = dotted_name(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        if head in self.module_shadowed and head not in self.imports:
            return None
        if self._locally_rebound(head):
            return None
        base = self.imports.get(head)
        if base is None:
            alias = self._module_alias(head)
            if alias is None:
                return None
            base = alias
        return f"{base}.{rest}" if rest else base

    def _locally_rebound(self, name: str) -> bool:
        """True when the innermost function scope assigns ``name`` itself."""
        for scope in reversed(self.stack):
            if isinstance(scope, (cst.FunctionDef, cst.Lambda)):
                idx = self.scope_index(scope)
                bs = idx.bindings.get(name)
                if bs:
                    return not all(b.kind == "import" for b in bs)
        return False

    def _module_alias(self, name: str) -> str | None:
        """``Conv = tf.keras.layers.Conv2D`` at module level makes Conv an alias."""
        bindings = self.scope_index(self.module).bindings.get(name)
        if not bindings or len(bindings) != 1 or bindings[0].value is None:
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

    def resolve(self, node: cst.BaseExpression) -> str | None:
        """Canonical name (symbols.canonical) of a Name/Attribute, or None."""
        raw = self.raw_name(node)
        if raw is None or raw.split(".")[0] not in ("tensorflow", "keras", "tf_keras"):
            return None
        return canonical(raw)

    def call_name(self, node: cst.CSTNode) -> str | None:
        """Canonical name of the callee when ``node`` is a call of a TF/Keras symbol."""
        if isinstance(node, cst.Call):
            return self.resolve(node.func)
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
            for p in (params.star_arg, params.star_kwarg):
                if isinstance(p, cst.Param):
                    idx.add(p.name.value, Binding(None, p, "param"))
            if isinstance(scope, cst.Lambda):
                return idx
        for stmt in iter_statements(scope.body):
            if isinstance(stmt, cst.Assign):
                for t in stmt.targets:
                    if isinstance(t.target, cst.Name):
                        idx.add(t.target.value, Binding(stmt.value, stmt))
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

    def scopes(self) -> list[ScopeNode]:
        """Enclosing scopes of the current node, innermost first."""
        out: list[ScopeNode] = [
            s for s in reversed(self.stack) if isinstance(s, (cst.FunctionDef, cst.ClassDef, cst.Lambda))
        ]
        out.append(self.module)
        return out

    def enclosing_function(self) -> cst.FunctionDef | None:
        for node in reversed(self.stack):
            if isinstance(node, cst.FunctionDef):
                return node
        return None

    def enclosing_class(self) -> cst.ClassDef | None:
        for node in reversed(self.stack):
            if isinstance(node, cst.ClassDef):
                return node
        return None

    def lookup(self, name: str) -> Binding | None:
        """The single binding of ``name`` visible here, or None when ambiguous/unknown.

        Class scopes are skipped for lookups from inside their methods, as in Python.
        """
        scopes = self.scopes()
        for i, scope in enumerate(scopes):
            if isinstance(scope, cst.ClassDef) and i > 0:
                continue
            bs = self.scope_index(scope).bindings.get(name)
            if bs:
                return bs[0] if len(bs) == 1 else None
        return None

    def binding_value(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        """For a Name bound once to an expression in a visible scope, that expression."""
        if isinstance(node, cst.Name):
            b = self.lookup(node.value)
            if b is not None and b.kind == "assign":
                return b.value
        return None

    # ---- constants ---------------------------------------------------------
    def const(self, node: cst.BaseExpression | None, _depth: int = 0) -> Any:
        """Fold ``node`` to a Python value, or UNKNOWN."""
        if node is None or _depth > 12:
            return UNKNOWN
        if isinstance(node, cst.Integer):
            return int(node.value.replace("_", ""), 0)
        if isinstance(node, cst.Float):
            return float(node.value.replace("_", ""))
        if isinstance(node, cst.SimpleString):
            try:
                return node.evaluated_value
            except Exception:
                return UNKNOWN
        if isinstance(node, cst.ConcatenatedString):
            v = node.evaluated_value
            return v if v is not None else UNKNOWN
        if isinstance(node, cst.Name):
            if node.value in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[node.value]
            b = self.lookup(node.value)
            if b is None:
                return UNKNOWN
            if b.kind == "assign":
                return self.const(b.value, _depth + 1)
            if b.kind == "param" and b.value is not None and self.options.get("const_through_defaults", True):
                return self.const(b.value, _depth + 1)
            return UNKNOWN
        if isinstance(node, cst.UnaryOperation):
            v = self.const(node.expression, _depth + 1)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                if isinstance(node.operator, cst.Minus):
                    return -v
                if isinstance(node.operator, cst.Plus):
                    return v
            return UNKNOWN
        if isinstance(node, cst.BinaryOperation):
            op = _BINOPS.get(type(node.operator))
            if op is None:
                return UNKNOWN
            a = self.const(node.left, _depth + 1)
            if a is UNKNOWN:
                return UNKNOWN
            b = self.const(node.right, _depth + 1)
            if b is UNKNOWN:
                return UNKNOWN
            try:
                if op is operator.pow and isinstance(b, (int, float)) and b > 64:
                    return UNKNOWN
                return op(a, b)
            except Exception:
                return UNKNOWN
        if isinstance(node, (cst.Tuple, cst.List)):
            out = []
            for el in node.elements:
                if isinstance(el, cst.StarredElement):
                    return UNKNOWN
                v = self.const(el.value, _depth + 1)
                if v is UNKNOWN:
                    return UNKNOWN
                out.append(v)
            return tuple(out) if isinstance(node, cst.Tuple) else out
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in ("int", "round"):
            if len(node.args) == 1:
                v = self.const(node.args[0].value, _depth + 1)
                if isinstance(v, (int, float)):
                    return int(v) if node.func.value == "int" else round(v)
        return UNKNOWN

    def int_const(self, node: cst.BaseExpression | None) -> int | None:
        v = self.const(node)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        if isinstance(v, float) and v.is_integer():
            return int(v)
        return None


def get_arg(call: cst.Call, keyword: str | None, position: int | None = None) -> cst.Arg | None:
    """The argument passed as ``keyword`` or at ``position`` (positional only)."""
    if keyword is not None:
        for a in call.args:
            if a.keyword is not None and a.keyword.value == keyword:
                return a
    if position is not None:
        i = 0
        for a in call.args:
            if a.keyword is not None or a.star:
                break
            if i == position:
                return a
            i += 1
    return None
