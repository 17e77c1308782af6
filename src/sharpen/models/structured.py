"""Structured output: replies that must be JSON valid against a schema.

A caller that needs a reply it can parse — an agent's action, a proposer's edit, a judge's
verdict, a simulated user's move — describes it as a :class:`ResponseSchema` (a JSON Schema, or
a pydantic model) and calls :func:`complete_structured`. How the schema is honoured is the
backend's capability, :data:`StructuredOutput`, read with :func:`structured_output`:

``grammar``
    sampling is constrained in-process: only tokens that keep the reply valid can be drawn
    (``local``: the schema compiled to a llama.cpp grammar, cached by schema hash).
``server``
    the endpoint constrains it (``openai``: ``response_format`` with the schema).
``validate``
    nothing constrains sampling: the reply is parsed and validated after the fact, and the
    model is asked once more with the validation error (the default for plug-in models that
    do not declare the capability).

Whatever the mode, every reply is validated here (``jsonschema``), so a constrained backend
that lets an invalid reply through — one cut at ``max_tokens``, say — is caught, never trusted.
A schema a backend cannot honour raises :class:`UnsupportedSchema` (a ``UserError`` naming what
to drop) before any call: never a silent fallback to free text.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import jsonschema
from pydantic import BaseModel, ConfigDict, Field

from sharpen.core.errors import UserError
from sharpen.core.hashing import content_hash
from sharpen.core.messages import Message, Usage
from sharpen.models.base import ChatModel, Completion, complete_with

StructuredOutput = Literal["grammar", "server", "validate"]
"""How a backend honours a response schema (see the module docstring)."""

STRUCTURED_OUTPUTS: tuple[StructuredOutput, ...] = ("grammar", "server", "validate")


class StructuredOutputError(ValueError):
    """A reply that is not JSON valid against the schema; the message is feedback a model can
    act on (it names the path and what was wrong)."""


class UnsupportedSchema(UserError):
    """The backend cannot constrain decoding to this schema."""


class ResponseSchema(BaseModel):
    """A JSON Schema a reply must satisfy, with a name (OpenAI's ``json_schema.name``: letters,
    digits, ``_`` and ``-``). Immutable; :meth:`hash` identifies it in caches and cassettes."""

    model_config = ConfigDict(frozen=True)

    name: str = "response"
    """Short identifier of what the reply is (``action``, ``edit``, ``verdict``)."""
    json_schema: dict[str, Any] = Field(alias="schema")
    """The JSON Schema (Draft 2020-12)."""
    strict: bool = True
    """A backend that cannot enforce some keyword of the schema refuses it
    (:class:`UnsupportedSchema`); with ``False`` it constrains what it can and leaves the rest
    to the validation every reply gets — for schemas the caller does not write, such as an
    environment's tool arguments in an agent's action schema."""
    fenced: bool = False
    """A reply may instead be one fenced block of free text (```` ```lang\n...\n``` ````): how
    a small model writes code best. Only a ``grammar`` backend constrains to that alternative
    (a server is sent the JSON Schema alone); :meth:`parse` reads JSON only, so a caller that
    sets it reads fenced replies itself (the tool agent, through the text protocol)."""

    @classmethod
    def of(cls, schema: dict[str, Any] | type[BaseModel] | ResponseSchema,
           name: str | None = None, *, strict: bool = True, fenced: bool = False) -> ResponseSchema:
        """A ResponseSchema from a JSON Schema dict, a pydantic model class (its
        ``model_json_schema()``) or another ResponseSchema (renamed when ``name`` is given).
        :class:`UserError` for a schema that is not a valid JSON Schema."""
        if isinstance(schema, ResponseSchema):
            return schema if name is None else schema.model_copy(update={"name": name})
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            return cls(name=name or schema.__name__, schema=schema.model_json_schema(),
                       strict=strict, fenced=fenced)
        if not isinstance(schema, dict):
            raise UserError(f"response schema must be a JSON Schema object, got {type(schema).__name__}",
                            "pass a dict such as {'type': 'object', ...} or a pydantic model class")
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise UserError(f"response schema is not a valid JSON Schema: {exc.message}",
                            "fix the schema (Draft 2020-12)") from None
        return cls(name=name or "response", schema=schema, strict=strict, fenced=fenced)

    def hash(self) -> str:
        """Content hash of what constrains the reply: the schema, and the fenced alternative
        when there is one (not the name)."""
        return content_hash({"schema": self.json_schema, "fenced": True} if self.fenced
                            else self.json_schema)

    def parse(self, text: str) -> Any:
        """The JSON value of ``text`` if it is valid against the schema; else
        :class:`StructuredOutputError` saying where and why."""
        try:
            value = json.loads(text)
        except (ValueError, RecursionError) as exc:
            shown = text.strip()[:80] or "(empty)"
            raise StructuredOutputError(f"The reply is not valid JSON ({exc}): {shown!r}") from None
        validator = jsonschema.Draft202012Validator(self.json_schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
            raise StructuredOutputError(f"The reply does not match the schema at {where}: "
                                        f"{error.message[:300]}")
        return value

    def instructions(self) -> str:
        """The schema as an instruction, for a model nothing constrains."""
        return ("Reply with only one JSON object, valid against this JSON Schema, and nothing "
                f"else:\n{json.dumps(self.json_schema, separators=(',', ':'))}")


def structured_output(model: ChatModel) -> StructuredOutput:
    """The model's :data:`StructuredOutput` capability: its ``structured_output`` attribute,
    ``validate`` when it declares none (an optional member, so that plug-in models written
    before structured output keep working unchanged)."""
    mode = getattr(model, "structured_output", "validate")
    return mode if mode in STRUCTURED_OUTPUTS else "validate"


class StructuredReply(BaseModel):
    """What :func:`complete_structured` returns: the parsed value, or the reason there is none."""

    value: Any = None
    """The parsed, validated JSON value; ``None`` when every attempt failed (see ``error``)."""
    error: str | None = None
    """Why the last attempt was not valid; ``None`` on success."""
    completion: Completion
    """The last attempt's completion."""
    usage: Usage
    """Usage summed over every attempt."""
    attempts: int
    """Model calls made (1 + re-asks)."""
    mode: StructuredOutput
    """How the schema was honoured."""

    @property
    def ok(self) -> bool:
        """Whether ``value`` holds a valid reply."""
        return self.error is None


REASK = "Your reply was not valid: {error}\nReply again with only the corrected JSON object."


async def complete_structured(
    model: ChatModel,
    messages: list[Message],
    schema: ResponseSchema | dict[str, Any] | type[BaseModel],
    params: dict[str, Any] | None = None,
    *,
    reasks: int = 1,
) -> StructuredReply:
    """The model's reply to ``messages`` as JSON valid against ``schema``.

    A backend that constrains (``grammar``, ``server``) gets the schema with the call; one that
    does not (``validate``) gets it as an instruction appended to the conversation. Either way
    the reply is validated, and an invalid one is answered with the validation error and asked
    again, up to ``reasks`` times (a reply cut at ``max_tokens`` is not: the same budget would
    cut it again). The result says what happened; it never raises for an invalid reply, only
    for the backend's own errors (``InfraError``, ``UserError`` — :class:`UnsupportedSchema`
    among them)."""
    rs = ResponseSchema.of(schema)
    mode = structured_output(model)
    conversation = list(messages)
    if mode == "validate":
        conversation.append(Message(role="user", content=rs.instructions()))
    usage = Usage()
    attempts = 0
    while True:
        completion = await complete_with(model, conversation, None, params,
                                         None if mode == "validate" else rs)
        attempts += 1
        usage = usage + completion.usage
        text = completion.message.content or ""
        try:
            value = rs.parse(text)
        except StructuredOutputError as exc:
            error = str(exc)
            if completion.finish_reason == "length":
                error = f"The reply was cut at max_tokens before it was complete. {error}"
            if attempts > reasks or completion.finish_reason == "length":
                return StructuredReply(error=error, completion=completion, usage=usage,
                                       attempts=attempts, mode=mode)
            conversation += [completion.message,
                             Message(role="user", content=REASK.format(error=error))]
            continue
        return StructuredReply(value=value, completion=completion, usage=usage,
                               attempts=attempts, mode=mode)
