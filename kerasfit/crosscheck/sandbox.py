"""Run the build child contained: a time limit, a memory limit, and no survivors.

User code runs in the child, and user code can fork, daemonize, ``setsid()`` out of the
process group, keep our stderr pipe open, write gigabytes of output or allocate without
bound. So the child is not started by the caller directly but by a small *keeper*
(``python -m kerasfit.crosscheck.sandbox``, stdlib only, never runs user code):

- the keeper is a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``): every orphaned
  descendant of the child, a double-forked or ``setsid`` daemon included, is re-parented
  to the keeper instead of init, so the keeper can always find and end all of them;
- it starts the child in its own session and process group with ``RLIMIT_AS`` set;
- it waits for the *child's exit* (not for EOF on a pipe a grandchild may hold), kills
  every remaining descendant (at the time limit, the child too) and writes a status file;
- it notices when the caller dies (its parent changes) and cleans up the same way.

The caller reads the shared stderr pipe incrementally, keeping only a tail, and waits for
the keeper's exit, never for EOF. Without ``/proc`` or ``prctl`` (not Linux) the keeper
falls back to killing the child's process group.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Outcome", "describe_error", "describe_exit", "run_contained"]

STDERR_TAIL = 64 * 1024
# The keeper has its own deadline; the caller only steps in if the keeper itself is stuck.
_BACKSTOP = 20.0
_POLL = 0.02
_PR_SET_CHILD_SUBREAPER = 36


@dataclass
class Outcome:
    returncode: int | None  # the child's status (negative: killed by that signal); None if timed out
    timed_out: bool
    stderr: str  # the last STDERR_TAIL bytes the child (and its descendants) wrote
    leftovers: int  # descendants still alive when the child was done, ended by the keeper


def run_contained(cmd: list[str], *, env: dict[str, str], timeout: float,
                  memory_limit: int | None, workdir: str | Path) -> Outcome:
    """Run ``cmd`` under a keeper; ``memory_limit`` is the address space in bytes (None: none)."""
    status = Path(workdir) / "keeper.json"
    read_fd, write_fd = os.pipe()
    try:
        keeper = subprocess.Popen(
            [sys.executable, "-m", "kerasfit.crosscheck.sandbox", str(status), repr(float(timeout)),
             str(memory_limit or 0), str(os.getpid()), "--", *cmd],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=write_fd, env=env,
            start_new_session=True,
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    tail = bytearray()
    try:
        _pump(keeper, read_fd, tail, time.monotonic() + timeout + _BACKSTOP)
    finally:
        if keeper.poll() is None:  # interrupted: SIGTERM makes the keeper end the child's tree
            keeper.terminate()
            try:
                keeper.wait(5)
            except subprocess.TimeoutExpired:
                keeper.kill()
                keeper.wait()
        os.close(read_fd)
    text = tail.decode("utf-8", errors="replace")
    try:
        data = json.loads(status.read_text())
    except (OSError, ValueError):
        # The keeper itself was killed (backstop) or crashed: say so, and what it printed.
        return Outcome(None, keeper.returncode == -signal.SIGKILL, text, 0)
    return Outcome(data["returncode"], data["timed_out"], text, data["leftovers"])


def _pump(keeper: subprocess.Popen[bytes], fd: int, tail: bytearray, backstop: float) -> None:
    """Keep the stderr tail until the keeper exits; never wait for EOF."""
    os.set_blocking(fd, False)
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    eof = False
    while keeper.poll() is None:
        if time.monotonic() > backstop:
            keeper.kill()
            keeper.wait()
            break
        if eof:
            try:
                keeper.wait(0.1)
            except subprocess.TimeoutExpired:
                pass
        elif poller.poll(100):
            eof = _read_into(fd, tail) is None
    # What is already in the pipe; a writer that outlived the keeper cannot hold us here.
    for _ in range(64):
        if not _read_into(fd, tail):
            break


def _read_into(fd: int, tail: bytearray) -> int | None:
    """Append what can be read now to the tail: the byte count (0: nothing yet), None at EOF."""
    try:
        chunk = os.read(fd, 1 << 16)
    except BlockingIOError:
        return 0
    if not chunk:
        return None
    tail += chunk
    if len(tail) > STDERR_TAIL:
        del tail[: len(tail) - STDERR_TAIL]
    return len(chunk)


# ---------------------------------------------------------------- the reason, in one line

# An allocation refused under RLIMIT_AS, as Python, C++ and TensorFlow report it.
_OUT_OF_MEMORY = re.compile(
    r"MemoryError|std::bad_alloc|Cannot allocate memory|ResourceExhausted|\bOOM\b|out of memory",
    re.I)
# The child's last phase marker (kerasfit.crosscheck.child._phase) -> when it stopped.
_PHASES = {"tensorflow": "while importing TensorFlow", "import": "at import, before building",
           "build": "while building the model"}


def _memory_reason(limit_mib: int) -> str:
    return (f"killed: memory limit ({limit_mib} MiB of address space; raise memory-limit "
            "in [tool.kerasfit.build])")


def describe_error(error: str, limit_mib: int | None) -> str:
    """The child's own one-line error, naming the memory limit when that is what it hit."""
    if limit_mib and _OUT_OF_MEMORY.search(error):
        return f"{_memory_reason(limit_mib)}: {error}"
    return error


def describe_exit(outcome: Outcome, result_path: str | Path, limit_mib: int | None) -> str:
    """One line for a child that ended without writing its result."""
    try:
        phase = Path(f"{result_path}.phase").read_text().strip()
    except OSError:
        phase = ""
    when = _PHASES.get(phase, "before starting")
    code = outcome.returncode
    lines = [ln.strip() for ln in outcome.stderr.splitlines() if ln.strip()]
    if code is None:
        return f"the build process was stopped {when} (its supervisor failed)"
    if limit_mib and code != 0 and any(_OUT_OF_MEMORY.search(ln) for ln in lines[-20:]):
        return f"{_memory_reason(limit_mib)}, {when}"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        if -code == signal.SIGKILL:
            return f"the build process was killed ({name}; out of memory?) {when}"
        return f"the build process crashed ({name}) {when}"
    # os._exit() in user code skips every handler: the phase is the reason, not the log's tail
    reason = f"the build process exited with status {code} {when}"
    if code != 0 and lines:
        reason += f": {lines[-1][:300]}"
    return reason


# ---------------------------------------------------------------- the keeper


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _children_map() -> dict[int, list[int]] | None:
    """ppid -> live (non-zombie) pids, from /proc; None without /proc."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    out: dict[int, list[int]] = {}
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile
        # the command name may hold spaces and parentheses: fields start after the last ')'
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) < 2 or fields[0] == b"Z":
            continue
        out.setdefault(int(fields[1]), []).append(int(entry))
    return out


def _descendants(root: int) -> list[int] | None:
    children = _children_map()
    if children is None:
        return None
    found, stack = [], [root]
    while stack:
        for pid in children.get(stack.pop(), ()):
            found.append(pid)
            stack.append(pid)
    return found


def _reap() -> dict[int, int]:
    """Collect every exited child (adopted orphans too): pid -> status."""
    done: dict[int, int] = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return done
        if pid == 0:
            return done
        done[pid] = status


def _end_all(child_pgid: int) -> set[int]:
    """SIGKILL every descendant of this process until none is left; the pids ended."""
    ended: set[int] = set()
    for _ in range(200):  # each round kills all that exist; only a fork race needs another
        pids = _descendants(os.getpid())
        if pids is None:  # no /proc: the process group is the best we can do
            try:
                os.killpg(child_pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            return ended
        if not pids:
            return ended
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                ended.add(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.005)
        _reap()
    return ended


def _keeper(argv: list[str]) -> int:
    status_path, timeout, limit, caller = argv[0], float(argv[1]), int(argv[2]), int(argv[3])
    cmd = argv[5:]
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    # (not PR_SET_PDEATHSIG: that fires when the *thread* that started us exits)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)

    def limit_memory() -> None:
        if limit:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             start_new_session=True, preexec_fn=limit_memory)
    deadline = time.monotonic() + timeout
    returncode = None
    while returncode is None:
        reaped = _reap()
        if child.pid in reaped:
            returncode = os.waitstatus_to_exitcode(reaped[child.pid])
            break
        if stop or time.monotonic() > deadline or os.getppid() != caller:
            break
        time.sleep(_POLL)
    child.returncode = returncode if returncode is not None else -signal.SIGKILL  # no re-wait
    ended = _end_all(child.pid)
    ended.discard(child.pid)
    _reap()
    tmp = f"{status_path}.tmp"
    with open(tmp, "w") as f:
        json.dump({"returncode": returncode,
                   "timed_out": returncode is None and not stop and os.getppid() == caller,
                   "leftovers": len(ended)}, f)
    os.replace(tmp, status_path)
    return 0


if __name__ == "__main__":
    sys.exit(_keeper(sys.argv[1:]))
