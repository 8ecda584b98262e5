"""Writing files: one transaction per file, for everything kerasfit writes.

Fixed sources (``--fix``, notebooks, ``--add-noqa``) and the files a run produces
(``--write-baseline``, ``report --html``) are written one way:

- only over a regular file, or where nothing is: a FIFO, a device, a directory or a
  dangling link named as an output is refused with one line, and so is a file the run
  checks (or a hard link to one): the output would replace the source;
- a fixed source only if it still holds exactly what was read (an editor's save or a
  ``git checkout`` meanwhile wins), and a symbolic link is written through only into the
  directories the run was asked to check; no source file is ever created;
- the inode's owner, group, mode and hard links are kept: a temporary beside the file,
  with the same owner, group and mode, is renamed over it (a crash leaves the old text or
  the new, never half); a hard-linked file, or one whose owner a new file could not be
  given, is rewritten in place, the room for a longer text reserved first and the
  original bytes put back if the write fails;
- SIGINT, SIGTERM and SIGHUP are held while a file is written (core.interrupts): the write
  finishes, or is undone after an error, and its temporary is gone before the process
  ends by the signal. Only a SIGKILL or power loss in the middle of an in-place rewrite
  can leave a file half written (README).
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from ..core.interrupts import writing
from ..core.sourcefile import kind_of, read_regular

TMP_SUFFIX = ".kerasfit-tmp"


@dataclass(frozen=True)
class Snapshot:
    """What a file was when it was read: its bytes and the stat that identifies them."""

    data: bytes
    dev: int
    ino: int
    size: int
    mtime_ns: int

    @classmethod
    def take(cls, before: os.stat_result | None, data: bytes) -> Snapshot | None:
        """``before``: the file's stat taken *before* reading ``data`` (so a change
        between the two shows as a different mtime or size)."""
        if before is None:
            return None
        return cls(data, before.st_dev, before.st_ino, before.st_size, before.st_mtime_ns)

    def same_file(self, st: os.stat_result) -> bool:
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == (self.dev, self.ino, self.size, self.mtime_ns)


def stat_or_none(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class _Say:
    """How one write's refusals read: ``path`` as the user named it, and what did not happen."""

    path: Path
    undone: str  # "not fixed", "not written"
    cannot: str  # "cannot write fixes", "cannot write"
    during: str  # what the file may have changed during: "checking", "writing"

    def changed(self, how: str = "changed") -> str:
        return f"{self.path}: {how} while {self.during}, {self.undone}"


def write_fixed(path: Path, text: str, snap: Snapshot | None, trees: Sequence[Path] = ()) -> str | None:
    """Write ``text`` over ``path`` if it still holds ``snap``; None, or why not (one line).

    ``trees``: real directories the file must resolve into (a symbolic link a checkout
    carries must not make --fix write elsewhere); empty, anywhere."""
    real = Path(os.path.realpath(path))
    if trees and not any(real.is_relative_to(t) for t in trees):
        return f"{path}: a symbolic link to {real}, outside the checked tree; not fixed"
    say = _Say(path, "not fixed", "cannot write fixes", "checking")
    if snap is None:
        return say.changed()
    return _write(real, text.encode("utf-8"), snap, say)


def write_output(path: Path, data: bytes, checked: Iterable[str | os.PathLike[str]] = ()) -> str | None:
    """Write a file the run produces (a baseline, a page) at ``path``; None, or why not.

    Only over a regular file (keeping its owner, mode and links) or where nothing is (a new
    file, with the umask's mode), never over one of ``checked`` (the files the run checks)."""
    say = _Say(path, "not written", "cannot write", "writing")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.lexists(path):
            return f"{path}: a symbolic link to a missing file; {say.undone}"
        return _create(Path(os.path.abspath(path)), data, say)
    except OSError as exc:
        return f"{path}: {say.cannot}: {exc.strerror or exc}; {say.undone}"
    if not stat.S_ISREG(st.st_mode):
        return f"{path}: {kind_of(st.st_mode)}, not a regular file; {say.undone}"
    for c in checked:
        other = stat_or_none(Path(c))
        if other is not None and (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            return f"{path}: one of the files this run checks ({c}); {say.undone}"
    real = Path(os.path.realpath(path))
    try:
        old = read_regular(real)
    except OSError as exc:
        return f"{path}: {say.cannot}: {exc.strerror or exc}; {say.undone}"
    snap = Snapshot.take(st, old)
    assert snap is not None
    return _write(real, data, snap, say)


def _write(real: Path, new: bytes, snap: Snapshot, say: _Say) -> str | None:
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return say.changed("deleted")
    except OSError as exc:
        return f"{say.path}: {say.cannot}: {exc.strerror or exc}; {say.undone}"
    if not stat.S_ISREG(st.st_mode) or not snap.same_file(st) or _read(real) != snap.data:
        return say.changed()
    try:
        with writing():
            if st.st_nlink > 1:
                # A new inode would split the links (the other names keep the old text).
                return _in_place(real, new, snap, say)
            return _replace(real, new, snap, st, say)
    except OSError as exc:  # nothing was changed, or the original bytes were put back
        return f"{say.path}: {say.cannot}: {exc.strerror or exc}; left as it was, {say.undone}"


def _create(path: Path, data: bytes, say: _Say) -> str | None:
    """A new file at ``path`` (absent now) with ``data`` and the umask's mode, complete
    or not there at all; one created meanwhile by someone else is left alone."""
    try:
        with writing():
            fd, tmp = _temp(path)
            try:
                try:
                    _write_all(fd, data)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                try:
                    os.link(tmp, path)  # never replaces what another process created meanwhile
                except FileExistsError:
                    return f"{say.path}: created by another program while writing; {say.undone}"
                except OSError as exc:
                    if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                        raise
                    os.replace(tmp, path)  # a file system without hard links
            finally:
                try:
                    os.unlink(tmp)
                except FileNotFoundError:
                    pass
    except OSError as exc:
        return f"{say.path}: {say.cannot}: {exc.strerror or exc}; {say.undone}"
    return None


def _temp(beside: Path) -> tuple[int, str]:
    """A new, exclusive temporary next to ``beside`` (mode 0666 less the umask), named so a
    later run can tell it is a dead process's (``_remove_stale_temps``)."""
    for _ in range(100):
        name = beside.parent / f".{beside.name}.{os.getpid()}.{os.urandom(6).hex()}{TMP_SUFFIX}"
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
            return os.open(name, flags, 0o666), str(name)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(beside))


def _read(path: Path) -> bytes | None:
    try:
        return read_regular(path)
    except OSError:
        return None


def _replace(real: Path, new: bytes, snap: Snapshot, st: os.stat_result, say: _Say) -> str | None:
    """Write a temporary file next to it with the same owner, group and mode, then
    rename it over the original (a crash leaves the old or the new text, never half)."""
    _remove_stale_temps(real)
    fd, tmp = _temp(real)
    try:
        try:
            os.fchown(fd, st.st_uid, st.st_gid)
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EINVAL):
                raise
            # Not allowed to give the new file the old owner/group: write into the
            # existing inode instead, which keeps them.
            os.close(fd)
            fd = -1
            os.unlink(tmp)
            return _in_place(real, new, snap, say)
        # after fchown (which clears setuid/setgid); the owner is the same, so the
        # bits are carried onto the same owner's file, and never widened
        os.fchmod(fd, stat.S_IMODE(st.st_mode))
        _write_all(fd, new)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        # last look right before the rename: still the file that was read?
        now = stat_or_none(real)
        if now is None:
            os.unlink(tmp)
            return say.changed("deleted")
        if not snap.same_file(now) or _read(real) != snap.data:
            os.unlink(tmp)
            return say.changed()
        os.replace(tmp, real)
        return None
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _in_place(real: Path, new: bytes, snap: Snapshot, say: _Say) -> str | None:
    """Rewrite the existing inode (keeps owner, group, mode and every hard link).

    One inode cannot be swapped atomically, so: the room for a longer text is reserved
    before a byte changes (a full disk fails here, file untouched), and a write that
    fails anyway puts the original bytes back from memory, over blocks the file already
    holds; a signal waits for the end (the caller holds them). What is left is a
    SIGKILL or power loss in the middle of the write (README)."""
    try:
        fd = os.open(real, os.O_RDWR | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))  # never O_CREAT
    except FileNotFoundError:
        return say.changed("deleted")
    except PermissionError:
        return f"{say.path}: not writable, {say.undone}"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not snap.same_file(st) or _read_fd(fd, st.st_size + 1) != snap.data:
            return say.changed()
        old = snap.data
        if len(new) > len(old):
            try:
                _reserve(fd, len(new))
            except OSError:
                if os.fstat(fd).st_size != len(old):  # a reservation that failed half way
                    os.ftruncate(fd, len(old))
                raise
        try:
            _write_all(fd, new)
            if len(new) < len(old):
                os.ftruncate(fd, len(new))
            os.fsync(fd)
        except BaseException as exc:
            lost = _restore(fd, old)
            if lost is None or not isinstance(exc, OSError):
                raise  # the file holds what was read again
            return (f"{say.path}: {say.cannot}: {exc.strerror or exc}, and putting the original back "
                    f"failed too ({lost}): the file may be damaged")
        return None
    finally:
        os.close(fd)


def _reserve(fd: int, size: int) -> None:
    """Make the file ``size`` bytes long with its blocks allocated (ENOSPC now, not mid-write)."""
    try:
        os.posix_fallocate(fd, 0, size)
    except AttributeError:  # no posix_fallocate (macOS): at least the length
        os.ftruncate(fd, size)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            raise
        os.ftruncate(fd, size)  # a filesystem that cannot allocate ahead: the length only


def _write_all(fd: int, data: bytes) -> None:
    """``data`` from offset 0 (os.write may write less than asked)."""
    os.lseek(fd, 0, os.SEEK_SET)
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        view = view[n:]


def _restore(fd: int, old: bytes) -> str | None:
    """Put the bytes that were read back into the inode; None, or why that failed too."""
    try:
        _write_all(fd, old)
        os.ftruncate(fd, len(old))
        os.fsync(fd)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _read_fd(fd: int, limit: int) -> bytes:
    chunks = []
    total = 0
    while total < limit:
        b = os.read(fd, min(1 << 20, limit - total))
        if not b:
            break
        chunks.append(b)
        total += len(b)
    return b"".join(chunks)


def _remove_stale_temps(real: Path) -> None:
    """Delete temporaries for this file left by a kerasfit that was killed mid-write
    (named ``.<file>.<pid>.<random>.kerasfit-tmp``; only those whose process is gone)."""
    prefix = f".{real.name}."
    try:
        names = os.listdir(real.parent)
    except OSError:
        return
    for name in names:
        if not (name.startswith(prefix) and name.endswith(TMP_SUFFIX)):
            continue
        pid = name[len(prefix) :].split(".", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        try:
            os.unlink(real.parent / name)
        except OSError:
            pass


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True
