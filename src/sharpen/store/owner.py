"""Which process runs a run: :class:`RunOwner`, recorded when a run starts (or resumes).

A run killed by SIGKILL (or a machine that lost power) never writes its last status, so the
store would call it ``running`` forever. The runner therefore records its process — host
name, pid and the process's start token — and whoever reads the run later on the same host
can tell whether that process still exists (:meth:`RunOwner.gone`). The start token guards
against pid reuse: a new process with the old pid has another start time. On Linux the token
is the boot id and the process's start time in clock ticks (``/proc/PID/stat``); elsewhere
there is none and only the pid's existence is checked.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from pydantic import BaseModel

_PROC = Path("/proc")


def _boot_id() -> str:
    try:
        return (_PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _proc_start(pid: int) -> str | None:
    """``BOOT:TICKS`` for a live process on Linux; ``None`` when it is gone, a zombie (killed,
    not yet reaped), or when there is no ``/proc`` to ask."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = stat.rsplit(")", 1)[-1].split()
    if not fields or fields[0] in ("Z", "X"):  # field 3, state: zombie or dead
        return None
    return f"{_boot_id()}:{fields[19]}"  # field 22, starttime


def _has_proc() -> bool:
    return (_PROC / "self/stat").exists()


class RunOwner(BaseModel):
    """The process that set a run ``running``."""

    host: str
    """``socket.gethostname()`` of its machine."""
    pid: int
    """Its process id."""
    start: str | None = None
    """Its start token (see the module doc); ``None`` where the platform gives none."""

    @classmethod
    def current(cls) -> RunOwner:
        """This process."""
        pid = os.getpid()
        return cls(host=socket.gethostname(), pid=pid, start=_proc_start(pid))

    def gone(self) -> bool:
        """True when this process is known to have ended: it ran on this host and no process
        with its pid (and start token) exists now. A process on another host is never called
        gone: nothing here can see it."""
        if self.host != socket.gethostname():
            return False
        if _has_proc():
            return self.start is None or _proc_start(self.pid) != self.start
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # someone else's live process
            return False
        return False
