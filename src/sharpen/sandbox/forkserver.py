"""A fork server: one confined, already started interpreter that forks a fresh child per command.

Starting a sandboxed Python costs a new bubblewrap root, an interpreter and its imports: about
40 ms of CPU per hidden-test run on this machine (``docs/sandbox.md``), far more than everything
else in a step. A :class:`ForkServer` pays that once per host process: it starts
``forkserver_main.py`` under privileged bubblewrap, has it import trusted preload zips (the test
harness), and from then on each command is a ``fork`` of that warm interpreter.

What a command keeps from the fresh sandbox (``bwrap+uid+rlimits``), so that the hostile-code
guarantees hold unchanged: the same read-only root without ``/root``, ``/home``, the repo or
site-packages; no network; its own pool uid (leased per sandbox as before, so processes of
concurrent commands cannot signal, trace or read each other), its own 0700 workdir, session,
rlimits, scrubbed environment; every process killed by uid after the command. The hidden tests
still reach only the checker, on stdin. What concurrent commands now share: the mount, pid,
network (loopback only) and IPC namespaces of the one server, so they can see each other's
process list (not their memory or files) and could reach each other over loopback. The run
manifest records the mode as ``bwrap+uid+rlimits+forkserver``.

Only privileged bubblewrap (``bwrap-root``) gets a fork server: without root every command
would share one uid. Servers are cached per process by interpreter and preload (there is
usually one), started from a thread of their own (bubblewrap's ``--die-with-parent`` follows the
thread that started it) and shut down at exit.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import functools
import hashlib
import json
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from sharpen.sandbox.bwrap import wrap_forkserver
from sharpen.sandbox.host import SAFE_PATH
from sharpen.sandbox.uids import UidLease, kill_uid

log = logging.getLogger(__name__)

PROGRAM = Path(__file__).with_name("forkserver_main.py")
"""The server's own program (stdlib only), copied into the server's root."""
FORKSERVER_LABEL = "bwrap+uid+rlimits+forkserver"
"""The isolation string of a sandbox whose commands a fork server runs."""
START_TIMEOUT = 30.0
MAX_MESSAGE = 1 << 20


class ForkServerError(RuntimeError):
    """The fork server could not start, could not fork, or died."""


class Exit(NamedTuple):
    """How a command of the fork server ended."""

    status: int
    """Its exit status (negative: killed by that signal)."""
    swept: bool
    """Every other process of its uid was killed after it (see ``forkserver_main``)."""


class ForkServer:
    """A warm interpreter under privileged bubblewrap that runs each command in a fresh child.

    ``root`` is the directory bound read-write into the server's sandbox: workdirs of the
    sandboxes it serves are created inside it. ``preload`` maps file names to the bytes of
    trusted zip applications whose modules the server imports before it forks anything.
    """

    def __init__(self, python: str, prefix: str, preload: Mapping[str, bytes]) -> None:
        self.python = python
        self.preload = dict(preload)
        self.root = os.path.realpath(tempfile.mkdtemp(prefix="sharpen-forkserver-"))
        os.chmod(self.root, 0o711)  # pool uids may enter their own workdirs, never list them
        self._lock = threading.Lock()
        self._pending: dict[int, concurrent.futures.Future[Exit]] = {}
        self._next_id = 0
        self._ready = threading.Event()
        self._error: str | None = None
        self._closed = False
        self._free: list[UidLease] = []
        self._preload_inodes: dict[tuple[int, int], str] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            shutil.copyfile(PROGRAM, os.path.join(self.root, PROGRAM.name))
            for name, data in self.preload.items():
                path = Path(self.root, name)
                path.write_bytes(data)
                path.chmod(0o644)
                st = path.stat()
                self._preload_inodes[(st.st_dev, st.st_ino)] = name
            argv = [python, "-I", "-B", PROGRAM.name, str(theirs.fileno()),
                    *(os.path.join(self.root, name) for name in self.preload)]
            self._thread = threading.Thread(
                target=self._run, args=(wrap_forkserver(argv, self.root, python, prefix), theirs),
                name="sharpen-forkserver", daemon=True)
            self._thread.start()
            if not self._ready.wait(START_TIMEOUT):
                self._error = self._error or f"not ready after {START_TIMEOUT:.0f} s"
            if self._error:
                raise ForkServerError(f"the sandbox fork server did not start: {self._error}")
        except BaseException:
            self.close()
            raise

    def link_preload(self, data: bytes, target: str) -> bool:
        """Make ``target`` a hard link to the server's copy of the preload whose bytes are
        ``data`` (owned by root, mode 0644: readable, not writable, by the pool uids); False
        when ``data`` is no preload."""
        for name, preload in self.preload.items():
            if data is preload or data == preload:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(target)
                os.link(os.path.join(self.root, name), target)
                return True
        return False

    def preload_named(self, st: os.stat_result) -> str | None:
        """The name of the preload whose server copy ``st`` is (a link made by
        :meth:`link_preload`), else ``None``."""
        return self._preload_inodes.get((st.st_dev, st.st_ino))

    @property
    def alive(self) -> bool:
        """Whether the server is up and accepting commands."""
        return self._ready.is_set() and self._error is None and not self._closed

    def _run(self, argv: list[str], theirs: socket.socket) -> None:
        """The server's thread: start it, wait for ``ready``, then dispatch exit statuses."""
        try:
            log_fd = os.open(os.path.join(self.root, "forkserver.log"),
                             os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with open(log_fd, "wb") as logfile:  # the server's own errors: not for the uids
                self._proc = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=logfile, stderr=logfile,
                    pass_fds=(theirs.fileno(),), cwd=self.root, start_new_session=True,
                    env={"PATH": SAFE_PATH, "HOME": self.root, "LANG": "C.UTF-8",
                         "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
                         "PYTHONHASHSEED": "0", "PYTHONIOENCODING": "utf-8",
                         "PYTHONUNBUFFERED": "1"})
        except OSError as exc:
            self._error = str(exc)
            self._ready.set()
            return
        finally:
            theirs.close()
        while True:
            try:
                data = self._sock.recv(MAX_MESSAGE)
            except OSError:
                data = b""
            if not data:
                break
            msg = json.loads(data)
            if msg.get("ready"):
                self._ready.set()
                continue
            with self._lock:
                fut = self._pending.pop(msg.get("id"), None)
            if fut is None:
                continue
            if "status" in msg:
                fut.set_result(Exit(int(msg["status"]), msg.get("swept") is True))
            else:
                fut.set_exception(ForkServerError(f"could not fork: {msg.get('error')}"))
        # The server is gone: nothing pending will ever finish.
        self._error = self._error or self._log_tail() or "the fork server exited"
        self._ready.set()
        with self._lock:
            pending, self._pending = self._pending, {}
        for fut in pending.values():
            fut.set_exception(ForkServerError(f"the sandbox fork server died: {self._error}"))

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return Path(self.root, "forkserver.log").read_text(errors="replace").strip()[-300:]
        return ""

    def start(self, argv: Sequence[str], *, cwd: str, env: Mapping[str, str], uid: int,
              limits: Sequence[tuple[int, int]], preload: str | None,
              fds: Sequence[int]) -> tuple[int, concurrent.futures.Future[Exit]]:
        """Fork a child that runs the Python script ``argv[0]`` with ``argv[1:]`` (see
        :mod:`sharpen.sandbox.forkserver_main`); ``fds`` become its stdin, stdout and stderr.
        ``preload``: the name of the preload the script is byte for byte, so that the child
        runs it on the modules already imported (``None``: they are dropped first). Returns
        the command's id (for :meth:`kill`) and a future of how it ended: set once the child
        has exited and its uid has been swept.
        """
        if not self.alive:
            raise ForkServerError(f"the sandbox fork server is not running: {self._error}")
        fut: concurrent.futures.Future[Exit] = concurrent.futures.Future()
        with self._lock:
            self._next_id += 1
            ident = self._next_id
            self._pending[ident] = fut
        msg = {"id": ident, "argv": list(argv), "cwd": cwd, "env": dict(env), "uid": uid,
               "limits": [list(x) for x in limits], "preload": preload}
        try:  # not under the lock: the reader thread must never wait for a full socket
            socket.send_fds(self._sock, [json.dumps(msg).encode()], list(fds))
        except OSError as exc:
            with self._lock:
                self._pending.pop(ident, None)
            raise ForkServerError(f"the sandbox fork server is gone: {exc}") from None
        return ident, fut

    def kill(self, ident: int) -> None:
        """Kill command ``ident`` and every process of its uid if it still runs (its future
        follows, once it is reaped and its uid swept)."""
        with contextlib.suppress(OSError):  # the server is gone: so is the command
            self._sock.send(json.dumps({"kill": ident}).encode())

    def lease_uid(self) -> UidLease:
        """A pool uid for one sandbox: one this server holds already and whose processes are
        all dead, else a new lease (kept by the server after :meth:`give_back_uid`)."""
        with self._lock:
            if self._free:
                return self._free.pop()
        return UidLease()

    def give_back_uid(self, lease: UidLease, killed: bool) -> None:
        """Take back ``lease`` from a closed sandbox (``killed``: nothing of it is alive)."""
        if not killed and not kill_uid(lease.uid):
            lease.release()  # something survived: let the pool's next holder deal with it
            return
        with self._lock:
            if not self._closed:
                self._free.append(lease)
                return
        lease.release(killed=True)

    def close(self, *, remove_root: bool = True) -> None:
        """Stop the server (closing its socket ends it and, with it, its sandbox), give back
        its idle uids and remove its root (``remove_root=False`` while sandboxes may still
        have their workdirs in it)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        if self._proc is not None:
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if remove_root:
            shutil.rmtree(self.root, ignore_errors=True)
        with self._lock:
            free, self._free = self._free, []
        for lease in free:
            lease.release()


# Process-wide on purpose: a fork server is one confined interpreter per (python, prefix,
# preload) for this whole process, started once and shared by every sandbox and run in it
# (starting one costs what it saves on dozens of submissions); a forked child must drop the
# parent's (_forget_in_child) and exit must stop them all (shutdown_forkservers), which only a
# registry of the process can do. Giving it an owner would mean passing one through the
# environment contract down to every LocalSandbox.
_SERVERS: dict[tuple[str, str, tuple[tuple[str, str], ...]], ForkServer | None] = {}
_RETIRED: list[ForkServer] = []
"""Servers that died and were replaced: their roots are removed at shutdown."""
_SERVERS_LOCK = threading.Lock()


def forkserver_for(mode: str, python: str, prefix: str,
                   preload: Mapping[str, bytes]) -> ForkServer | None:
    """The fork server a sandbox of isolation ``mode`` (see :mod:`sharpen.sandbox.isolation`)
    gets: this process's server under privileged bubblewrap, else ``None``."""
    return get_forkserver(python, prefix, preload) if mode == "bwrap-root" else None


def get_forkserver(python: str, prefix: str, preload: Mapping[str, bytes]) -> ForkServer | None:
    """This process's fork server for ``python`` with ``preload``, started on first use;
    ``None`` (logged once) where one cannot start, so that callers use fresh sandboxes."""
    key = (python, prefix, tuple(sorted((name, _digest(data)) for name, data in preload.items())))
    with _SERVERS_LOCK:
        server = _SERVERS.get(key)
        if server is not None and not server.alive:
            server.close(remove_root=False)  # live sandboxes may still work in it
            _RETIRED.append(server)
            server = None
        elif key in _SERVERS and server is None:
            return None  # failed before: do not pay the start-up timeout again
        if server is None:
            try:
                server = ForkServer(python, prefix, preload)
            except ForkServerError as exc:
                log.warning("%s; using a fresh sandbox per command", exc)
            _SERVERS[key] = server
        return server


def _forget_in_child() -> None:
    """After ``os.fork`` of this process: the child must not talk to the parent's servers (their
    replies go to the parent's reader threads, which the child does not have), nor stop them.
    It drops its copies of their sockets and starts servers of its own when it needs them."""
    global _SERVERS_LOCK
    _SERVERS_LOCK = threading.Lock()  # another thread may have held it at the fork
    for server in [*_SERVERS.values(), *_RETIRED]:
        if server is not None:
            server._closed = True
            server._sock.close()  # this process's descriptor only; no shutdown of the socket
    _SERVERS.clear()
    _RETIRED.clear()


os.register_at_fork(after_in_child=_forget_in_child)


@functools.lru_cache(maxsize=16)
def _digest(data: bytes) -> str:
    """SHA-256 of a preload (cached: every sandbox of a run passes the same bytes object)."""
    return hashlib.sha256(data).hexdigest()


@atexit.register
def shutdown_forkservers() -> None:
    """Stop every fork server of this process (also run at exit)."""
    with _SERVERS_LOCK:
        servers = [s for s in (*_SERVERS.values(), *_RETIRED) if s is not None]
        _SERVERS.clear()
        _RETIRED.clear()
    for server in servers:
        server.close()
        shutil.rmtree(server.root, ignore_errors=True)  # a retired one's too
