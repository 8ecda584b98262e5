"""The build report's records: a simulated op, a ranked row, a recommendation, the report.

Plain data with their JSON forms, and the helpers that tie a record to a source line; the
report (:mod:`kerasfit.crosscheck.report`) fills them, the advice
(:mod:`kerasfit.crosscheck.advice`) and the page (:mod:`kerasfit.crosscheck.html`) read them.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Any

from kerasfit.core.types import TARGETS

TOP_ROWS = 5  # the rows every report's advice must account for


@dataclass
class OpReport:
    name: str  # HLO instruction
    op_name: str  # TF op name from the HLO metadata
    op_type: str
    layer: str | None
    pass_: str
    kind: str  # "convolution" | "dot"
    shape: list[int]  # the activation tensor that pads worst ...
    padded_shape: list[int]  # ... and its padded shape
    tensor: str  # which one: "lhs" | "rhs" | "out"
    dims: dict[str, list[int]]  # batch / in_features / out_features: [real, padded]
    fit: float
    flops: int
    padded_flops: float
    share: float = 0.0  # of the step's useful FLOPs
    source: dict[str, Any] | None = None
    tensors: dict[str, list[list[int]]] = field(default_factory=dict)
    time: float = 0.0  # estimated seconds on the target (roofline of the padded op)
    useful_time: float = 0.0  # the same op unpadded
    why: list[str] = field(default_factory=list)  # the padded dims, named
    bound: str = "HBM"  # what its padded time waits on: "MXU" or "HBM"
    unit: str = ""  # "MXU" | "VPU" for contractions, "" for data movement

    @property
    def line(self) -> int | None:
        return self.source.get("line") if self.source else None

    @property
    def wasted_time(self) -> float:
        return max(0.0, self.time - self.useful_time)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "op_name": self.op_name, "op_type": self.op_type,
            "layer": self.layer, "pass": self.pass_, "kind": self.kind,
            "shape": self.shape, "padded_shape": self.padded_shape, "tensor": self.tensor,
            "dims": self.dims, "fit": self.fit, "flops": self.flops,
            "padded_flops": self.padded_flops, "share": self.share,
            "source": self.source, "tensors": self.tensors, "time": self.time,
            "useful_time": self.useful_time, "wasted_time": self.wasted_time, "why": self.why,
            "bound": self.bound, "unit": self.unit,
        }


@dataclass
class Row:
    """One line of the ranked table: a layer's ops of one kind in one pass, at one source line."""

    layer: str
    source: dict[str, Any] | None
    pass_: str
    kind: str  # "convolution" | "dot" | "pad" | "transpose" | "copy" | "elementwise" ...
    ops: int
    time: float
    useful_time: float
    shape: list[int]
    padded_shape: list[int]
    why: list[str]
    fit: float | None = None  # FLOP-weighted MXU fit of its contractions (None: no MXU work)
    bound: str = "HBM"  # what most of its time waits on: "MXU" or "HBM"
    members: list[str] = field(default_factory=list)  # its ops' HLO names (what-ifs change them)

    @property
    def wasted_time(self) -> float:
        return max(0.0, self.time - self.useful_time)

    @property
    def useful_share(self) -> float:
        return self.useful_time / self.time if self.time else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {"layer": self.layer, "source": self.source, "pass": self.pass_, "kind": self.kind,
                "ops": self.ops, "time": self.time, "useful_time": self.useful_time,
                "wasted_time": self.wasted_time, "useful_share": self.useful_share,
                "shape": self.shape, "padded_shape": self.padded_shape, "why": self.why,
                "fit": self.fit, "bound": self.bound}


@dataclass
class Recommendation:
    """A change at a line the user owns and what it does to the step, or, where no change
    of the user's reaches a top row, where that row comes from and which lever is theirs."""

    text: str
    source: dict[str, Any] | None = None  # the line to change (or to look at)
    rows: list[int] = field(default_factory=list)  # ranks (1-based) of the table rows it covers
    # seconds per step after the change (a batch change: the step at the new batch);
    # None: nothing modelled
    step_time: float | None = None
    saved: float = 0.0  # seconds per step (negative: the step gets slower)
    waste_saved: float = 0.0  # of the wasted time
    step_fit_after: float | None = None
    code: str | None = None  # the static finding it carries out (KF103 ...)
    # "batch" | "width": the change needs more HBM; an HBM-need estimate against the chip's
    # capacity belongs beside it in the text
    raises: str | None = None
    kind: str = ""  # "change" (a line of the user's to edit) | "origin" (where a top row comes from)

    def __post_init__(self) -> None:
        if not self.kind:
            self.kind = "change" if self.step_time is not None else "origin"

    @property
    def is_change(self) -> bool:
        return self.kind == "change"

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "source": self.source, "rows": self.rows,
                "step_time": self.step_time, "saved": self.saved, "waste_saved": self.waste_saved,
                "step_fit_after": self.step_fit_after, "code": self.code, "raises": self.raises,
                "kind": self.kind}


@dataclass(frozen=True)
class StaticFinding:
    """A static finding as the recommendations use it (``kerasfit check`` on the same file)."""

    code: str
    evidence: str  # the rule's ``build_evidence``: "spatial-pad", "transpose", "feature-padding" ...
    filename: str
    row: int
    end_row: int
    fix: str  # the fix's title, else the message


@dataclass
class BuildReport:
    file: str
    entry: str
    mode: str
    target: str
    dtype: str
    global_batch: int
    cores: int
    per_core_batch: int
    common_batch: int | None
    ops: list[OpReport]
    step_fit: float
    hbm_expansion: float
    flops: int
    padded_flops: float
    recommendations: list[Recommendation]
    layout: dict[str, list[int]]  # pass -> [batch multiple, feature multiple]
    outputs: list[list[int | None]] = field(default_factory=list)
    inputs: list[list[int | None]] = field(default_factory=list)
    pads: list[dict[str, Any]] = field(default_factory=list)
    input_sites: list[dict[str, Any]] = field(default_factory=list)  # where the batch enters
    notes: list[str] = field(default_factory=list)
    tf_version: str = ""
    cached: bool = False
    elapsed: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)  # ranked by wasted time
    step_time: float = 0.0  # seconds, every row
    useful_time: float = 0.0
    measured_dtype: str = ""  # what the HLO's matmuls/convs really are
    mem_rows: list[OpReport] = field(default_factory=list)  # pads, transposes, copies, elementwise
    output_layers: list[str] = field(default_factory=list)  # their width is the task's
    hbm: dict[str, Any] = field(default_factory=dict)  # hbm_need(): the step's HBM need vs capacity
    keras3_error: str = ""  # why Keras 3 refused the model when tf-keras built it
    complete: bool = True  # no statement on the way to the model failed: verdicts may use it
    blocks: dict[str, dict[str, Any]] = field(default_factory=dict)  # library layers with insides
    # What was built and from what: each network (name, how, its layers and their
    # classes), how its step was traced, and where the batch and unknown dims came from.
    networks: list[dict[str, Any]] = field(default_factory=list)
    built_how: str = ""
    shapes_said: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file, "entry": self.entry, "mode": self.mode, "target": self.target,
            "dtype": self.dtype, "global_batch": self.global_batch, "cores": self.cores,
            "per_core_batch": self.per_core_batch, "common_batch": self.common_batch,
            "step_fit": self.step_fit, "hbm_expansion": self.hbm_expansion,
            "flops": self.flops, "padded_flops": self.padded_flops, "layout": self.layout,
            "ops": [op.to_dict() for op in self.ops],
            "recommendations": [r.to_dict() for r in self.recommendations],
            "outputs": self.outputs, "inputs": self.inputs, "pads": self.pads,
            "input_sites": self.input_sites,
            "notes": self.notes, "tf_version": self.tf_version, "cached": self.cached,
            "elapsed": self.elapsed, "timings": self.timings,
            "rows": [r.to_dict() for r in self.rows], "step_time": self.step_time,
            "useful_time": self.useful_time, "wasted_time": self.step_time - self.useful_time,
            "measured_dtype": self.measured_dtype, "peaks": TARGETS[self.target].peaks_source,
            "hbm": self.hbm,
            "keras3_error": self.keras3_error, "complete": self.complete, "blocks": self.blocks,
            "networks": self.networks, "built_how": self.built_how, "shapes_said": self.shapes_said,
        }


def same_file(a: str, b: str) -> bool:
    try:
        return _real(a) == _real(b)
    except (OSError, ValueError):
        return a == b


@functools.lru_cache(maxsize=256)
def _real(path: str) -> str:
    # every op of a big model asks about the same two or three paths
    return os.path.realpath(path)


def source_at(src: dict[str, Any] | None, filename: str, row: int, end_row: int) -> bool:
    """Does a source site (or one of the user-file calls that led to it) cover the rows?

    ``callers`` are the outer user-file lines on the stack when the layer/op was made: a
    width passed through a helper (``block(x, 30)``) is measured at the helper's conv
    and judged at the call site.
    """
    if not src or not same_file(src["file"], filename):
        return False
    end = max(end_row, row)
    if src["line"] <= end and src.get("end_line", src["line"]) >= row:
        return True
    return any(row <= line <= end for line in src.get("callers", ()))


def shape_text(shape: list[int]) -> str:
    return "×".join(str(d) for d in shape)


def us(seconds: float) -> str:
    us = seconds * 1e6
    return f"{us:,.0f}" if us >= 100 else f"{us:.1f}" if us >= 1 else f"{us:.2f}"
