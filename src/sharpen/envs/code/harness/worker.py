"""The worker: the process that imports the candidate program and answers the checker's calls.

It starts in one of two ways (see :mod:`.procs`): forked from the checker before the checker
has read any hidden test (:func:`become_worker`), or, to replace a worker that died, as a fresh
``python -I -B harness.pyz --worker`` (:func:`exec_main`). Either way it then runs
:func:`serve`: the first line on its RPC input names the program and its entry point; it
imports the program (answering ``ready`` or ``import_error``) and then answers one line per
call (``ok`` with the encoded result, ``exc`` for an exception the program raised, ``error``
for a result that cannot be sent). The program's stdin is ``/dev/null`` and its stdout and
stderr go to the output file, never into the RPC.
"""

from __future__ import annotations

import os
import sys

from .wire import Unsupported, decode, encode, loads, send


def describe_exception(exc, program):
    """'TypeName: message' plus the last frames inside the program (no ``traceback`` import:
    it costs milliseconds in every worker whose program raises)."""
    try:
        head = type(exc).__name__ + (": " + str(exc) if str(exc) else "")
    except BaseException:  # noqa: BLE001 - a program's __str__ may raise anything
        head = type(exc).__name__
    frames = []
    try:
        lines = None
        tb = exc.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            if code.co_filename == program:
                if lines is None:
                    with open(program, encoding="utf-8", errors="replace") as fh:
                        lines = fh.read().splitlines()
                n = tb.tb_lineno
                line = lines[n - 1].strip() if n and 0 < n <= len(lines) else ""
                frames.append(f"line {n} in {code.co_name}: {line[:80]}")
            tb = tb.tb_next
    except BaseException:  # noqa: BLE001 - best effort: the head is enough
        frames = []
    text = head[:400]
    if frames:
        text += "\n  " + "\n  ".join(frames[-3:])
    return text


def serve(rpc_in, rpc_out):
    """Read the config line, import the program, then answer calls until the input ends."""
    import importlib.util
    import signal

    if hasattr(signal, "SIGXFSZ"):  # past RLIMIT_FSIZE a print raises instead of killing us
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    reader = os.fdopen(rpc_in, "rb")
    line = reader.readline()
    if not line:
        return
    cfg = loads(line)
    program, entry = cfg["program"], cfg["entry_point"]
    try:
        spec = importlib.util.spec_from_file_location("solution", program)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {program} as a module")
        module = importlib.util.module_from_spec(spec)
        sys.modules["solution"] = module
        spec.loader.exec_module(module)
        fn = getattr(module, entry, None)
        if not callable(fn):
            send(rpc_out, {"import_error": "the program does not define a function %r" % entry})
            return
    except BaseException as exc:  # noqa: BLE001 - SystemExit at import is a failure too
        send(rpc_out, {"import_error": describe_exception(exc, program)})
        return
    send(rpc_out, {"ready": True})
    while True:
        line = reader.readline()
        if not line:
            return
        try:
            req = loads(line)
            args = [decode(a) for a in req["args"]]
            kwargs = {str(k): decode(v) for k, v in req["kwargs"].items()}
        except Exception as exc:  # noqa: BLE001 - answer, never die
            send(rpc_out, {"error": f"bad request: {type(exc).__name__}"})
            continue
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - the program's failure is the answer
            send(rpc_out, {"exc": describe_exception(exc, program), "type": type(exc).__name__})
            continue
        try:
            reply = {"ok": encode(result)}
        except Unsupported as exc:
            reply = {"error": "returned %s" % exc}
        except BaseException as exc:  # noqa: BLE001 - e.g. RecursionError on a cyclic list
            reply = {"error": f"returned a value that could not be sent ({type(exc).__name__})"}
        send(rpc_out, reply)


def _close_fds_except(keep):
    """Close every file descriptor not in ``keep`` (the checker's report pipe, its stdin with
    the tests still unread, ...): a forked worker keeps only what it was given."""
    top = max(os.sysconf("SC_OPEN_MAX"), 256)
    low = 0
    for fd in sorted(keep):
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, top)


def become_worker(rpc_in, rpc_out, out_fd):
    """Turn a child just forked from the checker into a worker; never returns.

    Runs before any candidate code: a session of its own (the checker kills the group), stdin
    from ``/dev/null``, stdout and stderr to the output file, every other inherited descriptor
    closed. ``os._exit`` at the end skips the interpreter shutdown copied from the checker.
    """
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        _close_fds_except({0, 1, 2, rpc_in, rpc_out})
        serve(rpc_in, rpc_out)
    finally:
        os._exit(0)


def exec_main():
    """Entry point of a worker started with ``--worker``: stdin and stdout are the RPC pipes,
    stderr the output file."""
    rpc_in, rpc_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)  # the program's prints go to the output file, never into the RPC
    serve(rpc_in, rpc_out)
