"""``check_model``: does a model backend keep the :class:`~sharpen.models.base.ChatModel`
contract?

Checks:

- ``build`` — the registry builds it (the contract's members present);
- ``attributes`` — ``name`` is a non-empty str and ``supports_tools`` a bool;
- ``complete`` — one short request returns a :class:`~sharpen.models.base.Completion` with an
  assistant message, a known ``finish_reason`` and usage that is never negative;
- ``tools`` — when ``supports_tools``, a request offering one tool returns text or calls of
  that tool only, with arguments as a dict;
- ``structured`` — when its ``structured_output`` is ``grammar`` or ``server`` (it constrains
  decoding to a response schema), a request with a small nested schema gets a reply valid
  against it, through :func:`~sharpen.models.structured.complete_structured` without a re-ask;
  a ``validate`` model is noted, not checked;
- ``aclose`` — ``aclose()`` returns without raising.

The requests are real: the backend must be reachable (a server up, weights installed).
"""

from __future__ import annotations

import asyncio
from typing import Any, get_args

from sharpen.checks.agent import usage_fault
from sharpen.checks.report import CheckReport, explain, plugin_ref
from sharpen.core.errors import InfraError
from sharpen.core.messages import Message, ToolSpec
from sharpen.core.registry import REGISTRY, PluginRef, Registry
from sharpen.models.base import MODEL, ChatModel, Completion, FinishReason
from sharpen.models.structured import UnsupportedSchema, complete_structured, structured_output

PARAMS = {"temperature": 0.0, "max_tokens": 32}
"""Sampling parameters of the check's requests: short and greedy."""
PROBE_TOOL = ToolSpec(
    name="submit", description="Submit your answer.",
    parameters={"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
    text_argument="code",
)
"""The one tool offered by the ``tools`` check."""
CALL_SECONDS = 120.0
"""The most one checked request may take."""
PROBE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "word": {"type": "string", "maxLength": 12},
        "items": {"type": "array", "maxItems": 2, "items": {
            "type": "object",
            "properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"}},
            "required": ["n", "ok"], "additionalProperties": False}},
    },
    "required": ["word", "items"], "additionalProperties": False,
}
"""The nested schema of the ``structured`` check (every keyword one the embedded model's
grammar and OpenAI's strict mode both take)."""
STRUCTURED_PARAMS = {"temperature": 0.0, "max_tokens": 96}
"""Sampling parameters of the ``structured`` request: room for the longest short reply."""


def completion_faults(c: object) -> list[str]:
    """How ``c`` breaks the Completion contract (empty when it is fine)."""
    if not isinstance(c, Completion):
        return [f"complete() returned {type(c).__name__}, not Completion: return "
                "sharpen.models.base.Completion(message=Message(role='assistant', ...))"]
    out: list[str] = []
    if c.message.role != "assistant":
        out.append(f"the reply's role is {c.message.role!r}: the message must be role='assistant'")
    if c.finish_reason not in get_args(FinishReason):
        out.append(f"finish_reason {c.finish_reason!r} is not one of {', '.join(get_args(FinishReason))}")
    if (bad := usage_fault(c.usage)) is not None:
        out.append(f"usage is negative ({bad}): report the tokens the backend counted, or 0")
    return out


async def _complete(model: ChatModel, messages: list[Message],
                    tools: list[ToolSpec] | None) -> Completion:
    return await asyncio.wait_for(model.complete(messages, tools, dict(PARAMS)), CALL_SECONDS)


def _call_failed(r: CheckReport, check: str, exc: BaseException) -> None:
    if isinstance(exc, InfraError):
        r.fail(check, f"the backend failed: {exc}; check that it is reachable (server up, "
               "base_url right) and try again")
    elif isinstance(exc, TimeoutError):
        r.fail(check, f"no answer within {CALL_SECONDS:.0f} s")
    else:
        r.fail(check, f"complete() raised {explain(exc)}")


async def acheck_model(
    model: str | PluginRef | dict[str, Any], *, args: dict[str, Any] | None = None,
    registry: Registry = REGISTRY,
) -> CheckReport:
    """Check the model backend ``model`` (name, reference or ``{name, args}``; ``args``
    merged over its own) with short real requests (two, and a third with a response schema
    when the model constrains decoding). Never raises for a failed check."""
    ref = plugin_ref(model, args)
    r = CheckReport(kind="model", name=ref.name)
    try:
        chat = registry.create(MODEL, ref)
    except Exception as exc:  # noqa: BLE001 — every failure becomes a problem
        r.fail("build", f"cannot build the model: {explain(exc)}")
        return r
    r.pass_("build", f"{type(chat).__qualname__} meets the ChatModel contract")
    try:
        await _check(chat, r)
        if not r.failed("complete"):
            await _check_structured(chat, r)
    finally:
        try:
            await chat.aclose()
        except Exception as exc:  # noqa: BLE001
            r.fail("aclose", f"aclose() raised {explain(exc)}")
        else:
            r.pass_("aclose", "returns")
    return r


async def _check(chat: ChatModel, r: CheckReport) -> None:
    if not isinstance(chat.name, str) or not chat.name:
        r.fail("attributes", f"name is {chat.name!r}: set a non-empty str (used for pricing)")
    supports = chat.supports_tools
    if not isinstance(supports, bool):
        r.fail("attributes", f"supports_tools is {supports!r} ({type(supports).__name__}): make "
               "it True or False")
    if not r.failed("attributes"):
        r.pass_("attributes", f"name {chat.name!r}, supports_tools {supports}")
    try:
        reply = await _complete(chat, [Message(role="user", content="Reply with one word: hello.")],
                                None)
    except Exception as exc:  # noqa: BLE001
        _call_failed(r, "complete", exc)
        return
    faults = completion_faults(reply)
    for fault in faults:
        r.fail("complete", fault)
    if not faults:
        r.pass_("complete", f"assistant reply, finish_reason {reply.finish_reason!r}, "
                f"{reply.usage.input_tokens}+{reply.usage.output_tokens} tokens")
    if supports is not True:
        r.note("tools", "supports_tools is False: agents talk to it through the text protocol")
        return
    prompt = Message(role="user", content="Call the submit tool with code `x = 1`.")
    try:
        reply = await _complete(chat, [prompt], [PROBE_TOOL])
    except Exception as exc:  # noqa: BLE001
        _call_failed(r, "tools", exc)
        return
    faults = completion_faults(reply)
    if not faults:
        unknown = sorted({c.name for c in reply.message.tool_calls} - {PROBE_TOOL.name})
        if unknown:
            faults.append(f"the reply calls {unknown}, a tool it was not offered (only "
                          f"{PROBE_TOOL.name!r}): return only calls of the tools given")
        if reply.finish_reason == "tool_calls" and not reply.message.tool_calls:
            faults.append("finish_reason is 'tool_calls' but the message holds no tool call")
    for fault in faults:
        r.fail("tools", fault)
    if not faults:
        what = f"{len(reply.message.tool_calls)} call(s) of {PROBE_TOOL.name!r}" \
            if reply.message.tool_calls else "text"
        r.pass_("tools", f"with one tool offered, the reply is {what}")


async def _check_structured(chat: ChatModel, r: CheckReport) -> None:
    mode = structured_output(chat)
    if mode == "validate":
        r.note("structured", "structured_output is 'validate': decoding is not constrained, "
               "replies are validated after the fact (declare 'grammar' or 'server' and honour "
               "response_schema if the backend can constrain)")
        return
    prompt = Message(role="user", content="Reply with a word and two items as JSON.")
    try:
        reply = await asyncio.wait_for(
            complete_structured(chat, [prompt], PROBE_SCHEMA, dict(STRUCTURED_PARAMS), reasks=0),
            CALL_SECONDS)
    except UnsupportedSchema as exc:
        r.fail("structured", f"structured_output is {mode!r}, yet the backend refused a small "
               f"nested schema: {exc}")
        return
    except Exception as exc:  # noqa: BLE001
        _call_failed(r, "structured", exc)
        return
    if not reply.ok:
        r.fail("structured", f"structured_output is {mode!r}, yet the reply to a request with a "
               f"response_schema is not valid against it: {reply.error} — constrain decoding "
               "to response_schema, or declare structured_output 'validate' (for openai: "
               "set structured to what the server speaks, or none)")
        return
    r.pass_("structured", f"mode {mode!r}: a constrained reply is valid against a nested schema "
            f"({reply.usage.output_tokens} tokens)")


def check_model(
    model: str | PluginRef | dict[str, Any], *, args: dict[str, Any] | None = None,
    registry: Registry = REGISTRY,
) -> CheckReport:
    """:func:`acheck_model` from synchronous code."""
    return asyncio.run(acheck_model(model, args=args, registry=registry))
