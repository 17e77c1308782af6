"""A plug-in in a loose file, named by its path: ``sharpen run tests/plugin_pkg/loose_env.py:LooseEnv``.

Not part of the installed package: nothing declares it, and the reference is the whole
registration. It is also the smallest environment: only the members :class:`BaseEnvironment`
leaves abstract (``tools``, ``reset``, ``step``, ``outcome``, ``list_tasks``), and the
``reference_solution`` that lets the ``reference`` agent and ``sharpen check env`` solve it.

A task sums a few integers ("What is 4 + 9 - 2?"); ``answer(text)`` ends the episode.
"""

from __future__ import annotations

import random
from typing import Any

from sharpen import Action, Outcome, TaskSpec, ToolSpec
from sharpen.envs.base import BaseEnvironment, StepResult

SPLITS = {"train": 0, "val": 10**6, "test": 2 * 10**6}


def _terms(task: TaskSpec) -> tuple[str, int]:
    rng = random.Random(task.seed)
    numbers = [rng.randint(1, 9) for _ in range(task.knobs["terms"])]
    signs = [rng.choice("+-") for _ in numbers[1:]]
    text = str(numbers[0]) + "".join(f" {s} {n}" for s, n in zip(signs, numbers[1:], strict=True))
    return text, numbers[0] + sum(n if s == "+" else -n for s, n in zip(signs, numbers[1:], strict=True))


class LooseEnv(BaseEnvironment):
    """Sums of a few small integers, answered once with answer(text). Arg: ``terms`` (3)."""

    def __init__(self, terms: int = 3) -> None:
        self.terms = terms
        self.tools = [ToolSpec(
            name="answer", description="Your final answer, the number only.",
            parameters={"type": "object", "properties": {"text": {"type": "string"}},
                        "required": ["text"]},
            text_argument="text")]
        self._task: TaskSpec | None = None
        self._answer: str | None = None

    def list_tasks(self, split: str | None = None, limit: int | None = None,
                   seed: int = 0) -> list[TaskSpec]:
        """``limit`` (default 10) tasks; ``split=None`` takes the splits in turn."""
        splits = [split] if split else list(SPLITS)
        n = 10 if limit is None else limit
        # Seeds from the split and the index (never hash(): it varies per process).
        return [TaskSpec(env="loose", id=f"loose/{s}/{seed}/{i}", seed=SPLITS[s] + 1000 * seed + i,
                         knobs={"terms": self.terms}, split=s)
                for i in range(n) for s in splits if s in SPLITS][:n]

    async def reset(self, task: TaskSpec) -> tuple[str, dict[str, Any]]:
        self._task, self._answer = task, None
        return f"What is {_terms(task)[0]}?", {}

    async def step(self, action: Action) -> StepResult:
        text = action.arguments.get("text")
        if action.tool != "answer" or not isinstance(text, str):
            return StepResult(observation="Call answer(text).", info={"invalid": True})
        self._answer = text
        outcome = await self.outcome()
        return StepResult(observation="Checked.", reward=outcome.reward, terminated=True)

    async def outcome(self) -> Outcome:
        if self._task is None or self._answer is None:
            return Outcome(success=False, evidence="no answer")
        ok = self._answer.strip().strip("`").strip() == str(_terms(self._task)[1])  # ```5``` is 5
        return Outcome(success=ok, reward=float(ok))

    def reference_solution(self, task: TaskSpec) -> str | None:
        return str(_terms(task)[1])
