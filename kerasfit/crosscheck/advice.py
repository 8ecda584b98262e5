"""What to change: the report's recommendations, each a what-if of the simulated step.

A change at a line the user owns (a width, a pad, a transpose, the batch, an attention
layer's heads) is simulated and kept with what it saves; the top rows no change reaches
are explained by where they come from.
"""

from __future__ import annotations

import re
from typing import Any

from kerasfit.core import gpumodel
from kerasfit.core.types import LANES, TARGETS, Target

from .hlo import FORWARD, KERNEL_GRAD, HloOp, strip_scopes
from .memory import hbm_need
from .records import TOP_ROWS, OpReport, Recommendation, Row, StaticFinding, source_at, us
from .simulator import LARGE_BATCH, Simulation, pad_to, simulate, with_batch, with_features

# A change covers a row when it removes at least this share of the row's wasted time.
COVERS = 0.25
MAX_CHANGES = 6
NEGLIGIBLE = 0.01  # of the step's wasted time
# A change that saves less than this share of the step is no change: its gain is nil.
GAIN_FLOOR = 0.001


class _WhatIf:
    """The step with a change applied: its time, and each ranked row's wasted time."""

    def __init__(self, ops: list[HloOp], rows: list[Row], timed: list[OpReport], target: str, dtype: str,
                 common_batch: int | None):
        self.ops, self.rows, self.target, self.dtype = ops, rows, target, dtype
        self.before = {o.name: (o.time, o.useful_time) for o in timed}
        self.step_time = sum(r.time for r in rows)
        self.common_batch = common_batch

    def _times(self, ops: list[HloOp]) -> dict[str, tuple[float, float]]:
        return {op.name: (s.time, s.useful_time) for op, s in simulate(ops, self.target, self.dtype).ops}

    def apply(self, ops: list[HloOp] | None = None, removed: frozenset[str] | set[str] = frozenset(),
              moves: float = 1.0, scaled: dict[str, float] | None = None) -> tuple[float, list[float]]:
        """(step time, wasted time per row) with ``ops`` in place of the step's and ``removed``
        gone; the pads, transposes and copies' times times ``moves`` (their bytes follow the batch),
        and each op in ``scaled`` times its factor (its bytes follow a dim the change sets)."""
        after = {name: (t * moves * (scaled or {}).get(name, 1.0), u * moves * (scaled or {}).get(name, 1.0))
                 for name, (t, u) in self.before.items()}
        if ops is not None:
            after.update(self._times(ops))
        waste, total = [], 0.0
        for r in self.rows:
            t = sum(after[m][0] for m in r.members if m not in removed)
            u = sum(after[m][1] for m in r.members if m not in removed)
            total += t
            waste.append(max(0.0, t - u))
        return total, waste

    def recommend(self, text: str, source: dict[str, Any] | None, after: float, waste: list[float],
                  **more: Any) -> Recommendation:
        """The recommendation of a change whose step time is ``after`` and rows' waste ``waste``."""
        return Recommendation(text, source, self.covered(waste), after, self.step_time - after,
                              sum(r.wasted_time for r in self.rows) - sum(waste), **more)

    def covered(self, waste: list[float], scale: float = 1.0) -> list[int]:
        """Ranks of the rows whose waste (per example, with ``scale``) the change cuts."""
        return [i for i, (r, w) in enumerate(zip(self.rows, waste), 1)
                if r.wasted_time > 0 and w * scale <= (1 - COVERS) * r.wasted_time]


def _line(*sources: dict[str, Any] | None) -> str:
    """``line 15`` or, for a line in a helper, ``line 15, called at lines 23, 25``."""
    src = next((s for s in sources if s), None)
    if not src:
        return "no source line"
    callers = sorted({s["callers"][0] for s in sources if s and s.get("callers")} - {src["line"]})
    if not callers:
        return f"line {src['line']}"
    return f"line {src['line']}, called at line{'s' if len(callers) > 1 else ''} {', '.join(map(str, callers))}"


def _inus(seconds: float) -> str:
    return f"{us(seconds)} µs"


def _effect(what: _WhatIf, after: float) -> str:
    return f"step ≈ {_inus(what.step_time)} → {_inus(after)}"


def _ranks(ranks: list[int]) -> str:
    return ("row " if len(ranks) == 1 else "rows ") + ", ".join(map(str, ranks))


def _gb(need: float) -> str:
    return f"{need / 1e9:.2f} GB"


def largest_fitting_batch(raw: dict[str, Any], ops: list[HloOp], target: str, per_core: int,
                          upto: int) -> int | None:
    """The largest per-core batch, a multiple of 8 up to ``upto``, whose step needs no more
    HBM than the chip has (docs/facts.md#25; the need is monotone in the batch); None when
    not even 8 does or the chip's capacity is not known."""
    if not TARGETS[target].hbm_bytes or per_core <= 0:
        return None

    def fits(b: int) -> bool:
        return bool(hbm_need(raw, with_batch(ops, per_core, b), target)["fits"])

    lo, hi = 0, upto // 8  # in eighths: lo fits (0: nothing yet), hi + 1 does not
    if fits(hi * 8):
        return hi * 8
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid * 8) else (lo, mid)
    return lo * 8 or None


def _hbm_note(raw: dict[str, Any], ops: list[HloOp], target: str, per_core: int) -> str:
    """What a change that raises a width needs in HBM against the chip's capacity
    (docs/facts.md#25), and, when that is more than it has, the largest per-core batch
    with the change that fits."""
    h = hbm_need(raw, ops, target)
    if not h.get("capacity"):
        return ""
    note = f"; HBM ≈ {_gb(h['need'])} of {h['capacity'] / 1e9:.0f} GB per chip"
    if h["fits"]:
        return note
    largest = largest_fitting_batch(raw, ops, target, per_core, per_core)
    return note + (f" — more than the chip has: with it, the largest per-core batch that fits is {largest}"
                   if largest else " — more than the chip has, at any per-core batch")


def _batch_candidates(per_core: int, family: str) -> list[int]:
    """Per-core batches worth simulating instead of ``per_core``: on a TPU, 128 when the
    batch is under 64 (the layout flips, docs/facts.md#1), and an odd batch's nearest
    multiples of 128 (the lanes it pads to) and of 8 (the sublanes); on a GPU or Gaudi, an
    odd batch's nearest multiples of 8 (docs/facts.md#18)."""
    near = {per_core // 8 * 8, -(-per_core // 8) * 8}
    if family == "tpu":
        near |= {per_core // LANES * LANES, -(-per_core // LANES) * LANES}
        if per_core < LARGE_BATCH:
            near.add(LANES)
    return sorted(b for b in near if b > 0 and b != per_core)


class _BatchTry:
    """A per-core batch simulated: its step, per-example time and HBM need."""

    def __init__(self, what: _WhatIf, raw: dict[str, Any], per_core: int, batch: int):
        self.batch = batch
        self.ops = with_batch(what.ops, per_core, batch)
        self.after, self.waste = what.apply(self.ops, moves=batch / per_core)
        self.saved = what.step_time - self.after * per_core / batch  # per step of the current batch
        self.hbm = hbm_need(raw, self.ops, what.target)


def _batch_change(what: _WhatIf, raw: dict[str, Any], target: str, step_fit: float) -> Recommendation | None:
    """The per-core batch that runs an example fastest (docs/facts.md#1, #24: under 64 the
    layout flips and the weight updates pad the batch to 128; an odd batch pads to the
    next multiple), among those that fit in HBM; when the fastest does not fit, the largest
    that does, with its own gain. Compared per example: a bigger batch is more work."""
    t = TARGETS[target]
    per_core = int(raw.get("per_core_batch") or 0)
    if per_core <= 0:
        return None
    tries = [_BatchTry(what, raw, per_core, b) for b in _batch_candidates(per_core, t.family)]
    gaining = [b for b in tries if b.saved > GAIN_FLOOR * what.step_time]
    if not gaining:
        return None
    best = max(gaining, key=lambda b: b.saved)
    if best.hbm["fits"] is not False:
        return _batch_recommendation(what, raw, best, step_fit, "")
    # the fastest does not fit: the largest batch up to it that does, if that still gains
    largest = largest_fitting_batch(raw, what.ops, target, per_core, best.batch)
    if not largest or largest <= per_core:
        return None
    chosen = _BatchTry(what, raw, per_core, largest)
    if chosen.saved <= GAIN_FLOOR * what.step_time:
        return None
    held = (f", the largest that fits in HBM (per-core batch {best.batch} would save more but needs "
            f"{_gb(best.hbm['need'])} of {_gb(best.hbm['capacity'])})")
    return _batch_recommendation(what, raw, chosen, step_fit, held)


def _batch_recommendation(what: _WhatIf, raw: dict[str, Any], b: _BatchTry, step_fit: float,
                          held: str) -> Recommendation:
    per_core = int(raw.get("per_core_batch") or 0)
    cores = int(raw.get("cores") or 1)
    fit = simulate(b.ops, what.target, what.dtype).step_fit
    scale = per_core / b.batch
    h = b.hbm
    hbm = f"; HBM ≈ {_gb(h['need'])} of {h['capacity'] / 1e9:.0f} GB per chip" if h.get("capacity") else ""
    text = (f"per-core batch {per_core} → {b.batch}{held} (global {per_core * cores} → {b.batch * cores} on "
            f"{cores} core{'s' if cores != 1 else ''}{', or fewer cores' if b.batch > per_core else ''}): step fit "
            f"{step_fit:.1%} → {fit:.1%}, time per example {_inus(what.step_time / per_core)} → "
            f"{_inus(b.after / b.batch)}{hbm}")
    return Recommendation(text, None, what.covered(b.waste, scale), b.after, b.saved,
                          sum(r.wasted_time for r in what.rows) - sum(b.waste) * scale, fit, raises="batch")


def _width_changes(what: _WhatIf, reports: list[OpReport], raw: dict[str, Any], target: str,
                   floor: float = 0.001) -> list[Recommendation]:
    """Per layer: round the filter/unit count its forward op produces, where that recovers
    more than ``floor`` of the step."""
    t = TARGETS[target]
    by_layer: dict[str, list[OpReport]] = {}
    for rep in reports:
        if rep.layer:
            by_layer.setdefault(rep.layer, []).append(rep)
    out = []
    for layer, reps in by_layer.items():
        fwd = [r for r in reps if r.pass_ == FORWARD]
        if not fwd or (fwd[0].source or {}).get("block"):
            continue
        n = fwd[0].dims["out_features"][0]
        if _task_sized(layer, n, reports, raw):
            continue
        hlo = next((o for o in what.ops if o.name == fwd[0].name), None)
        candidates = _widths(n, t, hlo.dtype if hlo is not None else what.dtype)
        candidates.discard(n)
        names = {r.name for r in reps}
        best = None
        for new in sorted(candidates):
            ops = with_features(what.ops, names, n, new)
            after, waste = what.apply(ops)
            recovered = what.step_time - sum(r.useful_time for r in what.rows) - sum(waste)
            if best is None or recovered > best[3]:
                best = (new, after, waste, recovered, ops)
        if best is None or best[3] <= floor * what.step_time:
            continue
        new, after, waste, recovered, ops = best
        src = fwd[0].source
        fit = simulate(ops, target, what.dtype).step_fit
        text = (f"{layer} ({_line(src)}): {n} → {new} filters/units: {_effect(what, after)}, "
                f"{_inus(recovered)} less waste; step fit → {fit:.1%}"
                + (_hbm_note(raw, ops, target, int(raw.get("per_core_batch") or 0)) if new > n else ""))
        out.append(Recommendation(text, src, what.covered(waste), after, what.step_time - after,
                                  recovered, fit, raises="width" if new > n else None))
    return out


def _widths(n: int, chip: Target, dtype: str) -> set[int]:
    """Widths worth simulating instead of ``n``: the target's channel multiple (a TPU's
    MXU edge too, when it is close); on a GPU the tensor cores' and the full-speed
    multiples of the layer's dtype, and the kernels' tile (docs/facts.md#18, #27)."""
    if chip.family == "gpu":
        return {pad_to(n, gpumodel.tensor_core_multiple(dtype)), pad_to(n, gpumodel.full_rate_multiple(dtype)),
                gpumodel.kernel_tile(n)}
    out = {pad_to(n, chip.channel_multiple)}
    if chip.large // 2 < n < chip.large:
        out.add(chip.large)
    return out


def _task_sized(layer: str, width: int, reports: list[OpReport], raw: dict[str, Any]) -> bool:
    """Is a layer's width set by the task (classes, channels), not a free choice? The
    model's output layer, or a layer as wide as a model output whose result no other
    layer's contraction reads (a head followed only by an activation or a reshape)."""
    if layer in (raw.get("output_layers") or ()):
        return True
    if not any(shape and shape[-1] == width for shape in raw.get("outputs") or ()):
        return False
    return not any(o.pass_ == FORWARD and o.layer != layer and o.dims.get("in_features", [0])[0] == width
                   for o in reports)


def _pad_changes(what: _WhatIf, raw: dict[str, Any], mem: list[OpReport]) -> list[Recommendation]:
    """Zero spatial pads feeding a convolution, materialized in HBM (docs/facts.md#19): the
    conv's own padding removes the pad and its gradient's slice. One change per source line."""
    by_line: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for pad in raw.get("pads", []):
        src = pad.get("source")
        shape, padded = pad["shape"], pad["padded_shape"]
        spatial = len(shape) > 2 and shape[0] == padded[0] and shape[-1] == padded[-1]
        if src and pad.get("zero") and spatial and pad.get("layer") and not src.get("block"):
            by_line.setdefault((src["file"], src["line"]), []).append(pad)
    out = []
    for pads in by_line.values():
        layers = {p["layer"] for p in pads}
        pad_names = {p["name"] for p in pads}
        removed = {m.name for m in mem if m.layer in layers and (
            m.name in pad_names or m.kind in ("pad", "slice"))}
        if not removed:
            continue
        after, waste = what.apply(removed=removed)
        src = pads[0]["source"]
        text = (f"{', '.join(sorted(layers))} ({_line(*(p['source'] for p in pads))}): a zero pad before a convolution is "
                f"written to HBM and read again by the weight update; give the convolution the "
                f"padding instead (padding='same' where it is equivalent): {_effect(what, after)}")
        out.append(what.recommend(text, src, after, waste))
    return out


def _pool_changes(what: _WhatIf, mem: list[OpReport]) -> list[Recommendation]:
    """Max pooling whose gradient (a select-and-scatter) the target prices above its bytes
    (a GPU, docs/facts.md#27; docs/facts.md#16 for a TPU): average pooling or a stride-2
    convolution instead, its gradient a loop over its bytes. One change per source line."""
    chip = TARGETS[what.target]
    factor = gpumodel.CALIBRATION.scatter if chip.family == "gpu" else 1.0
    by_line: dict[tuple[str, int], list[OpReport]] = {}
    for m in mem:
        if m.op_type == "select-and-scatter" and m.source and not m.source.get("block") and factor > 1:
            by_line.setdefault((m.source["file"], m.source["line"]), []).append(m)
    out = []
    for found in by_line.values():
        after, waste = what.apply(scaled={m.name: 1 / factor for m in found})
        src = found[0].source
        layers = sorted({m.layer or m.op_name for m in found})
        text = (f"{', '.join(layers)} ({_line(src)}): max pooling's gradient is a select-and-scatter that "
                f"takes ≈{factor:g}× its bytes' time on {chip.name} (docs/facts.md#16, #27); average pooling or "
                f"a stride-2 convolution has a plain gradient: {_effect(what, after)}")
        out.append(what.recommend(text, src, after, waste))
    return out


# TF's own name for a transpose op (tf.transpose, keras.ops.transpose, Permute): a transpose
# named after another op (".../MatMul") is one the compiler inserted for that op, and one
# under a tensordot or einsum is how TF lowers that contraction, not a line of the user's.
_TRANSPOSE_OP = re.compile(r"(^|/)([Tt]ranspose(_\d+)?)$")
_LOWERED = re.compile(r"(^|/)([Tt]ensordot|[Ee]insum|MatMul|BatchMatMul)[^/]*/")


def _transpose_changes(what: _WhatIf, mem: list[OpReport]) -> list[Recommendation]:
    """Transposes the user's code writes, by source line: keeping one layout removes them
    (the forward one and its gradient)."""
    by_line: dict[tuple[str, int], list[OpReport]] = {}
    for m in mem:
        src = m.source
        if m.kind != "transpose" or not src or src.get("block") or m.wasted_time <= 0:
            continue
        forward_name = re.sub(r"(/[Tt]ranspose(_\d+)?)+$", r"\1", strip_scopes(m.op_name))
        if _TRANSPOSE_OP.search(forward_name) and not _LOWERED.search(forward_name):
            by_line.setdefault((src["file"], src["line"]), []).append(m)
    out = []
    for found in by_line.values():
        removed = {m.name for m in found}
        after, waste = what.apply(removed=removed)
        src = found[0].source
        layers = sorted({m.layer or m.op_name for m in found})
        text = (f"{', '.join(layers)} ({_line(src)}): a transpose that moves the last axis is a "
                f"copy through HBM (docs/facts.md#4, #7); keep one layout end to end: "
                f"{_effect(what, after)}")
        out.append(what.recommend(text, src, after, waste))
    return out


def _row_sources(what: _WhatIf, ops: list[OpReport]) -> list[list[dict[str, Any]]]:
    """Per ranked row, the distinct source sites of the row and of its ops."""
    source_of = {o.name: o.source for o in ops if o.source}
    out = []
    for r in what.rows:
        distinct = {(src["line"], src.get("end_line"), tuple(src.get("callers", ()))): src
                    for src in [r.source] + [source_of.get(m) for m in r.members] if src}
        out.append(list(distinct.values()))
    return out


def _finding_change(what: _WhatIf, f: StaticFinding, hit: list[int], mem: list[OpReport],
                    reports: list[OpReport], raw: dict[str, Any], target: str) -> list[Recommendation]:
    """The finding's own change, simulated: a layer's rounding, or the transposes or pads
    it names removed; none when the build cannot simulate it."""
    if f.evidence == "feature-padding":
        # the layer's rounding, wherever it gains at all: the finding asked for it
        own = [o for o in reports if source_at(o.source, f.filename, f.row, f.end_row)]
        width = _width_changes(what, own, raw, target, floor=GAIN_FLOOR)
        for change in width:
            change.code, change.text = f.code, f"{f.code} {change.text}"
        if width:
            return width
    if f.evidence not in ("transpose", "spatial-pad"):
        return []
    kinds = ("transpose",) if f.evidence == "transpose" else ("pad", "slice")
    removed = {m.name for m in mem if m.kind in kinds and source_at(m.source, f.filename, f.row, f.end_row)}
    if not removed:
        return []
    src = next((what.rows[i - 1].source for i in hit), None)
    after, waste = what.apply(removed=removed)
    return [what.recommend(f"{f.code} at line {f.row}: {f.fix}: {_effect(what, after)}", src, after, waste,
                           code=f.code)]


def _from_findings(what: _WhatIf, findings: list[StaticFinding], mem: list[OpReport],
                   reports: list[OpReport], changes: list[Recommendation], raw: dict[str, Any],
                   target: str) -> list[Recommendation]:
    """A static finding on a row of the table yields its recommendation where the simulated
    step gains from it: the build's change at the same line takes the finding's code and
    fix; else the finding's own change, simulated."""
    out = []
    row_sources = _row_sources(what, mem + reports)
    for f in findings:
        hit = [i for i, sources in enumerate(row_sources, 1)
               if any(source_at(src, f.filename, f.row, f.end_row) for src in sources)]
        if not hit:
            continue
        same = next((c for c in changes if c.source and c.code is None
                     and source_at(c.source, f.filename, f.row, f.end_row)), None)
        if same is not None:
            same.code = f.code
            same.text = f"{f.code} {same.text}"
            continue
        out += _finding_change(what, f, hit, mem, reports, raw, target)
    return out


_CONTAINERS = ("Functional", "Sequential", "Model")
_PADDED = re.compile(r"([a-z-]+) (\d+)→(\d+)")


def _reshaped_heads(op: HloOp, heads: int, head_dims: set[int], new_heads: int) -> HloOp | None:
    """An attention matmul with ``new_heads`` heads of the same total width; the op itself
    when it is not one (no batch dim of ``heads``: a projection's weight update); None when
    its dims do not say unambiguously which is the head count and which the head size."""
    if not any(op.lhs_shape[i] == heads for i in op.roles.get("lhs", {}).get("b", [])):
        return op
    batch = int(op.extra.get("batch") or 0)
    sizes = {"m": op.m, "k": op.k, "n": op.n}
    role = [r for r, v in sizes.items() if v in head_dims]
    if not batch or batch % heads or len(role) != 1:
        return None
    size = sizes[role[0]]
    if size * heads % new_heads:
        return None
    new_size = size * heads // new_heads
    clone = HloOp.from_dict(op.to_dict())
    clone.extra["batch"] = batch // heads * new_heads
    setattr(clone, role[0], new_size)  # the FLOPs stay: heads × head size is the same
    for tensor, shape in (("lhs", clone.lhs_shape), ("rhs", clone.rhs_shape), ("out", clone.shape)):
        roles = clone.roles.get(tensor, {})
        at_heads = [i for i in roles.get("b", []) if shape[i] == heads]
        at_size = roles.get(role[0], [])  # one operand has no head-size dim (the scores)
        if len(at_heads) != 1 or len(at_size) > 1 or (at_size and shape[at_size[0]] != size):
            return None
        shape[at_heads[0]] = new_heads
        if at_size:
            shape[at_size[0]] = new_size
    return clone


def _score_sized(op: OpReport, heads: int, head_dims: set[int]) -> bool:
    """A move or fusion of the attention scores (batch, heads, query, key): a heads dim and
    no head-size dim, so its bytes follow the head count (the softmax, its gradient, a
    transpose of the scores)."""
    return (len(op.shape) >= 4 and sum(d == heads for d in op.shape) == 1
            and not any(d in head_dims for d in op.shape))


def _in_block(op: OpReport, block: str) -> bool:
    return (op.source or {}).get("block") == block


def _with_heads(ops: list[HloOp], inside: set[str], heads: int, head_dims: set[int], new_heads: int
                ) -> list[HloOp] | None:
    """The step with the block's attention matmuls in ``new_heads`` heads; None when one of
    them cannot be followed (no number at all) or none changes."""
    out, changed = [], False
    for op in ops:
        clone = _reshaped_heads(op, heads, head_dims, new_heads) if op.name in inside else op
        if clone is None:
            return None
        changed = changed or clone is not op
        out.append(clone)
    return out if changed else None


def _heads_change(what: _WhatIf, block: str, info: dict[str, Any], reports: list[OpReport],
                  mem: list[OpReport]) -> Recommendation | None:
    """MultiHeadAttention: the same num_heads × key_dim in fewer, larger heads — the head
    size is what its attention matmuls pad. Those matmuls are re-simulated; the block's
    score-sized moves and fusions scale with the head count."""
    config = info.get("config") or {}
    heads, key_dim = config.get("num_heads"), config.get("key_dim")
    if info.get("class") != "MultiHeadAttention" or not heads or not key_dim or heads < 2:
        return None
    head_dims = {key_dim, config.get("value_dim") or key_dim}
    inside = {o.name for o in reports if _in_block(o, block) and "rows" in o.dims}
    scores = [m.name for m in mem if _in_block(m, block) and _score_sized(m, heads, head_dims)]
    best = None
    for new_heads in (h for h in range(1, heads) if heads % h == 0):
        ops = _with_heads(what.ops, inside, heads, head_dims, new_heads)
        if ops is not None:
            after, waste = what.apply(ops, scaled={name: new_heads / heads for name in scores})
            if best is None or after < best[1]:
                best = (new_heads, after, waste)
    if best is None or best[1] >= what.step_time:
        return None
    new_heads, after, waste = best
    src = next((o.source for o in reports if o.name in inside), None)
    scaled = ", its score-sized moves and fusions scaled" if scores else ""
    text = (f"`MultiHeadAttention` {block} ({_line(src)}): num_heads={heads}, key_dim={key_dim} → "
            f"num_heads={new_heads}, key_dim={key_dim * heads // new_heads} (the same total width; "
            f"its attention matmuls re-simulated{scaled}): {_effect(what, after)}")
    return what.recommend(text, src, after, waste)


def _origins(what: _WhatIf, raw: dict[str, Any], reports: list[OpReport], uncovered: list[int],
             batch: Recommendation | None) -> list[Recommendation]:
    """Top rows no change above reaches: say where they come from (a row the per-core
    batch pads names the batch change, or why there is none)."""
    blocks = raw.get("blocks") or {}
    out: list[Recommendation] = []
    by_block: dict[str, list[int]] = {}
    for i in uncovered:
        src = what.rows[i - 1].source
        if src and src.get("block") in blocks:
            by_block.setdefault(src["block"], []).append(i)
            continue
        r = what.rows[i - 1]
        out.append(Recommendation(f"row {i}, {r.layer} ({_line(r.source)}), {r.pass_} {r.kind}: "
                                  + _cause(r, reports, raw, what, batch), r.source, [i]))
    return out + [_block_origin(what, raw, block, blocks[block], ranks) for block, ranks in by_block.items()]


def _block_origin(what: _WhatIf, raw: dict[str, Any], block: str, info: dict[str, Any], ranks: list[int]
                  ) -> Recommendation:
    """Top rows inside a library block: the padded dims, whose argument each is, and the
    levers the block's arguments still have."""
    config = info.get("config") or {}
    rows = [what.rows[i - 1] for i in ranks]
    pads = sorted({(m.group(1), int(m.group(2)), int(m.group(3)))
                   for r in rows for w in r.why for m in _PADDED.finditer(w)
                   if "HBM" not in w.split(m.group(0))[0]}, key=lambda p: (p[1], p[0]))
    lengths = {d for shape in raw.get("inputs") or [] for d in shape[1:] if d}
    named = []
    for dim, real, padded in pads:
        args = [k for k, v in config.items() if v == real]
        whose = f"{'/'.join(args)}={real}" if args else "the model input's" if real in lengths else ""
        named.append(f"{dim} {real}→{padded}" + (f" ({whose})" if whose else ""))
    named += sorted({f"{r.kind}s through HBM" for r in rows if r.kind not in ("convolution", "dot")})
    src = rows[0].source
    lever = _block_lever(info, TARGETS[what.target], lengths)
    attention = info["class"] == "MultiHeadAttention"
    argv = ", ".join(f"{k}={v}" for k, v in config.items() if k in ("num_heads", "key_dim", "value_dim")
                     or not attention)
    # a model from a library (keras.applications) is known by its name, not its class
    what_ = f"`{block}`" if info["class"] in _CONTAINERS else f"`{info['class']}` {block}"
    return Recommendation(
        f"{_ranks(ranks)}: inside {what_} ({_line(src)}"
        + (f", {argv}" if argv else "") + "): " + ("; ".join(named) or "padding") + f" — {lever}",
        src, ranks)


def _block_lever(info: dict[str, Any], chip: Target, lengths: set[int]) -> str:
    """What a library block's arguments can still do to its padding: only the levers whose
    precondition does not already hold (a key_dim already a multiple of the MXU's edge is
    not advice)."""
    config = info.get("config") or {}
    if info.get("class") != "MultiHeadAttention":
        return "its layers are the library's; yours are its arguments, the input's shape and the batch"
    wide = chip.mxu if chip.family == "tpu" else 64
    heads, key_dim = int(config.get("num_heads") or 1), int(config.get("key_dim") or 0)
    levers = []
    if key_dim and key_dim % wide:
        levers.append(f"a head size (key_dim) that is a multiple of {wide} fills the matrix unit's contraction")
        if heads > 1:
            levers.append("fewer heads of a larger key_dim keep num_heads × key_dim")
    if any(n % wide for n in lengths if n > 1):
        levers.append(f"a sequence length that is a multiple of {wide} fills the score matrix")
    return "; ".join(levers) or ("its head size and the input's lengths already fill the matrix unit: the "
                                 "rows are the library's own moves")


def _padded_dims(why: list[str]) -> list[tuple[str, int, int]]:
    """(dim, real, padded) of the MXU padding a row names (not its HBM tiling), worst first."""
    dims = []
    for w in why:
        if w.startswith("in HBM"):
            continue
        m = _PADDED.match(w)
        if m:
            dims.append((m.group(1), int(m.group(2)), int(m.group(3))))
    return sorted(dims, key=lambda d: d[1] / d[2])


def _cause(row: Row, reports: list[OpReport], raw: dict[str, Any], what: _WhatIf,
           batch: Recommendation | None) -> str:
    """Where a row's waste comes from, in terms of the script: whose width, which rule."""
    if row.kind not in ("convolution", "dot"):
        written = " by the compiler around this layer's op" if row.kind == "transpose" else ""
        return f"{'; '.join(row.why) or row.kind}{written}: no line of yours writes it"
    dims = _padded_dims(row.why)
    if not dims:
        return f"{'; '.join(row.why) or 'its arrays'}: the 8×128 tiles of HBM (docs/facts.md#7)"
    dim, real, padded = dims[0]
    text = f"{dim} {real}→{padded}: {real} is {_whose(row, dim, real, reports, raw)}; " + _rule(
        row, dim, real, padded, reports, what)
    if dim == "batch":
        text += "; " + _batch_lever(what, raw, batch)
    return text


def _whose(row: Row, dim: str, real: int, reports: list[OpReport], raw: dict[str, Any]) -> str:
    """Whose size a padded dim is: a layer's width, the model input's, the per-core batch."""
    if dim.startswith("out-"):
        return f"{row.layer}'s width"
    if not dim.startswith("in-"):
        return "the per-core batch"
    producers = sorted({f"{o.layer}'s width ({_line(o.source)})" for o in reports
                        if o.pass_ == FORWARD and o.layer != row.layer and o.dims["out_features"][0] == real})
    inputs = any(shape and shape[-1] == real for shape in raw.get("inputs") or [])
    return ("the model input's" if inputs and not producers else
            " or ".join(producers[:2]) or "the width it reads")


def _rule(row: Row, dim: str, real: int, padded: int, reports: list[OpReport], what: _WhatIf) -> str:
    """Which fact pads the dim."""
    if TARGETS[what.target].family == "gpu":
        return "the tensor cores' multiple and the kernels' tiles (docs/facts.md#18, #27)"
    if dim == "batch" or padded % LANES:
        return f"pads to a multiple of {_multiple(real, padded)} (docs/facts.md#1–3)"
    if any("rows" in o.dims for o in reports if o.name in row.members):
        return (f"a batched matmul (attention) pads both matrix dims to {padded} "
                "(docs/facts.md#5, #8: both face the MXU)")
    if row.pass_ == KERNEL_GRAD:
        return (f"the weight update pads the features it reads to {padded} at a per-core batch of "
                f"{LARGE_BATCH} or more (docs/facts.md#1)" if (what.common_batch or 0) >= LARGE_BATCH else
                f"pads to {padded} (docs/facts.md#1)")
    return f"features pad to {padded} at a per-core batch under {LARGE_BATCH} (docs/facts.md#1)"


def _batch_lever(what: _WhatIf, raw: dict[str, Any], batch: Recommendation | None) -> str:
    """What the per-core batch, the user's own, can do about a row it pads."""
    if batch is not None:
        return "the batch is yours: see the per-core batch change above"
    per_core = int(raw.get("per_core_batch") or 0)
    upto = max(LANES, -(-per_core // LANES) * LANES)
    largest = largest_fitting_batch(raw, what.ops, what.target, per_core, upto)
    if TARGETS[what.target].hbm_bytes and (largest is None or largest <= per_core):
        fewer = "fewer cores sharing the global batch, or " if int(raw.get("cores") or 1) > 1 else ""
        which = f"{largest} is the largest that does" if largest else "not even 8 does"
        return (f"the batch is yours, but no larger per-core batch fits in HBM ({which}): {fewer}smaller "
                "inputs or a smaller model would let it grow")
    return "the batch is yours; no multiple of 8 or 128 near it runs an example faster in this model"


def _multiple(real: int, padded: int) -> int:
    for m in (8, 128, 256):
        if pad_to(real, m) == padded:
            return m
    return padded


def recommend(ops: list[HloOp], reports: list[OpReport], mem: list[OpReport], rows: list[Row],
               raw: dict[str, Any], target: str, dtype: str, sim: Simulation,
               findings: list[StaticFinding]) -> list[Recommendation]:
    step_fit, common_batch = sim.step_fit, sim.common_batch
    what = _WhatIf(ops, rows, reports + mem, target, dtype, common_batch)
    batch = _batch_change(what, raw, target, step_fit)
    changes = (_pad_changes(what, raw, mem) + _transpose_changes(what, mem) + _pool_changes(what, mem)
               + _width_changes(what, reports, raw, target))
    changes += _from_findings(what, findings, mem, reports, changes, raw, target)
    changes += [c for block, info in (raw.get("blocks") or {}).items()
                if (c := _heads_change(what, block, info, reports, mem)) is not None]
    # never advice that gains nothing
    changes = [c for c in changes if c.saved > GAIN_FLOOR * what.step_time]
    top = set(range(1, min(TOP_ROWS, len(rows)) + 1))
    # Changes that reach a top row or carry a static finding, then the rest by what they save.
    changes.sort(key=lambda c: (not (top & set(c.rows) or c.code), -c.waste_saved))
    kept = [c for c in changes if top & set(c.rows) or c.code]
    kept += [c for c in changes if c not in kept][:max(0, MAX_CHANGES - len(kept))]
    kept.sort(key=lambda c: -c.waste_saved)
    if batch is not None:
        kept.insert(0, batch)
    covered = {i for c in kept for i in c.rows}
    # rows whose waste is a rounding error of the step's need no explanation
    floor = NEGLIGIBLE * sum(r.wasted_time for r in rows)
    uncovered = sorted(i for i in top - covered if rows[i - 1].wasted_time > floor)
    return kept + sorted(_origins(what, raw, reports, uncovered, batch), key=lambda r: r.rows[0])
