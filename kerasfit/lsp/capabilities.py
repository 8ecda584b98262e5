"""The ``initialize`` answer the server gives, known without importing pygls (the boot
path sends it before the server is loaded; the server checks pygls agrees)."""

from __future__ import annotations

import json
import os
from typing import Any


def capabilities_path() -> str:
    return os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "lsp_capabilities.json")


def initialize_result(params: dict[str, Any], version: str) -> dict[str, Any]:
    """What pygls answers to ``initialize`` with these params, without importing it."""
    with open(capabilities_path(), encoding="utf-8") as f:
        capabilities = json.load(f)
    client = params.get("capabilities")
    if not isinstance(client, dict) or client.get("notebookDocument") is None:
        # pygls offers notebook sync only to clients that declare notebook support
        capabilities.pop("notebookDocumentSync", None)
    return {"capabilities": capabilities, "serverInfo": {"name": "kerasfit", "version": version}}


def same_answer(sent: Any, pygls: Any) -> bool:
    """Equal as LSP reads them: an optional boolean that is false is the same as absent."""
    return bool(_normal(sent) == _normal(pygls))


def _normal(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items() if v is not False and v is not None}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value
