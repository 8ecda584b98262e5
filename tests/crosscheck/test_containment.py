"""Hostile model files: the build child is contained (issue 8, item 10).

Each file here attacks the process running it: grandchildren that escape the process
group with ``setsid()`` and keep the stderr pipe, plain forks that hold it, daemons,
floods of output, unbounded allocation, ``os._exit`` at import. Each runs through the real
``kerasfit report`` / ``check --build`` (the child imports TensorFlow first). A hang must
fail the test by timing out: every run has a hard ``subprocess`` timeout, and the asserted
wall times are generous bounds, not measurements. After each run no process started from
the hostile file may still be alive (``/proc`` is scanned for its path).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.build

ROOT = Path(__file__).resolve().parents[2]
# A model the child can build in a few seconds once TensorFlow is imported. The build
# runs only what the model depends on (the script is sliced), and never a module-level
# call of a helper that opens files or starts processes (data loading, downloads): so each
# hostile part below is a function bound to UNITS, which building the model calls.
MODEL = """
import keras

def build_model():
    inp = keras.Input((8,))
    units = UNITS() if callable(UNITS) else UNITS
    return keras.Model(inp, keras.layers.Dense(units)(inp))
"""
# A grandchild that leaves the child's session and keeps stderr (fd 2) open.
ESCAPEE = """
import os, time

def escape():
    if os.fork() == 0:
        os.setsid()
        time.sleep({seconds})
        os._exit(0)
    return 4

UNITS = escape
"""


def survivors(path: Path) -> list[str]:
    """Live processes whose command line names the hostile file (the child's forks do)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if stat[stat.rfind(b")") + 2:].split()[0] != b"Z" and str(path) in cmdline:
            found.append(f"{entry}: {cmdline}")
    return found


def write(tmp_path: Path, name: str, *parts: str) -> Path:
    path = tmp_path / name
    path.write_text("".join(textwrap.dedent(part) for part in parts))
    return path


def kerasfit(tmp_path: Path, *args: str, limit: float) -> tuple[subprocess.CompletedProcess, float]:
    """Run the CLI; a run that outlives ``limit`` fails the test (TimeoutExpired)."""
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "kerasfit", *args, "--no-cache"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=limit)
    return proc, time.monotonic() - started


def assert_no_survivors(path: Path) -> None:
    for _ in range(20):  # SIGKILL is immediate, reaping may lag a moment
        left = survivors(path)
        if not left:
            return
        time.sleep(0.1)
    pytest.fail(f"processes outlived the build: {left}")


def test_a_setsid_escapee_holding_stderr_does_not_stretch_the_time_limit(tmp_path):
    # The child hangs and its grandchild left the process group: killing the group used to
    # leave the grandchild holding stderr, and kerasfit waited for it without limit. The
    # limit leaves time to import TensorFlow, so the hostile code surely runs.
    forked = tmp_path / "forked"
    path = write(tmp_path, "escapee_hang.py", ESCAPEE.format(seconds=3600),
                 f"def hang():\n    open({str(forked)!r}, 'w').close()\n    time.sleep(3600)\n    return 4\n\n"
                 "UNITS = hang\n", MODEL)
    proc, wall = kerasfit(tmp_path, "report", str(path), "--build-timeout", "30", limit=120)
    assert forked.exists()
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"kerasfit: build failed: {path}: the build timed out after 30 s (raise it with --build-timeout, or "
        "timeout in [tool.kerasfit.build])"]
    assert wall < 30 + 30
    assert_no_survivors(path)


def test_a_finished_build_with_a_setsid_escapee_is_reported_and_the_escapee_ended(tmp_path):
    path = write(tmp_path, "escapee_done.py", ESCAPEE.format(seconds=3600), MODEL)
    proc, wall = kerasfit(tmp_path, "report", str(path), "--build-timeout", "60", "--output-format",
                          "json", limit=120)
    assert proc.returncode == 0, proc.stderr
    assert '"ops"' in proc.stdout
    assert wall < 60
    assert_no_survivors(path)


def test_a_plain_fork_holding_stderr_does_not_turn_a_finished_build_into_a_timeout(tmp_path):
    path = write(tmp_path, "fork_holds_stderr.py", """
        import os, time

        def fork():
            if os.fork() == 0:
                time.sleep(3600)
                os._exit(0)
            return 4

        UNITS = fork
        """, MODEL)
    proc, wall = kerasfit(tmp_path, "check", str(path), "--build", "--build-timeout", "45",
                          limit=120)
    assert "timed out" not in proc.stdout + proc.stderr
    assert "build cross-check failed" not in proc.stdout
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert wall < 45
    assert_no_survivors(path)


def test_a_double_forked_daemon_does_not_outlive_the_report(tmp_path):
    path = write(tmp_path, "daemon.py", """
        import os, time

        def daemon():
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    # a well-behaved daemon: stdio closed, so no pipe keeps anyone waiting
                    fd = os.open(os.devnull, os.O_RDWR)
                    for std in (0, 1, 2):
                        os.dup2(fd, std)
                    time.sleep(3600)
                os._exit(0)
            return 4

        UNITS = daemon
        """, MODEL)
    proc, _ = kerasfit(tmp_path, "report", str(path), "--build-timeout", "60", limit=120)
    assert proc.returncode == 0, proc.stderr
    assert_no_survivors(path)


def test_exit_zero_at_import_is_named_as_such(tmp_path):
    path = write(tmp_path, "exits_at_import.py", """
        import os, sys

        def leave():
            print("some log line the user printed", file=sys.stderr, flush=True)
            os._exit(0)

        UNITS = leave()
        """, MODEL)
    proc, _ = kerasfit(tmp_path, "report", str(path), "--build-timeout", "60", limit=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"kerasfit: build failed: {path}: the build process exited with status 0 at import, "
        "before building"]


def test_a_result_file_that_is_not_a_json_object_is_one_line(tmp_path):
    # The user's code can find --out (its sys.argv is the script's, but its process's command
    # line is there to read); valid JSON that is not an object there used to end kerasfit with
    # a traceback ('list' object has no attribute 'get').
    path = write(tmp_path, "forged_result.py", """
        import os

        def forge():
            args = open("/proc/self/cmdline", "rb").read().split(b"\\0")
            with open(args[args.index(b"--out") + 1].decode(), "w") as f:
                f.write("[]")
            os._exit(0)

        UNITS = forge
        """, MODEL)
    proc, _ = kerasfit(tmp_path, "report", str(path), "--build-timeout", "60", limit=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"kerasfit: build failed: {path}: the build process exited with status 0 while building the model"]


def test_stderr_is_read_with_a_cap(tmp_path):
    # 400 MB of output: kept whole, the parent's memory grew by several times that.
    path = write(tmp_path, "loud.py", """
        import os

        def build_model():
            block = b"x" * (1 << 20) + b"\\n"
            for _ in range(400):
                os.write(2, block)
            print("the last line", file=__import__("sys").stderr, flush=True)
            raise SystemExit(5)
        """)
    script = textwrap.dedent(f"""
        import sys
        from kerasfit.front.cli import app
        try:
            app(["report", {str(path)!r}, "--no-cache", "--build-timeout", "60"])
        except SystemExit as exc:
            # VmHWM, not ru_maxrss: Linux carries the pre-exec peak into ru_maxrss, and
            # a process forked from a large pytest starts that peak at pytest's size
            hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:"))
            print(exc.code, int(hwm.split()[1]))
        """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    code, maxrss_kib = proc.stdout.split()
    assert code == "2"
    assert "SystemExit: 5" in proc.stderr and "\n" not in proc.stderr.strip()
    assert int(maxrss_kib) < 200 * 1024  # the kerasfit process itself, not the child


def test_the_child_has_a_configurable_memory_limit(tmp_path):
    # Address space only, never touched: 96 GiB of untouched anonymous mappings costs no
    # RAM, so without a limit this "succeeds"; under the limit the mapping is refused.
    (tmp_path / "pyproject.toml").write_text("[tool.kerasfit.build]\nmemory-limit = 12288\n")
    path = write(tmp_path, "greedy.py", """
        import mmap

        def grab():
            hoard = [mmap.mmap(-1, 1 << 30) for _ in range(96)]
            return len(hoard)

        UNITS = grab
        """, MODEL)
    proc, _ = kerasfit(tmp_path, "report", str(path), "--build-timeout", "60", limit=120)
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert "\n" not in line
    assert line.startswith(f"kerasfit: build failed: {path}: killed: memory limit (12288 MiB")
    assert "Cannot allocate memory" in line


def test_a_bad_memory_limit_is_a_config_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.kerasfit.build]\nmemory-limit = 'lots'\n")
    path = write(tmp_path, "model.py", MODEL)
    proc, _ = kerasfit(tmp_path, "report", str(path), limit=60)
    assert proc.returncode == 2
    assert "memory-limit" in proc.stderr and "pyproject.toml" in proc.stderr


# The build turns on its keeper (issue 17, item 6): it used to kill it ("timed out after 60 s"
# after 14 s, the build and its grandchild left running under pid 1) or stop it (the keeper
# killed at the time limit + 20 s, the build left running). Now the build runs in a PID
# namespace whose init is the keeper: those signals never arrive, the build is reported on
# its merits, and nothing outlives `report`.
TURNS_ON_KEEPER = """
import os, signal, time

import keras


def build_model():
    keeper = os.getppid()
    {attack}
    inp = keras.Input((8,))
    return keras.Model(inp, keras.layers.Dense(4)(inp))
"""


def turn_on_keeper(tmp_path: Path, name: str, attack: str) -> tuple[Path, subprocess.CompletedProcess, float]:
    path = write(tmp_path, name, TURNS_ON_KEEPER.format(attack=textwrap.indent(textwrap.dedent(attack), "    ").strip()))
    proc, wall = kerasfit(tmp_path, "report", str(path), "--build-timeout", "30", "--output-format", "json",
                          limit=120)
    return path, proc, wall


def test_a_build_that_kills_its_keeper_is_reported_on_its_merits(tmp_path):
    path, proc, wall = turn_on_keeper(tmp_path, "kills_keeper.py", """
        os.kill(keeper, signal.SIGKILL)
        time.sleep(0.5)
        """)
    assert proc.returncode == 0, proc.stderr
    assert '"ops"' in proc.stdout and "timed out" not in proc.stderr
    assert "without a PID namespace" not in proc.stdout
    assert wall < 30
    assert_no_survivors(path)


def test_a_grandchild_that_sleeps_forever_and_kills_the_keeper_does_not_survive(tmp_path):
    path, proc, wall = turn_on_keeper(tmp_path, "grandchild_kills_keeper.py", """
        if os.fork() == 0:
            os.setsid()
            time.sleep(1)  # the build is done or nearly: the keeper is ending everything
            os.kill(keeper, signal.SIGKILL)
            while True:
                time.sleep(3600)
        """)
    assert proc.returncode == 0, proc.stderr
    assert '"ops"' in proc.stdout
    assert wall < 30
    assert_no_survivors(path)


def test_a_build_that_stops_its_keeper_is_not_held_to_the_backstop(tmp_path):
    path, proc, wall = turn_on_keeper(tmp_path, "stops_keeper.py", """
        if os.fork() == 0:
            time.sleep(3600)
        os.kill(keeper, signal.SIGSTOP)
        time.sleep(0.5)
        """)
    assert proc.returncode == 0, proc.stderr
    assert '"ops"' in proc.stdout
    assert wall < 30  # a stopped keeper was killed by the caller at 30 + 20 s
    assert_no_survivors(path)


def test_without_a_namespace_the_report_notes_that_survivors_are_possible(tmp_path, monkeypatch):
    from kerasfit.crosscheck import sandbox
    from kerasfit.crosscheck.api import BuildOptions, run_child

    monkeypatch.setattr(sandbox, "namespaces_available", lambda: False)  # as on a host that allows none
    path = write(tmp_path, "plain.py", "UNITS = 4\n", MODEL)
    raw = run_child(path, BuildOptions(use_cache=False, timeout=120))
    assert any(n.startswith("the build ran without a PID namespace") for n in raw["notes"]), raw["notes"]
