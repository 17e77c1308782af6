"""ReasoningGymEnv: any reasoning-gym dataset as a single-turn environment.

The agent sees the entry's question and has one tool, ``answer(answer)``. The first valid
call ends the episode: the answer (a fenced block inside it is unwrapped, surrounding space
stripped) is scored by the dataset's own ``score_answer``; reward = that score, success =
a score of 1.0. Invalid actions (another tool, a missing or non-string ``answer``) are
explained and do not end the episode. Tasks, configs and presets are in
:mod:`sharpen.envs.adapters.reasoning_gym_tasks`; :class:`ReasoningGymVerifier` re-scores a
stored trajectory offline by regenerating the entry from the task's seed and config.

The module imports without reasoning-gym: ``describe()`` then says how to install it, and
anything else raises a :class:`UserError` naming the extra.
"""

from __future__ import annotations

from typing import Any

from sharpen.core.errors import UserError
from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.markdown import code_blocks
from sharpen.core.messages import ToolSpec
from sharpen.core.outcome import Outcome
from sharpen.core.registry import register
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action, Trajectory
from sharpen.envs import generation
from sharpen.envs.adapters import reasoning_gym_tasks as rgt
from sharpen.envs.adapters.optional import available
from sharpen.envs.base import BaseEnvironment, BaseVerifier, EnvInfo, StepResult
from sharpen.envs.generation import DEFAULT_LIMIT, SPLITS

ANSWER = ToolSpec(
    name="answer",
    description="Submit your final answer. It is checked once; the episode then ends.",
    parameters={
        "type": "object",
        "properties": {"answer": {"type": "string", "description": "The final answer only."}},
        "required": ["answer"],
    },
    text_argument="answer",
    text_hint="To answer, reply with only your final answer in a ``` block",
    final=True,
)
"""The one tool of the reasoning_gym environment."""

DESCRIPTION = (
    "Any reasoning-gym dataset (procedural, ~100 of them: arithmetic, logic, puzzles, "
    "games...) as a single-turn task: answer the question once with answer(answer), scored "
    "by the dataset's own score_answer. Args: dataset, difficulty (the dataset's curriculum "
    "at its first/middle/last level), config (the dataset's config fields)."
)


def answer_text(raw: str) -> str:
    """The answer inside ``raw``: the first fenced block's body if there is one, stripped."""
    if "```" in raw:
        blocks = code_blocks(raw)
        raw = blocks[0].body if blocks else raw.replace("```", "")
    return raw.strip()


def answer_error(action: Action) -> str | None:
    """Why ``action`` is not a valid ``answer`` call, or ``None`` if it is."""
    if action.tool != ANSWER.name:
        return (f"Unknown tool {action.tool!r}. The only tool is `answer`, with one argument "
                "`answer`: your final answer.")
    if "answer" not in action.arguments:
        got = ", ".join(sorted(action.arguments)) or "none"
        return f"`answer` needs the argument `answer`; arguments given: {got}."
    if not isinstance(action.arguments["answer"], str):
        return f"`answer` must be a string, not {type(action.arguments['answer']).__name__}."
    return None


def outcome_of(task: TaskSpec, answer: str | None) -> Outcome:
    """The verdict on ``answer`` (``None``: nothing was submitted) for ``task``."""
    if answer is None:
        return Outcome(success=False, evidence="no answer submitted",
                       components={"score": 0.0, "submitted": 0.0})
    value, note = rgt.score_answer(task, answer)
    shown = answer if len(answer) <= 200 else answer[:200] + "..."
    evidence = f"answer {shown!r} scored {value:.3g} by {task.knobs['dataset']}.score_answer"
    return Outcome(success=value >= 1.0, reward=value,
                   components={"score": value, "submitted": 1.0},
                   evidence=evidence + (f"; {note}" if note else ""))


@register("env", "reasoning_gym")
class ReasoningGymEnv(BaseEnvironment):
    """The reasoning_gym environment. Constructor args are its serialisable ``{name, args}``:

    - ``dataset``: a reasoning-gym dataset name (default ``basic_arithmetic``);
    - ``difficulty``: ``easy``, ``medium`` or ``hard`` (``default`` for a dataset without a
      curriculum); omitted: the first;
    - ``config``: overrides of the dataset's config fields, e.g. ``{"min_terms": 3}``.
    """

    def __init__(self, dataset: str = rgt.DEFAULT_DATASET, difficulty: str | None = None,
                 config: dict[str, Any] | None = None) -> None:
        self.dataset = dataset
        self.difficulty = difficulty
        self.tools = [ANSWER]
        self.installed = available("reasoning_gym")
        self.config: dict[str, Any] | None = None
        if self.installed:  # check the args now; without the package, fail on use instead
            self.config = rgt.resolve_config(dataset, difficulty, config)
            self.generator = rgt.ReasoningGymGenerator(dataset)
        self._overrides = config
        self._task: TaskSpec | None = None
        self._answer: str | None = None
        self._steps = 0

    def _ready(self) -> dict[str, Any]:
        if self.config is None:  # raises the install hint when reasoning-gym is missing
            self.config = rgt.resolve_config(self.dataset, self.difficulty, self._overrides)
            self.generator = rgt.ReasoningGymGenerator(self.dataset)
        return self.config

    async def reset(self, task: TaskSpec) -> tuple[str, dict[str, Any]]:
        """Start an episode on ``task``: the question, and info ``dataset``, ``difficulty``."""
        self._ready()
        if task.env != rgt.ENV_NAME:
            raise UserError(f"task {task.id!r} belongs to env {task.env!r}, not {rgt.ENV_NAME!r}",
                            "run it with its own environment")
        entry = rgt.entry_of(task)
        self._task, self._answer, self._steps = task, None, 0
        text = (f"{entry['question']}\n\nYou have one try. Reply with only your final answer in "
                "a ``` code block.")
        return text, {"dataset": task.knobs["dataset"],
                      "difficulty": task.metadata.get("difficulty", "custom")}

    async def step(self, action: Action) -> StepResult:
        """Apply one action (see the module doc)."""
        if self._task is None:
            raise RuntimeError("ReasoningGymEnv.step called before reset")
        index = self._steps
        self._steps += 1
        if self._answer is not None:
            return StepResult(observation="The episode is over; the answer was already checked.",
                              terminated=True, info={"invalid": True, "reason": "episode over"})
        why = answer_error(action)
        if why is not None:
            return StepResult(observation=why, info={"invalid": True, "reason": why})
        self._answer = answer_text(action.arguments["answer"])
        verdict = outcome_of(self._task, self._answer)
        text = "Correct." if verdict.success else f"Not correct (score {verdict.reward:.3g})."
        return StepResult(
            observation=text, reward=verdict.reward, terminated=True,
            info={"score": verdict.reward, "correct": verdict.success},
            feedback=[Feedback(source="verifier", name="score", value=verdict.reward,
                               rationale=verdict.evidence, author="env:reasoning_gym",
                               target=FeedbackTarget(kind="step", step_index=index))],
        )

    async def outcome(self) -> Outcome:
        """The verdict so far; before any answer, a failure."""
        if self._task is None:
            return Outcome(success=False, evidence="no episode")
        return outcome_of(self._task, self._answer)

    def reference_solution(self, task: TaskSpec) -> str | None:
        """The dataset's gold answer of ``task`` if its scorer accepts it (the hook the
        ``reference`` agent submits), else ``None``."""
        self._ready()
        return self.generator.reference_answer(task)

    async def close(self) -> None:
        """Nothing to release."""
        self._task = None

    def describe(self) -> EnvInfo:
        """Name, knobs (the dataset and its config fields), presets, task counts, tools. Without
        reasoning-gym installed, the description says how to install it."""
        if not self.installed:
            return EnvInfo(name=rgt.ENV_NAME, description=f"{DESCRIPTION} ({rgt.MISSING})",
                           tools=[t.name for t in self.tools])
        return EnvInfo(name=rgt.ENV_NAME, description=DESCRIPTION, knobs=self.generator.knobs(),
                       difficulties=list(self.generator.presets()),
                       task_counts={s: DEFAULT_LIMIT for s in SPLITS},
                       tools=[t.name for t in self.tools])

    def list_tasks(self, split: str | None = None, limit: int | None = None,
                   seed: int = 0) -> list[TaskSpec]:
        """``limit`` (default 50) tasks at the env's dataset and config; the ``i``-th task of a
        split has the ``i``-th distinct index drawn from ``random.Random(seed)`` (a shorter
        list is a prefix of a longer one); ``split=None`` takes train, val and test in turn."""
        config = self._ready()
        return generation.list_generated(self.generator, {"dataset": self.dataset, "config": config},
                                         split, limit, seed)


def submitted_answer(trajectory: Trajectory) -> str | None:
    """The answer the episode was scored on: that of the first valid ``answer`` action."""
    for step in trajectory.steps:
        if step.action is not None and answer_error(step.action) is None:
            return answer_text(step.action.arguments["answer"])
    return None


@register("verifier", "reasoning_gym")
class ReasoningGymVerifier(BaseVerifier):
    """Takes the env's arguments (none matter: the task carries dataset and config) and
    re-scores a stored trajectory: the first valid ``answer`` on the regenerated entry."""

    def __init__(self, dataset: str = rgt.DEFAULT_DATASET, difficulty: str | None = None,
                 config: dict[str, Any] | None = None) -> None:
        self.dataset = dataset

    async def score(self, trajectory: Trajectory) -> Outcome:
        """The Outcome the environment gave (see the module doc)."""
        return outcome_of(trajectory.task, submitted_answer(trajectory))
