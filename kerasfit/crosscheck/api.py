"""The build cross-check as a stage: run the child on plain build options, cache what it
gives (a failure too) under the cache directory the caller names, and report.

Nothing here imports TensorFlow: the model is built by ``kerasfit.crosscheck.child`` in a
subprocess with a time limit, so a crash, hang or import error in user code becomes
one :class:`BuildError` line and never takes the static results down with it. Nothing here
reads a configuration or the rule registry: the project layers the build options and
passes the rules' evidence (:mod:`.verdicts`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kerasfit.core.cachefs import CacheDir
from kerasfit.core.types import DEFAULT_TARGET, TARGETS

from .records import BuildReport, StaticFinding
from .report import make_report, render_report
from .sandbox import describe_error, describe_exit, run_contained

__all__ = ["BuildError", "BuildOptions", "BuildReport", "build_report", "cached_report", "render_cached",
           "render_report", "run_child"]

# 5: the build says which way (sliced or traced) and what it assumed; 4: mem ops move one
# slice of a dynamic slice, carry folds; batch sums folded into dots
CACHE_SCHEMA = 5
# TF1 graph code needs tf-keras behind tf.compat.v1.layers (docs/facts.md#22).
_TF1_MARKERS = re.compile(
    r"tf\.layers\.|compat\.v1\.layers|\bplaceholder\(|variable_scope|tf\.contrib|"
    r"disable_eager_execution|disable_v2_behavior|TF_USE_LEGACY_KERAS"
)


# MiB of address space for the child. TensorFlow reserves far more than it touches (thread
# stacks, allocator arenas): on 2 cores, building fixtures/crosscheck/keras_cnn.py peaks at
# 2.5 GiB of address space (0.6 GiB resident) and resnet50.py at 2.8 GiB (0.95 GiB).
# The child's malloc arenas are capped (MALLOC_ARENA_MAX) so the peak does not grow with
# the core count.
DEFAULT_MEMORY_LIMIT = 16384


@dataclass
class BuildOptions:
    entry: str | None = None  # "module:function", "function", or an expression in the module
    batch_size: int | None = None  # GLOBAL batch; default: the model's input spec or 128
    cores: int = 1  # replicas sharing the global batch; per-core = global // cores
    target: str = DEFAULT_TARGET
    dtype: str = "float32"  # or "bfloat16"
    timeout: float = 300.0
    use_cache: bool = True
    # each input's non-batch dims, for its None dims (or all of them where the model has none)
    input_shape: tuple[tuple[int, ...], ...] | None = None
    memory_limit: int | None = DEFAULT_MEMORY_LIMIT  # MiB of address space for the child; None: none
    # run the script itself to its first training step and trace that step (runs its data
    # pipeline); default: build its model from a slice of it, never running its training or data
    trace_script: bool = False


class BuildError(Exception):
    """The build failed; ``str(e)`` is one line naming the file. ``kind`` says what failed,
    for the failure cache: "error" (the child's own message), "timeout", "memory", "exit"
    (the child ended without a result), or None (nothing ran: not cached)."""

    def __init__(self, message: str, kind: str | None = None):
        super().__init__(message)
        self.kind = kind


# ---------------------------------------------------------------- running the child


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


_DIST_INFO = re.compile(r"^(tensorflow|keras|tf_keras)-([^-]+)\.dist-info$")


def _versions() -> dict[str, str]:
    """Installed TensorFlow / Keras versions, for the cache key.

    Read from the ``*.dist-info`` folder names: importing ``importlib.metadata`` costs
    more than a whole cached report.
    """
    out = {"tensorflow": "", "keras": "", "tf-keras": ""}
    found = False
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            m = _DIST_INFO.match(name)
            if m:
                key = m.group(1).replace("_", "-")
                if not out[key]:
                    out[key] = m.group(2)
                    found = True
    if not found:
        from importlib import metadata

        for dist in out:
            try:
                out[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                pass
    return out


def is_tf1_source(source: str) -> bool:
    return bool(_TF1_MARKERS.search(source))


def run_child(path: str | Path, options: BuildOptions, *, probe_weights: str | None = None,
              probe_outputs: str | None = None, dump_hlo: str | None = None) -> dict[str, Any]:
    """Build in a subprocess and return its raw JSON; raise BuildError on any failure."""
    path = Path(path)
    shown = str(path)
    try:
        source = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise BuildError(f"{shown}: cannot read the file ({exc.strerror})") from None
    if options.target not in TARGETS:
        raise BuildError(f"{shown}: unknown target {options.target!r} ({', '.join(TARGETS)})")
    with tempfile.TemporaryDirectory(prefix="kerasfit-build-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "kerasfit.crosscheck.child", "--file", str(path.resolve()),
               "--out", str(out), "--cores", str(max(1, options.cores)), "--dtype", options.dtype]
        if options.entry:
            cmd += ["--entry", options.entry]
        if options.batch_size:
            cmd += ["--batch-size", str(options.batch_size)]
        if options.input_shape:
            cmd += ["--input-shape", ";".join(",".join(str(d) for d in dims) for dims in options.input_shape)]
        if is_tf1_source(source):
            cmd.append("--legacy")
        if options.trace_script:
            cmd.append("--trace-script")
        for flag, value in (("--probe-weights", probe_weights), ("--probe-outputs", probe_outputs),
                            ("--dump-hlo", dump_hlo)):
            if value:
                cmd += [flag, str(value)]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_root(), env.get("PYTHONPATH")) if p)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        env.setdefault("PYTHONWARNINGS", "ignore")
        env.setdefault("MALLOC_ARENA_MAX", "8")
        limit = options.memory_limit * 2**20 if options.memory_limit else None
        with _Progress(Path(f"{out}.phase"), shown):
            outcome = run_contained(cmd, env=env, timeout=options.timeout, memory_limit=limit, workdir=tmp)
        if outcome.timed_out:
            raise BuildError(f"{shown}: the build timed out after {options.timeout:g} s (raise it with "
                             "--build-timeout, or timeout in [tool.kerasfit.build])", "timeout")
        result: dict[str, Any] | None = None
        if out.exists():
            try:
                loaded = json.loads(out.read_text())
            except ValueError:
                loaded = None
            # the user's code sees --out in sys.argv: anything but an object is not a result
            result = loaded if isinstance(loaded, dict) else None
        if result is None:
            why = describe_exit(outcome, out, options.memory_limit)
            raise BuildError(f"{shown}: {why}", "memory" if "memory limit" in why else "exit")
        if not result.get("ok"):
            raise BuildError(f"{shown}: {describe_error(str(result.get('error')), options.memory_limit)}", "error")
        if not outcome.contained:
            notes = result.setdefault("notes", [])
            if isinstance(notes, list):
                notes.append("the build ran without a PID namespace (no unshare(1), privilege or user "
                             "namespaces here): a process it started that killed or stopped its "
                             "supervisor first may still be running")
        return result


class _Progress:
    """Tell a terminal what the build child is doing while it waits (30–50 s cold).

    The child writes its phase to a file (``child._phase``); a thread reads it twice a
    second and prints each new one to stderr. Silent when stderr is not a terminal, so
    pipes, CI logs and the language server see nothing.
    """

    WORDS = {"tensorflow": "importing TensorFlow", "import": "running the script's imports",
             "build": "building the model", "trace": "tracing one training step",
             "lower": "lowering the step to HLO", "parse": "reading the HLO"}

    def __init__(self, phase_file: Path, shown: str):
        self.phase_file, self.shown = phase_file, shown
        self.enabled = sys.stderr.isatty()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> _Progress:
        if self.enabled:
            self._thread = threading.Thread(target=self._watch, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(1.0)

    def _watch(self) -> None:
        last = ""
        start = time.monotonic()
        while not self._stop.wait(0.5):
            try:
                phase = self.phase_file.read_text().strip()
            except OSError:
                continue
            if phase and phase != last:
                last = phase
                words = self.WORDS.get(phase, phase)
                print(f"kerasfit: {self.shown}: {words}… ({time.monotonic() - start:.0f} s)",
                      file=sys.stderr, flush=True)


# ---------------------------------------------------------------- cache


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cache_key(digest: str, options: BuildOptions) -> str:
    # The target is applied by the simulator in this process, so it is not part of the key.
    parts = {"schema": CACHE_SCHEMA, "file": digest, "entry": options.entry,
             "batch_size": options.batch_size, "cores": options.cores, "dtype": options.dtype,
             "input_shape": [list(d) for d in options.input_shape or ()], "versions": _versions(),
             "trace_script": options.trace_script}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


_KEY = re.compile(r"[0-9a-f]{32}")  # a name read back from a cache file names only a cache file


def _write_json(cache: CacheDir, name: str, data: Any) -> None:
    cache.write(name, json.dumps(data).encode(), gitignore=True)  # readers never see half a file


def _read_json(cache: CacheDir, name: str) -> Any:
    raw = cache.read(name)
    try:
        return json.loads(raw) if raw is not None else None
    except (ValueError, RecursionError):
        return None


def _cached_failure(cache: CacheDir, key: str, options: BuildOptions) -> str | None:
    """The message of a build of this source with these options that failed before, when
    it would fail again: a time or memory limit no larger than the one it ran out of."""
    failed = _read_json(cache, f"{key}.failed.json")
    if not isinstance(failed, dict) or not isinstance(failed.get("error"), str):
        return None
    kind, limit = failed.get("kind"), failed.get("limit")
    if kind == "timeout" and not (isinstance(limit, (int, float)) and options.timeout <= limit):
        return None
    if kind == "memory" and not (isinstance(limit, (int, float)) and (options.memory_limit or 0) <= limit):
        return None
    return str(failed["error"])


def _build_raw(path: Path, options: BuildOptions, cache: CacheDir, key: str) -> tuple[dict[str, Any], bool]:
    """The child's raw result (from the cache when there): (raw, whether cached). A failed
    build is cached too, and answered from the cache saying so."""
    if options.use_cache:
        raw = _read_json(cache, f"{key}.json")
        if isinstance(raw, dict):
            return raw, True
        error = _cached_failure(cache, key, options)
        if error is not None:
            raise BuildError(f"{path}: {error} (cached: this source failed to build with these options before; "
                             "--no-cache builds it again)", "cached")
    try:
        raw = run_child(path, options)
    except BuildError as exc:
        if options.use_cache and exc.kind in ("error", "timeout", "memory", "exit"):
            limit = options.timeout if exc.kind == "timeout" else options.memory_limit
            message = str(exc).removeprefix(f"{path}: ")
            _write_json(cache, f"{key}.failed.json", {"error": message, "kind": exc.kind, "limit": limit})
        raise
    if options.use_cache:
        _write_json(cache, f"{key}.json", raw)
    return raw, False


def _build_slot(path: Path, options: BuildOptions, cache_dir: Path) -> tuple[str, str, CacheDir]:
    """The file's digest, its build's cache key under ``options``, and the build cache."""
    try:
        digest = _file_digest(path)
    except OSError as exc:
        raise BuildError(f"{path}: cannot read the file ({exc.strerror})") from None
    return digest, _cache_key(digest, options), CacheDir(cache_dir).child("build")


def build_report(path: str | Path, options: BuildOptions, cache_dir: Path,
                 findings: list[StaticFinding] | None = None) -> BuildReport:
    """Build the model at ``path`` (or reuse a cached build under ``cache_dir``) and simulate
    it; ``findings`` (the file's static findings the build can weigh) each yield a
    recommendation on their rows."""
    path = Path(path)
    started = time.perf_counter()
    digest, key, cache = _build_slot(path, options, cache_dir)
    raw, cached = _build_raw(path, options, cache, key)
    if options.use_cache:
        _write_json(cache, f"latest-{digest}.json", {"key": key, "options": asdict(options)})
    report = make_report(raw, options.target, options.dtype, findings)
    report.notes.extend(cache.warnings)
    report.cached = cached
    report.elapsed = time.perf_counter() - started
    return report


def render_cached(path: str | Path, options: BuildOptions, cache_dir: Path, findings: list[StaticFinding],
                  fmt: str, max_rows: int | None, html: bool = False) -> tuple[str, str | None]:
    """The rendered report (and its page): read back whole when this build, target, dtype,
    set of findings and rendering were rendered before by this kerasfit, so a cached report
    takes the same time whatever the model's size; else built (or read from the build
    cache) and rendered, and kept."""
    path = Path(path)
    digest, key, cache = _build_slot(path, options, cache_dir)
    shown = json.dumps([options.target, options.dtype, [asdict(f) for f in findings], fmt, max_rows, html,
                        _code_stamp(), str(path)], sort_keys=True)
    name = f"{key}.render-{hashlib.sha256(shown.encode()).hexdigest()[:16]}.json"
    if options.use_cache and _read_json(cache, f"{key}.json") is not None:
        kept = _read_json(cache, name)
        if isinstance(kept, dict) and isinstance(kept.get("text"), str):
            return kept["text"], kept.get("html") if isinstance(kept.get("html"), str) else None
    report = build_report(path, options, cache_dir, findings)
    text = render_report(report, fmt, max_rows=max_rows)
    page = None
    if html:
        from .html import render_html  # defers the page renderer: only --html needs it

        page = render_html(report, max_rows=max_rows)
    if options.use_cache:
        _write_json(cache, name, {"text": text, "html": page})
    return text, page


def _code_stamp() -> str:
    """What the rendering depends on in this kerasfit: its report and simulator code."""
    here = Path(__file__).resolve().parent
    stats = []
    for p in sorted([*here.glob("*.py"), here.parent / "core" / "types.py"]):
        try:
            st = p.stat()
        except OSError:
            continue
        stats.append((p.name, st.st_size, st.st_mtime_ns))
    return hashlib.sha256(repr(stats).encode()).hexdigest()[:16]


def cached_report(path: str | Path, cache_dir: Path) -> BuildReport | None:
    """The last report for this exact file content, without running anything."""
    path = Path(path)
    try:
        digest = _file_digest(path)
    except OSError:
        return None
    cache = CacheDir(cache_dir).child("build")
    latest = _read_json(cache, f"latest-{digest}.json")
    if not isinstance(latest, dict) or not _KEY.fullmatch(str(latest.get("key"))):
        return None
    raw = _read_json(cache, f"{latest.get('key')}.json")
    if not isinstance(raw, dict):
        return None
    opts = latest.get("options") or {}
    report = make_report(raw, opts.get("target", DEFAULT_TARGET), opts.get("dtype", "float32"))
    report.cached = True
    return report
