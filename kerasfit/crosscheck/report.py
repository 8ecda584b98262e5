"""The build report: simulated ops tied to source lines, a summary, and what to change.

Pure Python: it turns the child's raw JSON into a :class:`BuildReport` with the
simulator, so the same cached build can be reported for any target. The records are in
:mod:`kerasfit.crosscheck.records`, the recommendations in :mod:`kerasfit.crosscheck.advice`,
the HBM need in :mod:`kerasfit.crosscheck.memory`.
"""

from __future__ import annotations

import json
import os
from typing import Any

from kerasfit.core import gpumodel
from kerasfit.core.types import DEFAULT_TARGET, KERNEL_BOUND, TARGETS, Target, printable

from .advice import recommend
from .hlo import FORWARD, KERNEL_GRAD, HloOp, is_gradient
from .memory import hbm_need
from .records import TOP_ROWS, BuildReport, OpReport, Row, StaticFinding, shape_text, us
from .simulator import LARGE_BATCH, OpSim, layout, simulate


_DTYPE_NAMES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}
# Data movement with nothing computed: all of its time is waste (docs/facts.md#4, #11, #19).
_PURE_MOVES = {"pad": "pad materialized in HBM", "transpose": "transpose (a copy in HBM)",
               "copy": "copy (relayout)"}
# Elementwise work XLA fuses into loops: HBM-bound, all of it needed.
_SLICED = ("dynamic-slice", "dynamic-update-slice")
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

    A transpose or copy the accelerator never materialises (``free``, docs/facts.md#4, #26)
    gets no row, nor on a GPU a zero pad its convolution takes as its own padding
    (``folds``, docs/facts.md#27); a while body's op counts its trips. On a GPU the
    max-pool gradient's select-and-scatter takes the measured multiple of its bytes' time,
    the rest of it waste (docs/facts.md#27).
    """
    out = []
    chip = TARGETS[target]
    gpu = chip.family == "gpu"
    bandwidth = gpumodel.achieved_bandwidth(chip)
    for m in raw.get("mem_ops", []):
        if m.get("free") or (gpu and m.get("folds")):
            continue
        trips = int(m.get("trips") or 1)
        t = m["bytes"] * trips / bandwidth
        kind = m.get("kind") or m["opcode"]
        useful = 0.0 if kind in _PURE_MOVES else t
        why = []
        shown = m["shape"]
        if kind in _SLICED and m["operand_shapes"]:
            # a slice of a stacked buffer, in place: what it moves is the slice
            if kind == "dynamic-update-slice" and len(m["operand_shapes"]) > 1:
                shown = m["operand_shapes"][1]
            why = [f"one {shape_text(shown)} slice of a {shape_text(m['operand_shapes'][0])} buffer per run, in place"]
        elif kind in _PURE_MOVES:
            why = [_PURE_MOVES[kind] + f", {m['bytes'] * trips / 1e6:.1f} MB of HBM traffic"]
        elif gpu and m["opcode"] == "select-and-scatter":
            t *= gpumodel.CALIBRATION.scatter
            why = [f"max-pool gradient (select-and-scatter): ≈{gpumodel.CALIBRATION.scatter:g}× its bytes' "
                   "time on a GPU (docs/facts.md#27)"]
        elif kind in _FUSIONS:
            why = [_FUSIONS[kind]]
        if trips > 1:
            why.append(f"×{trips} (while loop)")
        out.append(OpReport(
            name=m["name"], op_name=m["op_name"], op_type=m["opcode"], layer=m.get("layer"),
            pass_="backward" if is_gradient(m["op_name"]) else FORWARD, kind=kind,
            shape=(m["operand_shapes"] or [m["shape"]])[0], padded_shape=shown, tensor="out",
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


# How a GPU target times an op (kerasfit.core.gpumodel), said once in the notes.
_GPU_TIME = ("time is kerasfit's GPU cost model (docs/facts.md#18, #27; calibrated on its own H200 "
             "measurements): the work as the kernels compute it — channels padded to the tensor cores' "
             "multiple and tiled 16/32/64-wide, in waves over the streaming multiprocessors — over 80% of "
             "the peak, or the bytes over 70% of HBM bandwidth, whichever is slower; plus XLA's pad-and-slice "
             "passes for channels off the tensor cores' multiple, a slower kernel for channels off 32 bytes, "
             "a fixed cost per convolution and the max-pool gradient's scatter; useful time is the same op "
             "unpadded at the same rates")


def _op_why(op: HloOp, s: OpSim, per_core: int) -> list[str]:
    """What a simulated op's row says about its time: the padded dims (the per-core batch
    named), its arrays' tiling in HBM when that is what it waits on, a GPU's other causes,
    a while loop's trips."""
    why = _name_causes(s.why, op, per_core)
    if s.bound == "HBM" and s.tiled > s.bytes * 1.05:
        # Memory-bound, and the arrays' tile padding in HBM is what the op waits on.
        why += s.tiled_why
        if (per_core and per_core < LARGE_BATCH and not op.extra.get("batch")
                and any("lanes" in w for w in s.tiled_why)):
            why.append(f"per-core batch {per_core} < {LARGE_BATCH} puts features on the lanes")
    elif why and s.bound == "HBM" and not s.causes:
        # The padded MXU work fits under the op's HBM time: the padding costs nothing here.
        why.append("memory-bound: the padding is hidden under HBM time")
    why += s.causes
    if s.trips > 1:
        why.append(f"×{s.trips} (while loop)")
    return why


def _op_report(op: HloOp, s: OpSim, meta: dict[str, Any], per_core: int, step_flops: int) -> OpReport:
    return OpReport(
        name=op.name, op_name=op.op_name, op_type=op.op_type, layer=meta.get("layer"),
        pass_=op.pass_, kind=op.opcode, shape=s.shape, padded_shape=s.padded_shape,
        tensor=s.tensor, dims={k: list(v) for k, v in s.dims.items()}, fit=s.fit,
        flops=s.flops, padded_flops=s.padded_flops,
        share=s.flops / step_flops if step_flops else 0.0, source=meta.get("source"),
        tensors={k: [list(a), list(b)] for k, (a, b) in s.tensors.items()},
        time=s.time, useful_time=s.useful_time, why=_op_why(op, s, per_core), bound=s.bound, unit=s.unit,
    )


def _notes(raw: dict[str, Any], t: Target, dtype: str, measured: str) -> list[str]:
    """The child's notes, then how the report was computed."""
    notes = list(raw.get("notes", []))
    if measured and dtype == "bfloat16" and measured != "bfloat16":
        notes.append(f"--dtype bfloat16 was asked for, but the model's matmuls and convolutions are "
                     f"{measured} (graph code does not follow a Keras dtype policy): simulated as {measured}")
    notes += [_GPU_TIME if t.family == "gpu" else KERNEL_BOUND, *set_aside(raw, t)]
    if t.family != "gpu":
        notes.append("time is padded FLOPs over the MXU peak or the arrays' bytes as tiled in HBM over its "
                     "bandwidth, whichever is slower (docs/facts.md#7; the activations' lane dim is the one "
                     "docs/facts.md#1 pads to 128); useful time is the same op unpadded")
    notes.append(f"peaks: {t.peaks_source}")
    notes.append("elementwise, normalization and softmax ops are timed as XLA's loop fusions: the "
                 "bytes that cross a fusion's edge over HBM bandwidth (docs/facts.md#5, #15)")
    return notes


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
    reports = [_op_report(op, s, meta[op.name], per_core, sim.flops) for op, s in sim.ops]
    reports.sort(key=lambda r: (r.fit, -r.padded_flops))
    mem = _mem_rows(raw, target)
    rows = rank_rows(reports + mem)

    lay = {p: list(layout(p, sim.common_batch, t)) for p in (FORWARD, "input-gradient", KERNEL_GRAD)}
    recs = recommend(ops, reports, mem, rows, raw, target, dtype, sim, findings or [])
    counts: dict[str, int] = {}
    for op in ops:
        counts[op.dtype] = counts.get(op.dtype, 0) + 1
    measured = _DTYPE_NAMES.get(max(counts, key=lambda k: counts[k]), "") if counts else ""
    notes = _notes(raw, t, dtype, measured)
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
        hbm=hbm_need(raw, ops, target),
        keras3_error=str(raw.get("keras3_error") or ""), complete=_complete(raw),
        blocks=dict(raw.get("blocks") or {}),
        networks=list(raw.get("networks") or ()), built_how=str(raw.get("built_how") or ""),
        shapes_said=list(raw.get("said") or ()),
    )


def set_aside(raw: dict[str, Any], chip: Target) -> list[str]:
    """The data moves the table does not rank, by why: transposes and copies the
    accelerator never materialises (docs/facts.md#4, #26) and, on a GPU, the zero pads its
    convolutions take as their own padding (docs/facts.md#27); each with its layers."""
    why: dict[str, list[dict[str, Any]]] = {}
    for m in raw.get("mem_ops", []):
        reason = m.get("free") or ("the convolution's own padding on a GPU, in every pass (docs/facts.md#27)"
                                   if chip.family == "gpu" and m.get("folds") else "")
        if reason:
            why.setdefault(reason, []).append(m)
    out = []
    for reason, found in why.items():
        kinds = sorted({m["opcode"] for m in found})
        layers = sorted({m.get("layer") or "" for m in found} - {""})
        where = f" (in {', '.join(layers[:4])}{', …' if len(layers) > 4 else ''})" if layers else ""
        out.append(f"set aside, not ranked: {len(found)} {'/'.join(kinds)} op(s){where}: {reason}")
    return out


def _complete(raw: dict[str, Any]) -> bool:
    """Did every statement on the way to the model run? (The child says so; older builds
    noted the statements they passed over.)"""
    if "complete" in raw:
        return bool(raw["complete"])
    return not any(str(n).startswith("script statements that failed") for n in raw.get("notes", []))


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
        shape = f"{shape_text(r.shape)} → {shape_text(r.padded_shape)}" if r.kind in ("convolution", "dot") else shape_text(r.padded_shape)
        fit = "-" if r.fit is None else f"{r.fit:.1%}"
        rows.append([str(i), r.layer, line, r.pass_, what, shape, fit, r.bound,
                     us(r.time), us(r.wasted_time), "; ".join(r.why) or "-"])
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
        out.append(f"where the top {TOP_ROWS} rows come from (no change above removes them):")
        out += [f"  - {r.text}" for r in origins]
    return out


def header_lines(report: BuildReport) -> list[str]:
    """What was built, how its step was traced, and where its batch and shapes came from."""
    if not report.networks:
        return []
    names = ", ".join(n["name"] for n in report.networks)
    lines = [f"built {names}: {report.built_how}"]
    lines += [f"shapes: {said}" for said in report.shapes_said]
    return lines + [""]


def _layout_line(report: BuildReport, gpu: bool) -> str:
    if gpu:
        return ("layout: channels pad to the tensor cores' multiple (8 in 16-bit, 4 in TF32; docs/facts.md#18) "
                "and compute in whole kernel tiles; the batch never pads (docs/facts.md#27)")
    b, f = report.layout[FORWARD]
    kb, kf = report.layout[KERNEL_GRAD]
    return (f"layout (docs/facts.md#1, common batch {report.common_batch}): forward/input-gradient "
            f"batch→{b} feature→{f}; kernel-gradient batch→{kb} feature→{kf}; kernel dims pad like "
            f"the pass's features (docs/facts.md#2–3, the upper bound)")


def render_report(report: BuildReport, fmt: str = "text", max_rows: int | None = DEFAULT_ROWS) -> str:
    if fmt == "json":
        return json.dumps(report.to_dict(), indent=2)
    if fmt != "text":
        raise ValueError(f"unknown report format {fmt!r} (text or json)")
    out = [printable(line) for line in header_lines(report)] + [_table(TABLE_HEADERS, table_rows(report, max_rows))]
    if max_rows is not None and len(report.rows) > max_rows:
        out.append(f"… {len(report.rows) - max_rows} more (--all shows every row)")
    gpu = TARGETS[report.target].family == "gpu"
    out.append("")
    wasted = report.step_time - report.useful_time
    share = wasted / report.step_time if report.step_time else 0.0
    out.append(
        f"step ≈ {us(report.step_time)} µs on {report.target} ({'GPU cost model' if gpu else 'roofline'}), {us(wasted)} µs "
        f"({share:.0%}) wasted; per-core batch {report.per_core_batch} (global "
        f"{report.global_batch} / {report.cores} core{'s' if report.cores != 1 else ''})"
    )
    out.append(f"step fit {report.step_fit:.1%} (FLOP-weighted MXU fit of convolutions and matmuls)")
    out.append(_layout_line(report, gpu))
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
