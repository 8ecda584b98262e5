"""The build makes the model the script trains, never a silently smaller one, at the
script's own batch and sizes. Each synthetic script in ``fixtures/crosscheck/scripts``
mirrors a shape published examples take; each is built once in the real child.
"""

from __future__ import annotations

from importlib.metadata import version

import pytest

from kerasfit.crosscheck.api import BuildError, BuildOptions, run_child

pytestmark = pytest.mark.build


def _classes(raw, network):
    return next(n["classes"] for n in raw["networks"] if n["name"] == network)


def test_a_gan_builds_both_networks_through_its_own_train_step(script):
    raw = run_child(script("gan_train_step.py"), BuildOptions(timeout=240))
    assert [n["name"] for n in raw["networks"]] == ["discriminator", "generator"]
    assert "GlobalMaxPooling2D" in _classes(raw, "discriminator")
    assert "Conv2DTranspose" in _classes(raw, "generator")
    assert raw["built_how"].startswith("one step of the script's GAN.train_step on a batch of shape (32, 28, 28, 1)")
    # The step is the script's: the discriminator sees real and fake images, 2 × 32.
    convs = [op for op in raw["ops"] if op["opcode"] == "convolution" and op["layer"] == "conv2d"]
    assert any(op["shape"][0] == 64 for op in convs)
    assert any(op["layer"] == "conv2d_transpose" for op in raw["ops"])


def test_a_module_level_model_from_a_plainly_named_project_function(script):
    raw = run_child(script("project_function_model.py"), BuildOptions(timeout=240))
    assert raw["entry"] == "classifier"  # trained (compiled and fitted), not the augmentation
    assert raw["global_batch"] == 64  # fit(batch_size=64)
    assert sum(op["opcode"] == "convolution" and op["pass"] == "forward" for op in raw["ops"]) == 2


def test_a_failing_statement_on_the_model_path_fails_the_build_with_its_line(script):
    path = script("failing_statement.py")
    with pytest.raises(BuildError) as err:
        run_child(path, BuildOptions(timeout=240))
    message = str(err.value)
    assert "line 24" in message and "TypeError" in message and "ff_dim" in message


def test_the_batch_comes_from_the_script_and_a_class_count_from_the_data_is_a_stated_default(script):
    raw = run_child(script("script_batch.py"), BuildOptions(timeout=240))
    assert raw["global_batch"] == 32
    assert "batch 32 from the script (line 20: fit(batch_size=batch_size))" in raw["said"]
    assert "num_classes is read from data (line 11): built with a stated default of 10" in raw["notes"]
    assert [10] in [v for v in raw["variables"] if len(v) == 1]  # the Dense's bias: 10 classes
    # --batch-size only overrides
    raw = run_child(script("script_batch.py"), BuildOptions(timeout=240, batch_size=256))
    assert raw["global_batch"] == 256 and "batch 256 from --batch-size" in raw["said"]


def test_unknown_height_and_width_come_from_the_scripts_resize_else_a_stated_default(script, tmp_path):
    path = script("fully_conv_resize.py")
    raw = run_child(path, BuildOptions(timeout=240))
    assert raw["inputs"][0][1:] == [96, 80, 3]
    assert any("96×80, from the script (line 12: resize(96, 80))" in s for s in raw["said"])
    assert "batch 8 from the script (line 20: .batch(8) of the data fit gets)" in raw["said"]
    plain = tmp_path / "fully_conv_plain.py"
    plain.write_text(path.read_text().replace("tf.image.resize(image, (96, 80))", "image"))
    raw = run_child(plain, BuildOptions(timeout=240))
    assert raw["inputs"][0][1:] == [224, 224, 3]
    assert any("224×224, a stated default for images" in s for s in raw["said"])


def test_a_missing_package_whose_layer_is_in_the_model_is_named_to_install(script):
    with pytest.raises(BuildError) as err:
        run_child(script("missing_package_layer.py"), BuildOptions(timeout=240))
    assert "the model needs kerasfit_missing_addons, which is not installed" in str(err.value)


def test_a_reshape_that_hard_codes_the_batch_suggests_the_batch_size(script):
    path = script("reshape_batch.py")
    with pytest.raises(BuildError) as err:
        run_child(path, BuildOptions(timeout=240))
    assert "pass --batch-size 16" in str(err.value)
    raw = run_child(path, BuildOptions(timeout=240, batch_size=16))
    assert raw["global_batch"] == 16


def test_a_subclassed_model_whose_first_layer_takes_images_gets_a_stated_image_input(script):
    raw = run_child(script("subclassed_images.py"), BuildOptions(timeout=240))
    assert raw["inputs"] == [[16, 64, 64, 3]]  # its size from the script's own Resizing
    assert any("an RGB image, as its first layer (Resizing) takes" in s for s in raw["said"])
    assert any("64×64, from the script (line 14: Resizing(64, 64))" in s for s in raw["said"])


def test_a_subclassed_model_whose_first_layer_embeds_gets_token_ids_of_the_stated_length(tmp_path):
    path = tmp_path / "subclassed_tokens.py"
    path.write_text(
        "import keras\n"
        "class Recommender(keras.Model):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.users = keras.layers.Embedding(100, 32)\n"
        "        self.head = keras.layers.Dense(1)\n"
        "    def call(self, x):\n"
        "        return self.head(self.users(x[:, 0]))\n"
        "model = Recommender()\n"
        "model.compile(loss='mse')\n"
        "model.fit(data, batch_size=64)\n")
    raw = run_child(path, BuildOptions(timeout=240))
    assert raw["inputs"] == [[64, 128]]
    assert any("token ids, as its first layer (Embedding) takes" in s for s in raw["said"])
    assert any("sequence length 128, a stated default for sequences" in s for s in raw["said"])


def test_a_subclassed_models_input_is_the_shape_the_script_passes_its_builder_not_a_default(tmp_path):
    # the builder's input_shape never reaches the model (it builds on its first call): the
    # shape the script's own call passes the builder is what it states, not a 224x224 default
    path = tmp_path / "subclassed_builder.py"
    path.write_text(
        "import keras\n"
        "class Net(keras.Model):\n"
        "    def __init__(self, classes):\n"
        "        super().__init__()\n"
        "        self.conv = keras.layers.Conv2D(16, 3)\n"
        "        self.pool = keras.layers.GlobalAveragePooling2D()\n"
        "        self.head = keras.layers.Dense(classes)\n"
        "    def call(self, x):\n"
        "        return self.head(self.pool(self.conv(x)))\n"
        "def make_model(input_shape, classes=10):\n"
        "    model = Net(classes)\n"
        "    model.compile(optimizer='adam', loss='mse')\n"
        "    return model\n"
        "model = make_model((40, 48, 3))\n"
        "model.fit(images, labels, batch_size=8)\n")
    raw = run_child(path, BuildOptions(timeout=240))
    assert raw["inputs"] == [[8, 40, 48, 3]]
    assert any("the shape line 14 passes its builder (input_shape=(40, 48, 3))" in s for s in raw["said"])
    assert not any("a stated default for images" in s for s in raw["said"])


def test_an_input_shape_read_from_data_is_the_scripts_rank_with_a_stated_default_length(script):
    path = script("shape_from_data.py")
    raw = run_child(path, BuildOptions(timeout=240))
    # (rows, length, 1): the channel axis is the script's reshape, the length a stated default
    assert raw["inputs"] == [[32, 128, 1]]
    assert any(s.startswith("the shape of x_train is read from data (line 15") and "(rows, 128, 1)" in s
               and "a stated default for sequences" in s for s in raw["said"])
    assert [128, 10] in raw["variables"]  # the Dense sees the length: channels_first pooling
    # --input-shape gives the data's shape
    raw = run_child(path, BuildOptions(timeout=240, input_shape=((500, 1),)))
    assert raw["inputs"] == [[32, 500, 1]]


def test_a_script_that_fails_inside_the_installed_keras_names_the_version_that_builds_it(script):
    # keras.ops.tile with a tensor of repeats fails from Keras 3.13 for anyone who runs the
    # script; kerasfit builds what the script builds, so only another Keras version helps.
    path = script("tile_tensor_repeats.py")
    if tuple(int(p) for p in version("keras").split(".")[:2]) < (3, 13):
        assert run_child(path, BuildOptions(timeout=240))["ok"]
        return
    with pytest.raises(BuildError) as err:
        run_child(path, BuildOptions(timeout=240))
    message = str(err.value)
    assert "line 31 failed inside the installed package" in message
    assert message.endswith("keras.ops.tile with a tensor of repeats fails while a model is built on the "
                            "TensorFlow backend from Keras 3.13 (which iterates the repeats; Keras 3.12 "
                            "builds it); the script builds with pip install 'keras<3.13'")


def test_lookup_layers_run_outside_the_lowered_program_and_the_header_says_so(script):
    # XLA compiles no lookup table; a TPU runs them in the input pipeline. The model built
    # is still the script's, whole; the program lowered starts at the tables' outputs.
    raw = run_child(script("lookup_tables.py"), BuildOptions(timeout=240))
    assert raw["built_how"].endswith("lowered from the outputs of its IntegerLookup, StringLookup layers on: "
                                     "lookup tables, which XLA does not compile and a TPU runs in the input "
                                     "pipeline")
    classes = raw["networks"][0]["classes"]
    assert "StringLookup" in classes and "IntegerLookup" in classes and "Normalization" in classes
    # the program's inputs: the age (the Normalization is in the program) and the two multi-hots
    assert sorted(raw["inputs"]) == sorted([[16, 1], [16, 4], [16, 5]])
    # the first Dense reads 4 + 5 + 1 features
    assert [10, 32] in raw["variables"]


def test_a_layer_that_only_adds_a_loss_xla_cannot_compile_is_stood_for_by_the_stand_in_loss(script):
    raw = run_child(script("loss_layer.py"), BuildOptions(timeout=240))
    assert raw["built_how"] == ("a stand-in loss (the mean square of its outputs); without CTCLayer (line 28), "
                                "which only adds the script's loss: XLA cannot compile its CTCLoss, and the "
                                "stand-in loss stands for it")
    assert "CTCLayer" in raw["networks"][0]["classes"]  # the model built is still the script's
    assert raw["inputs"] == [[16, 64, 16, 1]]  # the labels only the loss read are not an input
    assert not any(s.startswith("input (None, None)") for s in raw["said"])
    assert any(op["layer"] == "conv2d" and op["pass"] == "kernel-gradient" for op in raw["ops"])


def test_a_model_of_several_inputs_names_the_flag_that_describes_each_and_builds_with_it(script):
    path = script("two_inputs.py")
    with pytest.raises(BuildError) as err:
        run_child(path, BuildOptions(timeout=240))
    assert ("the model has no known input shape and its call() takes 2 inputs (inputs[0], inputs[1]): pass "
            "--input-shape with each one's dims, separated by ';' (e.g. 100,80;50)") in str(err.value)
    raw = run_child(path, BuildOptions(timeout=240, input_shape=((40, 12), (10,))))
    assert raw["inputs"] == [[16, 40, 12], [16, 10]]
    assert [3, 12, 32] in raw["variables"]  # the Conv1D reads the source's 12 features
    assert "MultiHeadAttention" in raw["networks"][0]["classes"]


def test_a_shape_read_from_a_batch_of_data_not_loaded_names_input_shape_which_builds_it(script):
    path = script("shape_from_a_batch.py")
    with pytest.raises(BuildError) as err:
        run_child(path, BuildOptions(timeout=240))
    assert ("'model' depends on line 9, which the build does not run (loadtxt() reads files; its shape is read "
            "from data: pass --input-shape with its non-batch dims)") in str(err.value)
    raw = run_child(path, BuildOptions(timeout=240, input_shape=((120, 7),)))
    assert raw["inputs"] == [[256, 120, 7]]  # the script's batch_size
    assert "LSTM" in raw["networks"][0]["classes"]


def test_a_training_wrapper_whose_network_has_a_user_written_call_traces_its_own_train_step(script):
    raw = run_child(script("vae_train_step.py"), BuildOptions(timeout=240))
    assert raw["built_how"] == "one step of the script's VAE.train_step on a batch of shape (64, 28, 28, 1)"
    assert [n["name"] for n in raw["networks"]] == ["encoder", "decoder"]
    assert "Sampling" in next(n["classes"] for n in raw["networks"] if n["name"] == "encoder")


def test_a_distillation_script_reports_every_network_it_fits(script):
    # a teacher fitted, a student fitted through a Distiller (its compute_loss runs the
    # teacher), and the same student fitted from scratch: all three, each labelled
    raw = run_child(script("distiller.py"), BuildOptions(timeout=240))
    assert [n["name"] for n in raw["networks"]] == ["teacher", "student_scratch", "distiller"]
    assert "Distiller" in _classes(raw, "distiller")
    assert "input (None, 28, 28, 1): that of the models inside it, teacher, student" in raw["said"]
    # no batch_size passed to fit, which gets arrays: Keras's own default
    assert raw["global_batch"] == 32
    assert "batch 32: fit()'s default, as the script's fit (line 63) passes no batch_size" in raw["said"][-1]


def test_models_that_do_not_build_together_are_built_each_alone_and_the_header_says_so(script):
    raw = run_child(script("two_fitted.py"), BuildOptions(timeout=240))
    assert [n["name"] for n in raw["networks"]] == ["baseline"]
    assert raw["built_how"].startswith("each model the script trains built alone, as (baseline, wide) did not "
                                       "build together (the model has no known input shape")
    (assumed,) = raw["assumptions"]
    assert assumed.startswith("the script also trains wide (line 24), which did not build alone (the model has "
                              "no known input shape") and assumed.endswith(": it is not in this report")


def test_a_layer_sized_by_a_lookup_never_adapted_is_an_assumption_not_a_one_unit_head(script):
    raw = run_child(script("unadapted_lookup.py"), BuildOptions(timeout=240))
    assert [32, 1001] in raw["variables"]  # the default vocabulary and its OOV token, not 1 unit
    (assumed,) = raw["assumptions"]
    assert assumed == ("StringLookup string_lookup (made at line 10) was never adapted here, so its "
                       "vocabulary_size() is read as a stated default of 1000 tokens")


def test_a_training_step_that_does_not_trace_is_an_assumption_and_no_advice_is_drawn_from_it(script):
    from kerasfit.crosscheck.report import make_report, render_report

    raw = run_child(script("untraceable_step.py"), BuildOptions(timeout=240))
    assert [n["name"] for n in raw["networks"]] == ["head"]  # the network its step differentiates
    (assumed,) = raw["assumptions"]
    assert assumed.startswith("the script's Trainer.train_step did not trace on a batch of the networks' inputs "
                              "(OperatorNotAllowedInGraphError: ")
    assert "File " not in assumed  # the error's own line, not the user-code trace TensorFlow quotes
    report = make_report(raw)
    assert report.recommendations == []
    assert any(line.startswith("assumed: the script's Trainer.train_step") for line in
               render_report(report).splitlines()[:8])
