"""The language server's statement memo (kerasfit.lsp.memo) through a real client: edits
that change what KF102 reports in a statement they do not touch publish what a fresh
`kerasfit check` of the same text writes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from lsp_helpers import Doc
from kfhelpers import TWO_TOWERS, TWO_TOWERS_EDITED
from lsprotocol.converters import get_converter

pytestmark = [pytest.mark.lsp, pytest.mark.asyncio]

# KF102 reports a width two loops build once, at the literal's element, from the first
# loop: the second loop's statement reports it when the first stops walking the literal.
HIDDEN = TWO_TOWERS + '''

def unrelated_0(x):
    return x + 1


def unrelated_1(x):
    return x * 2
'''
EDITED = HIDDEN.replace(TWO_TOWERS, TWO_TOWERS_EDITED)
# the module's last layer call decides whether `y`'s Dense is an output head
HEAD = "head = layers.Dense(24)\n"
SCRIPT = HIDDEN + "\n\ninputs = tf.keras.Input((32,))\ny = layers.Dense(10)(inputs)\nmodel = tf.keras.Model(inputs, y)\n"


def _fresh_checks(texts: list[str], root: Path) -> list[list[dict]]:
    """What `kerasfit check --output-format lsp` writes for each text (one run, a folder each)."""
    paths = []
    for i, text in enumerate(texts):
        path = root / f"fresh{i}" / "model.py"
        path.parent.mkdir()
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    out = subprocess.run(
        [sys.executable, "-m", "kerasfit", "check", "--no-cache", "--output-format", "lsp", *map(str, paths)],
        capture_output=True, text=True, cwd=root, check=False,
    )
    found = json.loads(out.stdout)
    return [found.get(p.resolve().as_uri(), []) for p in paths]


async def _published(doc: Doc, expected: list[dict]) -> list[dict]:
    """The server's diagnostics once they equal ``expected``, else the last ones it published."""
    def plain(ds) -> list[dict]:
        return [get_converter().unstructure(d) for d in ds]

    try:
        return plain(await doc.diagnostics(lambda ds: plain(ds) == expected, timeout=20))
    except asyncio.TimeoutError:
        return plain(doc.client.diagnostics.get(doc.uri, []))


async def test_edits_elsewhere_publish_what_a_fresh_check_reports(client, tmp_path: Path):
    texts = [HIDDEN, EDITED, HIDDEN, SCRIPT, SCRIPT + "\n\n" + HEAD, SCRIPT]
    fresh = _fresh_checks(texts, tmp_path)
    doc = Doc(client, tmp_path / "model.py", texts[0])
    for i, (text, expected) in enumerate(zip(texts, fresh)):
        if i:
            doc.change(text)
        assert await _published(doc, expected) == expected, f"after edit {i}"
    # each edit changed what KF102 reports in a statement it did not touch: the second
    # tower's loop, then `y`'s Dense, no longer the module's last layer
    kf102 = [[d for d in ds if d["code"] == "KF102"] for ds in fresh]
    assert kf102[0][0]["data"]["fields"]["layer"] == "Dense" and kf102[1][0]["data"]["fields"]["layer"] == "Conv2D"
    assert kf102[2] == kf102[0]
    y = SCRIPT.splitlines().index("y = layers.Dense(10)(inputs)")
    at_y = [[d["severity"] for d in ds if d["range"]["start"]["line"] == y] for ds in kf102[3:]]
    assert at_y[0] == at_y[2] != at_y[1] and at_y[1]
