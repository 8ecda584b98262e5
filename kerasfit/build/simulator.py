"""Model how a TPU pads each convolution and matmul of a training step. Pure Python.

The numbers are docs/facts.md section A; the per-target multiples come from
``kerasfit.types.TARGETS`` (``small`` = 8, ``large`` = 128, 256 on v6e).

The model, stated once:

* Every op is a contraction over ``batch`` x ``in`` features -> ``out`` features, plus
  spatial/window dims the MXU does not pad (docs/facts.md#5: matmuls are lowered to
  convolutions). In the forward and input-gradient passes the streaming rows (HLO
  ``m``) are the batch and the contracted dim (``k``) is a feature; in the
  kernel-gradient pass the contraction runs over the batch, so ``k`` is the batch
  and ``m`` the input features.
* The most common batch among the step's convolutions picks the layout (docs/facts.md#1):
  >= 64 -> forward/input-gradient pad batch->128, features->8 and kernel-gradient pad
  batch->8, features->128; < 64 -> the other way round. Kernels and results follow
  the activations they meet (docs/facts.md#2–3 leave the choice to the compiler).
* Op fit = useful work / padded work (docs/facts.md#6); the step fit weights ops by FLOPs.
* HBM: activations tile on their two minor dims, 8x128 for 32-bit types, two rows
  packed per word for 16-bit, 2x128 / 4x128 when the second-minor dim is 1-2 / 3-4
  (docs/facts.md#7). The minor (lane) dim is whichever of batch/feature pads to 128.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from kerasfit.types import TARGETS, Target

from .hlo import FORWARD, INPUT_GRAD, KERNEL_GRAD, HloOp

# docs/facts.md#1: the batch size at which XLA swaps the 8/128 choice.
LARGE_BATCH = 64
# docs/facts.md#7: HBM tiles are 8 sublanes x 128 lanes of 32-bit words on every TPU
# generation (v6e's wider MXU does not change the memory tiling).
SUBLANES = 8
LANES = 128


def pad_to(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple if n > 0 else 0


def most_common_batch(batches: Iterable[int]) -> int | None:
    """docs/facts.md#1: the most common batch size; ties go to the larger one."""
    counts = Counter(b for b in batches if b > 0)
    if not counts:
        return None
    return max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0]


def layout(pass_: str, common_batch: int | None, target: Target) -> tuple[int, int]:
    """(batch multiple, feature multiple) for a pass (docs/facts.md#1; 8 vs 128/256, fact 8)."""
    large_batch = (common_batch or 0) >= LARGE_BATCH
    weight_update = pass_ == KERNEL_GRAD
    if large_batch != weight_update:
        return target.large, target.small
    return target.small, target.large


def semantic_dims(op: HloOp) -> dict[str, str]:
    """Which HLO role (m/k/n) carries the batch and the in/out features in this pass."""
    if op.pass_ == KERNEL_GRAD:
        return {"batch": "k", "in_features": "m", "out_features": "n"}
    return {"batch": "m", "in_features": "k", "out_features": "n"}


def fit_of(real: Iterable[int], padded: Iterable[int]) -> float:
    r, p = math.prod(real), math.prod(padded)
    return r / p if p else 1.0


@dataclass
class OpSim:
    """The simulator's verdict on one op."""

    dims: dict[str, tuple[int, int]]  # batch / in_features / out_features: (real, padded)
    fit: float
    flops: int
    padded_flops: float
    tensor: str  # which tensor pads worst: "lhs" | "rhs" | "out"
    shape: list[int]
    padded_shape: list[int]
    multiples: tuple[int, int]  # (batch, feature)
    tensors: dict[str, tuple[list[int], list[int]]] = field(default_factory=dict)  # real, padded


def _role_multiples(op: HloOp, batch_mult: int, feat_mult: int) -> dict[str, int]:
    sem = semantic_dims(op)
    return {sem["batch"]: batch_mult, sem["in_features"]: feat_mult, sem["out_features"]: feat_mult}


def _padded_tensor(shape: list[int], roles: dict[str, list[int]], mult: dict[str, int]) -> list[int]:
    # Tiling acts on one minor dim per role: pad the last dim of each role's group.
    out = list(shape)
    for role, dims in roles.items():
        if dims:
            out[dims[-1]] = pad_to(out[dims[-1]], mult[role])
    return out


def simulate_op(op: HloOp, common_batch: int | None, target: Target) -> OpSim:
    batch_mult, feat_mult = layout(op.pass_, common_batch, target)
    mult = _role_multiples(op, batch_mult, feat_mult)
    sem = semantic_dims(op)
    sizes = {"m": op.m, "k": op.k, "n": op.n}
    dims = {}
    for name, role in sem.items():
        dims[name] = (sizes[role], pad_to(sizes[role], mult[role]))
    fit = fit_of((r for r, _ in dims.values()), (p for _, p in dims.values()))
    # The weights are not an activation: forward/input-gradient read them as the rhs,
    # the kernel-gradient writes them as its result.
    weights = "out" if op.pass_ == KERNEL_GRAD else "rhs"
    shapes = {"lhs": op.lhs_shape, "rhs": op.rhs_shape, "out": op.shape}
    worst = None
    tensors = {}
    for tensor in ("out", "lhs", "rhs"):
        padded = _padded_tensor(shapes[tensor], op.roles.get(tensor, {}), mult)
        tensors[tensor] = (list(shapes[tensor]), padded)
        if tensor == weights:
            continue
        ratio = fit_of(shapes[tensor], padded)
        if worst is None or ratio < worst[0]:
            worst = (ratio, tensor, padded)
    assert worst is not None
    return OpSim(
        dims=dims, fit=fit, flops=op.flops, padded_flops=op.flops / fit if fit else 0.0,
        tensor=worst[1], shape=list(shapes[worst[1]]), padded_shape=worst[2],
        multiples=(batch_mult, feat_mult), tensors=tensors,
    )


def tiled_bytes(shape: list[int], second_minor: int, minor: int, itemsize: int) -> tuple[int, int]:
    """(real, padded) bytes of an array tiled on the given two dims (docs/facts.md#7)."""
    if not shape:
        return 0, 0
    real = math.prod(shape) * itemsize
    rows = shape[second_minor]
    # Small tiles for a short second-minor dim; 16-bit types pack two rows per word.
    tile_rows = 2 if rows <= 2 else 4 if rows <= 4 else SUBLANES
    tile_rows *= max(1, 4 // itemsize)
    padded_shape = list(shape)
    padded_shape[second_minor] = pad_to(rows, tile_rows)
    padded_shape[minor] = pad_to(shape[minor], LANES)
    return real, math.prod(padded_shape) * itemsize


def activation_expansion(ops: list[HloOp], common_batch: int | None, target: Target,
                         itemsize: int) -> float:
    """HBM expansion of the forward activations, like the profiler's memory viewer."""
    seen: set[str] = set()
    real = padded = 0
    for op in ops:
        if op.pass_ != FORWARD:
            continue
        batch_mult, _ = layout(FORWARD, common_batch, target)
        for name, shape, roles in ((op.lhs, op.lhs_shape, op.roles["lhs"]),
                                   (op.name, op.shape, op.roles["out"])):
            if name in seen or not shape:
                continue
            seen.add(name)
            b = roles.get("m", [])
            f = roles.get("k", []) or roles.get("n", [])
            if not b or not f:
                continue
            # The dim padded to the wide multiple is the lane (minor) dim.
            minor, second = (b[-1], f[-1]) if batch_mult > target.small else (f[-1], b[-1])
            if target.family != "tpu":
                r = math.prod(shape) * itemsize
                p = pad_to(shape[f[-1]], target.small) * r // max(shape[f[-1]], 1)
            else:
                r, p = tiled_bytes(shape, second, minor, itemsize)
            real += r
            padded += p
    return padded / real if real else 1.0


@dataclass
class Simulation:
    target: str
    common_batch: int | None
    ops: list[tuple[HloOp, OpSim]] = field(default_factory=list)
    step_fit: float = 1.0
    hbm_expansion: float = 1.0
    flops: int = 0
    padded_flops: float = 0.0

    def summary(self) -> dict[str, Any]:
        return {"target": self.target, "common_batch": self.common_batch,
                "step_fit": self.step_fit, "hbm_expansion": self.hbm_expansion}


def simulate(ops: list[HloOp], target: str | Target = "tpu-v5e", dtype: str = "float32") -> Simulation:
    t = TARGETS[target] if isinstance(target, str) else target
    convs = [op for op in ops if op.opcode == "convolution"]
    # docs/facts.md#1 counts convolutions; a conv-free model (docs/facts.md#5) uses its matmuls.
    pool = convs or ops
    common = most_common_batch(op.k if op.pass_ == KERNEL_GRAD else op.m for op in pool)
    sim = Simulation(target=t.name, common_batch=common)
    for op in ops:
        sim.ops.append((op, simulate_op(op, common, t)))
    sim.flops = sum(s.flops for _, s in sim.ops)
    sim.padded_flops = sum(s.padded_flops for _, s in sim.ops)
    sim.step_fit = sim.flops / sim.padded_flops if sim.padded_flops else 1.0
    itemsize = 2 if dtype in ("bfloat16", "float16") else 4
    sim.hbm_expansion = activation_expansion(ops, common, t, itemsize)
    return sim


def with_batch(ops: list[HloOp], old: int, new: int) -> list[HloOp]:
    """The same step at another per-core batch: what-if for the recommendations."""
    out = []
    for op in ops:
        role = semantic_dims(op)["batch"]
        size = getattr(op, role)
        if size != old:
            out.append(op)
            continue
        scale = new / old
        clone = HloOp.from_dict(op.to_dict())
        setattr(clone, role, new)
        clone.flops = int(op.flops * scale)
        out.append(clone)
    return out


def with_features(ops: list[HloOp], names: set[str], old: int, new: int) -> list[HloOp]:
    """The step with a layer's feature count ``old`` changed to ``new``.

    ``names`` are the layer's own ops (both feature dims change); every other op whose
    input features are ``old`` is taken to consume the layer's output and changes too.
    """
    out = []
    for op in ops:
        sem = semantic_dims(op)
        dims = ("in_features", "out_features") if op.name in names else ("in_features",)
        clone = None
        for dim in dims:
            role = sem[dim]
            if getattr(op, role) == old:
                clone = clone or HloOp.from_dict(op.to_dict())
                clone.flops = int(clone.flops * new / old)
                setattr(clone, role, new)
        out.append(clone or op)
    return out


__all__ = [
    "INPUT_GRAD", "LARGE_BATCH", "OpSim", "Simulation", "activation_expansion", "fit_of",
    "layout", "most_common_batch", "pad_to", "simulate", "simulate_op", "tiled_bytes",
    "with_batch", "with_features",
]
