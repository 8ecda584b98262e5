"""--build as a stage of check_paths: same config, same selection and suppression."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kerasfit.project.check import CheckOptions, Resolver, check_paths
from kerasfit.project.buildstage import BuildRequest, build_options
from kerasfit.project.config import ConfigError, Selection

CNN = Path(__file__).resolve().parents[2] / "fixtures" / "crosscheck" / "keras_cnn.py"

PYPROJECT = """
[tool.kerasfit]
target = "tpu-v4"
batch-size = 128
cores = 8

[tool.kerasfit.build]
entry = "build_model"
timeout = 1
"""


def options_for(tmp_path, request: BuildRequest, **kw):
    path = tmp_path / "model.py"
    path.write_text(CNN.read_text())
    resolver = Resolver(CheckOptions(**kw), manifest_cache=False)
    return build_options(request, resolver.config_for(path.parent), resolver.settings_for(path))


def test_build_options_come_from_the_files_config(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    opts = options_for(tmp_path, BuildRequest())
    assert (opts.entry, opts.target, opts.batch_size, opts.cores, opts.timeout) == (
        "build_model", "tpu-v4", 128, 8, 1.0)


def test_a_command_line_timeout_equal_to_the_default_is_still_honoured(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    assert options_for(tmp_path, BuildRequest(timeout=300.0)).timeout == 300.0


def test_config_and_isolated_reach_the_build(tmp_path):
    other = tmp_path / "other.toml"
    other.write_text(PYPROJECT.replace('entry = "build_model"', 'entry = "make_it"'))
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    assert options_for(tmp_path, BuildRequest(), config_file=other).entry == "make_it"
    isolated = options_for(tmp_path, BuildRequest(), isolated=True)
    assert (isolated.entry, isolated.target, isolated.timeout) == (None, "tpu-v5e", 300.0)


def test_a_bad_build_dtype_in_config_is_a_one_line_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT + 'dtype = "float8"\n')
    with pytest.raises(ConfigError, match="dtype must be float32 or bfloat16"):
        options_for(tmp_path, BuildRequest())


@pytest.mark.parametrize("value, shapes", [
    ("2754,129;199", ((2754, 129), (199,))), ("256x256x3", ((256, 256, 3),)), ("2754,129;", None)])
def test_input_shape_in_config_describes_one_input_or_several_separated_by_semicolons(tmp_path, value, shapes):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT + f'input-shape = "{value}"\n')
    if shapes is not None:
        assert options_for(tmp_path, BuildRequest()).input_shape == shapes
        return
    with pytest.raises(ConfigError, match=r"input-shape must be positive dims like '256,256,3' \(inputs separated"):
        options_for(tmp_path, BuildRequest())


@pytest.mark.build
def test_build_findings_are_selected_and_suppressed_like_static_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("KERASFIT_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "model.py"
    shutil.copy(CNN, path)
    request = BuildRequest(batch_size=128, cores=8)  # per-core batch 16: KF302

    def codes(**kw):
        result = check_paths([path], CheckOptions(build=request, isolated=True, **kw))
        assert not result.errors, result.errors
        return {d.code for d in result.diagnostics}

    assert "KF302" in codes()
    assert "KF302" not in codes(selection=Selection(ignore=["KF302"]))  # the build is cached now
    assert codes(selection=Selection(select=["KF101"])) == set()
    # ... and a noqa comment on the line it lands on
    text = path.read_text().splitlines()
    first = check_paths([path], CheckOptions(build=request, isolated=True)).diagnostics
    row = next(d.row for d in first if d.code == "KF302")
    text[row - 1] += "  # noqa: KF302"
    path.write_text("\n".join(text) + "\n")
    assert "KF302" not in codes()
