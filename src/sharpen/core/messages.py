"""Chat messages, tool calls, tool specs and usage — the vocabulary shared by models, agents,
environments and the store. Shapes follow the OpenAI chat format so exports need no mapping."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(BaseModel):
    """One call of a tool by the model."""

    id: str
    """Call id, echoed by the tool message that answers it."""
    name: str
    """Tool name."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Parsed arguments."""

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI ``tool_calls`` entry for this call."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments)},
        }


class Message(BaseModel):
    """One chat message."""

    role: Role
    """Who speaks: system, user (the environment speaks as user), assistant or tool."""
    content: str | None = None
    """Text content; ``None`` for an assistant message that only calls tools."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """Tool calls made by an assistant message."""
    tool_call_id: str | None = None
    """For ``role == "tool"``: the id of the call this message answers."""

    def to_openai(self) -> dict[str, Any]:
        """This message as an OpenAI chat message dict."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [c.to_openai() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out


class ToolSpec(BaseModel):
    """A tool an environment offers, described by a JSON Schema."""

    name: str
    """Tool name."""
    description: str
    """What the tool does, as shown to the model."""
    parameters: dict[str, Any]
    """JSON Schema (type object) of the arguments."""
    text_argument: str | None = None
    """For the text protocol: the string argument that a fenced code block in a plain-text
    reply fills (e.g. ``code`` for ``submit``). ``None`` if the tool has no such argument."""
    text_hint: str | None = None
    """For the text protocol: how to phrase such a reply, shown to the model (default: "reply
    with the complete code in one ```python code block")."""
    final: bool = Field(default=False, exclude=True)
    """Whether calling this tool gives the agent's final answer or ends the episode (code's
    ``submit``, sql's ``submit_sql``, shell's ``done``, toolshop's ``finish``): the tool that a
    stated confidence goes with (:mod:`sharpen.agents.confidence`). Left out of
    ``model_dump``, so tool listings and recorded cassette keys stay as they were."""

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry for this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


class Usage(BaseModel):
    """Tokens, calls and cost. ``cost_usd`` is ``None`` when any price was unknown."""

    input_tokens: int = 0
    """Prompt tokens."""
    output_tokens: int = 0
    """Completion tokens."""
    calls: int = 0
    """Model calls."""
    cost_usd: float | None = 0.0
    """Dollar cost; ``None`` means "cost unknown" (never silently zero)."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            calls=self.calls + other.calls,
            cost_usd=cost,
        )
