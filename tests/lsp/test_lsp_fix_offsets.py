"""The language server applies quick fixes from the same Fix objects as --fix, so it
gets the same guarantee: an edit lands on the text it was made for (issue 8, item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsp_helpers import Doc
from lsprotocol import types

pytestmark = [pytest.mark.lsp, pytest.mark.asyncio]

# Form feeds at line starts (PEP 8's page breaks) before the flagged calls.
PAGED = (
    "import tf_keras\n"
    "\f\n"
    "\fx = 1\n"
    "c = tf_keras.layers.Conv2D(30, 3)\n"
    "\f\f\n"
    "d = tf_keras.layers.Dense(100)\n"
)


async def test_quick_fixes_after_form_feeds_edit_the_right_text(client, tmp_path: Path):
    doc = Doc(client, tmp_path / "model.py", PAGED)
    diags = await doc.diagnostics(lambda ds: len([d for d in ds if d.code == "KF102"]) == 2)
    expected = PAGED
    for want, before, after in ((3, "Conv2D(30, 3)", "Conv2D(32, 3)"), (5, "Dense(100)", "Dense(104)")):
        (d,) = [d for d in diags if d.code == "KF102" and d.range.start.line == want]
        actions = await doc.code_actions(d.range, only=[types.CodeActionKind.QuickFix], diags=[d])
        (fix,) = [a for a in actions if a.title.endswith("(unsafe)")]
        doc.apply(fix.edit)
        expected = expected.replace(before, after)
        assert doc.text == expected
        diags = await doc.diagnostics(lambda ds: want not in {x.range.start.line for x in ds if x.code == "KF102"})
