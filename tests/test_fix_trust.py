"""--fix never loses an edit or breaks code (issue 8, items 1-5): safe means proven,
a write is a transaction per file, edits land on the exact source text, and fixes
keep comments, indentation and line endings."""

from __future__ import annotations

import ast
import os
import stat
from pathlib import Path

import libcst as cst
import pytest
from kfhelpers import between_check_and_write, run, write

from kerasfit.project.check import CheckOptions, check_paths
from kerasfit.engine.settings import LintSettings
from kerasfit.engine.fix import apply_fixes, fix_source
from kerasfit.engine.lint import lint_source
from kerasfit.engine.registry import all_rules
from kerasfit.core.types import Applicability, Edit, Fix
from kerasfit.project.writeback import TMP_SUFFIX

RULES = all_rules()


def settings(*codes: str) -> LintSettings:
    return LintSettings([RULES[c] for c in codes] if codes else list(RULES.values()))


# ---- 1. safe means identical --------------------------------------------------------------------

DENSE_BN = (
    "import tf_keras as keras\n\ndef build():\n    inp = keras.Input((16,))\n"
    "    x = keras.layers.Dense(64)(inp)\n    x = keras.layers.BatchNormalization(fused=False)(x)\n"
    "    return keras.Model(inp, x)\n"
)


def test_fused_true_after_a_dense_is_not_a_safe_fix():
    """The issue's reproducer: fused=True on a 2-D input raises in tf-keras."""
    (d,) = [d for d in lint_source(DENSE_BN, "m.py", settings("KF101")).diagnostics]
    assert d.fix is not None and d.fix.applicability is Applicability.UNSAFE
    assert fix_source(DENSE_BN, "m.py", settings("KF101")).source == DENSE_BN


@pytest.mark.parametrize(
    "call,safe",
    [
        ("keras.layers.BatchNormalization(fused=False)(keras.layers.Conv2D(8, 3)(x))", True),
        ("keras.layers.BatchNormalization(axis=1, fused=False)(keras.layers.Conv2D(8, 3)(x))", True),
        ("keras.layers.BatchNormalization(axis=2, fused=False)(keras.layers.Conv2D(8, 3)(x))", False),
        ("keras.layers.BatchNormalization(axis=4, fused=False)(keras.layers.Conv3D(8, 3)(x))", True),
        ("keras.layers.BatchNormalization(axis=3, fused=False)(keras.layers.Conv3D(8, 3)(x))", False),
        ("keras.layers.BatchNormalization(dtype='float64', fused=False)(keras.layers.Conv2D(8, 3)(x))", False),
        ("keras.layers.BatchNormalization(fused=False)(keras.layers.Dense(8)(x))", False),
        ("keras.layers.BatchNormalization(fused=False)(x)", False),
        ("keras.layers.BatchNormalization(fused=False)", False),
    ],
)
def test_fused_true_is_safe_only_on_a_proven_rank(call, safe):
    src = f"import tf_keras as keras\ny = {call}\n"
    fixes = [d.fix for d in lint_source(src, "m.py", settings("KF101")).diagnostics if d.fix]
    assert [f.applicability for f in fixes] == [Applicability.SAFE if safe else Applicability.UNSAFE]


# ---- 2 and 4. a write is a transaction; owner, group, links, mode kept ----------------------------

BN = "import tf_keras as keras\ny = keras.layers.BatchNormalization(fused=False)(keras.layers.Conv2D(8, 3)(x))\n"
BN_FIXED = BN.replace("fused=False", "fused=True")


def test_file_edited_while_checking_is_not_overwritten(tmp_path, monkeypatch):
    f = write(tmp_path / "m.py", BN)
    other = write(tmp_path / "n.py", BN)
    edited = BN + "z = 1  # saved by the editor meanwhile\n"
    between_check_and_write(monkeypatch, lambda: f.write_text(edited))
    res = check_paths([f, other], CheckOptions(fix=True, use_cache=False))
    assert f.read_text() == edited  # the user's edit survives
    by = {Path(r.filename).name: r for r in res.files}
    assert by["m.py"].error == f"{f}: changed while checking, not fixed" and by["m.py"].fixes_applied == 0
    assert other.read_text() == BN_FIXED and by["n.py"].fixes_applied == 1  # the run goes on


def test_same_bytes_rewritten_while_checking_is_not_overwritten(tmp_path, monkeypatch):
    """Same text, new mtime (`git checkout` of the same content): still not ours to write."""
    f = write(tmp_path / "m.py", BN)

    def touch():
        st = f.stat()
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))

    between_check_and_write(monkeypatch, touch)
    res = check_paths([f], CheckOptions(fix=True, use_cache=False))
    assert "changed while checking, not fixed" in res.files[0].error
    assert f.read_text() == BN


def test_file_deleted_while_checking_is_not_recreated(tmp_path, monkeypatch):
    f = write(tmp_path / "m.py", BN)
    between_check_and_write(monkeypatch, f.unlink)
    res = check_paths([f], CheckOptions(fix=True, use_cache=False))
    assert not f.exists()
    assert res.files[0].error == f"{f}: deleted while checking, not fixed"
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_cli_reports_a_changed_file_in_one_line(tmp_path):
    """Through the console script: an unchanged file is fixed, exit 0, nothing else printed."""
    f = write(tmp_path / "m.py", BN)
    r = run("check", "m.py", "--fix", "--no-cache", cwd=tmp_path)
    assert r.returncode == 0 and f.read_text() == BN_FIXED


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_fix_keeps_owner_group_and_does_not_move_setuid_to_root(tmp_path):
    f = write(tmp_path / "m.py", BN)
    os.chown(f, 1234, 4321)
    f.chmod(0o4751)
    os.chown(tmp_path, 1234, 4321)  # as in a mounted checkout
    os.chmod(f, 0o4751)  # chown cleared setuid
    res = check_paths([f], CheckOptions(fix=True, use_cache=False))
    assert res.files[0].fixes_applied == 1 and f.read_text() == BN_FIXED
    st = f.stat()
    assert (st.st_uid, st.st_gid) == (1234, 4321)
    assert stat.S_IMODE(st.st_mode) == 0o4751  # the same owner's file keeps its bits, no wider


def test_fix_keeps_hard_links(tmp_path):
    f = write(tmp_path / "m.py", BN)
    twin = tmp_path / "twin.py"
    os.link(f, twin)
    inode = f.stat().st_ino
    res = check_paths([f], CheckOptions(fix=True, use_cache=False))
    assert res.files[0].fixes_applied == 1
    assert f.stat().st_ino == inode and f.stat().st_nlink == 2
    assert twin.read_text() == BN_FIXED  # both names see the fix


def test_fix_never_widens_permissions(tmp_path):
    f = write(tmp_path / "m.py", BN)
    f.chmod(0o600)
    old = os.umask(0)
    try:
        check_paths([f], CheckOptions(fix=True, use_cache=False))
    finally:
        os.umask(old)
    assert stat.S_IMODE(f.stat().st_mode) == 0o600 and f.read_text() == BN_FIXED


def test_temporaries_of_a_killed_run_are_cleaned_and_never_checked(tmp_path):
    f = write(tmp_path / "m.py", BN)
    dead = 2**22 + 12345  # above pid_max's default: no such process
    stale = write(tmp_path / f".m.py.{dead}.abcd1234{TMP_SUFFIX}", BN)
    live = write(tmp_path / f".m.py.{os.getppid()}.abcd1234{TMP_SUFFIX}", BN)  # a running process's: kept
    r = run("check", ".", "--no-cache", "--output-format", "json", cwd=tmp_path)
    assert {Path(d["filename"]).name for d in r.json()} == {"m.py"}  # the temporaries are not checked
    res = check_paths([f], CheckOptions(fix=True, use_cache=False))
    assert res.files[0].fixes_applied == 1
    assert not stale.exists() and live.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["m.py", live.name])


# ---- 3. edits land on the exact source text -----------------------------------------------------

KF = "import tf_keras as keras\n"


@pytest.mark.parametrize(
    "prefix",
    [
        pytest.param("\fx = 1\n", id="form-feed-at-line-start"),
        pytest.param("\f\f\fx = 1\n", id="three-form-feeds"),
        pytest.param("x = 1\n\\\ny = 2\n", id="lone-backslash-line"),
        pytest.param("if True:\n    x = 1\n\f    y = 2\n", id="form-feed-before-indentation"),
        pytest.param("if True:\n    x = 1\n    \fy = 2\n", id="form-feed-resets-the-indentation"),
    ],
)
def test_form_feed_and_backslash_lines_do_not_shift_edits(prefix):
    body = (
        "bn = keras.layers.BatchNormalization(fused=False)(keras.layers.Conv2D(8, 3)(x))\n"
        "c = keras.layers.Conv2D(30, 3)\nd = keras.layers.Dense(100)\n"
    )
    clean = fix_source(KF + body, "m.py", settings(), unsafe=True)
    src = KF + prefix + body
    ast.parse(src)
    out = fix_source(src, "m.py", settings(), unsafe=True)
    assert out.error is None
    assert out.source == KF + prefix + clean.source[len(KF) :]
    assert "fused=True" in out.source and "Conv2D(32, 3)" in out.source and "Dense(104)" in out.source


def test_form_feed_inside_a_block_with_backslash_before_a_statement():
    src = KF + "def f(x):\n    x = 1\n\\\n    c = keras.layers.Conv2D(30, 3)\n    return c\n"
    out = fix_source(src, "m.py", settings("KF102"), unsafe=True)
    assert out.source == src.replace("(30,", "(32,")


@pytest.mark.parametrize(
    "src",
    [
        # a lone backslash line at column 0 before an indented statement: CPython takes the
        # statement's indentation; libcst refused it ("expected INDENT")
        pytest.param("def f(x):\n\\\n    x = 1\n    c = keras.layers.Conv2D(30, 3)\n    return c\n", id="before-first-in-block"),
        pytest.param("def f(x):\r\n\\\r\n    c = keras.layers.Conv2D(30, 3)\r\n    return c\r\n", id="crlf"),
        # an indented backslash gives the statement its column: `y` is inside the `if`
        pytest.param("if x:\n    a = 1\n    \\\nc = keras.layers.Conv2D(30, 3)\n", id="indented-backslash"),
        pytest.param("def f(x):\n\\\n\\\n    c = keras.layers.Conv2D(30, 3)\n    return c\n", id="two-lines"),
    ],
)
def test_lone_backslash_line_before_an_indented_statement_parses_like_cpython(src):
    src = KF + src
    ast.parse(src)
    res = lint_source(src, "m.py", settings("KF102"))
    assert [d.code for d in res.diagnostics] == ["KF102"]
    (d,) = res.diagnostics
    assert d.row == src[: src.index("(30,")].count("\n") + 1
    out = fix_source(src, "m.py", settings("KF102"), unsafe=True)
    assert out.error is None and out.source == src.replace("(30,", "(32,")


def test_backslash_line_keeps_cpython_block_structure():
    """libcst put `y` inside the `if` (col-0 backslash, col-0 statement): CPython does not."""
    from kerasfit.engine.layout import for_libcst

    src = "if x:\n    a = 1\n\\\ny = 2\n"
    module = cst.parse_module(for_libcst(src))
    assert [type(s).__name__ for s in module.body] == ["If", "SimpleStatementLine"]
    assert [type(s).__name__ for s in ast.parse(src).body] == ["If", "Assign"]
    # inside brackets, after a continued line and inside a string the line is kept as written
    for kept in ("f(1,\n\\\n2)\n", "x = 1 + \\\n\\\n  2\n", 's = """\n\\\n"""\n'):
        assert for_libcst(kept) == kept


def test_an_edit_that_misses_its_text_is_refused_and_named(tmp_path):
    src = "a = f(30)\n"
    good = Fix(Applicability.SAFE, "ok", (Edit(6, 8, "32", 1, 6, 1, 8, expected="30"),))
    shifted = Fix(Applicability.SAFE, "shifted", (Edit(5, 7, "32", 1, 5, 1, 7, expected="30"),))
    assert apply_fixes(src, [good])[0] == "a = f(32)\n"
    new, chosen = apply_fixes(src, [shifted])
    assert new == src and chosen == []


def test_fix_source_names_a_rule_whose_edit_missed(monkeypatch):
    """A rule whose fix points at the wrong text: dropped, named, the file left alone."""
    from kerasfit.engine import lint

    real = lint.to_fix

    def shifted(spec, pos, module, indents=None):
        fix = real(spec, pos, module, indents)
        if fix is None:
            return None
        e = fix.edits[0]
        moved = Edit(e.start - 1, e.end - 1, e.content, e.row, e.column - 1, e.end_row, e.end_column - 1, e.expected)
        return Fix(fix.applicability, fix.title, (moved,), fix.imports)

    monkeypatch.setattr(lint, "to_fix", shifted)
    src = "import tf_keras as keras\nc = keras.layers.Conv2D(30, 3)\n"
    out = fix_source(src, "m.py", settings("KF102"), unsafe=True)
    assert out.source == src
    assert out.error == "m.py: a fix did not find the text it replaces at its position and was not applied (KF102)"


def test_every_edit_carries_the_text_it_replaces():
    src = KF + "c = keras.layers.Conv2D(30, 3)\n"
    (d,) = lint_source(src, "m.py", settings("KF102")).diagnostics
    (e,) = d.fix.edits
    assert e.expected == "30" == src[e.start : e.end]


# ---- 5. fixes keep comments, indentation and line endings ---------------------------------------

TPU = "import tensorflow as tf\nstrategy = tf.distribute.TPUStrategy(resolver)\nwith strategy.scope():\n"


def test_kf204_keeps_the_comment_after_the_last_argument():
    src = TPU + '    model.compile(\n        optimizer="adam",\n        loss="mse",  # keep: tuned\n    )\n'
    out = fix_source(src, "m.py", settings("KF204"), unsafe=True)
    assert out.source == TPU + (
        '    model.compile(\n        optimizer="adam",\n        loss="mse",  # keep: tuned\n'
        "        steps_per_execution=32,\n    )\n"
    )


def test_kf204_writes_crlf_into_a_crlf_file(tmp_path):
    src = (TPU + '    model.compile(\n        optimizer="adam",\n        loss="mse",\n    )\n').replace("\n", "\r\n")
    f = write(tmp_path / "m.py", src.encode())
    r = run("check", "m.py", "--fix", "--unsafe-fixes", "--no-cache", "--select", "KF204", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    data = f.read_bytes()
    assert b"        steps_per_execution=32,\r\n    )\r\n" in data
    assert data.count(b"\n") == data.count(b"\r\n")  # no bare LF anywhere


@pytest.mark.parametrize("last", [False, True])
def test_kf101_keras3_keeps_the_comment_after_fused(last):
    tail = "" if last else "    epsilon=1e-3,\n"
    src = f"import keras\n\nbn = keras.layers.BatchNormalization(\n    momentum=0.9,\n    fused=True,  # the old default\n{tail})\n"
    out = fix_source(src, "m.py", settings("KF101"))
    assert out.source == f"import keras\n\nbn = keras.layers.BatchNormalization(\n    momentum=0.9,\n    # the old default\n{tail})\n"


BN_CALL = "import keras\n\nbn = keras.layers.BatchNormalization("


@pytest.mark.parametrize(
    "args, fixed",
    [
        # the comment after the new last argument's comma (the commonest layout)
        ("\n    momentum=0.9,  # tuned\n    fused=True,\n)", "\n    momentum=0.9,  # tuned\n)"),
        # no trailing comma: both comments, and the closing paren's own line
        ("\n    momentum=0.9,  # tuned\n    fused=True  # the old default\n)",
         "\n    momentum=0.9  # tuned\n    # the old default\n)"),
        ("momentum=0.9, fused=True  # the old default\n)", "momentum=0.9  # the old default\n)"),
        # comment lines between the removed argument and the next one
        ("\n    momentum=0.9,\n    fused=True,\n    # about epsilon\n    epsilon=1e-3,\n)",
         "\n    momentum=0.9,\n    # about epsilon\n    epsilon=1e-3,\n)"),
        ("\n    fused=True,\n    # about epsilon\n    epsilon=1e-3,\n)", "\n    # about epsilon\n    epsilon=1e-3,\n)"),
        # the removed argument ends a line its neighbours share
        ("momentum=0.9, fused=True,  # old\n    epsilon=1e-3)", "momentum=0.9,  # old\n    epsilon=1e-3)"),
        ("fused=True,  # old\n    epsilon=1e-3)", "  # old\n    epsilon=1e-3)"),
    ],
    ids=["after-previous-comma", "no-trailing-comma", "one-line-no-trailing-comma", "line-after-middle", "line-after-first",
         "shared-line-middle", "shared-line-first"],
)
def test_kf101_removing_fused_keeps_every_comment_of_the_call(args, fixed):
    out = fix_source(f"{BN_CALL}{args}\n", "m.py", settings("KF101"))
    assert out.source == f"{BN_CALL}{fixed}\n"
    assert fix_source(out.source, "m.py", settings("KF101")).source == out.source


def test_kf103_keeps_a_multiline_conv_calls_indentation_and_style():
    src = (
        "import tensorflow as tf\n\n\ndef block(x):\n    if True:\n"
        "        x = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])\n"
        "        x = tf.keras.layers.Conv2D(\n            64,\n            3,\n            use_bias=False,\n        )(x)\n"
        "    return x\n"
    )
    out = fix_source(src, "m.py", settings("KF103"))
    assert out.source == (
        "import tensorflow as tf\n\n\ndef block(x):\n    if True:\n"
        '        x = tf.keras.layers.Conv2D(\n            64,\n            3,\n            use_bias=False,\n            padding="same",\n        )(x)\n'
        "    return x\n"
    )
    cst.parse_module(out.source)
