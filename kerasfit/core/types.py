"""Plain data shared by every layer: severities, fixes, edits, diagnostics, targets.

Nothing here imports libcst, so reporters, the cache and the build cross-check can use
these types without paying for a parser.
"""

from __future__ import annotations

import enum
import re
from dataclasses import asdict, dataclass, field
from typing import Any

# Every built-in rule has a page in the repository (and the wheel, as kerasfit/docs/) at
# this path, generated from the rule class by scripts/gen_docs.py. Engine codes (KF0xx)
# and rule packs' codes have none. Links users open come from kerasfit.core.docpages.
RULE_PAGE = "docs/rules/{code}.md"
FACTS_PAGE = "docs/facts.md"
_BUILTIN_RULE_CODE = re.compile(r"^KF[1-9]\d\d$")


def rule_url(code: str) -> str | None:
    """Where a rule's page lives, relative to the repository (and the wheel's kerasfit/);
    its text is ``Rule.page()``."""
    return RULE_PAGE.format(code=code) if _BUILTIN_RULE_CODE.match(code) else None


class Role(enum.StrEnum):
    """What a function's code is for (``ctx.function_role``; ``ctx.role_of(node)`` adds MODULE):
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


def allowed(fix: Fix | None, unsafe: bool) -> bool:
    """Whether ``--fix`` applies ``fix`` (``--unsafe-fixes``: ``unsafe``)."""
    if fix is None or not fix.edits:
        return False
    if fix.applicability is Applicability.SAFE:
        return True
    return unsafe and fix.applicability is Applicability.UNSAFE


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
    # What the message was rendered from: the finding's kind (a rule's Finding class name,
    # or the build cross-check's) and its typed fields; None / {} for a message alone.
    finding: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)

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
        d["fields"] = {k: _tuples(v) for k, v in d.get("fields", {}).items()}
        return cls(**d)


def _tuples(value: Any) -> Any:
    """A field read back from JSON: its lists are the tuples they were written from."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


@dataclass(frozen=True)
class Target:
    """One accelerator chip: everything kerasfit knows of it. The static rules read the
    padding numbers, the build cross-check's simulator the padding numbers and peaks,
    ``--target``'s help and docs/targets.md (scripts/gen_docs.py) the rest. A new chip
    is one record in ``TARGETS`` (its numbers cited in docs/facts.md)."""

    name: str
    family: str  # "tpu" | "gpu" | "gaudi": which rules apply
    small: int  # the small padding multiple (sublane / tensor-core channel multiple)
    large: int  # the large padding multiple (MXU / lane width)
    mxu: int  # systolic array edge: 128 (v4, v5e), 256 (v6e)
    channel_multiple: int  # what filters/units should be a multiple of (KF102)
    # Published per-chip peaks for the simulator's roofline (one chip; dense, no sparsity).
    flops_16: float  # FLOP/s in bf16/fp16
    flops_32: float  # FLOP/s TensorFlow gets for float32 matmuls/convs
    hbm_bandwidth: float  # bytes/s
    peaks_source: str  # where the three peaks are published
    help: str  # what the name means, one line
    hbm_bytes: int = 0  # device memory per chip (docs/facts.md#25); 0: not known
    # GPU: streaming multiprocessors, over which a kernel's tiles run in waves
    # (kerasfit.core.gpumodel); 0 elsewhere
    sms: int = 0


# docs/facts.md#1–3 and #8: activations and kernels pad to 8 or 128; v6e's MXU is 256 wide.
# docs/facts.md#18: tensor cores want channels divisible by 8 (fp16).
# docs/facts.md#17: Gaudi wants matmul dims divisible by 64 (fp32) / 128 (bf16); channel
# counts not a multiple of 8 still waste its MME, so KF102 uses 8 like the others.
# docs/facts.md#25: HBM per chip, as the vendors' pages state it (GiB or GB).
GiB, GB = 2**30, 10**9
# Peaks: TPUs run float32 matmuls as bf16 passes by default (TensorFlow on TPU), so they
# get the bf16 peak; the GPU rows are an A100 and an H200 (TF32 for float32, on by default
# in TensorFlow since 2.4 and in JAX), dense (the datasheets' figures without sparsity).
# The GPU cost model (kerasfit.core.gpumodel) was calibrated on an H200 (docs/facts.md#27).
TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("tpu-v4", "tpu", small=8, large=128, mxu=128, channel_multiple=8,
               flops_16=275e12, flops_32=275e12, hbm_bandwidth=1228e9,
               peaks_source="Cloud TPU docs, 'TPU v4': 275 TFLOPS bf16, 1228 GB/s HBM",
               help="Cloud TPU v4 (128-wide MXU)", hbm_bytes=32 * GiB),
        Target("tpu-v5e", "tpu", small=8, large=128, mxu=128, channel_multiple=8,
               flops_16=197e12, flops_32=197e12, hbm_bandwidth=819e9,
               peaks_source="Cloud TPU docs, 'TPU v5e': 197 TFLOPS bf16, 819 GB/s HBM",
               help="Cloud TPU v5e (128-wide MXU)", hbm_bytes=16 * GB),
        Target("tpu-v6e", "tpu", small=8, large=256, mxu=256, channel_multiple=8,
               flops_16=918e12, flops_32=918e12, hbm_bandwidth=1640e9,
               peaks_source="Cloud TPU docs, 'TPU v6e': 918 TFLOPS bf16, 1640 GB/s HBM",
               help="Cloud TPU v6e Trillium (256-wide MXU)", hbm_bytes=32 * GB),
        Target("gpu", "gpu", small=8, large=8, mxu=8, channel_multiple=8,
               flops_16=312e12, flops_32=156e12, hbm_bandwidth=1555e9,
               peaks_source="NVIDIA A100 40GB datasheet: 312 TFLOPS fp16/bf16, 156 TF32, 1555 GB/s; "
                            "108 SMs (NVIDIA A100 architecture white paper)",
               help="NVIDIA tensor-core GPU (peaks: A100)", hbm_bytes=40 * GB, sms=108),
        Target("gpu-h200", "gpu", small=8, large=8, mxu=8, channel_multiple=8,
               flops_16=989e12, flops_32=494e12, hbm_bandwidth=4800e9,
               peaks_source="NVIDIA H200 datasheet (SXM): 1979 TFLOPS bf16 and 989 TF32 with sparsity, "
                            "989 / 494 dense; 4.8 TB/s; 132 SMs (NVIDIA H100 architecture white paper, "
                            "the same GH100 chip)",
               help="NVIDIA H100/H200-class GPU (peaks: H200 SXM, the chip the GPU model is measured on)",
               hbm_bytes=141 * GB, sms=132),
        Target("gaudi", "gaudi", small=8, large=128, mxu=128, channel_multiple=8,
               flops_16=432e12, flops_32=108e12, hbm_bandwidth=2450e9,
               peaks_source="Intel Gaudi 2 (Intel Gaudi 3 white paper's Gaudi 2 column): "
                            "432 TFLOPS bf16 MME, 2.45 TB/s HBM; fp32 taken as a quarter of bf16",
               help="Intel Gaudi (peaks: Gaudi 2)", hbm_bytes=96 * GB),
    )
}
DEFAULT_TARGET = "tpu-v5e"


# ---- the padding rule: one function, read by the simulator and by KF102 ---------------

# Dimension roles. A contraction (conv or matmul, docs/facts.md#5) has a batch, the
# activation's features, and a kernel's in- and out-features; a batched matmul
# (attention's QK^T and PV) has rows that stream and two matrix dims that face the MXU.
BATCH, FEATURE, KERNEL_IN, KERNEL_OUT = "batch", "feature", "kernel-in", "kernel-out"
ROWS, MATRIX, SPATIAL = "rows", "matrix", "spatial"
DIM_ROLES = (BATCH, FEATURE, KERNEL_IN, KERNEL_OUT, ROWS, MATRIX, SPATIAL)
# The passes of a training step (the same strings as the simulator's).
PASS_FORWARD, PASS_INPUT_GRAD, PASS_KERNEL_GRAD = "forward", "input-gradient", "kernel-gradient"
# docs/facts.md#1: the most common batch at or above which XLA swaps the 8/128 choice.
LARGE_BATCH = 64
# docs/facts.md#7: HBM tiles are 8 sublanes x 128 lanes on every TPU generation.
SUBLANES, LANES = 8, 128
# What the rule takes where fact 2 leaves the compiler a choice; both the report and
# KF102 print it.
KERNEL_BOUND = ("a kernel's in- and out-features pad like the activation features of the "
                "pass (docs/facts.md#1–3): of fact 2's 8 or 128 this takes 128 (256 on v6e) for "
                "both wherever the pass pads features to it, the upper bound")


def pad_multiple(target: Target, role: str, pass_: str = PASS_FORWARD,
                 common_batch: int | None = None, dtype: str = "float32") -> int:
    """What a dim of this role is padded to on ``target`` (docs/facts.md#1–3, #7, #8, #17, #18).

    TPU: the most common batch picks the layout (fact 1): at 64 or more, forward and
    input-gradient ops pad batch to 128 and features to 8, kernel-gradient ops batch to 8
    and features to 128; below 64 the other way round. A result pads like its input
    (fact 3). A kernel's two feature dims pad like the pass's activation features
    (:data:`KERNEL_BOUND`): fact 2 lets the compiler pick 8 or 128 per kernel, and this
    rule takes the pass's choice for both, which is 128 where the features face the MXU.
    The feature multiple that faces the MXU is its edge, 256 on v6e (fact 8); the batch
    multiple is the 128-lane tile on every generation (fact 7). A batched matmul's rows
    stream on the 8 sublanes and its matrix dims face the MXU. ``None`` for the common
    batch means unknown: the small-batch layout. Spatial dims never pad.

    GPU: tensor cores want 16-bit channels in multiples of 8 and XLA pads them; float32
    is not padded (fact 18). Gaudi: matrix dims to 64 (float32) or 128 (bf16) (fact 17).
    Neither pads the batch.
    """
    if role not in DIM_ROLES:
        raise ValueError(f"unknown dimension role {role!r}")
    if role == SPATIAL:
        return 1
    sixteen = dtype in ("bfloat16", "float16", "bf16", "f16")
    if target.family != "tpu":
        if role in (BATCH, ROWS):
            return 1
        if target.family == "gpu":
            return target.small if sixteen else 1
        return 128 if sixteen else 64
    wide = max(LANES, target.mxu)
    if role == ROWS:
        return SUBLANES
    if role == MATRIX:
        return wide
    large_batch = (common_batch or 0) >= LARGE_BATCH
    batch_on_lanes = large_batch != (pass_ == PASS_KERNEL_GRAD)
    if role == BATCH:
        return LANES if batch_on_lanes else SUBLANES
    return SUBLANES if batch_on_lanes else wide


def padded(n: int, multiple: int) -> int:
    """``n`` rounded up to a multiple (0 stays 0)."""
    return -(-n // multiple) * multiple if n > 0 else 0


def width_padding(target: Target, width: int, dtype: str = "float32") -> tuple[int, int]:
    """(least, most) a layer's output width pads to over one training step.

    The width is the kernel's out-features in the forward pass and the weight update and
    the contracted features of the input gradient; on a TPU those passes pad features
    to opposite multiples whatever the batch (docs/facts.md#1), so a width off the small
    multiple pads to both over a step. This is what KF102 reports, from :func:`pad_multiple`.
    """
    sizes = {padded(width, pad_multiple(target, role, pass_, batch, dtype))
             for role, pass_ in ((KERNEL_OUT, PASS_FORWARD), (KERNEL_OUT, PASS_KERNEL_GRAD),
                                 (KERNEL_IN, PASS_INPUT_GRAD))
             for batch in (None, LARGE_BATCH)}
    return min(sizes), max(sizes)


def target_help() -> str:
    """``--target``'s help: every chip, and the default."""
    return f"Hardware target: {', '.join(TARGETS)} (default from config, else {DEFAULT_TARGET})."


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
    # and every file of the tree (ProjectIndex.tree_digests), when a tree-wide answer was asked
    tree_wide: bool = False
    # The lowest severity that fails the run for this file (its config's ``fail-on``).
    fail_on: Severity = Severity.WARNING

    @property
    def failing(self) -> list[Diagnostic]:
        """The findings that make the exit code 1 (info does not, unless fail-on says so)."""
        return [d for d in self.diagnostics if d.severity.rank >= self.fail_on.rank]


# What ends a line for some reader (a terminal, str.splitlines, a CI log) or acts on a
# terminal: C0 and C1 controls, DEL, and the Unicode line and paragraph separators; and
# what makes a line read other than it is: the bidirectional controls (U+202E turns
# ``x.py:12`` into ``21:yp.x``) and the characters that show as nothing (zero-width
# spaces and joiners, word joiner, invisible operators, soft hyphen, byte order mark).
_CONTROL = re.compile(
    "[\x00-\x1f\x7f-\x9f\xad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_control(m: re.Match[str]) -> str:
    c = m.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def printable(s: str) -> str:
    """``s`` as one inert line: a file named ``d⏎::error::x.py`` cannot start a line of its
    own (which GitHub Actions would read as a workflow command) or drive the terminal."""
    return _CONTROL.sub(_escape_control, s)
