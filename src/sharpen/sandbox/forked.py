"""A trusted preload running in a child of the fork server, driven by the caller's descriptors.

:meth:`LocalSandbox.start_preload <sharpen.sandbox.local.LocalSandbox.start_preload>` starts
one; unlike :meth:`~sharpen.sandbox.local.LocalSandbox.exec`, which runs a command to its end,
the caller talks to it through pipes it made itself (the code checker's RPC with its worker,
:mod:`sharpen.envs.code.checking`). The methods block and are meant for a worker thread.

How it ends: a preload that runs to its end kills every other process of its uid and then
writes its exit status to the *done* pipe (:mod:`sharpen.sandbox.forkserver_main`); anything
else (``os._exit``, a signal, a kill) ends without that word and is reaped by the fork server.
:meth:`ForkedProcess.kill` kills by uid, which reaches whatever the command started too.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import select
import signal
import threading
import time
from collections.abc import Callable


def read_done(fd: int) -> int | None:
    """The exit status a preload wrote to its done pipe, ``None`` at end of file (it ended
    without a word). ``fd`` must be readable."""
    try:
        data = os.read(fd, 32)
    except OSError:
        return None
    text = data.strip()
    return int(text) if text.lstrip(b"-").isdigit() else None


class ForkedProcess:
    """One started preload: its exit, whether it swept its uid, and a kill.

    ``status`` is the fork server's exit status (set when the server reaps the child),
    ``done_fd`` the read end of the done pipe (owned by this object), ``kill_uid`` kills
    every process of the sandbox's uid and says whether none is left, ``settled(ended,
    clean)`` tells the sandbox that the process is over (``ended``: the first time) and
    whether nothing of its uid is left (``clean``).
    """

    def __init__(self, status: concurrent.futures.Future[int], done_fd: int,
                 kill_uid: Callable[[], bool], settled: Callable[[bool, bool], None]) -> None:
        self._status = status
        self._done_fd = done_fd
        self._kill_uid = kill_uid
        self._settled = settled
        self._lock = threading.Lock()
        self.returncode: int | None = None
        """The exit status once known (negative: a signal)."""
        self.swept = False
        """It ran to its end and killed every other process of its uid."""

    def poll(self) -> int | None:
        """The exit status if the process has ended, else ``None`` (never blocks)."""
        self.wait(0.0)
        return self.returncode

    def wait(self, timeout: float | None) -> int | None:
        """Wait up to ``timeout`` seconds (``None``: no limit) for the end; the exit status,
        or ``None`` if it is still running."""
        end = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if end is None else max(0.0, end - time.monotonic())
            with self._lock:
                fd = self._done_fd
            if fd >= 0:
                if not select.select([fd], [], [], left)[0]:
                    return None
                code = read_done(fd)
                self._close_done()
                if code is not None:
                    self._finish(code, swept=True)
                continue
            try:
                code = self._status.result(timeout=left)
            except concurrent.futures.TimeoutError:
                return None
            except Exception:  # noqa: BLE001 - the server died: the child died with it
                code = -signal.SIGKILL
            self._finish(code, swept=False)
        return self.returncode

    def kill(self) -> None:
        """SIGKILL every process of the sandbox's uid (this one and all it started)."""
        clean = self._kill_uid()
        if self.wait(1.0) is None:  # the server reaps it at once; its status says how it ended
            self._close_done()
            self._finish(-signal.SIGKILL, swept=False)
        self._settled(False, clean)

    def _close_done(self) -> None:
        with self._lock:
            fd, self._done_fd = self._done_fd, -1
        if fd >= 0:
            os.close(fd)

    def _finish(self, code: int, *, swept: bool) -> None:
        """Record the end (the first one only)."""
        with self._lock:
            if self.returncode is not None:
                return
            self.returncode = code
            self.swept = swept
        self._settled(True, swept)

    def close(self) -> None:
        """Release the done pipe (the process may run on; :meth:`kill` it first if needed)."""
        with contextlib.suppress(OSError):
            self._close_done()
