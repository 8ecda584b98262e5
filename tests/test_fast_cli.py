"""`kerasfit check` without typer (kerasfit/checkcmd.py): the same output and exit code
as the typer command for every command line it takes, and typer's answer for the rest.

Each case runs twice as a real process: through the console script (a plain command
line takes the typer-free route) and through ``kerasfit.cli.main`` (always typer)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kfhelpers import BAD, CLEAN, NOFIX, kerasfit_argv, write

from kerasfit.checkcmd import parse

TYPER_ARGV = [sys.executable, "-c", "import sys; sys.argv[0] = 'kerasfit'; from kerasfit.cli import main; main()"]


def _run(argv: list[str], args: list[str], cwd: Path, stdin: bytes | None = None) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERASFIT_")}
    env.update(NO_COLOR="1", KERASFIT_NO_PARALLEL="1")
    p = subprocess.run([*argv, *args], cwd=cwd, input=stdin, capture_output=True, env=env, timeout=120)
    out, err = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    assert "Traceback" not in out + err, err
    # --statistics prints the run's elapsed time
    return p.returncode, re.sub(r"\d+\.\d+s\b", "<t>s", out), re.sub(r"\d+\.\d+s\b", "<t>s", err)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path / "model.py", BAD + NOFIX)
    write(tmp_path / "clean.py", CLEAN)
    write(tmp_path / "pkg" / "more.py", BAD)
    return tmp_path


CASES = [
    ["check", "model.py"],
    ["check", "--no-cache", "model.py", "clean.py"],
    ["check"],
    ["check", "."],
    ["check", "--exit-zero", "--statistics", "."],
    ["check", "--output-format", "json", "model.py"],
    ["check", "--output-format=sarif", "--no-cache", "model.py"],
    ["check", "--output-format", "github", "model.py", "nope.py"],
    ["check", "--output-format", "lsp", "model.py"],
    ["check", "--output-format", "json", "--statistics", "model.py"],
    ["check", "-q", "model.py"],
    ["check", "--quiet", "clean.py"],
    ["check", "--show-fixes", "--unsafe-fixes", "model.py"],
    ["check", "--select", "KF101", "--ignore=KF1", "model.py"],
    ["check", "--select", "ALL", "--extend-select", "KF102,KF103", "model.py"],
    ["check", "--fail-on", "info", "model.py"],
    ["check", "--fail-on=error", "clean.py"],
    ["check", "--target", "gpu", "--cores", "8", "--batch-size", "64", "model.py"],
    ["check", "--target", "tpu-v9", "model.py"],  # a config error: one line, exit 2
    ["check", "--select", "NOPE", "model.py"],
    ["check", "-j", "1", "--isolated", "--force-exclude", "pkg"],
    ["check", "--jobs=1", "--cache-dir", ".alt_cache", "model.py"],
    ["check", "--config", "missing.toml", "model.py"],
    ["check", "--diff", "model.py"],
    ["check", "nope.py"],
    # typer's on both routes: usage errors, help, version, spellings click alone reads
    ["check", "--jobs", "0", "model.py"],
    ["check", "-j2", "model.py"],
    ["check", "--output-format", "xml", "model.py"],
    ["check", "--fix=yes", "model.py"],
    ["check", "--bogus", "model.py"],
    ["check", "--select"],
    ["check", "--", "model.py"],
    ["check", "--help"],
    ["--version"],
]


@pytest.mark.parametrize("args", CASES, ids=[" ".join(c) or "none" for c in CASES])
def test_same_output_and_exit_code_on_both_routes(project: Path, args: list[str]) -> None:
    fast = _run(kerasfit_argv(), args, project)
    shutil.rmtree(project / ".kerasfit_cache", ignore_errors=True)
    shutil.rmtree(project / ".alt_cache", ignore_errors=True)
    slow = _run(TYPER_ARGV, args, project)
    assert fast == slow


@pytest.mark.parametrize("args", [["check", "--fix", "."], ["check", "--fix", "--unsafe-fixes", "--diff", "."]])
def test_fix_writes_the_same_files_on_both_routes(tmp_path: Path, args: list[str]) -> None:
    runs, trees = [], []
    for name, argv in (("fast", kerasfit_argv()), ("typer", TYPER_ARGV)):
        root = tmp_path / name
        write(root / "model.py", BAD + NOFIX)
        write(root / "pkg" / "more.py", BAD)
        runs.append(_run(argv, args, root))
        trees.append({p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*.py"))})
    assert runs[0] == runs[1]
    assert trees[0] == trees[1]


@pytest.mark.parametrize(
    "args,stdin",
    [
        (["check", "-", "--stdin-filename", "m.py"], (BAD + NOFIX).encode()),
        (["check", "--fix", "-", "--stdin-filename", "m.py"], (BAD + NOFIX).encode()),
        (["check", "--diff", "-"], BAD.encode()),
        (["check", "--fix", "-"], b"x = 1\n\xff\xfe bad bytes\n"),
        (["check", "-"], "y = 'é'  # non-ASCII\n".encode()),
    ],
)
def test_stdin_on_both_routes(tmp_path: Path, args: list[str], stdin: bytes) -> None:
    assert _run(kerasfit_argv(), args, tmp_path, stdin) == _run(TYPER_ARGV, args, tmp_path, stdin)


def test_a_plain_check_imports_no_typer_server_or_table_modules(project: Path) -> None:
    code = (
        "import sys\n"
        "sys.argv = ['kerasfit', 'check', '--no-cache', 'model.py']\n"
        "from kerasfit.entry import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'typer', 'click', 'rich', 'pygls', 'lsprotocol', 'tabulate', 'difflib', 'tempfile', 'tensorflow', 'keras'})\n"
        "print('EXIT', code, 'HEAVY', heavy, file=sys.stderr)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=120)
    assert "EXIT 1 HEAVY []" in p.stderr, p.stderr
    assert "model.py:2:6: KF101" in p.stdout


def test_parse_takes_plain_spellings_and_leaves_the_rest_to_typer() -> None:
    kw = parse(["--select", "KF101", "--select=KF102", "-q", "a.py", "-", "--jobs", "3", "--build-timeout", "2.5",
                "--output-format=json", "--cache-dir", "c"])
    assert kw is not None
    assert kw["select"] == ["KF101", "KF102"] and kw["quiet"] is True and kw["jobs"] == 3
    assert kw["build_timeout"] == 2.5 and kw["output_format"] == "json"
    assert kw["paths"] == [Path("a.py"), Path("-")] and kw["cache_dir"] == Path("c")
    assert parse([]) is not None and parse([])["paths"] is None
    for args in (["--help"], ["-h"], ["-qj", "2"], ["-j2"], ["--jobs", "0"], ["--jobs", "x"], ["--cores", "-1"],
                 ["--fail-on", "INFO"], ["--fix=1"], ["--select"], ["--select", "-x"], ["--", "a.py"], ["-x"],
                 ["--build-timeout", "1e3"], ["--output-format", "xml"], [""], ["--config", ""], ["--version"]):
        assert parse(args) is None, args
