"""The tree-wide answers of the project index from the few files that can change them
(issue 19): the same answers as the whole tree's, for every function of every file of
small multi-file trees, with and without files that import each other."""

from __future__ import annotations

import ast
import os
import textwrap
from pathlib import Path

import pytest

from kerasfit.semantic.index import ProjectIndex, compute_reach
from kerasfit.semantic.treescan import file_digest

_MODEL = "import tensorflow as tf\n"

# Each tree: path (relative to tmp_path) -> source. The checked root is `ROOT`; files outside
# it (`../x.py`) are not in the tree but resolve from it.
TREES: dict[str, dict[str, str]] = {
    "import-m": {
        "m.py": "def f(x):\n    return x\n\ndef g(x):\n    return x\n",
        "net.py": _MODEL + "import m\n\nclass Net(tf.keras.Model):\n    def call(self, x):\n        return m.f(x)\n",
        "alone.py": _MODEL + "def helper(x):\n    return x\n\ndef build():\n    helper(1)\n    return tf.keras.layers.Dense(3)\n",
        "data.py": _MODEL + "def prep(x):\n    return x\n\ndef pipe(ds):\n    return ds.map(prep)\n",
    },
    "from-dot-import-in-a-package": {
        "pkg/__init__.py": "",
        "pkg/m.py": "def f(x):\n    return x\n",
        "pkg/net.py": _MODEL + "from . import m\n\ndef build():\n    tf.keras.layers.Dense(2)\n    return m.f(1)\n",
        "other.py": "def h():\n    return 1\n",
    },
    "from-pkg-m-import-f": {
        "pkg/m.py": "def f(x):\n    return x\n\ndef unused(x):\n    return x\n",
        "train.py": _MODEL + "from pkg.m import f\n\ndef train_step(x):\n    return f(x)\n",
    },
    "re-export-through-init": {
        "pkg/__init__.py": "from .m import f\n",
        "pkg/m.py": "def f(x):\n    return x\n",
        "use.py": _MODEL + "from pkg import f\n\ndef model_fn(x):\n    return f(x)\n",
    },
    "re-export-through-a-module": {
        "impl.py": "def f(x):\n    return x\n\ndef g(x):\n    return x\n",
        "shim.py": "from impl import f\nfrom impl import g as gg\nalias = gg\n",
        "use.py": _MODEL + "import shim\n\ndef loss_fn(x):\n    return shim.alias(shim.f(x))\n",
        "lonely.py": _MODEL + "def other(x):\n    return x\n\ndef build(x):\n    return tf.keras.layers.Conv2D(3, 3)(other(x))\n",
    },
    "dataset-map-in-another-file": {
        "boxes.py": "def to_corners(b):\n    return b\n\ndef scale(b):\n    return b\n\ndef both(b):\n    return b\n",
        "data.py": (
            "import functools\nimport boxes\n\ndef make(ds):\n    ds = ds.map(boxes.to_corners)\n"
            "    ds = ds.filter(predicate=lambda a: boxes.both(a))\n    return ds.map(functools.partial(boxes.scale, 2))\n"
        ),
        "net.py": _MODEL + "from boxes import both\n\nclass L(tf.keras.layers.Layer):\n    def call(self, x):\n        return both(x)\n",
        "mp.py": _MODEL + "tf.keras.mixed_precision.set_global_policy('mixed_float16')\n",
    },
    "attribute-tail-through-a-package": {
        "pkg/sub.py": "def f(x):\n    return x\n",
        "run.py": _MODEL + "import pkg\n\ndef train_step(x):\n    return pkg.sub.f(x)\n",
    },
    "main-block-of-an-imported-module": {
        "net.py": _MODEL + "def build():\n    return tf.keras.layers.Dense(1)\n\nif __name__ == '__main__':\n    build().fit()\n",
        "train.py": "from net import build\n\nbuild()\n",
        "solo.py": _MODEL + "def build():\n    return tf.keras.layers.Dense(1)\n\nif __name__ == '__main__':\n    build().fit()\n",
    },
    "a-chain-of-helpers-and-a-cycle": {
        "a.py": "import b\n\ndef fa(x):\n    return b.fb(x)\n",
        "b.py": "import c\n\ndef fb(x):\n    return c.fc(x)\n",
        "c.py": "import a\n\ndef fc(x):\n    return a.fa(x)\n\ndef fd(x):\n    return x\n",
        "top.py": _MODEL + "import a\n\ndef build():\n    tf.keras.layers.Dense(1)\n    return a.fa(1)\n",
        "x1.py": "def u():\n    return 1\n",
        "x2.py": "def v():\n    return 1\n",
        "x3.py": "def w():\n    return 1\n",
        "x4.py": "def y():\n    return 1\n",
    },
    # the root is named like a module: a file beside it re-exports a function of the tree,
    # and a file of the tree imports it from there
    "re-export-from-outside-the-tree": {
        "../api.py": "from src.net import build_head\n",
        "net.py": "def build_head(x):\n    return x\n",
        "train.py": _MODEL + "from api import build_head\n\ndef train_step(x):\n    tf.keras.layers.Dense(2)\n    return build_head(x)\n",
        "z1.py": "def u():\n    return 1\n",
        "z2.py": "def u():\n    return 1\n",
        "z3.py": "def u():\n    return 1\n",
        "z4.py": "def u():\n    return 1\n",
    },
    "relative-import-out-of-the-root": {
        "../helpers/tools.py": "from src.net import head\n",
        "net.py": "def head(x):\n    return x\n",
        "sub/train.py": _MODEL + "from ...helpers.tools import head\n\ndef train_step(x):\n    return head(x)\n",
        "y1.py": "def u():\n    return 1\n",
        "y2.py": "def u():\n    return 1\n",
        "y3.py": "def u():\n    return 1\n",
        "y4.py": "def u():\n    return 1\n",
    },
    "a-file-that-does-not-parse": {
        "bad.py": "def broken(:\n",
        "ok.py": _MODEL + "def helper(x):\n    return x\n\ndef build():\n    return tf.keras.layers.Dense(helper(1))\n",
    },
}
ROOT = {"re-export-from-outside-the-tree": "src", "relative-import-out-of-the-root": "src"}


def _tree(tmp_path: Path, name: str) -> Path:
    # (a directory not named like a module above the root: what lies beside is read)
    root = tmp_path / "case-dir" / ROOT.get(name, "proj-tree")  # (not a module name: nothing outside imports it)
    root.mkdir(parents=True)
    for rel, text in TREES[name].items():
        p = (root / rel).resolve()
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return root.resolve()


def _functions(path: str) -> list[str]:
    try:
        tree = ast.parse(Path(path).read_bytes())
    except SyntaxError:
        return ["broken"]
    out = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef):
            out.append(stmt.name)
        elif isinstance(stmt, ast.ClassDef):
            out.extend(f"{stmt.name}.{s.name}" for s in stmt.body if isinstance(s, ast.FunctionDef))
    return out


@pytest.mark.parametrize("name", sorted(TREES))
def test_each_files_answers_are_the_whole_trees(tmp_path, name):
    root = _tree(tmp_path, name)
    whole = ProjectIndex([root])
    reach = compute_reach(whole, whole.reach_files())
    for path in whole.reach_files():
        for fn in _functions(path):
            key = (path, fn)
            # a fresh index per question: nothing computed for another file helps
            assert ProjectIndex([root]).reached_from_model(path, fn) == (key in reach.model), key
            assert ProjectIndex([root]).input_only(path, fn) == (key in reach.input and key not in reach.model), key
        assert ProjectIndex([root]).imported_by_others(path) == (path in reach.imported), path
    assert ProjectIndex([root]).dtype_policies() == reach.policies
    # one index asked about every file in turn answers the same
    shared = ProjectIndex([root])
    for path in shared.reach_files():
        for fn in _functions(path):
            assert shared.reached_from_model(path, fn) == ((path, fn) in reach.model)
        assert shared.imported_by_others(path) == (path in reach.imported)


def test_the_trees_exercise_both_kinds_of_answer(tmp_path):
    root = _tree(tmp_path, "import-m")
    index = ProjectIndex([root])
    alone, m, net = (str(root / n) for n in ("alone.py", "m.py", "net.py"))
    assert index.local_files(alone) == {alone}
    assert index.local_files(m) == {m, net}
    # a package's __init__ is reached by `from . import x`, which spells nothing
    pkg = _tree(tmp_path / "p", "from-dot-import-in-a-package")
    index = ProjectIndex([pkg])
    assert index.local_files(pkg / "pkg" / "__init__.py") is None
    assert index.local_files(pkg / "pkg" / "m.py") == {str(pkg / "pkg" / "m.py"), str(pkg / "pkg" / "net.py")}
    assert index.local_files(pkg / "other.py") == {str(pkg / "other.py")}
    # beside a root named like a module, a file of the tree that spells what lies there
    # may import a re-export of anything
    src = _tree(tmp_path / "q", "re-export-from-outside-the-tree")
    index = ProjectIndex([src])
    assert str(src / "train.py") in (index.local_files(src / "net.py") or ())
    up = _tree(tmp_path / "r", "relative-import-out-of-the-root")
    index = ProjectIndex([up])
    assert str(up / "sub" / "train.py") in (index.local_files(up / "net.py") or ())


def test_a_file_nothing_imports_is_answered_from_its_own_text(tmp_path):
    root = _tree(tmp_path, "import-m")
    index = ProjectIndex([root])
    alone = str(root / "alone.py")
    assert index.reached_from_model(alone, "helper") and not index.imported_by_others(alone)
    assert set(index._facts) == {alone}  # no other file was parsed
    assert index._reach is None


def test_a_tree_linked_into_the_root_is_answered_whole(tmp_path):
    root = _tree(tmp_path, "import-m")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.py").write_text("import alone\n")
    os.symlink(tmp_path / "elsewhere", root / "linked")
    assert ProjectIndex([root]).local_files(root / "alone.py") is None


def test_the_trees_hashes_without_parsing_it(tmp_path):
    root = _tree(tmp_path, "a-file-that-does-not-parse")
    index = ProjectIndex([root])
    digests = index.tree_digests()
    files = [str(root / "bad.py"), str(root / "ok.py")]
    # every file's bytes (one that does not parse included), with the cache's hash
    assert digests == {f: file_digest(f) for f in files}
    assert index._reach is None and not index._facts


def test_files_given_alone_are_answered_whole(tmp_path):
    # their neighbours, which may import them, are not part of the tree and not read
    root = _tree(tmp_path, "import-m")
    files = [root / "alone.py", root / "m.py"]
    index = ProjectIndex(files)
    assert index.local_files(files[0]) is None
    whole = compute_reach(index, index.reach_files())
    assert index.reached_from_model(files[0], "helper") == ((str(files[0]), "helper") in whole.model)


def test_a_root_the_scan_cannot_tell_leaves_the_others_answered_locally(tmp_path):
    told = _tree(tmp_path, "import-m")
    other = tmp_path / "case-dir" / "given"
    other.mkdir()
    (other / "solo.py").write_text("def f():\n    return 1\n")
    index = ProjectIndex([told, other / "solo.py"])  # a file given alone: its neighbours are not read
    assert index.local_files(told / "alone.py") == {str(told / "alone.py")}
    assert index.local_files(other / "solo.py") is None
    whole = compute_reach(index, index.reach_files())
    assert index.reached_from_model(told / "alone.py", "helper") == ((str(told / "alone.py"), "helper") in whole.model)


def test_a_notebook_has_no_function_any_tree_wide_answer_holds(tmp_path):
    root = _tree(tmp_path, "import-m")
    nb = tmp_path / "case-dir" / "nb.ipynb"
    nb.write_text("{}")
    index = ProjectIndex([root])
    assert index.local_files(nb) == frozenset()
    assert not index.reached_from_model(nb, "build") and not index.imported_by_others(nb)
    # a root given as a file whatever its name is a tree file: answered whole
    script = tmp_path / "case-dir" / "script"
    script.write_text("import tensorflow as tf\n\ndef helper(x):\n    return x\n\ndef build():\n    return tf.keras.layers.Dense(helper(1))\n")
    index = ProjectIndex([script])
    assert index.local_files(script) is None and index.reached_from_model(script, "helper")


def test_a_name_python_reads_as_a_module_name_is_found_in_any_spelling(tmp_path):
    # Python reads identifiers NFKC-normalised: `import ｍ` imports m
    root = tmp_path / "case-dir" / "proj-tree"
    root.mkdir(parents=True)
    (root / "m.py").write_text("def f(x):\n    return x\n")
    (root / "net.py").write_text(
        "import tensorflow as tf\nimport \uff4d\n\ndef build():\n    tf.keras.layers.Dense(1)\n    return \uff4d.f(1)\n",
        encoding="utf-8")
    # and a file system that ignores case finds m.py for `import M`
    (root / "other.py").write_text("import M\n")
    index = ProjectIndex([root])
    m = str(root / "m.py")
    assert index.local_files(m) == {m, str(root / "net.py"), str(root / "other.py")}
    assert index.reached_from_model(m, "f") and index.imported_by_others(m)


# ---- random trees: imports spelled every way, re-exports, pipelines, model code ----------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_NAMES = ["m0", "m1", "m2", "m3", "m4", "m5"]
_PKG = {"m3", "m4"}  # modules of the package `pkg` (with an __init__ that re-exports), if any


@st.composite
def _random_tree(draw: st.DrawFn) -> dict[str, str]:
    files: dict[str, str] = {}
    # (a package's __init__ is imported by `from . import x`, which spells nothing: a tree
    # with one is answered whole more often)
    in_pkg = _PKG if draw(st.booleans()) else set()
    for name in _NAMES:
        lines = ["import tensorflow as tf"]
        usable: list[str] = []  # expressions naming another module's function
        for other in draw(st.lists(st.sampled_from(_NAMES), max_size=2, unique=True)):
            if other == name:
                continue
            fn = f"{other}.f{draw(st.integers(0, 1))}"
            if other in in_pkg:
                how = draw(st.sampled_from(["from-pkg", "init", "relative"] if name in in_pkg else ["from-pkg", "init"]))
                if how == "from-pkg":
                    lines.append(f"from pkg import {other}")
                elif how == "relative":
                    lines.append(f"from . import {other}")
                else:
                    lines.append(f"from pkg import g_{other}")
                    fn = f"g_{other}"
            else:
                how = draw(st.sampled_from(["import", "from", "alias"]))
                if how == "import":
                    lines.append(f"import {other}")
                elif how == "from":
                    lines.append(f"from {other} import {fn.split('.')[1]} as {other}_{fn.split('.')[1]}")
                    fn = f"{other}_{fn.split('.')[1]}"
                else:
                    lines.append(f"import {other}\nalias_{other} = {fn}")
                    fn = f"alias_{other}"
            usable.append(fn)
        for i in range(2):
            body = []
            for _ in range(draw(st.integers(0, 3))):
                kind = draw(st.sampled_from(["call", "local", "model", "map", "lambda-map"]))
                target = draw(st.sampled_from(usable)) if usable else f"f{1 - i}"
                if kind == "call":
                    body.append(f"    {target}(x)")
                elif kind == "local":
                    body.append(f"    f{1 - i}(x)")
                elif kind == "model":
                    body.append("    tf.keras.layers.Dense(2)(x)")
                elif kind == "map":
                    body.append(f"    x = x.map({target})")
                else:
                    body.append(f"    x = x.map(lambda a: {target}(a))")
            fname = draw(st.sampled_from([f"f{i}", "train_step"])) if i == 1 else "f0"
            lines.append(f"def {fname}(x):\n" + "\n".join([*body, "    return x"]))
        if draw(st.booleans()):
            lines.append("tf.keras.mixed_precision.set_global_policy('mixed_float16')")
        files[f"pkg/{name}.py" if name in in_pkg else f"{name}.py"] = "\n".join(lines) + "\n"
    if in_pkg:
        files["pkg/__init__.py"] = "".join(f"from .{n} import f0 as g_{n}\n" for n in sorted(in_pkg))
    return files


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_random_tree())
def test_random_trees_answer_as_the_whole_tree(files):
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kf-reach-") as tmp:
        root = Path(tmp) / "the-tree"
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        root = root.resolve()
        whole = ProjectIndex([root])
        reach = compute_reach(whole, whole.reach_files())
        for path in whole.reach_files():
            index = ProjectIndex([root])
            for fn in _functions(path):
                key = (path, fn)
                assert index.reached_from_model(path, fn) == (key in reach.model), key
                assert index.input_only(path, fn) == (key in reach.input and key not in reach.model), key
            assert index.imported_by_others(path) == (path in reach.imported), path
        assert ProjectIndex([root]).dtype_policies() == reach.policies
