"""Sandboxes closed in the background, and the one who waits for them.

A caller that has what it needs from a sandbox (a code checker with its verdict) need not
wait for the sandbox's last process to end, its uid to be swept and its workdir removed. It
hands that work — verdict first, then the close — to a :class:`Closing`, which runs it in
threads of its own and knows what is still pending. Whoever must be sure that no sandbox is
left owns the Closing and waits for it: the runner makes one per run, puts it in force for
the run's episodes (:meth:`Closing.scope`) and closes it (:meth:`Closing.close`, which waits
for every close) before it writes the run's status.

The work starts deep inside an environment, which the runner reaches only through the
plug-in contract, so the Closing in force is found through a :class:`contextvars.ContextVar`
(:func:`in_force`) rather than passed by hand: every task started inside the scope inherits
it, a concurrent run in the same process has its own, and no pending work is process-wide.
Where none is in force (a library call of ``run_tests``), the caller makes a one-off Closing
and waits for all of its work before returning.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

THREAD_PREFIX = "sharpen-checker"
"""Name prefix of a Closing's threads (the checkers run in them)."""

_IN_FORCE: contextvars.ContextVar[Closing | None] = contextvars.ContextVar(
    "sharpen_closing", default=None)
# The variable itself never changes; what it holds is per context (per run), set and reset
# only by Closing.scope.


class Closing:
    """Work that ends with closing a sandbox, run in this object's threads (their own pool:
    a slow checker must not hold up ``asyncio.to_thread``), and waiting for all of it.
    Thread-safe; use from one event loop."""

    def __init__(self, max_workers: int = 64) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix=THREAD_PREFIX)
        self._pending: set[concurrent.futures.Future[None]] = set()
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], None]) -> concurrent.futures.Future[None]:
        """Run ``job`` in one of this Closing's threads; it counts as pending until it ends.
        Raises ``RuntimeError`` after :meth:`close`."""
        future = self._pool.submit(job)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future: concurrent.futures.Future[None]) -> None:
        with self._lock:
            self._pending.discard(future)

    @property
    def pending(self) -> int:
        """Jobs submitted and not yet ended."""
        with self._lock:
            return sum(1 for f in self._pending if not f.done())

    async def wait(self) -> None:
        """Until every job submitted so far (and any they submit) has ended. Errors in a job
        were its own to report; they are not raised here."""
        while True:
            with self._lock:
                pending = [f for f in self._pending if not f.done()]
            if not pending:
                return
            await asyncio.gather(*(asyncio.wrap_future(f) for f in pending), return_exceptions=True)

    async def close(self) -> None:
        """:meth:`wait`, then stop the threads; nothing may be submitted afterwards."""
        await self.wait()
        self._pool.shutdown(wait=False)  # every job has ended: the idle threads just exit

    @contextmanager
    def scope(self) -> Iterator[Closing]:
        """Put this Closing in force for the current context and every task started inside
        the ``with`` block (they copy the context when they are created)."""
        token = _IN_FORCE.set(self)
        try:
            yield self
        finally:
            _IN_FORCE.reset(token)


def in_force() -> Closing | None:
    """The Closing whose :meth:`Closing.scope` the caller runs in, or ``None``."""
    return _IN_FORCE.get()
