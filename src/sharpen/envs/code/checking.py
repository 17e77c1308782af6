"""Checking on the host: the hidden tests run here, only the candidate runs in the sandbox.

Where the sandbox has a fork server (:attr:`LocalSandbox.forks_preloads
<sharpen.sandbox.local.LocalSandbox.forks_preloads>`), :func:`check_on_host` plays the
harness's *checker* (:class:`~sharpen.envs.code.harness.checker.Harness`, the same code) in a
thread of this process, and each *worker* is ``harness.pyz --worker`` forked by the fork
server: it imports the candidate program and answers calls over the same line-based RPC of
plain data (:mod:`sharpen.envs.code.harness.wire`). Compared with the checker running inside
the sandbox, this saves a fork and the checker's copy-on-write faults per test run (about half
of its cost, ``benchmarks/sandbox_cost.py``), and the hidden tests never enter the sandbox in
any form.

What runs on the host is trusted code only: the problem's ``context`` and ``test`` (from the
dataset or a generator) and the harness. The candidate reaches it only as decoded plain data
(lists, dicts, numbers, strings; at most ``MAX_LINE`` bytes per reply). Each call of the
candidate has the overall deadline; a worker that dies is killed with everything of its uid
and replaced by a new fork (at most ``MAX_RESTARTS`` times). The test code's own prints are
discarded, as the in-sandbox checker's went to a stderr nobody reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

from sharpen.envs.code.harness.checker import OUTPUT_FILE, Harness, fit_report
from sharpen.envs.code.harness.plan import clip
from sharpen.envs.code.harness.procs import Worker, WorkerDied
from sharpen.envs.code.problem import CodeProblem
from sharpen.sandbox.closing import Closing, in_force
from sharpen.sandbox.forked import ForkedProcess
from sharpen.sandbox.forkserver import ForkServerError
from sharpen.sandbox.local import LocalSandbox

WORKER_EXIT_WAIT = 1.0
"""Seconds a worker gets to end by itself once its requests are closed, before a kill."""


class SandboxWorker(Worker):
    """A worker that is a child of the sandbox's fork server: the RPC pipes are this
    process's; its exit and kill go through :class:`~sharpen.sandbox.forked.ForkedProcess`."""

    def __init__(self, proc: ForkedProcess, rfd: int, wfd: int) -> None:
        super().__init__(-1, rfd, wfd)
        self.proc = proc

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.proc.poll()
        return self.returncode

    def kill(self, reap: bool = True) -> None:
        self.proc.kill()
        self.returncode = self.proc.returncode
        self._close_pipes()

    def finish(self) -> None:
        """End a worker that served its last call: close its requests, so that it returns
        (the fork server then sweeps its uid), and kill it if it has not ended within
        ``WORKER_EXIT_WAIT`` seconds or was not swept."""
        if self.wfd >= 0:
            os.close(self.wfd)
            self.wfd = -1
        if self.proc.wait(WORKER_EXIT_WAIT) is None or not self.proc.swept:
            self.proc.kill()
        self.returncode = self.proc.returncode
        self._close_pipes()

    def _close_pipes(self) -> None:
        for fd in (self.rfd, self.wfd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.rfd = self.wfd = -1


class HostHarness(Harness):
    """The checker on the host: workers are forked by the sandbox's fork server."""

    def __init__(self, cfg: dict[str, Any], out_fd: int, sandbox: LocalSandbox,
                 preload: str) -> None:
        super().__init__(cfg, out_fd, None, None)
        self.sandbox = sandbox
        self.preload = preload
        self.worker = self.new_worker_or_none()

    def new_worker(self) -> SandboxWorker:
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        try:
            proc = self.sandbox.start_preload(
                self.preload, ["--worker"], stdin=to_worker_r, stdout=from_worker_w,
                stderr=self.out_fd, timeout=self.limit)
        except (ForkServerError, OSError, RuntimeError) as exc:
            for fd in (to_worker_w, from_worker_r):
                os.close(fd)
            raise WorkerDied("the program's process could not be started (%s)" % exc) from None
        finally:
            os.close(to_worker_r)
            os.close(from_worker_w)
        return SandboxWorker(proc, from_worker_r, to_worker_w)

    def new_worker_or_none(self) -> SandboxWorker | None:
        """The first worker, started before the tests are planned (so that it imports the
        program meanwhile); ``None`` if it cannot start (the first call retries)."""
        try:
            return self.new_worker()
        except WorkerDied:
            return None

    def namespace(self) -> dict[str, Any]:
        ns = super().namespace()
        ns["print"] = _discard
        return ns


def _discard(*args: object, **kwargs: object) -> None:
    """``print`` for test code on the host: its output went nowhere in the sandbox either."""


def check(sandbox: LocalSandbox, program: str, problem: CodeProblem, timeout: float,
          preload: str) -> tuple[dict[str, Any], SandboxWorker | None]:
    """Run ``problem``'s tests against ``program`` (a path in the workdir) with the workers in
    ``sandbox`` (``preload``: the harness's name among its preloads): the report as the
    in-sandbox checker prints it, and the last worker, still to be ended
    (:meth:`SandboxWorker.finish`). Blocks: for a worker thread."""
    report: dict[str, Any] = {"passed": 0, "total": 0, "results": [], "error": None,
                              "timed_out": False}
    cfg = {"program": os.path.join(sandbox.workdir, program), "entry_point": problem.entry_point,
           "context": problem.context, "test": problem.test, "timeout": timeout}
    out_fd = os.open(os.path.join(sandbox.workdir, OUTPUT_FILE),
                     os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    harness = None
    try:
        if sandbox.uid is not None:
            os.fchown(out_fd, sandbox.uid, sandbox.uid)
        harness = HostHarness(cfg, out_fd, sandbox, preload)
        results, error = harness.run()
        report.update(results=results, total=len(results),
                      passed=sum(1 for r in results if r["passed"]), error=error,
                      timed_out=harness.timed_out)
    except Exception as exc:  # noqa: BLE001 - always answer with a report
        report["error"] = clip("harness failure: %s: %s" % (type(exc).__name__, exc), 500)
    finally:
        os.close(out_fd)  # the worker has its own copy
    fit_report(report)  # the same bounded size as a report the sandbox prints
    last = harness.worker if harness is not None else None
    return report, last if isinstance(last, SandboxWorker) else None


async def check_on_host(sandbox: LocalSandbox, program: str, problem: CodeProblem,
                        timeout: float, preload: str) -> dict[str, Any]:
    """:func:`check` in a thread of the :class:`~sharpen.sandbox.closing.Closing` in force.
    Takes ``sandbox`` over: the same thread hands over the report, then ends the last worker
    and closes the sandbox, so the report does not wait for the worker's exit, the sweep of
    its uid and the removal of the workdir (the Closing's owner, a run, waits for those).
    With no Closing in force, this call waits for them itself before it returns."""
    loop = asyncio.get_running_loop()
    verdict: asyncio.Future[dict[str, Any]] = loop.create_future()

    def hand_over(outcome: dict[str, Any] | BaseException) -> None:
        if verdict.done():
            return
        if isinstance(outcome, BaseException):
            verdict.set_exception(outcome)
        else:
            verdict.set_result(outcome)

    def job() -> None:
        last = None
        try:
            report, last = check(sandbox, program, problem, timeout, preload)
            outcome: dict[str, Any] | BaseException = report
        except BaseException as exc:  # noqa: BLE001 - handed over to the awaiting task
            outcome = exc
        try:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(hand_over, outcome)
        finally:
            try:
                if last is not None:
                    last.finish()
            finally:
                sandbox.close_blocking()

    closing = in_force()
    own = closing is None
    if closing is None:
        closing = Closing(max_workers=1)
    closing.submit(job)
    try:
        return await verdict
    finally:
        if own:  # nobody else waits for this sandbox's close: wait for it here
            await closing.close()
