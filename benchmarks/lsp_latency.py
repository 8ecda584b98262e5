"""How long after the debounce fires does `kerasfit lsp` publish diagnostics?

A script, not a test (timings depend on the machine). It starts the server as a plain
subprocess, speaks JSON-RPC over its stdio, opens a generated 500-line tf-keras model
file, then edits it repeatedly. For each edit it measures the time from sending
``didChange`` to receiving the ``publishDiagnostics`` for that version, and subtracts
the debounce delay.

    python benchmarks/lsp_latency.py [--lines 500] [--edits 20] [--debounce-ms 200]

Target (issue 5): diagnostics within 100 ms of the debounce firing.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def model_source(n_lines: int) -> str:
    """A realistic-looking functional tf-keras model of about ``n_lines`` lines."""
    head = [
        '"""Generated benchmark model."""',
        "import tensorflow as tf",
        "import tf_keras as keras",
        "from tf_keras import layers",
        "",
        "",
    ]
    tail = [
        "def build_model(num_classes=1000):",
        "    inputs = keras.Input((224, 224, 3))",
        "    x = block_0(inputs)",
        "    x = layers.GlobalAveragePooling2D()(x)",
        "    return keras.Model(inputs, layers.Dense(num_classes)(x))",
    ]
    body: list[str] = []
    i = 0
    while len(head) + len(body) + len(tail) + 12 <= n_lines:
        fused = "False" if i % 4 == 0 else "True"
        body += [
            f"def block_{i}(x, filters={32 + 8 * i}, stride=1):",
            f'    """Residual block {i}: conv-bn-relu twice, projection shortcut."""',
            "    shortcut = x",
            "    y = layers.Conv2D(filters, 3, strides=stride, padding='same', use_bias=False)(x)",
            f"    y = layers.BatchNormalization(momentum=0.9, fused={fused})(y)",
            "    y = layers.ReLU()(y)",
            "    y = layers.Conv2D(filters, 3, padding='same', use_bias=False)(y)",
            "    y = layers.BatchNormalization(momentum=0.9)(y)",
            "    shortcut = layers.Conv2D(filters, 1, strides=stride, use_bias=False)(shortcut)",
            "    return layers.ReLU()(layers.Add()([shortcut, y]))",
            "",
            "",
        ]
        i += 1
    body += [""] * (n_lines - len(head) - len(body) - len(tail))
    return "\n".join(head + body + tail) + "\n"


class Server:
    def __init__(self, cmd: list[str]) -> None:
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sys.stderr)
        self.inbox: queue.Queue[tuple[float, dict]] = queue.Queue()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            headers = {}
            while True:
                line = out.readline()
                if not line:
                    return
                line = line.strip()
                if not line:
                    break
                k, _, v = line.decode().partition(":")
                headers[k.lower()] = v.strip()
            body = out.read(int(headers["content-length"]))
            self.inbox.put((time.perf_counter(), json.loads(body)))

    def send(self, msg: dict) -> float:
        data = json.dumps({"jsonrpc": "2.0", **msg}).encode()
        t = time.perf_counter()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)
        self.proc.stdin.flush()
        return t

    def request(self, method: str, params) -> dict:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        return self.wait(lambda m: m.get("id") == self.next_id and "method" not in m)[1]

    def notify(self, method: str, params) -> float:
        return self.send({"method": method, "params": params})

    def wait(self, pred, timeout: float = 60.0) -> tuple[float, dict]:
        end = time.monotonic() + timeout
        while True:
            t, msg = self.inbox.get(timeout=max(0.01, end - time.monotonic()))
            if "method" in msg and "id" in msg:  # a request from the server: answer it
                self.send({"id": msg["id"], "result": None})
                continue
            if pred(msg):
                return t, msg


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=500)
    ap.add_argument("--edits", type=int, default=20)
    ap.add_argument("--debounce-ms", type=int, default=200)
    ap.add_argument("--server", default=f"{sys.executable} -m kerasfit lsp", help="command that starts the server")
    args = ap.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="kerasfit-lsp-bench-"))
    path = workdir / "model.py"
    text = model_source(args.lines)
    path.write_text(text)
    uri = path.as_uri()

    srv = Server(args.server.split())
    srv.request("initialize", {"processId": os.getpid(), "rootUri": workdir.as_uri(), "capabilities": {},
                               "initializationOptions": {"debounceMs": args.debounce_ms}})
    srv.notify("initialized", {})

    def published(version: int):
        return lambda m: (m.get("method") == "textDocument/publishDiagnostics"
                          and m["params"]["uri"] == uri and m["params"].get("version") == version)

    t0 = srv.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})
    t1, msg = srv.wait(published(1))
    n_diags = len(msg["params"]["diagnostics"])
    print(f"{len(text.splitlines())}-line file, {n_diags} diagnostics; first open (cold: imports, rule discovery): {(t1 - t0) * 1000:.0f} ms")

    lines = text.splitlines(keepends=True)
    after: list[float] = []
    for k in range(args.edits):
        version = k + 2
        row = 10 + (k * 37) % (len(lines) - 20)  # touch a different line each time
        new = f"# edit {k}\n"
        start, end = {"line": row, "character": 0}, {"line": row, "character": len(lines[row].rstrip("\n"))}
        lines[row] = new
        t_send = srv.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": start, "end": end}, "text": new.rstrip("\n")}],
        })
        t_recv, _ = srv.wait(published(version))
        after.append((t_recv - t_send) * 1000 - args.debounce_ms)
        time.sleep(0.05)

    srv.request("shutdown", None)
    srv.notify("exit", None)
    srv.proc.wait(timeout=10)

    after.sort()
    p90 = after[min(len(after) - 1, int(round(0.9 * (len(after) - 1))))]
    print(f"didChange -> publishDiagnostics, minus the {args.debounce_ms} ms debounce, over {len(after)} edits:")
    print(f"  median {statistics.median(after):.0f} ms   p90 {p90:.0f} ms   min {after[0]:.0f} ms   max {after[-1]:.0f} ms")
    print(f"  target: < 100 ms -> {'OK' if statistics.median(after) < 100 else 'MISSED'} (median)")

    # The same file through the engine in this process: what the server cannot go below.
    from kerasfit.api import check_source

    check_source(text, str(path))
    engine = []
    for _ in range(5):
        t = time.perf_counter()
        check_source("".join(lines), str(path))
        engine.append((time.perf_counter() - t) * 1000)
    print(f"engine alone (api.check_source in-process, median of 5): {statistics.median(engine):.0f} ms")
    try:
        load = os.getloadavg()[0]
        print(f"load average {load:.2f} on {os.cpu_count()} CPUs (timings are wall-clock; a busy machine inflates them)")
    except OSError:
        pass
    print(f"server exit code: {srv.proc.returncode}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
