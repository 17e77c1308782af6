"""Constrained decoding of actions: an environment's action space as a JSON Schema.

In ``constrained`` decoding (:data:`~sharpen.core.agent_spec.Decoding`) a reply is one JSON
object ``{"tool": NAME, "arguments": {...}}`` valid against :func:`action_schema`: the tool is
one of the environment's (a ``const`` per tool, ``anyOf`` over several), its arguments are valid
for that tool's schema (closed: no argument the tool does not declare), enums stay enums
(gridsafety's moves), and where the environment lists the admissible values of its one
free-text argument (``info["admissible"]``, as textworld does for its commands) that argument
is an enum of them. Where the environment takes code (its one text-argument tool, a string
with no enum and no ``text_hint`` — the text protocol's default, a ```python block), the reply
may instead be that code in one fenced block, as the text protocol reads it: a small model
writes code far better in a ``` block than inside a JSON string. Short answers (a query, a
command, a number) stay JSON: fenced, the embedded model rambled inside the block until
``max_tokens`` cut it (``benchmarks/results/constrained_decoding.md``). A model that
constrains sampling (``local``: a llama.cpp grammar) can then only write valid actions; on
others the same schema validates the reply after the fact (a server is sent the JSON form
alone).
"""

from __future__ import annotations

import json
from copy import deepcopy
from typing import Any, Literal

from sharpen.agents.text_protocol import protocol_instructions
from sharpen.core.agent_spec import Decoding
from sharpen.core.messages import ToolSpec
from sharpen.core.trajectory import Action
from sharpen.models.base import ChatModel
from sharpen.models.structured import ResponseSchema, structured_output

ADMISSIBLE = "admissible"
"""The ``info`` key under which an environment may list every admissible value of its one
free-text tool argument (a list of strings); constrained decoding makes it an enum."""

Resolved = Literal["free", "constrained"]


def resolve_decoding(decoding: Decoding, model: ChatModel) -> Resolved:
    """What ``decoding`` means for ``model``: ``auto`` is ``constrained`` exactly when the
    model constrains sampling in-process (``structured_output == "grammar"``)."""
    if decoding == "auto":
        return "constrained" if structured_output(model) == "grammar" else "free"
    return decoding


def decoding_label(decoding: Decoding, model: ChatModel) -> str:
    """How replies are decoded, for the run manifest: ``free``, or ``constrained (MODE)`` with
    the model's :data:`~sharpen.models.structured.StructuredOutput` mode."""
    resolved = resolve_decoding(decoding, model)
    return resolved if resolved == "free" else f"constrained ({structured_output(model)})"


def _arguments(tool: ToolSpec, admissible: list[str] | None) -> dict[str, Any]:
    schema = deepcopy(tool.parameters) or {"type": "object"}
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    schema.setdefault("additionalProperties", False)  # a closed object: no invented arguments
    arg = tool.text_argument
    if admissible and arg and arg in schema["properties"]:
        prop = {k: v for k, v in schema["properties"][arg].items() if k in ("description", "title")}
        schema["properties"][arg] = {**prop, "enum": list(dict.fromkeys(admissible))}
    return schema


def free_text_tool(tools: list[ToolSpec], admissible: list[str] | None = None) -> ToolSpec | None:
    """The tool whose answer may come as a fenced block: the one text-argument tool, when its
    argument is code (no ``text_hint``), a string with no enum, and the environment lists no
    admissible values."""
    text_tools = [t for t in tools if t.text_argument]
    if len(text_tools) != 1 or admissible or text_tools[0].text_hint is not None:
        return None
    tool = text_tools[0]
    prop = tool.parameters.get("properties", {}).get(tool.text_argument, {})
    return tool if prop.get("type") == "string" and "enum" not in prop else None


def action_schema(tools: list[ToolSpec], admissible: list[str] | None = None) -> ResponseSchema:
    """The schema of one action on ``tools``; ``admissible`` (the environment's
    ``info["admissible"]``) restricts the free-text argument of the one tool that has one, and
    ``fenced`` is set when :func:`free_text_tool` finds one."""
    text_tools = [t for t in tools if t.text_argument]
    variants = []
    for tool in tools:
        allowed = admissible if len(text_tools) == 1 and tool is text_tools[0] else None
        variants.append({
            "type": "object",
            "properties": {"tool": {"const": tool.name}, "arguments": _arguments(tool, allowed)},
            "required": ["tool", "arguments"],
            "additionalProperties": False,
        })
    schema = variants[0] if len(variants) == 1 else {"anyOf": variants}
    # Not strict: an environment's tool schema may say more than a backend can enforce (an
    # integer's bounds, for the embedded model's grammar); the rest is checked on the reply.
    return ResponseSchema.of(schema, name="action", strict=False,
                             fenced=free_text_tool(tools, admissible) is not None)


def admissible_of(info: dict[str, Any]) -> list[str] | None:
    """``info["admissible"]`` when it is a non-empty list of strings, else ``None``."""
    values = info.get(ADMISSIBLE)
    if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
        return values
    return None


def instructions(tools: list[ToolSpec], admissible: list[str] | None = None) -> str:
    """How to act in constrained decoding, for the system prompt: the text protocol's words
    where a fenced answer is allowed (:func:`free_text_tool`), else JSON only."""
    if free_text_tool(tools, admissible) is not None:
        return protocol_instructions(tools)
    lines = ['Reply with one JSON object {"tool": NAME, "arguments": {...}} and nothing else. Tools:']
    for t in tools:
        lines.append(f"- {t.name}: {t.description} Arguments schema: {json.dumps(t.parameters)}")
    return "\n".join(lines)


def to_action(value: dict[str, Any]) -> Action:
    """The action of a reply already validated against :func:`action_schema`."""
    return Action(tool=str(value["tool"]), arguments=dict(value["arguments"]))
