"""What one file is checked with, and the engine's own codes (KF0xx)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from ..core.types import DEFAULT_TARGET, TARGETS, Target

if TYPE_CHECKING:
    from ..ruleapi.rule import Rule
    from ..semantic.index import ProjectIndex

SYNTAX_ERROR_CODE = "KF001"
SYNTAX_ERROR_NAME = "syntax-error"
INTERNAL_ERROR_CODE = "KF002"
INTERNAL_ERROR_NAME = "rule-crashed"
MAX_FIX_PASSES = 10


@dataclass
class LintSettings:
    """What one file is checked with (resolved from config and flags)."""

    rules: Sequence[type[Rule]]
    target: Target = field(default_factory=lambda: TARGETS[DEFAULT_TARGET])
    options: dict[str, Any] = field(default_factory=dict)
    # Codes whose fixes are dropped (config ``fixable`` / ``unfixable``): still reported.
    unfixable: frozenset[str] = frozenset()
    # The project index of the running check (other files of the tree, read lazily; rooted
    # nowhere unless a rule reads the project: ``reads_project``); None: the file is
    # checked alone (an empty index of its own).
    project: ProjectIndex | None = None
    # Set from another thread (the language server's, when the document closes or
    # changes again): the check ends at the next top-level statement with Stopped.
    stop: threading.Event | None = None


def reads_project(rules: Iterable[type[Rule]]) -> bool:
    """Whether the findings of ``rules`` may rest on other files of the tree: some rule
    declares ``Reads.PROJECT`` (``Rule.reads``). Only then is a check given the project index
    of its tree (``LintSettings.project``), and the tree scanned for its tree-wide answers;
    the others are checked against an index rooted nowhere (the file and what it
    imports). The one place the rules' reads decide what a check computes."""
    given = list(rules)
    if not given:  # (a run answered from the cache: the rule API is not even loaded)
        return False
    from ..ruleapi.reads import Reads  # defers libcst (the rule API package imports it; rules given have loaded it)

    return any(Reads.PROJECT in r.reads for r in given)


class Stopped(Exception):
    """A check was told to stop (``LintSettings.stop``); nothing it found is kept."""


def stop_now(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise Stopped

