"""The pool of unprivileged uids that root-run sandboxes drop to, and killing a uid's processes.

Pool uids (61000..61183, below systemd's dynamic-user range) are held with ``flock`` for the
sandbox's lifetime, so concurrent sandboxes, even in other processes, never share one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import signal
import stat
import tempfile
import time

UID_POOL = range(61000, 61184)
"""Unprivileged uids used when running as root (one per live sandbox)."""


def pids_of_uid(uid: int) -> list[int]:
    """Live (non-zombie) processes whose real uid is ``uid``.

    One ``read`` of each ``/proc/PID/status`` (the kernel formats the whole file either way)
    and a byte search for its ``Uid:`` line: this scan runs a few times per sandbox."""
    out = []
    want = b"\nUid:\t%d\t" % uid
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/status", os.O_RDONLY)
        except OSError:
            continue
        try:
            data = os.read(fd, 4096)
        except OSError:
            continue
        finally:
            os.close(fd)
        if want in data:
            at = data.find(b"\nState:\t")
            if at < 0 or data[at + 8:at + 9] not in (b"Z", b"X"):
                out.append(int(name))
    return out


def kill_uid(uid: int) -> bool:
    """SIGKILL every process of ``uid`` (root only: a forked child becomes ``uid`` and calls
    ``kill(-1)``). Returns True when none is left."""
    for _ in range(100):
        if not pids_of_uid(uid):
            return True
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            try:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.005)
    return not pids_of_uid(uid)


class UidLease:
    """An exclusive pool uid, held through an flock'ed file until released."""

    def __init__(self) -> None:
        lock_dir = os.path.join(tempfile.gettempdir(), f"sharpen-sandbox-uids-{os.geteuid()}")
        os.makedirs(lock_dir, mode=0o700, exist_ok=True)
        st = os.lstat(lock_dir)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise RuntimeError(f"{lock_dir} is not a private directory of ours; remove it")
        start = (os.getpid() * 7919 + time.monotonic_ns()) % len(UID_POOL)
        for i in range(len(UID_POOL)):
            uid = UID_POOL[(start + i) % len(UID_POOL)]
            with contextlib.suppress(KeyError):
                pwd.getpwuid(uid)
                continue  # a real account: never borrow it
            fd = os.open(os.path.join(lock_dir, f"{uid}.lock"),
                         os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            if not kill_uid(uid):  # stale processes left by a crashed holder
                os.close(fd)
                continue
            self.uid, self._fd = uid, fd
            return
        raise RuntimeError("no free sandbox uid in the pool (too many concurrent sandboxes)")

    def release(self, *, killed: bool = False) -> None:
        """Give the uid back, killing its processes first unless the caller just did
        (``killed``) and nothing could have started one since."""
        if self._fd >= 0:
            if not killed:
                kill_uid(self.uid)
            os.close(self._fd)
            self._fd = -1
