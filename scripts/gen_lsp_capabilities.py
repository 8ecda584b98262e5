#!/usr/bin/env python3
"""Write kerasfit/data/lsp_capabilities.json: the capabilities `kerasfit lsp` answers to
`initialize`, as pygls computes them from the server's registered features, for a client
that declares notebook support (kerasfit.lsp.boot drops notebook sync for one that does
not, as pygls does). The boot answers `initialize` from this file before pygls is loaded.

`python scripts/gen_lsp_capabilities.py` rewrites it; `--check` exits 1 when it is stale.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "kerasfit" / "data" / "lsp_capabilities.json"


def pygls_initialize_result(params: dict[str, Any]) -> dict[str, Any]:
    """The server's own answer to `initialize` with these params, computed by pygls
    in this process (the server's initialize handler runs too)."""
    from lsprotocol import types

    from kerasfit.lsp.server import server

    proto = server.protocol
    gen = proto.lsp_initialize(proto._converter.structure(params, types.InitializeParams))
    try:
        step = next(gen)
        while True:  # pygls yields the user's handlers to run
            fn, args, kwargs = step
            step = gen.send(fn(*args, **(kwargs or {})))
    except StopIteration as done:
        return proto._converter.unstructure(done.value)


def capabilities() -> str:
    result = pygls_initialize_result({"processId": None, "rootUri": None,
                                      "capabilities": {"notebookDocument": {"synchronization": {}}}})
    return json.dumps(result["capabilities"], indent=2, sort_keys=True) + "\n"


def main() -> int:
    want = capabilities()
    have = OUT.read_text(encoding="utf-8") if OUT.is_file() else None
    if "--check" in sys.argv:
        if have != want:
            print(f"{OUT.relative_to(ROOT)} is stale: run python scripts/gen_lsp_capabilities.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(want, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
