"""`kerasfit check` on big and pathological inputs: time and peak RSS.

Default: one generated model file of N lines (default 100,000). The file repeats realistic
units — a functional block with a pad before a conv, a subclassed layer that keeps its
layers in lists, a TF1 graph helper, a loss — each with its own names, so nothing is
shared across units and every rule has work:

    python benchmarks/large_file.py [--lines 100000] [--keep out.py]

``--shapes`` instead measures what README's "Big inputs" states: real code against
libcst's own parse of the same file (``--real DIR``: every ``.py`` file under DIR
concatenated into one; the generated model file without it), and the inputs that used to
cost far more than their bytes — each at the default max-file-size, each in a process of
its own:

    python benchmarks/large_file.py --shapes [--real DIR]

Peak RSS is the process's own high-water mark (wait4 gives the child's ru_maxrss); a run
that checks in worker processes reports the largest of them (RUSAGE_CHILDREN of a small
process that only starts it).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

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


def measure(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[int, float, float, str]:
    """(exit code, wall s, peak RSS MB of the largest process, output) of ``cmd``.

    Run under a small Python that starts it and reads RUSAGE_CHILDREN: the largest of the
    process and every worker it waited for. (A process's peak counts the memory of the one
    that started it, up to its exec: started by a big one, a test process, it would report
    that one's size.) Output goes to a file (a pipe nobody reads until the child exits
    would block it)."""
    probe = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "rc = subprocess.call(sys.argv[2:], stdout=open(sys.argv[1], 'w'), stderr=subprocess.STDOUT)\n"
        "t = time.perf_counter() - t\n"
        "print(rc, t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    out = cwd / ".bench-out"
    done = subprocess.run([sys.executable, "-c", probe, str(out), *cmd], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=1800)
    rc, wall, kb = done.stdout.split()
    text = out.read_text(errors="replace")
    out.unlink()
    return int(rc), float(wall), int(kb) / 1024, text


def one_file(a: argparse.Namespace) -> int:
    text = generate(a.lines)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big_model.py"
        path.write_text(text)
        if a.keep:
            Path(a.keep).write_text(text)
        cmd = [a.kerasfit, "check", "--isolated", "--no-cache", "--select", "ALL", "--exit-zero", "--statistics",
               "--max-file-size", str(10 * len(text.encode())), str(path)]
        rc, wall, peak, out = measure(cmd, Path(tmp))
    stats = [ln for ln in out.splitlines() if ln.strip()[:1].isdigit() or ln.startswith("files:")]
    print(f"lines: {text.count(chr(10))}  exit: {rc}  wall: {wall:.1f} s  peak RSS: {peak:.0f} MB")
    print("\n".join(stats))
    if rc != 0:
        print(out[-2000:], file=sys.stderr)
    return rc


# ---- --shapes ------------------------------------------------------------------------------------

TF = "import tensorflow as tf\n"
TREE = "import tensorflow as tf\nfrom tensorflow.keras import layers\n\n\ndef block{i}(x):\n    return layers.Dense({w})(x)\n"
DEFAULT_LIMIT = 2 * 1024 * 1024


def _tree(root: Path) -> None:
    for i in range(8):
        (root / f"m{i}.py").write_text(TREE.format(i=i, w=31 + 10 * i))


def _notebook(cells: int) -> str:
    cell = '{"cell_type": "code", "execution_count": null, "metadata": {}, "outputs": [], "source": []}'
    first = '{"cell_type": "code", "execution_count": null, "metadata": {}, "outputs": [], "source": ["import tensorflow as tf"]}'
    meta = '"metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}'
    return '{"cells": [' + first + ", " + ", ".join([cell] * cells) + "], " + meta + ', "nbformat": 4, "nbformat_minor": 4}'


def _largest(text: Callable[[int], str], n: int) -> int:
    """The largest count n' <= n of repeated units whose text still counts within the default
    limit (core.sourcefile.parse_cost)."""
    from kerasfit.core.sourcefile import parse_cost

    while parse_cost(text(n).encode()).total > DEFAULT_LIMIT:
        n -= max(1, (parse_cost(text(n).encode()).total - DEFAULT_LIMIT) // 32)
    return n


def _shapes(real: str) -> list[tuple[str, Callable[[Path], str]]]:
    """(what, make(dir) -> the path to check, relative to dir)."""
    from kerasfit.core.sourcefile import PER_LINE, PER_MARK

    def file(name: str, text: str) -> Callable[[Path], str]:
        def make(d: Path) -> str:
            (d / name).write_text(text)
            return name
        return make

    def tree_with(extra: Callable[[Path], None]) -> Callable[[Path], str]:
        def make(d: Path) -> str:
            _tree(d)
            extra(d)
            return "."
        return make

    def generated_in_build(d: Path) -> None:
        (d / "build").mkdir()
        (d / "build" / "generated.py").write_text(generate(600_000))  # ~18 MB

    def zero_link(d: Path) -> None:
        (d / "zero.py").symlink_to("/dev/zero")

    def ones(n: int) -> str:
        return TF + "1\n" * n

    def names(n: int) -> str:
        return TF + "a\n" * n

    def call(n: int) -> str:
        return TF + "f(" + "a," * n + ")\n"

    def ints(n: int) -> str:
        return TF + "x = [" + "1," * n + "]\n"

    def kwargs(n: int) -> str:
        return TF + "f(" + "a=a," * n + ")\n"

    lines, marks = DEFAULT_LIMIT // PER_LINE, DEFAULT_LIMIT // PER_MARK
    at_limit = []
    for what, name, make, most in (("one-character lines", "lines.py", ones, lines),
                                   ("one-letter names, one a line", "names.py", names, lines),
                                   ("arguments of one call", "call.py", call, marks),
                                   ("keyword arguments of one call", "kwargs.py", kwargs, marks // 2),
                                   ("ints in one list", "list.py", ints, marks)):
        k = _largest(make, most)
        at_limit.append((f"at the limit: {k:,} {what}", file(name, make(k))))
    return [
        ("real code, one file", file("real.py", real)),
        ("200k one-character lines (400 KB)", file("lines.py", ones(200_000))),
        ("a call with 1.04M arguments (2.08 MB)", file("call.py", call(1_040_000))),
        ("a million empty notebook cells", file("cells.ipynb", _notebook(1_000_000))),
        ("an 18 MB generated file in build/, 8 files", tree_with(generated_in_build)),
        ("zero.py -> /dev/zero, 8 files", tree_with(zero_link)),
        *at_limit,
    ]


def shapes(a: argparse.Namespace) -> int:
    if a.real:
        files = sorted(Path(a.real).rglob("*.py"))
        real = "".join(p.read_text(encoding="utf-8") + "\n" for p in files)
        where = f"{len(files)} files under {a.real}, concatenated"
    else:
        real = generate(60_000)
        where = "the generated model file, 60,000 lines"
    print(f"real code: {where}: {len(real.encode()):,} bytes, {real.count(chr(10)):,} lines\n")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "real"
        d.mkdir()
        (d / "real.py").write_text(real)
        rc, wall, floor, _ = measure([sys.executable, "-c", "import libcst, sys; libcst.parse_module(open(sys.argv[1]).read())",
                                      "real.py"], d)
        rows.append(("real code: libcst.parse_module alone", len(real.encode()), "parsed", wall, floor))
        rc, wall, peak, out = measure([a.kerasfit, "check", "--isolated", "--no-cache", "--exit-zero",
                                       "--max-file-size", str(2 * len(real.encode())), "real.py"], d)
        rows.append(("real code: kerasfit check (limit raised)", len(real.encode()),
                     "checked" if rc == 0 else f"exit {rc}", wall, peak))
        print(f"kerasfit / libcst peak on real code: {peak / floor:.2f}x\n")
        for what, make in _shapes(real)[1:]:
            d = Path(tmp) / f"s{len(rows)}"
            d.mkdir()
            target = make(d)
            size = sum(p.stat().st_size for p in d.rglob("*") if p.is_file() and not p.is_symlink())
            rc, wall, peak, out = measure([a.kerasfit, "check", "--isolated", "--no-cache", target], d)
            said = "over max-file-size" in out or "not checked" in out
            how = "refused" if said else "checked" if rc in (0, 1) else f"exit {rc}"
            if "internal error" in out or "died" in out:
                how = "FAILED: " + next(ln for ln in out.splitlines() if "error" in ln or "died" in ln)[:80]
            rows.append((what, size, how, wall, peak))
            shutil.rmtree(d, ignore_errors=True)
    width = max(len(r[0]) for r in rows)
    print(f"{'input':<{width}}  {'bytes':>12}  {'result':<10}  {'wall s':>7}  {'peak MB':>8}")
    for what, size, how, wall, peak in rows:
        print(f"{what:<{width}}  {size:>12,}  {how:<10}  {wall:>7.1f}  {peak:>8.0f}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--keep", help="also write the generated file here")
    ap.add_argument("--kerasfit", default=shutil.which("kerasfit") or "kerasfit")
    ap.add_argument("--shapes", action="store_true", help="real code against libcst, and the pathological inputs")
    ap.add_argument("--real", help="with --shapes: a directory whose .py files, concatenated, are the real code")
    a = ap.parse_args()
    return shapes(a) if a.shapes else one_file(a)


if __name__ == "__main__":
    raise SystemExit(main())
