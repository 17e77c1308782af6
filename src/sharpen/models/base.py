"""The ChatModel contract every model backend meets: the Protocol, a base class with its
defaults, and :data:`MODEL`, the kind the registry builds backends under."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from sharpen.core.messages import Message, ToolSpec, Usage
from sharpen.core.registry import Kind

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

    # Read-only properties, so that a wrapper (a priced or a borrowed model) may forward them;
    # a plain attribute satisfies them as well.
    @property
    def name(self) -> str:
        """Identifier used for pricing and display (e.g. ``local/smollm2-135m``)."""
        ...

    @property
    def supports_tools(self) -> bool:
        """Whether the backend takes native tool definitions and returns tool calls."""
        ...

    async def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        params: dict[str, Any] | None = None,
    ) -> Completion:
        """The model's reply to ``messages``; ``tools`` only when ``supports_tools``;
        ``params`` are sampling parameters (``temperature``, ``max_tokens``, ``seed``, ...)."""
        ...

    async def aclose(self) -> None:
        """Release the backend (connections, a loaded model)."""
        ...


class BaseChatModel(ABC):
    """Base class for model backends: set ``name`` and define :meth:`complete`."""

    name: str = "model"
    """Identifier used for pricing and display."""
    supports_tools: bool = False
    """Default: no native tools (agents use the text protocol)."""

    @abstractmethod
    async def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        params: dict[str, Any] | None = None,
    ) -> Completion:
        """The model's reply to ``messages``."""

    async def aclose(self) -> None:
        """Default: nothing to release."""
        return None


MODEL: Kind[ChatModel] = Kind("model", ChatModel, "sharpen.models.base.BaseChatModel")
"""The model plug-in kind."""
