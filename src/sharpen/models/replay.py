"""ReplayModel — sharpen's one test double: a record/replay ChatModel.

In ``record`` mode it forwards each request to a real model (``inner``, a ``{name, args}``
ref) and appends one JSON line per call to a cassette file::

    {"key": "<content hash>", "request": {"messages", "tools", "params"[, "response_schema"]},
     "completion": {...}, "model": {"name", "supports_tools", "structured_output"}}

In ``replay`` mode it answers from the cassette alone — no real model is built or loaded.
The key is :func:`~sharpen.core.hashing.content_hash` of the request (messages, tools,
params, and the response schema when there is one — so cassettes recorded before structured
output keep their keys), so a replay answers exactly the requests that were recorded; any other request
raises :class:`CassetteMissError` saying how to re-record. When a key was recorded more than
once, the last line wins.

Replay is meant to measure harness overhead: the cassette is read once into a dict, and a
call costs one hash plus one validated copy (tens of microseconds).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from sharpen.core.errors import UserError
from sharpen.core.hashing import content_hash
from sharpen.core.messages import Message, ToolSpec
from sharpen.core.registry import REGISTRY, PluginRef, register
from sharpen.models.base import MODEL, ChatModel, Completion, complete_with
from sharpen.models.structured import STRUCTURED_OUTPUTS, ResponseSchema, StructuredOutput
from sharpen.models.structured import structured_output as structured_of


class CassetteMissError(UserError):
    """A replayed request has no recording in the cassette (the agent, prompt or params
    changed since it was recorded). Not an infrastructure failure: retrying cannot help."""


def request_key(
    messages: list[Message], tools: list[ToolSpec] | None, params: dict[str, Any] | None,
    response_schema: ResponseSchema | None = None,
) -> str:
    """The cassette key of a request: content hash of its messages, tools, params and
    response schema (left out when there is none)."""
    return content_hash(_request(messages, tools, params, response_schema))


def _request(
    messages: list[Message], tools: list[ToolSpec] | None, params: dict[str, Any] | None,
    response_schema: ResponseSchema | None = None,
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "messages": [m.model_dump(mode="json") for m in messages],
        "tools": [t.model_dump(mode="json") for t in tools] if tools else None,
        "params": params or {},
    }
    if response_schema is not None:
        # Defaults left out, so that a field added with its default keeps recorded keys.
        request["response_schema"] = response_schema.model_dump(mode="json", by_alias=True,
                                                                exclude_defaults=True)
    return request


@register("model", "replay")
class ReplayModel:
    """Record/replay test double for any ChatModel (see the module docstring).

    Args: ``cassette`` (JSONL path), ``mode`` (``"replay"`` or ``"record"``), ``inner``
    (``{name, args}`` of the real model; required to record), ``name`` (default: the
    recorded model's name, else ``"replay"``), ``latency_s`` (report this latency instead of
    the recorded one, e.g. ``0``), ``supports_tools`` and ``structured_output`` (default: the
    recorded model's; ``validate`` for a cassette recorded before structured output)."""

    def __init__(
        self,
        cassette: str,
        mode: Literal["replay", "record"] = "replay",
        inner: dict[str, Any] | None = None,
        name: str | None = None,
        latency_s: float | None = None,
        supports_tools: bool | None = None,
        structured_output: StructuredOutput | None = None,
    ) -> None:
        if mode not in ("replay", "record"):
            raise UserError(f"replay model: unknown mode {mode!r}", "use mode replay or record")
        self.cassette = Path(cassette)
        self.mode = mode
        self.inner_ref = PluginRef.model_validate(inner) if inner is not None else None
        self.latency_s = latency_s
        self._inner: ChatModel | None = None
        self._entries: dict[str, str] = {}  # key -> completion JSON (validated on each hit)
        recorded: dict[str, Any] = {}
        if self.cassette.exists():
            recorded = self._load()
        elif mode == "replay":
            raise UserError(
                f"cassette {self.cassette} does not exist",
                "record it first: model replay with mode=record and inner={name, args} of a "
                "real model",
            )
        if mode == "record":
            if self.inner_ref is None:
                raise UserError(
                    "replay model in record mode needs inner={name, args} of a real model",
                    "e.g. inner: {name: local}",
                )
            self._inner = REGISTRY.create(MODEL, self.inner_ref)
            recorded = {
                "name": self._inner.name,
                "supports_tools": self._inner.supports_tools,
                "structured_output": structured_of(self._inner),
            }
        self.name = name or recorded.get("name") or "replay"
        self.supports_tools = (
            supports_tools if supports_tools is not None
            else bool(recorded.get("supports_tools", False))
        )
        structured = structured_output or recorded.get("structured_output", "validate")
        if structured not in STRUCTURED_OUTPUTS:
            raise UserError(f"replay model: structured_output={structured!r}",
                            f"use one of {', '.join(STRUCTURED_OUTPUTS)}")
        self.structured_output: StructuredOutput = structured

    def _load(self) -> dict[str, Any]:
        """Read the cassette into ``_entries``; returns the last line's ``model`` info."""
        model: dict[str, Any] = {}
        with self.cassette.open(encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                    self._entries[rec["key"]] = json.dumps(rec["completion"])
                except (ValueError, KeyError, TypeError):
                    raise UserError(
                        f"cassette {self.cassette} line {lineno} is not a recording",
                        "re-record the cassette (mode=record)",
                    ) from None
                model = rec.get("model") or model
        return model

    def __len__(self) -> int:
        """Number of distinct recorded requests."""
        return len(self._entries)

    async def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        params: dict[str, Any] | None = None,
        *,
        response_schema: ResponseSchema | None = None,
    ) -> Completion:
        """Replay: the recorded completion for this exact request, or
        :class:`CassetteMissError`. Record: the inner model's completion, appended to the
        cassette. Errors of the inner model propagate and are not recorded."""
        request = _request(messages, tools, params, response_schema)
        key = content_hash(request)
        if self.mode == "replay":
            hit = self._entries.get(key)
            if hit is None:
                raise CassetteMissError(
                    f"cassette {self.cassette} has no recording for this request (key {key}); "
                    "the prompt, tools or params differ from the recorded run",
                    "re-record it: run the same agent with model replay, mode=record and "
                    f"inner={{name, args}} of the real model, writing to {self.cassette}",
                )
            completion = Completion.model_validate_json(hit)
            if self.latency_s is not None:
                completion.latency_s = self.latency_s
            return completion
        assert self._inner is not None
        completion = await complete_with(self._inner, messages, tools, params, response_schema)
        line = json.dumps(
            {
                "key": key,
                "request": request,
                "completion": completion.model_dump(mode="json"),
                "model": {"name": self.name, "supports_tools": self.supports_tools,
                          "structured_output": self.structured_output},
            },
            ensure_ascii=False,
        )
        self.cassette.parent.mkdir(parents=True, exist_ok=True)
        with self.cassette.open("a", encoding="utf-8") as f:  # one write per line: atomic enough
            f.write(line + "\n")
        self._entries[key] = json.dumps(completion.model_dump(mode="json"))
        if self.latency_s is not None:
            completion = completion.model_copy(update={"latency_s": self.latency_s})
        return completion

    async def aclose(self) -> None:
        """Close the inner model, if any."""
        if self._inner is not None:
            await self._inner.aclose()
