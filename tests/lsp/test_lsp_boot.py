"""`kerasfit lsp` answers `initialize` before it has loaded the server (kerasfit/lsp/boot.py).

The answer comes from kerasfit/data/lsp_capabilities.json; these tests hold it to what
pygls itself answers, check it is sent while the heavy imports are still blocked, sent
once, and that anything but a well-formed initialize first still meets the message loop's
own error handling.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from pytest_lsp import client_capabilities

from kerasfit import __version__
from kerasfit.lsp.capabilities import initialize_result, same_answer
from raw_client import RawServer, frame, wait_for_diagnostics

pytestmark = pytest.mark.lsp

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
PARSE_ERROR = -32700

# what real clients declare: VS Code and Neovim (pytest-lsp's recordings), eglot 1.9's
# shape, and nothing at all
CLIENTS = {
    "vscode": lambda: client_capabilities("visual-studio-code"),
    "neovim": lambda: client_capabilities("neovim"),
    "eglot": lambda: {"workspace": {"applyEdit": True, "configuration": True, "didChangeWatchedFiles": {"dynamicRegistration": True}},
                      "textDocument": {"synchronization": {"dynamicRegistration": False, "willSave": True,
                                                           "willSaveWaitUntil": True, "didSave": True},
                                       "codeAction": {"dynamicRegistration": False, "isPreferredSupport": True}},
                      "general": {"positionEncodings": ["utf-32", "utf-8", "utf-16"]}},
    "none": lambda: {},
}


def test_the_capabilities_file_is_current():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_lsp_capabilities.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_the_early_answer_is_what_pygls_answers(client):
    from gen_lsp_capabilities import pygls_initialize_result
    from lsprotocol.converters import get_converter

    caps = CLIENTS[client]()
    if not isinstance(caps, dict):
        caps = get_converter().unstructure(caps)
    params = {"processId": None, "rootUri": None, "capabilities": caps}
    ours, theirs = initialize_result(params, __version__), pygls_initialize_result(params)
    assert same_answer(ours, theirs), (ours, theirs)
    assert ("notebookDocumentSync" in ours["capabilities"]) == ("notebookDocument" in caps)


def test_same_answer_can_tell_answers_apart():
    a = initialize_result({"capabilities": {}}, __version__)
    b = initialize_result({"capabilities": {}}, __version__)
    b["capabilities"]["hoverProvider"] = False
    assert not same_answer(a, b | {"capabilities": b["capabilities"] | {"codeActionProvider": True}})
    assert same_answer(a, a | {"capabilities": a["capabilities"] | {"textDocumentSync": {
        **a["capabilities"]["textDocumentSync"], "willSave": False}}})


GATE = '''
import os, sys, time

class _Gate:
    """Holds `import lsprotocol.types` until the gate file exists: the server cannot load."""
    def find_spec(self, name, path=None, target=None):
        if name == "lsprotocol.types":
            while not os.path.exists(os.environ["KERASFIT_TEST_GATE"]):
                time.sleep(0.02)
        return None

sys.meta_path.insert(0, _Gate())
'''


def test_initialize_is_answered_while_the_server_is_still_loading(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(GATE))
    gate = tmp_path / "gate"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
               KERASFIT_TEST_GATE=str(gate))
    srv = RawServer(tmp_path, env=env)
    try:
        reply = srv.request("initialize", {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {},
                                           "initializationOptions": {"debounceMs": 0}}, timeout=60)
        assert reply["result"]["capabilities"]["codeActionProvider"]["resolveProvider"] is True
        assert reply["result"]["serverInfo"] == {"name": "kerasfit", "version": __version__}
        srv.notify("initialized", {})
        model = tmp_path / "model.py"
        text = "import tf_keras\nbn = tf_keras.layers.BatchNormalization(fused=False)\n"
        srv.notify("textDocument/didOpen", {"textDocument": {"uri": model.as_uri(), "languageId": "python",
                                                             "version": 1, "text": text}})
        time.sleep(0.5)
        assert srv.notifications("textDocument/publishDiagnostics") == []  # still held at the gate
        gate.write_text("open")
        diags = wait_for_diagnostics(srv, model.as_uri(), lambda d: bool(d), timeout=90)
        assert [(d["code"], d["range"]["start"]["line"]) for d in diags] == [("KF101", 1)]
        srv.pump(0.3)
        # pygls handled that initialize too (workspace, settings), but its answer was not sent again
        assert [m for m in srv.seen if m.get("id") == reply["id"] and "method" not in m] == [reply]
    finally:
        gate.write_text("open")
        assert srv.close() == 0
    assert b"would answer" not in srv.stderr, srv.stderr


BAD_FIRST = {
    "garbage-line": b"hello\r\n",
    "no-length": b"Content-Type: application/vscode-jsonrpc\r\n\r\n{}",
    "not-json": b"Content-Length: 9\r\n\r\nnot json!",
    "not-initialize": frame({"jsonrpc": "2.0", "id": 1, "method": "textDocument/hover",
                             "params": {"textDocument": {"uri": "file:///x.py"}, "position": {"line": 0, "character": 0}}}),
}


@pytest.mark.parametrize("case", sorted(BAD_FIRST))
def test_anything_but_initialize_first_meets_the_message_loop(tmp_path, case):
    srv = RawServer(tmp_path)
    try:
        srv.send_raw(BAD_FIRST[case])
        if case == "not-initialize":
            assert srv.response(1, timeout=90)["error"]["code"] == -32002  # not initialized
        else:
            assert srv.errors(PARSE_ERROR, wait=90), srv.stderr
        reply = srv.initialize(tmp_path)
        assert "capabilities" in reply["result"]
        assert srv.alive()
        srv.pump(0.3)
        assert [m for m in srv.seen if m.get("id") == reply["id"] and "method" not in m] == [reply]
    finally:
        assert srv.close() == 0


def test_an_initialize_with_lf_only_headers_is_answered_early_once(tmp_path):
    srv = RawServer(tmp_path)
    try:
        body = frame({"jsonrpc": "2.0", "id": 5, "method": "initialize",
                      "params": {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}}})
        srv.send_raw(body.replace(b"\r\n", b"\n"))
        reply = srv.response(5, timeout=90)
        assert "capabilities" in reply["result"]
        srv.notify("initialized", {})
        assert srv.alive()
        assert [m for m in srv.seen if m.get("id") == 5] == [reply]
    finally:
        assert srv.close() == 0
