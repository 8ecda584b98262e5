"""Cut a script down to what building its model needs, without running it. Pure Python.

keras-io style scripts load data, plot and call ``fit`` at module level; importing one
runs all of that. :func:`slice_source` keeps imports, definitions, the global
configuration calls that change how a model is built (dtype policy, data format), and
the statements the entry depends on (a backward slice over names), and drops the rest:
training, downloads, plotting and file I/O never run. Statements keep their line
numbers, so a built op still maps back to the user's source line.

The slice is over top-level names only: a function body is not cut, but the globals it
reads pull in the statements that define them.
"""

from __future__ import annotations

import ast
import builtins
import re
from typing import Iterator
from dataclasses import dataclass, field

from kerasfit.semantic.folding import BINARY

# Functions the build discovers when they take no arguments (DESIGN: discovery).
DISCOVERY_FUNCTIONS = ("build_model", "create_model", "get_model", "make_model", "model_fn")
# A call is a model construction when the callee ends in one of these ...
MODEL_CONSTRUCTORS = frozenset({"Model", "Sequential", "Functional"})
# ... or is a function of the file whose name says it makes a model.
_MODELISH = re.compile(r"(model|net|classifier|network|encoder|decoder|generator|discriminator|"
                       r"unet|cnn|resnet|vit|transformer|detector|mixer)", re.I)
_NOT_MODEL = re.compile(r"(dataset|data|loader|pairs|augment|image|img|loss|metric|optimizer|"
                        r"callback|schedule|mask|box|label|path)", re.I)

_BUILTINS = frozenset(dir(builtins))

# Calls that change how every later model is built: kept wherever they are.
CONFIG_CALLS = frozenset({
    "set_global_policy", "set_floatx", "set_image_data_format", "set_epsilon", "set_policy",
    "set_random_seed", "set_seed", "enable_op_determinism", "disable_eager_execution",
    "disable_v2_behavior", "enable_eager_execution", "enable_v2_behavior",
    "reset_default_graph", "clear_session", "set_learning_phase",
})
# Methods that finish a needed object without training it ("compile is fine").
MUTATORS = frozenset({"add", "build", "compile", "append", "extend", "insert", "update",
                      "pop", "setdefault"})
# A needed statement that calls one of these is still skipped: the model cannot need it
# badly enough to train, download, plot or touch files.
DENIED_CALLS = {
    "fit": "trains", "fit_generator": "trains", "train_on_batch": "trains",
    "evaluate": "evaluates", "evaluate_generator": "evaluates", "predict": "predicts",
    "predict_generator": "predicts", "predict_on_batch": "predicts",
    "save": "writes files", "save_weights": "writes files", "load_weights": "reads files",
    "load_model": "reads files", "get_file": "downloads", "load_data": "downloads data",
    "urlretrieve": "downloads", "urlopen": "downloads", "download": "downloads",
    "image_dataset_from_directory": "reads files", "text_dataset_from_directory": "reads files",
    "audio_dataset_from_directory": "reads files", "load_img": "reads files",
    "open": "opens files", "listdir": "reads files", "glob": "reads files",
    "read_csv": "reads files", "read_file": "reads files", "remove": "deletes files",
    "system": "runs a command", "imshow": "plots", "show": "plots", "savefig": "plots",
    "figure": "plots", "subplots": "plots", "plot": "plots", "plot_model": "plots",
    "summary": "prints", "adapt": "reads data", "run": "runs a session or a command",
    "loadtxt": "reads files", "genfromtxt": "reads files",
    "fromfile": "reads files", "loadmat": "reads files", "read_parquet": "reads files",
    "read_json": "reads files", "read_table": "reads files", "read_excel": "reads files",
}
# What a data helper of the file does that makes a call to it a denied statement too
# (``x, y = readucr(url)`` downloads, ``model = run_experiment(model)`` trains): not printing
# or plotting, so a builder that prints a summary runs.
_IO = ("reads files", "downloads", "opens files", "deletes files", "writes files", "runs a command",
       "trains", "evaluates", "predicts")
# Modules whose every call is I/O, plotting or a download.
DENIED_MODULES = frozenset({"plt", "matplotlib", "tfds", "tensorflow_datasets", "PIL", "Image",
                            "cv2", "imageio", "requests", "urllib", "shutil", "subprocess",
                            "IPython", "display", "wandb", "pd", "pandas"})


@dataclass
class Candidate:
    """Something the build could make a model from."""

    expr: str  # evaluated in the sliced module: "build_model()", "model"
    line: int
    kind: str  # "function" | "variable"

    @property
    def label(self) -> str:
        return f"{self.expr} (line {self.line})"


@dataclass
class Slice:
    tree: ast.Module  # what to run; original line numbers
    entry: str | None  # expression naming the model (None: resolve at run time)
    candidates: list[Candidate] = field(default_factory=list)
    skipped: dict[int, str] = field(default_factory=dict)  # line -> why a needed line was skipped
    # name -> (line, why) for the names those skipped lines would have bound: their data
    skipped_names: dict[str, tuple[int, str]] = field(default_factory=dict)
    helpers: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=dict)
    kept_lines: list[int] = field(default_factory=list)
    imported: set[str] = field(default_factory=set)  # top-level packages the file imports


# ---------------------------------------------------------------- names


def _terminal(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _root(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call, ast.Starred)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _target_names(target: ast.expr, out: set[str]) -> None:
    if isinstance(target, ast.Name):
        out.add(target.id)
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            _target_names(elt, out)
    elif isinstance(target, ast.Starred):
        _target_names(target.value, out)


def bound_names(stmt: ast.stmt) -> set[str]:
    """Names a top-level statement binds (its nested blocks included, defs' bodies not)."""
    out: set[str] = set()
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        out.add(stmt.name)
        return out
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        for alias in stmt.names:
            out.add((alias.asname or alias.name).split(".")[0])
        return out
    for node in _walk_scope(stmt, enter_root=True):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                _target_names(t, out)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            _target_names(node.target, out)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            _target_names(node.target, out)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            _target_names(node.optional_vars, out)
        elif isinstance(node, ast.NamedExpr):
            _target_names(node.target, out)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                out.add((alias.asname or alias.name).split(".")[0])
    return out


def used_names(node: ast.AST) -> set[str]:
    """Every name read anywhere inside (function bodies too: the globals they read)."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def free_names(node: ast.AST) -> set[str]:
    """The names a statement reads from the module: like :func:`used_names`, but a
    function's own locals (parameters, names it assigns) are not the module's
    (``fake = self.generator(z)`` in a ``train_step`` needs no module-level ``fake``)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = node.args
        outer: set[str] = set()
        for expr in [*a.defaults, *(d for d in a.kw_defaults if d is not None),
                     *getattr(node, "decorator_list", []),
                     *(x.annotation for x in [*a.posonlyargs, *a.args, *a.kwonlyargs] if x.annotation)]:
            outer |= used_names(expr)
        params = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x}
        body: list[ast.AST] = list(node.body) if isinstance(node.body, list) else [node.body]
        local, loads, declared = set(params), set(), set()
        for stmt in body:
            for n in _walk_scope(stmt):
                if isinstance(n, ast.Name):
                    if isinstance(n.ctx, ast.Store):
                        local.add(n.id)
                    elif isinstance(n.ctx, ast.Load):
                        loads.add(n.id)
                elif isinstance(n, (ast.Global, ast.Nonlocal)):
                    declared |= set(n.names)
                elif isinstance(n, (ast.Import, ast.ImportFrom)):
                    local |= {(x.asname or x.name).split(".")[0] for x in n.names}
                elif isinstance(n, _SCOPES):
                    if not isinstance(n, ast.Lambda):
                        local.add(n.name)
                    loads |= free_names(n)
        return outer | (loads - (local - declared))
    if isinstance(node, ast.ClassDef):
        out: set[str] = set()
        for expr in [*node.bases, *(k.value for k in node.keywords), *node.decorator_list]:
            out |= used_names(expr)
        for stmt in node.body:
            out |= free_names(stmt)
        return out
    out = set()
    for n in _walk_scope(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            out.add(n.id)
        elif isinstance(n, _SCOPES):
            out |= free_names(n)
    return out


def _walk_scope(node: ast.AST, enter_root: bool = False) -> Iterator[ast.AST]:
    """ast.walk that yields functions, classes and lambdas but does not enter them
    (``enter_root``: except ``node`` itself)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if not isinstance(n, _SCOPES) or (enter_root and n is node):
            stack.extend(ast.iter_child_nodes(n))


def mutated_names(stmt: ast.stmt) -> set[str]:
    """Names whose object a statement changes in place (``m.trainable = False``, ``m.compile()``)."""
    out: set[str] = set()
    if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        for t in targets:
            if isinstance(t, (ast.Attribute, ast.Subscript)):
                root = _root(t)
                if root:
                    out.add(root)
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        if isinstance(func, ast.Attribute) and func.attr in MUTATORS:
            root = _root(func.value)
            if root:
                out.add(root)
    elif isinstance(stmt, (ast.For, ast.While, ast.With)):
        for child in stmt.body:
            out |= mutated_names(child)
    return out


def denial(stmt: ast.AST, helpers: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None,
           _seen: frozenset[str] = frozenset()) -> str | None:
    """Why running this statement would train, download, plot or do I/O (None: it would not).

    ``helpers`` are the file's functions: calling one whose body reads files or downloads
    (``x, y = readucr(url)``) is that I/O too.
    """
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return None  # a body only runs when called
    for node in _walk_scope(stmt, enter_root=True):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            if node is not stmt:
                continue
        if not isinstance(node, ast.Call):
            continue
        name = _terminal(node.func)
        if name in DENIED_CALLS:
            return f"{name}() {DENIED_CALLS[name]}"
        root = _root(node.func)
        if root in DENIED_MODULES:
            return f"{root}.{name or '…'}() is plotting or I/O"
        if helpers and isinstance(node.func, ast.Name) and name in helpers and name not in _seen:
            body = ast.Module(body=list(helpers[name].body), type_ignores=[])
            why = denial(body, helpers, _seen | {name})
            if why is not None and why.split("() ", 1)[-1].startswith(_IO):
                return f"{name}() calls {why}"
    return None


def _is_main_guard(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.If):
        return False
    test = stmt.test
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
            and test.left.id == "__name__")


def _is_config_call(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return _terminal(stmt.value.func) in CONFIG_CALLS
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        t = stmt.targets[0]  # os.environ["KERAS_BACKEND"] = ... / ["TF_USE_LEGACY_KERAS"]
        return (isinstance(t, ast.Subscript) and isinstance(t.value, ast.Attribute)
                and t.value.attr == "environ")
    return False


def _is_import(stmt: ast.stmt) -> bool:
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return True
    if isinstance(stmt, ast.Try):  # try: import x / except ImportError: ...
        return all(isinstance(s, (ast.Import, ast.ImportFrom, ast.Pass, ast.Assign, ast.Expr))
                   for s in stmt.body) and any(isinstance(s, (ast.Import, ast.ImportFrom))
                                               for s in stmt.body)
    return False


# ---------------------------------------------------------------- the entry


def _required_args(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    positional = len(a.posonlyargs) + len(a.args) - len(a.defaults)
    kwonly = sum(1 for d in a.kw_defaults if d is None)
    return positional + kwonly


def _model_classes(body: list[ast.stmt]) -> set[str]:
    """Classes of the file that subclass a ``Model``."""
    out: set[str] = set()
    for stmt in body:
        if isinstance(stmt, ast.ClassDef):
            for base in stmt.bases:
                name = _terminal(base)
                if name and (name in MODEL_CONSTRUCTORS or name in out):
                    out.add(stmt.name)
    return out


def _flat_top(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Top-level statements and those inside top-level with/try/if blocks (not __main__)."""
    for stmt in body:
        if _is_main_guard(stmt):
            continue
        if isinstance(stmt, (ast.With, ast.If)):
            yield from _flat_top(stmt.body)
            if isinstance(stmt, ast.If):
                yield from _flat_top(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            yield from _flat_top(stmt.body)
        else:
            yield stmt


_TRAINS = frozenset({"fit", "fit_generator", "train_on_batch", "compile"})


def _trained_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[int | str]:
    """Parameters (position or name) of ``fn`` whose argument it compiles or fits."""
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    kw = [a.arg for a in fn.args.kwonlyargs]
    out: list[int | str] = []
    for node in ast.walk(fn):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in _TRAINS and isinstance(node.func.value, ast.Name)):
            name = node.func.value.id
            if name in params and params.index(name) not in out:
                out += [params.index(name), name]
            elif name in kw and name not in out:
                out.append(name)
    return out


def trained_names(tree: ast.Module) -> dict[str, tuple[bool, int]]:
    """Module-level names the script compiles or fits -> (fitted, line of the last such call).

    ``model.fit(...)`` directly, or ``run_experiment(model)`` where the function compiles or
    fits that parameter. ``__main__`` blocks count too: they say what the script trains.
    """
    functions = {s.name: s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    params = {name: _trained_params(fn) for name, fn in functions.items()}
    fits = {name: any(isinstance(n, ast.Attribute) and n.attr in _TRAINS - {"compile"} for n in ast.walk(fn))
            for name, fn in functions.items()}
    out: dict[str, tuple[bool, int]] = {}

    def saw(name: str, fits: bool, line: int) -> None:
        out[name] = max(out.get(name, (False, 0)), (fits, line))

    top = [s for s in tree.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    for stmt in top:
        for node in ast.walk(stmt):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in _TRAINS and isinstance(func.value, ast.Name):
                saw(func.value.id, func.attr != "compile", node.lineno)
            elif isinstance(func, ast.Name) and params.get(func.id):
                wanted = params[func.id]
                args: list[ast.expr] = [a for i, a in enumerate(node.args) if i in wanted]
                args += [k.value for k in node.keywords if k.arg in wanted]
                for arg in args:
                    if isinstance(arg, ast.Name):
                        saw(arg.id, fits[func.id], node.lineno)
    return out


def _returns_model(fn: ast.FunctionDef | ast.AsyncFunctionDef, classes: set[str],
                   builders: set[str]) -> bool:
    """Does the function construct a Keras model (or call one that does)?"""
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            callee = _terminal(node.func)
            if callee in MODEL_CONSTRUCTORS or callee in classes or (callee in builders and callee != fn.name):
                return True
    return False


def find_candidates(tree: ast.Module) -> list[Candidate]:
    """What to build, best first.

    The models the script compiles or fits come first, the last one trained first (a
    tutorial trains its baseline before the model it is about); then no-argument builder
    functions, module-level models built directly (``keras.Model(...)``, ``Sequential``,
    ``name = f(...)`` of a file function that makes a model), then instances of the
    file's own ``Model`` subclasses, which are often training wrappers (a GAN's
    ``train_step``) with no ``call``.
    """
    functions = {s.name: s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    classes = _model_classes(tree.body)
    builders: set[str] = set()
    while True:  # a builder may call another builder defined anywhere in the file
        more = {n for n, fn in functions.items() if n not in builders and _returns_model(fn, classes, builders)}
        if not more:
            break
        builders |= more
    module_names = set().union(*(bound_names(s) for s in tree.body)) if tree.body else set()
    trained = trained_names(tree)

    def modelish(callee: str) -> bool:
        return callee in DISCOVERY_FUNCTIONS or bool(
            _MODELISH.search(callee) and not _NOT_MODEL.search(callee))

    out: list[tuple[float, Candidate]] = []
    for name, fn in functions.items():
        if _required_args(fn) == 0 and (name in DISCOVERY_FUNCTIONS or modelish(name)):
            out.append((0 if name in DISCOVERY_FUNCTIONS else 1.5,
                        Candidate(f"{name}()", fn.lineno, "function")))
    seen: set[str] = set()
    for stmt in _flat_top(tree.body):
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or not isinstance(stmt.value, ast.Call):
            continue
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if len(targets) != 1 or not isinstance(targets[0], ast.Name):
            continue
        var = targets[0].id
        callee = _terminal(stmt.value.func)
        if callee is None or var in seen:
            continue
        if var in trained and (callee in MODEL_CONSTRUCTORS or callee in builders or callee in classes
                               or callee in functions or modelish(callee)):
            # Trained: best of all, fitted before compiled only, the last one first.
            fitted, line = trained[var]
            rank = -1.5 + (0 if fitted else 0.5) + 0.4 / (1 + line)
        elif callee in MODEL_CONSTRUCTORS or (callee in functions and (modelish(callee) or callee in builders)):
            rank = 1.0
        elif callee in classes:
            rank = 3.0
        else:
            continue
        if var in trained:
            pass
        # Augmentation pipelines are Sequentials too; "x = block(x)" is a tensor.
        elif var == "model":
            rank -= 0.5
        elif _NOT_MODEL.search(var) or len(var) <= 2:
            rank += 1.5
        elif _MODELISH.search(var):
            rank -= 0.25
        seen.add(var)
        out.append((rank, Candidate(var, stmt.lineno, "variable")))
    # A model made inside a training function ("def run_experiment(): model =
    # create_classifier(...)") from module-level names only can be made on its own.
    exprs: set[str] = set()
    for fn in functions.values():
        fn_trained = {n.func.value.id for n in ast.walk(fn) if isinstance(n, ast.Call)
                      and isinstance(n.func, ast.Attribute) and n.func.attr in _TRAINS
                      and isinstance(n.func.value, ast.Name)}
        for node in ast.walk(fn):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
                continue
            callee = _terminal(node.value.func)
            if callee is None or callee == fn.name or not (
                    callee in functions and (modelish(callee) or callee in builders)):
                continue
            if not used_names(node.value) <= module_names | _BUILTINS:
                continue
            expr = ast.unparse(node.value)
            if expr not in exprs:
                exprs.add(expr)
                hit = any(isinstance(t, ast.Name) and t.id in fn_trained for t in node.targets)
                out.append((0.5 if hit else 2.0, Candidate(expr, node.lineno, "expression")))
    out.sort(key=lambda rc: rc[0])
    return [c for _, c in out]


# ---------------------------------------------------------------- sizes the script states


@dataclass
class Size:
    """A size the script states, where it states it."""

    value: tuple[int, ...]
    line: int
    what: str  # the statement, shortened: "batch_size = 32", ".batch(64)"
    per_replica: bool = False  # ``16 * strategy.num_replicas_in_sync``: a per-core batch


@dataclass
class ScriptSizes:
    batch: Size | None = None
    image: Size | None = None  # (height, width)
    sequence: Size | None = None  # (length,)


_BATCH_NAME = re.compile(r"^(batch_?size|batch|bs|global_batch_?size|train_batch_?size)$", re.I)
_SEQ_NAME = re.compile(r"^(max_?len|max_?length|seq(uence)?_?len(gth)?|max_seq(uence)?_?len(gth)?|"
                       r"max_?seq_?len|text_?len|max_?tokens_?len)$", re.I)
_REPLICAS = "num_replicas_in_sync"


def _int_value(node: ast.expr, consts: dict[str, tuple[int, ...]]) -> tuple[tuple[int, ...], bool] | None:
    """An int (or tuple of ints) the expression folds to, and whether it multiplies a
    strategy's replica count (then the int is per replica)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return (node.value,), False
    if isinstance(node, ast.Name) and node.id in consts:
        return consts[node.id], False
    if isinstance(node, ast.Attribute) and node.attr == _REPLICAS:
        return (1,), True
    if isinstance(node, (ast.Tuple, ast.List)):
        vals = [_int_value(e, consts) for e in node.elts]
        if vals and all(v is not None and len(v[0]) == 1 for v in vals):
            return tuple(v[0][0] for v in vals if v), False
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.Sub, ast.FloorDiv, ast.Pow)):
        left, right = _int_value(node.left, consts), _int_value(node.right, consts)
        if left is None or right is None or len(left[0]) != 1 or len(right[0]) != 1:
            return None
        op = BINARY[type(node.op)]
        v = op(left[0][0], right[0][0]) if op is not None else None
        # (``2 ** -1`` is no size; a huge power or a division by zero is not known)
        return ((v,), left[1] or right[1]) if isinstance(v, int) and not isinstance(v, bool) else None
    return None


def script_sizes(tree: ast.Module, trained: str | None = None) -> ScriptSizes:
    """The batch, image size and sequence length the script states.

    The batch: ``fit(batch_size=…)`` of the trained model, else a module-level
    ``batch_size = …`` (``16 * strategy.num_replicas_in_sync`` is per replica), else the
    first ``.batch(n)``. Image sizes from resize/crop calls, sequence lengths from
    ``TextVectorization(output_sequence_length=…)``, ``pad_sequences(maxlen=…)`` or a
    ``maxlen = …`` constant: used only for an input's ``None`` dims.
    """
    consts: dict[str, tuple[int, ...]] = {}
    replicas: set[str] = set()
    sizes = ScriptSizes()
    for stmt in _flat_top(tree.body):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            val = _int_value(stmt.value, consts)
            if val is None:
                continue
            name = stmt.targets[0].id
            consts[name] = val[0]
            if val[1]:
                replicas.add(name)
            if _BATCH_NAME.match(name) and len(val[0]) == 1 and sizes.batch is None and val[0][0] > 0:
                sizes.batch = Size(val[0], stmt.lineno, _short(stmt), per_replica=val[1])
            if _SEQ_NAME.match(name) and len(val[0]) == 1 and sizes.sequence is None and val[0][0] > 0:
                sizes.sequence = Size(val[0], stmt.lineno, _short(stmt))
    fit_batch: Size | None = None
    dot_batch: Size | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        callee = _terminal(node.func)
        kwargs = {k.arg: k.value for k in node.keywords if k.arg}
        if callee == "fit" and "batch_size" in kwargs:
            owner = _root(node.func) if isinstance(node.func, ast.Attribute) else None
            val = _int_value(kwargs["batch_size"], consts)
            if val and len(val[0]) == 1 and val[0][0] > 0 and (fit_batch is None or owner == trained):
                fit_batch = Size(val[0], node.lineno, f"fit(batch_size={ast.unparse(kwargs['batch_size'])})",
                                 per_replica=val[1] or ast.unparse(kwargs["batch_size"]) in replicas)
        elif callee == "batch" and dot_batch is None:
            arg = node.args[0] if node.args else kwargs.get("batch_size")
            val = _int_value(arg, consts) if arg is not None else None
            if val and len(val[0]) == 1 and val[0][0] > 0:
                dot_batch = Size(val[0], node.lineno, f".batch({ast.unparse(arg)})",  # type: ignore[arg-type]
                                 per_replica=val[1] or (isinstance(arg, ast.Name) and arg.id in replicas))
        elif callee in ("Resizing", "resize", "RandomCrop", "CenterCrop", "resize_with_pad",
                        "resize_with_crop_or_pad") and sizes.image is None:
            args = list(node.args)
            if callee in ("resize", "resize_with_pad", "resize_with_crop_or_pad"):
                args = args[1:]  # the image comes first
            size = kwargs.get("size")
            val = _int_value(size, consts) if size is not None else None
            if val is None and len(args) >= 2:
                h, w = _int_value(args[0], consts), _int_value(args[1], consts)
                val = ((h[0][0], w[0][0]), False) if h and w and len(h[0]) == len(w[0]) == 1 else None
            elif val is None and args:
                val = _int_value(args[0], consts)
            if val and len(val[0]) == 2 and min(val[0]) > 0:
                sizes.image = Size(val[0], node.lineno, f"{callee}({', '.join(map(str, val[0]))})")
        elif callee in ("TextVectorization", "pad_sequences") and sizes.sequence is None:
            arg = kwargs.get("output_sequence_length" if callee == "TextVectorization" else "maxlen")
            val = _int_value(arg, consts) if arg is not None else None
            if val and len(val[0]) == 1 and val[0][0] > 0:
                sizes.sequence = Size(val[0], node.lineno, f"{callee}(…={val[0][0]})")
    # fit's own batch_size beats a constant that may only feed a dataset; a constant
    # beats the first ``.batch(n)``, which may be an evaluation set's.
    if fit_batch is not None:
        sizes.batch = fit_batch
    elif sizes.batch is None:
        sizes.batch = dot_batch
    return sizes


def _short(stmt: ast.stmt) -> str:
    text = ast.unparse(stmt).splitlines()[0]
    return text if len(text) <= 60 else text[:59] + "…"


# ---------------------------------------------------------------- slicing


def _slice_block(body: list[ast.stmt], needed: set[str], result: Slice,
                 stop_line: int | None) -> list[ast.stmt]:
    """Keep the statements of ``body`` that ``needed`` depends on; walks backwards."""
    kept: list[ast.stmt] = []
    for stmt in reversed(body):
        if stop_line is not None and stmt.lineno > stop_line:
            continue
        if _is_main_guard(stmt):
            continue
        if _is_import(stmt):
            kept.append(stmt)
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            # Bodies run later, so a definition is needed wherever it stands.
            if stmt.name in needed:
                kept.append(stmt)
                needed |= free_names(stmt)
            continue
        if _is_config_call(stmt):
            kept.append(stmt)
            needed |= used_names(stmt)
            continue
        if isinstance(stmt, (ast.With, ast.If, ast.Try)) and not _is_import(stmt):
            inner = _slice_compound(stmt, needed, result, stop_line)
            if inner is not None:
                kept.append(inner)
            continue
        binds = bound_names(stmt) & needed
        mutates = mutated_names(stmt) & needed
        if not binds and not mutates:
            continue
        why = denial(stmt, result.helpers)
        if why is not None:
            result.skipped[stmt.lineno] = why
            for name in bound_names(stmt):
                result.skipped_names.setdefault(name, (stmt.lineno, why))
            continue
        kept.append(stmt)
        needed |= used_names(stmt)
    kept.reverse()
    return kept


def _slice_compound(stmt: ast.With | ast.If | ast.Try, needed: set[str], result: Slice,
                    stop_line: int | None) -> ast.stmt | None:
    if isinstance(stmt, ast.If):
        body = _slice_block(stmt.body, needed, result, stop_line)
        orelse = _slice_block(stmt.orelse, needed, result, stop_line)
        if not body and not orelse:
            return None
        needed |= used_names(stmt.test)
        return ast.copy_location(ast.If(test=stmt.test, body=body or [ast.Pass()], orelse=orelse), stmt)
    body = _slice_block(stmt.body, needed, result, stop_line)
    if not body:
        return None
    if isinstance(stmt, ast.With):
        why = denial(ast.Module(body=[ast.Expr(item.context_expr) for item in stmt.items], type_ignores=[]))
        if why is not None:
            result.skipped[stmt.lineno] = why
            return None
        for item in stmt.items:
            needed |= used_names(item.context_expr)
        return ast.copy_location(ast.With(items=stmt.items, body=body), stmt)
    # try: keep the handlers that are imports' fallbacks; others do nothing now.
    handlers = []
    for h in stmt.handlers:
        h_body = _slice_block(h.body, needed, result, stop_line)
        handlers.append(ast.copy_location(ast.ExceptHandler(type=h.type, name=h.name,
                                                            body=h_body or [ast.Pass()]), h))
    return ast.copy_location(ast.Try(body=body, handlers=handlers, orelse=[], finalbody=[]), stmt)


def _entry_names(entry: str) -> set[str]:
    if ":" in entry and entry.split(":", 1)[1].isidentifier():
        entry = entry.split(":", 1)[1]
    try:
        return used_names(ast.parse(entry, mode="eval"))
    except SyntaxError:
        return set()


def slice_source(source: str, filename: str = "<file>", entry: str | None = None,
                 candidate: Candidate | None = None) -> Slice:
    """Slice ``source`` for ``entry`` (an expression), else ``candidate``, else the best one."""
    tree = ast.parse(source, filename)
    result = Slice(tree=tree, entry=entry)
    result.candidates = find_candidates(tree)
    result.helpers = {s.name: s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            result.imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            result.imported.add(node.module.split(".")[0])
    stop_line = None
    if entry is not None:
        needed = _entry_names(entry)
    else:
        if candidate is None and result.candidates:
            candidate = result.candidates[0]
        if candidate is None:
            # Nothing recognisable: keep every definition; the child reports what it tried.
            needed = set()
        else:
            result.entry = candidate.expr
            needed = _entry_names(candidate.expr)
    # A function defined below its caller is only known to be needed once the caller
    # is kept: repeat until the needed names stop growing.
    while True:
        before = set(needed)
        result.skipped.clear()
        result.skipped_names.clear()
        body = _slice_block(tree.body, needed, result, stop_line)
        if needed == before:
            break
    result.kept_lines = sorted({s.lineno for s in body})
    result.tree = ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))
    return result


__all__ = ["Candidate", "DISCOVERY_FUNCTIONS", "ScriptSizes", "Size", "Slice", "denial",
           "find_candidates", "script_sizes", "slice_source", "trained_names"]
