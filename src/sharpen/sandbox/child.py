"""What a sandboxed child does between fork and exec: rlimits, namespaces (via libc), uid drop."""

from __future__ import annotations

import ctypes
import functools
import os
import resource
import shutil
import sys
from collections.abc import Callable, Sequence

from sharpen.sandbox.host import SAFE_PATH, site_dirs

CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 0x4000, 0x40000
HIDDEN_DIRS = ("/home", "/root", "/opt", "/srv", "/mnt", "/media")
"""Covered with an empty tmpfs in the ``uid+ns`` fallback (bubblewrap never binds them)."""
_LIBC = ctypes.CDLL(None, use_errno=True)


def hidden_for_uid_ns(python: str, workdir: str, extra: Sequence[str]) -> list[str]:
    """Directories to cover in the ``uid+ns`` fallback, minus any that hold what we need."""
    keep = [workdir, os.path.realpath(python)]
    wanted = [*HIDDEN_DIRS, os.getcwd(), sys.prefix, *site_dirs(python), *extra]
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


def preexec(mode: str, uid: int | None, limits: list[tuple[int, int]],
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


_PRLIMIT_FLAGS = {resource.RLIMIT_CPU: "--cpu", resource.RLIMIT_AS: "--as",
                  resource.RLIMIT_FSIZE: "--fsize", resource.RLIMIT_NOFILE: "--nofile",
                  resource.RLIMIT_NPROC: "--nproc", resource.RLIMIT_CORE: "--core"}


@functools.cache
def _prlimit() -> str | None:
    found = shutil.which("prlimit", path=SAFE_PATH)
    return found if found and found.startswith("/usr/") else None


def prlimit_argv(mode: str, limits: list[tuple[int, int]]) -> list[str] | None:
    """The same limits as :func:`preexec` sets, as a util-linux ``prlimit`` prefix, for the
    modes whose child does nothing else between fork and exec (bubblewrap and plain); ``None``
    for the others or when ``prlimit`` is missing.

    Without a ``preexec_fn`` no Python runs in the child and ``subprocess`` can start it with
    ``vfork``: copying the page tables of a large host process (a runner with its store and
    models) took longer than the rest of the spawn. ``prlimit`` sets the limits on itself and
    then execs the command, so they are in force from the same point as before: the command's
    first instruction, before bubblewrap sets anything up.
    """
    if mode not in ("bwrap-root", "bwrap-user", "plain") or _prlimit() is None:
        return None
    return [_prlimit() or "prlimit",
            *(f"{_PRLIMIT_FLAGS[which]}={value}:{value}" for which, value in limits), "--"]


def rlimits(cpu: int, memory: int, fsize: int, nofile: int, nproc: int) -> list[tuple[int, int]]:
    """(resource, value) pairs for the child, each capped at the current hard limit."""
    out = []
    for which, value in ((resource.RLIMIT_CPU, cpu), (resource.RLIMIT_AS, memory),
                         (resource.RLIMIT_FSIZE, fsize), (resource.RLIMIT_NOFILE, nofile),
                         (resource.RLIMIT_NPROC, nproc), (resource.RLIMIT_CORE, 0)):
        hard = resource.getrlimit(which)[1]
        out.append((which, value if hard == resource.RLIM_INFINITY else min(value, hard)))
    return out
