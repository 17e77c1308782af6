"""The reference plan: a fixed offer sequence that reaches success against the scripted
opponent, found by simulating it (the opponent is deterministic given the deal).

Plans are tried in a fixed order, each played through the real
:class:`~sharpen.envs.negotiation.episode.Episode` rules with
:func:`~sharpen.envs.negotiation.opponents.scripted_move`; the first whose outcome is a
success is the plan. A plan is "open at share ``goal + extra`` of the ZOPA, concede linearly
to share ``goal`` over ``k`` turns, then hold", for goals just above the target first (a
modest, sure deal rather than the best one), then more aggressive openings and slower
concessions (which a tit-for-tat opponent needs). Offers are whole units within
``[0, max_price]``. A deal with no successful plan is redrawn by the generator, so
:meth:`~sharpen.envs.negotiation.deal.NegotiationTaskGenerator.is_solvable` holds for every
generated task.
"""

from __future__ import annotations

from sharpen.core.trajectory import Action
from sharpen.envs.negotiation.deal import Deal
from sharpen.envs.negotiation.episode import Episode
from sharpen.envs.negotiation.opponents import scripted_move

GOAL_MARGINS = (0.02, 0.05, 0.1, 0.2, 0.3)
"""Goals tried, as margins above the target share (capped at 1)."""
EXTRAS = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0)
"""How far above the goal (in shares of the ZOPA) a plan opens."""


def _offers(deal: Deal, goal: float, extra: float, k: int) -> list[float]:
    out = []
    for turn in range(deal.max_rounds):
        share = goal + extra * max(0.0, 1.0 - turn / k)
        price = deal.price_at(share)
        out.append(float(min(deal.max_price, max(0, round(price)))))
    return out


def simulate(deal: Deal, offers: list[float]) -> Episode:
    """The episode of playing ``offers`` (one per turn, until the episode ends) against the
    scripted opponent."""
    ep = Episode(deal)
    for price in offers:
        if ep.done:
            break
        ep.agent_turn(Action(tool="offer", arguments={"price": price}))
        if ep.pending is not None:
            ep.opponent_turn(scripted_move(deal, ep, ep.pending))
    return ep


def reference_plan(deal: Deal) -> tuple[float, ...] | None:
    """The offers of the first successful plan (up to the accepted one), or ``None``."""
    goals = sorted({min(1.0, deal.target_share + m) for m in GOAL_MARGINS})
    for goal in goals:
        for extra in EXTRAS:
            for k in range(1, deal.max_rounds + 1) if extra else (1,):
                offers = _offers(deal, goal, extra, k)
                ep = simulate(deal, offers)
                if ep.succeeded:
                    return tuple(offers[:ep.turns])
    return None


def reference_actions(deal: Deal) -> list[Action] | None:
    """The reference plan as ``offer`` actions, or ``None`` if there is none."""
    plan = reference_plan(deal)
    if plan is None:
        return None
    return [Action(tool="offer", arguments={"price": p}) for p in plan]
