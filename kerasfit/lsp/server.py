"""``kerasfit lsp``: a language server (pygls) with diagnostics, quick fixes and hover.

A thin front end over :func:`kerasfit.project.check.check_source` (STYLE 7): the engine and the
configuration are the CLI's, and every diagnostic goes through
:func:`kerasfit.project.reporters.lsp_diagnostic`, so the server and
``kerasfit check --output-format lsp`` publish the same objects.

The handlers live with their jobs: per-document state and publishing in
:mod:`.documents`, code actions in :mod:`.actions`, hover in :mod:`.hover`; this module
makes the one server, registers them, and serves.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import sys
from typing import Any, cast, Iterable

from lsprotocol import types

from .. import __version__
from ..engine.registry import all_rules
from ..project.check import tune_gc
from . import actions, hover
from .actions import FIX_ALL_KIND, NOTEBOOK_FIX_ALL_KIND
from .documents import ClientLogHandler, CONFIG_FILES, doc_key, KerasfitServer, log, PYTHON_SUFFIXES, ServerProtocol
from .framing import serve_stdio, serve_tcp
from .settings import Settings


server = KerasfitServer()


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


server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND, NOTEBOOK_FIX_ALL_KIND], resolve_provider=True
    ),
)(actions.code_action)
server.feature(types.CODE_ACTION_RESOLVE)(actions.resolve_code_action)
server.feature(types.TEXT_DOCUMENT_HOVER)(hover.hover)


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
        cast(ServerProtocol, server.protocol).pre_answered = answered
        serve_stdio(server, prefix=prefix)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # exit closes stdout
            pass
    # Not a normal interpreter exit: it would wait for a lint thread stuck in one
    # document, or for the thread blocked reading stdin.
    os._exit(server.exit_code)
