"""What the cross-check's script tests share."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "fixtures" / "crosscheck" / "scripts"


@pytest.fixture()
def script(tmp_path):
    """Copies a fixture script into the test's directory (a build writes beside it)."""
    def copy(name: str) -> Path:
        dst = tmp_path / name
        shutil.copy(SCRIPTS / name, dst)
        return dst
    return copy
