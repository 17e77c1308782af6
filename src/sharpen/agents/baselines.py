"""Baseline agents that need no model: ``null`` and ``reference``.

They exist for the validity checks of :mod:`sharpen.stats.validity`: an environment whose
checker lets the ``null`` agent succeed, or fails the ``reference`` agent, measures its
checker rather than the agent. Both declare ``needs_model = False``, so the runner builds no
model for them (``sharpen run ENV --agent-name null`` loads no weights and calls no server).

- ``null`` — resets the environment and submits an empty answer once: the empty string as
  the ``text_argument`` of the environment's answer tool (for ``code``: ``submit(code="")``),
  or a call with no arguments. It must fail everywhere.
- ``reference`` — plays the environment's reference actions in order
  (``reference_actions(task) -> list[Action] | None``, multi-step environments), or submits
  its reference solution once (``reference_solution(task) -> str | None``); both default to
  ``None`` in :class:`~sharpen.envs.base.BaseEnvironment`. A task for which both are ``None``
  raises :class:`NoReferenceError`, which the runner stores as an ``env`` error (excluded
  from the success rate, never the agent's fault).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from sharpen.agents.acting import apply_action
from sharpen.agents.base import BaseAgent
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.core.messages import Message, ToolSpec
from sharpen.core.registry import register
from sharpen.core.trajectory import Action, Step, Trajectory
from sharpen.envs.base import Environment
from sharpen.models.base import ChatModel


class NoReferenceError(RuntimeError):
    """The environment knows no reference solution for this task."""


def answer_tool(tools: list[ToolSpec]) -> ToolSpec | None:
    """The tool an answer goes to: the one with a ``text_argument``, else the first tool."""
    text = [t for t in tools if t.text_argument]
    return text[0] if text else (tools[0] if tools else None)


async def act(env: Environment, trajectory: Trajectory, reply: str, action: Action | None) -> None:
    """Record one step: the assistant ``reply``, ``action`` applied to ``env`` (if any) and
    its answer, feedback attached to the trajectory."""
    index = len(trajectory.steps)
    step = Step(index=index, messages=[Message(role="assistant", content=reply)])
    if action is not None:
        observation = await apply_action(env, trajectory, step, action)
        step.messages.append(Message(role="user", content=observation))
    trajectory.messages.extend(step.messages)
    trajectory.steps.append(step)


@register("agent", "null")
class NullAgent(BaseAgent):
    """Submits an empty answer once (see the module doc)."""

    needs_model = False
    """The runner builds no model for this agent."""

    async def run(
        self, env: Environment, model: ChatModel, spec: AgentSpec, trajectory: Trajectory
    ) -> None:
        """One empty submission; the caller sets the outcome."""
        obs, _ = await env.reset(trajectory.task)
        trajectory.messages = [Message(role="user", content=obs)]
        tool = answer_tool(env.tools)
        action = None
        if tool is not None:
            args = {tool.text_argument: ""} if tool.text_argument else {}
            action = Action(tool=tool.name, arguments=args)
        await act(env, trajectory, "", action)
        trajectory.ended_at = datetime.now(UTC)


@register("agent", "reference")
class ReferenceAgent(BaseAgent):
    """Submits the environment's reference solution once (see the module doc)."""

    needs_model = False
    """The runner builds no model for this agent."""

    async def run(
        self, env: Environment, model: ChatModel, spec: AgentSpec, trajectory: Trajectory
    ) -> None:
        """Plays ``env.reference_actions(task)`` in order (multi-step environments), or
        submits ``env.reference_solution(task)`` once; the caller sets the outcome."""
        obs, _ = await env.reset(trajectory.task)
        trajectory.messages = [Message(role="user", content=obs)]
        actions = env.reference_actions(trajectory.task)
        if actions is not None:
            for action in actions:
                await act(env, trajectory, json.dumps(
                    {"tool": action.tool, "arguments": action.arguments}), action)
                if trajectory.steps[-1].terminated or trajectory.steps[-1].truncated:
                    break
            trajectory.ended_at = datetime.now(UTC)
            return
        solution = env.reference_solution(trajectory.task)
        if solution is None:
            raise NoReferenceError(
                f"{type(env).__name__} gives no reference for task {trajectory.task.id!r} "
                "(neither reference_actions nor reference_solution)")
        tool = answer_tool(env.tools)
        if tool is None or tool.text_argument is None:
            raise UserError(f"environment {type(env).__name__} has no tool that takes a text answer",
                            "the reference agent submits through the tool with a text_argument")
        action = Action(tool=tool.name, arguments={tool.text_argument: solution})
        await act(env, trajectory, f"```python\n{solution.rstrip()}\n```", action)
        trajectory.ended_at = datetime.now(UTC)
