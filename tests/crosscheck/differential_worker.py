"""The differential harness's worker (tests/crosscheck/test_safe_fixes_identical.py): one
process that imports TensorFlow once and answers many comparisons, one JSON line each.

A request names a module before and after a fix, an ``entry`` expression evaluated in each
(a callable taking the case's keyword arguments and giving a layer or function to apply to
a Keras input), and cases: keyword arguments, an input shape (no batch dim). For each case
both are built on the same input, the weights of the first are given to the second, and
the outputs compared. The answer: ``{"ok": true, "cases": n, "max_diff": x}`` or
``{"ok": false, "error": "..."}`` naming the first case that differs. A case that neither
module can build (strides 2 with dilation 2: Keras refuses) is skipped; one only the fixed
module refuses, or builds with another output shape, differs.

Run with ``TF_USE_LEGACY_KERAS=1`` to compare under tf-keras (Keras 2); the request's
``keras`` names the module whose ``Input`` and ``Model`` build the graph.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import json
import os
import sys
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

_count = itertools.count()


def _load(path: str):
    spec = importlib.util.spec_from_file_location(f"differential_{next(_count)}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _build(keras, mod, entry: str, kwargs: dict, shape: list[int]):
    keras.utils.set_random_seed(0)
    make = eval(entry, mod.__dict__)  # noqa: S307  (the test's own expression)
    inp = keras.Input(tuple(shape))
    return keras.Model(inp, make(**kwargs)(inp))


def _compare(req: dict) -> dict:
    keras = importlib.import_module(req.get("keras", "keras"))
    before, after = _load(req["before"]), _load(req["after"])
    worst, done = 0.0, 0
    for i, case in enumerate(req["cases"]):
        kwargs, shape = case.get("kwargs", {}), case["shape"]
        label = f"case {i} ({kwargs}, input {shape})"
        try:
            old = _build(keras, before, req["entry"], kwargs, shape)
        except Exception as exc:  # noqa: BLE001  (Keras refuses the combination itself)
            try:
                _build(keras, after, req["entry"], kwargs, shape)
            except Exception:  # noqa: BLE001
                continue  # refused before and after: not a combination that reaches the code
            return {"ok": False, "error": f"{label}: the fixed code builds where the original raised {exc!r}"}
        try:
            new = _build(keras, after, req["entry"], kwargs, shape)
        except Exception as exc:  # noqa: BLE001
            return {"ok": False, "error": f"{label}: the fixed code does not build: {exc!r}"}
        weights = old.get_weights()
        if [w.shape for w in weights] != [w.shape for w in new.get_weights()]:
            return {"ok": False, "error": f"{label}: the weights differ in shape"}
        new.set_weights(weights)
        x = np.random.RandomState(i).standard_normal((2, *shape)).astype("float32")
        a = np.asarray(old(x, training=False))
        b = np.asarray(new(x, training=False))
        if a.shape != b.shape:
            return {"ok": False, "error": f"{label}: output shape {a.shape} -> {b.shape}"}
        diff = float(np.abs(a - b).max()) if a.size else 0.0
        tol = req.get("atol", 1e-5) + req.get("rtol", 1e-5) * float(np.abs(a).max() if a.size else 0.0)
        if not diff <= tol:
            return {"ok": False, "error": f"{label}: outputs differ by up to {diff:.4g}"}
        worst, done = max(worst, diff), done + 1
    return {"ok": True, "cases": done, "max_diff": worst}


def main() -> None:
    answers, sys.stdout = sys.stdout, sys.stderr  # whatever Keras prints stays off the answers
    for line in sys.stdin:
        try:
            answer = _compare(json.loads(line))
        except Exception:  # noqa: BLE001  (one bad request does not end the worker)
            answer = {"ok": False, "error": traceback.format_exc(limit=3)}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
