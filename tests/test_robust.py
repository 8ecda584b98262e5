"""No input crashes the run or the server (issue 8, items 6-10): parse budget, dying
workers, folding budget, hostile trees, malformed configs and caches, stdin."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from kfhelpers import BAD, GOOD, run, write

from kerasfit.project.check import CheckOptions, check_paths
from kerasfit.engine.settings import LintSettings
from kerasfit.engine.lint import lint_source
from kerasfit.engine.registry import all_rules
from kerasfit.semantic.folding import QUESTION_STEPS

AND_CHAIN = "import tf_keras as keras\nx = " + " and ".join(["a"] * 10_000) + "\n"


def error_lines(r) -> list[str]:
    return [line for line in (r.stdout + r.stderr).splitlines() if line.startswith("error:")]


# ---- item 6: the parse budget -------------------------------------------------------------


def test_long_boolean_chain_is_one_kf001_with_jobs_1(tmp_path):
    """10,000 ``and`` operands overflowed libcst's C stack: rc 139, nothing printed."""
    write(tmp_path / "chain.py", AND_CHAIN + BAD.split("\n", 1)[1])
    write(tmp_path / "ok.py", BAD)
    r = run("check", ".", "--no-cache", "-j", "1", cwd=tmp_path)
    assert r.returncode == 1, (r.returncode, r.stderr)
    kf001 = [line for line in r.lines if " KF001 " in line]
    assert kf001 == [kf001[0]] and kf001[0].startswith("chain.py:2:1: KF001"), r.stdout
    assert "levels deep" in kf001[0]
    # the rest of that file and the other file are still checked
    assert any(line.startswith("chain.py:3:6: KF101") for line in r.lines), r.stdout
    assert any(line.startswith("ok.py:2:6: KF101") for line in r.lines), r.stdout


def test_a_batch_check_parses_every_file_on_one_thread_with_the_parse_stack(tmp_path, monkeypatch):
    """A thread started per parse cost ~10% of libcst's parse time; the batch runs on one
    thread with the parse stack, and the deep file is still refused alone there."""
    write(tmp_path / "chain.py", AND_CHAIN + BAD.split("\n", 1)[1])
    for i in range(4):
        write(tmp_path / f"ok{i}.py", BAD)
    started: list[str] = []
    start = threading.Thread.start

    def counting_start(self: threading.Thread) -> None:
        started.append(self.name)
        start(self)

    monkeypatch.setattr(threading.Thread, "start", counting_start)
    res = check_paths([str(tmp_path)], CheckOptions(use_cache=False, jobs=1))
    assert started.count("kerasfit-parse") == 1
    by_file = {os.path.basename(r.filename): sorted({d.code for d in r.diagnostics}) for r in res.files}
    assert by_file["chain.py"] == ["KF001", "KF101"]
    assert all(by_file[f"ok{i}.py"] == ["KF101"] for i in range(4))


def test_long_chain_in_the_language_servers_path_returns(tmp_path):
    """check_source is what the server's lint thread calls; it died with SIGSEGV."""
    code = textwrap.dedent(
        """
        import sys
        from kerasfit.project.check import check_source
        src = "import tf_keras as keras\\nx = " + " and ".join(["a"] * 10000) + "\\n"
        res = check_source(src, "m.py")
        print([(d.code, d.row) for d in res.diagnostics])
        """
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, (p.returncode, p.stderr[-500:])
    assert p.stdout.strip() == "[('KF001', 2)]"


def test_fix_leaves_the_masked_statement_alone(tmp_path):
    f = write(tmp_path / "m.py", AND_CHAIN + "bn = keras.layers.BatchNormalization(fused=False)\n")
    r = run("check", "m.py", "--no-cache", "--fix", "--unsafe-fixes", cwd=tmp_path)
    assert r.returncode == 1  # the KF001 remains
    assert f.read_text() == AND_CHAIN + "bn = keras.layers.BatchNormalization(fused=True)\n"


@pytest.mark.parametrize(
    "expr",
    [
        " + ".join(["a"] * 400),  # libcst: seconds to parse, RecursionError in codegen
        "-" * 600 + "1",
        "f" + "()" * 600,
        "a" + ".b" * 600,
        "1 if a else " * 400 + "1",
        "lambda: " * 400 + "1",
    ],
    ids=["plus-chain", "unary", "calls", "attributes", "ternary", "lambda"],
)
def test_deep_statements_are_refused_alone(expr):
    src = f"import tf_keras as keras\ndef f():\n    y = {expr}\n    return keras.layers.BatchNormalization(fused=False)\n"
    diags = lint_source(src, "m.py", LintSettings([all_rules()["KF101"]])).diagnostics
    assert [(d.code, d.row) for d in diags] == [("KF001", 3), ("KF101", 4)]


def test_implicit_concatenation_past_libcsts_limit_is_refused_alone():
    """libcst refuses ~4,000 implicit concatenations; CPython accepts them."""
    src = "import tf_keras as keras\nmsg = (" + " ".join(['"s"'] * 5000) + ")\nbn = keras.layers.BatchNormalization(fused=False)\n"
    diags = lint_source(src, "m.py", LintSettings([all_rules()["KF101"]])).diagnostics
    assert [(d.code, d.row) for d in diags] == [("KF001", 2), ("KF101", 3)]
    assert diags[0].message.startswith("Not checked")


def test_valid_code_libcst_refuses_costs_only_its_statement(monkeypatch):
    """With the budget out of the way, libcst itself refuses ~4,000 concatenations that
    CPython accepts: that statement is masked and the parse retried."""
    from kerasfit.engine import parseguard

    monkeypatch.setattr(parseguard, "DEPTH_BUDGET", 10**9)
    src = "import tf_keras as keras\ndef f():\n    return (" + " ".join(['"s"'] * 5000) + ")\nbn = keras.layers.BatchNormalization(fused=False)\n"
    diags = lint_source(src, "m.py", LintSettings([all_rules()["KF101"]])).diagnostics
    assert [(d.code, d.row, d.message) for d in diags] == [
        ("KF001", 3, "Not checked: valid Python that libcst cannot parse"),
        ("KF101", 4, diags[1].message),
    ]


def test_ordinary_code_is_not_refused():
    """Depth counts as libcst builds it: a long flat call or list is not deep."""
    args = ", ".join(f"a{i}" for i in range(3000))
    src = f"import tf_keras as keras\nx = [{args}]\ny = f({args})\nz = a < b < c\n" + BAD.split("\n", 1)[1]
    diags = lint_source(src, "m.py", LintSettings([all_rules()["KF101"]])).diagnostics
    assert [d.code for d in diags] == ["KF101"]


# ---- item 6: a dying worker never hangs the pool ------------------------------------------


def test_a_worker_killed_by_a_native_crash_is_one_error_and_the_rest_is_checked(tmp_path, monkeypatch):
    """With the budget switched off and an 8 MB parse stack, libcst really segfaults in a
    worker: the old pool.map then waited forever."""
    from kerasfit.engine import parseguard
    from kerasfit.core import parsestack

    monkeypatch.setattr(parseguard, "DEPTH_BUDGET", 10**9)
    monkeypatch.setattr(parsestack, "PARSE_STACK_BYTES", 8 * 1024 * 1024)
    monkeypatch.delenv("KERASFIT_NO_PARALLEL", raising=False)
    write(tmp_path / "boom.py", "import tf_keras as keras\nx = " + " and ".join(["a"] * 30_000) + "\n")
    for i in range(7):
        write(tmp_path / f"ok{i}.py", BAD)
    box: dict = {}
    t = threading.Thread(
        target=lambda: box.setdefault("r", check_paths([tmp_path], CheckOptions(use_cache=False, jobs=2))), daemon=True
    )
    t.start()
    t.join(180)
    assert not t.is_alive(), "the pool hung on a dead worker"
    files = {Path(f.filename).name: f for f in box["r"].files}
    assert files["boom.py"].error == f"{tmp_path / 'boom.py'}: the checker process died on this file, not checked"
    for i in range(7):
        assert [d.code for d in files[f"ok{i}.py"].diagnostics] == ["KF101"]


# ---- item 7: folding through call sites is memoised and bounded ---------------------------


def _helpers(levels: int, sites: int, leaf: str, site: str) -> str:
    lines = ["import tensorflow as tf", "", f"def h{levels}(n):", f"    return {leaf}", ""]
    for k in range(levels - 1, 0, -1):
        lines.append(f"def h{k}(n):")
        lines.extend("    " + site.format(k=k + 1, j=j) for j in range(sites))
        lines.append("")
    return "\n".join(lines)


class _Counted:
    """Counts calls of a context function and stops a run that would take minutes."""

    def __init__(self, fn, limit: int = 200_000):
        self.fn, self.calls, self.limit = fn, 0, limit

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls > self.limit:
            raise AssertionError(f"more than {self.limit} steps: not memoised / not bounded")
        return self.fn(*args, **kwargs)


def test_a_parameter_threaded_through_nine_helper_levels_folds_once_per_site(monkeypatch):
    """8 call sites per level, 9 levels: 8^7 evaluations (minutes) without a memo."""
    from kerasfit.semantic.values import Values

    src = _helpers(9, 8, "tf.keras.layers.Conv2D(n, 3)", "h{k}(n)") + "\nh1(30)\n"
    counted = _Counted(Values.deref)
    monkeypatch.setattr(Values, "deref", lambda self, *a, **k: counted(self, *a, **k))
    diags = lint_source(src, "m.py", LintSettings([all_rules()["KF102"]])).diagnostics
    # still folds 30 through every level; passed by name, it is reported once, at the layer
    assert [(d.code, d.row) for d in diags] == [("KF102", 4)]
    assert (diags[0].fields["width"], diags[0].fields["unit"]) == (30, "filters")
    assert counted.calls < 2_000


def test_an_exponential_origin_question_is_not_followed(monkeypatch):
    """Each helper returns the next from 8 branches: 8^8 paths to one tf.pad."""
    import libcst as cst

    from kerasfit.semantic import valueflow
    from kerasfit.semantic.model import SemanticModel

    branches = "if c{j}:\n        return h{k}(n)"
    src = _helpers(9, 8, "tf.pad(n, [[0, 0], [1, 1], [1, 1], [0, 0]])", branches) + "\ny = h1(x)\nz = 3 + 5\n"
    counted = _Counted(valueflow.returns)
    monkeypatch.setattr(valueflow, "returns", counted)
    module = cst.parse_module(src)
    ctx = SemanticModel(module, "m.py", source=src)
    ys = module.body[-2].body[0].value
    assert ctx.values.origins(ys) == []  # past the budget: not followed
    assert counted.calls <= QUESTION_STEPS
    # the budget is per question: the next one is still answered
    assert ctx.values.const(module.body[-1].body[0].value) == 8


# ---- item 8: hostile trees ----------------------------------------------------------------


def _run_without_dac_override(*args: str, cwd: Path):
    """Permission bits mean nothing to root: drop the capabilities that bypass them."""
    import shutil

    if os.geteuid() != 0:
        return run(*args, cwd=cwd)
    from kfhelpers import Run, kerasfit_argv

    caps = "-dac_override,-dac_read_search"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERASFIT_")}
    env.update(NO_COLOR="1", KERASFIT_NO_PARALLEL="1")
    p = subprocess.run(
        [shutil.which("setpriv") or "setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}", "--", *kerasfit_argv(), *args],
        cwd=cwd, capture_output=True, text=True, env=env, timeout=120,
    )
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    return Run(p.returncode, p.stdout, p.stderr)


def test_symlink_loops_fifos_and_sockets_are_one_line_each(tmp_path):
    import socket

    write(tmp_path / "model.py", BAD)
    (tmp_path / "loop_a.py").symlink_to("loop_b.py")
    (tmp_path / "loop_b.py").symlink_to("loop_a.py")
    (tmp_path / "self.py").symlink_to("self.py")
    os.mkfifo(tmp_path / "pipe.py")
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / "sock.py"))
        r = run("check", ".", "--no-cache", cwd=tmp_path)
    finally:
        sock.close()
    assert r.returncode == 1, r.stderr
    errors = sorted(error_lines(r))
    assert errors == [
        "error: loop_a.py: symbolic link loop, skipped",
        "error: loop_b.py: symbolic link loop, skipped",
        "error: pipe.py: a FIFO, not a source file, skipped",
        "error: self.py: symbolic link loop, skipped",
        "error: sock.py: a socket, not a source file, skipped",
    ], r.stdout + r.stderr
    assert any(line.startswith("model.py:2:6: KF101") for line in r.lines)


def test_a_fifo_named_on_the_command_line_does_not_block(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    write(tmp_path / "model.py", BAD)
    r = run("check", "pipe.py", "model.py", "--no-cache", cwd=tmp_path)
    assert r.returncode == 1
    assert error_lines(r) == ["error: pipe.py: a FIFO, not a source file, skipped"]


@pytest.mark.skipif(os.geteuid() == 0 and not __import__("shutil").which("setpriv"), reason="root without setpriv")
def test_unlistable_and_unsearchable_directories_are_one_line_each(tmp_path):
    root = tmp_path
    try:
        write(root / "model.py", BAD)
        for name, mode in (("nolist", 0o311), ("nosearch", 0o644)):
            d = root / name
            d.mkdir()
            write(d / "inner.py", BAD)
            d.chmod(mode)
        r = _run_without_dac_override("check", ".", "--no-cache", cwd=root)
    finally:
        for name in ("nolist", "nosearch"):
            (root / name).chmod(0o755)
    assert r.returncode == 1, r.stdout + r.stderr
    errors = sorted(error_lines(r))
    assert errors == [
        "error: nolist: cannot list directory: Permission denied, skipped",
        "error: nosearch: cannot search directory: Permission denied, skipped",
    ], r.stdout + r.stderr
    assert any(line.startswith("model.py:2:6: KF101") for line in r.lines)


@pytest.mark.skipif(os.geteuid() == 0 and not __import__("shutil").which("setpriv"), reason="root without setpriv")
def test_a_file_named_inside_an_unsearchable_directory_is_one_line_and_the_rest_is_checked(tmp_path):
    """Issue 17 item 8a, for real where capabilities can be dropped (tests/test_fix_failures.py injects it)."""
    write(tmp_path / "locked" / "a.py", BAD)
    write(tmp_path / "b.py", BAD)
    (tmp_path / "locked").chmod(0o644)
    try:
        r = _run_without_dac_override("check", "locked/a.py", "b.py", "--no-cache", cwd=tmp_path)
    finally:
        (tmp_path / "locked").chmod(0o755)
    assert r.returncode == 1, r.stdout + r.stderr
    assert error_lines(r) == ["error: locked/a.py: cannot search a directory on its path: Permission denied, skipped"]
    assert any(line.startswith("b.py:2:6: KF101") for line in r.lines)


# ---- item 9: malformed configs and caches ---------------------------------------------------


@pytest.mark.parametrize(
    "text,how,expected",
    [
        ("tool = 1\n", "pyproject", "[tool] must be a table"),
        ("[tool]\nkerasfit = 1\n", "config", "[tool.kerasfit] must be a table"),
        ("[tool]\nkerasfit = 1\n", "pyproject", "[tool.kerasfit] must be a table"),
        ("[tool.kerasfit]\nselect = " + "[" * 5000 + "]" * 5000 + "\n", "config", "nested too deeply"),
        (b"[tool.kerasfit]\nselect = ['KF1']  # caf\xe9\n", "config", "not valid UTF-8"),
        ("[tool.kerasfit]\ncache-dir = 3\n", "pyproject", "cache-dir must be a string"),
    ],
    ids=["tool-int", "kerasfit-int-config", "kerasfit-int", "deep-list", "latin1", "cache-dir-int"],
)
def test_malformed_config_is_one_line_naming_the_file(tmp_path, text, how, expected):
    write(tmp_path / "model.py", BAD)
    write(tmp_path / "pyproject.toml", text)
    args = ("--config", "pyproject.toml") if how == "config" else ()
    r = run("check", "model.py", "--no-cache", *args, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "pyproject.toml" in lines[0] and expected in lines[0], r.stderr
    assert "internal error" not in r.stderr


def test_cache_of_the_wrong_shape_is_ignored_and_rewritten(tmp_path):
    import json

    from kerasfit import __version__

    write(tmp_path / "model.py", BAD)
    cache = tmp_path / ".kerasfit_cache"
    first = run("check", "model.py", cwd=tmp_path)
    assert first.returncode == 1
    results = cache / "results-v3.json"
    for bad in (
        [1, 2],
        {"kerasfit": __version__, "files": []},
        {"kerasfit": __version__, "files": {str((tmp_path / "model.py").resolve()): 7}},
        {"kerasfit": __version__, "files": {str((tmp_path / "model.py").resolve()): {"key": json.loads(results.read_text())["files"][str((tmp_path / "model.py").resolve())]["key"], "diagnostics": [{"code": 1}]}}},
    ):
        results.write_text(json.dumps(bad))
        r = run("check", "model.py", cwd=tmp_path)
        assert r.returncode == 1 and r.lines[0].startswith("model.py:2:6: KF101"), (bad, r.stdout, r.stderr)
        again = run("check", "model.py", cwd=tmp_path)  # rewritten: a valid, cached answer
        assert again.stdout == r.stdout
        assert isinstance(json.loads(results.read_text())["files"], dict)


def test_an_empty_rule_manifest_does_not_switch_every_rule_off(tmp_path):
    import json

    write(tmp_path / "model.py", BAD)
    assert run("check", "model.py", cwd=tmp_path).returncode == 1
    manifest = tmp_path / ".kerasfit_cache" / "rules-manifest.json"
    data = json.loads(manifest.read_text())
    data["rules"] = []
    manifest.write_text(json.dumps(data))
    write(tmp_path / "model.py", BAD + "\n")  # not answered from the results cache
    r = run("check", "model.py", cwd=tmp_path)
    assert r.returncode == 1 and any(" KF101 " in line for line in r.lines), r.stdout + r.stderr


def test_cached_findings_carry_this_runs_spelling_of_the_path(tmp_path):
    write(tmp_path / "model.py", BAD)
    absolute = str(tmp_path / "model.py")
    assert run("check", absolute, cwd=tmp_path).lines[0].startswith(f"{absolute}:2:6")
    r = run("check", "model.py", "--output-format", "github", cwd=tmp_path)
    assert "file=model.py," in r.stdout, r.stdout
    j = run("check", "model.py", "--output-format", "json", cwd=tmp_path).json()
    assert [d["filename"] for d in j] == ["model.py"]


# ---- item 10 (static part): stdin and --diff ------------------------------------------------


def _run_bytes(*args: str, cwd: Path, stdin: bytes):
    from kfhelpers import kerasfit_argv

    env = {k: v for k, v in os.environ.items() if not k.startswith("KERASFIT_")}
    env.update(NO_COLOR="1", KERASFIT_NO_PARALLEL="1")
    return subprocess.run([*kerasfit_argv(), *args], cwd=cwd, input=stdin, capture_output=True, env=env, timeout=120)


def test_non_utf8_stdin_is_one_line_and_fix_passes_it_through(tmp_path):
    data = b"import tf_keras as keras\nname = 'caf\xe9'\nbn = keras.layers.BatchNormalization(fused=False)\n"
    p = _run_bytes("check", "-", "--stdin-filename", "m.py", cwd=tmp_path, stdin=data)
    assert p.returncode == 1
    assert p.stderr.decode().strip() == "error: m.py: not valid UTF-8 (byte 36), not checked"
    fixed = _run_bytes("check", "--fix", "-", cwd=tmp_path, stdin=data)
    assert fixed.returncode == 1
    assert fixed.stdout == data  # never an empty buffer back
    assert b"internal error" not in fixed.stderr and b"not valid UTF-8" in fixed.stderr


def test_fix_from_stdin_prints_the_fixed_text(tmp_path):
    p = _run_bytes("check", "--fix", "-", cwd=tmp_path, stdin=BAD.encode())
    assert p.stdout.decode() == GOOD


def test_diff_counts_unreadable_files_and_syntax_errors(tmp_path):
    write(tmp_path / "broken.py", "import tensorflow as tf\ndef f(:\n")
    assert run("check", "--diff", "broken.py", "--no-cache", cwd=tmp_path).returncode == 1
    write(tmp_path / "latin1.py", b"import tensorflow as tf\nx = 'caf\xe9'\n")
    r = run("check", "--diff", "latin1.py", "--no-cache", cwd=tmp_path)
    assert r.returncode == 1 and "latin1.py" in r.stderr
    write(tmp_path / "clean.py", "import tensorflow as tf\nx = 1\n")
    assert run("check", "--diff", "clean.py", "--no-cache", cwd=tmp_path).returncode == 0


def test_a_strings_pieces_answered_early_decide_the_same():
    """The depth walk skips the tokenizer for a string with too few quotes to exceed the
    room left: whatever it answers then must flag exactly what the full count flags."""
    from kerasfit.engine.parseguard import _string_pieces

    src = (
        'a = "x" "y" \'z\' "w"\n'
        'b = ("""one""" \'two\'\n     "three" f"{a}" "five")\n'
        'c = """a docstring-like block\nwith "quoted" words and it\'s long enough"""\n'
        'd = ("a" "b"\n     "c")\n'
    )
    lines = src.splitlines(keepends=True)
    strings = [n for n in ast.walk(ast.parse(src)) if isinstance(n, (ast.Constant, ast.JoinedStr))
               and isinstance(getattr(n, "value", ""), (str, bytes))]
    assert len(strings) >= 4
    for node in strings:
        full = _string_pieces(node, lines, 3)
        for room in range(0, 8):
            early = _string_pieces(node, lines, 3, room)
            assert (early > room) == (full > room), (ast.get_source_segment(src, node), room, early, full)
