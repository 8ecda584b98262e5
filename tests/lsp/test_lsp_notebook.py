"""Notebooks in the language server, the way VS Code's Jupyter extension sends them:
``notebookDocument/*`` with one text document per cell, linted together."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import pytest_lsp
from lsp_helpers import apply_text_edits
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from conftest import SERVER, _register_capability_handler

pytestmark = [pytest.mark.lsp, pytest.mark.asyncio]

CELLS = [
    (types.NotebookCellKind.Code, "!pip install -q tf-keras\nimport tf_keras\nfrom tf_keras import layers"),
    (types.NotebookCellKind.Markup, "# The model"),
    # `layers` comes from the first cell
    (types.NotebookCellKind.Code, "%matplotlib inline\nx = 1\nbn = layers.BatchNormalization(fused=False)"),
]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def nb_client(lsp_client: LanguageClient, tmp_path: Path):
    _register_capability_handler(lsp_client)
    caps = client_capabilities("visual-studio-code")
    caps.notebook_document = types.NotebookDocumentClientCapabilities(
        synchronization=types.NotebookDocumentSyncClientCapabilities(execution_summary_support=True)
    )
    caps.text_document.code_action.resolve_support = types.ClientCodeActionResolveOptions(properties=["edit"])
    caps.text_document.code_action.data_support = True
    result = await lsp_client.initialize_session(
        types.InitializeParams(capabilities=caps, root_uri=tmp_path.as_uri(), initialization_options={"debounceMs": 20, "unsafeFixes": True})
    )
    lsp_client.server_caps = result.capabilities  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


class Notebook:
    def __init__(self, client: LanguageClient, path: Path) -> None:
        self.client, self.version = client, 1
        self.uri = path.as_uri()
        # VS Code's cell URIs: the notebook's path, a base64 fragment with escaped '='
        self.cells = [(f"vscode-notebook-cell:{path.as_posix()}#W{i}sZmlsZQ%3D%3D", kind, text) for i, (kind, text) in enumerate(CELLS)]
        self.texts = {uri: text for uri, _, text in self.cells}
        client.notebook_document_did_open(
            types.DidOpenNotebookDocumentParams(
                notebook_document=types.NotebookDocument(
                    uri=self.uri, notebook_type="jupyter-notebook", version=1,
                    cells=[types.NotebookCell(kind=k, document=u) for u, k, _ in self.cells],
                ),
                cell_text_documents=[
                    types.TextDocumentItem(uri=u, language_id="python" if k == types.NotebookCellKind.Code else "markdown", version=1, text=t)
                    for u, k, t in self.cells
                ],
            )
        )

    def cell(self, i: int) -> str:
        return self.cells[i][0]

    def set_text(self, cell_uri: str, text: str) -> None:
        self.version += 1
        self.texts[cell_uri] = text
        self.client.notebook_document_did_change(
            types.DidChangeNotebookDocumentParams(
                notebook_document=types.VersionedNotebookDocumentIdentifier(uri=self.uri, version=self.version),
                change=types.NotebookDocumentChangeEvent(
                    cells=types.NotebookDocumentCellChanges(
                        text_content=[
                            types.NotebookDocumentCellContentChanges(
                                document=types.VersionedTextDocumentIdentifier(uri=cell_uri, version=self.version),
                                changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
                            )
                        ]
                    )
                ),
            )
        )

    def apply(self, edit: types.WorkspaceEdit) -> None:
        for dc in edit.document_changes:
            uri = dc.text_document.uri
            self.set_text(uri, apply_text_edits(self.texts[uri], dc.edits))

    async def diagnostics(self, cell_uri: str, until, timeout: float = 15.0) -> list[types.Diagnostic]:
        async def wait():
            while True:
                if cell_uri in self.client.diagnostics and until(self.client.diagnostics[cell_uri]):
                    return list(self.client.diagnostics[cell_uri])
                await self.client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)

        try:
            return await asyncio.wait_for(wait(), timeout)
        except TimeoutError:
            raise AssertionError(f"no diagnostics for {cell_uri}: {self.client.diagnostics}") from None


async def test_notebook_cells_linted_together_and_fixed(nb_client, tmp_path: Path):
    sync = nb_client.server_caps.notebook_document_sync
    assert sync is not None and sync.notebook_selector
    nb = Notebook(nb_client, tmp_path / "train.ipynb")
    third = nb.cell(2)
    (d,) = await nb.diagnostics(third, bool)
    assert d.code == "KF101" and d.range.start == types.Position(line=2, character=5)
    assert await nb.diagnostics(nb.cell(0), lambda ds: not ds) == []

    # quick fix: offered without its edit, resolved on demand, edits only that cell
    actions = await nb_client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=third), range=d.range,
            context=types.CodeActionContext(diagnostics=[d]),
        )
    )
    fix = next(a for a in actions if a.title.startswith("Use the fused batch-norm kernel"))
    assert fix.edit is None and fix.data
    resolved = await nb_client.code_action_resolve_async(fix)
    assert [dc.text_document.uri for dc in resolved.edit.document_changes] == [third]
    nb.apply(resolved.edit)
    assert nb.texts[third] == "%matplotlib inline\nx = 1\nbn = layers.BatchNormalization(fused=True)"
    await nb.diagnostics(third, lambda ds: not ds)

    # the import in cell 1 is what resolves `layers` in cell 3
    nb.set_text(third, CELLS[2][1])
    (d,) = await nb.diagnostics(third, bool)
    assert "resolved by name" not in d.message
    nb.set_text(nb.cell(0), "import numpy as np")
    await nb.diagnostics(third, lambda ds: bool(ds) and "resolved by name" in ds[0].message)
    nb.set_text(nb.cell(0), CELLS[0][1])
    await nb.diagnostics(third, lambda ds: bool(ds) and "resolved by name" not in ds[0].message)

    # the notebook's fix-all, resolved lazily; magics survive
    actions = await nb_client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=nb.cell(0)),
            range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
            context=types.CodeActionContext(diagnostics=[], only=["notebook.source.fixAll"]),
        )
    )
    assert [a.kind for a in actions] == ["notebook.source.fixAll.kerasfit"] and actions[0].edit is None
    resolved = await nb_client.code_action_resolve_async(actions[0])
    nb.apply(resolved.edit)
    assert nb.texts[third].startswith("%matplotlib inline\n") and "fused=True" in nb.texts[third]
    assert nb.texts[nb.cell(0)] == CELLS[0][1]
    await nb.diagnostics(third, lambda ds: not ds)

    nb_client.notebook_document_did_close(
        types.DidCloseNotebookDocumentParams(
            notebook_document=types.NotebookDocumentIdentifier(uri=nb.uri),
            cell_text_documents=[types.TextDocumentIdentifier(uri=u) for u, _, _ in nb.cells],
        )
    )
