"""--fix when the write cannot happen, and the inputs that hid findings (issue 17, items 1,
3 and 8a-d): a failed write leaves the file as it was and its findings on screen; a path
that cannot be reached is one line; --diff names a file that does not parse; a link out of
the checked tree is not written through; a CR-only file keeps no blank-indent line."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from pathlib import Path

import pytest
from kfhelpers import BAD, GOOD, between_check_and_write, run, write

from kerasfit.project import check as api
from kerasfit.front import checkcmd
from kerasfit.project.check import CheckOptions, check_paths
from kerasfit.engine.settings import LintSettings
from kerasfit.engine.fix import fix_source
from kerasfit.engine.registry import all_rules
from kerasfit.project.writeback import TMP_SUFFIX

RULES = all_rules()

# KF201's (unsafe) fix adds `, drop_remainder=True`: the file gets longer.
BATCH = "import tensorflow as tf\nds = tf.data.Dataset.range(10).batch(4)\n"
BATCH_FIXED = BATCH.replace(".batch(4)", ".batch(4, drop_remainder=True)")


def padded(head: str, size: int) -> bytes:
    """``head`` and a comment line making the file exactly ``size`` bytes."""
    data = (head + "#" * (size - len(head) - 1) + "\n").encode()
    assert len(data) == size
    return data


def error_lines(r) -> list[str]:
    return [line for line in (r.stdout + r.stderr).splitlines() if line.startswith("error:")]


# ---- item 1: a failed write leaves the file as it was ---------------------------------------------


@pytest.fixture
def small_fs(tmp_path):
    """A real 64 KiB tmpfs, to run out of space on."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    try:
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True, text=True)
    except OSError as exc:
        pytest.skip(f"no mount command: {exc}")
    if p.returncode != 0:
        pytest.skip(f"mounting a tmpfs was refused: {p.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(d: Path) -> None:
    """Use up every free block of the filesystem holding ``d``."""
    fd = os.open(d / "fill", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 1024)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    assert os.statvfs(d).f_bavail == 0


def test_in_place_fix_on_a_full_tmpfs_leaves_the_hard_linked_file_whole(small_fs):
    """The issue's reproducer: a 4,095-byte hard-linked file, a fix that makes it longer,
    no room left. It was cut to 4,096 bytes mid-line; now it is untouched, and its finding
    is reported as not fixed (exit 1)."""
    data = padded(BATCH, 4095)
    f = small_fs / "m.py"
    f.write_bytes(data)
    os.link(f, small_fs / "twin.py")
    fill(small_fs)
    r = run("check", "m.py", "--fix", "--unsafe-fixes", "--no-cache", cwd=small_fs)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f.read_bytes() == data and (small_fs / "twin.py").read_bytes() == data
    assert f.stat().st_nlink == 2
    assert error_lines(r) == ["error: m.py: cannot write fixes: No space left on device; left as it was, not fixed"]
    assert [line.split(" ", 1)[0] for line in r.lines if ": KF" in line] == ["m.py:2:32:"]
    assert "No findings" not in r.stdout


def test_replacing_on_a_full_tmpfs_leaves_the_original_and_no_temporary(small_fs):
    f = small_fs / "m.py"
    data = padded(BATCH, 4095)
    f.write_bytes(data)
    fill(small_fs)
    r = run("check", "m.py", "--fix", "--unsafe-fixes", "--no-cache", cwd=small_fs)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f.read_bytes() == data
    assert sorted(p.name for p in small_fs.iterdir()) == ["fill", "m.py"]
    assert error_lines(r) == ["error: m.py: cannot write fixes: No space left on device; left as it was, not fixed"]


def test_in_place_fix_that_fits_on_the_small_tmpfs_is_written(small_fs):
    """The reservation does not refuse a write that fits."""
    f = small_fs / "m.py"
    f.write_bytes(padded(BATCH, 4095))
    os.link(f, small_fs / "twin.py")
    r = run("check", "m.py", "--fix", "--unsafe-fixes", "--no-cache", cwd=small_fs)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f.read_bytes() == padded(BATCH, 4095).replace(b".batch(4)", b".batch(4, drop_remainder=True)")
    assert (small_fs / "twin.py").read_bytes() == f.read_bytes()


def fail_writes_to(monkeypatch, target: Path, after: int, failures: int = 1) -> None:
    """os.write to ``target``'s inode writes ``after`` bytes in all, then fails with EIO
    (``failures`` times; later writes go through, as an I/O error that passes would)."""
    real = os.write
    ino = target.stat().st_ino
    state = {"left": after, "failures": failures}

    def write(fd, data):
        if state["failures"] and os.fstat(fd).st_ino == ino:
            n = min(len(data), state["left"])
            if n == 0:
                state["failures"] -= 1
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            state["left"] -= n
            return real(fd, bytes(data[:n]))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)


@pytest.mark.parametrize("kind", ["longer", "shorter"])
@pytest.mark.parametrize("after", [0, 1, 40, "old-1", "new-1"])
def test_in_place_write_that_fails_after_n_bytes_puts_the_original_back(tmp_path, monkeypatch, kind, after):
    src, fixed, unsafe = (BATCH, BATCH_FIXED, True) if kind == "longer" else (BAD, GOOD, False)
    f = write(tmp_path / "m.py", src)
    os.link(f, tmp_path / "twin.py")
    n = min({"old-1": len(src) - 1, "new-1": len(fixed) - 1}.get(after, after), len(fixed) - 1)
    fail_writes_to(monkeypatch, f, n)
    res = check_paths([f], CheckOptions(fix=True, unsafe_fixes=unsafe, use_cache=False))
    monkeypatch.undo()
    assert f.read_text() == src and (tmp_path / "twin.py").read_text() == src
    (r,) = res.files
    assert r.error == f"{f}: cannot write fixes: Input/output error; left as it was, not fixed"
    assert r.fixes_applied == 0 and r.fixed_source is None
    assert [d.code for d in r.diagnostics] == ["KF201" if kind == "longer" else "KF101"]


def test_owner_that_cannot_be_kept_goes_in_place_and_a_failed_write_is_undone(tmp_path, monkeypatch):
    """EPERM from fchown (not root, a file of another user): the in-place path; no temporary left."""
    f = write(tmp_path / "m.py", BATCH)

    def fchown(fd, uid, gid):
        raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))

    monkeypatch.setattr(os, "fchown", fchown)
    fail_writes_to(monkeypatch, f, 30)
    res = check_paths([f], CheckOptions(fix=True, unsafe_fixes=True, use_cache=False))
    monkeypatch.undo()
    assert f.read_text() == BATCH
    assert "left as it was, not fixed" in res.files[0].error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]


def test_a_failed_write_whose_undo_fails_too_says_the_file_may_be_damaged(tmp_path, monkeypatch):
    f = write(tmp_path / "m.py", BATCH)
    os.link(f, tmp_path / "twin.py")
    fail_writes_to(monkeypatch, f, 30, failures=2)
    res = check_paths([f], CheckOptions(fix=True, unsafe_fixes=True, use_cache=False))
    monkeypatch.undo()
    assert res.files[0].error == (
        f"{f}: cannot write fixes: Input/output error, and putting the original back failed too "
        "(Input/output error): the file may be damaged"
    )
    assert [d.code for d in res.files[0].diagnostics] == ["KF201"]


# ---- item 3: the findings of a file that could not be fixed are shown ------------------------------


@pytest.mark.parametrize("what", ["deleted", "changed"])
def test_findings_of_a_file_not_written_are_kept(tmp_path, monkeypatch, what):
    f = write(tmp_path / "m.py", BAD)
    between_check_and_write(monkeypatch, f.unlink if what == "deleted" else lambda: f.write_text(BAD + "z = 1\n"))
    (r,) = check_paths([f], CheckOptions(fix=True, use_cache=False)).files
    assert r.error == f"{f}: {what} while checking, not fixed"
    assert [(d.code, d.row) for d in r.diagnostics] == [("KF101", 2)]


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github", "lsp"])
def test_every_format_prints_the_unfixed_findings_and_exits_1(tmp_path, monkeypatch, capsys, fmt):
    f = write(tmp_path / "m.py", BAD)
    between_check_and_write(monkeypatch, f.unlink)
    monkeypatch.chdir(tmp_path)
    code = checkcmd.run_check(checkcmd.CheckArgs([Path("m.py")], fix=True, no_cache=True, output_format=fmt))
    out, err = capsys.readouterr()
    assert code == 1
    if fmt == "text":
        lines = out.splitlines()
        assert lines[0].startswith("m.py:2:6: KF101 [*] ") and "No findings" not in out
        assert "error: m.py: deleted while checking, not fixed" in lines
        assert "Found 1 finding(s)." in lines
    elif fmt == "json":
        assert [(d["code"], d["location"]["row"]) for d in json.loads(out)] == [("KF101", 2)]
    elif fmt == "sarif":
        (run_,) = json.loads(out)["runs"]
        assert [x["ruleId"] for x in run_["results"]] == ["KF101"]
    elif fmt == "github":
        assert [line.split(" ", 1)[0] for line in out.splitlines()] == ["::warning", "::error"]
        assert out.startswith("::warning file=m.py,line=2,") and "KF101" in out
    else:
        (diags,) = json.loads(out).values()
        assert [d["code"] for d in diags] == ["KF101"]
    if fmt == "json":  # a failure in json is a JSON object (on stderr: stdout is the findings' list)
        assert {"file": "m.py", "error": "m.py: deleted while checking, not fixed"} in [
            json.loads(line) for line in err.splitlines() if line.startswith("{")]
    elif fmt != "text":
        assert "error: m.py: deleted while checking, not fixed" in err


# ---- item 8a: a path inside a directory that cannot be searched -------------------------------------


def refuse_under(monkeypatch, locked: Path) -> None:
    """What the kernel answers a user without search permission on ``locked`` (root is
    never refused, so CI injects it): EACCES for any path through it."""
    inside = str(locked) + os.sep

    def guard(real):
        def call(path, *args, **kwargs):
            if not isinstance(path, int) and os.path.abspath(os.fsdecode(path)).startswith(inside):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fsdecode(path))
            return real(path, *args, **kwargs)

        return call

    for name in ("stat", "lstat", "open", "scandir", "listdir"):
        monkeypatch.setattr(os, name, guard(getattr(os, name)))


def test_a_file_named_inside_an_unsearchable_directory_is_one_line_and_the_others_are_checked(
    tmp_path, monkeypatch, capsys
):
    write(tmp_path / "locked" / "a.py", BAD)
    write(tmp_path / "b.py", BAD)
    monkeypatch.chdir(tmp_path)
    refuse_under(monkeypatch, tmp_path / "locked")
    code = checkcmd.run_check(checkcmd.CheckArgs([Path("locked/a.py"), Path("b.py")], no_cache=True))
    monkeypatch.undo()
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert [line for line in out if line.startswith("error:")] == [
        "error: locked/a.py: cannot search a directory on its path: Permission denied, skipped"
    ]
    assert [line.split(" ", 1)[0] for line in out if ": KF" in line] == ["b.py:2:6:"]


# ---- item 8b: --diff names a file that does not parse ---------------------------------------------


def test_diff_prints_the_kf001_of_a_file_that_does_not_parse(tmp_path):
    write(tmp_path / "broken.py", "import tensorflow as tf\ndef f(:\n")
    write(tmp_path / "ok.py", BAD)
    r = run("check", "--diff", "--no-cache", "broken.py", "ok.py", cwd=tmp_path)
    assert r.returncode == 1
    fixed = run("check", "--fix", "--no-cache", "broken.py", cwd=tmp_path)
    (kf001,) = [line for line in fixed.lines if " KF001 " in line]
    assert kf001.startswith("broken.py:2:7: KF001")
    assert kf001 in r.stderr.splitlines()  # as --fix prints it, off the patch on stdout
    assert r.stdout.startswith("--- a/ok.py\n") and "KF001" not in r.stdout


# ---- item 8c: a symbolic link out of the checked tree ---------------------------------------------


@pytest.mark.parametrize("named", [".", "link.py"])
def test_fix_does_not_write_through_a_link_out_of_the_checked_tree(tmp_path, named):
    outside = write(tmp_path / "outside" / "target.py", BAD)
    proj = tmp_path / "proj"
    write(proj / "model.py", BAD)
    (proj / "link.py").symlink_to(outside)
    r = run("check", "--fix", "--no-cache", named, cwd=proj)
    assert outside.read_text() == BAD  # the target is not ours to write
    assert (proj / "link.py").is_symlink()
    assert r.returncode == 1
    assert error_lines(r) == [f"error: link.py: a symbolic link to {outside}, outside the checked tree; not fixed"]
    assert any(line.startswith("link.py:2:6: KF101") for line in r.lines)  # its finding, unfixed
    if named == ".":
        assert (proj / "model.py").read_text() == GOOD  # the rest is fixed


def test_a_link_inside_the_checked_tree_is_still_fixed_through(tmp_path):
    real = write(tmp_path / "pkg" / "m.py", BAD)
    (tmp_path / "link.py").symlink_to("pkg/m.py")
    r = run("check", "--fix", "--no-cache", ".", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert real.read_text() == GOOD and (tmp_path / "link.py").is_symlink()


# ---- item 8d: a CR-only file and a deleted line ---------------------------------------------------

PAD_CONV = (
    "from tensorflow.keras import layers\n\n"
    "def block(x):\n    x = layers.ZeroPadding2D(1)(x)\n    x = layers.Conv2D(64, 3, use_bias=False)(x)\n    return x\n"
)


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
def test_kf103_deletes_the_whole_pad_line_whatever_the_line_ending(newline):
    out = fix_source(PAD_CONV.replace("\n", newline), "m.py", LintSettings([RULES["KF103"]]))
    assert out.applied == 1
    expected = (
        "from tensorflow.keras import layers\n\n"
        "def block(x):\n    x = layers.Conv2D(64, 3, use_bias=False, padding=\"same\")(x)\n    return x\n"
    )
    assert out.source == expected.replace("\n", newline)
