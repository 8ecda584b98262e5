"""``kerasfit lsp``: a language server (pygls) with diagnostics, quick fixes and hover.

A thin front end over :func:`kerasfit.project.check.check_source` (STYLE 7): the engine and the
configuration are the CLI's, and every diagnostic goes through
:func:`kerasfit.project.reporters.lsp_diagnostic`, so the server and
``kerasfit check --output-format lsp`` publish the same objects.

Linting runs on one worker thread so the event loop keeps reading messages; results
for a document version that is no longer current are dropped, never published.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Generator, Iterable, Iterator, cast

from lsprotocol import types
from lsprotocol.converters import get_converter
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument
from urllib.parse import unquote

from .. import __version__
from ..project.check import CheckOptions, FileSettings, check_source, links_for, project_index, settings_for, tune_gc
from ..engine.parse import ParseCache
from ..engine.fix import add_imports, apply_fixes
from .memo import StatementMemo
from ..project.notebook import Notebook, NotebookError
from ..engine.registry import all_rules, rule_by_name_or_code
from ..semantic.index import ProjectIndex
from ..project.config import ConfigError, Selection, _load_pyproject, find_config, over_size_budget
from ..core.sourcefile import over_limit
from ..project.discovery import mentions_tensorflow
from ..core.docpages import Links
from ..engine.suppressions import Comments
from ..project.reporters import lsp_diagnostic
from ..engine.settings import SYNTAX_ERROR_CODE, Stopped
from ..engine.fix import allowed
from ..core.types import Applicability, Diagnostic, FileResult, Fix
from . import edits as E
from .capabilities import same_answer
from .framing import serve_stdio, serve_tcp
from .guard import DEFAULT_LINT_TIMEOUT_MS, LintRunner, LintTimeout, notice

log = logging.getLogger("kerasfit.lsp")

FIX_ALL_KIND = "source.fixAll.kerasfit"
NOTEBOOK_FIX_ALL_KIND = "notebook.source.fixAll.kerasfit"
DEFAULT_DEBOUNCE_MS = 200
# A document this large (about 7,000 lines) is checked on a lane of its own, so the checks
# of small documents, and the hovers and fixes that wait for them, never queue behind it.
DEFAULT_LARGE_DOCUMENT_BYTES = 256 * 1024
PYTHON_SUFFIXES = (".py", ".pyi")
CONFIG_FILES = ("/pyproject.toml", "/kerasfit.toml")
_CONVERTER = get_converter()


# ---- settings -------------------------------------------------------------------------


@dataclass
class Settings:
    """Editor-side settings (initializationOptions / didChangeConfiguration), over pyproject."""

    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    target: str | None = None
    unsafe_fixes: bool = False
    debounce_ms: int = DEFAULT_DEBOUNCE_MS
    batch_size: int | None = None
    cores: int | None = None
    lint_timeout_ms: int = DEFAULT_LINT_TIMEOUT_MS
    log_level: str = "warning"  # window/logMessage from this level up
    large_document_bytes: int = DEFAULT_LARGE_DOCUMENT_BYTES

    @classmethod
    def from_client(cls, raw: Any) -> Settings:
        """Accepts ``{"kerasfit": {...}}`` or the inner table; camelCase or kebab-case keys."""
        if not isinstance(raw, dict):
            return cls()
        if isinstance(raw.get("kerasfit"), dict):
            raw = raw["kerasfit"]
        norm = {k.replace("-", "").replace("_", "").lower(): v for k, v in raw.items()}

        def codes(key: str) -> list[str] | None:
            v = norm.get(key)
            if v is None:
                return None
            if isinstance(v, str):
                v = [x for x in v.replace(",", " ").split()]
            return [str(x) for x in v]

        def pos_int(key: str) -> int | None:
            v = norm.get(key)
            return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None

        debounce = norm.get("debouncems")
        return cls(
            select=codes("select"),
            extend_select=codes("extendselect") or [],
            ignore=codes("ignore") or [],
            target=str(norm["target"]) if norm.get("target") else None,
            unsafe_fixes=bool(norm.get("unsafefixes", False)),
            debounce_ms=int(debounce) if isinstance(debounce, (int, float)) and debounce >= 0 else DEFAULT_DEBOUNCE_MS,
            batch_size=pos_int("batchsize"),
            cores=pos_int("cores"),
            lint_timeout_ms=pos_int("linttimeoutms") or DEFAULT_LINT_TIMEOUT_MS,
            log_level=str(norm.get("loglevel", "warning")).lower(),
            large_document_bytes=pos_int("largedocumentbytes") or DEFAULT_LARGE_DOCUMENT_BYTES,
        )

    def check_options(self) -> CheckOptions:
        return CheckOptions(
            selection=Selection(select=self.select, extend_select=self.extend_select, ignore=self.ignore),
            target=self.target,
            unsafe_fixes=self.unsafe_fixes,
            use_cache=False,
            batch_size=self.batch_size,
            cores=self.cores,
        )


# ---- per-document state ---------------------------------------------------------------


@dataclass
class Linted:
    version: int | None
    source: str
    result: FileResult
    lsp: list[dict[str, Any]]  # lsp_diagnostic dicts, parallel to result.diagnostics
    notice: str | None = None  # why the document was not (fully) checked
    cells: CellsView | None = None  # a notebook's: the findings per cell
    warning: str | None = None  # a configuration error; checked with the last good settings


@dataclass
class CellsView:
    """A notebook linted as one module (kerasfit.project.notebook), its findings per cell."""

    nb: Any  # kerasfit.project.notebook.Notebook
    keys: list[str]  # cell document keys, parallel to nb.cells
    # per cell key: (index into result.diagnostics, the diagnostic in cell rows, its LSP dict)
    found: dict[str, list[tuple[int, Diagnostic, dict[str, Any]]]] = field(default_factory=dict)


@dataclass
class View:
    """What code actions and hover see of one document (a file, or a notebook's cell)."""

    key: str  # the document asked about
    lint_key: str  # what was linted: the document, or its notebook
    linted: Linted
    found: list[tuple[int, Diagnostic, dict[str, Any]]]
    text: str
    version: int | None


class _Protocol(LanguageServerProtocol):
    # (id, result) of an initialize that kerasfit.lsp.boot answered before pygls was loaded
    pre_answered: tuple[Any, Any] | None = None

    # pygls's private response hook (pinned: pygls>=2.0,<2.2 in pyproject; tests/lsp/test_lsp_boot.py)
    def _send_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        if self.pre_answered is not None and msg_id == self.pre_answered[0]:
            _check_pre_answered(self, self.pre_answered[1], result, error)
            self.pre_answered = None
            self._result_types.pop(msg_id, None)
            return  # the client has its answer already
        super()._send_response(msg_id, result, error)

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Generator[Any, Any, Any]:
        # Columns are UTF-16 code units (the LSP default every client supports), the same
        # unit `kerasfit check --output-format lsp` writes. Hide any other preference so
        # pygls does not negotiate UTF-8 / UTF-32 with clients that offer them.
        general = params.capabilities.general
        if general is not None and general.position_encodings:
            general.position_encodings = [types.PositionEncodingKind.Utf16]
        return (yield from super().lsp_initialize(params))

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> Generator[Any, Any, Any]:
        server = cast("KerasfitServer", self._server)
        server.exit_code = 0 if self._shutdown else 1  # the LSP exit status
        if not getattr(server, "tcp", False):
            return (yield from super().lsp_exit(*args))
        # Over TCP pygls would raise SystemExit inside the connection callback (a
        # traceback, and the listener stays up); stop the listener instead, and let
        # serve() exit with the LSP exit code.
        if self.writer is not None:
            self.writer.close()
        server.shutdown()  # type: ignore[no-untyped-call]  # pygls leaves it unannotated


class KerasfitServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "kerasfit",
            __version__,
            protocol_cls=_Protocol,
            notebook_document_sync=types.NotebookDocumentSyncOptions(
                notebook_selector=[
                    types.NotebookDocumentFilterWithCells(cells=[types.NotebookCellLanguage(language="python")], notebook="*")
                ]
            ),
        )
        self.settings = Settings()
        # Everything per document is keyed by the URI as pygls keys its workspace
        # (percent-decoded); ``uris`` keeps the spelling the client sent, to answer with.
        self.uris: dict[str, str] = {}
        self.pending: dict[str, asyncio.Task[None]] = {}
        self.loop: asyncio.AbstractEventLoop | None = None  # the server's, for logging from the lint thread
        self.linted: dict[str, Linted] = {}
        self.lints = LintRunner()  # small documents
        self.large_lints = LintRunner()  # documents of large_document_bytes or more
        # per document: the running check's version and its stop flag, set when the
        # document closes or changes again (the check ends at its next statement)
        self.running: dict[str, list[tuple[int | None, threading.Event]]] = {}
        self.large_busy = 0  # checks now running on the large lane
        # per open document: re-parse only the top-level statements an edit touched
        self.parse_caches: dict[str, ParseCache] = {}
        self.reported_errors: set[str] = set()
        self.docs_cache: dict[str, str] = {}
        self.lint_count = 0
        self.good_settings: dict[str, FileSettings] = {}
        self.tcp = False
        self.exit_code = 0

    @property
    def executor(self) -> ThreadPoolExecutor:
        return self.lints.executor

    def lane(self, key: str) -> LintRunner:
        """The lint thread for a document: its own for a large one, the shared one otherwise."""
        snap = self.snapshot(key)
        large = snap is not None and len(snap[1]) >= self.settings.large_document_bytes
        return self.large_lints if large else self.lints

    async def run_guarded(self, uri: str, fn: Callable[..., Any], *args: Any,
                          stop: threading.Event | None = None) -> Any:
        """``fn(*args)`` on the document's lint thread, within the lint time budget; a
        check left behind at the budget is told to ``stop``."""
        return await self.lane(uri).run(uri, self.settings.lint_timeout_ms / 1000, fn, *args, stop=stop)

    def supersede(self, key: str, reason: str, keep: int | None = None) -> None:
        """Stop the document's running checks at their next statement (it changed or
        closed); ``keep``: a version whose checks are still wanted."""
        for version, stop in self.running.get(key, ()):
            if version != keep and not stop.is_set():
                stop.set()
                log.info("stopping the check of %s: %s", key, reason)

    # ---- linting ----------------------------------------------------------------------

    def remember(self, uri: str) -> str:
        """The key of a document the client opened; answers use the client's spelling."""
        key = doc_key(uri)
        self.uris[key] = uri
        return key

    def document(self, key: str) -> TextDocument | None:
        doc: TextDocument | None = self.workspace.text_documents.get(key)
        return doc

    def is_python(self, key: str) -> bool:
        if key in self.workspace.notebook_documents:
            return True
        doc = self.document(key)
        if doc is None:
            return False
        return doc.language_id == "python" or key.endswith(PYTHON_SUFFIXES)

    def path_for(self, key: str) -> str:
        uri = self.uris.get(key, key)
        path = to_fs_path(uri)
        if path:
            return path
        # untitled: buffers are configured like a file at the workspace root
        root = self.workspace.root_path or str(Path.cwd())
        return str(Path(root) / (uri.rsplit("/", 1)[-1] or "untitled.py"))

    def workspace_index(self) -> ProjectIndex:
        """One project index per workspace folder, kept across checks: other files are
        read lazily when a check asks about them, and re-read when they change on disk."""
        root = self.workspace.root_path or str(Path.cwd())
        index = getattr(self, "_project_index", None)
        if index is None or getattr(self, "_project_root", None) != root:
            index = self._project_index = project_index([root], self.settings.check_options())
            self._project_root = root
        return index

    def lint_now(self, uri: str, source: str, version: int | None, *, fix: bool = False,
                 stop: threading.Event | None = None) -> Linted:
        """Runs on the worker thread. Never raises: an engine failure becomes a log line."""
        path = self.path_for(uri)
        project = self.workspace_index()
        data = source.encode("utf-8", "surrogatepass")
        file_settings, warning = self.file_settings(uri, path)
        cost = over_limit(data, file_settings.max_file_size)
        if not fix and not mentions_tensorflow(data) and (cost is not None or not project.imports_framework(path, data)):
            # The CLI's prefilter: a file that never mentions TF/Keras has nothing to report
            # (one over the size limit is not parsed to find out that it imports them).
            return Linted(version, source, FileResult(path, skipped=True), [])
        over = over_size_budget(path, cost, file_settings.max_file_size)
        if over is not None:  # the CLI's size budget: one diagnostic, and no parse of it kept
            self.parse_caches.pop(uri, None)
            return Linted(version, source, FileResult(path, error=over), [],
                          f"kerasfit did not check this file: {over}", warning=warning)
        cache = None if fix else self.parse_caches.get(uri)
        if cache is None and not fix:
            # the document's parse, and its findings kept per statement between checks
            cache = self.parse_caches[uri] = ParseCache(reuse=StatementMemo())
        try:
            result = check_source(
                source, path, fix=fix, unsafe=self.settings.unsafe_fixes, parse_cache=cache, file_settings=file_settings,
                project=project, stop=stop,
            )
        except Stopped:
            # here, not where the check was awaited: a closed document's task is cancelled
            log.info("the check of %s stopped before its end", uri)
            raise
        lines = E.split_lines(source[1:] if source.startswith("\ufeff") else source)

        def line_text(row: int) -> str:
            return lines[row - 1] if 0 < row <= len(lines) else ""

        links = self.links_for(path)
        diags = [lsp_diagnostic(d, line_text, links) for d in result.diagnostics]
        if source.startswith("\ufeff"):
            for d in diags:  # the engine does not count a BOM; the client does
                _shift_bom(d)
        # a refusal (too deep to parse, a parse guard) is said on the document, not dropped
        notice = f"kerasfit did not check this file: {result.error}" if result.error and not diags else None
        return Linted(version, source, result, diags, notice, warning=warning)

    def links_for(self, path: str) -> Links:
        """Where the document's rule links point (its config's docs-url, else the installed pages)."""
        try:
            return links_for(Path(path).parent, self.settings.check_options())
        except ConfigError:  # said once by file_settings; the links fall back to the installed pages
            return Links()

    def file_settings(self, key: str, path: str) -> tuple[FileSettings, str | None]:
        """The document's settings, or, while the editor's settings or a config file are
        broken, the last good ones (defaults for a document never checked) and the error."""
        try:
            fs = settings_for(path, self.settings.check_options())
        except ConfigError as exc:
            good = self.good_settings.get(key)
            if good is None:
                try:  # the editor's settings without config files, else plain defaults
                    good = settings_for(path, dataclasses.replace(self.settings.check_options(), isolated=True))
                except ConfigError:
                    good = settings_for(path, CheckOptions(use_cache=False, isolated=True))
            return good, f"{exc}; checking with the last good settings"
        self.good_settings[key] = fs
        return fs, None

    async def lint(self, uri: str) -> Linted | None:
        """Lint the document's current text; None when it changed or closed meanwhile.

        ``uri`` is a document key (:func:`doc_key`)."""
        snap = self.snapshot(uri)
        if snap is None:
            return None
        version, source, cells = snap
        cached = self.linted.get(uri)
        if cached is not None and cached.version == version and cached.source == source:
            return cached
        self.supersede(uri, f"version {version} replaces it", keep=version)
        stop = threading.Event()
        mine = (version, stop)
        self.running.setdefault(uri, []).append(mine)
        lane = self.lane(uri)
        large = lane is self.large_lints
        self.large_busy += large
        try:
            if lane.held_back(uri):
                raise LintTimeout(self.settings.lint_timeout_ms / 1000)
            linted: Linted = await self.run_guarded(uri, functools.partial(self.lint_now, stop=stop),
                                                    uri, source, version, stop=stop)
        except Stopped:
            return None  # closed or changed meanwhile: nothing to publish
        except ConfigError as exc:
            self.config_error(str(exc))
            return None
        except LintTimeout as exc:
            log.warning("checking %s took longer than %g s; left unchecked", uri, exc.args[0])
            linted = _unchecked(source, version, uri, f"kerasfit did not check this file: checking "
                                f"took longer than {exc.args[0]:g} s")
        except RuntimeError:  # executor shut down: the server is exiting
            return None
        except Exception as exc:  # an internal error must not take the server down
            log.exception("linting %s failed", uri)
            one_line = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            linted = _unchecked(source, version, uri, f"kerasfit could not check this file "
                                f"(internal error): {one_line}")
        finally:
            self.large_busy -= large
            runs = self.running.get(uri, [])
            if mine in runs:
                runs.remove(mine)
            if not runs:
                self.running.pop(uri, None)
        current = self.snapshot(uri)
        if current is None or current[0] != version or current[1] != source:
            return None  # stale: a newer change is (or will be) linted
        if linted.warning:
            self.config_error(linted.warning)
        if cells is not None:
            linted.cells = self.per_cell(cells, linted)
        self.linted[uri] = linted
        return linted

    def snapshot(self, key: str) -> tuple[int | None, str, CellsView | None] | None:
        """(version, text to lint, notebook cells or None) of an open document or notebook."""
        doc = self.document(key)
        if doc is not None:
            return doc.version, doc.source, None
        nbdoc = self.workspace.notebook_documents.get(key)
        if nbdoc is None:
            return None
        sources, keys = [], []
        for i, cell in enumerate(nbdoc.cells, start=1):
            cdoc = self.document(doc_key(cell.document))
            if cell.kind != types.NotebookCellKind.Code or cdoc is None:
                continue
            if (cdoc.language_id or "python") != "python":
                continue
            sources.append((i, cdoc.source))
            keys.append(doc_key(cell.document))
        nb = Notebook.from_cells(sources)
        return nbdoc.version, nb.module, CellsView(nb, keys)

    def per_cell(self, cells: CellsView, linted: Linted) -> CellsView:
        cells.found = {k: [] for k in cells.keys}
        texts = [E.split_lines(c.source) for c in cells.nb.cells]
        links = self.links_for(linted.result.filename)
        for i, d in enumerate(linted.result.diagnostics):
            k, local = cells.nb.to_cell(d)
            lines = texts[k]
            lsp_d = lsp_diagnostic(local, lambda row: lines[row - 1] if 0 < row <= len(lines) else "", links)
            cells.found[cells.keys[k]].append((i, local, lsp_d))
        return cells

    def notebook_of(self, key: str) -> str | None:
        nbdoc = self.workspace.get_notebook_document(cell_uri=key)
        return doc_key(nbdoc.uri) if nbdoc is not None else None

    async def view(self, key: str) -> View | None:
        nb_key = self.notebook_of(key)
        linted = await self.lint(nb_key or key)
        if linted is None:
            return None
        if nb_key is None or linted.cells is None:
            found = [(i, d, l) for i, (d, l) in enumerate(zip(linted.result.diagnostics, linted.lsp))]
            return View(key, key, linted, found, linted.source, linted.version)
        doc = self.document(key)
        if doc is None:
            return None
        return View(key, nb_key, linted, linted.cells.found.get(key, []), doc.source, doc.version)

    def edit_to(self, lint_key: str, linted: Linted, new: str | None) -> types.WorkspaceEdit | None:
        """The edit that turns what was linted into ``new`` (a file, or every changed cell)."""
        if new is None or new == linted.source:
            return None
        if linted.cells is None:
            edit = E.minimal_edit(linted.source, new)
            return _edit(self.uris.get(lint_key, lint_key), linted.version, [edit], _CONVERTER) if edit else None
        try:
            texts = linted.cells.nb.split(new)
        except NotebookError as exc:
            log.info("fix not offered: %s", exc)
            return None
        changes = []
        for cell, key, text in zip(linted.cells.nb.cells, linted.cells.keys, texts):
            doc = self.document(key)
            edit = E.minimal_edit(cell.source, text) if doc is not None and text != cell.source else None
            if edit is not None and doc is not None:
                changes.append(
                    types.TextDocumentEdit(
                        text_document=types.OptionalVersionedTextDocumentIdentifier(uri=self.uris.get(key, key), version=doc.version),
                        edits=[_CONVERTER.structure(edit, types.TextEdit)],
                    )
                )
        return types.WorkspaceEdit(document_changes=changes) if changes else None

    def collect_garbage(self) -> None:
        """On the lint thread, once diagnostics are out: free the last lint's cycles.

        The analysis leaves reference cycles (bindings <-> scopes) holding whole trees,
        and the thresholds ``tune_gc`` sets for speed let a long editing session pile
        them up (98 -> 847 MB over 300 edits of a 10,000-line file). After the first lint
        everything alive (modules, rules, the first tree) is frozen out of the
        collector's sight, so a full collection after each lint only walks what lints
        made since (with the trim below, 8-21 ms of CPU per pass at 2,000 lines, measured
        at load 9; it runs after the diagnostics are out). Collecting only the young
        generations (and all of them every 25 lints) left cycles that had aged holding
        memory for up to 25 lints.

        What a lint frees is mostly returned to the C allocator, not to the system:
        ``malloc_trim`` gives glibc's free pages back (without it RSS crept 105 -> 175 MB
        over 300 edits of 10,000 lines with the live objects flat).
        """
        import gc

        self.lint_count += 1
        if self.large_busy:
            # a full pass would walk the tree a large document's check is building on the
            # other lane, holding the GIL the small documents' checks need: young objects only
            gc.collect(0)
            return
        gc.collect()
        if self.lint_count == 1:
            gc.freeze()
        trim = _malloc_trim()
        if trim is not None:
            trim(0)

    async def publish(self, uri: str) -> None:
        linted = await self.lint(uri)
        if linted is None:
            return
        try:
            self._publish(uri, linted)
        finally:
            # after the diagnostics are written: a collection holds the GIL, and the
            # publication (JSON, the write) needs it too
            try:
                self.lane(uri).executor.submit(self.collect_garbage)
            except RuntimeError:  # shutting down
                pass

    def _publish(self, uri: str, linted: Linted) -> None:
        if linted.cells is not None:
            for key in linted.cells.keys:
                doc = self.document(key)
                self.text_document_publish_diagnostics(
                    types.PublishDiagnosticsParams(
                        uri=self.uris.get(key, key),
                        version=doc.version if doc is not None else None,
                        diagnostics=[_CONVERTER.structure(l, types.Diagnostic) for _, _, l in linted.cells.found[key]],
                    )
                )
            return
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=self.uris.get(uri, uri),
                version=linted.version,
                diagnostics=[_CONVERTER.structure(d, types.Diagnostic)
                             for d in linted.lsp + ([notice(linted.notice)] if linted.notice else [])],
            )
        )

    def schedule(self, uri: str, delay_ms: float = 0) -> None:
        """(Re)start the document's debounce timer; a later change cancels an earlier one."""
        uri = self.notebook_of(uri) or uri  # a cell is checked with its notebook
        if not self.is_python(uri):
            return
        old = self.pending.pop(uri, None)
        if old is not None and not old.done():
            old.cancel()

        async def run() -> None:
            if delay_ms:
                await asyncio.sleep(delay_ms / 1000)
            await self.publish(uri)

        task = asyncio.ensure_future(run())
        self.pending[uri] = task
        task.add_done_callback(lambda t: self.pending.pop(uri, None) if self.pending.get(uri) is t else None)

    def forget(self, key: str) -> None:
        task = self.pending.pop(key, None)
        if task is not None:
            task.cancel()
        self.supersede(key, "the document was closed")
        # what was kept for the document goes with it (the parse pieces, the last result)
        self.parse_caches.pop(key, None)
        self.linted.pop(key, None)
        self.uris.pop(key, None)

    def relint_all(self) -> None:
        self.linted.clear()
        self.reported_errors.clear()
        for key in list(self.uris):
            self.schedule(key)

    def reload_config(self) -> None:
        find_config.cache_clear()
        _load_pyproject.cache_clear()
        self.relint_all()

    def config_error(self, message: str) -> None:
        """Show each distinct configuration error once (not once per keystroke)."""
        if message in self.reported_errors:
            return
        self.reported_errors.add(message)
        log.error("%s", message)
        self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=f"kerasfit: {message}"))

    # ---- code actions / hover helpers -------------------------------------------------

    def rule_paragraph(self, code: str) -> str:
        if code not in self.docs_cache:
            rule = rule_by_name_or_code(code)
            self.docs_cache[code] = E.rule_paragraph(rule.documentation()) if rule is not None else ""
        return self.docs_cache[code]


_TRIM: list[Any] = []


def _malloc_trim() -> Any:
    """glibc's ``malloc_trim``, or None (another C library, another system)."""
    if not _TRIM:
        try:
            import ctypes

            _TRIM.append(ctypes.CDLL("libc.so.6").malloc_trim)
        except (OSError, AttributeError):
            _TRIM.append(None)
    return _TRIM[0]


def _check_pre_answered(protocol: LanguageServerProtocol, sent: Any, result: Any, error: Any) -> None:

    ours = protocol._converter.unstructure(result) if error is None else None
    if error is not None or not same_answer(sent, ours):
        log.warning("initialize was answered with %s, but the server would answer %s; "
                    "run scripts/gen_lsp_capabilities.py", json.dumps(sent), json.dumps(ours) if error is None else error)


def _unchecked(source: str, version: int | None, uri: str, why: str) -> Linted:
    return Linted(version, source, FileResult(to_fs_path(uri) or uri, error=why), [], why)


_LEVELS = {"error": logging.ERROR, "warning": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG}
_MESSAGE_TYPE = {logging.ERROR: types.MessageType.Error, logging.WARNING: types.MessageType.Warning,
                 logging.INFO: types.MessageType.Info, logging.DEBUG: types.MessageType.Log}


class ClientLogHandler(logging.Handler):
    """``kerasfit.lsp`` log records as window/logMessage, from ``settings.logLevel`` up.

    Records may come from the lint thread; the message is sent from the event loop.
    """

    def __init__(self, ls: KerasfitServer) -> None:
        super().__init__(logging.DEBUG)
        self.ls = ls

    def emit(self, record: logging.LogRecord) -> None:
        ls = self.ls
        if record.levelno < _LEVELS.get(ls.settings.log_level, logging.WARNING):
            return
        loop = getattr(ls, "loop", None)
        if loop is None or loop.is_closed():
            return
        kind = _MESSAGE_TYPE[max(k for k in _MESSAGE_TYPE if k <= max(record.levelno, logging.DEBUG))]
        params = types.LogMessageParams(type=kind, message=f"kerasfit: {self.format(record)}")
        try:
            loop.call_soon_threadsafe(ls.window_log_message, params)
        except RuntimeError:  # loop closed while exiting
            pass


def doc_key(uri: str) -> str:
    """How pygls keys its workspace: the percent-decoded URI (``c%3A`` is ``c:``)."""
    return unquote(uri)


def _shift_bom(d: dict[str, Any]) -> None:
    def ranges(obj: Any) -> Iterator[dict[str, Any]]:
        if isinstance(obj, dict):
            if "start" in obj and "end" in obj and isinstance(obj["start"], dict):
                yield obj
            for v in obj.values():
                yield from ranges(v)
        elif isinstance(obj, list):
            for v in obj:
                yield from ranges(v)

    for r in list(ranges(d)):
        for p in (r["start"], r["end"]):
            if p.get("line") == 0:
                p["character"] += 1


server = KerasfitServer()


# ---- lifecycle ------------------------------------------------------------------------


@server.feature(types.INITIALIZE)
def initialize(ls: KerasfitServer, params: types.InitializeParams) -> None:
    ls.settings = Settings.from_client(params.initialization_options)
    try:
        ls.loop = asyncio.get_running_loop()
    except RuntimeError:
        ls.loop = None
    if not any(isinstance(h, ClientLogHandler) for h in log.handlers):
        log.addHandler(ClientLogHandler(ls))
        log.setLevel(logging.DEBUG)


DEBUG_COMMAND = "kerasfit.printDebugInformation"


@server.command(DEBUG_COMMAND)
def print_debug_information(ls: KerasfitServer, *args: Any) -> str:
    """What a bug report needs: versions, settings, open documents and their config."""
    import platform
    from importlib.metadata import version

    rows = [
        f"kerasfit {__version__}, Python {platform.python_version()}, pygls {version('pygls')}, "
        f"lsprotocol {version('lsprotocol')}, libcst {version('libcst')}",
        f"settings: {dataclasses.asdict(ls.settings)}",
        f"rules: {len(all_rules())}; lints so far: {ls.lint_count}",
    ]
    for key in sorted(ls.uris):
        fs = ls.good_settings.get(key)
        rows.append(f"open: {ls.uris[key]}" + (f" (target {fs.target}, {len(fs.codes)} rules)" if fs else ""))
    try:
        with open("/proc/self/status") as f:
            rows += [ln.strip() for ln in f if ln.startswith("VmRSS")]
    except OSError:
        pass
    text = "\n".join(rows)
    ls.window_log_message(types.LogMessageParams(type=types.MessageType.Info, message=text))
    return text


@server.feature(types.INITIALIZED)
async def initialized(ls: KerasfitServer, params: types.InitializedParams) -> None:
    caps = ls.client_capabilities.workspace
    watched = caps.did_change_watched_files if caps is not None else None
    if watched is not None and watched.dynamic_registration:
        try:
            await ls.client_register_capability_async(
                types.RegistrationParams(
                    registrations=[
                        types.Registration(
                            id="kerasfit-pyproject-watcher",
                            method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                            register_options=types.DidChangeWatchedFilesRegistrationOptions(
                                watchers=[
                                    types.FileSystemWatcher(glob_pattern="**/pyproject.toml"),
                                    types.FileSystemWatcher(glob_pattern="**/kerasfit.toml"),
                                ]
                            ),
                        )
                    ]
                )
            )
        except Exception as exc:  # a client may refuse; saving pyproject.toml in the editor still reloads
            log.info("could not register the pyproject.toml watcher: %s", exc)


@server.feature(types.SHUTDOWN)
def shutdown(ls: KerasfitServer, params: None) -> None:
    for task in list(ls.pending.values()):
        task.cancel()
    ls.pending.clear()
    ls.lints.shutdown()
    ls.large_lints.shutdown()


# ---- documents ------------------------------------------------------------------------


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: KerasfitServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.schedule(ls.remember(params.text_document.uri))


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: KerasfitServer, params: types.DidChangeTextDocumentParams) -> None:
    key = doc_key(params.text_document.uri)
    ls.supersede(ls.notebook_of(key) or key, "the document changed")
    ls.schedule(key, ls.settings.debounce_ms)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: KerasfitServer, params: types.DidSaveTextDocumentParams) -> None:
    key = doc_key(params.text_document.uri)
    if key.endswith(CONFIG_FILES):
        ls.reload_config()
        return
    ls.schedule(key)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: KerasfitServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    key = doc_key(uri)
    had_findings = key in ls.linted
    ls.forget(key)
    if had_findings or key.endswith(PYTHON_SUFFIXES):
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


# ---- notebooks ------------------------------------------------------------------------
# pygls keeps the notebook and its cells in the workspace; the cells are linted together
# as one module keyed by the notebook, and each cell gets its own diagnostics.


def _remember_cells(ls: KerasfitServer, cells: Iterable[Any] | None) -> None:
    for c in cells or ():
        ls.remember(c.uri)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
def notebook_did_open(ls: KerasfitServer, params: types.DidOpenNotebookDocumentParams) -> None:
    _remember_cells(ls, params.cell_text_documents)
    ls.schedule(ls.remember(params.notebook_document.uri))


@server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
def notebook_did_change(ls: KerasfitServer, params: types.DidChangeNotebookDocumentParams) -> None:
    cells = params.change.cells
    structure = cells.structure if cells is not None else None
    if structure is not None:
        _remember_cells(ls, structure.did_open)
        for closed in structure.did_close or ():
            ls.uris.pop(doc_key(closed.uri), None)
            ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=closed.uri, diagnostics=[]))
    key = doc_key(params.notebook_document.uri)
    ls.supersede(key, "the notebook changed")
    ls.schedule(key, ls.settings.debounce_ms)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
def notebook_did_close(ls: KerasfitServer, params: types.DidCloseNotebookDocumentParams) -> None:
    key = doc_key(params.notebook_document.uri)
    ls.forget(key)
    ls.linted.pop(key, None)
    for cell in params.cell_text_documents:
        ls.uris.pop(doc_key(cell.uri), None)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell.uri, diagnostics=[]))


# ---- configuration --------------------------------------------------------------------


@server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
def did_change_watched_files(ls: KerasfitServer, params: types.DidChangeWatchedFilesParams) -> None:
    if any(doc_key(c.uri).endswith(CONFIG_FILES) for c in params.changes):
        ls.reload_config()


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def did_change_configuration(ls: KerasfitServer, params: types.DidChangeConfigurationParams) -> None:
    raw = params.settings
    if not raw:
        # Pull-model clients send null and expect us to ask.
        caps = ls.client_capabilities.workspace
        if caps is not None and caps.configuration:
            try:
                got = await ls.workspace_configuration_async(
                    types.ConfigurationParams(items=[types.ConfigurationItem(section="kerasfit")])
                )
                raw = got[0] if got else None
            except Exception as exc:
                log.info("workspace/configuration failed: %s", exc)
    if raw is not None:
        ls.settings = Settings.from_client(raw)
    ls.reload_config()


# ---- code actions ---------------------------------------------------------------------
#
# Quick fixes whose edits the diagnostics already carry are sent whole; anything that
# needs the engine (a fix-all, a fix that adds an import, a fix in a notebook, which
# edits cells by way of the joined module) is offered with ``data`` only and computed
# in ``codeAction/resolve`` when the user picks it (ruff's way): a code-action request
# comes with every cursor move and must cost no more than a lookup.


def _wants(only: list[str] | None, kind: str) -> bool:
    """LSP kinds are hierarchical: asking for "source.fixAll" includes "source.fixAll.kerasfit"."""
    return not only or any(kind == k or kind.startswith(k + ".") for k in only)


def _edit(uri: str, version: int | None, text_edits: list[dict[str, Any]], converter: Any) -> types.WorkspaceEdit:
    edits = [converter.structure(e, types.TextEdit) for e in text_edits]
    return types.WorkspaceEdit(
        document_changes=[
            types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                edits=edits,
            )
        ]
    )


def _applied(source: str, fix: Fix) -> str | None:
    """``source`` with one fix and the imports it needs (runs on the lint thread)."""
    bom = source.startswith("\ufeff")
    body = source[1:] if bom else source
    if not fix.matches(body):
        return None  # offsets that miss the text they were made for: offer no edit
    new, chosen = apply_fixes(body, [fix])
    if not chosen:
        return None
    if fix.imports or fix.orphan_imports:
        new = add_imports(new, set(fix.imports), set(fix.orphan_imports)) or new
    return ("\ufeff" if bom else "") + new


def _resolves_edits(ls: KerasfitServer) -> bool:
    td = ls.client_capabilities.text_document
    ca = td.code_action if td is not None else None
    rs = ca.resolve_support if ca is not None else None
    return bool(ca is not None and ca.data_support and rs is not None and "edit" in (rs.properties or []))


@server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND, NOTEBOOK_FIX_ALL_KIND], resolve_provider=True
    ),
)
async def code_action(ls: KerasfitServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
    uri = params.text_document.uri
    key = doc_key(uri)
    if not ls.is_python(key):
        return None
    view = await ls.view(key)
    if view is None:
        return None
    linted = view.linted
    conv = _CONVERTER
    only = [str(k) for k in params.context.only] if params.context.only else None
    want = {"start": {"line": params.range.start.line, "character": params.range.start.character},
            "end": {"line": params.range.end.line, "character": params.range.end.character}}
    asked = {(str(c.code), c.range.start.line) for c in params.context.diagnostics if c.source == "kerasfit"}
    lines = E.split_lines(view.text)
    comments: list[Comments] = []  # the text's comments and the rows one may end (computed on first need)
    actions: list[types.CodeAction] = []
    noqa: list[types.CodeAction] = []
    seen_noqa: set[tuple[str, int]] = set()
    lazy = {"key": view.lint_key, "version": linted.version}

    if _wants(only, types.CodeActionKind.QuickFix):
        for i, d, lsp_d in view.found:
            # Whole lines, like hover: a cursor anywhere on a flagged line gets its fixes.
            if (d.code, lsp_d["range"]["start"]["line"]) not in asked and not E.lines_overlap(want, lsp_d["range"]):
                continue
            diag = conv.structure(lsp_d, types.Diagnostic)
            fix = d.fix
            body = linted.source[1:] if linted.source.startswith("\ufeff") else linted.source
            if fix is not None and fix.edits and fix.applicability is not Applicability.DISPLAY and fix.matches(body):
                action = types.CodeAction(
                    title=E.quickfix_title(d),
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diag],
                    is_preferred=fix.applicability is Applicability.SAFE,
                )
                if fix.imports or fix.orphan_imports or linted.cells is not None:
                    action.data = {"kerasfit": "fix", "at": i, **lazy}
                else:
                    text_edits = [{"range": e["range"], "newText": e["newText"]} for e in lsp_d["data"]["fix"]["edits"]]
                    action.edit = _edit(uri, view.version, text_edits, conv)
                actions.append(action)
            line_no = _noqa_line(lsp_d, view.text, comments)
            if line_no is None or d.code.startswith("KF0") or (d.code, line_no) in seen_noqa or line_no >= len(lines):
                continue  # a syntax error cannot be suppressed; nor a line no comment may follow
            seen_noqa.add((d.code, line_no))
            noqa.append(
                types.CodeAction(
                    title=f"Disable {d.code} for this line",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diag],
                    edit=_edit(uri, view.version, [E.noqa_edit(line_no, lines[line_no], d.code,
                                                               comments[0].column(line_no + 1))], conv),
                )
            )
    actions.extend(noqa)

    kinds = [FIX_ALL_KIND] + ([NOTEBOOK_FIX_ALL_KIND] if linted.cells is not None else [])
    kinds = [k for k in kinds if _wants(only, k)]
    codes = {d.code for d in linted.result.diagnostics}
    # the fixer leaves a file that does not parse alone, so offer no fix-all for one
    if not _resolves_edits(ls) and only is None:
        kinds = []  # a client that cannot resolve gets the fix-all only when it asks for it by kind
    if kinds and SYNTAX_ERROR_CODE not in codes and any(allowed(d.fix, ls.settings.unsafe_fixes) for d in linted.result.diagnostics):
        title = "kerasfit: fix all" + (" (including unsafe fixes)" if ls.settings.unsafe_fixes else " safe fixes")
        for kind in kinds:
            actions.append(types.CodeAction(title=title, kind=kind, data={"kerasfit": "fixAll", **lazy}))

    if not _resolves_edits(ls):  # an older client: compute what it picks from now
        resolved = [await resolve_code_action(ls, a) if a.data else a for a in actions]
        actions = [a for a in resolved if a.edit is not None]
    return actions or None


@server.feature(types.CODE_ACTION_RESOLVE)
async def resolve_code_action(ls: KerasfitServer, action: types.CodeAction) -> types.CodeAction:
    data = action.data if isinstance(action.data, dict) else {}
    what = data.get("kerasfit")
    if what not in ("fix", "fixAll") or not isinstance(data.get("key"), str):
        return action
    key = data["key"]
    linted = await ls.lint(key)
    if linted is None or linted.version != data.get("version"):
        return action  # the document moved on: no edit rather than a wrong one
    try:
        if what == "fixAll":
            fixed = await ls.run_guarded(key, lambda: ls.lint_now(key, linted.source, linted.version, fix=True))
            new = fixed.result.fixed_source
        else:
            at = data.get("at")
            if not isinstance(at, int) or not 0 <= at < len(linted.result.diagnostics):
                return action
            fix = linted.result.diagnostics[at].fix
            if fix is None:
                return action
            new = await ls.run_guarded(key, _applied, linted.source, fix)
    except LintTimeout:
        return action
    # A didChange handled while the fixer ran: the edit fits text the editor no longer has.
    now = ls.snapshot(key)
    if now is None or now[:2] != (linted.version, linted.source):
        return action
    action.edit = ls.edit_to(key, linted, new)
    return action


# ---- hover ----------------------------------------------------------------------------


_REPORTS: dict[str, tuple[tuple[int, int], Any]] = {}


def _cached_build_report(path: str, source: str) -> Any:
    """The build cross-check's cached report for this file, when the buffer is what was built.

    Never builds anything (that runs user code); only reads what `kerasfit report` or
    `check --build` left behind.
    """
    try:
        from ..crosscheck.api import cached_report  # defers the build machinery (sandbox, HLO reader, simulator) until a report is asked for
    except (ImportError, AttributeError):
        return None
    try:
        st = os.stat(path)
        if Path(path).read_text(encoding="utf-8") != source:
            return None  # unsaved edits: the report's line numbers may not match the buffer
    except (OSError, UnicodeDecodeError):
        return None
    key = (st.st_mtime_ns, st.st_size)
    hit = _REPORTS.get(path)
    if hit is not None and hit[0] == key:
        return hit[1]
    try:
        report = cached_report(path)
    except Exception as exc:  # never let a report problem break hover
        log.info("cached_report(%s) failed: %s", path, exc)
        report = None
    _REPORTS[path] = (key, report)
    return report


def _noqa_line(lsp_d: dict[str, Any], text: str, memo: list[Comments]) -> int | None:
    """The 0-based line a noqa comment for the diagnostic goes on, as ``check --add-noqa``
    places it: its first or last line, where Python allows a comment (not after a
    backslash, not inside a multi-line string); None when neither does."""
    if not memo:
        memo.append(Comments.of(text))
    ok = memo[0].open_rows
    first: int = lsp_d["range"]["start"]["line"]
    last: int = lsp_d["range"]["end"]["line"]
    return next((line for line in (first, last) if line + 1 in ok), None)


@server.feature(types.TEXT_DOCUMENT_HOVER)
async def hover(ls: KerasfitServer, params: types.HoverParams) -> types.Hover | None:
    key = doc_key(params.text_document.uri)
    if not ls.is_python(key):
        return None
    view = await ls.view(key)
    if view is None:
        return None
    linted = view.linted
    line = params.position.line
    hits = [(d, l) for _, d, l in view.found if l["range"]["start"]["line"] <= line <= l["range"]["end"]["line"]]
    if not hits:
        return None
    path = ls.path_for(key)
    loop = asyncio.get_running_loop()
    report = await loop.run_in_executor(ls.executor, _cached_build_report, path, linted.source)
    build_rows: list[str] = []
    title = ""
    if report is not None:
        # A finding spanning several lines (a multi-line layer call) shows the ops of all of them.
        for row in sorted({r for d, _ in hits for r in range(d.row, d.end_row + 1)}):
            build_rows += [b for b in E.build_lines_for_row(report, row, path) if b not in build_rows]
        target = getattr(report, "target", None)
        step_fit = getattr(report, "step_fit", None)
        title = "cached" + (f", {target}" if target else "") + (
            f", whole-step fit {step_fit:.0%}" if isinstance(step_fit, float) else ""
        )
    docs = {d.code: ls.rule_paragraph(d.code) for d, _ in hits}
    pages = {d.code: l.get("codeDescription", {}).get("href") for d, l in hits}
    value = E.hover_markdown([d for d, _ in hits], docs, build_rows, title, pages)
    first = hits[0][1]["range"]
    rng = types.Range(
        start=types.Position(line=first["start"]["line"], character=first["start"]["character"]),
        end=types.Position(line=first["end"]["line"], character=first["end"]["character"]),
    )
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=value), range=rng)


# ---- entry point ----------------------------------------------------------------------


def serve(tcp: str | None = None, *, prefix: bytes = b"", answered: tuple[Any, Any] | None = None) -> None:
    """Run until the client sends exit (stdio), or serve TCP connections on HOST:PORT.

    ``prefix``: stdin bytes already read (by :mod:`kerasfit.lsp.boot`), handled first;
    ``answered``: the (id, result) of the initialize in them that was answered already."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="kerasfit-lsp: %(levelname)s: %(message)s")
    tune_gc()
    if tcp:
        host, sep, port = tcp.rpartition(":")
        if not sep or not port.isdigit():
            print(f"kerasfit: error: --tcp wants HOST:PORT, got {tcp!r}", file=sys.stderr)
            sys.exit(2)
        server.tcp = True
        serve_tcp(server, host or "127.0.0.1", int(port))
    else:
        cast(_Protocol, server.protocol).pre_answered = answered
        serve_stdio(server, prefix=prefix)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # exit closes stdout
            pass
    # Not a normal interpreter exit: it would wait for a lint thread stuck in one
    # document, or for the thread blocked reading stdin.
    os._exit(server.exit_code)
