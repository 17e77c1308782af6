"""CodeEnv: "write a Python function that passes hidden unit tests".

One episode = one problem (HumanEval or generated, see :mod:`sharpen.envs.code.tasks`). The
agent has one tool, ``submit(code)``, and up to ``max_submissions`` valid submissions (the
multi-turn knob). Each valid submission is assembled into a program
(:mod:`sharpen.envs.code.program`), run against the hidden tests in a sandbox, and answered
with the test report (``feedback="full"``) or just passed/failed (``feedback="binary"``, for
ablations). Invalid actions (unknown tool, missing or non-string ``code``) are explained and
cost nothing. The episode terminates when all tests pass or no submissions are left.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from sharpen.core.errors import UserError
from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.outcome import Outcome
from sharpen.core.registry import register
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action
from sharpen.envs import generation
from sharpen.envs.args import positive_int, positive_seconds
from sharpen.envs.base import BaseEnvironment, EnvInfo, StepResult
from sharpen.envs.code import generator as gen
from sharpen.envs.code import humaneval
from sharpen.envs.code.perturb import PERTURBATIONS
from sharpen.envs.code.problem import CodeProblem
from sharpen.envs.code.program import SUBMIT, assemble_program, submit_error
from sharpen.envs.code.score import outcome_from_report
from sharpen.envs.code.tasks import SOURCES, materialize
from sharpen.envs.code.verifier import TestReport, harness_isolation, run_tests
from sharpen.envs.generation import DEFAULT_LIMIT, SPLITS

DESCRIPTION = (
    "Write a Python function that passes hidden unit tests. Tasks come from HumanEval "
    "(source='humaneval', 164 fixed problems, split 64/36/64) or from a procedural generator "
    "(source='generated': arithmetic, list and string pipelines whose knobs set the "
    "difficulty). One tool, submit(code); up to max_submissions tries, each answered with the "
    "test results."
)


@register("env", "code")
class CodeEnv(BaseEnvironment):
    """The code environment. Constructor args are its serialisable ``{name, args}``:

    - ``source``: ``"humaneval"`` or ``"generated"`` — which tasks :meth:`list_tasks` offers
      (``reset`` accepts a task of either source);
    - ``difficulty``: preset of generated tasks (``easy``, ``medium``, ``hard``);
    - ``knobs``: overrides of the preset's knobs;
    - ``max_submissions``: valid submissions allowed per episode;
    - ``test_timeout``: seconds allowed for one run of the hidden tests;
    - ``feedback``: ``"full"`` (test report) or ``"binary"`` (only passed/failed).
    """

    stages: ClassVar[dict[str, str]] = {"submit": "write"}
    """One stage: every ``submit`` writes the function (the prompt is all there is to read,
    and the hidden tests run on every submission, so there is no tool to read or test with)."""

    perturbations: ClassVar[dict[str, str]] = PERTURBATIONS
    """Declared perturbations (:mod:`sharpen.envs.code.perturb`)."""

    def __init__(
        self,
        source: Literal["humaneval", "generated"] = "humaneval",
        difficulty: str = "easy",
        knobs: dict[str, Any] | None = None,
        max_submissions: int = 3,
        test_timeout: float = 10.0,
        feedback: Literal["full", "binary"] = "full",
    ) -> None:
        if source not in SOURCES:
            raise UserError(f"unknown code source {source!r}", f"use one of {', '.join(SOURCES)}")
        if feedback not in ("full", "binary"):
            raise UserError(f"unknown feedback mode {feedback!r}", "use 'full' or 'binary'")
        positive_int("max_submissions", max_submissions)
        positive_seconds("test_timeout", test_timeout)
        self.source = source
        self.difficulty = difficulty
        self.knob_values = gen.resolve_knobs(knobs, difficulty)
        self.max_submissions = max_submissions
        self.test_timeout = float(test_timeout)
        self.feedback = feedback
        self.generator = gen.FunctionTaskGenerator()
        self.tools = [SUBMIT]
        self._problem: CodeProblem | None = None
        self._task: TaskSpec | None = None
        self._steps = 0
        self._submissions = 0
        self._report: TestReport | None = None
        self._done = False

    @property
    def submissions_left(self) -> int:
        return self.max_submissions - self._submissions

    async def reset(self, task: TaskSpec) -> tuple[str, dict[str, Any]]:
        """Start an episode on ``task``: the prompt, and info ``entry_point``,
        ``submissions_left`` and ``task_id``."""
        self._problem = materialize(task)
        self._task = task
        self._steps = self._submissions = 0
        self._report = None
        self._done = False
        p = self._problem
        text = (
            f"Complete this Python function:\n\n```python\n{p.prompt.rstrip()}\n```\n\n"
            "Reply with the complete function in a ```python code block."
        )
        if self.max_submissions > 1:
            text += (f" You can submit {self.max_submissions} times; after each try you see "
                     "the test results.")
        return text, {"entry_point": p.entry_point, "submissions_left": self.submissions_left,
                      "task_id": p.task_id}

    async def step(self, action: Action) -> StepResult:
        """Apply one action (see the module doc). Rewards are the fraction of tests passed."""
        if self._problem is None:
            raise RuntimeError("CodeEnv.step called before reset")
        index = self._steps
        self._steps += 1
        if self._done:
            return StepResult(
                observation="The episode is over; no more submissions are accepted.",
                terminated=True, info={"invalid": True, "submissions_left": self.submissions_left},
            )
        problem = submit_error(action)
        if problem is not None:
            return StepResult(
                observation=problem,
                info={"invalid": True, "reason": problem, "submissions_left": self.submissions_left},
            )
        program = assemble_program(action.arguments["code"], self._problem)
        report = await run_tests(program, self._problem, timeout=self.test_timeout)
        self._submissions += 1
        self._report = report
        self._done = report.all_passed or self.submissions_left == 0
        reward = report.passed / report.total if report.total else 0.0
        text = report.feedback_text()
        return StepResult(
            observation=self._observation(report, text),
            reward=reward,
            terminated=self._done,
            info={
                "tests_passed": report.passed, "tests_total": report.total,
                "timed_out": report.timed_out, "error": report.error,
                "submissions": self._submissions, "submissions_left": self.submissions_left,
            },
            feedback=[Feedback(
                source="execution", name="tests_passed", value=reward, rationale=text,
                author="env:code", target=FeedbackTarget(kind="step", step_index=index),
            )],
        )

    def _observation(self, report: TestReport, text: str) -> str:
        if self.feedback == "binary":
            text = "All hidden tests passed." if report.all_passed else "Some hidden tests failed."
        if report.all_passed:
            return text
        left = self.submissions_left
        if left == 0:
            return f"{text}\n\nNo submissions left."
        plural = "s" if left > 1 else ""
        return f"{text}\n\nYou have {left} submission{plural} left. Fix the function and submit it again."

    async def outcome(self) -> Outcome:
        """The verdict so far: the last valid submission's report (see :mod:`score`)."""
        return outcome_from_report(self._report, self._submissions)

    @classmethod
    def isolation(cls) -> str:
        """What the candidates' code gets, for the run manifest (the test runs' sandbox)."""
        return harness_isolation()

    def reference_solution(self, task: TaskSpec) -> str | None:
        """The known-correct answer to ``task``, as the ``code`` argument of ``submit``: the
        complete program of the canonical solution (HumanEval's ``prompt +
        canonical_solution``, the generator's reference), or ``None`` when unknown. This is
        the hook the ``reference`` agent of :mod:`sharpen.agents.baselines` submits."""
        return materialize(task).reference

    async def close(self) -> None:
        """Nothing to release: each test run owns and removes its sandbox."""
        self._problem = None

    def describe(self) -> EnvInfo:
        """Name, knobs (used by ``source='generated'``), presets, task counts, tools."""
        counts: dict[str, int]
        if self.source == humaneval.SOURCE:
            counts = {split: n for split, n in humaneval.SPLIT_SIZES.items()}
        else:
            counts = {split: DEFAULT_LIMIT for split in SPLITS}
        return EnvInfo(
            name="code", description=DESCRIPTION, knobs=self.generator.knobs(),
            difficulties=list(gen.PRESETS), task_counts=counts, tools=[t.name for t in self.tools],
            stages=dict(self.stages), perturbations=dict(self.perturbations),
        )

    def list_tasks(
        self, split: str | None = None, limit: int | None = None, seed: int = 0
    ) -> list[TaskSpec]:
        """Tasks in a deterministic order.

        HumanEval: the fixed list (natural order; ``split=None`` is all 164), cut to ``limit``;
        ``seed`` is ignored. Generated: ``limit`` (default 50) tasks at the env's knobs; the
        ``i``-th task of a split has the ``i``-th distinct index drawn from
        ``random.Random(seed)`` (so a shorter list is a prefix of a longer one);
        ``split=None`` takes train, val and test tasks in turn.
        """
        generation.check_split(split)
        if self.source == humaneval.SOURCE:
            tasks = humaneval.humaneval_tasks(split)
            return tasks if limit is None else tasks[:limit]
        return generation.list_generated(self.generator, self.knob_values, split, limit, seed)
