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
from dataclasses import dataclass, field

from .astnames import bound_names, free_names, mutated_names, root_name, terminal, used_names, walk_scope
from .candidates import Candidate, find_candidates, is_main_guard

# Calls that change how every later model is built: kept wherever they are.
CONFIG_CALLS = frozenset({
    "set_global_policy", "set_floatx", "set_image_data_format", "set_epsilon", "set_policy",
    "set_random_seed", "set_seed", "enable_op_determinism", "disable_eager_execution",
    "disable_v2_behavior", "enable_eager_execution", "enable_v2_behavior",
    "reset_default_graph", "clear_session", "set_learning_phase",
})
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


















def denial(stmt: ast.AST, helpers: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None,
           _seen: frozenset[str] = frozenset()) -> str | None:
    """Why running this statement would train, download, plot or do I/O (None: it would not).

    ``helpers`` are the file's functions: calling one whose body reads files or downloads
    (``x, y = readucr(url)``) is that I/O too.
    """
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return None  # a body only runs when called
    for node in walk_scope(stmt, enter_root=True):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            if node is not stmt:
                continue
        if not isinstance(node, ast.Call):
            continue
        name = terminal(node.func)
        if name in DENIED_CALLS:
            return f"{name}() {DENIED_CALLS[name]}"
        root = root_name(node.func)
        if root in DENIED_MODULES:
            return f"{root}.{name or '…'}() is plotting or I/O"
        if helpers and isinstance(node.func, ast.Name) and name in helpers and name not in _seen:
            body = ast.Module(body=list(helpers[name].body), type_ignores=[])
            why = denial(body, helpers, _seen | {name})
            if why is not None and why.split("() ", 1)[-1].startswith(_IO):
                return f"{name}() calls {why}"
    return None




def _is_config_call(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        name = terminal(stmt.value.func) or ""
        # an absl flag's definition: what `FLAGS.x` reads, with its default (app.run never runs)
        return name in CONFIG_CALLS or name.startswith("DEFINE_")
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


# ---------------------------------------------------------------- slicing


def _slice_block(body: list[ast.stmt], needed: set[str], result: Slice,
                 stop_line: int | None) -> list[ast.stmt]:
    """Keep the statements of ``body`` that ``needed`` depends on; walks backwards."""
    kept: list[ast.stmt] = []
    for stmt in reversed(body):
        if stop_line is not None and stmt.lineno > stop_line:
            continue
        if is_main_guard(stmt):
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


__all__ = ["Slice", "denial", "slice_source"]
