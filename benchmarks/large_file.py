"""`kerasfit check` on one generated model file of N lines (default 100,000): time and peak RSS.

The file repeats realistic units — a functional block with a pad before a conv, a
subclassed layer that keeps its layers in lists, a TF1 graph helper, a loss — each
with its own names, so nothing is shared across units and every rule has work:

    python benchmarks/large_file.py [--lines 100000] [--keep out.py]

Peak RSS is the child's own high-water mark (VmHWM read from /proc while it runs is
not needed: wait4 gives the child's ru_maxrss, and the parent here is small).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEADER = '''import tensorflow as tf
import keras
from keras import layers


'''

UNIT = '''def block_{i}(x, filters={w}):
    x = layers.ZeroPadding2D(1)(x)
    x = layers.Conv2D(filters, 3, use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    y = layers.Conv2D(filters * 2, 1, padding="same")(x)
    parts = tf.split(y, 2, axis=-1)
    return tf.concat([parts[0], parts[1]], axis=-1)


class Stage{i}(keras.layers.Layer):
    def __init__(self, n=2, **kwargs):
        super().__init__(**kwargs)
        self.pads = [layers.ZeroPadding2D(1) for _ in range(n)]
        self.convs = [layers.Conv2D({w}, 3) for _ in range(n)]
        self.head = layers.Dense(10)

    def call(self, x):
        for pad, conv in zip(self.pads, self.convs):
            x = conv(pad(x))
        x = tf.transpose(x, [0, 3, 1, 2])
        return self.head(tf.reduce_mean(x, axis=[2, 3]))


def graph_{i}(x, is_training):
    w = tf.compat.v1.get_variable("w{i}", [3, 3, 16, {w}])
    y = tf.nn.conv2d(tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]]), w, 1, "VALID")
    y = tf.compat.v1.layers.batch_normalization(y, training=is_training, fused=False)
    return tf.nn.relu(y)


def loss_{i}(y_true, y_pred):
    obj = y_true[..., 4:5]
    box = y_pred[..., :4]
    err = tf.reduce_sum(tf.square(box - y_true[..., :4]), axis=-1) * 0.5
    return tf.reduce_mean(err * obj[..., 0]) * 2.0


'''


def generate(lines: int) -> str:
    unit_lines = UNIT.count("\n")
    n = max(1, (lines - HEADER.count("\n")) // unit_lines)
    return HEADER + "".join(UNIT.format(i=i, w=(30, 64, 100, 128)[i % 4]) for i in range(n))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--keep", help="also write the generated file here")
    ap.add_argument("--kerasfit", default=shutil.which("kerasfit") or "kerasfit")
    a = ap.parse_args()
    text = generate(a.lines)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big_model.py"
        path.write_text(text)
        if a.keep:
            Path(a.keep).write_text(text)
        cmd = [a.kerasfit, "check", "--isolated", "--no-cache", "--select", "ALL", "--exit-zero", "--statistics", str(path)]
        # output goes to files: a pipe nobody reads until the child exits would block it
        with open(Path(tmp) / "out", "w+") as fo, open(Path(tmp) / "err", "w+") as fe:
            t0 = time.perf_counter()
            proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, text=True)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - t0
            fo.seek(0)
            fe.seek(0)
            out, err = fo.read(), fe.read()
        rc = os.waitstatus_to_exitcode(status)
    stats = [ln for ln in out.splitlines() if ln.strip()[:1].isdigit() or ln.startswith("files:")]
    print(f"lines: {text.count(chr(10))}  exit: {rc}  wall: {wall:.1f} s  cpu: {usage.ru_utime + usage.ru_stime:.1f} s  "
          f"peak RSS: {usage.ru_maxrss / 1024:.0f} MB")
    print("\n".join(stats))
    if rc != 0:
        print(err[-2000:], file=sys.stderr)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
