"""Tutorial-style scripts build without running: no training, no download, no plot.

The scripts in ``fixtures/crosscheck/scripts`` load data, plot and call ``fit`` at module
level, import packages that are not installed (matplotlib, tensorflow_datasets), and
write a marker file when run as a whole. Each is built once in the real child.
"""

from __future__ import annotations

import pytest

from kerasfit.crosscheck.api import BuildError, BuildOptions, run_child

pytestmark = pytest.mark.build


def test_mnist_style_script_builds_without_running(script):
    path = script("mnist_style.py")
    raw = run_child(path, BuildOptions(timeout=240))
    assert raw["entry"] == "model"
    assert not path.with_suffix(".ran").exists()  # the module's own side effect never ran
    assert not [n for n in raw["notes"] if n.startswith("refused")]  # no fit / download reached
    assert any("stubbed" in n and "matplotlib" in n for n in raw["notes"])
    assert any(op["op_type"] == "Conv2D" for op in raw["ops"])
    # The conv op maps back to its line in the script.
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if "layers.Conv2D(30" in t)
    assert any(op["source"] and op["source"]["line"] == line for op in raw["ops"])


def test_builder_with_arguments_and_a_model_made_inside_a_training_function(script):
    raw = run_child(script("segmentation_style.py"), BuildOptions(timeout=240))
    assert raw["entry"] == "model"
    assert any(op["op_type"] == "DepthwiseConv2dNative" for op in raw["ops"])
    raw = run_child(script("experiment_style.py"), BuildOptions(timeout=240))
    assert raw["entry"] == "create_classifier()"
    assert any(op["opcode"] == "dot" and op["extra"].get("batch") for op in raw["ops"])


def test_none_dims_get_a_stated_default_and_an_input_shape_overrides_it(script):
    path = script("fully_conv_style.py")
    raw = run_child(path, BuildOptions(timeout=240))
    assert raw["inputs"][0][1:] == [224, 224, 3]
    assert any("224×224, a stated default for images" in s for s in raw["said"])
    raw = run_child(path, BuildOptions(timeout=240, input_shape=((32, 32, 3),)))
    assert raw["inputs"][0][1:] == [32, 32, 3]
