"""The build child's containment on plain Python children (no TensorFlow, fast).

``tests/crosscheck/test_containment.py`` runs the same attacks through ``kerasfit report``
with the real build child; these pin the keeper's behaviour directly: the child's exit is
what is waited for, every descendant is ended, stderr is a capped tail, RLIMIT_AS holds.
"""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kerasfit.crosscheck.sandbox import STDERR_TAIL, Outcome, describe_exit, namespaces_available, run_contained

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="subreaper and /proc: Linux")


def contained(tmp_path: Path, code: str, timeout: float = 20, memory_limit: int | None = None) -> tuple[Outcome, float]:
    marker = tmp_path / "marker"  # every process started here carries it in its command line
    script = tmp_path / "hostile.py"
    script.write_text(textwrap.dedent(code))
    started = time.monotonic()
    outcome = run_contained([sys.executable, str(script), str(marker)], env=dict(os.environ),
                            timeout=timeout, memory_limit=memory_limit, workdir=tmp_path)
    return outcome, time.monotonic() - started


def survivors(tmp_path: Path) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if stat[stat.rfind(b")") + 2:].split()[0] != b"Z" and str(tmp_path / "marker") in cmdline:
            found.append(cmdline)
    return found


# The child waits for the middle process, so exactly one descendant (the daemon) is alive
# when the child is done: without the wait the middle one may not have exited yet.
ESCAPE = """
import os, sys, time
middle = os.fork()
if middle == 0:
    os.setsid()
    if os.fork() == 0:   # a daemon in its own session, holding stderr
        time.sleep(3600)
    os._exit(0)
os.waitpid(middle, 0)
"""


def test_the_childs_exit_is_awaited_not_the_end_of_stderr(tmp_path):
    outcome, wall = contained(tmp_path, ESCAPE + "print('done', file=sys.stderr)\n")
    assert outcome.returncode == 0 and not outcome.timed_out
    assert outcome.leftovers == 1
    assert "done" in outcome.stderr
    assert wall < 10
    assert survivors(tmp_path) == []


def test_at_the_time_limit_every_descendant_is_ended(tmp_path):
    outcome, wall = contained(tmp_path, ESCAPE + "time.sleep(3600)\n", timeout=2)
    assert outcome.timed_out and outcome.returncode is None
    assert wall < 2 + 8
    assert survivors(tmp_path) == []


def test_a_fork_chain_racing_the_kill_is_ended(tmp_path):
    # each process forks the next and exits: the tree keeps moving while it is ended
    outcome, _ = contained(tmp_path, """
        import os, time
        while True:
            if os.fork():
                time.sleep(0.01)
                os._exit(0)
        """, timeout=2)
    assert outcome.returncode == 0 and outcome.leftovers >= 1
    assert survivors(tmp_path) == []


def test_stderr_keeps_only_a_tail(tmp_path):
    outcome, _ = contained(tmp_path, """
        import os, sys
        for _ in range(200):
            os.write(2, b"x" * (1 << 20))
        os.write(2, b"\\nthe last line\\n")
        """)
    assert outcome.returncode == 0
    assert len(outcome.stderr) <= STDERR_TAIL
    assert outcome.stderr.endswith("the last line\n")


def test_the_address_space_is_limited(tmp_path):
    outcome, _ = contained(tmp_path, """
        import mmap, sys
        try:
            mmap.mmap(-1, 4 << 30)
        except OSError as exc:
            print(exc, file=sys.stderr)
            sys.exit(7)
        """, memory_limit=1 << 30)
    assert outcome.returncode == 7
    assert "Cannot allocate memory" in outcome.stderr
    reason = describe_exit(outcome, tmp_path / "result.json", 1024)
    assert reason.startswith("killed: memory limit (1024 MiB of address space")


def test_exit_without_a_result_names_the_phase(tmp_path):
    (tmp_path / "result.json.phase").write_text("import")
    outcome = Outcome(returncode=0, timed_out=False, stderr="W0000 tensorflow noise\n", leftovers=0)
    assert describe_exit(outcome, tmp_path / "result.json", None) == (
        "the build process exited with status 0 at import, before building")


def test_when_the_caller_is_killed_the_keeper_ends_the_tree(tmp_path):
    import signal
    import subprocess

    script = tmp_path / "hostile.py"
    script.write_text(ESCAPE + "time.sleep(3600)\n")
    caller = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, sys
        from kerasfit.crosscheck.sandbox import run_contained
        run_contained([sys.executable, {str(script)!r}, {str(tmp_path / 'marker')!r}], env=dict(os.environ),
                      timeout=3600, memory_limit=None, workdir={str(tmp_path)!r})
        """)])
    deadline = time.monotonic() + 20
    while len(survivors(tmp_path)) < 2:  # the child and its daemon are up
        assert time.monotonic() < deadline and caller.poll() is None
        time.sleep(0.05)
    caller.send_signal(signal.SIGKILL)
    caller.wait()
    deadline = time.monotonic() + 5
    while survivors(tmp_path):
        assert time.monotonic() < deadline, survivors(tmp_path)
        time.sleep(0.05)


# The build turns on its keeper (issue 17, item 6). Under a PID namespace the keeper is the
# namespace's init: a signal from inside that it does not handle never arrives, and when
# it ends the kernel ends everything in it. Without one (namespace=False, as on hosts that
# allow none) the reason must still be the true one, never "timed out".
ATTACK_KEEPER = """
import os, signal, sys, time
if os.fork() == 0:
    os.setsid()
    time.sleep(3600)
os.kill(os.getppid(), signal.{signal})
time.sleep(0.5)
print("still here", file=sys.stderr)
"""

needs_namespace = pytest.mark.skipif(not namespaces_available(), reason="no PID namespace on this host")


def end_survivors(tmp_path: Path) -> None:
    """The fallback leaves processes behind, as documented: end them so the test does not leak."""
    import signal

    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and str(tmp_path / "marker") in Path(f"/proc/{entry}/cmdline").read_text(errors="replace"):
                os.kill(int(entry), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass


@needs_namespace
def test_a_build_that_kills_its_keeper_cannot_and_leaves_nothing(tmp_path):
    outcome, wall = contained(tmp_path, ATTACK_KEEPER.format(signal="SIGKILL"))
    assert outcome.contained
    assert outcome.returncode == 0 and not outcome.timed_out, outcome
    assert "still here" in outcome.stderr
    assert outcome.leftovers == 1  # the setsid grandchild, ended when the build was done
    assert wall < 10
    assert survivors(tmp_path) == []


@needs_namespace
def test_a_build_that_stops_its_keeper_is_still_timed_and_ended(tmp_path):
    outcome, wall = contained(tmp_path, ATTACK_KEEPER.format(signal="SIGSTOP") + "time.sleep(3600)\n",
                              timeout=2)
    assert outcome.timed_out and outcome.returncode is None
    assert wall < 2 + 8  # not the caller's backstop (timeout + 20 s)
    assert survivors(tmp_path) == []


@needs_namespace
def test_a_keeper_killed_from_outside_takes_the_whole_build_with_it(tmp_path):
    import signal
    import threading

    script = tmp_path / "hostile.py"
    script.write_text(ESCAPE + "time.sleep(3600)\n")
    got: list[Outcome] = []
    runner = threading.Thread(target=lambda: got.append(run_contained(
        [sys.executable, str(script), str(tmp_path / "marker")], env=dict(os.environ), timeout=3600,
        memory_limit=None, workdir=tmp_path)))
    runner.start()
    deadline = time.monotonic() + 20
    while len(survivors(tmp_path)) < 4:  # the keeper, its init, the child and its daemon
        assert time.monotonic() < deadline, survivors(tmp_path)
        time.sleep(0.05)
    # the namespace's init: the keeper's forked copy, whose parent is the keeper
    keepers = [int(e) for e in os.listdir("/proc") if e.isdigit() and _argv(e)[:4] == [
        sys.executable, "-P", "-m", "kerasfit.crosscheck.sandbox"] and str(tmp_path / "marker") in _argv(e)]
    init = next(pid for pid in keepers if _ppid(pid) in keepers)
    os.kill(init, signal.SIGKILL)
    runner.join(20)
    assert not runner.is_alive()
    outcome = got[0]
    assert not outcome.timed_out and outcome.supervisor == "was killed by a signal (SIGKILL)"
    assert describe_exit(outcome, tmp_path / "result.json", None) == (
        "the build process was killed by a signal (SIGKILL) before starting")
    assert survivors(tmp_path) == []


def _ppid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat[stat.rfind(b")") + 2:].split()[1])


def _argv(pid: str) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text(errors="replace").split("\0")
    except OSError:
        return []


def test_without_a_namespace_a_killed_keeper_is_named_not_called_a_timeout(tmp_path):
    try:
        started = time.monotonic()
        outcome = run_contained([sys.executable, "-c", ATTACK_KEEPER.format(signal="SIGKILL") + "time.sleep(3600)\n",
                                 str(tmp_path / "marker")], env=dict(os.environ), timeout=60,
                                memory_limit=None, workdir=tmp_path, namespace=False)
        assert time.monotonic() - started < 10
    finally:
        end_survivors(tmp_path)
    assert not outcome.contained and not outcome.timed_out and outcome.returncode is None
    reason = describe_exit(outcome, tmp_path / "result.json", None)
    assert reason == ("the build's supervisor was killed by a signal (SIGKILL) before starting; "
                      "processes the build started may still be running (no PID namespace here)")


@pytest.mark.parametrize("module", ["select", "json", "signal"])
def test_a_module_in_the_working_directory_never_runs_in_the_keeper_or_the_probe(tmp_path, module):
    """``report`` started its supervisor (and the namespace probe) with ``python -m`` from
    the working directory: a ``select.py`` at a repository's root ran outside the sandbox,
    and what it started outlived ``report`` (issue 30, item 6). Only the build child, inside
    the sandbox, puts the project on its path."""
    marker = tmp_path / "ran"
    (tmp_path / f"{module}.py").write_text(f"open({str(marker)!r}, 'a').write('{module}\\n')\n")
    driver = textwrap.dedent(f"""
        import os, sys
        from kerasfit.crosscheck.sandbox import namespaces_available, run_contained
        namespaces_available()
        out = run_contained([sys.executable, "-P", "-c", "pass"], env=dict(os.environ), timeout=60,
                            memory_limit=None, workdir={str(tmp_path / 'work')!r})
        print(out.returncode)
    """)
    (tmp_path / "work").mkdir()
    import subprocess

    # the driver itself must not import from there either: -P
    p = subprocess.run([sys.executable, "-P", "-c", driver], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "0", (p.stdout, p.stderr[-2000:])
    assert not marker.exists(), marker.read_text()
