"""The text protocol: how a model without native tool calls acts.

Small local models cannot emit reliable JSON tool calls, but even a 135M model writes fenced
code blocks. So a plain-text reply is read, in order, as:

1. a JSON object ``{"tool": NAME, "arguments": {...}}`` (fenced or bare) naming a known tool;
2. a fenced code block, which fills the ``text_argument`` of the one tool that declares one
   (for the code environment: ``submit(code=...)``); the first block that defines a function
   wins, otherwise the first block;
3. unfenced code: from the first line starting with ``def``/``class``/``import``/``from`` to
   the end, for the same tool.

Anything else is an invalid action; :func:`parse_text_action` explains why, and the agent
sends that explanation back to the model as feedback.
"""

from __future__ import annotations

import json
import re

from sharpen.core.markdown import code_blocks
from sharpen.core.messages import ToolSpec
from sharpen.core.trajectory import Action

_CODE_START = re.compile(r"^(def |class |import |from |async def |@)", re.MULTILINE)
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


class ParseError(ValueError):
    """The reply holds no valid action; the message is feedback for the model."""


def protocol_instructions(tools: list[ToolSpec]) -> str:
    """How to act, for the system prompt of a model that uses the text protocol."""
    text_tools = [t for t in tools if t.text_argument]
    lines = []
    if len(text_tools) == 1:
        tool = text_tools[0]
        how = tool.text_hint or "To answer, reply with the complete code in one ```python code block"
        lines.append(f"{how}; it is passed to `{tool.name}` as `{tool.text_argument}`.")
    others = [t for t in tools if t not in text_tools or len(text_tools) != 1]
    if others:
        lines.append(
            'To call a tool, reply with a JSON object {"tool": NAME, "arguments": {...}}. Tools:'
        )
        for t in others:
            lines.append(f"- {t.name}: {t.description} Arguments schema: {json.dumps(t.parameters)}")
    return "\n".join(lines)


def _json_action(text: str, tools: dict[str, ToolSpec]) -> Action | None:
    candidates = [b.body for b in code_blocks(text) if b.closed and b.lang in ("json", "")]
    match = _JSON_OBJECT.search(text)
    if match:
        candidates.append(match.group(0))
    for raw in candidates:
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and isinstance(obj.get("tool"), str) and obj["tool"] in tools:
            args = obj.get("arguments", {})
            if not isinstance(args, dict):
                raise ParseError(f'"arguments" for tool {obj["tool"]!r} must be a JSON object.')
            return Action(tool=obj["tool"], arguments=args)
    return None


def parse_text_action(text: str, tools: list[ToolSpec], *, cut_off: bool = False) -> Action:
    """Read one action from a plain-text reply, or raise :class:`ParseError` with feedback.

    ``cut_off`` says the reply stopped at the token limit; an unclosed code block is then
    reported as cut off rather than guessed at.
    """
    by_name = {t.name: t for t in tools}
    action = _json_action(text, by_name)
    if action is not None:
        return action
    text_tools = [t for t in tools if t.text_argument]
    if len(text_tools) != 1:
        raise ParseError(
            'No tool call found. Reply with a JSON object {"tool": NAME, "arguments": {...}} '
            f"using one of: {', '.join(by_name)}."
        )
    tool = text_tools[0]
    assert tool.text_argument is not None
    found = [b for b in code_blocks(text) if b.lang != "json"]
    blocks = [b.body for b in found if b.closed]
    if blocks:
        with_def = [b for b in blocks if _CODE_START.search(b)]
        code = (with_def or blocks)[0]
        if code.strip():
            return Action(tool=tool.name, arguments={tool.text_argument: code})
    elif found:  # only an unclosed fence
        if cut_off:
            if tool.text_hint:  # the fix in the environment's words: it wants no code
                raise ParseError("Your reply was cut off before its ``` block was closed. "
                                 f"{tool.text_hint}, and nothing else.")
            raise ParseError(
                "Your reply was cut off before the code block was closed. "
                "Write shorter code, without explanations."
            )
        # An unclosed fence at a natural stop: take everything after it.
        if found[-1].body.strip():
            return Action(tool=tool.name, arguments={tool.text_argument: found[-1].body})
    start = _CODE_START.search(text)
    if start:
        return Action(tool=tool.name, arguments={tool.text_argument: text[start.start():]})
    if tool.text_hint:  # environments that want something other than code say what
        raise ParseError(f"No answer for `{tool.name}` found in your reply. {tool.text_hint}.")
    raise ParseError(
        "No code found in your reply. Reply with the complete function in a ```python code block."
    )
