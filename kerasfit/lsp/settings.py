"""The language server's editor-side settings (initializationOptions /
didChangeConfiguration), read over the project's pyproject."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..project.check import CheckOptions
from ..project.config import Selection
from .guard import DEFAULT_LINT_TIMEOUT_MS


DEFAULT_DEBOUNCE_MS = 200
# A document this large (about 7,000 lines) is checked on a lane of its own, so the checks
# of small documents, and the hovers and fixes that wait for them, never queue behind it.
DEFAULT_LARGE_DOCUMENT_BYTES = 256 * 1024


@dataclass
class Settings:
    """Editor-side settings (initializationOptions / didChangeConfiguration), over pyproject."""

    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    target: str | None = None
    unsafe_fixes: bool = False
    debounce_ms: int = DEFAULT_DEBOUNCE_MS
    batch_size: int | None = None
    cores: int | None = None
    lint_timeout_ms: int = DEFAULT_LINT_TIMEOUT_MS
    log_level: str = "warning"  # window/logMessage from this level up
    large_document_bytes: int = DEFAULT_LARGE_DOCUMENT_BYTES

    @classmethod
    def from_client(cls, raw: Any) -> Settings:
        """Accepts ``{"kerasfit": {...}}`` or the inner table; camelCase or kebab-case keys."""
        if not isinstance(raw, dict):
            return cls()
        if isinstance(raw.get("kerasfit"), dict):
            raw = raw["kerasfit"]
        norm = {k.replace("-", "").replace("_", "").lower(): v for k, v in raw.items()}

        def codes(key: str) -> list[str] | None:
            v = norm.get(key)
            if v is None:
                return None
            if isinstance(v, str):
                v = [x for x in v.replace(",", " ").split()]
            return [str(x) for x in v]

        def pos_int(key: str) -> int | None:
            v = norm.get(key)
            return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None

        debounce = norm.get("debouncems")
        return cls(
            select=codes("select"),
            extend_select=codes("extendselect") or [],
            ignore=codes("ignore") or [],
            target=str(norm["target"]) if norm.get("target") else None,
            unsafe_fixes=bool(norm.get("unsafefixes", False)),
            debounce_ms=int(debounce) if isinstance(debounce, (int, float)) and debounce >= 0 else DEFAULT_DEBOUNCE_MS,
            batch_size=pos_int("batchsize"),
            cores=pos_int("cores"),
            lint_timeout_ms=pos_int("linttimeoutms") or DEFAULT_LINT_TIMEOUT_MS,
            log_level=str(norm.get("loglevel", "warning")).lower(),
            large_document_bytes=pos_int("largedocumentbytes") or DEFAULT_LARGE_DOCUMENT_BYTES,
        )

    def check_options(self) -> CheckOptions:
        return CheckOptions(
            selection=Selection(select=self.select, extend_select=self.extend_select, ignore=self.ignore),
            target=self.target,
            unsafe_fixes=self.unsafe_fixes,
            use_cache=False,
            batch_size=self.batch_size,
            cores=self.cores,
        )
