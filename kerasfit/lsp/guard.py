"""The lint thread, guarded: one document's check can neither kill nor hold the server.

An exception while checking one document becomes a diagnostic on that document (and a log
line), not a dead server and not a silently stale list. A check that outlives its budget
is left behind: Python cannot stop a thread, so the runner abandons it and lints on a
fresh one, and the document gets a diagnostic saying it was not checked. The server exits
with ``os._exit``, so an abandoned thread never delays ``exit``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

from ..core.parsestack import big_stack_executor
from ..engine.settings import Stopped

log = logging.getLogger("kerasfit.lsp")

DEFAULT_LINT_TIMEOUT_MS = 20_000
MAX_ABANDONED = 4  # past this many runaway checks, documents that ran away wait for them


class LintTimeout(Exception):
    """The check took longer than its budget (seconds in ``args[0]``)."""


class LintRunner:
    def __init__(self) -> None:
        self.executor = self._new()
        self.abandoned: list[asyncio.Future[Any] | Future[Any]] = []
        self.runaway: set[str] = set()  # documents whose last check was abandoned

    @staticmethod
    def _new() -> ThreadPoolExecutor:
        ex: ThreadPoolExecutor = big_stack_executor("kerasfit-lint")
        return ex

    def still_running(self) -> int:
        self.abandoned = [f for f in self.abandoned if not f.done()]
        return len(self.abandoned)

    def held_back(self, key: str) -> bool:
        """A document that ran away is not checked again while its runaway still runs."""
        running = self.still_running()
        if not running:
            self.runaway.clear()
        return key in self.runaway or running >= MAX_ABANDONED

    async def run(self, key: str, budget_s: float, fn: Callable[..., Any], *args: Any,
                  stop: threading.Event | None = None) -> Any:
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self.executor, fn, *args)
        # A caller cancelled meanwhile (an edit superseded the check) no longer awaits the
        # future: its outcome, a Stopped most often, is taken here, not logged by asyncio
        # as an exception nobody retrieved.
        awaited = [True]
        future.add_done_callback(lambda f: _taken(f, awaited[0]))
        try:
            result = await asyncio.wait_for(asyncio.shield(future), budget_s)
        except asyncio.CancelledError:
            awaited[0] = False
            raise
        except asyncio.TimeoutError:
            awaited[0] = False
            if stop is not None:
                stop.set()  # the check left behind ends at its next statement
            self.abandoned.append(future)
            self.runaway.add(key)
            old, self.executor = self.executor, self._new()
            old.shutdown(wait=False)
            raise LintTimeout(budget_s) from None
        self.runaway.discard(key)
        return result

    def shutdown(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


def _taken(future: asyncio.Future[Any], awaited: bool) -> None:
    """A check's outcome, taken: one that no one awaits any more and that failed other than
    by being stopped is a warning line (the awaited ones are the server's to report)."""
    if future.cancelled():
        return
    exc = future.exception()
    if exc is not None and not awaited and not isinstance(exc, Stopped):
        log.warning("a check no longer awaited failed: %s: %s", type(exc).__name__, exc)


def notice(message: str) -> dict[str, Any]:
    """A diagnostic on the first line saying the document was not (fully) checked."""
    at = {"line": 0, "character": 0}
    return {"range": {"start": at, "end": at}, "severity": 1, "source": "kerasfit",
            "message": message}
