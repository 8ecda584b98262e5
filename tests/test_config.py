"""`[tool.kerasfit]` configuration: discovery walking up, overrides, validation, discovery excludes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kfhelpers import BAD, assert_one_line_error, run, write

from kerasfit.project.check import CheckOptions, check_paths, settings_for
from kerasfit.project.config import ConfigError, Selection, select_rules
from kerasfit.ruleapi.rule import Rule
from kerasfit.core.types import Applicability


def check(*paths: Path, **kw):
    kw.setdefault("use_cache", False)
    sel = kw.pop("selection", None)
    opts = CheckOptions(selection=sel or Selection(), **kw)
    return check_paths(list(paths), opts)


def flagged(result) -> set[str]:
    return {Path(d.filename).as_posix() for d in result.diagnostics if d.code == "KF101"}


# ---- selection from config ----------------------------------------------------------------


@pytest.mark.parametrize(
    "table,expect",
    [
        ("", True),
        ('select = ["KF101"]', True),
        ('select = ["KF2"]', False),
        ('ignore = ["KF101"]', False),
        ('ignore = ["KF1"]', False),
        ('select = ["KF2"]\nextend-select = ["KF101"]', True),
        ('extend-select = ["KF101"]\nignore = ["KF101"]', False),
        ('extend-ignore = ["KF101"]', False),
        ('per-file-ignores = { "m.py" = ["KF101"] }', False),
        ('per-file-ignores = { "other.py" = ["KF101"] }', True),
    ],
)
def test_selection_keys(tmp_path, table, expect):
    if "KF2" in table and not any(c.startswith("KF2") for c in _codes()):
        pytest.skip("no KF2xx rule registered yet")
    write(tmp_path / "pyproject.toml", f"[tool.kerasfit]\n{table}\n")
    f = write(tmp_path / "m.py", BAD)
    assert bool(flagged(check(f))) is expect


def _codes():
    from kerasfit.engine.registry import all_rules

    return list(all_rules())


def test_config_found_walking_up_from_each_file(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.kerasfit]\nignore = ["KF101"]\n')
    f = write(tmp_path / "a" / "b" / "c" / "m.py", BAD)
    assert not flagged(check(f))
    # a pyproject without [tool.kerasfit] does not stop the walk
    write(tmp_path / "a" / "pyproject.toml", '[project]\nname = "x"\n')
    g = write(tmp_path / "a" / "n.py", BAD)
    assert not flagged(check(g))


def test_nested_pyproject_applies_to_files_under_it(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.kerasfit]\nselect = ["KF101"]\n')
    write(tmp_path / "legacy" / "pyproject.toml", '[tool.kerasfit]\nignore = ["KF101"]\n')
    top = write(tmp_path / "top.py", BAD)
    inner = write(tmp_path / "legacy" / "sub" / "old.py", BAD)
    res = check(tmp_path)
    assert flagged(res) == {top.as_posix()}
    assert inner.as_posix() not in flagged(res)
    # the nearest table wins entirely (no merging), like ruff without `extend`
    assert "KF101" not in settings_for(inner).codes
    assert settings_for(top).codes == ("KF101",)


def test_per_file_ignores_globs_relative_to_config(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.kerasfit]\nper-file-ignores = { "tests/*" = ["KF101"], "*_gen.py" = ["KF1"] }\n')
    keep = write(tmp_path / "src" / "model.py", BAD)
    write(tmp_path / "tests" / "test_model.py", BAD)
    write(tmp_path / "src" / "model_gen.py", BAD)
    assert flagged(check(tmp_path)) == {keep.as_posix()}


def test_target_from_config_and_cli_override(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.kerasfit]\ntarget = "tpu-v6e"\n')
    f = write(tmp_path / "m.py", BAD)
    assert settings_for(f).target == "tpu-v6e"
    assert settings_for(f, CheckOptions(target="gpu")).target == "gpu"
    assert settings_for(write(tmp_path.parent / f"{tmp_path.name}-other" / "m.py", BAD)).target == "tpu-v5e"


def test_cli_selection_overrides_config(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.kerasfit]\nignore = ["KF101"]\n')
    f = write(tmp_path / "m.py", BAD)
    assert not flagged(check(f))
    # --select replaces the config's select, but the config's ignore still applies (ruff's model)
    assert not flagged(check(f, selection=Selection(select=["KF101"])))
    # (configs are cached per run: a second project, not an edit of the first)
    other = tmp_path.parent / f"{tmp_path.name}-b"
    others = [c for c in _codes() if c != "KF101"]
    if not others:
        pytest.skip("needs a second registered rule")
    write(other / "pyproject.toml", f'[tool.kerasfit]\nselect = ["{others[0]}"]\n')
    g = write(other / "m.py", BAD)
    assert not flagged(check(g))
    assert flagged(check(g, selection=Selection(select=["KF101"])))
    assert flagged(check(g, selection=Selection(extend_select=["KF101"])))


def test_cli_flags_override_config_end_to_end(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.kerasfit]\ntarget = "gaudi"\nextend-select = ["KF101"]\n')
    write(tmp_path / "m.py", BAD)
    assert run("check", "m.py", "--no-cache", cwd=tmp_path).returncode == 1
    assert run("check", "m.py", "--no-cache", "--ignore", "KF101", cwd=tmp_path).returncode == 0
    bad = run("check", "m.py", "--no-cache", "--target", "tpu-v3", cwd=tmp_path)
    assert bad.returncode == 2
    assert_one_line_error(bad.stderr, "--target", "tpu-v3")


# ---- validation: one line, naming the file, exit 2 ---------------------------------------------


@pytest.mark.parametrize(
    "table,needle",
    [
        ('selct = ["KF101"]', "selct"),
        ('select = ["KF999"]', "KF999"),
        ('ignore = ["E501"]', "E501"),
        ('per-file-ignores = { "x.py" = ["KF777"] }', "KF777"),
        ('target = "tpu-v9"', "tpu-v9"),
        ("select = 3", "select"),
        ("batch-size = -1", "batch-size"),
        ("[tool.kerasfit.build]\nentrypoint = 'm:f'", "entrypoint"),
        ("select = [", "TOML"),
    ],
)
def test_invalid_config_is_one_line_naming_the_file(tmp_path, table, needle):
    cfg = write(tmp_path / "pyproject.toml", f"[tool.kerasfit]\n{table}\n")
    write(tmp_path / "m.py", BAD)
    with pytest.raises(ConfigError) as exc:
        check(tmp_path / "m.py")
    msg = str(exc.value)
    assert "\n" not in msg and str(cfg) in msg and needle in msg


@pytest.mark.parametrize("table,needle", [('selct = ["KF101"]', "selct"), ('select = ["KF999"]', "KF999"), ('target = "tpu-v9"', "tpu-v9")])
def test_invalid_config_cli_exit_2(tmp_path, table, needle):
    write(tmp_path / "pyproject.toml", f"[tool.kerasfit]\n{table}\n")
    write(tmp_path / "m.py", BAD)
    r = run("check", ".", cwd=tmp_path)
    assert r.returncode == 2
    line = assert_one_line_error(r.stderr, needle, "pyproject.toml")
    assert str(tmp_path) in line
    assert r.stdout == ""


def test_config_error_in_nested_project_names_nested_file(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.kerasfit]\nselect = ["KF101"]\n')
    nested = write(tmp_path / "sub" / "pyproject.toml", "[tool.kerasfit]\nfoo = 1\n")
    write(tmp_path / "sub" / "m.py", BAD)
    with pytest.raises(ConfigError, match="foo") as exc:
        check(tmp_path)
    assert str(nested) in str(exc.value)


# ---- every value checked, with one line naming the key (issue 30, item 10) ----------------------


@pytest.mark.parametrize(
    "table,key",
    [
        ('[tool.kerasfit.build]\ntimeout = "x"', "timeout"),
        ("[tool.kerasfit.build]\ntimeout = -1", "timeout"),
        ("[tool.kerasfit.build]\ntimeout = 0", "timeout"),
        ("[tool.kerasfit.build]\ntimeout = nan", "timeout"),
        ("[tool.kerasfit.build]\ntimeout = inf", "timeout"),
        ("[tool.kerasfit.build]\ntimeout = true", "timeout"),
        ("[tool.kerasfit.build]\nentry = 1", "entry"),
        ('[tool.kerasfit.build]\nentry = ""', "entry"),
        ("[tool.kerasfit.build]\nbatch-size = 0", "batch-size"),
        ("[tool.kerasfit.build]\ncores = 0", "cores"),
        ('[tool.kerasfit.build]\ncores = "8"', "cores"),
        ('[tool.kerasfit.build]\ndtype = "float16"', "dtype"),
        ("[tool.kerasfit.build]\nmemory-limit = 0", "memory-limit"),
        ('[tool.kerasfit.build]\ninput-shape = "256,0,3"', "input-shape"),
        ("[tool.kerasfit.build]\ninput-shape = [256, 256, 3]", "input-shape"),
        ('cache-dir = "\\u0000"', "cache-dir"),
        ('cache-dir = "a\\u0000b"', "cache-dir"),
        ('baseline = "b\\u0000.json"', "baseline"),
        ("cores = 0", "cores"),
        ("batch-size = 0", "batch-size"),
        ("max-file-size = 0", "max-file-size"),
    ],
)
def test_every_config_value_is_checked(tmp_path, table, key):
    """Used to be internal errors (timeout = "x", entry = 1, cache-dir = "\\u0000") or
    accepted (timeout = -1 or nan, batch-size = 0, cores = 0 in [tool.kerasfit.build])."""
    write(tmp_path / "pyproject.toml", f"[tool.kerasfit]\n{table}\n")
    write(tmp_path / "m.py", BAD)
    r = run("check", "--no-cache", "m.py", cwd=tmp_path)
    assert r.returncode == 2, r
    assert_one_line_error(r.stderr, "pyproject.toml", key)
    assert "internal error" not in r.stderr


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf"])
def test_build_timeout_on_the_command_line_is_checked(tmp_path, value):
    write(tmp_path / "m.py", BAD)
    r = run("check", "--no-cache", "--build", "--build-timeout", value, "m.py", cwd=tmp_path)
    assert r.returncode == 2, r
    assert_one_line_error(r.stderr, "--build-timeout")


# ---- a configured baseline: inside the project, a regular file (issue 30, item 7) ---------------


@pytest.mark.parametrize("value", ["/dev/zero", "../outside.json", "../missing.json", "link.json"])
def test_a_project_baseline_outside_the_project_is_refused_unread(tmp_path, value):
    """``/dev/zero`` was read until memory ran out; a path outside answered whether a file
    exists there. Both are now one line, the same whether the file exists or not."""
    project = tmp_path / "project"
    write(tmp_path / "outside.json", '{"format": "kerasfit-baseline", "version": 1, "findings": []}')
    write(project / "pyproject.toml", f'[tool.kerasfit]\nbaseline = "{value}"\n')
    write(project / "m.py", BAD)
    (project / "link.json").symlink_to("/dev/zero")
    r = run("check", "--no-cache", "m.py", cwd=project)
    assert r.returncode == 2, r
    assert_one_line_error(r.stderr, "pyproject.toml", "baseline", "outside the project")


def test_a_project_baseline_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.kerasfit]\nbaseline = "base.json"\n')
    write(tmp_path / "m.py", BAD)
    os.mkfifo(tmp_path / "base.json")
    r = run("check", "--no-cache", "m.py", cwd=tmp_path)
    assert r.returncode == 2, r
    assert_one_line_error(r.stderr, "base.json", "a FIFO, not a regular file")


def test_a_baseline_named_by_the_user_may_lie_anywhere(tmp_path):
    project = tmp_path / "project"
    write(project / "m.py", BAD)
    base = tmp_path / "elsewhere" / "base.json"
    base.parent.mkdir()
    assert run("check", "--no-cache", "m.py", "--write-baseline", base, cwd=project).returncode == 0
    assert run("check", "--no-cache", "m.py", "--baseline", base, cwd=project).returncode == 0


# ---- cache-dir: a project's cache stays in the project (issue 17, item 4) ------------------------


@pytest.mark.parametrize("value", ["../x", "~/kf-cache", "ABSOLUTE", "var/../../x", "link/cache"])
def test_project_cache_dir_outside_the_project_is_a_config_error(tmp_path, value):
    project = tmp_path / "project"
    outside = tmp_path / "outside"
    outside.mkdir()
    value = value.replace("ABSOLUTE", str(outside / "abs"))
    write(project / "pyproject.toml", f'[tool.kerasfit]\ncache-dir = "{value}"\n')
    write(project / "model.py", BAD)
    (project / "link").symlink_to(outside, target_is_directory=True)  # resolves outside
    home = tmp_path / "home"
    home.mkdir()
    r = run("check", "model.py", cwd=project, env={"HOME": str(home)})
    assert r.returncode == 2
    assert_one_line_error(r.stderr, "pyproject.toml", "cache-dir", "outside the project")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "outside", "project"]
    assert list(outside.iterdir()) == [] and list(home.iterdir()) == []


def test_cache_dir_may_point_anywhere_from_the_user_not_the_project(tmp_path):
    project = tmp_path / "project"
    write(project / "model.py", BAD)
    flag, env, cfg = tmp_path / "flag", tmp_path / "env", tmp_path / "user.toml"
    assert run("check", "model.py", "--cache-dir", flag, cwd=project).returncode == 1
    assert run("check", "model.py", cwd=project, env={"KERASFIT_CACHE_DIR": str(env)}).returncode == 1
    write(cfg, f'cache-dir = "{tmp_path / "cfg"}"\n')  # --config: a file the user chose
    assert run("check", "model.py", "--config", cfg, cwd=project).returncode == 1
    for d in (flag, env, tmp_path / "cfg"):
        assert (d / "results-v3.json").is_file(), d


# ---- discovery ------------------------------------------------------------------------------------


def test_discovery_recurses_and_skips_tooling_dirs(tmp_path):
    expected = {
        write(tmp_path / "a.py", BAD),
        write(tmp_path / "pkg" / "sub" / "b.py", BAD),
        write(tmp_path / "pkg" / "stubs.pyi", BAD),
    }
    for skipped in (".git/hook.py", "build/lib/c.py", "node_modules/x/d.py", "venv/e.py", ".venv/f.py",
                    "myenv/lib/g.py", "__pycache__/h.py", "pkg.egg-info/i.py", "dist/j.py"):
        write(tmp_path / skipped, BAD)
    write(tmp_path / "myenv" / "pyvenv.cfg", "home = /usr\n")  # a virtualenv with any name
    write(tmp_path / "notes.txt", BAD)
    res = check(tmp_path)
    assert flagged(res) == {p.as_posix() for p in expected}


def test_exclude_globs(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.kerasfit]\nextend-exclude = ["generated", "*_pb2.py", "src/legacy/*"]\n')
    keep = write(tmp_path / "src" / "model.py", BAD)
    for p in ("generated/x.py", "src/model_pb2.py", "src/legacy/old.py", "build/y.py"):
        write(tmp_path / p, BAD)
    assert flagged(check(tmp_path)) == {keep.as_posix()}


def test_exclude_replaces_defaults_but_extend_exclude_adds(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.kerasfit]\nexclude = ["skipme"]\n')
    write(tmp_path / "skipme" / "x.py", BAD)
    keep = write(tmp_path / "m.py", BAD)
    res = check(tmp_path)
    assert keep.as_posix() in flagged(res)
    assert not any("skipme" in f for f in flagged(res))


def test_excluded_file_named_explicitly_is_checked_unless_force_exclude(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.kerasfit]\nextend-exclude = ["gen_*.py"]\n')
    f = write(tmp_path / "gen_model.py", BAD)
    assert flagged(check(f))
    assert not flagged(check(f, force_exclude=True))


def test_prefilter_skips_files_without_tensorflow_or_keras(tmp_path):
    write(tmp_path / "plain.py", "import numpy as np\nx = np.zeros(3)\n")
    write(tmp_path / "m.py", BAD)
    write(tmp_path / "mentions.py", "# uses tensorflow later\nx = 1\n")
    res = check(tmp_path)
    assert res.prefiltered == 1
    skipped = [Path(f.filename).name for f in res.files if f.skipped]
    assert skipped == ["plain.py"]


def test_isolated_ignores_every_pyproject(tmp_path):
    write(tmp_path / "pyproject.toml", "[tool.kerasfit]\nbogus = 1\n")
    f = write(tmp_path / "m.py", BAD)
    assert flagged(check(f, isolated=True))


# ---- rule selection semantics with rules off by default ----------------------------------------


def _rule(code: str, default: bool = True, targets=frozenset({"tpu", "gpu", "gaudi"})) -> type[Rule]:
    return type(f"R{code}", (Rule,), {"code": code, "name": f"r-{code.lower()}", "message": "m",
                                     "default_enabled": default, "targets": targets,
                                     "fix_safety": Applicability.SAFE})


def test_select_semantics_with_off_by_default_rules():
    rules = {c: _rule(c, default=not c.startswith("KF9")) for c in ("KF101", "KF102", "KF201", "KF901")}
    rules["KF103"] = _rule("KF103", targets=frozenset({"gpu"}))

    def on(family="tpu", **sel):
        return [r.code for r in select_rules(rules, Selection(**sel), family)]

    assert on() == ["KF101", "KF102", "KF201"]  # KF9xx off by default; KF103 is GPU-only
    assert on("gpu") == ["KF101", "KF102", "KF201", "KF103"]
    assert on(select=["ALL"]) == ["KF101", "KF102", "KF201", "KF901"]
    assert on(select=["KF9"]) == ["KF901"]
    assert on(extend_select=["KF901"]) == ["KF101", "KF102", "KF201", "KF901"]
    assert on(select=["ALL"], ignore=["KF1"]) == ["KF201", "KF901"]
    assert on(select=["KF1"], extend_select=["KF901"], ignore=["KF102"]) == ["KF101", "KF901"]
    assert [r.code for r in select_rules(rules, Selection(), "tpu", ["KF2"])] == ["KF101", "KF102"]


def test_select_all_cli_enables_off_by_default_rules(tmp_path):
    """Any registered off-by-default rule is enabled by --select ALL (checked via settings)."""
    from kerasfit.engine.registry import all_rules

    f = write(tmp_path / "m.py", BAD)
    rules = all_rules()
    default = set(settings_for(f, CheckOptions(isolated=True)).codes)
    everything = set(settings_for(f, CheckOptions(isolated=True, selection=Selection(select=["ALL"]))).codes)
    expected_default = {c for c, r in rules.items() if r.default_enabled and r.applies_to("tpu")}
    assert default == expected_default
    assert everything == {c for c, r in rules.items() if r.applies_to("tpu")}
