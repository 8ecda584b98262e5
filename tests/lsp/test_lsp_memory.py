"""The server's garbage pass after each lint (KerasfitServer.collect_garbage).

Memory over a long session is measured by benchmarks/lsp_latency.py --memory-lines; this
checks the mechanism: a cycle that aged while a lint held it is freed by the next pass,
not up to 25 lints later.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.lsp

# in a child: the first pass freezes everything alive, which pytest's own process must not get
SCRIPT = textwrap.dedent('''
    import weakref
    from kerasfit.project.check import tune_gc
    from kerasfit.lsp.server import server

    tune_gc()
    server.collect_garbage()  # after the first lint

    class Node:
        pass

    held = Node()
    held.other = Node()
    held.other.back = held  # a cycle, as the analysis leaves (bindings <-> scopes)
    probe = weakref.ref(held)
    for _ in range(3):  # lints that ran while it was still referenced: it ages
        server.collect_garbage()
    del held
    server.collect_garbage()  # the lint after it was dropped
    print("alive" if probe() is not None else "freed")
''')


def test_a_cycle_that_aged_is_freed_by_the_next_garbage_pass():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "freed"
