"""The simulated customer: toolshop's persona and prompts for the reusable
:class:`~sharpen.envs.simulated.user.UserSimulator`.

The customer knows the task's instruction (the goal and private facts: name, zip code,
email, which orders); the agent only gets the customer's first message and asks through
``respond``. The prompt is a constant per version (:data:`USER_PROMPTS`, family
``toolshop-user``); its id ``toolshop-user/<version>`` goes into the task metadata, the step
info and the outcome evidence, so a changed prompt is never confused with a changed agent.
The instruction is the profile's goal (its private facts are in it, so the profile has no
separate hidden facts); a prompt's text, once used, never changes (the replay cassettes are
keyed by the request).

Turns, structured replies (:data:`REPLY_SCHEMA`, named ``customer_reply``, when the model
constrains decoding) and the checks that make a failure ``user_sim`` are the simulator's
(:mod:`sharpen.envs.simulated.user`). Measured on the embedded model
(``benchmarks/results/sim_parsing.md``, 30 turns): 8 unusable turns with the grammar, 13 as
text (no parroting of the agent with the grammar; loops in both), at 1.7× the output tokens.
"""

from __future__ import annotations

from typing import Any

from sharpen.envs.simulated import user as simulated
from sharpen.envs.simulated.user import (
    MAX_REPLY_CHARS,
    MAX_STRUCTURED_CHARS,
    OPENING,
    REPEATS,
    STOP,
    UserProfile,
    UserPrompt,
    UserSimulator,
    UserTurn,
)
from sharpen.models.base import ChatModel

__all__ = [
    "DEFAULT_VERSION", "MAX_REPLY_CHARS", "MAX_STRUCTURED_CHARS", "OPENING", "PERSONA", "REPEATS",
    "REPLY_SCHEMA", "STOP", "USER_PROMPTS", "SimulatedUser", "UserTurn", "check_reply",
    "check_version", "prompt_id",
]

PERSONA = "a customer of an online shop"
"""The customer's persona (version 1 of the prompt spells it out in its own words)."""

USER_PROMPTS: dict[str, UserPrompt] = {
    "1": UserPrompt("toolshop-user", "1", (
        "You are a customer of an online shop, chatting with the shop's support agent. You "
        "are the customer, never the agent.\n\n"
        "What you want (private: reveal details only when the agent asks for them):\n"
        "{goal}\n\n"
        "How to write:\n"
        "- First say briefly what you need; give your name, zip code, email or order details "
        "only when asked.\n"
        "- Answer in one or two short sentences of plain text.\n"
        f"- When everything you asked for is done, or cannot be done, reply with exactly {STOP}\n"
        f"- Never write {STOP} in any other message."
    ), opening=OPENING, schema_name="customer_reply"),
}
"""Prompts of the simulated customer, by version (``{goal}`` is the task's instruction)."""

DEFAULT_VERSION = "1"

REPLY_SCHEMA = simulated.reply_schema("customer_reply")
"""A customer's reply, for a model that constrains decoding."""


def prompt_id(version: str) -> str:
    """The id stored with every conversation, e.g. ``toolshop-user/1``."""
    return USER_PROMPTS[version].id


def check_version(version: Any) -> str:
    """``version`` if a prompt of that version exists, else a :class:`UserError`."""
    return simulated.prompt_of(USER_PROMPTS, version).version


def check_reply(raw: str, first: bool, version: str = DEFAULT_VERSION, said: str = "",
                done: bool = False) -> UserTurn:
    """:func:`sharpen.envs.simulated.user.check_reply` with the customer's prompt."""
    return simulated.check_reply(raw, first, USER_PROMPTS[version], said, done)


class SimulatedUser(UserSimulator):
    """The customer of one episode: ``model`` with the ``version`` prompt filled with
    ``instruction``; ``params`` are its sampling params (the task ``seed`` is added)."""

    def __init__(self, model: ChatModel, instruction: str, version: str = DEFAULT_VERSION,
                 params: dict[str, Any] | None = None, seed: int = 0) -> None:
        prompt = simulated.prompt_of(USER_PROMPTS, version)
        super().__init__(model, UserProfile(goal=instruction, persona=PERSONA), prompt,
                         params, seed)
        self.version = prompt.version
