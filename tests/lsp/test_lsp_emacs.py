"""A real editor: Emacs 28 with eglot (Debian's `emacs-nox` and `elpa-eglot`) against `kerasfit lsp`.

Emacs loads the README's eglot configuration exactly as written, visits a small tf-keras
file and must show (through Flymake) what `kerasfit check --output-format json` reports:
code, line, column and message, checked with the target the configuration sets. Then the README's fix-everything-safe command must leave
the buffer as `kerasfit check --fix` leaves the file.
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

pytestmark = [pytest.mark.lsp, pytest.mark.slow]  # a real editor

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
DRIVER = HERE / "emacs_eglot.el"
MODEL = (
    "import tf_keras\n"
    "from tf_keras import layers\n"
    "\n"
    "\n"
    "def head(x):\n"
    "    x = layers.Conv2D(32, 3, padding='same')(x)\n"
    "    x = layers.BatchNormalization(fused=False)(x)  # KF101, with a safe fix: its input is 4-D\n"
    "    return layers.Conv2D(30, 3, padding='same')(x)\n"
)


def readme_eglot_config() -> tuple[str, str, str]:
    """The README's "Emacs (eglot)" section: its elisp block, the target the block sets,
    and the fix-all expression it tells users to run with M-:."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("### Emacs (eglot)", 1)[1].split("\n### ", 1)[0]
    found = re.search(r"```elisp\n(.*?)```", section, re.S)
    assert found, "README's Emacs section has no elisp block"
    target = re.search(r':target "([^"]+)"', found.group(1))
    assert target, "the README's eglot config shows no setting"
    fix_all = re.search(r"`M-: (\(eglot-code-actions .*?\))`", section)
    assert fix_all, "the README's Emacs section shows no fix-all command"
    return found.group(1), target.group(1), fix_all.group(1)


def _emacs() -> str:
    emacs = shutil.which("emacs")
    if emacs is not None:
        probe = subprocess.run([emacs, "--batch", "--eval", "(package-activate-all)", "--eval",
                                "(princ (if (fboundp 'eglot-ensure) \"yes\" \"no\"))"],
                               capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        if probe.stdout.strip().endswith("yes"):
            return emacs
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("emacs / eglot not installed but CI=true: install Debian's `emacs-nox` and `elpa-eglot`")
    pytest.skip("emacs with eglot is not installed (apt-get install emacs-nox elpa-eglot)")


def test_emacs_eglot_with_the_readme_config_shows_and_fixes_what_kerasfit_reports(tmp_path: Path):
    emacs = _emacs()
    bin_dir = Path(sys.executable).parent  # the README runs `kerasfit`: this venv's
    assert (bin_dir / "kerasfit").is_file(), f"no kerasfit script next to {sys.executable}"
    work = tmp_path / "project"
    work.mkdir()
    model = work / "model.py"
    model.write_text(MODEL)
    init = tmp_path / "init.el"
    config, target, fix_all = readme_eglot_config()
    assert target != "tpu-v5e", "show a setting that is not the default, so the test sees it arrive"
    init.write_text(config)
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, HOME=str(tmp_path), KERASFIT_EMACS_FILE=str(model), KERASFIT_EMACS_OUT=str(out),
               KERASFIT_EMACS_WAIT_FOR=f"KF102.* on {target} ", KERASFIT_EMACS_FIX_ALL=fix_all,
               PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    # An interactive Emacs activates installed packages (elpa-eglot's autoloads) before it
    # reads init.el; batch mode does not, so do that step first.
    proc = subprocess.run([emacs, "--batch", "--eval", "(package-activate-all)", "-l", str(init), "-l", str(DRIVER)],
                          cwd=work, env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]

    got = json.loads((out / "diagnostics.json").read_text())
    check = subprocess.run([sys.executable, "-m", "kerasfit", "check", "--no-cache", "--target", target, "--output-format",
                            "json", "model.py"],
                           cwd=work, capture_output=True, text=True)
    want = json.loads(check.stdout)
    assert {d["code"] for d in want} >= {"KF101", "KF102"}, check.stdout
    assert sorted((d["code"], d["row"], d["column"], d["message"]) for d in got) == sorted(
        (d["code"], d["location"]["row"], d["location"]["column"], d["message"]) for d in want
    )
    assert all(d["text"].startswith(f"kerasfit [{d['code']}]: ") for d in got)

    # the README's fix-all command against `kerasfit check --fix` on a copy
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "model.py").write_text(MODEL)
    subprocess.run([sys.executable, "-m", "kerasfit", "check", "--no-cache", "--target", target, "--fix", "model.py"],
                   cwd=copy, capture_output=True, text=True)
    fixed = (copy / "model.py").read_text()
    assert fixed != MODEL
    assert (out / "fixed.py").read_text() == fixed
    assert model.read_text() == MODEL  # the buffer was fixed, not saved
