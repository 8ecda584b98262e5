"""The program a network runs on the chip, where it differs from the network the script
builds: lookup-table layers run in the input pipeline (XLA compiles no tables), and a layer
that only adds the script's loss XLA cannot compile (a CTC loss) is left to the stand-in
loss. Keras 3 functional networks only: they can be cut at a tensor."""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from typing import Any

from .childbase import user_method

# Keras preprocessing layers backed by lookup tables or strings. XLA compiles neither, and a
# TPU runs them in the input pipeline (tf.data), outside the program the chip runs.
_TABLE_LAYERS = frozenset({"StringLookup", "IntegerLookup", "TextVectorization", "Hashing", "HashedCrossing"})


def outside_tables(net: Any) -> tuple[Any, list[str]] | None:
    """A functional network with table layers: the same network from their outputs on
    (the inputs other layers read kept as they are), and the table layers left out. None
    when it has none, or when it is not a Keras 3 functional network that can be cut."""
    inputs = getattr(net, "inputs", None)
    ops = getattr(net, "operations", None)  # Keras 3's functional graph; tf-keras has none
    if not inputs or not ops:
        return None
    tables = [op for op in ops if type(op).__name__ in _TABLE_LAYERS]
    if not tables:
        return None
    try:
        cut = [t for op in tables for node in op._inbound_nodes for t in node.output_tensors]
        read = {id(t) for op in ops if op not in tables and type(op).__name__ != "InputLayer"
                for node in op._inbound_nodes for t in node.input_tensors}
        kept = [t for t in inputs if id(t) in read]
        model_cls = importlib.import_module(type(net).__module__.split(".")[0]).Model  # keras's own
        return model_cls(kept + cut, net.outputs), sorted({type(op).__name__ for op in tables})
    except Exception:
        return None


def _loss_layer_input(layer: Any) -> int | None:
    """A user layer that only adds the script's loss: its ``call`` calls ``self.add_loss``
    and returns one of its arguments unchanged. Which argument (its position), else None."""
    klass = user_method(layer, "call")
    if klass is None:
        return None
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(vars(klass)["call"])))
    except (OSError, TypeError, SyntaxError):
        return None
    fn = tree.body[0]
    if not isinstance(fn, ast.FunctionDef):
        return None
    params = [a.arg for a in fn.args.args[1:]]
    adds = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add_loss"
               for n in ast.walk(fn))
    returned = {n.value.id if isinstance(n.value, ast.Name) else None
                for n in ast.walk(fn) if isinstance(n, ast.Return)}
    if not adds or len(returned) != 1:
        return None
    name = returned.pop()
    return params.index(name) if name in params else None


def without_loss_layers(net: Any) -> tuple[Any, list[str]] | None:
    """A Keras 3 functional network whose output passes through layers that only add the
    script's loss: the same network ending at what those layers return (the inputs only
    they read dropped), and the layers left out. None when it has none."""
    ops = getattr(net, "operations", None)
    outputs = getattr(net, "outputs", None)
    if not ops or not outputs:
        return None
    passed: dict[int, Any] = {}  # a loss layer's output -> the input it returns
    names: list[str] = []
    try:
        for op in ops:
            at = _loss_layer_input(op)
            if at is None:
                continue
            for node in op._inbound_nodes:
                args = list(node.arguments.args)
                if at < len(args) and len(node.output_tensors) == 1:
                    passed[id(node.output_tensors[0])] = args[at]
                    names.append(f"{type(op).__name__} (line {getattr(op, '_kerasfit_site', {}).get('line', '?')})")
        if not passed:
            return None
        ends = []
        for t in outputs:
            while id(t) in passed:
                t = passed[id(t)]
            ends.append(t)
        model_cls = importlib.import_module(type(net).__module__.split(".")[0]).Model  # keras's own
        inputs = [t for t in net.inputs if _reaches(t, ends)]
        return model_cls(inputs, ends), names
    except Exception:
        return None


def _reaches(tensor: Any, ends: list[Any]) -> bool:
    """Whether a Keras 3 symbolic tensor is among the inputs that ``ends`` are computed from."""
    seen: set[int] = set()
    stack = list(ends)
    while stack:
        t = stack.pop()
        if t is tensor:
            return True
        if id(t) in seen:
            continue
        seen.add(id(t))
        history = getattr(t, "_keras_history", None)
        if history is not None:
            node = history.operation._inbound_nodes[history.node_index]
            stack.extend(node.input_tensors)
    return False


def structured(net: Any, inputs: list[Any]) -> Any:
    """The inputs as the network takes them: one tensor, a list, or its dict of named
    inputs (``model.inputs`` flattens a dict in sorted-key order, in Keras 3 and tf-keras)."""
    for attr in ("_inputs_struct", "_nested_inputs"):  # Keras 3, tf-keras
        struct = getattr(net, attr, None)
        if isinstance(struct, dict) and len(struct) == len(inputs):
            return dict(zip(sorted(struct), inputs))
    return inputs[0] if len(inputs) == 1 else inputs

