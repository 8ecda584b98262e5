"""The build child: import the user's file, build the model, lower a training step to HLO.

Run as ``python -m kerasfit.crosscheck.child --file model.py --out result.json ...``; the
parent (``kerasfit.crosscheck.api.run_child``, through ``kerasfit.crosscheck.sandbox``) owns the
time and memory limits. The child's modules (``child*.py``) are the only kerasfit modules that
import TensorFlow or Keras. It writes one JSON object to ``--out``: ``{"ok": true, ...}`` with
the ops, or ``{"ok": false, "error": "<one line>"}``.

Two ways to a step: by default the script is sliced to what building its model needs and
never runs its data pipeline or training (:mod:`.childbuild`); with ``--trace-script`` it
runs as ``python script.py`` would, to its first training step (:mod:`.childtrace`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from .childbase import (ChildError, Lowered, NeedsPackage, Options, Sites, marked, patch_layer_init, phase,
                        script_text, set_phase_file)
from .messages import one_line
from .childdata import ASSUMED_SIZE, Unloaded, patch_adapt
from .hlo import ELEMENTWISE, classify_pass, memory_ops, parse_hlo
from .options import parse_input_shapes

# The command line the child was started with (the script sees its own, sys.argv = [script]).
_ARGV: list[str] = []


def _prepare(opts: Options, path: Path, sites: Sites, notes: list[str]) -> tuple[Any, Any, Any]:
    """Import TensorFlow and Keras, patched for a build: (tf, keras, the TF1 graph state)."""
    from .childscript import (no_download_applications, patch_argparse, patch_upsampling,  # defers TensorFlow's users
                              quiet_summaries, refuse_training)
    from .childtf1 import GraphState, patch_tf1  # defers TensorFlow's users

    if opts.legacy or opts.keras2:
        os.environ["TF_USE_LEGACY_KERAS"] = "1"
    phase("tensorflow")
    try:
        import tensorflow as tf
    except ImportError as exc:
        raise ChildError(f"TensorFlow is not installed ({exc}); pip install \"kerasfit[build]\"") from None
    import keras

    tf.get_logger().setLevel("ERROR")
    kerases = [keras]
    text = script_text(path)
    if opts.legacy or "tf_keras" in text or opts.keras2:
        import tf_keras

        kerases.append(tf_keras)
        patch_upsampling(tf_keras, notes)
        if opts.keras2 and _STANDALONE_KERAS.search(text):
            _alias_keras(tf_keras, notes)
    if opts.dtype == "bfloat16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
        if opts.legacy or opts.keras2:
            tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")
    for k in kerases:
        patch_layer_init(k.layers.Layer, sites)
        no_download_applications(k, notes)
        if not opts.trace_script:
            refuse_training(k, notes)
            patch_adapt(k, notes)
    patch_argparse()
    if not opts.trace_script:
        quiet_summaries(tf, notes)
    state = GraphState()
    if opts.legacy:
        patch_tf1(tf, opts, state, sites)
    return tf, keras, state


# ``import keras`` / ``from keras…`` written for Keras 2: the tf-keras retry stands tf-keras in for it,
# unless the script reaches for what only Keras 3 has.
_STANDALONE_KERAS = re.compile(r"^\s*(import keras\b|from keras[. ])", re.M)
_KERAS3_ONLY = re.compile(r"\bkeras\.(ops|random|config|src|saving\.register_keras_serializable)\b|"
                          r"from keras import (.*\b)?(ops|random|config)\b")


def _alias_keras(tf_keras: Any, notes: list[str]) -> None:
    """``keras`` is tf-keras for this build: the script was written for standalone Keras 2."""
    import importlib.abc
    import importlib.util

    class Keras2(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        """``keras.X`` is ``tf_keras.X``."""

        def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
            if not fullname.startswith("keras."):
                return None
            return importlib.util.spec_from_loader(fullname, self)

        def create_module(self, spec: Any) -> Any:
            return importlib.import_module("tf_keras." + spec.name[len("keras."):])

        def exec_module(self, module: Any) -> None:
            pass

    for name in [n for n in sys.modules if n == "keras" or n.startswith("keras.")]:
        del sys.modules[name]
    sys.modules["keras"] = tf_keras
    sys.meta_path.insert(0, Keras2())
    notes.append("`import keras` is tf-keras (Keras 2) for this build: the script was written for Keras 2")


def run(opts: Options) -> dict[str, Any]:
    t0 = time.perf_counter()
    path = Path(opts.file).resolve()
    sites = Sites(str(path))
    result: dict[str, Any] = {"ok": True, "file": str(path), "notes": []}
    Unloaded.given = opts.input_shape[0] if opts.input_shape and len(opts.input_shape) == 1 else None
    tf, keras, state = _prepare(opts, path, sites, result["notes"])
    if opts.keras2:
        # Keras 3's rejection is evidence of its own (KF101's `fused=`), whatever tf-keras does
        result["keras3_error"] = os.environ.get(_FIRST_ERROR, "")
        result["notes"].append("built with tf-keras (Keras 2, the script's era); under Keras 3: "
                               + one_line(os.environ.get(_FIRST_ERROR, ""), 160))
    result["tf_version"] = tf.__version__
    result["keras_version"] = getattr(keras, "__version__", "")
    t_import = time.perf_counter()
    sys.argv = [str(path)]  # what `python script.py` gives the script
    if opts.trace_script:
        from .childtrace import trace_script  # defers TensorFlow's users

        built = trace_script(path, opts, sites, tf)
    else:
        from .childbuild import build_script  # defers TensorFlow's users

        built = build_script(path, opts, sites, tf, keras, state)
    result["notes"] += built.notes + state.get("notes", [])
    result["entry"] = built.entry
    if built.candidates:
        result["candidates"] = built.candidates
    result.update(_merged([one.info for one in built.lowered]))
    # a layer sized by data the build did not load: an assumption the report draws nothing from
    assumed = [n for n in result["notes"] if n.startswith(ASSUMED_SIZE)]
    result["notes"] = [n for n in result["notes"] if n not in assumed]
    result["assumptions"] = result.get("assumptions", []) + [n[len(ASSUMED_SIZE):] for n in assumed]
    t_hlo = time.perf_counter()
    result.update(_ops(built.lowered, result.get("variables", [])))
    result["cores"] = opts.cores
    result["dtype"] = opts.dtype
    if opts.dump_hlo:
        Path(opts.dump_hlo).write_text("\n".join(one.hlo for one in built.lowered))
    # Seconds per phase: TensorFlow's import, the user's model, tracing forward and
    # backward, XLA's lowering to HLO, and reading the HLO here.
    ends = {"import": t_import, **{k: marked(k, t_hlo) for k in ("build", "trace", "lower")},
            "parse": time.perf_counter()}
    start = t0
    result["timings"] = {}
    for name, end in ends.items():
        result["timings"][name] = round(max(0.0, end - start), 3)
        start = max(start, end)
    return result


_LISTS = ("networks", "said", "assumptions", "outputs", "output_layers", "input_sites", "inputs", "variables")


def _merged(infos: list[dict[str, Any]]) -> dict[str, Any]:
    """One result from the steps lowered (one, or one per model built alone): their networks,
    shapes and sites together; the batch and mode of the first."""
    out = dict(infos[0])
    for key in _LISTS:
        merged: list[Any] = []
        for i, info in enumerate(infos):
            for v in info.get(key) or []:
                if key in ("said", "assumptions") and v in merged or key == "said" and i and v.startswith("batch "):
                    continue  # said once; the batch is the first step's
                merged.append(v)
        out[key] = merged
    out["built_how"] = "; ".join(dict.fromkeys(str(i.get("built_how", "")) for i in infos if i.get("built_how")))
    out["blocks"] = {k: v for info in infos for k, v in (info.get("blocks") or {}).items()}
    out.pop("entry", None)
    return out


def _ops(lowered: list[Lowered], variables: list[list[int]]) -> dict[str, Any]:
    """Every step's convolutions, matmuls, pads and data movement, each placed in the user's
    file; with several steps, each op's name carries its step's index (``1/convolution.3``)."""
    ops: list[dict[str, Any]] = []
    pads: list[dict[str, Any]] = []
    mem: list[dict[str, Any]] = []
    elementwise = 0
    for i, one in enumerate(lowered):
        prefix = f"{i}/" if i else ""
        hlo_ops, hlo_pads = parse_hlo(one.hlo)
        for op in hlo_ops:
            op.pass_ = classify_pass(op, variables)
            d = op.to_dict()
            d["layer"], d["source"] = one.locate(op.op_name)
            ops.append(_renamed(d, prefix, ("name", "lhs", "rhs")))
        for pad in hlo_pads:
            d = dict(pad.__dict__)
            d["layer"], d["source"] = one.locate(pad.op_name)
            pads.append(_renamed(d, prefix, ("name", "consumers")))
        for m in memory_ops(one.hlo):
            d = m.to_dict()
            d["layer"], d["source"] = one.locate(m.op_name)
            mem.append(_renamed(d, prefix, ("name",)))
        elementwise += sum(m.bytes for m in memory_ops(one.hlo, elementwise=True) if m.opcode in ELEMENTWISE)
    return {"ops": ops, "pads": pads, "mem_ops": mem, "elementwise_bytes": elementwise}


def _renamed(d: dict[str, Any], prefix: str, keys: tuple[str, ...]) -> dict[str, Any]:
    if prefix:
        for key in keys:
            value = d.get(key)
            if isinstance(value, str):
                d[key] = prefix + value
            elif isinstance(value, list):
                d[key] = [prefix + v for v in value]
    return d


def _shape_arg(text: str) -> list[list[int]]:
    try:
        return [list(dims) for dims in parse_input_shapes(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a shape like 256,256,3 (inputs separated by ';')") from None


_FIRST_ERROR = "KERASFIT_KERAS3_ERROR"
_TF_KERAS = re.compile(r"\btf\.keras\b|\btensorflow\.keras\b|from tensorflow import keras")


def _retry_with_keras2(argv: list[str] | None, opts: Options, error: str) -> None:
    """A script that reaches Keras through ``tf.keras`` (or imports standalone ``keras``) and
    fails under Keras 3 was most likely written for Keras 2 (TF < 2.16): build it again with
    tf-keras.

    The same process image is replaced (``exec``), so the parent's time limit and kill
    still apply to it; the Keras 3 error is kept for the message if this fails too.
    """
    if opts.keras2 or opts.legacy or opts.trace_script or opts.entry is None and "found nothing to build" in error:
        return
    source = script_text(Path(opts.file))
    keras2 = _STANDALONE_KERAS.search(source) and not _KERAS3_ONLY.search(source)
    if not (_TF_KERAS.search(source) or keras2):
        return
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1")
    env[_FIRST_ERROR] = error
    args = list(_ARGV if argv is None else argv) + ["--keras2"]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "kerasfit.crosscheck.child", *args], env)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kerasfit.crosscheck.child")
    p.add_argument("--file", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--entry")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--cores", type=int, default=1)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--input-shape", type=_shape_arg, help="non-batch input dims for None ones, e.g. 256,256,3")
    p.add_argument("--legacy", action="store_true", help="TF1 graph code: TF_USE_LEGACY_KERAS=1")
    p.add_argument("--keras2", action="store_true",
                   help="tf.keras is tf-keras (Keras 2): the retry for scripts written before Keras 3")
    p.add_argument("--trace-script", action="store_true",
                   help="run the script itself to its first training step and trace that step")
    p.add_argument("--probe-weights")
    p.add_argument("--probe-outputs")
    p.add_argument("--dump-hlo")
    return p


def main(argv: list[str] | None = None) -> int:
    _ARGV[:] = list(sys.argv[1:] if argv is None else argv)
    opts = _parser().parse_args(_ARGV, namespace=Options())
    set_phase_file(Path(f"{opts.out}.phase"))
    try:
        result = run(opts)
        code = 0
    except ChildError as exc:
        if not isinstance(exc, NeedsPackage):  # the installed Keras's own failure: tf-keras is no answer
            _retry_with_keras2(argv, opts, str(exc))
        first = os.environ.get(_FIRST_ERROR)
        if first and "--input-shape" in str(exc):
            # tf-keras got as far as the input: what to do next is the useful message
            error = f"{exc} (built with tf-keras; under Keras 3: {one_line(first, 160)})"
        else:
            error = f"{first} (with tf-keras too: {one_line(exc, 200)})" if first else str(exc)
        result, code = {"ok": False, "error": error}, 3
    except BaseException as exc:  # the parent wants one line, whatever happened
        result, code = {"ok": False, "error": f"{type(exc).__name__}: {one_line(exc)}"}, 3
    Path(opts.out).write_text(json.dumps(result))
    sys.stdout.flush()
    # Skip interpreter teardown: TensorFlow's can take seconds or crash.
    os._exit(code)


if __name__ == "__main__":
    main()
