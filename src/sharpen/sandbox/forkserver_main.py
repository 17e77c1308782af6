"""The fork server's own program: it runs *inside* a bubblewrap sandbox (stdlib only).

The host (:mod:`sharpen.sandbox.forkserver`) writes this file into the server's root and starts
``python -I -B forkserver_main.py CONTROL_FD [PRELOAD.pyz ...]`` under privileged bubblewrap,
as root of that sandbox holding only ``CAP_SETUID`` and ``CAP_SETGID``. It imports the modules
of each trusted preload zip, says ``ready`` and then serves the control socket (a
``SOCK_SEQPACKET``, one JSON message per packet):

host → server
    ``{"id", "argv", "cwd", "env", "uid", "limits", "preload"}`` with three descriptors
    (``SCM_RIGHTS``): the command's stdin, stdout and stderr; or ``{"kill": id}``: kill that
    command's process, and every process of its uid, now.
server → host
    ``{"id", "status", "swept"}`` once that command's process has exited (``status`` negative:
    killed by a signal) and every other process of its uid has been killed (``swept``: false if
    that could not be done), or ``{"id", "error"}`` when it could not be forked.

The server itself never runs a command: each one runs in a child forked for it (or in the
*spare*, a child forked ahead of time that has only waited for its command since), which before
the command's first instruction gets its own session, its three descriptors and no other,
default signal handlers, the rlimits, the command's uid (``setuid`` to a non-zero uid clears
every capability, and bubblewrap set ``no_new_privs``), its working directory and environment.
The child then runs ``argv[0]`` as ``python -I -B argv[0] argv[1:]`` would, with the
preloaded modules already imported when ``preload`` names the preload the script is, and exits
with the script's status. When the server has reaped it, nothing the command started may
outlive it (as at the end of a fresh sandbox's pid namespace), whatever the command did to its
own process: the server is a child subreaper, so every process the command left is, or
descends from, a child of the server that runs as the command's uid. If there is one, a
*sweeper* forked from the server becomes the uid and kills every process of it. Only then is
the status sent.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import gc
import json
import os
import resource
import select
import signal
import socket
import sys
import time
import traceback
import types
import zipfile
import zipimport

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
DYING_WAIT = 2.0
"""Seconds the processes a sweep killed get to die before the end is reported unswept."""
DYING_POLL = 0.01
"""Seconds between looks at them (each death of a direct child wakes the server too)."""
MAX_MESSAGE = 1 << 20


LIBC = ctypes.CDLL(None)


def preload(paths):
    """Import every module of each zip in ``paths``. Returns the names of the modules that were
    new, and each zip's ``__main__`` code by its file name (a child running a preload byte for
    byte runs that code, without opening the zip again)."""
    before = set(sys.modules)
    mains: dict[str, types.CodeType] = {}
    owner: dict[str, str] = {}
    for path in paths:
        with zipfile.ZipFile(path) as zf:
            names = sorted({n[:-3].replace("/", ".").removesuffix(".__init__")
                            for n in zf.namelist() if n.endswith(".py")} - {"__main__"})
        for name in names:  # one module object serves every child: two preloads cannot share it
            if name in owner:
                sys.exit("preloads %s and %s both hold module %s"
                         % (owner[name], os.path.basename(path), name))
            owner[name] = os.path.basename(path)
        sys.path.insert(0, path)
        try:
            for name in names:
                __import__(name)
        finally:
            sys.path.remove(path)
        mains[os.path.basename(path)] = zipimport.zipimporter(path).get_code("__main__")
    return set(sys.modules) - before, mains


def run_child(req, fds, preloaded, mains):
    """The forked child: confine, then run the command; never returns."""
    code = 127
    try:
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, max(os.sysconf("SC_OPEN_MAX"), 256))
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for which, value in req["limits"]:
            resource.setrlimit(which, (value, value))
        uid = req["uid"]
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        # setuid made the process non-dumpable; an exec'ed command would be dumpable again.
        LIBC.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        os.chdir(req["cwd"])
        env = req["env"]
        for key in [k for k in os.environ if k not in env]:
            del os.environ[key]
        for key, value in env.items():  # mostly the server's own: only HOME and TMPDIR differ
            if os.environ.get(key) != value:
                os.environ[key] = value
        sys.argv = list(req["argv"])
        main = mains.get(req["preload"]) if req["preload"] else None
        if main is None:
            for name in preloaded:
                sys.modules.pop(name, None)
        gc.enable()
        code = 0
        try:
            run_script(sys.argv[0], main)
        except SystemExit as exc:
            code = _exit_code(exc.code)
        except BaseException:  # noqa: BLE001 - reported as python would, status 1
            traceback.print_exc()
            code = 1
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):  # a closed stream: nothing to flush
                stream.flush()
    finally:
        os._exit(code)


def strays(uid, known, *, alive=False):
    """Whether a process of ``uid`` may be left: a child of the server that it did not start
    (``known``: the pids it did) and that runs, or ran, as ``uid``. The server is a child
    subreaper, so when a command's process has exited, whatever it started is, or descends
    from, such a child; a child of another uid belongs to another command. A zombie counts
    (its children may have been handed to the server after the list was read) unless
    ``alive``: after a sweep, only whether a killed process has yet to die matters."""
    try:
        with open("/proc/self/task/%d/children" % os.getpid()) as fh:
            children = [int(pid) for pid in fh.read().split()]
    except OSError:
        return True  # cannot tell: sweep
    want = "\nUid:\t%d\t" % uid
    for pid in children:
        if pid in known:
            continue
        try:
            with open("/proc/%d/status" % pid) as fh:
                text = fh.read()
        except OSError:
            return True  # cannot tell: sweep
        if want in text and not (alive and "\nState:\tZ" in text):
            return True
    return False


def sweep(uid):
    """Fork a sweeper that becomes ``uid`` and kills every process of it: ``kill(-1)`` as the
    uid reaches exactly the uid's processes, at once (one forking meanwhile cannot leave a
    child behind). Its pid, or ``None`` if it could not be forked. It exits 0 only if its kill
    ran (a process of the uid may kill it first: then it exits by that signal)."""
    try:
        pid = os.fork()
    except OSError:
        return None
    if pid == 0:  # pragma: no cover - the child never returns
        code = 1
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            with contextlib.suppress(ProcessLookupError):  # none left
                os.kill(-1, signal.SIGKILL)
            code = 0
        finally:
            os._exit(code)
    return pid


def run_script(path, main=None):
    """Run ``path`` as ``__main__``, as ``python -I -B path`` would: a zip application's
    ``__main__`` (``main`` when given: the preload's, already compiled) with the zip first on
    ``sys.path``, else the file with its directory first. (``runpy.run_path`` does the same
    with a costlier search for the importer.)"""
    full = os.path.abspath(path)
    if main is not None or zipfile.is_zipfile(full):
        sys.path.insert(0, full)
        code = main or zipimport.zipimporter(full).get_code("__main__")
        filename = os.path.join(full, "__main__.py")
    else:
        sys.path.insert(0, os.path.dirname(full))
        with open(full, "rb") as fh:
            code = compile(fh.read(), path, "exec", dont_inherit=True)
        filename = path
    module = types.ModuleType("__main__")
    module.__file__ = filename
    module.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = module
    exec(code, module.__dict__)


def _exit_code(value):
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    with contextlib.suppress(BaseException):
        print(value, file=sys.stderr)
    return 1


def send(ctl, msg):
    with contextlib.suppress(OSError):  # the host is gone; the loop ends at the next read
        ctl.send(json.dumps(msg).encode())


def fork_spare(ctl, preloaded, mains):
    """Fork a *spare*: a child that waits for the next command (which the server then forwards
    to it instead of forking), so that the fork is paid before the command arrives. It has run
    nothing but this wait; it becomes the command exactly as a child forked for it would.
    Returns ``(pid, socket to it)``, or ``None`` if it could not be forked."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        pid = os.fork()
    except OSError:
        ours.close()
        theirs.close()
        return None
    if pid == 0:  # pragma: no cover - the child never returns
        try:
            ctl.close()
            ours.close()
            data, fds, _flags, _addr = socket.recv_fds(theirs, MAX_MESSAGE, 3)
            if not data or len(fds) != 3:
                os._exit(0)  # the server is gone (or confused): nothing to run
            theirs.close()
        except BaseException:  # noqa: BLE001 - never return into the server's loop
            os._exit(0)
        run_child(json.loads(data), fds, preloaded, mains)
    theirs.close()
    return pid, ours


def serve(ctl, preloaded, mains):
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    commands: dict[int, tuple[int, int]] = {}  # pid -> (id, uid): command processes
    pids: dict[int, int] = {}  # id -> pid of a running command
    sweepers: dict[int, tuple[int, int, int]] = {}  # pid -> (id, the command's status, its uid)
    killers: set[int] = set()  # pids of sweepers that kill a running command
    # id -> (status, uid, deadline): swept, with killed processes yet to die
    dying: dict[int, tuple[int, int, float]] = {}
    spare = fork_spare(ctl, preloaded, mains)
    send(ctl, {"ready": True})  # with the first command's process forked already

    def started():
        """The pids of the children the server forked itself (see strays)."""
        return {*commands, *sweepers, *killers, *(spare[:1] if spare else ())}

    while True:
        ready = select.select([ctl, wake_r], [], [], DYING_POLL if dying else None)[0]
        if wake_r in ready:
            while True:
                try:
                    if not os.read(wake_r, 512):
                        break
                except BlockingIOError:
                    break
        while True:
            try:
                pid, raw = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in commands:
                ident, uid = commands.pop(pid)
                pids.pop(ident, None)
                status = os.waitstatus_to_exitcode(raw)
                if not strays(uid, started()):
                    send(ctl, {"id": ident, "status": status, "swept": True})
                elif (sweeper := sweep(uid)) is None:
                    send(ctl, {"id": ident, "status": status, "swept": False})
                else:
                    sweepers[sweeper] = (ident, status, uid)
                if spare is None:  # the next command's fork, while this one's end is reported
                    spare = fork_spare(ctl, preloaded, mains)
            elif pid in sweepers:
                ident, status, uid = sweepers.pop(pid)
                if os.waitstatus_to_exitcode(raw) == 0:
                    dying[ident] = (status, uid, time.monotonic() + DYING_WAIT)
                else:
                    send(ctl, {"id": ident, "status": status, "swept": False})
            elif spare is not None and pid == spare[0]:  # it died waiting
                spare[1].close()
                spare = None
            else:
                killers.discard(pid)
        if dying:  # the end is reported once what the sweep killed has died
            known = started()
            for ident, (status, uid, deadline) in list(dying.items()):
                left = strays(uid, known, alive=True)
                if not left or time.monotonic() > deadline:
                    del dying[ident]
                    send(ctl, {"id": ident, "status": status, "swept": not left})
        if ctl not in ready:
            continue
        try:
            data, fds, _flags, _addr = socket.recv_fds(ctl, MAX_MESSAGE, 3)
        except OSError:
            return
        if not data:
            return  # the host closed the socket: shut down (a spare ends with it)
        req = None
        try:
            req = json.loads(data)
            if "kill" in req:
                # Not os.kill: without CAP_KILL the server may not signal another uid. A
                # sweeper kills the command with its uid; its reap brings the usual sweep.
                target = pids.get(req["kill"])
                if target is not None and (killer := sweep(commands[target][1])) is not None:
                    killers.add(killer)
                continue
            if len(fds) != 3:
                raise ValueError("expected 3 descriptors, got %d" % len(fds))
            child: int | None = None
            if spare is not None:
                child, sock = spare
                spare = None
                try:
                    socket.send_fds(sock, [data], fds)
                except OSError:  # it died meanwhile: fork instead
                    child = None
                sock.close()
            pid = os.fork() if child is None else child
        except (OSError, ValueError) as exc:
            for fd in fds:
                os.close(fd)
            send(ctl, {"id": req.get("id") if isinstance(req, dict) else None,
                       "error": "%s: %s" % (type(exc).__name__, exc)})
            continue
        if pid == 0:
            ctl.close()
            if spare is not None:
                spare[1].close()
            run_child(req, fds, preloaded, mains)
        for fd in fds:
            os.close(fd)
        commands[pid] = (req["id"], req["uid"])
        pids[req["id"]] = pid


def main():
    ctl = socket.socket(fileno=int(sys.argv[1]))
    preloaded, mains = preload(sys.argv[2:])
    # Children share the preloaded objects copy-on-write; keep the collector off them.
    gc.collect()
    gc.freeze()
    gc.disable()
    # Orphans of the commands become the server's children (see strays), not init's.
    LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    serve(ctl, preloaded, mains)


if __name__ == "__main__":
    main()
