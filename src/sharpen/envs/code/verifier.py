"""Run a candidate program against a problem's hidden tests in a sandbox.

:func:`run_tests` writes the program to ``solution.py`` and the stdlib-only harness (the
:mod:`sharpen.envs.code.harness` package, zipped as ``harness.pyz`` by
:mod:`sharpen.envs.code.bundle`) into a fresh sandbox, sends the trusted material (context,
tests, entry point, time limit) to the harness on stdin, and parses the one-line JSON report it
prints last. With a fork server the checker runs on the host instead and only the candidate's
worker in the sandbox (:mod:`sharpen.envs.code.checking`). The hidden tests never exist as a
file the candidate could read; see the harness package for the full design.
Anything missing or garbled in the answer is a failed program (``error`` set), never a pass.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from sharpen.core.activity import doing
from sharpen.envs.code.bundle import harness_bundle
from sharpen.envs.code.checking import check_on_host
from sharpen.envs.code.problem import CodeProblem
from sharpen.sandbox.base import Sandbox
from sharpen.sandbox.isolation import detect_isolation
from sharpen.sandbox.local import LocalSandbox

STARTUP_SLACK = 5.0
"""Seconds the sandbox waits beyond ``timeout`` (interpreter start-up, report) before killing."""


class TestCaseResult(BaseModel):
    """One test case: a top-level statement of ``check`` that asserts on the candidate."""

    __test__ = False  # not a pytest class

    index: int
    """0-based position among the test cases."""
    source: str
    """The statement's source (truncated)."""
    passed: bool
    """Whether it ran without failing."""
    message: str = ""
    """Why it failed: what the candidate returned vs expected, or the exception (truncated)."""


class TestReport(BaseModel):
    """What running the hidden tests produced."""

    __test__ = False

    passed: int
    """Test cases passed."""
    total: int
    """Test cases found (0 when the harness gave no usable report)."""
    results: list[TestCaseResult] = Field(default_factory=list)
    """Per test case results, in order."""
    error: str | None = None
    """Program-level failure (import error, time limit, crash, missing report); ``None`` if the
    tests ran to the end."""
    timed_out: bool = False
    """The time limit was hit."""

    @property
    def all_passed(self) -> bool:
        """Every test case passed and nothing went wrong."""
        return self.total > 0 and self.passed == self.total and self.error is None

    def feedback_text(self, max_chars: int = 1200) -> str:
        """What the model sees: the score, the error and the first failures (truncated)."""
        head = f"{self.passed}/{self.total} tests passed."
        lines = [head]
        if self.error:
            lines.append(f"Error: {_clip(self.error, 400)}")
        failed = [r for r in self.results if not r.passed]
        if failed:
            lines.append("Failed:")
        text = "\n".join(lines)
        for i, r in enumerate(failed):
            item = f"- `{_clip(_one_line(r.source), 160)}`"
            if r.message.startswith("not run"):
                item += " (not run)"
            elif r.message and r.message != self.error:
                item += f": {_clip(r.message, 300)}"
            rest = len(failed) - i - 1
            tail = f"\n... and {rest} more failed" if rest else ""
            if len(text) + 1 + len(item) + len(tail) > max_chars:
                text += f"\n... and {len(failed) - i} more failed"
                break
            text += "\n" + item
        return text[:max_chars]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _parse_report(stdout: str) -> TestReport | None:
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        return None
    try:
        data: Any = json.loads(lines[-1])
    except ValueError:
        return None
    return _report(data)


def _report(data: Any) -> TestReport | None:
    """The checker's report as a :class:`TestReport`, ``None`` if it does not hold up."""
    try:
        report = TestReport.model_validate(data)
    except ValidationError:
        return None
    # The counts must agree with the per-case results. A very large report lists only its
    # failed cases (to fit the output cap); otherwise the counts are derived from the cases.
    failed = sum(1 for r in report.results if not r.passed)
    if len(report.results) < report.total:
        if not 0 <= report.passed <= report.total - failed:
            return None
    else:
        report.total = len(report.results)
        report.passed = report.total - failed
    return report


HARNESS = "harness.pyz"
"""The harness's file name in the sandbox."""


def harness_sandbox() -> LocalSandbox:
    """The default sandbox of a test run: a child of the fork server that has the harness
    imported already, where privileged bubblewrap allows one, else a fresh sandbox
    (:class:`~sharpen.sandbox.local.LocalSandbox`, ``fork_server``)."""
    return LocalSandbox(fork_server=True, preload={HARNESS: harness_bundle()})


def harness_isolation() -> str:
    """The isolation :func:`harness_sandbox` gives, for run manifests (starts the fork server
    where one applies: the run is about to use it)."""
    return detect_isolation(fork_server=True, preload={HARNESS: harness_bundle()})


async def run_tests(
    program: str,
    problem: CodeProblem,
    *,
    timeout: float = 10.0,
    sandbox_factory: Callable[[], Sandbox] = harness_sandbox,
) -> TestReport:
    """Run ``program`` against ``problem``'s hidden tests; ``timeout`` bounds the whole run.

    With a fork server (the default sandbox under privileged bubblewrap) the checker runs in
    this process and only the candidate's worker in the sandbox
    (:mod:`sharpen.envs.code.checking`); otherwise the whole harness runs in the sandbox."""
    with doing("sandbox"):  # the run's progress bar counts episodes waiting on one
        return await _run_tests(program, problem, timeout, sandbox_factory)


async def _run_tests(program: str, problem: CodeProblem, timeout: float,
                     sandbox_factory: Callable[[], Sandbox]) -> TestReport:
    sandbox = sandbox_factory()
    if isinstance(sandbox, LocalSandbox) and sandbox.forks_preloads:
        try:
            await sandbox.write_file("solution.py", program)
        except BaseException:
            await sandbox.close()
            raise
        data = await check_on_host(sandbox, "solution.py", problem, timeout, HARNESS)
        return _report(data) or TestReport(passed=0, total=0,
                                           error="the test harness gave no usable report")
    payload = json.dumps({
        "program": "solution.py",
        "entry_point": problem.entry_point,
        "context": problem.context,
        "test": problem.test,
        "timeout": timeout,
    }).encode("utf-8")
    try:
        await sandbox.write_file("solution.py", program)
        await sandbox.write_file(HARNESS, harness_bundle())
        python = getattr(sandbox, "python", None) or sys.executable
        result = await sandbox.exec(
            [python, "-I", "-B", HARNESS], stdin=payload, timeout=timeout + STARTUP_SLACK
        )
    finally:
        await sandbox.close()
    report = _parse_report(result.stdout)
    if report is not None:
        return report
    if result.timed_out:
        return TestReport(passed=0, total=0, error=f"time limit exceeded ({timeout:.1f}s)",
                          timed_out=True)
    why = f"the test harness gave no report (exit status {result.returncode})"
    tail = result.stderr.strip()[-300:]
    return TestReport(passed=0, total=0, error=why + (f": {tail}" if tail else ""))
