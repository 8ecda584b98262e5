"""A plain ``kerasfit check`` stays light: one command-line parser (typer, kerasfit/front/cli.py)
owns every option, and what it runs imports no language server, table or TensorFlow code."""

from __future__ import annotations

import dataclasses
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kfhelpers import BAD, CLEAN, GOOD, NOFIX, run, write

from kerasfit.front import checkcmd, cli


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path / "model.py", BAD + NOFIX)
    write(tmp_path / "clean.py", CLEAN)
    return tmp_path


def _check_in_process(project: Path, argv: list[str], report: str) -> subprocess.CompletedProcess[str]:
    """``kerasfit check`` run in a fresh interpreter as entry.main runs it (which then ends
    the process at once), printing ``EXIT <code>`` and then the ``report`` expression."""
    code = (
        "import sys\n"
        f"sys.argv = ['kerasfit', 'check', *{argv!r}]\n"
        "from kerasfit.front.cli import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        f"print('EXIT', code, {report}, file=sys.stderr)\n"
    )
    return subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=120)


def test_a_plain_check_imports_no_server_table_or_tensorflow_modules(project: Path) -> None:
    heavy = "'rich', 'pydantic', 'pygls', 'lsprotocol', 'tabulate', 'tensorflow', 'keras', 'tf_keras'"
    p = _check_in_process(project, ["--no-cache", "model.py"],
                          f"'HEAVY', sorted({{m.split('.')[0] for m in sys.modules}} & {{{heavy}}})")
    assert "EXIT 1 HEAVY []" in p.stderr, p.stderr
    assert "model.py:2:6: KF101" in p.stdout


def test_a_check_answered_from_the_cache_imports_no_libcst(project: Path) -> None:
    # libcst's import is ~0.17 s, longer than a warm check of 182 files: a run whose every
    # file is cached must not pay it
    write(project / "kerasfit.toml", "")  # (the cache sits under this project root)
    assert run("check", "model.py", "clean.py", cwd=project).returncode == 1  # fills the cache
    p = _check_in_process(project, ["model.py", "clean.py"], "'LIBCST', 'libcst' in sys.modules")
    assert "EXIT 1 LIBCST False" in p.stderr, p.stderr
    assert "model.py:2:6: KF101" in p.stdout


def test_fix_runs_are_answered_from_the_cache(project: Path) -> None:
    """Issue 26, item 7: under --diff / --fix (safe and unsafe alike) a file whose bytes and
    options match the cache is not parsed again when its cached result offers no fix the run
    would apply; --diff answers a file it fixed before from the cache too; and the text
    --fix writes is cached as checked, so the next run over the fixed tree parses nothing."""
    write(project / "kerasfit.toml", "")  # (the cache sits under this project root)
    parsed = "'LIBCST', 'libcst' in sys.modules"
    assert run("check", "clean.py", cwd=project).returncode == 0  # fills the cache
    for flags in (["--diff"], ["--fix"], ["--diff", "--unsafe-fixes"], ["--fix", "--unsafe-fixes"]):
        p = _check_in_process(project, [*flags, "clean.py"], parsed)
        assert "EXIT 0 LIBCST False" in p.stderr, (flags, p.stderr)

    write(project / "model.py", BAD)
    first = _check_in_process(project, ["--diff", "model.py"], parsed)
    assert "EXIT 1 LIBCST True" in first.stderr, first.stderr  # made the fix: parsed
    second = _check_in_process(project, ["--diff", "model.py"], parsed)
    assert "EXIT 1 LIBCST False" in second.stderr, second.stderr
    assert second.stdout == first.stdout and "+bn = keras.layers.BatchNormalization(fused=True)" in second.stdout
    # another fix mode is another result: made again
    assert "LIBCST True" in _check_in_process(project, ["--diff", "--unsafe-fixes", "model.py"], parsed).stderr

    fixed = _check_in_process(project, ["--fix", "model.py"], parsed)
    assert "LIBCST True" in fixed.stderr and (project / "model.py").read_text() == GOOD  # --fix parses what it writes
    again = _check_in_process(project, ["--fix", "model.py"], parsed)
    assert "EXIT 0 LIBCST False" in again.stderr, again.stderr
    assert (project / "model.py").read_text() == GOOD
    # a changed byte is checked again
    write(project / "model.py", GOOD + "\n")
    assert "LIBCST True" in _check_in_process(project, ["--fix", "model.py"], parsed).stderr


def test_the_check_command_passes_every_option_to_the_body_by_name() -> None:
    # cli.check forwards its locals() as one CheckArgs: its parameters are the fields, in order.
    fields = [f.name for f in dataclasses.fields(checkcmd.CheckArgs)]
    assert list(inspect.signature(cli.check).parameters) == fields
    assert list(inspect.signature(checkcmd.run_check).parameters) == ["args"]


def test_the_help_lists_every_option_the_body_takes(project: Path) -> None:
    r = run("check", "--help", cwd=project)
    assert r.returncode == 0
    shown = set(re.findall(r"--[a-z][a-z-]+", r.stdout))
    for name in (f.name for f in dataclasses.fields(checkcmd.CheckArgs)):
        if name != "paths":
            assert "--" + name.replace("_", "-") in shown, name


def test_one_parser_answers_usage_errors_and_runs_plain_lines(project: Path) -> None:
    bad = run("check", "--jobs", "0", "model.py", cwd=project)
    assert bad.returncode == 2 and "Invalid value for '--jobs' / '-j'" in bad.stderr
    ok = run("check", "-j1", "--select=KF101", "-q", "model.py", cwd=project)
    assert ok.returncode == 1
    assert [line.split(" KF101 ")[0] for line in ok.lines] == ["model.py:2:6:", "model.py:4:5:"]  # -q: findings only


def test_a_finished_check_ends_without_the_interpreters_teardown(project: Path) -> None:
    # the teardown (freeing every module and libcst class) is ~15% of a one-file check;
    # an atexit handler stands for it: it runs on an ordinary exit only
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('TEARDOWN', file=sys.stderr))\n"
        "from kerasfit.front.entry import main\n"
        "main()\n"
    )
    p = subprocess.run([sys.executable, "-c", code, "check", "--no-cache", "model.py"], cwd=project,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "TEARDOWN" not in p.stderr, p.stderr
    assert "model.py:2:6: KF101" in p.stdout and p.stdout.rstrip().endswith("fixable with the `--fix` option.")
    clean = subprocess.run([sys.executable, "-c", code, "check", "--no-cache", "clean.py"], cwd=project,
                           capture_output=True, text=True, timeout=120)
    assert clean.returncode == 0 and "TEARDOWN" not in clean.stderr
    # any other command exits as Python does
    other = subprocess.run([sys.executable, "-c", code, "--version"], cwd=project, capture_output=True, text=True,
                           timeout=120)
    assert other.returncode == 0 and "TEARDOWN" in other.stderr
