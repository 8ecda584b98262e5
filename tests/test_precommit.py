"""The pre-commit hooks, through a real `pre-commit try-repo` (installs kerasfit into pre-commit's env).

`try-repo` on a dirty working tree only carries tracked files (`git add -u`) into its
shadow commit, so new, untracked modules would be missing; the hooks repo is therefore
a copy of the working tree (tracked + untracked, minus ignored files) committed in a
temporary git repository. Both hooks run in one try-repo, so kerasfit is installed once
per run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kfhelpers import BAD, GOOD, ROOT

pytestmark = pytest.mark.slow  # pre-commit installs kerasfit into its own env

GIT_ENV = {
    "GIT_AUTHOR_NAME": "kerasfit tests", "GIT_AUTHOR_EMAIL": "tests@kerasfit.invalid",
    "GIT_COMMITTER_NAME": "kerasfit tests", "GIT_COMMITTER_EMAIL": "tests@kerasfit.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _pre_commit() -> list[str]:
    exe = Path(sys.executable).with_name("pre-commit")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "pre_commit"]


def _git(*args: str, cwd: Path, env: dict) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    home = tmp_path_factory.mktemp("home")
    e = {k: v for k, v in os.environ.items() if not k.startswith(("KERASFIT_", "GIT_", "PRE_COMMIT"))}
    e.update(GIT_ENV, HOME=str(home), PRE_COMMIT_HOME=str(tmp_path_factory.mktemp("pre-commit-home")), NO_COLOR="1")
    return e


@pytest.fixture(scope="module")
def hooks_repo(tmp_path_factory, env) -> Path:
    files = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT, env=env).split("\0")
    dest = tmp_path_factory.mktemp("hooks-repo")
    for rel in filter(None, files):
        src = ROOT / rel
        if not src.is_file() or rel.startswith(("tests/", "benchmarks/")):
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)
    assert (dest / ".pre-commit-hooks.yaml").is_file()
    _git("init", "-q", cwd=dest, env=env)
    _git("add", "-A", cwd=dest, env=env)
    _git("commit", "-q", "-m", "hooks under test", cwd=dest, env=env)
    return dest


def _try_repo(hooks_repo: Path, project: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*_pre_commit(), "try-repo", str(hooks_repo), "--all-files", "--color", "never"],
        cwd=project, env=env, capture_output=True, text=True, timeout=900,
    )


def _status(output: str, hook_name: str) -> str:
    m = re.search(rf"^{re.escape(hook_name)}\.+(Passed|Failed|Skipped)\s*$", output, re.M)
    assert m, f"no status line for {hook_name!r}:\n{output}"
    return m.group(1)


def test_hooks_check_fails_fix_fixes_second_run_passes(tmp_path, hooks_repo, env):
    project = tmp_path / "project"
    project.mkdir()
    (project / "model.py").write_text(BAD)
    (project / "notes.py").write_text("print('no tensorflow here')\n")
    _git("init", "-q", cwd=project, env=env)
    _git("add", "-A", cwd=project, env=env)

    first = _try_repo(hooks_repo, project, env)
    out = first.stdout + first.stderr
    assert first.returncode == 1, out
    assert _status(out, "kerasfit") == "Failed", out
    assert "model.py:2:6: KF101" in out, out
    assert _status(out, "kerasfit (fix)") == "Failed", out  # it modified a file
    assert "files were modified by this hook" in out
    assert (project / "model.py").read_text() == GOOD

    second = _try_repo(hooks_repo, project, env)
    out2 = second.stdout + second.stderr
    assert second.returncode == 0, out2
    assert _status(out2, "kerasfit") == "Passed", out2
    assert _status(out2, "kerasfit (fix)") == "Passed", out2
    assert (project / "model.py").read_text() == GOOD


# A classifier whose only finding is the output head's width (KF102 at info severity):
# the task fixes that width, so neither hook may fail on it.
OUTPUT_HEAD_ONLY = """import tensorflow as tf


def build_model():
    inputs = tf.keras.Input((32,))
    x = tf.keras.layers.Dense(64, activation="relu")(inputs)
    outputs = tf.keras.layers.Dense(10, activation="softmax")(x)
    return tf.keras.Model(inputs, outputs)
"""


def test_an_info_finding_alone_does_not_fail_the_hooks(tmp_path, hooks_repo, env):
    project = tmp_path / "classifier"
    project.mkdir()
    (project / "model.py").write_text(OUTPUT_HEAD_ONLY)
    _git("init", "-q", cwd=project, env=env)
    _git("add", "-A", cwd=project, env=env)

    proc = _try_repo(hooks_repo, project, env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert _status(out, "kerasfit") == "Passed", out
    assert _status(out, "kerasfit (fix)") == "Passed", out
    assert (project / "model.py").read_text() == OUTPUT_HEAD_ONLY


def _notebook(*cells: str) -> str:
    return json.dumps(
        {
            "cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                       "source": src.splitlines(keepends=True)} for src in cells],
            "metadata": {"language_info": {"name": "python"}},
            "nbformat": 4,
            "nbformat_minor": 5,
        },
        indent=1,
    ) + "\n"


def test_a_committed_notebook_is_checked_not_skipped(tmp_path, hooks_repo, env):
    project = tmp_path / "nbproject"
    project.mkdir()
    nb = project / "train.ipynb"
    nb.write_text(_notebook("%matplotlib inline\n", BAD))
    _git("init", "-q", cwd=project, env=env)
    _git("add", "-A", cwd=project, env=env)

    proc = _try_repo(hooks_repo, project, env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert _status(out, "kerasfit") == "Failed", out  # not "(no files to check) Skipped"
    assert "train.ipynb:cell 2:2:6: KF101" in out, out
    assert _status(out, "kerasfit (fix)") == "Failed", out  # it fixed the cell
    cells = json.loads(nb.read_text())["cells"]
    assert "".join(cells[1]["source"]) == GOOD
    assert "".join(cells[0]["source"]) == "%matplotlib inline\n"

