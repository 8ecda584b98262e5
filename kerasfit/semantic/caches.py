"""What a file's model remembers while one check runs: every memo declared here, typed,
one instance per model (``ctx.caches``) — never attributes stuck onto the model at run
time and never module globals keyed by ``id()``. Node-keyed entries keep their node, so
an id is never reused while the memo lives."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Hashable

import libcst as cst

if TYPE_CHECKING:
    from .containers import Contents
    from .summaries import Layer
    from .shapes import TensorShape
    from .tensors import TensorNames


@dataclass
class ModelCaches:
    # names.py: a project import's framework re-export, per raw dotted name
    project_raws: dict[str, str | None] = field(default_factory=dict)
    # naming.py: what a dotted name's head stands for, per (head, innermost enclosing
    # def / class / lambda or None): that scope (kept alive), the base spelling, and how
    # the rest joins it (naming.Names._head)
    heads: dict[tuple[str, int], list[Any]] = field(default_factory=dict)
    # naming.py: call_name_anywhere per call
    call_names_anywhere: dict[int, tuple[cst.Call, str | None]] = field(default_factory=dict)
    # model.py: attribute spellings resolved by name only (``layers.Conv2D`` on an unknown receiver)
    by_name_hits: dict[int, tuple[cst.CSTNode, str]] = field(default_factory=dict)
    # tensors.py: per function, the names that may hold tensors
    tensor_names: dict[int, TensorNames] = field(default_factory=dict)
    # shapes.py: per expression, what the code says of its rank and last-axis size
    shapes: dict[int, tuple[cst.CSTNode, TensorShape]] = field(default_factory=dict)
    shapes_busy: set[int] = field(default_factory=set)  # the expressions being worked out
    shapes_cut: bool = False  # an answer being worked out met a cycle or the depth budget
    # scoped.py: references grouped by scope, valid for ``scoped_index`` only
    scoped_index: Any = None
    scoped_refs: dict[tuple[str, str], dict[int, list[Any]]] = field(default_factory=dict)
    # containers.py: (where, spelling, alias) -> contents
    containers: dict[tuple[int, str, int], Contents | None] = field(default_factory=dict)
    # names.py: names each function declares ``global``; whether the text says ``global`` at all
    declared_globals: dict[int, frozenset[str]] = field(default_factory=dict)
    may_declare_globals: bool | None = None
    # names.py: whether any function takes ``**kwargs`` or the text names the injector
    may_inject: bool | None = None
    # bridge.py: what a call of a project factory builds; which callees are project functions
    built_layers: dict[int, tuple[cst.Call, Layer | None]] = field(default_factory=dict)
    # bridge.py: the framework ops a project wrapper applies to its first argument
    ops_fed: dict[tuple[int, int], tuple[cst.Call, list[Layer]]] = field(default_factory=dict)
    factory_callees: dict[str, bool] = field(default_factory=dict)
    # bridge.py: whether a project function (by its spelling here) sets up a TPU
    tpu_makers: dict[str, bool] = field(default_factory=dict)
    # bridge.py: the same, per (wrapper, argument values): most wrappers are called alike
    wrapper_ops: dict[Hashable, list[Layer]] = field(default_factory=dict)
    # bridge.py: the file's own project-index facts (read once)
    index_facts_read: bool = False
    index_facts: Any = None
    # bridge.py: whether a same-file def may return a layer
    may_return_layer: dict[int, tuple[cst.FunctionDef, bool]] = field(default_factory=dict)
    # bridge.py: the same for a project function (its ``ast`` summary)
    project_may_return_layer: dict[int, tuple[ast.FunctionDef, bool]] = field(default_factory=dict)
