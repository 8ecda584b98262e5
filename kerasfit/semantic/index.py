"""The project index: what a file can know about the other files of its tree.

Lazy by construction: nothing is read until a question needs another file, and each
file is read and parsed (with CPython's ``ast``, ~10x cheaper than libcst) at most once
per content hash. Module paths resolve the way Python would from the asking file: a
relative import against its package directory, an absolute one against each of its
ancestor directories (the project root is one of them).

Public API (stable; other branches build on it):

- :class:`ProjectIndex` — ``ProjectIndex(roots=(), bounds=None)``; ``roots`` are the paths a
  check was given (files or directories), used only by :meth:`ProjectIndex.reached_from_model`;
  ``bounds`` (:class:`kerasfit.semantic.treescan.Bounds`): which files may be read, and how
  much of each (default: any regular file within the default size limit, a link only into
  the roots' trees). An index rooted nowhere (``roots=()``) answers about the file alone
  and what it imports: no tree is scanned, no tree-wide answer rests on another file.
  - ``facts(path) -> ModuleFacts | None``: imports, functions, module constants of a file.
  - ``resolve(from_path, raw_dotted) -> Symbol | None``: what an imported dotted name is —
    a framework name (following project modules that re-export ``keras`` / ``layers`` /
    ``tf``) or a project function (following re-exports).
  - ``reached_from_model(path, function_name) -> bool``: whether a function is called,
    directly or through project helpers in any file of the roots, from model-building or
    training code (Keras layers/models, ``model_fn``, a ``Layer.call``, a train step).
  - ``input_only(path, function_name) -> bool``: whether a function runs only in the
    input pipeline (handed to a ``Dataset.map`` & co. in any file of the roots, directly
    or through project helpers, and never reached from model code).
  - ``imported_by_others(path) -> bool``: whether another file under the roots imports it.
  - ``dtype_policies() -> tuple[str, ...]``: compute dtypes of the mixed-precision
    policies the files under the roots set.
  - ``deps_of(path) -> dict[str, str]``: the other files (path -> content hash) consulted
    while answering questions for ``path``; a cached result of ``path`` is valid while
    they are unchanged. ``own_deps_of(path)``, ``asked_tree(path)`` and ``tree_digests()``
    split them into the file's own and the whole tree's (which a cache keeps once);
    ``digest_of(path)`` is a file's hash as they record it.
  - The four tree-wide questions above are answered from the few files that can change
    the answer where a scan of the tree's bytes shows them (``local_files(path)``), else
    from every file's share (``reach_part``, joined by :func:`join_reach`).
  - ``offer_tree(path, source, tree)``: CPython's AST of a checked text, which the file's
    facts then take instead of parsing it again (``known_tree`` is the other way round).
- The index of a running check is passed in explicitly (``LintSettings.project``, then
  ``SemanticModel(project=...)``): the CLI makes one per run of a tree, the language server
  one per workspace folder. A file checked without one gets an index rooted nowhere that
  still resolves imports from the file system.
"""

from __future__ import annotations

import ast
import os
import threading
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple, TypeVar

from ..core.symbols import (
    DATASET_FN_METHODS,
    FLAG_DEFINERS,
    POLICY_SETTERS,
    ROOT_MODULES,
    canonical,
    is_model_building,
    is_tpu_symbol,
    policy_dtype,
)
from .modulefacts import ModuleFacts, build_facts, facts_of, vendored_class
from .names import ast_dotted, star_names
from .treescan import Bounds, TreeScan, digest, scan_tree

_MAX_DEPTH = 6
_T = TypeVar("_T")


class Symbol(NamedTuple):
    """What a dotted name refers to: ``kind`` is 'framework' (``raw`` is a raw dotted
    framework name such as ``tensorflow.keras.layers.Conv2D``) or 'function' (``facts``
    holds ``node``)."""

    kind: str
    raw: str
    facts: ModuleFacts | None = None
    node: ast.FunctionDef | None = None


def _plain_bytes(source: str) -> bytes | None:
    """The UTF-8 bytes of a checked text, or None where CPython's AST of the text need not
    be the one of those bytes: a declared encoding (the file's bytes are parsed in it, the
    text as UTF-8) or a lone surrogate (not the bytes of any file)."""
    head = source[:400].split("\n", 2)[:2]
    if any("coding" in line for line in head):
        return None
    try:
        return source.encode("utf-8")
    except UnicodeEncodeError:
        return None


def _stamp(path: str) -> tuple[int, int] | None:
    """(modification time, size) of a file: what is remembered of it is read again when
    this changes. None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


class ProjectIndex:
    """See the module docstring."""

    def __init__(self, roots: Iterable[str | os.PathLike[str]] = (), bounds: Bounds | None = None) -> None:
        self.roots = [Path(r).resolve() for r in roots]
        # which files may be read, and how much of each (the project layer's excludes and size limit)
        self.bounds = bounds or Bounds(roots=self.roots)
        self._facts: dict[str, tuple[tuple[int, int], ModuleFacts | None]] = {}
        self._by_digest: dict[str, ModuleFacts] = {}
        self._module_files: dict[tuple[str, str], str | None] = {}
        self._deps: dict[str, dict[str, str]] = {}
        # which file is asking, per thread: the language server checks a large document
        # and small ones on two threads at once, against this one index
        self._asking = threading.local()
        self._reach: Reach | None = None
        # per module (path, digest): absl flag name -> the defaults its DEFINE_* calls give
        self._flag_defs: dict[tuple[str, str], dict[str, list[ast.expr]]] = {}
        # (module path, function name) -> whether calling it sets up a TPU
        self._tpu_makers: dict[tuple[str, str], bool] = {}
        self._tree_askers: set[str] = set()  # files a tree-wide answer was asked for
        self._scan: TreeScan | None = None
        # (path, digest, CPython's AST, the facts made of it) of the text the last check
        # parsed (see offer_tree): one, as a check of it needs it, not every file's at once
        self._offered: tuple[str, str, ast.Module, list[ModuleFacts]] | None = None
        self._digests: dict[str, tuple[tuple[int, int], str]] = {}  # digest_of's, by stamp
        self._parts: dict[str, ReachPart | None] = {}  # each tree file's share of the answers
        # the answers from a few files (see local_files), per set of files
        self._local: dict[frozenset[str], Reach] = {}
        self._policies: tuple[str, ...] | None = None

    # ---- files ---------------------------------------------------------------
    def facts(self, path: str | os.PathLike[str], source: str | bytes | None = None) -> ModuleFacts | None:
        """Facts of ``path`` (read from disk unless ``source`` is given)."""
        key = os.path.abspath(path)
        if source is not None:
            # the text being checked (maybe unsaved): not kept, the caller holds it; the
            # same text already read from the file (by the tree-wide answers) is not parsed again
            data = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
            known = self._known(digest(data), key)
            return known if known is not None else build_facts(key, data)
        stamp = _stamp(key)
        if stamp is None:
            return None
        hit = self._facts.get(key)
        if hit is None or hit[0] != stamp:
            read = self.bounds.read(key)
            if read is None:
                return None
            d = digest(read)
            f = self._known(d, key)
            if f is None:
                f = build_facts(key, read)
                if f is not None:
                    self._by_digest[d] = f
            hit = (stamp, f)
            self._facts[key] = hit
        f = hit[1]
        asking: str | None = getattr(self._asking, "path", None)
        if f is not None and asking is not None and key != asking:
            self._deps.setdefault(asking, {})[key] = f.digest
        return f

    def known_tree(self, path: str | os.PathLike[str], source: str) -> ast.Module | None:
        """CPython's AST of ``source`` when the tree-wide answers already parsed this text
        of ``path`` (found by digest), else None: a check then need not parse it again.
        Never for a text that declares its encoding: the file's bytes were parsed in that
        encoding, ``source`` as UTF-8."""
        data = _plain_bytes(source)
        known = self._by_digest.get(digest(data)) if data is not None else None
        return known.tree if known is not None and known.path == os.path.abspath(path) else None

    def offer_tree(self, path: str | os.PathLike[str], source: str, tree: ast.Module) -> None:
        """Take CPython's AST of ``source`` (the text of ``path`` a check parsed) for the
        facts of that text: the file's facts and tree-wide share are then not parsed again
        (the reverse of :meth:`known_tree`, with its caveat on a declared encoding)."""
        data = _plain_bytes(source)
        # (the facts are made when asked for; kept while this check runs: every file's
        # AST at once would make each full collection of the garbage collector longer)
        self._offered = (os.path.abspath(path), digest(data), tree, []) if data is not None else None

    def _known(self, hashed: str, key: str) -> ModuleFacts | None:
        """The facts of the text of ``key`` with this digest, already parsed (or None)."""
        known = self._by_digest.get(hashed)
        if known is not None and known.path == key:
            return known
        offered = self._offered
        if offered is None or offered[0] != key or offered[1] != hashed:
            return None
        if not offered[3]:
            offered[3].append(facts_of(key, hashed, offered[2]))
        return offered[3][0]

    def asking(self, path: str | None) -> None:
        """Record files consulted from now on as dependencies of ``path``."""
        self._asking.path = os.path.abspath(path) if path else None

    def deps_of(self, path: str | os.PathLike[str]) -> dict[str, str]:
        """Every other file consulted for ``path``: its own (:meth:`own_deps_of`), and the
        whole tree's when it asked a tree-wide question (:meth:`asked_tree`)."""
        key = os.path.abspath(path)
        out = dict(self._deps.get(key, {}))
        if key in self._tree_askers:
            out.update((p, d) for p, d in self.tree_digests().items() if p != key)
        return out

    def own_deps_of(self, path: str | os.PathLike[str]) -> dict[str, str]:
        """The other files consulted for ``path`` itself (imports it followed), not the tree's."""
        return dict(self._deps.get(os.path.abspath(path), {}))

    def asked_tree(self, path: str | os.PathLike[str]) -> bool:
        """Whether a tree-wide answer was asked for ``path`` (its result rests on every file of
        :meth:`tree_digests`: kept once per tree by a cache, not once per file)."""
        return os.path.abspath(path) in self._tree_askers

    def tree_digests(self) -> dict[str, str]:
        """Path -> content hash (:func:`file_digest`'s) of every readable file of the tree,
        which the tree-wide answers rest on; read, never parsed."""
        scan = self._scanned()
        if len(scan.digests) < len(scan.files):  # (the scan did not read them, or some failed)
            for f in scan.files:
                if f not in scan.digests:
                    data = self.bounds.read(f)
                    if data is not None:
                        scan.digests[f] = digest(data)
        return dict(scan.digests)

    def digest_of(self, path: str | os.PathLike[str]) -> str | None:
        """:func:`file_digest` of ``path``, read again only when its size or time changed."""
        key = os.path.abspath(path)
        stamp = _stamp(key)
        if stamp is None:
            return None
        hit = self._digests.get(key)
        if hit is None or hit[0] != stamp:
            data = self.bounds.read(key)
            if data is None:
                return None
            hit = self._digests[key] = (stamp, digest(data))
        return hit[1]

    def module_file(self, from_path: str, module: str) -> str | None:
        """The file of ``module`` (dotted, maybe relative) as imported from ``from_path``."""
        key = (os.path.dirname(os.path.abspath(from_path)), module)
        if key in self._module_files:
            return self._module_files[key]
        found = self._find_module(key[0], module)
        self._module_files[key] = found
        return found

    @staticmethod
    def _find_module(directory: str, module: str) -> str | None:
        level = len(module) - len(module.lstrip("."))
        parts = [p for p in module.lstrip(".").split(".") if p]
        if level:
            base = directory
            for _ in range(level - 1):
                base = os.path.dirname(base)
            bases = [base]
        else:
            if not parts or parts[0] in ROOT_MODULES:
                return None
            bases, d = [], directory
            for _ in range(8):  # the project root is a few levels up at most
                bases.append(d)
                up = os.path.dirname(d)
                if up == d:
                    break
                d = up
        for base in bases:
            stem = os.path.join(base, *parts) if parts else base
            for cand in (stem + ".py", os.path.join(stem, "__init__.py")):
                if os.path.isfile(cand):
                    return cand
        return None

    # ---- names -----------------------------------------------------------------
    def resolve(self, from_path: str, raw: str, _depth: int = 0) -> Symbol | None:
        """What the raw dotted name ``raw`` (as imported in ``from_path``) refers to."""
        if _depth > _MAX_DEPTH or not raw:
            return None
        head = raw.lstrip(".").split(".")[0]
        if not raw.startswith(".") and head in ROOT_MODULES:
            return Symbol("framework", raw)
        level = len(raw) - len(raw.lstrip("."))
        parts = raw.lstrip(".").split(".")
        for i in range(len(parts) - 1, -1, -1):
            module = "." * level + ".".join(parts[:i])
            if not module.strip("."):
                if not level:
                    continue
            file = self.module_file(from_path, module)
            if file is None:
                continue
            facts = self.facts(file)
            if facts is None:
                return None
            rest = parts[i:]
            if not rest:
                return None
            return self._member(facts, rest, _depth)
        return None

    def _member(self, facts: ModuleFacts, rest: list[str], depth: int) -> Symbol | None:
        name, tail = rest[0], rest[1:]
        if name in facts.functions and not tail:
            return Symbol("function", f"{facts.path}:{name}", facts, facts.functions[name])
        if name in facts.bindings:
            return self._either(facts, facts.bindings[name], tail, depth)
        vendored = vendored_class(facts, name) if not tail else None
        if vendored is not None:
            return Symbol("framework", vendored)
        target = facts.imports.get(name)
        if target is not None:
            return self.resolve(facts.path, ".".join([target, *tail]), depth + 1)
        value = facts.consts.get(name)
        if value is not None:
            dotted = ast_dotted(value)
            if dotted is not None and dotted.split(".")[0] != name:
                return self.local(facts, ".".join([dotted, *tail]), depth + 1)
        for mod in facts.star_modules:
            exported = star_names(mod)
            if exported is not None and name in exported:
                return Symbol("framework", ".".join([mod, name, *tail]))
        return None

    def _either(self, facts: ModuleFacts, bound: list[str], tail: list[str], depth: int) -> Symbol | None:
        """A name bound in branches (a backend chosen at import time): the framework symbol
        any branch binds, whichever it is; else what the first branch that resolves binds."""
        found: list[Symbol] = []
        for b in bound:
            dotted = ".".join([b.lstrip("="), *tail])
            sym = self.local(facts, dotted, depth + 1) if b.startswith("=") else self.resolve(facts.path, dotted, depth + 1)
            if sym is not None:
                if sym.kind == "framework":
                    return sym
                found.append(sym)
        return found[0] if found else None

    def local(self, facts: ModuleFacts, dotted: str, _depth: int = 0) -> Symbol | None:
        """What ``dotted`` written at module level of ``facts`` refers to."""
        if _depth > _MAX_DEPTH:
            return None
        head, _, tail = dotted.partition(".")
        if head in facts.functions and not tail:
            return Symbol("function", f"{facts.path}:{head}", facts, facts.functions[head])
        return self._member(facts, dotted.split("."), _depth)

    def flag_default(self, facts: ModuleFacts, name: str) -> ast.expr | None:
        """The default of absl flag ``name`` as defined in a project module that ``facts``
        imports (``flags.DEFINE_integer("batch_size", 16, ..)`` in ``flags_def.py``), when
        exactly one definition is found."""
        found: list[ast.expr] = []
        for raw in sorted(set(facts.imports.values())):
            file = self.module_file(facts.path, raw) or self.module_file(facts.path, raw.rpartition(".")[0])
            if file is None or os.path.abspath(file) == os.path.abspath(facts.path):
                continue
            other = self.facts(file)
            if other is None:
                continue
            key = (other.path, other.digest)
            defs = self._flag_defs.get(key)
            if defs is None:
                defs = self._flag_defs[key] = _flag_definitions(other.tree)
            found.extend(defs.get(name, ()))
        return found[0] if len(found) == 1 else None

    def zero_pad_layer(self, facts: ModuleFacts, dotted: str) -> bool:
        """Whether ``dotted`` (as written in ``facts``' module) names a class of another
        project module whose ``call`` returns a zero (CONSTANT) ``tf.pad`` / ``keras.ops.pad``
        of its input, and nothing else."""
        found = self._imported_call_method(facts, dotted)
        if found is None:
            return False
        other, call = found
        if len(call.args.args) < 2:
            return False
        tensor = call.args.args[1].arg
        rets = [n for n in ast.walk(call) if isinstance(n, ast.Return)]
        return bool(rets) and all(_zero_pad_of(other, r.value, tensor) for r in rets)

    def _imported_call_method(self, facts: ModuleFacts, dotted: str) -> tuple[ModuleFacts, ast.FunctionDef] | None:
        """For ``dotted`` (as written in ``facts``' module) a class of another project module:
        that module's facts and the class's ``call`` method."""
        head, _, tail = dotted.partition(".")
        raw = facts.imports.get(head)
        if raw is None or raw.split(".")[0] in ROOT_MODULES:
            return None
        full = f"{raw}.{tail}" if tail else raw
        module, _, name = full.rpartition(".")
        file = self.module_file(facts.path, module) if module else None
        other = self.facts(file) if file is not None else None
        cls = other.classes.get(name) if other is not None else None
        call = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "call"), None) if cls else None
        if other is None or call is None:
            return None
        return other, call

    def makes_tpu(self, facts: ModuleFacts, dotted: str) -> bool:
        """Whether calling project function ``dotted`` (as written in ``facts``' module) sets
        up a TPU: its body, or a project function it calls (two hops), calls a TPU symbol
        (``TPUStrategy``, ``TPUClusterResolver``, ``tf.tpu.*``)."""
        sym = self.local(facts, dotted)
        if sym is None or sym.kind != "function" or sym.facts is None or sym.node is None:
            return False
        return self._makes_tpu(sym.facts, sym.node, 0)

    def _makes_tpu(self, facts: ModuleFacts, fn: ast.FunctionDef, depth: int) -> bool:
        key = (facts.path, fn.name)
        hit = self._tpu_makers.get(key)
        if hit is not None:
            return hit
        self._tpu_makers[key] = False  # a recursive helper ends here
        answer = False
        for call in _calls(fn):
            dotted = ast_dotted(call.func)
            if dotted is None:
                continue
            head, _, rest = dotted.partition(".")
            raw = facts.imports.get(head)
            if raw is not None and raw.split(".")[0] in ROOT_MODULES:
                if is_tpu_symbol(canonical(f"{raw}.{rest}" if rest else raw)):
                    answer = True
                    break
            elif depth < 2:
                sym = self.local(facts, dotted)
                if sym is not None and sym.kind == "function" and sym.facts is not None and sym.node is not None:
                    if self._makes_tpu(sym.facts, sym.node, depth + 1):
                        answer = True
                        break
        self._tpu_makers[key] = answer
        return answer

    def imports_framework(self, path: str | os.PathLike[str], data: str | bytes) -> bool:
        """True when a file that never spells tensorflow/keras imports them through a
        project module (``from .compat import layers``): the prefilter's second chance."""
        facts = self.facts(path, source=data)
        if facts is None:
            return False
        return any(self._framework_bound(str(path), raw) for raw in facts.imports.values())

    def _framework_bound(self, from_path: str, raw: str, depth: int = 0) -> bool:
        """``raw`` (imported in ``from_path``) is a framework name, or a project module of
        framework names (``from tensorflow import transpose``, ``from keras.ops import *``),
        directly or bound in a branch of another module (``from .backend import functional``)."""
        sym = self.resolve(from_path, raw)
        if sym is not None or depth > 3:
            return sym is not None and sym.kind == "framework"
        file = self.module_file(from_path, raw)
        if file is not None:
            facts = self.facts(file)
            return facts is not None and (
                any(m.split(".")[0] in ROOT_MODULES for m in facts.star_modules)
                or any(v.count(".") and v.split(".")[0] in ROOT_MODULES for v in facts.imports.values()))
        module, _, name = raw.rpartition(".")
        file = self.module_file(from_path, module) if module.strip(".") else None
        facts = self.facts(file) if file is not None else None
        bound = (facts.bindings.get(name) or [facts.imports.get(name, "")]) if facts is not None else []
        return any(self._framework_bound(facts.path, b, depth + 1) for b in bound if b and not b.startswith("=")) if facts else False

    # ---- reach -------------------------------------------------------------------
    def reached_from_model(self, path: str | os.PathLike[str], function_name: str) -> bool:
        """True when ``function_name`` of ``path`` is called (through project helpers,
        across the files under the roots) from model-building or training code."""
        return (os.path.abspath(path), function_name) in self._answers(path).model

    def input_only(self, path: str | os.PathLike[str], function_name: str) -> bool:
        """True when ``function_name`` of ``path`` runs only in the input pipeline: it is
        given to a ``Dataset.map``/``filter``/``flat_map``/``interleave`` (or called by a
        function or lambda that is), in any file under the roots, and model or training
        code never reaches it."""
        key = (os.path.abspath(path), function_name)
        reach = self._answers(path)
        return key in reach.input and key not in reach.model

    def imported_by_others(self, path: str | os.PathLike[str]) -> bool:
        """True when another file under the roots imports the module ``path``."""
        return os.path.abspath(path) in self._answers(path).imported

    def dtype_policies(self) -> tuple[str, ...]:
        """The compute dtypes of the mixed-precision policies any file under the roots
        sets (``set_global_policy("mixed_float16")`` -> 'float16'), sorted."""
        self._asked_tree()
        if self._reach is not None or not self._scanned().importers:
            return self._reached_quietly().policies
        if self._policies is None:
            # only a file that spells a policy setter can set a policy
            parts = self._quietly(lambda: [self._part(f) for f in self._scanned().policy_files])
            self._policies = tuple(sorted({d for p in parts if p is not None for d in p.policies}))
        return self._policies

    def local_files(self, path: str | os.PathLike[str]) -> frozenset[str] | None:
        """The tree's files whose shares decide the tree-wide answers about ``path``'s
        functions (it and its importers' closure, see :class:`TreeScan`) when they are few
        (a quarter of the tree, or eight, at most), else None: the whole tree's answers are
        cheaper to have once than per file."""
        if not self.roots:
            return frozenset()  # rooted nowhere: no tree, no file of it decides an answer
        scan = self._scanned()
        key = os.path.abspath(path)
        if key not in scan.importers:
            # not read by the scan; outside the tree, only a .py file can be named by an
            # import or a call: another file (a notebook) has no function any answer holds
            return None if key.endswith(".py") or key in scan.files else frozenset()
        found, todo = {key}, [key]
        while todo:
            importers = scan.importers[todo.pop()]
            if importers is None:
                return None
            for g in importers:
                if g not in found:
                    found.add(g)
                    todo.append(g)
        return frozenset(found) if len(found) <= max(8, len(scan.files) // 4) else None

    def _answers(self, path: str | os.PathLike[str]) -> Reach:
        """Answers that hold for ``path``'s functions: its local files' (see
        :meth:`local_files`), else the whole tree's."""
        self._asked_tree()
        if self._reach is not None:
            return self._reach
        files = self.local_files(path)
        if files is None:
            return self._reached_quietly()
        hit = self._local.get(files)
        if hit is None:
            # (a file outside the tree that re-exports one of it has no share: its importers do)
            order = sorted(f for f in files if f in self._scanned().digests)
            hit = self._local[files] = self._quietly(lambda: join_reach([self._part(f) for f in order]))
        return hit

    def _part(self, path: str) -> ReachPart | None:
        if path not in self._parts:
            self._parts[path] = self.reach_part(path)
        return self._parts[path]

    def reach_files(self) -> list[str]:
        """The files the tree-wide answers read: every ``.py`` file under the roots, in
        the directories the bounds enter (no linked directory is entered)."""
        files: list[str] = []
        for r in self.roots:
            if r.is_file():
                files.append(str(r))
            elif r.is_dir():
                found: list[str] = []
                for d, dirs, names in os.walk(r):
                    dirs[:] = [x for x in dirs if not self.bounds.skip_dir(os.path.join(d, x))]
                    found.extend(os.path.join(d, n) for n in names if n.endswith(".py"))
                files.extend(sorted(found))
        return files

    def reach_part(self, path: str) -> ReachPart | None:
        """One file's share of the tree-wide answers (None when it does not parse).
        Parts of disjoint files can be computed in separate processes and joined with
        :func:`join_reach`: the answers are the same as computed here."""
        facts = self.facts(path)
        if facts is None:
            return None
        edges: dict[tuple[str, str], set[tuple[str, str]]] = {}
        model: set[tuple[str, str]] = set()
        imported: set[str] = set()
        for raw in facts.imports.values():
            for module in (raw, raw.rpartition(".")[0]):  # `import pkg.mod` / `from pkg.mod import f`
                found = self.module_file(facts.path, module) if module.strip(".") else None
                if found is not None and os.path.abspath(found) != facts.path:
                    imported.add(os.path.abspath(found))
                    break
        module_calls, own = _reach_calls(facts)
        for name, fn in _functions(facts):
            key = (facts.path, name)
            out = edges.setdefault(key, set())
            if name.rsplit(".", 1)[-1] in _STEP_NAMES:
                model.add(key)
            for call in own.get(id(fn), ()):
                callee = _callee(self, facts, call.func)
                if isinstance(callee, Symbol):  # (a NamedTuple: ask before plain tuples)
                    if is_model_building(canonical(callee.raw)):
                        model.add(key)
                elif callee is not None:
                    out.add(callee)
        return ReachPart(
            facts.path, facts.digest, frozenset(_policies(module_calls)), frozenset(imported),
            frozenset(_dataset_fns(self, facts, module_calls)), frozenset(model),
            {k: frozenset(v) for k, v in edges.items()},
        )

    def adopt_reach(self, reach: Reach) -> None:
        """Take tree-wide answers computed elsewhere (by the parts of this tree's files)."""
        self._reach = reach

    def _asked_tree(self) -> None:
        asking: str | None = getattr(self._asking, "path", None)
        if asking is not None:
            # the answer rests on the tree (a file added to it may import the asking one):
            # a cached result of the asking file holds while the tree's files are unchanged
            self._tree_askers.add(asking)

    def _reached_quietly(self) -> Reach:
        if self._reach is None:
            files = self.reach_files()
            self._reach = self._quietly(lambda: join_reach([self._part(os.path.abspath(f)) for f in files]))
        return self._reach

    def _quietly(self, compute: Callable[[], _T]) -> _T:
        # the files read are the tree's (tree_digests), not the asking file's own
        asking = getattr(self._asking, "path", None)
        self._asking.path = None
        try:
            return compute()
        finally:
            self._asking.path = asking

    def scanned_files(self) -> int:
        """How many files of the tree the scan for the tree-wide answers listed (0 before
        any question needed it)."""
        return len(self._scan.files) if self._scan is not None else 0

    def _scanned(self) -> TreeScan:
        if self._scan is None:
            self._scan = scan_tree(self.roots, self.reach_files(), self.bounds)
        return self._scan


# ---- reach: Which project functions are reached from model-building or training code, across files.
#
#
# A function is *model code* when it calls a Keras/TF model-building API, is a Keras
# ``Layer``/``Model`` method, or is named like a model / step function (``model_fn``,
# ``train_step``, ``call``). Reach propagates from model code to every project function it
# calls (same file or imported from the tree), to a fixed point.

_STEP_NAMES = {"model_fn", "train_step", "test_step", "call", "build", "training_step", "loss_fn", "compute_loss"}


def _flag_definitions(tree: ast.Module) -> dict[str, list[ast.expr]]:
    """absl flag name -> the defaults the module's ``DEFINE_*(name, default, ..)`` calls give."""
    out: dict[str, list[ast.expr]] = {}
    for call in _calls(tree):
        dotted = ast_dotted(call.func) or ""
        if dotted.rsplit(".", 1)[-1] not in FLAG_DEFINERS:
            continue
        args = list(call.args)
        kws = {k.arg: k.value for k in call.keywords if k.arg}
        name = args[0] if args else kws.get("name")
        default = args[1] if len(args) > 1 else kws.get("default")
        if isinstance(name, ast.Constant) and isinstance(name.value, str) and default is not None:
            out.setdefault(name.value, []).append(default)
    return out


def _calls(fn: ast.AST) -> Iterator[ast.Call]:
    for n in ast.walk(fn):
        if isinstance(n, ast.Call):
            yield n


# what a walk for calls never needs to enter: no call is below them
_LEAVES = frozenset({ast.Name, ast.Constant, ast.Load, ast.Store, ast.Del, ast.alias, ast.Pass})
_CODE_FIELDS: dict[type, tuple[str, ...]] = {}


def _reach_calls(facts: ModuleFacts) -> tuple[list[ast.Call], dict[int, list[ast.Call]]]:
    """Every call of the module, and per function of :func:`_functions` (by ``id``) the
    calls it makes itself: not those in a lambda it hands to a Dataset method
    (``ds.map(lambda x, y: (x, encode(y)))`` runs ``encode`` in the input pipeline).

    One walk of the tree for both (the answers need no order): the functions are
    module-level defs and methods of module-level classes, so none holds another.
    """
    owners = {id(fn) for _, fn in _functions(facts)}
    calls: list[ast.Call] = []
    own: dict[int, list[ast.Call]] = {}
    # (node, the function whose own calls it holds, or None)
    todo: list[tuple[ast.AST, list[ast.Call] | None]] = [(facts.tree, None)]
    pop, push = todo.pop, todo.append
    leaves, fields_of, AST, Call, Lambda = _LEAVES, _CODE_FIELDS, ast.AST, ast.Call, ast.Lambda
    while todo:
        n, mine = pop()
        tp = type(n)
        if id(n) in owners:
            mine = own.setdefault(id(n), [])
        if tp is Call:
            calls.append(n)  # type: ignore[arg-type]
            func = n.func  # type: ignore[attr-defined]
            if mine is not None and isinstance(func, ast.Attribute) and func.attr in DATASET_FN_METHODS:
                mine.append(n)  # type: ignore[arg-type]
                # a lambda handed over (by position or keyword) runs in the input
                # pipeline: still the module's calls, not the function's own
                push((func, mine))
                for x in (*n.args, *(k.value for k in n.keywords)):  # type: ignore[attr-defined]
                    if type(x) not in leaves:
                        push((x, None if type(x) is Lambda else mine))
                continue
            if mine is not None:
                mine.append(n)  # type: ignore[arg-type]
        names = fields_of.get(tp)
        if names is None:
            names = fields_of[tp] = tuple(f for f in tp._fields if f != "ctx")
        for f in names:
            v = getattr(n, f, None)
            if type(v) is list:
                for x in v:
                    if isinstance(x, AST) and type(x) not in leaves:
                        push((x, mine))
            elif isinstance(v, AST) and type(v) not in leaves:
                push((v, mine))
    return calls, own


def _functions(facts: ModuleFacts) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for name, fn in facts.functions.items():
        yield name, fn
    for cname, cls in facts.classes.items():
        for stmt in cls.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f"{cname}.{stmt.name}", stmt


class Reach(NamedTuple):
    """(path, qualified function name) keys reached from model/training code, and from
    functions handed to a ``Dataset`` method."""

    model: frozenset[tuple[str, str]]
    input: frozenset[tuple[str, str]]
    digests: tuple[tuple[str, str], ...]  # (path, content hash) of every file read
    policies: tuple[str, ...]  # compute dtypes of the mixed-precision policies set, sorted
    imported: frozenset[str]  # paths of modules another file imports


def _callee(index: ProjectIndex, facts: ModuleFacts, func: ast.expr) -> tuple[str, str] | Symbol | None:
    """A project function key for a call's callee, a framework Symbol, or None."""
    dotted = ast_dotted(func)
    if dotted is None:
        return None
    head = dotted.split(".")[0]
    if head in facts.functions and "." not in dotted:
        return (facts.path, head)
    target = facts.imports.get(head)
    if target is None:
        return None
    sym = index.resolve(facts.path, ".".join([target, *dotted.split(".")[1:]]))
    if sym is None:
        return None
    if sym.kind == "framework":
        return sym
    if sym.facts is not None and sym.node is not None:
        return (sym.facts.path, sym.node.name)
    return None


def _dataset_fns(index: ProjectIndex, facts: ModuleFacts, calls: list[ast.Call]) -> Iterator[tuple[str, str]]:
    """Project functions this file hands to a Dataset method: by name, through
    ``functools.partial``, or called in a lambda's body."""
    for call in calls:
        if not (isinstance(call.func, ast.Attribute) and call.func.attr in DATASET_FN_METHODS):
            continue
        args = [*call.args[:1], *(k.value for k in call.keywords if k.arg in ("map_func", "predicate"))]
        for arg in args:
            if isinstance(arg, ast.Call) and (ast_dotted(arg.func) or "").endswith("partial") and arg.args:
                arg = arg.args[0]
            found = [arg] if isinstance(arg, (ast.Name, ast.Attribute)) else (
                [c.func for c in _calls(arg.body)] if isinstance(arg, ast.Lambda) else [])
            for func in found:
                key = _callee(index, facts, func)
                if key is not None and not isinstance(key, Symbol):
                    yield key


class ReachPart(NamedTuple):
    """One file's share of :class:`Reach` (see :meth:`ProjectIndex.reach_part`); picklable."""

    path: str
    digest: str
    policies: frozenset[str]
    imported: frozenset[str]
    input: frozenset[tuple[str, str]]  # functions handed to a Dataset method
    model: frozenset[tuple[str, str]]  # model code itself (before propagation)
    edges: dict[tuple[str, str], frozenset[tuple[str, str]]]  # function -> project functions it calls


def compute_reach(index: ProjectIndex, files: list[str]) -> Reach:
    return join_reach([index.reach_part(path) for path in files])


def join_reach(parts: Iterable[ReachPart | None]) -> Reach:
    """The tree's answers from its files' parts (in the order of the files)."""
    edges: dict[tuple[str, str], set[tuple[str, str]]] = {}
    model: set[tuple[str, str]] = set()
    data: set[tuple[str, str]] = set()
    digests: list[tuple[str, str]] = []
    policies: set[str] = set()
    imported: set[str] = set()
    for part in parts:
        if part is None:
            continue
        digests.append((part.path, part.digest))
        policies.update(part.policies)
        imported.update(part.imported)
        data.update(part.input)
        model.update(part.model)
        for key, callees in part.edges.items():
            edges.setdefault(key, set()).update(callees)
    return Reach(_closure(model, edges), _closure(data, edges), tuple(digests), tuple(sorted(policies)), frozenset(imported))


def _policies(calls: list[ast.Call]) -> Iterator[str]:
    """``set_global_policy("mixed_float16")`` / ``set_dtype_policy(Policy("..."))``."""
    for call in calls:
        if isinstance(call.func, ast.Attribute) and call.func.attr in POLICY_SETTERS and call.args:
            arg = call.args[0]
            if isinstance(arg, ast.Call) and arg.args:
                arg = arg.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                yield policy_dtype(arg.value)


def _closure(seeds: set[tuple[str, str]], edges: dict[tuple[str, str], set[tuple[str, str]]]) -> frozenset[tuple[str, str]]:
    reached = set(seeds)
    todo = list(seeds)
    while todo:
        k = todo.pop()
        for callee in edges.get(k, ()):
            if callee not in reached:
                reached.add(callee)
                todo.append(callee)
    return frozenset(reached)


def _zero_pad_of(facts: ModuleFacts, v: ast.expr | None, tensor: str) -> bool:
    """``v`` (a value ``facts``' module returns) is a zero (CONSTANT) ``tf.pad`` /
    ``keras.ops.pad`` of the parameter ``tensor``, and nothing else."""
    if not isinstance(v, ast.Call) or not v.args or not (isinstance(v.args[0], ast.Name) and v.args[0].id == tensor):
        return False
    d = ast_dotted(v.func) or ""
    h, _, rest = d.partition(".")
    base = facts.imports.get(h)
    if base is None or canonical(f"{base}.{rest}" if rest else base) not in ("tf.pad", "keras.ops.pad"):
        return False
    mode = next((k.value for k in v.keywords if k.arg == "mode"), v.args[2] if len(v.args) > 2 else None)
    if mode is not None and not (isinstance(mode, ast.Constant) and str(mode.value).upper() == "CONSTANT"):
        return False
    return not (any(k.arg == "constant_values" for k in v.keywords) or len(v.args) > 3)
