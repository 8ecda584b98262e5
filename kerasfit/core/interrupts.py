"""Ending on SIGINT, SIGTERM or SIGHUP without leaving a file half written.

Replacing a file by renaming a finished temporary over it is atomic, but rewriting an
inode in place (a hard-linked file, one whose owner a new file could not be given) is not,
and a temporary not yet renamed is litter. A signal's default action in the middle would
leave the new text followed by the old file's tail, or a stray temporary.

So the front ends install Python-level handlers for the three signals (a handler replaces
the default action for the whole process, whichever thread the signal lands on; Python
runs it in the main thread between bytecodes). Outside a write, the handler ends the run:
it raises :class:`Terminated` in the main thread, which unwinds (``finally`` blocks run:
temporaries go, build processes are stopped), and the front end then ends the process by
the same signal (:func:`end_by`), so whoever started it sees the signal's status. During a
write (:func:`writing`) the signal is held until the write has finished, or been undone
after an error, and acted on then. A worker process ends at once by the signal (it writes
nothing). SIGKILL and power loss cannot be caught: README says what they can leave.
"""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator, NoReturn

SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


class Terminated(BaseException):
    """A signal asked the run to end (raised in the main thread, outside any write)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_lock = threading.Lock()
_depth = 0  # writes in progress, in any thread
_held: list[int] = []  # signals that came during one
_mode: str | None = None  # None: not installed; "unwind": raise Terminated; "exit": end at once


def _handler(signum: int, frame: Any) -> None:
    if _depth:
        _held.append(signum)
        return
    if _mode == "exit":
        end_by(signum)
    raise Terminated(signum)


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def install(*, worker: bool = False) -> None:
    """Take over the three signals for this process (from the main thread; elsewhere a
    no-op). ``worker``: end at once by the signal instead of unwinding. A signal the
    process was started with ignored (``nohup``) stays ignored."""
    global _mode
    if not _on_main_thread():
        return
    for s in SIGNALS:
        if signal.getsignal(s) is not signal.SIG_IGN:
            signal.signal(s, _handler)
    _mode = "exit" if worker else "unwind"


def end_by(signum: int) -> NoReturn:
    """End the process by ``signum``'s default action (its parent sees the signal)."""
    signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)  # (not reached: the default action of these three ends the process)


@contextmanager
def writing() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP while the block runs; act on one that came during
    it once the block is done. Where no handlers are installed (kerasfit used as a library)
    the main thread installs them for the block and puts the previous ones back after,
    which then receive the held signal."""
    global _depth
    with _lock:
        _depth += 1
        outermost = _depth == 1
    previous: dict[signal.Signals, Any] = {}
    if outermost and _mode is None and _on_main_thread():
        for s in SIGNALS:
            old = signal.getsignal(s)
            if old is not signal.SIG_IGN and old is not None:  # (None: a handler not set from Python)
                previous[s] = old
                signal.signal(s, _handler)
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            done = _depth == 0
        if done:
            for s, old in previous.items():
                signal.signal(s, old)
            if _held:
                signum = _held[0]
                _held.clear()
                signal.raise_signal(signum)  # now handled as if it came this moment
