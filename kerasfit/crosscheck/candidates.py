"""What a script trains, and what the build could make a model from, best first. Pure Python.

A model the script trains is one it compiles or fits (directly, or through its own
``run_experiment(model)``), or whose weights its ``GradientTape`` step differentiates
(``tape.gradient(loss, model.trainable_variables)``). Candidates are expressions the build
evaluates in the sliced script: a no-argument builder, a module-level model, a model a
function makes (its own constant locals written out), the networks a training class holds.
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass, field
from typing import Iterator

from .astnames import bound_names, terminal
from .sizes import Consts, array_shape, states

# Functions the build discovers when they take no arguments (DESIGN: discovery).
DISCOVERY_FUNCTIONS = ("build_model", "create_model", "get_model", "make_model", "model_fn")
# A call is a model construction when the callee ends in one of these ...
MODEL_CONSTRUCTORS = frozenset({"Model", "Sequential", "Functional"})
# ... or is a function of the file whose name says it makes a model.
_MODELISH = re.compile(r"(model|net|classifier|network|encoder|decoder|generator|discriminator|"
                       r"unet|cnn|resnet|vit|transformer|detector|mixer)", re.I)
_NOT_MODEL = re.compile(r"(dataset|data|loader|pairs|augment|image|img|loss|metric|optimizer|"
                        r"callback|schedule|mask|box|label|path)", re.I)
_TRAINS = frozenset({"fit", "fit_generator", "train_on_batch", "compile"})
_WEIGHTS = ("trainable_variables", "trainable_weights")


@dataclass
class Candidate:
    """Something the build could make a model from."""

    expr: str  # evaluated in the sliced module: "build_model()", "model"
    line: int
    kind: str  # "function" | "variable" | "expression" | "joint"
    # a joint candidate's models, in its tuple's order: how the report names each
    labels: list[str] | None = None
    # a network's input as the script's own step feeds it (by label): its non-batch dims, or
    # the label of the network whose output it is
    inputs: dict[str, tuple[int, ...] | str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.expr} (line {self.line})"


def is_main_guard(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.If):
        return False
    test = stmt.test
    return isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"


def flat_top(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Top-level statements and those inside top-level with/try/if blocks (not __main__)."""
    for stmt in body:
        if is_main_guard(stmt):
            continue
        if isinstance(stmt, (ast.With, ast.If)):
            yield from flat_top(stmt.body)
            if isinstance(stmt, ast.If):
                yield from flat_top(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            yield from flat_top(stmt.body)
        else:
            yield stmt


def required_args(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
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
                name = terminal(base)
                if name and (name in MODEL_CONSTRUCTORS or name in out):
                    out.add(stmt.name)
    return out


# ---------------------------------------------------------------- what the script trains


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


def differentiated(node: ast.AST) -> Iterator[tuple[ast.expr, int]]:
    """The objects whose weights a GradientTape step differentiates or an optimizer updates:
    ``X`` of ``tape.gradient(loss, X.trainable_variables)`` / ``apply_gradients(zip(g,
    X.trainable_weights))``, with the line."""
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        if terminal(call.func) not in ("gradient", "apply_gradients", "minimize", "apply"):
            continue
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            for n in ast.walk(arg):
                if isinstance(n, ast.Attribute) and n.attr in _WEIGHTS:
                    yield n.value, call.lineno


def trained_names(tree: ast.Module) -> dict[str, tuple[bool, int]]:
    """Module-level names the script compiles, fits or differentiates -> (fitted, line of
    the last such call).

    ``model.fit(...)`` directly, ``run_experiment(model)`` where the function compiles or
    fits that parameter, or ``tape.gradient(loss, model.trainable_variables)`` anywhere.
    ``__main__`` blocks count too: they say what the script trains.
    """
    functions = {s.name: s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    params = {name: _trained_params(fn) for name, fn in functions.items()}
    fits = {name: any(isinstance(n, ast.Attribute) and n.attr in _TRAINS - {"compile"} for n in ast.walk(fn))
            for name, fn in functions.items()}
    out: dict[str, tuple[bool, int]] = {}

    def saw(name: str, fitted: bool, line: int) -> None:
        out[name] = max(out.get(name, (False, 0)), (fitted, line))

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
    for target, line in differentiated(tree):
        if isinstance(target, ast.Name):
            saw(target.id, True, line)
    return out


# ---------------------------------------------------------------- the candidates


def _returns_model(fn: ast.FunctionDef | ast.AsyncFunctionDef, classes: set[str], builders: set[str]) -> bool:
    """Does the function construct a Keras model (or call one that does)?"""
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            callee = terminal(node.func)
            if callee in MODEL_CONSTRUCTORS or callee in classes or (callee in builders and callee != fn.name):
                return True
    return False


@dataclass
class _File:
    """What the candidates are read from."""

    tree: ast.Module
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
    classes: set[str]
    builders: set[str]
    module_names: set[str]
    trained: dict[str, tuple[bool, int]]
    out: list[tuple[float, Candidate]] = field(default_factory=list)
    _consts: list[Consts] = field(default_factory=list)

    @property
    def consts(self) -> Consts:
        """What the script states (read once, when a candidate needs it)."""
        if not self._consts:
            self._consts.append(states(self.tree))
        return self._consts[0]

    def modelish(self, callee: str) -> bool:
        return callee in DISCOVERY_FUNCTIONS or bool(_MODELISH.search(callee) and not _NOT_MODEL.search(callee))

    def makes_model(self, callee: str) -> bool:
        return callee in MODEL_CONSTRUCTORS or callee in self.classes or (
            callee in self.functions and (self.modelish(callee) or callee in self.builders))


def _read(tree: ast.Module) -> _File:
    functions = {s.name: s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    classes = _model_classes(tree.body)
    builders: set[str] = set()
    while True:  # a builder may call another builder defined anywhere in the file
        more = {n for n, fn in functions.items() if n not in builders and _returns_model(fn, classes, builders)}
        if not more:
            break
        builders |= more
    module_names = set().union(*(bound_names(s) for s in tree.body)) if tree.body else set()
    return _File(tree, functions, classes, builders, module_names, trained_names(tree))


def find_candidates(tree: ast.Module) -> list[Candidate]:
    """What to build, best first.

    The models the script trains come first, the last one trained first (a tutorial trains
    its baseline before the model it is about); then no-argument builder functions,
    module-level models built directly (``keras.Model(...)``, ``Sequential``, ``name = f(...)``
    of a file function that makes a model), models a function makes, then instances of the
    file's own ``Model`` subclasses, which are often training wrappers (a GAN's
    ``train_step``) with no ``call``.
    """
    f = _read(tree)
    for name, fn in f.functions.items():
        if required_args(fn) == 0 and (name in DISCOVERY_FUNCTIONS or f.modelish(name)):
            f.out.append((0 if name in DISCOVERY_FUNCTIONS else 1.5, Candidate(f"{name}()", fn.lineno, "function")))
    _module_models(f)
    _function_models(f)
    _class_networks(f)
    f.out.sort(key=lambda rc: rc[0])
    return [c for _, c in f.out]


def _module_models(f: _File) -> None:
    seen: set[str] = set()
    for stmt in flat_top(f.tree.body):
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or not isinstance(stmt.value, ast.Call):
            continue
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if len(targets) != 1 or not isinstance(targets[0], ast.Name):
            continue
        var = targets[0].id
        callee = terminal(stmt.value.func)
        if callee is None or var in seen:
            continue
        rank = _variable_rank(f, var, callee)
        if rank is None:
            continue
        seen.add(var)
        f.out.append((rank, Candidate(var, stmt.lineno, "variable")))


def _variable_rank(f: _File, var: str, callee: str) -> float | None:
    if var in f.trained and (f.makes_model(callee) or f.modelish(callee)):
        # Trained: best of all, fitted before compiled only, the last one first.
        fitted, line = f.trained[var]
        return -1.5 + (0 if fitted else 0.5) + 0.4 / (1 + line)
    if callee in MODEL_CONSTRUCTORS or (callee in f.functions and (f.modelish(callee) or callee in f.builders)):
        rank = 1.0
    elif callee in f.classes:
        rank = 3.0
    else:
        return None
    # Augmentation pipelines are Sequentials too; "x = block(x)" is a tensor.
    if var == "model":
        return rank - 0.5
    if _NOT_MODEL.search(var) or len(var) <= 2:
        return rank + 1.5
    return rank - 0.25 if _MODELISH.search(var) else rank


def _function_models(f: _File) -> None:
    """A model a function makes (``def run(): model = create_classifier(…)``,
    ``model = resnet_model.ResNet50(num_classes=NUM_CLASSES)``) from module-level names, and
    the function's own locals bound to them (written out: ``input_shape = (ROWS, COLS, 1)``),
    can be made on its own: first when the function trains it."""
    exprs: set[str] = set()
    for fn in _all_functions(f.tree):
        trained_here = {n.func.value.id for n in ast.walk(fn) if isinstance(n, ast.Call)
                        and isinstance(n.func, ast.Attribute) and n.func.attr in _TRAINS
                        and isinstance(n.func.value, ast.Name)}
        trained_here |= {t.id for t, _ in differentiated(fn) if isinstance(t, ast.Name)}
        local = _constant_locals(fn, f.module_names)
        for node in ast.walk(fn):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
                continue
            hit = any(isinstance(t, ast.Name) and t.id in trained_here for t in node.targets)
            if not _made_here(f, fn, node.value, hit):
                continue
            call = _written_out(node.value, local)
            if call is None or not _free(call) <= f.module_names | _BUILTINS:
                continue
            expr = ast.unparse(call)
            if expr not in exprs:
                exprs.add(expr)
                f.out.append((0.5 if hit else 2.0, Candidate(expr, node.lineno, "expression")))


def _made_here(f: _File, fn: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call, trained: bool) -> bool:
    """Does this call in ``fn`` make a model: a file builder (not ``fn`` itself), or, for what
    the function trains, a modelish or class-like callee of an imported module?"""
    callee = terminal(call.func)
    if callee is None or callee == fn.name:
        return False
    if f.makes_model(callee) and callee not in MODEL_CONSTRUCTORS:
        return True
    return trained and isinstance(call.func, ast.Attribute) and (f.modelish(callee) or callee[:1].isupper())


def _all_functions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Module-level functions, and methods of the file's classes."""
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield stmt
        elif isinstance(stmt, ast.ClassDef):
            yield from (s for s in stmt.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _constant_locals(fn: ast.FunctionDef | ast.AsyncFunctionDef, module_names: set[str]) -> dict[str, ast.expr]:
    """A function's locals bound once to expressions of module-level names and literals."""
    binds: dict[str, list[ast.expr]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            binds.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, (ast.AugAssign, ast.For)) and isinstance(node.target, ast.Name):
            binds.setdefault(node.target.id, []).append(node.target)  # rebound: not a constant
    params = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
    out: dict[str, ast.expr] = {}
    for name, values in binds.items():
        if len(values) == 1 and name not in params and not isinstance(values[0], ast.Name) \
                and _free(values[0]) <= module_names | _BUILTINS and not any(
                isinstance(n, ast.Call) for n in ast.walk(values[0])):
            out[name] = values[0]
    return out


def _written_out(call: ast.Call, local: dict[str, ast.expr]) -> ast.Call | None:
    """The call with the function's constant locals written in place of their names."""

    class Inline(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.expr:
            return ast.copy_location(local[node.id], node) if node.id in local else node

    out = Inline().visit(ast.parse(ast.unparse(call), mode="eval").body)
    return out if isinstance(out, ast.Call) else None


def _free(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _class_networks(f: _File) -> None:
    """A training class of the script (not a Keras model: a plain ``Dcgan(object)``) that
    makes networks in ``__init__`` (``self.generator = make_generator_model()``) and
    differentiates their weights in its step: those networks, together, named as it names
    them."""
    for cls in (s for s in f.tree.body if isinstance(s, ast.ClassDef) and s.name not in f.classes):
        init = next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
        if init is None:
            continue
        trained = [t.attr for t, _ in differentiated(cls) if isinstance(t, ast.Attribute)
                   and isinstance(t.value, ast.Name) and t.value.id == "self"]
        made = _made_in_init(f, init, trained)
        names = [n for n in dict.fromkeys(trained) if n in made]
        if names:
            expr = "(" + ", ".join(made[n][0] for n in names) + ("," if len(names) == 1 else "") + ")"
            inputs = _fed(cls, names, f.consts)
            f.out.append((0.25, Candidate(expr, made[names[0]][1], "joint", labels=names, inputs=inputs)))


def _made_in_init(f: _File, init: ast.FunctionDef, trained: list[str]) -> dict[str, tuple[str, int]]:
    """``self.X = builder(…)`` of the trained attributes, written out: X -> (expression, line)."""
    made: dict[str, tuple[str, int]] = {}
    local = _constant_locals(init, f.module_names)
    for node in ast.walk(init):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call)):
            continue
        attr = _self_attr(node.targets[0])
        callee = terminal(node.value.func)
        if attr not in trained or not callee or not f.makes_model(callee):
            continue
        call = _written_out(node.value, local)
        if call is not None and _free(call) <= f.module_names | _BUILTINS:
            made[attr] = (ast.unparse(call), node.lineno)
    return made


def _fed(cls: ast.ClassDef, names: list[str], consts: Consts) -> dict[str, tuple[int, ...] | str]:
    """What the class's own methods feed each network: ``self.generator(noise)`` of ``noise =
    tf.random.normal([self.batch_size, self.noise_dim])`` is (noise_dim,), ``self.discriminator(
    fake)`` of ``fake = self.generator(noise)`` is the generator's output. The first such call
    of each network that says."""
    out: dict[str, tuple[int, ...] | str] = {}
    for method in (s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))):
        bound = {t.id: n.value for n in ast.walk(method) if isinstance(n, ast.Assign)
                 for t in n.targets if isinstance(t, ast.Name)}
        for call in (n for n in ast.walk(method) if isinstance(n, ast.Call)):
            net = _self_attr(call.func)
            if net not in names or net in out or not call.args or not isinstance(call.args[0], ast.Name):
                continue
            value = bound.get(call.args[0].id)
            producer = _self_attr(value.func) if isinstance(value, ast.Call) else None
            if producer in names and producer != net:
                out[net] = producer
            elif isinstance(value, ast.Call):
                shape = array_shape(_own(value, cls.name), consts)
                if shape is not None and len(shape) > 1:
                    out[net] = shape[1:]
    return out


def _self_attr(node: ast.expr) -> str | None:
    return node.attr if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
        and node.value.id == "self" else None


def _own(node: ast.Call, cls: str) -> ast.Call:
    """The call with ``self.x`` read as the class's own ``Cls.x`` (what its __init__ states)."""

    class Own(ast.NodeTransformer):
        def visit_Attribute(self, n: ast.Attribute) -> ast.expr:
            if isinstance(n.value, ast.Name) and n.value.id == "self":
                return ast.copy_location(ast.Attribute(value=ast.Name(id=cls, ctx=ast.Load()), attr=n.attr,
                                                       ctx=ast.Load()), n)
            self.generic_visit(n)
            return n

    out = Own().visit(ast.parse(ast.unparse(node), mode="eval").body)
    return out if isinstance(out, ast.Call) else node


_BUILTINS = frozenset(dir(builtins))


__all__ = ["Candidate", "DISCOVERY_FUNCTIONS", "MODEL_CONSTRUCTORS", "differentiated", "find_candidates",
           "flat_top", "is_main_guard", "required_args", "trained_names"]
