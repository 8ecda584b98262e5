"""One pipeline, nothing that pretends: severities that gate the exit code, and every
accepted configuration key doing what ruff's key of the same name does."""

from __future__ import annotations

import json

import pytest

from kfhelpers import BAD, GOOD, NOFIX, assert_one_line_error, finding_lines, run, write

# The output head's width is set by the task: KF102 reports it at info severity.
HEAD = """import tensorflow as tf

inputs = tf.keras.Input((32,))
x = tf.keras.layers.Dense(64, activation="relu")(inputs)
outputs = tf.keras.layers.Dense(10, activation="softmax")(x)
"""


# ---- severity and fail-on ------------------------------------------------------------


def test_info_findings_alone_exit_0_and_say_they_were_not_counted(tmp_path):
    write(tmp_path / "head.py", HEAD)
    r = run("check", "head.py", "--no-cache", cwd=tmp_path)
    assert r.returncode == 0, r
    assert len(finding_lines(r.stdout)) == 1 and "KF102 [info]" in r.stdout
    assert "Not counted toward the exit code: 1 info finding(s) (`--fail-on info` counts them)." in r.stdout


def test_fail_on_info_counts_them(tmp_path):
    write(tmp_path / "head.py", HEAD)
    r = run("check", "head.py", "--no-cache", "--fail-on", "info", cwd=tmp_path)
    assert r.returncode == 1, r
    assert "Not counted" not in r.stdout


def test_fail_on_info_from_config_and_command_line_wins(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.kerasfit]\nfail-on = "info"\n')
    write(tmp_path / "head.py", HEAD)
    assert run("check", "head.py", "--no-cache", cwd=tmp_path).returncode == 1
    assert run("check", "head.py", "--no-cache", "--fail-on", "warning", cwd=tmp_path).returncode == 0


def test_fail_on_error_lets_warnings_pass_but_not_errors(tmp_path):
    write(tmp_path / "model.py", BAD)
    write(tmp_path / "broken.py", "import tensorflow as tf\ndef f(:\n")
    r = run("check", "model.py", "--no-cache", "--fail-on", "error", cwd=tmp_path)
    assert r.returncode == 0, r
    assert "1 warning finding(s) (`--fail-on warning` counts them)" in r.stdout
    assert run("check", "broken.py", "--no-cache", "--fail-on", "error", cwd=tmp_path).returncode == 1


def test_stdin_info_only_exits_0(tmp_path):
    r = run("check", "-", "--stdin-filename", "head.py", cwd=tmp_path, stdin=HEAD)
    assert r.returncode == 0, r
    assert "KF102 [info]" in r.stdout


def test_bad_fail_on_in_config_is_a_one_line_error(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.kerasfit]\nfail-on = "never"\n')
    write(tmp_path / "head.py", HEAD)
    r = run("check", "head.py", cwd=tmp_path)
    assert r.returncode == 2
    assert_one_line_error(r.stderr, "pyproject.toml", "fail-on", "'never'")
