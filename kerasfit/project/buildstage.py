"""The build cross-check as a stage of the project: ``check --build`` (a stage of
:func:`kerasfit.project.check.check_paths`) and ``kerasfit report``. Pure Python (no TensorFlow).

The one place build options are layered: the command line over ``[tool.kerasfit.build]``
over the file's ``[tool.kerasfit]`` (target, batch size, cores), from the same configuration
as the static checks (``--config``, ``--isolated``; a value given on the command line is used
even when it equals the default). The stage hands the cross-check plain options, the cache
directory and the rules' evidence; the cross-check reads no configuration and no registry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..core.sourcefile import read_regular
from ..core.types import Diagnostic, FileResult
from ..crosscheck.options import parse_input_shapes
from ..engine.registry import RuleMeta, manifest
from ..engine.suppressions import Suppressions
from .config import Config, ConfigError, check_dtype

if TYPE_CHECKING:
    from ..crosscheck.api import BuildOptions
    from ..crosscheck.verdicts import Evidence


class FileSettings(Protocol):
    """What the stage reads of a file's settings (``check.FileSettings``; check imports
    this module, so it is named by what it offers)."""

    @property
    def codes(self) -> tuple[str, ...]: ...
    @property
    def target(self) -> str: ...
    @property
    def options(self) -> tuple[tuple[str, Any], ...]: ...


class Resolver(Protocol):
    """What the stage asks the check's resolver (``check.Resolver``)."""

    @property
    def rules(self) -> dict[str, RuleMeta]: ...
    @property
    def cache_dir(self) -> Path: ...

    def settings_for(self, path: Path) -> FileSettings: ...
    def config_for(self, directory: Path) -> Config: ...


@dataclass(frozen=True)
class BuildRequest:
    """What the command line asked of the build; None = not given (config decides)."""

    entry: str | None = None
    batch_size: int | None = None
    cores: int | None = None
    dtype: str | None = None
    timeout: float | None = None
    input_shape: tuple[tuple[int, ...], ...] | None = None
    use_cache: bool = True
    trace_script: bool = False


DEFAULT_TIMEOUT = 300.0
_MODEL_SOURCE = re.compile(
    r"^def (build|create|get|make)_model\s*\(|^\w+\s*=\s*[\w.]*(Sequential|Model)\(", re.M
)


def build_options(request: BuildRequest, cfg: Config, settings: FileSettings) -> BuildOptions:
    """One file's build options: the command line over ``[tool.kerasfit.build]`` over the
    file's ``[tool.kerasfit]`` (target, batch size, cores)."""
    from ..crosscheck.api import BuildOptions  # defers the build machinery (sandbox, HLO reader, simulator) until a build

    b = cfg.build or {}
    where = str(cfg.source or "config")
    dtype = check_dtype(request.dtype or b.get("dtype") or "float32", "--dtype" if request.dtype else f"{where}: dtype")
    timeout = request.timeout if request.timeout is not None else float(b.get("timeout", DEFAULT_TIMEOUT))
    shape = request.input_shape or _shape(b.get("input-shape"), where)
    opts = dict(settings.options)
    return BuildOptions(
        entry=request.entry or b.get("entry"),
        batch_size=request.batch_size or b.get("batch-size") or opts.get("batch_size"),
        cores=request.cores or b.get("cores") or opts.get("cores") or 1,
        target=settings.target, dtype=dtype, timeout=timeout, use_cache=request.use_cache,
        input_shape=shape, memory_limit=b.get("memory-limit", BuildOptions.memory_limit),
        trace_script=request.trace_script,
    )


def _shape(value: Any, where: str) -> tuple[tuple[int, ...], ...] | None:
    if value in (None, ""):
        return None
    try:
        return parse_input_shapes(str(value))
    except ValueError:
        raise ConfigError(f"{where}: input-shape must be positive dims like '256,256,3' (inputs "
                          f"separated by ';'), not {value!r}") from None


def evidence(rules: dict[str, RuleMeta] | None = None) -> Evidence:
    """What the rules declare the build can weigh (``Rule.build_evidence``), from their
    metadata (a cached run's manifest: no rule is imported) or the registry."""
    from ..crosscheck.verdicts import Evidence  # defers the build machinery, as above

    static: dict[str, str] = {}
    findings: dict[str, tuple[str, str]] = {}
    failures: dict[str, str] = {}
    metas = rules if rules is not None else manifest()
    for code, rule in metas.items():
        if rule.build_evidence is None:
            continue
        if rule.build_only:
            findings[rule.build_evidence] = (code, rule.name)
        else:
            static[code] = rule.build_evidence
        if rule.build_failure_pattern:
            failures[code] = rule.build_failure_pattern
    return Evidence(static, findings, failures)


def defines_a_model(text: str) -> bool:
    """What the build can discover without an entry (for trees of many files)."""
    return bool(_MODEL_SOURCE.search(text))


def run_stage(results: list[FileResult], resolver: Resolver, request: BuildRequest) -> None:
    """Cross-check every checked Python file in place; a failed build becomes its error."""
    from ..crosscheck.api import BuildError, build_report  # defers the build machinery, as above
    from ..crosscheck.verdicts import cross_check, cross_check_failure  # defers the build machinery, as above

    checked = [r for r in results if not (r.skipped or r.error or not r.filename.endswith(".py"))]
    rules = evidence(resolver.rules)
    for res in checked:
        path = Path(res.filename)
        try:
            text = read_regular(path).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        settings = resolver.settings_for(path)
        opts = build_options(request, resolver.config_for(path.parent), settings)
        if len(checked) > 1 and opts.entry is None and not defines_a_model(text):
            continue  # a helper module in a tree: nothing of its own to build
        static = list(res.diagnostics)
        try:
            report = build_report(path, opts, resolver.cache_dir)
        except BuildError as exc:
            res.diagnostics = cross_check_failure(static, str(exc), rules)
            res.error = f"build cross-check failed: {exc}"
            continue
        merged = cross_check(static, report, res.filename, rules)
        res.diagnostics = sorted(_filtered(merged, static, settings, Suppressions.scan(text)),
                                 key=lambda d: d.sort_key())


def report_text(path: Path, request: BuildRequest, resolver: Resolver, diagnostics: list[Diagnostic], fmt: str,
                max_rows: int | None, html: bool = False) -> tuple[str, str | None]:
    """``kerasfit report``: the file's build options layered as ``check --build`` layers them,
    and the rendered report (and page); ``diagnostics`` are the file's static findings, each
    of which on a row of the table yields its recommendation. Raises ConfigError, or the
    cross-check's BuildError."""
    from ..crosscheck.api import render_cached  # defers the build machinery, as above
    from ..crosscheck.verdicts import static_findings  # defers the build machinery, as above

    opts = build_options(request, resolver.config_for(path.resolve().parent), resolver.settings_for(path))
    findings = static_findings(diagnostics, evidence(resolver.rules))
    return render_cached(path, opts, resolver.cache_dir, findings, fmt, max_rows, html)


def _filtered(merged: list[Diagnostic], static: list[Diagnostic], settings: FileSettings,
              suppressions: Any) -> list[Diagnostic]:
    """The build's own findings obey --select/--ignore, per-file-ignores and # noqa."""
    enabled = set(settings.codes)
    known = {id(d) for d in static}
    out = []
    for d in merged:
        if id(d) not in known:
            if d.code not in enabled:
                continue
            if suppressions.suppressed(d.code, range(d.row, max(d.row, d.end_row) + 1)):
                continue
        out.append(d)
    return out
