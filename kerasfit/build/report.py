"""The build report: simulated ops tied to source lines, a summary, and what to change.

Pure Python: it turns the child's raw JSON into a :class:`BuildReport` with the
simulator, so the same cached build can be reported for any target.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kerasfit.types import TARGETS

from .hlo import FORWARD, KERNEL_GRAD, HloOp
from .simulator import LARGE_BATCH, layout, pad_to, simulate, with_batch, with_features


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

    @property
    def line(self) -> int | None:
        return self.source.get("line") if self.source else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "op_name": self.op_name, "op_type": self.op_type,
            "layer": self.layer, "pass": self.pass_, "kind": self.kind,
            "shape": self.shape, "padded_shape": self.padded_shape, "tensor": self.tensor,
            "dims": self.dims, "fit": self.fit, "flops": self.flops,
            "padded_flops": self.padded_flops, "share": self.share,
            "source": self.source, "tensors": self.tensors,
        }


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


def make_report(raw: dict[str, Any], target: str = "tpu-v5e", dtype: str = "float32") -> BuildReport:
    """Simulate the child's ops for a target and build the report."""
    ops = [HloOp.from_dict({k: v for k, v in d.items() if k not in ("layer", "source")})
           for d in raw.get("ops", [])]
    meta = {d["name"]: d for d in raw.get("ops", [])}
    sim = simulate(ops, target, dtype)
    t = TARGETS[target]
    reports: list[OpReport] = []
    for op, s in sim.ops:
        m = meta[op.name]
        reports.append(OpReport(
            name=op.name, op_name=op.op_name, op_type=op.op_type, layer=m.get("layer"),
            pass_=op.pass_, kind=op.opcode, shape=s.shape, padded_shape=s.padded_shape,
            tensor=s.tensor, dims={k: list(v) for k, v in s.dims.items()}, fit=s.fit,
            flops=s.flops, padded_flops=s.padded_flops,
            share=s.flops / sim.flops if sim.flops else 0.0, source=m.get("source"),
            tensors={k: [list(a), list(b)] for k, (a, b) in s.tensors.items()},
        ))
    reports.sort(key=lambda r: (r.fit, -r.padded_flops))

    lay = {p: list(layout(p, sim.common_batch, t)) for p in (FORWARD, "input-gradient", KERNEL_GRAD)}
    recs = _recommend(ops, reports, raw, target, dtype, sim.step_fit)
    notes = list(raw.get("notes", []))
    notes.append("kernels and results are modelled as padded like the activations they meet "
                 "(docs/facts.md#2–3: the compiler picks per producer/consumer)")
    return BuildReport(
        file=raw.get("file", ""), entry=raw.get("entry", ""), mode=raw.get("mode", ""),
        target=target, dtype=dtype, global_batch=int(raw.get("global_batch") or 0),
        cores=int(raw.get("cores") or 1), per_core_batch=int(raw.get("per_core_batch") or 0),
        common_batch=sim.common_batch, ops=reports, step_fit=sim.step_fit,
        hbm_expansion=sim.hbm_expansion, flops=sim.flops, padded_flops=sim.padded_flops,
        recommendations=recs, layout=lay, outputs=raw.get("outputs", []),
        inputs=raw.get("inputs", []), pads=raw.get("pads", []),
        input_sites=raw.get("input_sites", []), notes=notes,
        tf_version=raw.get("tf_version", ""), timings=raw.get("timings", {}),
    )


def _x(shape: list[int]) -> str:
    return "×".join(str(d) for d in shape)


def render_report(report: BuildReport, fmt: str = "text", max_rows: int | None = 40) -> str:
    if fmt == "json":
        return json.dumps(report.to_dict(), indent=2)
    if fmt != "text":
        raise ValueError(f"unknown report format {fmt!r} (text or json)")
    from tabulate import tabulate

    rows = []
    shown = report.ops if max_rows is None else report.ops[:max_rows]
    for op in shown:
        src = op.source
        line = f"{_short(src['file'])}:{src['line']}" if src else "-"
        rows.append([
            op.layer or op.op_name, line, op.pass_,
            f"{_x(op.shape)} → {_x(op.padded_shape)}", f"{op.fit:.1%}", f"{op.share:.1%}",
        ])
    out = [tabulate(rows, headers=["layer", "source", "pass", "shape → padded", "fit", "FLOPs"],
                    tablefmt="simple", disable_numparse=True)]
    if max_rows is not None and len(report.ops) > max_rows:
        out.append(f"… {len(report.ops) - max_rows} more ops (--output-format json lists all)")
    b, f = report.layout[FORWARD]
    kb, kf = report.layout[KERNEL_GRAD]
    out.append("")
    out.append(
        f"step fit {report.step_fit:.1%} (FLOP-weighted MXU fit) on {report.target}; "
        f"per-core batch {report.per_core_batch} (global {report.global_batch} / "
        f"{report.cores} core{'s' if report.cores != 1 else ''})"
    )
    out.append(
        f"layout (docs/facts.md#1, common batch {report.common_batch}): forward/input-gradient "
        f"batch→{b} feature→{f}; kernel-gradient batch→{kb} feature→{kf}"
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
