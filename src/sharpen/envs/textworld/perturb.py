"""The textworld environment's declared perturbations, applied where a world is materialised.

- ``distractor`` — two more objects of types other than the goal's lie on or in ordinary
  receptacles (never an appliance): more to read and more admissible commands, the same goal.
- ``exit_order`` — every room lists its exits in another order (the same exits, doors and
  directions).

The goal object's type, its hiding places and the destination are the original's, so the
goal stays reachable (the BFS walkthrough of the variant is the reference) and the verifier
checks the same goal.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

from sharpen.envs.textworld.world import OBJECT_TYPES, World

PERTURBATIONS: dict[str, str] = {
    "distractor": "two more objects of other types lie about the house",
    "exit_order": "every room lists its exits in another order",
}
"""Name -> what it changes (``TextWorldEnv.perturbations``)."""

EXTRA_DISTRACTORS = 2
"""Objects the ``distractor`` perturbation adds."""


def perturb_world(world: World, name: str, rng: random.Random) -> World:
    """``world`` under perturbation ``name`` (one of :data:`PERTURBATIONS`)."""
    if name == "distractor":
        return _with_distractors(world, rng)
    if name == "exit_order":
        rooms = {}
        for key, room in world.rooms.items():
            exits = list(room.exits)
            while len(exits) > 1 and tuple(exits) == room.exits:
                rng.shuffle(exits)
            rooms[key] = replace(room, exits=tuple(exits))
        return replace(world, rooms=rooms)
    raise ValueError(f"unknown textworld perturbation {name!r}")


def _with_distractors(world: World, rng: random.Random) -> World:
    goal_type = world.goal.object_type
    others = [t for t in OBJECT_TYPES if t.name != goal_type]
    places = sorted(r.name for r in world.receptacles.values()
                    if not (r.fixture.heats or r.fixture.cleans))
    count: Counter[str] = Counter(t.name for t in world.objects.values())
    objects = dict(world.objects)
    where = list(world.start.where)
    for _ in range(EXTRA_DISTRACTORS):
        kind = rng.choice(others)
        count[kind.name] += 1
        name = f"{kind.name} {count[kind.name]}"
        while name in objects:  # pragma: no cover - numbering is per type, so never taken
            count[kind.name] += 1
            name = f"{kind.name} {count[kind.name]}"
        objects[name] = kind
        where.append((name, rng.choice(places)))
    return replace(world, objects=objects, start=replace(world.start, where=tuple(where)))
