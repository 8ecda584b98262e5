"""Build real (small) models with real TensorFlow in the child process.

Every build runs ``python -m kerasfit.crosscheck.child`` once; module-scoped fixtures
share the builds between tests. Marked ``build`` (``pytest -m "not build"`` skips).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kerasfit.crosscheck.simulator import tiled_bytes
from kerasfit.crosscheck.api import (
    BuildError,
    BuildOptions,
    build_report,
    cached_report,
    cross_check,
    render_report,
    run_child,
)
from kerasfit.crosscheck.hlo import FORWARD, KERNEL_GRAD, PASSES
from kerasfit.core.types import Diagnostic, Severity

pytestmark = pytest.mark.build

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "crosscheck"
UNET = FIXTURES / "unet_tf1.py"
CNN = FIXTURES / "keras_cnn.py"
ZEROPAD = FIXTURES / "zeropad_conv.py"
RESNET = FIXTURES / "resnet50.py"


def line_of(path: Path, needle: str) -> int:
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(f"{needle!r} not in {path}")


def op(report, layer: str, pass_: str):
    found = [o for o in report.ops if o.layer == layer and o.pass_ == pass_]
    assert found, f"no {pass_} op for {layer}: {sorted({(o.layer, o.pass_) for o in report.ops})}"
    return found[0]


def static_diagnostics(path: Path) -> list[Diagnostic]:
    from kerasfit.project.check import CheckOptions, check_source

    return check_source(path.read_text(), str(path), CheckOptions(isolated=True)).diagnostics


# ---------------------------------------------------------------- TF1 U-Net


@pytest.fixture(scope="module")
def unet():
    return build_report(UNET, BuildOptions(cores=8, use_cache=False))


def test_unet_last_conv_weight_update_is_16x1_of_128x8(unet):
    assert unet.mode == "tf1-graph"
    assert (unet.global_batch, unet.cores, unet.per_core_batch) == (128, 8, 16)
    last = op(unet, "unet/output", KERNEL_GRAD)
    assert last.dims["batch"] == [16, 128]
    assert last.dims["out_features"] == [1, 8]
    assert last.fit == pytest.approx(16 * 1 / (128 * 8))
    assert (last.shape, last.padded_shape) == ([16, 64, 64, 1], [128, 64, 64, 8])
    assert last.source["line"] == line_of(UNET, "logits = tf.compat.v1.layers.conv2d")
    assert os.path.samefile(last.source["file"], UNET)
    assert unet.outputs == [[16, 64, 64, 1]]
    # Its row in the ranked table names the cause.
    row = next(r for r in unet.rows if r.layer == "unet/output" and r.pass_ == KERNEL_GRAD)
    assert row.why[:2] == ["batch 16→128 (per-core batch)", "out-channels 1→8"]


def test_seed_unet_top_rows_follow_the_padding_rule(unet):
    """At a per-core batch of 16 (< 64) the forward and input-gradient convs pad every
    channel dim to 128 (docs/facts.md#1–3, the padding rule's bound of fact 2): the
    16-channel convs' 16·16 of 128·128 leads the table, MXU-bound. The output conv's
    weight update -- 16·1 of 128·8, the guide's case -- stays a ranked row whose cause
    names the per-core batch and the lanes its arrays take in HBM.
    (Issue 10's top-3 check predates the rule: then outputs always padded to 8.)
    """
    top = unet.rows[0]
    assert top.pass_ == "forward" and top.bound == "MXU"
    assert top.why == ["in-channels 1→128", "out-channels 16→128"]
    output = next(r for r in unet.rows if r.layer == "unet/output" and r.pass_ == KERNEL_GRAD)
    assert output in unet.rows[:10]
    assert output.why[0] == "batch 16→128 (per-core batch)"
    assert "in HBM: channels 16→128 and 1→128 on the lanes" in output.why
    assert "per-core batch 16 < 64 puts features on the lanes" in output.why


@pytest.fixture(scope="module")
def cnn():
    return build_report(CNN, BuildOptions(batch_size=128, use_cache=False))


def test_cnn_confirms_channel_multiple_findings(cnn):
    diags = cross_check(static_diagnostics(CNN), cnn, str(CNN))
    by_line = {d.row: d for d in diags if d.code == "KF102"}
    conv = by_line[line_of(CNN, "Conv2D(30")]
    # The findings say "pad to 32 or 128" (the padding rule, docs/facts.md#1–3). At batch
    # 128 the layer's own weight update pads its features to 128 -- the 30 filters, the
    # kernel's out dim, included (fact 2's upper bound) -- and is cited.
    assert conv.build["status"] == "confirmed" and conv.build["pass"] == KERNEL_GRAD
    assert conv.build["out_features"] == [30, 128] and conv.build["layer"] == "conv2d"
    assert (conv.build["shape"], conv.build["padded_shape"]) == ([3, 3, 3, 30], [3, 3, 128, 128])
    dense = by_line[line_of(CNN, "Dense(100")]
    assert dense.build["status"] == "confirmed" and dense.build["pass"] == KERNEL_GRAD
    assert (dense.build["shape"], dense.build["padded_shape"]) == ([64, 100], [128, 128])
    assert dense.build["out_features"] == [100, 128]
    # Nothing unexplained on the Conv2D(64) line: 64 is a multiple of 8.
    assert not [d for d in diags if d.code == "KF301" and d.row == line_of(CNN, "Conv2D(64")]


def test_cnn_unsafe_fixes_raise_step_fit_and_keep_the_output_shape(cnn, tmp_path):
    fixed = tmp_path / "keras_cnn.py"
    shutil.copy(CNN, fixed)
    run_fix(fixed, "--unsafe-fixes")
    text = fixed.read_text()
    assert "Conv2D(30" not in text and "Conv2D(32" in text
    assert "Dense(100" not in text
    after = build_report(fixed, BuildOptions(batch_size=128, use_cache=False))
    assert after.step_fit > cnn.step_fit
    assert after.outputs == cnn.outputs == [[128, 10]]


# ---------------------------------------------------------------- ZeroPadding2D + valid conv


def run_fix(path: Path, *flags: str) -> None:
    """Apply kerasfit's own fixes to ``path`` through the CLI."""
    subprocess.run(
        [sys.executable, "-m", "kerasfit", "check", "--fix", *flags, "--isolated", "--no-cache",
         "--exit-zero", "-q", str(path)],
        check=True, capture_output=True, cwd=path.parent, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_pad_before_conv_fix_keeps_outputs_identical(tmp_path):
    weights, before, after = tmp_path / "w.npz", tmp_path / "before.npz", tmp_path / "after.npz"
    opts = BuildOptions(batch_size=4, use_cache=False)
    raw = run_child(ZEROPAD, opts, probe_weights=str(weights), probe_outputs=str(before))

    # The static KF103 findings are confirmed: each zero pad feeds a conv's forward and
    # weight-gradient passes.
    from kerasfit.crosscheck.report import make_report

    report = make_report(raw)
    static = [d for d in static_diagnostics(ZEROPAD) if d.code == "KF103"]
    assert {d.row for d in static} == {line_of(ZEROPAD, "ZeroPadding2D((1, 1))(inputs)"),
                                       line_of(ZEROPAD, "ZeroPadding2D((1, 1))(x)")}
    checked = [d for d in cross_check(static, report, str(ZEROPAD)) if d.code == "KF103"]
    assert all(d.build["status"] == "confirmed" for d in checked)
    first = min(checked, key=lambda d: d.row)
    assert (first.build["shape"], first.build["padded_shape"]) == ([4, 16, 16, 8], [4, 18, 18, 8])

    # The safe fix: no pad layer, padding="same".
    fixed = tmp_path / "zeropad_fixed.py"
    shutil.copy(ZEROPAD, fixed)
    run_fix(fixed)
    fixed_source = fixed.read_text()
    assert "layers.ZeroPadding2D" not in fixed_source and 'padding="valid"' not in fixed_source
    run_child(fixed, opts, probe_weights=str(weights), probe_outputs=str(after))

    import numpy as np

    with np.load(before) as a, np.load(after) as b:
        assert a.files == b.files
        for name in a.files:
            assert a[name].shape == b[name].shape == (4, 16, 16, 8)
            np.testing.assert_array_equal(a[name], b[name])


# ---------------------------------------------------------------- ResNet50, discovery, tf-keras


def test_resnet50_small_input_builds_and_maps_to_the_applications_call():
    report = build_report(RESNET, BuildOptions(entry="build_small_model", batch_size=8, use_cache=False))
    assert len(report.ops) > 150
    call = line_of(RESNET, "keras.applications.ResNet50(")
    assert {o.source["line"] for o in report.ops} == {call}
    assert {o.pass_ for o in report.ops} == {"forward", "input-gradient", "kernel-gradient"}
    assert 0 < report.step_fit <= 1


def test_module_level_tf_keras_model_is_discovered(tmp_path):
    path = tmp_path / "legacy_model.py"
    path.write_text(
        "import tf_keras\n"
        "\n"
        "model = tf_keras.Sequential([\n"
        "    tf_keras.Input((12,)),\n"
        "    tf_keras.layers.Dense(20),\n"
        "    tf_keras.layers.Dense(3),\n"
        "])\n"
    )
    report = build_report(path, BuildOptions(batch_size=32, cores=2, use_cache=False))
    assert report.mode == "tf-keras" and report.entry == "model"
    assert report.per_core_batch == 16
    lines = {o.layer: o.source["line"] for o in report.ops}
    assert set(lines.values()) == {5, 6}


def test_cache_and_cached_report(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "model.py"
    shutil.copy(ZEROPAD, path)
    assert cached_report(path) is None
    opts = BuildOptions(batch_size=4)
    first = build_report(path, opts)
    assert not first.cached
    # The child times its phases (benchmarks/report_speed.py prints them).
    assert list(first.timings) == ["import", "build", "trace", "lower", "parse"]
    assert all(v >= 0 for v in first.timings.values()) and first.timings["lower"] > 0
    start = time.perf_counter()
    second = build_report(path, opts)
    assert second.cached and time.perf_counter() - start < 1.0
    assert second.to_dict()["ops"] == first.to_dict()["ops"]
    # Another target is the same build, simulated again.
    assert build_report(path, BuildOptions(batch_size=4, target="tpu-v6e")).cached
    hover = cached_report(path)
    assert hover is not None and len(hover.ops) == len(first.ops)
    assert (tmp_path / ".kerasfit_cache" / "build").is_dir()
    path.write_text(path.read_text() + "\n# changed\n")
    assert cached_report(path) is None


# ---------------------------------------------------------------- failures


FAILURES = {
    # A missing package is stubbed; when the model needs it, the message names it.
    "import-error": ("import not_a_real_module_xyz\n\ndef build_model():\n    return not_a_real_module_xyz.Net()\n",
                     "the model needs not_a_real_module_xyz, which is not installed"),
    "user-exception": (
        "import keras\n\ndef build_model():\n    raise ValueError('bad filters')\n",
        "line 4",
    ),
    "nothing-to-build": ("import keras\n\nx = 1\n", "tried no-argument functions build_model()"),
    # Module-level code the model does not need never runs: crash and hang in the builder.
    "segfault": ("import ctypes\nimport keras\n\ndef build_model():\n    ctypes.string_at(0)\n", "SIGSEGV"),
    "hang": ("import time\nimport keras\n\ndef build_model():\n    time.sleep(600)\n", "timed out"),
}


@pytest.mark.parametrize("case", sorted(FAILURES))
def test_failures_become_one_line_naming_the_file(case, tmp_path):
    source, expected = FAILURES[case]
    path = tmp_path / f"{case.replace('-', '_')}.py"
    path.write_text(source)
    timeout = 12.0 if case == "hang" else 120.0
    with pytest.raises(BuildError) as info:
        build_report(path, BuildOptions(timeout=timeout, use_cache=False))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert expected in message


def test_bfloat16_builds_under_the_mixed_policy_and_packs_activations(cnn, tmp_path):
    """--dtype bfloat16 builds under mixed_bfloat16: the convolutions in the HLO are bf16,
    and 16-bit activations pack two rows per word (docs/facts.md#7), so HBM expansion differs."""
    hlo = tmp_path / "bf16.hlo"
    run_child(CNN, BuildOptions(batch_size=128, dtype="bfloat16", use_cache=False), dump_hlo=str(hlo))
    text = hlo.read_text()
    assert "bf16" in text and "convolution" in text
    bf16 = build_report(CNN, BuildOptions(batch_size=128, dtype="bfloat16", use_cache=False))
    assert bf16.dtype == "bfloat16" and cnn.dtype == "float32"
    assert bf16.hbm_expansion != cnn.hbm_expansion
    assert len(bf16.ops) == len(cnn.ops)


def test_check_build_keeps_static_findings_when_the_build_fails(tmp_path):
    # Keras 3 raises on fused=: the failed build is KF101's evidence.
    f = tmp_path / "broken_model.py"
    f.write_text(
        "import keras\n\n"
        "def build_model():\n"
        "    inputs = keras.Input((8, 8, 3))\n"
        "    x = keras.layers.BatchNormalization(fused=False)(inputs)\n"
        "    return keras.Model(inputs, x)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "kerasfit", "check", str(f), "--build", "--no-cache"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )
    assert proc.returncode == 1
    assert " KF101 " in proc.stdout  # the static result survived
    assert "build cross-check failed" in proc.stdout and "broken_model.py" in proc.stdout
    assert "fused" in proc.stdout and "(confirmed by --build)" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_check_build_on_a_tree_builds_only_files_that_define_a_model(tmp_path):
    shutil.copy(ZEROPAD, tmp_path / "zeropad_conv.py")
    (tmp_path / "helpers.py").write_text(
        "import tensorflow as tf\n\ndef helper(x):\n    return tf.keras.layers.BatchNormalization(fused=False)(x)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "kerasfit", "check", ".", "--build", "--no-cache"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )
    assert proc.returncode == 1
    assert "helpers.py:4:12: KF101" in proc.stdout  # static finding, no build attempted
    assert "build cross-check failed" not in proc.stdout + proc.stderr
    assert proc.stdout.count("confirmed by --build") == 2  # the model file was built


def test_report_reads_build_options_from_pyproject(tmp_path):
    shutil.copy(CNN, tmp_path / "keras_cnn.py")
    (tmp_path / "pyproject.toml").write_text('[tool.kerasfit.build]\ndtype = "bfloat16"\nbatch-size = 64\ncores = 2\n')
    proc = subprocess.run(
        [sys.executable, "-m", "kerasfit", "report", "keras_cnn.py", "--output-format", "json", "--no-cache"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["dtype"] == "bfloat16"
    assert data["per_core_batch"] == 32  # global 64 over 2 cores


# ---------------------------------------------------------------- TF1 in bfloat16

TF1_BF16 = FIXTURES / "tf1_bf16.py"


def test_tf1_bfloat16_graph_is_simulated_as_bfloat16():
    """Hand-computed padding of a bf16 TF1 graph (batch 16, 3 -> 30 -> 1 channels)."""
    raw = run_child(TF1_BF16, BuildOptions(use_cache=False))
    assert raw["mode"] == "tf1-graph"
    assert {o["dtype"] for o in raw["ops"]} == {"bf16"}
    from kerasfit.crosscheck.report import make_report

    # gpu: XLA pads 16-bit channels to 8 and the kernels compute whole tiles (30 -> 32); a
    # 3-channel input takes the 4-channel kernels (docs/facts.md#18, #27); the batch never pads.
    gpu = make_report(raw, "gpu", "float32")
    assert gpu.dtype == "bfloat16"
    conv = op(gpu, "net/conv", FORWARD)
    assert conv.dims == {"batch": [16, 16], "in_features": [3, 4], "out_features": [30, 32]}
    assert conv.fit == pytest.approx(3 * 30 / (4 * 32))
    # tpu-v5e, common batch 16: the forward pass pads its channels to 128, in and out
    # (docs/facts.md#1–3, the padding rule's bound of fact 2); the output conv's weight
    # update pads the batch 16 -> 128 and its single channel 1 -> 8.
    tpu = make_report(raw, "tpu-v5e", "bfloat16")
    assert op(tpu, "net/conv", FORWARD).dims == {"batch": [16, 16], "in_features": [3, 128],
                                                  "out_features": [30, 128]}
    last = op(tpu, "net/out", KERNEL_GRAD)
    assert last.dims == {"batch": [16, 128], "in_features": [30, 32], "out_features": [1, 8]}
    assert not any("was asked for" in n for n in tpu.notes)
    # A float32 graph asked to be bfloat16 says it stayed float32.
    raw32 = dict(raw, ops=[dict(o, dtype="f32") for o in raw["ops"]])
    rep = make_report(raw32, "tpu-v5e", "bfloat16")
    assert rep.dtype == "float32" and any("--dtype bfloat16 was asked for" in n for n in rep.notes)
