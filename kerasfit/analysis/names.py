"""Framework names kerasfit cannot see in the import lines of a file.

Two questions, both answered from ``kerasfit/data/framework_names.json`` (generated once
from the installed keras / tf_keras by ``scripts/gen_framework_names.py``; TensorFlow is
never imported at check time):

- :func:`star_names` — which names ``from <module> import *`` binds, for a framework
  module (``keras.layers``, ``tensorflow.keras.layers``, ``tf_keras.layers`` …);
- :func:`by_name` — the canonical API an *unresolved* receiver followed by a spelling
  only Keras/TF use stands for (``layers.ZeroPadding2D`` with ``layers =
  VersionAwareLayers()`` → ``keras.layers.ZeroPadding2D``). Such a resolution is marked
  "resolved by name" wherever it is shown.
"""

from __future__ import annotations

import ast
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

_DATA = Path(__file__).resolve().parent.parent / "data" / "framework_names.json"
# tensorflow.compat.v1.keras.layers binds what tensorflow.keras.layers binds.
_PREFIX_ALIASES = (("tensorflow.compat.v1.keras.", "tensorflow.keras."), ("tensorflow.compat.v2.keras.", "tensorflow.keras."),
                   ("tensorflow.python.keras.", "tensorflow.keras."), ("keras.api.", "keras."))


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    with open(_DATA, encoding="utf-8") as fh:
        data = json.load(fh)
    return {"star": {k: frozenset(v) for k, v in data["star"].items()}, "by_name": data["by_name"]}


def star_names(module: str) -> frozenset[str] | None:
    """The public names ``from module import *`` binds, or None for a non-framework module."""
    for old, new in _PREFIX_ALIASES:
        if module.startswith(old):
            module = new + module[len(old):]
    found: frozenset[str] | None = _table()["star"].get(module)
    return found


def by_name(tail: str) -> str | None:
    """Canonical name for an attribute path only Keras/TF spell (``"Conv2D"``,
    ``"random.categorical"``), else None. ``tail`` is the dotted path after the receiver."""
    table = _table()["by_name"]
    hit: str | None = table.get(tail)
    if hit is not None:
        return hit
    # layers().Conv2D / ns.layers.Conv2D: the last component alone when it is a layer class
    last = tail.rsplit(".", 1)[-1]
    hit = table.get(last)
    return hit if hit is not None and last[:1].isupper() else None


def ast_dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a Name/Attribute chain of CPython's AST, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None
