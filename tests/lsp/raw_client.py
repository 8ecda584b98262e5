"""A client that writes raw bytes to ``kerasfit lsp`` over stdio and reads its frames.

pytest-lsp only speaks well-formed JSON-RPC; the framing tests need to send what a
broken or hostile client would. The server's own output is parsed strictly here: a frame
the server writes badly fails the test.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

SERVER = [sys.executable, "-m", "kerasfit", "lsp"]


def frame(message: Any) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class RawServer:
    def __init__(self, cwd: Path) -> None:
        self.proc = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=cwd)
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self._next_id = 1000
        self.stderr = b""
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            headers = {}
            while True:
                line = out.readline()
                if not line:
                    return
                if line == b"\r\n":
                    break
                assert line.endswith(b"\r\n"), f"server wrote a bad header line {line!r}"
                name, _, value = line.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            body = out.read(int(headers["content-length"]))
            self.messages.put(json.loads(body))

    def _drain_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr = (self.stderr + line)[-20000:]

    # ---- sending ------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        self.send_raw(frame(message))

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def request_bytes(self, method: str, params: Any = None, msg_id: int | None = None) -> tuple[int, bytes]:
        msg_id = self.new_id() if msg_id is None else msg_id
        message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        return msg_id, frame(message)

    def request(self, method: str, params: Any = None, timeout: float = 30.0) -> dict[str, Any]:
        msg_id, data = self.request_bytes(method, params)
        self.send_raw(data)
        return self.response(msg_id, timeout)

    def notify(self, method: str, params: Any = None) -> None:
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    # ---- receiving ----------------------------------------------------------------

    def next_message(self, deadline: float) -> dict[str, Any] | None:
        try:
            msg = self.messages.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None
        self.seen.append(msg)
        return msg

    def response(self, msg_id: Any, timeout: float = 30.0) -> dict[str, Any]:
        for msg in self.seen:
            if "method" not in msg and msg.get("id") == msg_id:
                return msg
        deadline = time.monotonic() + timeout
        while (msg := self.next_message(deadline)) is not None:
            if "method" not in msg and msg.get("id") == msg_id:
                return msg
        raise AssertionError(f"no response to request {msg_id} within {timeout} s "
                             f"(server alive: {self.proc.poll() is None}); stderr: {self.stderr[-2000:]!r}")

    def errors(self, code: int, wait: float = 0.0) -> list[dict[str, Any]]:
        """Error responses with this code received so far (waiting up to ``wait`` s for one)."""
        deadline = time.monotonic() + wait
        while True:
            found = [m for m in self.seen if "error" in m and m["error"].get("code") == code]
            if found or time.monotonic() >= deadline:
                return found
            self.next_message(min(deadline, time.monotonic() + 0.2))

    def notifications(self, method: str) -> list[dict[str, Any]]:
        self.pump(0.0)
        return [m for m in self.seen if m.get("method") == method]

    def pump(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while True:
            try:
                msg = self.messages.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return
            self.seen.append(msg)

    # ---- lifecycle ----------------------------------------------------------------

    def initialize(self, root: Path) -> dict[str, Any]:
        # generous: on a loaded CI machine, starting Python and importing pygls takes a while
        reply = self.request("initialize", {"processId": None, "rootUri": root.as_uri(),
                                            "capabilities": {}, "initializationOptions": {"debounceMs": 0}},
                             timeout=90)
        self.notify("initialized", {})
        return reply

    def alive(self, timeout: float = 30.0) -> bool:
        """The server answers a well-formed request (hover on a document it never saw)."""
        reply = self.request("textDocument/hover", {"textDocument": {"uri": "file:///nowhere/x.py"},
                                                    "position": {"line": 0, "character": 0}}, timeout)
        return "result" in reply or "error" in reply

    def close(self, timeout: float = 10.0) -> int:
        """shutdown + exit if it is still running; the exit status."""
        if self.proc.poll() is None:
            try:
                self.request("shutdown", timeout=timeout)
                self.notify("exit")
            except (AssertionError, BrokenPipeError, OSError):
                pass
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        finally:
            for stream in (self.proc.stdin, self.proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass


def wait_for_diagnostics(
    server: RawServer, uri: str, until, timeout: float = 30.0, version: int | None = None
) -> list[dict[str, Any]]:
    """The latest diagnostics published for ``uri`` (for ``version`` of it, if given)
    once ``until(diagnostics)`` holds."""
    deadline = time.monotonic() + timeout
    while True:
        published = [m["params"]["diagnostics"] for m in server.seen
                     if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri
                     and (version is None or m["params"].get("version") == version)]
        if published and until(published[-1]):
            return published[-1]
        if server.next_message(deadline) is None:
            raise AssertionError(f"no matching diagnostics for {uri} within {timeout} s: {published}")
