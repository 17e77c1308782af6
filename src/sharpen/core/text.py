"""Text helpers shared by prompts that quote model replies and environment answers."""

from __future__ import annotations

CHARS_PER_TOKEN = 4
"""Token estimate used for trimming (about four characters per token for English and code;
exact counts come from the model's usage)."""


def clip(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping its head and tail and saying how
    much was cut in between."""
    if len(text) <= limit:
        return text
    head = max(0, limit * 2 // 3)
    tail = max(0, limit - head - 30)
    return f"{text[:head]}\n…[{len(text) - head - tail} characters cut]…\n{text[len(text) - tail:]}"
