"""The parse thread's stack: libcst's native parser recurses once per nesting level, and
the margin between the parse budget (kerasfit.engine.parseguard) and a C-stack overflow must not
depend on the caller's thread (a language-server worker, a small ``ulimit -s``). Parses
run on a thread started with a large stack of its own.

No libcst here: the batch check's front end imports this before it knows whether any file
needs parsing (a fully cached run parses nothing and never imports libcst).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, TypeVar

# The parse thread's stack. The crash point scales with it (~7,000 levels at 8 MB),
# so 64 MB leaves two orders of magnitude between the budget and a segfault.
PARSE_STACK_BYTES = 64 * 1024 * 1024

_T = TypeVar("_T")

_stack_lock = threading.Lock()
_big = threading.local()  # .stack: this thread was started with PARSE_STACK_BYTES


def _start_with_parse_stack(start: Callable[[], None]) -> bool:
    """Run ``start()`` (which starts a thread) with the parse stack as the size of new
    threads; False on a platform without settable stacks (the thread is not started)."""
    with _stack_lock:  # stack_size() is process-wide: set it only around our start()
        old = threading.stack_size()
        try:
            threading.stack_size(PARSE_STACK_BYTES)
            start()
            return True
        except (ValueError, RuntimeError):
            return False
        finally:
            threading.stack_size(old)


def big_stack_executor(name: str) -> Any:
    """A one-thread executor whose thread has the parse stack: parses on it run inline,
    without starting a thread per parse (the language server parses one edited
    statement per check, and starting the thread cost more than parsing it). Without
    settable stacks its thread has the default one, and each parse starts its own."""
    from concurrent.futures import ThreadPoolExecutor

    ex = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
    _start_with_parse_stack(lambda: ex.submit(_mark_big_stack).result())  # the executor starts its thread here
    return ex


def _mark_big_stack() -> None:
    _big.stack = True


def on_parse_stack(work: Callable[[], _T]) -> _T:
    """``work()`` run on a thread with the parse stack (exceptions re-raised); inline when
    this thread has it already. A batch check runs all its files through one such thread:
    a thread started per parse cost ~10% of libcst's parse time (each new 64 MB stack is
    faulted in afresh; keras-io's 182 examples: 3.3-3.5 s CPU vs 2.9-3.2 s on one thread)."""
    if getattr(_big, "stack", False):
        return work()
    box: dict[str, object] = {}

    def run() -> None:
        _big.stack = True
        try:
            box["result"] = work()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    t = threading.Thread(target=run, name="kerasfit-parse", daemon=True)
    if not _start_with_parse_stack(t.start):
        return work()  # a platform without settable stacks
    t.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["result"]  # type: ignore[return-value]
