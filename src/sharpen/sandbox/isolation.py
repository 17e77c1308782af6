"""Choosing the strongest isolation that works on this machine (probed once per process).

The mode names what a :class:`~sharpen.sandbox.local.LocalSandbox` gets; ``LABELS`` maps it to
the string recorded in run manifests:

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

``bwrap+uid+rlimits+forkserver`` is ``bwrap+uid+rlimits`` for commands that a fork server runs
(``LocalSandbox(fork_server=True)``, the code environment's test runs; see
:mod:`sharpen.sandbox.forkserver`).

Probing runs a tiny Python under each candidate mode (70-150 ms in all). Results are cached
for the process, so calling :func:`detect_isolation` up front (the runner does, when it creates
a run) spares the first default sandbox that cost.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping

from sharpen.sandbox.bwrap import find_bwrap, wrap
from sharpen.sandbox.child import hidden_for_uid_ns, preexec, rlimits
from sharpen.sandbox.forkserver import FORKSERVER_LABEL, forkserver_for
from sharpen.sandbox.host import SAFE_PATH, host_python
from sharpen.sandbox.uids import UidLease, pids_of_uid

LABELS = {
    "bwrap-root": "bwrap+uid+rlimits", "bwrap-user": "bwrap+rlimits",
    "uid-ns": "uid+ns+rlimits", "uid": "uid+rlimits", "plain": "rlimits",
}
"""Internal mode -> the isolation string recorded in run manifests."""
UID_MODES = ("bwrap-root", "uid-ns", "uid")
"""Modes that run commands as a leased pool uid."""
_PROBE_CODE = "import json, ast, ctypes, select, subprocess, signal, base64; open('ok','w')"


@functools.cache
def _probe(mode: str, python: str, prefix: str) -> bool:
    """Run a tiny Python under ``mode`` (once per process); True if it works."""
    workdir = os.path.realpath(tempfile.mkdtemp(prefix="sharpen-probe-"))
    lease = UidLease() if mode in UID_MODES else None
    try:
        uid = lease.uid if lease else None
        if uid is not None:
            os.chown(workdir, uid, uid)
        argv = wrap(mode, [python, "-I", "-c", _PROBE_CODE], workdir, uid, python, prefix, ())
        nproc = 64 + (0 if os.geteuid() == 0 else len(pids_of_uid(os.getuid())))
        r = subprocess.run(
            argv, cwd=workdir, env={"PATH": SAFE_PATH, "HOME": workdir, "LANG": "C.UTF-8"},
            capture_output=True, timeout=30, start_new_session=True, check=False,
            preexec_fn=preexec(mode, uid, rlimits(30, 1 << 30, 1 << 20, 64, nproc),
                               hidden_for_uid_ns(python, workdir, ()) if mode == "uid-ns"
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
def choose(use_bwrap: bool | None, drop_uid: bool | None) -> tuple[str, str, str]:
    """(mode, python, prefix) for the given preferences, probed once per process."""
    exe, prefix = host_python()
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
        return choose(True, None)[0].startswith("bwrap")
    except RuntimeError:
        return False


def detect_isolation(*, fork_server: bool = False,
                     preload: Mapping[str, bytes] | None = None) -> str:
    """The isolation a :class:`LocalSandbox` with default isolation arguments (and these
    ``fork_server``/``preload``) gets on this machine, for run manifests.

    Probed once per process and cached; such a ``LocalSandbox`` reuses the same result (and
    the fork server this starts, where it applies).
    """
    mode, python, prefix = choose(None, None)
    if fork_server and forkserver_for(mode, python, prefix, preload or {}) is not None:
        return FORKSERVER_LABEL
    return LABELS[mode]
