"""The checker: runs the hidden tests against the candidate and prints the one-line report.

``main`` is the sandbox's entry point (``python -I -B harness.pyz``; with ``--worker`` the
same file starts a replacement worker instead, see :mod:`.procs`). In order:

1. open the output file for the program's prints and fork the first worker, while this process
   has read nothing secret (:meth:`.procs.Worker.fork`);
2. make itself non-dumpable (``PR_SET_DUMPABLE 0``), so processes of the same uid can read
   neither its memory nor its ``/proc`` fds and environ, nor ptrace it;
3. read the trusted material from stdin as JSON (``context``, ``test``, ``entry_point``,
   ``program``, ``timeout``) — the tests never exist as a file in the sandbox;
4. exec ``context`` then ``test`` in a fresh namespace and run the top-level statements of
   ``check(candidate)`` one by one (:mod:`.plan`), ``candidate`` being a proxy that forwards
   each call to the worker; a worker that dies fails the statement it was serving and the next
   statement gets a fresh one (at most ``MAX_RESTARTS`` times); a call that runs past the
   overall deadline kills the worker and later statements are reported as not run;
5. write exactly one JSON line, the report, to the original stdout (everything the test code
   prints goes to stderr).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import ctypes
import json
import os
import sys
import time

from . import messages
from .plan import clip, plan
from .procs import CallTimeout, ImportFailed, Worker, WorkerDied, call_line
from .wire import Unsupported, decode, encode, loads
from .worker import exec_main

MAX_RESTARTS = 25
AHEAD_BYTES = 32 << 10
"""At most this much of calls is sent ahead: less than a pipe holds, so that the checker never
blocks writing while the worker blocks writing replies nobody reads yet."""
REPORT_BUDGET = 60_000
OUTPUT_FILE = "candidate_output.txt"
# The one module-level object here, and it is immutable: the C library's handle, opened at
# import (before anything secret is read) so that a fork server's children inherit it rather
# than load a library after the fork. The checker keeps no other state outside its Harness.
_LIBC = ctypes.CDLL(None, use_errno=True)


class CandidateProtocolError(Exception):
    """The candidate returned something that cannot cross the RPC."""

    sharpen_message: str
    """What the test report says (set before raising; read back with ``getattr``, as the
    rebuilt built-in exceptions carry it too)."""


def _rebuild_exception(name, text):
    cls = getattr(builtins, name, None)
    if (isinstance(cls, type) and issubclass(cls, Exception)
            and not issubclass(cls, (StopIteration, StopAsyncIteration))):
        try:
            return cls(text)
        except Exception:  # noqa: BLE001 - e.g. UnicodeDecodeError needs 5 arguments
            return CandidateProtocolError(text)
    return CandidateProtocolError(text)


class Candidate:
    """The ``candidate`` the tests call: forwards each call to the worker."""

    def __init__(self, harness):
        self.h = harness
        self.last = None  # (args, kwargs, result-or-marker)

    def __call__(self, *args, **kwargs):
        h = self.h
        self.last = (args, kwargs, messages.NO_RESULT)
        try:
            eargs = [encode(a) for a in args]
            ekwargs = {k: encode(v) for k, v in kwargs.items()}
        except Unsupported as exc:
            msg = f"the test passes {exc} to the candidate, which cannot be sent"
            raise TypeError(msg) from None
        worker = h.worker_for_call()
        try:
            if h.ahead and h.ahead[0] == (eargs, ekwargs):  # sent ahead: its reply is next
                h.ahead.pop(0)
                msg = worker.reply(h.deadline)
            else:
                if h.ahead:  # the tests took another turn: replies of calls sent ahead would
                    worker.kill()  # come first, so this worker is done
                    worker = h.worker_for_call()
                msg = worker.call(eargs, ekwargs, h.deadline)
        except CallTimeout:
            h.timed_out = True
            raise
        if "ok" in msg:
            try:
                value = decode(msg["ok"])
            except (ValueError, TypeError, RecursionError):
                worker.kill()
                raise WorkerDied("the program sent a malformed value") from None
            self.last = (args, kwargs, value)
            return value
        if "exc" in msg:
            text = clip(msg.get("exc", ""), 600)
            self.last = (args, kwargs, messages.RAISED)
            err = _rebuild_exception(str(msg.get("type", "")), text)
            err.sharpen_message = "%s raised %s" % (self.describe(), text)
            raise err
        err = CandidateProtocolError(clip(str(msg.get("error", "?")), 300))
        err.sharpen_message = f"{self.describe()} {err}"
        raise err

    def describe(self):
        return messages.describe_call(self.h.param, self.last)


class Harness:
    """Plans and runs the statements of ``check(candidate)``."""

    def __init__(self, cfg, out_fd, worker, bundle):
        self.cfg = cfg
        self.limit = float(cfg.get("timeout", 10.0))
        self.deadline = time.monotonic() + self.limit
        self.timed_out = False
        self.param = "candidate"
        self.restarts = 0
        self.out_fd = out_fd
        self.bundle = bundle
        self.wcfg = {"program": os.path.abspath(cfg.get("program", "solution.py")),
                     "entry_point": cfg["entry_point"]}
        self.worker = worker
        self.ahead = []
        """Encoded ``(args, kwargs)`` of calls sent to ``worker`` ahead of their statements,
        oldest first (see :meth:`send_ahead`)."""

    def worker_for_call(self):
        w = self.worker
        if w is None or w.poll() is not None:
            if w is not None:
                w.kill()  # its pipes, and whatever it left in its session
            if self.restarts >= MAX_RESTARTS:
                raise WorkerDied("the program crashed too many times; giving up")
            self.restarts += 1
            self.worker = None
            self.ahead = []
            w = self.worker = self.new_worker()
        if not w.ready:
            w.handshake(self.wcfg, self.deadline)
        return w

    def send_ahead(self, worker, steps):
        """Send ``worker`` the calls of the first test cases at once: those whose one call of
        the candidate has literal arguments (:func:`.plan.literal_call`), up to the first
        statement that uses the candidate otherwise and within ``AHEAD_BYTES``. The worker
        answers them in order while the checker runs the statements, which take the replies
        in turn: one round trip instead of one per call."""
        calls, lines, size = [], [], 0
        for _kind, _code, _src, _node, uses, call in steps:
            if not uses:
                continue
            if call is None:
                break
            try:
                encoded = ([encode(a) for a in call[0]], {k: encode(v) for k, v in call[1].items()})
            except (Unsupported, RecursionError):
                break
            line = call_line(*encoded)
            size += len(line)
            if size > AHEAD_BYTES:
                break
            calls.append(encoded)
            lines.append(line)
        if len(calls) > 1:
            worker.send_calls(lines, self.deadline)
            self.ahead = calls

    def new_worker(self):
        """A replacement for a worker that died: a fresh interpreter (this process holds the
        tests now, so it must not fork)."""
        return Worker.spawn(self.out_fd, self.bundle)

    def namespace(self):
        """The fresh namespace the context and the tests run in."""
        return {"__name__": "__checker__", "__builtins__": builtins}

    def run(self):
        """Run every test case; ``(results, error)``."""
        cfg = self.cfg
        if self.worker is not None:  # it imports the program while the tests are planned
            with contextlib.suppress(CallTimeout, WorkerDied):  # the first call starts another
                self.worker.configure(self.wcfg, self.deadline)
        test_src = cfg["test"]
        ns = self.namespace()
        exec(compile(cfg.get("context", ""), "<context>", "exec"), ns)
        tree = ast.parse(test_src, "<test>")
        exec(compile(tree, "<test>", "exec"), ns)
        check_def = None
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == "check":
                check_def = node
        if check_def is None or not callable(ns.get("check")):
            raise RuntimeError("the test source does not define check(candidate)")
        if check_def.args.args:
            self.param = check_def.args.args[0].arg
        proxy = Candidate(self)
        ns[self.param] = proxy
        # As in the original HumanEval, where tests ran in the program's namespace, the entry
        # point's name means the candidate too (HumanEval/33 compares with ``sort_third``).
        ns[cfg["entry_point"]] = proxy
        steps = plan(check_def, test_src, self.param, cfg["entry_point"])
        if steps is None:  # statements cannot run one by one: the whole check is one test
            steps = [("test", compile("check(%s)" % self.param, "<test>", "exec"),
                      clip(ast.get_source_segment(test_src, check_def) or "check", 200), None,
                      True, None)]

        # Import the program now so an import failure is reported as such.
        error = None
        try:
            self.send_ahead(self.worker_for_call(), steps)
        except ImportFailed as exc:
            error = str(exc)
        except (CallTimeout, WorkerDied) as exc:
            error = str(exc) or type(exc).__name__

        results: list[dict] = []
        blocked = error
        for kind, code, src, node, uses, _call in steps:
            if kind == "test" and blocked is not None:
                results.append(_result(len(results), src, False, blocked))
                continue
            if blocked is not None:
                continue
            if time.monotonic() >= self.deadline:
                self.timed_out = True
            if self.timed_out:
                blocked = "not run: time limit exceeded"
                if kind == "test":
                    results.append(_result(len(results), src, False, blocked))
                continue
            proxy.last = None
            message = None
            try:
                exec(code, ns)
            except ImportFailed as exc:
                error = blocked = str(exc)
                message = blocked
            except CallTimeout:
                self.timed_out = True
                message = "%s timed out (time limit %.1fs)" % (proxy.describe(), self.limit)
            except WorkerDied as exc:
                message = "%s crashed: %s" % (proxy.describe(), exc)
            except AssertionError as exc:
                message = messages.assert_message(exc, node, ns, self.param, proxy.last)
            except BaseException as exc:  # noqa: BLE001 - the tests judge, they never crash us
                message = (getattr(exc, "sharpen_message", None)
                           or messages.other_message(exc, self.param, proxy.last))
            if kind == "test":
                results.append(_result(len(results), src, message is None, message or ""))
            elif message is not None and blocked is None:
                blocked = f"not run: setup statement `{clip(src, 80)}` failed: {message}"
                if not uses and error is None:  # the test code itself is broken
                    error = clip(blocked[len("not run: "):], 500)
        if self.timed_out and error is None:
            error = "time limit exceeded (%.1fs)" % self.limit
        return results, error


def _result(index, src, passed, message):
    return {"index": index, "source": src, "passed": passed, "message": clip(message, 300)}


def _protect():
    """Make this process non-dumpable: no /proc/PID/mem, fd, environ or ptrace for peers."""
    if _LIBC.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 4
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def fit_report(report):
    """Shrink the report until its JSON fits ``REPORT_BUDGET`` bytes: shorter sources and
    messages first, then only the failed cases (``passed``/``total`` keep the true counts)."""
    text = json.dumps(report)
    for src_len, fail_msg in ((60, 300), (60, 150), (40, 80), (0, 40)):
        if len(text) <= REPORT_BUDGET:
            return text
        for r in report["results"]:
            r["source"] = clip(r["source"], src_len)
            r["message"] = clip(r["message"], 0 if r["passed"] else fail_msg)
        text = json.dumps(report)
    failed = [r for r in report["results"] if not r["passed"]]
    while len(text) > REPORT_BUDGET:
        report["results"] = failed
        text = json.dumps(report)
        failed = failed[: len(failed) // 2]
    return text


def main():
    if sys.argv[1:] == ["--worker"]:
        exec_main()
        return
    report = {"passed": 0, "total": 0, "results": [], "error": None, "timed_out": False}
    report_fd = os.dup(1)
    harness = worker = None
    try:
        out_fd = os.open(OUTPUT_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                         0o600)
        # Before anything secret is read: the worker gets a copy of this very interpreter.
        worker = Worker.fork(out_fd)
        _protect()
        os.dup2(2, 1)  # test code's prints must not reach the report channel
        cfg = loads(sys.stdin.buffer.read())
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        harness = Harness(cfg, out_fd, worker, os.path.abspath(sys.argv[0]))
        results, error = harness.run()
        report["results"] = results
        report["total"] = len(results)
        report["passed"] = sum(1 for r in results if r["passed"])
        report["error"] = error
        report["timed_out"] = harness.timed_out
    except BaseException as exc:  # noqa: BLE001 - always answer with a report
        report["error"] = clip("harness failure: %s: %s" % (type(exc).__name__, exc), 500)
    finally:
        last = harness.worker if harness is not None else worker
        if last is not None:
            last.kill(reap=False)
    data = (fit_report(report) + "\n").encode("ascii")
    while data:
        data = data[os.write(report_fd, data):]
