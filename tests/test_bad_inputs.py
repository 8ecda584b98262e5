"""Files that do not parse, cannot be read or decoded, broken fixes, line endings and BOMs."""

from __future__ import annotations

import json
import os
import stat

import libcst as cst
import pytest

from kfhelpers import BAD, GOOD, run, write

from kerasfit.project.check import CheckOptions, check_paths
from kerasfit.engine.settings import LintSettings
from kerasfit.engine.fix import fix_source
from kerasfit.engine.lint import lint_source
from kerasfit.engine.registry import all_rules
from kerasfit.ruleapi import Reads
from kerasfit.ruleapi.rule import Replace, Rule
from kerasfit.core.types import Applicability


def error_lines(r) -> list[str]:
    return [line for line in (r.stdout + r.stderr).splitlines() if line.startswith("error:")]


# ---- files that do not parse ---------------------------------------------------------------


@pytest.mark.parametrize(
    "src,row",
    [
        ("import tensorflow as tf\ndef f(:\n    pass\n", 2),
        ("import tensorflow as tf\nx = 1 +\n", 2),
        ("import tensorflow as tf\nx = 1\n  y = 2\n", 3),
        ("import tensorflow as tf\nclass A\n    pass\n", 2),
        ("import tensorflow as tf\n\n\nprint 'hello'\n", 4),
    ],
)
def test_syntax_error_is_kf001_at_the_error_line(src, row):
    diags = lint_source(src, "m.py", LintSettings([all_rules()["KF101"]])).diagnostics
    assert [(d.code, d.name, d.row) for d in diags] == [("KF001", "syntax-error", row)]
    assert diags[0].message.startswith("Cannot parse: ") and "\n" not in diags[0].message
    assert 0 <= diags[0].column <= len(src.splitlines()[row - 1])


def test_syntax_error_does_not_stop_the_run(tmp_path):
    write(tmp_path / "a_broken.py", "import tensorflow as tf\ndef f(:\n    pass\n")
    write(tmp_path / "b_model.py", BAD)
    r = run("check", ".", "--no-cache", cwd=tmp_path)
    assert r.returncode == 1
    assert any(line.startswith("a_broken.py:2:") and " KF001 " in line for line in r.lines), r.stdout
    assert any(line.startswith("b_model.py:2:6: KF101") for line in r.lines), r.stdout
    fixed = run("check", ".", "--no-cache", "--fix", cwd=tmp_path)
    assert fixed.returncode == 1  # the syntax error remains
    assert (tmp_path / "b_model.py").read_text() == GOOD
    assert (tmp_path / "a_broken.py").read_text() == "import tensorflow as tf\ndef f(:\n    pass\n"


# ---- unreadable files -------------------------------------------------------------------------


def test_unreadable_files_are_one_line_each_and_the_run_goes_on(tmp_path):
    write(tmp_path / "latin1.py", "import tensorflow as tf\nname = 'caf\xe9'\n".encode("latin-1"))
    write(tmp_path / "binary.py", b"import tensorflow\x00\x01\x02\n")
    (tmp_path / "dangling.py").symlink_to(tmp_path / "missing-target.py")
    (tmp_path / "pkg.py").mkdir()  # a directory that looks like a module
    write(tmp_path / "pkg.py" / "inner.py", BAD)
    write(tmp_path / "model.py", BAD)
    r = run("check", ".", "--no-cache", cwd=tmp_path)
    assert r.returncode == 1
    errors = error_lines(r)
    assert len(errors) == 3, r.stdout + r.stderr
    by_file = {e.split(":")[1].strip(): e for e in errors}
    assert set(by_file) == {"binary.py", "dangling.py", "latin1.py"}
    assert "UTF-8" in by_file["latin1.py"]
    assert "binary" in by_file["binary.py"]
    assert "symbolic link" in by_file["dangling.py"] or "no such file" in by_file["dangling.py"]
    assert any(line.startswith("model.py:2:6: KF101") for line in r.lines)
    assert any(line.startswith("pkg.py/inner.py:2:6: KF101") for line in r.lines)


def test_unreadable_only_still_exits_1_and_formats_keep_stdout_parseable(tmp_path):
    write(tmp_path / "binary.py", b"import keras\x00\n")
    r = run("check", "binary.py", "--output-format", "json", "--no-cache", cwd=tmp_path)
    assert r.returncode == 1
    assert r.json() == []
    # each failure is a JSON object too, on stderr (stdout is the findings' list)
    failures = [json.loads(line) for line in r.stderr.splitlines() if line.startswith("{")]
    assert failures == [{"file": "binary.py", "error": "binary.py: binary file (contains NUL bytes), skipped"}]


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read a chmod 000 file")
def test_permission_denied(tmp_path):
    f = write(tmp_path / "secret.py", BAD)
    f.chmod(0)
    try:
        r = run("check", "secret.py", "--no-cache", cwd=tmp_path)
    finally:
        f.chmod(0o644)
    assert r.returncode == 1
    assert any("secret.py" in line for line in error_lines(r))


def test_deeply_nested_source_is_skipped_with_a_message(tmp_path):
    deep = "import tf_keras as keras\nx = " + "-" * 20000 + "1\n"
    write(tmp_path / "deep.py", deep)
    write(tmp_path / "ok.py", BAD)
    r = run("check", ".", "--no-cache", cwd=tmp_path)
    assert r.returncode == 1
    assert any("deep.py" in line for line in error_lines(r) + [line for line in r.lines if " KF001 " in line]), r.stdout + r.stderr
    assert any(line.startswith("ok.py:2:6: KF101") for line in r.lines)


# ---- a fix must never write code that does not parse --------------------------------------------


class BreaksCode(Rule):
    """A deliberately broken rule: its "fix" replaces a call with unbalanced text."""

    code = "KF990"
    reads = frozenset({Reads.STATEMENT})
    name = "test-breaks-code"
    message = "test"
    fix_safety = Applicability.SAFE

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "BatchNormalization":
            self.report(node, fix=self.make_fix(Replace(node, "BatchNormalization((")))


def test_fix_that_breaks_the_code_is_not_applied():
    settings = LintSettings([BreaksCode])
    out = fix_source(BAD, "m.py", settings)
    assert out.source == BAD
    assert out.applied == 0
    assert out.error and "m.py" in out.error and "KF990" in out.error and "\n" not in out.error
    assert [d.code for d in out.diagnostics] == ["KF990"]


def test_broken_fix_does_not_block_good_fixes_applied_before_it():
    """A good rule's fix lands in the first pass; the broken one is then refused."""
    settings = LintSettings([all_rules()["KF101"], BreaksCode])
    out = fix_source(BAD, "m.py", settings)
    cst.parse_module(out.source)
    assert out.source in (BAD, GOOD)


class BreaksRelu(Rule):
    """A deliberately broken rule whose fix does not overlap KF101's."""

    code = "KF991"
    reads = frozenset({Reads.STATEMENT})
    name = "test-breaks-relu"
    message = "test"
    fix_safety = Applicability.SAFE

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "relu":
            self.report(node, fix=self.make_fix(Replace(node, "relu((")))


def test_broken_fix_in_the_same_round_as_a_good_one_is_dropped_alone():
    src = BAD + "y = tf.nn.relu(x)\n"
    settings = LintSettings([all_rules()["KF101"], BreaksRelu])
    out = fix_source(src, "m.py", settings)
    assert out.source == GOOD + "y = tf.nn.relu(x)\n"
    assert out.applied == 1
    assert out.error and "KF991" in out.error and "KF101" not in out.error


def test_fix_writes_atomically_and_keeps_mode(tmp_path):
    f = write(tmp_path / "m.py", BAD)
    f.chmod(0o640)
    inode = f.stat().st_ino
    res = check_paths([f], CheckOptions(fix=True, use_cache=False))
    assert res.files[0].fixes_applied == 1
    assert f.read_text() == GOOD
    assert stat.S_IMODE(f.stat().st_mode) == 0o640
    assert f.stat().st_ino != inode  # replaced by rename, never truncated in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]  # no temp files left


def test_fix_through_symlink_keeps_the_link(tmp_path):
    real = write(tmp_path / "real" / "m.py", BAD)
    link = tmp_path / "link.py"
    link.symlink_to(real)
    r = run("check", "link.py", "--fix", "--no-cache", cwd=tmp_path)
    assert r.returncode == 0
    assert real.read_text() == GOOD
    assert link.is_symlink()  # the fix went to the file the link points at


def test_fix_reports_unwritable_file_without_traceback(tmp_path):
    f = write(tmp_path / "ro" / "m.py", BAD)
    (tmp_path / "ro").chmod(0o555)
    try:
        if os.access(tmp_path / "ro", os.W_OK):
            pytest.skip("running as root: a read-only directory is still writable")
        r = run("check", "ro/m.py", "--fix", "--no-cache", cwd=tmp_path)
    finally:
        (tmp_path / "ro").chmod(0o755)
    assert r.returncode == 1
    assert f.read_text() == BAD


# ---- line endings, BOM, idempotence ---------------------------------------------------------------


@pytest.mark.parametrize(
    "raw,expected",
    [
        pytest.param(
            b"import tf_keras as keras\r\nbn = keras.layers.BatchNormalization(fused=False)(keras.layers.Conv2D(8, 3)(x))  # x\r\nname = 'caf\xc3\xa9'\r\n",
            b"import tf_keras as keras\r\nbn = keras.layers.BatchNormalization(fused=True)(keras.layers.Conv2D(8, 3)(x))  # x\r\nname = 'caf\xc3\xa9'\r\n",
            id="crlf",
        ),
        pytest.param(
            b"\xef\xbb\xbfimport tf_keras as keras\nbn = keras.layers.BatchNormalization(fused=False)(keras.layers.Conv2D(8, 3)(x))\n",
            b"\xef\xbb\xbfimport tf_keras as keras\nbn = keras.layers.BatchNormalization(fused=True)(keras.layers.Conv2D(8, 3)(x))\n",
            id="bom",
        ),
        pytest.param(
            b"\xef\xbb\xbfimport tf_keras as keras\r\n\r\nbn = keras.layers.BatchNormalization(\r\n    fused=False,\r\n)(keras.layers.Conv2D(8, 3)(x))",
            b"\xef\xbb\xbfimport tf_keras as keras\r\n\r\nbn = keras.layers.BatchNormalization(\r\n    fused=True,\r\n)(keras.layers.Conv2D(8, 3)(x))",
            id="bom-crlf-no-final-newline",
        ),
        pytest.param(
            b"import tf_keras as keras\n\tx = 1 if False else 2\n".replace(b"\n\t", b"\nif True:\n\t") + b"bn = keras.layers.BatchNormalization(fused=False)(keras.layers.Conv2D(8, 3)(x))\n",
            b"import tf_keras as keras\nif True:\n\tx = 1 if False else 2\nbn = keras.layers.BatchNormalization(fused=True)(keras.layers.Conv2D(8, 3)(x))\n",
            id="tabs",
        ),
    ],
)
def test_fix_is_byte_exact_elsewhere_and_idempotent(tmp_path, raw, expected):
    f = write(tmp_path / "m.py", raw)
    r = run("check", "m.py", "--fix", "--no-cache", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f.read_bytes() == expected
    again = run("check", "m.py", "--fix", "--no-cache", cwd=tmp_path)
    assert again.returncode == 0
    assert f.read_bytes() == expected


def test_bom_positions_are_not_shifted(tmp_path):
    f = write(tmp_path / "m.py", b"\xef\xbb\xbf" + BAD.encode())
    res = check_paths([f], CheckOptions(use_cache=False))
    (d,) = res.diagnostics
    assert (d.row, d.column) == (2, 5)
    e = d.fix.edits[0]
    assert BAD[e.start : e.end] == "False"
