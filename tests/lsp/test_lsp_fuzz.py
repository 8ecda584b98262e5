"""Fuzz the language server over stdio: random frames, random JSON-RPC, random edits.

One server takes every example of a test; after each example it must still be running
and answer a well-formed request. Bounded for CI (``KERASFIT_FUZZ_EXAMPLES``, default 25
per test); set it higher for a longer run.
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raw_client import RawServer, frame, wait_for_diagnostics

pytestmark = pytest.mark.slow  # long fuzz runs

EXAMPLES = int(os.environ.get("KERASFIT_FUZZ_EXAMPLES", "25"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

BN = "import tf_keras\nbn = tf_keras.layers.BatchNormalization(fused=False)\n"
HOVER_PARAMS = {"textDocument": {"uri": "file:///nowhere/x.py"}, "position": {"line": 0, "character": 0}}
METHODS = [
    "textDocument/hover", "textDocument/codeAction", "textDocument/didOpen", "textDocument/didChange",
    "textDocument/didClose", "textDocument/didSave", "workspace/didChangeConfiguration",
    "workspace/didChangeWatchedFiles", "workspace/executeCommand", "$/cancelRequest", "$/setTrace",
    "initialized", "textDocument/completion", "not/a/method",
]


@pytest.fixture()
def server(tmp_path):
    """One server per test, shared by its examples (random settings stay in their test)."""
    root = tmp_path
    srv = RawServer(root)
    srv.initialize(root)
    srv.root = root
    yield srv
    assert srv.close() == 0


def answers_after(server: RawServer) -> None:
    """Two probes: a frame left open by the example may swallow the first."""
    assert server.proc.poll() is None, server.stderr[-2000:]
    _, first = server.request_bytes("textDocument/hover", HOVER_PARAMS)
    last_id, last = server.request_bytes("textDocument/hover", HOVER_PARAMS)
    server.send_raw(first + last)
    reply = server.response(last_id, timeout=30)
    assert "result" in reply, reply
    server.seen.clear()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def chunks(draw) -> bytes:
    kind = draw(st.sampled_from(["valid", "bytes", "header", "blank", "body", "lf", "huge"]))
    if kind == "valid":
        return frame({"jsonrpc": "2.0", "id": draw(st.integers(1, 999)), "method": "textDocument/hover",
                      "params": HOVER_PARAMS})
    if kind == "bytes":
        return draw(st.binary(max_size=300))
    if kind == "header":
        name = draw(st.sampled_from([b"Content-Length", b"content-length", b"Content-Type", b"X"]))
        value = draw(st.sampled_from([b"0", b"12", b"-3", b"abc", b"", b"99999999999999999999"])
                     | st.integers(0, 400).map(lambda n: str(n).encode()))
        return name + b": " + value + draw(st.sampled_from([b"\r\n", b"\n", b""]))
    if kind == "blank":
        return draw(st.sampled_from([b"\r\n", b"\n", b"\r\n\r\n"]))
    body = json.dumps(draw(json_values)).encode()
    if kind == "body":
        declared = max(0, len(body) + draw(st.integers(-10, 10)))
        return b"Content-Length: %d\r\n\r\n" % declared + body
    if kind == "lf":
        return b"Content-Length: %d\n\n" % len(body) + body
    return b"Content-Length: %d\r\n\r\n" % draw(st.integers(2**26 + 1, 2**62)) + body


@FUZZ
@given(data=st.lists(chunks(), min_size=1, max_size=8))
def test_random_frames(server, data):
    server.send_raw(b"".join(data))
    answers_after(server)


@st.composite
def messages(draw) -> dict:
    message: dict = {"jsonrpc": draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0", None]))}
    if draw(st.booleans()):
        message["id"] = draw(st.integers(1, 10**6) | st.text(max_size=8) | st.none() | st.floats(allow_nan=False)
                             | st.lists(st.integers(), max_size=2))
    if draw(st.integers(0, 9)):
        message["method"] = draw(st.sampled_from(METHODS) | st.integers())
    if draw(st.booleans()):
        message["params"] = draw(json_values)
    if draw(st.integers(0, 6)) == 0:
        message["result"] = draw(json_values)
    return {k: v for k, v in message.items() if v is not None or k != "jsonrpc"}


@FUZZ
@given(batch=st.lists(messages(), min_size=1, max_size=6))
def test_random_json_rpc_messages(server, batch):
    server.send_raw(b"".join(frame(m) for m in batch))
    answers_after(server)


positions = st.fixed_dictionaries({"line": st.integers(-1, 6), "character": st.integers(-1, 60)})
edit_text = st.text(alphabet=st.sampled_from(list("abc(),=.:_ \n\r\t\f\\#'\"0123456789") + ["😀", "é", "\ud800"]),
                    max_size=30)
changes = st.one_of(
    st.fixed_dictionaries({"range": st.fixed_dictionaries({"start": positions, "end": positions}), "text": edit_text}),
    st.fixed_dictionaries({"text": edit_text.map(lambda t: BN + t)}),
)


@FUZZ
@given(edits=st.lists(st.lists(changes, min_size=1, max_size=3), min_size=1, max_size=6))
def test_random_document_edits(server, edits):
    path = server.root / "edited.py"
    uri = path.as_uri()
    server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python",
                                                            "version": 1, "text": BN}})
    for version, batch in enumerate(edits, start=2):
        server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                 "contentChanges": batch})
    answers_after(server)
    # the document can be checked again from a known text
    server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 100},
                                             "contentChanges": [{"text": BN}]})
    # (the last fuzzed text's own publication may still arrive after the probes, and a
    # text broken at its end has KF101 too, next to its KF001: wait for version 100)
    diags = wait_for_diagnostics(server, uri, lambda ds: any(d.get("code") == "KF101" for d in ds), version=100)
    assert [d["code"] for d in diags] == ["KF101"]
    server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    server.seen.clear()
