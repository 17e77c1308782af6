"""World generation for textworld: knobs, presets, :func:`build_world` and
:class:`TextWorldTaskGenerator`.

Determinism. A world is rebuilt from ``(seed, knobs)`` alone: every random choice is drawn,
in one fixed order, from one ``random.Random(seed)``, so :func:`build_world` returns the same
world in any process and order, whatever else runs concurrently. A :class:`TaskSpec` stores
only the seed and the knobs; the env and the verifier regenerate the world from them.

Generation, in order:

1. the goal family (the ``goal`` knob, or drawn when it is ``any``) and the object type
   (heatable for ``heat``, cleanable for ``clean``);
2. ``n_rooms`` distinct room types; a ``heat`` world always has the kitchen (the microwave),
   a ``clean`` world the kitchen or the bathroom (a sink);
3. the layout: rooms are attached one by one to a random free side of a random placed room
   on a square lattice, so exits form a tree and directions are consistent (north of A is
   B exactly when south of B is A). Each connection has a door with probability 0, 0.5 or 1
   at goal depth 1, 2 or 3; doors start closed;
4. the receptacles of each room type (numbered per type over the world) and the start room;
5. where the goal objects hide (two for ``put_two``, else one), by ``goal_depth``:
   1 = lying on a surface in the start room; 2 = inside a closed container in any room;
   3 = inside a closed container in a room other than the start room (2 when there is one
   room). Nothing starts in the microwave or a sink;
6. the destination (not for ``find``): a receptacle other than the microwave, the sinks and
   the goal objects' own; in the start room at depth 1, anywhere at depth 2, in another room
   than the goal objects at depth 3 (when there is one);
7. ``n_distractors`` objects of other types on or in random receptacles; all objects are
   then shuffled and numbered per type, so ``apple 1`` is not always the goal object.

Every door and container can be opened and nothing is locked, so every world is solvable by
construction; :meth:`TextWorldTaskGenerator.is_solvable` checks it again with the BFS solver
of :mod:`sharpen.envs.textworld.solver`.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from sharpen.core.task import TaskSpec
from sharpen.envs import generation
from sharpen.envs.base import Knob
from sharpen.envs.generation import seed_for
from sharpen.envs.perturbation import perturbed_of, rng_of, unknown
from sharpen.envs.textworld.perturb import PERTURBATIONS, perturb_world
from sharpen.envs.textworld.solver import solve
from sharpen.envs.textworld.world import (
    DIRECTIONS,
    FAMILIES,
    FIXTURES,
    OBJECT_TYPES,
    OFFSET,
    OPPOSITE,
    ROOM_TYPES,
    Door,
    Goal,
    ObjectType,
    Receptacle,
    Room,
    State,
    World,
)

ENV_NAME = "textworld"

KNOBS: tuple[Knob, ...] = (
    Knob(name="n_rooms", type="int", default=1, low=1, high=8,
         help="rooms in the house (a tree of exits north/south/east/west)"),
    Knob(name="n_distractors", type="int", default=2, low=0, high=30,
         help="objects that have nothing to do with the goal"),
    Knob(name="goal_depth", type="int", default=1, low=1, high=3,
         help="how hidden the goal objects are: 1 on a surface in the start room, 2 in a "
              "closed container, 3 in a closed container in another room behind doors"),
    Knob(name="goal", type="choice", default="any", choices=["any", *FAMILIES],
         help="goal family; 'any' draws one per task"),
)

PRESETS: dict[str, dict[str, Any]] = {
    "easy": {"n_rooms": 1, "n_distractors": 2, "goal_depth": 1, "goal": "any"},
    "medium": {"n_rooms": 3, "n_distractors": 6, "goal_depth": 2, "goal": "any"},
    "hard": {"n_rooms": 5, "n_distractors": 12, "goal_depth": 3, "goal": "any"},
}
"""Named difficulty presets (full knob dicts)."""

DOOR_PROBABILITY = {1: 0.0, 2: 0.5, 3: 1.0}
"""Chance that a connection between two rooms has a (closed) door, by goal depth."""


def resolve_knobs(knobs: dict[str, Any] | None = None, difficulty: str | None = None) -> dict:
    """Full, validated knobs: knob defaults, then the ``difficulty`` preset, then ``knobs``."""
    return generation.resolve_knobs(KNOBS, PRESETS, knobs, difficulty, what="textworld tasks")


def difficulty_of(knobs: dict[str, Any]) -> str:
    """The preset whose knobs equal ``knobs`` exactly, else ``"custom"``."""
    return generation.difficulty_of(PRESETS, knobs)


def _rooms(rng: random.Random, n: int, family: str) -> list[str]:
    names = rng.sample(sorted(ROOM_TYPES), n)
    if family == "heat" and "kitchen" not in names:
        names[rng.randrange(n)] = "kitchen"
    if family == "clean" and not {"kitchen", "bathroom"} & set(names):
        names[rng.randrange(n)] = rng.choice(["kitchen", "bathroom"])
    return names


def _layout(rng: random.Random, names: list[str], depth: int) -> tuple[dict[str, Room], dict[str, Door]]:
    cell_of = {names[0]: (0, 0)}
    room_at = {(0, 0): names[0]}
    exits: dict[str, list[tuple[str, str, str | None]]] = {n: [] for n in names}
    doors: dict[str, Door] = {}
    for name in names[1:]:
        while True:  # the lattice is unbounded, so a free side always exists
            anchor = rng.choice(list(cell_of))
            direction = rng.choice(DIRECTIONS)
            dx, dy = OFFSET[direction]
            cell = (cell_of[anchor][0] + dx, cell_of[anchor][1] + dy)
            if cell not in room_at:
                break
        cell_of[name], room_at[cell] = cell, name
        door = None
        if rng.random() < DOOR_PROBABILITY[depth]:
            door = f"door {len(doors) + 1}"
            doors[door] = Door(door, (anchor, name))
        exits[anchor].append((direction, name, door))
        exits[name].append((OPPOSITE[direction], anchor, door))
    rooms = {n: Room(n, tuple(sorted(exits[n], key=lambda e: DIRECTIONS.index(e[0]))))
             for n in names}
    return rooms, doors


def _receptacles(names: list[str]) -> dict[str, Receptacle]:
    count: Counter[str] = Counter()
    out: dict[str, Receptacle] = {}
    for room in names:
        for fixture in ROOM_TYPES[room]:
            count[fixture] += 1
            name = f"{fixture} {count[fixture]}"
            out[name] = Receptacle(name, FIXTURES[fixture], room)
    return out


def _is_appliance(r: Receptacle) -> bool:
    return r.fixture.heats or r.fixture.cleans


def _hiding_places(recs: list[Receptacle], depth: int, start: str, n_rooms: int) -> list[Receptacle]:
    if depth == 1:
        return [r for r in recs if r.room == start and not r.container]
    if depth == 3 and n_rooms > 1:
        return [r for r in recs if r.container and r.room != start]
    return [r for r in recs if r.container]


def _destination(rng: random.Random, recs: list[Receptacle], depth: int, start: str,
                 sources: list[Receptacle]) -> Receptacle:
    pool = [r for r in recs if r not in sources]
    if depth == 1:
        return rng.choice([r for r in pool if r.room == start])
    if depth == 3:
        elsewhere = [r for r in pool if r.room not in {s.room for s in sources}]
        pool = elsewhere or pool
    return rng.choice(pool)


def build_world(seed: int, knobs: dict[str, Any]) -> World:
    """The world of ``(seed, knobs)`` (knobs already resolved); see the module doc."""
    rng = random.Random(seed)
    family = knobs["goal"] if knobs["goal"] != "any" else rng.choice(FAMILIES)
    types: list[ObjectType] = list(OBJECT_TYPES)
    if family == "heat":
        types = [t for t in types if t.heatable]
    elif family == "clean":
        types = [t for t in types if t.cleanable]
    goal_type = rng.choice(types)
    depth, n_rooms = knobs["goal_depth"], knobs["n_rooms"]
    names = _rooms(rng, n_rooms, family)
    rooms, doors = _layout(rng, names, depth)
    receptacles = _receptacles(names)
    start = rng.choice(names)
    recs = [r for r in receptacles.values() if not _is_appliance(r)]
    places = _hiding_places(recs, depth, start, n_rooms)
    sources = [rng.choice(places) for _ in range(2 if family == "put_two" else 1)]
    dest = None if family == "find" else _destination(rng, recs, depth, start, sources).name
    others = [t for t in OBJECT_TYPES if t is not goal_type]
    items = [(goal_type, s.name) for s in sources]
    items += [(rng.choice(others), rng.choice(recs).name) for _ in range(knobs["n_distractors"])]
    rng.shuffle(items)
    count: Counter[str] = Counter()
    objects: dict[str, ObjectType] = {}
    where: list[tuple[str, str]] = []
    for kind, place in items:
        count[kind.name] += 1
        name = f"{kind.name} {count[kind.name]}"
        objects[name] = kind
        where.append((name, place))
    goal = Goal(family, goal_type.name, dest, 2 if family == "put_two" else 1)
    return World(
        rooms=rooms, receptacles=receptacles, doors=doors, objects=objects,
        start=State(room=start, opened=frozenset(), where=tuple(where)), goal=goal,
        family_objects=tuple(o for o, t in objects.items() if t is goal_type),
    )


def world_of(task: TaskSpec) -> World:
    """Rebuild the world of ``task`` from its seed and knobs alone; a perturbed variant's is
    its original's, changed by :mod:`.perturb`."""
    variant = perturbed_of(task)
    if variant is not None:
        if variant.name not in PERTURBATIONS:
            raise unknown(ENV_NAME, variant, PERTURBATIONS)
        return perturb_world(world_of(variant.base), variant.name, rng_of(variant))
    return build_world(task.seed, resolve_knobs(task.knobs))


class TextWorldTaskGenerator(generation.PresetKnobs):
    """Implements the :class:`~sharpen.envs.base.Generator` protocol for ``textworld``.
    Stateless: any two instances produce the same tasks."""

    KNOB_SCHEMA = KNOBS
    PRESET_TABLE = PRESETS

    def sample(self, knobs: dict[str, Any], seed: int, split: str = "test") -> TaskSpec:
        """The ``seed``-th task of ``split`` at ``knobs`` (missing knobs take their defaults);
        the TaskSpec's seed is moved into the split's seed range. Metadata: difficulty,
        family, goal text and walkthrough length."""
        full = resolve_knobs(knobs)
        task_seed = seed_for(split, seed)
        world = build_world(task_seed, full)
        plan = solve(world)
        if plan is None:  # pragma: no cover - impossible by construction; fail here, not at reset
            raise RuntimeError(f"unsolvable textworld for seed {task_seed} and knobs {full}")
        g = world.goal
        return TaskSpec(
            env=ENV_NAME,
            id=f"textworld/{g.family}-r{full['n_rooms']}-d{full['goal_depth']}/{task_seed}",
            seed=task_seed, knobs=full, split=generation.as_split(split),
            metadata={"difficulty": difficulty_of(full), "family": g.family,
                      "goal": g.text(world), "walkthrough": len(plan)},
        )

    def materialize(self, task: TaskSpec) -> World:
        """The world of ``task``."""
        return world_of(task)

    def is_solvable(self, task: TaskSpec) -> bool:
        """Whether the BFS solver finds a walkthrough from the start state to the goal."""
        return solve(world_of(task)) is not None
