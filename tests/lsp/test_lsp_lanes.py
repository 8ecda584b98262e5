"""One large document never starves the others, and a check nobody wants any more stops.

No timings: each test asserts an order of messages (a small document's diagnostics come
before the large one's) or what the server says it did (a check stopped before its end).
The large document is large by the ``largeDocumentBytes`` setting, so the tests need no
100,000-line files; it still takes seconds to check, the small one milliseconds.
"""

from __future__ import annotations

import time

import pytest

from raw_client import RawServer, wait_for_diagnostics

pytestmark = pytest.mark.lsp

BN = "import tf_keras\nbn = tf_keras.layers.BatchNormalization(fused=False)\n"
# 15,000 flagged lines (about 750 KB, under the size budget): seconds of checking
LARGE = "import tf_keras as keras\n" + "x = keras.layers.BatchNormalization(fused=False)\n" * 15_000


def open_doc(server: RawServer, path, text: str, version: int = 1) -> str:
    uri = path.as_uri()
    server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python",
                                                            "version": version, "text": text}})
    return uri


@pytest.fixture()
def server(tmp_path):
    srv = RawServer(tmp_path)
    srv.initialize(tmp_path)
    srv.notify("workspace/didChangeConfiguration", {"settings": {"kerasfit": {
        "debounceMs": 0, "lintTimeoutMs": 600_000, "largeDocumentBytes": 20_000, "logLevel": "info"}}})
    # the first check imports the engine and its rules
    wait_for_diagnostics(srv, open_doc(srv, tmp_path / "warm.py", BN), lambda ds: bool(ds))
    yield srv
    assert srv.close() == 0


def published(server: RawServer, uri: str) -> list[int]:
    """Indexes into ``server.seen`` of the diagnostics published for ``uri``."""
    return [i for i, m in enumerate(server.seen)
            if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri]


def logged(server: RawServer, needle: str) -> list[str]:
    return [m["params"]["message"] for m in server.notifications("window/logMessage") if needle in m["params"]["message"]]


def test_a_small_document_is_not_queued_behind_a_large_one(server, tmp_path):
    large = open_doc(server, tmp_path / "large.py", LARGE)
    small = open_doc(server, tmp_path / "small.py", BN)
    diags = wait_for_diagnostics(server, small, lambda ds: bool(ds))
    assert [d["code"] for d in diags] == ["KF101"]
    assert published(server, large) == [], "the small document waited for the large one"
    # and a hover on the small one is answered while the large one is still being checked
    reply = server.request("textDocument/hover", {"textDocument": {"uri": small}, "position": {"line": 1, "character": 6}})
    assert "result" in reply and published(server, large) == []
    big = wait_for_diagnostics(server, large, lambda ds: bool(ds), timeout=300)
    assert len(big) == 15_000


def test_closing_a_large_document_stops_its_check(server, tmp_path):
    large = open_doc(server, tmp_path / "large.py", LARGE)
    server.pump(0.5)  # its check has started
    server.notify("textDocument/didClose", {"textDocument": {"uri": large}})
    small = open_doc(server, tmp_path / "small.py", BN)
    wait_for_diagnostics(server, small, lambda ds: bool(ds))
    wait_until_logged(server, "stopped before its end")
    assert any("closed" in line for line in logged(server, "stopping the check of"))
    # nothing but the clearing on close was ever published for it
    assert all(server.seen[i]["params"]["diagnostics"] == [] for i in published(server, large))


def test_a_change_stops_the_check_of_the_old_version(server, tmp_path):
    large = open_doc(server, tmp_path / "large.py", LARGE)
    server.pump(0.5)
    edited = LARGE + "y = keras.layers.Dense(30)\n"
    server.notify("textDocument/didChange", {"textDocument": {"uri": large, "version": 2},
                                             "contentChanges": [{"text": edited}]})
    diags = wait_for_diagnostics(server, large, lambda ds: bool(ds), timeout=300)
    assert len(diags) == 15_001
    versions = [server.seen[i]["params"].get("version") for i in published(server, large)]
    assert versions == [2], "the old version's findings were published"
    assert logged(server, "stopped before its end")


def test_a_document_over_the_size_budget_gets_one_diagnostic_and_is_not_checked(server, tmp_path):
    (tmp_path / "sub").mkdir()  # a directory whose config the server has not read yet
    (tmp_path / "sub" / "pyproject.toml").write_text("[tool.kerasfit]\nmax-file-size = 1000\n")
    uri = open_doc(server, tmp_path / "sub" / "big.py", BN * 40)
    (diag,) = wait_for_diagnostics(server, uri, lambda ds: bool(ds))
    assert diag["message"].startswith("kerasfit did not check this file: ") and "over max-file-size (1,000 bytes)" in diag["message"]
    assert diag["range"]["start"] == {"line": 0, "character": 0}


def wait_until_logged(server: RawServer, needle: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not logged(server, needle):
        assert server.next_message(deadline) is not None, f"never logged {needle!r}"
