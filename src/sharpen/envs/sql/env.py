"""SqlEnv: "answer a question about a generated SQLite database with one SELECT query".

One episode = one generated task (:mod:`sharpen.envs.sql.generator`). The agent sees the
CREATE TABLE statements and a question in words, and has one tool, ``submit_sql(query)``,
with up to ``max_submissions`` valid submissions (the multi-turn knob). Each valid submission
runs on a fresh, read-only, in-memory copy of the task's database and is answered with
execution feedback: the SQL error, the column or row count mismatch, or "wrong values" or
"wrong order", plus the first rows of the agent's result. Invalid actions (unknown tool,
missing or empty ``query``, a statement that is not SELECT/WITH) are explained and cost
nothing. The episode terminates when the result matches or no submissions are left.
Reward: 1.0 for a matching result, else 0.0.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sharpen.core.errors import UserError
from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.outcome import Outcome
from sharpen.core.registry import register
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action
from sharpen.envs import generation
from sharpen.envs.args import positive_int, positive_seconds
from sharpen.envs.base import StepResult
from sharpen.envs.sql import generator as gen
from sharpen.envs.sql.database import preview
from sharpen.envs.sql.generator import SqlProblem
from sharpen.envs.sql.perturb import PERTURBATIONS
from sharpen.envs.sql.score import (
    SUBMIT_SQL,
    Check,
    check,
    outcome_from_check,
    problem_of,
    submit_error,
)

DESCRIPTION = (
    "Answer a question about a generated SQLite database with one SELECT query. The schema "
    "(CREATE TABLE statements) and the question are shown; families: filter, aggregate, "
    "group by, join, order by + limit, nested. One tool, submit_sql(query); up to "
    "max_submissions tries, each answered with execution feedback. Success: the result set "
    "equals the gold query's."
)


@register("env", "sql")
class SqlEnv(generation.GeneratedEnv):
    """The sql environment. Constructor args are its serialisable ``{name, args}``:

    - ``difficulty``: preset (``easy``, ``medium``, ``hard``);
    - ``knobs``: overrides of the preset's knobs (``n_tables``, ``rows``, ``family``,
      ``conditions``);
    - ``max_submissions``: valid submissions allowed per episode;
    - ``time_limit``: seconds one submitted query may run.
    """

    ENV_NAME = "sql"
    DESCRIPTION = DESCRIPTION
    perturbations = PERTURBATIONS
    """Declared perturbations (:mod:`sharpen.envs.sql.perturb`)."""
    stages: ClassVar[dict[str, str]] = {"submit_sql": "answer"}
    """One stage: every ``submit_sql`` is an answer (the schema is shown in the prompt, so
    there is no tool to explore with, and a query is answered only by being checked)."""

    def __init__(self, difficulty: str = "easy", knobs: dict[str, Any] | None = None,
                 max_submissions: int = 3, time_limit: float = 2.0) -> None:
        positive_int("max_submissions", max_submissions)
        positive_seconds("time_limit", time_limit)
        self.difficulty = difficulty
        self.knob_values = gen.resolve_knobs(knobs, difficulty)
        self.max_submissions = max_submissions
        self.time_limit = float(time_limit)
        self.generator = gen.SqlTaskGenerator()
        self.tools = [SUBMIT_SQL]
        self._problem: SqlProblem | None = None
        self._steps = 0
        self._submissions = 0
        self._last: Check | None = None
        self._done = False

    @property
    def submissions_left(self) -> int:
        return self.max_submissions - self._submissions

    async def reset(self, task: TaskSpec) -> tuple[str, dict[str, Any]]:
        """Start an episode on ``task``: the prompt, and info ``task_id``, ``family`` and
        ``submissions_left``."""
        if task.env != "sql":
            raise UserError(f"task {task.id!r} belongs to env {task.env!r}, not 'sql'",
                            "run it with its own environment")
        self._problem = problem_of(task)
        self._steps = self._submissions = 0
        self._last = None
        self._done = False
        p = self._problem
        text = (f"SQLite database schema:\n\n```sql\n{p.schema}\n```\n\nQuestion: {p.question}\n\n"
                "Reply with one SQLite SELECT query in a ```sql code block.")
        if self.max_submissions > 1:
            text += (f" You can submit {self.max_submissions} times; after each try you see "
                     "what went wrong.")
        return text, {"task_id": p.task_id, "family": p.family,
                      "submissions_left": self.submissions_left}

    async def step(self, action: Action) -> StepResult:
        """Apply one action (see the module doc)."""
        if self._problem is None:
            raise RuntimeError("SqlEnv.step called before reset")
        index = self._steps
        self._steps += 1
        if self._done:
            return StepResult(
                observation="The episode is over; no more submissions are accepted.",
                terminated=True, info={"invalid": True, "submissions_left": self.submissions_left})
        problem = submit_error(action)
        if problem is not None:
            return StepResult(observation=problem, info={
                "invalid": True, "reason": problem, "submissions_left": self.submissions_left})
        result = check(action.arguments["query"], self._problem, self.time_limit)
        self._submissions += 1
        self._last = result
        self._done = result.correct or self.submissions_left == 0
        text = self._observation(result)
        return StepResult(
            observation=text, reward=1.0 if result.correct else 0.0, terminated=self._done,
            info={"correct": result.correct, "error": result.result.error,
                  "rows": len(result.result.rows), "timed_out": result.result.timed_out,
                  "submissions": self._submissions, "submissions_left": self.submissions_left},
            feedback=[Feedback(
                source="execution", name="result_matches", value=float(result.correct),
                rationale=text, author="env:sql",
                target=FeedbackTarget(kind="step", step_index=index))],
        )

    def _observation(self, result: Check) -> str:
        if result.correct:
            return "Correct: your result matches the expected result."
        text = str(result.mismatch)
        if result.result.error is None:
            text += f"\nFirst rows of your result:\n{preview(result.result)}"
        left = self.submissions_left
        if left == 0:
            return f"{text}\n\nNo submissions left."
        return (f"{text}\n\nYou have {left} submission{'s' * (left > 1)} left. Fix the query "
                "and submit it again.")

    async def outcome(self) -> Outcome:
        """The verdict so far: the last valid submission's check (see :mod:`score`)."""
        if self._problem is None:
            raise RuntimeError("SqlEnv.outcome called before reset")
        return outcome_from_check(self._last, self._submissions, self._problem)

    def reference_solution(self, task: TaskSpec) -> str:
        """The gold query of ``task`` (the hook the ``reference`` agent submits)."""
        return problem_of(task).gold

    async def close(self) -> None:
        """Nothing to release: each query runs on its own in-memory database."""
        self._problem = None
