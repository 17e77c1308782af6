"""Opponents: the scripted concession strategies, and a chat model playing the other side.

**Scripted** (deterministic given the deal): at turn ``t`` of ``T`` the opponent computes the
counter-offer it would make now, accepts the agent's offer if that offer is at least as good
for it as this counter, and otherwise counters with it. Its counters never pass its own
private value and never move back. The counter comes from the strategy:

- time-dependent (Faratin et al.): ``opening + (value - opening) * (t / T) ** (1 / beta)``,
  rounded to whole units: ``boulware`` (beta in [0.15, 0.4]: concedes late), ``linear``
  (beta = 1), ``conceder`` (beta in [2, 5]: concedes early). At the last turn it reaches its
  own value, so any offer the opponent can gain from is accepted then;
- ``tit_for_tat``: it concedes 10% of the distance from its opening to its value at once,
  then ``reciprocity`` (in [0.6, 1]) times what the agent has conceded since its first
  offer: an agent that never moves gets nothing more.

**Model** (agent vs agent): :class:`ModelOpponent` asks a chat model, with its own system
prompt that states its role, its private value and the rules; it answers each offer with
ACCEPT, WALK or a price, as free text read leniently (:func:`parse_reply`: a leading ACCEPT
or WALK, else the last number in it, else the words accept/deal or walk/no deal) — whatever
the model's :func:`~sharpen.models.structured.structured_output`. ``structured=True`` asks
instead for JSON valid against :func:`move_schema` through
:func:`~sharpen.models.structured.complete_structured` (``{"move": "accept"}``,
``{"move": "walk"}`` or ``{"move": "counter", "price": N}``). It is off because it does not
help where it was measured (``benchmarks/results/sim_parsing.md``, the embedded model, 30
first offers): the text reading already read 30 of 30 replies; with the grammar every reply
parsed too but was ``walk`` (30 of 30), ending each game at the first offer; asked for JSON
without a grammar, 12 of 12 replies were unusable.

Either way an unusable reply is sent back once with a correction, and a second unusable reply
is an ``error`` move, which ends the episode with error kind ``env`` — not the agent's fault.
"""

from __future__ import annotations

import re
from typing import Any

from sharpen.core.messages import Message
from sharpen.envs.negotiation.deal import Deal
from sharpen.envs.negotiation.episode import Episode, OpponentMove, money, parse_price
from sharpen.models.base import ChatModel
from sharpen.models.structured import ResponseSchema, complete_structured

TFT_FIRST_STEP = 0.1
"""Fraction of the opening-to-value distance a tit-for-tat opponent concedes at once."""

_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_LEAD = re.compile(r"^[\W_]*(accept|walk)", re.IGNORECASE)


def scripted_counter(deal: Deal, ep: Episode, offer: float) -> float:
    """The counter-offer the scripted opponent would make at turn ``ep.turns`` in answer to
    ``offer`` (see the module doc)."""
    opening, value = deal.opening, deal.opponent_value
    if deal.strategy == "tit_for_tat":
        first = ep.agent_offers[0] if ep.agent_offers else offer
        # What the agent has moved toward the opponent since its first offer.
        conceded = max(0.0, offer - first if deal.role == "buyer" else first - offer)
        moved = TFT_FIRST_STEP * abs(opening - value) + deal.reciprocity * conceded
        step = -1.0 if value < opening else 1.0
        counter = round(opening + step * min(moved, abs(opening - value)), 2)
    else:
        fraction = (min(ep.turns, deal.max_rounds) / deal.max_rounds) ** (1.0 / deal.beta)
        counter = float(round(opening + (value - opening) * fraction))
    # Never past its own value, never back from its standing offer.
    if deal.better_for_agent(counter, value):
        counter = float(value)
    if deal.better_for_agent(ep.standing, counter):
        counter = ep.standing
    return counter


def scripted_move(deal: Deal, ep: Episode, offer: float) -> OpponentMove:
    """The scripted opponent's answer to ``offer``: accept it if it is at least as good for
    the opponent as the counter it would make now, else counter."""
    counter = scripted_counter(deal, ep, offer)
    if deal.better_for_agent(counter, offer):
        return OpponentMove(kind="accept")
    return OpponentMove(kind="counter", price=counter)


class ScriptedOpponent:
    """The scripted opponent behind the env's async interface."""

    async def respond(self, deal: Deal, ep: Episode, offer: float) -> OpponentMove:
        return scripted_move(deal, ep, offer)

    async def aclose(self) -> None:
        """Nothing to release."""


def parse_reply(text: str, deal: Deal) -> OpponentMove | str:
    """A model opponent's reply as a move, or why it is unusable. Read in order: a reply
    that starts with ACCEPT or WALK; else the last number (a counter, 0 to ``max_price``: in
    "I can't do 400, how about 450?" the counter comes last); else ``accept``/``deal`` or
    ``walk``/``no deal`` anywhere."""
    lead = _LEAD.match(text)
    if lead:
        return OpponentMove(kind="accept" if lead.group(1).lower() == "accept" else "walk")
    numbers = _NUMBER.findall(text)
    if numbers:
        number = numbers[-1]
        price = parse_price(number)
        if price is None or price > deal.max_price:
            return f"{number} is not a price from 0 to {money(deal.max_price)}"
        return OpponentMove(kind="counter", price=price)
    low = text.lower()
    if "walk" in low or "no deal" in low:
        return OpponentMove(kind="walk")
    if "accept" in low or "deal" in low:
        return OpponentMove(kind="accept")
    shown = text.strip()[:60] or "(empty)"
    return f"no price, ACCEPT or WALK in {shown!r}"


def opponent_prompt(deal: Deal) -> str:
    """The model opponent's system prompt."""
    me, other = deal.opponent_role, deal.role
    limit = ("the most you will pay" if me == "buyer" else "the least you will accept")
    return (
        f"You are the {me} of {deal.item} in a price negotiation with a {other}. Your private "
        f"limit is {money(deal.opponent_value)}: {limit}; a deal beyond it loses you money. "
        f"Never reveal it. You opened at {money(deal.opening)}. The negotiation lasts at most "
        f"{deal.max_rounds} turns of the {other}. Each turn the {other} makes an offer. Reply "
        "with exactly one of: ACCEPT (take the offer), WALK (leave without a deal), or your "
        "counter-offer as a number such as 450. Nothing else."
    )


def move_schema(deal: Deal) -> ResponseSchema:
    """The model opponent's move as JSON, for a model that constrains decoding: accept, walk,
    or counter with a whole-unit price. The price's range (0 to ``deal.max_price``) is only
    described, not a ``minimum``/``maximum``: the embedded model's grammar cannot enforce
    integer bounds (:func:`~sharpen.models.grammar.unsupported_keywords`), so
    :func:`read_move` checks it."""

    def move(kind: str, **extra: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "properties": {"move": {"const": kind}, **extra},
                "required": ["move", *extra], "additionalProperties": False}

    price = {"type": "integer", "description": f"a whole number from 0 to {deal.max_price}"}
    return ResponseSchema.of({"anyOf": [move("accept"), move("walk"), move("counter", price=price)]},
                             name="move")


def read_move(value: dict[str, Any], deal: Deal) -> OpponentMove | str:
    """A move valid against :func:`move_schema` as an :class:`OpponentMove`, or why it is
    unusable (a counter outside 0 to ``max_price``)."""
    if value["move"] != "counter":
        return OpponentMove(kind=value["move"])
    if not 0 <= value["price"] <= deal.max_price:
        return f"{value['price']} is not a price from 0 to {money(deal.max_price)}"
    return OpponentMove(kind="counter", price=float(value["price"]))


class ModelOpponent:
    """A chat model playing the opponent (see the module doc). One per episode: it keeps the
    opponent's own conversation. ``structured``: ask for :func:`move_schema` JSON instead of
    reading text (off by default, see the module doc)."""

    def __init__(self, model: ChatModel, deal: Deal, seed: int, *, structured: bool = False) -> None:
        self.model = model
        self.deal = deal
        self.params: dict[str, Any] = {"temperature": 0.0, "max_tokens": 32, "seed": seed}
        self.messages = [Message(role="system", content=opponent_prompt(deal))]
        self.structured = structured

    async def respond(self, deal: Deal, ep: Episode, offer: float) -> OpponentMove:
        """Ask the model; one correction on an unusable reply, then an ``error`` move."""
        self.messages.append(Message(role="user", content=(
            f"Turn {ep.turns} of {deal.max_rounds}. The {deal.role} offers {money(offer)}. "
            f"Your standing offer is {money(ep.standing)}. ACCEPT, WALK or your counter-offer?")))
        if self.structured:
            return await self._respond_structured(deal)
        replies: list[str] = []
        problem = ""
        for _ in range(2):
            completion = await self.model.complete(self.messages, None, self.params)
            text = completion.message.content or ""
            replies.append(text)
            self.messages.append(Message(role="assistant", content=text))
            move = parse_reply(text, deal)
            if isinstance(move, OpponentMove):
                return move.model_copy(update={"replies": replies})
            problem = move
            self.messages.append(Message(role="user", content=(
                f"Your reply was not understood ({problem}). Reply with ACCEPT, WALK or a "
                "price as a number only.")))
        return OpponentMove(kind="error", replies=replies,
                            error=f"the opponent model gave no usable reply twice; last: {problem}")

    async def _respond_structured(self, deal: Deal) -> OpponentMove:
        """The move as JSON valid against :func:`move_schema` (one re-ask with the validation
        error, by :func:`complete_structured`)."""
        reply = await complete_structured(self.model, self.messages, move_schema(deal), self.params)
        text = reply.completion.message.content or ""
        self.messages.append(Message(role="assistant", content=text))
        move = read_move(reply.value, deal) if reply.ok else reply.error or ""
        if isinstance(move, str):
            return OpponentMove(kind="error", replies=[text], error=(
                f"the opponent model gave no valid move in {reply.attempts} tries; last: {move}"))
        return move.model_copy(update={"replies": [text]})

    async def aclose(self) -> None:
        await self.model.aclose()
