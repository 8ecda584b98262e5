"""benchmarks/sweep.py, the behaviour sweep a refactor is checked with: a real run over a
small tree, and its comparison counting what changed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _sweep():
    spec = importlib.util.spec_from_file_location("kf_sweep", ROOT / "benchmarks" / "sweep.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_sweep_records_findings_and_fixed_text_and_compares(tmp_path: Path, capsys) -> None:
    sweep = _sweep()
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "m.py").write_text("import tensorflow as tf\nx = tf.keras.layers.Conv2D(30, 3)\n", encoding="utf-8")
    (tree / "clean.py").write_text("import tensorflow as tf\nx = 1\n", encoding="utf-8")
    record = sweep.sweep(tmp_path, ["tree"])
    assert record["files"] == 2
    rows = record["findings"]["tree/m.py"]
    assert [(r[0], r[1], r[2]) for r in rows] == [("KF102", 2, 28)]
    assert list(record["fixed"]) == ["tree/m.py"]  # the unsafe fix rounds 30 up
    assert sweep.compare(record, record) == 0
    changed = {**record, "fixed": {}}
    assert sweep.compare(record, changed) == 1
    assert "1 differing file record(s)" in capsys.readouterr().out
    # restricted to rules that find nothing there: no finding, no fix
    assert sweep.sweep(tmp_path, ["tree"], select="KF101,KF106") == {"files": 2, "findings": {}, "fixed": {}}
