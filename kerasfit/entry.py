"""The ``kerasfit`` command. ``kerasfit lsp``, as editors start it, skips the CLI's
imports (typer) and answers ``initialize`` before loading the server (lsp/boot.py);
every other command line goes to the typer CLI."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] == ["lsp"]:
        from .lsp.boot import serve_stdio_fast  # defers everything but the boot path: initialize is answered first

        if serve_stdio_fast():
            return
    from .cli import main as cli_main  # defers typer until a command needs it

    cli_main()
