"""Retries of infrastructure failures, kept apart from the agent.

:class:`RetryingModel` wraps a ChatModel: an :class:`~sharpen.core.errors.InfraError` with
``retryable=True`` (429, 5xx, timeouts, refused connections, truncated responses) is retried
with exponential backoff and jitter, up to ``max_retries`` times; each retry is counted so the
trajectory shows it. When retries run out the error propagates, and the runner records the
attempt with error kind ``infra`` — never as the agent's failure. Agent-caused problems
(malformed output) are not exceptions at all, so they can never be retried into a success.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from sharpen.core.errors import InfraError
from sharpen.core.messages import Message, ToolSpec
from sharpen.models.base import ChatModel, Completion, ModelWrapper
from sharpen.models.structured import ResponseSchema


class RetryPolicy(BaseModel):
    """How infra errors are retried."""

    max_retries: int = 4
    """Retries after the first try (0 disables retrying)."""
    base_delay: float = 0.5
    """Delay before the first retry, seconds; doubles each retry."""
    max_delay: float = 20.0
    """Cap on one delay, seconds."""

    def delay(self, retry: int, rng: random.Random) -> float:
        """Backoff before retry number ``retry`` (0-based), with ±25% jitter."""
        base = min(self.max_delay, self.base_delay * (2**retry))
        return base * rng.uniform(0.75, 1.25)


class RetryingModel(ModelWrapper):
    """A ChatModel that retries retryable InfraErrors of ``inner``; ``on_retry`` is told each."""

    def __init__(
        self,
        inner: ChatModel,
        policy: RetryPolicy,
        rng: random.Random,
        on_retry: Callable[[InfraError], None] | None = None,
    ) -> None:
        super().__init__(inner)
        self.policy = policy
        self.rng = rng
        self.on_retry = on_retry

    async def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        params: dict[str, Any] | None = None,
        *,
        response_schema: ResponseSchema | None = None,
    ) -> Completion:
        retry = 0
        while True:
            try:
                return await super().complete(messages, tools, params,
                                              response_schema=response_schema)
            except InfraError as exc:
                if not exc.retryable or retry >= self.policy.max_retries:
                    raise
                if self.on_retry is not None:
                    self.on_retry(exc)
                await asyncio.sleep(self.policy.delay(retry, self.rng))
                retry += 1
