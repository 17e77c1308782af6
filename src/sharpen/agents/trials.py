"""The trial loop shared by the agents that retry a task within one trajectory
(``reflexion``, ``critic``).

An episode is up to ``trials`` attempts of an inner agent at the same task, each an ordinary
episode of that agent on a freshly reset environment. After a failed attempt (not the last)
the subclass may write a **note** (:meth:`TrialAgent.after_failure`: a reflection, a
critique, what the environment said); the next attempt's spec is the subclass's
(:meth:`TrialAgent.attempt_spec`), built from the notes so far. Notes live for one task and
are never written back to the AgentSpec.

What every trial agent keeps, whatever its notes: the first attempt runs on the spec as the
subclass gives it for trial 0 (the plain agent's, for ``reflexion``), with the episode's
seed; attempt ``k`` runs with seed ``seed + k``. The verdict is the environment's verdict on
the last attempt. Steps of every attempt are kept (``info["trial"]``; an attempt's first step
also keeps the prompt it started with, ``info["trial_prompt"]``); model calls made between
attempts are steps too, recorded by :func:`record_call` (no ``trial`` key, their own info
marks them); usage sums over all of them. ``trajectory.messages`` holds the last attempt's
conversation (what produced the final answer).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from sharpen.agents.base import Agent, BaseAgent
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.messages import Message
from sharpen.core.trajectory import TRIAL, TRIAL_PROMPT, Step, Trajectory
from sharpen.envs.base import Environment
from sharpen.models.base import ChatModel, Completion, call_info, call_logprobs


def retry_params(spec: AgentSpec, temperature: float | None) -> dict[str, Any]:
    """The spec's sampling params for an attempt after the first: at ``temperature`` unless it
    is ``None`` (a greedy small model given its failure tends to repeat it word for word)."""
    params = dict(spec.params)
    if temperature is not None:
        params["temperature"] = temperature
    return params


def merge_attempt(trajectory: Trajectory, attempt: Trajectory, trial: int) -> None:
    """Append ``attempt`` (trial number ``trial``) to ``trajectory``: its steps renumbered and
    tagged, its feedback retargeted, its usage and invalid actions added; its conversation
    becomes the trajectory's."""
    base = len(trajectory.steps)
    if attempt.steps:  # the prompt this trial ran with (messages keeps only the last trial's)
        prompt = []
        for m in attempt.messages:
            if m.role == "assistant":
                break
            prompt.append(m.model_dump(mode="json"))
        attempt.steps[0].info[TRIAL_PROMPT] = prompt
    for step in attempt.steps:
        step.index += base
        step.info[TRIAL] = trial
        trajectory.steps.append(step)
    for fb in attempt.feedback:
        if fb.target.step_index is not None:
            fb.target = fb.target.model_copy(update={"step_index": fb.target.step_index + base})
        trajectory.feedback.append(fb)
    trajectory.messages = attempt.messages
    trajectory.usage = trajectory.usage + attempt.usage
    trajectory.invalid_actions += attempt.invalid_actions
    trajectory.ended_at = attempt.ended_at


def record_call(trajectory: Trajectory, ask: list[Message], completion: Completion,
                info: dict[str, Any]) -> int:
    """Record a model call made between attempts as a step of ``trajectory`` (its messages,
    usage and ``info``) and count its usage in the trajectory's; the step's index."""
    index = len(trajectory.steps)
    trajectory.steps.append(Step(
        index=index, messages=[*ask, completion.message], usage=completion.usage,
        model_seconds=completion.latency_s, info={**call_info(completion), **info},
        logprobs=call_logprobs(completion)))
    trajectory.usage = trajectory.usage + completion.usage
    return index


class TrialAgent(BaseAgent):
    """Up to ``trials`` attempts of ``inner`` with notes between them (see the module doc).
    Subclasses set ``trials`` and ``inner`` and define the two hooks."""

    trials: int
    inner: Agent

    @abstractmethod
    def attempt_spec(self, spec: AgentSpec, trial: int, notes: list[str]) -> AgentSpec:
        """The spec attempt ``trial`` runs with, given the notes written so far."""

    @abstractmethod
    async def after_failure(self, model: ChatModel, spec: AgentSpec, trajectory: Trajectory,
                            attempt: Trajectory, trial: int) -> str | None:
        """The note on failed attempt ``trial`` (already merged into ``trajectory``), or
        ``None`` for none. Model calls made here are recorded with :func:`record_call`."""

    async def run(
        self, env: Environment, model: ChatModel, spec: AgentSpec, trajectory: Trajectory
    ) -> None:
        """Play up to ``trials`` attempts into ``trajectory`` (see the module doc)."""
        notes: list[str] = []
        for trial in range(self.trials):
            # Same id and run as the episode, so feedback the attempt records targets it.
            attempt = Trajectory(id=trajectory.id, task=trajectory.task, agent_hash=trajectory.agent_hash,
                                 seed=trajectory.seed + trial, run_id=trajectory.run_id)
            await self.inner.run(env, model, self.attempt_spec(spec, trial, notes), attempt)
            merge_attempt(trajectory, attempt, trial)
            outcome = await env.outcome()
            if outcome.success or trial == self.trials - 1:
                break
            note = await self.after_failure(model, spec, trajectory, attempt, trial)
            if note is not None:
                notes.append(note)
        trajectory.ended_at = trajectory.ended_at or attempt.ended_at
