#!/usr/bin/env python3
"""Regenerate kerasfit/data/framework_names.json from the installed keras / tf_keras.

Run once by hand in an environment that has keras and tf_keras (never at check time):
    python scripts/gen_framework_names.py
The table answers two static questions without importing TensorFlow:
- which names ``from <module> import *`` binds (``star``), per framework module;
- which attribute spellings only Keras/TF use (``by_name``), so that an unresolved
  receiver followed by one of them (``layers = VersionAwareLayers(); layers.Conv2D``)
  can be taken as that API.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
OUT = Path(__file__).resolve().parent.parent / "kerasfit" / "data" / "framework_names.json"
FAMILIES = ("layers", "ops", "backend", "activations", "regularizers", "initializers", "losses",
            "optimizers", "models", "random", "applications", "callbacks")
# A layer class whose name says what it is, and that no general-purpose library spells
# the same way: conv / pad / norm / pooling / resampling families.
_DISTINCT_LAYER = re.compile(r"(Conv|Padding|Normalization|Pooling|Cropping|UpSampling|Dense$)")
# conv2d / batch_normalization are also torch.nn.functional's and slim's spellings: not here.
_DISTINCT_OPS = ("depth_to_space", "space_to_depth")


def public(mod) -> list[str]:
    names = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]
    return sorted(n for n in names if not n.startswith("_"))


def main() -> None:
    star: dict[str, list[str]] = {}
    for root in ("keras", "tf_keras"):
        for fam in FAMILIES:
            try:
                mod = importlib.import_module(f"{root}.{fam}")
            except ImportError:
                continue
            star[f"{root}.{fam}"] = public(mod)
    # tensorflow.keras.X is Keras 3 or tf-keras depending on versions: bind either's names.
    for fam in FAMILIES:
        names = set(star.get(f"keras.{fam}", [])) | set(star.get(f"tf_keras.{fam}", []))
        if names:
            star[f"tensorflow.keras.{fam}"] = sorted(names)
    by_name: dict[str, str] = {}
    for n in star.get("keras.layers", []) + star.get("tf_keras.layers", []):
        if n[0].isupper() and _DISTINCT_LAYER.search(n) and n != "Normalization":
            by_name[n] = f"keras.layers.{n}"
    for n in _DISTINCT_OPS:
        by_name[n] = f"tf.nn.{n}"
    by_name["random.categorical"] = "tf.random.categorical"
    data = {"generated_from": {m: importlib.import_module(m).__version__ for m in ("keras", "tf_keras")},
            "star": star, "by_name": dict(sorted(by_name.items()))}
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(data, indent=0, sort_keys=False) + "\n")
    print(f"wrote {OUT} ({sum(map(len, star.values()))} names, {len(by_name)} by-name spellings)", file=sys.stderr)


if __name__ == "__main__":
    main()
