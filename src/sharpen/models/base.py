"""The ChatModel contract every model backend meets: the Protocol, a base class with its
defaults, and :data:`MODEL`, the kind the registry builds backends under."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from sharpen.core.messages import Message, ToolSpec, Usage
from sharpen.core.registry import Kind
from sharpen.core.trajectory import TokenLogprobs

if TYPE_CHECKING:
    from sharpen.models.structured import ResponseSchema, StructuredOutput

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
    tokens: list[str] | None = None
    """The text of each token ``logprobs`` scores, when the backend gives it."""
    latency_s: float = 0.0
    """Wall time of the call."""
    route: str | None = None
    """The model that served this call when the backend routes each call to one of several
    (the ``router``): the call is priced as that model, and agents record it in the step's
    ``info`` (:func:`call_info`). ``None`` for a backend that is one model."""
    info: dict[str, Any] = Field(default_factory=dict)
    """What the backend records about this call beside ``route`` (the router: the routes
    that failed before one served it), copied into the step's ``info`` with it."""


ROUTE = "route"
"""``Step.info`` key: the model that served the step's call (:attr:`Completion.route`)."""


def call_info(completion: Completion) -> dict[str, Any]:
    """What a step records of the call that made it: ``route`` and the backend's ``info``
    (empty for a backend that is one model)."""
    if completion.route is None and not completion.info:
        return {}
    return {**completion.info, **({ROUTE: completion.route} if completion.route else {})}


def call_logprobs(completion: Completion) -> TokenLogprobs | None:
    """What a step keeps of the reply's per-token logprobs (``Step.logprobs``): ``None`` when
    the backend gave none; token texts and ids only when each is as long as the logprobs
    (else they could not say which logprob is which token's)."""
    values = completion.logprobs
    if values is None:
        return None
    tokens, ids = completion.tokens, completion.token_ids
    return TokenLogprobs(logprobs=values,
                         tokens=tokens if tokens is not None and len(tokens) == len(values) else None,
                         token_ids=ids if ids is not None and len(ids) == len(values) else None)


@runtime_checkable
class ChatModel(Protocol):
    """Async chat completion. Raises :class:`~sharpen.core.errors.InfraError` for failures of
    the backend (rate limits, 5xx, timeouts, refused connections, truncated responses) and
    :class:`~sharpen.core.errors.UserError` for configuration mistakes.

    Optional member ``structured_output`` (``"grammar"``, ``"server"`` or ``"validate"``, see
    :mod:`sharpen.models.structured`): how the backend honours ``response_schema``. A model
    that does not declare it is never passed one (its replies are validated after the fact)."""

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
        *,
        response_schema: ResponseSchema | None = None,
    ) -> Completion:
        """The model's reply to ``messages``; ``tools`` only when ``supports_tools``;
        ``params`` are sampling parameters (``temperature``, ``max_tokens``, ``seed``, ...);
        ``response_schema`` (only for a model whose ``structured_output`` is ``grammar`` or
        ``server``) constrains the reply's text to JSON valid against it, or raises
        :class:`~sharpen.models.structured.UnsupportedSchema` before generating."""
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
    structured_output: StructuredOutput = "validate"
    """Default: decoding is not constrained; set ``grammar`` or ``server`` (and honour
    ``response_schema``) when the backend can constrain it."""

    @abstractmethod
    async def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        params: dict[str, Any] | None = None,
        *,
        response_schema: ResponseSchema | None = None,
    ) -> Completion:
        """The model's reply to ``messages`` (see :meth:`ChatModel.complete`)."""

    async def aclose(self) -> None:
        """Default: nothing to release."""
        return None


async def complete_with(
    model: ChatModel,
    messages: list[Message],
    tools: list[ToolSpec] | None,
    params: dict[str, Any] | None,
    response_schema: ResponseSchema | None,
) -> Completion:
    """``model.complete(...)``, passing ``response_schema`` only when there is one: a model
    written before structured output takes no such argument."""
    if response_schema is None:
        return await model.complete(messages, tools, params)
    return await model.complete(messages, tools, params, response_schema=response_schema)


class ModelWrapper:
    """A ChatModel that forwards to ``inner`` (name, capabilities, calls, closing): the base of
    the wrappers that price, meter, retry or lend a model. Override what the wrapper changes."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def supports_tools(self) -> bool:
        return self.inner.supports_tools

    @property
    def structured_output(self) -> StructuredOutput:
        from sharpen.models.structured import structured_output

        return structured_output(self.inner)

    async def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        params: dict[str, Any] | None = None,
        *,
        response_schema: ResponseSchema | None = None,
    ) -> Completion:
        return await complete_with(self.inner, messages, tools, params, response_schema)

    async def aclose(self) -> None:
        await self.inner.aclose()


MODEL: Kind[ChatModel] = Kind("model", ChatModel, "sharpen.models.base.BaseChatModel")
"""The model plug-in kind."""
