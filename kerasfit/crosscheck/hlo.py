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
    a contraction's output layout that way; docs/facts.md#4)."""
    perm = _ints(_attr(instr.attrs, "dimensions"))
    shape = src.shape if src is not None else []
    moved = [d for d in perm if d >= len(shape) or shape[d] != 1]
    if moved == sorted(moved):
        return True
    return src is not None and src.opcode in ("dot", "convolution") and _same_physical_order(instr, src)


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
    bytes: int  # HBM bytes per run: what it reads and writes, unpadded
    # what the report groups it as: the opcode of a data move, or "elementwise" /
    # "normalization" / "softmax" for the loop fusions XLA makes of elementwise ops
    kind: str = ""
    trips: int = 1  # runs per step (a while body's trip count)
    # why it costs nothing on any target ("" when it does): a transpose or copy that only
    # feeds dot/conv operands is folded into their layout (docs/facts.md#4); a transpose
    # that keeps the minor dimension, or that layout assignment made a bitcast, copies
    # nothing (docs/facts.md#26). The report names them and ranks none.
    free: str = ""
    # "convolution": a zero pad every consumer of which is a convolution, which a GPU's
    # convolution takes as its own padding in every pass (docs/facts.md#27); a TPU folds it
    # into the forward convolution only (docs/facts.md#19)
    folds: str = ""

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
# A pad or slice whose every consumer is fusible is part of their loop: it reads or writes
# a window of the array where the loop reads it (XLA's loop fusion takes both).
_WINDOWS = frozenset({"pad", "slice"})
# A reduction fuses its input but not its output (docs/facts.md#15): its result is written.
_FUSION_ENDS = frozenset({"reduce", "reduce-window", "select-and-scatter"})
_RELABEL = frozenset({"reshape", "bitcast"})  # no bytes of their own
# Consumers that take an operand in whatever layout it comes (XLA's layout assignment
# propagates a layout through them, docs/facts.md#26): elementwise loops and contractions.
_ANY_LAYOUT = _FUSIBLE | {"dot", "convolution"}
_FREE_OPERAND = "folded into the dot/conv operand layout (docs/facts.md#4)"
_KEEPS_MINOR = "keeps the minor dimension: the same tiles re-indexed, no copy (docs/facts.md#26)"
_LAYOUT_ONLY = "a layout change only: XLA's layout assignment made it a bitcast (docs/facts.md#26)"
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


def _identity_pad(instr: Instr) -> bool:
    """A pad of nothing (``padding=0_0x0_0``): XLA's simplifier removes it."""
    return instr.opcode == "pad" and not any(int(x) for x in re.findall(r"-?\d+", _attr(instr.attrs, "padding")))


def _keeps_minor(instr: Instr) -> bool:
    """A transpose whose logical minor dimension stays minor (docs/facts.md#26)."""
    perm = _ints(_attr(instr.attrs, "dimensions"))
    return bool(perm) and perm[-1] == len(perm) - 1


class _Body:
    """One computation's live instructions, with who reads what."""

    def __init__(self, comp: Computation, cname: str, live: set[tuple[str, str]]):
        self.comp = comp
        self.users: dict[str, list[Instr]] = {}
        for instr in comp.instrs.values():
            if (cname, instr.name) in live:
                for o in instr.operands:
                    self.users.setdefault(o, []).append(instr)
        # the converts and reduces a batched dot's batch sum folds into the dot (:func:`_fold_batch`)
        self.folded: set[str] = set()
        for instr in comp.instrs.values():
            nb = len(_ints(_attr(instr.attrs, "lhs_batch_dims"))) if instr.opcode == "dot" else 0
            if nb:
                self.folded.update(_batch_sum(instr, self.users, nb))

    def consumers(self, name: str) -> list[Instr]:
        """Live users, seen through reshapes and bitcasts."""
        found, work, seen = [], [name], set()
        while work:
            cur = work.pop()
            if cur in seen:
                continue
            seen.add(cur)
            for u in self.users.get(cur, []):
                if u.opcode in _RELABEL:
                    work.append(u.name)
                else:
                    found.append(u)
        return found

    def feeds_only(self, name: str, accepted: frozenset[str] | set[str], through: tuple[str, ...]) -> bool:
        """Do its values reach only ``accepted`` ops (through ``through`` ones), and one at least?"""
        work, seen, found = [name], set(), False
        while work:
            cur = work.pop()
            if cur in seen:
                continue
            seen.add(cur)
            for u in self.consumers(cur):
                if u.opcode in through:
                    work.append(u.name)
                elif u.opcode in accepted:
                    found = True
                else:
                    return False
        return found

    def producer(self, name: str) -> Instr | None:
        instr = self.comp.instrs.get(name)
        seen: set[str] = set()
        while instr is not None and instr.opcode in _RELABEL and instr.operands and instr.name not in seen:
            seen.add(instr.name)
            instr = self.comp.instrs.get(instr.operands[0])
        return instr

    def fusible(self, instr: Instr) -> bool:
        """Part of an elementwise loop: a fusible op, or a pad/slice whose consumers all are."""
        if instr.opcode in _WINDOWS:
            uses = self.consumers(instr.name)
            return bool(uses) and all(u.opcode in _FUSIBLE for u in uses)
        return instr.opcode in _FUSIBLE

    def free_transpose(self, instr: Instr, operand: Instr | None) -> str:
        """Why a transpose or copy copies nothing on the accelerator ("" when it does)."""
        if self.feeds_only(instr.name, frozenset({"dot", "convolution"}), ("transpose", "copy")):
            return _FREE_OPERAND
        if instr.opcode != "transpose":
            return ""
        if _keeps_minor(instr):
            return _KEEPS_MINOR
        if _same_physical_order(instr, operand) and self.takes_any_layout(instr.name):
            return _LAYOUT_ONLY
        return ""

    def takes_any_layout(self, name: str) -> bool:
        """Do all of a value's readers take it in whatever layout it comes: elementwise loops,
        reductions and contractions whose other operands are scalars or broadcasts (nothing
        of another layout to meet)? A reshape does not: it may merge dims the layout split."""
        uses = self.users.get(name, [])
        if not uses:
            return False
        for u in uses:
            if u.opcode not in _ANY_LAYOUT:
                return False
            for o in u.operands:
                other = self.comp.instrs.get(o)
                if o != name and other is not None and other.opcode not in ("constant", "broadcast", "iota") \
                        and math.prod(other.shape) > 1:
                    return False
        return True


def _same_physical_order(instr: Instr, src: Instr | None) -> bool:
    """Do the transpose's result and operand lay their non-unit dims out in the same order?"""
    perm = _ints(_attr(instr.attrs, "dimensions"))
    out_layout, in_layout = _layout(instr.type_text), _layout(src.type_text) if src is not None else None
    if src is None or out_layout is None or in_layout is None or len(perm) != len(out_layout):
        return False
    shape = src.shape
    out_phys = [perm[d] for d in reversed(out_layout)]
    return [d for d in out_phys if shape[d] != 1] == [d for d in reversed(in_layout) if shape[d] != 1]


def _moved_bytes(instr: Instr, operands: list[Instr]) -> int:
    """HBM bytes a data move reads and writes. A dynamic slice reads and writes the slice;
    a dynamic update, scatter or gather touches its rows and indices, in place: never the
    whole buffer (a ``while`` body's per-step slice of a stacked buffer costs one slice)."""
    if instr.opcode == "dynamic-update-slice" and len(operands) > 1:
        return 2 * _nbytes(operands[1])
    if instr.opcode == "dynamic-slice":
        return 2 * _nbytes(instr)
    if instr.opcode == "gather" and len(operands) > 1:
        return 2 * _nbytes(instr) + _nbytes(operands[1])
    if instr.opcode == "scatter" and len(operands) > 2:
        return 2 * _nbytes(operands[2]) + _nbytes(operands[1])
    return _nbytes(instr) + sum(_nbytes(o) for o in operands)


def _fused_bytes(body: _Body, instr: Instr) -> int:
    """What an op of an elementwise loop fusion reads and writes across the fusion's edge:
    its result where a consumer cannot take it inside the loop (or it ends one, #15); its
    operands made outside loops, except a dot/conv result (its output fusion, #5)."""
    uses = body.consumers(instr.name)
    writes = instr.opcode in _FUSION_ENDS or not uses or any(not body.fusible(u) for u in uses)
    moved = _nbytes(instr) if writes else 0
    for o in dict.fromkeys(instr.operands):  # x * x reads x once
        src = body.producer(o)
        if src is None or src.opcode in ("constant", "dot", "convolution", "iota"):
            continue
        if not body.fusible(src) or src.opcode in _FUSION_ENDS:
            moved += _nbytes(src)
    return moved


def _moves_nothing(body: _Body, instr: Instr, op_name: str, operand: Instr | None) -> bool:
    """The step's own results being returned, a batch sum folded into its dot, a pad of
    nothing, a transpose that moves no byte: no op at all."""
    return ((instr.opcode == "copy" and "XLA_Retvals" in op_name) or instr.name in body.folded
            or _identity_pad(instr) or (instr.opcode == "transpose" and _is_permutation_noop(instr, operand)))


def _folds_into_conv(body: _Body, instr: Instr) -> str:
    """"convolution" for a zero pad every consumer of which is a convolution."""
    value = body.comp.instrs.get(instr.operands[1]) if len(instr.operands) > 1 else None
    if instr.opcode != "pad" or not _is_zero(value):
        return ""
    uses = body.consumers(instr.name)
    return "convolution" if uses and all(u.opcode == "convolution" for u in uses) else ""


def _mem_op(body: _Body, instr: Instr, trips: int, elementwise: bool) -> MemOp | None:
    """The instruction as a data move or a loop fusion's member, or None (nothing moved)."""
    op_name = _metadata(instr.attrs, "op_name")
    operands = [body.comp.instrs[o] for o in instr.operands if o in body.comp.instrs]
    first = operands[0] if operands else None
    if _moves_nothing(body, instr, op_name, first):
        return None
    kind, free, folds = instr.opcode, "", ""
    if instr.opcode in ("transpose", "copy", "broadcast"):
        free = body.free_transpose(instr, first)
    if (instr.opcode == "broadcast" and not free) or (instr.opcode in _WINDOWS and body.fusible(instr)):
        kind = ""  # costed with (a window of) the elementwise loop it feeds
    if kind in MOVES or free:
        folds = _folds_into_conv(body, instr)
        moved = _moved_bytes(instr, operands)
    elif elementwise and body.fusible(instr) and instr.opcode != "constant":
        kind = _fusion_kind(op_name)
        moved = _fused_bytes(body, instr)
    else:
        return None
    if not moved:
        return None
    return MemOp(instr.name, instr.opcode, op_name, instr.dtype, instr.shape,
                 [o.shape for o in operands if math.prod(o.shape) > 1], moved,
                 kind=kind, trips=trips, free=free, folds=folds)


def _is_zero(value: Instr | None) -> bool:
    return (value is not None and value.opcode == "constant"
            and re.fullmatch(r"\s*-?0(\.0*)?\s*", value.args) is not None)


def memory_ops(text: str, elementwise: bool = True) -> list[MemOp]:
    """Live data-moving ops of the step with their unpadded HBM bytes per run.

    Data moves (pads, transposes, copies, slices...) cost what they read and write — a
    dynamic slice or update one slice, in place, not the buffer it indexes — except a
    transpose or pad that moves nothing (an identity, a layout-only transpose) and a
    transpose or copy the accelerator never materialises: one whose only consumers are
    dot/conv operands (docs/facts.md#4), one that keeps the minor dimension, one layout
    assignment made a bitcast (docs/facts.md#26); those are returned with ``free`` set.
    Elementwise ops (and broadcasts, and the pads and slices inside their loops) are costed
    as the loop fusions XLA makes of them: each one counts the bytes it reads from outside a
    fusion (not from a dot/conv, whose output fusion absorbs it, docs/facts.md#5) and the
    result it writes for a non-fusible consumer or as a reduction's output
    (docs/facts.md#15). While bodies count their trip count.
    """
    comps, entry = parse_module(text)
    if not entry:
        return []
    live = _live(comps, entry)
    out = []
    for cname, trips in trip_multipliers(comps, entry).items():
        comp = comps.get(cname)
        if comp is None:
            continue
        body = _Body(comp, cname, live)
        for instr in comp.instrs.values():
            if (cname, instr.name) not in live or math.prod(instr.shape) <= 1:
                continue
            mem = _mem_op(body, instr, trips, elementwise)
            if mem is not None:
                out.append(mem)
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
                op = _contraction(instr, comp, users, mult.get(cname, 1), cname == entry)
                if op is not None:
                    ops.append(op)
            elif instr.opcode == "pad" and instr.operands:
                consumers = _conv_consumers(instr.name, users, comp, live, cname)
                if consumers:
                    src = comp.instrs.get(instr.operands[0])
                    value = comp.instrs.get(instr.operands[1]) if len(instr.operands) > 1 else None
                    pads.append(PadOp(
                        name=instr.name, op_name=_metadata(instr.attrs, "op_name"),
                        shape=src.shape if src else [], padded_shape=instr.shape,
                        padding=_attr(instr.attrs, "padding"), zero=_is_zero(value), consumers=consumers,
                    ))
    return ops, pads


def _contraction(instr: Instr, comp: Computation, users: dict[str, list[Instr]], trips: int,
                 in_entry: bool) -> HloOp | None:
    """A convolution or dot as an :class:`HloOp`, with its metadata, trips and the step
    parameters among its operands (for :func:`classify_pass`); a batched dot summed over its
    batch folded into one contraction (:func:`_fold_batch`)."""
    lhs = comp.instrs.get(instr.operands[0])
    rhs = comp.instrs.get(instr.operands[1])
    if lhs is None or rhs is None:
        return None
    op = _conv(instr, lhs, rhs) if instr.opcode == "convolution" else _dot(instr, lhs, rhs)
    if op is None:
        return None
    op.op_type = _metadata(instr.attrs, "op_type")
    op.op_name = _metadata(instr.attrs, "op_name")
    op.grad_x = 'grad_x="true"' in instr.attrs
    op.grad_y = 'grad_y="true"' in instr.attrs
    if trips > 1:
        op.extra["trips"] = trips
    params = {}
    for tensor, name in (("lhs", instr.operands[0]), ("rhs", instr.operands[1])):
        param = _param_of(name, comp) if in_entry else None
        if param is not None and param.args.strip().isdigit():
            params[tensor] = [int(param.args), param.shape]
    if params:
        op.extra["params"] = params
    if op.extra.get("batch") and _batch_sum(instr, users, len(op.roles["out"].get("b", []))):
        _fold_batch(op)
    return op


def _batch_sum(instr: Instr, users: dict[str, list[Instr]], nb: int) -> list[str]:
    """A batched dot's result summed over its batch dims (a broadcast weight's gradient):
    the ops from the dot to that reduce (converts, copies, identity transposes) and the
    reduce; [] when it is not summed."""
    work: list[tuple[str, list[str]]] = [(instr.name, [])]
    seen: set[str] = set()
    while work:
        cur, path = work.pop()
        if cur in seen:
            continue
        seen.add(cur)
        for u in users.get(cur, []):
            perm = _ints(_attr(u.attrs, "dimensions")) if u.opcode == "transpose" else []
            if u.opcode in ("convert", "copy") or perm and perm == sorted(perm):
                work.append((u.name, [*path, u.name]))
            elif u.opcode == "reduce" and set(range(nb)) <= set(_ints(_attr(u.attrs, "dimensions"))):
                return [*path, u.name]
    return []


def _fold_batch(op: HloOp) -> None:
    """A batched dot summed over its batch is one contraction over the batch too: XLA's
    simplifier folds the reduce into the dot (a reduce over a dot's batch dims is a
    contraction), so a broadcast weight's gradient costs what a 2-D weight's does."""
    nb = len(op.roles["out"].get("b", []))
    batch = int(op.extra.pop("batch"))
    op.extra["batch_summed"] = True
    lhs, rhs = op.roles["lhs"], op.roles["rhs"]
    lhs["k"] = sorted(lhs.get("k", []) + lhs.pop("b", []))
    rhs["k"] = sorted(rhs.get("k", []) + rhs.pop("b", []))
    op.roles["out"].pop("b", None)
    op.roles["out"] = {r: [d - nb for d in ds] for r, ds in op.roles["out"].items()}
    op.shape = op.shape[nb:]
    op.k *= batch


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
    if op.extra.get("batch_summed"):
        return KERNEL_GRAD
    if op.extra.get("batch"):
        return INPUT_GRAD
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
