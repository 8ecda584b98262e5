"""The build cross-check's public API: run the child, cache, report, cross-check.

Nothing here imports TensorFlow: the model is built by ``kerasfit.crosscheck.child`` in a
subprocess with a time limit, so a crash, hang or import error in user code becomes
one :class:`BuildError` line and never takes the static results down with it.
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
from typing import Any, Sequence

from kerasfit.core.cachefs import CacheDir, default_cache_dir
from kerasfit.engine.registry import all_rules
from kerasfit.core.types import DEFAULT_TARGET, TARGETS, Diagnostic, Severity

from .hlo import FORWARD, INPUT_GRAD, KERNEL_GRAD
from .records import BuildReport, OpReport, StaticFinding, same_file, source_at
from .report import make_report, render_report
from .sandbox import describe_error, describe_exit, run_contained
from .simulator import LARGE_BATCH

__all__ = [
    "BuildError", "BuildOptions", "BuildReport", "build_report", "cached_report",
    "cross_check", "cross_check_failure", "render_report", "static_findings",
]

CACHE_SCHEMA = 4  # 4: mem ops move one slice of a dynamic slice, carry folds; batch sums folded into dots
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


class BuildError(Exception):
    """The build failed; ``str(e)`` is one line naming the file."""


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
            raise BuildError(f"{shown}: the build timed out after {options.timeout:g} s "
                             "(raise the build timeout)")
        result: dict[str, Any] | None = None
        if out.exists():
            try:
                loaded = json.loads(out.read_text())
            except ValueError:
                loaded = None
            # the user's code sees --out in sys.argv: anything but an object is not a result
            result = loaded if isinstance(loaded, dict) else None
        if result is None:
            raise BuildError(f"{shown}: {describe_exit(outcome, out, options.memory_limit)}")
        if not result.get("ok"):
            raise BuildError(f"{shown}: {describe_error(str(result.get('error')), options.memory_limit)}")
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


def _cache_dir() -> CacheDir:
    # the same root as the static cache: ./.kerasfit_cache, or $KERASFIT_CACHE_DIR;
    # opened without following links (see kerasfit.core.cachefs)
    return CacheDir(default_cache_dir()).child("build")


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cache_key(digest: str, options: BuildOptions) -> str:
    # The target is applied by the simulator in this process, so it is not part of the key.
    parts = {"schema": CACHE_SCHEMA, "file": digest, "entry": options.entry,
             "batch_size": options.batch_size, "cores": options.cores, "dtype": options.dtype,
             "input_shape": [list(d) for d in options.input_shape or ()], "versions": _versions()}
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


def build_report(path: str | Path, options: BuildOptions,
                 findings: list[StaticFinding] | None = None) -> BuildReport:
    """Build the model at ``path`` (or reuse a cached build) and simulate it; ``findings``
    (:func:`static_findings` of the same file) each yield a recommendation on their rows."""
    path = Path(path)
    started = time.perf_counter()
    try:
        digest = _file_digest(path)
    except OSError as exc:
        raise BuildError(f"{path}: cannot read the file ({exc.strerror})") from None
    key = _cache_key(digest, options)
    cache = _cache_dir()
    raw = _read_json(cache, f"{key}.json") if options.use_cache else None
    cached = raw is not None
    if raw is None:
        raw = run_child(path, options)
        if options.use_cache:
            _write_json(cache, f"{key}.json", raw)
    if options.use_cache:
        _write_json(cache, f"latest-{digest}.json", {"key": key, "options": asdict(options)})
    report = make_report(raw, options.target, options.dtype, findings)
    report.notes.extend(cache.warnings)
    report.cached = cached
    report.elapsed = time.perf_counter() - started
    return report


def cached_report(path: str | Path) -> BuildReport | None:
    """The last report for this exact file content, without running anything."""
    path = Path(path)
    try:
        digest = _file_digest(path)
    except OSError:
        return None
    cache = _cache_dir()
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


# ---------------------------------------------------------------- cross-check

# A line whose ops waste more than half the MXU (feature padding alone) is worth a
# diagnostic if it carries at least this share of the step's FLOPs.
POOR_FIT = 0.5
MIN_SHARE = 0.01


def _ops_on(report: BuildReport, filename: str, row: int, end_row: int) -> list[OpReport]:
    return [op for op in report.ops if source_at(op.source, filename, row, end_row)]


def _feature_fit(op: OpReport) -> float:
    (fi, pfi), (fo, pfo) = op.dims["in_features"], op.dims["out_features"]
    return (fi * fo) / (pfi * pfo) if pfi and pfo else 1.0


def _x(shape: Sequence[int]) -> str:
    return "×".join(str(d) for d in shape)




def _confirm_channels(ops: list[OpReport], claim: Sequence[int] = ()) -> dict[str, Any] | None:
    """KF102: is the finding's own layer's width padded, and to what the finding says?

    Only the layer's own ops are evidence: its forward pass and weight update produce the
    width, its input gradient contracts over it. The verdict cites the op that shows the
    claimed padding; when none does, the finding is corrected with what the simulator
    models for them — padded sizes are modelled from docs/facts.md, never measured.
    """
    if not ops:
        return None
    padded = [op for op in ops if _width(op)[0] != _width(op)[1]]
    # KF102's ``padded_to`` ("pad to 104 or 128"): the padding rule's two sizes over a step
    claimed = set(claim) or None
    matching = [op for op in padded if _width(op)[1] in claimed] if claimed else padded
    if matching:
        status, pool = "confirmed", matching
        if claimed is None:  # nothing specific claimed: cite the forward pass when it pads
            pool = [op for op in matching if op.pass_ == FORWARD] or matching
    elif padded:
        status, pool = "corrected", padded
    else:
        status, pool = "refuted", [op for op in ops if op.pass_ == FORWARD] or ops
    # the forward pass reads most plainly, unless another pass is what the claim is about
    op = max(pool, key=lambda o: (status == "confirmed" or o.pass_ == FORWARD, o.wasted_time, -o.fit))
    width = _width(op)
    tensor = "lhs" if op.pass_ == INPUT_GRAD else "out"
    shape, padded_shape = op.tensors.get(tensor, [op.shape, op.padded_shape])
    verdict = {"status": status, "shape": shape, "padded_shape": padded_shape, "fit": op.fit,
               "layer": op.layer, "pass": op.pass_, "out_features": list(width),
               "wasted_time": op.wasted_time}
    if status == "corrected":
        # the padding is the simulator's rule applied to the built shapes, not a measurement
        verdict["detail"] = (f"modelled on the built shapes (docs/facts.md#1–3): its {op.pass_} pass pads "
                             f"{width[0]} to {width[1]}, not {' or '.join(str(c) for c in sorted(claimed or ()))}")
    return verdict


def _width(op: OpReport) -> list[int]:
    """[real, padded] of the layer's own filter/unit count in this op: its input gradient
    contracts over it, its forward pass and weight update produce it."""
    key = "in_features" if op.pass_ == INPUT_GRAD else "out_features"
    return op.dims.get(key) or [0, 0]


def _confirm_transpose(report: BuildReport, filename: str, row: int, end_row: int) -> dict[str, Any]:
    """KF107: a transpose the finding points at is still in the traced step (not free)."""
    at_line = [m for m in report.mem_rows if m.kind == "transpose" and source_at(m.source, filename, row, end_row)]
    found = [m for m in at_line if m.wasted_time > 0]
    if at_line and not found:
        return {"status": "refuted", "detail": "its transposes only feed matrix units, which read "
                                               "either layout (docs/facts.md#4)"}
    if not found:
        return {"status": "refuted", "detail": "no transpose from this line is left in the traced "
                                               "step (XLA folded it or it is free, docs/facts.md#4)"}
    worst = max(found, key=lambda m: m.time)
    return {"status": "confirmed", "shape": worst.shape, "padded_shape": worst.padded_shape,
            "fit": None, "layer": worst.layer, "wasted_time": sum(m.time for m in found),
            "detail": f"{len(found)} transpose(s) in the step, {worst.why[0] if worst.why else ''}"}


def _confirm_pad(report: BuildReport, ops: list[OpReport], filename: str, row: int,
                 end_row: int) -> dict[str, Any] | None:
    """KF103: a zero spatial pad that feeds a convolution (docs/facts.md#19)."""
    conv_names = {op.name for op in ops}
    by_name = {op.name: op for op in report.ops}
    for pad in report.pads:
        src = pad.get("source")
        on_line = src and same_file(src["file"], filename) and row <= src["line"] <= max(row, end_row)
        if not on_line and not conv_names.intersection(pad.get("consumers", [])):
            continue
        shape, padded = pad["shape"], pad["padded_shape"]
        # Spatial only: the first and last dims (batch, channels in NHWC) unchanged.
        spatial = len(shape) > 2 and shape[0] == padded[0] and shape[-1] == padded[-1]
        consumers = [by_name[c] for c in pad.get("consumers", []) if c in by_name]
        kgrad = [c for c in consumers if c.pass_ == KERNEL_GRAD]
        ref = next(iter(kgrad or consumers), None)
        return {"status": "confirmed" if pad.get("zero") and spatial else "refuted",
                "shape": shape, "padded_shape": padded, "fit": ref.fit if ref else None,
                "layer": pad.get("layer"),
                "detail": "XLA folds a zero pad into the forward conv's window only; the "
                          "kernel-gradient conv reads the padded tensor (docs/facts.md#19)"}
    return None


def _batch_evidence(report: BuildReport) -> OpReport | None:
    batchy = [op for op in report.ops if op.dims["batch"][0] != op.dims["batch"][1]]
    return min(batchy, key=lambda o: (o.fit, -o.padded_flops)) if batchy else None


def _offsets(text: str | None, row: int, col: int, end_row: int, end_col: int) -> tuple[int, int]:
    if text is None:
        return 0, 0
    lines = text.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))

    def at(r: int, c: int) -> int:
        r = min(max(r, 1), len(lines)) if lines else 1
        return starts[r - 1] + min(c, len(lines[r - 1].rstrip("\r\n")) if lines else 0)

    return at(row, col), at(end_row, end_col)


def _new_diag(code: tuple[str, str], message: str, filename: str, source: dict[str, Any] | None,
              text: str | None, finding: str, fields: dict[str, Any]) -> Diagnostic:
    row = source["line"] if source else 1
    end_row = source.get("end_line", row) if source else 1
    col = source.get("column", 0) if source else 0
    end_col = source.get("end_column", 0) if source else 0
    if text is not None and end_row == row and end_col <= col:
        lines = text.splitlines()
        end_col = len(lines[row - 1]) if 0 < row <= len(lines) else col
    start, end = _offsets(text, row, col, end_row, end_col)
    return Diagnostic(code=code[0], name=code[1], message=message, severity=Severity.WARNING,
                      filename=filename, row=row, column=col, end_row=end_row,
                      end_column=end_col, fix=None, start=start, end=end, finding=finding, fields=fields)


def _rules_by_evidence() -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """code -> evidence kind for static rules; finding kind -> (code, name) for build-only ones."""
    static: dict[str, str] = {}
    findings: dict[str, tuple[str, str]] = {}
    for code, rule in all_rules().items():
        kind = getattr(rule, "build_evidence", None)
        if kind is None:
            continue
        if getattr(rule, "build_only", False):
            findings[kind] = (code, rule.name)
        else:
            static[code] = kind
    return static, findings


def _confirm_failure(code: str, report: BuildReport) -> dict[str, Any] | None:
    """KF101: Keras 3 rejecting the argument confirms it, whatever the tf-keras retry did;
    a model Keras 3 built with it refutes it; a tf-keras build alone says nothing."""

    pattern = getattr(all_rules().get(code), "build_failure_pattern", None)
    if report.keras3_error:
        if pattern and re.search(pattern, report.keras3_error):
            return {"status": "confirmed", "detail": f"Keras 3 refuses it: {report.keras3_error[:200]}"}
        return None
    if report.mode == "keras":
        return {"status": "refuted", "detail": "the model built under Keras 3"}
    return None


def static_findings(diagnostics: list[Diagnostic]) -> list[StaticFinding]:
    """The findings whose rule the build can weigh, for the report's recommendations."""
    static, _ = _rules_by_evidence()
    return [StaticFinding(d.code, static[d.code], d.filename, d.row, d.end_row,
                          d.fix.title if d.fix is not None else d.message)
            for d in diagnostics if d.code in static and d.severity != Severity.INFO]


def cross_check_failure(diagnostics: list[Diagnostic], error: str) -> list[Diagnostic]:
    """A failed build is evidence too: KF101's ``fused=`` is what Keras 3 raises on."""
    rules = all_rules()
    for d in diagnostics:
        rule = rules.get(d.code)
        pattern = getattr(rule, "build_failure_pattern", None) if rule else None
        if pattern and getattr(rule, "build_evidence", None) == "build-failure" and re.search(pattern, error):
            d.build = {"status": "confirmed", "detail": f"the build fails on it: {error[:200]}"}
    return diagnostics


def cross_check(diagnostics: list[Diagnostic], report: BuildReport, filename: str) -> list[Diagnostic]:
    """Confirm or refute static findings with the build, and add what only it can see.

    Which findings the build can judge, and how, is declared by each rule
    (``Rule.build_evidence``); nothing here names a rule code.
    """
    try:
        text = Path(filename).read_text(encoding="utf-8")
    except OSError:
        text = None
    if not report.complete:
        # a model missing whatever the failed statements would have added proves nothing
        return list(diagnostics)
    static, findings = _rules_by_evidence()
    poor_fit = findings.get("poor-fit")
    tiny_code = findings.get("tiny-per-core-batch")
    out = list(diagnostics)
    claimed: set[int] = set()
    evidence = _batch_evidence(report)
    is_tpu = TARGETS.get(report.target) is not None and TARGETS[report.target].family == "tpu"
    tiny = is_tpu and 0 < report.per_core_batch < LARGE_BATCH
    for d in out:
        if not same_file(d.filename, filename):
            continue
        kind = static.get(d.code)
        ops = _ops_on(report, filename, d.row, d.end_row)
        if kind == "feature-padding" and ops:
            d.build = _confirm_channels(ops, d.fields.get("padded_to", ()))
        elif kind == "spatial-pad":
            d.build = _confirm_pad(report, ops, filename, d.row, d.end_row)
        elif kind == "transpose":
            d.build = _confirm_transpose(report, filename, d.row, d.end_row)
        elif kind == "per-core-batch":
            d.build = {"status": "confirmed" if tiny else "refuted",
                       "shape": evidence.shape if evidence else [report.per_core_batch],
                       "padded_shape": evidence.padded_shape if evidence else [report.per_core_batch],
                       "fit": evidence.fit if evidence else None,
                       "per_core_batch": report.per_core_batch}
        elif kind == "build-failure":
            d.build = _confirm_failure(d.code, report)
        if d.build is not None:
            claimed.update(range(d.row, max(d.row, d.end_row) + 1))
            # The static finding already speaks for these ops: no second finding on them.
            for op in ops:
                if op.source:
                    claimed.add(op.source["line"])
    # KF301: lines whose ops are badly padded in their features, no static finding there.
    by_line: dict[int, list[OpReport]] = {}
    for op in report.ops:
        if op.source and same_file(op.source["file"], filename):
            by_line.setdefault(op.source["line"], []).append(op)
    static_rows = {r for d in diagnostics if same_file(d.filename, filename)
                   for r in range(d.row, max(d.row, d.end_row) + 1)}
    outputs = set(report.output_layers)
    for line, ops in sorted(by_line.items()):
        if line in static_rows or line in claimed or poor_fit is None:
            continue
        # An output layer's width is the task's (classes, channels): the static rule
        # reports it as info, so the build does not warn about the same op.
        ops = [op for op in ops if op.layer not in outputs]
        if not ops:
            continue
        share = sum(op.share for op in ops)
        flops = sum(op.flops for op in ops) or 1
        ffit = sum(_feature_fit(op) * op.flops for op in ops) / flops
        if ffit >= POOR_FIT or share < MIN_SHARE:
            continue
        worst = min(ops, key=_feature_fit)
        # the share named is the op's own: the line's ops together (every pass, every layer a
        # loop on this line builds) may be most of the step while this op is a sliver of it
        fields = {"layer": worst.layer or worst.op_name, "pass": worst.pass_, "shape": tuple(worst.shape),
                  "padded_to": tuple(worst.padded_shape), "target": report.target, "fit": worst.fit,
                  "share": worst.share}
        msg = (f"{fields['layer']} ({worst.pass_}) pads {_x(worst.shape)} to "
               f"{_x(worst.padded_shape)} on {report.target}: {worst.fit:.1%} MXU fit, "
               f"{worst.share:.1%} of step FLOPs")
        out.append(_new_diag(poor_fit, msg, filename, worst.source, text, "PoorFit", fields))
    # KF302: a per-core batch under 64 flips the layout (docs/facts.md#1, #24).
    has_kf203 = any(static.get(d.code) == "per-core-batch" and same_file(d.filename, filename)
                    for d in diagnostics)
    if tiny and not has_kf203 and tiny_code is not None:
        # The line where the batch enters (placeholder / keras.Input), else the evidence op.
        candidates = list(report.input_sites) + ([evidence.source] if evidence and evidence.source else [])
        src = next((s for s in candidates if same_file(s["file"], filename)), None)
        what = (f"; {evidence.layer or evidence.op_name} ({evidence.pass_}) pads "
                f"{_x(evidence.shape)} to {_x(evidence.padded_shape)} ({evidence.fit:.1%} fit)"
                if evidence else "")
        fields = {"per_core_batch": report.per_core_batch, "global_batch": report.global_batch,
                  "cores": report.cores, "under": LARGE_BATCH, "use": TARGETS[report.target].large}
        msg = (f"per-core batch {report.per_core_batch} (global {report.global_batch} / "
               f"{report.cores} cores) is under {LARGE_BATCH}{what}; use a per-core batch "
               f"of {TARGETS[report.target].large} or more")
        out.append(_new_diag(tiny_code, msg, filename, src, text, "TinyPerCoreBatch", fields))
    return out
