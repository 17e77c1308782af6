"""The simulated customer: a chat model playing the customer, with a versioned prompt.

The customer knows the task's instruction (the goal and private facts: name, zip code,
email, which orders); the agent only gets the customer's first message and asks through
``respond``. The prompt is a constant per version (:data:`USER_PROMPTS`); its id
``toolshop-user/<version>`` goes into the task metadata, the step info and the outcome
evidence, so a changed prompt is never confused with a changed agent.

The conversation, seen from the simulator: its system prompt, then the agent's words as
``user`` messages (the first is :data:`OPENING`) and its own replies as ``assistant``
messages. A reply ending in ``###STOP###`` ends the conversation.

How a reply is read depends on the model's
:func:`~sharpen.models.structured.structured_output`. A model that constrains decoding
(``grammar``: the embedded model; ``server``: a constraining endpoint) is asked, through
:func:`~sharpen.models.structured.complete_structured`, for :data:`REPLY_SCHEMA` —
``{"message": <at most MAX_STRUCTURED_CHARS characters>, "done": <bool>}`` — so the
reply is bounded and the end of the conversation is a field, not a marker to spell right
(a message ending in ``###STOP###`` also ends it: the prompt, shared by both readings, asks
for the marker); its JSON is what the simulator's conversation keeps. Any other model's
reply is free text, read as above. Measured on the embedded model
(``benchmarks/results/sim_parsing.md``, 30 turns): 8 unusable turns with the grammar, 13 as
text (no parroting of the agent with the grammar; loops in both), at 1.7× the output
tokens; asked for JSON without a grammar, 12 of 12 turns were unusable.

:func:`check_reply` labels a reply the simulator got wrong — empty, far too long, a
parrot of the agent's message (the simulator playing the agent), one sentence said three
times or more (a degenerate loop), lines of its own prompt leaked, ``###STOP###`` in the
first message or anywhere but the end, or a mangled stop marker — as does a constrained
model's reply with no valid JSON after the re-ask, and a model that raises (other than a
:class:`~sharpen.core.errors.UserError`, which is a configuration mistake and stops the
run) fails the same way. Such a failure ends the episode with ``error_kind="user_sim"``: it
is never the agent's fault.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from sharpen.core.errors import UserError
from sharpen.core.messages import Message
from sharpen.models.base import ChatModel
from sharpen.models.structured import ResponseSchema, complete_structured, structured_output

STOP = "###STOP###"
OPENING = "Hello! How can I help you today?"
MAX_REPLY_CHARS = 1500
REPEATS = 3
"""A reply that says one sentence this many times is degenerate."""
MAX_STRUCTURED_CHARS = 300
"""Longest ``message`` of a structured reply: two short sentences with room to spare, and
short enough that the default 128 tokens close the JSON."""

REPLY_SCHEMA = ResponseSchema.of({
    "type": "object",
    "properties": {"message": {"type": "string", "maxLength": MAX_STRUCTURED_CHARS},
                   "done": {"type": "boolean"}},
    "required": ["message", "done"], "additionalProperties": False,
}, name="customer_reply")
"""A customer's reply, for a model that constrains decoding: what it says, and whether the
conversation is over (``###STOP###`` of the text reading)."""

USER_PROMPTS: dict[str, str] = {
    "1": (
        "You are a customer of an online shop, chatting with the shop's support agent. You "
        "are the customer, never the agent.\n\n"
        "What you want (private: reveal details only when the agent asks for them):\n"
        "{instruction}\n\n"
        "How to write:\n"
        "- First say briefly what you need; give your name, zip code, email or order details "
        "only when asked.\n"
        "- Answer in one or two short sentences of plain text.\n"
        f"- When everything you asked for is done, or cannot be done, reply with exactly {STOP}\n"
        f"- Never write {STOP} in any other message."
    ),
}
"""Prompt templates of the simulated customer, by version (``{instruction}`` is filled)."""

DEFAULT_VERSION = "1"


def prompt_id(version: str) -> str:
    """The id stored with every conversation, e.g. ``toolshop-user/1``."""
    return f"toolshop-user/{version}"


def check_version(version: Any) -> str:
    """``version`` if a prompt of that version exists, else a :class:`UserError`."""
    if version not in USER_PROMPTS:
        raise UserError(f"unknown user_prompt_version {version!r}",
                        f"use one of {', '.join(map(repr, USER_PROMPTS))}")
    return str(version)


def _fixed_lines(version: str) -> list[str]:
    """Lines of the prompt that no honest reply contains (long ones without the instruction)."""
    lines = [line.strip("- ") for line in USER_PROMPTS[version].splitlines()]
    return [line for line in lines if len(line) >= 30 and "{" not in line]


@dataclass(frozen=True)
class UserTurn:
    """One reply of the simulated customer, checked."""

    text: str
    """What the agent is shown (without the stop marker)."""
    stop: bool = False
    """The customer ended the conversation."""
    error: str | None = None
    """Why the reply is unusable (the simulator failed), or ``None``."""
    prompt: str = prompt_id(DEFAULT_VERSION)
    """Id of the prompt that produced it."""

    def info(self) -> dict[str, Any]:
        """As stored in the step info (the verifier rebuilds the turn from it)."""
        return {"reply": self.text, "stop": self.stop, "error": self.error, "prompt": self.prompt}

    @classmethod
    def from_info(cls, info: dict[str, Any]) -> UserTurn:
        return cls(text=info["reply"], stop=info["stop"], error=info["error"], prompt=info["prompt"])


def _words(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9#]+", text.lower()))


def _repeated(text: str) -> str | None:
    """A sentence (of 15+ characters) the reply says :data:`REPEATS` times or more."""
    sentences = [_words(s) for s in re.split(r"(?<=[.!?])\s+", text)]
    counts = Counter(s for s in sentences if len(s) >= 15)
    top = counts.most_common(1)
    return top[0][0] if top and top[0][1] >= REPEATS else None


def check_reply(raw: str, first: bool, version: str = DEFAULT_VERSION, said: str = "",
                done: bool = False) -> UserTurn:
    """The turn a raw reply to the agent's words ``said`` makes (see the module doc for
    what counts as a failure); ``done`` is a structured reply's ``done`` field (the text
    reading has only the marker)."""
    pid = prompt_id(version)
    text = raw.strip()
    if not text and not done:
        return UserTurn("", error="empty reply", prompt=pid)
    if said and _words(text) == _words(said):
        return UserTurn("", error="reply repeats the agent's message (the simulator left its role)",
                        prompt=pid)
    loop = _repeated(text)
    if loop is not None:
        return UserTurn("", error=f"degenerate reply: says {loop[:40]!r} {REPEATS}+ times",
                        prompt=pid)
    if len(text) > MAX_REPLY_CHARS:
        return UserTurn("", error=f"reply of {len(text)} characters (at most {MAX_REPLY_CHARS})",
                        prompt=pid)
    leaked = [line for line in _fixed_lines(version) if line in text]
    if leaked:
        return UserTurn("", error=f"reply leaks the simulator's prompt ({leaked[0][:40]!r})",
                        prompt=pid)
    stop = done or text.endswith(STOP)
    body = text.removesuffix(STOP).strip()
    if STOP in body:
        return UserTurn("", error=f"{STOP} in the middle of a reply", prompt=pid)
    if "###" in body or "STOP#" in body:
        return UserTurn("", error=f"mangled stop marker (expected exactly {STOP})", prompt=pid)
    if stop and first:
        return UserTurn("", error=f"{STOP} before the conversation began", prompt=pid)
    return UserTurn(body, stop=stop, prompt=pid)


class SimulatedUser:
    """The customer of one episode: ``model`` with the ``version`` prompt filled with
    ``instruction``; ``params`` are its sampling params (the task ``seed`` is added)."""

    def __init__(self, model: ChatModel, instruction: str, version: str = DEFAULT_VERSION,
                 params: dict[str, Any] | None = None, seed: int = 0) -> None:
        self.model = model
        self.version = check_version(version)
        self.params = {**(params or {}), "seed": seed}
        self.messages = [Message(role="system",
                                 content=USER_PROMPTS[self.version].format(instruction=instruction))]
        self.constrained = structured_output(model) in ("grammar", "server")
        """Whether replies are asked for as :data:`REPLY_SCHEMA` rather than read as text."""

    async def _turn(self, said: str) -> UserTurn:
        first = len(self.messages) == 1
        self.messages.append(Message(role="user", content=said))
        try:
            if self.constrained:
                return await self._structured_turn(first, said)
            completion = await self.model.complete(self.messages, None, self.params)
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 — any model failure is the simulator's, not the agent's
            return UserTurn("", error=f"model error: {type(exc).__name__}: {str(exc)[:300]}",
                            prompt=prompt_id(self.version))
        raw = completion.message.content or ""
        self.messages.append(Message(role="assistant", content=raw))
        return check_reply(raw, first, self.version, said)

    async def _structured_turn(self, first: bool, said: str) -> UserTurn:
        """The reply as :data:`REPLY_SCHEMA` (one re-ask with the validation error, by
        :func:`complete_structured`), then the same checks as a text reply."""
        reply = await complete_structured(self.model, self.messages, REPLY_SCHEMA, self.params)
        self.messages.append(Message(role="assistant", content=reply.completion.message.content or ""))
        if not reply.ok:
            return UserTurn("", error=f"no valid reply in {reply.attempts} tries: {reply.error}",
                            prompt=prompt_id(self.version))
        return check_reply(reply.value["message"], first, self.version, said,
                           done=reply.value["done"])

    async def start(self) -> UserTurn:
        """The customer's first message (answering :data:`OPENING`)."""
        return await self._turn(OPENING)

    async def reply(self, message: str) -> UserTurn:
        """The customer's answer to the agent's ``message``."""
        return await self._turn(message)
