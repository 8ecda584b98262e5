"""Third-party rule packs: registered through the `kerasfit.rules` entry-point group,
under their own code prefix (the entry point's name, as flake8 plugins do), written
against the public `kerasfit.ruleapi`, and tested with `kerasfit.engine.testing.pack_tests`."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path


from kfhelpers import ROOT


def _readme_pack() -> str:
    """The pack module the README shows (the text after its ``<!-- pack-example -->`` mark)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("````python\n", readme.index("<!-- pack-example -->")) + len("````python\n")
    return readme[start:readme.index("\n````\n", start) + 1]


PACK = _readme_pack()
README_FIX = """expected_fix='import keras\\nkeras.layers.Dense(8, name="dense")\\n',"""
README_READS = "    reads = frozenset({Reads.STATEMENT})  # the call alone\n"


def _install_pack(site: Path, code: str = "TEAM101", entry: str = "TEAM", expected: str | None = None,
                  reads: str | None = None) -> None:
    """The README's pack, installed under ``site`` (its code, expected fix or ``reads``
    declaration replaced when given: "" drops the declaration)."""
    (site / "kfpack_rules").mkdir(parents=True)
    (site / "kfpack_rules" / "__init__.py").write_text("")
    assert PACK.count('code = "TEAM101"') == PACK.count(README_FIX) == PACK.count(README_READS) == 1
    pack = PACK.replace('code = "TEAM101"', f"code = {code!r}")
    if expected is not None:
        pack = pack.replace(README_FIX, f"expected_fix={expected},")
    if reads is not None:
        pack = pack.replace(README_READS, f"    reads = {reads}\n" if reads else "")
    (site / "kfpack_rules" / "unnamed_dense.py").write_text(pack)
    dist = site / "kfpack-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kfpack\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[kerasfit.rules]\n{entry} = kfpack_rules\n")


def _run(args, cwd: Path, site: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(site), NO_COLOR="1")
    env.pop("KERASFIT_CACHE_DIR", None)
    return subprocess.run([sys.executable, "-m", "kerasfit", *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_entry_point_pack_is_listed_and_runs_under_its_own_prefix(tmp_path: Path):
    site = tmp_path / "site"
    _install_pack(site)
    rules = json.loads(_run(["rules", "--output-format", "json"], tmp_path, site).stdout)
    team = next(r for r in rules if r["code"] == "TEAM101")
    assert team["url"] is None  # a pack's rule has no page in kerasfit's docs
    (tmp_path / "model.py").write_text("import keras\nx = keras.layers.Dense(8)(inputs)\n")
    proc = _run(["check", "model.py", "--no-cache"], tmp_path, site)
    assert proc.returncode == 1
    assert "model.py:2:5: TEAM101 [*] `keras.layers.Dense` without a name" in proc.stdout
    quiet = _run(["check", "model.py", "--no-cache", "-q"], tmp_path, site)
    assert quiet.stdout.startswith("model.py:2:5: TEAM101"), quiet.stdout
    explained = _run(["explain", "unnamed-dense"], tmp_path, site)
    assert explained.returncode == 0 and "team convention" in explained.stdout


def test_pack_codes_are_selected_ignored_and_suppressed_by_their_prefix(tmp_path: Path):
    site = tmp_path / "site"
    _install_pack(site)
    (tmp_path / "model.py").write_text(
        "import tensorflow as tf\nimport keras\nx = keras.layers.Dense(8)(inputs)\n"
        "bn = tf.compat.v1.layers.batch_normalization(x, fused=False)\n"
    )
    only = _run(["check", "model.py", "--no-cache", "--select", "TEAM"], tmp_path, site)
    assert "TEAM101" in only.stdout and "KF101" not in only.stdout, only.stdout
    ignored = _run(["check", "model.py", "--no-cache", "--ignore", "TEAM1"], tmp_path, site)
    assert "TEAM101" not in ignored.stdout and "KF101" in ignored.stdout, ignored.stdout
    (tmp_path / "quiet.py").write_text("import keras\nx = keras.layers.Dense(8)(inputs)  # noqa: TEAM101\n")
    assert _run(["check", "quiet.py", "--no-cache"], tmp_path, site).returncode == 0
    fixed = _run(["check", "model.py", "--no-cache", "--select", "TEAM", "--fix"], tmp_path, site)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert 'Dense(8, name="dense")' in (tmp_path / "model.py").read_text()


def test_a_pack_code_outside_its_prefix_is_refused(tmp_path: Path):
    site = tmp_path / "site"
    _install_pack(site, code="KF950")
    proc = _run(["rules"], tmp_path, site)
    assert proc.returncode == 2
    assert "KF950" in proc.stderr and "TEAMnnn" in proc.stderr and "Traceback" not in proc.stderr


def test_a_pack_rule_must_declare_what_it_reads(tmp_path: Path):
    for reads in ("", "frozenset()", "{Reads.STATEMENT}"):
        site = tmp_path / f"site{len(reads)}"
        _install_pack(site, reads=reads)
        proc = _run(["rules"], tmp_path, site)
        assert proc.returncode == 2, (reads, proc.stdout)
        assert "TEAM101" in proc.stderr and "`reads`" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_pack_prefix_may_not_collide_with_another(tmp_path: Path):
    site = tmp_path / "site"
    _install_pack(site, code="KFX101", entry="KFX")
    proc = _run(["rules"], tmp_path, site)
    assert proc.returncode == 2
    assert "KFX" in proc.stderr and "collides" in proc.stderr and "KF" in proc.stderr


def test_without_the_pack_the_rule_is_absent(tmp_path: Path):
    rules = json.loads(_run(["rules", "--output-format", "json"], tmp_path, tmp_path).stdout)
    assert not [r for r in rules if not r["code"].startswith("KF")]


def test_a_dist_info_in_the_working_directory_is_not_a_rule_pack(tmp_path: Path):
    """``python -m kerasfit`` has the cwd on sys.path; a checked-out tree's
    ``*.dist-info/entry_points.txt`` must not make kerasfit import the package it names."""
    tree = tmp_path / "tree"
    marker = tmp_path / "imported"
    (tree / "evilpack").mkdir(parents=True)
    (tree / "evilpack" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    dist = tree / "evil-1.0.dist-info"
    dist.mkdir()
    (dist / "entry_points.txt").write_text("[kerasfit.rules]\nEVIL = evilpack\n")
    (tree / "model.py").write_text("import tensorflow as tf\nx = tf.keras.layers.BatchNormalization(fused=False)\n")
    for args in (["check", "model.py"], ["rules"]):
        proc = _run(args, tree, tmp_path / "empty-site")
        assert not marker.exists(), (args, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr and "EVIL" not in proc.stdout, proc.stdout + proc.stderr
    assert _run(["check", "model.py"], tree, tmp_path / "empty-site").returncode == 1
    # the same pack installed on sys.path (not the cwd) is a pack as before
    site = tmp_path / "site"
    _install_pack(site)
    assert "TEAM101" in _run(["rules"], tree, site).stdout


PACK_TESTS = """
from kerasfit.engine.testing import pack_tests

test_valid, test_invalid, test_metadata = pack_tests("kfpack_rules", prefix="TEAM")
"""


def _pytest_pack(tmp_path: Path, site: Path) -> subprocess.CompletedProcess:
    (tmp_path / "test_pack.py").write_text(PACK_TESTS)
    env = dict(os.environ, PYTHONPATH=str(site))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "test_pack.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True,
    )


def test_kerasfit_testing_turns_a_packs_examples_into_pytest_tests(tmp_path: Path):
    site = tmp_path / "site"
    _install_pack(site)
    proc = _pytest_pack(tmp_path, site)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 passed" in proc.stdout, proc.stdout


def test_a_wrong_expected_fix_fails_the_generated_test(tmp_path: Path):
    site = tmp_path / "site"
    _install_pack(site, expected=repr("import keras\nkeras.layers.Dense(8)\n"))
    proc = _pytest_pack(tmp_path, site)
    assert proc.returncode == 1
    assert "TEAM101-unnamed-dense-invalid-0" in proc.stdout and "fix mismatch" in proc.stdout, proc.stdout


def test_built_in_rules_import_only_the_public_rule_api():
    for f in sorted((ROOT / "rules").glob("*.py")):
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{f.name}: relative import of {node.module}"
                if (node.module or "").startswith("kerasfit"):
                    assert node.module == "kerasfit.ruleapi" or node.module.startswith("kerasfit.ruleapi."), (
                        f"{f.name} imports {node.module}"
                    )
                    assert not any(a.name.startswith("_") for a in node.names), f.name
    assert not list((ROOT / "rules").glob("_*.py")) or [p.name for p in (ROOT / "rules").glob("_*.py")] == ["__init__.py"]


def test_the_rule_api_exports_what_it_lists():
    import kerasfit.ruleapi as api

    spaces = [api.syntax, api.values, api.fixes, api.symbols]
    assert api.__all__ and all(hasattr(api, n) for n in api.__all__)
    for space in spaces:
        assert space.__all__ and all(hasattr(space, n) for n in space.__all__), space.__name__
    assert {"Rule", "Invalid", "Valid", "Range"} <= set(api.__all__)
    assert {"Replace", "Remove", "set_keyword"} <= set(api.fixes.__all__)
    assert {"get_arg", "dotted_name"} <= set(api.syntax.__all__)


def test_every_rule_api_name_is_used_by_a_built_in_rule_or_is_the_core():
    """The API is small: a namespace name that no built-in rule imports has no place in it
    (the core names a pack needs to define a rule are listed in ``kerasfit.ruleapi``)."""
    import kerasfit.ruleapi as api

    imported: set[str] = set()
    for f in sorted((ROOT / "rules").glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kerasfit.ruleapi"):
                imported.update(a.name for a in node.names)
    for space in (api.syntax, api.values, api.fixes, api.symbols):
        unused = set(space.__all__) - imported - {"Role", "ROOT_MODULES"}
        assert not unused, f"{space.__name__}: {sorted(unused)}"


def test_the_rule_api_has_no_flat_names_of_an_earlier_release():
    import kerasfit.ruleapi as api

    for gone in ("get_arg", "iter_children", "FileContext", "CONV_CALLS"):
        assert not hasattr(api, gone), gone
