"""The ``kerasfit`` command. ``kerasfit lsp``, as editors start it, skips the CLI's
imports (typer) and answers ``initialize`` before loading the server (lsp/boot.py);
every other command line goes to the typer CLI."""

from __future__ import annotations

import os
import sys


def main() -> None:
    if sys.argv[1:] == ["lsp"]:
        from ..lsp.boot import serve_stdio_fast  # defers everything but the boot path: initialize is answered first

        if serve_stdio_fast():
            return
    from .cli import main as cli_main  # defers typer until a command needs it

    try:
        cli_main()
    except SystemExit as exc:
        if sys.argv[1:2] == ["check"]:
            exit_now(exc.code)
        raise


def exit_now(code: object) -> None:
    """End a finished ``check`` without the interpreter's teardown (freeing every libcst
    class and module one by one: ~55 ms of a one-file check, measured), as mypy does.
    Its output is flushed first; whatever cannot be flushed, or an exit message to print,
    is left to the ordinary exit, which reports it as always."""
    if code is None:
        code = 0
    if not isinstance(code, int):
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code)
