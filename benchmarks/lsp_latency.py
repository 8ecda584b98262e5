"""How long after the debounce fires does `kerasfit lsp` publish diagnostics?

A script, not a test (timings depend on the machine). It starts the server as a plain
subprocess, speaks JSON-RPC over its stdio, opens a generated 500-line tf-keras model
file, then edits it repeatedly. For each edit it measures the time from sending
``didChange`` to receiving the ``publishDiagnostics`` for that version, and subtracts
the debounce delay.

    python benchmarks/lsp_latency.py [--lines 500 2000] [--edits 20] [--debounce-ms 0]
        [--memory-lines 10000 --memory-edits 300] [--beside-lines 100000]

Reports, per file size: edit -> diagnostics p50/p95 (minus the debounce), the latency
of a code-action request at the cursor, start-up (spawn until ``initialize`` is
answered; and until the first diagnostics) and shutdown (``shutdown`` sent until the process is gone); with
``--memory-lines``, the server's RSS after the first lint and after the edits; with
``--beside-lines N``, a 3-line document opened (and hovered) while an N-line one is
being checked: how long its diagnostics and the hover take, and whether the large one
was still being checked when they came (issue 20: they waited 22 s and 64 s).
Goals (issue 12): p50 <= 30 ms at 500 lines, <= 120 ms at 2,000; start-up <= 0.6 s;
shutdown <= 0.1 s; RSS after 300 edits of 10,000 lines <= 1.3x RSS after the first lint.
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


# What VS Code and Neovim >= 0.8 declare: code actions are resolved when picked.
CAPABILITIES = {"textDocument": {"codeAction": {
    "dataSupport": True, "resolveSupport": {"properties": ["edit"]},
    "codeActionLiteralSupport": {"codeActionKind": {"valueSet": ["quickfix", "source.fixAll"]}},
}}}


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def session(server_cmd: list[str], n_lines: int, edits: int, debounce_ms: int, rss_every: int = 0,
            lint_timeout_ms: int | None = None) -> dict:
    """One server process: start-up, first lint, ``edits`` timed edits, RSS, shutdown."""
    workdir = Path(tempfile.mkdtemp(prefix="kerasfit-lsp-bench-"))
    path = workdir / "model.py"
    text = model_source(n_lines)
    path.write_text(text)
    uri = path.as_uri()

    options = {"debounceMs": debounce_ms}
    if lint_timeout_ms:
        options["lintTimeoutMs"] = lint_timeout_ms
    t_spawn = time.perf_counter()
    srv = Server(server_cmd)
    srv.request("initialize", {"processId": os.getpid(), "rootUri": workdir.as_uri(), "capabilities": CAPABILITIES,
                               "initializationOptions": options})
    startup = time.perf_counter() - t_spawn
    srv.notify("initialized", {})

    def published(version: int):
        return lambda m: (m.get("method") == "textDocument/publishDiagnostics"
                          and m["params"]["uri"] == uri and m["params"].get("version") == version)

    t0 = srv.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})
    t1, msg = srv.wait(published(1), timeout=600)
    unchecked = _unchecked(msg)
    first = t1 - t0
    ready = t1 - t_spawn  # what a user waits for: the server answers initialize before it has loaded
    rss_first = rss_mb(srv.proc.pid)

    lines = text.splitlines(keepends=True)
    after: list[float] = []
    action: list[float] = []
    rss_trace: list[float] = []
    for k in range(edits):
        version = k + 2
        row = 10 + (k * 37) % (len(lines) - 20)  # touch a different line each time
        new = f"# edit {k}\n"
        start, end = {"line": row, "character": 0}, {"line": row, "character": len(lines[row].rstrip("\n"))}
        lines[row] = new
        t_send = srv.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": start, "end": end}, "text": new.rstrip("\n")}],
        })
        t_recv, got = srv.wait(published(version), timeout=600)
        unchecked += _unchecked(got)
        after.append((t_recv - t_send) * 1000 - debounce_ms)
        if k % 10 == 0:  # a cursor move's code-action request, fix-all included
            t = time.perf_counter()
            srv.request("textDocument/codeAction", {
                "textDocument": {"uri": uri}, "range": {"start": start, "end": start},
                "context": {"diagnostics": []},
            })
            action.append((time.perf_counter() - t) * 1000)
        if rss_every and (k + 1) % rss_every == 0:
            rss_trace.append(rss_mb(srv.proc.pid))
    time.sleep(1.0)
    rss_idle = rss_mb(srv.proc.pid)

    t_shut = time.perf_counter()
    srv.request("shutdown", None)
    srv.notify("exit", None)
    srv.proc.wait(timeout=30)
    shutdown = time.perf_counter() - t_shut
    return {
        "lines": len(text.splitlines()), "diagnostics": len(msg["params"]["diagnostics"]),
        "startup_s": startup, "first_lint_s": first, "ready_s": ready, "edits": after, "code_action_ms": action,
        "rss_first_mb": rss_first, "rss_idle_mb": rss_idle, "rss_trace_mb": rss_trace,
        "shutdown_s": shutdown, "exit_code": srv.proc.returncode, "unchecked": unchecked,
    }


SMALL = "import tf_keras\nbn = tf_keras.layers.BatchNormalization(fused=False)\n"


def beside(server_cmd: list[str], n_lines: int, lint_timeout_ms: int | None) -> dict:
    """A small document's diagnostics and a hover on it while a large document is checked."""
    workdir = Path(tempfile.mkdtemp(prefix="kerasfit-lsp-bench-"))
    big, small = workdir / "big.py", workdir / "small.py"
    big.write_text(model_source(n_lines))
    small.write_text(SMALL)
    options = {"debounceMs": 0, "lintTimeoutMs": lint_timeout_ms or 600_000}
    srv = Server(server_cmd)
    srv.request("initialize", {"processId": os.getpid(), "rootUri": workdir.as_uri(), "capabilities": CAPABILITIES,
                               "initializationOptions": options})
    srv.notify("initialized", {})

    def published(uri: str):
        return lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri

    def opened(path: Path) -> float:
        return srv.notify("textDocument/didOpen", {"textDocument": {"uri": path.as_uri(), "languageId": "python",
                                                                    "version": 1, "text": path.read_text()}})

    # warm: the first check imports the engine and the rules
    warm = workdir / "warm.py"
    warm.write_text(SMALL)
    opened(warm)
    srv.wait(published(warm.as_uri()), timeout=600)
    t_big = opened(big)
    time.sleep(0.2)  # the large check is under way
    t_small = opened(small)
    seen: dict[str, tuple[float, dict]] = {}

    def either(m: dict) -> bool:
        for path in (small, big):
            if published(path.as_uri())(m):
                seen.setdefault(path.name, (time.perf_counter(), m))
        return "small.py" in seen

    srv.wait(either, timeout=1200)
    t_diag = seen["small.py"][0]
    big_pending = "big.py" not in seen
    srv.next_id += 1
    hover_id = srv.next_id
    t_hover = srv.send({"id": hover_id, "method": "textDocument/hover",
                        "params": {"textDocument": {"uri": small.as_uri()}, "position": {"line": 1, "character": 6}}})
    srv.wait(lambda m: either(m) and m.get("id") == hover_id and "method" not in m, timeout=1200)
    hover = time.perf_counter() - t_hover
    t_done, msg = seen["big.py"] if "big.py" in seen else srv.wait(published(big.as_uri()), timeout=1200)
    srv.request("shutdown", None)
    srv.notify("exit", None)
    srv.proc.wait(timeout=30)
    return {"beside_lines": n_lines, "small_diagnostics_ms": (t_diag - t_small) * 1000, "small_hover_ms": hover * 1000,
            "large_still_checking": big_pending, "large_check_s": t_done - t_big,
            "large_unchecked": _unchecked(msg)}


def _unchecked(published: dict) -> int:
    """1 when the server published "did not check" (a lint over its time budget) instead of findings."""
    return int(any("did not check" in d["message"] for d in published["params"]["diagnostics"]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, nargs="+", default=[500, 2000], help="file sizes to measure")
    ap.add_argument("--edits", type=int, default=20, help="timed edits per size")
    ap.add_argument("--debounce-ms", type=int, default=0)
    ap.add_argument("--memory-lines", type=int, default=0,
                    help="also edit a file of this many lines --memory-edits times and report RSS growth")
    ap.add_argument("--memory-edits", type=int, default=300)
    ap.add_argument("--beside-lines", type=int, default=0,
                    help="also time a small document's diagnostics and a hover while a document of this many lines is checked")
    ap.add_argument("--lint-timeout-ms", type=int, default=None,
                    help="the server's lintTimeoutMs (its own default when omitted). On a busy machine a "
                         "10,000-line lint can outlive the default; an abandoned lint measures nothing")
    ap.add_argument("--server", default=f"{sys.executable} -m kerasfit lsp", help="command that starts the server")
    ap.add_argument("--json", action="store_true", help="print the raw figures as JSON too")
    args = ap.parse_args()
    cmd = args.server.split()
    results = []
    for n in args.lines:
        r = session(cmd, n, args.edits, args.debounce_ms, lint_timeout_ms=args.lint_timeout_ms)
        results.append(r)
        e = r["edits"]
        print(f"{r['lines']:>6} lines, {r['diagnostics']} diagnostics: edit -> diagnostics (minus {args.debounce_ms} ms debounce) "
              f"p50 {statistics.median(e):.0f} ms  p95 {pct(e, 0.95):.0f} ms  (n={len(e)}); "
              f"code action p50 {statistics.median(r['code_action_ms']):.0f} ms; first lint {r['first_lint_s'] * 1000:.0f} ms")
        print(f"        start-up (spawn -> initialize answered) {r['startup_s'] * 1000:.0f} ms; "
              f"spawn -> first diagnostics {r['ready_s'] * 1000:.0f} ms; "
              f"shutdown (request -> process gone) {r['shutdown_s'] * 1000:.0f} ms; exit code {r['exit_code']}")
    if args.memory_lines:
        r = session(cmd, args.memory_lines, args.memory_edits, args.debounce_ms, rss_every=max(1, args.memory_edits // 10),
                    lint_timeout_ms=args.lint_timeout_ms)
        results.append(r)
        trace = " ".join(f"{x:.0f}" for x in r["rss_trace_mb"])
        print(f"RSS, {r['lines']} lines: {r['rss_first_mb']:.0f} MB after the first lint, "
              f"{r['rss_idle_mb']:.0f} MB idle after {args.memory_edits} edits "
              f"({r['rss_idle_mb'] / r['rss_first_mb']:.2f}x; goal <= 1.3x); every {max(1, args.memory_edits // 10)} edits: {trace}")
        print(f"        edit -> diagnostics p50 {statistics.median(r['edits']):.0f} ms  p95 {pct(r['edits'], 0.95):.0f} ms")
    if args.beside_lines:
        b = beside(cmd, args.beside_lines, args.lint_timeout_ms)
        results.append(b)
        print(f"small document beside a {b['beside_lines']}-line one: diagnostics {b['small_diagnostics_ms']:.0f} ms, "
              f"hover {b['small_hover_ms']:.0f} ms (the large one was {'still' if b['large_still_checking'] else 'no longer'} "
              f"being checked; it took {b['large_check_s']:.1f} s{', and ran out of time' if b['large_unchecked'] else ''})")
    for r in results:
        if r.get("unchecked"):
            print(f"WARNING: at {r['lines']} lines {r['unchecked']} lint(s) ran out of time and published no findings: "
                  f"those figures measure nothing (raise --lint-timeout-ms)")
    try:
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs (wall-clock timings; a busy machine inflates them)")
    except OSError:
        pass
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
