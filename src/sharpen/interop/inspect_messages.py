"""Inspect AI chat messages ⇄ sharpen messages and steps, and Inspect scores → outcomes.

Inspect keeps a sample's conversation as typed chat messages and its model calls as
``ModelEvent``s in the sample's transcript; sharpen keeps the conversation as OpenAI-shaped
:class:`~sharpen.core.messages.Message`s and the agent's turns as
:class:`~sharpen.core.trajectory.Step`s. The mapping:

- every assistant message is one step; the tool and user messages after it (up to the next
  assistant message) are that step's observation;
- the step's action is the assistant's first tool call (``None`` for a plain reply, which is
  not an invalid action: Inspect's ``generate`` ends on one);
- the step's usage and model time come from the ``ModelEvent`` whose output is that message
  (matched by message id), when the transcript has one.

Requires ``inspect_ai`` (``pip install 'sharpen[inspect]'``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inspect_ai.event import ModelEvent
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    ModelUsage,
)
from inspect_ai.scorer import value_to_float
from inspect_ai.tool import ToolCall as InspectToolCall

from sharpen.core.messages import Message, ToolCall, Usage
from sharpen.core.trajectory import Action, Step


def usage_of(usage: ModelUsage | None, calls: int = 0) -> Usage:
    """sharpen usage of Inspect's: tokens as counted; a cost Inspect did not price is unknown
    (``None``), never zero."""
    if usage is None:
        return Usage(calls=calls, cost_usd=None)
    return Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, calls=calls,
                 cost_usd=usage.total_cost)


def from_inspect(m: ChatMessage) -> Message:
    """One Inspect chat message as a sharpen message (text only: images and other content
    parts are dropped, reasoning blocks too)."""
    if isinstance(m, ChatMessageAssistant):
        calls = [ToolCall(id=c.id, name=c.function, arguments=dict(c.arguments or {}))
                 for c in m.tool_calls or []]
        return Message(role="assistant", content=m.text or None, tool_calls=calls)
    if isinstance(m, ChatMessageTool):
        text = m.text if m.error is None else f"{m.text}\n[error] {m.error.message}".strip()
        return Message(role="tool", content=text, tool_call_id=m.tool_call_id)
    return Message(role=m.role, content=m.text)


def to_inspect(m: Message, model: str | None = None) -> ChatMessage:
    """One sharpen message as an Inspect chat message."""
    text = m.content or ""
    if m.role == "assistant":
        calls = [InspectToolCall(id=c.id, function=c.name, arguments=c.arguments)
                 for c in m.tool_calls] or None
        return ChatMessageAssistant(content=text, tool_calls=calls, model=model)
    if m.role == "tool":
        return ChatMessageTool(content=text, tool_call_id=m.tool_call_id)
    if m.role == "system":
        return ChatMessageSystem(content=text)
    return ChatMessageUser(content=text)


def steps_of(messages: Sequence[ChatMessage], events: Sequence[Any]) -> list[Step]:
    """The agent's turns in an Inspect conversation (see the module docstring)."""
    calls = {e.output.message.id: e for e in events
             if isinstance(e, ModelEvent) and e.output.message.id is not None}
    steps: list[Step] = []
    for m in messages:
        if isinstance(m, ChatMessageAssistant):
            event = calls.get(m.id) if m.id is not None else None
            first = m.tool_calls[0] if m.tool_calls else None
            steps.append(Step(
                index=len(steps), messages=[from_inspect(m)],
                action=None if first is None else Action(tool=first.function,
                                                         arguments=dict(first.arguments or {})),
                usage=usage_of(event.output.usage if event else None, calls=1 if event else 0),
                model_seconds=(event.working_time or 0.0) if event else 0.0,
            ))
        elif steps:
            step = steps[-1]
            step.messages.append(from_inspect(m))
            step.observation = "\n".join(filter(None, [step.observation, m.text])) or None
    if steps:
        steps[-1].terminated = True
    return steps


def verdict(value: Any) -> tuple[bool, float, dict[str, float]]:
    """``(success, reward, components)`` of an Inspect score value: ``C``/``I``, ``1``/``0``,
    ``True``/``False`` (and every value Inspect's ``value_to_float`` reads, ``P`` as 0.5)
    give the reward; success is a reward of 1. A dict or list value gives one component
    per entry, the mean as reward, and success when every entry is 1."""
    to_float = value_to_float()
    if isinstance(value, dict | list):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        components = {str(k): to_float(v) for k, v in items}
        reward = sum(components.values()) / len(components) if components else 0.0
        return bool(components) and all(v >= 1.0 for v in components.values()), reward, components
    reward = to_float(value)
    return reward >= 1.0, reward, {}


def scalar(value: Any) -> float | bool | str | None:
    """A score value as a feedback value: scalars as they are, anything else as its text."""
    if value is None or isinstance(value, bool | int | float | str):
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value
    return str(value)
