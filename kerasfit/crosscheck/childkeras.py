"""Lower one training step of a built Keras model (or of the models a script trains) to HLO.

A training wrapper (a Model with its own ``train_step`` and no ``call``: a GAN, a VAE) is
lowered through one step of that ``train_step``; anything else, or a wrapper whose step
does not trace, through one step of every network on a stand-in loss (the mean square of
its outputs). A step the script runs that is not the step lowered is said as an
assumption, and the report draws no verdict or recommendation from it.
"""

from __future__ import annotations

import ast
import inspect
import os
import re
import sys
import textwrap
from dataclasses import dataclass, field
from typing import Any

from .childbase import (ChildError, Lowered, Options, Sites, layer_classes, layers_of, mark, trainable,
                        user_error, user_method)
from .messages import reason
from .childdata import DATA_SHAPE
from .childprograms import outside_tables, structured, without_loss_layers
from .childshapes import batched, global_batch_of, input_specs
from .childsource import input_sites, locator, network_layers, output_layers, record_scopes
from .sizes import ScriptSizes

Specs = list[tuple[list[list[int | None]], list[str]]]  # per program: (input shapes, dtypes)


# ---------------------------------------------------------------- the networks


def networks_of(model: Any) -> list[tuple[str, Any]]:
    """The networks a training wrapper trains: a Model with its own ``train_step`` and no
    ``call`` (a GAN, a VAE). Those whose weights its train_step differentiates, else those
    it calls, in the order the class names them; its attributes, or the module-level
    networks its train_step reads (``generator`` beside the wrapper, not inside it)."""
    if user_method(model, "call") is not None or user_method(model, "train_step") is None:
        return []
    try:
        tree: ast.AST | None = ast.parse(textwrap.dedent(inspect.getsource(type(model))))
    except (OSError, TypeError, SyntaxError):
        tree = None
    step = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "train_step"),
                tree) if tree is not None else None
    own = {name: net for name in _self_networks(step) if (net := _network(model, getattr_safe(model, name)))}
    if not own:
        own = {a: net for a in vars(model) if not a.startswith("_") and (net := _network(model, getattr_safe(model, a)))}
    module = sys.modules.get(type(model).__module__)
    outer = {name: net for name in _global_networks(step)
             if module is not None and (net := _network(model, vars(module).get(name)))}
    return list(own.items()) + [(n, v) for n, v in outer.items() if all(v is not o for o in own.values())]


def getattr_safe(obj: Any, name: str) -> Any:
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def _network(model: Any, value: Any) -> Any:
    """A layer with weights, or one that makes its weights on its first call."""
    ok = isinstance(value, layer_classes()) and value is not model and (
        bool(trainable(value)) or getattr(value, "built", True) is False)
    return value if ok else None


def _self_networks(step: ast.AST | None) -> list[str]:
    """``self.X`` whose weights the step differentiates, else those it calls."""
    if step is None:
        return []
    weights = [n.value.attr for n in ast.walk(step) if isinstance(n, ast.Attribute)
               and n.attr in ("trainable_weights", "trainable_variables")
               and isinstance(n.value, ast.Attribute) and isinstance(n.value.value, ast.Name)
               and n.value.value.id == "self"]
    called = [n.func.attr for n in ast.walk(step) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
              and n.func.value.id == "self"]
    return list(dict.fromkeys(weights or called))


def _global_networks(step: ast.AST | None) -> list[str]:
    """Module-level names the step reads (``generator(z)``, ``discriminator.trainable_variables``)."""
    if not isinstance(step, ast.FunctionDef):
        return []
    local = {a.arg for a in step.args.args} | {n.id for n in ast.walk(step)
                                               if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return list(dict.fromkeys(n.id for n in ast.walk(step) if isinstance(n, ast.Name)
                              and isinstance(n.ctx, ast.Load) and n.id not in local))


@dataclass
class _Plan:
    """What one build lowers: the networks (labelled), the training wrapper whose step runs
    them (None: a stand-in step), each network's program and input specs."""

    nets: list[tuple[str, Any]]
    wrapper: Any
    programs: list[Any]
    specs: Specs = field(default_factory=list)
    outside: list[str] = field(default_factory=list)  # the table layers left to the input pipeline
    dropped: list[str] = field(default_factory=list)  # the loss-only layers left to the stand-in loss


def _plan(model: Any, label: str, others: list[tuple[str, Any]]) -> _Plan:
    nets: list[tuple[str, Any]] = []
    wrapper = None
    for name, m in [(label, model)] + others:
        sub = networks_of(m)
        if sub and not others:
            wrapper = m
        nets += [(f"{name}.{a}" if others else a, n) for a, n in sub] or [(name, m)]
    plan = _Plan(nets, wrapper, [net for _, net in nets])
    if wrapper is None:
        # The program each network runs: from its table layers' outputs on, where it has any.
        for i, (_, net) in enumerate(nets):
            cut = outside_tables(net)
            if cut is not None:
                plan.programs[i] = cut[0]
                plan.outside += [c for c in cut[1] if c not in plan.outside]
    return plan


def _specs(plan: _Plan, opts: Options, sizes: ScriptSizes | None, said: list[str], sites: Sites, tf: Any) -> Specs:
    """Each network's input specs; a network the script's own step feeds another's output (a
    GAN's discriminator, the generator's images) takes that output's shape, said."""
    hints = sizes.network_inputs if sizes is not None else {}
    labels = [name for name, _ in plan.nets]
    specs: dict[int, tuple[list[list[int | None]], list[str]]] = {}
    # networks fed another's output last: their producers' specs first
    for i in sorted(range(len(plan.nets)), key=lambda i: isinstance(hints.get(labels[i]), str)):
        hint = hints.get(labels[i])
        stated: tuple[tuple[int, ...], str] | None = None
        if isinstance(hint, tuple):
            stated = hint, f"what the script's own step feeds {labels[i]}"
        elif isinstance(hint, str) and hint in labels and labels.index(hint) in specs:
            j = labels.index(hint)
            shape = _output_shape(plan.programs[j], specs[j], sites, tf)
            stated = (shape, f"the output of {hint}, which the script's own step feeds {labels[i]}") if shape else None
        specs[i] = input_specs(plan.programs[i], opts.input_shape, sizes, said, stated)
    return [specs[i] for i in range(len(plan.nets))]


def _output_shape(net: Any, spec: tuple[list[list[int | None]], list[str]], sites: Sites, tf: Any
                  ) -> tuple[int, ...] | None:
    """A network's output's non-batch dims: called once at batch 1 (which makes its weights)."""
    shapes, dtypes = spec
    try:
        out = net(structured(net, [tf.zeros(batched(s, 1), dtype=dt) for s, dt in zip(shapes, dtypes)]))
    except Exception as exc:
        raise user_error(exc, sites, "calling the model once to make its weights failed") from None
    flat = tf.nest.flatten(out)
    return tuple(int(d) for d in flat[0].shape[1:]) if len(flat) == 1 else None


# ---------------------------------------------------------------- the step


def _make_weights(plan: _Plan, sites: Sites, tf: Any) -> list[Any]:
    """The trainable variables of every network; a subclassed model makes its weights on its
    first call: one call at batch 1."""
    for (_, net), (shapes, dtypes) in zip(plan.nets, plan.specs):
        if not trainable(net):
            try:
                net(structured(net, [tf.zeros(batched(s, 1), dtype=dt) for s, dt in zip(shapes, dtypes)]))
            except Exception as exc:
                raise user_error(exc, sites, "calling the model once to make its weights failed") from None
    variables: list[Any] = []
    seen: set[int] = set()
    for _, net in plan.nets:
        for v in trainable(net):
            if id(v) not in seen:
                seen.add(id(v))
                variables.append(v)
    if not variables:
        raise ChildError("the model has no trainable variables")
    return variables


def standin_step(networks: list[tuple[Any, int]], variables: list[Any], tf: Any) -> Any:
    """One step of every network on a stand-in loss (the mean square of its outputs)."""

    def step(*inputs: Any) -> tuple[Any, Any, list[Any]]:
        with tf.GradientTape() as tape:
            losses, outs, i = [], [], 0
            for net, n in networks:
                ins = inputs[i:i + n]
                i += n
                out = net(structured(net, list(ins)), training=True)
                outs.append(out)
                flat = [o for o in tf.nest.flatten(out) if o.dtype.is_floating]
                losses += [tf.reduce_mean(tf.square(tf.cast(o, tf.float32))) for o in flat]
            loss = tf.add_n(losses)
        grads = tape.gradient(loss, variables)
        return loss, outs[0] if len(outs) == 1 else outs, [g for g in grads if g is not None]

    # called, not used as a decorator: TensorFlow's untyped decorator would untype ``step``
    return tf.function(step, jit_compile=True, autograph=False)


def trace_and_lower(step: Any, args: list[Any], kwargs: dict[str, Any] | None = None) -> tuple[Any, str]:
    """Trace a step on ``args`` and lower it to HLO text, marking both phases."""
    kwargs = kwargs or {}
    concrete = step.get_concrete_function(*args, **kwargs)  # creates an optimizer's slots on the first trace
    mark("trace")
    hlo: str = step.experimental_get_compiler_ir(*args, **kwargs)(stage="hlo")
    mark("lower")
    return concrete, hlo


_RESHAPE = re.compile(r"Input to reshape is a tensor with (\d+) values, but the requested shape has (\d+)|"
                      r"Cannot reshape a tensor with (\d+) elements to shape \S* \((\d+) elements\)")


def trace_error(exc: BaseException, sites: Sites, batch: int) -> ChildError:
    """A failed trace; a reshape that hard-codes the batch says which --batch-size fits."""
    err = user_error(exc, sites, "tracing the training step failed")
    m = _RESHAPE.search(str(exc))
    if m or "reshape" in str(exc).lower():
        hint = "a reshape in the script may hard-code its batch: pass --batch-size N with that batch"
        have, want = (int(g) for g in (m.groups()[:2] if m and m.group(1) else m.groups()[2:])) if m else (0, 0)
        if have:
            wanted = want * batch / have
            if wanted == int(wanted) and wanted >= 1:
                hint = f"a reshape in the script hard-codes batch {int(wanted)}: pass --batch-size {int(wanted)}"
        return ChildError(f"{err} ({hint})")
    return err


def _wrapper_step(plan: _Plan, per_core: int, tf: Any) -> tuple[str | None, str, list[Any], Any]:
    """Lower one step of the script's own ``train_step`` on a batch shaped like a network's
    input (the real data a GAN's discriminator or a VAE's encoder eats). (hlo, why not, the
    batch, the traced function: its graph sources the ops a user-written call() makes)."""
    why = ""
    tried: set[tuple[int, ...]] = set()
    for shapes, dtypes in plan.specs:
        shape = batched(shapes[0], per_core)
        if tuple(shape) in tried:
            continue
        tried.add(tuple(shape))
        x = tf.zeros(shape, dtype=dtypes[0])
        fn = tf.function(lambda data: plan.wrapper.train_step(data), jit_compile=True)
        try:
            concrete, hlo = trace_and_lower(fn, [x])
            return hlo, "", [x], concrete
        except Exception as exc:
            why = reason(exc, 160)
    return None, why, [], None


def _standin(plan: _Plan, variables: list[Any], opts: Options, sizes: ScriptSizes | None, said: list[str],
             per_core: int, sites: Sites, tf: Any) -> tuple[str, Any, list[Any]]:
    """Lower every network on the stand-in loss; a layer that only adds the script's loss,
    which XLA cannot compile (a CTC loss), is left to the stand-in loss as any other loss of
    the script's. (hlo, the traced function, the batch)."""
    args = [tf.zeros(batched(s, per_core), dtype=dt) for shapes, dtypes in plan.specs
            for s, dt in zip(shapes, dtypes)]
    step = standin_step([(net, len(sp[0])) for net, sp in zip(plan.programs, plan.specs)], variables, tf)
    try:
        concrete, hlo = trace_and_lower(step, args)
        return hlo, concrete, args
    except ChildError:
        raise
    except Exception as exc:
        cuts = [without_loss_layers(p) if "unsupported operations" in str(exc) else None for p in plan.programs]
        if not any(cuts):
            raise trace_error(exc, sites, per_core) from None
        first = exc
    plan.dropped = [n for c in cuts if c for n in c[1]]
    plan.programs = [c[0] if c else p for c, p in zip(cuts, plan.programs)]
    now: list[str] = []
    plan.specs = [input_specs(net, opts.input_shape, sizes, now) for net in plan.programs]
    said[:] = [s for s in said if not s.startswith("input ")] + now
    args = [tf.zeros(batched(s, per_core), dtype=dt) for shapes, dtypes in plan.specs
            for s, dt in zip(shapes, dtypes)]
    step = standin_step([(net, len(sp[0])) for net, sp in zip(plan.programs, plan.specs)], variables, tf)
    try:
        concrete, hlo = trace_and_lower(step, args)
    except Exception:
        raise trace_error(first, sites, per_core) from None
    rejected = sorted(set(re.findall(r"(\w+) \(No registered '", str(first)))) or ["ops"]
    plan.dropped = [f"{', '.join(plan.dropped)}, which only adds the script's loss: XLA cannot compile "
                    f"its {', '.join(rejected)}, and the stand-in loss stands for it"]
    return hlo, concrete, args


_STANDIN = "a stand-in loss (the mean square of its outputs)"


def _how_standin(plan: _Plan) -> str:
    how = _STANDIN
    if plan.outside:
        how += (f"; lowered from the outputs of its {', '.join(plan.outside)} layers on: lookup tables, "
                "which XLA does not compile and a TPU runs in the input pipeline")
    if plan.dropped:
        how += f"; without {plan.dropped[0]}"
    return how


# ---------------------------------------------------------------- a build


def build_keras(model: Any, opts: Options, sites: Sites, tf: Any, notes: list[str],
                sizes: ScriptSizes | None = None, label: str = "model",
                others: list[tuple[str, Any]] | None = None) -> Lowered:
    """Lower one training step of ``model`` (and ``others`` the script also trains): a
    training wrapper's own ``train_step`` when it traces, else every network on a
    stand-in loss."""
    # A shape read from data that is not loaded is where an input's size came from: the header's.
    said: list[str] = [n for n in notes if n.startswith(DATA_SHAPE)]
    notes[:] = [n for n in notes if n not in said]
    plan = _plan(model, label, list(others or []))
    plan.specs = _specs(plan, opts, sizes, said, sites, tf)
    fixed = plan.specs[0][0][0][0] if plan.specs[0][0] and plan.specs[0][0][0] else None
    global_batch = global_batch_of(opts, fixed, sizes, said)
    per_core = max(1, global_batch // max(1, opts.cores))
    layers = network_layers([net for _, net in plan.nets])
    scopes = record_scopes(layers, tf)
    variables = _make_weights(plan, sites, tf)
    step = _lower(plan, variables, opts, sizes, said, per_core, sites, tf)
    nets = [net for _, net in plan.nets]
    locate, blocks = locator(model, scopes, layers, step.concrete.graph, sites)
    info: dict[str, Any] = {
        "networks": [network_info(name, net, step.how) for name, net in plan.nets],
        "built_how": step.how, "said": said, "assumptions": step.assumptions, "outputs": step.outputs,
        "output_layers": output_layers(nets), "input_sites": input_sites(nets),
        "inputs": [a.shape.as_list() for a in step.args], "global_batch": global_batch, "per_core_batch": per_core,
        "variables": [v.shape.as_list() for v in variables], "blocks": blocks,
    }
    if opts.probe_outputs and plan.wrapper is None:
        shapes, dtypes = plan.specs[0]
        probe(model, shapes, dtypes, per_core, opts.probe_weights, opts.probe_outputs, tf)
    return Lowered(step.hlo, locate, info)


@dataclass
class _Step:
    """A lowered step: its HLO, the traced function, the batch, and how it was made."""

    hlo: str
    concrete: Any
    args: list[Any]
    how: str
    outputs: list[list[int | None]]
    assumptions: list[str] = field(default_factory=list)


def _lower(plan: _Plan, variables: list[Any], opts: Options, sizes: ScriptSizes | None, said: list[str],
           per_core: int, sites: Sites, tf: Any) -> _Step:
    """The wrapper's own train_step when it traces; else the stand-in step, which, for a
    wrapper whose step did not trace, is an assumption."""
    assumptions: list[str] = []
    if plan.wrapper is not None:
        klass = user_method(plan.wrapper, "train_step")
        hlo, why, args, concrete = _wrapper_step(plan, per_core, tf)
        if hlo is not None:
            outputs = [list(o.shape) for _, net in plan.nets for o in (getattr(net, "outputs", None) or [])]
            return _Step(hlo, concrete, args, f"one step of the script's {klass.__name__}.train_step on a batch "
                                              f"of shape {tuple(args[0].shape)}", outputs)
        assumptions.append(
            f"the script's {klass.__name__}.train_step did not trace on a batch of the networks' inputs "
            f"({why}): each network it trains is built alone on {_STANDIN}, at its own input's shape, "
            "which may not be what that step feeds it")
    hlo, concrete, args = _standin(plan, variables, opts, sizes, said, per_core, sites, tf)
    how = f"each network with {_STANDIN}" if plan.wrapper is not None else _how_standin(plan)
    outputs = [list(o.shape) for o in tf.nest.flatten(concrete.structured_outputs[1])]
    return _Step(hlo, concrete, args, how, outputs, assumptions)


def network_info(name: str, net: Any, how: str) -> dict[str, Any]:
    layers = layers_of(net)
    return {"name": name, "how": how, "layers": sorted({layer.name for layer in layers}),
            "classes": sorted({type(layer).__name__ for layer in layers})}


def probe(model: Any, shapes: list[list[int | None]], dtypes: list[str], per_core: int,
          weights: str | None, outputs: str, tf: Any) -> None:
    """Save/load weights and record outputs on a fixed input (fix-equivalence tests)."""
    import numpy as np

    if weights:
        if os.path.exists(weights):
            with np.load(weights) as data:
                model.set_weights([data[f"arr_{i}"] for i in range(len(data.files))])
        else:
            np.savez(weights, *model.get_weights())
    rng = np.random.RandomState(0)
    xs = [rng.standard_normal(batched(s, per_core)).astype(dt) for s, dt in zip(shapes, dtypes)]
    out = model(xs[0] if len(xs) == 1 else xs, training=False)
    np.savez(outputs, *[np.asarray(o) for o in tf.nest.flatten(out)])
