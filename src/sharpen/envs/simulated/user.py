"""A simulated user: a chat model playing the person an agent serves, with a versioned prompt.

Any multi-turn environment can take a :class:`UserSimulator`. It is given a
:class:`UserProfile` — a **persona** (who the user is), a **goal** (what they want) and
**hidden** facts (name, account number, ...) the agent must ask for — and a
:class:`UserPrompt`, a template with a ``family/version`` id (:attr:`UserPrompt.id`) that
the environment records with every conversation (task metadata, step info, outcome
evidence), so a changed prompt is never confused with a changed agent. A prompt once used
is never edited: a new wording is a new version.

The conversation, seen from the simulator: the rendered prompt as ``system``, then the
agent's words as ``user`` messages (the first is the prompt's :attr:`~UserPrompt.opening`)
and its own replies as ``assistant`` messages. A reply ending in :data:`STOP` ends it.

How a reply is read depends on the model's
:func:`~sharpen.models.structured.structured_output`. A model that constrains decoding
(``grammar``: the embedded model; ``server``: a constraining endpoint) is asked, through
:func:`~sharpen.models.structured.complete_structured`, for :func:`reply_schema` —
``{"message": <at most MAX_STRUCTURED_CHARS characters>, "done": <bool>}`` — so the reply is
bounded and the end of the conversation is a field (a message ending in :data:`STOP` ends it
too: the prompt, shared by both readings, asks for the marker). Any other model's reply is
free text (asked for JSON without a grammar, the embedded model failed 12 of 12 turns:
``benchmarks/results/sim_parsing.md``).

:func:`check_reply` labels a reply the simulator got wrong — empty, far too long, a parrot
of the agent's message (the simulator playing the agent), one sentence said
:data:`REPEATS` times or more, lines of its own prompt leaked, :data:`STOP` in the first
message or anywhere but the end, or a mangled marker — as does a constrained reply with no
valid JSON after the re-ask, and a model that raises (other than a
:class:`~sharpen.core.errors.UserError`, a configuration mistake that stops the run). Such
a turn carries ``error``; the environment ends the episode with ``error_kind="user_sim"``:
it is never the agent's fault. A turn also lists the hidden facts its text gives away
(``revealed``), so a report or a judge can tell a user who volunteers everything from one
who waits to be asked; giving a fact away is not a failure.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
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
short enough that 128 tokens close the JSON."""


def reply_schema(name: str = "user_reply") -> ResponseSchema:
    """A user's reply for a model that constrains decoding: what it says, and whether the
    conversation is over (:data:`STOP` of the text reading). ``name`` is the schema's name
    (part of the request, so of a cassette's key)."""
    return ResponseSchema.of({
        "type": "object",
        "properties": {"message": {"type": "string", "maxLength": MAX_STRUCTURED_CHARS},
                       "done": {"type": "boolean"}},
        "required": ["message", "done"], "additionalProperties": False,
    }, name=name)


@dataclass(frozen=True)
class UserProfile:
    """Who the simulated user is and what they want."""

    goal: str
    """What the user wants done, in their words."""
    persona: str = "a person asking an assistant for help"
    """Who they are and how they write (a noun phrase: the prompt says "You are {persona}")."""
    hidden: dict[str, str] = field(default_factory=dict)
    """Facts the user gives only when the agent asks (``{"account number": "4411"}``)."""

    def hidden_text(self) -> str:
        """The hidden facts as prompt lines (``- account number: 4411``), or ``(none)``."""
        return "\n".join(f"- {k}: {v}" for k, v in self.hidden.items()) or "(none)"


@dataclass(frozen=True)
class UserPrompt:
    """A versioned prompt template. Its fields are ``{persona}``, ``{goal}`` and
    ``{hidden}`` (:meth:`UserProfile.hidden_text`); a template may use any of them."""

    family: str
    """What the prompt is for (``toolshop-user``, ``user-sim``)."""
    version: str
    template: str
    opening: str = OPENING
    """The agent's first words, to which the user's first message answers."""
    schema_name: str = "user_reply"
    """Name of the structured reply's schema (:func:`reply_schema`)."""

    @property
    def id(self) -> str:
        """``family/version``, e.g. ``toolshop-user/1``: stored with every conversation."""
        return f"{self.family}/{self.version}"

    def render(self, profile: UserProfile) -> str:
        """The system prompt for ``profile``."""
        return self.template.format(persona=profile.persona, goal=profile.goal,
                                    hidden=profile.hidden_text())

    def fixed_lines(self) -> list[str]:
        """Lines of the template that no honest reply contains (long ones without a field)."""
        lines = [line.strip("- ") for line in self.template.splitlines()]
        return [line for line in lines if len(line) >= 30 and "{" not in line]


USER_PROMPTS: dict[str, UserPrompt] = {
    "1": UserPrompt("user-sim", "1", (
        "You are {persona}, chatting with an assistant who helps you. You are the user, never "
        "the assistant.\n\n"
        "What you want:\n{goal}\n\n"
        "What you know (private: give a fact only when the assistant asks for it):\n{hidden}\n\n"
        "How to write:\n"
        "- First say briefly what you need; give the private facts only when asked.\n"
        "- Answer in one or two short sentences of plain text.\n"
        f"- When everything you asked for is done, or cannot be done, reply with exactly {STOP}\n"
        f"- Never write {STOP} in any other message."
    )),
}
"""The generic user prompts, by version (environments may keep their own families)."""


def prompt_of(prompts: dict[str, UserPrompt], version: Any) -> UserPrompt:
    """``prompts[version]``, or a :class:`UserError` naming the versions there are."""
    if version not in prompts:
        raise UserError(f"unknown user_prompt_version {version!r}",
                        f"use one of {', '.join(map(repr, prompts))}")
    return prompts[version]


@dataclass(frozen=True)
class UserTurn:
    """One reply of the simulated user, checked."""

    text: str
    """What the agent is shown (without the stop marker)."""
    stop: bool = False
    """The user ended the conversation."""
    error: str | None = None
    """Why the reply is unusable (the simulator failed), or ``None``."""
    prompt: str = USER_PROMPTS["1"].id
    """Id of the prompt that produced it."""
    revealed: tuple[str, ...] = ()
    """Names of the hidden facts whose values the text contains."""

    def info(self) -> dict[str, Any]:
        """As stored in the step info (a verifier rebuilds the turn from it); ``revealed``
        only when the profile has hidden facts and the text gives some away."""
        out: dict[str, Any] = {"reply": self.text, "stop": self.stop, "error": self.error,
                               "prompt": self.prompt}
        if self.revealed:
            out["revealed"] = list(self.revealed)
        return out

    @classmethod
    def from_info(cls, info: dict[str, Any]) -> UserTurn:
        return cls(text=info["reply"], stop=info["stop"], error=info["error"],
                   prompt=info["prompt"], revealed=tuple(info.get("revealed", ())))


def _words(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9#]+", text.lower()))


def _repeated(text: str) -> str | None:
    """A sentence (of 15+ characters) the reply says :data:`REPEATS` times or more."""
    sentences = [_words(s) for s in re.split(r"(?<=[.!?])\s+", text)]
    counts = Counter(s for s in sentences if len(s) >= 15)
    top = counts.most_common(1)
    return top[0][0] if top and top[0][1] >= REPEATS else None


def _problem(text: str, first: bool, prompt: UserPrompt, said: str, stop: bool) -> str | None:
    if not text and not stop:
        return "empty reply"
    if said and _words(text) == _words(said):
        return "reply repeats the agent's message (the simulator left its role)"
    loop = _repeated(text)
    if loop is not None:
        return f"degenerate reply: says {loop[:40]!r} {REPEATS}+ times"
    if len(text) > MAX_REPLY_CHARS:
        return f"reply of {len(text)} characters (at most {MAX_REPLY_CHARS})"
    leaked = [line for line in prompt.fixed_lines() if line in text]
    if leaked:
        return f"reply leaks the simulator's prompt ({leaked[0][:40]!r})"
    body = text.removesuffix(STOP).strip()
    if STOP in body:
        return f"{STOP} in the middle of a reply"
    if "###" in body or "STOP#" in body:
        return f"mangled stop marker (expected exactly {STOP})"
    if (stop or text.endswith(STOP)) and first:
        return f"{STOP} before the conversation began"
    return None


def check_reply(raw: str, first: bool, prompt: UserPrompt = USER_PROMPTS["1"], said: str = "",
                done: bool = False, hidden: dict[str, str] | None = None) -> UserTurn:
    """The turn a raw reply to the agent's words ``said`` makes (see the module doc for
    what counts as a failure); ``done`` is a structured reply's ``done`` field (the text
    reading has only the marker); ``hidden`` the profile's facts, to list those revealed."""
    text = raw.strip()
    problem = _problem(text, first, prompt, said, done)
    if problem is not None:
        return UserTurn("", error=problem, prompt=prompt.id)
    body = text.removesuffix(STOP).strip()
    revealed = tuple(k for k, v in (hidden or {}).items() if v and v.lower() in body.lower())
    return UserTurn(body, stop=done or text.endswith(STOP), prompt=prompt.id, revealed=revealed)


class UserSimulator:
    """The simulated user of one episode: ``model`` playing ``profile`` with ``prompt``;
    ``params`` are its sampling params (``seed`` is added: with temperature 0 and a seeded
    model, the same conversation gives the same replies)."""

    def __init__(self, model: ChatModel, profile: UserProfile,
                 prompt: UserPrompt = USER_PROMPTS["1"], params: dict[str, Any] | None = None,
                 seed: int = 0) -> None:
        self.model = model
        self.profile = profile
        self.prompt = prompt
        self.params = {**(params or {}), "seed": seed}
        self.messages = [Message(role="system", content=prompt.render(profile))]
        self.constrained = structured_output(model) in ("grammar", "server")
        """Whether replies are asked for as :func:`reply_schema` rather than read as text."""
        self._schema = reply_schema(prompt.schema_name)

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
                            prompt=self.prompt.id)
        raw = completion.message.content or ""
        self.messages.append(Message(role="assistant", content=raw))
        return check_reply(raw, first, self.prompt, said, hidden=self.profile.hidden)

    async def _structured_turn(self, first: bool, said: str) -> UserTurn:
        """The reply as :func:`reply_schema` JSON (one re-ask with the validation error, by
        :func:`complete_structured`), then the same checks as a text reply."""
        reply = await complete_structured(self.model, self.messages, self._schema, self.params)
        self.messages.append(Message(role="assistant", content=reply.completion.message.content or ""))
        if not reply.ok:
            return UserTurn("", error=f"no valid reply in {reply.attempts} tries: {reply.error}",
                            prompt=self.prompt.id)
        return check_reply(reply.value["message"], first, self.prompt, said,
                           done=reply.value["done"], hidden=self.profile.hidden)

    async def start(self) -> UserTurn:
        """The user's first message (answering the prompt's opening)."""
        return await self._turn(self.prompt.opening)

    async def reply(self, message: str) -> UserTurn:
        """The user's answer to the agent's ``message``."""
        return await self._turn(message)
