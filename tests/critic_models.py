"""Critic models for tests/test_critic_agent.py, loaded by ``file.py:Name`` reference: the real
embedded model behind a switch that fails it, and a model whose reply is empty."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sharpen.core.errors import InfraError
from sharpen.core.messages import Message, ToolSpec, Usage
from sharpen.core.registry import REGISTRY
from sharpen.models.base import MODEL, BaseChatModel, Completion, ModelWrapper

HERE = Path(__file__).resolve()


def ref(name: str, **args: Any) -> dict[str, Any]:
    """The ``{name, args}`` of the class ``name`` of this module."""
    return {"name": f"{HERE}:{name}", "args": args}


class SwitchedLocal(ModelWrapper):
    """The embedded model, but every call raises a non-retryable InfraError (as a refused
    endpoint does) while the file ``down`` exists."""

    def __init__(self, down: str) -> None:
        super().__init__(REGISTRY.create(MODEL, "local"))
        self.down = Path(down)

    @property
    def name(self) -> str:
        return "local/switched"

    async def complete(self, messages: list[Message], tools: list[ToolSpec] | None = None,
                       params: dict[str, Any] | None = None, **kw: Any) -> Completion:
        if self.down.exists():
            raise InfraError("critic endpoint down", retryable=False)
        return await super().complete(messages, tools, params, **kw)


class Mute(BaseChatModel):
    """Replies with nothing (a few tokens spent)."""

    name = "local/mute"

    async def complete(self, messages: list[Message], tools: list[ToolSpec] | None = None,
                       params: dict[str, Any] | None = None, **kw: Any) -> Completion:
        return Completion(message=Message(role="assistant", content="  "),
                          usage=Usage(input_tokens=7, output_tokens=1, calls=1))
