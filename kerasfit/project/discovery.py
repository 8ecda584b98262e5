"""Which files to check: expand directories, honour excludes, prefilter cheaply."""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

# Bytes that any TF/Keras file must contain somewhere ("keras" covers tf_keras).
PREFILTER_NEEDLES = (b"tensorflow", b"keras", b"tf_slim")
# Jupyter notebooks: their code cells are checked as one module (kerasfit.project.notebook).
SUFFIXES = (".py", ".pyi", ".ipynb")

# directory -> (its exclude patterns, the root they are relative to)
ExcludesFor = Callable[[Path], tuple[Sequence[str], Path | None]]


@dataclass(frozen=True)
class Candidate:
    path: Path
    explicit: bool  # named on the command line: checked even if excluded or not *.py
    error: str | None = None  # cannot be checked: one line naming the path


def excluded(path: Path, patterns: Iterable[str], root: Path | None) -> bool:
    name = path.name
    rel = None
    if root is not None:
        try:
            rel = path.resolve().relative_to(root).as_posix()
        except (ValueError, OSError, RuntimeError):  # RuntimeError: a symlink loop
            rel = None
    for pat in patterns:
        if fnmatch.fnmatch(name, pat):
            return True
        if rel is not None and ("/" in pat or "*" in pat) and (
            fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(rel, pat.rstrip("/") + "/*")
        ):
            return True
    return False


def discover(paths: Iterable[Path], excludes_for: ExcludesFor, force_exclude: bool = False) -> Iterator[Candidate]:
    """Yield Python files under ``paths``.

    ``excludes_for(directory)`` returns (patterns, config root) for a directory, so nested
    projects honour their own pyproject's ``exclude``.
    """
    seen: set[Path] = set()
    for p in paths:
        problem = _unreachable(p)
        if problem is not None:
            yield Candidate(p, True, problem)
            continue
        if p.is_dir():
            failed: list[OSError] = []
            for dirpath, dirnames, filenames in os.walk(p, onerror=failed.append):
                yield from _walk_errors(failed)
                d = Path(dirpath)
                try:
                    patterns, root = excludes_for(d)
                except OSError as exc:  # readable but not searchable: no entry can be opened
                    dirnames[:] = []
                    yield Candidate(d, False, f"{d}: cannot search directory: {exc.strerror or exc}, skipped")
                    continue
                dirnames[:] = sorted(x for x in dirnames if not excluded(d / x, patterns, root))
                if is_virtualenv(d):
                    dirnames[:] = []
                    continue
                for f in sorted(filenames):
                    if not f.endswith(SUFFIXES):
                        continue
                    fp = d / f
                    if excluded(fp, patterns, root):
                        continue
                    problem = _not_a_file(fp)
                    if problem is not None:
                        yield Candidate(fp, False, problem)
                        continue
                    key = fp.resolve()
                    if key not in seen:
                        seen.add(key)
                        yield Candidate(fp, False)
            yield from _walk_errors(failed)
        else:
            if force_exclude:
                patterns, root = excludes_for(p.parent)
                if excluded(p, patterns, root):
                    continue
            problem = _not_a_file(p)
            if problem is not None:
                yield Candidate(p, True, problem)
                continue
            key = p.resolve() if p.exists() else p
            if key not in seen:
                seen.add(key)
                yield Candidate(p, True)


def _walk_errors(failed: list[OSError]) -> Iterator[Candidate]:
    """Directories os.walk could not list (it only tells its onerror callback)."""
    while failed:
        exc = failed.pop(0)
        where = Path(exc.filename or "?")
        yield Candidate(where, False, f"{where}: cannot list directory: {exc.strerror or exc}, skipped")


def _unreachable(path: Path) -> str | None:
    """Why a path named on the command line cannot even be looked at, if so (stat needs
    no permission on the file itself: only a directory on the way refuses)."""
    try:
        os.stat(path)
    except PermissionError as exc:
        return f"{path}: cannot search a directory on its path: {exc.strerror or exc}, skipped"
    except OSError:
        return None
    return None


def _not_a_file(path: Path) -> str | None:
    """Why ``path`` cannot be read as a source file without blocking or looping, if so.

    A FIFO named *.py would block the read forever; a device or socket is not source.
    A missing target (dangling link) is left to the reader, which says so."""
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"{path}: symbolic link loop, skipped"
        return None
    mode = st.st_mode
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device" if (stat.S_ISCHR(mode) or stat.S_ISBLK(mode)) else "not a regular file"
    return f"{path}: {kind}, not a source file, skipped"


def is_virtualenv(d: Path) -> bool:
    return (d / "pyvenv.cfg").is_file()


def mentions_tensorflow(data: bytes) -> bool:
    return any(n in data for n in PREFILTER_NEEDLES)
