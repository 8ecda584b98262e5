"""The build's verdicts on static findings, and the findings only the built model shows.

Which findings the build can weigh, and how, each rule declares (``Rule.build_evidence``,
``build_only``, ``build_failure_pattern``); the project reads those declarations from the
rule registry and passes them in as :class:`Evidence`, so nothing here names a rule code or
reads the registry. Pure Python.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from kerasfit.core.types import TARGETS, Diagnostic, Severity

from .hlo import FORWARD, INPUT_GRAD, KERNEL_GRAD
from .messages import one_line
from .records import BuildReport, OpReport, StaticFinding, same_file, source_at
from .simulator import LARGE_BATCH

__all__ = ["Evidence", "cross_check", "cross_check_failure", "static_findings"]


@dataclass(frozen=True)
class Evidence:
    """What the rules declare the build can weigh: ``static`` code -> evidence kind
    ("feature-padding", "spatial-pad", "transpose", "per-core-batch", "build-failure");
    ``findings`` kind -> (code, name) of the build-only rules ("poor-fit",
    "tiny-per-core-batch"); ``failures`` code -> the pattern of a failed build's message
    that confirms it (KF101's ``fused``)."""

    static: dict[str, str] = field(default_factory=dict)
    findings: dict[str, tuple[str, str]] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)


# A line whose ops waste more than half the MXU (feature padding alone) is worth a
# diagnostic if it carries at least this share of the step's FLOPs.
POOR_FIT = 0.5
MIN_SHARE = 0.01


def _ops_on(report: BuildReport, filename: str, row: int, end_row: int) -> list[OpReport]:
    return [op for op in report.ops if source_at(op.source, filename, row, end_row)]


def _feature_fit(op: OpReport) -> float:
    (fi, pfi), (fo, pfo) = op.dims["in_features"], op.dims["out_features"]
    return (fi * fo) / (pfi * pfo) if pfi and pfo else 1.0


def _x(shape: Sequence[int]) -> str:
    return "×".join(str(d) for d in shape)


def _confirm_channels(ops: list[OpReport], claim: Sequence[int] = ()) -> dict[str, Any] | None:
    """KF102: is the finding's own layer's width padded, and to what the finding says?

    Only the layer's own ops are evidence: its forward pass and weight update produce the
    width, its input gradient contracts over it. The verdict cites the op that shows the
    claimed padding; when none does, the finding is corrected with what the simulator
    models for them — padded sizes are modelled from docs/facts.md, never measured.
    """
    if not ops:
        return None
    padded = [op for op in ops if _width(op)[0] != _width(op)[1]]
    # KF102's ``padded_to`` ("pad to 104 or 128"): the padding rule's two sizes over a step
    claimed = set(claim) or None
    matching = [op for op in padded if _width(op)[1] in claimed] if claimed else padded
    if matching:
        status, pool = "confirmed", matching
        if claimed is None:  # nothing specific claimed: cite the forward pass when it pads
            pool = [op for op in matching if op.pass_ == FORWARD] or matching
    elif padded:
        status, pool = "corrected", padded
    else:
        status, pool = "refuted", [op for op in ops if op.pass_ == FORWARD] or ops
    # the forward pass reads most plainly, unless another pass is what the claim is about
    op = max(pool, key=lambda o: (status == "confirmed" or o.pass_ == FORWARD, o.wasted_time, -o.fit))
    width = _width(op)
    tensor = "lhs" if op.pass_ == INPUT_GRAD else "out"
    shape, padded_shape = op.tensors.get(tensor, [op.shape, op.padded_shape])
    verdict = {"status": status, "shape": shape, "padded_shape": padded_shape, "fit": op.fit,
               "layer": op.layer, "pass": op.pass_, "out_features": list(width),
               "wasted_time": op.wasted_time}
    if status == "corrected":
        # the padding is the simulator's rule applied to the built shapes, not a measurement
        verdict["detail"] = (f"modelled on the built shapes (docs/facts.md#1–3): its {op.pass_} pass pads "
                             f"{width[0]} to {width[1]}, not {' or '.join(str(c) for c in sorted(claimed or ()))}")
    return verdict


def _width(op: OpReport) -> list[int]:
    """[real, padded] of the layer's own filter/unit count in this op: its input gradient
    contracts over it, its forward pass and weight update produce it."""
    key = "in_features" if op.pass_ == INPUT_GRAD else "out_features"
    return op.dims.get(key) or [0, 0]


def _confirm_transpose(report: BuildReport, filename: str, row: int, end_row: int) -> dict[str, Any]:
    """KF107: a transpose the finding points at is still in the traced step (not free)."""
    at_line = [m for m in report.mem_rows if m.kind == "transpose" and source_at(m.source, filename, row, end_row)]
    found = [m for m in at_line if m.wasted_time > 0]
    if at_line and not found:
        return {"status": "refuted", "detail": "its transposes only feed matrix units, which read "
                                               "either layout (docs/facts.md#4)"}
    if not found:
        return {"status": "refuted", "detail": "no transpose from this line is left in the traced "
                                               "step (XLA folded it or it is free, docs/facts.md#4)"}
    worst = max(found, key=lambda m: m.time)
    return {"status": "confirmed", "shape": worst.shape, "padded_shape": worst.padded_shape,
            "fit": None, "layer": worst.layer, "wasted_time": sum(m.time for m in found),
            "detail": f"{len(found)} transpose(s) in the step, {worst.why[0] if worst.why else ''}"}


def _confirm_pad(report: BuildReport, ops: list[OpReport], filename: str, row: int,
                 end_row: int) -> dict[str, Any] | None:
    """KF103: a zero spatial pad that feeds a convolution (docs/facts.md#19)."""
    conv_names = {op.name for op in ops}
    by_name = {op.name: op for op in report.ops}
    for pad in report.pads:
        src = pad.get("source")
        on_line = src and same_file(src["file"], filename) and row <= src["line"] <= max(row, end_row)
        if not on_line and not conv_names.intersection(pad.get("consumers", [])):
            continue
        shape, padded = pad["shape"], pad["padded_shape"]
        # Spatial only: the first and last dims (batch, channels in NHWC) unchanged.
        spatial = len(shape) > 2 and shape[0] == padded[0] and shape[-1] == padded[-1]
        consumers = [by_name[c] for c in pad.get("consumers", []) if c in by_name]
        kgrad = [c for c in consumers if c.pass_ == KERNEL_GRAD]
        ref = next(iter(kgrad or consumers), None)
        return {"status": "confirmed" if pad.get("zero") and spatial else "refuted",
                "shape": shape, "padded_shape": padded, "fit": ref.fit if ref else None,
                "layer": pad.get("layer"),
                "detail": "XLA folds a zero pad into the forward conv's window only; the "
                          "kernel-gradient conv reads the padded tensor (docs/facts.md#19)"}
    return None


def _batch_evidence(report: BuildReport) -> OpReport | None:
    batchy = [op for op in report.ops if op.dims["batch"][0] != op.dims["batch"][1]]
    return min(batchy, key=lambda o: (o.fit, -o.padded_flops)) if batchy else None


def _offsets(text: str | None, row: int, col: int, end_row: int, end_col: int) -> tuple[int, int]:
    if text is None:
        return 0, 0
    lines = text.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))

    def at(r: int, c: int) -> int:
        r = min(max(r, 1), len(lines)) if lines else 1
        return starts[r - 1] + min(c, len(lines[r - 1].rstrip("\r\n")) if lines else 0)

    return at(row, col), at(end_row, end_col)


def _new_diag(code: tuple[str, str], message: str, filename: str, source: dict[str, Any] | None,
              text: str | None, finding: str, fields: dict[str, Any]) -> Diagnostic:
    row = source["line"] if source else 1
    end_row = source.get("end_line", row) if source else 1
    col = source.get("column", 0) if source else 0
    end_col = source.get("end_column", 0) if source else 0
    if text is not None and end_row == row and end_col <= col:
        lines = text.splitlines()
        end_col = len(lines[row - 1]) if 0 < row <= len(lines) else col
    start, end = _offsets(text, row, col, end_row, end_col)
    return Diagnostic(code=code[0], name=code[1], message=message, severity=Severity.WARNING,
                      filename=filename, row=row, column=col, end_row=end_row,
                      end_column=end_col, fix=None, start=start, end=end, finding=finding, fields=fields)


def _confirm_failure(code: str, report: BuildReport, evidence: Evidence) -> dict[str, Any] | None:
    """KF101: Keras 3 rejecting the argument confirms it, whatever the tf-keras retry did;
    a model Keras 3 built with it refutes it; a tf-keras build alone says nothing."""
    pattern = evidence.failures.get(code)
    if report.keras3_error:
        if pattern and re.search(pattern, report.keras3_error):
            return {"status": "confirmed", "detail": f"Keras 3 refuses it: {one_line(report.keras3_error, 200)}"}
        return None
    if report.mode == "keras":
        return {"status": "refuted", "detail": "the model built under Keras 3"}
    return None


def static_findings(diagnostics: list[Diagnostic], evidence: Evidence) -> list[StaticFinding]:
    """The findings whose rule the build can weigh, for the report's recommendations."""
    return [StaticFinding(d.code, evidence.static[d.code], d.filename, d.row, d.end_row,
                          d.fix.title if d.fix is not None else d.message)
            for d in diagnostics if d.code in evidence.static and d.severity != Severity.INFO]


def cross_check_failure(diagnostics: list[Diagnostic], error: str, evidence: Evidence) -> list[Diagnostic]:
    """A failed build is evidence too: KF101's ``fused=`` is what Keras 3 raises on."""
    for d in diagnostics:
        pattern = evidence.failures.get(d.code)
        if pattern and evidence.static.get(d.code) == "build-failure" and re.search(pattern, error):
            d.build = {"status": "confirmed", "detail": f"the build fails on it: {one_line(error, 200)}"}
    return diagnostics


def cross_check(diagnostics: list[Diagnostic], report: BuildReport, filename: str,
                evidence: Evidence) -> list[Diagnostic]:
    """Confirm or refute static findings with the build, and add what only it can see.

    A build that passed over a failing statement, or that rests on an assumption (a step
    it could not trace as the script runs it, a layer sized by data it did not load), is
    the basis of no verdict and no finding of its own."""
    try:
        text = Path(filename).read_text(encoding="utf-8")
    except OSError:
        text = None
    if not report.complete or report.assumptions:
        return list(diagnostics)
    out = list(diagnostics)
    claimed = _judge(out, report, filename, evidence)
    out += _poor_fit(diagnostics, report, filename, evidence, claimed, text)
    out += _tiny_batch(diagnostics, report, filename, evidence, text)
    return out


def _tiny(report: BuildReport) -> bool:
    is_tpu = TARGETS.get(report.target) is not None and TARGETS[report.target].family == "tpu"
    return is_tpu and 0 < report.per_core_batch < LARGE_BATCH


def _judge(diagnostics: list[Diagnostic], report: BuildReport, filename: str, evidence: Evidence) -> set[int]:
    """Give each static finding the build can weigh its verdict; the lines whose ops a
    verdict speaks for."""
    claimed: set[int] = set()
    batch = _batch_evidence(report)
    for d in diagnostics:
        if not same_file(d.filename, filename):
            continue
        kind = evidence.static.get(d.code)
        ops = _ops_on(report, filename, d.row, d.end_row)
        if kind == "feature-padding" and ops:
            d.build = _confirm_channels(ops, d.fields.get("padded_to", ()))
        elif kind == "spatial-pad":
            d.build = _confirm_pad(report, ops, filename, d.row, d.end_row)
        elif kind == "transpose":
            d.build = _confirm_transpose(report, filename, d.row, d.end_row)
        elif kind == "per-core-batch":
            d.build = {"status": "confirmed" if _tiny(report) else "refuted",
                       "shape": batch.shape if batch else [report.per_core_batch],
                       "padded_shape": batch.padded_shape if batch else [report.per_core_batch],
                       "fit": batch.fit if batch else None, "per_core_batch": report.per_core_batch}
        elif kind == "build-failure":
            d.build = _confirm_failure(d.code, report, evidence)
        if d.build is not None:
            claimed.update(range(d.row, max(d.row, d.end_row) + 1))
            # The static finding already speaks for these ops: no second finding on them.
            claimed.update(op.source["line"] for op in ops if op.source)
    return claimed


def _poor_fit(diagnostics: list[Diagnostic], report: BuildReport, filename: str, evidence: Evidence,
              claimed: set[int], text: str | None) -> list[Diagnostic]:
    """KF301: lines whose ops are badly padded in their features, no static finding there."""
    code = evidence.findings.get("poor-fit")
    if code is None:
        return []
    by_line: dict[int, list[OpReport]] = {}
    for op in report.ops:
        if op.source and same_file(op.source["file"], filename):
            by_line.setdefault(op.source["line"], []).append(op)
    static_rows = {r for d in diagnostics if same_file(d.filename, filename)
                   for r in range(d.row, max(d.row, d.end_row) + 1)}
    outputs = set(report.output_layers)
    out = []
    for line, ops in sorted(by_line.items()):
        if line in static_rows or line in claimed:
            continue
        # An output layer's width is the task's (classes, channels): the static rule
        # reports it as info, so the build does not warn about the same op.
        ops = [op for op in ops if op.layer not in outputs]
        if not ops:
            continue
        share = sum(op.share for op in ops)
        flops = sum(op.flops for op in ops) or 1
        ffit = sum(_feature_fit(op) * op.flops for op in ops) / flops
        if ffit >= POOR_FIT or share < MIN_SHARE:
            continue
        worst = min(ops, key=_feature_fit)
        # the share named is the op's own: the line's ops together (every pass, every layer a
        # loop on this line builds) may be most of the step while this op is a sliver of it
        fields = {"layer": worst.layer or worst.op_name, "pass": worst.pass_, "shape": tuple(worst.shape),
                  "padded_to": tuple(worst.padded_shape), "target": report.target, "fit": worst.fit,
                  "share": worst.share}
        msg = (f"{fields['layer']} ({worst.pass_}) pads {_x(worst.shape)} to "
               f"{_x(worst.padded_shape)} on {report.target}: {worst.fit:.1%} MXU fit, "
               f"{worst.share:.1%} of step FLOPs")
        out.append(_new_diag(code, msg, filename, worst.source, text, "PoorFit", fields))
    return out


def _tiny_batch(diagnostics: list[Diagnostic], report: BuildReport, filename: str, evidence: Evidence,
                text: str | None) -> list[Diagnostic]:
    """KF302: a per-core batch under 64 flips the layout (docs/facts.md#1, #24)."""
    code = evidence.findings.get("tiny-per-core-batch")
    has_static = any(evidence.static.get(d.code) == "per-core-batch" and same_file(d.filename, filename)
                     for d in diagnostics)
    if not _tiny(report) or has_static or code is None:
        return []
    batch = _batch_evidence(report)
    # The line where the batch enters (placeholder / keras.Input), else the evidence op.
    candidates = list(report.input_sites) + ([batch.source] if batch and batch.source else [])
    src = next((s for s in candidates if same_file(s["file"], filename)), None)
    what = (f"; {batch.layer or batch.op_name} ({batch.pass_}) pads {_x(batch.shape)} to "
            f"{_x(batch.padded_shape)} ({batch.fit:.1%} fit)" if batch else "")
    fields = {"per_core_batch": report.per_core_batch, "global_batch": report.global_batch,
              "cores": report.cores, "under": LARGE_BATCH, "use": TARGETS[report.target].large}
    msg = (f"per-core batch {report.per_core_batch} (global {report.global_batch} / "
           f"{report.cores} cores) is under {LARGE_BATCH}{what}; use a per-core batch "
           f"of {TARGETS[report.target].large} or more")
    return [_new_diag(code, msg, filename, src, text, "TinyPerCoreBatch", fields)]
