"""Scoring code episodes: the Outcome of a test report, and the offline CodeVerifier.

One function, :func:`outcome_from_report`, turns the report of the last submission into an
:class:`Outcome`; the env (live) and :class:`CodeVerifier` (offline, from a stored
trajectory) both use it, so they agree by construction:

- ``success``: every hidden test passed on the last submission;
- ``reward``: the fraction of hidden tests passed (0 when none ran);
- ``components``: ``tests_passed``, ``tests_total``, ``submissions`` (valid ones counted);
- ``evidence``: the report's feedback text (which tests failed and why), truncated;
- no submission: ``success=False``, ``reward=0``, evidence ``"no submission"`` — an agent
  failure (``error_kind=None``).
"""

from __future__ import annotations

from sharpen.core.outcome import Outcome
from sharpen.core.registry import register
from sharpen.core.trajectory import Trajectory
from sharpen.envs.base import BaseVerifier
from sharpen.envs.code.program import assemble_program, submit_error
from sharpen.envs.code.tasks import materialize
from sharpen.envs.code.verifier import TestReport, run_tests

NO_SUBMISSION = "no submission"


def outcome_from_report(report: TestReport | None, submissions: int) -> Outcome:
    """The verdict after ``submissions`` valid submissions, the last of which gave ``report``."""
    if report is None:
        return Outcome(
            success=False, reward=0.0, evidence=NO_SUBMISSION,
            components={"tests_passed": 0.0, "tests_total": 0.0, "submissions": float(submissions)},
        )
    return Outcome(
        success=report.all_passed,
        reward=report.passed / report.total if report.total else 0.0,
        components={
            "tests_passed": float(report.passed),
            "tests_total": float(report.total),
            "submissions": float(submissions),
        },
        evidence=report.feedback_text(),
    )


@register("verifier", "code")
class CodeVerifier(BaseVerifier):
    """Re-scores a stored code trajectory offline.

    Takes the same arguments as :class:`~sharpen.envs.code.env.CodeEnv`, so the env's own
    ``{name, args}`` builds its verifier; only ``max_submissions`` and ``test_timeout`` matter
    here. :meth:`score` rebuilds the problem from ``trajectory.task``, takes the valid
    ``submit`` actions of ``trajectory.steps`` in order (at most ``max_submissions``; invalid
    ones are skipped as the env skips them), re-runs the hidden tests on the last one and
    returns what the env's ``outcome()`` returned.
    """

    def __init__(
        self,
        source: str = "humaneval",
        difficulty: str = "easy",
        knobs: dict | None = None,
        max_submissions: int = 3,
        test_timeout: float = 10.0,
        feedback: str = "full",
    ) -> None:
        self.max_submissions = max_submissions
        self.test_timeout = test_timeout

    async def score(self, trajectory: Trajectory) -> Outcome:
        """The Outcome of ``trajectory``'s last valid submission (see the class doc)."""
        problem = materialize(trajectory.task)
        codes = [
            step.action.arguments["code"]
            for step in trajectory.steps
            if step.action is not None and submit_error(step.action) is None
        ][: self.max_submissions]
        if not codes:
            return outcome_from_report(None, 0)
        program = assemble_program(codes[-1], problem)
        report = await run_tests(program, problem, timeout=self.test_timeout)
        return outcome_from_report(report, len(codes))
