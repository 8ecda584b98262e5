"""The cache directory's files, never reached through a symbolic link.

A repository can commit ``.kerasfit_cache`` or a file in it as a symlink. Following it
would let a plain ``kerasfit check`` (which writes its cache) replace or create any file
the user can write. So the directory is opened with O_NOFOLLOW, every file in it is
opened relative to that directory descriptor with O_NOFOLLOW, and a temporary is created
O_EXCL under a random name in the same real directory before it is renamed into place.
A link where a cache directory or file should be turns the cache off for the run, with
one warning; checking goes on uncached.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from .interrupts import writing

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_LINK_ERRNOS = (errno.ELOOP, errno.ENOTDIR, errno.EMLINK)  # what O_NOFOLLOW on a link gives


class CacheDir:
    """``root`` (and ``parts`` below it): where the cache files live."""

    def __init__(self, root: Path, parts: tuple[str, ...] = ()) -> None:
        self.root = root
        self.parts = parts
        self.warnings: list[str] = []  # at most one: the first link found
        self.disabled = False

    @property
    def path(self) -> Path:
        return self.root.joinpath(*self.parts)

    def child(self, name: str) -> CacheDir:
        return CacheDir(self.root, (*self.parts, name))

    def _refuse(self, where: Path) -> None:
        if not self.disabled:
            self.warnings.append(f"{where}: is a symbolic link, not used; checking without the cache")
        self.disabled = True

    def _open_dir(self, create: bool) -> tuple[int | None, bool]:
        """A descriptor of the real cache directory, or None (no cache this time); and
        whether this call created the directory."""
        if self.disabled:
            return None, False
        fd: int | None = None
        try:
            if create:
                # the root's parents come from the user (or a config checked to stay in
                # its project); only the cache's own components must not be links
                self.root.parent.mkdir(parents=True, exist_ok=True)
            where = self.root
            fd, made = self._open_component(None, str(self.root), create, where)
            for part in self.parts:
                where = where / part
                if fd is None:
                    return None, False
                nxt, made = self._open_component(fd, part, create, where)
                os.close(fd)
                fd = nxt
            return fd, made
        except OSError:
            if fd is not None:
                os.close(fd)
            return None, False

    def _open_component(self, dir_fd: int | None, name: str, create: bool, where: Path) -> tuple[int | None, bool]:
        made = False
        if create:
            try:
                os.mkdir(name, 0o777, dir_fd=dir_fd)
                made = True
            except FileExistsError:
                pass  # a directory, a file or a link: the open below tells which
        try:
            return os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=dir_fd), made
        except FileNotFoundError:
            return None, False
        except OSError as exc:
            if exc.errno in _LINK_ERRNOS and _is_link(name, dir_fd):
                self._refuse(where)
            return None, False

    def read(self, name: str) -> bytes | None:
        """The file's bytes; None when absent, not a regular file, or a link."""
        d, _ = self._open_dir(create=False)
        if d is None:
            return None
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC, dir_fd=d)
        except OSError as exc:
            if exc.errno in _LINK_ERRNOS and _is_link(name, d):
                self._refuse(self.path / name)
            return None
        finally:
            os.close(d)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        except OSError:
            return None
        finally:
            os.close(fd)

    def write(self, name: str, data: bytes, gitignore: bool = False) -> bool:
        """Replace ``name`` with ``data`` (readers see the old or the new bytes, never
        half); with ``gitignore``, a directory this call creates for the cache gets a
        ``.gitignore`` of ``*`` (never one that was there: ``cache-dir = "."`` must not
        hide the project's own files from git). False when nothing was written (read-only
        tree, a link in the way)."""
        d, made = self._open_dir(create=True)
        if d is None:
            return False
        gitignore = gitignore and made
        tmp = f".{name}.{os.urandom(8).hex()}.tmp"  # (secrets.token_hex, without importing secrets)
        try:
            with writing():  # a signal meanwhile waits: the temporary is renamed or removed first
                return self._write_in(d, name, tmp, data, gitignore)
        finally:
            os.close(d)

    def _write_in(self, d: int, name: str, tmp: str, data: bytes, gitignore: bool) -> bool:
        try:
            if _is_link(name, d):
                self._refuse(self.path / name)
                return False
            if gitignore and not self._gitignore(d):
                return False
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o666, dir_fd=d)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            # rename replaces a name, never what a link there points to
            os.replace(tmp, name, src_dir_fd=d, dst_dir_fd=d)
            return True
        except OSError:
            try:
                os.unlink(tmp, dir_fd=d)
            except OSError:
                pass
            return False

    def _gitignore(self, d: int) -> bool:
        """Keeps the cache out of commits; False (and the cache off) if a link sits there."""
        try:
            fd = os.open(".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o666, dir_fd=d)
        except FileExistsError:
            if _is_link(".gitignore", d):
                self._refuse(self.path / ".gitignore")
                return False
            return True
        try:
            os.write(fd, b"*\n")
        finally:
            os.close(fd)
        return True


def _is_link(name: str, dir_fd: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def default_cache_dir() -> Path:
    """./.kerasfit_cache, or $KERASFIT_CACHE_DIR (the static and the build caches' root)."""
    env = os.environ.get("KERASFIT_CACHE_DIR")
    return Path(env) if env else Path.cwd() / ".kerasfit_cache"
