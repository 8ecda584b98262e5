"""A real client (pytest-lsp) talking to `python -m kerasfit lsp` over stdio."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

try:
    import pytest_lsp
    from lsprotocol import types
    from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
except ImportError:  # the `lsp` / `dev` extra is not installed: nothing here can run
    collect_ignore_glob = ["test_*.py"]
    pytest_lsp = None

SERVER = [sys.executable, "-m", "kerasfit", "lsp"]
DEBOUNCE_MS = 50

if pytest_lsp is not None:

    def _register_capability_handler(client: LanguageClient) -> None:
        registrations: list[types.Registration] = []
        client.registrations = registrations  # type: ignore[attr-defined]

        @client.feature(types.CLIENT_REGISTER_CAPABILITY)
        def register(params: types.RegistrationParams) -> None:
            registrations.extend(params.registrations)


    async def _start(client: LanguageClient, root: Path, options: dict[str, Any]) -> None:
        _register_capability_handler(client)
        await client.initialize_session(
            types.InitializeParams(
                capabilities=client_capabilities("visual-studio-code"),
                root_uri=root.as_uri(),
                workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="ws")],
                initialization_options=options,
            )
        )


    @pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
    async def client(lsp_client: LanguageClient, tmp_path: Path):
        await _start(lsp_client, tmp_path, {"debounceMs": DEBOUNCE_MS})
        yield
        await lsp_client.shutdown_session()


    @pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
    async def client_ignoring_kf101(lsp_client: LanguageClient, tmp_path: Path):
        await _start(lsp_client, tmp_path, {"kerasfit": {"ignore": ["KF101"], "debounceMs": DEBOUNCE_MS}})
        yield
        await lsp_client.shutdown_session()
