"""Shared helpers for the engine's user-facing test suites (not a test module)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# KF101's safe fix: tf-keras keeps the `fused` argument and the fix sets it True, safe
# because the input is a Conv2D's output (fused=True needs a 4-D/5-D input).
BAD = "import tf_keras as keras\nbn = keras.layers.BatchNormalization(fused=False)(keras.layers.Conv2D(8, 3)(x))\n"
GOOD = "import tf_keras as keras\nbn = keras.layers.BatchNormalization(fused=True)(keras.layers.Conv2D(8, 3)(x))\n"
# KF101 without an automatic fix.
NOFIX = "import tensorflow as tf\ny = tf.nn.batch_normalization(x, mean, var, beta, gamma, 1e-3)\n"
CLEAN = "import tensorflow as tf\nx = tf.keras.layers.BatchNormalization()(x)\n"


def kerasfit_argv() -> list[str]:
    exe = Path(sys.executable).with_name("kerasfit")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "kerasfit"]


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()


def run(*args: str | os.PathLike, cwd: Path, stdin: str | None = None, env: dict | None = None) -> Run:
    """Run the real console script; no traceback may ever reach the user."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("KERASFIT_")}
    full_env.update(NO_COLOR="1", KERASFIT_NO_PARALLEL="1")
    full_env.update(env or {})
    p = subprocess.run(
        [*kerasfit_argv(), *map(str, args)],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )
    assert "Traceback" not in p.stderr, p.stderr
    assert "Traceback" not in p.stdout, p.stdout
    return Run(p.returncode, p.stdout, p.stderr)


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_bytes(text.encode("utf-8"))
    return path


def finding_lines(out: str, code: str = "KF") -> list[str]:
    return [line for line in out.splitlines() if f": {code}" in line]


def assert_one_line_error(stderr: str, *needles: str) -> str:
    """A usage/config error is one line on stderr, naming what is wrong."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def installed_page(uri: str) -> Path:
    """The file a rule link names; the link must be an absolute file:// URI."""
    from urllib.parse import unquote, urlparse
    from urllib.request import url2pathname

    parsed = urlparse(uri)
    assert parsed.scheme == "file" and not parsed.fragment, uri
    return Path(url2pathname(unquote(parsed.path)))


def between_check_and_write(monkeypatch, action) -> None:
    """Run ``action`` after every file was read and checked, before --fix writes."""
    from kerasfit.project import check as api

    real = api._execute

    def execute(work, jobs, *rest):
        out = real(work, jobs, *rest)
        action()
        return out

    monkeypatch.setattr(api, "_execute", execute)


# One width (a module literal) that two loops build layers with: KF102 reports it once, at
# the literal's element. The edit gives the first loop its own literal.
TWO_TOWERS = '''import tensorflow as tf
from tensorflow.keras import layers

HIDDEN = [100, 200]


def tower_a(x):
    for units in HIDDEN:
        x = layers.Dense(units)(x)
    return x


def tower_b(x):
    for units in HIDDEN:
        x = layers.Conv2D(units, 3)(x)
    return x
'''
TWO_TOWERS_EDITED = TWO_TOWERS.replace("    for units in HIDDEN:\n        x = layers.Dense", "    for units in [128]:\n        x = layers.Dense")
