"""``--trace-script``: the script runs as ``python script.py`` would, through its own data
pipeline, and stops at its first training step before any weight changes; that step is
traced. Each fixture script brings its own small local data (a CSV, NumPy arrays), writes
the digest of its freshly made weights beside itself, and marks that training went on
past its first step (which must never happen). Each is built in the real child."""

from __future__ import annotations

import json
import shutil

import pytest

from kerasfit.crosscheck.api import BuildError, BuildOptions, run_child
from kerasfit.crosscheck.report import make_report, render_report

from conftest import SCRIPTS  # same folder (pytest prepends it)

pytestmark = pytest.mark.build


def _forward(raw, layer, opcode):
    return [op for op in raw["ops"] if op["layer"] == layer and op["pass"] == "forward" and op["opcode"] == opcode]


def test_a_fit_script_is_traced_through_its_own_pipeline_and_train_step_and_no_weight_changes(script):
    path = script("trace_fit.py")
    shutil.copy(SCRIPTS / "trace_data.csv", path.parent)
    raw = run_child(path, BuildOptions(timeout=240, trace_script=True))
    assert raw["way"] == "traced" and raw["entry"] == "model.fit (line 41)"
    # the pipeline's map doubled the CSV's 6 features; its .batch(12) gave the batch
    assert raw["inputs"] == [[12, 12], [12]]
    assert raw["said"][0] == "batch 12: the script's own first batch (line 41)"
    assert [12, 24] in raw["variables"]  # the hidden Dense reads 12 features
    assert raw["built_how"].startswith("traced: one step of the model's own train_step, as model.fit (line 41)")
    assert [op["shape"] for op in _forward(raw, "dense", "dot")] == [[12, 24]]
    # stopped before the first weight update: the weights are the ones the script made
    assert raw["weights_sha256"] == {"model": path.with_suffix(".weights").read_text()}
    assert not path.with_suffix(".trained").exists()
    header = render_report(make_report(raw)).splitlines()[0]
    assert header.startswith("how: the script's own first training step: the script ran to it (--trace-script)")


def test_a_gradient_tape_loop_is_traced_through_its_own_step_function_and_no_weight_changes(script):
    path = script("trace_tape.py")
    raw = run_child(path, BuildOptions(timeout=240, trace_script=True))
    assert raw["entry"] == "train_step(), whose optimizer step it is (called at line 40)"
    assert raw["built_how"].startswith("traced: one step of the script's own train_step(), the tf.function it "
                                       "calls at line 40 for its optimizer step")
    assert raw["inputs"] == [[8, 10, 10, 2], [8, 4]]  # the pipeline's batch of 8, as the loop gets it
    # the script's own step runs the network three times (a stand-in step would run it once)
    assert len(_forward(raw, "conv2d", "convolution")) == 3
    assert [n["name"] for n in raw["networks"]] == ["net"] and not raw["assumptions"]
    assert raw["weights_sha256"] == {"net": path.with_suffix(".weights").read_text()}
    assert not path.with_suffix(".trained").exists()


def test_the_cores_split_the_scripts_own_batch_and_a_batch_size_resizes_it(script):
    path = script("trace_tape.py")
    raw = run_child(path, BuildOptions(timeout=240, trace_script=True, cores=2))
    assert (raw["global_batch"], raw["per_core_batch"]) == (8, 4)
    assert raw["inputs"] == [[4, 10, 10, 2], [4, 4]]  # one core's share is traced
    raw = run_child(path, BuildOptions(timeout=240, trace_script=True, batch_size=20))
    assert raw["inputs"] == [[20, 10, 10, 2], [20, 4]]
    assert raw["said"][0].startswith("batch 20 from --batch-size: the script's own first batch")


def test_a_script_whose_data_is_not_here_fails_with_its_line(tmp_path):
    path = tmp_path / "needs_data.py"
    path.write_text("import numpy as np\nimport keras\n\n"
                    "model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])\n"
                    "table = np.loadtxt('/nonexistent/kerasfit-data.csv', delimiter=',')\n"
                    "model.compile(loss='mse')\nmodel.fit(table[:, :4], table[:, 4:])\n")
    with pytest.raises(BuildError) as err:
        run_child(path, BuildOptions(timeout=240, trace_script=True))
    message = str(err.value)
    assert "the script failed at line 5 before its first training step: it needs the network or data that is " \
           "not here (FileNotFoundError" in message
    assert message.endswith("without --trace-script the model is built without running the script")


def test_a_script_that_never_trains_says_so(tmp_path):
    path = tmp_path / "no_training.py"
    path.write_text("import keras\nmodel = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])\n")
    with pytest.raises(BuildError, match="the script ran to its end without a training step"):
        run_child(path, BuildOptions(timeout=240, trace_script=True))


def test_report_traces_the_script_when_asked(script, kerasfit_cmd, tmp_path):
    import subprocess

    path = script("trace_tape.py")
    env = dict(__import__("os").environ, KERASFIT_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([*kerasfit_cmd, "report", str(path), "--trace-script", "--output-format", "json"],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["way"] == "traced" and data["global_batch"] == 8
