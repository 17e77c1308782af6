"""The checker's handle on a worker process: starting it, the RPC, killing it.

Two ways to start one (both give the worker its own session, two pipes and the output file):

* :meth:`Worker.fork`: the first worker is forked from the checker *before* the checker reads
  the hidden tests, so it inherits an interpreter that is already up with its modules imported
  (no second start-up) and nothing secret: fork copies memory as it is at that moment, and the
  tests arrive later, on the checker's stdin, which the child closes at once.
* :meth:`Worker.spawn`: a worker that died (``os._exit``, a signal, a crash) is replaced by a
  fresh interpreter, ``posix_spawn`` of ``python -I -B harness.pyz --worker``: by then the
  checker holds the tests, so it must never be forked again. ``posix_spawn`` execs without
  copying the checker, and every descriptor but the three it is given is close-on-exec.

Both wait for the config line (program and entry point) before importing anything.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import time

from .wire import loads
from .worker import become_worker

MAX_LINE = 16 << 20


class CallTimeout(BaseException):
    """A candidate call ran past the deadline (not catchable by ``except Exception``)."""


class WorkerDied(BaseException):
    """The worker process exited while serving a call."""


class ImportFailed(BaseException):
    """The program could not be imported; every test case fails."""


def _status(raw):
    """Exit code of a ``waitpid`` status, negative for a signal (as ``Popen.returncode``)."""
    if os.WIFSIGNALED(raw):
        return -os.WTERMSIG(raw)
    return os.WEXITSTATUS(raw)


def call_line(args, kwargs):
    """The wire line of one call of the entry point (encoded ``args`` and ``kwargs``)."""
    return json.dumps({"args": args, "kwargs": kwargs}) + "\n"


class Worker:
    """The candidate process and its RPC pipes."""

    def __init__(self, pid, rfd, wfd):
        self.pid = pid
        self.rfd = rfd
        """Replies from the worker."""
        self.wfd = wfd
        """Requests to the worker."""
        self.returncode = None
        self.buf = b""
        self.configured = False
        self.ready = False

    @classmethod
    def fork(cls, out_fd):
        """Fork a worker from this process (only while it holds no hidden test)."""
        from_checker, to_worker = os.pipe()
        from_worker, to_checker = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child never returns
            become_worker(from_checker, to_checker, out_fd)
        os.close(from_checker)
        os.close(to_checker)
        return cls(pid, from_worker, to_worker)

    @classmethod
    def spawn(cls, out_fd, bundle):
        """Start a worker as a fresh interpreter running ``bundle --worker``."""
        from_checker, to_worker = os.pipe()
        from_worker, to_checker = os.pipe()
        try:
            pid = os.posix_spawn(
                sys.executable, [sys.executable, "-I", "-B", bundle, "--worker"], dict(os.environ),
                file_actions=[(os.POSIX_SPAWN_DUP2, from_checker, 0),
                              (os.POSIX_SPAWN_DUP2, to_checker, 1),
                              (os.POSIX_SPAWN_DUP2, out_fd, 2)],
                setsid=True,
            )
        except (OSError, NotImplementedError) as exc:  # e.g. the process limit, after a fork bomb
            for fd in (from_checker, to_worker, from_worker, to_checker):
                os.close(fd)
            why = getattr(exc, "strerror", None) or exc
            raise WorkerDied("the program's process could not be started (%s)" % why) from None
        os.close(from_checker)
        os.close(to_checker)
        return cls(pid, from_worker, to_worker)

    def poll(self):
        """The exit status once the worker has exited (or was killed), else ``None``."""
        if self.returncode is None:
            try:
                pid, raw = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped already: gone all the same
                self.returncode = -signal.SIGKILL
            else:
                if pid == self.pid:
                    self.returncode = _status(raw)
        return self.returncode

    def _read_line(self, deadline):
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise CallTimeout()
            r, _, _ = select.select([self.rfd], [], [], left)
            if not r:
                continue
            chunk = os.read(self.rfd, 1 << 16)
            if not chunk:
                self.kill()
                raise WorkerDied("the program's process exited (status %s)" % self.returncode)
            self.buf += chunk
            if len(self.buf) > MAX_LINE and b"\n" not in self.buf:
                self.kill()
                raise WorkerDied("the program sent a response over %d bytes" % MAX_LINE)
        line, _, self.buf = self.buf.partition(b"\n")
        return loads(line)

    def _write(self, data, deadline):
        os.set_blocking(self.wfd, False)
        try:
            while data:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.kill()
                    raise CallTimeout()
                if select.select([], [self.wfd], [], left)[1]:
                    data = data[os.write(self.wfd, data):]
        except OSError:
            self.kill()
            raise WorkerDied(
                "the program's process exited (status %s)" % self.returncode
            ) from None

    def configure(self, cfg, deadline):
        """Send the config line (once): the worker starts importing the program."""
        if not self.configured:
            self.configured = True
            self._write((json.dumps(cfg) + "\n").encode("ascii"), deadline)

    def handshake(self, cfg, deadline):
        """Send the config line unless sent already, and wait until the program is imported."""
        try:
            self.configure(cfg, deadline)
            msg = self._read_line(deadline)
        except WorkerDied:
            raise ImportFailed(
                "the program exited while being imported (status %s)" % self.returncode
            ) from None
        except CallTimeout:
            raise ImportFailed("the program timed out while being imported") from None
        if "import_error" in msg:
            raise ImportFailed("the program failed to import: " + _clip(msg["import_error"], 500))
        if msg.get("ready") is not True:
            raise ImportFailed("the program sent garbage while being imported")
        self.ready = True

    def call(self, args, kwargs, deadline):
        """One call of the entry point; the decoded-later reply message."""
        self.send_calls([call_line(args, kwargs)], deadline)
        return self.reply(deadline)

    def send_calls(self, lines, deadline):
        """Send calls (:func:`call_line` each) whose replies :meth:`reply` reads, in order.
        Keep what is sent ahead small (a pipe's worth): the worker's replies are not read
        meanwhile."""
        self._write("".join(lines).encode("ascii"), deadline)

    def reply(self, deadline):
        """The reply to the oldest call sent and not yet answered."""
        try:
            return self._read_line(deadline)
        except ValueError:
            self.kill()
            raise WorkerDied("the program sent a garbled response") from None

    def kill(self, reap=True):
        """SIGKILL the worker's session (and the worker, should it not have one yet); reap it
        unless ``reap`` is false (the checker is about to exit: init reaps it then)."""
        for send in (os.killpg, os.kill):
            with contextlib.suppress(OSError):
                send(self.pid, signal.SIGKILL)
        pause, end = 0.0001, time.monotonic() + (5.0 if reap else 0.0)
        while self.poll() is None and time.monotonic() < end:  # reap it, but never hang
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        if self.returncode is None:
            self.returncode = -signal.SIGKILL
        for fd in (self.rfd, self.wfd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.rfd = self.wfd = -1


def _clip(text, limit):
    text = str(text)
    if len(text) <= limit:
        return text
    return text[:limit] if limit <= 3 else text[: limit - 3] + "..."
