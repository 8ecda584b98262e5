"""The rule base class (STYLE 1, 2, 4, 5).

A rule declares metadata as class attributes, subscribes to node types by defining
``visit_<Node>`` / ``leave_<Node>`` methods, and calls :meth:`Rule.report`. It never
touches files, configuration or output formats: the engine owns those.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from typing import Any, ClassVar, Hashable, Sequence

import libcst as cst

from ..core.fixes import FixSpec, Remove, Replace
from ..core.types import Applicability, Severity
from .context import RuleContext
from .finding import Finding
from .reads import Reads

ALL_FAMILIES = frozenset({"tpu", "gpu", "gaudi"})
CODE_RE = re.compile(r"^KF\d{3}$")
NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
DOC_SECTIONS = ("What it does", "Why is this slow on the accelerator", "Example", "Use instead", "Fix safety", "References")


def example_source(text: str) -> str:
    """Example code as a rule writes it (Fixit's style): an indented triple-quoted block,
    dedented, without the newline that opens it."""
    text = textwrap.dedent(text)
    return text[1:] if text.startswith("\n") else text


@dataclass(frozen=True)
class Range:
    """Where an INVALID example's finding lands: 1-based line, 0-based column (libcst's
    and Fixit's count; the text output shows column + 1), optionally where it ends."""

    line: int
    column: int
    end_line: int | None = None
    end_column: int | None = None


@dataclass(frozen=True)
class Valid:
    code: str
    target: str | None = None  # check under this target instead of the default
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "code", example_source(self.code))


@dataclass(frozen=True)
class Invalid:
    code: str
    expected_fix: str | None = None  # the file after applying this rule's fixes
    count: int = 1  # how many findings the example must produce (len(at) when at is given)
    unsafe: bool = False  # expected_fix needs --unsafe-fixes
    target: str | None = None
    # what the findings are: every finding of the example is of this kind (a Finding
    # class's name), and some finding's fields hold every item of ``fields``
    finding: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    at: Range | tuple[Range, ...] | None = None  # where the findings land, in order

    def __post_init__(self) -> None:
        object.__setattr__(self, "code", example_source(self.code))
        if self.expected_fix is not None:
            object.__setattr__(self, "expected_fix", example_source(self.expected_fix))

    @property
    def ranges(self) -> tuple[Range, ...] | None:
        return (self.at,) if isinstance(self.at, Range) else self.at


@dataclass
class Report:
    # the rule's class, not the instance: an instance holds its reports, and a report
    # holding it back would make a reference cycle that keeps the file's tree alive
    # until the cyclic collector runs
    rule: type[Rule]
    node: cst.CSTNode
    message: str
    severity: Severity
    fix: FixSpec | None
    # kept only if it is the rule's first ``once`` report of ``node`` in source order; a
    # key other than True/False: the first report with that key (see Rule.report)
    once: Hashable = False
    # what ``message`` was rendered from; None: the rule's own ``message``
    finding: Finding | None = None


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    fix_title: ClassVar[str | None] = None
    fix_safety: ClassVar[Applicability | None] = None
    targets: ClassVar[frozenset[str]] = ALL_FAMILIES
    default_enabled: ClassVar[bool] = True
    severity: ClassVar[Severity] = Severity.WARNING
    # Reported by the build cross-check only; its examples are models that tests/crosscheck
    # builds, not static cases.
    build_only: ClassVar[bool] = False
    # What the build cross-check can measure about this rule's findings: one of the kinds
    # kerasfit.crosscheck.api.cross_check judges ("feature-padding", "spatial-pad",
    # "transpose", "per-core-batch", "build-failure"); a build-only rule names what it
    # reports ("poor-fit", "tiny-per-core-batch"). None: the build says nothing about it.
    build_evidence: ClassVar[str | None] = None
    # With "build-failure": a failed build whose message matches this confirms the finding.
    build_failure_pattern: ClassVar[str | None] = None
    # What the findings made while walking one top-level statement may depend on
    # (:class:`Reads`). Required (the registry refuses a rule without it): a check computes
    # the tree-wide answers ahead only when a selected rule reads Reads.PROJECT, the rule's
    # context refuses a file fact it does not declare, and the language server reuses a
    # statement's findings only for a rule that reads nothing untracked.
    reads: ClassVar[frozenset[Reads]]
    VALID: ClassVar[Sequence[str | Valid]] = ()
    INVALID: ClassVar[Sequence[Invalid]] = ()

    def __init__(self, ctx: RuleContext) -> None:
        self.ctx = ctx
        self.reports: list[Report] = []

    # ---- for rule authors --------------------------------------------------
    def report(
        self,
        node: cst.CSTNode,
        finding: Finding | None = None,
        *,
        fix: FixSpec | None = None,
        severity: Severity | None = None,
        once: Hashable = False,
    ) -> None:
        """Report ``finding`` at ``node`` (None: the rule's ``message``, for a rule whose
        finding has no variable part). ``once``: keep only the first such report of ``node`` (in source order) -- a site
        reached from several places, say a call site two layers are sized at. Any other
        hashable than True/False is a key: keep only the rule's first report with that key
        (one pad inside a helper, reported at the first of the helper's call sites); make it
        of values that do not change while the code it names stays the same (no node ids).
        The engine drops the later ones after the walk, so what the rule reports while
        walking one statement does not depend on what it saw in the others."""
        if self.ctx.in_demo_block(node):
            return  # demo code under `if __name__ == "__main__":` (semantic.roles.demo_blocks)
        message = finding.message() if finding is not None else self.message
        by_name = self._by_name_note(node)
        if by_name:
            message = f"{message} ({by_name})"
        self.reports.append(Report(type(self), node, message, severity or self.severity, fix, once, finding))

    def _by_name_note(self, node: cst.CSTNode) -> str | None:
        """Say so when the API in a finding was recognised by its spelling only."""
        ctx = self.ctx
        n = node
        for _ in range(3):  # layers.X(...)(x) -> layers.X(...) -> layers.X
            if not isinstance(n, cst.Call):
                break
            n = n.func
            if isinstance(n, cst.Attribute) and ctx.resolved_by_name(n):
                return f"`{ctx.code(n)}` resolved by name: its receiver is not an import kerasfit can follow"
        return None

    def make_fix(
        self,
        *changes: Replace | Remove,
        applicability: Applicability | None = None,
        title: str | None = None,
        imports: Sequence[tuple[str, str | None, str | None]] = (),
    ) -> FixSpec:
        return FixSpec(
            tuple(changes),
            applicability or self.fix_safety or Applicability.SAFE,
            title or self.fix_title or "Apply fix",
            tuple(imports),
        )

    # ---- metadata ----------------------------------------------------------
    @classmethod
    def summary(cls) -> str:
        return cls.message

    @classmethod
    def documentation(cls) -> str:
        return textwrap.dedent(cls.__doc__ or "").strip()

    @classmethod
    def page(cls) -> str:
        """The rule's page: what ``kerasfit explain`` prints and docs/rules/<code>.md holds."""
        fix = cls.fix_safety.value if cls.fix_safety else "none"
        head = (
            f"# {cls.code} {cls.name}\n\n{cls.summary()}\n\n"
            f"Fix: {fix} · Severity: {cls.severity.value} · Targets: {', '.join(sorted(cls.targets))} · "
            f"Default: {'on' if cls.default_enabled else 'off'}\n"
        )
        return head + "\n" + cls.documentation() + "\n"

    @classmethod
    def missing_doc_sections(cls) -> list[str]:
        doc = cls.documentation()
        return [s for s in DOC_SECTIONS if not re.search(rf"^#*\s*{re.escape(s)}\b", doc, re.M)]

    @classmethod
    def reads_error(cls) -> str | None:
        """Why the rule's ``reads`` declaration is refused, or None."""
        reads = getattr(cls, "reads", None)
        if not isinstance(reads, frozenset) or not reads or not all(isinstance(r, Reads) for r in reads):
            return (f"rule {cls.code}: `reads` must be a non-empty frozenset of kerasfit.ruleapi.Reads, "
                    f"what its findings depend on (got {reads!r})")
        return None

    @classmethod
    def applies_to(cls, family: str) -> bool:
        return family in cls.targets
