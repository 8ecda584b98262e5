"""Documents whose URIs are percent-escaped: every feature must find them.

pygls keeps open documents under the percent-decoded URI; a server that looks them up
with the client's spelling hears nothing for a path with a space, a non-ASCII letter,
a Windows drive letter as VS Code writes it (``c%3A``) or a notebook cell.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lsp_helpers import Doc
from lsprotocol import types

pytestmark = [pytest.mark.lsp, pytest.mark.asyncio]

BN = "import tf_keras\nbn = tf_keras.layers.BatchNormalization(fused=False)\n"


def _uris(tmp_path: Path) -> dict[str, str]:
    spaced = tmp_path / "my models" / "ré seau.py"
    spaced.parent.mkdir()
    return {
        # Path.as_uri escapes the space and the é (r%C3%A9%20seau.py)
        "space-and-non-ascii": spaced.as_uri(),
        # VS Code on Windows: the drive letter's colon is escaped
        "windows-drive": "file:///c%3A/Users/k/train%20model.py",
        # a Jupyter cell in VS Code: the fragment is base64 with escaped '='
        "notebook-cell": "vscode-notebook-cell:/home/k/train.ipynb#W0sZmlsZQ%3D%3D",
    }


@pytest.mark.parametrize("kind", ["space-and-non-ascii", "windows-drive", "notebook-cell"])
async def test_escaped_uri_gets_diagnostics_hover_and_actions(client, tmp_path: Path, kind: str):
    uri = _uris(tmp_path)[kind]
    assert "%" in uri
    doc = Doc(client, tmp_path / "unused.py", BN, uri=uri)
    (d,) = await doc.diagnostics(lambda ds: bool(ds))
    assert d.code == "KF101" and d.range.start.line == 1
    # published under the client's own spelling of the URI
    assert uri in client.diagnostics

    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=1, character=8))
    )
    assert hover is not None and "KF101" in hover.contents.value

    actions = await doc.code_actions(d.range, diags=[d])
    fix = next(a for a in actions if a.title.startswith("Use the fused batch-norm kernel"))
    assert fix.edit.document_changes[0].text_document.uri == uri
    doc.apply(fix.edit)
    assert "fused=True" in doc.text
    await doc.diagnostics(lambda ds: not ds)

    fix_all = await doc.code_actions(types.Range(start=types.Position(line=0, character=0), end=types.Position(line=2, character=0)), only=["source.fixAll"])
    assert fix_all == []
    client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
