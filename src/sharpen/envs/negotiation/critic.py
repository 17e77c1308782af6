"""Critics: feedback to the agent's side between rounds.

After an offer the opponent countered (the negotiation goes on), the critic comments on that
offer; the comment is appended to the agent's observation and recorded on the step as
``Feedback(source="critic", name="critique", value=<the comment>)``. A critic knows what the
agent knows — its own value, its offers, the opponent's offers — never the opponent's limit.

- :class:`ScriptedCritic` (env arg ``critic: scripted``): deterministic rules, e.g. "You
  conceded $30 in one move: 43% of the margin you had left before your value of $470."
- :class:`ModelCritic` (env arg ``critic: {name: ..., args: ...}``): a chat model asked for
  one sentence of advice; an empty reply gives no comment. The advice is free text that
  nothing parses — it is shown to the agent as written, cut at :data:`MAX_COMMENT` — so it is
  asked for without a response schema: JSON around one sentence would add tokens and bound
  nothing that ``max_tokens`` and the cut do not.
"""

from __future__ import annotations

from typing import Any

from sharpen.core.messages import Message
from sharpen.envs.negotiation.deal import Deal
from sharpen.envs.negotiation.episode import Episode, money
from sharpen.models.base import ChatModel

MAX_COMMENT = 400
"""Characters of a model critic's comment that are kept."""


def scripted_comment(deal: Deal, ep: Episode) -> str:
    """The scripted critic's comment on the agent's last offer (see the module doc)."""
    offer, value, standing = ep.agent_offers[-1], deal.agent_value, ep.standing
    other = deal.opponent_role
    toward = 1.0 if deal.role == "buyer" else -1.0  # the direction of a concession
    if (offer - value) * toward > 0:
        side = "above" if deal.role == "buyer" else "below"
        return (f"Your offer of {money(offer)} is {side} your value of {money(value)}: a deal at "
                "that price loses you money.")
    if len(ep.agent_offers) == 1:
        margin = abs(value - offer)
        return (f"You opened at {money(offer)}, {money(margin)} inside your value of "
                f"{money(value)}; the {other} now asks {money(standing)}. Concede in small steps.")
    previous = ep.agent_offers[-2]
    moved = (offer - previous) * toward
    if moved < 0:
        return (f"You moved {money(-moved)} away from the {other} (from {money(previous)} to "
                f"{money(offer)}); going back on an offer can stall the talks.")
    if moved == 0:
        return (f"You repeated your offer of {money(offer)}; the {other} moved to "
                f"{money(standing)}.")
    room = abs(value - previous)
    share = moved / room if room else 1.0
    return (f"You conceded {money(moved)} in one move: {share:.0%} of the margin you had left "
            f"before your value of {money(value)}.")


class ScriptedCritic:
    """Deterministic critic (see :func:`scripted_comment`)."""

    author = "critic:scripted"

    async def comment(self, deal: Deal, ep: Episode) -> str | None:
        return scripted_comment(deal, ep)

    async def aclose(self) -> None:
        """Nothing to release."""


class ModelCritic:
    """A chat model that coaches the agent's side in one sentence."""

    def __init__(self, model: ChatModel, deal: Deal, seed: int) -> None:
        self.model = model
        self.author = f"critic:{model.name}"
        self.params: dict[str, Any] = {"temperature": 0.0, "max_tokens": 64, "seed": seed}
        self.system = (
            f"You coach the {deal.role} of {deal.item} in a price negotiation. The "
            f"{deal.role}'s private value is {money(deal.agent_value)} (a deal beyond it loses "
            "money). After each round, comment in one short sentence on the "
            f"{deal.role}'s last offer."
        )

    async def comment(self, deal: Deal, ep: Episode) -> str | None:
        history = ", ".join(money(p) for p in ep.agent_offers)
        asks = ", ".join(money(p) for p in ep.opponent_offers)
        messages = [Message(role="system", content=self.system), Message(role="user", content=(
            f"The {deal.role}'s offers so far: {history}. The {deal.opponent_role}'s offers: "
            f"{asks}. {ep.turns_left} turns are left. Your comment on the last offer:"))]
        completion = await self.model.complete(messages, None, self.params)
        text = (completion.message.content or "").strip()
        return text[:MAX_COMMENT] or None

    async def aclose(self) -> None:
        await self.model.aclose()
