"""LocalSandbox: run untrusted commands in a temporary workdir on this machine.

The strongest isolation that works here is used; ``isolation`` names it (the modes are described
in :mod:`sharpen.sandbox.isolation`). The parts live in their own modules: :mod:`.bwrap`
(bubblewrap argv), :mod:`.child` (rlimits, namespaces and uid drop between fork and exec, or
the ``prlimit`` prefix that sets the same rlimits where nothing else is needed),
:mod:`.forkserver` (one warm confined interpreter that forks a child per command),
:mod:`.pipes` (the command's output and input), :mod:`.uids` (the flock'ed uid pool,
``kill_uid``) and :mod:`.host` (interpreter, PATH).

Every mode sets rlimits in the child (CPU, address space, file size, open files, processes,
no core files) before the command's first instruction, gives it its own session and a
scrubbed environment, caps captured output (draining the rest) and SIGKILLs the whole process
group when the wall-clock timeout fires.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import errno
import logging
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Self

from sharpen.core.activity import doing
from sharpen.sandbox.base import ExecResult
from sharpen.sandbox.bwrap import NOBODY, find_bwrap, wrap
from sharpen.sandbox.child import (
    CLONE_NEWNET,
    CLONE_NEWNS,
    HIDDEN_DIRS,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_REC,
    hidden_for_uid_ns,
    preexec,
    prlimit_argv,
    rlimits,
)
from sharpen.sandbox.forked import ForkedProcess
from sharpen.sandbox.forkserver import (
    FORKSERVER_LABEL,
    Exit,
    ForkServer,
    ForkServerError,
    forkserver_for,
)
from sharpen.sandbox.host import SAFE_PATH
from sharpen.sandbox.isolation import LABELS, UID_MODES, bwrap_usable, choose, detect_isolation
from sharpen.sandbox.pipes import drain, drain_fd, feed, feed_fd
from sharpen.sandbox.uids import UID_POOL, UidLease, kill_uid, pids_of_uid

__all__ = [  # the names this module has always offered, wherever they now live
    "CLONE_NEWNET", "CLONE_NEWNS", "HIDDEN_DIRS", "LABELS", "MS_NODEV", "MS_NOEXEC", "MS_NOSUID",
    "MS_PRIVATE", "MS_REC", "NOBODY", "SAFE_PATH", "UID_POOL", "ExecResult", "LocalSandbox",
    "bwrap_usable", "detect_isolation", "find_bwrap", "kill_uid",
]
log = logging.getLogger(__name__)


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    """Stream protocol that also reports the moment the process exits."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=2**16, loop=loop)
        self.exited: asyncio.Future[None] = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


def _open_regular(path: str, flags: int) -> int:
    """``os.open`` of a regular file, never through a symlink and never blocking: a program
    may leave a FIFO (or a symlink) where the host will read or write next."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, f"{path} is not a regular file")
    os.set_blocking(fd, True)
    return fd


@dataclasses.dataclass(frozen=True)
class _Script:
    """A Python script a fork server can run, and the preload it is byte for byte, if any."""

    preload: str | None


@dataclasses.dataclass
class _Running:
    """A started command, however it was started: what :meth:`LocalSandbox.exec` waits on."""

    readers: list[asyncio.Future[tuple[bytes, bool]]]
    """Drains of stdout and stderr: (kept bytes, truncated)."""
    feeder: asyncio.Future[None]
    """Writes stdin."""
    exited: asyncio.Future[Any]
    """Done when the command's own process has exited."""
    returncode: Callable[[], int | None]
    kill_group: Callable[[], None]
    """SIGKILL the command's process group (the uid kill follows separately)."""
    finish: Callable[[], Awaitable[None]]
    """Release what the start took (after the kills)."""
    swept: bool = False
    """Every other process of the uid was killed after the command ended (the fork server
    does that for its commands: see :mod:`sharpen.sandbox.forkserver_main`)."""


class LocalSandbox:
    """A temporary workdir plus confined command execution (see the module docstring and
    :mod:`sharpen.sandbox.isolation` for the modes).

    ``use_bwrap`` / ``drop_uid``: ``None`` picks the strongest mode that works, ``False``
    forbids that layer (tests force the fallback with ``use_bwrap=False``), ``True`` requires
    it. Limits apply per process; ``cpu_seconds=None`` means ``int(timeout) + 1``.
    ``hide_paths`` are covered with an empty tmpfs under bubblewrap and in the ``uid+ns``
    fallback (under bubblewrap they are absent anyway unless they lie under ``/usr``/``/etc``).

    ``fork_server=True`` runs Python scripts (``[sb.python, "-I", "-B", SCRIPT, ...]``) as
    children of this process's :class:`~sharpen.sandbox.forkserver.ForkServer`, which has the
    trusted zip applications in ``preload`` (file name -> bytes) imported already: no new
    sandbox, interpreter or imports per command. Only under privileged bubblewrap and without
    ``hide_paths``; elsewhere (or if the server cannot start) it is ignored, and ``isolation``
    says which you got. The workdir then lies in the server's root, not in ``root_dir``.
    """

    def __init__(
        self,
        *,
        root_dir: str | None = None,
        extra_env: Mapping[str, str] | None = None,
        use_bwrap: bool | None = None,
        drop_uid: bool | None = None,
        cpu_seconds: int | None = None,
        memory_bytes: int = 1 << 30,
        file_size_bytes: int = 16 << 20,
        open_files: int = 64,
        processes: int = 64,
        output_limit: int = 64 * 1024,
        hide_paths: Sequence[str] = (),
        fork_server: bool = False,
        preload: Mapping[str, bytes] | None = None,
    ) -> None:
        self._mode, self.python, self._prefix = choose(use_bwrap, drop_uid)
        self.isolation: str = LABELS[self._mode]
        """The isolation level actually in force."""
        self._preload = dict(preload or {})
        self._server = (forkserver_for(self._mode, self.python, self._prefix, self._preload)
                        if fork_server and not hide_paths else None)
        if self._server is not None:
            self.isolation = FORKSERVER_LABEL
            root_dir = self._server.root
        # self.python: an interpreter that runs inside this sandbox (absolute path).
        self.extra_env = dict(extra_env or {})
        self.cpu_seconds = cpu_seconds
        self.memory_bytes = memory_bytes
        self.file_size_bytes = file_size_bytes
        self.open_files = open_files
        self.processes = processes
        self.output_limit = output_limit
        self.hide_paths = [p for p in hide_paths if os.path.isabs(p)]
        if self._server is not None:
            self._lease: UidLease | None = self._server.lease_uid()
        else:
            self._lease = UidLease() if self._mode in UID_MODES else None
        self.uid: int | None = self._lease.uid if self._lease else None
        """The pool uid the commands run as (``None`` when no uid is dropped)."""
        self.workdir = os.path.realpath(tempfile.mkdtemp(prefix="sharpen-sbx-", dir=root_dir))
        if self.uid is not None:
            os.chown(self.workdir, self.uid, self.uid)
        self._uid_ns_hidden = (hidden_for_uid_ns(self.python, self.workdir, self.hide_paths)
                               if self._mode == "uid-ns" else [])
        self._closed = False
        self._uid_state = _UidState()
        self._finalizer = weakref.finalize(
            self, _cleanup, self.workdir, self._lease, self._uid_state,
            self._server.give_back_uid if self._server is not None else None)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- files
    def _resolve(self, path: str) -> str:
        if not path or os.path.isabs(path) or "\0" in path:
            raise ValueError(f"sandbox path must be relative to the workdir: {path!r}")
        full = os.path.realpath(os.path.join(self.workdir, path))
        if not full.startswith(self.workdir + os.sep):
            raise ValueError(f"sandbox path escapes the workdir: {path!r}")
        return full

    async def write_file(self, path: str, content: str | bytes) -> None:
        """Write ``content`` to ``path`` (relative to the workdir; parents are created).

        With a fork server, content equal to one of its preloads becomes a hard link to the
        server's read-only copy (no write, and the server knows the file for its own)."""
        full = self._resolve(path)
        data = content.encode("utf-8") if isinstance(content, str) else content
        parent = os.path.dirname(full)
        if not os.path.isdir(parent):
            os.makedirs(parent, exist_ok=True)
            d = parent
            while self.uid is not None and d != self.workdir:
                os.chown(d, self.uid, self.uid)
                d = os.path.dirname(d)
        if self._server is not None:
            if self._server.link_preload(data, full):
                return
            with contextlib.suppress(FileNotFoundError):  # never write through such a link
                if self._server.preload_named(os.lstat(full)) is not None:
                    os.unlink(full)
        fd = _open_regular(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            if self.uid is not None:
                os.fchown(fd, self.uid, self.uid)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)

    async def read_file(self, path: str) -> str:
        """Read a text file (at most 16 MiB) from the workdir; symlinks are never followed."""
        fd = _open_regular(self._resolve(path), os.O_RDONLY)
        with os.fdopen(fd, "rb") as fh:
            return fh.read(16 << 20).decode("utf-8", errors="replace")

    # -- exec
    def _env(self) -> dict[str, str]:
        env = {
            "PATH": SAFE_PATH, "HOME": self.workdir, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "TMPDIR": "/tmp" if self._mode.startswith("bwrap") else self.workdir,
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", "PYTHONIOENCODING": "utf-8",
            "PYTHONUNBUFFERED": "1",
        }
        env.update(self.extra_env)
        return env

    async def exec(
        self, argv: list[str], *, stdin: bytes | None = None, timeout: float = 10.0
    ) -> ExecResult:
        """Run ``argv`` in the workdir under the sandbox's isolation.

        With a fork server, ``[self.python, "-I", "-B", SCRIPT, *args]`` for a script in the
        workdir runs in a child forked from it; every other command (and every command, should
        the server be gone before it starts) in a fresh sandbox.
        """
        with doing("sandbox"):  # the run's progress bar counts episodes waiting on one
            return await self._exec(argv, stdin=stdin, timeout=timeout)

    async def _exec(self, argv: list[str], *, stdin: bytes | None, timeout: float) -> ExecResult:
        if self._closed:
            raise RuntimeError("sandbox is closed")
        limits = self._limits(timeout)
        start = time.monotonic()
        if self.uid is not None:  # (should the spawn fail, it stays counted: close kills)
            self._uid_state.running += 1
            self._uid_state.clean = False
        run = None
        if self._server is not None and (script := self._forkable(argv)) is not None:
            try:
                run = self._start_forked(self._server, argv[3:], stdin, limits, script.preload)
            except ForkServerError as exc:
                log.warning("%s; running the command in a fresh sandbox", exc)
        if run is None:
            run = await self._start_fresh(argv, stdin, limits)
        timed_out = False
        try:
            # Wait for the process itself, not for its pipes: a child that inherited them
            # must not keep us waiting.
            await asyncio.wait_for(asyncio.shield(run.exited), timeout)
        except TimeoutError:
            timed_out = True
        finally:
            # The group first (the leader is unreaped or just reaped, so the pgid is ours),
            # then every process of the pool uid, which catches daemons that left the group.
            # (A forked command: the fork server kills it and then its uid.)
            run.kill_group()
            if self.uid is not None:
                if timed_out:  # killed just now: a forked one is swept once it is reaped
                    await asyncio.wait([run.exited], timeout=5.0)
                swept = run.swept
                none_left = swept or await asyncio.to_thread(kill_uid, self.uid)
                self._uid_state.running -= 1
                self._uid_state.clean = none_left and self._uid_state.running == 0
            done, pending = await asyncio.wait(run.readers, timeout=1.0)
            for task in pending:
                task.cancel()
            run.feeder.cancel()
            await run.finish()
        outs = [t.result() if t in done else (b"", True) for t in run.readers]
        return ExecResult(
            returncode=None if timed_out else run.returncode(),
            stdout=outs[0][0].decode("utf-8", errors="replace"),
            stderr=outs[1][0].decode("utf-8", errors="replace"),
            timed_out=timed_out,
            truncated=outs[0][1] or outs[1][1],
            seconds=time.monotonic() - start,
        )

    def _limits(self, timeout: float) -> list[tuple[int, int]]:
        nproc = self.processes
        if os.geteuid() != 0:  # RLIMIT_NPROC counts every process of the user
            nproc += len(pids_of_uid(os.getuid()))
        cpu = self.cpu_seconds if self.cpu_seconds is not None else int(timeout) + 1
        return rlimits(cpu, self.memory_bytes, self.file_size_bytes, self.open_files, nproc)

    @property
    def forks_preloads(self) -> bool:
        """Whether :meth:`start_preload` works: a fork server runs this sandbox's scripts."""
        return self._server is not None

    def start_preload(self, name: str, args: Sequence[str] = (), *, stdin: int, stdout: int,
                      stderr: int, timeout: float = 10.0) -> ForkedProcess:
        """Start the preload ``name`` (a key of ``preload``) with ``args`` in a child of the
        fork server, in the workdir, as the sandbox's uid, under its limits (CPU seconds from
        ``timeout`` as in :meth:`exec`), its stdin, stdout and stderr being the caller's
        descriptors (left open here). For callers that talk to the process themselves, from
        a worker thread: :class:`~sharpen.sandbox.forked.ForkedProcess` blocks. Not to be
        mixed with a concurrent :meth:`exec` on the same sandbox.

        Raises :class:`~sharpen.sandbox.forkserver.ForkServerError` when no fork server runs
        this sandbox (see :attr:`forks_preloads`) or it is gone, ``KeyError`` for an unknown
        preload."""
        if self._closed:
            raise RuntimeError("sandbox is closed")
        if self._server is None:
            raise ForkServerError("this sandbox has no fork server")
        if name not in self._preload:
            raise KeyError(f"no preload named {name!r}")
        assert self.uid is not None  # fork servers exist for bwrap-root only
        uid, state, server = self.uid, self._uid_state, self._server
        state.running += 1
        state.clean = False
        try:
            ident, ended = server.start([name, *args], cwd=self.workdir, env=self._env(),
                                        uid=uid, limits=self._limits(timeout), preload=name,
                                        fds=[stdin, stdout, stderr])
        except BaseException:
            state.running -= 1
            raise

        def settled(ended: bool, clean: bool) -> None:
            if ended:
                state.running -= 1
            state.clean = clean and state.running == 0

        return ForkedProcess(ended, kill=lambda: server.kill(ident),
                             kill_uid=lambda: kill_uid(uid), settled=settled)

    async def _start_fresh(self, argv: list[str], stdin: bytes | None,
                           limits: list[tuple[int, int]]) -> _Running:
        """Start ``argv`` as a new process tree confined by this sandbox's mode."""
        real = wrap(self._mode, list(argv), self.workdir, self.uid, self.python, self._prefix,
                    self.hide_paths)
        prefix = prlimit_argv(self._mode, limits)
        if prefix is not None:
            real, child_setup = prefix + real, None
        else:
            child_setup = preexec(self._mode, self.uid, limits, self._uid_ns_hidden)
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.subprocess_exec(
            lambda: _Protocol(loop),
            *real,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=self.workdir, env=self._env(), start_new_session=True, close_fds=True,
            preexec_fn=child_setup,
        )
        proc = asyncio.subprocess.Process(transport, protocol, loop)

        def kill_group() -> None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

        async def finish() -> None:
            if not protocol.exited.done():
                await asyncio.wait([protocol.exited], timeout=5.0)
            transport.close()

        return _Running(
            readers=[asyncio.ensure_future(drain(s, self.output_limit))
                     for s in (proc.stdout, proc.stderr)],
            feeder=asyncio.ensure_future(feed(proc.stdin, stdin)),
            exited=protocol.exited, returncode=transport.get_returncode,
            kill_group=kill_group, finish=finish)

    def _forkable(self, argv: list[str]) -> _Script | None:
        """For ``[python, -I, -B, SCRIPT, ...]`` with SCRIPT a regular file in the workdir:
        which of the fork server's preloads it is byte for byte, if any; ``None`` for any
        other command."""
        if len(argv) < 4 or argv[:3] != [self.python, "-I", "-B"] or argv[3].startswith("-"):
            return None
        try:
            fd = _open_regular(self._resolve(argv[3]), os.O_RDONLY)
        except (OSError, ValueError):
            return None
        with os.fdopen(fd, "rb") as fh:
            linked = self._server.preload_named(os.fstat(fh.fileno())) if self._server else None
            if linked is not None:  # linked by write_file: the preload itself
                return _Script(linked)
            data = fh.read(max(map(len, self._preload.values()), default=0) + 1)
        return _Script(next((name for name, preload in self._preload.items() if data == preload),
                            None))

    def _start_forked(self, server: ForkServer, argv: list[str], stdin: bytes | None,
                      limits: list[tuple[int, int]], preload: str | None) -> _Running:
        """Start the Python script ``argv[0]`` in a child of the fork server."""
        assert self.uid is not None  # fork servers exist for bwrap-root only
        loop = asyncio.get_running_loop()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        in_r, in_w = os.pipe() if stdin is not None else (os.open(os.devnull, os.O_RDONLY), -1)
        rest = b""
        if stdin is not None:  # what fits in the pipe goes in now: the child finds it waiting
            os.set_blocking(in_w, False)
            try:
                rest = stdin[os.write(in_w, stdin):]
            except BlockingIOError:
                rest = stdin
            if not rest:
                os.close(in_w)
                in_w = -1
        try:
            ident, ended = server.start(argv, cwd=self.workdir, env=self._env(), uid=self.uid,
                                        limits=limits, preload=preload,
                                        fds=[in_r, out_w, err_w])
        except BaseException:
            for fd in (out_r, err_r, in_w):
                if fd >= 0:
                    os.close(fd)
            raise
        finally:
            for fd in (in_r, out_w, err_w):
                os.close(fd)
        exited: asyncio.Future[int] = loop.create_future()

        def settle(end: Exit | None, exc: BaseException | None) -> None:
            if exited.done():
                return
            if end is None:
                exited.set_exception(exc or ForkServerError("no exit status"))
            else:
                run.swept = end.swept
                exited.set_result(end.status)

        def on_end(fut: concurrent.futures.Future[Exit]) -> None:  # the server's reader thread
            exc = fut.exception()
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(settle, None if exc else fut.result(), exc)

        def kill() -> None:
            if not exited.done():
                server.kill(ident)

        async def finish() -> None:
            if not exited.done():
                await asyncio.wait([exited], timeout=5.0)

        run = _Running(
            readers=[asyncio.ensure_future(drain_fd(fd, self.output_limit))
                     for fd in (out_r, err_r)],
            feeder=asyncio.ensure_future(feed_fd(in_w, rest) if in_w >= 0
                                         else asyncio.sleep(0)),
            exited=exited,
            returncode=lambda: exited.result() if exited.done() and not exited.cancelled()
            and exited.exception() is None else None,
            kill_group=kill, finish=finish)
        ended.add_done_callback(on_end)
        return run

    async def close(self) -> None:
        """Kill leftovers, delete the workdir and give the uid back."""
        if not self._closed:
            self._closed = True
            await asyncio.to_thread(self._finalizer)

    def close_blocking(self) -> None:
        """:meth:`close` for a thread that is not the event loop's (it blocks)."""
        if not self._closed:
            self._closed = True
            self._finalizer()


class _UidState:
    """Whether the pool uid may have live processes (shared with the finalizer, so that closing
    right after a command need not scan ``/proc`` again)."""

    def __init__(self) -> None:
        self.running = 0
        """Commands whose final kill has not completed."""
        self.clean = True
        """The last final kill left no process of the uid, and no command runs (the lease
        starts clean: it kills stale processes before it is handed out)."""


def _cleanup(workdir: str, lease: UidLease | None, state: _UidState,
             give_back: Callable[[UidLease, bool], None] | None) -> None:
    """Kill what is left, remove the workdir, and release the uid (or give it back to the fork
    server that lent it)."""
    killed = lease is not None and (state.clean or kill_uid(lease.uid))

    def _retry(func: object, path: str, exc: object) -> None:  # a program may chmod 000
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), 0o700)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, 0o700)
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)

    shutil.rmtree(workdir, onerror=_retry)
    if lease is not None and give_back is not None:
        give_back(lease, killed)
    elif lease is not None:
        lease.release(killed=killed)  # removing files starts no process
