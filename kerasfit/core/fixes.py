"""What a rule's fix is made of: node replacements and removals, with their safety.

Plain data below the semantic model, so helpers that build fixes (the semantic model's
pipeline edits) and the engine that applies them share one definition.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from .types import Applicability


@dataclass(frozen=True)
class Replace:
    """Replace ``node`` with ``new`` (a node, or source text)."""

    node: cst.CSTNode
    new: cst.CSTNode | str


@dataclass(frozen=True)
class Remove:
    """Remove a whole statement (its line), or an argument (with its comma)."""

    node: cst.CSTNode


@dataclass(frozen=True)
class FixSpec:
    changes: tuple[Replace | Remove, ...]
    applicability: Applicability
    title: str
    imports: tuple[tuple[str, str | None, str | None], ...] = ()
