"""A syntax error costs only the top-level statements it breaks."""

from __future__ import annotations

import pytest

from kfhelpers import finding_lines, run, write

from kerasfit.engine.settings import LintSettings
from kerasfit.engine.fix import fix_source
from kerasfit.engine.lint import lint_source
from kerasfit.engine.registry import all_rules

SRC = '''import tf_keras
from tf_keras import layers


def broken(x):
    y = layers.Conv2D(32, 3)(x
    return y


def fine(x):
    """Docstring with a line at column 0:
like this one.
"""
    return layers.BatchNormalization(fused=False)(x)


if fine:
    a = layers.BatchNormalization(fused=False)
else:
    pass

HEAD = layers.Dense(100)
'''


@pytest.fixture
def settings():
    return LintSettings(list(all_rules().values()))


def test_findings_around_an_unclosed_paren_are_kept(settings):
    out = lint_source(SRC, "m.py", settings)
    got = [(d.code, d.row) for d in out.diagnostics]
    assert ("KF001", 6) in got
    assert ("KF101", 14) in got and ("KF101", 18) in got
    assert any(code == "KF102" and row == 22 for code, row in got)
    # positions are those of the file as written
    lines = SRC.splitlines(keepends=True)
    for d in out.diagnostics:
        if d.code != "KF001":
            assert sum(map(len, lines[: d.row - 1])) + d.column == d.start


def test_two_broken_statements_two_errors(settings):
    src = SRC.replace("HEAD = layers.Dense(100)", "def g(:\n    pass\n\nHEAD = layers.Dense(100)")
    out = lint_source(src, "m.py", settings)
    assert [d.row for d in out.diagnostics if d.code == "KF001"] == [6, 22]
    assert sum(d.code == "KF101" for d in out.diagnostics) == 2


def test_a_file_with_a_syntax_error_is_not_fixed(settings):
    out = fix_source(SRC, "m.py", settings, unsafe=True)
    assert out.source == SRC and out.applied == 0


def test_cli_reports_around_the_error(tmp_path):
    write(tmp_path / "m.py", SRC)
    found = finding_lines(run("check", "--no-cache", "m.py", cwd=tmp_path).stdout)
    assert found[0].startswith("m.py:6:") and "KF001" in found[0]
    assert any(f.startswith("m.py:14:") and "KF101" in f for f in found), found
    r = run("check", "--no-cache", "--fix", "m.py", cwd=tmp_path)
    assert (tmp_path / "m.py").read_text() == SRC, r
