"""The ``ask_once`` agent: one model call, its reply submitted as the answer.

The system prompt is the spec's text components joined (``instructions`` first, as written);
the user message is the environment's first observation. The reply goes, as it is, to the
environment's answer tool (the first tool that declares a ``text_argument``). The episode is
one step; the runner sets the outcome from ``env.outcome()``.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sharpen import Action, AgentSpec, Message, Step, Trajectory, UserError
from sharpen.agents.acting import apply_action
from sharpen.agents.base import BaseAgent
from sharpen.envs.base import Environment
from sharpen.models.base import ChatModel


class AskOnceAgent(BaseAgent):
    """Asks the model once and submits its reply (see the module doc). No arguments."""

    async def run(self, env: Environment, model: ChatModel, spec: AgentSpec,
                  trajectory: Trajectory) -> None:
        """One call, one submission, recorded on ``trajectory``."""
        tool = next((t for t in env.tools if t.text_argument), None)
        if tool is None or tool.text_argument is None:
            raise UserError("agent ask_once needs an environment with a tool that takes a text answer",
                            "use --agent-name tool for this environment")
        observation, _info = await env.reset(trajectory.task)
        system = "\n\n".join(text.strip() for text in spec.components.values() if text.strip())
        trajectory.messages = [Message(role="system", content=system),
                               Message(role="user", content=observation)]
        # The seed makes sampling reproducible per attempt; the spec's params go to the model.
        completion = await model.complete(trajectory.messages, None,
                                          {**spec.params, "seed": trajectory.seed})
        trajectory.usage = trajectory.usage + completion.usage
        step = Step(index=0, messages=[completion.message], usage=completion.usage,
                    model_seconds=completion.latency_s)
        action = Action(tool=tool.name, arguments={tool.text_argument: completion.message.content or ""})
        # apply_action steps the env and records observation, reward, flags and feedback.
        answer = await apply_action(env, trajectory, step, action)
        step.messages.append(Message(role="user", content=answer))
        trajectory.messages.extend(step.messages)
        trajectory.steps.append(step)
        trajectory.ended_at = datetime.now(UTC)
