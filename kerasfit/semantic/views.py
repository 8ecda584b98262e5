"""What the parts of the semantic model see of their file and of each other: small
protocols, each naming only what its readers ask, so that a part is typed against them
and never against :class:`.model.SemanticModel` (which composes the parts: typing a part
against it made every part import every other, if only for type checking).

The model satisfies :class:`FileView` and :class:`ModelView`, the values part
:class:`ValuesView` and :class:`ValueFlow`, the names part :class:`NamesView`, the
model's memos (``semantic.caches.ModelCaches``) :class:`NameMemos` and
:class:`LayerMemos`; mypy checks each where a part is handed one. The modules below this
one (syntax, the project index, scopes) are named directly; the parts above it only
through these protocols. :class:`CallSites` and :class:`ParamValue` are the records the values part
answers ``call_sites`` and ``param_values`` with.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any, Callable, Hashable, NamedTuple, Protocol, Self, Sequence

import libcst as cst

from .nodes import ScopeNode

if TYPE_CHECKING:
    from .fileindex import FileIndex
    from .folding import Budget
    from .index import ProjectIndex
    from .nodes import SyntaxMemo
    from .scopes import Scopes
    from .summaries import Layer


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


# ---- the model's memos, as their readers see them ------------------------------------
class NameMemos(Protocol):
    """The memos of the names part (semantic.naming, semantic.names)."""

    project_raws: dict[str, str | None]
    heads: dict[tuple[str, int], list[Any]]
    call_names_anywhere: dict[int, tuple[cst.Call, str | None]]
    by_name_hits: dict[int, tuple[cst.CSTNode, str]]
    declared_globals: dict[int, frozenset[str]]
    may_declare_globals: bool | None
    may_inject: bool | None


class LayerMemos(Protocol):
    """The memos of the layers part (semantic.bridge) and the file's own index facts."""

    built_layers: dict[int, tuple[cst.Call, Layer | None]]
    ops_fed: dict[tuple[int, int], tuple[cst.Call, list[Layer]]]
    factory_callees: dict[str, bool]
    tpu_makers: dict[str, bool]
    wrapper_ops: dict[Hashable, list[Layer]]
    index_facts_read: bool
    index_facts: Any
    may_return_layer: dict[int, tuple[cst.FunctionDef, bool]]
    project_may_return_layer: dict[int, tuple[ast.FunctionDef, bool]]
    # (typed ``dict[int, tensors.TensorNames]`` where declared: semantic.caches)
    tensor_names: dict[int, Any]


class ModelMemos(NameMemos, LayerMemos, Protocol):
    """Every memo a part reads through the model."""

    scoped_index: Any
    scoped_refs: dict[tuple[str, str], dict[int, list[Any]]]
    # (typed ``containers.Contents | None`` where declared: semantic.caches)
    containers: dict[tuple[int, str, int], Any]
    # (typed ``tuple[cst.CSTNode, shapes.TensorShape]`` where declared: semantic.caches)
    shapes: dict[int, tuple[cst.CSTNode, Any]]
    shapes_busy: set[int]
    shapes_cut: bool


# ---- the file, as the names part sees it ----------------------------------------------
class FileView(Protocol):
    """The per-file facts a part reads: the tree, its text and name, the project index,
    the file index and scopes, whole-file facts."""

    @property
    def module(self) -> cst.Module: ...
    @property
    def source(self) -> str: ...
    @property
    def filename(self) -> str: ...
    @property
    def options(self) -> dict[str, Any]: ...
    @property
    def project(self) -> ProjectIndex: ...
    @property
    def index(self) -> FileIndex: ...
    @property
    def scopes(self) -> Scopes: ...
    @property
    def caches(self) -> ModelMemos: ...

    def file_fact(self, key: str, compute: Callable[[Self], Any], *, by_node: bool = False) -> Any: ...


# ---- the parts above the scopes, as the other parts see them ---------------------------
class NamesView(Protocol):
    """What the other parts ask the names part (semantic.naming.Names)."""

    @property
    def imports(self) -> dict[str, str]: ...

    def call_name(self, node: cst.CSTNode) -> str | None: ...
    def call_name_anywhere(self, call: cst.Call) -> str | None: ...
    def raw_name_anywhere(self, node: cst.BaseExpression) -> str | None: ...
    def raw_name_in(self, node: cst.BaseExpression, scopes: Sequence[ScopeNode]) -> str | None: ...
    def canonical_dotted(self, dotted: str, scopes: Sequence[ScopeNode]) -> str | None: ...
    def framework_raw(self, raw: str | None) -> str | None: ...


class ValuesView(Protocol):
    """What the layers part and the facts ask the values part (semantic.values.Values)."""

    def const(self, node: cst.BaseExpression | None, _depth: int = 0, *, scopes: Sequence[ScopeNode] | None = None) -> Any: ...
    def possible_values(self, node: cst.BaseExpression | None) -> frozenset[Any] | None: ...
    def function_defined_as(self, expr: cst.BaseExpression, scopes: Sequence[ScopeNode] | None = None) -> cst.FunctionDef | None: ...
    def same_file_function(self, func: cst.BaseExpression, scopes: Sequence[ScopeNode]) -> cst.FunctionDef | None: ...
    def call_sites(self, func: cst.FunctionDef | cst.ClassDef) -> CallSites: ...
    def call_chain(self, expr: cst.BaseExpression) -> list[cst.Call]: ...
    def deref(self, node: cst.BaseExpression, scopes: Sequence[ScopeNode]) -> list[tuple[cst.BaseExpression | None, Sequence[ScopeNode]]]: ...
    def param_values(self, func: cst.FunctionDef | cst.Lambda, param: str | cst.Param) -> list[ParamValue]: ...


class ValueFlow(ValuesView, Protocol):
    """What the values part's own helpers (semantic.callsites, valueflow, valuesets) ask
    of it: its folder, budget and parts besides the questions above."""

    @property
    def module(self) -> cst.Module: ...
    @property
    def scopes(self) -> Scopes: ...
    @property
    def names(self) -> NamesView: ...
    @property
    def budget(self) -> Budget: ...

    def imported_elsewhere(self) -> bool: ...
    def image_data_format(self) -> Any: ...


class ModelView(FileView, Protocol):
    """The model as the layers part, the values part and the facts (roles, containers,
    precision, data flow, pipelines) see it: the file's facts and the parts they ask."""

    @property
    def names(self) -> NamesView: ...
    @property
    def values(self) -> ValuesView: ...
    @property
    def syntax(self) -> SyntaxMemo: ...

