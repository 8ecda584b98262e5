"""The server's per-document state: what was linted for which version, the lint lanes,
publishing, notebooks seen as one module, and the workspace edits built from a fix.

Linting runs on worker threads so the event loop keeps reading messages; results for a
document version that is no longer current are dropped, never published.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, cast, Generator, Iterator
from urllib.parse import unquote

from lsprotocol import types
from lsprotocol.converters import get_converter
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from .. import __version__
from ..core.docpages import Links
from ..core.sourcefile import over_limit
from ..core.types import Diagnostic, FileResult
from ..engine.parse import ParseCache
from ..engine.registry import rule_by_name_or_code
from ..engine.settings import Stopped
from ..project.check import check_source, CheckOptions, FileSettings, links_for, settings_for, tree_indexes
from ..project.config import _load_pyproject, ConfigError, find_config, over_size_budget
from ..project.discovery import mentions_tensorflow
from ..project.notebook import Notebook, NotebookError
from ..project.reporters import lsp_diagnostic
from ..project.sources import TreeIndexes
from . import edits as E
from .capabilities import same_answer
from .guard import LintRunner, LintTimeout, notice
from .memo import StatementMemo
from .settings import Settings


log = logging.getLogger("kerasfit.lsp")


PYTHON_SUFFIXES = (".py", ".pyi")
CONFIG_FILES = ("/pyproject.toml", "/kerasfit.toml")
CONVERTER = get_converter()


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


class ServerProtocol(LanguageServerProtocol):
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
            protocol_cls=ServerProtocol,
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

    def workspace_indexes(self) -> TreeIndexes:
        """The project index of the workspace folder, kept across checks: other files are
        read lazily when a check asks about them, and re-read when they change on disk."""
        root = self.workspace.root_path or str(Path.cwd())
        indexes = getattr(self, "_project_indexes", None)
        if indexes is None or getattr(self, "_project_root", None) != root:
            indexes = self._project_indexes = tree_indexes([root], self.settings.check_options())
            self._project_root = root
        return indexes

    def lint_now(self, uri: str, source: str, version: int | None, *, fix: bool = False,
                 stop: threading.Event | None = None) -> Linted:
        """Runs on the worker thread. Never raises: an engine failure becomes a log line."""
        path = self.path_for(uri)
        data = source.encode("utf-8", "surrogatepass")
        file_settings, warning = self.file_settings(uri, path)
        project = self.workspace_indexes().tree
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

    async def view_of(self, uri: str) -> View | None:
        """A handler's view of the document at ``uri``: None for one that is not Python or
        that could not be checked."""
        key = doc_key(uri)
        return await self.view(key) if self.is_python(key) else None

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
            return workspace_edit(self.uris.get(lint_key, lint_key), linted.version, [edit], CONVERTER) if edit else None
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
                        edits=[CONVERTER.structure(edit, types.TextEdit)],
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
                        diagnostics=[CONVERTER.structure(l, types.Diagnostic) for _, _, l in linted.cells.found[key]],
                    )
                )
            return
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=self.uris.get(uri, uri),
                version=linted.version,
                diagnostics=[CONVERTER.structure(d, types.Diagnostic)
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


def workspace_edit(uri: str, version: int | None, text_edits: list[dict[str, Any]], converter: Any) -> types.WorkspaceEdit:
    edits = [converter.structure(e, types.TextEdit) for e in text_edits]
    return types.WorkspaceEdit(
        document_changes=[
            types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                edits=edits,
            )
        ]
    )
