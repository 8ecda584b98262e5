"""Fixes remove the imports they orphan, and only those (STYLE 12): the fix carries the
imports its removed code used; the engine drops each one nothing uses any more, in the
same step that adds the imports fixes need, for the command line and the language server."""

from __future__ import annotations

from kerasfit.engine.settings import LintSettings
from kerasfit.engine.fix import fix_source
from kerasfit.engine.lint import lint_source
from kerasfit.engine.registry import all_rules
from kerasfit.core.types import TARGETS

KF103 = LintSettings([all_rules()["KF103"]], TARGETS["tpu-v5e"])


def _fix(src: str) -> str:
    out = fix_source(src, "m.py", KF103)
    assert out.error is None, out.error
    assert fix_source(out.source, "m.py", KF103).source == out.source  # idempotent
    return out.source


def test_the_fix_carries_the_import_its_removed_code_used():
    src = "from keras.layers import Conv2D, ZeroPadding2D\nx = ZeroPadding2D(1)(x)\nx = Conv2D(8, 3)(x)\n"
    (d,) = lint_source(src, "m.py", KF103).diagnostics
    assert d.fix.orphan_imports == (("keras.layers", "ZeroPadding2D", None),)


def test_a_whole_import_line_goes_when_its_only_name_is_orphaned():
    src = (
        "from keras.layers import Conv2D\nfrom keras.layers import ZeroPadding2D as ZP\n\n"
        "x = ZP(1)(x)\nx = Conv2D(8, 3)(x)\n"
    )
    assert _fix(src) == "from keras.layers import Conv2D\n\nx = Conv2D(8, 3, padding=\"same\")(x)\n"


def test_an_import_still_used_elsewhere_stays():
    src = (
        "from keras.layers import Conv2D, ZeroPadding2D\n"
        "x = ZeroPadding2D(1)(x)\nx = Conv2D(8, 3)(x)\n"
        "y = ZeroPadding2D(2)(y)\n"  # feeds no conv: not flagged, still uses the import
    )
    fixed = _fix(src)
    assert fixed.startswith("from keras.layers import Conv2D, ZeroPadding2D\n")
    assert "ZeroPadding2D(2)" in fixed


def test_two_fixes_applied_together_drop_the_import_they_orphan_together():
    src = (
        "from keras.layers import Conv2D, ZeroPadding2D\n"
        "x = ZeroPadding2D(1)(x)\nx = Conv2D(8, 3)(x)\n"
        "x = ZeroPadding2D(1)(x)\nx = Conv2D(8, 3)(x)\n"
    )
    assert _fix(src) == (
        "from keras.layers import Conv2D\n"
        'x = Conv2D(8, 3, padding="same")(x)\nx = Conv2D(8, 3, padding="same")(x)\n'
    )


def test_imports_unused_before_the_fix_are_never_removed():
    src = (
        "import os\nimport keras\nfrom keras.layers import Dense, ZeroPadding2D\n"
        "x = keras.layers.ZeroPadding2D(1)(x)\nx = keras.layers.Conv2D(8, 3)(x)\n"
    )
    # the removed code reads `keras`, still used by the conv; ZeroPadding2D / Dense / os were unused
    assert _fix(src) == (
        "import os\nimport keras\nfrom keras.layers import Dense, ZeroPadding2D\n"
        'x = keras.layers.Conv2D(8, 3, padding="same")(x)\n'
    )
    (d,) = lint_source(src, "m.py", KF103).diagnostics
    assert ("keras.layers", "ZeroPadding2D", None) not in d.fix.orphan_imports


def test_the_orphan_list_survives_the_result_cache():
    from kerasfit.core.types import Diagnostic

    src = "from keras.layers import Conv2D, ZeroPadding2D\nx = ZeroPadding2D(1)(x)\nx = Conv2D(8, 3)(x)\n"
    (d,) = lint_source(src, "m.py", KF103).diagnostics
    assert Diagnostic.from_dict(d.to_dict()).fix == d.fix
