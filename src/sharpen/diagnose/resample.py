"""A fix from a model: the action a model takes at step ``k`` given the conversation so far.

:class:`ModelFix` is a :data:`~sharpen.diagnose.attribution.Fixer` (``sharpen attribute
--fix resample``: the run's own model, resampled; from Python, any model — a stronger one).
It sends the stored conversation up to step ``k``'s reply — the messages before it, as the
agent sent them: its system prompt, the task and every earlier reply and answer — and reads
the reply as an action: a native tool call, else the JSON form of constrained decoding
``{"tool", "arguments"}`` (sampled under the environment's action schema where the model
constrains), else the text protocol. ``samples`` tries per step, each with its own seed; the
first that reads as an action other than the agent's is the fix, none means no fix there.

Only a trajectory whose conversation is the single trial it played can be resampled: its
``messages`` are the prompt followed by each step's ``messages`` in order (what the ``tool``
agent stores). Others get no fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sharpen.agents import constrained
from sharpen.agents.text_protocol import ParseError, parse_text_action
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.messages import Message
from sharpen.core.trajectory import Action, Trajectory
from sharpen.envs.base import Environment
from sharpen.models.base import ChatModel, complete_with
from sharpen.models.structured import ResponseSchema, StructuredOutputError, structured_output

DEFAULT_TEMPERATURE = 1.0
"""Sampling temperature of a resample (a greedy model would repeat its own action)."""


def conversation_before(trajectory: Trajectory, index: int) -> list[Message] | None:
    """The messages the agent had sent when it wrote step ``index``'s reply, or ``None`` when
    the stored conversation is not the prompt followed by every step's messages."""
    steps = trajectory.steps
    head = len(trajectory.messages) - sum(len(s.messages) for s in steps)
    if head < 1:
        return None
    upto = head + sum(len(s.messages) for s in steps if s.index < index)
    return list(trajectory.messages[:upto])


class ModelFix:
    """A fixer that asks ``model`` (see the module doc). ``spec``: the run's AgentSpec, for
    its sampling params and decoding; ``temperature`` overrides its temperature."""

    def __init__(self, model: ChatModel, spec: AgentSpec, samples: int = 1,
                 temperature: float | None = DEFAULT_TEMPERATURE) -> None:
        if samples < 1:
            raise ValueError(f"samples must be 1 or more, got {samples}")
        self.model = model
        self.spec = spec
        self.samples = samples
        self.temperature = temperature

    async def __call__(self, env: Environment, trajectory: Trajectory,
                       actions: Sequence[Action], k: int) -> Action | None:
        index = [s.index for s in trajectory.steps if s.action is not None][k]
        before = conversation_before(trajectory, index)
        if before is None:
            return None
        prior = [s for s in trajectory.steps if s.index < index]
        admissible = constrained.admissible_of(prior[-1].info) if prior else None
        schema = None
        if constrained.resolve_decoding(self.spec.decoding, self.model) == "constrained":
            schema = constrained.action_schema(env.tools, admissible)
        constrains = schema is not None and structured_output(self.model) != "validate"
        native = self.model.supports_tools and schema is None
        for i in range(self.samples):
            seed = trajectory.seed + 7919 * (index + 1) + i  # its own seed per step and sample
            params: dict[str, Any] = {**self.spec.params, "seed": seed}
            if self.temperature is not None:
                params["temperature"] = self.temperature
            completion = await complete_with(self.model, before, env.tools if native else None,
                                             params, schema if constrains else None)
            action = read_action(completion.message, env, schema)
            if action is not None and action != actions[k]:
                return action
        return None


def read_action(reply: Message, env: Environment,
                schema: ResponseSchema | None) -> Action | None:
    """The action in ``reply`` (see the module doc), or ``None``."""
    if reply.tool_calls:
        call = reply.tool_calls[0]
        return Action(tool=call.name, arguments=call.arguments)
    text = reply.content or ""
    if schema is not None:
        try:
            return constrained.to_action(schema.parse(text))
        except StructuredOutputError:
            pass
    try:
        return parse_text_action(text, env.tools)
    except ParseError:
        return None
