"""The README's promises: two set-up commands first, and a rule table that is current."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def test_readme_opens_with_the_two_setup_commands():
    text = README.read_text()
    first_block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert first_block and text.index(first_block.group(0)) < 40
    commands = [line for line in first_block.group(1).splitlines() if line.strip()]
    assert len(commands) == 2
    assert "pip install" in commands[0] and "kerasfit check examples/model.py" in commands[0]
    assert commands[1] == "./scripts/test.sh"
    assert (ROOT / "examples" / "model.py").is_file()
    assert "./scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_rule_table_is_current():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_readme.py"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_bundled_example_has_findings(kerasfit_cmd, tmp_path):
    proc = subprocess.run(
        [*kerasfit_cmd, "check", str(ROOT / "examples" / "model.py"), "--no-cache"],
        capture_output=True, text=True, cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stderr
    codes = set(re.findall(r": (KF\d{3})", proc.stdout))
    assert {"KF101", "KF102"} <= codes
