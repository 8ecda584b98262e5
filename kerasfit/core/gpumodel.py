"""The GPU cost model: what decides a tensor-core GPU's time for one op of a training step.

Pure functions over plain numbers, so the build report (through the simulator) and KF102's
message read the same model. The structure is the vendor's (docs/facts.md#18): tensor
cores take a contraction only when its channel dims are multiples of 16 bytes (8 for
16-bit types, 4 for TF32), the kernels compute a channel dim in whole tiles (16, 32 or 64
wide, then 64-wide steps) and run their 128x128 output tiles in waves over the streaming
multiprocessors. The constants are calibrated on
kerasfit's own H200 measurements (docs/facts.md#27), which also gave the rest:

* off the tensor-core multiple, XLA pads a 16-bit contraction's operands to it and slices
  its result, and a float32 one runs without TF32: each costs ``repad`` extra passes
  over the op's arrays through HBM;
* channels that are whole 16-byte groups but not whole 32-byte sectors (120 bf16, 60
  float32) run the op's compute ``unaligned`` slower;
* a convolution or matmul pays a fixed cost per kernel (``conv_fixed``, ``dot_fixed``),
  whatever its size;
* a zero pad before a convolution is the convolution's own padding in every pass (free),
  and the max-pool gradient's select-and-scatter takes ``scatter`` times its bytes' time.

The model's time for an op is its padded work over the achieved tensor-core rate or its
bytes over the achieved bandwidth, whichever is slower, plus those penalties; its useful
time is the same op with no padding, no penalty and a full last wave.
"""

from __future__ import annotations

from dataclasses import dataclass

from .types import KERNEL_OUT, Target, pad_multiple

# docs/facts.md#18: tensor cores want channel dims in multiples of 16 bytes.
TENSOR_CORE_BYTES = 16
# docs/facts.md#27: full speed wants them in whole 32-byte memory sectors.
FULL_RATE_BYTES = 32
# Output tile of the kernels (rows x columns) a wave is counted in.
TILE = 128


@dataclass(frozen=True)
class Calibration:
    """The fitted constants (docs/facts.md#27: fitted on 38 of the 64 measured steps, the
    rest held out), rounded."""

    compute: float = 0.8  # achieved share of the tensor-core peak
    memory: float = 0.7  # achieved share of HBM bandwidth
    conv_fixed: float = 38e-6  # seconds per convolution kernel
    dot_fixed: float = 7e-6  # seconds per matmul kernel
    unaligned: float = 0.75  # extra compute time when a channel dim is off 32 bytes
    repad_16: float = 5.0  # extra HBM passes over its arrays, 16-bit, off the tensor-core multiple
    repad_32: float = 4.0  # the same for float32 (no TF32)
    scatter: float = 26.0  # select-and-scatter: this many times its bytes' time


CALIBRATION = Calibration()
_SIXTEEN = frozenset({"bfloat16", "float16", "bf16", "f16"})


def itemsize(dtype: str) -> int:
    return 2 if dtype in _SIXTEEN else 4


def tensor_core_multiple(dtype: str) -> int:
    """What a channel count must be a multiple of for tensor cores: 8 (16-bit), 4 (TF32)."""
    return TENSOR_CORE_BYTES // itemsize(dtype)


def full_rate_multiple(dtype: str) -> int:
    """What a channel count must be a multiple of to run at full speed: 16 / 8."""
    return FULL_RATE_BYTES // itemsize(dtype)


def kernel_tile(n: int) -> int:
    """What a channel dim computes as in the kernels' tiles: 16, 32 or 64 up to 64, then
    whole 64-wide tiles. 1–4 channels (an image's) use the 4-channel kernels XLA pads a
    3-channel input to (docs/facts.md#18)."""
    if n <= 4:
        return 4
    for t in (16, 32, 64):
        if n <= t:
            return t
    return -(-n // 64) * 64


def channel_tile(n: int, multiple: int) -> int:
    """A channel dim as the kernels compute it: XLA's padding to ``multiple`` (the tensor
    cores', in 16-bit), then the kernel's tile; 1–4 channels go to 4 (docs/facts.md#18)."""
    return kernel_tile(n if n <= 4 else -(-n // multiple) * multiple)


def achieved_bandwidth(target: Target) -> float:
    """Bytes per second the model moves through HBM: the calibrated share on a GPU, the
    published peak elsewhere."""
    return target.hbm_bandwidth * (CALIBRATION.memory if target.family == "gpu" else 1.0)


@dataclass(frozen=True)
class GpuOp:
    """One run of a contraction (conv or matmul) in the kernels' terms."""

    flops: float  # useful FLOPs
    padded_flops: float  # as the kernels compute them: channels padded and tiled (:func:`kernel_tile`)
    channels: tuple[int, ...]  # the dims the kernels tile: in/out features (a batched matmul's matrix dims)
    nbytes: int  # operands and result, unpadded
    dtype: str
    conv: bool = False
    rows: int = 0  # output rows x columns x independent matmuls, for the waves; 0: split over
    cols: int = 0  # the contraction (a weight update), no waves counted
    batch: int = 1


@dataclass(frozen=True)
class GpuTime:
    time: float
    useful: float
    causes: tuple[str, ...]  # what the extra time is, in words


def op_time(target: Target, op: GpuOp) -> GpuTime:
    """Seconds for one contraction on ``target`` (a GPU), and its useful part."""
    cal = CALIBRATION
    tc, full = tensor_core_multiple(op.dtype), full_rate_multiple(op.dtype)
    peak = (target.flops_16 if op.dtype in _SIXTEEN else target.flops_32) * cal.compute
    bandwidth = achieved_bandwidth(target)
    compute = op.padded_flops / wave_share(target, op) / peak
    causes = []
    if any(c > 4 and c % full for c in op.channels):
        compute *= 1 + cal.unaligned
        causes.append(f"channels off the {full} ({FULL_RATE_BYTES} bytes) a full-speed kernel reads")
    memory = op.nbytes / bandwidth
    time = max(compute, memory)
    if any(c > 4 and c % tc for c in op.channels):
        time += (cal.repad_16 if op.dtype in _SIXTEEN else cal.repad_32) * memory
        causes.append(f"off the tensor cores' multiple of {tc}: " + (
            "XLA pads the operands and slices the result through HBM" if op.dtype in _SIXTEEN
            else "no TF32, and its arrays go through HBM again"))
    fixed = cal.conv_fixed if op.conv else cal.dot_fixed
    useful = max(op.flops / peak, memory) + fixed
    return GpuTime(time + fixed, min(useful, time + fixed), tuple(causes))


def wave_share(target: Target, op: GpuOp) -> float:
    """How full the kernel's waves of output tiles keep the streaming multiprocessors."""
    if not op.rows or not op.cols or not target.sms:
        return 1.0
    tiles = -(-op.rows // TILE) * -(-op.cols // TILE) * max(op.batch, 1)
    waves = -(-tiles // target.sms)
    return tiles / (waves * target.sms)


def width_speedup(target: Target, width: int, dtype: str, conv: bool) -> tuple[int, float]:
    """(the width rounded to the tensor-core multiple, how much faster the model runs a
    width -> width contraction with it). The reference is a 3x3 convolution (``conv``) or
    a matmul over 2^20 rows (its forward pass): what KF102's message quotes for a GPU."""
    m = tensor_core_multiple(dtype)
    rounded = -(-width // m) * m
    rows, taps, size = 1 << 20, 9 if conv else 1, itemsize(dtype)

    def seconds(w: int) -> float:
        tiled = channel_tile(w, pad_multiple(target, KERNEL_OUT, dtype=dtype))
        flops = 2.0 * rows * taps * w * w
        op = GpuOp(flops=flops, padded_flops=flops * (tiled / w) ** 2, channels=(w, w),
                   nbytes=(2 * rows * w + taps * w * w) * size, dtype=dtype, conv=conv, rows=rows, cols=w)
        return op_time(target, op).time

    return rounded, seconds(width) / seconds(rounded)
