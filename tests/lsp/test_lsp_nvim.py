"""A real editor: headless Neovim's built-in LSP client against `kerasfit lsp`.

The diagnostics Neovim shows must be the ones `kerasfit check --output-format json`
reports for the same file: same code, line, column and message. Neovim stores byte
columns, converted from the server's UTF-16 columns; the fixture has an emoji before
a finding, so a wrong column unit shows up as a mismatch.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.lsp, pytest.mark.slow]  # a real editor

HERE = Path(__file__).parent
SCRIPT = HERE / "nvim_diagnostics.lua"
FIXTURE = HERE / "fixtures" / "nvim_model.py"


def _nvim() -> str:
    nvim = shutil.which("nvim")
    if nvim is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("nvim is not installed but CI=true: install Debian's `neovim` package")
        pytest.skip("nvim is not installed (apt-get install neovim)")
    return nvim


def _char_col(line: str, byte_col: int) -> int:
    return len(line.encode("utf-8")[:byte_col].decode("utf-8"))


def test_neovim_shows_what_kerasfit_check_reports(tmp_path: Path):
    nvim = _nvim()
    model = tmp_path / FIXTURE.name
    shutil.copy(FIXTURE, model)
    out = tmp_path / "nvim.json"
    env = dict(
        os.environ,
        KERASFIT_NVIM_CMD=json.dumps([sys.executable, "-m", "kerasfit", "lsp"]),
        KERASFIT_NVIM_OUT=str(out),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    proc = subprocess.run(
        [nvim, "--headless", "--clean", "-n", str(model), "-c", f"luafile {SCRIPT}"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(out.read_text())

    check = subprocess.run(
        [sys.executable, "-m", "kerasfit", "check", "--no-cache", "--output-format", "json", str(model)],
        cwd=tmp_path, capture_output=True, text=True,
    )
    expected = json.loads(check.stdout)
    assert expected, check.stderr  # the fixture has findings

    lines = model.read_text(encoding="utf-8").splitlines()
    shown = sorted(
        (
            d["code"],
            d["lnum"] + 1,
            _char_col(lines[d["lnum"]], d["col"]) + 1,
            d["end_lnum"] + 1,
            _char_col(lines[d["end_lnum"]], d["end_col"]) + 1,
            d["message"],
        )
        for d in got["diagnostics"]
    )
    want = sorted(
        (
            d["code"],
            d["location"]["row"],
            d["location"]["column"],
            d["end_location"]["row"],
            d["end_location"]["column"],
            d["message"],
        )
        for d in expected
    )
    assert shown == want
    assert all(d["source"] == "kerasfit" for d in got["diagnostics"])
    # the emoji line really exercises the conversion (byte column != character column)
    emoji_row = next(i for i, l in enumerate(lines) if "😀" in l)
    assert any(d["lnum"] == emoji_row and d["col"] != _char_col(lines[emoji_row], d["col"]) for d in got["diagnostics"])
