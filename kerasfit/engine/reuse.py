"""Findings kept between checks: the protocol a caller that checks one document again and
again implements (the language server's memo) and hands the engine through its
:class:`~kerasfit.engine.parse.ParseCache`. The engine knows only this protocol."""

from __future__ import annotations

from typing import Protocol, Sequence

import libcst as cst

from ..ruleapi.rule import Rule
from ..semantic.model import ModelHints, SemanticModel


class StatementPlan(Protocol):
    """One check's walk as planned by a caller that keeps findings between checks of a
    document (the language server)."""

    # rules walked over every statement, kept ones included (their findings are not kept)
    rewalk: Sequence[Rule]

    def restore(self, stmt: cst.CSTNode) -> bool:
        """Put back the kept findings of ``stmt`` and say True; False: walk it."""

    def begin(self, stmt: cst.CSTNode) -> None:
        """``stmt`` is about to be walked by every rule."""

    def end(self, stmt: cst.CSTNode) -> None:
        """``stmt`` was walked by every rule (the rules' reports since ``begin`` are its)."""

    def holds(self, ctx: SemanticModel) -> bool:
        """After the walk: what the kept findings rest on still holds (else the whole file
        is walked again, without a plan)."""

    def commit(self, ctx: SemanticModel) -> None:
        """The check is done: keep its findings for the next one."""


class StatementReuse(Protocol):
    """What a caller checking one document again and again hands :func:`lint_module`
    (through its :class:`ParseCache`); a check without one walks everything."""

    def hints(self, module: cst.Module) -> ModelHints:
        """What the model of ``module`` need not find out again."""

    def plan(self, module: cst.Module, key: object, rules: Sequence[Rule], crashes: list[tuple[Rule, BaseException]],
             ctx: SemanticModel) -> StatementPlan | None:
        """How to walk ``module`` checked with ``key`` (the settings); None: walk it all."""

    def forget(self) -> None:
        """Drop every kept finding."""

