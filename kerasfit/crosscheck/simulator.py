"""Model how a TPU pads each convolution and matmul of a training step. Pure Python.

The numbers are docs/facts.md section A; the per-target multiples come from
``kerasfit.core.types.TARGETS`` (``small`` = 8, ``large`` = 128, 256 on v6e).

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
* Padding multiples come from one rule, ``kerasfit.core.types.pad_multiple`` (what KF102's
  message reads too): in a pass every feature dim -- the activation's, the result's and
  both of a kernel's -- pads like the activation features (docs/facts.md#1, #3), which
  is fact 2's upper bound for a kernel (``kerasfit.core.types.KERNEL_BOUND``). The guide's
  "16*1 out of 128*8" (docs/facts.md#6) is this rule's weight update at a small batch.
* A depthwise conv has no contraction over channels: it is vector-unit (VPU) work, timed
  by the bytes it moves, not MXU work. A grouped conv is per-group MXU work.
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
from typing import Any, Callable, Iterable

from kerasfit.core import gpumodel
from kerasfit.core.types import (
    BATCH,
    DEFAULT_TARGET,
    KERNEL_IN,
    KERNEL_OUT,
    LANES,
    LARGE_BATCH,
    MATRIX,
    ROWS,
    SUBLANES,
    TARGETS,
    FEATURE,
    Target,
    pad_multiple,
)

from .hlo import DTYPE_BYTES, FORWARD, INPUT_GRAD, KERNEL_GRAD, HloOp


def roofline(flops: float, nbytes: float, chip: Target, sixteen_bit: bool) -> float:
    """Seconds for an op on one chip: compute-bound or memory-bound, whichever is slower."""
    return max(flops / (chip.flops_16 if sixteen_bit else chip.flops_32), nbytes / chip.hbm_bandwidth)


def op_seconds(op: HloOp, s: OpSim, chip: Target) -> tuple[float, float, str, list[str]]:
    """(time, useful time, bound, causes) of a simulated op per step. A TPU or Gaudi: its
    padded work on the matrix unit (none for VPU work) or its tiled bytes through HBM,
    whichever is slower; useful is the same op unpadded. A GPU: the GPU cost model
    (kerasfit.core.gpumodel, docs/facts.md#18, #27)."""
    sixteen = op.dtype in ("bf16", "f16")
    if chip.family == "gpu" and s.unit == "MXU":
        sem = semantic_dims(op)
        channels = [s.dims[n][0] for n in ("rows", "in_features", "out_features") if n in s.dims]
        if op.extra.get("batch"):
            rows, cols, batch = op.m, op.n, int(op.extra["batch"])
        elif op.pass_ == KERNEL_GRAD:
            rows = cols = batch = 0  # split over the contraction: no waves
        else:
            cols = getattr(op, sem["out_features"])
            rows, batch = math.prod(op.shape) // max(cols, 1), 1
        g = gpumodel.op_time(chip, gpumodel.GpuOp(
            flops=s.flops / s.trips, padded_flops=s.padded_flops / s.trips, channels=tuple(channels),
            nbytes=s.bytes // s.trips, dtype=op.dtype, conv=op.opcode == "convolution",
            rows=rows, cols=cols, batch=batch))
        compute = s.padded_flops / (chip.flops_16 if sixteen else chip.flops_32)
        bound = "MXU" if compute >= s.bytes / chip.hbm_bandwidth else "HBM"
        return g.time * s.trips, g.useful * s.trips, bound, list(g.causes)
    bandwidth = gpumodel.achieved_bandwidth(chip)
    mxu = 0.0 if s.unit == "VPU" else s.padded_flops / (chip.flops_16 if sixteen else chip.flops_32)
    useful = s.bytes / bandwidth if s.unit == "VPU" else roofline(s.flops, s.bytes, chip, sixteen)
    memory = s.tiled / bandwidth
    return max(mxu, memory), useful, "MXU" if mxu > memory else "HBM", []


def pad_to(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple if n > 0 else 0


def most_common_batch(batches: Iterable[int]) -> int | None:
    """docs/facts.md#1: the most common batch size; ties go to the larger one."""
    counts = Counter(b for b in batches if b > 0)
    if not counts:
        return None
    return max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0]


def layout(pass_: str, common_batch: int | None, target: Target,
           dtype: str = "float32") -> tuple[int, int]:
    """(batch multiple, feature multiple) of the activations in a pass: the padding rule
    (``kerasfit.core.types.pad_multiple``, docs/facts.md#1, #7, #8, #17, #18)."""
    return (pad_multiple(target, BATCH, pass_, common_batch, dtype),
            pad_multiple(target, FEATURE, pass_, common_batch, dtype))


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
    """The simulator's verdict on one op (per step: a while body's op counts its trips)."""

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
    unit: str = "MXU"  # "VPU": a depthwise conv, no contraction for the matrix unit
    trips: int = 1
    time: float = 0.0  # seconds per step on the target (:func:`op_seconds`)
    useful_time: float = 0.0  # the same op unpadded
    bound: str = "HBM"  # what its time waits on: "MXU" (the matrix unit) or "HBM"
    # a GPU's extra time that is not padding, in words (kerasfit.core.gpumodel)
    causes: list[str] = field(default_factory=list)


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
    """The padding rule (``kerasfit.core.types.pad_multiple``) for the op's m/k/n dims."""
    if op.extra.get("batch"):
        # Batched matmul: rows stream on sublanes, both matrix dims face the MXU.
        return {"m": pad_multiple(target, ROWS, op.pass_, common_batch, op.dtype),
                "k": pad_multiple(target, MATRIX, op.pass_, common_batch, op.dtype),
                "n": pad_multiple(target, MATRIX, op.pass_, common_batch, op.dtype)}
    sem = semantic_dims(op)
    return {sem["batch"]: pad_multiple(target, BATCH, op.pass_, common_batch, op.dtype),
            sem["in_features"]: pad_multiple(target, KERNEL_IN, op.pass_, common_batch, op.dtype),
            sem["out_features"]: pad_multiple(target, KERNEL_OUT, op.pass_, common_batch, op.dtype)}


def _padded_tensor(shape: list[int], roles: dict[str, list[int]], mult: dict[str, int],
                   pad: Callable[[int, int, str], int]) -> list[int]:
    """The tensor as the MXU sees it: each role's dims merged into one, padded.

    A dot over ``[batch, seq, features]`` streams batch x seq rows, exactly like the same
    dot after a reshape to 2-D: merged, the two cost the same.
    """
    return [pad(n, mult[role], role) if role is not None else n for n, role in _merge(shape, roles)]


def _merged(shape: list[int], roles: dict[str, list[int]]) -> list[int]:
    return [n for n, _ in _merge(shape, roles)]


def _merge(shape: list[int], roles: dict[str, list[int]]) -> list[tuple[int, str | None]]:
    """Each dim, or each role's dims merged into one (at the role's first dim), with its role."""
    owner = {d: r for r, ds in roles.items() for d in ds}
    out: list[tuple[int, str | None]] = []
    done: set[str] = set()
    for i, size in enumerate(shape):
        role = owner.get(i)
        if role is None:
            out.append((size, None))
        elif role not in done:
            done.add(role)
            out.append((math.prod(shape[d] for d in roles[role]), role))
    return out


_DIM_WORDS = {"batch": "batch", "rows": "rows", "in_features": "in-features",
              "out_features": "out-features"}


def _padder(target: Target, batch_role: str | None) -> Callable[[int, int, str], int]:
    """How a dim of a role is padded: to its multiple, and on a GPU a channel dim also to
    the kernels' whole tile (kerasfit.core.gpumodel); the batch is never tiled."""
    if target.family != "gpu":
        return lambda n, multiple, role: pad_to(n, multiple)
    return lambda n, multiple, role: pad_to(n, multiple) if role == batch_role else gpumodel.channel_tile(n, multiple)


def _op_dims(op: HloOp, sem: dict[str, str], mult: dict[str, int], pad: Callable[[int, int, str], int],
             ) -> dict[str, tuple[int, int]]:
    """(real, padded) of the op's batch (or rows), in- and out-features."""
    sizes = {"m": op.m, "k": op.k, "n": op.n}
    groups, channelwise = _groups(op)
    dims: dict[str, tuple[int, int]] = {}
    for name, role in sem.items():
        real, multiple = sizes[role], mult[role]
        if channelwise:
            # VPU work: nothing is padded for a matrix unit (docs/facts.md#5 covers
            # contractions; a depthwise conv contracts over no channel)
            dims[name] = (1, 1) if name == "in_features" else (real, real)
        elif name in ("in_features", "out_features") and groups > 1:
            per = real if name == "in_features" else -(-real // groups)
            dims[name] = (real * (groups if name == "in_features" else 1), pad(per, multiple, role) * groups)
        else:
            dims[name] = (real, pad(real, multiple, role))
    if op.extra.get("batch"):
        dims["batch"] = (op.extra["batch"], op.extra["batch"])
    return dims


def _op_tensors(op: HloOp, mult: dict[str, int], pad: Callable[[int, int, str], int], channelwise: bool
                ) -> tuple[dict[str, tuple[list[int], list[int]]], tuple[str, list[int], list[int]], int]:
    """Each tensor merged by role, real and padded; the activation that pads worst; the
    arrays' real bytes (one run)."""
    weights = "out" if op.pass_ == KERNEL_GRAD else "rhs"
    shapes = {"lhs": op.lhs_shape, "rhs": op.rhs_shape, "out": op.shape}
    itemsize = DTYPE_BYTES.get(op.dtype, 4)
    tensors, worst, real_bytes = {}, None, 0
    for tensor in ("out", "lhs", "rhs"):
        roles = {} if channelwise else {r: d for r, d in op.roles.get(tensor, {}).items() if r in mult}
        padded = _padded_tensor(shapes[tensor], roles, mult, pad)
        merged = _merged(shapes[tensor], roles)
        tensors[tensor] = (merged, padded)
        real_bytes += math.prod(shapes[tensor]) * itemsize if shapes[tensor] else 0
        ratio = fit_of(merged, padded)
        if tensor != weights and (worst is None or ratio < worst[0]):
            worst = (ratio, tensor, merged, padded)
    assert worst is not None
    return tensors, worst[1:], real_bytes


def simulate_op(op: HloOp, common_batch: int | None, target: Target) -> OpSim:
    mult = _role_multiples(op, target, common_batch)
    sem = semantic_dims(op)
    pad = _padder(target, sem.get("batch"))
    _, channelwise = _groups(op)
    trips = int(op.extra.get("trips") or 1)
    dims = _op_dims(op, sem, mult, pad)
    fit = fit_of((r for r, _ in dims.values()), (p for _, p in dims.values()))
    tensors, (tensor, shape, padded_shape), real_bytes = _op_tensors(op, mult, pad, channelwise)
    word = "channels" if op.opcode == "convolution" else "features"
    shapes = {"lhs": op.lhs_shape, "rhs": op.rhs_shape, "out": op.shape}
    tiled, tiled_why = _stored_bytes(op, shapes, sem, common_batch, target, DTYPE_BYTES.get(op.dtype, 4), word)
    why = [f"{_DIM_WORDS[name].replace('features', word)} {r}→{p}"
           for name, (r, p) in dims.items() if p != r]
    if channelwise:
        why.append("depthwise: VPU work, no contraction over channels (timed by its HBM bytes)")
    sim = OpSim(
        dims=dims, fit=fit, flops=op.flops * trips,
        padded_flops=op.flops * trips / fit if fit else 0.0,
        tensor=tensor, shape=shape, padded_shape=padded_shape,
        multiples=layout(op.pass_, common_batch, target, op.dtype), tensors=tensors, why=why,
        bytes=real_bytes * trips, tiled=max(tiled, real_bytes) * trips, tiled_why=tiled_why,
        unit="VPU" if channelwise else "MXU", trips=trips,
    )
    sim.time, sim.useful_time, sim.bound, sim.causes = op_seconds(op, sim, target)
    return sim


def _stored_bytes(op: HloOp, shapes: dict[str, list[int]], sem: dict[str, str], common_batch: int | None,
                  target: Target, itemsize: int, word: str) -> tuple[int, list[str]]:
    """HBM bytes of the op's arrays as a TPU stores them, and the dims that grow.

    An array is tiled on its two most-minor dims (docs/facts.md#7). An activation is
    stored once, in the layout its forward pass gives it (docs/facts.md#1): with a
    per-core batch under 64 the features sit on the 128 lanes, so a 1-channel
    activation takes 128x its size, in every pass that reads or writes it. A kernel
    is stored in-features x out-features, out-features minor. A role spread over
    several dims (a 3-D dot's batch x sequence rows) is tiled as the one dim it is to
    the MXU, so the sequence never lands on the lanes; a batched matmul's batch dims
    are never tiled.
    """
    real_total = sum(math.prod(v) * itemsize for v in shapes.values() if v)
    if target.family != "tpu":
        return real_total, []
    batch_mult, _ = layout(FORWARD, common_batch, target)
    total = 0
    grows: list[tuple[int, str, str]] = []
    for tensor in ("lhs", "rhs", "out"):
        full = shapes[tensor]
        if not full:
            continue
        roles = {r: d for r, d in op.roles.get(tensor, {}).items() if r in ("m", "k", "n")}
        merged = _merge(full, roles)
        shape = [n for n, _ in merged]
        pos = {role: j for j, (_, role) in enumerate(merged) if role is not None}  # each role's dim in ``shape``
        minor, second, kernel = _tiled_dims(op, shape, pos, sem, batch_mult)
        if minor == second:
            total += math.prod(shape) * itemsize
            continue
        real, padded = tiled_bytes(shape, second, minor, itemsize)
        total += padded
        if padded >= 2 * real and shape[minor] % LANES:
            lane_dim = ("batch" if minor == pos.get(sem.get("batch", ""), -1)
                        else f"kernel {word}" if kernel else word)
            grows.append((padded - real, lane_dim, f"{shape[minor]}→{pad_to(shape[minor], LANES)}"))
        elif shape[second] <= 4 and padded > real:
            grows.append((padded - real, "sublanes", f"{word} {shape[second]}→{2 if shape[second] <= 2 else 4}"))
    return total, _growth_why(grows)


def _tiled_dims(op: HloOp, shape: list[int], pos: dict[str, int], sem: dict[str, str],
                batch_mult: int) -> tuple[int, int, bool]:
    """(minor, second-minor) dims an array of the op is tiled on, and whether it is a kernel:
    an activation (or its gradient) in its forward layout, a kernel as laid out, a batched
    matmul's or any other array on its last two dims."""
    if op.extra.get("batch") or len(shape) < 2:
        return len(shape) - 1, max(len(shape) - 2, 0), False
    b_pos = pos.get(sem.get("batch", ""))
    i_pos = pos.get(sem["in_features"])
    o_pos = pos.get(sem["out_features"])
    f_pos = o_pos if o_pos is not None else i_pos
    if b_pos is not None and f_pos is not None:  # an activation or its gradient
        minor, second = (b_pos, f_pos) if batch_mult == LANES else (f_pos, b_pos)
        return minor, second, False
    kernel = i_pos is not None and o_pos is not None  # a kernel: as the array is laid out
    return len(shape) - 1, len(shape) - 2, kernel


def _growth_why(grows: list[tuple[int, str, str]]) -> list[str]:
    """The one "in HBM" line naming the dims that grow, for the arrays whose padding is a
    real part of the extra bytes (none: no line)."""
    most = max((g[0] for g in grows), default=0)
    grows = [g for g in grows if g[0] * 4 >= most]
    if not grows:
        return []
    by_dim: dict[str, list[str]] = {}
    for _, dim, change in grows:
        if change not in by_dim.setdefault(dim, []):
            by_dim[dim].append(change)
    parts = [f"{d} {' and '.join(c)} on the lanes" for d, c in by_dim.items() if d != "sublanes"]
    parts += [f"{c} (a small sublane tile, docs/facts.md#7)" for c in by_dim.get("sublanes", [])]
    return ["in HBM: " + "; ".join(parts)]


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


def stored_activations(ops: list[HloOp], target: Target) -> tuple[int, int]:
    """(real, stored) bytes of the step's forward activations: every forward conv/dot's
    input and output once, a while body's per trip, each tiled in the layout the report
    gives it (docs/facts.md#1, #7): on a TPU the dim the activations' layout pads to 128
    is the minor (lane) one — the batch at a common batch of 64 or more, else the
    features — and a batched matmul's arrays tile their two last dims; elsewhere the
    features pad to the target's multiple. What the HBM need counts, and what the
    expansion line divides."""
    common = _common_batch(ops)
    batch_mult, _ = layout(FORWARD, common, target)
    seen: set[str] = set()
    real = stored = 0
    for op in ops:
        if op.pass_ != FORWARD:
            continue
        trips = int(op.extra.get("trips") or 1)
        itemsize = DTYPE_BYTES.get(op.dtype, 4)
        for name, full, roles in ((op.lhs, op.lhs_shape, op.roles["lhs"]), (op.name, op.shape, op.roles["out"])):
            if name in seen or not full:
                continue
            seen.add(name)
            r, p = _stored(op, full, roles, target, common, batch_mult == LANES, itemsize)
            real += r * trips
            stored += p * trips
    return real, stored


def _stored(op: HloOp, full: list[int], roles: dict[str, list[int]], target: Target, common: int | None,
            batch_on_lanes: bool, itemsize: int) -> tuple[int, int]:
    """(real, stored) bytes of one activation (:func:`stored_activations`)."""
    feat = "k" if "k" in roles else "n"
    if op.extra.get("batch") or not roles.get("m") or not roles.get(feat):
        # a batched matmul's operand (its batch dims never tiled), or no batch/feature role
        shape = [n for n in full]
        if len(shape) < 2 or target.family != "tpu":
            return math.prod(shape) * itemsize, math.prod(shape) * itemsize
        return tiled_bytes(shape, len(shape) - 2, len(shape) - 1, itemsize)
    used = {r: roles[r] for r in ("m", feat)}
    shape = _merged(full, used)
    order = _role_order(full, used)
    b, f = order.index("m"), order.index(feat)
    if target.family != "tpu":
        r = math.prod(shape) * itemsize
        return r, pad_to(shape[f], pad_multiple(target, FEATURE, FORWARD, common, op.dtype)) * r // max(shape[f], 1)
    # The dim padded to the lanes is the minor one (docs/facts.md#1, #7).
    minor, second = (b, f) if batch_on_lanes else (f, b)
    return tiled_bytes(shape, second, minor, itemsize)


def _role_order(full: list[int], roles: dict[str, list[int]]) -> list[str]:
    """The merged shape's dims named by role ("" for a dim of no role)."""
    owner = {d: r for r, ds in roles.items() for d in ds}
    out: list[str] = []
    for i in range(len(full)):
        role = owner.get(i, "")
        if role == "" or role not in out:
            out.append(role)
    return out


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


def _common_batch(ops: list[HloOp]) -> int | None:
    """docs/facts.md#1 counts convolutions; a conv-free model (docs/facts.md#5) uses its matmuls."""
    convs = [op for op in ops if op.opcode == "convolution"]
    return most_common_batch(_batch_of(op) for op in convs or ops)


def simulate(ops: list[HloOp], target: str | Target = DEFAULT_TARGET, dtype: str = "float32") -> Simulation:
    t = TARGETS[target] if isinstance(target, str) else target
    common = _common_batch(ops)
    sim = Simulation(target=t.name, common_batch=common)
    for op in ops:
        sim.ops.append((op, simulate_op(op, common, t)))
    sim.flops = sum(s.flops for _, s in sim.ops)
    sim.padded_flops = sum(s.padded_flops for _, s in sim.ops)
    # the MXU fit: a depthwise conv's VPU work has no matrix-unit padding to weigh in
    mxu = [s for _, s in sim.ops if s.unit == "MXU"]
    useful, padded = sum(s.flops for s in mxu), sum(s.padded_flops for s in mxu)
    sim.step_fit = useful / padded if padded else 1.0
    real, stored = stored_activations(ops, t)
    sim.hbm_expansion = stored / real if real else 1.0
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
        _resize(clone, role, old, new)
        out.append(clone)
    return out


def _resize(op: HloOp, role: str, old: int, new: int) -> None:
    """Change the arrays' dim of a role from ``old`` to ``new`` too, so a what-if's HBM
    bytes (its time, and ``report.hbm_need``) follow its FLOPs."""
    for tensor, attr in (("lhs", "lhs_shape"), ("rhs", "rhs_shape"), ("out", "shape")):
        dims = op.roles.get(tensor, {}).get(role, [])
        shape = list(getattr(op, attr))
        if len(dims) == 1 and dims[0] < len(shape) and shape[dims[0]] == old:
            shape[dims[0]] = new
            setattr(op, attr, shape)


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
                _resize(clone, role, old, new)
        out.append(clone or op)
    return out


__all__ = [
    "INPUT_GRAD", "LARGE_BATCH", "OpSim", "Simulation", "fit_of", "stored_activations",
    "layout", "most_common_batch", "pad_to", "simulate", "simulate_op", "tiled_bytes",
    "with_batch", "with_features",
]
