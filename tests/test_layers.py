"""The import layering is a contract (STYLE 18, DESIGN "Layers"): import-linter checks it,
and a function-local import of a kerasfit module exists only to defer a heavy dependency,
saying which."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _sources() -> list[Path]:
    return sorted([*(ROOT / "kerasfit").rglob("*.py"), *(ROOT / "rules").rglob("*.py")])


def _local_kerasfit_imports(path: Path) -> list[tuple[int, str]]:
    """(line, statement) of every import of a kerasfit module inside a function body."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    lines = source.splitlines()
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                ours = (
                    child.level > 0 or (child.module or "").split(".")[0] == "kerasfit"
                    if isinstance(child, ast.ImportFrom)
                    else any(a.name.split(".")[0] == "kerasfit" for a in child.names)
                )
                text = "\n".join(lines[child.lineno - 1 : (child.end_lineno or child.lineno)])
                if ours and "defers" not in text:
                    found.append((child.lineno, text.strip()))
            visit(child, inner)

    visit(tree, False)
    return found


# import-linter through its Python API (its CLI needs a newer click than some installs have),
# in a child process so a planted copy of the package is the one analysed.
_LINT = (
    "import sys\n"
    "from importlinter import configuration\n"
    "from importlinter.application.use_cases import lint_imports\n"
    "configuration.configure()\n"
    "sys.exit(0 if lint_imports(config_filename=sys.argv[1], cache_dir=None, no_logo=True) else 1)\n"
)


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _LINT, str(tree / "pyproject.toml")],
        cwd=tree, capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONPATH": str(tree)},
    )


def _layered() -> list[tuple[str, list[str]]]:
    """Each layers contract of pyproject.toml: (the package its layers divide, the layers'
    modules, full names)."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]
    out = []
    for c in contracts:
        if c["type"] != "layers":
            continue
        names = [name.strip() for layer in c["layers"] for name in layer.replace(":", "|").split("|")]
        for container in c.get("containers") or ["kerasfit"]:
            out.append((container, [f"{container}.{n}" if c.get("containers") else n for n in names]))
    return out


def unlayered(package: Path, within: str, layers: list[str]) -> list[str]:
    """The modules under ``within`` of ``package`` (a kerasfit tree) that no layer of a
    contract over ``within`` holds."""
    out = []
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if module == within or not module.startswith(within + ".") or "__pycache__" in parts:
            continue
        if not any(module == layer or module.startswith(layer + ".") for layer in layers):
            out.append(module)
    return out


def _modules(tree: Path, package: str, exclude_type_checking_imports: bool) -> dict[str, set[str]]:
    """Each module of ``package`` (importable from ``tree``) and the package's modules it
    imports, ``if TYPE_CHECKING:`` imports counted unless excluded (grimp, which
    import-linter runs on)."""
    grimp = pytest.importorskip("grimp", reason="the dev extra installs import-linter, which brings grimp")
    sys.path.insert(0, str(tree))
    try:
        graph = grimp.build_graph(package, exclude_type_checking_imports=exclude_type_checking_imports, cache_dir=None)
    finally:
        sys.path.remove(str(tree))
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def import_cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (its modules in import order, the first repeated last) through each
    module that lies on one, found by depth-first search."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for dep in sorted(imports.get(module, ())):
            if state.get(dep) == 1:
                found.append([*path[path.index(dep):], dep])
            elif dep not in state:
                visit(dep)
        path.pop()
        state[module] = 2

    for module in sorted(imports):
        if module not in state:
            visit(module)
    return found


def _copy(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "kerasfit", tree / "kerasfit", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_import_contracts_hold() -> None:
    pytest.importorskip("importlinter", reason="the dev extra installs import-linter")
    proc = _lint(ROOT)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_every_module_is_in_a_layer() -> None:
    assert [within for within, _ in _layered()] == ["kerasfit", "kerasfit.semantic"]
    for within, layers in _layered():
        assert unlayered(ROOT / "kerasfit", within, layers) == [], within


def test_a_planted_unlayered_module_is_found(tmp_path: Path) -> None:
    tree = _copy(tmp_path)
    (tree / "kerasfit" / "stray.py").write_text("X = 1\n", encoding="utf-8")
    (tree / "kerasfit" / "semantic" / "stray.py").write_text("X = 1\n", encoding="utf-8")
    found = {within: unlayered(tree / "kerasfit", within, layers) for within, layers in _layered()}
    assert found == {"kerasfit": ["kerasfit.stray"], "kerasfit.semantic": ["kerasfit.semantic.stray"]}


def test_no_import_cycles_counting_type_checking_imports() -> None:
    """A module typed against a higher one imports it too, if only for mypy: such a loop
    (the semantic parts around ``SemanticModel``) makes every part depend on every other."""
    assert import_cycles(_modules(ROOT, "kerasfit", exclude_type_checking_imports=False)) == []


def test_a_planted_type_checking_cycle_is_found(tmp_path: Path) -> None:
    pkg = tmp_path / "plantedcycle"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "model.py").write_text("from .part import Part\n\nclass Model:\n    part: Part\n", encoding="utf-8")
    (pkg / "part.py").write_text(
        "from __future__ import annotations\nfrom typing import TYPE_CHECKING\n\n"
        "if TYPE_CHECKING:\n    from .model import Model\n\nclass Part:\n    owner: Model\n",
        encoding="utf-8",
    )
    counted = import_cycles(_modules(tmp_path, "plantedcycle", exclude_type_checking_imports=False))
    assert counted == [["plantedcycle.model", "plantedcycle.part", "plantedcycle.model"]]
    assert import_cycles(_modules(tmp_path, "plantedcycle", exclude_type_checking_imports=True)) == []


def test_a_planted_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    pytest.importorskip("importlinter", reason="the dev extra installs import-linter")
    tree = _copy(tmp_path)
    core = tree / "kerasfit" / "core" / "types.py"
    core.write_text(core.read_text(encoding="utf-8") + "\nfrom kerasfit.project import config as _upward\n", encoding="utf-8")
    proc = _lint(tree)
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "kerasfit.core.types -> kerasfit.project.config" in proc.stdout


def test_a_planted_semantic_import_in_the_language_server_breaks_the_contract(tmp_path: Path) -> None:
    """The language server asks the engine's reuse protocol, never the model: a downward
    import the layers allow (lsp is above semantic) still breaks its own contract."""
    pytest.importorskip("importlinter", reason="the dev extra installs import-linter")
    tree = _copy(tmp_path)
    memo = tree / "kerasfit" / "lsp" / "memo.py"
    memo.write_text(memo.read_text(encoding="utf-8") + "\nfrom kerasfit.semantic.model import SemanticModel as _model\n",
                    encoding="utf-8")
    proc = _lint(tree)
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "kerasfit.lsp never imports kerasfit.semantic BROKEN" in proc.stdout
    assert "kerasfit.lsp.memo -> kerasfit.semantic.model" in proc.stdout
    assert "1 broken" in proc.stdout


def test_function_local_imports_say_what_they_defer() -> None:
    bad = [f"{p.relative_to(ROOT)}:{line}: {text}" for p in _sources() for line, text in _local_kerasfit_imports(p)]
    assert not bad, "function-local imports of kerasfit modules without a '# defers <what>' comment:\n" + "\n".join(bad)


def test_the_scan_sees_a_hidden_import(tmp_path: Path) -> None:
    hidden = tmp_path / "m.py"
    hidden.write_text(
        "def f():\n    from .engine import lint_source\n    return lint_source\n"
        "def g():\n    from kerasfit.engine import walk  # defers libcst\n    return walk\n",
        encoding="utf-8",
    )
    assert _local_kerasfit_imports(hidden) == [(2, "from .engine import lint_source")]


def test_rules_import_only_the_rule_api() -> None:
    bad = []
    for path in sorted((ROOT / "rules").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").startswith("kerasfit")):
                if node.level > 0 or (node.module != "kerasfit.ruleapi" and not (node.module or "").startswith("kerasfit.ruleapi.")):
                    bad.append(f"{path.name}:{node.lineno}: from {'.' * node.level}{node.module or ''}")
            elif isinstance(node, ast.Import):
                bad.extend(f"{path.name}:{node.lineno}: import {a.name}" for a in node.names if a.name.startswith("kerasfit"))
    assert not bad, bad


def test_every_package_of_the_source_tree_is_shipped() -> None:
    """pyproject lists the packages setuptools ships; a package missing there works in an
    editable install and fails in a real one (pre-commit's: `No module named …`)."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    found = {
        ".".join(("kerasfit", *init.parent.relative_to(ROOT / "kerasfit").parts))
        for init in (ROOT / "kerasfit").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert found <= listed, sorted(found - listed)
