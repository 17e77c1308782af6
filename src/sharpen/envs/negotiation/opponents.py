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
ACCEPT, WALK or a price. A reply is read leniently (:func:`parse_reply`: a leading ACCEPT or WALK, else the
last number in it, else the words accept/deal or walk/no deal); an unusable reply
is sent back once with a correction, and a second unusable reply is an ``error`` move, which
ends the episode with error kind ``env`` — not the agent's fault.
"""

from __future__ import annotations

import re
from typing import Any

from sharpen.core.messages import Message
from sharpen.envs.negotiation.deal import Deal
from sharpen.envs.negotiation.episode import Episode, OpponentMove, money, parse_price
from sharpen.models.base import ChatModel

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


class ModelOpponent:
    """A chat model playing the opponent (see the module doc). One per episode: it keeps the
    opponent's own conversation."""

    def __init__(self, model: ChatModel, deal: Deal, seed: int) -> None:
        self.model = model
        self.deal = deal
        self.params: dict[str, Any] = {"temperature": 0.0, "max_tokens": 32, "seed": seed}
        self.messages = [Message(role="system", content=opponent_prompt(deal))]

    async def respond(self, deal: Deal, ep: Episode, offer: float) -> OpponentMove:
        """Ask the model; one correction on an unusable reply, then an ``error`` move."""
        self.messages.append(Message(role="user", content=(
            f"Turn {ep.turns} of {deal.max_rounds}. The {deal.role} offers {money(offer)}. "
            f"Your standing offer is {money(ep.standing)}. ACCEPT, WALK or your counter-offer?")))
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

    async def aclose(self) -> None:
        await self.model.aclose()
