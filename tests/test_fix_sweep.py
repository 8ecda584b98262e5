"""`--fix --unsafe-fixes` over real public code (issue 8): every output parses, a second
run changes nothing, a file with no applied fix is byte-identical, and the statements
away from the fix sites keep their AST.

Sources: the Keras / tf-keras application models installed with the build extra
(always, where installed), and a materialized copy of the open corpus when
KERASFIT_CORPUS_DIR points at one (not in CI).
"""

from __future__ import annotations

import ast
import importlib.util
import os
from collections import Counter
from pathlib import Path

import pytest

from kerasfit.project.check import CheckOptions, check_source
from kerasfit.core.types import allowed

pytestmark = pytest.mark.slow  # --fix over every installed Keras application file


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)  # finds, does not import
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _files() -> list[Path]:
    out: list[Path] = []
    for pkg, sub in (("keras", "src/applications"), ("tf_keras", "src/applications")):
        d = _package_dir(pkg)
        if d is not None and (d / sub).is_dir():
            out.extend(sorted((d / sub).glob("*.py")))
    corpus = os.environ.get("KERASFIT_CORPUS_DIR")
    if corpus:
        out.extend(sorted(Path(corpus).rglob("*.py")))
    return [p for p in out if p.name != "__init__.py"]


FILES = _files()
OPTIONS = CheckOptions(isolated=True)


def _fix(text: str, name: str):
    return check_source(text, name, OPTIONS, fix=True, unsafe=True)


def _simple_statements(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not hasattr(node, "body"):
            yield node


@pytest.mark.skipif(not FILES, reason="no Keras sources installed (the build extra) and no corpus")
@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.parent.name}/{p.parent.name}/{p.name}" for p in FILES])
def test_fix_sweep_over_real_code(path: Path):
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        pytest.skip("not UTF-8")
    name = str(path)
    before = check_source(text, name, OPTIONS)
    if any(d.code == "KF001" for d in before.diagnostics):
        pytest.skip("does not parse")
    res = _fix(text, name)
    assert res.error is None, res.error
    if res.fixed_source is None:
        assert res.fixes_applied == 0
        return  # nothing written: byte-identical by construction of the write phase
    fixed = res.fixed_source
    new_tree = ast.parse(fixed.lstrip("\ufeff"))  # the output parses
    again = _fix(fixed, name)
    assert again.fixed_source is None, "a second --fix changed the file again"
    # Away from the rows a fix touched, every statement keeps its AST.
    touched: set[int] = set()
    for d in before.diagnostics:
        if allowed(d.fix, True):
            for e in d.fix.edits:
                touched.update(range(e.row, e.end_row + 1))
            touched.update(range(d.row, d.end_row + 1))
    old_tree = ast.parse(text.lstrip("\ufeff"))
    kept = Counter(
        ast.dump(s) for s in _simple_statements(old_tree)
        if not touched & set(range(s.lineno, (s.end_lineno or s.lineno) + 1))
    )
    now = Counter(ast.dump(s) for s in _simple_statements(new_tree))
    missing = kept - now
    assert not missing, f"statements away from the fixes changed: {list(missing)[:2]}"


def test_sweep_has_real_files_where_keras_is_installed():
    if _package_dir("keras") is None:
        pytest.skip("keras not installed")
    assert len(FILES) >= 20
