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
  batch->8, features->128; < 64 -> the other way round.
* Kernels (docs/facts.md#2): of the two feature dims of the kernel-shaped tensor (the
  kernel in the forward and input-gradient passes, the result of the weight update) one
  takes the activation's feature multiple (the MXU-facing one) and the other pads to 8.
  That other dim is the op's output features ``n`` in every pass, so ``n`` pads to 8
  and each op has at most one dim at 128, as in the guide's "16*1 out of 128*8"
  (docs/facts.md#6). Padding both to 128 would make the kernel 128 x 128, which fact 2
  rules out.
* Op fit = useful work / padded work (docs/facts.md#6); the step fit weights ops by FLOPs.
* Time is a roofline of the padded FLOPs against the op's arrays as tiled in HBM: the
  MXU pads operands on their way in (not in HBM), but every array is stored in 8x128
  tiles, with its lane dim the one the activations' layout pads to 128. With a small
  per-core batch that is the channels, so a 1-channel activation takes 128x its bytes.
  Useful time is the same op with neither padding.
* HBM: activations tile on their two minor dims, 8x128 for 32-bit types, two rows
  packed per word for 16-bit, 2x128 / 4x128 when the second-minor dim is 1-2 / 3-4
  (docs/facts.md#7). The minor (lane) dim is whichever of batch/feature pads to 128.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from kerasfit.types import DEFAULT_TARGET, TARGETS, Target

from .hlo import FORWARD, INPUT_GRAD, KERNEL_GRAD, HloOp

# docs/facts.md#1: the batch size at which XLA swaps the 8/128 choice.
LARGE_BATCH = 64
# docs/facts.md#7: HBM tiles are 8 sublanes x 128 lanes of 32-bit words on every TPU
# generation (v6e's wider MXU does not change the memory tiling).
SUBLANES = 8
LANES = 128


def roofline(flops: float, nbytes: float, target: str, sixteen_bit: bool) -> float:
    """Seconds for an op on one chip: compute-bound or memory-bound, whichever is slower."""
    chip = TARGETS[target]
    return max(flops / (chip.flops_16 if sixteen_bit else chip.flops_32), nbytes / chip.hbm_bandwidth)


def pad_to(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple if n > 0 else 0


def most_common_batch(batches: Iterable[int]) -> int | None:
    """docs/facts.md#1: the most common batch size; ties go to the larger one."""
    counts = Counter(b for b in batches if b > 0)
    if not counts:
        return None
    return max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0]


def layout(pass_: str, common_batch: int | None, target: Target) -> tuple[int, int]:
    """(batch multiple, feature multiple) of the activations in a pass (docs/facts.md#1, #7, #8).

    The 8 x 128 tiling is the same on every TPU generation; v6e's 256-wide MXU only
    widens the feature dim that faces the MXU (the one padded to 128 elsewhere). A GPU or
    Gaudi never pads the batch (docs/facts.md#17–18); their feature rule is in
    :func:`feature_multiple`.
    """
    if target.family != "tpu":
        return 1, target.small
    large_batch = (common_batch or 0) >= LARGE_BATCH
    weight_update = pass_ == KERNEL_GRAD
    if large_batch != weight_update:
        return LANES, SUBLANES
    return SUBLANES, max(LANES, target.mxu)


def feature_multiple(target: Target, sixteen_bit: bool) -> int:
    """What a GPU or Gaudi pads channels/units to (docs/facts.md#17, #18).

    XLA's GPU pass pads only fp16/bf16 convolutions for tensor cores; float32 is not
    padded. Gaudi's matrix engine wants dims divisible by 128 (bf16) / 64 (fp32).
    """
    if target.family == "gpu":
        return target.small if sixteen_bit else 1
    if target.family == "gaudi":
        return 128 if sixteen_bit else 64
    raise ValueError(target.family)


def semantic_dims(op: HloOp) -> dict[str, str]:
    """Which HLO role (m/k/n) carries the batch and the in/out features in this pass."""
    if op.extra.get("batch"):
        return {"rows": "m", "in_features": "k", "out_features": "n"}
    if op.pass_ == KERNEL_GRAD:
        return {"batch": "k", "in_features": "m", "out_features": "n"}
    return {"batch": "m", "in_features": "k", "out_features": "n"}


def fit_of(real: Iterable[int], padded: Iterable[int]) -> float:
    r, p = math.prod(real), math.prod(padded)
    return r / p if p else 1.0


@dataclass
class OpSim:
    """The simulator's verdict on one op."""

    dims: dict[str, tuple[int, int]]  # batch / in_features / out_features (/ rows): (real, padded)
    fit: float
    flops: int
    padded_flops: float
    tensor: str  # which tensor pads worst: "lhs" | "rhs" | "out"
    shape: list[int]
    padded_shape: list[int]
    multiples: tuple[int, int]  # (batch, feature)
    tensors: dict[str, tuple[list[int], list[int]]] = field(default_factory=dict)  # real, padded
    why: list[str] = field(default_factory=list)  # "batch 16→128", "out-channels 1→8"
    bytes: int = 0  # HBM bytes of the operands and the result, unpadded
    # the same arrays as stored in HBM, tiled (docs/facts.md#7), with the lane dim the
    # activations' layout gives them (docs/facts.md#1); equal to ``bytes`` off TPU
    tiled: int = 0
    tiled_why: list[str] = field(default_factory=list)  # "in HBM: channels 1→128 (lanes)"


def _groups(op: HloOp) -> tuple[int, bool]:
    """(groups, channel-wise). A depthwise conv has no contraction over channels."""
    if op.opcode != "convolution":
        return 1, False
    if op.pass_ == KERNEL_GRAD and op.batch_group_count > 1:
        return op.batch_group_count, op.m == 1
    if op.feature_group_count > 1:
        return op.feature_group_count, op.k == 1
    return 1, False


def _role_multiples(op: HloOp, target: Target, common_batch: int | None) -> dict[str, int]:
    sixteen = op.dtype in ("bf16", "f16")
    sem = semantic_dims(op)
    if target.family != "tpu":
        feat = feature_multiple(target, sixteen)
        mult = {sem["in_features"]: feat, sem["out_features"]: feat}
        mult[sem.get("batch") or sem["rows"]] = 1
        return mult
    if op.extra.get("batch"):
        # Batched matmul: rows stream on sublanes, both matrix dims face the MXU.
        wide = max(LANES, target.mxu)
        return {"m": SUBLANES, "k": wide, "n": wide}
    batch_mult, feat_mult = layout(op.pass_, common_batch, target)
    # docs/facts.md#2: n is the kernel-shaped tensor's non-MXU-facing dim in every pass,
    # unless the op is channel-wise: then the kernel's channels are its only feature dim.
    out_mult = feat_mult if _groups(op)[1] else SUBLANES
    return {sem["batch"]: batch_mult, sem["in_features"]: feat_mult, sem["out_features"]: out_mult}


def _padded_tensor(shape: list[int], roles: dict[str, list[int]], mult: dict[str, int]) -> list[int]:
    # Tiling acts on one minor dim per role: pad the last dim of each role's group.
    out = list(shape)
    for role, dims in roles.items():
        if dims:
            out[dims[-1]] = pad_to(out[dims[-1]], mult[role])
    return out


_DIM_WORDS = {"batch": "batch", "rows": "rows", "in_features": "in-features",
              "out_features": "out-features"}


def simulate_op(op: HloOp, common_batch: int | None, target: Target) -> OpSim:
    mult = _role_multiples(op, target, common_batch)
    sem = semantic_dims(op)
    sizes = {"m": op.m, "k": op.k, "n": op.n}
    groups, channelwise = _groups(op)
    dims: dict[str, tuple[int, int]] = {}
    for name, role in sem.items():
        real, multiple = sizes[role], mult[role]
        if name == "in_features" and channelwise:
            dims[name] = (1, 1)  # one input channel per output channel: no contraction
        elif name in ("in_features", "out_features") and groups > 1 and not channelwise:
            per = real if name == "in_features" else -(-real // groups)
            dims[name] = (real * (groups if name == "in_features" else 1),
                          pad_to(per, multiple) * groups)
        else:
            dims[name] = (real, pad_to(real, multiple))
    if op.extra.get("batch"):
        dims["batch"] = (op.extra["batch"], op.extra["batch"])
    fit = fit_of((r for r, _ in dims.values()), (p for _, p in dims.values()))
    weights = "out" if op.pass_ == KERNEL_GRAD else "rhs"
    shapes = {"lhs": op.lhs_shape, "rhs": op.rhs_shape, "out": op.shape}
    worst = None
    tensors = {}
    itemsize = 2 if op.dtype in ("bf16", "f16") else 4
    real_bytes = 0
    for tensor in ("out", "lhs", "rhs"):
        roles = {r: d for r, d in op.roles.get(tensor, {}).items() if r in mult}
        if channelwise:
            roles.pop(sem["in_features"], None)
        padded = _padded_tensor(shapes[tensor], roles, mult)
        tensors[tensor] = (list(shapes[tensor]), padded)
        real_bytes += math.prod(shapes[tensor]) * itemsize if shapes[tensor] else 0
        if tensor == weights:
            continue
        ratio = fit_of(shapes[tensor], padded)
        if worst is None or ratio < worst[0]:
            worst = (ratio, tensor, padded)
    assert worst is not None
    word = "channels" if op.opcode == "convolution" else "features"
    tiled, tiled_why = _stored_bytes(op, shapes, sem, common_batch, target, itemsize, word)
    why = [f"{_DIM_WORDS[name].replace('features', word)} {r}→{p}"
           for name, (r, p) in dims.items() if p != r]
    if channelwise:
        why.append("channel-wise (no contraction over channels)")
    b = layout(op.pass_, common_batch, target)
    return OpSim(
        dims=dims, fit=fit, flops=op.flops, padded_flops=op.flops / fit if fit else 0.0,
        tensor=worst[1], shape=list(shapes[worst[1]]), padded_shape=worst[2],
        multiples=b, tensors=tensors, why=why, bytes=real_bytes,
        tiled=max(tiled, real_bytes), tiled_why=tiled_why,
    )


def _stored_bytes(op: HloOp, shapes: dict[str, list[int]], sem: dict[str, str], common_batch: int | None,
                  target: Target, itemsize: int, word: str) -> tuple[int, list[str]]:
    """HBM bytes of the op's arrays as a TPU stores them, and the dims that grow.

    An array is tiled on its two most-minor dims (docs/facts.md#7). An activation is
    stored once, in the layout its forward pass gives it (docs/facts.md#1): with a
    per-core batch under 64 the features sit on the 128 lanes, so a 1-channel
    activation takes 128x its size, in every pass that reads or writes it. A kernel
    is stored in-features x out-features, out-features minor.
    """
    real_total = sum(math.prod(v) * itemsize for v in shapes.values() if v)
    if target.family != "tpu":
        return real_total, []
    batch_mult, _ = layout(FORWARD, common_batch, target)
    total = 0
    grows: list[tuple[str, str]] = []
    for tensor in ("lhs", "rhs", "out"):
        shape = shapes[tensor]
        if not shape:
            continue
        roles = op.roles.get(tensor, {})
        if op.extra.get("batch") or len(shape) < 2:
            minor, second = len(shape) - 1, max(len(shape) - 2, 0)
        else:
            batch_dims = roles.get(sem.get("batch", ""), [])
            ins = roles.get(sem["in_features"], [])
            outs = roles.get(sem["out_features"], [])
            feats = outs or ins
            if batch_dims and feats:  # an activation or its gradient
                b, f = batch_dims[-1], feats[-1]
                minor, second = (b, f) if batch_mult == LANES else (f, b)
            elif ins and outs:  # a kernel
                minor, second = outs[-1], ins[-1]
            else:
                minor, second = len(shape) - 1, len(shape) - 2
        if minor == second:
            total += math.prod(shape) * itemsize
            continue
        real, padded = tiled_bytes(shape, second, minor, itemsize)
        total += padded
        if padded >= 2 * real and shape[minor] % LANES:
            lane_dim = "batch" if minor in roles.get(sem.get("batch", ""), []) else word
            grows.append((lane_dim, f"{shape[minor]}→{pad_to(shape[minor], LANES)}"))
    if not grows:
        return total, []
    by_dim: dict[str, list[str]] = {}
    for dim, change in grows:
        if change not in by_dim.setdefault(dim, []):
            by_dim[dim].append(change)
    return total, ["in HBM: " + ", ".join(f"{d} {' and '.join(c)}" for d, c in by_dim.items()) + " on the lanes"]


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


def _batch_of(op: HloOp) -> int:
    if op.extra.get("batch"):
        return int(op.extra["batch"])
    return op.k if op.pass_ == KERNEL_GRAD else op.m


def simulate(ops: list[HloOp], target: str | Target = DEFAULT_TARGET, dtype: str = "float32") -> Simulation:
    t = TARGETS[target] if isinstance(target, str) else target
    convs = [op for op in ops if op.opcode == "convolution"]
    # docs/facts.md#1 counts convolutions; a conv-free model (docs/facts.md#5) uses its matmuls.
    pool = convs or ops
    common = most_common_batch(_batch_of(op) for op in pool)
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
        role = semantic_dims(op).get("batch")
        size = getattr(op, role) if role else None
        if role is None or size != old:
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
