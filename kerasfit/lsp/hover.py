"""Hover: the findings on a line, their rule pages, and the rows of a cached build report."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from lsprotocol import types

from ..core.cachefs import default_cache_dir
from ..project.config import cache_dir_of, find_config
from . import edits as E
from .documents import KerasfitServer, log


_REPORTS: dict[str, tuple[tuple[int, int], Any]] = {}


def _build_cache_dir() -> Path:
    """Where `kerasfit report` run from the workspace keeps its builds: the project's
    cache-dir, else $KERASFIT_CACHE_DIR, else .kerasfit_cache (as the command line finds it)."""
    cfg = find_config(Path.cwd())
    configured = cache_dir_of(cfg, trusted=False) if cfg is not None else None
    return configured if configured is not None else default_cache_dir()


def _cached_build_report(path: str, source: str) -> Any:
    """The build cross-check's cached report for this file, when the buffer is what was built.

    Never builds anything (that runs user code); only reads what `kerasfit report` or
    `check --build` left behind.
    """
    try:
        from ..crosscheck.api import cached_report  # defers the build machinery (sandbox, HLO reader, simulator) until a report is asked for
    except (ImportError, AttributeError):
        return None
    try:
        st = os.stat(path)
        if Path(path).read_text(encoding="utf-8") != source:
            return None  # unsaved edits: the report's line numbers may not match the buffer
    except (OSError, UnicodeDecodeError):
        return None
    key = (st.st_mtime_ns, st.st_size)
    hit = _REPORTS.get(path)
    if hit is not None and hit[0] == key:
        return hit[1]
    try:
        report = cached_report(path, _build_cache_dir())
    except Exception as exc:  # never let a report problem break hover
        log.info("cached_report(%s) failed: %s", path, exc)
        report = None
    _REPORTS[path] = (key, report)
    return report


async def hover(ls: KerasfitServer, params: types.HoverParams) -> types.Hover | None:
    view = await ls.view_of(params.text_document.uri)
    if view is None:
        return None
    linted = view.linted
    line = params.position.line
    hits = [(d, l) for _, d, l in view.found if l["range"]["start"]["line"] <= line <= l["range"]["end"]["line"]]
    if not hits:
        return None
    path = ls.path_for(view.key)
    loop = asyncio.get_running_loop()
    report = await loop.run_in_executor(ls.executor, _cached_build_report, path, linted.source)
    build_rows: list[str] = []
    title = ""
    if report is not None:
        # A finding spanning several lines (a multi-line layer call) shows the ops of all of them.
        for row in sorted({r for d, _ in hits for r in range(d.row, d.end_row + 1)}):
            build_rows += [b for b in E.build_lines_for_row(report, row, path) if b not in build_rows]
        target = getattr(report, "target", None)
        step_fit = getattr(report, "step_fit", None)
        title = "cached" + (f", {target}" if target else "") + (
            f", whole-step fit {step_fit:.0%}" if isinstance(step_fit, float) else ""
        )
    docs = {d.code: ls.rule_paragraph(d.code) for d, _ in hits}
    pages = {d.code: l.get("codeDescription", {}).get("href") for d, l in hits}
    value = E.hover_markdown([d for d, _ in hits], docs, build_rows, title, pages)
    first = hits[0][1]["range"]
    rng = types.Range(
        start=types.Position(line=first["start"]["line"], character=first["start"]["character"]),
        end=types.Position(line=first["end"]["line"], character=first["end"]["character"]),
    )
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=value), range=rng)
