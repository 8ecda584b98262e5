"""The build report: simulated ops tied to source lines, a summary, and what to change.

Pure Python: it turns the child's raw JSON into a :class:`BuildReport` with the
simulator, so the same cached build can be reported for any target.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from kerasfit.core.types import DEFAULT_TARGET, KERNEL_BOUND, LANES, TARGETS, printable

from .hlo import FORWARD, KERNEL_GRAD, HloOp, is_gradient, strip_scopes
from .simulator import (
    LARGE_BATCH,
    OpSim,
    Simulation,
    layout,
    pad_to,
    roofline,
    simulate,
    tiled_bytes,
    with_batch,
    with_features,
)


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
    # What the build could not take from the script and assumed (a step it could not trace
    # as the script runs it, a layer sized by data it did not load): said in the header,
    # and nothing is recommended or judged from such a build.
    assumptions: list[str] = field(default_factory=list)
    way: str = "sliced"  # "sliced": built without running the script; "traced": --trace-script

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
            "assumptions": self.assumptions, "way": self.way,
        }


_SIXTEEN = ("bf16", "f16")
TOP_ROWS = 5  # the rows every report's advice must account for
# A change covers a row when it removes at least this share of the row's wasted time.
COVERS = 0.25
MAX_CHANGES = 6
NEGLIGIBLE = 0.01  # of the step's wasted time


def _op_times(op: HloOp, s: OpSim, target: str) -> tuple[float, float]:
    """(time, useful time) of a simulated op, as the table shows it: its padded work on the
    MXU (none for VPU work) or its tiled bytes through HBM, whichever is slower; the same
    for the unpadded op."""
    chip = TARGETS[target]
    sixteen = op.dtype in _SIXTEEN
    mxu = 0.0 if s.unit == "VPU" else s.padded_flops / (chip.flops_16 if sixteen else chip.flops_32)
    useful = s.bytes / chip.hbm_bandwidth if s.unit == "VPU" else roofline(s.flops, s.bytes, target, sixteen)
    return max(mxu, s.tiled / chip.hbm_bandwidth), useful


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


class _WhatIf:
    """The step with a change applied: its time, and each ranked row's wasted time."""

    def __init__(self, ops: list[HloOp], rows: list[Row], timed: list[OpReport], target: str, dtype: str,
                 common_batch: int | None):
        self.ops, self.rows, self.target, self.dtype = ops, rows, target, dtype
        self.before = {o.name: (o.time, o.useful_time) for o in timed}
        self.step_time = sum(r.time for r in rows)
        self.common_batch = common_batch

    def _times(self, ops: list[HloOp]) -> dict[str, tuple[float, float]]:
        return {op.name: _op_times(op, s, self.target) for op, s in simulate(ops, self.target, self.dtype).ops}

    def apply(self, ops: list[HloOp] | None = None, removed: frozenset[str] | set[str] = frozenset(),
              moves: float = 1.0, scaled: dict[str, float] | None = None) -> tuple[float, list[float]]:
        """(step time, wasted time per row) with ``ops`` in place of the step's and ``removed``
        gone; the pads, transposes and copies' times times ``moves`` (their bytes follow the batch),
        and each op in ``scaled`` times its factor (its bytes follow a dim the change sets)."""
        after = {name: (t * moves * (scaled or {}).get(name, 1.0), u * moves * (scaled or {}).get(name, 1.0))
                 for name, (t, u) in self.before.items()}
        if ops is not None:
            after.update(self._times(ops))
        waste, total = [], 0.0
        for r in self.rows:
            t = sum(after[m][0] for m in r.members if m not in removed)
            u = sum(after[m][1] for m in r.members if m not in removed)
            total += t
            waste.append(max(0.0, t - u))
        return total, waste

    def recommend(self, text: str, source: dict[str, Any] | None, after: float, waste: list[float],
                  **more: Any) -> Recommendation:
        """The recommendation of a change whose step time is ``after`` and rows' waste ``waste``."""
        return Recommendation(text, source, self.covered(waste), after, self.step_time - after,
                              sum(r.wasted_time for r in self.rows) - sum(waste), **more)

    def covered(self, waste: list[float], scale: float = 1.0) -> list[int]:
        """Ranks of the rows whose waste (per example, with ``scale``) the change cuts."""
        return [i for i, (r, w) in enumerate(zip(self.rows, waste), 1)
                if r.wasted_time > 0 and w * scale <= (1 - COVERS) * r.wasted_time]


def _line(*sources: dict[str, Any] | None) -> str:
    """``line 15`` or, for a line in a helper, ``line 15, called at lines 23, 25``."""
    src = next((s for s in sources if s), None)
    if not src:
        return "no source line"
    callers = sorted({s["callers"][0] for s in sources if s and s.get("callers")} - {src["line"]})
    if not callers:
        return f"line {src['line']}"
    return f"line {src['line']}, called at line{'s' if len(callers) > 1 else ''} {', '.join(map(str, callers))}"


def _in_us(seconds: float) -> str:
    return f"{_us(seconds)} µs"


def _effect(what: _WhatIf, after: float) -> str:
    return f"step ≈ {_in_us(what.step_time)} → {_in_us(after)}"


def _hbm_note(raw: dict[str, Any], ops: list[HloOp], target: str, dtype: str,
              per_core_batch: int | None = None) -> str:
    """What a change that raises the batch or a width needs in HBM, against the chip's
    capacity (docs/facts.md#25): a bigger batch that does not fit is no advice."""
    h = hbm_need(raw, ops, target, dtype, per_core_batch)
    if not h.get("capacity"):
        return ""
    verdict = "" if h["fits"] else " — more than the chip has"
    return f"; HBM ≈ {h['need'] / 1e9:.2f} GB of {h['capacity'] / 1e9:.0f} GB per chip{verdict}"


def _ranks(ranks: list[int]) -> str:
    return ("row " if len(ranks) == 1 else "rows ") + ", ".join(map(str, ranks))


def _batch_change(what: _WhatIf, raw: dict[str, Any], target: str, step_fit: float) -> Recommendation | None:
    """docs/facts.md#1 and #24: a per-core batch under 64 flips the layout and pads the
    weight-update convolutions' batch to 128. Compared per example: a bigger batch is more work."""
    t = TARGETS[target]
    per_core = int(raw.get("per_core_batch") or 0)
    cores = int(raw.get("cores") or 1)
    if not (t.family == "tpu" and 0 < per_core < LARGE_BATCH):
        return None
    new = t.large
    ops = with_batch(what.ops, per_core, new)
    fit = simulate(ops, target, what.dtype).step_fit
    after, waste = what.apply(ops, moves=new / per_core)
    scale = per_core / new
    text = (f"per-core batch {per_core} → {new} (global {per_core * cores} → {new * cores} on {cores} "
            f"core{'s' if cores != 1 else ''}, or fewer cores): step fit {step_fit:.1%} → {fit:.1%}, "
            f"time per example {_in_us(what.step_time / per_core)} → {_in_us(after / new)}"
            + _hbm_note(raw, what.ops, target, what.dtype, per_core_batch=new))
    saved = what.step_time - after * scale
    return Recommendation(text, None, what.covered(waste, scale), after, saved,
                          sum(r.wasted_time for r in what.rows) - sum(waste) * scale, fit,
                          raises="batch")


def _width_changes(what: _WhatIf, reports: list[OpReport], raw: dict[str, Any], target: str,
                   floor: float = 0.001) -> list[Recommendation]:
    """Per layer: round the filter/unit count its forward op produces, where that recovers
    more than ``floor`` of the step."""
    t = TARGETS[target]
    by_layer: dict[str, list[OpReport]] = {}
    for rep in reports:
        if rep.layer:
            by_layer.setdefault(rep.layer, []).append(rep)
    # An output layer's width is set by the task (classes, channels), not a free choice.
    outputs = set(raw.get("output_layers") or ())
    out = []
    for layer, reps in by_layer.items():
        fwd = [r for r in reps if r.pass_ == FORWARD]
        if not fwd or layer in outputs or (fwd[0].source or {}).get("block"):
            continue
        n = fwd[0].dims["out_features"][0]
        candidates = {pad_to(n, t.channel_multiple)}
        if t.large // 2 < n < t.large:
            candidates.add(t.large)
        candidates.discard(n)
        names = {r.name for r in reps}
        best = None
        for new in sorted(candidates):
            ops = with_features(what.ops, names, n, new)
            after, waste = what.apply(ops)
            recovered = what.step_time - sum(r.useful_time for r in what.rows) - sum(waste)
            if best is None or recovered > best[3]:
                best = (new, after, waste, recovered, ops)
        if best is None or best[3] <= floor * what.step_time:
            continue
        new, after, waste, recovered, ops = best
        src = fwd[0].source
        fit = simulate(ops, target, what.dtype).step_fit
        text = (f"{layer} ({_line(src)}): {n} → {new} filters/units: {_effect(what, after)}, "
                f"{_in_us(recovered)} less waste; step fit → {fit:.1%}"
                + (_hbm_note(raw, ops, target, what.dtype) if new > n else ""))
        out.append(Recommendation(text, src, what.covered(waste), after, what.step_time - after,
                                  recovered, fit, raises="width" if new > n else None))
    return out


def _pad_changes(what: _WhatIf, raw: dict[str, Any], mem: list[OpReport]) -> list[Recommendation]:
    """Zero spatial pads feeding a convolution, materialized in HBM (docs/facts.md#19): the
    conv's own padding removes the pad and its gradient's slice. One change per source line."""
    by_line: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for pad in raw.get("pads", []):
        src = pad.get("source")
        shape, padded = pad["shape"], pad["padded_shape"]
        spatial = len(shape) > 2 and shape[0] == padded[0] and shape[-1] == padded[-1]
        if src and pad.get("zero") and spatial and pad.get("layer") and not src.get("block"):
            by_line.setdefault((src["file"], src["line"]), []).append(pad)
    out = []
    for pads in by_line.values():
        layers = {p["layer"] for p in pads}
        pad_names = {p["name"] for p in pads}
        removed = {m.name for m in mem if m.layer in layers and (
            m.name in pad_names or m.kind in ("pad", "slice"))}
        if not removed:
            continue
        after, waste = what.apply(removed=removed)
        src = pads[0]["source"]
        text = (f"{', '.join(sorted(layers))} ({_line(*(p['source'] for p in pads))}): a zero pad before a convolution is "
                f"written to HBM and read again by the weight update; give the convolution the "
                f"padding instead (padding='same' where it is equivalent): {_effect(what, after)}")
        out.append(what.recommend(text, src, after, waste))
    return out


# TF's own name for a transpose op (tf.transpose, keras.ops.transpose, Permute): a transpose
# named after another op (".../MatMul") is one the compiler inserted for that op, and one
# under a tensordot or einsum is how TF lowers that contraction, not a line of the user's.
_TRANSPOSE_OP = re.compile(r"(^|/)([Tt]ranspose(_\d+)?)$")
_LOWERED = re.compile(r"(^|/)([Tt]ensordot|[Ee]insum|MatMul|BatchMatMul)[^/]*/")


def _transpose_changes(what: _WhatIf, mem: list[OpReport]) -> list[Recommendation]:
    """Transposes the user's code writes, by source line: keeping one layout removes them
    (the forward one and its gradient)."""
    by_line: dict[tuple[str, int], list[OpReport]] = {}
    for m in mem:
        src = m.source
        if m.kind != "transpose" or not src or src.get("block") or m.wasted_time <= 0:
            continue
        forward_name = re.sub(r"(/[Tt]ranspose(_\d+)?)+$", r"\1", strip_scopes(m.op_name))
        if _TRANSPOSE_OP.search(forward_name) and not _LOWERED.search(forward_name):
            by_line.setdefault((src["file"], src["line"]), []).append(m)
    out = []
    for found in by_line.values():
        removed = {m.name for m in found}
        after, waste = what.apply(removed=removed)
        src = found[0].source
        layers = sorted({m.layer or m.op_name for m in found})
        text = (f"{', '.join(layers)} ({_line(src)}): a transpose that moves the last axis is a "
                f"copy through HBM (docs/facts.md#4, #7); keep one layout end to end: "
                f"{_effect(what, after)}")
        out.append(what.recommend(text, src, after, waste))
    return out


def _from_findings(what: _WhatIf, findings: list[StaticFinding], mem: list[OpReport],
                   reports: list[OpReport], changes: list[Recommendation], raw: dict[str, Any],
                   target: str) -> list[Recommendation]:
    """A static finding on a row of the table always yields its recommendation: the build's
    change at the same line takes the finding's code and fix; else the finding's own."""
    out = []
    source_of = {o.name: o.source for o in mem + reports if o.source}
    row_sources = []
    for r in what.rows:
        distinct = {(src["line"], src.get("end_line"), tuple(src.get("callers", ()))): src
                    for src in [r.source] + [source_of.get(m) for m in r.members] if src}
        row_sources.append(list(distinct.values()))
    for f in findings:
        hit = [i for i, sources in enumerate(row_sources, 1)
               if any(source_at(src, f.filename, f.row, f.end_row) for src in sources)]
        if not hit:
            continue
        same = next((c for c in changes if c.source and c.code is None
                     and source_at(c.source, f.filename, f.row, f.end_row)), None)
        if same is not None:
            same.code = f.code
            same.text = f"{f.code} {same.text}"
            continue
        if f.evidence == "feature-padding":
            # the layer's rounding, however little it recovers: the finding asked for it
            own = [o for o in reports if source_at(o.source, f.filename, f.row, f.end_row)]
            width = _width_changes(what, own, raw, target, floor=-1.0)
            if width:
                for change in width:
                    change.code, change.text = f.code, f"{f.code} {change.text}"
                out += width
                continue
        removed: set[str] = set()
        if f.evidence in ("transpose", "spatial-pad"):
            kinds = ("transpose",) if f.evidence == "transpose" else ("pad", "slice")
            removed = {m.name for m in mem if m.kind in kinds
                       and source_at(m.source, f.filename, f.row, f.end_row)}
        src = next((what.rows[i - 1].source for i in hit), None)
        if removed:
            after, waste = what.apply(removed=removed)
            out.append(what.recommend(f"{f.code} at line {f.row}: {f.fix}: {_effect(what, after)}", src,
                                      after, waste, code=f.code))
        else:
            out.append(Recommendation(f"{f.code} at line {f.row} ({_ranks(hit)}): {f.fix}", src, hit,
                                      code=f.code, kind="change"))
    return out


# What a library block's arguments do to its padding: the levers the user has.
_BLOCK_LEVERS = {
    "MultiHeadAttention": "a head size (key_dim) of 128 fills the MXU's contraction; fewer heads of a "
                          "larger key_dim keep num_heads × key_dim; a sequence length that is a "
                          "multiple of 128 fills the score matrix",
}
_CONTAINERS = ("Functional", "Sequential", "Model")
_PADDED = re.compile(r"([a-z-]+) (\d+)→(\d+)")


def _reshaped_heads(op: HloOp, heads: int, head_dims: set[int], new_heads: int) -> HloOp | None:
    """An attention matmul with ``new_heads`` heads of the same total width; the op itself
    when it is not one (no batch dim of ``heads``: a projection's weight update); None when
    its dims do not say unambiguously which is the head count and which the head size."""
    if not any(op.lhs_shape[i] == heads for i in op.roles.get("lhs", {}).get("b", [])):
        return op
    batch = int(op.extra.get("batch") or 0)
    sizes = {"m": op.m, "k": op.k, "n": op.n}
    role = [r for r, v in sizes.items() if v in head_dims]
    if not batch or batch % heads or len(role) != 1:
        return None
    size = sizes[role[0]]
    if size * heads % new_heads:
        return None
    new_size = size * heads // new_heads
    clone = HloOp.from_dict(op.to_dict())
    clone.extra["batch"] = batch // heads * new_heads
    setattr(clone, role[0], new_size)  # the FLOPs stay: heads × head size is the same
    for tensor, shape in (("lhs", clone.lhs_shape), ("rhs", clone.rhs_shape), ("out", clone.shape)):
        roles = clone.roles.get(tensor, {})
        at_heads = [i for i in roles.get("b", []) if shape[i] == heads]
        at_size = roles.get(role[0], [])  # one operand has no head-size dim (the scores)
        if len(at_heads) != 1 or len(at_size) > 1 or (at_size and shape[at_size[0]] != size):
            return None
        shape[at_heads[0]] = new_heads
        if at_size:
            shape[at_size[0]] = new_size
    return clone


def _score_sized(op: OpReport, heads: int, head_dims: set[int]) -> bool:
    """A move or fusion of the attention scores (batch, heads, query, key): a heads dim and
    no head-size dim, so its bytes follow the head count (the softmax, its gradient, a
    transpose of the scores)."""
    return (len(op.shape) >= 4 and sum(d == heads for d in op.shape) == 1
            and not any(d in head_dims for d in op.shape))


def _heads_change(what: _WhatIf, block: str, info: dict[str, Any], reports: list[OpReport],
                  mem: list[OpReport]) -> Recommendation | None:
    """MultiHeadAttention: the same num_heads × key_dim in fewer, larger heads — the head
    size is what its attention matmuls pad. Those matmuls are re-simulated; the block's
    score-sized moves and fusions scale with the head count."""
    config = info.get("config") or {}
    heads, key_dim = config.get("num_heads"), config.get("key_dim")
    if info.get("class") != "MultiHeadAttention" or not heads or not key_dim or heads < 2:
        return None
    head_dims = {key_dim, config.get("value_dim") or key_dim}
    inside = {o.name for o in reports if (o.source or {}).get("block") == block and "rows" in o.dims}
    scores = [m.name for m in mem if (m.source or {}).get("block") == block and _score_sized(m, heads, head_dims)]
    best = None
    for new_heads in (h for h in range(1, heads) if heads % h == 0):
        ops, changed = [], 0
        for op in what.ops:
            clone = _reshaped_heads(op, heads, head_dims, new_heads) if op.name in inside else None
            if op.name in inside and clone is None:
                break  # one attention matmul this cannot follow: no number at all
            changed += clone is not None and clone is not op
            ops.append(clone or op)
        else:
            if changed:
                after, waste = what.apply(ops, scaled={name: new_heads / heads for name in scores})
                if best is None or after < best[1]:
                    best = (new_heads, after, waste)
    if best is None or best[1] >= what.step_time:
        return None
    new_heads, after, waste = best
    src = next((o.source for o in reports if o.name in inside), None)
    text = (f"`MultiHeadAttention` {block} ({_line(src)}): num_heads={heads}, key_dim={key_dim} → "
            f"num_heads={new_heads}, key_dim={key_dim * heads // new_heads} (the same total width; "
            f"its attention matmuls re-simulated{', its score-sized moves and fusions scaled' if scores else ''}): "
            f"{_effect(what, after)}")
    return what.recommend(text, src, after, waste)


def _origins(what: _WhatIf, raw: dict[str, Any], reports: list[OpReport], uncovered: list[int]
             ) -> list[Recommendation]:
    """Top rows no change of the user's reaches: say where they come from."""
    blocks = raw.get("blocks") or {}
    out: list[Recommendation] = []
    by_block: dict[str, list[int]] = {}
    for i in uncovered:
        src = what.rows[i - 1].source
        if src and src.get("block") in blocks:
            by_block.setdefault(src["block"], []).append(i)
            continue
        r = what.rows[i - 1]
        out.append(Recommendation(f"row {i}, {r.layer} ({_line(r.source)}), {r.pass_} {r.kind}: "
                                  + _cause(r, reports, raw, what), r.source, [i]))
    for block, ranks in by_block.items():
        info = blocks[block]
        config = info.get("config") or {}
        rows = [what.rows[i - 1] for i in ranks]
        pads = sorted({(m.group(1), int(m.group(2)), int(m.group(3)))
                       for r in rows for w in r.why for m in _PADDED.finditer(w)
                       if "HBM" not in w.split(m.group(0))[0]}, key=lambda p: (p[1], p[0]))
        lengths = {d for shape in raw.get("inputs") or [] for d in shape[1:] if d}
        named = []
        for dim, real, padded in pads:
            args = [k for k, v in config.items() if v == real]
            whose = f"{'/'.join(args)}={real}" if args else "the model input's" if real in lengths else ""
            named.append(f"{dim} {real}→{padded}" + (f" ({whose})" if whose else ""))
        named += sorted({f"{r.kind}s through HBM" for r in rows if r.kind not in ("convolution", "dot")})
        src = rows[0].source
        lever = _BLOCK_LEVERS.get(info["class"], "its layers are the library's; yours are its "
                                                 "arguments, the input's shape and the batch")
        argv = ", ".join(f"{k}={v}" for k, v in config.items() if k in ("num_heads", "key_dim", "value_dim")
                         or info["class"] not in _BLOCK_LEVERS)
        # a model from a library (keras.applications) is known by its name, not its class
        what_ = f"`{block}`" if info["class"] in _CONTAINERS else f"`{info['class']}` {block}"
        out.append(Recommendation(
            f"{_ranks(ranks)}: inside {what_} ({_line(src)}"
            + (f", {argv}" if argv else "") + "): " + ("; ".join(named) or "padding") + f" — {lever}",
            src, ranks))
    return out


def _padded_dims(why: list[str]) -> list[tuple[str, int, int]]:
    """(dim, real, padded) of the MXU padding a row names (not its HBM tiling), worst first."""
    dims = []
    for w in why:
        if w.startswith("in HBM"):
            continue
        m = _PADDED.match(w)
        if m:
            dims.append((m.group(1), int(m.group(2)), int(m.group(3))))
    return sorted(dims, key=lambda d: d[1] / d[2])


def _cause(row: Row, reports: list[OpReport], raw: dict[str, Any], what: _WhatIf) -> str:
    """Where a row's waste comes from, in terms of the script: whose width, which rule."""
    if row.kind not in ("convolution", "dot"):
        written = " by the compiler around this layer's op" if row.kind == "transpose" else ""
        return f"{'; '.join(row.why) or row.kind}{written}: no line of yours writes it"
    dims = _padded_dims(row.why)
    if not dims:
        return f"{'; '.join(row.why) or 'its arrays'}: the 8×128 tiles of HBM (docs/facts.md#7)"
    dim, real, padded = dims[0]
    if dim.startswith("in-"):
        producers = sorted({f"{o.layer}'s width ({_line(o.source)})" for o in reports
                            if o.pass_ == FORWARD and o.layer != row.layer and o.dims["out_features"][0] == real})
        inputs = any(shape and shape[-1] == real for shape in raw.get("inputs") or [])
        whose = ("the model input's" if inputs and not producers else
                 " or ".join(producers[:2]) or "the width it reads")
    elif dim.startswith("out-"):
        whose = f"{row.layer}'s width"
    else:
        whose = "the per-core batch"
    common = what.common_batch or 0
    batched = any("rows" in o.dims for o in reports if o.name in row.members)
    if batched and dim != "batch":
        rule = (f"a batched matmul (attention) pads both matrix dims to {padded} "
                "(docs/facts.md#5, #8: both face the MXU)")
    elif row.pass_ == KERNEL_GRAD and padded % LANES == 0 and dim != "batch":
        rule = (f"the weight update pads the features it reads to {padded} at a per-core batch of "
                f"{LARGE_BATCH} or more (docs/facts.md#1)" if common >= LARGE_BATCH else
                f"pads to {padded} (docs/facts.md#1)")
    elif padded % LANES == 0 and dim != "batch":
        rule = f"features pad to {padded} at a per-core batch under {LARGE_BATCH} (docs/facts.md#1)"
    else:
        rule = f"pads to a multiple of {_multiple(real, padded)} (docs/facts.md#1–3)"
    return f"{dim} {real}→{padded}: {real} is {whose}; {rule}"


def _multiple(real: int, padded: int) -> int:
    for m in (8, 128, 256):
        if pad_to(real, m) == padded:
            return m
    return padded


def _recommend(ops: list[HloOp], reports: list[OpReport], mem: list[OpReport], rows: list[Row],
               raw: dict[str, Any], target: str, dtype: str, sim: Simulation,
               findings: list[StaticFinding]) -> list[Recommendation]:
    if raw.get("assumptions"):
        return []  # a build resting on an assumption is the basis of no recommendation (its header says why)
    step_fit, common_batch = sim.step_fit, sim.common_batch
    what = _WhatIf(ops, rows, reports + mem, target, dtype, common_batch)
    batch = _batch_change(what, raw, target, step_fit)
    changes = (_pad_changes(what, raw, mem) + _transpose_changes(what, mem)
               + _width_changes(what, reports, raw, target))
    changes += _from_findings(what, findings, mem, reports, changes, raw, target)
    changes += [c for block, info in (raw.get("blocks") or {}).items()
                if (c := _heads_change(what, block, info, reports, mem)) is not None]
    top = set(range(1, min(TOP_ROWS, len(rows)) + 1))
    # Changes that reach a top row or carry a static finding, then the rest by what they save.
    changes.sort(key=lambda c: (not (top & set(c.rows) or c.code), -c.waste_saved))
    kept = [c for c in changes if top & set(c.rows) or c.code]
    kept += [c for c in changes if c not in kept][:max(0, MAX_CHANGES - len(kept))]
    kept.sort(key=lambda c: -c.waste_saved)
    if batch is not None:
        kept.insert(0, batch)
    covered = {i for c in kept for i in c.rows}
    # rows whose waste is a rounding error of the step's need no explanation
    floor = NEGLIGIBLE * sum(r.wasted_time for r in rows)
    uncovered = sorted(i for i in top - covered if rows[i - 1].wasted_time > floor)
    return kept + sorted(_origins(what, raw, reports, uncovered), key=lambda r: r.rows[0])


_DTYPE_NAMES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}
# Data movement with nothing computed: all of its time is waste (docs/facts.md#4, #11, #19).
_PURE_MOVES = {"pad": "pad materialized in HBM", "transpose": "transpose (a copy in HBM)",
               "copy": "copy (relayout)"}
# Elementwise work XLA fuses into loops: HBM-bound, all of it needed.
_FUSIONS = {"elementwise": "elementwise (fused, HBM-bound)",
            "normalization": "normalization (fused, HBM-bound)",
            "softmax": "softmax (fused, HBM-bound)"}


def _name_causes(why: list[str], op: HloOp, per_core: int) -> list[str]:
    """Say which padded batch is the per-core batch: the cause users can change."""
    out = []
    for w in why:
        if per_core and not op.extra.get("batch") and w.startswith(f"batch {per_core}→"):
            w += " (per-core batch)"
        out.append(w)
    return out


def _mem_rows(raw: dict[str, Any], target: str) -> list[OpReport]:
    """Data moves and fused elementwise work, timed by their HBM bytes.

    A transpose or copy that only feeds dot/conv operands is free on a TPU (``free``,
    docs/facts.md#4) and gets no row; a while body's op counts its trips.
    """
    out = []
    hbm = TARGETS[target].hbm_bandwidth
    for m in raw.get("mem_ops", []):
        if m.get("free"):
            continue
        trips = int(m.get("trips") or 1)
        t = m["bytes"] * trips / hbm
        kind = m.get("kind") or m["opcode"]
        useful = 0.0 if kind in _PURE_MOVES else t
        why = []
        if kind in _PURE_MOVES:
            why = [_PURE_MOVES[kind] + f", {m['bytes'] * trips / 1e6:.1f} MB of HBM traffic"]
        elif kind in _FUSIONS:
            why = [_FUSIONS[kind]]
        if trips > 1:
            why.append(f"×{trips} (while loop)")
        out.append(OpReport(
            name=m["name"], op_name=m["op_name"], op_type=m["opcode"], layer=m.get("layer"),
            pass_="backward" if is_gradient(m["op_name"]) else FORWARD, kind=kind,
            shape=(m["operand_shapes"] or [m["shape"]])[0], padded_shape=m["shape"], tensor="out",
            dims={}, fit=1.0 if useful else 0.0, flops=0, padded_flops=0.0, source=m.get("source"),
            time=t, useful_time=useful, why=why, bound="HBM",
        ))
    return out


def rank_rows(ops: list[OpReport]) -> list[Row]:
    """Group ops by layer, source line, pass and kind; sort by wasted time."""
    groups: dict[tuple[Any, ...], list[OpReport]] = {}
    for op in ops:
        line = op.source.get("line") if op.source else None
        groups.setdefault((op.layer or op.op_name, line, op.pass_, op.kind), []).append(op)
    rows = []
    for (layer, _, pass_, kind), members in groups.items():
        worst = max(members, key=lambda o: (o.wasted_time, o.time))
        mxu = [o for o in members if o.unit == "MXU"]
        padded = sum(o.padded_flops for o in mxu)
        fit = sum(o.flops for o in mxu) / padded if padded else None
        by_mxu = sum(o.time for o in members if o.bound == "MXU")
        rows.append(Row(layer=layer, source=worst.source, pass_=pass_, kind=kind, ops=len(members),
                        time=sum(o.time for o in members),
                        useful_time=sum(o.useful_time for o in members),
                        shape=worst.shape, padded_shape=worst.padded_shape, why=list(worst.why),
                        fit=fit, bound="MXU" if by_mxu * 2 > sum(o.time for o in members) else "HBM",
                        members=[o.name for o in members]))
    # Exact ties are common (a 1-channel input conv and a 1-channel output conv pad the
    # same arrays the same way): among them, rows whose cause the report can act on (the
    # per-core batch) come first.
    # (ties at three significant figures: a kernel's few bytes do not break them)
    rows.sort(key=lambda r: (-float(f"{r.wasted_time:.3g}"), -float(f"{r.time:.3g}"),
                             not any("(per-core batch)" in w for w in r.why), -r.wasted_time))
    return rows


def make_report(raw: dict[str, Any], target: str = DEFAULT_TARGET, dtype: str = "float32",
                findings: list[StaticFinding] | None = None) -> BuildReport:
    """Simulate the child's ops for a target and build the report; ``findings`` are the
    file's static findings, each of which on a row of the table yields a recommendation."""
    ops = [HloOp.from_dict({k: v for k, v in d.items() if k not in ("layer", "source")})
           for d in raw.get("ops", [])]
    meta = {d["name"]: d for d in raw.get("ops", [])}
    sim = simulate(ops, target, dtype)
    t = TARGETS[target]
    per_core = int(raw.get("per_core_batch") or 0)
    reports: list[OpReport] = []
    for op, s in sim.ops:
        m = meta[op.name]
        sixteen = op.dtype in _SIXTEEN
        why = _name_causes(s.why, op, per_core)
        mxu_time = s.padded_flops / (t.flops_16 if sixteen else t.flops_32)
        if s.unit == "VPU":
            mxu_time = 0.0  # no matrix-unit work: the bytes it moves set its time
        if s.tiled / t.hbm_bandwidth >= mxu_time and s.tiled > s.bytes * 1.05:
            # Memory-bound, and the arrays' tile padding in HBM is what the op waits on.
            why = [*why, *s.tiled_why]
            if (per_core and per_core < LARGE_BATCH and not op.extra.get("batch")
                    and any("lanes" in w for w in s.tiled_why)):
                why.append(f"per-core batch {per_core} < {LARGE_BATCH} puts features on the lanes")
        elif why and s.tiled / t.hbm_bandwidth >= mxu_time:
            # The padded MXU work fits under the op's HBM time: the padding costs nothing here.
            why.append("memory-bound: the padding is hidden under HBM time")
        if s.trips > 1:
            why.append(f"×{s.trips} (while loop)")
        times = _op_times(op, s, target)
        reports.append(OpReport(
            name=op.name, op_name=op.op_name, op_type=op.op_type, layer=m.get("layer"),
            pass_=op.pass_, kind=op.opcode, shape=s.shape, padded_shape=s.padded_shape,
            tensor=s.tensor, dims={k: list(v) for k, v in s.dims.items()}, fit=s.fit,
            flops=s.flops, padded_flops=s.padded_flops,
            share=s.flops / sim.flops if sim.flops else 0.0, source=m.get("source"),
            tensors={k: [list(a), list(b)] for k, (a, b) in s.tensors.items()},
            time=times[0], useful_time=times[1],
            why=why, bound="MXU" if mxu_time > s.tiled / t.hbm_bandwidth else "HBM", unit=s.unit,
        ))
    reports.sort(key=lambda r: (r.fit, -r.padded_flops))
    mem = _mem_rows(raw, target)
    rows = rank_rows(reports + mem)

    lay = {p: list(layout(p, sim.common_batch, t)) for p in (FORWARD, "input-gradient", KERNEL_GRAD)}
    recs = _recommend(ops, reports, mem, rows, raw, target, dtype, sim, findings or [])
    notes = list(raw.get("notes", []))
    counts: dict[str, int] = {}
    for op in ops:
        counts[op.dtype] = counts.get(op.dtype, 0) + 1
    measured = _DTYPE_NAMES.get(max(counts, key=lambda k: counts[k]), "") if counts else ""
    if measured and dtype == "bfloat16" and measured != "bfloat16":
        notes.append(f"--dtype bfloat16 was asked for, but the model's matmuls and convolutions are "
                     f"{measured} (graph code does not follow a Keras dtype policy): simulated as {measured}")
    notes.append(KERNEL_BOUND)
    free = [m for m in raw.get("mem_ops", []) if m.get("free")]
    if free:
        notes.append(f"{len(free)} transpose/copy/broadcast op(s) feed only dot/conv operands: folded "
                     "into their operand layout on a TPU (docs/facts.md#4), not costed")
    notes.append("time is padded FLOPs over the MXU peak or the arrays' bytes as tiled in HBM over its "
                 "bandwidth, whichever is slower (docs/facts.md#7; the activations' lane dim is the one "
                 "docs/facts.md#1 pads to 128); useful time is the same op unpadded")
    notes.append(f"times: roofline per op from {TARGETS[target].peaks_source}")
    notes.append("elementwise, normalization and softmax ops are timed as XLA's loop fusions: the "
                 "bytes that cross a fusion's edge over HBM bandwidth (docs/facts.md#5, #15)")
    return BuildReport(
        file=raw.get("file", ""), entry=raw.get("entry", ""), mode=raw.get("mode", ""),
        target=target, dtype=measured or dtype, global_batch=int(raw.get("global_batch") or 0),
        cores=int(raw.get("cores") or 1), per_core_batch=per_core,
        common_batch=sim.common_batch, ops=reports, step_fit=sim.step_fit,
        hbm_expansion=sim.hbm_expansion, flops=sim.flops, padded_flops=sim.padded_flops,
        recommendations=recs, layout=lay, outputs=raw.get("outputs", []),
        inputs=raw.get("inputs", []), pads=raw.get("pads", []),
        input_sites=raw.get("input_sites", []), notes=notes,
        tf_version=raw.get("tf_version", ""), timings=raw.get("timings", {}),
        rows=rows, step_time=sum(r.time for r in rows),
        useful_time=sum(r.useful_time for r in rows), measured_dtype=measured,
        mem_rows=mem, output_layers=list(raw.get("output_layers") or ()),
        hbm=hbm_need(raw, ops, target, dtype),
        keras3_error=str(raw.get("keras3_error") or ""), complete=_complete(raw),
        blocks=dict(raw.get("blocks") or {}),
        networks=list(raw.get("networks") or ()), built_how=str(raw.get("built_how") or ""),
        shapes_said=list(raw.get("said") or ()), **_how_built(raw),
    )


def _how_built(raw: dict[str, Any]) -> dict[str, Any]:
    """Which way the step was found, and what the build assumed (the header's)."""
    return {"assumptions": [str(a) for a in raw.get("assumptions") or ()], "way": str(raw.get("way") or "sliced")}


# Adam, Keras's usual optimizer, keeps two slots per weight; SGD with momentum one.
OPTIMIZER_SLOTS = 2


def _tiled(shape: list[int], itemsize: int) -> int:
    """Bytes of an array tiled on its two minor dims (docs/facts.md#7)."""
    if not shape:
        return itemsize
    if len(shape) == 1:
        return pad_to(shape[0], 128) * itemsize
    return tiled_bytes(list(shape), len(shape) - 2, len(shape) - 1, itemsize)[1]


def hbm_need(raw: dict[str, Any], ops: list[HloOp], target: str, dtype: str = "float32",
             per_core_batch: int | None = None) -> dict[str, Any]:
    """The HBM one training step needs on one chip, against its capacity (docs/facts.md#7, #25).

    Weights, their gradients and the optimizer's slots (Adam's two) as tiled arrays, plus
    the forward activations the backward pass reads (every forward conv/dot's input and
    output, tiled as the activations' layout stores them), scaled to ``per_core_batch``
    when given (what-if for a larger batch). An estimate: XLA's rematerialization and
    buffer reuse move it either way. Recommendations that raise the batch or a width
    read ``need`` against ``capacity``.
    """
    t = TARGETS[target]
    itemsize = 2 if dtype == "bfloat16" else 4
    weights = sum(_tiled(list(v), 4) for v in raw.get("variables", []))  # kept in float32
    sim = simulate(ops, target, dtype)
    seen: set[str] = set()
    activations = 0
    for op, s in sim.ops:
        if op.pass_ != FORWARD:
            continue
        for name, tensor in ((op.lhs, "lhs"), (op.name, "out")):
            if name in seen:
                continue
            seen.add(name)
            real, _ = s.tensors.get(tensor, ([], []))
            if real:
                activations += _tiled(list(real), itemsize) * s.trips
    base = int(raw.get("per_core_batch") or 0)
    if per_core_batch and base:
        activations = activations * per_core_batch // base
    need = weights * (2 + OPTIMIZER_SLOTS) + activations
    return {"need": need, "capacity": t.hbm_bytes, "weights": weights, "gradients": weights,
            "optimizer": weights * OPTIMIZER_SLOTS, "activations": activations,
            "fits": need <= t.hbm_bytes if t.hbm_bytes else None}


def _complete(raw: dict[str, Any]) -> bool:
    """Did every statement on the way to the model run? (The child says so; older builds
    noted the statements they passed over.)"""
    if "complete" in raw:
        return bool(raw["complete"])
    return not any(str(n).startswith("script statements that failed") for n in raw.get("notes", []))


def _x(shape: list[int]) -> str:
    return "×".join(str(d) for d in shape)


def _us(seconds: float) -> str:
    us = seconds * 1e6
    return f"{us:,.0f}" if us >= 100 else f"{us:.1f}" if us >= 1 else f"{us:.2f}"


DEFAULT_ROWS = 20


TABLE_HEADERS = ["#", "layer", "source", "pass", "op", "shape → padded", "fit", "bound", "time µs",
                 "wasted µs", "why"]


def table_rows(report: BuildReport, max_rows: int | None = DEFAULT_ROWS) -> list[list[str]]:
    rows = []
    shown = report.rows if max_rows is None else report.rows[:max_rows]
    for i, r in enumerate(shown, 1):
        src = r.source
        line = f"{_short(src['file'])}:{src['line']}" if src else "-"
        what = r.kind if r.ops == 1 else f"{r.kind} ×{r.ops}"
        shape = f"{_x(r.shape)} → {_x(r.padded_shape)}" if r.kind in ("convolution", "dot") else _x(r.padded_shape)
        fit = "-" if r.fit is None else f"{r.fit:.1%}"
        rows.append([str(i), r.layer, line, r.pass_, what, shape, fit, r.bound,
                     _us(r.time), _us(r.wasted_time), "; ".join(r.why) or "-"])
    return rows


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    """The table as tabulate's "simple" format lays out text cells, without importing it.

    A cached report is mostly start-up: tabulate and the importlib.metadata it pulls in
    cost ~55 ms of it (more where bytecode is not cached).
    """
    # a cell is one inert line, as ``check``'s text output prints a path: a file or layer name
    # with a newline, a tab or an escape sequence breaks neither the table nor the terminal
    cells = [[printable(str(c)) for c in row] for row in rows]
    widths = [max([len(h) + 2] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]

    def line(values: list[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths)).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(row) for row in cells])


def advice_lines(report: BuildReport) -> list[str]:
    """The recommendations as the text report and the page print them: changes first
    (numbered), then where the top rows no change reaches come from."""
    out = []
    changes = [r for r in report.recommendations if r.is_change]
    origins = [r for r in report.recommendations if not r.is_change]
    if changes:
        out.append("changes that would recover most:")
        out += [f"  {i}. {r.text}" for i, r in enumerate(changes, 1)]
    if origins:
        out.append(f"where the top {TOP_ROWS} rows come from (no change of yours above reaches them):")
        out += [f"  - {r.text}" for r in origins]
    return out


WAYS = {
    "sliced": "the script's model, built from a slice of the script: its data pipeline and training never "
              "ran (--trace-script runs the script to its first training step instead)",
    "traced": "the script's own first training step: the script ran to it (--trace-script) and stopped "
              "before any weight changed",
}


def header_lines(report: BuildReport) -> list[str]:
    """Which way the step was found, what was built, how its step was traced, where its batch
    and shapes came from, and what was assumed (then nothing is recommended from it)."""
    if not report.networks:
        return []
    names = ", ".join(n["name"] for n in report.networks)
    lines = [f"how: {WAYS.get(report.way, report.way)}", f"built {names}: {report.built_how}"]
    lines += [f"shapes: {said}" for said in report.shapes_said]
    lines += [f"assumed: {a}" for a in report.assumptions]
    if report.assumptions:
        lines.append("assumed: so this report recommends no change and judges no finding; the table shows the "
                     "step as built")
    return lines + [""]


def summary_lines(report: BuildReport) -> list[str]:
    """The step's totals under the table, as the text report and the page print them."""
    b, f = report.layout[FORWARD]
    kb, kf = report.layout[KERNEL_GRAD]
    out = []
    wasted = report.step_time - report.useful_time
    share = wasted / report.step_time if report.step_time else 0.0
    out.append(
        f"step ≈ {_us(report.step_time)} µs on {report.target} (roofline), {_us(wasted)} µs "
        f"({share:.0%}) wasted; per-core batch {report.per_core_batch} (global "
        f"{report.global_batch} / {report.cores} core{'s' if report.cores != 1 else ''})"
    )
    out.append(f"step fit {report.step_fit:.1%} (FLOP-weighted MXU fit of convolutions and matmuls)")
    out.append(
        f"layout (docs/facts.md#1, common batch {report.common_batch}): forward/input-gradient "
        f"batch→{b} feature→{f}; kernel-gradient batch→{kb} feature→{kf}; kernel dims pad like "
        f"the pass's features (docs/facts.md#2–3, the upper bound)"
    )
    if report.hbm.get("capacity"):
        h = report.hbm
        out.append(
            f"HBM need ≈ {h['need'] / 1e9:.2f} GB of {h['capacity'] / 1e9:.1f} GB per chip "
            f"(docs/facts.md#25): weights {h['weights'] / 1e6:,.1f} MB, gradients "
            f"{h['gradients'] / 1e6:,.1f} MB, optimizer slots {h['optimizer'] / 1e6:,.1f} MB (Adam's 2), "
            f"activations kept for the backward pass {h['activations'] / 1e6:,.1f} MB (tiled)"
            + ("" if h.get("fits") else " — does not fit")
        )
    out.append(f"HBM expansion of activations: {report.hbm_expansion:.2f}× ({report.dtype})")
    return out


def render_report(report: BuildReport, fmt: str = "text", max_rows: int | None = DEFAULT_ROWS) -> str:
    if fmt == "json":
        return json.dumps(report.to_dict(), indent=2)
    if fmt != "text":
        raise ValueError(f"unknown report format {fmt!r} (text or json)")
    out = [printable(line) for line in header_lines(report)] + [_table(TABLE_HEADERS, table_rows(report, max_rows))]
    if max_rows is not None and len(report.rows) > max_rows:
        out.append(f"… {len(report.rows) - max_rows} more (--all shows every row)")
    out.append("")
    out += summary_lines(report)
    out += [printable(line) for line in advice_lines(report)]
    for note in report.notes:
        out.append(printable(f"note: {note}"))
    return "\n".join(out)


def _short(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else os.path.basename(path)
