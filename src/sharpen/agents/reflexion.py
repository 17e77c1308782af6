"""ReflexionAgent: within-task retries with verbal reflections (Reflexion, Shinn et al.).

An episode is up to ``trials`` attempts at the same task. Each attempt is an ordinary
:class:`~sharpen.agents.tool_agent.ToolAgent` episode on a freshly reset environment. After a
failed attempt the model reads that attempt (its last answer and what the environment said
— for ``code``, the failed tests) and writes a short reflection: what went wrong and what to
do differently. The next attempt's system prompt carries this task's reflections, each with
the answer it reflects on: an **episodic** memory that lives for one task and is never
written back to the AgentSpec (cross-task memory is the ``guidelines`` proposer's job).

The first attempt is exactly what the plain tool agent would do (same prompt, same seed, same
params), so it never loses a success the plain agent has on a deterministic model. Later
attempts sample at ``retry_temperature`` (0.7 by default): a small greedy model given its
failure tends to write the same code again word for word. The price is the extra tokens,
which the trajectory's usage and every report show. The verdict is the environment's verdict
on the last attempt. Steps of every attempt are kept (``info["trial"]``); the reflection
calls are steps too (``info["reflection"]``), and each reflection is stored as
``Feedback(source="critic", name="reflection")``. ``trajectory.messages`` holds the last
attempt's conversation (what produced the final answer).
"""

from __future__ import annotations

from sharpen.agents.tool_agent import Protocol, ToolAgent
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.core.feedback import Feedback, FeedbackTarget
from sharpen.core.messages import Message
from sharpen.core.registry import register
from sharpen.core.trajectory import Step, Trajectory
from sharpen.envs.base import Environment
from sharpen.models.base import ChatModel

REFLECT_PROMPT = (
    "You tried to solve a task and failed.\n\n{attempt}\n\n"
    "In one or two short sentences, say why your answer failed and what to change."
)
MEMORY_HEADER = "Your earlier attempts at this task failed. Learn from them:"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 15] + "\n…[cut]"


def describe_attempt(t: Trajectory, limit: int = 1200) -> str:
    """The last answer of an attempt and what the environment said about it."""
    answer, result = "", ""
    for step in t.steps:
        if step.action is not None:
            answer = "\n".join(f"{k}: {v}" for k, v in step.action.arguments.items())
        if step.observation:
            result = step.observation
    if not answer:
        answer = "(no valid answer)"
    return f"Your answer:\n{_clip(answer, limit)}\n\nResult:\n{_clip(result or '(nothing)', limit)}"


@register("agent", "reflexion")
class ReflexionAgent:
    """Up to ``trials`` attempts with reflections between them (see the module doc).

    Args: ``trials`` (attempts, ≥ 1), ``reflection_tokens`` (max tokens of one
    reflection), ``retry_temperature`` (sampling temperature of attempts after the first;
    ``None`` keeps the spec's — a greedy small model otherwise tends to repeat its failed
    answer word for word), ``protocol`` (the inner tool agent's: ``auto``, ``native`` or
    ``text``)."""

    def __init__(self, trials: int = 2, reflection_tokens: int = 64, retry_temperature: float | None = 0.7,
                 protocol: Protocol = "auto") -> None:
        if not isinstance(trials, int) or trials < 1:
            raise UserError(f"reflexion: trials must be a positive integer, got {trials!r}",
                            "set agent args trials: 2 (or more)")
        self.trials = trials
        self.reflection_tokens = reflection_tokens
        self.retry_temperature = retry_temperature
        self.inner = ToolAgent(protocol)

    async def run(
        self, env: Environment, model: ChatModel, spec: AgentSpec, trajectory: Trajectory
    ) -> None:
        """Play up to ``trials`` attempts into ``trajectory`` (see the module doc)."""
        memory: list[str] = []
        for trial in range(self.trials):
            attempt_spec = spec
            if memory:
                params = dict(spec.params)
                if self.retry_temperature is not None:
                    params["temperature"] = self.retry_temperature
                attempt_spec = spec.model_copy(update={"params": params, "components": {
                    **spec.components, "reflections": "\n\n".join([MEMORY_HEADER, *memory])}})
            # Same id and run as the episode, so feedback the attempt records targets it.
            attempt = Trajectory(id=trajectory.id, task=trajectory.task, agent_hash=trajectory.agent_hash,
                                 seed=trajectory.seed + trial, run_id=trajectory.run_id)
            await self.inner.run(env, model, attempt_spec, attempt)
            self._merge(trajectory, attempt, trial)
            outcome = await env.outcome()
            if outcome.success or trial == self.trials - 1:
                break
            memory.append(await self._reflect(model, spec, trajectory, attempt, trial))
        trajectory.ended_at = trajectory.ended_at or attempt.ended_at

    @staticmethod
    def _merge(trajectory: Trajectory, attempt: Trajectory, trial: int) -> None:
        base = len(trajectory.steps)
        for step in attempt.steps:
            step.index += base
            step.info["trial"] = trial
            trajectory.steps.append(step)
        for fb in attempt.feedback:
            if fb.target.step_index is not None:
                fb.target = fb.target.model_copy(update={"step_index": fb.target.step_index + base})
            trajectory.feedback.append(fb)
        trajectory.messages = attempt.messages
        trajectory.usage = trajectory.usage + attempt.usage
        trajectory.invalid_actions += attempt.invalid_actions
        trajectory.ended_at = attempt.ended_at

    async def _reflect(
        self, model: ChatModel, spec: AgentSpec, trajectory: Trajectory, attempt: Trajectory,
        trial: int,
    ) -> str:
        """Ask for a reflection on ``attempt``; record it as a step and as feedback; return
        the memory entry (the attempt plus the reflection)."""
        described = describe_attempt(attempt)
        ask = Message(role="user", content=REFLECT_PROMPT.format(attempt=described))
        params = {**spec.params, "max_tokens": self.reflection_tokens, "seed": trajectory.seed + trial}
        completion = await model.complete([ask], None, params)
        text = (completion.message.content or "").strip() or "(no reflection)"
        index = len(trajectory.steps)
        trajectory.steps.append(Step(
            index=index, messages=[ask, completion.message], usage=completion.usage,
            model_seconds=completion.latency_s, info={"reflection": trial}))
        trajectory.usage = trajectory.usage + completion.usage
        trajectory.feedback.append(Feedback(
            source="critic", name="reflection", value=text, author=f"agent:reflexion:{model.name}",
            target=FeedbackTarget(kind="step", run_id=trajectory.run_id, trajectory_id=trajectory.id,
                                  step_index=index)))
        return f"Attempt {trial + 1}:\n{described}\nReflection: {text}"
