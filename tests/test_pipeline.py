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


# ---- fixable / unfixable / extend-fixable (ruff's semantics) ---------------------------


def _fix_run(tmp_path, table: str, *args: str):
    write(tmp_path / "pyproject.toml", "[tool.kerasfit]\n" + table)
    write(tmp_path / "model.py", BAD)
    return run("check", "model.py", "--fix", *args, cwd=tmp_path)


def test_unfixable_keeps_the_finding_but_never_fixes_it(tmp_path):
    r = _fix_run(tmp_path, 'unfixable = ["KF101"]\n')
    assert r.returncode == 1, r
    assert (tmp_path / "model.py").read_text() == BAD
    line = finding_lines(r.stdout)[0]
    assert "KF101" in line and "[*]" not in line
    # no fix is offered in machine-readable output either
    j = run("check", "model.py", "--output-format", "json", "--no-cache", cwd=tmp_path).json()
    assert [d["fix"] for d in j] == [None]


def test_fixable_limits_fixes_to_its_codes_and_prefixes(tmp_path):
    r = _fix_run(tmp_path, 'fixable = ["KF2"]\n')
    assert (tmp_path / "model.py").read_text() == BAD, r
    r = _fix_run(tmp_path, 'fixable = ["KF1"]\n')
    assert (tmp_path / "model.py").read_text() == GOOD, r
    assert r.returncode == 0


def test_extend_fixable_adds_to_fixable_and_unfixable_wins(tmp_path):
    r = _fix_run(tmp_path, 'fixable = ["KF2"]\nextend-fixable = ["KF101"]\n')
    assert (tmp_path / "model.py").read_text() == GOOD, r
    r = _fix_run(tmp_path, 'extend-fixable = ["KF101"]\nunfixable = ["KF1"]\n')
    assert (tmp_path / "model.py").read_text() == BAD, r


def test_fixable_codes_are_validated(tmp_path):
    r = _fix_run(tmp_path, 'unfixable = ["KF999"]\n')
    assert r.returncode == 2
    assert_one_line_error(r.stderr, "pyproject.toml", "KF999")


def test_unfixable_reaches_the_cache_key(tmp_path):
    write(tmp_path / "model.py", BAD)
    first = run("check", "model.py", cwd=tmp_path)
    assert "[*]" in first.stdout
    write(tmp_path / "pyproject.toml", '[tool.kerasfit]\nunfixable = ["ALL"]\n')
    second = run("check", "model.py", cwd=tmp_path)
    assert "[*]" not in second.stdout, second.stdout


# ---- cache-dir ---------------------------------------------------------------------


def test_cache_dir_from_config_is_used_relative_to_the_project(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.kerasfit]\ncache-dir = "var/kf-cache"\n')
    write(tmp_path / "model.py", BAD)
    r = run("check", "model.py", cwd=tmp_path)
    assert r.returncode == 1
    assert (tmp_path / "var" / "kf-cache").is_dir()
    assert not (tmp_path / ".kerasfit_cache").exists()
    # and it is read back: the second run answers from it
    stats = run("check", "model.py", "--statistics", cwd=tmp_path)
    assert "(1 from cache)" in stats.stdout + stats.stderr


def test_cache_dir_config_beats_the_environment_and_the_flag_beats_both(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.kerasfit]\ncache-dir = "cfg-cache"\n')
    write(tmp_path / "model.py", BAD)
    run("check", "model.py", cwd=tmp_path, env={"KERASFIT_CACHE_DIR": str(tmp_path / "env-cache")})
    assert (tmp_path / "cfg-cache").is_dir() and not (tmp_path / "env-cache").exists()
    run("check", "model.py", "--cache-dir", str(tmp_path / "flag-cache"), cwd=tmp_path)
    assert (tmp_path / "flag-cache").is_dir()


def test_cache_dir_must_be_a_string(tmp_path):
    write(tmp_path / "pyproject.toml", "[tool.kerasfit]\ncache-dir = 3\n")
    write(tmp_path / "model.py", BAD)
    r = run("check", "model.py", cwd=tmp_path)
    assert r.returncode == 2
    assert_one_line_error(r.stderr, "pyproject.toml", "cache-dir")


def test_every_accepted_key_is_documented_in_the_readme():
    from kfhelpers import ROOT

    from kerasfit.config import _BUILD_KEYS, _KEYS

    text = (ROOT / "README.md").read_text()
    block = text[text.index("[tool.kerasfit]") :]
    missing = [k for k in sorted(_KEYS | _BUILD_KEYS) if f"\n{k} = " not in block and k != "build"]
    assert not missing, missing


def test_a_key_kerasfit_does_not_implement_is_rejected(tmp_path):
    write(tmp_path / "pyproject.toml", "[tool.kerasfit]\nline-length = 88\n")
    write(tmp_path / "model.py", BAD)
    r = run("check", "model.py", cwd=tmp_path)
    assert r.returncode == 2
    assert_one_line_error(r.stderr, "unknown key", "line-length")
