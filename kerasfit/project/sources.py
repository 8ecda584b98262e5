"""Reading the files a check is given, and what the project index may read of the tree.

Every file is read as a regular file only (a FIFO swapped in after discovery never blocks
the read, a device is never read) and never past its limit: a source file's
``max-file-size``, a notebook's JSON a multiple of it (core.sourcefile).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Sequence

from ..core.sourcefile import DEFAULT_MAX_FILE_SIZE, PER_LINE, Cost, NotRegularFile, TooLarge, read_regular
from ..semantic.index import ProjectIndex
from ..semantic.treescan import Bounds
from .config import ConfigError, over_size_budget
from .discovery import ExcludesFor, excluded, is_virtualenv


class FileReadError(Exception):
    pass


class FileTooLarge(FileReadError):
    """More bytes than the file's limit allows reading (``size``: how many it holds)."""

    def __init__(self, message: str, size: int) -> None:
        super().__init__(message)
        self.size = size


def read_source(path: Path, limit: int | None = None) -> tuple[bytes, str]:
    """The bytes and text of a source file, never more than ``limit`` bytes of it (a
    regular file only: a FIFO swapped in after discovery never blocks the read)."""
    try:
        data = read_regular(path, limit)
    except FileNotFoundError:
        if path.is_symlink():
            raise FileReadError(f"{path}: broken symbolic link (target missing), skipped") from None
        raise FileReadError(f"{path}: no such file") from None
    except TooLarge as exc:
        raise FileTooLarge(f"{path}: {exc.size:,} bytes", exc.size) from None
    except NotRegularFile as exc:
        if exc.kind == "a directory":
            raise FileReadError(f"{path}: is a directory") from None
        raise FileReadError(f"{path}: {exc.kind}, not a source file, skipped") from None
    except OSError as exc:
        raise FileReadError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if b"\x00" in data:
        raise FileReadError(f"{path}: binary file (contains NUL bytes), skipped")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileReadError(f"{path}: not valid UTF-8 (byte {exc.start}), skipped") from None
    return data, text


# A notebook's JSON holds its outputs (images, logs), which are not checked and do not count
# toward max-file-size; reading it is bounded all the same: at most NOTEBOOK_JSON_FACTOR times
# the limit (never less than that many times the default: outputs of 64 MiB are read), each
# JSON array, object and list item counted as _JSON_VALUE bytes (what the smallest one costs
# once read); and each cell counts as a line of code before the JSON is read.
NOTEBOOK_JSON_FACTOR = 32
_JSON_VALUE = 64


def notebook_json_limit(limit: int) -> int:
    return NOTEBOOK_JSON_FACTOR * max(limit, DEFAULT_MAX_FILE_SIZE)


def notebook_over_budget(path: str, data: bytes, limit: int) -> str | None:
    """Why a notebook's file is too large to read as JSON, or None (its cells' source is
    measured once read: :func:`over_size_budget` in ``_run_notebook``)."""
    values = data.count(b"[") + data.count(b"{") + data.count(b",")
    json_cost = len(data) + _JSON_VALUE * values
    if json_cost > notebook_json_limit(limit):
        return (f"{path}: a notebook of {len(data):,} bytes with {values:,} JSON values, counted as {json_cost:,} "
                f"({_JSON_VALUE} a value), over {notebook_json_limit(limit):,} ({NOTEBOOK_JSON_FACTOR} × the larger "
                f"of max-file-size and its default); not checked "
                "(raise it with --max-file-size or [tool.kerasfit] max-file-size)")
    cells = data.count(b'"cell_type"')  # (cannot appear inside a JSON string: its quotes would be escaped)
    return over_size_budget(path, Cost(cells * PER_LINE, cells, 0) if cells * PER_LINE > limit else None, limit)


def index_bounds(roots: Sequence[str | Path], excludes_for: ExcludesFor, limit_for: Callable[[Path], int]) -> Bounds:
    """What the project index of a check of ``roots`` may read: no file the check would
    skip for its excludes (a directory or file named as a root is entered or read, as
    discovery does) and none over its limit (``limit_for``: its max-file-size).
    ``excludes_for``: as for :func:`discover`."""
    files = {os.path.abspath(r) for r in roots if not os.path.isdir(r)}
    tops = {os.path.abspath(r) for r in roots if os.path.isdir(r)}
    skipped: dict[str, bool] = {}

    def skip_dir(d: str) -> bool:
        hit = skipped.get(d)
        if hit is None:
            parent = os.path.dirname(d)
            hit = False
            if d not in tops and parent != d:
                try:
                    patterns, root = excludes_for(Path(parent))
                except (ConfigError, OSError):
                    hit = True  # a directory whose config cannot be read is not read either
                else:
                    if os.path.realpath(d).startswith(str(root) + os.sep):  # (above its root, no exclude reaches)
                        hit = excluded(Path(d), patterns, root) or is_virtualenv(Path(d)) or skip_dir(parent)
            skipped[d] = hit
        return hit

    def limit(path: str) -> int | None:
        p = Path(path)
        if path not in files:
            try:
                patterns, root = excludes_for(p.parent)
            except (ConfigError, OSError):
                return None
            if excluded(p, patterns, root) or skip_dir(str(p.parent)):
                return None
        return limit_for(p)

    return Bounds(limit, skip_dir, [Path(r) for r in roots])


class TreeIndexes:
    """The project index the checks of one tree and its prefilter share (the language server
    keeps one per workspace folder, across checks), reading only what a check of the tree
    would (``bounds``: excludes, max-file-size) and only when asked: it scans the tree and
    computes the tree-wide answers the first time a question needs them."""

    def __init__(self, roots: Sequence[str | Path], bounds: Bounds | None = None) -> None:
        self.tree = ProjectIndex(roots, bounds if bounds is not None else Bounds(roots=[Path(r) for r in roots]))

    @property
    def tree_files(self) -> int:
        """Files of the tree this process scanned for its tree-wide answers (0: none)."""
        return self.tree.scanned_files()
