"""`kerasfit lsp --tcp HOST:PORT`: one client connects, initializes, shuts down, exits 0."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.lsp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tcp_session():
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kerasfit", "lsp", "--tcp", f"127.0.0.1:{port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        stream = sock.makefile("rb")

        def send(msg):
            data = json.dumps({"jsonrpc": "2.0", **msg}).encode()
            sock.sendall(b"Content-Length: %d\r\n\r\n" % len(data) + data)

        def recv():
            headers = {}
            while line := stream.readline().strip():
                k, _, v = line.decode().partition(":")
                headers[k.lower()] = v.strip()
            return json.loads(stream.read(int(headers["content-length"])))

        send({"id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}})
        caps = recv()["result"]["capabilities"]
        assert caps["positionEncoding"] == "utf-16"
        assert set(caps["codeActionProvider"]["codeActionKinds"]) == {"quickfix", "source.fixAll.kerasfit", "notebook.source.fixAll.kerasfit"}
        assert caps["hoverProvider"]
        send({"id": 2, "method": "shutdown", "params": None})
        assert recv()["result"] is None
        send({"method": "exit", "params": None})
        assert proc.wait(timeout=15) == 0
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
