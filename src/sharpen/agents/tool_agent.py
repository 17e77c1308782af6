"""ToolAgent: the tool-calling loop that runs an AgentSpec against an Environment.

In ``constrained`` decoding (the spec's ``decoding``; by default on the embedded model) every
reply is a JSON action valid against the environment's action schema
(:mod:`sharpen.agents.constrained`), sampled under that schema's grammar where the model can.
Otherwise native tool calls are used when the model supports them (and the spec does not ask
for the text protocol), else the text protocol of :mod:`sharpen.agents.text_protocol`. A reply
that holds no valid action is answered with feedback and counted in
``Trajectory.invalid_actions`` — it never crashes the episode. The loop stops when the
environment terminates the episode or a limit (steps, tokens, seconds, dollars) is hit.

Infra errors raised by the model propagate to the runner, which owns retries and records.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Literal

from sharpen.agents import confidence, constrained
from sharpen.agents.acting import apply_action
from sharpen.agents.base import BaseAgent
from sharpen.agents.guidelines import COMPONENT as GUIDELINES
from sharpen.agents.guidelines import check_top_k, select_guidelines
from sharpen.agents.text_protocol import ParseError, parse_text_action, protocol_instructions
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.core.messages import Message, ToolSpec
from sharpen.core.registry import register
from sharpen.core.trajectory import Action, Step, Trajectory
from sharpen.envs.base import Environment
from sharpen.models.base import ChatModel, Completion, call_info, call_logprobs, complete_with
from sharpen.models.structured import ResponseSchema, StructuredOutputError, structured_output

Protocol = Literal["auto", "native", "text"]


Acting = Literal["native", "text", "constrained"]
"""How the agent reads an action from a reply: native tool calls, the text protocol, or a
JSON action under the environment's action schema."""


def system_prompt(spec: AgentSpec, tools: list[ToolSpec], text_protocol: bool | Acting,
                  task: str = "", guidelines_top_k: int | None = None,
                  admissible: list[str] | None = None) -> str:
    """The system message: the spec's text components, then how to act (text protocol or
    constrained; nothing for native tools — ``text_protocol`` may also be a bool, ``True``
    meaning ``"text"``). With ``guidelines_top_k``, the ``guidelines`` component keeps only
    its rules most relevant to ``task`` (:func:`~sharpen.agents.guidelines.select_guidelines`).
    ``admissible``: the environment's admissible values at reset (constrained decoding)."""
    acting = ("text" if text_protocol else "native") if isinstance(text_protocol, bool) else text_protocol
    components = dict(spec.components)
    if guidelines_top_k is not None and GUIDELINES in components:
        components[GUIDELINES] = select_guidelines(components[GUIDELINES], task, guidelines_top_k)
    parts = [c.strip() for c in components.values() if c.strip()]
    if acting == "text":
        parts.append(protocol_instructions(tools))
    elif acting == "constrained":
        parts.append(constrained.instructions(tools, admissible))
    return "\n\n".join(parts)


@register("agent", "tool")
class ToolAgent(BaseAgent):
    """Runs one episode. ``protocol``: ``auto`` (native tools when the model has them),
    ``native`` or ``text``. ``guidelines_top_k``: put only that many rules of the
    ``guidelines`` component, the most relevant to the task, in the prompt (all when unset).
    ``confidence``: offer an optional stated confidence on the environment's final tools and
    carry it to the outcome (:mod:`sharpen.agents.confidence`; calibration reads it)."""

    def __init__(self, protocol: Protocol = "auto", guidelines_top_k: int | None = None,
                 confidence: bool = False) -> None:
        if not isinstance(confidence, bool):
            raise UserError(f"tool agent: confidence must be true or false, got {confidence!r}",
                            "set agent args confidence: true")
        self.protocol = protocol
        self.guidelines_top_k = check_top_k(guidelines_top_k)
        self.confidence = confidence

    def tools(self, env: Environment) -> list[ToolSpec]:
        """The tools the model is shown: the environment's, with a ``confidence`` argument on
        its final ones when this agent asks for one."""
        return confidence.offer(env.tools) if self.confidence else env.tools

    def acting(self, model: ChatModel, spec: AgentSpec) -> Acting:
        """How this agent acts with ``model`` under ``spec`` (``decoding`` first, then
        ``protocol``)."""
        if constrained.resolve_decoding(spec.decoding, model) == "constrained":
            return "constrained"
        if self.protocol == "auto":
            return "native" if model.supports_tools else "text"
        return self.protocol

    async def run(
        self, env: Environment, model: ChatModel, spec: AgentSpec, trajectory: Trajectory
    ) -> None:
        """Play ``trajectory.task`` in ``env`` and fill ``trajectory`` in place (messages,
        steps, usage, invalid actions). The caller sets the outcome."""
        limits = spec.limits
        acting = self.acting(model, spec)
        text = acting != "native"  # replies are read from their text, answers are user messages
        # A model that constrains gets the schema; on one that does not, replies are validated.
        constrains = acting == "constrained" and structured_output(model) != "validate"
        params = {**spec.params, "seed": trajectory.seed}
        obs, info = await env.reset(trajectory.task)
        prompt = system_prompt(spec, self.tools(env), acting, obs, self.guidelines_top_k,
                               constrained.admissible_of(info))
        if self.confidence and (ask := confidence.instructions(env.tools)):
            prompt = f"{prompt}\n\n{ask}" if prompt else ask
        trajectory.messages = [
            Message(role="system", content=prompt),
            Message(role="user", content=obs),
        ]
        started = time.monotonic()
        for index in range(limits.max_steps):
            tools = self.tools(env)
            schema = (constrained.action_schema(tools, constrained.admissible_of(info))
                      if acting == "constrained" else None)
            completion = await complete_with(
                model, trajectory.messages, None if text else tools, params,
                schema if constrains else None,
            )
            trajectory.usage = trajectory.usage + completion.usage
            step = Step(index=index, messages=[], usage=completion.usage,
                        model_seconds=completion.latency_s, info=call_info(completion),
                        logprobs=call_logprobs(completion))
            reply = completion.message
            step.messages.append(reply)
            if schema is not None:
                action, problem = self._parse_constrained(reply, schema, completion, tools)
            else:
                action, problem = self._parse(reply, tools, text, completion)
            if action is None:
                trajectory.invalid_actions += 1
                step.invalid_action = problem
                step.observation = problem
                step.messages.extend(self._answer(reply, problem, text))
            else:
                stated: dict = {}
                if self.confidence:  # the environment never sees the argument
                    action, stated = confidence.take(action, reply.content, env.tools)
                observation = await apply_action(env, trajectory, step, action)
                info = step.info
                if stated:
                    step.info = {**step.info, **stated}
                step.messages.extend(self._answer(reply, observation, text))
            trajectory.messages.extend(step.messages)
            trajectory.steps.append(step)
            if step.terminated or step.truncated:
                break
            reason = self._limit_hit(trajectory, spec, time.monotonic() - started)
            if reason:
                step.truncated = True
                step.info["limit"] = reason
                break
        trajectory.ended_at = datetime.now(UTC)

    @staticmethod
    def _parse(
        reply: Message, tools: list[ToolSpec], text: bool, completion: Completion
    ) -> tuple[Action | None, str]:
        if not text and reply.tool_calls:
            call = reply.tool_calls[0]
            return Action(tool=call.name, arguments=call.arguments), ""
        # A native-tools model that answered in prose may still have followed the text
        # protocol; accept that rather than punish it.
        try:
            return parse_text_action(
                reply.content or "", tools, cut_off=completion.finish_reason == "length"
            ), ""
        except ParseError as exc:
            return None, str(exc)

    @staticmethod
    def _parse_constrained(
        reply: Message, schema: ResponseSchema, completion: Completion, tools: list[ToolSpec]
    ) -> tuple[Action | None, str]:
        text = reply.content or ""
        if schema.fenced and text.lstrip().startswith("```"):  # the free-text answer, fenced
            return ToolAgent._parse(reply, tools, True, completion)
        try:
            return constrained.to_action(schema.parse(text)), ""
        except StructuredOutputError as exc:
            if completion.finish_reason == "length":
                return None, ("Your reply was cut off at the token limit before the JSON "
                              "action was complete. Write a shorter action.")
            return None, f"{exc} Reply with one JSON action as described."

    @staticmethod
    def _answer(reply: Message, observation: str, text: bool) -> list[Message]:
        """The environment's answer, as a tool message per native call or one user message."""
        if not text and reply.tool_calls:
            out = [Message(role="tool", tool_call_id=reply.tool_calls[0].id, content=observation)]
            for extra in reply.tool_calls[1:]:
                out.append(Message(role="tool", tool_call_id=extra.id,
                                   content="Ignored: make one tool call per turn."))
            return out
        return [Message(role="user", content=observation)]

    @staticmethod
    def _limit_hit(trajectory: Trajectory, spec: AgentSpec, elapsed: float) -> str | None:
        limits = spec.limits
        if trajectory.usage.total_tokens >= limits.max_tokens:
            return f"token limit ({limits.max_tokens})"
        if elapsed >= limits.max_seconds:
            return f"time limit ({limits.max_seconds:g} s)"
        cost = trajectory.usage.cost_usd
        if limits.max_cost_usd is not None and cost is not None and cost >= limits.max_cost_usd:
            return f"cost limit (${limits.max_cost_usd:g})"
        return None
