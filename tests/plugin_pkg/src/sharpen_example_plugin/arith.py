"""The ``arith`` environment: one arithmetic question per task, answered once.

A task asks "What is 7 * 3?"; the agent has one tool, ``submit(answer)``. The first valid
submission ends the episode: success (reward 1) when the answer, stripped, is the right integer.
A ``` block around the number is unwrapped. An invalid action (another tool, no ``answer``)
is explained and does not end the episode.

The question is rebuilt from the task's seed and knobs, so a task is data (a ``TaskSpec``) and
:class:`ArithVerifier` can re-score a stored trajectory offline. Knobs: ``max_operand``
(operands are drawn from 0..max_operand) and ``ops`` (the operators to draw from).
"""

from __future__ import annotations

import random
from typing import Any

from sharpen import Action, Feedback, FeedbackTarget, Outcome, TaskSpec, ToolSpec, Trajectory
from sharpen.envs.base import BaseEnvironment, BaseVerifier, EnvInfo, Knob, StepResult

SUBMIT = ToolSpec(
    name="submit",
    description="Submit your final answer: the number only. It is checked once; the episode ends.",
    parameters={
        "type": "object",
        "properties": {"answer": {"type": "string", "description": "The number, e.g. 42."}},
        "required": ["answer"],
    },
    # For models without native tool calls: a ``` block in a plain reply fills `answer`.
    text_argument="answer",
    text_hint="To answer, reply with only the number in a ``` block",
)

SPLIT_SEEDS = {"train": 0, "val": 1_000_000, "test": 2_000_000}
"""Where each split's instance seeds start: task ``i`` of a split listed with ``seed`` has
instance seed ``SPLIT_SEEDS[split] + 1000 * seed + i`` (its id names the split, so the splits'
tasks never share a hash)."""

OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def question(task: TaskSpec) -> tuple[str, int]:
    """The question of ``task`` and its answer, from the task's seed and knobs only."""
    rng = random.Random(task.seed)  # the task's own RNG, never the global one
    high = int(task.knobs["max_operand"])
    a, b = rng.randint(0, high), rng.randint(0, high)
    op = rng.choice(task.knobs["ops"])
    return f"{a} {op} {b}", OPS[op](a, b)


def answer_text(raw: str) -> str:
    """The answer in ``raw``, stripped: the body of a ``` block that is the whole reply, else
    the reply."""
    lines = raw.strip().splitlines()
    if len(lines) >= 2 and lines[0].startswith("```") and lines[-1].strip() == "```":
        return "\n".join(lines[1:-1]).strip()
    return raw.strip()


def score(task: TaskSpec, answer: str | None) -> Outcome:
    """The verdict on ``answer`` (``None``: nothing was submitted): right iff it is the
    integer, written plainly."""
    expression, right = question(task)
    if answer is None:
        return Outcome(success=False, evidence="no answer submitted")
    given = answer_text(answer)
    ok = given == str(right)
    return Outcome(success=ok, reward=1.0 if ok else 0.0, components={"correct": float(ok)},
                   evidence=f"{expression} = {right}; submitted {given[:40]!r}")


def action_error(action: Action) -> str | None:
    """Why ``action`` is not a valid submission, or ``None``."""
    if action.tool != SUBMIT.name:
        return f"Unknown tool {action.tool!r}. The only tool is `submit(answer)`."
    if not isinstance(action.arguments.get("answer"), str):
        return "`submit` needs the argument `answer`, a string such as \"42\"."
    return None


class ArithEnv(BaseEnvironment):
    """Arithmetic questions, one per task, answered once with submit(answer).

    Args: ``max_operand`` (default 20) and ``ops`` (default ``"+-*"``)."""

    def __init__(self, max_operand: int = 20, ops: str = "+-*") -> None:
        if max_operand < 1 or not ops or set(ops) - set(OPS):
            raise ValueError(f"arith: need max_operand >= 1 and ops drawn from {''.join(OPS)!r}")
        self.knobs = {"max_operand": max_operand, "ops": ops}
        self.tools = [SUBMIT]
        self._task: TaskSpec | None = None
        self._answer: str | None = None

    def list_tasks(self, split: str | None = None, limit: int | None = None,
                   seed: int = 0) -> list[TaskSpec]:
        """``limit`` (default 20, at most 1000) tasks in a fixed order, so a shorter list is a
        prefix of a longer one; ``split=None`` takes train, val and test tasks in turn; an
        unknown split has none."""
        if split is not None and split not in SPLIT_SEEDS:
            return []
        splits = [split] if split else list(SPLIT_SEEDS)
        n = min(20 if limit is None else limit, 1000)
        return [TaskSpec(env="arith", id=f"arith/{s}/{seed}/{i}", seed=SPLIT_SEEDS[s] + 1000 * seed + i,
                         knobs=self.knobs, split=s)
                for i in range(n) for s in splits][:n]

    async def reset(self, task: TaskSpec) -> tuple[str, dict[str, Any]]:
        """The question; info holds nothing secret (the agent sees it)."""
        self._task, self._answer = task, None
        expression, _ = question(task)
        return f"What is {expression}? Submit the number only.", {"task_id": task.id}

    async def step(self, action: Action) -> StepResult:
        """Check a submission (see the module doc)."""
        if self._task is None:
            raise RuntimeError("ArithEnv.step called before reset")
        why = action_error(action)
        if why is not None:
            return StepResult(observation=why, info={"invalid": True, "reason": why})
        self._answer = action.arguments["answer"]
        verdict = score(self._task, self._answer)
        return StepResult(
            observation="Correct." if verdict.success else "Not correct.", reward=verdict.reward,
            terminated=True,
            feedback=[Feedback(source="verifier", name="correct", value=verdict.success,
                               rationale=verdict.evidence, author="env:arith",
                               target=FeedbackTarget(kind="step", step_index=0))],
        )

    async def outcome(self) -> Outcome:
        """The verdict so far; before a submission, a failure."""
        if self._task is None:
            return Outcome(success=False, evidence="no episode")
        return score(self._task, self._answer)

    def reference_solution(self, task: TaskSpec) -> str | None:
        """The right number (what the ``reference`` agent submits)."""
        return str(question(task)[1])

    def describe(self) -> EnvInfo:
        """The default description, plus the two knobs."""
        return super().describe().model_copy(update={"knobs": [
            Knob(name="max_operand", type="int", default=20, low=1, help="largest operand"),
            Knob(name="ops", type="choice", default="+-*", choices=["+", "+-", "+-*"],
                 help="operators to draw from"),
        ]})

    @classmethod
    def isolation(cls) -> str | None:
        """No untrusted code runs here, so no sandbox is needed (recorded in the manifest)."""
        return "none (no code is run)"


class ArithVerifier(BaseVerifier):
    """Re-scores a stored ``arith`` trajectory: its first valid submission. Takes the env's
    arguments (the task carries its knobs, so they change nothing)."""

    def __init__(self, max_operand: int = 20, ops: str = "+-*") -> None:
        pass

    async def score(self, trajectory: Trajectory) -> Outcome:
        """The outcome the environment gave."""
        answer = next((s.action.arguments["answer"] for s in trajectory.steps
                       if s.action is not None and action_error(s.action) is None), None)
        return score(trajectory.task, answer)
