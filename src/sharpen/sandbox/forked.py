"""A preload running in a child of the fork server, driven through the caller's descriptors.

:meth:`LocalSandbox.start_preload <sharpen.sandbox.local.LocalSandbox.start_preload>` starts
one; unlike :meth:`~sharpen.sandbox.local.LocalSandbox.exec`, which runs a command to its end,
the caller talks to it through pipes it made itself (the code checker's RPC with its worker,
:mod:`sharpen.envs.code.checking`). The methods block and are meant for a worker thread.

It has ended once the fork server has reaped it and swept its uid
(:mod:`sharpen.sandbox.forkserver_main`); :meth:`ForkedProcess.kill` asks the server to kill
it, and only if no sweep comes does the host kill the uid itself.
"""

from __future__ import annotations

import concurrent.futures
import signal
import threading
from collections.abc import Callable

from sharpen.sandbox.forkserver import Exit

KILL_WAIT = 2.0
"""Seconds :meth:`ForkedProcess.kill` waits for the server's word before it kills the uid from
the host."""


class ForkedProcess:
    """One started preload: its exit status, whether its uid was swept, and a kill.

    ``ended`` is the fork server's future of the command, ``kill`` asks the server to kill it,
    ``kill_uid`` kills every process of the sandbox's uid from the host and says whether none
    is left, ``settled(ended, clean)`` tells the sandbox that the process is over (``ended``:
    the first time) and whether nothing of its uid is left (``clean``).
    """

    def __init__(self, ended: concurrent.futures.Future[Exit], kill: Callable[[], None],
                 kill_uid: Callable[[], bool], settled: Callable[[bool, bool], None]) -> None:
        self._ended = ended
        self._kill = kill
        self._kill_uid = kill_uid
        self._settled = settled
        self._lock = threading.Lock()
        self.returncode: int | None = None
        """The exit status once known (negative: a signal)."""
        self.swept = False
        """Every other process of its uid was killed after it."""

    def poll(self) -> int | None:
        """The exit status if the process has ended, else ``None`` (never blocks)."""
        return self.wait(0.0)

    def wait(self, timeout: float | None) -> int | None:
        """Wait up to ``timeout`` seconds (``None``: no limit) for the end; the exit status,
        or ``None`` if it has not ended."""
        if self.returncode is None:
            try:
                end = self._ended.result(timeout=timeout)
            except concurrent.futures.TimeoutError:
                return None
            except Exception:  # noqa: BLE001 - the server died: its children died with it
                end = Exit(-signal.SIGKILL, swept=False)
            self._finish(end)
        return self.returncode

    def kill(self) -> None:
        """Kill the process and everything of its uid, and wait for that."""
        if self.returncode is None:
            self._kill()
            if self.wait(KILL_WAIT) is None:
                self._finish(Exit(-signal.SIGKILL, swept=False))
        if not self.swept:
            self.swept = self._kill_uid()
            self._settled(False, self.swept)

    def _finish(self, end: Exit) -> None:
        """Record the end (the first one only)."""
        with self._lock:
            if self.returncode is not None:
                return
            self.returncode, self.swept = end
        self._settled(True, end.swept)
