"""Bad settings cost one message, never the checking; config files are watched; logs
and debug information reach the client."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsp_helpers import Doc
from lsprotocol import types

pytestmark = [pytest.mark.lsp, pytest.mark.asyncio]

BN = "import tf_keras\nbn = tf_keras.layers.BatchNormalization(fused=False)\n"
DENSE = "import tf_keras\nd = tf_keras.layers.Dense(100)\n"


def kf(ds, code):
    return [d for d in ds if d.code == code]


async def _messages(client, n: int = 1):
    for _ in range(200):
        if len(client.messages) >= n:
            return client.messages
        await asyncio.sleep(0.05)
    return client.messages


async def test_bad_editor_setting_keeps_checking_with_the_last_good(client, tmp_path: Path):
    doc = Doc(client, tmp_path / "model.py", BN)
    await doc.diagnostics(lambda ds: bool(kf(ds, "KF101")))
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"kerasfit": {"select": ["KF999"], "debounceMs": 20}})
    )
    (msg,) = await _messages(client)
    assert "KF999" in msg.message and "last good settings" in msg.message
    # edits are still checked (with the settings that worked), and the message is not repeated
    for k in range(3):
        doc.change(BN + f"x{k} = 1\n")
        await doc.diagnostics(lambda ds: bool(kf(ds, "KF101")))
    doc.change(BN + "\n" + DENSE.splitlines()[1] + "\n")
    await doc.diagnostics(lambda ds: bool(kf(ds, "KF102")))
    assert len(client.messages) == 1


async def test_bad_pyproject_keeps_checking_and_kerasfit_toml_is_watched(client, tmp_path: Path):
    doc = Doc(client, tmp_path / "model.py", BN)
    await doc.diagnostics(lambda ds: bool(kf(ds, "KF101")))
    globs = {w["globPattern"] for r in client.registrations if r.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
             for w in r.register_options["watchers"]}
    assert {"**/pyproject.toml", "**/kerasfit.toml"} <= globs
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.kerasfit]\nignore = ["KF1O1"]\n')
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(changes=[types.FileEvent(uri=pyproject.as_uri(), type=types.FileChangeType.Changed)])
    )
    (msg,) = await _messages(client)
    assert "KF1O1" in msg.message and msg.type == types.MessageType.Error
    client.diagnostics.pop(doc.uri, None)
    doc.change(BN + "y = 2\n")
    await doc.diagnostics(lambda ds: bool(kf(ds, "KF101")))
    assert len(client.messages) == 1


async def test_debug_information_and_log_messages(client, tmp_path: Path):
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"kerasfit": {"logLevel": "info", "select": ["KF998"]}})
    )
    doc = Doc(client, tmp_path / "model.py", BN)
    await doc.diagnostics(lambda ds: True)
    for _ in range(100):
        if any("KF998" in m.message for m in client.log_messages):
            break
        await asyncio.sleep(0.05)
    assert any("KF998" in m.message for m in client.log_messages)
    text = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="kerasfit.printDebugInformation")
    )
    assert text.startswith("kerasfit ") and doc.uri in text and "logLevel" not in text and "log_level" in text
