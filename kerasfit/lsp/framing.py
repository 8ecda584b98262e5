"""The language server's message loop: base-protocol framing and JSON-RPC errors.

pygls' own loop trusts its client: a missing, non-numeric or wrong ``Content-Length``
(or LF-only headers) leaves it waiting for a header that never comes, a huge one is read
in one allocation, and a message it cannot parse is dropped without an answer. This loop
answers what the JSON-RPC / LSP specifications ask for and keeps reading:

- a frame it cannot read or parse: ``-32700`` (parse error, ``id: null``), then it
  resynchronises on the next ``Content-Length`` header. A JSON body never holds a raw line
  break, so a header line found inside a declared body marks a wrong length;
- a frame over :data:`MAX_FRAME` bytes is refused (``-32700``) and skipped, never buffered;
- JSON that is not a JSON-RPC 2.0 message: ``-32600`` (invalid request);
- params of the wrong shape for a request: ``-32602`` (invalid params);
- a request before ``initialize``: ``-32002`` (server not initialized); after
  ``shutdown``: ``-32600``. Notifications in those states are dropped, ``exit`` excepted.

Everything else goes to pygls' protocol (``handle_message``) unchanged.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("kerasfit.lsp")

MAX_FRAME = 64 * 2**20  # bytes; a 100,000-line Python file is a few MB
MAX_HEADER_LINE = 8192
_OVERLAP = 64  # a header split across two discarded chunks is still found whole

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_NOT_INITIALIZED = -32002

_HEADER_AT = re.compile(rb"content-length[ \t]*:", re.I)
# A header line inside a declared body: raw line breaks never occur in JSON text.
_HEADER_LINE = re.compile(rb"content-length[ \t]*:[ \t]*\d+[ \t]*\r?\n", re.I)
_CONTENT_LENGTH = re.compile(rb"[ \t]*content-length[ \t]*:[ \t]*(\S*)[ \t]*\r?\n?", re.I)
_OTHER_HEADER = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+[ \t]*:[^\r\n]*\r?\n?")


class FrameReader:
    """A byte buffer over ``read_some`` (returns b"" at end of input)."""

    def __init__(self, read_some: Callable[[], Awaitable[bytes]]):
        self._read_some = read_some
        self._buf = bytearray()
        self._eof = False

    async def _fill(self) -> bool:
        if self._eof:
            return False
        chunk = await self._read_some()
        if not chunk:
            self._eof = True
            return False
        self._buf += chunk
        return True

    def push_back(self, data: bytes) -> None:
        self._buf[:0] = data

    async def readline(self) -> bytes:
        """A line with its ending; at most MAX_HEADER_LINE bytes; b"" at end of input."""
        while True:
            end = self._buf.find(b"\n")
            if end >= 0 and end < MAX_HEADER_LINE:
                line = bytes(self._buf[: end + 1])
                del self._buf[: end + 1]
                return line
            if len(self._buf) >= MAX_HEADER_LINE:
                # too long to be a header: hand it over in pieces, keeping an overlap
                cut = MAX_HEADER_LINE - _OVERLAP
                line = bytes(self._buf[:cut])
                del self._buf[:cut]
                return line
            if not await self._fill():
                line = bytes(self._buf)
                self._buf.clear()
                return line

    async def read_body(self, length: int) -> tuple[bytes, bool] | None:
        """``(body, complete)``: the declared body, or the bytes before a header found in
        it (``complete`` False: the length was wrong). None at end of input."""
        scanned = 0
        while True:
            hit = _HEADER_LINE.search(self._buf, max(0, scanned - _OVERLAP), min(len(self._buf), length))
            if hit is not None:
                body = bytes(self._buf[: hit.start()])
                del self._buf[: hit.start()]
                return body, False
            if len(self._buf) >= length:
                body = bytes(self._buf[:length])
                del self._buf[:length]
                return body, True
            scanned = len(self._buf)
            if not await self._fill():
                return None


def error_response(msg_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


class MessageLoop:
    """Read frames, answer protocol errors, hand good messages to pygls."""

    def __init__(self, protocol: Any, reader: FrameReader):
        self.protocol = protocol
        self.reader = reader
        self.initialized = False

    def send(self, data: dict[str, Any]) -> None:
        self.protocol._send_data(data)

    async def run(self) -> None:
        reported = False  # one parse error per stretch of unreadable input
        headers: list[bytes] = []
        while True:
            line = await self.reader.readline()
            if not line:
                return
            if not headers and not line.strip():
                continue  # blank lines between frames
            if line.strip():
                # a header glued after garbage (the end of a body read short) is not one
                hit = None if _CONTENT_LENGTH.fullmatch(line) else _HEADER_AT.search(line, 1)
                if hit is None and (_CONTENT_LENGTH.fullmatch(line) or _OTHER_HEADER.fullmatch(line)):
                    headers.append(line)
                    continue
                if not reported:
                    self.send(error_response(None, PARSE_ERROR, "Parse error: expected a "
                                             "Content-Length header"))
                    reported = True
                headers = []
                if hit is not None:
                    self.reader.push_back(line[hit.start():])
                continue
            # a blank line ends the headers
            length = _frame_length(headers)
            headers = []
            if isinstance(length, str):
                if not reported:
                    self.send(error_response(None, PARSE_ERROR, f"Parse error: {length}"))
                reported = True
                continue
            if length > MAX_FRAME:
                self.send(error_response(None, PARSE_ERROR, f"Parse error: a {length}-byte message "
                                         f"exceeds the {MAX_FRAME}-byte limit; skipped"))
                reported = True  # its body is skipped as unreadable input
                continue
            got = await self.reader.read_body(length)
            if got is None:
                return
            body, complete = got
            reported = False
            if not complete:
                self.send(error_response(None, PARSE_ERROR, f"Parse error: Content-Length {length} "
                                         f"does not match the message ({len(body)} bytes)"))
                continue
            try:
                data = json.loads(body)
            except (ValueError, RecursionError):
                self.send(error_response(None, PARSE_ERROR, "Parse error: the body is not JSON"))
                reported = True  # a too-short length leaves the rest of the body to skip
                continue
            self.dispatch(data)
            await asyncio.sleep(0)  # let handlers scheduled by this message run

    def dispatch(self, data: Any) -> None:
        """Check one decoded message and pass it to pygls, or answer the error."""
        refusal = self._refusal(data)
        if refusal is not None:
            if refusal:
                self.send(refusal)
            return
        msg_id, method = data.get("id"), data.get("method")
        is_request = method is not None and "id" in data
        try:
            message = self.protocol.structure_message(data)
        except Exception as exc:  # pygls: JsonRpcInvalidParams / JsonRpcInternalError
            cause = exc.__cause__ or exc
            if is_request:
                detail = " ".join(str(cause).split())[:300]
                self.send(error_response(msg_id, INVALID_PARAMS,
                                         f"Invalid params for {method}: {detail}"))
            else:
                log.warning("ignored %s: its params do not fit: %s", method or "a response", cause)
            return
        try:
            self.protocol.handle_message(message)
        except Exception as exc:  # pygls answers handler errors itself; this is its own failure
            log.exception("handling %s failed", method or "a response")
            if is_request:
                self.send(error_response(msg_id, INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"[:300]))
            return
        if method == "initialize":
            self.initialized = True

    def _refusal(self, data: Any) -> dict[str, Any] | None:
        """The error answer to a message that is not a valid JSON-RPC message or comes when
        the server does not take it ({} when it is dropped unanswered); None: handle it."""
        if not isinstance(data, dict):
            return error_response(None, INVALID_REQUEST, "Invalid request: not a JSON object")
        msg_id = data.get("id")
        valid_id = isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool)
        method = data.get("method")
        if data.get("jsonrpc") != "2.0" or ("id" in data and not valid_id) or (
            "method" in data and not isinstance(method, str)
        ) or ("method" not in data and "id" not in data):
            return error_response(msg_id if valid_id else None, INVALID_REQUEST,
                                  "Invalid request: not a JSON-RPC 2.0 message")
        if method is None or method == "exit":
            return None
        shut = getattr(self.protocol, "_shutdown", False)
        if not shut and (self.initialized or method == "initialize"):
            return None
        if "id" not in data:
            return {}  # a notification: dropped
        code, why = ((INVALID_REQUEST, "the server is shutting down") if shut
                     else (SERVER_NOT_INITIALIZED, "the server is not initialized"))
        return error_response(msg_id, code, f"{method}: {why}")



def _frame_length(headers: list[bytes]) -> int | str:
    """The declared length, or why there is none."""
    value = None
    for line in headers:
        m = _CONTENT_LENGTH.fullmatch(line)
        if m:
            value = m.group(1)
    if value is None:
        return "the headers have no Content-Length"
    if not value.isdigit() or len(value) > 18:
        return f"Content-Length {value[:40].decode('ascii', 'replace')!r} is not a byte count"
    return int(value)


def serve_stdio(server: Any, stdin: Any = None, stdout: Any = None, prefix: bytes = b"") -> None:
    """pygls' ``start_io`` with this loop in place of its own; returns when input ends
    or ``exit`` arrives (the caller turns ``server.exit_code`` into the exit status).
    ``prefix``: input already read from ``stdin``, read first."""
    import sys
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from pygls.io_ import StdoutWriter

    stdin = stdin or sys.stdin.buffer
    server._stop_event = threading.Event()
    server.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
    reading = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kerasfit-stdin")

    async def read_some() -> bytes:
        return await asyncio.get_running_loop().run_in_executor(reading, stdin.read1, 1 << 16)

    reader = FrameReader(read_some)
    reader.push_back(prefix)
    try:
        asyncio.run(MessageLoop(server.protocol, reader).run())
    except BrokenPipeError:
        log.error("the client closed the connection")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server._stop_event.set()
        reading.shutdown(wait=False)


def serve_tcp(server: Any, host: str, port: int) -> None:
    """pygls' ``start_tcp`` with this loop; returns when the listener is closed (``exit``)."""
    import threading

    server._stop_event = threading.Event()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        server.protocol.set_writer(writer)
        await MessageLoop(server.protocol, FrameReader(lambda: reader.read(1 << 16))).run()
        server.shutdown()

    async def listen() -> None:
        server._server = await asyncio.start_server(connection, host, port)
        async with server._server:
            await server._server.serve_forever()

    try:
        asyncio.run(listen())
    except asyncio.CancelledError:
        pass
