"""``kerasfit lsp`` on stdio: answer ``initialize`` before the server is imported.

Importing the server costs about a second of CPU (lsprotocol's ~1,000 attrs classes,
cattrs, pygls, libcst and the rules), and editors wait for the ``initialize`` answer:
eglot blocks Emacs for up to 3 s, others show the server as starting. The answer is
a constant, the capabilities the server registers (``kerasfit/data/lsp_capabilities.json``,
written by ``scripts/gen_lsp_capabilities.py`` from pygls itself; a test keeps them
equal). So this module, which imports only the standard library, reads the first frame
while a thread imports the server, answers it, then hands every byte it read to the
server's own message loop. pygls handles that ``initialize`` as usual (workspace,
client capabilities, settings); its answer is compared with the one sent and dropped.

Anything but a well-formed ``initialize`` first goes to the message loop untouched, so
its error handling stays the only one.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from typing import Any

from .. import __version__
from .capabilities import initialize_result

MAX_FIRST_FRAME = 4 * 2**20  # bytes; an initialize message is a few KB
_HEADER = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+)[ \t]*:([^\r\n]*)")


def read_first_frame(read: Any) -> tuple[bytes, dict[str, Any] | None]:
    """(every byte read, the first message when it is a well-formed initialize request).

    Gives up (None) at the first line that is not a header, as the message loop would
    answer it at once, rather than wait for more input."""
    buf, pos, length = b"", 0, None
    while True:
        nl = buf.find(b"\n", pos)
        if nl < 0:
            if len(buf) - pos > 8192:
                return buf, None
            chunk = read()
            if not chunk:
                return buf, None
            buf += chunk
            continue
        line = buf[pos:nl].rstrip(b"\r")
        pos = nl + 1
        if not line:
            break
        m = _HEADER.fullmatch(line)
        if m is None:
            return buf, None
        if m.group(1).lower() == b"content-length":
            value = m.group(2).strip()
            if length is not None or not value.isdigit() or int(value) > MAX_FIRST_FRAME:
                return buf, None
            length = int(value)
    if length is None:
        return buf, None
    start = pos
    while len(buf) < start + length:
        chunk = read()
        if not chunk:
            return buf, None
        buf += chunk
    try:
        message = json.loads(buf[start : start + length])
    except ValueError:
        return buf, None
    if not (
        isinstance(message, dict)
        and message.get("jsonrpc") == "2.0"
        and message.get("method") == "initialize"
        and isinstance(message.get("id"), (int, str))
        and not isinstance(message.get("id"), bool)
        and isinstance(message.get("params"), dict)
        and isinstance(message["params"].get("capabilities"), dict)
    ):
        return buf, None
    return buf, message


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def serve_stdio_fast() -> bool:
    """Run the stdio server and never return (the server ends the process); False at
    once when the ``lsp`` extra is missing (the caller's CLI then says so, the usual way)."""
    from importlib.util import find_spec

    if find_spec("pygls") is None or find_spec("lsprotocol") is None:
        return False
    loaded: dict[str, Any] = {}

    def load() -> None:
        try:
            from . import server  # defers pygls, lsprotocol and libcst: loaded while initialize is answered

            loaded["server"] = server
        except BaseException as exc:  # reported on the main thread
            loaded["error"] = exc

    loader = threading.Thread(target=load, name="kerasfit-load", daemon=True)
    loader.start()
    stdin = sys.stdin.buffer.fileno()
    raw, first = read_first_frame(lambda: os.read(stdin, 1 << 16))
    answered = None
    if first is not None:
        result = initialize_result(first["params"], __version__)
        out = sys.stdout.buffer
        out.write(frame({"jsonrpc": "2.0", "id": first["id"], "result": result}))
        out.flush()
        answered = (first["id"], result)
    loader.join()
    if "error" in loaded:
        import traceback

        traceback.print_exception(loaded["error"], file=sys.stderr)
        print(f"kerasfit: error: the language server could not start: {loaded['error']}", file=sys.stderr)
        sys.stderr.flush()
        os._exit(2)
    loaded["server"].serve(prefix=raw, answered=answered)
    return True
