"""Chat model backends: the embedded model (``local``), any OpenAI-compatible endpoint
(``openai``) and the record/replay test double (``replay``). Backends load lazily through
the registry; importing this package imports none of them."""

from __future__ import annotations

from typing import Any

from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.models.base import MODEL, ChatModel, Completion, FinishReason


def create_model(ref: PluginRef | dict[str, Any] | str, **extra: Any) -> ChatModel:
    """Build a ChatModel from ``{name, args}`` (or a bare name). ``extra`` are runtime,
    non-serialised args such as ``api_key``."""
    model: ChatModel = REGISTRY.create(MODEL, ref, **extra)
    return model


__all__ = ["ChatModel", "Completion", "FinishReason", "create_model"]
