"""SIGTERM as a cancellation: :func:`run_sync` is ``asyncio.run`` for work that must record
how it ended.

Python turns Ctrl-C (SIGINT) into a cancellation of the main task, so the runner's ``finally``
blocks store every finished episode and mark the run ``interrupted``. SIGTERM — what
``timeout``, ``kill``, systemd and container runtimes send — would instead end the process on
the spot and leave the run ``running``. :func:`run_sync` makes SIGTERM take the Ctrl-C path:
it cancels the main task and, once the coroutine has unwound, raises :class:`Terminated`.
SIGKILL cannot be caught; :mod:`sharpen.store.owner` covers it.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Terminated(KeyboardInterrupt):
    """The work was cancelled by SIGTERM. A KeyboardInterrupt, so that code which treats
    Ctrl-C as "the user stopped it" treats SIGTERM the same; ``exit_code`` is the shell's
    convention for death by SIGTERM (128 + 15)."""

    exit_code = 128 + signal.SIGTERM


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, with SIGTERM cancelling it like Ctrl-C; raises
    :class:`Terminated` when that happened. Off the main thread (where no signal handler can
    be set) it is plain ``asyncio.run``. The previous SIGTERM handler is restored after."""
    return asyncio.run(_cancel_on_sigterm(coro))


async def _cancel_on_sigterm(coro: Coroutine[Any, Any, T]) -> T:
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None  # run by asyncio.run, so inside a task
    received: list[int] = []

    def on_sigterm() -> None:
        received.append(signal.SIGTERM)
        main.cancel()

    try:
        previous = signal.getsignal(signal.SIGTERM)
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    except (ValueError, RuntimeError, NotImplementedError):  # not the main thread; Windows
        return await coro
    try:
        return await coro
    except asyncio.CancelledError:
        if received:
            raise Terminated() from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        signal.signal(signal.SIGTERM, previous)
