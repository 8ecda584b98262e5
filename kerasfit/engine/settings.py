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
    # The project index of the running check (other files of the tree, read lazily);
    # None: the file is checked alone (an empty index of its own).
    project: ProjectIndex | None = None
    # Set from another thread (the language server's, when the document closes or
    # changes again): the check ends at the next top-level statement with Stopped.
    stop: threading.Event | None = None


def reads_project(rules: Iterable[type[Rule]]) -> bool:
    """Whether the questions of ``rules`` need the tree-wide answers of the project index
    (which files import which, the roles of functions across files): some rule declares
    ``Reads.PROJECT`` (``Rule.reads``). Only then does a check compute them before its
    files are checked (in parallel, shared by a pool's workers); else a check computes them
    only if a question asks, as the engine's own demo-code filter may (``Rule.report``).
    What a check finds never depends on it. The one place the rules' reads are joined."""
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

