"""The ``arith_bot`` model: a deterministic, rule-based stand-in for an LLM.

It reads the last user message, finds the last integer expression in it (``7 * 3``,
``4 + 9 - 2``: integers joined by ``+``, ``-`` and ``*``) and replies with its value in a
fenced block; with no expression it says so. It needs no weights, no server and no network,
so a run on it is fast and gives the same result every time. Usage counts
whitespace-separated words as tokens and costs nothing.

It has one flaw, on purpose, so that improvement has something to find: unless a system
message asks it to check its work (holds the word "check"), it multiplies carelessly and is
off by one. The ``fixed_hint`` proposer's default hint says "Check"; ``sharpen improve arith
-E ops=*`` shows the engine finding that out and proving it on held-out tasks.
"""

from __future__ import annotations

import ast
import re
import time
from typing import Any

from sharpen import Message, ToolSpec, Usage
from sharpen.models.base import BaseChatModel, Completion

EXPRESSION = re.compile(r"-?\d+(?:\s*[-+*]\s*-?\d+)+")
"""Integers joined by ``+``, ``-`` or ``*``."""

CAREFUL = re.compile(r"\bcheck", re.IGNORECASE)
"""A system message that matches makes the model multiply correctly."""


def evaluate(node: ast.expr, careful: bool = True) -> int:
    """The value of an expression of integers, ``+``, ``-`` and ``*`` (never ``eval``); each
    product is one too many unless ``careful``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -evaluate(node.operand, careful)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub | ast.Mult):
        a, b = evaluate(node.left, careful), evaluate(node.right, careful)
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        return a * b + (0 if careful else 1)
    raise ValueError(f"not integer arithmetic: {ast.dump(node)}")


class ArithBot(BaseChatModel):
    """A rule-based "model" that answers arithmetic questions, and multiplies carelessly
    unless asked to check (see the module doc). No arguments."""

    name = "arith_bot"
    """Shown in reports; no price is known for it, and none is needed (cost 0)."""

    async def complete(self, messages: list[Message], tools: list[ToolSpec] | None = None,
                       params: dict[str, Any] | None = None) -> Completion:
        """The value of the last expression in the last user message, in a ``` block
        (careless products unless a system message says "check")."""
        started = time.monotonic()
        prompt = next((m.content or "" for m in reversed(messages) if m.role == "user"), "")
        careful = any(m.role == "system" and CAREFUL.search(m.content or "") for m in messages)
        found = EXPRESSION.findall(prompt)
        value = evaluate(ast.parse(found[-1], mode="eval").body, careful) if found else None
        # The number in a ``` block: what the text protocol of the built-in `tool` agent
        # reads as an answer; `ask_once` submits it as it is, and `arith` unwraps it.
        text = f"```\n{value}\n```" if value is not None else "I can only answer arithmetic questions."
        words = sum(len((m.content or "").split()) for m in messages)
        return Completion(
            message=Message(role="assistant", content=text), finish_reason="stop",
            usage=Usage(input_tokens=words, output_tokens=1, calls=1, cost_usd=0.0),
            model=self.name, latency_s=time.monotonic() - started,
        )
