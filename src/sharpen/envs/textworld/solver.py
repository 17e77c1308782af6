"""The BFS solver of textworld: a shortest walkthrough from the start state to the goal.

The search runs over real :class:`~sharpen.envs.textworld.world.State` values, and every
edge is a command applied by :func:`sharpen.envs.textworld.rules.apply` — the same rules the
agent plays under — so a plan the solver returns is a plan the env accepts.

It expands only commands that can matter for the goal, which keeps the state space small
without losing optimality:

- closing, ``look``, ``inventory`` and ``examine`` never enable anything;
- there is no carrying or capacity limit, so moving objects of other types never helps,
  and putting a goal object anywhere but the destination never helps (it could stay
  carried instead);
- rooms form a tree, so a shortest walk stays inside the smallest subtree spanning the start
  room, the rooms the goal objects are in, the destination's room and (for heat/clean) the
  rooms with a microwave/sink; only doors and exits of that subtree are used;
- only the containers that hold goal objects, and the destination, are worth opening.

(Taking a goal object back out of the destination is still tried: from a mid-episode state
an unheated apple may already lie there.)

Every command the solver skips is one that a shortest plan never needs, so BFS over the
remaining commands finds a shortest walkthrough of the full game.
"""

from __future__ import annotations

from collections import deque

from sharpen.envs.textworld import rules
from sharpen.envs.textworld.world import CARRIED, State, World


def _path(world: World, a: str, b: str) -> list[str]:
    """The rooms on the tree path from ``a`` to ``b`` (both included)."""
    prev: dict[str, str | None] = {a: None}
    queue = deque([a])
    while queue:
        room = queue.popleft()
        for _, nxt, _ in world.rooms[room].exits:
            if nxt not in prev:
                prev[nxt] = room
                queue.append(nxt)
    out: list[str] = []
    cur: str | None = b
    while cur is not None:
        out.append(cur)
        cur = prev[cur]
    return out


def relevant_rooms(world: World, start: State) -> set[str]:
    """The smallest subtree of rooms a shortest walkthrough from ``start`` can need (see the
    module doc)."""
    goal = world.goal
    key = {start.room}
    key |= {world.receptacles[start.location(o)].room for o in world.family_objects
            if start.location(o) != CARRIED}
    if goal.destination is not None:
        key.add(world.receptacles[goal.destination].room)
    for r in world.receptacles.values():
        if (goal.family == "heat" and r.fixture.heats) or (goal.family == "clean" and r.fixture.cleans):
            key.add(r.room)
    out: set[str] = set()
    for room in key:
        out.update(_path(world, start.room, room))
    return out


def _candidates(world: World, state: State, rooms: set[str], openable: set[str]) -> list[str]:
    """The goal-relevant commands to try in ``state`` (validity is left to the rules)."""
    goal = world.goal
    here = world.rooms[state.room]
    out = [f"go {d}" for d, nxt, door in here.exits
           if nxt in rooms and (door is None or door in state.opened)]
    out += [f"open {door}" for _, nxt, door in here.exits
            if door is not None and nxt in rooms and door not in state.opened]
    recs = [r.name for r in world.receptacles.values() if r.room == state.room]
    out += [f"open {r}" for r in recs if r in openable and r not in state.opened]
    for o in world.family_objects:
        loc = state.location(o)
        if loc == CARRIED:
            if goal.family == "heat" and o not in state.hot:
                out += [f"heat {o} with {r}" for r in recs if world.receptacles[r].fixture.heats]
            if goal.family == "clean" and o not in state.clean:
                out += [f"clean {o} with {r}" for r in recs if world.receptacles[r].fixture.cleans]
            if goal.destination in recs and rules.reachable(world, state, goal.destination):
                prep = world.receptacles[goal.destination].preposition
                out.append(f"put {o} {prep} {goal.destination}")
        elif loc in recs and rules.reachable(world, state, loc):
            out.append(f"take {o} from {loc}")
    return out


def solve(world: World, state: State | None = None, max_states: int = 200_000) -> list[str] | None:
    """A shortest list of commands from ``state`` (default: the start) to the goal, or
    ``None`` if the goal is unreachable (or more than ``max_states`` states were seen)."""
    start = world.start if state is None else state
    if world.goal_reached(start):
        return []
    rooms = relevant_rooms(world, start)
    places = {start.location(o) for o in world.family_objects} | {world.goal.destination}
    openable = {r for r in places
                if r is not None and r in world.receptacles and world.receptacles[r].container}
    prev: dict[State, tuple[State, str] | None] = {start: None}
    queue = deque([start])
    while queue:
        state_now = queue.popleft()
        for command in _candidates(world, state_now, rooms, openable):
            result = rules.apply(world, state_now, command)
            if not result.valid:  # pragma: no cover - the candidates are valid by construction
                raise AssertionError(f"solver tried an invalid command {command!r}: {result.message}")
            nxt = result.state
            if nxt in prev:
                continue
            prev[nxt] = (state_now, command)
            if world.goal_reached(nxt):
                plan: list[str] = []
                link = prev[nxt]
                while link is not None:
                    before, cmd = link
                    plan.append(cmd)
                    link = prev[before]
                return plan[::-1]
            if len(prev) > max_states:
                return None
            queue.append(nxt)
    return None
