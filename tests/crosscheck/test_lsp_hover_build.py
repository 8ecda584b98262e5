"""Issue 4 meets issue 5: after `kerasfit report` has cached a real build, the language
server's hover on a flagged line shows the measured shape → padded shape and fit."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp")
from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

from kerasfit.crosscheck.api import BuildOptions, build_report  # noqa: E402

pytestmark = pytest.mark.build

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "tests" / ".cache" / "hover-build-cache"
MODEL = CACHE.parent / "hover_model" / "keras_cnn.py"


@pytest.fixture(scope="module", autouse=True)
def cached_build():
    shutil.rmtree(CACHE, ignore_errors=True)
    MODEL.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "fixtures" / "crosscheck" / "keras_cnn.py", MODEL)
    old = os.environ.get("KERASFIT_CACHE_DIR")
    os.environ["KERASFIT_CACHE_DIR"] = str(CACHE)
    try:
        build_report(MODEL, BuildOptions(batch_size=128), CACHE)
    finally:
        if old is None:
            os.environ.pop("KERASFIT_CACHE_DIR", None)
        else:
            os.environ["KERASFIT_CACHE_DIR"] = old
    yield


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[sys.executable, "-m", "kerasfit", "lsp"],
        server_env={**os.environ, "KERASFIT_CACHE_DIR": str(CACHE)},
    )
)
async def client(lsp_client: LanguageClient):
    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:  # the pyproject watcher
        return None

    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=MODEL.parent.as_uri(),
            initialization_options={"debounceMs": 50},
        )
    )
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_hover_shows_the_cached_build_measurements(client: LanguageClient):
    text = MODEL.read_text()
    uri = MODEL.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
    )
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    row = next(i for i, line in enumerate(text.splitlines()) if "Conv2D(30" in line)
    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=row, character=4))
    )
    assert hover is not None
    value = hover.contents.value
    assert "KF102" in value
    # the ops built from that line, with measured → padded shapes and their fit
    assert "`conv2d` (forward): 128×32×32×3 → 128×32×32×8, fit" in value
    assert "(kernel-gradient)" in value
