"""The ChatModel protocol every model backend implements."""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from sharpen.core.messages import Message, ToolSpec, Usage

FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "error"]


class Completion(BaseModel):
    """One model answer."""

    message: Message
    """The assistant message (text and/or tool calls)."""
    finish_reason: FinishReason = "stop"
    """Why generation stopped; ``length`` means the reply was cut at ``max_tokens``."""
    usage: Usage = Field(default_factory=Usage)
    """Tokens and cost of this call (``cost_usd=None`` when the price is unknown)."""
    model: str = ""
    """The model name the backend reports."""
    logprobs: list[float] | None = None
    """Per-token logprobs of the reply, when requested and available."""
    token_ids: list[int] | None = None
    """Token ids of the reply, when available."""
    latency_s: float = 0.0
    """Wall time of the call."""


@runtime_checkable
class ChatModel(Protocol):
    """Async chat completion. Raises :class:`~sharpen.core.errors.InfraError` for failures of
    the backend (rate limits, 5xx, timeouts, refused connections, truncated responses) and
    :class:`~sharpen.core.errors.UserError` for configuration mistakes."""

    name: str
    """Identifier used for pricing and display (e.g. ``local/smollm2-135m``)."""
    supports_tools: bool
    """Whether the backend takes native tool definitions and returns tool calls."""

    async def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        params: dict[str, Any] | None = None,
    ) -> Completion: ...

    async def aclose(self) -> None: ...
