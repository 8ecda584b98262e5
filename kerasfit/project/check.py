"""Plain functions returning data (STYLE 7): what the CLI, the language server and
pre-commit all call. No printing here."""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from .. import __version__
from ..core.cachefs import CacheDir, default_cache_dir
from .config import (
    Config,
    ConfigError,
    _matches,
    Selection,
    cache_dir_of,
    check_docs_url,
    effective_target,
    find_config,
    inside_project,
    load_config_file,
    over_size_budget,
    per_file_ignores,
    select_rules,
    validate_selectors,
)
from .discovery import PREFILTER_NEEDLES, Candidate, discover, mentions_tensorflow
from .sources import (
    FileReadError, FileTooLarge, TreeIndexes, index_bounds, notebook_json_limit, notebook_over_budget, read_source,
)
from ..core.docpages import Links
from ..core import interrupts
from ..core.parsestack import on_parse_stack
from ..core.sourcefile import DEFAULT_MAX_FILE_SIZE, Cost, over_limit, regular_file_contains
from ..engine.registry import all_rules, fingerprint as rules_fingerprint, manifest
from ..engine.settings import LintSettings, reads_project
from ..semantic.index import ProjectIndex, Reach, ReachPart, join_reach
from ..semantic.treescan import file_digest
from ..core.types import TARGETS, Diagnostic, FileResult, Severity, allowed
from .writeback import Snapshot, stat_or_none, write_fixed

if TYPE_CHECKING:
    from concurrent.futures import Executor
    from multiprocessing.context import BaseContext

    from .baseline import Baseline

    from ..engine.parse import ParseCache
    from ..ruleapi.rule import Rule

PARALLEL_MIN_FILES = 6


@dataclass
class CheckOptions:
    selection: Selection = field(default_factory=Selection)
    target: str | None = None
    fix: bool = False
    unsafe_fixes: bool = False
    diff: bool = False  # compute fixes but write nothing
    use_cache: bool = True
    cores: int | None = None
    batch_size: int | None = None
    config_file: Path | None = None
    isolated: bool = False  # ignore every pyproject.toml
    jobs: int | None = None
    force_exclude: bool = False
    cache_dir: Path | None = None
    build: Any = None  # a kerasfit.project.buildstage.BuildRequest: run the build cross-check stage
    fail_on: str | None = None  # "error" | "warning" | "info"; None: each file's config
    max_file_size: int | None = None  # bytes; None: each file's config, else DEFAULT_MAX_FILE_SIZE
    docs_url: str | None = None  # rule links under this URL; None: the config's docs-url, else the installed pages
    baseline: Path | None = None  # accept the findings recorded there; None: each file's config's baseline
    use_baseline: bool = True  # False: no baseline at all (writing a new one)


@dataclass
class RunResult:
    files: list[FileResult]
    prefiltered: int = 0
    elapsed: float = 0.0
    warnings: list[str] = field(default_factory=list)  # one line each, for stderr (the cache's)
    accepted: int = 0  # findings a baseline accepted (dropped from ``files``)
    # files of the tree this process scanned for the project's tree-wide answers (a pool's
    # workers scan for themselves what their checks ask, unless the answers were shared)
    tree_files: int = 0

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return [d for f in self.files for d in f.diagnostics]

    @property
    def errors(self) -> list[FileResult]:
        return [f for f in self.files if f.error]


# ---- settings ----------------------------------------------------------------------


@dataclass(frozen=True)
class FileSettings:
    """Everything that decides one file's result (picklable: sent to workers)."""

    codes: tuple[str, ...]
    target: str
    options: tuple[tuple[str, Any], ...]
    unfixable: tuple[str, ...] = ()  # selected codes whose fixes are not offered
    max_file_size: int = DEFAULT_MAX_FILE_SIZE

    def fingerprint(self) -> str:
        return hashlib.sha256(repr((__version__, rules_fingerprint(), self)).encode()).hexdigest()[:16]

    def rules(self) -> list[type[Rule]]:
        rules = all_rules()
        return [rules[c] for c in self.codes]

    def lint_settings(self, project: ProjectIndex | None = None, stop: threading.Event | None = None) -> LintSettings:
        return LintSettings(
            self.rules(), TARGETS[self.target], dict(self.options), frozenset(self.unfixable), project, stop,
        )


class Resolver:
    """Finds each file's config once per directory and turns it into FileSettings."""

    def __init__(self, options: CheckOptions, *, manifest_cache: bool = True) -> None:
        self.options = options
        # The manifest lets a fully cached CLI run skip importing the rules; in-process
        # callers (the language server) import them anyway and must not write files.
        use_cache = manifest_cache and options.use_cache
        self._explicit: Config | None = load_config_file(options.config_file) if options.config_file else None
        self.cache_dir = self._cache_dir()
        self.cache = CacheDir(self.cache_dir)  # one per run: a link in it is reported once
        self.rules = manifest(self.cache if use_cache else None)
        cli = options.selection
        for sel in (cli.select or [], cli.extend_select, cli.ignore):
            validate_selectors(list(sel), self.rules, "command line")
        if options.target is not None:
            effective_target(options.target, Config())
        if options.docs_url is not None:
            check_docs_url(options.docs_url)
        self._by_config: dict[tuple[int, tuple[str, ...]], FileSettings] = {}

    def _cache_dir(self) -> Path:
        """Ruff's order: the command line, then the project's ``cache-dir`` (relative to
        its pyproject.toml), then $KERASFIT_CACHE_DIR, then ``.kerasfit_cache`` here."""
        if self.options.cache_dir is not None:
            return self.options.cache_dir
        configured = cache_dir_of(self.config_for(Path.cwd()), trusted=self._explicit is not None)
        return configured if configured is not None else default_cache_dir()

    def config_for(self, directory: Path) -> Config:
        if self._explicit is not None:
            return self._explicit
        if self.options.isolated:
            return _DEFAULT_CONFIG
        return find_config(directory) or _DEFAULT_CONFIG

    def settings_for(self, path: Path) -> FileSettings:
        cfg = self.config_for(path.parent)
        extra = per_file_ignores(cfg, path)
        key = (id(cfg), tuple(extra))
        cached = self._by_config.get(key)
        if cached is None:
            where = str(cfg.source or "config")
            sel = self.options.selection.merged_over(cfg)
            # every per-file-ignores entry, not only the ones matching this file
            fixables = (cfg.fixable or [], cfg.extend_fixable, cfg.unfixable)
            for s in (sel.select or [], sel.extend_select, sel.ignore, *cfg.per_file_ignores.values(), *fixables):
                validate_selectors(list(s), self.rules, where)
            target = effective_target(self.options.target, cfg)
            family = TARGETS[target].family
            chosen = select_rules(self.rules, sel, family, list(extra))
            opts: dict[str, int | str] = {}
            dtype = cfg.build.get("dtype")
            if isinstance(dtype, str):
                opts["dtype"] = dtype  # the model's compute dtype (semantic.precision)
            cores = self.options.cores or cfg.cores
            batch = self.options.batch_size or cfg.batch_size
            if cores:
                opts["cores"] = cores
            if batch:
                opts["batch_size"] = batch
            codes = tuple(r.code for r in chosen)
            cached = FileSettings(codes, target, tuple(sorted(opts.items())), unfixable_codes(codes, cfg),
                                  self.max_file_size_for(path))
            self._by_config[key] = cached
        return cached

    def max_file_size_for(self, path: Path) -> int:
        return self.options.max_file_size or self.config_for(path.parent).max_file_size or DEFAULT_MAX_FILE_SIZE

    def fail_on_for(self, path: Path) -> Severity:
        return Severity(self.options.fail_on or self.config_for(path.parent).fail_on or "warning")

    def excludes_for(self, directory: Path) -> tuple[tuple[str, ...], Path]:
        cfg = self.config_for(directory)
        return cfg.excludes(), cfg.root.resolve()


_DEFAULT_CONFIG = Config()


def unfixable_codes(codes: Sequence[str], cfg: Config) -> tuple[str, ...]:
    """Ruff's model: fixable (default ALL) plus extend-fixable, minus unfixable (which wins)."""
    fixable = [*(cfg.fixable if cfg.fixable is not None else ["ALL"]), *cfg.extend_fixable]
    return tuple(
        c for c in codes if not any(_matches(c, s) for s in fixable) or any(_matches(c, s) for s in cfg.unfixable)
    )


# ---- cache ---------------------------------------------------------------------------


class Cache:
    """Content-hash cache of check results (like ruff's): one JSON file per project.

    A result that rests on the whole tree (a tree-wide answer was asked for its file)
    names the tree's file hashes, kept once under ``trees``: as every file's own
    dependencies they made the cache quadratic in the files (0.9 MB for the 182 keras-io
    examples, and as many comparisons on every warm run).

    A file's entry holds its check result (``diagnostics``) and, once a fix run has made
    it, what fixing those bytes gives (``fixed``, per fix mode: the fixed text, the fixes
    applied, the findings left): a fix run answers a file whose check result offers no
    fix it would apply from the first, and ``--diff`` one whose fixes it made before from
    the second, without parsing it."""

    VERSION = 3  # 3: diagnostics carry their finding's kind and fields

    def __init__(self, directory: CacheDir | None) -> None:
        self.dir = directory
        self.name = f"results-v{self.VERSION}.json"
        self.entries: dict[str, dict[str, Any]] = {}
        self.trees: dict[str, dict[str, str]] = {}
        self.dirty = False
        self._digests: dict[str, str | None] = {}  # each dependency's content hash, read once a run
        self._trees_hold: dict[str, bool] = {}  # each tree's verdict, reached once a run
        raw = directory.read(self.name) if directory is not None else None
        if raw is not None:
            try:
                data = json.loads(raw)
                # valid JSON of another shape is ignored (and rewritten by this run)
                if isinstance(data, dict) and data.get("kerasfit") == __version__ and isinstance(data.get("files"), dict):
                    self.entries = data["files"]
                    trees = data.get("trees")
                    self.trees = trees if isinstance(trees, dict) else {}
            except (ValueError, RecursionError):
                self.entries = {}

    @property
    def path(self) -> Path | None:
        """Where the results live; None when this run does not use a cache."""
        if self.dir is None or self.dir.disabled:
            return None
        return self.dir.path / self.name

    @staticmethod
    def key(data: bytes, settings: FileSettings) -> str:
        return hashlib.sha256(data).hexdigest()[:32] + ":" + settings.fingerprint()

    def _entry(self, path: Path, key: str) -> dict[str, Any] | None:
        """The entry of ``path`` for these bytes and settings while what it rests on holds."""
        e = self.entries.get(str(path.resolve()))
        if not isinstance(e, dict) or e.get("key") != key:
            return None
        deps = e.get("deps")
        if deps:
            # a helper in another file changed: what this file's checks saw changed too
            if not isinstance(deps, dict) or any(self._digest(p) != d for p, d in deps.items()):
                return None
        tree = e.get("tree")
        if tree is not None and not self._tree_holds(tree):
            return None
        return e

    @staticmethod
    def _diagnostics(raw: Any, path: Path) -> list[Diagnostic] | None:
        try:
            # labelled with this run's spelling of the path, not the caching run's
            return [dataclasses.replace(Diagnostic.from_dict(d), filename=str(path)) for d in raw]
        except (KeyError, TypeError, ValueError, AttributeError):
            return None  # an entry that does not validate: checked again and rewritten

    def get(self, path: Path, key: str) -> list[Diagnostic] | None:
        """The check result of these bytes (None: not cached, or no longer valid)."""
        e = self._entry(path, key)
        return self._diagnostics(e.get("diagnostics"), path) if e is not None and "diagnostics" in e else None

    def get_fixed(self, path: Path, key: str, mode: str) -> tuple[str, int, list[Diagnostic]] | None:
        """What a fix run of ``mode`` ("safe" / "unsafe") made of these bytes: (fixed text,
        fixes applied, findings left), or None."""
        e = self._entry(path, key)
        fixed = e.get("fixed") if e is not None else None
        got = fixed.get(mode) if isinstance(fixed, dict) else None
        if not isinstance(got, dict) or not isinstance(got.get("source"), str) or not isinstance(got.get("applied"), int):
            return None
        diags = self._diagnostics(got.get("diagnostics"), path)
        return (got["source"], got["applied"], diags) if diags is not None else None

    def _digest(self, path: str) -> str | None:
        # a tree-wide answer makes every file depend on every other: read each one once a run
        if path not in self._digests:
            self._digests[path] = file_digest(path)
        return self._digests[path]

    def _tree_holds(self, tree: Any) -> bool:
        if not isinstance(tree, str):
            return False
        hit = self._trees_hold.get(tree)
        if hit is None:
            digests = self.trees.get(tree)
            hit = isinstance(digests, dict) and all(self._digest(p) == d for p, d in digests.items())
            self._trees_hold[tree] = hit
        return hit

    def put(self, path: Path, key: str, diags: list[Diagnostic], deps: dict[str, str] | None = None,
            tree: dict[str, str] | None = None, fixed: tuple[str, str, int] | None = None) -> None:
        """``tree``: the hashes of every file of the tree, when the result rests on them all.
        ``fixed``: (mode, fixed text, fixes applied) when ``diags`` are what a fix run left,
        not the check result of these bytes."""
        if self.path is None:
            return
        entry: dict[str, Any] = {"key": key}
        old = self._entry(path, key)
        if old is not None:  # the other half of the same bytes' entry, still valid: kept, with what it rests on
            entry.update((k, old[k]) for k in ("diagnostics", "fixed", "tree") if k in old)
            deps = {**(old.get("deps") or {}), **(deps or {})}
        if fixed is None:
            entry["diagnostics"] = [d.to_dict() for d in diags]
        else:
            mode, source, applied = fixed
            kept = entry.get("fixed")
            entry["fixed"] = {**(kept if isinstance(kept, dict) else {}),
                              mode: {"source": source, "applied": applied, "diagnostics": [d.to_dict() for d in diags]}}
        if deps:
            entry["deps"] = deps
        if tree is not None:
            name = hashlib.sha256(json.dumps(sorted(tree.items())).encode()).hexdigest()[:16]
            self.trees[name] = tree
            self._trees_hold[name] = True  # the hashes this run read
            entry["tree"] = name
        self.entries[str(path.resolve())] = entry
        self.dirty = True

    def save(self) -> None:
        """A read-only tree still gets its results, just not cached."""
        if not self.dirty or self.path is None or self.dir is None:
            return
        used = {e.get("tree") for e in self.entries.values() if isinstance(e, dict)}
        trees = {k: v for k, v in self.trees.items() if k in used}  # a tree no entry names any more goes
        data = json.dumps({"kerasfit": __version__, "files": self.entries, "trees": trees}).encode()
        self.dir.write(self.name, data, gitignore=True)


# ---- checking ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Job:
    path: str
    settings: FileSettings
    fix: bool
    unsafe: bool


def _run_job(job: _Job, text: str, index: ProjectIndex, parse_cache: ParseCache | None = None,
             stop: threading.Event | None = None) -> FileResult:
    from ..engine.fix import fix_source  # defers libcst: a run answered from the cache never loads it
    from ..engine.lint import lint_source  # defers libcst, as above

    settings = job.settings.lint_settings(index, stop)
    res = FileResult(job.path)
    index.asking(job.path)
    bom = text.startswith("\ufeff")
    body = text[1:] if bom else text
    try:
        if job.fix:
            outcome = fix_source(body, job.path, settings, unsafe=job.unsafe)
            res.diagnostics = outcome.diagnostics
            if outcome.error:
                res.error = outcome.error
            if outcome.source != body:
                res.fixed_source = ("\ufeff" if bom else "") + outcome.source
                res.fixes_applied = outcome.applied
        else:
            res.diagnostics = lint_source(body, job.path, settings, parse_cache).diagnostics
    except (RecursionError, MemoryError):  # CPython's parser says MemoryError when "too complex"
        res.error = f"{job.path}: too deeply nested to check, skipped"
    finally:
        index.asking(None)
    res.deps = index.own_deps_of(job.path)
    res.tree_wide = index.asked_tree(job.path)
    return res


def _run_file(job: _Job, text: str, index: ProjectIndex) -> FileResult:
    if job.path.endswith(".ipynb"):
        return _run_notebook(job, text, index)
    return _run_job(job, text, index)


def _run_notebook(job: _Job, text: str, index: ProjectIndex) -> FileResult:
    """``_run_job`` for a ``.ipynb`` file: check (and fix) the cells, map back."""
    from .notebook import Notebook, NotebookError, validate  # defers the notebook reader until a .ipynb is checked

    res = FileResult(job.path)
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    try:
        nb = Notebook.from_json(text[len(bom):], job.path)
    except NotebookError as exc:
        res.error = str(exc)
        return res
    limit = job.settings.max_file_size
    over = over_size_budget(job.path, over_limit(nb.module.encode("utf-8", "surrogatepass"), limit), limit)
    if over is not None:
        res.error = over
        return res
    inner = _run_job(_Job(job.path, job.settings, job.fix, job.unsafe), nb.module, index)
    res.error = inner.error
    where = nb
    if inner.fixed_source is not None:
        try:
            sources = nb.split(inner.fixed_source)
            fixed = nb.dumps(sources)
            validate(fixed, job.path)
            fixed = bom + fixed
        except NotebookError as exc:
            res.error = f"{job.path}: {exc}" if not str(exc).startswith(job.path) else str(exc)
            # nothing is written, so every finding of the notebook as it stands is still there
            unfixed = _run_job(_Job(job.path, job.settings, False, False), nb.module, index)
            res.diagnostics = [nb.to_cell(d)[1] for d in unfixed.diagnostics]
            return res
        if fixed != text:
            res.fixed_source = fixed
            res.fixes_applied = inner.fixes_applied
        # what is left was found in the fixed module: place it in the fixed cells
        where = Notebook.from_cells([(c.number, src) for c, src in zip(nb.cells, sources)])
    res.diagnostics = [where.to_cell(d)[1] for d in inner.diagnostics]
    return res


def _worker(batch: list[tuple[_Job, str]], index: ProjectIndex) -> list[FileResult]:
    # A checked file's tree is freed by reference counting as soon as its check returns:
    # the model, its parts and the rules hold no reference cycle (tests/test_memory.py),
    # so nothing waits for the cyclic collector, whose thresholds tune_gc() raises.
    # on one thread with the parse stack for the whole batch, not a thread per parse
    return on_parse_stack(lambda: [_run_file(job, text, index) for job, text in batch])


# A worker process's project index: handed over once when the pool forks the process
# (never pickled), then passed explicitly to every check the worker runs.
_FORKED_INDEX: list[ProjectIndex] = []


def _adopt_index(index: ProjectIndex) -> None:
    _FORKED_INDEX[:] = [index]
    interrupts.install(worker=True)  # a worker writes nothing: a signal ends it at once


def _forked_worker(batch: list[tuple[_Job, str]], reach: Reach | None = None) -> list[FileResult]:
    if reach is not None:
        _FORKED_INDEX[0].adopt_reach(reach)
    return _worker(batch, _FORKED_INDEX[0])


def _forked_reach_parts(paths: list[str]) -> list[ReachPart | None]:
    return [_FORKED_INDEX[0].reach_part(p) for p in paths]


def check_paths(paths: Sequence[str | Path], options: CheckOptions) -> RunResult:
    """Check files and directories; with ``options.fix`` compute (and unless ``diff``, write) fixes."""
    t0 = time.perf_counter()
    resolver = Resolver(options)
    baselines = _Baselines(options, resolver)  # a --baseline that cannot be read stops here
    cache = Cache(resolver.cache if options.use_cache else None)
    fixing = options.fix or options.diff
    mode = "unsafe" if options.unsafe_fixes else "safe"
    results: list[FileResult] = []
    pending: list[tuple[_Job, str, bytes]] = []
    prefiltered = 0
    writing = options.fix and not options.diff
    snapshots: dict[str, Snapshot | None] = {}  # what each file was when read (--fix)
    # lazy: another file is read when a check asks about it, within what a check here reads
    indexes = TreeIndexes(paths, index_bounds(paths, resolver.excludes_for, resolver.max_file_size_for))
    for cand in discover([Path(p) for p in paths], resolver.excludes_for, options.force_exclude):
        path = cand.path
        if cand.error is not None:
            results.append(FileResult(str(path), error=cand.error))
            continue
        read = _read_candidate(path, resolver, indexes.tree, snapshots if writing else None)
        if isinstance(read, FileResult):
            prefiltered += read.skipped
            results.append(read)
            continue
        data, text, over = read
        settings = resolver.settings_for(path)
        baselines.for_file(path)  # a config's baseline that cannot be read stops the run before --fix writes
        job = _Job(str(path), settings, fixing, options.unsafe_fixes)
        if cache.path is not None:
            hit = _cached(cache, path, Cache.key(data, settings), fixing, mode, writing)
            if hit is not None:
                results.append(hit)
                continue
        if over is not None:
            results.append(FileResult(job.path, error=over))
            continue
        pending.append((job, text, data))

    index = indexes.tree
    # the tree-wide answers before the checks (shared by a pool's workers) only when a rule
    # asks for them; else only a question that needs them computes them, in the one check
    rules = {r for settings in {job.settings for job, _, _ in pending} for r in settings.rules()}
    fresh = _execute([(j, t) for j, t, _ in pending], options.jobs, index, reads_project(rules))
    results.extend(fresh)
    if cache.path is not None:
        _cache_fresh(cache, pending, fresh, mode, index)

    if writing:
        _write_fixes(results, {job.path: (job, text) for job, text, _ in pending}, snapshots, checked_trees(paths),
                     cache, index)
    cache.save()
    if options.build is not None:  # after fixes are written: the build sees the file as left
        from .buildstage import run_stage  # defers the build stage: a static check never runs it

        run_stage(results, resolver, options.build)
    accepted = _accept_and_grade(results, baselines, resolver)
    results.sort(key=lambda r: r.filename)
    return RunResult(results, prefiltered, time.perf_counter() - t0, list(resolver.cache.warnings), accepted,
                     indexes.tree_files)


def _read_candidate(path: Path, resolver: Resolver, index: ProjectIndex,
                    snapshots: dict[str, Snapshot | None] | None) -> FileResult | tuple[bytes, str, str | None]:
    """One discovered file, read within its size limit: its bytes, text and over-limit
    message (None within it), or the result that ends it here (skipped by the prefilter,
    or an error). ``snapshots`` (under --fix) records what the file was when read."""
    limit = resolver.max_file_size_for(path)
    notebook = path.name.endswith(".ipynb")
    before = stat_or_none(path) if snapshots is not None else None
    try:
        data, text = read_source(path, notebook_json_limit(limit) if notebook else limit)
    except FileTooLarge as exc:
        # never read whole; the prefilter still skips it when it never mentions tensorflow/keras
        if not regular_file_contains(path, PREFILTER_NEEDLES):
            return FileResult(str(path), skipped=True)
        return FileResult(str(path), error=over_size_budget(str(path), Cost(exc.size, 0, 0), limit))
    except FileReadError as exc:
        return FileResult(str(path), error=str(exc))
    if snapshots is not None:
        snapshots[str(path)] = Snapshot.take(before, data)
    # (a notebook's source is measured once its JSON is read: _run_notebook)
    over = (notebook_over_budget(str(path), data, limit) if notebook
            else over_size_budget(str(path), over_limit(data, limit), limit))
    if not mentions_tensorflow(data) and (over is not None or not index.imports_framework(path, data)):
        return FileResult(str(path), skipped=True)  # (a file over the limit is not parsed for the prefilter's second chance)
    return data, text, over


def _cache_fresh(cache: Cache, pending: list[tuple[_Job, str, bytes]], fresh: list[FileResult], mode: str,
                 index: ProjectIndex) -> None:
    """Put each file checked this run in the cache (a fix it made under ``mode`` with it);
    a result that read the whole tree is keyed by the tree's digests too."""
    tree: dict[str, str] | None = None
    for (job, _, data), res in zip(pending, fresh):
        if res.error is not None:
            continue
        if res.tree_wide and tree is None:
            tree = index.tree_digests()
        fixed = (mode, res.fixed_source, res.fixes_applied) if res.fixed_source is not None else None
        cache.put(Path(job.path), Cache.key(data, job.settings), res.diagnostics, res.deps,
                  tree if res.tree_wide else None, fixed)


def _accept_and_grade(results: list[FileResult], baselines: _Baselines, resolver: Resolver) -> int:
    """Drop each file's findings its baseline accepts, and give each file with findings left
    its config's fail-on; returns how many were accepted."""
    accepted = 0
    for res in results:
        if res.skipped or (res.error and not res.diagnostics):
            continue
        accepted += baselines.accept(res)
        if res.diagnostics:  # (a path that could not be reached has none, and maybe no readable config)
            res.fail_on = resolver.fail_on_for(Path(res.filename))
    return accepted


def _write_fixes(results: list[FileResult], read: dict[str, tuple[_Job, str]], snapshots: dict[str, Snapshot | None],
                 trees: list[Path], cache: Cache, index: ProjectIndex) -> None:
    """Write each fixed file (--fix); a file that could not be written keeps its findings."""
    for res in results:
        if res.fixed_source is None:
            continue
        problem = write_fixed(Path(res.filename), res.fixed_source, snapshots.get(res.filename), trees)
        job, text = read[res.filename]
        if problem is not None:
            res.error = "; ".join(filter(None, (res.error, problem)))
            res.fixed_source = None
            res.fixes_applied = 0
            # the file still holds every finding the fixes would have removed
            res.diagnostics = _run_file(dataclasses.replace(job, fix=False), text, index).diagnostics
        elif cache.path is not None and not res.tree_wide and res.error is None:
            # the file now holds the fixed text, and what the fix run left is its check
            # result (a tree-wide answer rested on the tree as it was before the writes)
            cache.put(Path(res.filename), Cache.key(res.fixed_source.encode("utf-8"), job.settings), res.diagnostics,
                      res.deps)


def _cached(cache: Cache, path: Path, key: str, fixing: bool, mode: str, writing: bool) -> FileResult | None:
    """A file's result from the cache, without parsing it: its check result, in a fix run
    too when that offers no fix the run would apply; and for ``--diff``, the fixed text a
    fix run of the same mode made of the same bytes (``--fix`` makes the fixed text it
    writes, which it parses before it is kept)."""
    hit = cache.get(path, key)
    if hit is not None and not (fixing and any(allowed(d.fix, mode == "unsafe") for d in hit)):
        return FileResult(str(path), diagnostics=hit, cached=True)
    fixed = cache.get_fixed(path, key, mode) if fixing and not writing else None
    if fixed is None:
        return None
    source, applied, left = fixed
    return FileResult(str(path), diagnostics=left, fixed_source=source, fixes_applied=applied, cached=True)


class _Baselines:
    """Each file's baseline: ``--baseline``, else its config's ``baseline``; each file
    read once. One that cannot be read is a ConfigError (exit 2), never an empty one."""

    def __init__(self, options: CheckOptions, resolver: Resolver | None) -> None:
        self.options = options
        self.resolver = resolver
        self.loaded: dict[Path, Baseline] = {}
        if options.use_baseline and options.baseline is not None:
            from .baseline import Baseline  # defers the baseline reader (tokenize, the notebook reader): most runs have no baseline

            self.explicit: Baseline | None = Baseline.load(options.baseline)
        else:
            self.explicit = None

    def for_file(self, path: Path) -> Baseline | None:
        if not self.options.use_baseline:
            return None
        if self.explicit is not None:
            return self.explicit
        resolver = self.resolver or Resolver(self.options, manifest_cache=False)
        cfg = resolver.config_for(path.parent)
        if cfg.baseline is None:
            return None
        if cfg.baseline not in self.loaded:
            from .baseline import Baseline  # defers the baseline reader, as above

            where = f"{cfg.source}: [tool.kerasfit] baseline"
            if self.options.config_file is None:  # a project's own config: its baseline stays in it
                inside_project(cfg.baseline, cfg, f"{where} {os.path.relpath(cfg.baseline, cfg.root)!r}",
                               "; use --baseline for a baseline elsewhere")
            self.loaded[cfg.baseline] = Baseline.load(cfg.baseline, where)
        return self.loaded[cfg.baseline]

    def accept(self, res: FileResult, text: str | None = None) -> int:
        b = self.for_file(Path(res.filename))
        return b.accept(res, text if text is not None else res.fixed_source) if b is not None else 0


def accept_baseline(res: FileResult, text: str, options: CheckOptions) -> int:
    """A baseline applied to one checked text (stdin): its accepted findings dropped."""
    return _Baselines(options, None).accept(res, text)


def links_for(directory: Path, options: CheckOptions) -> Links:
    """Where rule links point for files under ``directory``: ``--docs-url``, else the
    config's ``docs-url``, else the installed pages (``file://``)."""
    if options.docs_url:
        return Links(options.docs_url)
    if options.config_file is not None:
        cfg: Config | None = load_config_file(options.config_file)
    elif options.isolated:
        cfg = None
    else:
        cfg = find_config(directory)
    return Links(cfg.docs_url if cfg is not None else None)


def checked_trees(paths: Sequence[str | Path]) -> list[Path]:
    """The real directories a run was asked to check: a directory named, or the one
    holding a file named. --fix writes nowhere else (a link out of them stays as is)."""
    return [Path(os.path.realpath(p if os.path.isdir(p) else Path(p).parent)) for p in paths]


def _execute(work: list[tuple[_Job, str]], jobs: int | None, index: ProjectIndex, tree_wide: bool) -> list[FileResult]:
    """Check ``work`` in this process or a pool. ``tree_wide``: the checks' rules read the
    project (``engine.settings.reads_project``), so the tree-wide answers are worth sharing."""
    n = jobs if jobs is not None else (os.cpu_count() or 1)
    if os.environ.get("KERASFIT_NO_PARALLEL"):
        n = 1
    limited = _memory_limited()
    if not limited and (n <= 1 or len(work) < PARALLEL_MIN_FILES):
        return _worker(work, index)
    if limited:
        # Under a memory limit a file too big to check kills its checker (libcst's parser
        # aborts when an allocation fails): check in workers so the death costs one file.
        n = max(1, min(n, len(work)))
    import multiprocessing as mp

    import libcst  # noqa: F401  - imported before fork so workers inherit it

    all_rules()
    chunks = deal([len(text) for _, text in work], n)
    try:
        ctx = mp.get_context("fork")
    except ValueError:  # pragma: no cover - platforms without fork
        return _worker(work, index)
    results: list[FileResult | None] = [None] * len(work)
    # Answers about a file that few files of the tree can change come from those files, in
    # the worker that asks (ProjectIndex.local_files, from a scan made here and inherited);
    # the whole tree's are worth computing before the checks only when some file needs them.
    share = tree_wide and any(index.local_files(job.path) is None for job, _ in work)
    lost = _run_chunks(ctx, work, chunks, results, index, n, share_reach=share)
    # A worker that died (a native crash, the OOM killer) took its chunk with it: check
    # those files again one per process, so the death is pinned on one file and the
    # others still get their results.
    for i in lost:
        _run_chunks(ctx, work, [[i]], results, index, 1)
    # a slot still empty is a file whose worker died again, alone
    return [
        r if r is not None else FileResult(job.path, error=f"{job.path}: the checker process died on this file, not checked")
        for r, (job, _) in zip(results, work)
    ]


def _memory_limited() -> bool:
    """An address-space or data-segment limit is set (``ulimit -v`` / ``-d``)."""
    import resource

    return any(resource.getrlimit(r)[0] != resource.RLIM_INFINITY for r in (resource.RLIMIT_AS, resource.RLIMIT_DATA))


def deal(sizes: Sequence[int], workers: int) -> list[list[int]]:
    """The indices of work items of these sizes in chunks for ``workers`` processes that
    each take the next chunk when done: biggest first, each chunk a sixth of what is left
    per worker (guided scheduling: large chunks keep IPC low, the small last ones even
    out the finish; a fixed half per worker left one idle ~7% of a keras-io check)."""
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    chunks: list[list[int]] = []
    i = 0
    while i < len(order):
        size = max(1, (len(order) - i) // (3 * workers))
        chunks.append(order[i:i + size])
        i += size
    return chunks


def _run_chunks(ctx: BaseContext, work: list[tuple[_Job, str]], chunks: list[list[int]],
                results: list[FileResult | None], index: ProjectIndex, workers: int,
                share_reach: bool = False) -> list[int]:
    """Run chunks in worker processes; the indices whose worker died (never a hang).

    ``share_reach``: first compute the tree-wide answers (``ProjectIndex.reach_part``),
    the tree's files dealt out to the same workers, and hand the joined answers to every
    check: each worker asking for them alone recomputed them all (1.6 s CPU per process
    on the 182 keras-io examples). Only where some file's answers need the whole tree's:
    else each worker answers from the few files that decide (``local_files``)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    lost: list[int] = []
    with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_adopt_index, initargs=(index,)) as pool:
        try:
            reach: Reach | None = None
            if share_reach:
                try:
                    reach = _shared_reach(pool, index, workers)
                except BrokenProcessPool:  # a worker died reading the tree: each check computes its own
                    return _run_chunks(ctx, work, chunks, results, index, workers)
                index.adopt_reach(reach)  # (a file checked again in a process of its own inherits it)
            futures = [(c, pool.submit(_forked_worker, [work[i] for i in c], reach)) for c in chunks]
            for c, fut in futures:
                try:
                    out = fut.result()
                except BrokenProcessPool:
                    lost.extend(c)
                    continue
                for i, r in zip(c, out):
                    results[i] = r
        except interrupts.Terminated as exc:  # the run ends by a signal: so do its workers, now
            for p in multiprocessing.active_children():
                try:
                    os.kill(p.pid, exc.signum)  # type: ignore[arg-type]  # (a started process has a pid)
                except OSError:
                    pass
            raise
    return lost


def _shared_reach(pool: Executor, index: ProjectIndex, n: int) -> Reach:
    files = index.reach_files()
    sizes = {}
    for f in files:
        try:
            sizes[f] = os.stat(f).st_size
        except OSError:
            sizes[f] = 0
    futures = [(d, pool.submit(_forked_reach_parts, [files[i] for i in d])) for d in deal([sizes[f] for f in files], n)]
    parts: list[ReachPart | None] = [None] * len(files)
    for d, fut in futures:
        for i, part in zip(d, fut.result()):
            parts[i] = part
    return join_reach(parts)


def check_source(
    source: str,
    filename: str | Path,
    options: CheckOptions | None = None,
    *,
    fix: bool = False,
    unsafe: bool = False,
    parse_cache: ParseCache | None = None,
    file_settings: FileSettings | None = None,
    project: ProjectIndex | None = None,
    stop: threading.Event | None = None,
) -> FileResult:
    """Check text that may not be saved (the language server's case); never writes.

    ``parse_cache`` (an ``engine.parse.ParseCache`` kept per document) lets repeated checks of
    an edited buffer re-parse only the top-level statements that changed.
    ``file_settings`` (from :func:`settings_for`) skips resolving the configuration:
    the server keeps the last good ones to check with while a setting is broken.
    ``project``: the index of the tree the file belongs to (default: the file alone).
    ``stop``: set from another thread, the check raises ``engine.settings.Stopped`` at its next
    top-level statement (the server's, for a document closed or changed meanwhile).
    """
    options = options or CheckOptions()
    resolver = Resolver(options, manifest_cache=False)
    settings = file_settings if file_settings is not None else resolver.settings_for(Path(filename))
    res = _run_job(_Job(str(filename), settings, fix, unsafe), source, project or ProjectIndex(), parse_cache, stop)
    try:
        res.fail_on = resolver.fail_on_for(Path(filename))
    except ConfigError:  # a broken config: the server checks with its last good settings
        pass
    return res


def tree_indexes(roots: Sequence[str | Path], options: CheckOptions | None = None) -> TreeIndexes:
    """The project indexes of a tree (the language server's, per workspace folder), reading
    only what a check of the tree would (excludes, max-file-size); while the configuration
    is broken, within the default bounds."""
    try:
        resolver = Resolver(options or CheckOptions(), manifest_cache=False)
        bounds = index_bounds(roots, resolver.excludes_for, resolver.max_file_size_for)
    except ConfigError:
        bounds = None
    return TreeIndexes(roots, bounds)


def settings_for(path: str | Path, options: CheckOptions | None = None) -> FileSettings:
    return Resolver(options or CheckOptions(), manifest_cache=False).settings_for(Path(path))


__all__ = [
    "CheckOptions",
    "ConfigError",
    "RunResult",
    "check_paths",
    "check_source",
    "settings_for",
    "Candidate",
]


def tune_gc() -> None:
    """A libcst parse allocates hundreds of thousands of short-lived nodes; the default
    gen-0 threshold (700) makes the cyclic collector rescan them constantly (~20% of a
    cold check, measured). Nodes are freed by reference counting; only the rare cycles
    need the collector, so collect far less often. Front ends only: a library must not
    change its host's collector."""
    gc.set_threshold(100_000, 50, 100)
