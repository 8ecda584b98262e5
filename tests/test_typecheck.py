"""mypy (not strict yet) over the modules pyproject's [tool.mypy] lists: the public rule
API, the helpers it exports, config, registry and the plain data types."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kfhelpers import ROOT


def test_listed_modules_type_check(tmp_path):
    pytest.importorskip("mypy")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache")],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Success" in proc.stdout
