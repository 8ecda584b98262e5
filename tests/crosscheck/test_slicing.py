"""The script slicer: what a build runs of a tutorial-style script. Pure Python, no TensorFlow."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from kerasfit.crosscheck.candidates import find_candidates, trained_names
from kerasfit.crosscheck.sizes import script_sizes
from kerasfit.crosscheck.slicing import denial, slice_source

SCRIPTS = Path(__file__).resolve().parents[2] / "fixtures" / "crosscheck" / "scripts"


def kept(source: str, **kw) -> str:
    return ast.unparse(slice_source(textwrap.dedent(source), **kw).tree)


def test_training_downloads_and_plots_are_not_kept():
    out = kept("""
        import keras
        import matplotlib.pyplot as plt
        (x, y), _ = keras.datasets.mnist.load_data()
        plt.imshow(x[0])
        n = 10
        model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Dense(n)])
        model.compile(loss="mse")
        model.fit(x, y)
        model.save("m.keras")
    """)
    assert "fit" not in out and "load_data" not in out and "imshow" not in out and "save" not in out
    assert "n = 10" in out and "model.compile" in out and "import matplotlib" in out


def test_line_numbers_survive_so_ops_map_back_to_the_source():
    src = "import keras\n\nx = open('f')\nunits = 3\nmodel = keras.Sequential([keras.layers.Dense(units)])\n"
    s = slice_source(src)
    assert [st.lineno for st in s.tree.body] == [1, 4, 5]


def test_a_needed_statement_that_downloads_is_skipped_and_said():
    s = slice_source(textwrap.dedent("""
        import keras
        (x, y), _ = keras.datasets.mnist.load_data()
        shape = x.shape[1:]
        model = keras.Sequential([keras.Input(shape), keras.layers.Dense(3)])
    """))
    assert s.skipped == {3: "load_data() downloads data"}
    assert "shape = x.shape[1:]" in ast.unparse(s.tree)


def test_functions_defined_below_their_caller_are_kept():
    out = kept("""
        def build_model():
            return block(UNITS)

        def unused():
            return open("x")

        def block(n):
            return n

        UNITS = 4
    """)
    assert "def block" in out and "UNITS = 4" in out and "def unused" not in out


def test_with_and_if_blocks_are_sliced_inside_and_main_guards_never_run():
    out = kept("""
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.layers.Dense(2)])
            model.fit(1)
        if __name__ == "__main__":
            model.fit(2)
    """)
    assert "with strategy.scope():" in out and "fit" not in out


def test_global_configuration_calls_are_kept():
    out = kept("""
        import os
        import keras
        os.environ["KERAS_BACKEND"] = "tensorflow"
        keras.mixed_precision.set_global_policy("mixed_float16")
        keras.backend.set_image_data_format("channels_first")
        model = keras.Sequential([keras.layers.Dense(2)])
    """)
    assert "set_global_policy" in out and "set_image_data_format" in out and "KERAS_BACKEND" in out


@pytest.mark.parametrize("source, expected", [
    # builder functions with no required arguments come first
    ("def get_model(n=3):\n    pass\nmodel = keras.Sequential()\n", ["get_model()", "model"]),
    # a model made from arguments at module level; augmentation pipelines come last
    ("aug = keras.Sequential()\ndef get_model(a, b):\n    pass\nmodel = get_model(1, 2)\n", ["model", "aug"]),
    # instances of the file's own Model subclasses (training wrappers) after direct models
    ("class GAN(keras.Model):\n    pass\ngan = GAN()\ngenerator = keras.Sequential()\n", ["generator", "gan"]),
    # a model made inside a training function from module-level names
    ("N = 3\ndef create_classifier(n):\n    pass\ndef run():\n    model = create_classifier(N)\n    model.fit()\n",
     ["create_classifier(N)"]),
    # ... but not from the function's own locals
    ("def create_classifier(n):\n    pass\ndef run(k):\n    model = create_classifier(k)\n", []),
    ("x = 1\n", []),
])
def test_candidates_best_first(source, expected):
    assert [c.expr for c in find_candidates(ast.parse(source))] == expected


def test_denial_names_why():
    assert denial(ast.parse("h = model.fit(x)").body[0]) == "fit() trains"
    assert denial(ast.parse("plt.figure()").body[0]) == "figure() plots"
    assert denial(ast.parse("ds = tfds.load('x')").body[0]) == "tfds.load() is plotting or I/O"
    # a function body only runs when called
    assert denial(ast.parse("def f():\n    model.fit(x)").body[0]) is None


@pytest.mark.parametrize("name, entry", [
    ("mnist_style.py", "model"),
    ("segmentation_style.py", "model"),
    ("experiment_style.py", "create_classifier()"),
    ("fully_conv_style.py", "model"),
])
def test_tutorial_scripts_slice_to_their_model(name, entry):
    s = slice_source((SCRIPTS / name).read_text(), name)
    assert s.entry == entry
    out = ast.unparse(s.tree)
    for never in (".fit(", "load_data", "listdir", "imshow", "write_text", "tfds.load", "save("):
        assert never not in out, never


def test_the_model_the_script_trains_comes_first_the_last_fitted_first():
    src = textwrap.dedent("""
        import keras
        def assemble(width):
            return keras.Sequential([keras.layers.Dense(width)])
        def build_model():
            return keras.Sequential([keras.layers.Dense(1)])
        def run_experiment(model):
            model.compile(loss="mse")
            return model.fit(x)
        augment = keras.Sequential([keras.layers.RandomFlip()])
        baseline = assemble(8)
        run_experiment(baseline)
        net = assemble(16)
        history = run_experiment(net)
        export = keras.Sequential([net])
        export.compile()
    """)
    tree = ast.parse(src)
    assert trained_names(tree) == {"baseline": (True, 12), "net": (True, 14), "export": (False, 16)}
    assert [c.expr for c in find_candidates(tree)][:4] == ["net", "baseline", "export", "build_model()"]


def test_sizes_the_script_states():
    sizes = script_sizes(ast.parse(textwrap.dedent("""
        BATCH_SIZE = 16 * strategy.num_replicas_in_sync
        IMG = 180
        maxlen = 200
        ds = ds.map(lambda x: tf.image.resize(x, [IMG, IMG])).batch(BATCH_SIZE)
        vec = TextVectorization(output_sequence_length=64)
    """)))
    assert (sizes.batch.value, sizes.batch.per_replica, sizes.batch.line) == ((16,), True, 2)
    assert sizes.image.value == (180, 180) and sizes.sequence.value == (200,)
    # fit's own batch_size beats a constant and a .batch(n)
    sizes = script_sizes(ast.parse("batch_size = 8\nds = ds.batch(4)\nmodel.fit(ds, batch_size=32)\n"), "model")
    assert sizes.batch.value == (32,) and sizes.batch.what == "fit(batch_size=32)"
    assert script_sizes(ast.parse("ds = ds.batch(4)\n")).batch.value == (4,)
    assert script_sizes(ast.parse("x = 1\n")).batch is None


def test_a_functions_locals_do_not_pull_in_module_statements():
    s = slice_source(textwrap.dedent("""
        import keras
        latent_dim = 4
        class GAN(keras.Model):
            def train_step(self, real):
                fake_images = self.generator(real)
                return fake_images * latent_dim
        gan = GAN()
        fake_images = gan.generator.predict(noise)
        fake_images *= 255
    """))
    out = ast.unparse(s.tree)
    assert "latent_dim = 4" in out and "fake_images" not in out.split("class GAN")[0] + out.split("gan = GAN()")[1]


def test_a_call_to_a_data_helper_that_reads_files_is_not_run():
    s = slice_source(textwrap.dedent("""
        import numpy as np
        import keras
        def readucr(url):
            data = np.loadtxt(url, delimiter="\\t")
            return data[:, 1:], data[:, 0]
        x, y = readucr("https://example.com/train.tsv")
        model = keras.Sequential([keras.Input(x.shape[1:]), keras.layers.Dense(2)])
    """))
    assert s.skipped == {7: "readucr() calls loadtxt() reads files"}
    assert s.skipped_names == {"x": (7, "readucr() calls loadtxt() reads files"),
                               "y": (7, "readucr() calls loadtxt() reads files")}


def _sizes(source: str, trained: str | None = "model"):
    return script_sizes(ast.parse(textwrap.dedent(source)), trained)


def test_the_batch_fit_runs_at_when_the_script_passes_none_is_kerass_own_32():
    # a batch_size variable the script never passes: fit gets arrays, so Keras's default
    sizes = _sizes("""
        batch_size = 64
        (x, y), _ = keras.datasets.mnist.load_data()
        x = x.astype("float32") / 255
        model.fit(x, y, epochs=3)
    """)
    assert (sizes.batch.value, sizes.batch.fit_default, sizes.batch.line) == ((32,), True, 5)
    # a dataset carries its own batch: the one the dataset fit gets, through the script's helper
    sizes = _sizes("""
        def make(data, bs=4):
            return tf.data.Dataset.from_tensor_slices(data).batch(bs)
        train = make(data, bs=48)
        model.fit(train, epochs=3)
    """)
    assert sizes.batch.value == (48,) and not sizes.batch.fit_default


def test_a_batch_from_a_config_class_a_flag_an_option_or_a_functions_own_assignment():
    config = _sizes("""
        class Config:
            batch_size = 256
            image_size = 32
        config = Config()
        ds = ds.batch(config.batch_size)
        model.fit(ds)
    """)
    assert config.batch.value == (256,) and config.image.value == (32, 32)
    flag = _sizes("""
        flags.DEFINE_integer('batch_size', 64, 'Batch Size')
        FLAGS = flags.FLAGS
        def main(argv):
            ds = ds.batch(FLAGS.batch_size)
    """, None)
    assert flag.batch.value == (64,)
    option = _sizes("""
        parser.add_argument("--batchsize", default=10, type=int)
        args = parser.parse_args()
        network.train(args.batchsize)
    """, None)
    assert option.batch.value == (10,)
    local = _sizes("""
        flags.DEFINE_integer('num_cores', 8, 'cores')
        def main(argv):
            batch_size = FLAGS.num_cores * 16
    """, None)
    assert local.batch.value == (128,) and local.batch.what == "batch_size = FLAGS.num_cores * 16"
    # a read the script cannot fold here (its own config module): left for the build
    module = _sizes("import config\nds = ds.batch(config.BATCH_SIZE)\n", None)
    assert module.batch is None and module.batch_reads == [("config.BATCH_SIZE", 2)]


def test_the_image_size_a_pipeline_gives_its_model_set_shape_then_a_crop_then_a_resize():
    sizes = _sizes("""
        IMG_HEIGHT = IMG_WIDTH = 256
        def resize(input_image, real_image, height, width):
            return tf.image.resize(input_image, [height, width]), real_image
        def jitter(a, b):
            a, b = resize(a, b, 286, 286)
            stacked = tf.image.random_crop(tf.stack([a, b]), size=[2, IMG_HEIGHT, IMG_WIDTH, 3])
            return stacked[0], stacked[1]
    """, None)
    assert sizes.image.value == (256, 256) and sizes.image.what == "random_crop(256, 256)"
    shaped = _sizes("x = tf.image.resize(x, (300, 300))\nx.set_shape([299, 298, 3])\n", None)
    assert shaped.image.value == (299, 298)
    helper = _sizes("""
        def resize(input_image, real_image, height, width):
            pass
        a, b = resize(a, b, 286, 270)
    """, None)
    assert helper.image.value == (286, 270)


def test_the_shape_of_what_the_script_fits_or_its_generator_yields():
    fitted = _sizes("x = np.random.random((50000, 128))\nmodel.fit(x, y, batch_size=32)\n")
    assert fitted.fitted.value == (128,) and fitted.fitted.what == "x = np.random.random((50000, 128))"
    yielded = _sizes("""
        def Dataset():
            for _ in range(20):
                yield (np.random.random((32, 128)).astype("float32"), np.random.random((32, 4)))
    """)
    assert yielded.fitted.value == (128,) and yielded.batch.value == (32,)


def test_models_the_script_trains_by_a_gradient_tape_and_those_a_training_class_holds():
    tree = ast.parse(textwrap.dedent("""
        model = MyModel(hidden_dim=256)
        @tf.function
        def train_step(x):
            with tf.GradientTape() as tape:
                loss = model(x)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
    """))
    assert trained_names(tree) == {"model": (True, 8)}  # its last optimizer step
    tree = ast.parse(textwrap.dedent("""
        def make_generator_model():
            return keras.Sequential([keras.layers.Dense(7)])
        def make_discriminator_model():
            return keras.Sequential([keras.layers.Dense(1)])
        class Dcgan(object):
            def __init__(self, epochs, batch_size):
                self.noise_dim = 100
                self.batch_size = batch_size
                self.generator = make_generator_model()
                self.discriminator = make_discriminator_model()
            def train_step(self, image):
                noise = tf.random.normal([self.batch_size, self.noise_dim])
                with tf.GradientTape() as g, tf.GradientTape() as d:
                    fake = self.generator(noise, training=True)
                    real_out = self.discriminator(image)
                    fake_out = self.discriminator(fake)
                g.gradient(gl, self.generator.trainable_variables)
                d.gradient(dl, self.discriminator.trainable_variables)
    """))
    joint = find_candidates(tree)[0]
    assert (joint.expr, joint.kind, joint.labels) == ("(make_generator_model(), make_discriminator_model())", "joint",
                                                      ["generator", "discriminator"])
    # what the step feeds each: noise of a stated size; the generator's images
    assert joint.inputs == {"generator": (100,), "discriminator": "generator"}


def test_a_model_a_function_makes_from_its_own_constant_locals():
    tree = ast.parse(textwrap.dedent("""
        import resnet_model
        ROWS, COLS = 28, 28
        NUM_CLASSES = 10
        def mnist_model(input_shape):
            pass
        def run():
            input_shape = (ROWS, COLS, 1)
            model = mnist_model(input_shape)
            model.fit(x)
        def main(argv):
            model = resnet_model.ResNet50(num_classes=NUM_CLASSES)
            model.compile(loss="mse")
    """))
    exprs = [c.expr for c in find_candidates(tree)]
    assert "mnist_model((ROWS, COLS, 1))" in exprs and "resnet_model.ResNet50(num_classes=NUM_CLASSES)" in exprs
