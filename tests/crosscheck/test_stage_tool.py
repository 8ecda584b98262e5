"""The cross-check behaves like a tool: a failed build is cached (and said to be), a cached
report is read back whole whatever the model's size, ``check --build`` takes the same build
options as ``report``, a failure in ``--output-format json`` is a JSON object, and a message
is one whole line, naming the flag or the package that helps."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kerasfit.crosscheck import api
from kerasfit.crosscheck.api import BuildError, BuildOptions
from kerasfit.crosscheck.childbuild import install_hint
from kerasfit.crosscheck.messages import one_line, reason

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "fixtures" / "crosscheck" / "scripts"
HANG = "import time\nimport keras\n\ndef build_model():\n    time.sleep(600)\n"


def _kerasfit(args: list[str], cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, KERASFIT_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-m", "kerasfit", *args], capture_output=True, text=True, cwd=cwd, env=env)


# ---------------------------------------------------------------- messages


def test_a_message_is_one_line_without_terminal_escapes_cut_only_between_clauses():
    text = "\x1b[1mValueError\x1b[0m: the input\nhas 3 channels. " + "The layer wants more of them, always. " * 12
    line = one_line(text, 120)
    assert "\x1b" not in line and "\n" not in line
    assert line.startswith("ValueError: the input has 3 channels.") and line.endswith(".")
    assert len(line) <= 120
    # a text with no clause to end at is kept whole (up to a hard limit), never cut inside a word
    word = "x" * 500
    assert one_line(word, 100) == word


def test_a_tensorflow_error_quoting_the_user_code_is_told_by_its_own_last_line():
    exc = TypeError('in user code:\n\n    File "/tmp/m.py", line 3, in step *\n        x = y\n\n'
                    "    TypeError: unsupported operand type(s)\n")
    assert reason(exc) == "TypeError: TypeError: unsupported operand type(s)"


def test_a_missing_package_is_named_to_install_only_where_it_works_with_the_installed_keras():
    assert install_hint(["keras_cv"], "no attribute keras_cv.layers.RandAugment") == (
        "the model needs keras_cv, which is not installed: pip install keras-cv")
    hint = install_hint(["tensorflow_addons"], "tensorflow_addons.layers.GroupNormalization is not a layer")
    assert hint is not None and "pip install tensorflow-addons\n" not in hint
    assert "works only with Keras 2 (tf-keras), not with Keras 3: the script needs Keras 2" in hint
    assert hint.endswith("with TF_USE_LEGACY_KERAS=1 in the environment (tf.keras is then tf-keras)")
    assert install_hint(["cv2"], "an error that names no stub") is None


# ---------------------------------------------------------------- failures, cached


@pytest.mark.slow  # a build child, stopped at its time limit
def test_a_timed_out_build_is_cached_names_its_flag_and_a_longer_limit_builds_again(tmp_path, monkeypatch):
    path = tmp_path / "hang.py"
    path.write_text(HANG)
    cache = tmp_path / "cache"
    started: list[float] = []
    real = api.run_child

    def counting(*args, **kwargs):
        started.append(time.perf_counter())
        return real(*args, **kwargs)

    monkeypatch.setattr(api, "run_child", counting)
    with pytest.raises(BuildError) as first:
        api.build_report(path, BuildOptions(timeout=2), cache)
    assert str(first.value) == (f"{path}: the build timed out after 2 s (raise it with --build-timeout, or timeout "
                                "in [tool.kerasfit.build])")
    t = time.perf_counter()
    with pytest.raises(BuildError) as again:
        api.build_report(path, BuildOptions(timeout=2), cache)
    assert time.perf_counter() - t < 1.0 and len(started) == 1  # answered from the cache: no child
    assert str(again.value).endswith("(cached: this source failed to build with these options before; "
                                     "--no-cache builds it again)")
    with pytest.raises(BuildError):
        api.build_report(path, BuildOptions(timeout=3), cache)  # a longer limit may build: it tries
    assert len(started) == 2
    with pytest.raises(BuildError):
        api.build_report(path, BuildOptions(timeout=2, use_cache=False), cache)
    assert len(started) == 3


@pytest.mark.build
def test_a_failed_build_rerun_is_answered_from_the_cache_in_under_a_second(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("import keras\n\ndef build_model():\n    raise ValueError('no such width')\n")
    cache = tmp_path / "cache"
    first = _kerasfit(["report", str(path)], tmp_path, cache)
    assert first.returncode == 2 and "ValueError: no such width" in first.stderr
    t = time.perf_counter()
    again = _kerasfit(["report", str(path), "--output-format", "json"], tmp_path, cache)
    took = time.perf_counter() - t
    data = json.loads(again.stdout)  # the failure is a JSON object on stdout
    assert data["ok"] is False and data["file"] == str(path)
    assert "ValueError: no such width" in data["error"] and "(cached: this source failed" in data["error"]
    assert took < 1.0 or os.getloadavg()[0] > (os.cpu_count() or 1), took


# ---------------------------------------------------------------- the same options


@pytest.mark.slow  # a build child, stopped at its time limit
def test_failures_in_json_are_json_objects_for_report_and_check(tmp_path):
    path = tmp_path / "hang.py"
    path.write_text(HANG)
    cache = tmp_path / "cache"
    report = _kerasfit(["report", "hang.py", "--build-timeout", "2", "--output-format", "json"], tmp_path, cache)
    assert report.returncode == 2
    data = json.loads(report.stdout)
    assert data["ok"] is False and "raise it with --build-timeout" in data["error"]
    check = _kerasfit(["check", "hang.py", "--build", "--build-timeout", "2", "--output-format", "json"],
                      tmp_path, cache)
    assert json.loads(check.stdout) == []  # the findings' list stays what it is
    (line,) = [ln for ln in check.stderr.splitlines() if ln.startswith("{")]
    failure = json.loads(line)
    assert failure["file"].endswith("hang.py") and "build cross-check failed" in failure["error"]


@pytest.mark.build
def test_check_build_takes_the_input_shape_report_takes(tmp_path):
    path = tmp_path / "shape_from_a_batch.py"
    path.write_text((SCRIPTS / "shape_from_a_batch.py").read_text())
    cache = tmp_path / "cache"
    without = _kerasfit(["check", path.name, "--build"], tmp_path, cache)
    assert "pass --input-shape with its non-batch dims" in without.stdout
    with_shape = _kerasfit(["check", path.name, "--build", "--input-shape", "120,7"], tmp_path, cache)
    assert "build cross-check failed" not in with_shape.stdout + with_shape.stderr, with_shape.stdout
    bad = _kerasfit(["check", path.name, "--build", "--input-shape", "120,-7"], tmp_path, cache)
    assert bad.returncode == 2 and "--input-shape must be positive dims like 256,256,3" in bad.stderr


# ---------------------------------------------------------------- a cached report, any size


@pytest.mark.build
def test_a_cached_report_of_resnet50_takes_under_a_second(tmp_path):
    model = tmp_path / "resnet50.py"
    model.write_text((ROOT / "fixtures" / "crosscheck" / "resnet50.py").read_text())
    cache = tmp_path / "cache"
    cold = _kerasfit(["report", model.name], tmp_path, cache)
    assert cold.returncode == 0, cold.stderr
    _kerasfit(["report", model.name], tmp_path, cache)  # the first cached run renders it and keeps that
    walls, cpus = [], []
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        cached = _kerasfit(["report", model.name], tmp_path, cache)
        walls.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        assert cached.stdout == cold.stdout
    assert min(cpus) < 1.0, cpus
    # the wall clock measures the machine's other work too: held to a second when it is not overloaded
    assert min(walls) < 1.0 or os.getloadavg()[0] > (os.cpu_count() or 1), walls
