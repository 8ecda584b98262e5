"""Plain data shared by every layer: severities, fixes, edits, diagnostics, targets.

Nothing here imports libcst, so reporters, the cache and the build cross-check can use
these types without paying for a parser.
"""

from __future__ import annotations

import enum
import re
from dataclasses import asdict, dataclass, field
from typing import Any

# Every built-in rule has a page in the repository (and the wheel) at this path,
# generated from the rule class by scripts/gen_docs.py. Engine codes (KF0xx) and rule
# packs' codes have none, so they get no URL rather than one that points nowhere.
RULE_PAGE = "docs/rules/{code}.md"
FACTS_PAGE = "docs/facts.md"
_BUILTIN_RULE_CODE = re.compile(r"^KF[1-9]\d\d$")


def rule_page(code: str) -> str | None:
    return RULE_PAGE.format(code=code) if _BUILTIN_RULE_CODE.match(code) else None


class Role(enum.StrEnum):
    """What a function's code is for (``ctx.function_role``; ``ctx.role()`` adds MODULE):
    equal to its plain string, so ``role == "model"`` keeps working."""

    MODEL = "model"  # runs on the accelerator: a Layer/Model call, a train step, a tf.function
    INPUT = "input"  # the input pipeline: Dataset.map functions, parsers, input_fns
    OTHER = "other"  # host code: drivers, metric_fns, everything else
    MODULE = "module"  # module level, outside any function


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 3, "warning": 2, "info": 1}[self.value]


class Applicability(str, enum.Enum):
    """How a fix may be applied (ruff's applicability levels)."""

    SAFE = "safe"  # keeps the model's math identical: applied by --fix
    UNSAFE = "unsafe"  # changes the model: only with --unsafe-fixes
    DISPLAY = "display-only"  # advice shown to the user, never applied


@dataclass(frozen=True, order=True)
class Edit:
    """Replace source[start:end] (character offsets) with ``content``.

    Rows are 1-based, columns 0-based character offsets within the line; the end is
    exclusive. Offsets are what the engine applies; rows/columns are what reporters show.
    """

    start: int
    end: int
    content: str
    row: int = 0
    column: int = 0
    end_row: int = 0
    end_column: int = 0
    # The text source[start:end] must hold for the edit to apply (None: not checked).
    # Taken from libcst's own rendering of the node, so offsets that drifted from the
    # source are caught instead of splicing text into the wrong place.
    expected: str | None = field(default=None, compare=False)

    def matches(self, source: str) -> bool:
        if self.expected is None:
            return True
        got = source[self.start : self.end]
        # libcst renders without the form feeds that sit in indentation (they change
        # nothing there); the rest must be identical
        return got == self.expected or ("\f" in got and got.replace("\f", "") == self.expected)


@dataclass(frozen=True)
class Fix:
    applicability: Applicability
    title: str
    edits: tuple[Edit, ...] = ()
    # Modules/objects the fixed code needs: (module, obj or None, asname or None).
    imports: tuple[tuple[str, str | None, str | None], ...] = ()
    # Imports the removed code used, removed after the edits when nothing uses them any more.
    orphan_imports: tuple[tuple[str, str | None, str | None], ...] = ()

    @property
    def span(self) -> tuple[int, int]:
        return (min(e.start for e in self.edits), max(e.end for e in self.edits))

    def matches(self, source: str) -> bool:
        """Does every edit find the text it expects in ``source``?"""
        return all(e.matches(source) for e in self.edits)


@dataclass
class Diagnostic:
    code: str
    name: str
    message: str
    severity: Severity
    filename: str
    row: int
    column: int
    end_row: int
    end_column: int
    fix: Fix | None = None
    # Character offsets of the flagged node in the file (for fixes and suppressions).
    start: int = 0
    end: int = 0
    # Filled by the build cross-check: "confirmed" / "refuted" and measured shapes.
    build: dict[str, Any] | None = None
    # In a notebook: the 1-based cell (all cells counted); rows are then within the cell.
    cell: int | None = None

    @property
    def url(self) -> str | None:
        return rule_page(self.code)

    @property
    def fixable(self) -> bool:
        return self.fix is not None and self.fix.applicability is not Applicability.DISPLAY

    def sort_key(self) -> tuple[Any, ...]:
        return (self.filename, self.row, self.column, self.code)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["severity"] = self.severity.value
        if self.fix is not None:
            d["fix"]["applicability"] = self.fix.applicability.value
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Diagnostic:
        d = dict(d)
        d["severity"] = Severity(d["severity"])
        fix = d.get("fix")
        if fix is not None:
            d["fix"] = Fix(
                applicability=Applicability(fix["applicability"]),
                title=fix["title"],
                edits=tuple(Edit(**e) for e in fix["edits"]),
                imports=tuple(tuple(i) for i in fix.get("imports", ())),
                orphan_imports=tuple(tuple(i) for i in fix.get("orphan_imports", ())),
            )
        return cls(**d)


@dataclass(frozen=True)
class Target:
    """One hardware target's padding numbers (docs/facts.md#1–3, #8, #17, #18)."""

    name: str
    family: str  # "tpu" | "gpu" | "gaudi": which rules apply
    small: int  # the small padding multiple (sublane / tensor-core channel multiple)
    large: int  # the large padding multiple (MXU / lane width)
    mxu: int  # systolic array edge: 128 (v4, v5e), 256 (v6e)
    channel_multiple: int  # what filters/units should be a multiple of (KF102)


# docs/facts.md#1–3 and #8: activations and kernels pad to 8 or 128; v6e's MXU is 256 wide.
# docs/facts.md#18: tensor cores want channels divisible by 8 (fp16).
# docs/facts.md#17: Gaudi wants matmul dims divisible by 64 (fp32) / 128 (bf16); channel
# counts not a multiple of 8 still waste its MME, so KF102 uses 8 like the others.
TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("tpu-v4", "tpu", 8, 128, 128, 8),
        Target("tpu-v5e", "tpu", 8, 128, 128, 8),
        Target("tpu-v6e", "tpu", 8, 256, 256, 8),
        Target("gpu", "gpu", 8, 8, 8, 8),
        Target("gaudi", "gaudi", 8, 128, 128, 8),
    )
}
DEFAULT_TARGET = "tpu-v5e"


@dataclass
class FileResult:
    """What checking one file produced."""

    filename: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    error: str | None = None  # one-line reason the file could not be read
    fixed_source: str | None = None  # set when fixes changed the file
    fixes_applied: int = 0
    cached: bool = False
    skipped: bool = False  # prefilter: never mentions tensorflow / keras
    # other files of the tree the check consulted (path -> content hash): a cached
    # result stays valid only while they are unchanged
    deps: dict[str, str] = field(default_factory=dict)
    # The lowest severity that fails the run for this file (its config's ``fail-on``).
    fail_on: Severity = Severity.WARNING

    @property
    def failing(self) -> list[Diagnostic]:
        """The findings that make the exit code 1 (info does not, unless fail-on says so)."""
        return [d for d in self.diagnostics if d.severity.rank >= self.fail_on.rank]
