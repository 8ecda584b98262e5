"""The semantic model of one file: its facts and its typed parts, built lazily.

libcst's QualifiedNameProvider and ScopeProvider cost ~7x a parse on a real corpus, so
the engine keeps its own cheap model instead. Rules ask it through their context
(``kerasfit.ruleapi.context.RuleContext``), which asks its parts about the node passed in:

- ``scopes`` (semantic.scopes.Scopes) — scope indexes, bindings, parents, ancestors;
- ``names`` (semantic.naming.Names) — imports and what a spelling refers to;
- ``values`` (semantic.values.Values) — the constant folder and value questions;
- ``layers`` (semantic.bridge.Layers) — layers built by project helpers, tensor names;
- ``roles`` (semantic.roles.Roles) — what a function's code is for.

No question depends on where the engine's walk is.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Callable, cast

import libcst as cst

from ..core.types import DEFAULT_TARGET, TARGETS, Target
from .bridge import Layers
from .caches import ModelCaches
from .fileindex import FileIndex
from .index import ProjectIndex
from .naming import Names
from .nodes import SyntaxMemo
from .scopes import NO_HINTS, ModelHints, Scopes
from .values import Values

if TYPE_CHECKING:
    from .roles import Roles


class SemanticModel:
    """Per-file facts shared by all rules, built once per parse, and the parts that
    answer questions about the file's nodes."""

    __slots__ = ("module", "source", "filename", "target", "options", "caches", "syntax", "facts",
                 "scopes", "names", "_project", "_values", "_layers", "_roles", "__weakref__")

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
        """``hints``: what a caller that checks one document again and again (the language
        server) already knows about it; no answer depends on them."""
        self.module = module
        self.source = source
        self.filename = filename
        self.target = target or TARGETS[DEFAULT_TARGET]
        self.options = options or {}
        self._project = project
        # memos of the parts (kerasfit.semantic.caches) and of syntax answers (nodes.SyntaxMemo)
        self.caches = ModelCaches()
        self.syntax = SyntaxMemo()
        # whole-file facts (see file_fact): key -> (compute, value, keyed by node ids)
        self.facts: dict[str, tuple[Callable[[SemanticModel], Any], Any, bool]] = {}
        hints = hints or NO_HINTS
        self.scopes = Scopes(module, self.caches, hints)
        self.names = Names(self._weak(), self.scopes, import_free=hints.import_free)
        self._values: Values | None = None
        self._layers: Layers | None = None
        self._roles: Roles | None = None

    @property
    def values(self) -> Values:
        if self._values is None:
            self._values = Values(self._weak(), self.scopes, self.names)
        return self._values

    @property
    def layers(self) -> Layers:
        if self._layers is None:
            self._layers = Layers(self._weak())
        return self._layers

    @property
    def roles(self) -> Roles:
        if self._roles is None:
            from .roles import Roles  # defers the role tables (semantic.roles, ~5 ms of name sets) until asked

            self._roles = Roles(self._weak())
        return self._roles

    def _weak(self) -> SemanticModel:
        """This model as its parts hold it: a weak proxy. A part holding the model itself
        would make a reference cycle (model -> part -> model) that keeps the file's whole
        tree alive until the cyclic collector runs; without cycles the tree is freed as
        soon as the check drops the model (a batch run collects nothing per file)."""
        return cast(SemanticModel, weakref.proxy(self))

    @property
    def index(self) -> FileIndex:
        """The file index (one walk of the module: parents, source order, calls, stores)."""
        return self.scopes.index

    @property
    def project(self) -> ProjectIndex:
        """The project index of the running check (passed in; without one, the file is
        checked alone against an empty index of its own)."""
        if self._project is None:
            self._project = ProjectIndex()
        return self._project

    def file_fact(self, key: str, compute: Callable[[SemanticModel], Any], *, by_node: bool = False) -> Any:
        """``compute(self)``, once per check: a fact about the whole file that findings
        anywhere may rest on (the file uses a TPU, which functions are input pipelines).

        Rules keep whole-file facts here (through ``RuleContext.file_fact``), never in
        their own attributes: the language server reuses a statement's findings only while
        every fact they were made with still holds (kerasfit.engine.reuse), computing each
        again on the next check's model. ``key`` names the fact (prefix it with the rule's
        code); ``compute`` is a function of the model holding no model. ``by_node``:
        the value is a set or dict keyed by node ids, compared only on unchanged nodes."""
        hit = self.facts.get(key)
        if hit is None:
            hit = self.facts[key] = (compute, compute(self), by_node)
        return hit[1]
