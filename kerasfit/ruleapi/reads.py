"""What a rule declares it reads (``Rule.reads``), and the error a rule gets when it asks
for what it did not declare."""

from __future__ import annotations

from enum import Enum


class Reads(Enum):
    """What a rule's findings for one top-level statement may depend on (STYLE 17).

    Every rule declares the set in ``Rule.reads`` (the registry refuses one that does not,
    :meth:`Rule.reads_error`). It decides what a check computes: the tree-wide answers
    before the files are checked only when a selected rule reads :attr:`PROJECT`
    (``engine.settings.reads_project``; else only when a question asks for them);
    the rule's context (``self.ctx``) refuses a file fact the rule did not declare
    (:class:`UndeclaredRead`); and whoever keeps findings between checks (the language
    server's statement memo) never reuses the findings of a rule that reads what cannot be
    tracked per statement (:data:`UNTRACKED`)."""

    # the walked statement, and what it reaches by name: bindings, the functions it calls
    # and their call sites, attributes and keys stored elsewhere
    STATEMENT = "statement"
    # whole-file facts asked through ``ctx.file_fact`` (uses a TPU, roles, input pipelines)
    FILE_FACTS = "file-facts"
    # the tree-wide answers of the project index: which files import which, the roles of
    # functions across files, layers built by helpers of other files (what a file imports
    # is followed for every rule)
    PROJECT = "project"
    # what the rule saw while walking other statements: state kept on the rule between
    # statements, or a ``visit_Module`` / ``leave_Module`` of its own
    OTHER_STATEMENTS = "other-statements"


# What cannot be tracked per statement: a rule reading it is walked over the whole file.
UNTRACKED = frozenset({Reads.OTHER_STATEMENTS})


class UndeclaredRead(Exception):
    """A rule asked its context for something its ``reads`` does not declare."""

    def __init__(self, rule: str, read: Reads, what: str) -> None:
        super().__init__(f"{rule} asks {what} but does not declare Reads.{read.name} in its `reads`")
        self.rule = rule
        self.read = read
