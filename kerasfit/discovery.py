"""Which files to check: expand directories, honour excludes, prefilter cheaply."""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

# Bytes that any TF/Keras file must contain somewhere ("keras" covers tf_keras).
PREFILTER_NEEDLES = (b"tensorflow", b"keras")
# Jupyter notebooks: their code cells are checked as one module (kerasfit.notebook).
SUFFIXES = (".py", ".pyi", ".ipynb")


@dataclass(frozen=True)
class Candidate:
    path: Path
    explicit: bool  # named on the command line: checked even if excluded or not *.py


def _excluded(path: Path, patterns: Iterable[str], root: Path | None) -> bool:
    name = path.name
    rel = None
    if root is not None:
        try:
            rel = path.resolve().relative_to(root).as_posix()
        except ValueError:
            rel = None
    for pat in patterns:
        if fnmatch.fnmatch(name, pat):
            return True
        if rel is not None and ("/" in pat or "*" in pat) and (
            fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(rel, pat.rstrip("/") + "/*")
        ):
            return True
    return False


def discover(paths: Iterable[Path], excludes_for, force_exclude: bool = False) -> Iterator[Candidate]:
    """Yield Python files under ``paths``.

    ``excludes_for(directory)`` returns (patterns, config root) for a directory, so nested
    projects honour their own pyproject's ``exclude``.
    """
    seen: set[Path] = set()
    for p in paths:
        if p.is_dir():
            for dirpath, dirnames, filenames in os.walk(p):
                d = Path(dirpath)
                patterns, root = excludes_for(d)
                dirnames[:] = sorted(x for x in dirnames if not _excluded(d / x, patterns, root))
                if _is_virtualenv(d):
                    dirnames[:] = []
                    continue
                for f in sorted(filenames):
                    if not f.endswith(SUFFIXES):
                        continue
                    fp = d / f
                    if _excluded(fp, patterns, root):
                        continue
                    key = fp.resolve()
                    if key not in seen:
                        seen.add(key)
                        yield Candidate(fp, False)
        else:
            if force_exclude:
                patterns, root = excludes_for(p.parent)
                if _excluded(p, patterns, root):
                    continue
            key = p.resolve() if p.exists() else p
            if key not in seen:
                seen.add(key)
                yield Candidate(p, True)


def _is_virtualenv(d: Path) -> bool:
    return (d / "pyvenv.cfg").is_file()


def mentions_tensorflow(data: bytes) -> bool:
    return any(n in data for n in PREFILTER_NEEDLES)
