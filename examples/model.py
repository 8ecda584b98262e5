"""A small image classifier written the way many tutorials write it.

Run `kerasfit check examples/model.py` to see what costs it accelerator time.
"""

import tensorflow as tf
from tensorflow.keras import layers, regularizers

NUM_CLASSES = 10
WEIGHT_DECAY = 1e-4


def conv_block(x, filters, name):
    x = layers.ZeroPadding2D(padding=1, name=f"{name}_pad")(x)
    x = layers.Conv2D(filters, 3, padding="valid", use_bias=False,
                      kernel_regularizer=regularizers.l2(WEIGHT_DECAY), name=f"{name}_conv")(x)
    x = layers.BatchNormalization(fused=False, name=f"{name}_bn")(x)
    return layers.Activation("relu", name=f"{name}_relu")(x)


def build_model(input_shape=(32, 32, 3)):
    inputs = tf.keras.Input(shape=input_shape)
    x = conv_block(inputs, 30, "block1")
    x = layers.MaxPooling2D(2)(x)
    x = conv_block(x, 60, "block2")
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dense(100, activation="relu")(x)
    outputs = layers.Dense(NUM_CLASSES, activation="softmax")(x)
    return tf.keras.Model(inputs, outputs, name="small_cnn")


def make_dataset(images, labels, batch_size=128):
    ds = tf.data.Dataset.from_tensor_slices((images, labels))
    return ds.shuffle(10_000).batch(batch_size).prefetch(tf.data.AUTOTUNE)
