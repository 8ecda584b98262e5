"""The ``kerasfit`` command. ``kerasfit lsp``, as editors start it, skips the CLI's
imports (typer) and answers ``initialize`` before loading the server (lsp/boot.py); a
plain ``kerasfit check`` command line (pre-commit's, an editor's) runs without typer
too (checkcmd.py), and anything else goes to the typer CLI."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] == ["lsp"]:
        from .lsp.boot import serve_stdio_fast  # defers everything but the boot path: initialize is answered first

        if serve_stdio_fast():
            return
    if sys.argv[1:2] == ["check"]:
        from .checkcmd import main as check_main  # defers typer: a plain check runs without it

        check_main(sys.argv[2:])  # exits unless the command line is typer's to read
    from .cli import main as cli_main  # defers typer until a command needs it

    cli_main()
