"""The `kerasfit` command line, run as the real console script in temporary projects."""

from __future__ import annotations

import json
import os
import re

import pytest

from kfhelpers import BAD, CLEAN, GOOD, NOFIX, assert_one_line_error, finding_lines, run, write

from kerasfit.project.check import CheckOptions, check_paths
from kerasfit.engine.registry import all_rules
from kerasfit.core.types import TARGETS

LINE_RE = re.compile(r"^(?P<path>[^:]+):(?P<row>\d+):(?P<col>\d+): (?P<code>KF\d{3})(?P<fix> \[\*\])?(?: \[\w+\])? \S")


@pytest.fixture
def project(tmp_path):
    write(tmp_path / "model.py", BAD + NOFIX)
    write(tmp_path / "clean.py", CLEAN)
    return tmp_path


# ---- check: report, summary, exit codes ------------------------------------------------


def test_check_reports_ruff_like_lines_summary_and_exit_1(project):
    r = run("check", "model.py", cwd=project)
    assert r.returncode == 1, r
    found = finding_lines(r.stdout)
    assert len(found) == 2, r.stdout
    m = [LINE_RE.match(line) for line in found]
    assert all(m), found
    # the fixable one: `keras.layers.BatchNormalization(fused=False)` starts at line 2, column 6 (1-based)
    assert found[0].startswith("model.py:2:6: KF101 [*] ")
    assert m[1]["row"] == "4" and m[1]["fix"] is None  # tf.nn.batch_normalization: no automatic fix
    assert "Found 2 finding(s)." in r.stdout
    assert "[*] 1 fixable with the `--fix` option." in r.stdout
    assert r.stderr == ""


def test_clean_file_exits_0(project):
    r = run("check", "clean.py", cwd=project)
    assert r.returncode == 0, r
    assert "All checks passed!" in r.stdout
    assert finding_lines(r.stdout) == []


def test_default_path_is_current_directory_and_findings_sorted(project):
    write(project / "pkg" / "a.py", BAD)
    r = run("check", "--no-cache", cwd=project)
    assert r.returncode == 1
    paths = [LINE_RE.match(line)["path"] for line in finding_lines(r.stdout)]
    assert paths == sorted(paths) and set(paths) == {"model.py", "pkg/a.py"}


def test_missing_path_is_reported_and_exits_1(project):
    # ruff's behaviour: a path that does not exist is a finding-like error, not a usage error
    r = run("check", "nope.py", cwd=project)
    assert r.returncode == 1, r
    assert "error: nope.py: no such file or directory" in r.stdout
    assert "could not be fully checked" in r.stdout
    j = run("check", "nope.py", "--output-format", "json", cwd=project)
    assert j.returncode == 1 and j.json() == [] and "nope.py: no such file or directory" in j.stderr


def test_missing_path_does_not_hide_the_other_paths(project):
    r = run("check", "nope.py", "clean.py", cwd=project)
    assert r.returncode == 1  # clean.py is clean, but nope.py could not be checked
    assert "nope.py: no such file or directory" in r.stdout
    r = run("check", "nope.py", "model.py", cwd=project)
    assert r.returncode == 1
    assert len(finding_lines(r.stdout)) == 2  # model.py was still checked


def test_exit_zero_keeps_findings_but_exits_0(project):
    r = run("check", "model.py", "--exit-zero", cwd=project)
    assert r.returncode == 0
    assert len(finding_lines(r.stdout)) == 2


def test_quiet_prints_findings_only(project):
    r = run("check", "model.py", "-q", cwd=project)
    assert r.returncode == 1
    assert r.lines and all(": KF" in line for line in r.lines)


# ---- fixes ------------------------------------------------------------------------------


def test_fix_directory_in_place_then_second_fix_changes_nothing(tmp_path):
    a = write(tmp_path / "src" / "a.py", BAD)
    b = write(tmp_path / "src" / "deep" / "b.py", "# header\n" + BAD + "x = 1  # keep me\n")
    r = run("check", "src/", "--fix", cwd=tmp_path)
    assert r.returncode == 0, r
    assert "2 fixed, 0 remaining" in r.stdout
    assert a.read_text() == GOOD
    assert b.read_text() == "# header\n" + GOOD + "x = 1  # keep me\n"
    before = {p: p.read_bytes() for p in (a, b)}
    again = run("check", "src/", "--fix", cwd=tmp_path)
    assert again.returncode == 0
    assert "All checks passed!" in again.stdout
    assert {p: p.read_bytes() for p in (a, b)} == before


def test_fix_leaves_unfixable_findings_and_exits_1(project):
    r = run("check", "model.py", "--fix", cwd=project)
    assert r.returncode == 1
    assert "1 fixed, 1 remaining" in r.stdout
    text = (project / "model.py").read_text()
    assert "fused=True" in text and "tf.nn.batch_normalization" in text
    assert [LINE_RE.match(line)["row"] for line in finding_lines(r.stdout)] == ["4"]


def test_diff_prints_unified_diff_and_writes_nothing(project):
    before = (project / "model.py").read_bytes()
    r = run("check", "model.py", "--diff", cwd=project)
    assert r.returncode == 1
    assert r.stdout.startswith("--- a/model.py\n+++ b/model.py\n@@ ")
    assert "\n-bn = keras.layers.BatchNormalization(fused=False)(keras.layers.Conv2D(8, 3)(x))\n" in r.stdout
    assert "\n+bn = keras.layers.BatchNormalization(fused=True)(keras.layers.Conv2D(8, 3)(x))\n" in r.stdout
    assert "Would fix 1 finding(s) in 1 file(s)." in r.stderr
    assert (project / "model.py").read_bytes() == before
    clean = run("check", "clean.py", "--diff", cwd=project)
    assert clean.returncode == 0 and clean.stdout == ""


def _unsafe_examples():
    out = []
    for code, rule in all_rules().items():
        for i, ex in enumerate(rule.INVALID):
            if ex.unsafe and ex.expected_fix and not ex.options:
                out.append(pytest.param(rule, ex, id=f"{code}-{i}"))
    return out[:1]


@pytest.mark.parametrize("rule,ex", _unsafe_examples() or [pytest.param(None, None, marks=pytest.mark.skip("no rule has an unsafe-fix example yet"))])
def test_unsafe_fixes_hidden_then_applied_with_flag(tmp_path, rule, ex):
    """Uses a registered rule's own unsafe example, so it follows the rule pack as it grows."""
    f = write(tmp_path / "m.py", ex.code)
    target = ("--target", ex.target) if ex.target else ()
    r = run("check", "m.py", "--select", rule.code, *target, cwd=tmp_path)
    assert r.returncode == 1
    assert "hidden fix(es) can be enabled with the `--unsafe-fixes` option" in r.stdout
    assert run("check", "m.py", "--select", rule.code, "--fix", *target, cwd=tmp_path).returncode == 1
    assert f.read_text() == ex.code  # unsafe fixes need the flag
    r = run("check", "m.py", "--select", rule.code, "--fix", "--unsafe-fixes", *target, cwd=tmp_path)
    assert f.read_text() == ex.expected_fix, r.stdout


# ---- rule selection ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "flags,expect",
    [
        (["--ignore", "KF101"], 0),
        (["--select", "KF1"], 2),
        (["--select", "KF101", "--ignore", "KF1"], 0),  # ignore wins
        (["--ignore", "KF101", "--extend-select", "KF101"], 0),
        (["--select", "kf101,KF1"], 2),  # comma lists, any case
    ],
)
def test_select_ignore_extend_select(project, flags, expect):
    r = run("check", "model.py", "--no-cache", *flags, "--exit-zero", cwd=project)
    assert len(finding_lines(r.stdout, "KF101")) == expect, r.stdout


def test_select_all_enables_every_registered_rule(project):
    r = run("check", "model.py", "--no-cache", "--select", "ALL", "--statistics", cwd=project)
    assert r.returncode == 1
    assert len(finding_lines(r.stdout, "KF101")) == 2


@pytest.mark.parametrize("flag,value", [("--select", "KF999"), ("--ignore", "E501"), ("--extend-select", "XYZ")])
def test_unknown_selector_is_usage_error(project, flag, value):
    r = run("check", "model.py", flag, value, cwd=project)
    assert r.returncode == 2
    assert_one_line_error(r.stderr, value, "kerasfit rules")
    assert r.stdout == ""


# ---- targets ------------------------------------------------------------------------------


@pytest.mark.parametrize("target", list(TARGETS))
def test_every_target_is_accepted(project, target):
    r = run("check", "model.py", "--target", target, "--no-cache", cwd=project)
    assert r.returncode == 1, r.stderr
    # KF101 applies to every hardware family
    assert len(finding_lines(r.stdout, "KF101")) == 2


def test_unknown_target_is_one_clear_line(project):
    r = run("check", "model.py", "--target", "tpu-v9", cwd=project)
    assert r.returncode == 2
    line = assert_one_line_error(r.stderr, "tpu-v9", *TARGETS)
    assert line.startswith("kerasfit: error:")


# ---- statistics and cache --------------------------------------------------------------------


def test_statistics_counts_rules_and_prefiltered_files(project):
    write(project / "plain.py", "def add(a, b):\n    return a + b\n")
    write(project / "README.txt", "tensorflow\n")  # not python: never a candidate
    r = run("check", ".", "--statistics", "--no-cache", cwd=project)
    assert r.returncode == 1
    row = next(line for line in r.lines if "unfused-batchnorm" in line and ": KF" not in line)
    assert row.split()[:2] == ["2", "KF101"] and "[*]" in row
    files = next(line for line in r.lines if line.startswith("files:"))
    assert "3 seen" in files and "2 checked" in files and "1 skipped by the prefilter" in files


def _stats_line(r) -> str:
    return next(line for line in (r.stdout + r.stderr).splitlines() if line.startswith("files:"))


def test_cache_warm_run_same_results_then_invalidated(project):
    first = run("check", "model.py", "--statistics", cwd=project)
    warm = run("check", "model.py", "--statistics", cwd=project)
    if "(1 from cache)" not in _stats_line(warm):  # a rule module edited between the runs changes the key
        warm = run("check", "model.py", "--statistics", cwd=project)
    assert "(1 from cache)" in _stats_line(warm)
    assert finding_lines(warm.stdout) == finding_lines(first.stdout)
    assert warm.returncode == first.returncode == 1
    assert (project / ".kerasfit_cache").is_dir()

    # the selection is part of the key
    sel = run("check", "model.py", "--statistics", "--ignore", "KF101", cwd=project)
    assert "(0 from cache)" in _stats_line(sel) and sel.returncode == 0
    # so is the content
    write(project / "model.py", "# edited\n" + BAD)
    edited = run("check", "model.py", "--statistics", cwd=project)
    assert "(0 from cache)" in _stats_line(edited)
    assert finding_lines(edited.stdout)[0].startswith("model.py:3:6: KF101 [*] ")
    # --no-cache neither reads it
    nc = run("check", "model.py", "--statistics", "--no-cache", cwd=project)
    assert "(0 from cache)" in _stats_line(nc)


def test_no_cache_writes_no_cache_directory(project):
    run("check", "model.py", "--no-cache", cwd=project)
    assert not (project / ".kerasfit_cache").exists()


# ---- a repository's cache must not write outside it (issue 17, item 4) ---------------------


def _cache_warning(r) -> str:
    lines = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert len(lines) == 1, r.stderr
    assert "symbolic link" in lines[0] and "without the cache" in lines[0], lines
    return lines[0]


def test_a_committed_cache_file_symlink_is_not_followed(project, tmp_path_factory):
    victim = tmp_path_factory.mktemp("outside") / "victim.txt"
    victim.write_text("precious\n")
    cache = project / ".kerasfit_cache"
    cache.mkdir()
    (cache / "results-v3.json").symlink_to(victim)
    r = run("check", "model.py", cwd=project)
    assert r.returncode == 1 and len(finding_lines(r.stdout)) == 2, r  # checked, uncached
    assert "results-v3.json" in _cache_warning(r)
    assert victim.read_text() == "precious\n"
    assert (cache / "results-v3.json").is_symlink()


def test_a_committed_cache_directory_symlink_is_not_used(project, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (project / ".kerasfit_cache").symlink_to(outside, target_is_directory=True)
    r = run("check", "model.py", cwd=project)
    assert r.returncode == 1 and len(finding_lines(r.stdout)) == 2, r
    assert ".kerasfit_cache" in _cache_warning(r)
    assert list(outside.iterdir()) == []


def test_a_dangling_gitignore_symlink_in_the_cache_is_not_created(project, tmp_path_factory):
    target = tmp_path_factory.mktemp("outside") / "created-by-kerasfit"
    cache = project / ".kerasfit_cache"
    cache.mkdir()
    (cache / ".gitignore").symlink_to(target)
    r = run("check", "model.py", cwd=project)
    assert r.returncode == 1 and len(finding_lines(r.stdout)) == 2, r
    # a directory kerasfit did not create gets no .gitignore: the link is not even looked at
    assert "warning" not in r.stderr, r
    assert not target.exists() and (cache / ".gitignore").is_symlink()
    assert (cache / "results-v3.json").is_file()


def test_a_cache_directory_kerasfit_creates_gets_a_gitignore(project):
    r = run("check", "model.py", cwd=project)
    assert r.returncode == 1, r
    assert (project / ".kerasfit_cache" / ".gitignore").read_text() == "*\n"


@pytest.mark.parametrize("where", [".", "src"])
def test_cache_dir_in_a_source_directory_writes_no_gitignore_there(project, where):
    """``cache-dir = "."`` used to write a ``.gitignore`` of ``*`` into the project root, and
    git stopped showing every file of the project (issue 30, item 5)."""
    (project / "src").mkdir()
    (project / "src" / "keep.py").write_text("x = 1\n")
    (project / "pyproject.toml").write_text(f'[tool.kerasfit]\ncache-dir = "{where}"\n')
    r = run("check", "model.py", cwd=project)
    assert r.returncode == 1 and len(finding_lines(r.stdout)) == 2, r
    assert not (project / where / ".gitignore").exists()
    assert (project / where / "results-v3.json").is_file()  # the cache itself is kept there


def test_cache_writes_use_unpredictable_exclusive_temporaries(project, tmp_path_factory):
    """A link planted at the name the old code used for its temporary
    (``rules-manifest.<pid>.tmp``) is neither followed nor renamed into place."""
    outside = tmp_path_factory.mktemp("outside")
    cache = project / ".kerasfit_cache"
    cache.mkdir()
    for name in ("rules-manifest", "results-v3"):  # this process's pid: checked in-process below
        (cache / f"{name}.{os.getpid()}.tmp").symlink_to(outside / name)
    result = check_paths([project / "model.py"], CheckOptions(cache_dir=cache, jobs=1))
    assert list(outside.iterdir()) == []
    assert len(result.diagnostics) == 2
    for name in ("rules-manifest.json", "results-v3.json"):
        assert (cache / name).is_file() and not (cache / name).is_symlink()
        assert json.loads((cache / name).read_text())
    assert sorted(p.name for p in cache.iterdir() if not p.is_symlink()) == [
        "results-v3.json", "rules-manifest.json"]  # (no .gitignore: kerasfit did not create the directory)
    assert result.warnings == []


def test_the_build_cache_does_not_follow_a_link_either(tmp_path, tmp_path_factory, monkeypatch):
    """``report``'s cache lives in ``<cache>/build``: a link there is refused the same way."""
    from pathlib import Path

    from kerasfit.core.cachefs import CacheDir
    from kerasfit.crosscheck import api as build_api

    outside = tmp_path_factory.mktemp("outside")
    (tmp_path / ".kerasfit_cache").mkdir()
    (tmp_path / ".kerasfit_cache" / "build").symlink_to(outside, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KERASFIT_CACHE_DIR", raising=False)
    cache = CacheDir(Path.cwd() / ".kerasfit_cache").child("build")
    build_api._write_json(cache, "latest-0.json", {"key": "0" * 32})
    assert list(outside.iterdir()) == []
    assert len(cache.warnings) == 1 and "build" in cache.warnings[0]


# ---- configuration flags ---------------------------------------------------------------------


def test_config_flag_uses_that_file_only(project):
    write(project / "pyproject.toml", '[tool.kerasfit]\nselect = ["KF101"]\n')
    write(project / "other" / "kerasfit.toml", 'ignore = ["KF101"]\n')
    assert run("check", "model.py", "--no-cache", cwd=project).returncode == 1
    r = run("check", "model.py", "--no-cache", "--config", "other/kerasfit.toml", cwd=project)
    assert r.returncode == 0, r.stdout
    bad = run("check", "model.py", "--config", "missing.toml", cwd=project)
    assert bad.returncode == 2
    assert_one_line_error(bad.stderr, "missing.toml")


def test_isolated_ignores_pyproject(project):
    write(project / "pyproject.toml", '[tool.kerasfit]\nignore = ["KF101"]\n')
    assert run("check", "model.py", "--no-cache", cwd=project).returncode == 0
    r = run("check", "model.py", "--no-cache", "--isolated", cwd=project)
    assert r.returncode == 1 and len(finding_lines(r.stdout)) == 2


# ---- stdin -------------------------------------------------------------------------------------


def test_stdin_with_filename(tmp_path):
    r = run("check", "-", "--stdin-filename", "pkg/model.py", cwd=tmp_path, stdin=BAD)
    assert r.returncode == 1
    assert finding_lines(r.stdout)[0].startswith("pkg/model.py:2:6: KF101 [*] ")
    fixed = run("check", "-", "--stdin-filename", "pkg/model.py", "--fix", cwd=tmp_path, stdin=BAD)
    assert fixed.returncode == 0
    assert fixed.stdout == GOOD  # --fix on stdin prints the fixed file
    assert not (tmp_path / "pkg").exists()


def test_stdin_diff_uses_stdin_text(tmp_path):
    r = run("check", "-", "--diff", cwd=tmp_path, stdin=BAD)
    assert r.returncode == 1
    assert "-bn = keras.layers.BatchNormalization(fused=False)" in r.stdout
    assert "+bn = keras.layers.BatchNormalization(fused=True)" in r.stdout


def test_stdin_honours_config_of_stdin_filename(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.kerasfit]\nper-file-ignores = { "gen/*" = ["KF101"] }\n')
    assert run("check", "-", "--stdin-filename", "gen/m.py", cwd=tmp_path, stdin=BAD).returncode == 0
    assert run("check", "-", "--stdin-filename", "src/m.py", cwd=tmp_path, stdin=BAD).returncode == 1


# ---- rules / explain --------------------------------------------------------------------------


def test_rules_json_lists_every_rule_with_metadata(tmp_path):
    r = run("rules", "--output-format", "json", cwd=tmp_path)
    assert r.returncode == 0
    rows = r.json()
    assert [row["code"] for row in rows] == sorted(all_rules())
    for row in rows:
        assert {"code", "name", "summary", "fix", "targets", "default"} <= set(row)
        assert re.fullmatch(r"KF\d{3}", row["code"]) and row["summary"]
        assert row["fix"] in (None, "safe", "unsafe", "display-only")
        assert row["default"] in ("on", "off")
        assert set(row["targets"]) <= {"tpu", "gpu", "gaudi"} and row["targets"]
    kf101 = next(row for row in rows if row["code"] == "KF101")
    assert kf101["name"] == "unfused-batchnorm" and kf101["fix"] == "safe" and kf101["default"] == "on"


def test_rules_text_table(tmp_path):
    r = run("rules", cwd=tmp_path)
    assert r.returncode == 0
    header = r.lines[0]
    for col in ("code", "name", "fix", "targets", "default", "summary"):
        assert col in header
    for code, rule in all_rules().items():
        assert any(code in line and rule.name in line for line in r.lines), code


@pytest.mark.parametrize("key", ["KF101", "kf101", "unfused-batchnorm"])
def test_explain_by_code_or_name(tmp_path, key):
    r = run("explain", key, cwd=tmp_path)
    assert r.returncode == 0
    assert r.lines[0] == "# KF101 unfused-batchnorm"
    for section in ("What it does", "Why is this slow on the accelerator", "Example", "Use instead", "Fix safety"):
        assert section in r.stdout
    assert "Fix: safe" in r.stdout


def test_explain_unknown_rule_exits_2(tmp_path):
    r = run("explain", "KF999", cwd=tmp_path)
    assert r.returncode == 2
    assert_one_line_error(r.stderr, "KF999")


def test_bad_output_format_is_usage_error(project):
    r = run("check", "model.py", "--output-format", "xml", cwd=project)
    assert r.returncode == 2
    assert "xml" in r.stderr


def test_parallel_run_matches_serial(tmp_path):
    for i in range(8):
        write(tmp_path / f"m{i}.py", "\n" * i + BAD)
    serial = run("check", ".", "--no-cache", "--output-format", "json", cwd=tmp_path)
    par = run("check", ".", "--no-cache", "--output-format", "json", "-j", "2", cwd=tmp_path, env={"KERASFIT_NO_PARALLEL": ""})
    assert serial.returncode == par.returncode == 1
    assert json.loads(par.stdout) == json.loads(serial.stdout)
    assert [d["location"]["row"] for d in par.json()] == list(range(2, 10))


def test_files_are_dealt_biggest_first_in_shrinking_chunks():
    from kerasfit.project.check import deal

    sizes = [(i * 37) % 101 for i in range(182)]
    chunks = deal(sizes, 2)
    assert sorted(i for c in chunks for i in c) == list(range(182))  # each file once
    flat = [sizes[i] for c in chunks for i in c]
    assert flat == sorted(sizes, reverse=True)  # biggest first
    lengths = [len(c) for c in chunks]
    # a worker taking the next chunk when done: many chunks, the last ones single files
    assert lengths == sorted(lengths, reverse=True) and lengths[-1] == 1 and len(chunks) > 2 * 3
    assert deal([5, 1, 3], 4) == [[0], [2], [1]] and deal([], 2) == []


def test_a_cached_result_keeps_each_findings_kind_and_typed_fields(tmp_path):
    """The cache holds what a finding was rendered from: a warm run's diagnostics equal the
    cold run's, the tuples among their fields included."""
    from kerasfit.project.check import CheckOptions, check_paths

    path = write(tmp_path / "m.py", "import tensorflow as tf\nx = tf.keras.layers.Dense(100)(x)\n")
    opts = CheckOptions(isolated=True, cache_dir=tmp_path / "cache", jobs=1)
    cold = check_paths([str(path)], opts)
    warm = check_paths([str(path)], opts)
    assert [f.cached for f in warm.files] == [True]
    (d,) = cold.diagnostics
    assert (d.finding, d.fields["width"], d.fields["padded_to"]) == ("OffMultiple", 100, (104, 128))
    assert warm.diagnostics == cold.diagnostics
