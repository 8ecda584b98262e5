"""Which files decide a file's tree-wide answers: a scan of the tree's bytes, no parse.

A function of file F is reached (from model code, from a Dataset method) only along call
edges, and an edge into F from another file G needs G's names to resolve to F: an import of
F spells F's module name (its stem: the last part of every import path of it), and a
re-export of F is by a file that spells it, which G spells in turn. So F's answers rest on F,
the files that spell its name, the files that spell theirs, and so on; and whether another
file imports F, on the files that spell F's name. A scan of each file's bytes for module
names tells which, over-approximated (a name in a string or a comment counts too); where it
cannot tell, any file may import F (None in TreeScan.importers). Used by
:class:`kerasfit.semantic.index.ProjectIndex`.
"""

from __future__ import annotations

import hashlib
import io
import os
import tokenize
import unicodedata
from pathlib import Path
from typing import Callable, Iterable, NamedTuple

from ..core.sourcefile import DEFAULT_MAX_FILE_SIZE, over_limit, read_regular
from ..core.symbols import POLICY_SETTERS

# a file hashed for the cache (file_digest) is read up to this size; a larger one has no
# hash, so a result resting on it is checked again
_DIGEST_LIMIT = 64 * DEFAULT_MAX_FILE_SIZE


def digest(data: bytes) -> str:
    """The content hash the project index keys files by."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def file_digest(path: str | os.PathLike[str]) -> str | None:
    """Content hash of a file as the index records it (None when unreadable, not a
    regular file, or too large to hash)."""
    try:
        return digest(read_regular(path, _DIGEST_LIMIT))
    except OSError:
        return None


class Bounds:
    """Which files the project index reads, and how much of each: a file's text only when
    it is a regular file (never a FIFO or a device), within its limit (core.sourcefile's
    measure), not excluded, and, when the file is a symbolic link, only into the checked
    tree. ``limit(path)``: the cost a file may have, None for an excluded one;
    ``skip_dir(path)``: a directory the tree's listing does not enter. The project layer
    gives both from the configuration (excludes, max-file-size); by default every file
    has the default limit and every directory but a ``.venv`` is entered. ``roots``: the
    paths the check was given (files or directories), whose trees a link may lead into."""

    def __init__(self, limit: Callable[[str], int | None] | None = None,
                 skip_dir: Callable[[str], bool] | None = None, roots: Iterable[Path] = ()) -> None:
        self.limit: Callable[[str], int | None] = limit or (lambda path: DEFAULT_MAX_FILE_SIZE)
        self.skip_dir: Callable[[str], bool] = skip_dir or (lambda path: os.path.basename(path) == ".venv")
        # real directories a link may lead into (the checked trees: of an index rooted
        # nowhere too, which reads what the check of the tree would)
        resolved = [Path(r).resolve() for r in roots]
        self.trees: tuple[str, ...] = tuple(str(r if os.path.isdir(r) else r.parent) for r in resolved)

    def read(self, path: str) -> bytes | None:
        limit = self.limit(path)
        if limit is None:
            return None
        if os.path.islink(path):
            real = os.path.realpath(path)
            if not any(real.startswith(t + os.sep) for t in self.trees):
                return None  # a link out of the checked tree
        try:
            data = read_regular(path, limit)
        except OSError:
            return None
        return data if over_limit(data, limit) is None else None


# bytes that cannot be in an ASCII identifier become spaces; a split then gives every
# identifier-like run (non-ASCII letters split a name: more runs, never fewer)
_NOT_NAME = bytes(c if chr(c).isascii() and (chr(c).isalnum() or c == 0x5F) else 0x20 for c in range(256))
_POLICY_SETTERS = frozenset(n.encode() for n in POLICY_SETTERS)
_OUTSIDE_BUDGET = 2000  # directories walked / files read beside the tree, at most


class TreeScan(NamedTuple):
    """What reading (not parsing) every file of the tree tells."""

    files: tuple[str, ...]  # the tree's files, once each, in the order of reach_files
    # the other files that may import it (None: any may), for the tree's files and the files
    # outside it that may re-export one to it; empty when the scan cannot tell (then the
    # files are not read: every answer is the whole tree's)
    importers: dict[str, frozenset[str] | None]
    digests: dict[str, str]  # path -> file_digest, for every readable file of the tree read
    policy_files: tuple[str, ...]  # the files that spell a mixed-precision policy setter


def scan_tree(roots: list[Path], files: Iterable[str], bounds: Bounds) -> TreeScan:
    """The tree's :class:`TreeScan` (``roots`` resolved, ``files`` those of ``reach_files``;
    files read and directories entered within ``bounds``)."""
    paths = tuple(dict.fromkeys(os.path.abspath(f) for f in files))
    bounded, outside = _outside_importers(roots, set(paths), bounds)
    if not bounded:
        return TreeScan(paths, {}, {}, ())
    every = paths + tuple(outside)
    # where the scan can tell: below a root whose importers it reads
    told = tuple(str(r) + os.sep for r in bounded)
    in_tree = set(paths)
    names = {f: _spelled_as(f) for f in every}
    wanted = {n.lower().encode() for n in names.values() if n} | _POLICY_SETTERS
    digests: dict[str, str] = {}
    holders: dict[bytes, list[str]] = {}
    policy: list[str] = []
    for i, f in enumerate(every):
        data = bounds.read(f)
        if data is None:
            continue
        spelled = wanted.intersection(_names_in(data))
        for n in spelled:
            holders.setdefault(n, []).append(f)
        if i < len(paths):
            digests[f] = digest(data)
            if not spelled.isdisjoint(_POLICY_SETTERS):
                policy.append(f)
    importers: dict[str, frozenset[str] | None] = {}
    for f in every:
        name = names[f]
        if name is None or (f in in_tree and not f.startswith(told)):
            importers[f] = None
        else:
            importers[f] = frozenset(g for g in holders.get(name.lower().encode(), ()) if g != f) if name else frozenset()
    return TreeScan(paths, importers, digests, tuple(policy))


def _names_in(data: bytes) -> list[bytes]:
    """Every identifier-like run of a file's bytes, and where it has non-ASCII ones, of its
    text as Python reads names (NFKC: ``ｂｏｘｅｓ`` is ``boxes``); in lower case, as a file
    system that ignores case finds ``Boxes.py`` for ``import boxes``."""
    runs = data.translate(_NOT_NAME).lower().split()
    if not data.isascii():
        try:
            text = data.decode(tokenize.detect_encoding(io.BytesIO(data).readline)[0], "replace")
        except (SyntaxError, LookupError):  # an encoding Python does not know: the file does not compile
            return runs
        if not unicodedata.is_normalized("NFKC", text):
            runs += unicodedata.normalize("NFKC", text).encode("utf-8", "replace").translate(_NOT_NAME).lower().split()
    return runs


def _spelled_as(path: str) -> str | None:
    """The name every import of ``path`` spells: '' when none can import it (not a .py file,
    or not a name), None when one may without spelling any (``from . import x`` resolves to
    a package's ``__init__.py``, or to ``pkg.py`` beside a directory ``pkg``)."""
    if not path.endswith(".py"):
        return ""
    stem = os.path.basename(path)[:-3]
    if stem == "__init__" or os.path.isdir(path[:-3]):
        return None
    if not stem.isidentifier():
        return ""
    return stem if stem.isascii() else None  # (a non-ASCII name: the scan splits it)


def _outside_importers(roots: list[Path], tree: set[str], bounds: Bounds) -> tuple[list[Path], list[str]]:
    """The roots whose files' importers a scan can tell, and the ``.py`` files outside the
    tree that may import a file of those (a re-export the tree may import in turn). A root
    is left out when the files that may import its files are too many to read.

    An import resolves against directories above the importing file, down a path of names.
    So a file imports into a root only from below the nearest directory above the root (or
    the root itself) that is not named like a module, and a file below it is imported only
    from below it: every file of a chain that ends in the tree lies there. (The listing of
    the tree enters no linked directory: a link there leaves the scan unable to tell.)"""
    bounded: list[Path] = []
    found: list[str] = []
    for r in roots:
        if not r.is_dir():
            continue  # a file given alone: its neighbours, which may import it, are not read
        top = r
        while top.name.isidentifier():
            top = top.parent
        if top.parent == top and top != r:
            continue  # named like a module up to / : any file may be on a chain
        beside = _beside(r, top, tree, bounds)
        if beside is not None:
            bounded.append(r)
            found.extend(beside)
    return bounded, list(dict.fromkeys(found))


def _beside(root: Path, top: Path, tree: set[str], bounds: Bounds) -> list[str] | None:
    """The ``.py`` files below ``top`` outside the tree; None for a link in ``root`` or
    beside it (the tree's listing does not enter one) or too many to read."""
    found: list[str] = []
    walked = 0

    def unlisted(exc: OSError) -> None:
        raise exc  # a directory that cannot be listed may hold an importer

    try:
        for d, dirs, files in os.walk(top, onerror=unlisted):
            inside = d == str(root) or d.startswith(str(root) + os.sep)
            # beside the tree, a directory not named like a module is entered by no import;
            # in it, a file of the tree below it may import from it
            dirs[:] = [x for x in dirs if (inside or x.isidentifier()) and not bounds.skip_dir(os.path.join(d, x))]
            if any(os.path.islink(os.path.join(d, x)) for x in dirs):
                return None
            if not inside:
                walked += 1
                found.extend(p for p in (os.path.join(d, f) for f in files if f.endswith(".py")) if p not in tree)
                if walked > _OUTSIDE_BUDGET or len(found) > _OUTSIDE_BUDGET:
                    return None
    except OSError:
        return None
    return found
