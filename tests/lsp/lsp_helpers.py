"""Client-side helpers for the end-to-end tests: an open document that applies edits like an editor."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Callable

from lsprotocol import types
from pytest_lsp import LanguageClient


# ---- helpers used by the tests ---------------------------------------------------------


class Doc:
    """One open document on the client side: keeps the text and version in step."""

    def __init__(self, client: LanguageClient, path: Path, text: str, uri: str | None = None) -> None:
        self.client, self.path, self.text, self.version = client, path, text, 1
        self.uri = uri or path.as_uri()
        path.write_text(text, encoding="utf-8")
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=self.uri, language_id="python", version=1, text=text)
            )
        )

    def change(self, text: str) -> None:
        self.version += 1
        self.text = text
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    def apply(self, edit: types.WorkspaceEdit) -> None:
        """Apply a WorkspaceEdit the way an editor does, then tell the server."""
        changes = []
        for dc in edit.document_changes or []:
            assert dc.text_document.uri == self.uri
            assert dc.text_document.version in (None, self.version), "edit made for an older version"
            changes.extend(dc.edits)
        for uri, edits in (edit.changes or {}).items():
            assert uri == self.uri
            changes.extend(edits)
        self.change(apply_text_edits(self.text, changes))

    async def diagnostics(self, until: Callable[[list[types.Diagnostic]], bool], timeout: float = 15.0):
        async def wait() -> list[types.Diagnostic]:
            while True:
                current = list(self.client.diagnostics.get(self.uri, []))
                if self.uri in self.client.diagnostics and until(current):
                    return current
                await self.client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)

        return await asyncio.wait_for(wait(), timeout)

    async def code_actions(self, rng: types.Range, only: list[str] | None = None, diags=()) -> list[types.CodeAction]:
        res = await self.client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=self.uri),
                range=rng,
                context=types.CodeActionContext(diagnostics=list(diags), only=only),
            )
        )
        return [a for a in res or [] if isinstance(a, types.CodeAction)]

    async def resolve(self, action: types.CodeAction) -> types.CodeAction:
        """What an editor does when the user picks an action offered without its edit."""
        if action.edit is None and action.data is not None:
            action = await self.client.code_action_resolve_async(action)
        return action


def utf16_to_index(line: str, character: int) -> int:
    units = 0
    for i, ch in enumerate(line):
        if units >= character:
            return i
        units += 2 if ord(ch) > 0xFFFF else 1
    return len(line)


def apply_text_edits(text: str, edits: list[types.TextEdit]) -> str:
    # LSP lines end at \n, \r\n or \r only (str.splitlines also splits at \f, \v, ...)
    lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", text) or [""]
    if text.endswith("\n"):
        lines.append("")

    def offset(pos: types.Position) -> int:
        before = sum(len(l) for l in lines[: pos.line])
        line = lines[pos.line].rstrip("\r\n") if pos.line < len(lines) else ""
        return before + utf16_to_index(line, pos.character)

    spans = sorted(((offset(e.range.start), offset(e.range.end), e.new_text) for e in edits), reverse=True)
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text
