"""What a rule may ask about its file: :class:`RuleContext`, the rule's ``self.ctx``.

The engine builds one per rule instance from the file's semantic model and the rule's
declared ``reads``. Every question takes the node it is about (plus what else it needs)
and none depends on where the walk is; a few read-only properties give the file-level
values (``target``, ``options``, ``filename``, ``source``, ``module``). Each method asks
the model's part directly: one call more than asking the part (a check of the keras-io
examples asks ~340,000 questions, well under 1% of its time).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar

import libcst as cst

from ..core.fixes import Replace
from ..core.types import Role, Target
from ..semantic import containers, dataflow, pipeline
from ..semantic.model import SemanticModel
from ..semantic.nodes import ScopeNode
from ..semantic.precision import compute_dtype
from ..semantic.scopes import Binding
from ..semantic.shapes import TensorShape, shape_of
from ..semantic.summaries import Layer
from ..semantic.tensors import TensorNames
from ..semantic.valueflow import Origin
from ..semantic.views import CallSites, ParamValue
from .reads import Reads, UndeclaredRead

T = TypeVar("T")


class _InContext:
    """A rule's ``compute`` of a whole-file fact, as the model keeps it: a function of the
    model that asks through a fresh context (the language server's memo recomputes every
    kept fact on the next check's model). It holds no model, so the model's ``facts``
    make no reference cycle."""

    __slots__ = ("compute", "rule", "reads")

    def __init__(self, compute: Callable[[RuleContext], Any], rule: str, reads: frozenset[Reads]) -> None:
        self.compute, self.rule, self.reads = compute, rule, reads

    def __call__(self, model: SemanticModel) -> Any:
        return self.compute(RuleContext(model, self.rule, self.reads))


class RuleContext:
    """The questions one rule asks about one file (``self.ctx``)."""

    __slots__ = ("_model", "_scopes", "_names", "_rule", "_reads")

    def __init__(self, model: SemanticModel, rule: str, reads: frozenset[Reads]) -> None:
        """``rule``: the rule's code (named in errors); ``reads``: what it declares reading."""
        self._model = model
        self._scopes = model.scopes
        self._names = model.names
        self._rule = rule
        self._reads = reads

    # ---- the file --------------------------------------------------------------------
    @property
    def target(self) -> Target:
        """The chip the check is for."""
        return self._model.target

    @property
    def options(self) -> dict[str, Any]:
        """The check's rule options (``cores``, ``batch_size`` …)."""
        return self._model.options

    @property
    def filename(self) -> str:
        """The file's name, as the check was given it."""
        return self._model.filename

    @property
    def source(self) -> str:
        """The file's text."""
        return self._model.source

    @property
    def module(self) -> cst.Module:
        """The file's tree (the module scope, for a question asked at module level)."""
        return self._model.module

    def file_fact(self, key: str, compute: Callable[[RuleContext], T], *, by_node: bool = False) -> T:
        """``compute(ctx)``, once per check: a fact about the whole file that findings
        anywhere may rest on (the file uses a TPU, which functions are input pipelines).

        Rules keep whole-file facts here, never in their own attributes: the language
        server reuses a statement's findings only while every fact they were made with
        still holds. ``key`` names the fact (prefix it with the rule's code); ``compute``
        is a module-level function of the context. ``by_node``: the value is a set or dict
        keyed by node ids, compared only on unchanged nodes. Needs ``Reads.FILE_FACTS``."""
        if Reads.FILE_FACTS not in self._reads:
            raise UndeclaredRead(self._rule, Reads.FILE_FACTS, f"ctx.file_fact({key!r})")
        model = self._model
        hit = model.facts.get(key)  # (asked again and again: no wrapper made once it is known)
        value: T = hit[1] if hit is not None else model.file_fact(key, _InContext(compute, self._rule, self._reads), by_node=by_node)
        return value

    def code(self, node: cst.CSTNode) -> str:
        """The source code of ``node`` (as libcst generates it)."""
        return self._model.module.code_for_node(node)

    def all_calls(self) -> Iterator[cst.Call]:
        """Every call of the file, in source order."""
        return self._model.index.all_calls()

    def source_order(self, node: cst.CSTNode) -> int:
        """Where ``node`` comes in the file: earlier nodes have smaller numbers."""
        return self._model.index.order[id(node)]

    def name_refs(self, name: str) -> Sequence[tuple[cst.Name, cst.Call | None, tuple[ScopeNode, ...]]]:
        """Every load of the plain name ``name``: (the Name, the call it is the callee of or
        None, its scopes)."""
        return self._model.index.name_refs.get(name, ())

    def attr_stores(self, dotted: str) -> Sequence[tuple[cst.BaseExpression | None, tuple[ScopeNode, ...]]]:
        """Every store to the attribute ``dotted`` (``self.width``): (the value or None, its scopes)."""
        return self._model.index.attr_stores.get(dotted, ())

    def flag_defaults(self, name: str) -> Sequence[tuple[cst.BaseExpression, tuple[ScopeNode, ...]]]:
        """The defaults command-line flags named ``name`` are defined with: (the default, its scopes)."""
        return self._model.index.flag_defaults.get(name, ())

    # ---- scopes and bindings -----------------------------------------------------------
    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The node directly holding ``node``."""
        return self._scopes.parent(node)

    def ancestors(self, node: cst.CSTNode) -> Sequence[cst.CSTNode]:
        """The nodes enclosing ``node``, outermost (the module) first."""
        return self._scopes.ancestors(node)

    def scopes_of(self, node: cst.CSTNode) -> list[ScopeNode]:
        """The scopes enclosing ``node``, innermost first (the module last)."""
        return self._scopes.scopes_of(node)

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The innermost ``def`` around ``node`` (its decorators and defaults included)."""
        return self._scopes.enclosing_function(node)

    def enclosing_class(self, node: cst.CSTNode) -> cst.ClassDef | None:
        """The innermost ``class`` around ``node``."""
        return self._scopes.enclosing_class(node)

    def enclosing_callable(self, node: cst.CSTNode) -> cst.FunctionDef | cst.Lambda | None:
        """The innermost function or lambda around ``node``."""
        return self._scopes.enclosing_callable(node)

    def callable_of(self, node: cst.CSTNode) -> cst.FunctionDef | cst.Lambda | None:
        """The innermost function or lambda whose body holds ``node`` (None: module level)."""
        return self._scopes.callable_of(node)

    def lookup(self, name: str, scopes: Sequence[ScopeNode] | None = None, *, at: cst.CSTNode | None = None) -> Binding | None:
        """The single binding of ``name`` visible from ``at`` (or from ``scopes``), else None."""
        return self._scopes.lookup(name, scopes, at=at)

    def bindings(self, name: str, *, at: cst.CSTNode) -> Sequence[Binding]:
        """Every binding of ``name`` in the innermost scope around ``at`` that binds it."""
        return self._scopes.bindings(name, at=at)

    def reaching_bindings(self, name: cst.Name) -> list[Binding]:
        """The bindings that may reach this use of a name, latest first."""
        return self._scopes.reaching_bindings(name)

    def binds(self, statement: cst.CSTNode, name: str) -> bool:
        """Whether ``statement`` may rebind ``name``."""
        return self._model.syntax.binds(statement, name)

    def class_attr_assignments(self, cls: cst.ClassDef, attr: str) -> list[cst.BaseExpression]:
        """The values assigned to ``self.<attr>`` anywhere in ``cls``."""
        return self._model.syntax.class_attr_assignments(cls, attr)

    def class_attr_uses(self, cls: cst.ClassDef, attr: str) -> int:
        """How often ``self.<attr>`` is read in ``cls``."""
        return self._model.syntax.class_attr_uses(cls, attr)

    # ---- names -------------------------------------------------------------------------
    def call_name(self, node: cst.CSTNode) -> str | None:
        """The canonical TF/Keras name of the callee when ``node`` calls one."""
        return self._names.call_name(node)

    def call_name_anywhere(self, call: cst.Call) -> str | None:
        """:meth:`call_name` of a call whose callee may be a layer built elsewhere in the file."""
        return self._names.call_name_anywhere(call)

    def resolve(self, node: cst.BaseExpression) -> str | None:
        """The canonical TF/Keras name a Name or Attribute refers to."""
        return self._names.resolve(node)

    def raw_name(self, node: cst.BaseExpression) -> str | None:
        """The fully qualified dotted name an expression refers to, if it is imported."""
        return self._names.raw_name(node)

    def raw_name_anywhere(self, node: cst.BaseExpression) -> str | None:
        """:meth:`raw_name` of a node anywhere in the file, its scopes read from the index."""
        return self._names.raw_name_anywhere(node)

    def resolved_by_name(self, node: cst.BaseExpression) -> bool:
        """Whether ``node`` (or a call of it) was recognised by its spelling only."""
        return self._names.resolved_by_name(node)

    def flavour(self, node: cst.BaseExpression) -> str | None:
        """Which Keras an API spelling comes from: "keras3", "tf.keras", "keras2" or None."""
        return self._names.flavour(node)

    def imports(self) -> Mapping[str, str]:
        """The file's imports: each local name and the dotted name it is bound to."""
        return self._names.imports

    def uses_legacy_keras(self) -> bool:
        """Whether the file sets ``TF_USE_LEGACY_KERAS`` (``tf.keras`` is then Keras 2)."""
        return self._names.uses_legacy_keras

    # ---- values ------------------------------------------------------------------------
    def const(self, node: cst.BaseExpression | None, *, scopes: Sequence[ScopeNode] | None = None) -> Any:
        """``node`` folded to a Python value (seen from ``scopes`` if given), else UNKNOWN."""
        return self._model.values.const(node, scopes=scopes)

    def int_const(self, node: cst.BaseExpression | None) -> int | None:
        """``node`` folded to an int (not a bool), else None."""
        return self._model.values.int_const(node)

    def possible_values(self, node: cst.BaseExpression | None) -> frozenset[Any] | None:
        """Every value ``node`` may hold (branches, conditional bindings), else None."""
        return self._model.values.possible_values(node)

    def every_construction(self) -> AbstractContextManager[list[str]]:
        """Inside, :meth:`const` answers only with a value that holds wherever the code
        runs (a fix may rest on it); the list yielded says why a value was not followed."""
        return self._model.values.every_construction()

    def binding_value(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        """For a Name bound once to an expression in a visible scope, that expression."""
        return self._model.values.binding_value(node)

    def origin(self, expr: cst.BaseExpression) -> Origin | None:
        """The one call that produced ``expr``'s value, when every path agrees."""
        return self._model.values.origin(expr)

    def origins(self, expr: cst.BaseExpression) -> list[Origin]:
        """Every call that may have produced ``expr``'s value."""
        return self._model.values.origins(expr)

    def const_sources(self, expr: cst.BaseExpression) -> list[cst.BaseExpression]:
        """The expressions ``expr``'s value comes from."""
        return self._model.values.const_sources(expr)

    def call_chain(self, expr: cst.BaseExpression) -> list[cst.Call]:
        """The method chain ending at ``expr``, root call first."""
        return self._model.values.call_chain(expr)

    def call_sites(self, func: cst.FunctionDef | cst.ClassDef) -> CallSites:
        """The same-file calls of a function (or class)."""
        return self._model.values.call_sites(func)

    def param_values(self, func: cst.FunctionDef | cst.Lambda, param: str | cst.Param) -> list[ParamValue]:
        """What each same-file call site of ``func`` passes for ``param``."""
        return self._model.values.param_values(func, param)

    def iterated_elements(self, node: cst.BaseExpression) -> list[cst.BaseExpression] | None:
        """The elements a loop variable takes (``units`` in ``for units in HIDDEN:``)."""
        return self._model.values.iterated_elements(node)

    def off_by_default(self, node: cst.CSTNode) -> cst.BaseExpression | None:
        """The ``if`` test that switches ``node`` off when parameters keep their defaults."""
        return self._model.values.off_by_default(node)

    def number(self, expr: cst.BaseExpression) -> float | int | None:
        """A numeric scalar constant (a literal, a folded name, ``tf.constant(2.0)``), else None."""
        return pipeline.number(self._model, expr)

    def depends_on_param(self, expr: cst.BaseExpression) -> bool:
        """Whether a name in ``expr`` is (or is computed from) a function parameter."""
        return dataflow.depends_on_param(self._model, expr)

    # ---- data flow -----------------------------------------------------------------------
    def value_of(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        """A Name followed (once) to the assignment that reaches it; else ``expr``."""
        return dataflow.value_of(self._model, expr)

    def reaching_assignment(self, name: str, at: cst.CSTNode) -> tuple[cst.SimpleStatementLine, cst.BaseExpression] | None:
        """The ``name = value`` statement of the same block that a use of ``name`` at ``at`` reads."""
        return dataflow.reaching_assignment(self._model, name, at)

    def current_statement(self, node: cst.CSTNode) -> tuple[cst.SimpleStatementLine, dataflow.Block, int] | None:
        """The statement line holding ``node``, its block and its index there."""
        return dataflow.current_statement(self._model, node)

    def uses_of(self, value: cst.BaseExpression) -> list[cst.Name] | None:
        """The loads of ``name`` that ``name = value`` reaches (None: not such an assignment)."""
        return dataflow.uses_of(self._model, value)

    def shape_of(self, expr: cst.BaseExpression) -> TensorShape:
        """The rank and last-axis size of a tensor expression, as far as the code spells them."""
        return shape_of(self._model, expr)

    def shape_of_variable(self, expr: cst.BaseExpression) -> tuple[Any, ...] | None:
        """The constant shape of a weight (``tf.Variable``, ``add_weight``), else None."""
        return dataflow.shape_of_variable(self._model, expr)

    def compute_dtype(self, layer: cst.Call | None = None) -> str:
        """The dtype ``layer`` (or the file's layers) compute in: 'float16', 'bfloat16' or 'float32'."""
        return compute_dtype(self._model, layer)

    # ---- layers ----------------------------------------------------------------------------
    def layer_constructor(self, func: cst.BaseExpression) -> tuple[cst.Call, str] | None:
        """For a layer application ``f(x)``: the framework layer call that built ``f`` and its name."""
        return dataflow.layer_constructor(self._model, func)

    def constructor_call(self, func: cst.BaseExpression) -> cst.Call | None:
        """For a layer application ``f(x)``: the call that built ``f`` (a framework layer or not)."""
        return dataflow.constructor_call(self._model, func)

    def container_contents(self, expr: cst.BaseExpression) -> containers.Contents | None:
        """One period of what a layer container holds, in construction order."""
        return dataflow.container_contents(self._model, expr)

    def applied_in_order(self, call: cst.Call) -> containers.Order | None:
        """For ``x = layer(x)`` in ``for layer in C:``: the container whose layers feed each other."""
        return dataflow.applied_in_order(self._model, call)

    def loop_source(self, name: cst.Name) -> cst.BaseExpression | None:
        """The container a loop variable iterates (``for l in C``, ``enumerate``, ``zip``)."""
        return dataflow.loop_source(self._model, name)

    def built_layer(self, call: cst.Call) -> Layer | None:
        """The layer a call of a project function builds (this file or another of the tree)."""
        return self._model.layers.built_layer(call)

    def ops_fed(self, call: cst.Call, arg: cst.Arg | None = None) -> list[Layer]:
        """The layers a project wrapper ``wrapper(x, ..)`` feeds its argument to."""
        return self._model.layers.ops_fed(call, arg)

    def layer_call_returns(self, ctor: cst.Call) -> list[cst.BaseExpression] | None:
        """For ``MyLayer(..)`` of a class of this file: what its ``call`` returns."""
        return self._model.layers.layer_call_returns(ctor)

    def imported_zero_pad_layer(self, ctor: cst.Call) -> bool:
        """Whether ``ctor`` builds another project module's layer whose ``call`` only zero-pads."""
        return self._model.layers.imported_zero_pad_layer(ctor)

    def unseen_project_callee(self, call: cst.Call) -> str | None:
        """The dotted callee of a call into the file's own package that the index cannot read."""
        return self._model.layers.unseen_project_callee(call)

    def reached_from_model(self, func: cst.FunctionDef) -> bool:
        """Whether a function of this file is called from model code anywhere in the tree."""
        return self._model.layers.reached_from_model(func)

    def tensor_names(self, func: cst.FunctionDef | cst.Lambda) -> TensorNames:
        """The names of ``func`` that may hold TF tensors."""
        return self._model.layers.tensor_names(func)

    # ---- what code is for ------------------------------------------------------------------
    def role_of(self, node: cst.CSTNode) -> Role:
        """What the code around ``node`` is for (MODULE at module level)."""
        return self._model.roles.of(node)

    def function_role(self, func: cst.FunctionDef | cst.Lambda | None) -> Role:
        """What ``func``'s code is for: model, input, other."""
        return self._model.roles.function_role(func)

    def is_host_function(self, func: cst.FunctionDef | cst.Lambda | None) -> bool:
        """Whether ``func`` runs on the host only (a metric_fn, a test, a callback)."""
        return self._model.roles.is_host_function(func)

    def is_construction(self, func: cst.FunctionDef | cst.Lambda | None) -> bool:
        """Whether ``func`` runs once while a layer or model is built, not in its steps."""
        return self._model.roles.is_construction(func)

    def is_graph_code(self, func: cst.FunctionDef | cst.Lambda | None) -> bool:
        """Whether ``func`` builds or runs inside a traced graph although no role says so."""
        return self._model.roles.is_graph_code(func)

    def in_demo_block(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` sits in an ``if __name__ == "__main__":`` demo block."""
        return self._model.roles.in_demo_block(node)

    def uses_tpu(self) -> bool:
        """Whether the file sets up a TPU (a strategy, a cluster resolver, a TPUEstimator)."""
        return self._model.roles.uses_tpu

    # ---- input pipelines -------------------------------------------------------------------
    def is_tf_data_chain(self, call: cst.Call) -> bool:
        """Whether the method chain through ``call`` is a ``tf.data`` pipeline."""
        return pipeline.is_tf_data_chain(self._model, call)

    def feeds_evaluation(self, call: cst.Call) -> bool:
        """Whether the dataset ``call`` makes is for evaluation only (or feeds no training step)."""
        return pipeline.feeds_evaluation(self._model, call)

    def reaches_evaluation(self, call: cst.Call) -> bool:
        """Whether the dataset ``call`` makes may reach evaluation or prediction."""
        return pipeline.reaches_evaluation(self._model, call)

    # ---- fixes -----------------------------------------------------------------------------
    def insert_keyword(self, call: cst.Call, keyword: str, value: str) -> Replace | None:
        """A minimal edit adding ``keyword=value`` after the last argument of ``call`` (None:
        that argument spans lines)."""
        return pipeline.insert_keyword(self._model, call, keyword, value)
