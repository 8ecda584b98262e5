"""Read XLA HLO text: every live ``convolution`` and ``dot``, and the ``pad`` ops feeding them.

Pure Python on purpose: the child process produces the text (docs/facts.md#20, the
pre-optimization ``stage="hlo"`` module), this module turns it into plain records,
and the tests exercise it on captured text without TensorFlow.

Every contraction is described in the MXU's terms (docs/facts.md#5: matmuls are lowered
to convolutions): ``m`` rows that stream through (the conv's output batch, a dot's
non-contracted lhs dims), ``k`` the contracted dim, ``n`` the produced features. Which
of those is the training batch depends on the pass, decided by :func:`classify_pass`.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

FORWARD = "forward"
INPUT_GRAD = "input-gradient"
KERNEL_GRAD = "kernel-gradient"
PASSES = (FORWARD, INPUT_GRAD, KERNEL_GRAD)

_COMMENT = re.compile(r"/\*.*?\*/")
_HEAD = re.compile(r"^\s*(ROOT\s+)?%?([^\s=]+)\s*=\s*")
_SHAPE = re.compile(r"^([a-z]+\d*)\[([^\]]*)\]")
_OPERAND = re.compile(r"%([^\s,()]+)")
_CALLED = re.compile(
    r"\b(?:to_apply|calls|body|condition|true_computation|false_computation)=%?([\w.\-]+)"
)
_CALLED_LIST = re.compile(r"\b(?:branch_computations|called_computations)=\{([^}]*)\}")
_COMPUTATION = re.compile(r"^\s*(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\{\s*$")

DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "bf16": 2, "f16": 2, "s16": 2, "u16": 2,
               "f32": 4, "s32": 4, "u32": 4, "f64": 8, "s64": 8, "u64": 8, "c64": 8}


@dataclass
class Instr:
    name: str
    opcode: str
    type_text: str
    operands: list[str]
    attrs: str
    called: list[str]
    args: str = ""  # raw text between the parentheses (a constant's literal)

    @property
    def dtype(self) -> str:
        m = _SHAPE.match(self.type_text)
        return m.group(1) if m else ""

    @property
    def shape(self) -> list[int]:
        return parse_shape(self.type_text)


@dataclass
class HloOp:
    """One convolution or dot: shapes, the roles of its dims, FLOPs and metadata."""

    name: str
    opcode: str  # "convolution" | "dot"
    op_type: str
    op_name: str
    dtype: str
    shape: list[int]  # result
    lhs_shape: list[int]
    rhs_shape: list[int]
    lhs: str  # operand instruction names (for activation bookkeeping)
    rhs: str
    # Positions of the m / k / n dims in each tensor ("lhs", "rhs", "out").
    roles: dict[str, dict[str, list[int]]]
    m: int
    k: int
    n: int
    flops: int
    dim_labels: str = ""
    window: str = ""
    feature_group_count: int = 1
    batch_group_count: int = 1
    grad_x: bool = False
    grad_y: bool = False
    pass_: str = ""  # filled by classify_pass
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["pass"] = d.pop("pass_")
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HloOp:
        d = dict(d)
        d["pass_"] = d.pop("pass", "")
        return cls(**d)


@dataclass
class PadOp:
    """An HLO ``pad`` whose result reaches a convolution (KF103's evidence)."""

    name: str
    op_name: str
    shape: list[int]  # input
    padded_shape: list[int]
    padding: str
    zero: bool  # padding value is the constant 0
    consumers: list[str]  # convolutions reading the padded tensor


def parse_shape(type_text: str) -> list[int]:
    m = _SHAPE.match(type_text.strip())
    if not m or not m.group(2).strip():
        return []
    return [int(d.replace("<=", "")) for d in m.group(2).split(",") if d.strip() != "?"]


def _balanced(text: str, start: int) -> int:
    """Index just past the parenthesis group opening at text[start]."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def _parse_instr(line: str) -> tuple[Instr, bool] | None:
    head = _HEAD.match(line)
    if not head:
        return None
    pos = head.end()
    if line[pos : pos + 1] == "(":
        end = _balanced(line, pos)
    else:
        end = line.find(" ", pos)
        if end < 0:
            return None
    type_text = line[pos:end].strip()
    rest = line[end:].lstrip()
    op = re.match(r"([\w\-]+)\(", rest)
    if not op:
        return None
    close = _balanced(rest, op.end() - 1)
    operands_text = rest[op.end() : close - 1]
    attrs = rest[close:]
    called = _CALLED.findall(attrs)
    for group in _CALLED_LIST.findall(attrs):
        called += [c.strip().lstrip("%") for c in group.split(",") if c.strip()]
    instr = Instr(head.group(2), op.group(1), type_text, _OPERAND.findall(operands_text), attrs,
                  called, operands_text)
    return instr, bool(head.group(1))


@dataclass
class Computation:
    name: str
    instrs: dict[str, Instr] = field(default_factory=dict)
    root: str = ""


_LAST_PARSE: list[tuple[str, tuple[dict[str, Computation], str]]] = []  # (text, result): parse_hlo and memory_ops read the same module


def parse_module(text: str) -> tuple[dict[str, Computation], str]:
    if _LAST_PARSE and _LAST_PARSE[0][0] is text:
        return _LAST_PARSE[0][1]
    result = _parse_module(text)
    _LAST_PARSE[:] = [(text, result)]
    return result


def _parse_module(text: str) -> tuple[dict[str, Computation], str]:
    comps: dict[str, Computation] = {}
    entry = ""
    current: Computation | None = None
    for raw in text.splitlines():
        line = _COMMENT.sub("", raw)
        if current is None:
            m = _COMPUTATION.match(line)
            if m:
                current = comps.setdefault(m.group(2), Computation(m.group(2)))
                if m.group(1):
                    entry = m.group(2)
            continue
        if line.strip() == "}":
            current = None
            continue
        parsed = _parse_instr(line)
        if parsed is None:
            continue
        instr, is_root = parsed
        current.instrs[instr.name] = instr
        if is_root:
            current.root = instr.name
    return comps, entry


def _live(comps: dict[str, Computation], entry: str) -> set[tuple[str, str]]:
    """(computation, instruction) pairs whose value reaches the entry's result.

    The pre-optimization module still holds dead code, e.g. the input gradient of the
    first layer that a GradientTape computes and nobody reads; XLA removes it before
    it reaches the TPU, so the simulator must not count it.
    """
    live: set[tuple[str, str]] = set()
    work: list[tuple[str, str]] = []

    def visit_comp(name: str) -> None:
        comp = comps.get(name)
        if comp is not None and comp.root:
            work.append((name, comp.root))

    if entry:
        visit_comp(entry)
    while work:
        key = work.pop()
        if key in live:
            continue
        comp = comps[key[0]]
        instr = comp.instrs.get(key[1])
        if instr is None:
            continue
        live.add(key)
        work.extend((key[0], o) for o in instr.operands if o in comp.instrs)
        for c in instr.called:
            visit_comp(c)
    return live


_TRIP = re.compile(r'known_trip_count[^0-9]*(\d+)')
_TENSOR_LIST = re.compile(r"\(\w+\[(\d+)(?:,[^\]]*)?\](?:\{[^}]*\})?, s32\[\]\)")


def _trip_count(instr: Instr, comps: dict[str, Computation]) -> int:
    """How often a ``while`` runs its body, from the HLO alone.

    XLA's own known trip count when the backend config carries one; else the constant
    bound its condition compares the counter with (TF's ``while/Less`` against the
    sequence length); else the length of the TensorLists the loop carries (one slot per
    step); else 1.
    """
    m = _TRIP.search(instr.attrs)
    if m:
        return int(m.group(1))
    bounds: list[int] = []
    work, seen = [c for c in instr.called if c in comps and "cond" in c] or instr.called[:1], set()
    while work:
        name = work.pop()
        if name in seen or name not in comps:
            continue
        seen.add(name)
        comp = comps[name]
        for i in comp.instrs.values():
            work += i.called
            if i.opcode != "compare" or len(i.operands) != 2:
                continue
            direction = _attr(i.attrs, "direction")
            for o in i.operands[1:]:
                c = comp.instrs.get(o)
                if c is not None and c.opcode == "constant" and re.fullmatch(r"\s*\d+\s*", c.args):
                    bounds.append(int(c.args) + (1 if direction == "LE" else 0))
    if bounds:
        return max(1, min(bounds))
    lengths = [int(n) for n in _TENSOR_LIST.findall(instr.type_text)]
    return max(lengths, key=lengths.count) if lengths else 1


def trip_multipliers(comps: dict[str, Computation], entry: str) -> dict[str, int]:
    """How many times each computation runs per step: ``while`` bodies times their trips."""
    mult = {entry: 1}
    work = [entry]
    while work:
        name = work.pop()
        comp = comps.get(name)
        if comp is None:
            continue
        for instr in comp.instrs.values():
            trips = _trip_count(instr, comps) if instr.opcode == "while" else 1
            for c in instr.called:
                if c in comps and mult.get(c, 0) < mult[name] * trips:
                    mult[c] = mult[name] * trips
                    work.append(c)
    return mult


# Ops that only relabel a tensor or move it through HBM unchanged in value.
_PASS_THROUGH = frozenset({"reshape", "bitcast", "copy", "convert", "transpose", "broadcast"})


def _param_of(name: str, comp: Computation) -> Instr | None:
    """The parameter a value is, seen through reshapes, transposes, converts and copies."""
    seen: set[str] = set()
    while name not in seen:
        seen.add(name)
        instr = comp.instrs.get(name)
        if instr is None:
            return None
        if instr.opcode == "parameter":
            return instr
        if instr.opcode not in _PASS_THROUGH or not instr.operands:
            return None
        name = instr.operands[0]
    return None


def _is_permutation_noop(instr: Instr, src: Instr | None) -> bool:
    """A transpose that moves no byte: one that only moves size-1 dims, or one whose
    operand is a dot's or convolution's result written in the transposed order (XLA picks
    a contraction's output layout that way; docs/facts.md#4). A transpose the CPU's layout
    assignment turned into a bitcast after any other op is not free on a TPU: the relayout
    it stands for moves into its consumer, so it keeps its bytes."""
    perm = _ints(_attr(instr.attrs, "dimensions"))
    shape = src.shape if src is not None else []
    moved = [d for d in perm if d >= len(shape) or shape[d] != 1]
    if moved == sorted(moved):
        return True
    if src is None or src.opcode not in ("dot", "convolution"):
        return False
    out_layout = _layout(instr.type_text)
    in_layout = _layout(src.type_text)
    if out_layout is None or in_layout is None or len(perm) != len(out_layout):
        return False
    # physical major-to-minor order of the result, in the operand's dims
    out_phys = [perm[d] for d in reversed(out_layout)]
    in_phys = list(reversed(in_layout))
    return [d for d in out_phys if shape[d] != 1] == [d for d in in_phys if shape[d] != 1]


def _layout(type_text: str) -> list[int] | None:
    m = re.match(r"^[a-z]+\d*\[[^\]]*\]\{([\d,]*)", type_text.strip())
    return [int(x) for x in m.group(1).split(",") if x] if m else None


def _attr(attrs: str, name: str) -> str:
    m = re.search(r"\b" + name + r"=(\{[^}]*\}|[^,\s]+)", attrs)
    return m.group(1) if m else ""


def _ints(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", text)]


def _metadata(attrs: str, key: str) -> str:
    m = re.search(r"\b" + key + r'="((?:[^"\\]|\\.)*)"', attrs)
    return m.group(1) if m else ""


def _conv(instr: Instr, lhs: Instr, rhs: Instr) -> HloOp | None:
    labels = _attr(instr.attrs, "dim_labels")
    m = re.match(r"(\w+)_(\w+)->(\w+)", labels)
    if not m:
        return None
    lhs_l, rhs_l, out_l = m.groups()
    out, rs = instr.shape, rhs.shape
    if len(lhs_l) != len(lhs.shape) or len(rhs_l) != len(rs) or len(out_l) != len(out):
        return None
    window = _attr(instr.attrs, "window").strip("{}")
    size = re.search(r"size=([\dx]+)", window)
    win = [int(s) for s in size.group(1).split("x")] if size else []
    fgc = int(_attr(instr.attrs, "feature_group_count") or 1)
    bgc = int(_attr(instr.attrs, "batch_group_count") or 1)
    roles = {
        "lhs": {"m": [lhs_l.index("b")], "k": [lhs_l.index("f")]},
        "rhs": {"k": [rhs_l.index("i")], "n": [rhs_l.index("o")]},
        "out": {"m": [out_l.index("b")], "n": [out_l.index("f")]},
    }
    k = rs[rhs_l.index("i")]
    # A strided conv's input gradient dilates dy with zeros (lhs_dilate): only one window
    # tap in prod(dilation) meets a real value, the rest multiply zeros the TPU skips.
    dil = re.search(r"lhs_dilate=([\dx]+)", window)
    dilation = math.prod(int(d) for d in dil.group(1).split("x")) if dil else 1
    flops = 2 * math.prod(out) * math.prod(win) * k // dilation
    return HloOp(
        name=instr.name, opcode="convolution", op_type="", op_name="", dtype=instr.dtype,
        shape=out, lhs_shape=lhs.shape, rhs_shape=rs, lhs=lhs.name, rhs=rhs.name, roles=roles,
        m=out[out_l.index("b")], k=k, n=out[out_l.index("f")], flops=flops,
        dim_labels=labels, window=window, feature_group_count=fgc, batch_group_count=bgc,
    )


def _dot(instr: Instr, lhs: Instr, rhs: Instr) -> HloOp:
    ls, rs, out = lhs.shape, rhs.shape, instr.shape
    lb = _ints(_attr(instr.attrs, "lhs_batch_dims"))
    lc = _ints(_attr(instr.attrs, "lhs_contracting_dims"))
    rb = _ints(_attr(instr.attrs, "rhs_batch_dims"))
    rc = _ints(_attr(instr.attrs, "rhs_contracting_dims"))
    lf = [i for i in range(len(ls)) if i not in lb and i not in lc]
    rf = [i for i in range(len(rs)) if i not in rb and i not in rc]
    # XLA's dot result order: batch dims, lhs free dims, rhs free dims.
    nb = len(lb)
    roles = {
        "lhs": {"m": lf, "k": lc},
        "rhs": {"k": rc, "n": rf},
        "out": {"m": list(range(nb, nb + len(lf))), "n": list(range(nb + len(lf), len(out)))},
    }
    k = math.prod(ls[i] for i in lc)
    extra: dict[str, Any] = {}
    if lb:
        # A batched matmul (attention): each batch element is its own matmul, so the
        # batch dims are never padded and are not what the MXU contracts over.
        extra["batch"] = math.prod(ls[i] for i in lb)
        roles["lhs"]["b"], roles["rhs"]["b"], roles["out"]["b"] = lb, rb, list(range(nb))
    return HloOp(
        name=instr.name, opcode="dot", op_type="", op_name="", dtype=instr.dtype,
        shape=out, lhs_shape=ls, rhs_shape=rs, lhs=lhs.name, rhs=rhs.name, roles=roles,
        m=math.prod(ls[i] for i in lf), k=k, n=math.prod(rs[i] for i in rf),
        flops=2 * math.prod(out) * k, extra=extra,
    )


@dataclass
class MemOp:
    """An op that only moves data through HBM: a pad, transpose, copy, or elementwise op."""

    name: str
    opcode: str
    op_name: str
    dtype: str
    shape: list[int]  # result
    operand_shapes: list[list[int]]
    bytes: int  # HBM bytes per run: operands read + result written, unpadded
    # what the report groups it as: the opcode of a data move, or "elementwise" /
    # "normalization" / "softmax" for the loop fusions XLA makes of elementwise ops
    kind: str = ""
    trips: int = 1  # runs per step (a while body's trip count)
    # why it costs nothing on a TPU ("" when it does): a transpose or copy that only feeds
    # dot/conv operands is folded into their layout (docs/facts.md#4)
    free: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# What the report counts as HBM traffic (pre-optimization HLO, before fusion).
MOVES = frozenset({"pad", "transpose", "copy", "concatenate", "slice", "dynamic-slice",
                   "dynamic-update-slice", "reverse", "gather", "scatter"})
ELEMENTWISE = frozenset({"add", "subtract", "multiply", "divide", "maximum", "minimum",
                         "exponential", "log", "tanh", "logistic", "sqrt", "rsqrt", "negate",
                         "abs", "select", "compare", "convert", "power", "clamp", "reduce",
                         "reduce-window", "select-and-scatter", "erf"})
# Ops XLA fuses with their elementwise neighbours into one loop (docs/facts.md#5, #15):
# only the bytes that cross the fusion's edge go through HBM.
_FUSIBLE = ELEMENTWISE | {"broadcast", "and", "or", "not", "xor", "sign", "floor", "ceil",
                          "round-nearest-afz", "round-nearest-even", "cosine", "sine", "atan2",
                          "is-finite", "remainder", "exponential-minus-one", "log-plus-one",
                          "iota", "constant", "cbrt", "tan", "rng", "rng-bit-generator"}
# A reduction fuses its input but not its output (docs/facts.md#15): its result is written.
_FUSION_ENDS = frozenset({"reduce", "reduce-window", "select-and-scatter"})
_RELABEL = frozenset({"reshape", "bitcast"})  # no bytes of their own
_FREE_OPERAND = "folded into the dot/conv operand layout (docs/facts.md#4)"
_NORM = re.compile(r"batch_?norm|BatchNorm|layer_?norm|LayerNorm|normali[sz]ation|moments|"
                   r"group_?norm|GroupNorm", re.I)
_SOFTMAX = re.compile(r"softmax", re.I)


def _fusion_kind(op_name: str) -> str:
    if _SOFTMAX.search(op_name):
        return "softmax"
    if _NORM.search(op_name):
        return "normalization"
    return "elementwise"


def _nbytes(instr: Instr) -> int:
    n = math.prod(instr.shape)
    return n * DTYPE_BYTES.get(instr.dtype, 4) if n > 1 else 0


def memory_ops(text: str, elementwise: bool = True) -> list[MemOp]:
    """Live data-moving ops of the step with their unpadded HBM bytes per run.

    Data moves (pads, transposes, copies, slices...) cost what they read and write,
    except a transpose that moves nothing (an identity, or a layout-only one) and a
    transpose or copy whose only consumers are dot/conv operands (docs/facts.md#4), which
    are returned with ``free`` set. Elementwise ops (and broadcasts) are costed as the
    loop fusions XLA makes of them: each one counts the bytes it reads from outside a
    fusion (not from a dot/conv, whose output fusion absorbs it, docs/facts.md#5) and the
    result it writes for a non-fusible consumer or as a reduction's output
    (docs/facts.md#15). While bodies count their trip count.
    """
    comps, entry = parse_module(text)
    if not entry:
        return []
    live = _live(comps, entry)
    mult = trip_multipliers(comps, entry)
    out = []
    for cname, trips in mult.items():
        comp = comps.get(cname)
        if comp is None:
            continue
        users: dict[str, list[Instr]] = {}
        for instr in comp.instrs.values():
            if (cname, instr.name) in live:
                for o in instr.operands:
                    users.setdefault(o, []).append(instr)

        def consumers(name: str) -> list[Instr]:
            """Live users, seen through reshapes and bitcasts."""
            found, work, seen = [], [name], set()
            while work:
                cur = work.pop()
                if cur in seen:
                    continue
                seen.add(cur)
                for u in users.get(cur, []):
                    if u.opcode in _RELABEL:
                        work.append(u.name)
                    else:
                        found.append(u)
            return found

        def feeds_only_contractions(name: str) -> bool:
            """Do its values reach only dot/conv operands (through other relayouts)?"""
            work, seen, found = [name], set(), False
            while work:
                cur = work.pop()
                if cur in seen:
                    continue
                seen.add(cur)
                for u in consumers(cur):
                    if u.opcode in ("dot", "convolution"):
                        found = True
                    elif u.opcode in ("transpose", "copy"):
                        work.append(u.name)
                    else:
                        return False
            return found

        def producer(name: str) -> Instr | None:
            instr = comp.instrs.get(name)
            seen: set[str] = set()
            while instr is not None and instr.opcode in _RELABEL and instr.operands and instr.name not in seen:
                seen.add(instr.name)
                instr = comp.instrs.get(instr.operands[0])
            return instr

        for instr in comp.instrs.values():
            if (cname, instr.name) not in live or math.prod(instr.shape) <= 1:
                continue
            op_name = _metadata(instr.attrs, "op_name")
            operands = [comp.instrs[o] for o in instr.operands if o in comp.instrs]
            kind = instr.opcode
            free = ""
            if instr.opcode in MOVES or instr.opcode == "broadcast":
                if instr.opcode == "copy" and "XLA_Retvals" in op_name:
                    continue  # the step's own results being returned, not work the model does
                if instr.opcode == "transpose" and _is_permutation_noop(instr, operands[0] if operands else None):
                    continue
                if instr.opcode in ("transpose", "copy", "broadcast") and feeds_only_contractions(instr.name):
                    free = _FREE_OPERAND
                elif instr.opcode == "broadcast":
                    kind = ""  # costed with the elementwise fusion it feeds
            if kind in MOVES or free:
                moved = _nbytes(instr) + sum(_nbytes(o) for o in operands)
            elif elementwise and (instr.opcode in _FUSIBLE) and instr.opcode != "constant":
                kind = _fusion_kind(op_name)
                uses = consumers(instr.name)
                # an elementwise op feeding a reduction fuses into its input (#15)
                writes = instr.opcode in _FUSION_ENDS or not uses or any(u.opcode not in _FUSIBLE for u in uses)
                moved = _nbytes(instr) if writes else 0
                for o in dict.fromkeys(instr.operands):  # x * x reads x once
                    src = producer(o)
                    if src is None or src.opcode in ("constant", "dot", "convolution", "iota"):
                        continue
                    if src.opcode not in _FUSIBLE or src.opcode in _FUSION_ENDS:
                        moved += _nbytes(src)
                if not moved:
                    continue
            else:
                continue
            out.append(MemOp(instr.name, instr.opcode, op_name, instr.dtype, instr.shape,
                             [o.shape for o in operands if math.prod(o.shape) > 1], moved,
                             kind=kind, trips=trips, free=free))
    return out


# Ops that only relabel or re-layout a tensor: a pad seen through them still feeds the conv.
_TRIVIAL = {"reshape", "bitcast", "copy", "convert", "transpose"}


def parse_hlo(text: str) -> tuple[list[HloOp], list[PadOp]]:
    """All live convolutions/dots (module order) and the zero/non-zero pads feeding them."""
    comps, entry = parse_module(text)
    live = _live(comps, entry) if entry else {(c, i) for c in comps for i in comps[c].instrs}
    mult = trip_multipliers(comps, entry) if entry else {}
    ops: list[HloOp] = []
    pads: list[PadOp] = []
    for cname, comp in comps.items():
        users: dict[str, list[Instr]] = {}
        for instr in comp.instrs.values():
            for o in instr.operands:
                users.setdefault(o, []).append(instr)
        for instr in comp.instrs.values():
            if (cname, instr.name) not in live:
                continue
            if instr.opcode in ("convolution", "dot") and len(instr.operands) >= 2:
                lhs = comp.instrs.get(instr.operands[0])
                rhs = comp.instrs.get(instr.operands[1])
                if lhs is None or rhs is None:
                    continue
                op = _conv(instr, lhs, rhs) if instr.opcode == "convolution" else _dot(instr, lhs, rhs)
                if op is None:
                    continue
                op.op_type = _metadata(instr.attrs, "op_type")
                op.op_name = _metadata(instr.attrs, "op_name")
                op.grad_x = 'grad_x="true"' in instr.attrs
                op.grad_y = 'grad_y="true"' in instr.attrs
                if mult.get(cname, 1) > 1:
                    op.extra["trips"] = mult[cname]
                # Which operands are step parameters (weights or inputs), for classify_pass.
                params = {}
                for tensor, name in (("lhs", instr.operands[0]), ("rhs", instr.operands[1])):
                    param = _param_of(name, comp) if cname == entry else None
                    if param is not None and param.args.strip().isdigit():
                        params[tensor] = [int(param.args), param.shape]
                if params:
                    op.extra["params"] = params
                if op.extra.get("batch") and _sums_batch(instr, users, len(op.roles["out"].get("b", []))):
                    op.extra["batch_summed"] = True
                ops.append(op)
            elif instr.opcode == "pad" and instr.operands:
                src = comp.instrs.get(instr.operands[0])
                value = comp.instrs.get(instr.operands[1]) if len(instr.operands) > 1 else None
                zero = (
                    value is not None
                    and value.opcode == "constant"
                    and re.fullmatch(r"\s*-?0(\.0*)?\s*", value.args) is not None
                )
                consumers = _conv_consumers(instr.name, users, comp, live, cname)
                if consumers:
                    pads.append(PadOp(
                        name=instr.name, op_name=_metadata(instr.attrs, "op_name"),
                        shape=src.shape if src else [], padded_shape=instr.shape,
                        padding=_attr(instr.attrs, "padding"), zero=zero, consumers=consumers,
                    ))
    return ops, pads


def _sums_batch(instr: Instr, users: dict[str, list[Instr]], nb: int) -> bool:
    """Is a batched dot's result summed over its batch dims (a broadcast weight's gradient)?"""
    work, seen = [instr.name], set()
    while work:
        cur = work.pop()
        if cur in seen:
            continue
        seen.add(cur)
        for u in users.get(cur, []):
            perm = _ints(_attr(u.attrs, "dimensions")) if u.opcode == "transpose" else []
            if u.opcode in ("convert", "copy") or perm and perm == sorted(perm):
                work.append(u.name)
            elif u.opcode == "reduce" and set(range(nb)) <= set(_ints(_attr(u.attrs, "dimensions"))):
                return True
    return False


def _conv_consumers(name: str, users: dict[str, list[Instr]], comp: Computation,
                    live: set[tuple[str, str]], cname: str) -> list[str]:
    found: list[str] = []
    work, seen = [name], set()
    while work:
        cur = work.pop()
        if cur in seen:
            continue
        seen.add(cur)
        for u in users.get(cur, []):
            if (cname, u.name) not in live:
                continue
            if u.opcode == "convolution":
                found.append(u.name)
            elif u.opcode in _TRIVIAL:
                work.append(u.name)
    return sorted(found)


# Gradient scopes: TF2's GradientTape and TF1's tf.gradients (gradients, gradients_1 ...).
_GRAD_SCOPE = re.compile(r"(^|/)(gradient_tape|gradients(_\d+)?)/|_grad/")
_FILTER_GRAD = ("BackpropFilter",)
_INPUT_GRAD = ("BackpropInput",)


def is_gradient(op_name: str) -> bool:
    return bool(_GRAD_SCOPE.search(op_name))


def classify_pass(op: HloOp, variable_shapes: Sequence[Sequence[int]] = ()) -> str:
    """forward / input-gradient / kernel-gradient, from the op's name first.

    The gradient scope decides forward vs backward: a Conv2DTranspose's forward op is
    itself a Conv2DBackpropInput, but it is not under a gradient scope. Inside one, TF's
    op types and MatMul's grad_x/grad_y attributes name the pass; for anything else
    (einsum, batched matmul) the result having a trainable variable's shape means it is
    a weight update.
    """
    if not is_gradient(op.op_name):
        return FORWARD
    if any(s in op.op_type for s in _FILTER_GRAD):
        return KERNEL_GRAD
    if any(s in op.op_type for s in _INPUT_GRAD):
        return INPUT_GRAD
    if op.opcode == "convolution" and re.search(r"->\d", op.dim_labels):
        # Output starting with spatial dims ("->01bf") is a kernel layout.
        return KERNEL_GRAD
    # From the operands, not TF's grad_x/grad_y (which name the matmul operand, weight or
    # not): a weight times the upstream gradient is an input gradient; a gradient times an
    # activation is a weight update when its result is a weight's gradient -- a weight's
    # shape, or summed over the batch dims of a batched matmul -- and otherwise the
    # gradient of another activation (attention's backward dots).
    shapes = [sorted(v) for v in variable_shapes if v]
    params = op.extra.get("params") or {}
    if any(index > 0 and sorted(shape) in shapes for index, shape in params.values()):
        return INPUT_GRAD
    if op.extra.get("batch"):
        return KERNEL_GRAD if op.extra.get("batch_summed") else INPUT_GRAD
    if sorted(op.shape) in shapes:
        return KERNEL_GRAD
    return INPUT_GRAD


_PREFIXES = re.compile(r"^((Stateful)?PartitionedCall(_\d+)?|gradient_tape|gradients(_\d+)?)/")


def strip_scopes(op_name: str) -> str:
    """The forward op path behind an HLO op_name: no call wrappers, no gradient scopes."""
    name = op_name
    while True:
        new = _PREFIXES.sub("", name)
        if new == name:
            break
        name = new
    # TF1: gradients/scope/conv/Conv2D_grad/Conv2DBackpropFilter -> scope/conv/Conv2D
    return re.sub(r"_grad(/.*)?$", "", name)
