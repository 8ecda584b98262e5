"""Where a traced step's ops come from: each op's layer (by the name scope its ops got
while tracing), the user-file line that made the layer or wrote the op, and the library
block (MultiHeadAttention, an application) whose insides made it."""

from __future__ import annotations

import inspect
from typing import Any

from .childbase import Locate, Site, Sites, layers_of
from .hlo import strip_scopes


def _is_random_augmentation(layer: Any) -> bool:
    name = type(layer).__name__
    module = type(layer).__module__
    return name.startswith("Random") and ("preprocessing" in module or "augment" in module)


def record_scopes(layers: list[Any], tf: Any) -> dict[str, Any]:
    """Wrap each layer's ``call`` to see the name scope its ops get while tracing.

    HLO op names carry TF name scopes, which Keras uniquifies per graph ("dense" may
    become "dense_1"), so layer names alone cannot be matched reliably.
    """
    scopes: dict[str, Any] = {}
    for layer in layers:
        original = layer.call
        if _is_random_augmentation(layer):
            # Random image augmentations (RandomRotation's ImageProjectiveTransform) have
            # no XLA kernel and no MXU work: trace them as the identity.
            object.__setattr__(layer, "call", lambda inputs, *a, **k: inputs)
            continue

        def call(*args: Any, _layer: Any = layer, _original: Any = original, **kwargs: Any) -> Any:
            scope = tf.compat.v1.get_default_graph().get_name_scope()
            if scope:
                scopes[scope] = _layer
            return _original(*args, **kwargs)

        object.__setattr__(layer, "call", call)
    return scopes


def _library_blocks(model: Any, sites: Sites) -> tuple[dict[str, dict[str, Any]], dict[int, str]]:
    """Library layers with layers the library made inside them (MultiHeadAttention, a
    keras.applications model, the built model itself when it is one; not a Sequential
    of the user's own layers).

    Their insides are not the user's to change; the report names the block and the
    arguments it was made with, the levers the user does have. Returns the blocks by
    name and, for every layer inside one (the block included), the block's name.
    """
    blocks: dict[str, dict[str, Any]] = {}
    block_of: dict[int, str] = {}

    def user_class(layer: Any) -> bool:
        try:
            return sites.is_user(inspect.getfile(type(layer)))
        except (TypeError, OSError):
            return False

    def visit(layer: Any, block: str | None) -> None:
        try:
            children = list(layer._flatten_layers(include_self=False, recursive=False))
        except Exception:
            children = []
        # layers with weights only: a Sequential's own InputLayer, tf-keras's TFOpLambda
        # wrapping the user's `x + y` are made by the library but hold nothing of it
        made_inside = [c for c in children if not getattr(c, "_kerasfit_by_user", True)
                       and getattr(c, "weights", None)]
        if block is None and made_inside and not user_class(layer):
            block = layer.name
            try:
                config = layer.get_config()
            except Exception:
                config = {}
            blocks[block] = {"class": type(layer).__name__,
                             "config": {k: v for k, v in config.items()
                                        if isinstance(v, int) and not isinstance(v, bool)}}
        if block is not None:
            block_of[id(layer)] = block
        for child in children:
            if id(child) not in block_of:
                visit(child, block)

    visit(model, None)
    return blocks, block_of


def _written_sites(graph: Any, sites: Sites) -> dict[str, Site]:
    """TF op name -> the user-file line that ran it while tracing (a custom layer's call())."""
    out: dict[str, Site] = {}
    for op in graph.get_operations():
        site = sites.from_traceback(getattr(op, "traceback", None))
        if site is not None:
            out[op.name] = site
    return out


def _in_own_call(layer: Any, site: Site, op_name: str, written: dict[str, Site], sites: Sites) -> Site:
    """An op a user-defined layer's call() writes is sourced at that line, not at the
    line constructing the layer (which becomes its first caller): KF107 on a transpose
    inside call() is judged by the transposes it makes. Gradient ops take their forward
    op's line (the longest op-name prefix that has one)."""
    if not _user_call(layer, sites):
        return site
    parts = op_name.split("/")
    for i in range(len(parts), 0, -1):
        hit = written.get("/".join(parts[:i]))
        if hit is not None:
            if hit["line"] == site["line"]:
                return site
            out = Site(**{**hit, "callers": [*hit.get("callers", []), site["line"], *site.get("callers", [])]})
            if "block" in site:
                out["block"] = site["block"]
            return out
    return site


def _user_call(layer: Any, sites: Sites) -> bool:
    try:
        return sites.is_user(inspect.getfile(type(layer).call))
    except (TypeError, OSError):
        return False


def _endpoint_layers(model: Any, attr: str) -> list[Any]:
    """The layers producing ``model.inputs`` / ``model.outputs`` (functional models)."""
    layers = []
    try:
        tensors = getattr(model, attr) or []
    except Exception:
        tensors = []
    for t in tensors:
        history = getattr(t, "_keras_history", None)
        layer = getattr(history, "operation", None) or getattr(history, "layer", None)
        if layer is None and isinstance(history, tuple) and history:
            layer = history[0]
        if layer is not None:
            layers.append(layer)
    return layers


def _output_layers(model: Any) -> list[str]:
    """Names of the layers producing the model's outputs: their width is the task's."""
    return [layer.name for layer in _endpoint_layers(model, "outputs") if getattr(layer, "name", None)]



def input_sites(nets: list[Any]) -> list[Site]:
    """Where the batch enters each network (its input layers' lines): KF302 points there."""
    return [site for net in nets for site in (getattr(layer, "_kerasfit_site", None)
                                             for layer in _endpoint_layers(net, "inputs")) if site]


def output_layers(nets: list[Any]) -> list[str]:
    """Names of the layers producing the networks' outputs: their width is the task's."""
    return [name for net in nets for name in _output_layers(net)]


def locator(root: Any, scopes: dict[str, Any], layers: list[Any], graph: Any, sites: Sites
            ) -> tuple[Locate, dict[str, dict[str, Any]]]:
    """(the op -> (layer, site) function of a traced step, the library blocks by name).
    ``scopes`` are record_scopes' name scopes, ``graph`` the traced step's graph (its op
    tracebacks source the ops a user-written call() makes)."""
    blocks, block_of = _library_blocks(root, sites)
    written = _written_sites(graph, sites) if any(_user_call(layer, sites) for layer in layers) else {}

    def site_of(layer: Any) -> Site | None:
        site: Site | None = getattr(layer, "_kerasfit_site", None)
        if site is not None and id(layer) in block_of:
            site = Site(**site, block=block_of[id(layer)])
        return site

    # Longest scope first so an op lands in its innermost layer.
    ordered = sorted(scopes.items(), key=lambda kv: len(kv[0]), reverse=True)

    def locate(op_name: str) -> tuple[str | None, Site | None]:
        name = strip_scopes(op_name)
        for scope, layer in ordered:
            if name == scope or name.startswith(scope + "/"):
                site = site_of(layer)
                if site is not None:
                    return layer.name, _in_own_call(layer, site, name, written, sites)
        for scope, layer in ordered:
            if name.startswith(scope + "/"):
                return layer.name, None
        return None, None

    return locate, blocks


def network_layers(nets: list[Any]) -> list[Any]:
    """Every layer of the networks, each once."""
    layers: list[Any] = []
    seen: set[int] = set()
    for net in nets:
        for layer in layers_of(net):
            if id(layer) not in seen:
                seen.add(id(layer))
                layers.append(layer)
    return layers
