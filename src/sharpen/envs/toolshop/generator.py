"""ToolshopTaskGenerator: the knobs and presets of toolshop tasks, and their generation.

A task is rebuilt from ``(seed, knobs)`` alone by :func:`~sharpen.envs.toolshop.goals.build_shop`
(one ``random.Random(seed)``, nothing global). Splits own disjoint seed ranges (see
:mod:`sharpen.envs.generation`). A task is solvable when its reference walkthrough, played
through the same :class:`~sharpen.envs.toolshop.episode.Episode` rules the agent meets,
meets no refusal and ends in the expected state, and that state differs from the start (so
doing nothing never succeeds).
"""

from __future__ import annotations

import functools
from typing import Any

from sharpen.core.task import TaskSpec
from sharpen.envs import generation
from sharpen.envs.base import Knob
from sharpen.envs.perturbation import perturbed_of, rng_of, unknown
from sharpen.envs.toolshop.database import state_hash
from sharpen.envs.toolshop.episode import Episode
from sharpen.envs.toolshop.goals import build_shop
from sharpen.envs.toolshop.perturb import PERTURBATIONS, perturb_shop
from sharpen.envs.toolshop.world import Shop

ENV_NAME = "toolshop"

KNOBS: tuple[Knob, ...] = (
    Knob(name="customers", type="int", default=5, low=2, high=200,
         help="customers in the database (its size)"),
    Knob(name="orders_per_customer", type="int", default=2, low=1, high=8,
         help="most background orders per customer"),
    Knob(name="goal_depth", type="int", default=1, low=1, high=4,
         help="write actions the request needs (cancel, return, exchange, address change)"),
    Knob(name="distractors", type="int", default=0, low=0, high=8,
         help="extra orders of the customer holding a goal's product in another status (from 2, "
              "with lookups, also a customer of the same name elsewhere)"),
    Knob(name="lookups", type="bool", default=False,
         help="the request names customer, orders and items in words, not ids, so the agent "
              "must look them up"),
)

PRESETS: dict[str, dict[str, Any]] = {
    "easy": {"customers": 5, "orders_per_customer": 2, "goal_depth": 1, "distractors": 0,
             "lookups": False},
    "medium": {"customers": 20, "orders_per_customer": 3, "goal_depth": 2, "distractors": 2,
               "lookups": True},
    "hard": {"customers": 60, "orders_per_customer": 4, "goal_depth": 3, "distractors": 4,
             "lookups": True},
}
"""Named difficulty presets (full knob dicts)."""


def resolve_knobs(knobs: dict[str, Any] | None = None, difficulty: str | None = None) -> dict[str, Any]:
    """Full, validated knobs: defaults, then the ``difficulty`` preset, then ``knobs``."""
    return generation.resolve_knobs(KNOBS, PRESETS, knobs, difficulty, what="toolshop")


@functools.lru_cache(maxsize=256)
def shop_of(task: TaskSpec) -> Shop:
    """The shop of ``task`` (cached: epochs and re-scoring ask for the same task again; a
    Shop is never changed after it is built); a perturbed variant's is its original's,
    changed by :mod:`.perturb`."""
    variant = perturbed_of(task)
    if variant is not None:
        if variant.name not in PERTURBATIONS:
            raise unknown(ENV_NAME, variant, PERTURBATIONS)
        return perturb_shop(shop_of(variant.base), variant.name, rng_of(variant))
    return build_shop(task.seed, resolve_knobs(task.knobs))


def check_reference(shop: Shop) -> bool:
    """Whether ``shop``'s reference walkthrough, played in memory, is refused nowhere and
    succeeds, and the expected state differs from the initial one."""
    episode = Episode(shop, ":memory:", max_actions=len(shop.reference) + 1)
    try:
        for i, action in enumerate(shop.reference):
            report = episode.apply(action, i)
            if report.info.get("invalid") or report.info.get("rule_error"):
                return False
        changed = state_hash(episode.initial) != state_hash(episode.expected)
        return changed and episode.outcome().success
    finally:
        episode.close()


class ToolshopTaskGenerator(generation.PresetKnobs):
    """Implements the :class:`~sharpen.envs.base.Generator` protocol for ``toolshop``.
    Stateless: any two instances produce the same tasks."""

    KNOB_SCHEMA = KNOBS
    PRESET_TABLE = PRESETS

    def sample(self, knobs: dict[str, Any], seed: int, split: str = "test") -> TaskSpec:
        """The ``seed``-th task of ``split`` at ``knobs`` (seed moved into the split's range)."""
        full = resolve_knobs(knobs)
        task_seed = generation.seed_for(split, seed)
        kinds = build_shop(task_seed, full).kinds
        return TaskSpec(env=ENV_NAME, id=f"toolshop/{'+'.join(kinds)}/{task_seed}", seed=task_seed,
                        knobs=full, split=generation.as_split(split),
                        metadata={"difficulty": generation.difficulty_of(PRESETS, full),
                                  "kinds": list(kinds)})

    def materialize(self, task: TaskSpec) -> Shop:
        """The shop of ``task``."""
        return shop_of(task)

    def is_solvable(self, task: TaskSpec) -> bool:
        """Whether the reference walkthrough reaches the expected state (see the module doc)."""
        return check_reference(shop_of(task))
