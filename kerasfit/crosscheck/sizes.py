"""The sizes a script states, read without running it: the batch its training runs at, the
image size and sequence length its data pipeline gives, the shape of the arrays it fits.
Pure Python.

Values fold through what the script writes down: module constants, a configuration class's
attributes (``Config.BATCH_SIZE``, through an instance ``config = Config()``), absl flags'
and argparse options' defaults (``FLAGS.batch_size``, ``args.batch``), and a function's own
batch assignment (``batch_size = FLAGS.num_cores * PER_CORE_BATCH_SIZE``). Attribute reads
of a batch that do not fold here (``config.BATCH_SIZE`` of the script's own config module)
are left for the build to evaluate (:attr:`ScriptSizes.batch_reads`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Iterator

from kerasfit.semantic.folding import BINARY
from .astnames import terminal

# Keras's own batch when fit() is given arrays and no batch_size (Model.fit's documented default).
FIT_DEFAULT_BATCH = 32


@dataclass
class Size:
    """A size the script states, where it states it."""

    value: tuple[int, ...]
    line: int
    what: str  # the statement, shortened: "batch_size = 32", ".batch(64)"
    per_replica: bool = False  # ``16 * strategy.num_replicas_in_sync``: a per-core batch
    fit_default: bool = False  # fit() is given arrays and no batch_size: Keras's own default


@dataclass
class ScriptSizes:
    batch: Size | None = None
    image: Size | None = None  # (height, width)
    sequence: Size | None = None  # (length,)
    fitted: Size | None = None  # the non-batch dims of the array the script fits, as it states them
    # attribute reads of a batch the script imports or defines (``config.BATCH_SIZE``): the
    # build evaluates them when no batch folds here
    batch_reads: list[tuple[str, int]] = field(default_factory=list)
    # what the build itself knows of an input: the shape the entry passes (``input_shape=…``)
    entry_input: Size | None = None
    # a network's input, as the script's own training step feeds it: its non-batch dims, or the
    # label of the network whose output it is (a GAN's discriminator eats the generator's images)
    network_inputs: dict[str, tuple[int, ...] | str] = field(default_factory=dict)


_BATCH_NAME = re.compile(r"^(global_|train_|training_)?batch(_?size)?$|^bs$", re.I)
_PER_REPLICA_NAME = re.compile(r"^per_?(core|replica|device|gpu|tpu|worker)_batch(_?size)?$", re.I)
_SEQ_NAME = re.compile(r"^(max_?len|max_?length|seq(uence)?_?len(gth)?|max_seq(uence)?_?len(gth)?|"
                       r"max_?seq_?len|text_?len|max_?tokens_?len)$", re.I)
_IMAGE_NAME = re.compile(r"^(img|image|input|crop)_?(size|shape|res|resolution|dim)$", re.I)
_REPLICAS = "num_replicas_in_sync"
# Calls that make a dataset; a batch_size= / image_size= / sequence_length= given to one is
# the size of what it yields.
_DATASET_MAKERS = frozenset({"image_dataset_from_directory", "text_dataset_from_directory",
                             "audio_dataset_from_directory", "timeseries_dataset_from_array",
                             "flow_from_directory", "flow_from_dataframe", "flow", "make_csv_dataset"})
_DATASET_METHODS = frozenset({"batch", "padded_batch", "map", "shuffle", "prefetch", "repeat", "cache", "take",
                              "filter", "interleave", "from_tensor_slices", "from_generator", "zip",
                              "TFRecordDataset", "list_files", "with_options", "apply", "unbatch", "load"})
# array makers -> where their shape is: an argument's position, "size" (a keyword), None (the arguments)
_ARRAY_MAKERS: dict[str, int | str | None] = {
    "random": 0, "rand": None, "randn": None, "zeros": 0, "ones": 0, "empty": 0, "full": 0, "normal": "size",
    "uniform": "size", "randint": "size", "standard_normal": 0, "truncated_normal": 0}
_CROPS = ("RandomCrop", "CenterCrop", "random_crop", "central_crop_to", "resize_with_crop_or_pad", "crop_to")
_RESIZES = ("Resizing", "resize", "resize_with_pad", "smart_resize")


def dotted(node: ast.expr) -> str | None:
    """``a.b.c`` as written, for a chain of names and attributes; else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _short(node: ast.AST) -> str:
    """The statement as written, when it reads on one short line; else what it states."""
    text = " ".join(ast.unparse(node).split())
    if len(text) <= 80:
        return text
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        return f"{ast.unparse(node.targets[0])}, as the script computes it"
    return f"{ast.unparse(node.func)}(), as the script calls it" if isinstance(node, ast.Call) else \
        "as the script writes it"


# ---------------------------------------------------------------- what the script states


class Consts:
    """Ints (and tuples of ints) the script states, by the name it reads them through."""

    def __init__(self) -> None:
        self.values: dict[str, tuple[int, ...]] = {}
        self.lines: dict[str, tuple[int, str]] = {}  # name -> (line, statement) where stated
        self.replicas: set[str] = set()
        self.aliases: dict[str, str] = {}  # ``config = Config()`` -> {"config": "Config"}

    def value(self, node: ast.expr | None) -> tuple[tuple[int, ...], bool] | None:
        """An int (or tuple of ints) the expression folds to, and whether it multiplies a
        strategy's replica count (then the int is per replica)."""
        if node is None:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return (node.value,), False
        if isinstance(node, ast.Attribute) and node.attr == _REPLICAS:
            return (1,), True
        name = dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if name is not None:
            found = self.lookup(name)
            return (found, name in self.replicas) if found is not None else None
        if isinstance(node, (ast.Tuple, ast.List)):
            vals = [self.value(e) for e in node.elts]
            if vals and all(v is not None and len(v[0]) == 1 for v in vals):
                return tuple(v[0][0] for v in vals if v), False
            return None
        if isinstance(node, ast.Call) and terminal(node.func) == "int" and len(node.args) == 1:
            return self.value(node.args[0])
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.Sub, ast.FloorDiv, ast.Pow)):
            return self._binop(node)
        return None

    def _binop(self, node: ast.BinOp) -> tuple[tuple[int, ...], bool] | None:
        left, right = self.value(node.left), self.value(node.right)
        if left is None or right is None or len(left[0]) != 1 or len(right[0]) != 1:
            return None
        op = BINARY[type(node.op)]
        v = op(left[0][0], right[0][0]) if op is not None else None
        # (``2 ** -1`` is no size; a huge power or a division by zero is not known)
        return ((v,), left[1] or right[1]) if isinstance(v, int) and not isinstance(v, bool) else None

    def lookup(self, name: str) -> tuple[int, ...] | None:
        if name in self.values:
            return self.values[name]
        head, _, rest = name.partition(".")
        if rest and head in self.aliases:
            return self.values.get(f"{self.aliases[head]}.{rest}")
        return None

    def bind(self, name: str, node: ast.expr, stmt: ast.AST, what: str | None = None
             ) -> tuple[tuple[int, ...], bool] | None:
        val = self.value(node)
        if val is not None:
            self.values[name] = val[0]
            self.lines[name] = (getattr(stmt, "lineno", 0), what or _short(stmt))
            if val[1]:
                self.replicas.add(name)
        return val


def _flat(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements in order, those inside with/try/if/for blocks included (not function bodies)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.With, ast.If, ast.For, ast.While, ast.Try)):
            yield from _flat(stmt.body)
            yield from _flat(getattr(stmt, "orelse", []))


def _functions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def states(tree: ast.Module) -> Consts:
    """What the script states: module constants, its config classes' attributes (and their
    instances), and its flags' and options' defaults."""
    consts = Consts()
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef):
            _class_consts(stmt, consts)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            _option_default(node, consts)
    for stmt in _flat(tree.body):
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:  # ``H = W = 256``
                if isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple) \
                        and len(target.elts) == len(stmt.value.elts):  # ``ROWS, COLS = 28, 28``
                    for t, v in zip(target.elts, stmt.value.elts):
                        _module_binding(t, v, stmt, consts)
                else:
                    _module_binding(target, stmt.value, stmt, consts)
    return consts


def _class_consts(cls: ast.ClassDef, consts: Consts) -> None:
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            consts.bind(f"{cls.name}.{stmt.targets[0].id}", stmt.value, stmt)
        elif isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
            for node in ast.walk(stmt):
                if (isinstance(node, ast.Assign) and len(node.targets) == 1
                        and isinstance(node.targets[0], ast.Attribute) and dotted(node.targets[0]) is not None
                        and dotted(node.targets[0].value) == "self"):
                    consts.bind(f"{cls.name}.{node.targets[0].attr}", node.value, node)


def _option_default(call: ast.Call, consts: Consts) -> None:
    """``flags.DEFINE_integer('batch_size', 64, …)`` -> FLAGS.batch_size; ``parser.add_argument(
    '--batch_size', type=int, default=32)`` -> args.batch_size (the names are aliased to the
    script's own: ``FLAGS = flags.FLAGS``, ``args = parser.parse_args()``)."""
    name = terminal(call.func)
    kwargs = {k.arg: k.value for k in call.keywords if k.arg}
    if name in ("DEFINE_integer", "DEFINE_int"):
        flag = call.args[0] if call.args else kwargs.get("name")
        default = call.args[1] if len(call.args) > 1 else kwargs.get("default")
        if isinstance(flag, ast.Constant) and isinstance(flag.value, str) and default is not None:
            consts.bind(f"FLAGS.{flag.value}", default, call, f"the flag {flag.value}'s default, {ast.unparse(default)}")
    elif name == "add_argument" and "default" in kwargs:
        options = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        dest = kwargs.get("dest")
        long = next((o for o in options if o.startswith("--")), options[0] if options else None)
        key = dest.value if isinstance(dest, ast.Constant) else long.lstrip("-").replace("-", "_") if long else None
        if isinstance(key, str):
            consts.bind(f"ARGS.{key}", kwargs["default"], call,
                        f"the option {long or key}'s default, {ast.unparse(kwargs['default'])}")


def _module_binding(target: ast.expr, value: ast.expr, stmt: ast.Assign, consts: Consts) -> None:
    if isinstance(target, ast.Name):
        callee = terminal(value.func) if isinstance(value, ast.Call) else None
        if callee == "parse_args" or callee == "parse_known_args":
            consts.aliases[target.id] = "ARGS"
        elif isinstance(value, ast.Attribute) and value.attr == "FLAGS":
            consts.aliases[target.id] = "FLAGS"
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and any(
                k.startswith(value.func.id + ".") for k in consts.values):
            consts.aliases[target.id] = value.func.id  # an instance of a config class
        else:
            consts.bind(target.id, value, stmt)


# ---------------------------------------------------------------- the sizes


def script_sizes(tree: ast.Module, trained: str | None = None, entry: str | None = None) -> ScriptSizes:
    """The batch, image size and sequence length the script states, and the shape of what it
    fits. ``trained``: the model variable being built (its own fit decides the batch);
    ``entry``: the expression built, whose own arguments (``batch_size=…``) come first."""
    consts = states(tree)
    sizes = ScriptSizes()
    sizes.batch = _batch(tree, consts, trained, entry)
    sizes.image = _image(tree, consts)
    sizes.sequence = _sequence(tree, consts)
    sizes.fitted = _fitted(tree, consts, trained)
    if sizes.batch is None:
        sizes.batch_reads = _batch_reads(tree)
    return sizes


def _fits(tree: ast.Module, trained: str | None) -> list[tuple[ast.Call, str]]:
    """The ``fit`` calls (and ``train_on_batch``) of the trained model, else of any model, with
    the method's name."""
    calls = [(n, n.func.attr) for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr in ("fit", "fit_generator", "train_on_batch")]
    own = [(c, m) for c, m in calls if trained is not None and dotted(c.func) == f"{trained}.{m}"]
    return own or calls


def _batch(tree: ast.Module, consts: Consts, trained: str | None, entry: str | None) -> Size | None:
    """fit's own batch_size (or Keras's default when fit gets arrays and none); the batch of
    the dataset fit gets; a batch constant, flag, option or config attribute; a dataset
    maker's batch_size; the first ``.batch(n)``; a function's own batch assignment."""
    for finder in (_entry_batch(entry, consts), _fit_batch(tree, consts, trained), _named_batch(tree, consts),
                   _dataset_batch(tree, consts), _local_batch(tree, consts), _yielded(tree, consts, batch=True)):
        if finder is not None:
            return finder
    return None


def _entry_batch(entry: str | None, consts: Consts) -> Size | None:
    if not entry:
        return None
    try:
        node = ast.parse(entry, mode="eval").body
    except SyntaxError:
        return None
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        for k in call.keywords:
            if k.arg and _BATCH_NAME.match(k.arg) and (val := consts.value(k.value)) and len(val[0]) == 1:
                return Size(val[0], 0, f"the entry's {k.arg}={ast.unparse(k.value)}", per_replica=val[1])
    return None


def _fit_batch(tree: ast.Module, consts: Consts, trained: str | None) -> Size | None:
    fits = _fits(tree, trained)
    for call, method in fits:
        kwargs = {k.arg: k.value for k in call.keywords if k.arg}
        arg = kwargs.get("batch_size") or (call.args[2] if len(call.args) > 2 and method == "fit" else None)
        val = consts.value(arg)
        if arg is not None and val and len(val[0]) == 1 and val[0][0] > 0:
            return Size(val[0], call.lineno, f"fit(batch_size={ast.unparse(arg)})",
                        per_replica=val[1] or (isinstance(arg, ast.Name) and arg.id in consts.replicas))
    for call, method in fits:
        x = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "x"), None)
        if method == "fit" and arg_is(tree, x) == "arrays":
            return Size((FIT_DEFAULT_BATCH,), call.lineno, "fit() without batch_size", fit_default=True)
        batch = _data_batch(tree, x, consts)
        if batch is not None:
            return batch
    return None


def _named_batch(tree: ast.Module, consts: Consts) -> Size | None:
    """A module constant, a config class attribute, a flag or an option named like a batch."""
    for name, value in consts.values.items():
        last = name.rsplit(".", 1)[-1]
        per = bool(_PER_REPLICA_NAME.match(last))
        if (_BATCH_NAME.match(last) or per) and len(value) == 1 and value[0] > 0:
            line, what = consts.lines[name]
            return Size(value, line, what, per_replica=per or name in consts.replicas)
    return None


def _dataset_batch(tree: ast.Module, consts: Consts) -> Size | None:
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        callee = terminal(node.func)
        kwargs = {k.arg: k.value for k in node.keywords if k.arg}
        arg = kwargs.get("batch_size") if callee in _DATASET_MAKERS else (
            (node.args[0] if node.args else kwargs.get("batch_size")) if callee in ("batch", "padded_batch") else None)
        val = consts.value(arg)
        if arg is not None and val and len(val[0]) == 1 and val[0][0] > 0:
            shown = f".{callee}({ast.unparse(arg)})" if callee in ("batch", "padded_batch") else \
                f"{callee}(batch_size={ast.unparse(arg)})"
            return Size(val[0], node.lineno, shown,
                        per_replica=val[1] or (isinstance(arg, ast.Name) and arg.id in consts.replicas))
    return None


def _local_batch(tree: ast.Module, consts: Consts) -> Size | None:
    """A function's own ``batch_size = …`` (``FLAGS.num_cores * PER_CORE_BATCH_SIZE``)."""
    for fn in _functions(tree):
        for node in ast.walk(fn):
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and _BATCH_NAME.match(node.targets[0].id)):
                val = consts.value(node.value)
                if val and len(val[0]) == 1 and val[0][0] > 0:
                    return Size(val[0], node.lineno, _short(node), per_replica=val[1])
    return None


def _batch_reads(tree: ast.Module) -> list[tuple[str, int]]:
    reads: dict[str, int] = {}
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}  # ``ds.batch(…)`` is no value
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and _BATCH_NAME.match(node.attr) and isinstance(node.ctx, ast.Load)
                and id(node) not in called):
            name = dotted(node)
            if name and not name.startswith("self.") and name not in reads:
                reads[name] = node.lineno
    return sorted(reads.items(), key=lambda kv: kv[1])


# ---------------------------------------------------------------- what fit gets


_INDEX: list[tuple[ast.Module, dict[str, list[ast.expr]]]] = []  # the last tree's bindings


def _bindings(tree: ast.Module, name: str) -> list[ast.expr]:
    """Every expression the script binds ``name`` to (unpacking included)."""
    if not _INDEX or _INDEX[0][0] is not tree:
        index: dict[str, list[ast.expr]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    for t in ast.walk(target):
                        if isinstance(t, ast.Name):
                            index.setdefault(t.id, []).append(node.value)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                index.setdefault(node.target.id, []).append(node.value)
        _INDEX[:] = [(tree, index)]
    return _INDEX[0][1].get(name, [])


def arg_is(tree: ast.Module, node: ast.expr | None, depth: int = 0) -> str | None:
    """What a value fit gets is, as far as the script shows it: "arrays" (NumPy arrays,
    ``load_data()``'s), "dataset" (tf.data, a generator, a directory flow), else None."""
    if node is None or depth > 4:
        return None
    if isinstance(node, ast.Name):
        kinds = {arg_is(tree, b, depth + 1) for b in _bindings(tree, node.id) if not _mentions(b, node.id)}
        kinds.discard(None)
        return kinds.pop() if len(kinds) == 1 else None
    if isinstance(node, (ast.Tuple, ast.List, ast.Dict)):
        inner = {arg_is(tree, e, depth + 1) for e in (node.values if isinstance(node, ast.Dict) else node.elts)}
        return "arrays" if inner == {"arrays"} else None
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        callee = terminal(call.func)
        root = dotted(call.func) or ""
        if callee in _DATASET_MAKERS or callee in _DATASET_METHODS:
            return "dataset"
        if root.split(".")[0] in ("np", "numpy") or callee in ("load_data", "to_categorical", "pad_sequences"):
            return "arrays"
    if isinstance(node, ast.Subscript):
        return arg_is(tree, node.value, depth + 1)
    return None


def _mentions(node: ast.expr, name: str) -> bool:
    """``x = x.astype(...)`` / ``x = x / 255``: a rebinding that reads the name keeps its kind."""
    return False if not isinstance(node, ast.BinOp) else any(
        isinstance(n, ast.Name) and n.id == name for n in ast.walk(node)) and not any(
        isinstance(n, ast.Call) for n in ast.walk(node))


def _data_batch(tree: ast.Module, x: ast.expr | None, consts: Consts, seen: set[str] | None = None
                ) -> Size | None:
    """The ``.batch(n)`` (or a dataset maker's batch_size) on the way to the dataset fit gets,
    following each name to what it is bound to, once."""
    if x is None:
        return None
    seen = set() if seen is None else seen
    helpers = {fn.name: fn for fn in _functions(tree)}
    for call in (n for n in ast.walk(x) if isinstance(n, ast.Call)):
        callee = terminal(call.func)
        kwargs = {k.arg: k.value for k in call.keywords if k.arg}
        param = "batch_size"
        if callee in ("batch", "padded_batch"):
            arg = call.args[0] if call.args else kwargs.get("batch_size")
        elif callee in _DATASET_MAKERS:
            arg = kwargs.get("batch_size")
        else:
            param, arg = _helper_batch(call, helpers)
        val = consts.value(arg)
        if arg is not None and val and len(val[0]) == 1 and val[0][0] > 0:
            shown = f".{callee}({ast.unparse(arg)})" if callee in ("batch", "padded_batch") else \
                f"{callee}({param}={ast.unparse(arg)})"
            return Size(val[0], call.lineno, f"{shown} of the data fit gets",
                        per_replica=val[1] or (isinstance(arg, ast.Name) and arg.id in consts.replicas))
    for name in [n.id for n in ast.walk(x) if isinstance(n, ast.Name)]:
        if name in seen:
            continue
        seen.add(name)
        for bound in _bindings(tree, name):
            found = _data_batch(tree, bound, consts, seen)
            if found is not None:
                return found
    return None


def _helper_batch(call: ast.Call, helpers: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
                  ) -> tuple[str, ast.expr | None]:
    """A call of the script's own dataset helper that batches by one of its parameters
    (``def create_tf_dataset(data, bs=4): … ds.batch(bs)``): (the parameter, the argument the
    call gives it, else its default)."""
    fn = helpers.get(call.func.id) if isinstance(call.func, ast.Name) else None
    if fn is None:
        return "", None
    params = [a.arg for a in fn.args.args]
    defaults = dict(zip(params[len(params) - len(fn.args.defaults):], fn.args.defaults))
    given = dict(zip(params, call.args)) | {k.arg: k.value for k in call.keywords if k.arg}
    for node in ast.walk(fn):
        if (isinstance(node, ast.Call) and terminal(node.func) in ("batch", "padded_batch") and node.args
                and isinstance(node.args[0], ast.Name) and node.args[0].id in params):
            return node.args[0].id, given.get(node.args[0].id, defaults.get(node.args[0].id))
    return "", None


def _fitted(tree: ast.Module, consts: Consts, trained: str | None) -> Size | None:
    """The non-batch dims of the array fit gets, when the script makes it with a stated shape
    (``x = np.random.random((50000, 128))``)."""
    fits = _fits(tree, trained)
    for call, _ in fits:
        x = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "x"), None)
        if not isinstance(x, ast.Name):
            continue
        for bound in _bindings(tree, x.id):
            shape = array_shape(bound, consts)
            if shape is not None and len(shape) > 1:
                return Size(shape[1:], bound.lineno, f"{x.id} = {_short(bound)}")
    return None if fits else _yielded(tree, consts, batch=False)


def _yielded(tree: ast.Module, consts: Consts, batch: bool) -> Size | None:
    """A generator the script defines (its data, for a loop of its own) whose yields are arrays
    of stated shapes (``yield (np.random.random((32, 128)), …)``): the batch (the rows) or the
    rest of the first array's dims."""
    for fn in _functions(tree):
        for node in ast.walk(fn):
            if not isinstance(node, ast.Yield) or node.value is None:
                continue
            first = node.value.elts[0] if isinstance(node.value, ast.Tuple) and node.value.elts else node.value
            shape = array_shape(first, consts)
            if shape is not None and len(shape) > 1 and (shape[0] > 0 or not batch):
                what = f"{fn.name}() yields {_short(first)}"
                return Size(shape[:1] if batch else shape[1:], node.lineno, what)
            break
    return None


def array_shape(node: ast.expr, consts: Consts) -> tuple[int, ...] | None:
    """The shape of an array the script makes with a stated one (``np.random.random((n, 128))``,
    ``tf.random.normal([batch, 100])``); a first dim (the rows) it does not state is -1."""
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Attribute) and node.func.attr == "astype":  # the same shape, another dtype
        return array_shape(node.func.value, consts)
    root = (dotted(node.func) or "").split(".")[0]
    where = _ARRAY_MAKERS.get(terminal(node.func) or "", -1)
    if root not in ("np", "numpy", "tf") or where == -1:
        return None
    dims = _shape_arg(node, root, where, consts)
    if dims is None or isinstance(dims, tuple):
        return dims
    folded = [consts.value(d) for d in dims]
    if not folded or any(v is None or len(v[0]) != 1 for v in folded[1:]):
        return None
    return tuple(v[0][0] if v else -1 for v in folded)


def _shape_arg(node: ast.Call, root: str, where: int | str | None, consts: Consts
               ) -> list[ast.expr] | tuple[int, ...] | None:
    """An array maker's shape: its dims' expressions, or the folded shape of one argument."""
    if where is None:  # rand(n, d): the dims are the arguments
        return list(node.args)
    kwargs = {k.arg: k.value for k in node.keywords if k.arg}
    at = 0 if root == "tf" or where != "size" else None  # TensorFlow's take the shape first
    arg = kwargs.get("size") or kwargs.get("shape") or (
        node.args[at] if at is not None and len(node.args) > at else None)
    if isinstance(arg, (ast.Tuple, ast.List)):
        return list(arg.elts)
    val = consts.value(arg) if arg is not None else None
    return val[0] if val else None


# ---------------------------------------------------------------- images and sequences


def _image(tree: ast.Module, consts: Consts) -> Size | None:
    """The image size the model sees: a ``set_shape`` the pipeline states, else a crop, else
    a resize or a dataset maker's image_size, else an image-size constant."""
    found: dict[str, Size] = {}
    helpers = {fn.name: fn for fn in _functions(tree)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            kind, size = _image_call(node, consts, helpers)
            if kind is not None and size is not None and kind not in found:
                found[kind] = size
    for kind in ("set_shape", "crop", "resize"):
        if kind in found:
            return found[kind]
    for name, value in consts.values.items():
        if _IMAGE_NAME.match(name.rsplit(".", 1)[-1]) and value and min(value) > 0:
            line, what = consts.lines[name]
            hw = (value[0], value[0]) if len(value) == 1 else value[:2]
            return Size(hw, line, what)
    return None


def _image_call(node: ast.Call, consts: Consts, helpers: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
                ) -> tuple[str | None, Size | None]:
    """(what kind of size the call states, the size): "set_shape", "crop" or "resize"."""
    callee = terminal(node.func) or ""
    kwargs = {k.arg: k.value for k in node.keywords if k.arg}
    if callee == "set_shape" and node.args:
        val = consts.value(node.args[0])
        dims = val[0] if val else ()
        return "set_shape", (Size(dims[-3:-1], node.lineno, f"set_shape({ast.unparse(node.args[0])})")
                             if len(dims) in (3, 4) and min(dims) > 0 else None)
    if callee in _DATASET_MAKERS:
        val = consts.value(kwargs.get("image_size") or kwargs.get("target_size"))
        return "resize", (Size(val[0][:2], node.lineno, f"{callee}(image_size={'×'.join(map(str, val[0][:2]))})")
                          if val and len(val[0]) >= 2 else None)
    if callee in helpers and isinstance(node.func, ast.Name):
        return "resize", _helper_size(node, helpers[callee], consts)
    kind = "crop" if callee in _CROPS else "resize" if callee in _RESIZES else None
    if kind is None:
        return None, None
    hw = _size_args(node, callee, kwargs, consts)
    return kind, (Size(hw, node.lineno, f"{callee}({', '.join(map(str, hw))})") if hw else None)


def _size_args(node: ast.Call, callee: str, kwargs: dict[str, ast.expr], consts: Consts) -> tuple[int, ...] | None:
    """The (height, width) a resize or crop call states: ``size=``, two arguments, or one
    sequence (a crop's ``([n,] h, w, c)``); a function's (not a layer's) image comes first."""
    args = list(node.args)
    if callee[:1].islower() and args:
        args = args[1:]
    size = kwargs.get("size") or kwargs.get("target_size")
    val = consts.value(size) if size is not None else None
    if val is None and len(args) >= 2:
        h, w = consts.value(args[0]), consts.value(args[1])
        val = ((h[0][0], w[0][0]), False) if h and w and len(h[0]) == len(w[0]) == 1 else None
    elif val is None and args:
        val = consts.value(args[0])
    dims = val[0] if val else ()
    hw = dims[-3:-1] if len(dims) in (3, 4) else dims
    return tuple(hw) if len(hw) == 2 and min(hw) > 0 else None


def _helper_size(node: ast.Call, fn: ast.FunctionDef | ast.AsyncFunctionDef, consts: Consts) -> Size | None:
    """A call of the script's own function whose parameters are a height and a width."""
    params = [a.arg for a in fn.args.args]
    given = dict(zip(params, node.args)) | {k.arg: k.value for k in node.keywords if k.arg}
    h = next((given[p] for p in params if p in given and re.match(r"^(img_?)?h(eight)?$", p, re.I)), None)
    w = next((given[p] for p in params if p in given and re.match(r"^(img_?)?w(idth)?$", p, re.I)), None)
    hv, wv = consts.value(h), consts.value(w)
    if hv and wv and len(hv[0]) == len(wv[0]) == 1 and min(hv[0][0], wv[0][0]) > 0:
        return Size((hv[0][0], wv[0][0]), node.lineno, f"{fn.name}(…, {hv[0][0]}, {wv[0][0]})")
    return None


def _sequence(tree: ast.Module, consts: Consts) -> Size | None:
    for name, value in consts.values.items():
        if _SEQ_NAME.match(name.rsplit(".", 1)[-1]) and len(value) == 1 and value[0] > 0:
            line, what = consts.lines[name]
            return Size(value, line, what)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        callee = terminal(node.func)
        keyword = {"TextVectorization": "output_sequence_length", "pad_sequences": "maxlen",
                   "timeseries_dataset_from_array": "sequence_length"}.get(callee or "")
        arg = next((k.value for k in node.keywords if k.arg == keyword), None) if keyword else None
        val = consts.value(arg)
        if val and len(val[0]) == 1 and val[0][0] > 0:
            return Size(val[0], node.lineno, f"{callee}(…={val[0][0]})")
    return None


__all__ = ["FIT_DEFAULT_BATCH", "Consts", "ScriptSizes", "Size", "array_shape", "arg_is", "dotted", "script_sizes",
           "states"]
