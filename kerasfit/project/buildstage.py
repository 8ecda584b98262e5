"""``--build`` as a stage of :func:`kerasfit.project.check.check_paths`. Pure Python (no TensorFlow).

The stage resolves each file's build options from the same configuration as the static
checks (``--config``, ``--isolated``, ``[tool.kerasfit.build]``; command-line values win,
and a value given on the command line is used even when it equals the default), builds
the model (cached by content), cross-checks the file's findings, and passes the build's
own findings through the same selection and suppression comments as static ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..core.types import Diagnostic, FileResult
from ..crosscheck.options import parse_input_shapes
from ..engine.suppressions import Suppressions
from .config import Config, ConfigError

if TYPE_CHECKING:
    from ..crosscheck.api import BuildOptions


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


DEFAULT_TIMEOUT = 300.0
DTYPES = ("float32", "bfloat16")
_MODEL_SOURCE = re.compile(
    r"^def (build|create|get|make)_model\s*\(|^\w+\s*=\s*[\w.]*(Sequential|Model)\(", re.M
)


def build_options(request: BuildRequest, cfg: Config, settings: FileSettings) -> BuildOptions:
    """One file's build options: the command line over ``[tool.kerasfit.build]`` over the
    file's ``[tool.kerasfit]`` (target, batch size, cores)."""
    from ..crosscheck.api import BuildOptions  # defers the build machinery (sandbox, HLO reader, simulator) until --build

    b = cfg.build or {}
    where = str(cfg.source or "config")
    dtype = request.dtype or b.get("dtype") or "float32"
    if dtype not in DTYPES:
        raise ConfigError(f"{where if not request.dtype else '--dtype'}: dtype must be float32 or "
                          f"bfloat16, not {dtype!r}")
    timeout = request.timeout if request.timeout is not None else float(b.get("timeout", DEFAULT_TIMEOUT))
    shape = request.input_shape or _shape(b.get("input-shape"), where)
    opts = dict(settings.options)
    return BuildOptions(
        entry=request.entry or b.get("entry"),
        batch_size=request.batch_size or b.get("batch-size") or opts.get("batch_size"),
        cores=request.cores or b.get("cores") or opts.get("cores") or 1,
        target=settings.target, dtype=dtype, timeout=timeout, use_cache=request.use_cache,
        input_shape=shape, memory_limit=b.get("memory-limit", BuildOptions.memory_limit),
    )



def _shape(value: Any, where: str) -> tuple[tuple[int, ...], ...] | None:
    if value in (None, ""):
        return None
    try:
        return parse_input_shapes(str(value))
    except ValueError:
        raise ConfigError(f"{where}: input-shape must be positive dims like '256,256,3' (inputs "
                          f"separated by ';'), not {value!r}") from None


def defines_a_model(text: str) -> bool:
    """What the build can discover without an entry (for trees of many files)."""
    return bool(_MODEL_SOURCE.search(text))


def run_stage(results: list[FileResult], resolver: Resolver, request: BuildRequest) -> None:
    """Cross-check every checked Python file in place; a failed build becomes its error."""
    from ..crosscheck.api import BuildError, build_report, cross_check, cross_check_failure  # defers the build machinery, as above

    checked = [r for r in results if not (r.skipped or r.error or not r.filename.endswith(".py"))]
    for res in checked:
        path = Path(res.filename)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        settings = resolver.settings_for(path)
        opts = build_options(request, resolver.config_for(path.parent), settings)
        if len(checked) > 1 and opts.entry is None and not defines_a_model(text):
            continue  # a helper module in a tree: nothing of its own to build
        static = list(res.diagnostics)
        try:
            report = build_report(path, opts)
        except BuildError as exc:
            res.diagnostics = cross_check_failure(static, str(exc))
            res.error = f"build cross-check failed: {exc}"
            continue
        merged = cross_check(static, report, res.filename)
        res.diagnostics = sorted(_filtered(merged, static, settings, Suppressions.scan(text)),
                                 key=lambda d: d.sort_key())


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
