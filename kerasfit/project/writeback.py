"""Writing fixed files back: one transaction per file.

`--fix` reads every file, checks it, and writes at the end. Between the read and the
write an editor may save, `git checkout` may switch the file, or it may be deleted;
and the file may be owned by someone else, hard-linked, or setuid. The write keeps
all of that: it happens only if the file is still exactly what was read, it keeps
the inode's owner, group, mode and links, and it never creates a file. A write that
fails (a full disk) leaves the file as it was read, and a symbolic link is written
through only into the directories the run was asked to check.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

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


def write_fixed(path: Path, text: str, snap: Snapshot | None, trees: Sequence[Path] = ()) -> str | None:
    """Write ``text`` over ``path`` if it still holds ``snap``; None, or why not (one line).

    ``trees``: real directories the file must resolve into (a symbolic link a checkout
    carries must not make --fix write elsewhere); empty, anywhere."""
    real = Path(os.path.realpath(path))
    if trees and not any(real.is_relative_to(t) for t in trees):
        return f"{path}: a symbolic link to {real}, outside the checked tree; not fixed"
    changed = f"{path}: changed while checking, not fixed"
    if snap is None:
        return changed
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return f"{path}: deleted while checking, not fixed"
    except OSError as exc:
        return f"{path}: cannot write fixes: {exc.strerror or exc}"
    if not stat.S_ISREG(st.st_mode) or not snap.same_file(st) or _read(real) != snap.data:
        return changed
    new = text.encode("utf-8")
    try:
        if st.st_nlink > 1:
            # A new inode would split the links (the other names keep the old text).
            return _in_place(real, new, snap, changed, path)
        return _replace(real, new, snap, st, changed, path)
    except OSError as exc:  # nothing was changed, or the original bytes were put back
        return f"{path}: cannot write fixes: {exc.strerror or exc}; left as it was, not fixed"


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _replace(real: Path, new: bytes, snap: Snapshot, st: os.stat_result, changed: str, path: Path) -> str | None:
    """Write a temporary file next to it with the same owner, group and mode, then
    rename it over the original (a crash leaves the old or the new text, never half)."""
    _remove_stale_temps(real)
    import tempfile  # here: only a fix pays for its import

    fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.{os.getpid()}.", suffix=TMP_SUFFIX, dir=real.parent)
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
            return _in_place(real, new, snap, changed, path)
        # after fchown (which clears setuid/setgid); the owner is the same, so the
        # bits are carried onto the same owner's file, and never widened
        os.fchmod(fd, stat.S_IMODE(st.st_mode))
        with os.fdopen(fd, "wb") as f:
            fd = -1
            f.write(new)
            f.flush()
            os.fsync(f.fileno())
        # last look right before the rename: still the file that was read?
        now = stat_or_none(real)
        if now is None:
            os.unlink(tmp)
            return changed.replace("changed", "deleted")
        if not snap.same_file(now) or _read(real) != snap.data:
            os.unlink(tmp)
            return changed
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


def _in_place(real: Path, new: bytes, snap: Snapshot, changed: str, shown: Path) -> str | None:
    """Rewrite the existing inode (keeps owner, group, mode and every hard link).

    One inode cannot be swapped atomically, so: the room for a longer text is reserved
    before a byte changes (a full disk fails here, file untouched), and a write that
    fails anyway puts the original bytes back from memory, over blocks the file already
    holds. What is left is a SIGKILL or power loss in the middle of the write (README)."""
    try:
        fd = os.open(real, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))  # never O_CREAT
    except FileNotFoundError:
        return changed.replace("changed", "deleted")
    except PermissionError:
        return f"{real}: not writable, fixes not written"
    try:
        st = os.fstat(fd)
        if not snap.same_file(st) or _read_fd(fd, st.st_size + 1) != snap.data:
            return changed
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
            return (f"{shown}: cannot write fixes: {exc.strerror or exc}, and putting the original back "
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
