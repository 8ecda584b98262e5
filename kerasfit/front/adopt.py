"""``check --add-noqa`` and ``check --write-baseline``: the two ways to turn kerasfit on
in a codebase that already has findings. Each returns the exit code and what to print
(the CLI prints it), after a check has run."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..project.check import RunResult, checked_trees
from ..project.baseline import render
from ..project.config import ConfigError
from ..project.noqa import add_noqa
from ..project.writeback import write_output
from ..core.types import FileResult


def add_noqa_comments(result: RunResult, paths: Sequence[Path]) -> tuple[int, str]:
    """Comment the findings that fail the run (info ones, which do not, are left alone
    unless ``--fail-on info``); exit 1 while some finding could not get a comment."""
    failing = [FileResult(f.filename, f.failing) for f in result.files]
    out = add_noqa(failing, checked_trees(paths))
    lines = [f"{d.filename}:{'cell ' + str(d.cell) + ':' if d.cell is not None else ''}{d.row}:{d.column + 1}: "
             f"{d.code} left without a noqa comment: {why}" for d, why in out.left]
    lines += [f"error: {e}" for e in out.errors]
    lines += [f"error: {f.error}" for f in result.files if f.error]
    lines.append(f"Added a noqa comment for {out.added} finding(s) in {out.files} file(s).")
    if out.left:
        lines.append(f"{len(out.left)} finding(s) left without one (they still fail the check).")
    if result.accepted:
        lines.append(f"{result.accepted} finding(s) accepted by the baseline were left as they are.")
    failed = out.left or out.errors or any(f.error for f in result.files)
    return (1 if failed else 0), "\n".join(lines)


def record_baseline(result: RunResult, path: Path) -> tuple[int, str]:
    """Write every finding of the run to ``path``; exit 2 when it cannot be written (it is
    not a regular file, or it is one of the files the run checked)."""
    text, n = render(path, result.files)
    problem = write_output(path, text.encode("utf-8"), [f.filename for f in result.files])
    if problem is not None:
        raise ConfigError(f"--write-baseline {problem}")
    files = sum(1 for f in result.files if f.diagnostics)
    lines = [f"error: {f.error}" for f in result.files if f.error]
    lines.append(f"Wrote {n} finding(s) in {files} file(s) to {path}; `--baseline {path}` "
                 f"(or baseline = \"{path.name}\" in [tool.kerasfit] beside it) accepts them.")
    return (1 if any(f.error for f in result.files) else 0), "\n".join(lines)
