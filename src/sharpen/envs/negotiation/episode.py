"""The rules of one negotiation episode, shared by the env (live), the verifier (replay) and
the reference planner (simulation).

:class:`Episode` applies the agent's actions to a :class:`~sharpen.envs.negotiation.deal.Deal`
and the opponent's answers to the agent's offers; because the env, the verifier and the
planner run this same code, a replayed trajectory gets exactly the env's outcome.

- The opponent's opening offer stands from the start.
- Each agent **turn** is one action, and every action uses one of ``max_rounds`` turns:
  ``offer(price)``, ``accept()`` (a deal at the opponent's standing offer), ``walk_away()``
  (no deal), or anything invalid (explained precisely; the opponent waits).
- A **price** is a number, or a string holding one (``450``, ``"$1,200.50"``, ``"450
  dollars"``), from 0 to the deal's ``max_price``; it is rounded to cents.
- After a valid offer the opponent answers with an :class:`OpponentMove`: accept (a deal at
  the agent's price), counter (its new standing offer; a counter at least as good for the
  agent as the agent's own offer is taken as accepting it), walk away (no deal), or — only a
  model opponent — error (it gave no usable reply twice; the episode ends with error kind
  ``env``: not the agent's fault).
- When the last turn passes without a deal, the opponent leaves: no deal (truncated).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from sharpen.core.outcome import Outcome
from sharpen.core.trajectory import Action
from sharpen.envs.negotiation.deal import Deal

TOOLS = ("offer", "accept", "walk_away")
_PRICE = re.compile(r"\$?\s*(\d[\d,]*(?:\.\d+)?|\.\d+)\s*(?:\$|dollars?|usd)?", re.IGNORECASE)
_STRIP = " \t\r\n`'\"."

End = Literal["deal", "walked", "opponent_walked", "deadline", "error"]


class OpponentMove(BaseModel):
    """The opponent's answer to one offer (stored in the step's ``info["opponent"]`` so a
    model opponent's game can be re-scored offline)."""

    kind: Literal["accept", "counter", "walk", "error"]
    """What it did."""
    price: float | None = None
    """The counter-offer (``counter`` only)."""
    replies: list[str] = Field(default_factory=list)
    """A model opponent's raw replies (empty for the scripted one)."""
    error: str | None = None
    """Why a model opponent's replies were unusable (``error`` only)."""


def parse_price(raw: Any) -> float | None:
    """``raw`` as a non-negative number rounded to cents, or ``None`` if it is not one."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int | float):
        value = float(raw)
    elif isinstance(raw, str):
        m = _PRICE.fullmatch(raw.strip(_STRIP).replace("USD ", ""))
        if m is None:
            return None
        value = float(m.group(1).replace(",", ""))
    else:
        return None
    return round(value, 2) if math.isfinite(value) and value >= 0 else None


def money(price: float) -> str:
    """``$450`` or ``$450.50``."""
    return f"${price:,.0f}" if float(price).is_integer() else f"${price:,.2f}"


def action_error(action: Action, deal: Deal) -> tuple[float | None, str | None]:
    """``(price or None, None)`` for a valid action (the price for ``offer``), else
    ``(None, why)`` — the precise feedback the agent gets."""
    if action.tool not in TOOLS:
        return None, (f"Unknown tool {action.tool!r}. The tools are offer (argument `price`, a "
                      "number), accept and walk_away (no arguments).")
    if action.tool != "offer":
        return None, None
    if "price" not in action.arguments:
        got = ", ".join(sorted(action.arguments)) or "none"
        return None, f"`offer` needs the argument `price` (a number); arguments given: {got}."
    raw = action.arguments["price"]
    if isinstance(raw, str) and not raw.strip(_STRIP):
        return None, "`price` is empty. Reply with just a number, e.g. 450, in a ``` block."
    if isinstance(raw, str) and raw.strip(_STRIP).lower().replace(" ", "_") in ("accept", "walk_away"):
        word = raw.strip(_STRIP).lower().replace(" ", "_")
        return None, (f"{raw.strip(_STRIP)!r} is not a price. To {word.replace('_', ' ')}, call "
                      f'the tool: {{"tool": "{word}", "arguments": {{}}}}.')
    price = parse_price(raw)
    if price is None:
        shown = str(raw) if len(str(raw)) <= 40 else str(raw)[:40] + "..."
        if isinstance(raw, int | float) and not isinstance(raw, bool) and raw < 0:
            return None, f"Offer {shown} is negative: prices run from 0 to {money(deal.max_price)}."
        return None, (f"`price` must be a number like 450 or 450.50, not {shown!r}. Reply with "
                      "just the number.")
    if price > deal.max_price:
        return None, (f"Offer {money(price)} is outside the allowed range: prices run from $0 to "
                      f"{money(deal.max_price)}.")
    return price, None


@dataclass
class Episode:
    """The state of one negotiation on ``deal`` (see the module doc)."""

    deal: Deal
    turns: int = 0
    standing: float = 0.0
    agent_offers: list[float] = field(default_factory=list)
    opponent_offers: list[float] = field(default_factory=list)
    invalid: int = 0
    price: float | None = None
    end: End | None = None
    error: str | None = None
    pending: float | None = None

    def __post_init__(self) -> None:
        self.standing = float(self.deal.opening)
        self.opponent_offers = [self.standing]

    @property
    def done(self) -> bool:
        return self.end is not None

    @property
    def turns_left(self) -> int:
        return self.deal.max_rounds - self.turns

    def agent_turn(self, action: Action) -> dict[str, Any]:
        """Apply one agent action (episode not done, no offer pending). Returns ``invalid``
        (the reason or ``None``), ``tool`` and ``price`` (the offer). After a valid offer
        the caller must get the opponent's answer and pass it to :meth:`opponent_turn`."""
        assert self.pending is None and not self.done
        self.turns += 1
        price, why = action_error(action, self.deal)
        if why is not None:
            self.invalid += 1
            self._deadline()
            return {"invalid": why, "tool": action.tool, "price": None}
        if action.tool == "accept":
            self.price, self.end = self.standing, "deal"
        elif action.tool == "walk_away":
            self.end = "walked"
        else:
            assert price is not None
            self.agent_offers.append(price)
            self.pending = price
        return {"invalid": None, "tool": action.tool, "price": price}

    def opponent_turn(self, move: OpponentMove) -> None:
        """Apply the opponent's answer to the pending offer."""
        offer, self.pending = self.pending, None
        assert offer is not None
        if move.kind == "accept" or (
            move.kind == "counter" and move.price is not None
            and self.deal.better_for_agent(move.price, offer)
        ):
            self.price, self.end = offer, "deal"
        elif move.kind == "counter" and move.price is not None:
            self.standing = float(move.price)
            self.opponent_offers.append(self.standing)
            self._deadline()
        elif move.kind == "walk":
            self.end = "opponent_walked"
        else:
            self.end, self.error = "error", move.error or "the opponent gave no usable answer"

    @property
    def succeeded(self) -> bool:
        """A deal at a price that gives the agent at least ``target_share`` of the ZOPA."""
        return (self.end == "deal" and self.price is not None
                and self.deal.share(self.price) >= self.deal.target_share - 1e-9)

    def _deadline(self) -> None:
        if self.end is None and self.turns >= self.deal.max_rounds:
            self.end = "deadline"

    def outcome(self) -> Outcome:
        """Success = a deal whose price gives the agent at least ``target_share`` of the ZOPA;
        reward = the agent's share of the ZOPA clipped to [-1, 1] (0 without a deal). Components: ``deal``
        (0/1), ``price`` (0 without a deal), ``agent_surplus``, ``opponent_surplus``,
        ``share_of_zopa``, ``zopa_width``, ``rounds`` (turns used). An opponent-model
        failure is an ``env`` error."""
        d = self.deal
        deal = self.end == "deal" and self.price is not None
        price = self.price if deal and self.price is not None else 0.0
        share = d.share(price) if deal else 0.0
        components = {
            "deal": float(deal), "price": float(price),
            "agent_surplus": round(d.agent_surplus(price), 6) if deal else 0.0,
            "opponent_surplus": round(d.opponent_surplus(price), 6) if deal else 0.0,
            "share_of_zopa": round(share, 6), "zopa_width": float(d.width),
            "rounds": float(self.turns),
        }
        if self.end == "error":
            return Outcome(success=False, components=components, error_kind="env",
                           error=self.error, evidence=f"opponent error after {self.turns} turns")
        limits = (f"{d.role} value {money(d.agent_value)}, ZOPA {money(d.seller_value)}-"
                  f"{money(d.buyer_value)}, target {d.target_share:.0%}")
        if deal:
            evidence = (f"deal at {money(price)} after {self.turns} turns: the agent kept "
                        f"{share:.0%} of the ZOPA ({limits})")
        else:
            why = {"walked": "the agent walked away", "opponent_walked": "the opponent walked away",
                   "deadline": "no turns left",
                   None: "the agent stopped before the negotiation ended"}[self.end]
            evidence = f"no deal after {self.turns} turns: {why} ({limits})"
        return Outcome(success=self.succeeded,
                       reward=round(max(-1.0, min(1.0, share)), 6), components=components,
                       evidence=evidence)
