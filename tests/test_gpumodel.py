"""The GPU cost model (kerasfit.core.gpumodel, docs/facts.md#18, #27). No TensorFlow."""

from __future__ import annotations

import math

import pytest

from kerasfit.core import gpumodel
from kerasfit.core.types import TARGETS
from kerasfit.crosscheck.hlo import FORWARD, INPUT_GRAD, KERNEL_GRAD, HloOp
from kerasfit.crosscheck.simulator import simulate

GPU, H200 = TARGETS["gpu"], TARGETS["gpu-h200"]


@pytest.mark.parametrize("dtype, tc, full", [("bfloat16", 8, 16), ("bf16", 8, 16), ("float16", 8, 16),
                                             ("float32", 4, 8), ("f32", 4, 8)])
def test_multiples_are_16_and_32_bytes(dtype, tc, full):
    assert gpumodel.tensor_core_multiple(dtype) == tc and gpumodel.full_rate_multiple(dtype) == full


@pytest.mark.parametrize("n, tile", [(3, 4), (8, 16), (24, 32), (32, 32), (48, 64), (64, 64), (96, 128),
                                     (120, 128), (128, 128), (250, 256), (320, 320)])
def test_kernel_tiles(n, tile):
    # 24 filters take as long as 32 and 48 as long as 64 (docs/facts.md#27)
    assert gpumodel.kernel_tile(n) == tile


def test_waves_count_whole_waves_of_output_tiles():
    op = gpumodel.GpuOp(flops=1.0, padded_flops=1.0, channels=(128, 128), nbytes=0, dtype="bf16",
                        rows=128 * 133, cols=128)
    # 133 tiles on 132 SMs: two waves, the second nearly empty
    assert gpumodel.wave_share(H200, op) == pytest.approx(133 / 264)
    assert gpumodel.wave_share(H200, gpumodel.GpuOp(1.0, 1.0, (128,), 0, "bf16")) == 1.0  # no waves counted


def test_off_the_multiple_costs_repad_passes_and_off_32_bytes_slower_compute():
    base = dict(flops=1e12, padded_flops=1e12, nbytes=10**9, dtype="bf16")
    aligned = gpumodel.op_time(H200, gpumodel.GpuOp(channels=(128, 128), **base))
    unaligned = gpumodel.op_time(H200, gpumodel.GpuOp(channels=(120, 128), **base))
    ineligible = gpumodel.op_time(H200, gpumodel.GpuOp(channels=(126, 128), **base))
    cal = gpumodel.CALIBRATION
    peak, bandwidth = H200.flops_16 * cal.compute, H200.hbm_bandwidth * cal.memory
    assert aligned.time == pytest.approx(max(1e12 / peak, 1e9 / bandwidth) + cal.dot_fixed)
    assert aligned.causes == () and aligned.useful == pytest.approx(aligned.time)
    assert unaligned.time == pytest.approx(max(1e12 / peak * (1 + cal.unaligned), 1e9 / bandwidth) + cal.dot_fixed)
    assert ineligible.time == pytest.approx(unaligned.time + cal.repad_16 * 1e9 / bandwidth)
    assert "XLA pads the operands" in ineligible.causes[-1]
    # a 1-4 channel input (an image's) takes the 4-channel kernels: no penalty
    assert gpumodel.op_time(H200, gpumodel.GpuOp(channels=(3, 64), **base)).causes == ()


def conv(pass_: str, batch: int, hw: int, cin: int, cout: int, dtype: str, name: str) -> HloOp:
    """A 3x3 same-padded NHWC convolution as TF lowers each pass (test_simulator's shapes)."""
    if pass_ == KERNEL_GRAD:
        lhs, rhs, out = [batch, hw, hw, cin], [batch, hw, hw, cout], [3, 3, cin, cout]
        roles = {"lhs": {"m": [3], "k": [0]}, "rhs": {"k": [0], "n": [3]}, "out": {"m": [2], "n": [3]}}
        m, k, n, window = cin, batch, cout, hw * hw
    else:
        lhs, rhs, out = [batch, hw, hw, cin], [3, 3, cin, cout], [batch, hw, hw, cout]
        roles = {"lhs": {"m": [0], "k": [3]}, "rhs": {"k": [2], "n": [3]}, "out": {"m": [0], "n": [3]}}
        m, k, n, window = batch, cin, cout, 9
    return HloOp(name=f"{name}.{pass_}", opcode="convolution", op_type="Conv2D", op_name=name, dtype=dtype,
                 shape=out, lhs_shape=lhs, rhs_shape=rhs, lhs=f"{name}.in", rhs=f"{name}.w", roles=roles,
                 m=m, k=k, n=n, flops=2 * math.prod(out) * window * k, pass_=pass_)


def conv_net(c: int, dtype: str) -> list[HloOp]:
    """The measured family's convolutions: 3 -> c -> c at 64x64, c -> c -> c at 32x32, batch 256."""
    layers = [(64, 3, c, "c1"), (64, c, c, "c2"), (32, c, c, "c3"), (32, c, c, "c4")]
    return [conv(p, 256, hw, cin, cout, dtype, name) for hw, cin, cout, name in layers
            for p in (FORWARD, INPUT_GRAD, KERNEL_GRAD) if not (name == "c1" and p == INPUT_GRAD)]


def step(c: int, dtype: str, target=H200) -> float:
    return sum(s.time for _, s in simulate(conv_net(c, dtype), target, dtype).ops)


@pytest.mark.parametrize("target", [GPU, H200])
@pytest.mark.parametrize("before, after, dtype", [(30, 32, "bf16"), (60, 64, "bf16"), (120, 128, "bf16"),
                                                  (250, 256, "bf16"), (30, 32, "f32"), (250, 256, "f32")])
def test_widths_the_h200_runs_faster_rounded_the_model_runs_faster(target, before, after, dtype):
    # docs/facts.md#27: every one of these roundings measured 1.18-2.15x faster a step
    assert step(before, dtype, target) > 1.05 * step(after, dtype, target)


def test_whole_tiles_cost_alike_and_more_channels_cost_more():
    # 24 filters compute as 32, 48 as 64 (docs/facts.md#27: 1.69 vs 1.66 ms, 2.44 vs 2.37 ms)
    assert step(24, "bf16") == pytest.approx(step(32, "bf16"), rel=0.35)
    assert step(64, "bf16") < step(128, "bf16") < step(256, "bf16")
