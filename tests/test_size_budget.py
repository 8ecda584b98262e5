"""One big input never takes the rest down: the size budget, and a checker that dies under
a memory limit costing only its file, whatever the number of processes."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from kfhelpers import finding_lines, kerasfit_argv, run

SMALL = "import tensorflow as tf\nx = tf.keras.layers.Dense(30)\n"


def _model_file(lines: int) -> str:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    try:
        from large_file import generate
    finally:
        sys.path.pop(0)
    return generate(lines)


def test_file_over_the_budget_is_one_line_and_the_rest_is_checked(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.kerasfit]\nmax-file-size = 2000\n")
    big = _model_file(120)
    (tmp_path / "big.py").write_text(big)
    (tmp_path / "small.py").write_text(SMALL)
    r = run("check", "--no-cache", ".", cwd=tmp_path)
    assert r.returncode == 1, r
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if "big.py" in ln]
    assert len(lines) == 1, r
    assert f"{len(big.encode()):,} bytes" in lines[0] and "max-file-size (2,000 bytes)" in lines[0], lines
    assert [f.split(":")[0] for f in finding_lines(r.stdout)] == ["small.py"], r


def test_default_budget_lets_ordinary_files_through(tmp_path):
    (tmp_path / "model.py").write_text(_model_file(400))
    r = run("check", "--no-cache", "--exit-zero", "model.py", cwd=tmp_path)
    assert "max-file-size" not in r.stdout + r.stderr and finding_lines(r.stdout), r


def test_notebook_is_measured_by_its_cells_source(tmp_path):
    """Outputs (images, logs) do not count toward the budget; the code does."""
    (tmp_path / "pyproject.toml").write_text("[tool.kerasfit]\nmax-file-size = 1000\n")
    meta = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}

    def notebook(source: str, output: str) -> str:
        cell = {"cell_type": "code", "execution_count": 1, "metadata": {}, "source": source,
                "outputs": [{"output_type": "stream", "name": "stdout", "text": output}]}
        return json.dumps({"cells": [cell], "metadata": meta, "nbformat": 4, "nbformat_minor": 4})

    (tmp_path / "logs.ipynb").write_text(notebook(SMALL, "x" * 50_000))
    (tmp_path / "code.ipynb").write_text(notebook(SMALL + "y = 1\n" * 300, ""))
    r = run("check", "--no-cache", ".", cwd=tmp_path)
    assert any(f.startswith("logs.ipynb:cell 1:2:") for f in finding_lines(r.stdout)), r
    over = [ln for ln in (r.stdout + r.stderr).splitlines() if "code.ipynb" in ln]
    assert len(over) == 1 and "over max-file-size" in over[0], r


def test_bad_budget_in_config_is_a_config_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.kerasfit]\nmax-file-size = "2MB"\n')
    (tmp_path / "small.py").write_text(SMALL)
    r = run("check", "--no-cache", ".", cwd=tmp_path)
    assert r.returncode == 2 and "max-file-size must be a positive integer" in r.stdout + r.stderr, r


@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_checker_dying_under_a_memory_limit_costs_only_its_file(tmp_path, jobs):
    """libcst's parser aborts the process when an allocation fails; under ``ulimit -v`` the
    in-process path used to die with the whole run and print nothing for any file."""
    (tmp_path / "big.py").write_text(_model_file(16_000))
    (tmp_path / "small.py").write_text(SMALL)
    limit = 400 * 1024 * 1024  # enough to start and check small.py; far from enough for big.py

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = {k: v for k, v in os.environ.items() if not k.startswith("KERASFIT_")}
    if jobs == "1":
        env["KERASFIT_NO_PARALLEL"] = "1"
    p = subprocess.run([*kerasfit_argv(), "check", "--no-cache", "-j", jobs, "big.py", "small.py"],
                       cwd=tmp_path, capture_output=True, text=True, env=env, preexec_fn=cap, timeout=600)
    assert p.returncode == 1, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    assert "big.py: the checker process died on this file, not checked" in p.stdout + p.stderr, p.stderr[-2000:]
    assert [f.split(":")[0] for f in finding_lines(p.stdout)] == ["small.py"], p.stdout[-2000:]


def test_the_budget_from_the_command_line_beats_the_config(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.kerasfit]\nmax-file-size = 100000\n")
    (tmp_path / "model.py").write_text(_model_file(120))
    r = run("check", "--no-cache", "--max-file-size", "500", "model.py", cwd=tmp_path)
    assert r.returncode == 1 and "over max-file-size (500 bytes)" in r.stdout + r.stderr, r
    assert run("check", "--no-cache", "--max-file-size", "0", "model.py", cwd=tmp_path).returncode == 2
