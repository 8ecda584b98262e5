"""A third-party rule pack registers through the `kerasfit.rules` entry-point group."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PACK = '''
import libcst as cst

from kerasfit.rule import Invalid, Rule


class NamedScopeDense(Rule):
    """
    ## What it does
    Flags a team convention: `Dense` layers built without a `name=`.

    ## Why is this slow on the accelerator
    It is not; it makes profiles hard to read.

    ## Example
    ```python
    layers.Dense(128)
    ```

    ## Use instead
    ```python
    layers.Dense(128, name="proj")
    ```

    ## Fix safety
    No fix.

    ## References
    The team style guide.
    """

    code = "KF950"
    name = "unnamed-dense"
    message = "Dense layer without a name"
    VALID = ("import keras\\nkeras.layers.Dense(8, name='x')\\n",)
    INVALID = (Invalid("import keras\\nkeras.layers.Dense(8)\\n"),)

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.call_name(node) == "keras.layers.Dense" and not any(
            a.keyword is not None and a.keyword.value == "name" for a in node.args
        ):
            self.report(node)
'''


def _install_pack(site: Path) -> None:
    (site / "kfpack_rules").mkdir(parents=True)
    (site / "kfpack_rules" / "__init__.py").write_text("")
    (site / "kfpack_rules" / "unnamed_dense.py").write_text(PACK)
    dist = site / "kfpack-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kfpack\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[kerasfit.rules]\nteam = kfpack_rules\n")


def _run(args, cwd: Path, site: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(site), NO_COLOR="1")
    env.pop("KERASFIT_CACHE_DIR", None)
    return subprocess.run([sys.executable, "-m", "kerasfit", *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_entry_point_pack_is_listed_and_runs(tmp_path: Path):
    site = tmp_path / "site"
    _install_pack(site)
    rules = json.loads(_run(["rules", "--output-format", "json"], tmp_path, site).stdout)
    assert "KF950" in {r["code"] for r in rules}
    (tmp_path / "model.py").write_text("import keras\nx = keras.layers.Dense(8)(inputs)\n")
    proc = _run(["check", "model.py", "--no-cache"], tmp_path, site)
    assert proc.returncode == 1
    assert "model.py:2:5: KF950 Dense layer without a name" in proc.stdout
    explained = _run(["explain", "unnamed-dense"], tmp_path, site)
    assert explained.returncode == 0 and "team convention" in explained.stdout


def test_without_the_pack_the_rule_is_absent(tmp_path: Path):
    rules = json.loads(_run(["rules", "--output-format", "json"], tmp_path, tmp_path).stdout)
    assert "KF950" not in {r["code"] for r in rules}
