"""Deals: the hidden instance of one negotiation task, its knobs, presets and generator.

A :class:`Deal` is one item for sale between a **buyer** and a **seller**. The buyer's
private value ``buyer_value`` is the most it would pay; the seller's private value
``seller_value`` is the least it would take. The **zone of possible agreement** (ZOPA) is
``[seller_value, buyer_value]``; its width is always positive, so a deal both sides gain
from always exists. The agent plays one side (``role``) and knows only its own value; the
scripted opponent plays the other side with a concession ``strategy`` and opens at
``opening``, a price outside the ZOPA on its own side (accepting it loses the agent money).

The agent's **share of the ZOPA** at price ``p`` is its surplus over the width: for a buyer
``(buyer_value - p) / width``, for a seller ``(p - seller_value) / width``. 0 means the price
is the agent's own value (it gains nothing), 1 that it is the opponent's limit (the agent
took the whole ZOPA); below 0 the agent lost money, above 1 the opponent did.

Determinism. A deal is rebuilt from ``(seed, knobs)`` alone: every random choice comes from
one ``random.Random(seed)`` in a fixed order. An attempt is kept only if the reference plan
(:mod:`sharpen.envs.negotiation.reference`) reaches success against the scripted opponent;
otherwise the generator redraws from the same RNG, so every task is solvable by construction.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Literal

from sharpen.core.task import TaskSpec
from sharpen.envs import generation
from sharpen.envs.base import Knob
from sharpen.envs.generation import seed_for

ENV_NAME = "negotiation"

Role = Literal["buyer", "seller"]

STRATEGIES = ("boulware", "conceder", "linear", "tit_for_tat")
"""Scripted opponent strategies (see :mod:`sharpen.envs.negotiation.opponents`)."""

STRATEGY_CHOICES = (*STRATEGIES, "tough", "mixed")
"""Knob values: one strategy, ``tough`` (boulware or tit-for-tat) or ``mixed`` (any of the
four), drawn per task from its seed."""

ITEMS: tuple[tuple[str, int], ...] = (
    ("a used road bike", 400), ("a second-hand laptop", 700), ("a vintage guitar", 1200),
    ("a leather sofa", 900), ("a camera lens", 350), ("a mountain tent", 250),
    ("an espresso machine", 300), ("a used car", 6000), ("a domain name", 2500),
    ("a box of vinyl records", 150), ("a rowing machine", 500), ("a painting", 1800),
)
"""(item, list price): the list price sets the scale of every price in the deal."""

KNOBS: tuple[Knob, ...] = (
    Knob(name="zopa_width", type="float", default=0.4, low=0.05, high=0.6,
         help="width of the zone of possible agreement, as a fraction of the item's list price"),
    Knob(name="strategy", type="choice", default="conceder", choices=list(STRATEGY_CHOICES),
         help="the scripted opponent's concession strategy (tough = boulware or tit_for_tat; "
              "mixed = any)"),
    Knob(name="max_rounds", type="int", default=6, low=2, high=12,
         help="turns the agent has (offers, accepts and invalid replies all count)"),
    Knob(name="target_share", type="float", default=0.2, low=0.05, high=0.9,
         help="share of the ZOPA a deal must give the agent to count as a success"),
    Knob(name="role", type="choice", default="random", choices=["buyer", "seller", "random"],
         help="the side the agent plays (random = drawn per task from its seed)"),
)

PRESETS: dict[str, dict[str, Any]] = {
    "easy": {"zopa_width": 0.4, "strategy": "conceder", "max_rounds": 6, "target_share": 0.2,
             "role": "random"},
    "medium": {"zopa_width": 0.25, "strategy": "mixed", "max_rounds": 6, "target_share": 0.35,
               "role": "random"},
    "hard": {"zopa_width": 0.12, "strategy": "tough", "max_rounds": 5, "target_share": 0.5,
             "role": "random"},
}
"""Named difficulty presets (full knob dicts)."""

_MAX_ATTEMPTS = 200


@dataclass(frozen=True)
class Deal:
    """One negotiation instance (everything but ``role`` and the agent's own value is hidden
    from the agent)."""

    item: str
    list_price: int
    role: Role
    buyer_value: int
    seller_value: int
    opening: int
    max_price: int
    strategy: str
    beta: float
    reciprocity: float
    max_rounds: int
    target_share: float

    @property
    def opponent_role(self) -> Role:
        return "seller" if self.role == "buyer" else "buyer"

    @property
    def width(self) -> int:
        """Width of the ZOPA (always > 0)."""
        return self.buyer_value - self.seller_value

    @property
    def agent_value(self) -> int:
        return self.buyer_value if self.role == "buyer" else self.seller_value

    @property
    def opponent_value(self) -> int:
        return self.seller_value if self.role == "buyer" else self.buyer_value

    def agent_surplus(self, price: float) -> float:
        """What a deal at ``price`` gains the agent (negative: it loses money)."""
        return self.buyer_value - price if self.role == "buyer" else price - self.seller_value

    def opponent_surplus(self, price: float) -> float:
        """What a deal at ``price`` gains the opponent."""
        return self.width - self.agent_surplus(price)

    def share(self, price: float) -> float:
        """The agent's share of the ZOPA at ``price`` (see the module doc)."""
        return self.agent_surplus(price) / self.width

    def price_at(self, share: float) -> float:
        """The price that gives the agent ``share`` of the ZOPA."""
        if self.role == "buyer":
            return self.buyer_value - share * self.width
        return self.seller_value + share * self.width

    def better_for_agent(self, a: float, b: float) -> bool:
        """Whether price ``a`` is at least as good for the agent as price ``b``."""
        return a <= b if self.role == "buyer" else a >= b


def resolve_knobs(knobs: dict[str, Any] | None = None, difficulty: str | None = None) -> dict:
    """Full, validated knobs: knob defaults, then the ``difficulty`` preset, then ``knobs``.
    Unknown names or bad values raise a :class:`~sharpen.core.errors.UserError`."""
    return generation.resolve_knobs(KNOBS, PRESETS, knobs, difficulty, what="negotiation")


def _attempt(rng: random.Random, knobs: dict[str, Any]) -> Deal:
    """One draw; every value is drawn in a fixed order whatever the knobs say, so changing
    one knob does not reshuffle the others."""
    item, base = rng.choice(ITEMS)
    roles: tuple[Role, Role] = ("buyer", "seller")
    role_draw = rng.choice(roles)
    strategy_draw = rng.random()
    mid = base * rng.uniform(0.85, 1.15)
    width = max(2, round(base * knobs["zopa_width"] * rng.uniform(0.8, 1.2)))
    open_gap = rng.uniform(0.05, 0.4)
    boulware_beta, conceder_beta = rng.uniform(0.15, 0.4), rng.uniform(2.0, 5.0)
    reciprocity = rng.uniform(0.6, 1.0)

    choice = knobs["strategy"]
    pool = {"mixed": STRATEGIES, "tough": ("boulware", "tit_for_tat")}.get(choice, (choice,))
    strategy = pool[int(strategy_draw * len(pool))]
    role: Role = role_draw if knobs["role"] == "random" else knobs["role"]
    seller_value = round(mid - width / 2)
    buyer_value = seller_value + width
    gap = max(1, round(open_gap * width))
    # The opponent opens beyond the agent's own value: accepting the opening loses money.
    opening = buyer_value + gap if role == "buyer" else seller_value - gap
    beta = {"boulware": boulware_beta, "conceder": conceder_beta}.get(strategy, 1.0)
    return Deal(item=item, list_price=base, role=role, buyer_value=buyer_value,
                seller_value=seller_value, opening=opening, max_price=3 * base,
                strategy=strategy, beta=round(beta, 6), reciprocity=round(reciprocity, 6),
                max_rounds=knobs["max_rounds"], target_share=knobs["target_share"])


def build_deal(seed: int, knobs: dict[str, Any]) -> Deal:
    """The deal of ``(seed, knobs)`` (knobs already resolved); see the module doc."""
    from sharpen.envs.negotiation.reference import reference_plan  # the plan simulates episodes

    rng = random.Random(seed)
    for _ in range(_MAX_ATTEMPTS):
        deal = _attempt(rng, knobs)
        if reference_plan(deal) is not None:
            return deal
    raise RuntimeError(f"no solvable deal for seed {seed} and knobs {knobs}")  # pragma: no cover


def deal_of(task: TaskSpec) -> Deal:
    """Rebuild the deal of ``task`` from its seed and knobs alone."""
    return build_deal(task.seed, resolve_knobs(task.knobs))


class NegotiationTaskGenerator(generation.PresetKnobs):
    """Implements the :class:`~sharpen.envs.base.Generator` protocol for ``negotiation``.
    Stateless: any two instances produce the same tasks."""

    KNOB_SCHEMA = KNOBS
    PRESET_TABLE = PRESETS

    def sample(self, knobs: dict[str, Any], seed: int, split: str = "test") -> TaskSpec:
        """The ``seed``-th task of ``split`` at ``knobs`` (missing knobs take their defaults);
        the TaskSpec's seed is moved into the split's seed range."""
        full = resolve_knobs(knobs)
        task_seed = seed_for(split, seed)
        deal = build_deal(task_seed, full)
        return TaskSpec(
            env=ENV_NAME, id=f"negotiation/{deal.role}-{deal.strategy}/{task_seed}",
            seed=task_seed, knobs=full, split=generation.as_split(split),
            metadata={"difficulty": generation.difficulty_of(PRESETS, full),
                      "role": deal.role, "strategy": deal.strategy},
        )

    def materialize(self, task: TaskSpec) -> Deal:
        """The deal of ``task``."""
        return deal_of(task)

    def is_solvable(self, task: TaskSpec) -> bool:
        """Whether the reference plan reaches a successful deal against the scripted opponent."""
        from sharpen.envs.negotiation.reference import reference_plan

        return reference_plan(deal_of(task)) is not None
