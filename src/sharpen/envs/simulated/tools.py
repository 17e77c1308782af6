"""A simulated tool: a chat model answering a tool call from the tool's schemas and the task.

After Gecko and Simia: instead of running a tool, a :class:`ToolSimulator` shows a model the
tool's name, description and JSON Schema of its parameters (and of its result, when the
environment knows it), the task the agent is working on, and the calls answered so far, and
asks for the result as JSON. It lets an agent practise against tools nobody implemented, or
against a real environment's tools without touching their backend.

Contract:

- **Result**: a JSON value. With a result schema it is asked for through
  :func:`~sharpen.models.structured.complete_structured` as that schema *or* an error object
  ``{"error": "<why>"}`` (:data:`ERROR_RESULT`: a call the simulated tool refuses); without
  one, as any JSON object or array. The value is validated whatever the backend; a reply
  that is not valid after one re-ask, or a model that raises, raises :class:`ToolSimError`:
  an environment ends the episode with ``error_kind="user_sim"`` (the simulator failed, not
  the agent). A :class:`~sharpen.core.errors.UserError` of the model (a configuration
  mistake) propagates.
- **Consistency**: the simulator keeps the conversation of its calls and results (the last
  :attr:`ToolSimulator.history` of them are sent with each call), so a later result can agree
  with an earlier one; nothing else ties it to a real world.
- **Determinism**: sampling params default to temperature 0, and ``seed`` is added: the same
  calls in the same order give the same results from a deterministic model.
- **Versions**: the prompt is a constant per version (:data:`TOOL_PROMPTS`); its id
  (``tool-sim/1``) is what an environment records, so a changed prompt is never confused
  with a changed agent.

What to trust: a simulated result is plausible, not true. An environment that still has a
real world (toolshop) can score on it; one that has none can only judge the trajectory.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sharpen.core.errors import UserError
from sharpen.core.messages import Message, ToolSpec
from sharpen.models.base import ChatModel
from sharpen.models.structured import ResponseSchema, complete_structured

ERROR_RESULT: dict[str, Any] = {
    "type": "object", "properties": {"error": {"type": "string", "minLength": 1, "maxLength": 200}},
    "required": ["error"], "additionalProperties": False,
}
"""The result of a call the simulated tool refuses."""

ANY_RESULT: dict[str, Any] = {"anyOf": [{"type": "object"}, {"type": "array"}]}
"""The result of a tool whose result schema is not known."""

DEFAULT_PARAMS: dict[str, Any] = {"temperature": 0.0, "max_tokens": 384}


class ToolSimError(RuntimeError):
    """The tool simulator gave no usable result (an environment maps it to ``user_sim``)."""


@dataclass(frozen=True)
class ToolPrompt:
    """A versioned prompt: ``system`` (fields ``{task}``, ``{world}``) and ``call`` (fields
    ``{name}``, ``{description}``, ``{parameters}``, ``{result}``, ``{arguments}``,
    ``{context}``)."""

    version: str
    system: str
    call: str

    @property
    def id(self) -> str:
        """``tool-sim/<version>``: recorded with every simulated call."""
        return f"tool-sim/{self.version}"


TOOL_PROMPTS: dict[str, ToolPrompt] = {
    "1": ToolPrompt("1", system=(
        "You simulate the tools of a software system. You are the tools, never the agent: "
        "each message is one call of a tool, and you reply with only the tool's result as "
        "JSON.\n\nThe agent's task:\n{task}\n{world}\n"
        "Rules:\n"
        "- Give a realistic result that follows the tool's description and result schema.\n"
        "- Stay consistent with every earlier result: the same ids, names and values.\n"
        "- Use the values the call and the task give; invent only what they leave open.\n"
        '- When the call cannot succeed (what it names does not exist, a rule forbids it), '
        'reply {{"error": "<why, in one sentence>"}}.'
    ), call=(
        "{context}Tool: {name}\nDescription: {description}\nParameters schema: {parameters}\n"
        "Result schema: {result}\nCall: {name}({arguments})"
    )),
}
"""Prompts of the tool simulator, by version."""


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class ToolSimulator:
    """Answers calls of ``tools`` for an agent working on ``task`` (see the module doc).

    ``results`` maps a tool name to the JSON Schema of its result (tools not in it get
    :data:`ANY_RESULT`); ``world`` is optional background the prompt shows after the task
    (what the simulated system holds); ``params`` the model's sampling params (default
    :data:`DEFAULT_PARAMS`; ``seed`` is added); ``history`` how many earlier calls and
    results are sent with each call."""

    def __init__(self, model: ChatModel, task: str, tools: Sequence[ToolSpec],
                 results: Mapping[str, dict[str, Any]] | None = None, version: str = "1",
                 params: dict[str, Any] | None = None, seed: int = 0, world: str = "",
                 history: int = 4) -> None:
        if version not in TOOL_PROMPTS:
            raise UserError(f"unknown tool_sim_version {version!r}",
                            f"use one of {', '.join(map(repr, TOOL_PROMPTS))}")
        self.model = model
        self.prompt = TOOL_PROMPTS[version]
        self.tools = {t.name: t for t in tools}
        self.results = dict(results or {})
        self.params = {**(DEFAULT_PARAMS if params is None else params), "seed": seed}
        self.history = history
        background = f"\nWhat the system holds:\n{world}\n" if world else ""
        self.system = Message(role="system",
                              content=self.prompt.system.format(task=task, world=background))
        self.exchanges: list[tuple[Message, Message]] = []
        """Every call answered so far: the call message and the result as sent back."""

    def schema(self, name: str) -> ResponseSchema:
        """What a result of ``name`` must be: its result schema or :data:`ERROR_RESULT`
        (lax: a grammar constrains what it can, the reply is validated in full)."""
        result = self.results.get(name)
        schema = ANY_RESULT if result is None else {"anyOf": [result, ERROR_RESULT]}
        return ResponseSchema.of(schema, name=f"{name}_result", strict=False)

    def _call_message(self, tool: ToolSpec, arguments: dict[str, Any], context: str) -> Message:
        result = self.results.get(tool.name)
        shown = ("unknown: any JSON object or array" if result is None
                 else f"{_compact(result)}, or {_compact(ERROR_RESULT)}")
        return Message(role="user", content=self.prompt.call.format(
            context=f"{context.strip()}\n\n" if context.strip() else "", name=tool.name,
            description=tool.description, parameters=_compact(tool.parameters), result=shown,
            arguments=_compact(arguments)))

    async def answer(self, name: str, arguments: dict[str, Any], context: str = "") -> Any:
        """The simulated result of ``name(arguments)`` (a JSON value; ``{"error": ...}`` for
        a refused call); ``context`` is what happened since the last call (a user's words),
        shown before it. :class:`ToolSimError` when no valid result comes; ``KeyError`` for a
        tool it was not given."""
        tool = self.tools[name]
        call = self._call_message(tool, arguments, context)
        recent = [m for pair in self.exchanges[-self.history:] if self.history > 0 for m in pair]
        schema = self.schema(name)
        try:
            reply = await complete_structured(self.model, [self.system, *recent, call], schema,
                                              self.params)
        except UserError:
            raise
        except Exception as exc:  # any model failure is the simulator's, not the agent's
            raise ToolSimError(f"tool simulator {self.prompt.id} failed on {name}: model error: "
                               f"{type(exc).__name__}: {str(exc)[:300]}") from exc
        if not reply.ok:
            raise ToolSimError(f"tool simulator {self.prompt.id} gave no valid result for {name} "
                               f"in {reply.attempts} tries: {reply.error}")
        self.exchanges.append((call, Message(role="assistant", content=_compact(reply.value))))
        return reply.value


def is_error(value: Any) -> bool:
    """Whether a simulated result is a refusal (:data:`ERROR_RESULT`)."""
    return isinstance(value, dict) and set(value) == {"error"} and isinstance(value["error"], str)
