"""One way to write a file (project/writeback.py): fixed sources, baselines, the report page.

Only over a regular file or where nothing is, never over a file the run checks; owner,
mode and hard links kept; and a write that a SIGINT, SIGTERM or SIGHUP arrives in finishes
before the process ends by the signal (issue 30, items 1, 2 and 4)."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import time

import pytest

from kfhelpers import BAD, GOOD, kerasfit_argv, run, write

from kerasfit.project.writeback import write_output

STRACE = shutil.which("strace")


def _strace_works() -> bool:
    if STRACE is None:
        return False
    try:
        return subprocess.run([STRACE, "-qq", "-o", os.devnull, "true"], timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


needs_strace = pytest.mark.skipif(not _strace_works(), reason="strace (with ptrace allowed) injects the signal")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERASFIT_")}
    env.update(NO_COLOR="1", **extra)
    return env


# ---- outputs: what may be written over ------------------------------------------------------


def test_an_output_replaces_a_regular_file_keeping_its_mode_and_leaves_no_temporary(tmp_path):
    f = write(tmp_path / "base.json", "old\n")
    f.chmod(0o640)
    assert write_output(f, b"new\r\nline\n") is None
    assert f.read_bytes() == b"new\r\nline\n"
    assert stat.S_IMODE(f.stat().st_mode) == 0o640
    assert os.listdir(tmp_path) == ["base.json"]


def test_a_new_output_gets_the_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        assert write_output(tmp_path / "page.html", b"<html/>") is None
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "page.html").stat().st_mode) == 0o640
    assert os.listdir(tmp_path) == ["page.html"]


def test_an_output_keeps_every_hard_link(tmp_path):
    f = write(tmp_path / "base.json", "old\n")
    os.link(f, tmp_path / "other-name.json")
    assert write_output(f, b"new\n") is None
    assert (tmp_path / "other-name.json").read_bytes() == b"new\n"
    assert f.stat().st_nlink == 2 and os.path.samefile(f, tmp_path / "other-name.json")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file another owner needs root")
def test_an_output_keeps_its_owner(tmp_path):
    f = write(tmp_path / "base.json", "old\n")
    os.chown(f, 12345, 23456)
    assert write_output(f, b"new\n") is None
    st = f.stat()
    assert (st.st_uid, st.st_gid) == (12345, 23456) and f.read_bytes() == b"new\n"


def test_an_output_never_replaces_a_fifo(tmp_path):
    fifo = tmp_path / "base.json"
    os.mkfifo(fifo)
    problem = write_output(fifo, b"{}")
    assert problem == f"{fifo}: a FIFO, not a regular file; not written"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(tmp_path) == ["base.json"]


def test_an_output_never_replaces_a_device(tmp_path):
    dev = tmp_path / "null"
    try:
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers, in a scratch dir
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")
    problem = write_output(dev, b"{}")
    assert problem == f"{dev}: a device, not a regular file; not written"
    assert stat.S_ISCHR(os.lstat(dev).st_mode)


def test_an_output_never_replaces_a_directory_or_follows_a_dangling_link(tmp_path):
    (tmp_path / "d").mkdir()
    assert write_output(tmp_path / "d", b"{}") == f"{tmp_path / 'd'}: a directory, not a regular file; not written"
    (tmp_path / "link").symlink_to(tmp_path / "missing")
    assert write_output(tmp_path / "link", b"{}") == f"{tmp_path / 'link'}: a symbolic link to a missing file; not written"
    assert not (tmp_path / "missing").exists()


def test_an_output_never_replaces_a_checked_file_or_a_hard_link_to_one(tmp_path):
    model = write(tmp_path / "model.py", BAD)
    os.link(model, tmp_path / "base.json")
    for target in (model, tmp_path / "base.json"):
        problem = write_output(target, b"{}", [model])
        assert problem is not None and "one of the files this run checks" in problem
    assert model.read_text() == BAD


# ---- --write-baseline (items 2 and 4) ------------------------------------------------------------


def test_write_baseline_over_the_checked_model_is_refused(tmp_path):
    write(tmp_path / "model.py", BAD)
    r = run("check", "--no-cache", "model.py", "--write-baseline", "model.py", cwd=tmp_path)
    assert r.returncode == 2 and "one of the files this run checks" in r.stderr, r
    assert (tmp_path / "model.py").read_text() == BAD


def test_write_baseline_to_a_fifo_is_refused_without_blocking(tmp_path):
    write(tmp_path / "model.py", BAD)
    os.mkfifo(tmp_path / "base.json")
    r = run("check", "--no-cache", "model.py", "--write-baseline", "base.json", cwd=tmp_path)
    assert r.returncode == 2 and "a FIFO, not a regular file" in r.stderr, r
    assert stat.S_ISFIFO(os.lstat(tmp_path / "base.json").st_mode)


def test_write_baseline_over_a_hard_linked_baseline_keeps_the_links(tmp_path):
    write(tmp_path / "model.py", BAD)
    old = write(tmp_path / "base.json", "{}\n")
    os.link(old, tmp_path / "shared-base.json")
    r = run("check", "--no-cache", "model.py", "--write-baseline", "base.json", cwd=tmp_path)
    assert r.returncode == 0, r
    assert (tmp_path / "shared-base.json").read_text() == old.read_text() != "{}\n"
    assert old.stat().st_nlink == 2


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file another owner needs root")
def test_write_baseline_over_a_baseline_of_another_owner_keeps_the_owner(tmp_path):
    write(tmp_path / "model.py", BAD)
    old = write(tmp_path / "base.json", "{}\n")
    os.chown(old, 12345, 23456)
    r = run("check", "--no-cache", "model.py", "--write-baseline", "base.json", cwd=tmp_path)
    assert r.returncode == 0, r
    assert (old.stat().st_uid, old.stat().st_gid) == (12345, 23456) and "KF101" in old.read_text()


# ---- signals during a write (item 1) --------------------------------------------------------------


@needs_strace
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_signal_during_an_in_place_write_lets_the_write_finish(tmp_path, sig):
    """A hard-linked file is rewritten in its own inode. strace delivers the signal at the
    first write(2) into the file: its default action used to end the process before the
    shorter text was truncated (the new text followed by the old file's tail, which no
    longer parses)."""
    f = write(tmp_path / "m.py", BAD + "TAIL = 1\n")
    os.link(f, tmp_path / "link.py")
    p = subprocess.run(
        [STRACE, "-f", "-qq", "-o", os.devnull, "-P", str(f), "-e", "trace=write,pwrite64",
         "-e", f"inject=write,pwrite64:signal={sig}:when=1",
         *kerasfit_argv(), "check", "--fix", "--no-cache", "--isolated", str(f)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=_env(),
    )
    assert p.returncode == -getattr(signal, sig), (p.returncode, p.stderr)  # ended by the signal
    assert "Traceback" not in p.stderr, p.stderr
    assert f.read_text() == GOOD + "TAIL = 1\n"
    assert f.stat().st_nlink == 2
    assert sorted(os.listdir(tmp_path)) == ["link.py", "m.py"]


@needs_strace
def test_a_signal_while_a_temporary_is_written_removes_it(tmp_path):
    """A file with one link gets a temporary renamed over it; a SIGTERM when the temporary
    is synced (written, not yet renamed) used to leave the temporary behind."""
    f = write(tmp_path / "m.py", BAD)
    p = subprocess.run(
        [STRACE, "-f", "-qq", "-o", os.devnull, "-e", "trace=fsync,fdatasync",
         "-e", "inject=fsync,fdatasync:signal=SIGTERM:when=1",
         *kerasfit_argv(), "check", "--fix", "--no-cache", "--isolated", str(f)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=_env(),
    )
    assert p.returncode == -signal.SIGTERM, (p.returncode, p.stderr)
    assert f.read_text() == GOOD
    assert os.listdir(tmp_path) == ["m.py"]


def test_sigint_ends_a_parallel_check_and_its_workers_by_the_signal(tmp_path):
    """Ctrl-C reaches the whole process group: the workers end by the signal too, with no
    KeyboardInterrupt traceback from each of them, and nothing keeps running."""
    for i in range(16):
        write(tmp_path / f"m{i}.py", BAD + "".join(f"y{k} = keras.layers.Dense({30 + k})\n" for k in range(800)))
    p = subprocess.Popen([*kerasfit_argv(), "check", "--no-cache", "-j", "2", "."], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                         start_new_session=True)
    deadline = time.monotonic() + 60
    while len(_children(p.pid)) < 2:  # the workers are started (and checking, a moment later)
        assert p.poll() is None and time.monotonic() < deadline, p.communicate()
        time.sleep(0.02)
    time.sleep(0.3)
    assert p.poll() is None
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == -signal.SIGINT, (p.returncode, err[-2000:])
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-2000:]
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):
        os.killpg(p.pid, 0)  # no process of the group is left


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat_line = open(f"/proc/{entry}/stat", "rb").read()
            except OSError:
                continue
            if int(stat_line[stat_line.rfind(b")") + 2:].split()[1]) == pid:
                out.append(int(entry))
    return out


@pytest.mark.slow
def test_sigterm_at_every_point_of_a_fix_run_leaves_old_or_new_bytes(tmp_path):
    """200 files (some hard-linked, so rewritten in place; some long, some short), a
    SIGTERM sent at a sweep of moments across a whole ``--fix`` run: every file holds its
    old bytes or its new ones, never a mix, and no temporary is left."""
    old: dict[str, str] = {}
    new: dict[str, str] = {}
    src = tmp_path / "src"
    for i in range(200):
        pad = "".join(f"# line {k} of file {i}\n" for k in range((i % 4) * 1500))
        old[f"m{i}.py"] = BAD + pad
        new[f"m{i}.py"] = GOOD + pad
    links = tmp_path / "links"
    links.mkdir()

    def fresh() -> None:
        shutil.rmtree(src, ignore_errors=True)
        for name in os.listdir(links):
            os.unlink(links / name)
        for name, text in old.items():
            write(src / name, text)
            if int(name[1:-3]) % 2:
                os.link(src / name, links / name)

    cmd = [*kerasfit_argv(), "check", "--fix", "--no-cache", "--isolated", "-j", "2", "."]

    def start() -> tuple[subprocess.Popen[str], float]:
        return subprocess.Popen(cmd, cwd=src, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                env=_env()), time.monotonic()

    def until_first_write(p: subprocess.Popen[str]) -> bool:
        """Waits until the run has written m0.py (the first file it writes); False if it ended first."""
        while (src / "m0.py").read_text() == old["m0.py"]:
            if p.poll() is not None:
                return False
            time.sleep(0.002)
        return True

    # one whole run, timed: how long before its first write, and how long its writes take
    fresh()
    p, t0 = start()
    assert until_first_write(p)
    before = time.monotonic() - t0
    p.wait()
    writes = time.monotonic() - t0 - before
    assert p.returncode == 0
    assert all((src / n).read_text() == t for n, t in new.items())
    # moments across the checking (from the start), and densely across the writes (from
    # each run's own first write, so a run slower or faster than the timed one on a busy
    # machine still takes its signal among its writes)
    moments = [(False, before * k / 12) for k in range(12)] + [(True, writes * k / 24) for k in range(24)]
    stopped = mixed = 0
    for k, (from_first_write, moment) in enumerate(moments):
        fresh()
        p, t0 = start()
        if from_first_write:
            until_first_write(p)
        time.sleep(moment)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=300)
        assert p.returncode in (0, -signal.SIGTERM), (k, p.returncode, err[-2000:])
        stopped += p.returncode == -signal.SIGTERM
        fixed = 0
        for name in old:
            text = (src / name).read_text()
            assert text in (old[name], new[name]), (k, name, text[:200])
            fixed += text == new[name]
            if int(name[1:-3]) % 2:
                assert os.path.samefile(src / name, links / name), (k, name)
        mixed += 0 < fixed < len(old)
        assert sorted(os.listdir(src)) == sorted(old), (k, sorted(set(os.listdir(src)) - set(old)))
    # the sweep did land inside runs, and among their writes
    assert stopped >= len(moments) // 2 and mixed >= 4, (stopped, mixed)


@pytest.mark.build
def test_report_html_is_written_like_any_output(tmp_path):
    """``report --html`` over the model it builds is refused; over a hard-linked page it
    keeps the links (it used to split them, like the baseline)."""
    model = write(tmp_path / "model.py", "import keras\n\n\ndef build_model():\n    inp = keras.Input((8,))\n"
                                         "    return keras.Model(inp, keras.layers.Dense(30)(inp))\n")
    page = write(tmp_path / "page.html", "old\n")
    os.link(page, tmp_path / "shared.html")

    def report(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*kerasfit_argv(), "report", "model.py", *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=600, env=_env())

    r = report("--html", "page.html")
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "shared.html").read_text().lstrip().lower().startswith("<!doctype html")
    assert page.stat().st_nlink == 2
    before = model.read_text()
    r = report("--html", "model.py")  # (the build is cached by now)
    assert r.returncode == 2 and "one of the files this run checks" in r.stderr, r.stderr[-2000:]
    assert model.read_text() == before
