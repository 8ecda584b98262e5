"""The build report: simulated ops tied to source lines, a summary, and what to change.

Pure Python: it turns the child's raw JSON into a :class:`BuildReport` with the
simulator, so the same cached build can be reported for any target.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kerasfit.types import TARGETS

from .hlo import FORWARD, KERNEL_GRAD, HloOp, is_gradient
from .simulator import (
    LARGE_BATCH,
    PEAKS,
    layout,
    pad_to,
    roofline,
    simulate,
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
                "shape": self.shape, "padded_shape": self.padded_shape, "why": self.why}


@dataclass
class Recommendation:
    text: str
    step_fit_after: float
    gain: float  # step-fit points recovered
    source: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "step_fit_after": self.step_fit_after, "gain": self.gain,
                "source": self.source}


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
            "measured_dtype": self.measured_dtype, "peaks": PEAKS[self.target].source,
            "networks": self.networks, "built_how": self.built_how, "shapes_said": self.shapes_said,
        }


def _step_fit(ops: list[HloOp], target: str, dtype: str) -> float:
    return simulate(ops, target, dtype).step_fit


def _recommend(ops: list[HloOp], reports: list[OpReport], raw: dict[str, Any], target: str,
               dtype: str, step_fit: float) -> list[Recommendation]:
    t = TARGETS[target]
    per_core = int(raw.get("per_core_batch") or 0)
    cores = int(raw.get("cores") or 1)
    forced: list[Recommendation] = []
    found: list[Recommendation] = []
    # docs/facts.md#1 and #24: a per-core batch under 64 flips the layout and pads the
    # weight-update convolutions' batch to 128.
    if t.family == "tpu" and 0 < per_core < LARGE_BATCH:
        new = t.large
        after = _step_fit(with_batch(ops, per_core, new), target, dtype)
        text = (f"per-core batch {per_core} → {new} (global {per_core * cores} → {new * cores} "
                f"on {cores} core{'s' if cores != 1 else ''}, or fewer cores): step fit "
                f"{step_fit:.1%} → {after:.1%}")
        forced.append(Recommendation(text, after, after - step_fit))
    # Per layer: round the filter/unit count its forward op produces.
    by_layer: dict[str, list[OpReport]] = {}
    for rep in reports:
        if rep.layer:
            by_layer.setdefault(rep.layer, []).append(rep)
    # An output layer's width is set by the task (classes, channels), not a free choice.
    outputs = set(raw.get("output_layers") or ())
    for layer, reps in by_layer.items():
        fwd = [r for r in reps if r.pass_ == FORWARD]
        if not fwd or layer in outputs:
            continue
        n = fwd[0].dims["out_features"][0]
        candidates = {pad_to(n, t.channel_multiple)}
        if t.large // 2 < n < t.large:
            candidates.add(t.large)
        candidates.discard(n)
        names = {r.name for r in reps}
        best = None
        for new in sorted(candidates):
            after = _step_fit(with_features(ops, names, n, new), target, dtype)
            if best is None or after > best[1]:
                best = (new, after)
        if best and best[1] - step_fit > 0.001:
            src = fwd[0].source
            where = f" (line {src['line']})" if src else ""
            text = (f"{layer}{where}: {n} → {best[0]} filters/units: step fit "
                    f"{step_fit:.1%} → {best[1]:.1%}")
            found.append(Recommendation(text, best[1], best[1] - step_fit, src))
    found.sort(key=lambda r: -r.gain)
    return (forced + found)[:3]


_SIXTEEN = ("bf16", "f16")
_DTYPE_NAMES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}
# Data movement with nothing computed: all of its time is waste (docs/facts.md#4, #11, #19).
_PURE_MOVES = {"pad": "pad materialized in HBM", "transpose": "transpose (a copy in HBM)",
               "copy": "copy (relayout)"}


def _name_causes(why: list[str], op: HloOp, per_core: int) -> list[str]:
    """Say which padded batch is the per-core batch: the cause users can change."""
    out = []
    for w in why:
        if per_core and not op.extra.get("batch") and w.startswith(f"batch {per_core}→"):
            w += " (per-core batch)"
        out.append(w)
    return out


def _mem_rows(raw: dict[str, Any], target: str) -> list[OpReport]:
    out = []
    hbm = PEAKS[target].hbm
    for m in raw.get("mem_ops", []):
        t = m["bytes"] / hbm
        kind = m["opcode"]
        useful = 0.0 if kind in _PURE_MOVES else t
        out.append(OpReport(
            name=m["name"], op_name=m["op_name"], op_type=m["opcode"], layer=m.get("layer"),
            pass_="backward" if is_gradient(m["op_name"]) else FORWARD, kind=kind,
            shape=(m["operand_shapes"] or [m["shape"]])[0], padded_shape=m["shape"], tensor="out",
            dims={}, fit=1.0 if useful else 0.0, flops=0, padded_flops=0.0, source=m.get("source"),
            time=t, useful_time=useful,
            why=[_PURE_MOVES[kind] + f", {m['bytes'] / 1e6:.1f} MB"] if kind in _PURE_MOVES else [],
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
        rows.append(Row(layer=layer, source=worst.source, pass_=pass_, kind=kind, ops=len(members),
                        time=sum(o.time for o in members),
                        useful_time=sum(o.useful_time for o in members),
                        shape=worst.shape, padded_shape=worst.padded_shape, why=list(worst.why)))
    # Exact ties are common (a 1-channel input conv and a 1-channel output conv pad the
    # same arrays the same way): among them, rows whose cause the report can act on (the
    # per-core batch) come first.
    # (ties at three significant figures: a kernel's few bytes do not break them)
    rows.sort(key=lambda r: (-float(f"{r.wasted_time:.3g}"), -float(f"{r.time:.3g}"),
                             not any("(per-core batch)" in w for w in r.why), -r.wasted_time))
    return rows


def make_report(raw: dict[str, Any], target: str = "tpu-v5e", dtype: str = "float32") -> BuildReport:
    """Simulate the child's ops for a target and build the report."""
    ops = [HloOp.from_dict({k: v for k, v in d.items() if k not in ("layer", "source")})
           for d in raw.get("ops", [])]
    meta = {d["name"]: d for d in raw.get("ops", [])}
    sim = simulate(ops, target, dtype)
    t = TARGETS[target]
    per_core = int(raw.get("per_core_batch") or 0)
    reports: list[OpReport] = []
    peak = PEAKS[target]
    for op, s in sim.ops:
        m = meta[op.name]
        sixteen = op.dtype in _SIXTEEN
        why = _name_causes(s.why, op, per_core)
        mxu_time = s.padded_flops / (peak.flops_16 if sixteen else peak.flops_32)
        if s.tiled / peak.hbm >= mxu_time and s.tiled > s.bytes * 1.05:
            # Memory-bound, and the arrays' tile padding in HBM is what the op waits on.
            why = [*why, *s.tiled_why]
            if per_core and per_core < LARGE_BATCH and any("lanes" in w for w in s.tiled_why):
                why.append(f"per-core batch {per_core} < {LARGE_BATCH} puts features on the lanes")
        elif why and s.tiled / peak.hbm >= mxu_time:
            # The padded MXU work fits under the op's HBM time: the padding costs nothing here.
            why.append("memory-bound: the padding is hidden under HBM time")
        reports.append(OpReport(
            name=op.name, op_name=op.op_name, op_type=op.op_type, layer=m.get("layer"),
            pass_=op.pass_, kind=op.opcode, shape=s.shape, padded_shape=s.padded_shape,
            tensor=s.tensor, dims={k: list(v) for k, v in s.dims.items()}, fit=s.fit,
            flops=s.flops, padded_flops=s.padded_flops,
            share=s.flops / sim.flops if sim.flops else 0.0, source=m.get("source"),
            tensors={k: [list(a), list(b)] for k, (a, b) in s.tensors.items()},
            time=roofline(s.padded_flops, s.tiled, target, sixteen),
            useful_time=roofline(s.flops, s.bytes, target, sixteen),
            why=why,
        ))
    reports.sort(key=lambda r: (r.fit, -r.padded_flops))
    mem = _mem_rows(raw, target)
    rows = rank_rows(reports + mem)

    lay = {p: list(layout(p, sim.common_batch, t)) for p in (FORWARD, "input-gradient", KERNEL_GRAD)}
    recs = _recommend(ops, reports, raw, target, dtype, sim.step_fit)
    notes = list(raw.get("notes", []))
    counts: dict[str, int] = {}
    for op in ops:
        counts[op.dtype] = counts.get(op.dtype, 0) + 1
    measured = _DTYPE_NAMES.get(max(counts, key=lambda k: counts[k]), "") if counts else ""
    if measured and dtype == "bfloat16" and measured != "bfloat16":
        notes.append(f"--dtype bfloat16 was asked for, but the model's matmuls and convolutions are "
                     f"{measured} (graph code does not follow a Keras dtype policy): simulated as {measured}")
    notes.append("kernels are modelled with the dim that faces the MXU padded like the activation's "
                 "feature and the other dim (an op's output features) to 8 (docs/facts.md#2–3: the "
                 "compiler picks per producer/consumer)")
    notes.append("time is padded FLOPs over the MXU peak or the arrays' bytes as tiled in HBM over its "
                 "bandwidth, whichever is slower (docs/facts.md#7; the activations' lane dim is the one "
                 "docs/facts.md#1 pads to 128); useful time is the same op unpadded")
    notes.append(f"times: roofline per op from {PEAKS[target].source}")
    if raw.get("elementwise_bytes"):
        notes.append(f"elementwise ops move {raw['elementwise_bytes'] / 1e6:,.0f} MB before XLA fuses "
                     "them into their convolutions (docs/facts.md#5); not counted in the step time")
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
        networks=list(raw.get("networks") or ()), built_how=str(raw.get("built_how") or ""),
        shapes_said=list(raw.get("said") or ()),
    )


def _x(shape: list[int]) -> str:
    return "×".join(str(d) for d in shape)


def _us(seconds: float) -> str:
    us = seconds * 1e6
    return f"{us:,.0f}" if us >= 100 else f"{us:.1f}" if us >= 1 else f"{us:.2f}"


DEFAULT_ROWS = 20


TABLE_HEADERS = ["#", "layer", "source", "pass", "op", "shape → padded", "useful", "time µs",
                 "wasted µs", "why"]


def table_rows(report: BuildReport, max_rows: int | None = DEFAULT_ROWS) -> list[list[str]]:
    rows = []
    shown = report.rows if max_rows is None else report.rows[:max_rows]
    for i, r in enumerate(shown, 1):
        src = r.source
        line = f"{_short(src['file'])}:{src['line']}" if src else "-"
        what = r.kind if r.ops == 1 else f"{r.kind} ×{r.ops}"
        shape = f"{_x(r.shape)} → {_x(r.padded_shape)}" if r.kind in ("convolution", "dot") else _x(r.padded_shape)
        rows.append([str(i), r.layer, line, r.pass_, what, shape, f"{r.useful_share:.1%}",
                     _us(r.time), _us(r.wasted_time), "; ".join(r.why) or "-"])
    return rows


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    """The table as tabulate's "simple" format lays out text cells, without importing it.

    A cached report is mostly start-up: tabulate and the importlib.metadata it pulls in
    cost ~55 ms of it (more where bytecode is not cached).
    """
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h) + 2] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]

    def line(values: list[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths)).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(row) for row in cells])


def header_lines(report: BuildReport) -> list[str]:
    """What was built, how its step was traced, and where its batch and shapes came from."""
    if not report.networks:
        return []
    names = ", ".join(n["name"] for n in report.networks)
    lines = [f"built {names}: {report.built_how}"]
    lines += [f"shapes: {said}" for said in report.shapes_said]
    return lines + [""]


def render_report(report: BuildReport, fmt: str = "text", max_rows: int | None = DEFAULT_ROWS) -> str:
    if fmt == "json":
        return json.dumps(report.to_dict(), indent=2)
    if fmt != "text":
        raise ValueError(f"unknown report format {fmt!r} (text or json)")
    out = header_lines(report) + [_table(TABLE_HEADERS, table_rows(report, max_rows))]
    if max_rows is not None and len(report.rows) > max_rows:
        out.append(f"… {len(report.rows) - max_rows} more (--all shows every row)")
    b, f = report.layout[FORWARD]
    kb, kf = report.layout[KERNEL_GRAD]
    out.append("")
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
        f"batch→{b} feature→{f}; kernel-gradient batch→{kb} feature→{kf}; output features→8 in "
        f"every pass (docs/facts.md#2)"
    )
    out.append(f"HBM expansion of activations: {report.hbm_expansion:.2f}× ({report.dtype})")
    if report.recommendations:
        out.append("changes that would recover most:")
        out += [f"  {i}. {r.text}" for i, r in enumerate(report.recommendations, 1)]
    for note in report.notes:
        out.append(f"note: {note}")
    return "\n".join(out)


def _short(path: str) -> str:
    import os

    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else os.path.basename(path)
