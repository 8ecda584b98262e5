"""One pipeline, nothing that pretends: severities that gate the exit code, and every
accepted configuration key doing what ruff's key of the same name does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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

    from kerasfit.project.config import _BUILD_KEYS, _KEYS

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


# ---- smaller command-line promises ---------------------------------------------------


def test_short_help_and_version_flags(tmp_path):
    from kerasfit import __version__

    for flag in ("-V", "--version"):
        r = run(flag, cwd=tmp_path)
        assert r.returncode == 0 and r.stdout.strip() == f"kerasfit {__version__}"
    for argv in (("-h",), ("check", "-h"), ("explain", "-h")):
        r = run(*argv, cwd=tmp_path)
        assert r.returncode == 0 and "Usage: kerasfit" in r.stdout, argv


def test_fix_from_stdin_writes_the_file_to_stdout_and_what_remains_to_stderr(tmp_path):
    r = run("check", "--fix", "-", "--stdin-filename", "model.py", cwd=tmp_path, stdin=BAD + NOFIX)
    assert r.returncode == 1
    assert r.stdout == GOOD + NOFIX  # the fixed file, nothing else
    remaining = finding_lines(r.stderr)
    assert len(remaining) == 1 and remaining[0].startswith("model.py:4:") and "KF101" in remaining[0]
    assert "Found 2 finding(s) (1 fixed, 1 remaining)." in r.stderr
    clean = run("check", "--fix", "-", cwd=tmp_path, stdin=BAD)
    assert clean.returncode == 0 and clean.stdout == GOOD and "1 fixed, 0 remaining" in clean.stderr


def test_missing_build_extra_is_named_in_quotes_a_shell_will_not_glob(tmp_path):
    # Hide TensorFlow from the build child even where it is installed.
    block = tmp_path / "block"
    write(
        block / "sitecustomize.py",
        "import sys\n"
        "class _NoTF:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('tensorflow', 'tf_keras', 'keras'):\n"
        "            raise ImportError(f'No module named {name!r}')\n"
        "sys.meta_path.insert(0, _NoTF())\n",
    )
    write(tmp_path / "model.py", "import tensorflow as tf\n\ndef build_model():\n    return None\n")
    r = run("report", "model.py", "--no-cache", cwd=tmp_path, env={"PYTHONPATH": str(block)})
    assert r.returncode == 2
    assert 'pip install "kerasfit[build]"' in r.stderr, r.stderr


def test_test_script_installs_once_per_pyproject(tmp_path):
    """scripts/test.sh, run for real against a stand-in venv whose python logs its calls."""
    import os
    import shutil
    import stat
    import subprocess

    from kfhelpers import ROOT

    repo = tmp_path / "repo"
    write(repo / "scripts" / "test.sh", (ROOT / "scripts" / "test.sh").read_text())
    write(repo / "pyproject.toml", (ROOT / "pyproject.toml").read_text())
    log = tmp_path / "calls.log"
    bin_ = repo / ".venv" / "bin"
    write(bin_ / "python", f'#!/bin/sh\necho "$*" >> {log}\n')
    write(bin_ / "nvim", "#!/bin/sh\n")  # present: no apt-get
    for exe in (bin_ / "python", bin_ / "nvim"):
        exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    write(bin_ / "activate", f'PATH="{bin_}:$PATH"\nexport PATH\n')
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "KERASFIT_REINSTALL")}

    def calls(*args: str) -> list[str]:
        proc = subprocess.run(["bash", str(repo / "scripts" / "test.sh"), *args, "-q"], env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        out = log.read_text().splitlines()
        log.unlink()
        return out

    first = calls()
    assert any("pip install" in c and ".[dev,build,lsp]" in c for c in first), first
    assert first[-1] == "-m pytest -n auto -q"  # every test, one worker per core
    assert calls() == ["-m pytest -n auto -q"]  # same pyproject: straight to the tests
    assert calls("--fast") == ["-m pytest -n auto -m not slow -q"]  # the fast lane
    write(repo / "pyproject.toml", (ROOT / "pyproject.toml").read_text() + "\n# changed\n")
    assert any("pip install" in c for c in calls())
    env["KERASFIT_REINSTALL"] = "1"
    assert any("pip install" in c for c in calls())
    assert shutil.which("sha256sum")


def test_no_source_folder_has_a_name_tools_take_for_generated_output():
    # ruff, pytest and .gitignore templates skip build/, dist/ and out/: the cross-check's
    # code, tests and fixtures must not live under such a name (issue: a folder named build)
    from kfhelpers import ROOT

    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    dirs = {part for line in tracked.splitlines() for part in Path(line).parts[:-1]}
    assert not dirs & {"build", "dist", "out"}, sorted(dirs & {"build", "dist", "out"})


def test_the_fast_lane_leaves_out_builds_editors_the_browser_precommit_and_fuzzing():
    from kfhelpers import ROOT

    slow = ["tests/lsp/test_lsp_nvim.py", "tests/lsp/test_lsp_vim.py", "tests/lsp/test_lsp_emacs.py",
            "tests/test_fuzz.py", "tests/test_properties.py", "tests/test_precommit.py",
            "tests/crosscheck/test_html.py::test_bars_render_in_proportion_to_time",
            "tests/crosscheck/test_stage.py"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "--collect-only",
                           "-q", "-m", "slow", *slow], cwd=ROOT, capture_output=True, text=True, timeout=300)
    picked = [line for line in proc.stdout.splitlines() if "::" in line]
    # every editor, browser, pre-commit and fuzz test is slow; of test_stage.py only its build
    assert {line.split("::")[0] for line in picked} == {s.split("::")[0] for s in slow}, proc.stdout[-2000:]
    assert [line for line in picked if "test_stage.py" in line] == ["tests/crosscheck/test_stage.py::" + _build_test_in_stage()]


def _build_test_in_stage() -> str:
    from kfhelpers import ROOT

    text = (ROOT / "tests" / "crosscheck" / "test_stage.py").read_text()
    return text.split("@pytest.mark.build\n", 1)[1].split("def ", 1)[1].split("(", 1)[0]
