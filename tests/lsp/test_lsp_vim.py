"""A real editor: Vim with ALE (Debian's `vim` and `vim-ale`) against `kerasfit lsp`.

What ALE lists for the buffer must be what `kerasfit check --output-format json`
reports: code, line, column and message.
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
SCRIPT = HERE / "vim_ale.vim"
ALE_DIR = Path("/usr/share/vim-ale")
MODEL = (
    "import tf_keras\n"
    "from tf_keras import layers\n"
    "\n"
    "bn = layers.BatchNormalization(fused=False)\n"
    "conv = layers.Conv2D(30, 3, padding='same')\n"
)


def _vim() -> str:
    vim = shutil.which("vim")
    if vim is None or not (ALE_DIR / "plugin" / "ale.vim").is_file():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("vim / ALE not installed but CI=true: install Debian's `vim` and `vim-ale`")
        pytest.skip("vim and ALE are not installed (apt-get install vim vim-ale)")
    return vim


def test_vim_ale_shows_what_kerasfit_check_reports(tmp_path: Path):
    vim = _vim()
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    out = tmp_path / "ale.json"
    env = dict(os.environ, KERASFIT_VIM_EXE=sys.executable, KERASFIT_VIM_OUT=str(out), KERASFIT_ALE_DIR=str(ALE_DIR),
               HOME=str(tmp_path))
    # Vim quits on end of input: keep stdin open (and silent) until it is done
    with open(tmp_path / "vim.log", "wb") as log:
        proc = subprocess.Popen([vim, "-N", "-u", str(SCRIPT), "-i", "NONE", "-n", "--not-a-term", str(model)],
                                cwd=tmp_path, env=env, stdin=subprocess.PIPE, stdout=log, stderr=log)
        try:
            proc.wait(timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.stdin.close()
    got = json.loads(out.read_text())
    check = subprocess.run([sys.executable, "-m", "kerasfit", "check", "--no-cache", "--output-format", "json", "model.py"],
                           cwd=tmp_path, capture_output=True, text=True)
    want = json.loads(check.stdout)
    assert want, check.stdout
    assert sorted((d["code"], d["lnum"], d["col"], d["text"]) for d in got) == sorted(
        (d["code"], d["location"]["row"], d["location"]["column"], d["message"]) for d in want
    )
