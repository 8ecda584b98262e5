from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("KERASFIT_NO_PARALLEL", "")


def pytest_addoption(parser):
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="rewrite fixtures/*.diagnostics.txt and *.fixed.py from the current output (review the diff!)",
    )


@pytest.fixture
def update_goldens(request) -> bool:
    return bool(request.config.getoption("--update-goldens"))


@pytest.fixture
def kerasfit_cmd() -> list[str]:
    """The installed console script (falls back to running the module)."""
    exe = Path(sys.executable).with_name("kerasfit")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "kerasfit"]


def pytest_collection_modifyitems(config, items):
    # A TensorFlow build is slow wherever it is: `build` implies `slow`, so a new build
    # test cannot land in the fast lane by forgetting the second marker.
    for item in items:
        if item.get_closest_marker("build") is not None and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)
