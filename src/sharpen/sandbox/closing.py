"""Sandboxes that are being closed in the background, and waiting for them.

A caller that has what it needs from a sandbox (a code checker with its verdict) should not
wait for the sandbox's last process to end, its uid to be swept and its workdir removed. It
does that work in a thread after handing over its result and registers the thread's future
with :func:`register_closing`; :func:`wait_closed` waits for every such future (the runner calls it
before a run ends, so a finished run leaves no sandbox behind).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

_PENDING: set[concurrent.futures.Future[object]] = set()
_LOCK = threading.Lock()


def register_closing(future: concurrent.futures.Future[object]) -> None:
    """Count ``future`` (a thread's work that ends with closing a sandbox) as pending until it
    is done."""
    with _LOCK:
        _PENDING.add(future)
    future.add_done_callback(_forget)


def _forget(future: concurrent.futures.Future[object]) -> None:
    with _LOCK:
        _PENDING.discard(future)


async def wait_closed() -> None:
    """Wait until every sandbox registered with :func:`register_closing` is closed (errors in that work
    were the closing thread's to report; they are not raised here)."""
    while True:
        with _LOCK:
            pending = [f for f in _PENDING if not f.done()]
        if not pending:
            return
        await asyncio.gather(*(asyncio.wrap_future(f) for f in pending), return_exceptions=True)
