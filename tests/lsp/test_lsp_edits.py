"""The server's pure helpers: positions, edits, suppression comments, hover text, settings."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kerasfit.lsp import edits as E
from kerasfit.core.types import Diagnostic, Severity

pytestmark = pytest.mark.lsp


def pos(line, character):
    return {"line": line, "character": character}


def apply_one(line: str, edit: dict) -> str:
    """Apply a single-line TextEdit (UTF-16 columns) to ``line``."""
    start = E.from_utf16(line, edit["range"]["start"]["character"])
    end = E.from_utf16(line, edit["range"]["end"]["character"])
    return line[:start] + edit["newText"] + line[end:]


def test_from_utf16_inverts_utf16_col():
    from kerasfit.project.reporters import utf16_col

    line = 'a = "😀é😀"; b = 1'
    for col in range(len(line) + 1):
        assert E.from_utf16(line, utf16_col(line, col)) == col


@pytest.mark.parametrize(
    "old,new,edit",
    [
        ("x = 1\n", "x = 1\n", None),
        ("a😀b = f(x)\n", "a😀b = g(x)\n", {"range": {"start": pos(0, 7), "end": pos(0, 8)}, "newText": "g"}),
        ("a\r\nb\r\n", "a\r\nB\r\n", {"range": {"start": pos(1, 0), "end": pos(1, 1)}, "newText": "B"}),
        ("a\r\n", "a\r\nb\r\n", {"range": {"start": pos(1, 0), "end": pos(1, 0)}, "newText": "b\r\n"}),
        ("one\ntwo\n", "zero\none\ntwo\n", {"range": {"start": pos(0, 0), "end": pos(0, 0)}, "newText": "zero\n"}),
    ],
)
def test_minimal_edit(old, new, edit):
    assert E.minimal_edit(old, new) == edit


@pytest.mark.parametrize(
    "line,new_line",
    [
        ("bn = BN(fused=False)", "bn = BN(fused=False)  # noqa: KF101"),
        ("bn = BN(fused=False)   ", "bn = BN(fused=False)  # noqa: KF101"),
        ("bn = BN(fused=False)  # noqa: E501", "bn = BN(fused=False)  # noqa: E501, KF101"),
        ("bn = BN(fused=False)  # noqa:E501,KF102  # why", "bn = BN(fused=False)  # noqa:E501,KF102, KF101  # why"),
        ("s = '😀'; bn = BN(fused=False)", "s = '😀'; bn = BN(fused=False)  # noqa: KF101"),
        ("bn = BN(fused=False)  # keep this", "bn = BN(fused=False)  # keep this  # noqa: KF101"),
    ],
)
def test_noqa_edit(line, new_line):
    from kerasfit.engine.suppressions import Comments

    assert apply_one(line, E.noqa_edit(0, line, "KF101", Comments.of(line).column(1))) == new_line


def test_noqa_comment_is_understood_by_the_engine():
    from kerasfit.engine.suppressions import Comments, Suppressions

    for line in ("x = 1  # noqa: E501", "x = 1", "s = '# noqa'"):
        edit = E.noqa_edit(0, line, "KF101", Comments.of(line).column(1))
        assert Suppressions.scan(apply_one(line, edit)).suppressed("KF101", {1})


def test_rule_paragraph_is_the_what_it_does_section():
    from kerasfit.engine.registry import rule_by_name_or_code

    text = E.rule_paragraph(rule_by_name_or_code("KF101").documentation())
    assert text.startswith("Flags batch normalization that does not use the fused kernel")
    assert "\n" not in text and "##" not in text and "Why" not in text
    assert E.rule_paragraph("First para\nstill first.\n\nSecond.") == "First para still first."


def test_build_lines_from_the_build_reports_ops():
    from kerasfit.crosscheck.records import OpReport

    def op(layer, line, end_line, shape, padded, fit, file="/m.py", pass_="forward"):
        return OpReport(name="conv.1", op_name=f"model/{layer}/Conv2D", op_type="Conv2D", layer=layer, pass_=pass_,
                        kind="convolution", shape=shape, padded_shape=padded, tensor="out", dims={}, fit=fit,
                        flops=1, padded_flops=1.0, source={"file": file, "line": line, "end_line": end_line})

    rep = SimpleNamespace(ops=[
        op("conv1", 7, 9, [32, 30], [32, 128], 0.234),
        op("dense", 12, 12, [32, 10], [32, 128], 0.078),
        op(None, 8, 8, [8, 3], [8, 128], 0.5, pass_="kernel-grad"),
        op("other", 8, 8, [1], [8], 0.1, file="/elsewhere.py"),
    ])
    assert E.build_lines_for_row(rep, 8, "/m.py") == [
        "- `conv1` (forward): 32×30 → 32×128, fit 23%",
        "- `model/None/Conv2D` (kernel-grad): 8×3 → 8×128, fit 50%",
    ]
    assert E.build_lines_for_row(rep, 10, "/m.py") == []
    flat = {"ops": [{"layer": "d", "source": {"file": "/m.py", "line": 3}, "shape": [8, 3], "padded_shape": [8, 128], "fit": 0.5}]}
    assert E.build_lines_for_row(flat, 3, "/m.py") == ["- `d`: 8×3 → 8×128, fit 50%"]
    assert E.build_lines_for_row(object(), 3) == []


def test_hover_markdown_with_build_data():
    d = Diagnostic("KF101", "unfused-batchnorm", "msg", Severity.WARNING, "m.py", 1, 0, 1, 5)
    d.build = {"status": "confirmed", "detail": "3 ops", "shape": [1, 30], "padded_shape": [8, 128], "fit": 0.03}
    md = E.hover_markdown([d], {"KF101": "Flags it."}, ["- `x`: [1] → [8]"], pages={"KF101": "file:///d/KF101.md"})
    assert md.startswith("**KF101** `unfused-batchnorm` — msg\n\nFlags it.")
    assert "- build: **confirmed** — 3 ops" in md
    assert "1×30 → 8×128, fit 3%" in md
    assert "**Build report** (cached)" in md
    assert "(cached, tpu-v5e)" in E.hover_markdown([d], {}, ["- x"], "cached, tpu-v5e")
    assert "`kerasfit explain KF101` ([rule page](file:///d/KF101.md))" in md


def test_settings_from_client():
    pytest.importorskip("pygls")
    from kerasfit.lsp.settings import DEFAULT_DEBOUNCE_MS, Settings

    s = Settings.from_client({"kerasfit": {"select": "KF1, KF2", "extend-select": ["KF9"], "unsafeFixes": True,
                                           "debounceMs": 0, "target": "tpu-v6e", "batchSize": 64}})
    assert s.select == ["KF1", "KF2"] and s.extend_select == ["KF9"] and s.unsafe_fixes
    assert s.debounce_ms == 0 and s.target == "tpu-v6e" and s.batch_size == 64
    opts = s.check_options()
    assert opts.selection.select == ["KF1", "KF2"] and opts.unsafe_fixes and opts.target == "tpu-v6e"
    assert Settings.from_client(None).debounce_ms == DEFAULT_DEBOUNCE_MS
    assert Settings.from_client({"debounce_ms": -5, "cores": 0}) == Settings()


def test_kerasfit_import_does_not_import_pygls():
    import subprocess
    import sys

    code = "import sys, kerasfit, kerasfit.project.check, kerasfit.front.cli, kerasfit.project.reporters, kerasfit.lsp, kerasfit.lsp.edits; print(any(m.split('.')[0] in ('pygls', 'lsprotocol') for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_quickfix_titles_and_one_fix_applied():
    pytest.importorskip("pygls")
    from kerasfit.lsp.actions import _applied
    from kerasfit.core.types import Applicability, Edit, Fix

    src = "x = f(30)\n"
    edit = (Edit(6, 8, "32", 1, 6, 1, 8),)
    unsafe = Diagnostic("KF102", "channel-multiple", "m", Severity.WARNING, "m.py", 1, 4, 1, 9,
                        Fix(Applicability.UNSAFE, "Round up", edit))
    assert E.quickfix_title(unsafe) == "Round up (unsafe)"
    assert _applied(src, unsafe.fix) == "x = f(32)\n"
    assert _applied("\ufeff" + src, Fix(Applicability.SAFE, "t", (Edit(6, 8, "32", 1, 6, 1, 8),))) == "\ufeffx = f(32)\n"


def test_quickfix_with_an_import_adds_it():
    pytest.importorskip("pygls")
    from kerasfit.lsp.actions import _applied
    from kerasfit.core.types import Applicability, Edit, Fix

    src = "import tensorflow as tf\n\ny = tf.nn.relu(x)\n"
    start = src.index("tf.nn.relu")
    fix = Fix(Applicability.SAFE, "Use keras", (Edit(start, start + 10, "keras.ops.relu", 3, 4, 3, 14),),
              imports=(("keras", None, None),))
    assert _applied(src, fix) == "import tensorflow as tf\nimport keras\n\ny = keras.ops.relu(x)\n"


def test_cached_build_report_only_for_the_saved_buffer(tmp_path, monkeypatch):
    pytest.importorskip("pygls")
    build_api = pytest.importorskip("kerasfit.crosscheck.api")
    from kerasfit.lsp import hover

    calls = []

    def fake(path, cache_dir):
        calls.append(path)
        return SimpleNamespace(ops=[], target="tpu-v5e", step_fit=0.5)

    monkeypatch.setattr(build_api, "cached_report", fake, raising=False)
    model = tmp_path / "m.py"
    model.write_text("import tf_keras\n")
    assert hover._cached_build_report(str(model), "import tf_keras\n").target == "tpu-v5e"
    assert hover._cached_build_report(str(model), "import tf_keras\n") is not None
    assert len(calls) == 1  # cached until the file changes
    assert hover._cached_build_report(str(model), "import tf_keras\n# unsaved\n") is None
    assert hover._cached_build_report(str(tmp_path / "missing.py"), "") is None
