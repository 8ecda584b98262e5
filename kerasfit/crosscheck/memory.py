"""The HBM one training step needs on one chip, against its capacity (docs/facts.md#7, #25)."""

from __future__ import annotations

from typing import Any

from kerasfit.core.types import TARGETS

from .hlo import HloOp
from .simulator import pad_to, stored_activations, tiled_bytes


# Adam, Keras's usual optimizer, keeps two slots per weight; SGD with momentum one.
OPTIMIZER_SLOTS = 2


def _tiled(shape: list[int], itemsize: int) -> int:
    """Bytes of an array tiled on its two minor dims (docs/facts.md#7)."""
    if not shape:
        return itemsize
    if len(shape) == 1:
        return pad_to(shape[0], 128) * itemsize
    return tiled_bytes(list(shape), len(shape) - 2, len(shape) - 1, itemsize)[1]


def hbm_need(raw: dict[str, Any], ops: list[HloOp], target: str) -> dict[str, Any]:
    """The HBM one training step needs on one chip, against its capacity (docs/facts.md#7, #25).

    Weights, their gradients and the optimizer's slots (Adam's two) as tiled arrays, plus
    the forward activations the backward pass reads, each tiled in the layout the report
    gives it (:func:`kerasfit.crosscheck.simulator.stored_activations`: the same bytes the
    expansion line divides). ``ops`` may be a what-if's (another batch, another width): its
    own layout then decides. An estimate: XLA's rematerialization and buffer reuse move it
    either way. Recommendations that raise the batch or a width read ``need`` against
    ``capacity``, and only that figure says a step does not fit.
    """
    t = TARGETS[target]
    weights = sum(_tiled(list(v), 4) for v in raw.get("variables", []))  # kept in float32
    _, activations = stored_activations(ops, t)
    need = weights * (2 + OPTIMIZER_SLOTS) + activations
    return {"need": need, "capacity": t.hbm_bytes, "weights": weights, "gradients": weights,
            "optimizer": weights * OPTIMIZER_SLOTS, "activations": activations,
            "fits": need <= t.hbm_bytes if t.hbm_bytes else None}
