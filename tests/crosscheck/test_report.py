"""Report, rendering and cross-check on a captured build (no TensorFlow)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from kerasfit.crosscheck import verdicts
from kerasfit.crosscheck.api import BuildError, BuildOptions, render_report, run_child
from kerasfit.project.buildstage import evidence

from kerasfit.crosscheck.hlo import KERNEL_GRAD, HloOp, classify_pass, memory_ops, parse_hlo, strip_scopes
from kerasfit.crosscheck.advice import NEGLIGIBLE, _reshaped_heads, _score_sized, _WhatIf
from kerasfit.crosscheck.records import TOP_ROWS, StaticFinding
from kerasfit.crosscheck.report import make_report
from kerasfit.core.types import TARGETS, Diagnostic, Severity, target_help

ROOT = Path(__file__).resolve().parents[2]
CNN = ROOT / "fixtures" / "crosscheck" / "keras_cnn.py"
HLO = ROOT / "fixtures" / "crosscheck" / "hlo" / "keras_cnn_b16.hlo"
# TF name scope of each layer in the captured step -> (layer, line in keras_cnn.py)
SCOPES = {"conv2d_1": ("conv2d", 9), "conv2d_1_2": ("conv2d_1", 11), "dense_1": ("dense", 13),
          "dense_1_2": ("dense_1", 14)}


def raw_build(path: Path, per_core: int = 16, cores: int = 1) -> dict:
    """The child's JSON for keras_cnn.py at batch 16, rebuilt from the captured HLO."""
    ops, _ = parse_hlo(HLO.read_text())
    variables = [[3, 3, 3, 30], [30], [3, 3, 30, 64], [64], [64, 100], [100], [100, 10], [10]]
    out = []
    for op in ops:
        op.pass_ = classify_pass(op, variables)
        scope = strip_scopes(op.op_name).split("/")[1]
        layer, line = SCOPES[scope]
        d = op.to_dict()
        d["layer"] = layer
        d["source"] = {"file": str(path), "line": line, "end_line": line, "column": 8, "end_column": 20}
        out.append(d)
    mem = []
    for m in memory_ops(HLO.read_text()):
        d = m.to_dict()
        d["layer"], d["source"] = None, None
        mem.append(d)
    return {"ok": True, "file": str(path), "entry": "build_model()", "mode": "keras", "ops": out,
            "mem_ops": mem, "pads": [], "global_batch": per_core * cores, "cores": cores, "per_core_batch": per_core,
            "outputs": [[per_core, 10]], "notes": [], "variables": variables}


def cross_check(diagnostics, report, filename):
    """The cross-check with the evidence the registered rules declare (as the project passes it)."""
    return verdicts.cross_check(diagnostics, report, filename, evidence())


@pytest.fixture()
def model_file(tmp_path) -> Path:
    path = tmp_path / "keras_cnn.py"
    path.write_text(CNN.read_text())
    return path


def diag(code: str, name: str, path: Path, row: int) -> Diagnostic:
    return Diagnostic(code=code, name=name, message="static", severity=Severity.WARNING,
                      filename=str(path), row=row, column=4, end_row=row, end_column=30)


def test_report_is_worst_first_with_flop_shares(model_file):
    report = make_report(raw_build(model_file))
    fits = [op.fit for op in report.ops]
    assert fits == sorted(fits)
    assert sum(op.share for op in report.ops) == pytest.approx(1.0)
    assert report.per_core_batch == 16 and report.common_batch == 16
    assert report.layout["forward"] == [8, 128] and report.layout["kernel-gradient"] == [128, 8]


def test_render_text_and_json(model_file):
    report = make_report(raw_build(model_file, per_core=16, cores=8))
    text = render_report(report)
    header = text.splitlines()[0]
    for column in ("layer", "source", "pass", "shape → padded", "fit", "bound", "time µs", "wasted µs", "why"):
        assert column in header
    assert "step fit" in text and "HBM expansion" in text and "wasted; per-core batch 16" in text
    assert "1. per-core batch 16 → 128 (global 128 → 1024 on 8 cores" in text
    data = json.loads(render_report(report, "json"))
    assert data["ops"][0]["source"]["line"] in {9, 11, 13, 14}
    assert [r["text"] for r in data["recommendations"]] == [r.text for r in report.recommendations]
    with pytest.raises(ValueError):
        render_report(report, "xml")


def test_render_caps_rows(model_file):
    report = make_report(raw_build(model_file))
    text = render_report(report, max_rows=2)
    assert f"… {len(report.rows) - 2} more (--all shows every row)" in text
    assert len(render_report(report, max_rows=None).splitlines()) == len(text.splitlines()) + len(report.rows) - 3


def test_kf102_confirmed_with_padded_shape_and_refuted_when_aligned(model_file):
    report = make_report(raw_build(model_file))
    diags = [diag("KF102", "channel-multiple", model_file, 9), diag("KF102", "channel-multiple", model_file, 11)]
    conv30, conv64 = cross_check(diags, report, str(model_file))[:2]
    assert conv30.build["status"] == "confirmed"
    # Batch 16: the forward pass pads features to 128, the 30 filters (the kernel's out
    # dim, docs/facts.md#1–3 and the padding rule's bound of #2) included.
    assert conv30.build["shape"] == [16, 32, 32, 30] and conv30.build["padded_shape"] == [16, 32, 32, 128]
    static = diag("KF102", "channel-multiple", model_file, 9)
    static.finding, static.fields = "OffMultiple", {"width": 30, "padded_to": (32, 128)}
    (claim128,) = [d for d in cross_check([static], report, str(model_file)) if d.code == "KF102"]
    assert claim128.build["status"] == "confirmed" and claim128.build["pass"] == "forward"
    assert (claim128.build["shape"], claim128.build["padded_shape"]) == ([16, 32, 32, 30], [16, 32, 32, 128])
    assert claim128.build["layer"] == "conv2d"
    assert 0 < conv30.build["fit"] < 1
    # Conv2D(64) also pads to 128 at this batch: the finding is confirmed by the build.
    assert conv64.build["status"] == "confirmed"
    report_big = make_report(raw_build(model_file, per_core=16), target="gpu")
    (aligned,) = [d for d in cross_check([diag("KF102", "channel-multiple", model_file, 11)], report_big,
                                         str(model_file)) if d.code == "KF102"]
    assert aligned.build["status"] == "refuted"


def test_kf203_and_kf302_follow_the_per_core_batch(model_file):
    report = make_report(raw_build(model_file, per_core=16, cores=8))
    batch = diag("KF203", "tiny-batch", model_file, 3)
    out = cross_check([batch], report, str(model_file))
    assert out[0].build["status"] == "confirmed" and out[0].build["per_core_batch"] == 16
    # A static tiny-batch finding exists, so no KF302 on top of it.
    assert not [d for d in out if d.code == "KF302"]
    without = cross_check([], report, str(model_file))
    (kf302,) = [d for d in without if d.code == "KF302"]
    assert kf302.finding == "TinyPerCoreBatch"
    assert (kf302.fields["per_core_batch"], kf302.fields["global_batch"], kf302.fields["cores"]) == (16, 128, 8)


def test_kf301_only_where_no_static_finding(model_file):
    report = make_report(raw_build(model_file, per_core=16))
    plain = cross_check([], report, str(model_file))
    kf301_rows = {d.row for d in plain if d.code == "KF301"}
    assert 9 in kf301_rows  # Conv2D(30) at batch 16: features pad to 128
    with_static = cross_check([diag("KF102", "channel-multiple", model_file, 9)], report, str(model_file))
    assert 9 not in {d.row for d in with_static if d.code == "KF301"}
    new = [d for d in plain if d.code in ("KF301", "KF302")]
    text = model_file.read_text()
    for d in new:
        assert d.severity is Severity.WARNING and d.fix is None and d.build is None
        # Offsets agree with rows/columns.
        line_start = sum(len(ln) for ln in text.splitlines(keepends=True)[: d.row - 1])
        assert d.start == line_start + d.column and d.end > d.start


def test_diagnostics_of_other_files_are_left_alone(model_file, tmp_path):
    report = make_report(raw_build(model_file))
    other = diag("KF102", "channel-multiple", tmp_path / "other.py", 9)
    out = cross_check([other], report, str(model_file))
    assert out[0].build is None


def test_run_child_rejects_bad_input_without_starting(tmp_path):
    with pytest.raises(BuildError) as info:
        run_child(tmp_path / "missing.py", BuildOptions())
    assert "missing.py" in str(info.value) and "\n" not in str(info.value)
    path = tmp_path / "m.py"
    path.write_text("x = 1\n")
    with pytest.raises(BuildError, match="unknown target"):
        run_child(path, BuildOptions(target="tpu-v9"))


def test_rows_are_ranked_by_wasted_time_and_name_their_cause(model_file):
    report = make_report(raw_build(model_file, per_core=16, cores=8))
    wasted = [float(f"{r.wasted_time:.3g}") for r in report.rows]  # ties at 3 figures keep a cause order
    assert wasted == sorted(wasted, reverse=True) and wasted[0] > 0
    assert report.step_time == pytest.approx(sum(r.time for r in report.rows))
    assert all(0 <= r.useful_time <= r.time + 1e-15 for r in report.rows)
    # One row per layer, line, pass and kind: conv2d's weight update is one row.
    kgrad = [r for r in report.rows if r.layer == "conv2d" and r.pass_ == "kernel-gradient"]
    assert len(kgrad) == 1
    # Hand-computed: batch 16 pads to 128 in the weight update at a small common batch,
    # 3 input channels and 30 filters pad to 8's.
    # The arrays it reads keep their channels on the 128 lanes in HBM (3 and 30 of 128).
    assert kgrad[0].why[:3] == ["batch 16→128 (per-core batch)", "in-channels 3→8", "out-channels 30→32"]
    assert any(w.startswith("in HBM: channels 3→128") for w in kgrad[0].why)
    # Data movement is in the table too, in bytes over HBM bandwidth.
    moves = [r for r in report.rows if r.kind not in ("convolution", "dot")]
    assert moves and all(r.time > 0 for r in moves)


def test_a_new_chip_is_one_record(model_file, monkeypatch):
    # Half of v5e's peaks and bandwidth, nothing else: the report and --target's help
    # take the chip from its record alone (no second table to forget).
    v5e = TARGETS["tpu-v5e"]
    chip = dataclasses.replace(v5e, name="tpu-half", flops_16=v5e.flops_16 / 2, flops_32=v5e.flops_32 / 2,
                               hbm_bandwidth=v5e.hbm_bandwidth / 2, peaks_source="a test chip at half of v5e")
    monkeypatch.setitem(TARGETS, chip.name, chip)
    base = make_report(raw_build(model_file), target="tpu-v5e")
    half = make_report(raw_build(model_file), target="tpu-half")
    assert half.step_time == pytest.approx(2 * base.step_time)
    assert "peaks: a test chip at half of v5e" in half.notes
    assert "tpu-half" in target_help()


def test_time_is_a_roofline_of_the_padded_op(model_file):
    report = make_report(raw_build(model_file), target="tpu-v5e")
    for op in report.ops:
        assert op.time >= op.padded_flops / TARGETS["tpu-v5e"].flops_32 * (1 - 1e-9)
        assert op.time >= op.useful_time
    assert "819 GB/s" in render_report(report)


def test_kf102_is_corrected_when_no_op_pads_to_the_claimed_size(model_file):
    report = make_report(raw_build(model_file))  # per-core batch 16: features pad to 128
    d = diag("KF102", "channel-multiple", model_file, 13)  # Dense(100)
    d.finding, d.fields = "OffMultiple", {"width": 100, "padded_to": (112,)}
    (out,) = [x for x in cross_check([d], report, str(model_file)) if x.code == "KF102"]
    assert out.build["status"] == "corrected"
    assert out.build["detail"].endswith("not 112")
    # Each claim is judged by an op that shows it: 128 in the forward pass and the input
    # gradient (features pad to 128 at batch 16), 104 in the weight update (to 8) —
    # never a 104 "confirming" a 128.
    for claim, passes in ((128, ("forward", "input-gradient")), (104, ("kernel-gradient",))):
        d.fields, d.build = {"width": 100, "padded_to": (claim,)}, None
        (out,) = [x for x in cross_check([d], report, str(model_file)) if x.code == "KF102"]
        assert out.build["status"] == "confirmed"
        assert out.build["out_features"] == [100, claim] and out.build["pass"] in passes
    # KF102's own finding names both sizes: either confirms it
    d.fields, d.build = {"width": 100, "padded_to": (104, 128)}, None
    (out,) = [x for x in cross_check([d], report, str(model_file)) if x.code == "KF102"]
    assert out.build["status"] == "confirmed"
    # a correction is the model applied to the built shapes, never called "measured"
    d.fields, d.build = {"width": 100, "padded_to": (112,)}, None
    (out,) = [x for x in cross_check([d], report, str(model_file)) if x.code == "KF102"]
    assert "measured" not in out.build["detail"] and out.build["detail"].startswith("modelled")


def test_output_layer_gets_no_build_warning_the_static_rule_calls_info(model_file):
    raw = raw_build(model_file)
    with_head = make_report(dict(raw, output_layers=["conv2d"]))  # as if conv2d were the head
    rows = {d.row for d in cross_check([], with_head, str(model_file)) if d.code == "KF301"}
    without = {d.row for d in cross_check([], make_report(raw), str(model_file)) if d.code == "KF301"}
    assert 9 in without and 9 not in rows


def test_a_width_passed_through_a_helper_is_judged_at_the_call_site(model_file):
    raw = raw_build(model_file)
    for op in raw["ops"]:
        if op["layer"] == "conv2d":
            op["source"]["callers"] = [20]  # conv2d was made by a helper called on line 20
    report = make_report(raw)
    (out,) = [x for x in cross_check([diag("KF102", "channel-multiple", model_file, 20)], report,
                                     str(model_file)) if x.code == "KF102"]
    assert out.build["status"] == "confirmed" and out.build["layer"] == "conv2d"


def test_kf107_transpose_left_in_the_step_is_confirmed_else_refuted(model_file):
    raw = raw_build(model_file)
    src = {"file": str(model_file), "line": 9, "end_line": 9, "column": 0, "end_column": 0}
    raw["mem_ops"] = raw["mem_ops"] + [{"name": "t", "opcode": "transpose", "op_name": "conv/transpose",
                                        "dtype": "f32", "shape": [16, 3, 32, 32],
                                        "operand_shapes": [[16, 32, 32, 3]], "bytes": 393216,
                                        "layer": "conv2d", "source": src}]
    report = make_report(raw)
    (hit,) = [x for x in cross_check([diag("KF107", "nonlogical-transpose", model_file, 9)], report,
                                     str(model_file)) if x.code == "KF107"]
    assert hit.build["status"] == "confirmed" and hit.build["wasted_time"] > 0
    (miss,) = [x for x in cross_check([diag("KF107", "nonlogical-transpose", model_file, 11)], report,
                                      str(model_file)) if x.code == "KF107"]
    assert miss.build["status"] == "refuted"
    # The transpose is a row of its own, all of it waste.
    row = next(r for r in report.rows if r.kind == "transpose")
    assert row.useful_time == 0 and row.wasted_time > 0


def test_a_build_failing_on_fused_confirms_kf101(model_file):
    d = diag("KF101", "unfused-batchnorm", model_file, 9)
    other = diag("KF102", "channel-multiple", model_file, 11)
    verdicts.cross_check_failure([d, other], "calling build_model() failed (line 9): ValueError: Unrecognized "
                                             "keyword arguments passed to BatchNormalization: {'fused': False}",
                                 evidence())
    assert d.build["status"] == "confirmed" and other.build is None


def _raw_of(ops, per_core: int) -> dict:
    out = []
    for op in ops:
        d = op.to_dict()
        d["layer"], d["source"] = op.op_name, None
        out.append(d)
    return {"ops": out, "mem_ops": [], "per_core_batch": per_core, "global_batch": per_core * 8, "cores": 8}


def test_roofline_counts_the_mxu_padding_and_the_hbm_tiles():
    """Hand-computed on tpu-v5e (197 TFLOP/s, 819 GB/s), U-Net shapes at per-core batch 16.

    Per-core batch 16 < 64 keeps the activations' channels on the 128 lanes of their HBM
    tiles (docs/facts.md#1, #7), batch on the 8 sublanes.
    The 1x1 output conv's weight update, 16*1 of 128*8 on the MXU (docs/facts.md#6):
    2.10 MFLOP useful, 134 MFLOP padded = 0.68 µs. Its arrays: x 16x64x64x16 stored as
    16x64x64x128 (33.55 MB), dy 16x64x64x1 as 16x64x64x128 (33.55 MB), the 16x1 kernel
    as 16x128 (8 KB): 81.95 µs, against 5.44 µs for the same bytes unpadded.
    A 16 -> 16 3x3 conv's weight update at the same size: 302 MFLOP x 8 (batch 16 -> 128)
    = 12.27 µs on the MXU, under its tiled bytes (2 x 33.55 MB + 74 KB = 82.03 µs);
    unpadded it would take 10.25 µs of HBM.
    """
    from test_simulator import conv

    out = conv(KERNEL_GRAD, 16, 16, 1, hw=64, k=1, name="output")
    body = conv(KERNEL_GRAD, 16, 16, 16, hw=64, k=3, name="body")
    report = make_report(_raw_of([out, body], 16), target="tpu-v5e")
    by = {op.layer: op for op in report.ops}
    o, b = by["output"], by["body"]
    assert o.fit == pytest.approx(16 * 1 / (128 * 8))
    assert o.padded_flops == pytest.approx(2 * 16 * 64 * 64 * 16 * 64)
    assert o.time == pytest.approx((2 * 16 * 64 * 64 * 128 + 16 * 128) * 4 / 819e9)
    assert o.useful_time == pytest.approx((16 * 64 * 64 * 16 + 16 * 64 * 64 + 16) * 4 / 819e9)
    assert o.why == ["batch 16→128 (per-core batch)", "out-channels 1→8", "in HBM: channels 16→128 and 1→128 on the lanes",
                     "per-core batch 16 < 64 puts features on the lanes"]
    assert b.time == pytest.approx((2 * 16 * 64 * 64 * 128 + 9 * 16 * 128) * 4 / 819e9)
    assert b.time > 2 * 16 * 64 * 64 * 9 * 16 * 16 * 8 / 197e12  # memory-bound
    assert b.useful_time == pytest.approx((2 * 16 * 64 * 64 * 16 + 9 * 16 * 16) * 4 / 819e9)
    assert b.why[0] == "batch 16→128 (per-core batch)"
    assert [r.layer for r in report.rows] == ["output", "body"]


def test_table_is_laid_out_as_tabulate_simple_would(model_file):
    # render_report no longer imports tabulate (start-up of a cached report); the layout
    # users and the README know must not change.
    from tabulate import tabulate

    from kerasfit.crosscheck.report import TABLE_HEADERS, _table, table_rows

    report = make_report(raw_build(model_file, per_core=16, cores=8))
    rows = table_rows(report, max_rows=None)
    assert len(rows) > 5
    expected = tabulate(rows, headers=TABLE_HEADERS, tablefmt="simple", disable_numparse=True)
    assert _table(TABLE_HEADERS, rows) == expected
    assert render_report(report, max_rows=None).startswith(expected + "\n")


def test_cached_report_starts_no_build_and_imports_no_tensorflow(model_file, tmp_path):
    """A cached `kerasfit report` is a JSON read and a simulation: no child, no TensorFlow."""
    import subprocess
    import sys

    from kerasfit.crosscheck import api

    cache = tmp_path / "cache"
    key = api._cache_key(api._file_digest(model_file), BuildOptions())
    entry = cache / "build" / f"{key}.json"
    entry.parent.mkdir(parents=True)
    entry.write_text(json.dumps(raw_build(model_file)))
    code = (
        "import sys\n"
        "import kerasfit.crosscheck.api as api\n"
        "def no_child(*args, **kwargs):\n    raise SystemExit('a build child was started')\n"
        "api.run_child = no_child\n"
        "from kerasfit.front.cli import main\n"
        f"sys.argv = ['kerasfit', 'report', {str(model_file)!r}]\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'tensorflow', 'keras', 'tf_keras', 'tabulate'})\n"
        "print('HEAVY', heavy)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "KERASFIT_CACHE_DIR": str(cache)})
    assert proc.returncode == 0, proc.stderr
    table, heavy = proc.stdout.rsplit("HEAVY", 1)
    assert "wasted µs" in table and "per-core batch 16" in table
    assert heavy.strip() == "[]"


def test_table_has_fit_and_bound_columns_and_the_header_the_hbm_need(model_file):
    from kerasfit.crosscheck.memory import hbm_need
    from kerasfit.crosscheck.report import TABLE_HEADERS, table_rows

    report = make_report(raw_build(model_file))
    assert TABLE_HEADERS[6:8] == ["fit", "bound"] and "useful" not in TABLE_HEADERS
    rows = table_rows(report, max_rows=None)
    by_kind = {}
    for row, r in zip(rows, report.rows):
        by_kind.setdefault(r.kind, (row, r))
    conv_row, conv = by_kind["convolution"]
    assert conv_row[6] == f"{conv.fit:.1%}" and conv_row[7] in ("MXU", "HBM")
    # elementwise work is in the step, HBM-bound, with no MXU fit
    ew_row, ew = by_kind["elementwise"]
    assert ew_row[6] == "-" and ew_row[7] == "HBM" and ew.time > 0 and ew.wasted_time == 0
    # HBM need, hand-computed for keras_cnn.py's weights as tiled float32 arrays
    # (docs/facts.md#7): 3x3x(3->4)x(30->128) 18,432 B, 30 -> 128 lanes 512 B,
    # 3x3x(30->32)x(64->128) 147,456 B, 512 B, 64x(100->128) 32,768 B, 512 B,
    # (100->104)x(10->128) 53,248 B, 512 B = 253,952 B; gradients as much, Adam's two slots
    # twice that.
    h = report.hbm
    assert h["weights"] == 253_952 and h["gradients"] == 253_952 and h["optimizer"] == 2 * 253_952
    assert h["need"] == 4 * 253_952 + h["activations"] and h["capacity"] == 16 * 10**9 and h["fits"]
    assert h["activations"] > 0
    text = render_report(report)
    assert "HBM need ≈" in text and "of 16.0 GB per chip (docs/facts.md#25)" in text
    # one layout, one figure: the need's activations are the bytes the expansion line divides
    # (docs/facts.md#1, #7); at batch 16 the features sit on the 128 lanes. Hand sum of the
    # forward activations as stored: [16,32,32,3→128], [16,32,32,30→128], [16,16,16,30→128],
    # [16,16,16,64→128], [16,64→128], [16,100→128] twice, [16,10→128] (batch 16 on sublanes)
    at16 = 4 * (16 * 32 * 32 * 128 * 2 + 16 * 16 * 16 * 128 * 2 + 16 * 128 * 4)
    real16 = 4 * (16 * 32 * 32 * 33 + 16 * 16 * 16 * 94 + 16 * (64 + 100 + 100 + 10))
    assert h["activations"] == at16 and report.hbm_expansion == pytest.approx(at16 / real16)
    # the what-if a batch recommendation reads: at 128 the batch is on the lanes and the
    # features on the sublanes (3→4, 30→32, 100→104, 10→16): not 8x the bytes of batch 16
    from kerasfit.crosscheck.hlo import HloOp
    from kerasfit.crosscheck.simulator import with_batch

    hlo_ops = [HloOp.from_dict({k: v for k, v in d.items() if k not in ("layer", "source")})
               for d in raw_build(model_file)["ops"]]
    big = hbm_need(raw_build(model_file), with_batch(hlo_ops, 16, 128), "tpu-v5e")
    at128 = 4 * 128 * (32 * 32 * 4 + 32 * 32 * 32 + 16 * 16 * 32 + 16 * 16 * 64 + 64 + 104 + 104 + 16)
    assert big["activations"] == at128 and big["weights"] == h["weights"]
    assert at128 < 2 * at16 < 8 * at16


def test_progress_lines_only_on_a_terminal(tmp_path, capsys):
    import io
    import sys
    import time

    from kerasfit.crosscheck.api import _Progress

    phase = tmp_path / "result.json.phase"

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for stderr, expect in ((Terminal(), True), (io.StringIO(), False)):
        old, sys.stderr = sys.stderr, stderr
        try:
            with _Progress(phase, "model.py"):
                phase.write_text("tensorflow")
                time.sleep(0.8)
                phase.write_text("trace")
                time.sleep(0.8)
        finally:
            sys.stderr = old
        lines = stderr.getvalue().splitlines()
        if expect:
            assert [line.split("… ")[0] for line in lines] == [
                "kerasfit: model.py: importing TensorFlow", "kerasfit: model.py: tracing one training step"]
        else:
            assert lines == []
_FUSED = ("build_model(): calling build_model() failed (line 9): ValueError: Unrecognized keyword "
          "arguments passed to BatchNormalization: {'fused': False}")


def test_keras3_refusing_fused_confirms_kf101_whatever_tf_keras_built(model_file):
    raw = raw_build(model_file)

    def verdict(**built):
        (d,) = [x for x in cross_check([diag("KF101", "unfused-batchnorm", model_file, 9)],
                                       make_report(dict(raw, **built)), str(model_file)) if x.code == "KF101"]
        return d.build

    # tf-keras built it after Keras 3 refused `fused`: confirmed
    confirmed = verdict(mode="tf-keras", keras3_error=_FUSED)
    assert confirmed["status"] == "confirmed" and "fused" in confirmed["detail"]
    # Keras 3 failed on something else, or tf-keras built it with no Keras 3 try: no verdict
    assert verdict(mode="tf-keras", keras3_error="NameError: name 'foo' is not defined") is None
    assert verdict(mode="tf-keras") is None
    # Keras 3 built the model with the finding in the file: refuted
    assert verdict(mode="keras")["status"] == "refuted"


def test_an_incomplete_build_is_the_basis_of_no_verdict(model_file):
    raw = raw_build(model_file, per_core=16, cores=8)
    diags = lambda: [diag("KF102", "channel-multiple", model_file, 9), diag("KF104", "l2-in-forward", model_file, 3)]
    full = cross_check(diags(), make_report(raw), str(model_file))
    assert full[0].build and "KF302" in {d.code for d in full}
    passed_over = dict(raw, notes=["script statements that failed and were passed over: line 3: NameError"])
    for incomplete in (passed_over, dict(raw, complete=False)):
        report = make_report(incomplete)
        assert not report.complete
        out = cross_check(diags(), report, str(model_file))
        assert [d.code for d in out] == ["KF102", "KF104"] and all(d.build is None for d in out)


def test_a_static_finding_on_a_row_yields_its_recommendation_where_it_gains(model_file):
    raw = raw_build(model_file)
    plain = make_report(raw, target="gpu")
    assert not [r for r in plain.recommendations if r.code]
    # on a GPU 30 float32 filters miss TF32's multiple of 4: the layer's rounding gains
    finding = StaticFinding("KF102", "feature-padding", str(model_file), 9, 9, "Round the width up")
    nowhere = StaticFinding("KF107", "transpose", str(model_file), 2, 2, "Keep one layout")
    report = make_report(raw, target="gpu", findings=[finding, nowhere])
    (rec,) = [r for r in report.recommendations if r.code]
    assert rec.code == "KF102" and rec.is_change and rec.source["line"] == 9
    assert rec.step_time is not None and "30 → 32" in rec.text and rec.saved > 0
    assert rec.text in render_report(report)
    # issue 28: never advice that gains nothing. At batch 16 a TPU pads the Dense(100)'s
    # features to 128 whatever its width: rounding it saves no time, so no advice of it
    dense = StaticFinding("KF102", "feature-padding", str(model_file), 13, 13, "Round the width up")
    tpu = make_report(raw, findings=[dense])
    assert not [r for r in tpu.recommendations if r.code]
    assert all(r.saved > 0 for r in tpu.recommendations if r.is_change)


def test_every_top_row_is_covered_by_a_change_or_said_where_it_comes_from(model_file):
    for per_core, cores in ((16, 8), (16, 1)):
        report = make_report(raw_build(model_file, per_core=per_core, cores=cores))
        covered = {i for r in report.recommendations for i in r.rows}
        wasted = sum(r.wasted_time for r in report.rows)
        top = [i for i, r in enumerate(report.rows[:TOP_ROWS], 1) if r.wasted_time > NEGLIGIBLE * wasted]
        assert top and set(top) <= covered
        # a change says what it does to the step; an origin names the row and its cause
        for rec in report.recommendations:
            if rec.is_change and rec.step_time is not None:
                assert "→" in rec.text and rec.step_time > 0
            elif not rec.is_change:
                assert rec.rows and ("row" in rec.text) and "→" in rec.text


def _attention_dot(lhs, rhs, out, roles, m, k, n, batch):
    return HloOp(name="Einsum.8", opcode="dot", op_type="Einsum", op_name="mha/einsum/Einsum", dtype="f32",
                 shape=out, lhs_shape=lhs, rhs_shape=rhs, lhs="q", rhs="k", roles=roles, m=m, k=k, n=n,
                 flops=2 * batch * m * k * n, pass_="forward", extra={"batch": batch})


def test_fewer_larger_heads_reshape_the_attention_matmuls_or_give_no_number():
    # softmax(Q·Kᵀ)'s scores: B=128, S=64, 4 heads of 16 -> 1 head of 64, the FLOPs unchanged
    roles = {"lhs": {"m": [1], "k": [3], "b": [0, 2]}, "rhs": {"k": [3], "n": [1], "b": [0, 2]},
             "out": {"m": [2], "n": [3], "b": [0, 1]}}
    scores = _attention_dot([128, 64, 4, 16], [128, 64, 4, 16], [128, 4, 64, 64], roles, 64, 16, 64, 512)
    one = _reshaped_heads(scores, 4, {16}, 1)
    assert one is not None and one is not scores
    assert (one.lhs_shape, one.rhs_shape, one.shape) == ([128, 64, 1, 64], [128, 64, 1, 64], [128, 1, 64, 64])
    assert (one.k, one.extra["batch"], one.flops) == (64, 128, scores.flops)
    assert scores.lhs_shape == [128, 64, 4, 16]  # the step's own op is left alone
    # a sequence as long as the head: which dim is the head size is not known, so no number
    square = _attention_dot([128, 16, 4, 16], [128, 16, 4, 16], [128, 4, 16, 16], roles, 16, 16, 16, 512)
    assert _reshaped_heads(square, 4, {16}, 1) is None
    # a projection's weight update has no heads: it is not reshaped
    proj = _attention_dot([128, 64, 64], [128, 64, 64], [128, 64, 64],
                          {"lhs": {"m": [2], "k": [1], "b": [0]}, "rhs": {"k": [1], "n": [2], "b": [0]},
                           "out": {"m": [1], "n": [2], "b": [0]}}, 64, 64, 64, 128)
    assert _reshaped_heads(proj, 4, {16}, 1) is proj


def test_a_written_transpose_is_a_change_and_one_tf_lowers_a_contraction_with_is_not(model_file):
    raw = raw_build(model_file)

    def transpose(op_name, line):
        src = {"file": str(model_file), "line": line, "end_line": line, "column": 0, "end_column": 0}
        return {"name": op_name, "opcode": "transpose", "op_name": op_name, "dtype": "f32",
                "shape": [16, 3, 32, 32], "operand_shapes": [[16, 32, 32, 3]], "bytes": 8 * 393216,
                "layer": "conv2d", "source": src}

    raw["mem_ops"] = raw["mem_ops"] + [transpose("model/conv2d/transpose", 9),
                                       transpose("gradient_tape/model/conv2d/transpose/transpose", 9),
                                       transpose("model/dense/Tensordot/transpose", 13)]
    report = make_report(raw)
    (change,) = [r for r in report.recommendations if r.is_change and "transpose" in r.text]
    # the written transpose and its gradient both go, and nothing else
    written = [m for m in report.mem_rows if m.kind == "transpose" and m.source and m.source["line"] == 9]
    assert change.source["line"] == 9 and len(written) == 2
    assert change.saved == pytest.approx(sum(m.time for m in written))
    assert not [r for r in report.recommendations if r.is_change and r.source and r.source["line"] == 13
                and "transpose" in r.text]


def test_the_header_says_what_was_built_and_where_its_shapes_came_from(model_file):
    raw = raw_build(model_file)
    raw["networks"] = [{"name": "discriminator", "how": "h", "layers": ["conv2d"], "classes": ["Conv2D"]},
                       {"name": "generator", "how": "h", "layers": ["dense"], "classes": ["Dense"]}]
    raw["built_how"] = "one step of the script's GAN.train_step on a batch of shape (16, 28, 28, 1)"
    raw["said"] = ["batch 16 from the script (line 8: batch_size = 16)"]
    report = make_report(raw)
    text = render_report(report)
    assert text.splitlines()[:3] == [
        "how: the script's model, built from a slice of the script: its data pipeline and training never ran "
        "(--trace-script runs the script to its first training step instead)",
        "built discriminator, generator: one step of the script's GAN.train_step on a batch of shape (16, 28, 28, 1)",
        "shapes: batch 16 from the script (line 8: batch_size = 16)",
    ]
    data = json.loads(render_report(report, "json"))
    assert [n["name"] for n in data["networks"]] == ["discriminator", "generator"]
    assert data["shapes_said"] == raw["said"] and data["built_how"] == raw["built_how"]
    assert data["way"] == "sliced" and data["assumptions"] == []
    traced = render_report(make_report(dict(raw, way="traced")))
    assert traced.splitlines()[0] == ("how: the script's own first training step: the script ran to it "
                                      "(--trace-script) and stopped before any weight changed")


def test_a_build_resting_on_an_assumption_says_it_and_recommends_and_judges_nothing(model_file):
    raw = raw_build(model_file, per_core=16, cores=8)
    raw["networks"] = [{"name": "model", "how": "h", "layers": ["conv2d"], "classes": ["Conv2D"]}]
    assert make_report(raw).recommendations
    assumed = dict(raw, assumptions=["the script's GAN.train_step did not trace on a batch of the networks' inputs"])
    report = make_report(assumed)
    assert report.recommendations == [] and report.rows  # the table stays, as built
    lines = render_report(report).splitlines()
    assert "assumed: the script's GAN.train_step did not trace on a batch of the networks' inputs" in lines
    assert not any(line.startswith("changes that would recover most") for line in lines)
    out = cross_check([diag("KF102", "channel-multiple", model_file, 9)], report, str(model_file))
    assert [d.code for d in out] == ["KF102"] and out[0].build is None  # no verdict, no KF302


def test_the_text_report_prints_a_path_with_control_characters_escaped_as_check_does(tmp_path):
    # a file name with a newline, a tab and an escape sequence: one inert table row, no terminal control
    path = tmp_path / "od\nd\tname\x1b[2J.py"
    path.write_text(CNN.read_text())
    raw = raw_build(path)
    raw["notes"] = [f"not run: {path}"]
    text = render_report(make_report(raw), max_rows=None)
    assert "\x1b" not in text and "\t" not in text
    rows = [line for line in text.splitlines() if "keras_cnn" in line or "name" in line]
    assert rows and all("od\\nd\\tname\\x1b[2J.py:" in line for line in rows if not line.startswith("note:"))
    shown = str(path).replace("\n", "\\n").replace("\t", "\\t").replace("\x1b", "\\x1b")
    assert "note: not run: " + shown in text.splitlines()
    # the table's rows are still one line each
    table = text.split("\n\n")[0].splitlines()
    assert len(table) == 2 + len(make_report(raw).rows)


def test_the_heads_what_if_scales_the_score_sized_moves_with_the_head_count(model_file):
    report = make_report(raw_build(model_file))
    op = report.ops[0]
    # (batch, heads, query, key) scores: their bytes follow the head count; q/k/v (… heads, head size) do not
    assert _score_sized(dataclasses.replace(op, shape=[128, 4, 64, 64]), 4, {16})
    assert not _score_sized(dataclasses.replace(op, shape=[128, 64, 4, 16]), 4, {16})
    assert not _score_sized(dataclasses.replace(op, shape=[128, 4, 4, 64]), 4, {16})  # which is the heads?
    rows = report.rows
    what = _WhatIf([], rows, report.ops + report.mem_rows, report.target, report.dtype, report.common_batch)
    member = rows[0].members[0]
    before, _ = what.apply()
    after, _ = what.apply(scaled={member: 0.25})
    t = next(o.time for o in report.ops + report.mem_rows if o.name == member)
    assert after == pytest.approx(before - 0.75 * t)


def test_kf301_names_the_ops_own_share_of_step_flops(model_file):
    """Every layer built on one line (a loop): the line's ops are the whole step, the op the
    finding names is a part of it, and its share is what the message says (issue 26, item 8)."""
    raw = raw_build(model_file)
    for op in raw["ops"]:
        op["source"]["line"] = op["source"]["end_line"] = 9
    report = make_report(raw)
    (kf301,) = [d for d in cross_check([], report, str(model_file)) if d.code == "KF301"]
    named = kf301.fields["layer"], kf301.fields["pass"]
    shares = {op.share for op in report.ops if (op.layer, op.pass_) == named}
    said = kf301.fields["share"]
    assert said in shares and said != 1.0, (kf301.fields, shares)
    assert f"{said:.1%} of step FLOPs" in kf301.message  # the message renders the field
    assert sum(op.share for op in report.ops) == pytest.approx(1.0)
