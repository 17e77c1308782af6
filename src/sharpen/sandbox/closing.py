"""Closing sandboxes in the background, and waiting for that.

A caller that has what it needs from a sandbox (a code checker with its verdict) should not
wait for the sandbox's last process to end, its uid to be swept and its workdir removed:
:func:`close_later` does that in a task of the running event loop, and :func:`wait_closed`
waits for every such task of the loop (the runner calls it before a run ends, so a finished
run leaves no sandbox behind).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from sharpen.sandbox.base import Sandbox

_CLOSING: set[asyncio.Task[None]] = set()
"""Pending closes (strong references: a task is otherwise only weakly held by its loop)."""


def close_later(sandbox: Sandbox, before: Callable[[], object] | None = None) -> None:
    """Close ``sandbox`` in the background, after ``before`` (blocking, run in a thread) if
    given. Needs a running event loop."""
    task = asyncio.ensure_future(_close(sandbox, before))
    _CLOSING.add(task)
    task.add_done_callback(_CLOSING.discard)


async def _close(sandbox: Sandbox, before: Callable[[], object] | None) -> None:
    try:
        if before is not None:
            await asyncio.to_thread(before)
    finally:
        await sandbox.close()


async def wait_closed() -> None:
    """Wait until every sandbox handed to :func:`close_later` on this loop is closed."""
    loop = asyncio.get_running_loop()
    while pending := [t for t in _CLOSING if t.get_loop() is loop and not t.done()]:
        await asyncio.gather(*pending, return_exceptions=True)
