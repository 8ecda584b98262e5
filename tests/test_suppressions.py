"""Suppression comments: `# noqa`, `# noqa: CODES`, `# kerasfit: ignore[...]`, `ignore-file`."""

from __future__ import annotations

import pytest

from kfhelpers import run, write

from kerasfit.engine.settings import LintSettings
from kerasfit.engine.fix import fix_source
from kerasfit.engine.lint import lint_source
from kerasfit.engine.registry import all_rules

HEAD = "import tf_keras as keras\n"
CALL = "bn = keras.layers.BatchNormalization(fused=False)(keras.layers.Conv2D(8, 3)(x))"


@pytest.fixture(scope="module")
def settings() -> LintSettings:
    return LintSettings([all_rules()["KF101"]])


def kf101_rows(source: str, settings) -> list[int]:
    return [d.row for d in lint_source(source, "m.py", settings).diagnostics if d.code == "KF101"]


@pytest.mark.parametrize(
    "comment,suppressed",
    [
        ("", False),
        ("# noqa", True),
        ("#noqa", True),
        ("# NOQA", True),
        ("# noqa: KF101", True),
        ("# noqa:KF101", True),
        ("# noqa: kf101", True),
        ("# noqa: E501, KF101", True),
        ("# noqa: E501,KF101", True),
        ("# noqa: E501", False),  # another tool's code does not silence kerasfit
        ("# noqa: KF102", False),
        ("# noqa: KF1010", False),
        ("# kerasfit: ignore[KF101]", True),
        ("# kerasfit: ignore[KF102, KF101]", True),
        ("# kerasfit: ignore[KF102]", False),
        ("# kerasfit: ignore", True),
        ("# type: ignore  # noqa: KF101", True),
        ("# kerasfit: ignore-file[KF102]", False),
    ],
)
def test_line_comments(settings, comment, suppressed):
    src = HEAD + f"{CALL}  {comment}\n".replace("  \n", "\n") + "other = keras.layers.BatchNormalization(fused=False)\n"
    rows = kf101_rows(src, settings)
    assert rows == ([3] if suppressed else [2, 3])


def test_noqa_on_other_line_does_not_suppress(settings):
    src = HEAD + "# noqa: KF101\n" + CALL + "\n"
    assert kf101_rows(src, settings) == [3]


def test_multiline_finding_suppressed_on_first_or_last_line(settings):
    first = HEAD + "bn = keras.layers.BatchNormalization(  # noqa: KF101\n    fused=False,\n)\n"
    last = HEAD + "bn = keras.layers.BatchNormalization(\n    fused=False,\n)  # noqa: KF101\n"
    middle = HEAD + "bn = keras.layers.BatchNormalization(\n    fused=False,  # noqa: KF101\n)\n"
    assert kf101_rows(first, settings) == []
    assert kf101_rows(last, settings) == []
    assert kf101_rows(middle, settings) == [2]


@pytest.mark.parametrize("comment,suppressed", [
    ("# kerasfit: ignore-file[KF101]", True),
    ("# kerasfit: ignore-file", True),
    ("# kerasfit: ignore-file[KF102]", False),
    ("# kerasfit: ignore-file[kf101, KF102]", True),
])
def test_file_level(settings, comment, suppressed):
    for src in (f"{comment}\n" + HEAD + CALL + "\n", HEAD + CALL + "\n" + f"x = 1\n{comment}\n"):
        assert kf101_rows(src, settings) == ([] if suppressed else [2 if src.startswith("import") else 3])


def test_noqa_inside_string_is_not_a_comment_of_another_line(settings):
    src = HEAD + 'doc = "# noqa"\n' + CALL + "\n"
    assert kf101_rows(src, settings) == [3]


def test_suppressed_finding_is_not_fixed(settings):
    src = HEAD + CALL + "  # noqa: KF101\n" + CALL + "\n"
    out = fix_source(src, "m.py", settings)
    assert out.source == HEAD + CALL + "  # noqa: KF101\n" + CALL.replace("False", "True") + "\n"
    assert out.diagnostics == []


def test_syntax_errors_are_not_suppressible_by_noqa(settings):
    diags = lint_source("import tensorflow  # noqa\ndef f(:  # noqa\n", "m.py", settings).diagnostics
    assert [d.code for d in diags] == ["KF001"]


def test_cli_respects_suppressions(tmp_path):
    write(tmp_path / "m.py", HEAD + CALL + "  # noqa: KF101\n" + CALL + "  # noqa: E501\n")
    r = run("check", "m.py", "--no-cache", cwd=tmp_path)
    assert r.returncode == 1
    assert [line.split(":")[1] for line in r.lines if ": KF101" in line] == ["3"]
    write(tmp_path / "m.py", "# kerasfit: ignore-file\n" + HEAD + CALL + "\n")
    assert run("check", "m.py", "--no-cache", cwd=tmp_path).returncode == 0


def test_each_repeated_regularizer_is_its_own_finding() -> None:
    """A regularizer repeated across layers is one finding per site, so a `# noqa`
    silences its own line only (issue 9, item 5)."""
    source = (
        "from tensorflow.keras import layers, regularizers\n"
        "x = layers.Conv2D(64, 3, kernel_regularizer=regularizers.l2(1e-4))(x)\n"
        "x = layers.Conv2D(64, 3, kernel_regularizer=regularizers.l2(1e-4))(x)  # noqa: KF104\n"
        "x = layers.Conv2D(64, 3, kernel_regularizer=regularizers.l2(1e-4))(x)\n"
    )
    settings = LintSettings([all_rules()["KF104"]])
    rows = [d.row for d in lint_source(source, "m.py", settings).diagnostics if d.code == "KF104"]
    assert rows == [2, 4]


# ---- suppressions as Python reads them: comment tokens, physical lines (issue 30, 15-16) ------


@pytest.mark.parametrize(
    "line",
    [
        CALL + '; s = "# noqa"',
        CALL + "; s = '# noqa: KF101'",
        CALL + '; s = """# kerasfit: ignore[KF101]"""',
        CALL + "; s = f'{1} # noqa'",
    ],
)
def test_noqa_inside_a_string_literal_on_the_line_suppresses_nothing(settings, line):
    assert kf101_rows(HEAD + line + "\n", settings) == [2]


@pytest.mark.parametrize("text", ['"# kerasfit: ignore-file"', "'''\n# kerasfit: ignore-file\n'''", "b'# kerasfit: ignore-file[KF101]'"])
def test_ignore_file_inside_a_string_literal_suppresses_nothing(settings, text):
    src = HEAD + f"doc = {text}\n" + CALL + "\n"
    assert kf101_rows(src, settings) == [src.count("\n")]


def test_a_comment_after_a_string_holding_a_hash_still_counts(settings):
    assert kf101_rows(HEAD + CALL + '; s = "#"  # noqa: KF101\n', settings) == []


@pytest.mark.parametrize("before", ["x = 1\n\f\n", "\f\n", "x = 1\f\n", "s = 'a\u2028b'\n", "s = '\u2029'\n",
                                    "s = '\x0b\x1c\x1d\x1e\x85'\n"])
def test_noqa_counts_the_physical_lines_python_counts(settings, before):
    """A form feed, a U+2028 in a string (and the other characters str.splitlines splits
    on) end no line for Python: the comment's row used to be counted one too far."""
    src = HEAD + before + CALL + "  # noqa: KF101\n" + CALL + "\n"
    rows = kf101_rows(src, settings)
    assert rows == [src.count("\n")], rows


def test_statements_around_a_syntax_error_keep_their_suppressions(settings):
    src = (HEAD + CALL + "  # noqa: KF101\n" + "s = '''never closed\n\n" + "y = 2\n" + CALL + "  # noqa\n" + CALL + "\n")
    from kerasfit.engine.suppressions import Suppressions

    sup = Suppressions.scan(src)
    assert sup.suppressed("KF101", {2}) and sup.suppressed("KF101", {6}) and not sup.suppressed("KF101", {7})
    bad_dedent = HEAD + "if x:\n        y = 1\n    z = 2  # noqa\n" + CALL + "  # noqa: KF101\n" + CALL + "\n"
    sup = Suppressions.scan(bad_dedent)
    assert sup.suppressed("KF101", {5}) and not sup.suppressed("KF101", {6})


def _noqa_twice(tmp_path, src: str) -> tuple[list[str], list[str], str]:
    write(tmp_path / "m.py", src)
    first = run("check", "--no-cache", "--add-noqa", "m.py", cwd=tmp_path).lines
    second = run("check", "--no-cache", "--add-noqa", "m.py", cwd=tmp_path).lines
    return first, second, (tmp_path / "m.py").read_text()


@pytest.mark.parametrize("before", ["x = 1\n\f\n", "s = 'a\u2028b'\n", 's = "# noqa"; t = 1\n'])
def test_add_noqa_adds_once_and_the_finding_stops_failing(tmp_path, before):
    """``--add-noqa`` said "Added" on every run while the finding kept failing."""
    first, second, text = _noqa_twice(tmp_path, HEAD + before + CALL + "\n")
    assert first[-1] == "Added a noqa comment for 1 finding(s) in 1 file(s).", first
    assert second[-1] == "Added a noqa comment for 0 finding(s) in 0 file(s).", second
    assert run("check", "--no-cache", "m.py", cwd=tmp_path).returncode == 0
    assert text.endswith(CALL + "  # noqa: KF101\n")


def test_add_noqa_on_a_line_with_noqa_in_a_string_adds_a_real_comment(tmp_path):
    first, second, text = _noqa_twice(tmp_path, HEAD + CALL + '; s = "# noqa: E501"\n')
    assert text == HEAD + CALL + '; s = "# noqa: E501"  # noqa: KF101\n'
    assert second[-1] == "Added a noqa comment for 0 finding(s) in 0 file(s).", second
