"""Base-protocol framing and JSON-RPC errors, sent as raw bytes (issue 8, item 11).

Each case is what a broken or hostile client can write. The server must answer per the
JSON-RPC / LSP specifications and then still answer a well-formed request.
"""

from __future__ import annotations

import json

import pytest

from raw_client import RawServer, frame

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS, NOT_INITIALIZED = -32700, -32600, -32602, -32002


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One server takes every bad frame in turn: each case also checks it survived the last."""
    root = tmp_path_factory.mktemp("ws")
    srv = RawServer(root)
    srv.initialize(root)
    yield srv
    assert srv.close() == 0


@pytest.fixture()
def server(shared):
    shared.pump(0.2)
    shared.seen.clear()
    assert shared.proc.poll() is None
    return shared


def body_of(message) -> bytes:
    return json.dumps(message).encode()


HOVER = {"jsonrpc": "2.0", "id": 7, "method": "textDocument/hover",
         "params": {"textDocument": {"uri": "file:///nowhere/x.py"}, "position": {"line": 0, "character": 0}}}

BAD_FRAMES = {
    # the declared length is shorter than the body: the rest reads as garbage
    "length-too-short": b"Content-Length: 10\r\n\r\n" + body_of(HOVER),
    # longer than the body: the next frame's header shows up inside it
    "length-too-long": b"Content-Length: 5000\r\n\r\n" + body_of(HOVER),
    "length-missing": b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" + body_of(HOVER),
    "length-not-a-number": b"Content-Length: twelve\r\n\r\n" + body_of(HOVER),
    "length-negative": b"Content-Length: -5\r\n\r\n" + body_of(HOVER),
    "no-header-at-all": body_of(HOVER),
    "binary-garbage": bytes(range(256)) * 4,
    "not-json": b"Content-Length: 9\r\n\r\nnot json!",
    "header-line-too-long": b"X-Padding: " + b"a" * 100_000 + b"\r\n\r\n",
}


@pytest.mark.parametrize("case", sorted(BAD_FRAMES))
def test_a_bad_frame_is_a_parse_error_and_the_server_resynchronises(server, case):
    server.send_raw(BAD_FRAMES[case])
    assert server.alive()
    errors = server.errors(PARSE_ERROR, wait=5)
    assert errors and all(e["id"] is None for e in errors), server.seen


def test_lf_only_headers_are_read(server):
    body = body_of(HOVER)
    server.send_raw(b"Content-Length: %d\n\n" % len(body) + body)
    assert "result" in server.response(7)
    assert server.alive()


def test_a_huge_content_length_is_refused_not_allocated(server):
    server.send_raw(b"Content-Length: 99999999999999\r\n\r\n" + b"x" * 1000)
    assert server.alive()
    (error,) = server.errors(PARSE_ERROR)
    assert "limit" in error["error"]["message"]
    assert server.proc.poll() is None


@pytest.mark.parametrize("body", [b"[1, 2]", b"42", b'"text"', b'{"jsonrpc": "1.0", "id": 3, "method": "x"}',
                                  b'{"jsonrpc": "2.0", "id": 3, "method": 17}', b'{"jsonrpc": "2.0"}'])
def test_json_that_is_not_a_request_is_an_invalid_request(server, body):
    server.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    assert server.alive()
    assert server.errors(INVALID_REQUEST, wait=5)


@pytest.mark.parametrize("params", [{"textDocument": 5}, [1, 2, 3], "text",
                                    {"textDocument": {"uri": "file:///x.py"}, "position": {"line": "a"}}])
def test_params_of_the_wrong_shape_are_invalid_params(server, params):
    reply = server.request("textDocument/hover", params)
    assert reply["error"]["code"] == INVALID_PARAMS
    assert "textDocument/hover" in reply["error"]["message"]
    assert server.alive()


def test_requests_before_initialize_are_refused(tmp_path):
    srv = RawServer(tmp_path)
    try:
        reply = srv.request("textDocument/hover", HOVER["params"])
        assert reply["error"]["code"] == NOT_INITIALIZED
        srv.notify("textDocument/didOpen", {"textDocument": {"uri": (tmp_path / "m.py").as_uri(),
                                                             "languageId": "python", "version": 1,
                                                             "text": "import keras\n"}})
        assert "capabilities" in srv.initialize(tmp_path)["result"]
        assert srv.alive()
    finally:
        assert srv.close() == 0


def test_requests_after_shutdown_are_invalid_and_exit_is_clean(tmp_path):
    srv = RawServer(tmp_path)
    srv.initialize(tmp_path)
    assert srv.request("shutdown") == {"jsonrpc": "2.0", "id": srv._next_id, "result": None}
    reply = srv.request("textDocument/hover", HOVER["params"])
    assert reply["error"]["code"] == INVALID_REQUEST
    srv.notify("exit")
    assert srv.proc.wait(10) == 0


def test_exit_without_shutdown_exits_1(tmp_path):
    srv = RawServer(tmp_path)
    srv.initialize(tmp_path)
    srv.notify("exit")
    assert srv.proc.wait(10) == 1


def test_a_large_document_in_one_frame_is_read(server, tmp_path):
    """The cap is far above real documents: 200,000 lines (2.6 MB) in one didOpen (no
    TensorFlow in it, so the frame is read and the check skips it)."""
    path = tmp_path / "big.py"
    text = "value = 12345\n" * 200_000
    server.notify("textDocument/didOpen", {"textDocument": {"uri": path.as_uri(), "languageId": "python",
                                                            "version": 1, "text": text}})
    assert server.alive(timeout=60)


def test_hover_on_a_document_never_opened_and_missing_from_disk_is_null(server):
    assert server.request("textDocument/hover", HOVER["params"]) == {
        "jsonrpc": "2.0", "id": server._next_id, "result": None}
