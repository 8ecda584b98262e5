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

from kfhelpers import finding_lines, kerasfit_argv, run, write

SMALL = "import tensorflow as tf\nx = tf.keras.layers.Dense(30)\n"


def _bench():  # benchmarks/large_file.py: its generated model file, its measure of peak memory
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    try:
        import large_file
    finally:
        sys.path.pop(0)
    return large_file


def _model_file(lines: int) -> str:
    return _bench().generate(lines)


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


# ---- what a check costs is bounded by the limit, whatever the input's shape (issue 30) ---------

TF = "import tensorflow as tf\n"
TREE = "import tensorflow as tf\nfrom tensorflow.keras import layers\n\n\ndef block{i}(x):\n    return layers.Dense({w})(x)\n"


def _measured(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, float, float]:
    """(exit code, stdout + stderr, peak RSS in MB of the largest process, seconds) of a
    kerasfit run (the benchmark's measure: started by a small process)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("KERASFIT_")}
    full.update(env or {})
    rc, took, peak, text = _bench().measure([*kerasfit_argv(), *args], cwd, full)
    return rc, text, peak, took


@pytest.mark.parametrize("shape", ["one-char lines", "million-argument call"])
def test_pathological_shapes_under_the_byte_limit_are_refused_cheaply(tmp_path, shape):
    """200k one-character lines took 2 GB and 26 s, a 2.08 MB call with a million
    arguments 6.7 GB, both under the 2 MiB limit: a file counts its lines and punctuation
    marks as well as its bytes (core.sourcefile.parse_cost)."""
    text = TF + ("1\n" * 200_000 if shape == "one-char lines" else "f(" + "a," * 1_040_000 + ")\n")
    assert len(text.encode()) < 2 * 1024 * 1024
    write(tmp_path / "big.py", text)
    write(tmp_path / "small.py", SMALL)
    code, out, peak, took = _measured(["check", "--no-cache", "--isolated", "-j", "1", "."], tmp_path,
                                      {"KERASFIT_NO_PARALLEL": "1"})
    assert code == 1, out[-2000:]
    over = [ln for ln in out.splitlines() if "big.py" in ln]
    assert len(over) == 1 and "over max-file-size" in over[0] and "counted as" in over[0], out[-2000:]
    assert any(ln.startswith("small.py:") for ln in out.splitlines()), out[-2000:]
    assert peak < 300 and took < 30, (peak, took)


@pytest.mark.parametrize("cells", [150_000, 1_000_000])
def test_empty_notebook_cells_count_toward_the_limit(tmp_path, cells):
    """A million empty cells took 94 s and 6 GB with --max-file-size 4096: each cell counts
    as a line before the notebook's JSON is read (and the JSON's values count too)."""
    cell = '{"cell_type": "code", "execution_count": null, "metadata": {}, "outputs": [], "source": []}'
    head = '{"cells": [{"cell_type": "code", "execution_count": null, "metadata": {}, "outputs": [], "source": ["import tensorflow as tf"]}, '
    meta = '"metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}'
    write(tmp_path / "cells.ipynb", head + ", ".join([cell] * cells) + "], " + meta + ', "nbformat": 4, "nbformat_minor": 4}')
    code, out, peak, took = _measured(["check", "--no-cache", "--isolated", "--max-file-size", "4096", "cells.ipynb"],
                                      tmp_path, {"KERASFIT_NO_PARALLEL": "1"})
    assert code == 1, out[-2000:]
    assert "cells.ipynb" in out and ("cells" in out or "JSON values" in out) and "not checked" in out, out[-2000:]
    assert peak < 400 and took < 30, (peak, took)


def _tree(root: Path, n: int = 8) -> None:
    for i in range(n):
        write(root / f"m{i}.py", TREE.format(i=i, w=31 + 10 * i))  # (no width a multiple of 8)


@pytest.mark.parametrize("where", ["build/generated.py", "generated.py"])
def test_the_project_index_never_reads_an_excluded_or_oversize_file(tmp_path, where):
    """One generated file of 6 MB in build/ (excluded) or beside the code (over the limit)
    was read and parsed by the project index's scan of the tree: a 0.5 s check took 18-31 s
    and 4.4 GB with an 18 MB one."""
    _tree(tmp_path)
    big = "".join(f"def gen_{i}(x):\n    return m0.block0(x) + {i}\n\n\n" for i in range(150_000))
    write(tmp_path / where, "import m0\n" + big)
    code, out, peak, took = _measured(["check", "--no-cache", "-j", "1", "."], tmp_path, {"KERASFIT_NO_PARALLEL": "1"})
    assert code == 1, out[-2000:]
    assert sum(1 for ln in out.splitlines() if ": KF102" in ln) == 8, out[-3000:]
    assert peak < 250 and took < 30, (peak, took, out[-1000:])


def test_a_fifo_named_py_in_a_tree_does_not_hang_the_parallel_check(tmp_path):
    """The project index's scan of the tree opened it and blocked forever (the one-job
    path already said 'a FIFO, not a source file')."""
    _tree(tmp_path)
    os.mkfifo(tmp_path / "pipe.py")
    p = subprocess.run([*kerasfit_argv(), "check", "--no-cache", "-j", "2", "."], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120, env={k: v for k, v in os.environ.items() if not k.startswith("KERASFIT_")})
    assert p.returncode == 1, p.stderr[-2000:]
    assert "pipe.py: a FIFO, not a source file, skipped" in p.stdout + p.stderr
    assert sum(1 for ln in p.stdout.splitlines() if ": KF102" in ln) == 8, p.stdout[-3000:]


def test_a_link_to_dev_zero_named_py_is_never_read(tmp_path):
    """``zero.py -> /dev/zero`` committed to a tree was read without limit by the index (an
    internal error after all memory, and every result lost)."""
    _tree(tmp_path)
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    (tmp_path / "other.py").symlink_to(tmp_path.parent / "elsewhere.py")
    write(tmp_path.parent / "elsewhere.py", TF)
    code, out, peak, took = _measured(["check", "--no-cache", "-j", "2", "."], tmp_path)
    assert code == 1, out[-2000:]
    assert "zero.py: a device, not a source file, skipped" in out, out[-2000:]
    assert sum(1 for ln in out.splitlines() if ": KF102" in ln) == 8, out[-3000:]
    assert "internal error" not in out and took < 60, (took, out[-2000:])
