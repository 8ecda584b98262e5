"""Run the build child contained: a time limit, a memory limit, and no survivors.

User code runs in the child, and user code can fork, daemonize, ``setsid()`` out of the
process group, keep our stderr pipe open, write gigabytes of output, allocate without
bound, or signal any process of its user id. So the child is not started by the caller
directly but by a small *keeper* (``python -m kerasfit.crosscheck.sandbox``, stdlib only,
never runs user code):

- where it can, the keeper makes the build's supervisor the init process of a new PID
  namespace with its own ``/proc`` (``unshare(2)`` through ctypes, as root directly, else
  inside a user namespace mapping our own ids; the caller probes once whether that works).
  The build then cannot name any process outside it, the caller included, and cannot
  signal its supervisor: the kernel drops every signal sent to a namespace's init from
  inside that init has no handler for, SIGKILL and SIGSTOP included. When init ends,
  however it ends, the kernel kills everything left in the namespace; init dies with the
  outer keeper (``PR_SET_PDEATHSIG``), which waits for it and so knows how it ended.
  Not ``cgroup.kill``: that needs cgroup v2 with a delegated, writable subtree (absent on
  hybrid v1 hosts and in many containers). Not ``unshare(1)``: its waiting parent stands
  between us and init and reports init's death by SIGKILL as its own exit status 1
  (util-linux 2.38), so the reason would be lost;
- otherwise (no privilege, no user namespaces, not Linux) the keeper supervises the build
  as a plain process the build can signal: it ends whatever it finds at the end, but a
  build that kills or stops the keeper first can leave survivors (``Outcome.contained``);
- the keeper is also a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``): every orphaned
  descendant of the child, a double-forked or ``setsid`` daemon included, is re-parented
  to the keeper instead of init, so the keeper can always find and end all of them;
- it starts the child in its own session and process group with ``RLIMIT_AS`` set;
- it waits for the *child's exit* (not for EOF on a pipe a grandchild may hold), kills
  every remaining descendant (at the time limit, the child too) and writes a status file;
- it holds the read end of a *lifeline* pipe whose only writer is the caller: EOF there
  (the caller closed it, or died) makes it clean up the same way. A signal would not do:
  inside the namespace anything the keeper handles, the build could send too.

The caller reads the shared stderr pipe incrementally, keeping only a tail, and waits for
the keeper's exit, never for EOF. Without ``/proc`` or ``prctl`` (not Linux) the keeper
falls back to killing the child's process group.
"""

from __future__ import annotations

import functools
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
from typing import Any

from .messages import one_line

__all__ = ["Outcome", "describe_error", "describe_exit", "run_contained"]

STDERR_TAIL = 64 * 1024
# The keeper has its own deadline; the caller only steps in if the keeper itself is stuck.
_BACKSTOP = 20.0
_POLL = 0.02
_PR_SET_CHILD_SUBREAPER = 36


@dataclass
class Outcome:
    returncode: int | None  # the child's status (negative: killed by that signal); None if not known
    timed_out: bool  # the keeper ended the child at the time limit
    stderr: str  # the last STDERR_TAIL bytes the child (and its descendants) wrote
    leftovers: int  # descendants still alive when the child was done, ended by the keeper
    # How the keeper ended when it could not report (None: it reported): "killed by a signal
    # (SIGKILL)", "stopped responding", "exited with status 1".
    supervisor: str | None = None
    # The build ran in its own PID namespace: nothing it started can outlive the keeper.
    contained: bool = True


@functools.cache
def namespaces_available() -> bool:
    """Whether the keeper can run the build in a PID namespace here (asked once per process)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        # -P: no working directory on sys.path (a select.py there must not run out here)
        return subprocess.run([sys.executable, "-P", "-m", "kerasfit.crosscheck.sandbox", "--probe"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def run_contained(cmd: list[str], *, env: dict[str, str], timeout: float,
                  memory_limit: int | None, workdir: str | Path, namespace: bool = True) -> Outcome:
    """Run ``cmd`` under a keeper; ``memory_limit`` is the address space in bytes (None: none).

    ``namespace=False`` skips the PID namespace even where one is available (the keeper alone,
    as on hosts that allow none).
    """
    status = Path(workdir) / "keeper.json"
    isolate = namespace and namespaces_available()
    read_fd, write_fd = os.pipe()
    life_read, life_write = os.pipe()
    try:
        keeper = subprocess.Popen(
            # -P: the keeper runs outside the sandbox, so nothing of the working directory is
            # importable in it; only the build child, inside, puts the project on its path
            [sys.executable, "-P", "-m", "kerasfit.crosscheck.sandbox", str(status), repr(float(timeout)),
             str(memory_limit or 0), str(life_read), "namespace" if isolate else "plain", "--", *cmd],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=write_fd, env=env,
            start_new_session=True, pass_fds=(life_read,),
        )
    except BaseException:
        os.close(read_fd)
        os.close(life_write)
        raise
    finally:
        os.close(write_fd)
        os.close(life_read)
    tail = bytearray()
    stuck = False
    try:
        stuck = _pump(keeper, read_fd, tail, time.monotonic() + timeout + _BACKSTOP)
    finally:
        os.close(life_write)  # done or interrupted: EOF on the lifeline makes the keeper clean up
        if keeper.poll() is None:
            try:
                keeper.wait(5)
            except subprocess.TimeoutExpired:
                keeper.kill()  # in a namespace, init follows (PR_SET_PDEATHSIG), and everything in it
                keeper.wait()
        os.close(read_fd)
    text = tail.decode("utf-8", errors="replace")
    try:
        data = json.loads(status.read_text())
    except (OSError, ValueError):
        # The keeper itself was killed, stopped or crashed: say which, and what it printed.
        code = keeper.returncode
        if stuck:
            how = f"stopped responding and was killed after {timeout + _BACKSTOP:g} s"
        elif code < 0:
            how = f"was killed by a signal ({_signal_name(-code)})"
        else:
            how = f"exited with status {code}"
        return Outcome(None, False, text, 0, how, isolate)
    # the keeper's word: a namespace the probe allowed may still have been refused
    return Outcome(data["returncode"], data["timed_out"], text, data["leftovers"], data.get("supervisor"),
                   bool(data.get("contained", isolate)))


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _pump(keeper: subprocess.Popen[bytes], fd: int, tail: bytearray, backstop: float) -> bool:
    """Keep the stderr tail until the keeper exits; never wait for EOF.

    True if the keeper outlived the backstop and was killed here.
    """
    os.set_blocking(fd, False)
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    eof = False
    stuck = False
    while keeper.poll() is None:
        if time.monotonic() > backstop:
            keeper.kill()
            keeper.wait()
            stuck = True
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
    return stuck


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
        how = outcome.supervisor or "failed"
        if outcome.contained:
            # the namespace went with the keeper: the kernel killed every process of the build
            if how.startswith("was killed by a signal (SIGKILL)"):
                return f"the build process was killed by a signal (SIGKILL) {when}"
            return f"the build process was ended {when}: its supervisor {how}"
        return (f"the build's supervisor {how} {when}; processes the build started may still be "
                "running (no PID namespace here)")
    if limit_mib and code != 0 and any(_OUT_OF_MEMORY.search(ln) for ln in lines[-20:]):
        return f"{_memory_reason(limit_mib)}, {when}"
    if code < 0:
        name = _signal_name(-code)
        if -code == signal.SIGKILL:
            return f"the build process was killed ({name}; out of memory?) {when}"
        return f"the build process crashed ({name}) {when}"
    # os._exit() in user code skips every handler: the phase is the reason, not the log's tail
    reason = f"the build process exited with status {code} {when}"
    if code != 0 and lines:
        reason += f": {one_line(lines[-1])}"
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


# Linux ABI constants (<sched.h>, <sys/mount.h>), for ctypes: Python 3.11 has no os.unshare.
_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 2, 4, 8, 1 << 14, 1 << 18
_PR_SET_PDEATHSIG = 1
# The namespace's init exits with this when it could not mount its /proc (before any user code).
_NO_PROC = 75


def _libc() -> Any:
    import ctypes  # deferred: only the keeper needs it

    return ctypes.CDLL(None, use_errno=True)


def _enter_namespaces() -> bool:
    """Make this process's next child the init of a new PID and mount namespace.

    As root (CAP_SYS_ADMIN) directly; otherwise inside a new user namespace that maps our
    own uid and gid to themselves (the build keeps its ids). False where neither is allowed.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = _libc()
    except OSError:
        return False
    if libc.unshare(_CLONE_NEWPID | _CLONE_NEWNS) == 0:
        return True
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWPID | _CLONE_NEWNS) != 0:
        return False
    try:  # an unprivileged process may map exactly itself, once setgroups is denied
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
    except OSError:
        return False
    return True


def _mount_proc() -> bool:
    """In the namespace's init: a private mount tree and a /proc that shows only the namespace."""
    libc = _libc()
    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        return False  # never mount /proc while the tree still propagates back to the host
    return bool(libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None) == 0)


def _probe() -> int:
    """Exit 0 if a namespace with its own /proc can be made here (run in a throwaway process)."""
    if not _enter_namespaces():
        return 1
    init = os.fork()
    if init == 0:
        os._exit(0 if os.getpid() == 1 and _mount_proc() and os.path.exists("/proc/1/stat") else 1)
    return 0 if os.waitstatus_to_exitcode(os.waitpid(init, 0)[1]) == 0 else 1


def _write_status(path: str, data: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def _keeper(argv: list[str]) -> int:
    status_path, timeout, limit, lifeline = argv[0], float(argv[1]), int(argv[2]), int(argv[3])
    namespace, cmd = argv[4] == "namespace", argv[6:]
    # Python's KeyboardInterrupt handler is a handler the build could reach in the namespace
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not namespace or not _enter_namespaces():
        return _supervise(status_path, timeout, limit, lifeline, cmd, handle_term=True)
    init = os.fork()
    if init == 0:
        # the namespace's init. If this outer process dies (the caller's backstop kills it),
        # so does init, and with it the namespace; this process is single-threaded.
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if not _mount_proc():
            os._exit(_NO_PROC)
        # No handlers here: the kernel drops every unhandled signal sent to init from inside.
        os._exit(_supervise(status_path, timeout, limit, lifeline, cmd, handle_term=False))
    code = os.waitstatus_to_exitcode(os.waitpid(init, 0)[1])
    if not os.path.exists(status_path):  # init did not report: its end is the build's end
        if code == _NO_PROC:
            how = "could not mount /proc in its namespace"
        elif code < 0:
            how = f"was killed by a signal ({_signal_name(-code)})"
        else:
            how = f"exited with status {code}"
        _write_status(status_path, {"returncode": None, "timed_out": False, "leftovers": 0,
                                    "supervisor": how})
    return 0


def _supervise(status_path: str, timeout: float, limit: int, lifeline: int, cmd: list[str],
               handle_term: bool) -> int:
    """Run the child, wait for it, end every descendant, write the status file."""
    stop = []
    if handle_term:  # outside a namespace, SIGTERM from whoever runs kerasfit still cleans up
        signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    # (not PR_SET_PDEATHSIG: that fires when the *thread* that started us exits)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    watch = select.poll()
    watch.register(lifeline, select.POLLIN)  # EOF (or POLLHUP): the caller is done or gone

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
        if stop or time.monotonic() > deadline:
            break
        if watch.poll(_POLL * 1000):
            stop.append(True)
            break
    child.returncode = returncode if returncode is not None else -signal.SIGKILL  # no re-wait
    ended = _end_all(child.pid)
    ended.discard(child.pid)
    _reap()
    _write_status(status_path, {"returncode": returncode, "timed_out": returncode is None and not stop,
                                "leftovers": len(ended), "contained": os.getpid() == 1})
    return 0


if __name__ == "__main__":
    sys.exit(_probe() if sys.argv[1:] == ["--probe"] else _keeper(sys.argv[1:]))
