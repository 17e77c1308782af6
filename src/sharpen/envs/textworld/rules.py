"""The rules of textworld: what a command does to a :class:`~sharpen.envs.textworld.world.State`,
what the agent sees, and which commands are admissible.

:func:`apply` is a pure function ``(world, state, command) -> Result``; the env, the verifier
and the solver all use it, so they cannot disagree. An invalid command leaves the state as
it was and says precisely why ("There is no fridge here.", "The drawer 1 is closed.",
"You are not carrying apple 1.").

What the agent can refer to (its *scope*): the receptacles of the current room, the doors
of its exits, the objects it carries, and the objects on the room's surfaces or in its open
containers. A name may drop its number when only one thing of that kind is in scope
(``open fridge``); a door may also be named by its direction (``open north door``).

Rules:

- ``go D`` needs an exit ``D`` whose door, if any, is open;
- ``open``/``close`` work on doors and containers and must change something;
- ``take X [from Y]`` needs ``X`` in scope and not carried (and in ``Y`` when ``Y`` is given);
  there is no carrying limit;
- ``put X in/on Y`` needs ``X`` carried and ``Y`` a reachable receptacle here (open if it is a
  container); ``in`` and ``on`` are interchangeable;
- ``heat X with Y`` needs ``X`` carried, heatable and not yet hot, and ``Y`` a microwave here;
  ``clean X with Y`` the same with a cleanable ``X`` and a sink. Without ``with Y`` the one
  suitable appliance here is used;
- ``look``, ``inventory`` and ``examine X`` change nothing and are always valid (``examine``
  needs ``X`` in scope).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from sharpen.envs.textworld.parse import Command, parse
from sharpen.envs.textworld.world import CARRIED, DIRECTIONS, State, World


@dataclass(frozen=True)
class Result:
    """What a command did."""

    state: State
    """The state after the command (the same one when it was invalid)."""
    message: str
    """What the agent is told."""
    valid: bool
    """Whether the command did what it says (invalid ones change nothing)."""


def _kind(world: World, name: str) -> str:
    if name in world.objects:
        return world.objects[name].name
    if name in world.receptacles:
        return world.receptacles[name].fixture.name
    return "door"


def _listing(names: list[str]) -> str:
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def reachable(world: World, state: State, receptacle: str) -> bool:
    """Whether things on/in ``receptacle`` can be seen and reached (surface, or open)."""
    return not world.receptacles[receptacle].container or receptacle in state.opened


def _door_here(world: World, state: State) -> dict[str, str]:
    """Door name -> direction, for the exits of the current room."""
    return {door: d for d, _, door in world.rooms[state.room].exits if door is not None}


def _beyond(world: World, state: State, direction: str) -> str:
    """The room the exit ``direction`` of the current room leads to (it has one: the
    direction came from that room's exits)."""
    found = world.rooms[state.room].exit(direction)
    if found is None:
        raise KeyError(direction)
    return found[0]


def scope(world: World, state: State) -> list[str]:
    """Every name the agent can refer to now (see the module doc), in a fixed order."""
    recs = [r.name for r in world.receptacles.values() if r.room == state.room]
    visible = [o for o, loc in state.where
               if loc in recs and reachable(world, state, loc)]
    return [*recs, *_door_here(world, state), *state.carried, *visible]


def resolve(world: World, state: State, phrase: str, pool: list[str]) -> str | Result:
    """The name in ``pool`` that ``phrase`` means, or an invalid :class:`Result` saying why."""
    def fail(message: str) -> Result:
        return Result(state, message, False)

    if phrase in pool:
        return phrase
    doors = _door_here(world, state)
    m = re.fullmatch(r"(?:(north|south|east|west) door|door (north|south|east|west))", phrase)
    if m:
        direction = m.group(1) or m.group(2)
        named = [door for door, d in doors.items() if d == direction and door in pool]
        return named[0] if named else fail(f"There is no door to the {direction} here.")
    if not re.search(r" \d+$", phrase):
        matches = [n for n in pool if _kind(world, n) == phrase]
        if len(matches) == 1:
            return matches[0]
        if matches:
            return fail(f"Which {phrase} do you mean: {_listing(matches).replace(' and ', ' or ')}?")
    return fail(f"There is no {phrase} here.")


def describe_room(world: World, state: State) -> str:
    """What ``look`` shows: the room, its receptacles and their visible contents, its exits."""
    parts = []
    for r in world.receptacles.values():
        if r.room != state.room:
            continue
        if not reachable(world, state, r.name):
            parts.append(f"{r.name} (closed)")
            continue
        inside = state.contents(r.name)
        status = "open; " if r.container else ""
        parts.append(f"{r.name} ({status}{r.preposition} it: {_listing(inside)})" if inside
                     else f"{r.name} ({status}empty)")
    exits = []
    for d, room, door in world.rooms[state.room].exits:
        how = f" through {door} ({'open' if door in state.opened else 'closed'})" if door else ""
        exits.append(f"{d} to the {room}{how}")
    exit_text = f"Exits: {_listing(exits)}." if exits else "There are no exits."
    return f"You are in the {state.room}. You see {_listing(parts)}.\n{exit_text}"


def _contents_text(world: World, state: State, receptacle: str) -> str:
    r = world.receptacles[receptacle]
    inside = state.contents(receptacle)
    if not inside:
        return f"The {receptacle} is empty."
    return f"{r.preposition.capitalize()} the {receptacle} you see {_listing(inside)}."


def _examine(world: World, state: State, name: str) -> str:
    if name in world.doors:
        d = _door_here(world, state)[name]
        room = _beyond(world, state, d)
        status = "open" if name in state.opened else "closed"
        return f"The {name} leads {d} to the {room}. It is {status}."
    if name in world.receptacles:
        if not reachable(world, state, name):
            return f"The {name} is closed."
        return _contents_text(world, state, name)
    loc = state.location(name)
    where = ("You are carrying it." if loc == CARRIED
             else f"It is {world.receptacles[loc].preposition} the {loc}.")
    marks = [w for w, s in (("hot", state.hot), ("clean", state.clean)) if name in s]
    return f"This is {name}. {where}" + (f" It is {' and '.join(marks)}." if marks else "")


def _go(world: World, state: State, direction: str) -> Result:
    target = world.rooms[state.room].exit(direction)
    if target is None:
        return Result(state, f"You cannot go {direction} from the {state.room}.", False)
    room, door = target
    if door is not None and door not in state.opened:
        return Result(state, f"The {door} is closed. Open it first.", False)
    new = replace(state, room=room)
    return Result(new, f"You go {direction}.\n{describe_room(world, new)}", True)


def _open_close(world: World, state: State, verb: str, name: str) -> Result:
    is_door = name in world.doors
    if not is_door and not (name in world.receptacles and world.receptacles[name].container):
        return Result(state, f"You cannot {verb} the {name}.", False)
    is_open = name in state.opened
    if (verb == "open") == is_open:
        return Result(state, f"The {name} is already {'open' if is_open else 'closed'}.", False)
    if verb == "close":
        return Result(replace(state, opened=state.opened - {name}), f"You close the {name}.", True)
    new = replace(state, opened=state.opened | {name})
    if is_door:
        d = _door_here(world, state)[name]
        room = _beyond(world, state, d)
        return Result(new, f"You open the {name}. It leads {d} to the {room}.", True)
    return Result(new, f"You open the {name}. {_contents_text(world, new, name)}", True)


def _take(world: World, state: State, obj: str, source: str | None) -> Result:
    here = scope(world, state)
    pool = [o for o in here if o in world.objects and state.location(o) != CARRIED]
    if source is not None:
        rec = resolve(world, state, source, here)
        if isinstance(rec, Result):
            return rec
        if rec not in world.receptacles:
            return Result(state, f"You cannot take things from the {rec}.", False)
        if not reachable(world, state, rec):
            return Result(state, f"The {rec} is closed.", False)
        inside = state.contents(rec)
        found = resolve(world, state, obj, inside)
        if isinstance(found, Result):
            prep = world.receptacles[rec].preposition
            return Result(state, f"There is no {obj} {prep} the {rec}.", False)
        name = found
    else:
        found = resolve(world, state, obj, pool)
        if isinstance(found, Result):
            if obj in state.carried:
                return Result(state, f"You are already carrying {obj}.", False)
            if obj in here:
                return Result(state, f"You cannot take the {obj}.", False)
            return found
        name = found
    loc = state.location(name)
    return Result(state.move(name, CARRIED), f"You take {name} from the {loc}.", True)


def _carried(world: World, state: State, phrase: str) -> str | Result:
    found = resolve(world, state, phrase, state.carried)
    if isinstance(found, Result):
        return Result(state, f"You are not carrying {phrase}.", False)
    return found


def _put(world: World, state: State, obj: str, target: str) -> Result:
    name = _carried(world, state, obj)
    if isinstance(name, Result):
        return name
    rec = resolve(world, state, target, scope(world, state))
    if isinstance(rec, Result):
        return rec
    if rec not in world.receptacles:
        return Result(state, f"You cannot put things in or on the {rec}.", False)
    if not reachable(world, state, rec):
        return Result(state, f"The {rec} is closed.", False)
    prep = world.receptacles[rec].preposition
    return Result(state.move(name, rec), f"You put {name} {prep} the {rec}.", True)


def _treat(world: World, state: State, verb: str, obj: str, tool: str | None) -> Result:
    name = _carried(world, state, obj)
    if isinstance(name, Result):
        return name
    heating = verb == "heat"
    here = scope(world, state)
    suitable = [r for r in here if r in world.receptacles
                and (world.receptacles[r].fixture.heats if heating
                     else world.receptacles[r].fixture.cleans)]
    if tool is None:
        if not suitable:
            what = "a microwave" if heating else "a sink"
            return Result(state, f"There is nothing here to {verb} things with: you need {what}.",
                          False)
        rec: str | Result = suitable[0]
    else:
        rec = resolve(world, state, tool, here)
    if isinstance(rec, Result):
        return rec
    if rec not in suitable:
        return Result(state, f"You cannot {verb} things with the {rec}.", False)
    kind = world.objects[name]
    if not (kind.heatable if heating else kind.cleanable):
        return Result(state, f"You cannot {verb} the {name}.", False)
    marks = state.hot if heating else state.clean
    adjective = "hot" if heating else "clean"
    if name in marks:
        return Result(state, f"The {name} is already {adjective}.", False)
    new = (replace(state, hot=state.hot | {name}) if heating
           else replace(state, clean=state.clean | {name}))
    return Result(new, f"You {verb} the {name} with the {rec}. It is {adjective} now.", True)


def apply(world: World, state: State, command: str) -> Result:
    """The result of typing ``command`` in ``state`` (see the module doc)."""
    parsed = parse(command)
    if isinstance(parsed, str):
        return Result(state, parsed, False)
    return run(world, state, parsed)


def run(world: World, state: State, cmd: Command) -> Result:
    """The result of the parsed command ``cmd`` in ``state``."""
    args = cmd.args
    if cmd.verb == "look":
        return Result(state, describe_room(world, state), True)
    if cmd.verb == "inventory":
        carried = state.carried
        return Result(state, f"You are carrying {_listing(carried)}." if carried
                      else "You are carrying nothing.", True)
    if cmd.verb == "go":
        return _go(world, state, str(args[0]))
    if cmd.verb in ("open", "close", "examine"):
        name = resolve(world, state, str(args[0]), scope(world, state))
        if isinstance(name, Result):
            return name
        if cmd.verb == "examine":
            return Result(state, _examine(world, state, name), True)
        return _open_close(world, state, cmd.verb, name)
    if cmd.verb == "take":
        return _take(world, state, str(args[0]), args[1])
    if cmd.verb == "put":
        return _put(world, state, str(args[0]), str(args[1]))
    return _treat(world, state, cmd.verb, str(args[0]), args[1])


def admissible(world: World, state: State) -> list[str]:
    """Every command that is valid now, in canonical form and a fixed order."""
    out = ["look", "inventory"]
    room = world.rooms[state.room]
    out += [f"go {d}" for d, _, door in sorted(room.exits, key=lambda e: DIRECTIONS.index(e[0]))
            if door is None or door in state.opened]
    here = scope(world, state)
    for name in here:
        if name in world.doors or (name in world.receptacles and world.receptacles[name].container):
            out.append(f"{'close' if name in state.opened else 'open'} {name}")
    recs = [r for r in here if r in world.receptacles]
    for o, loc in state.where:
        if loc in recs and reachable(world, state, loc):
            out.append(f"take {o} from {loc}")
    for o in state.carried:
        kind = world.objects[o]
        for r in recs:
            fixture = world.receptacles[r].fixture
            if reachable(world, state, r):
                out.append(f"put {o} {world.receptacles[r].preposition} {r}")
            if fixture.heats and kind.heatable and o not in state.hot:
                out.append(f"heat {o} with {r}")
            if fixture.cleans and kind.cleanable and o not in state.clean:
                out.append(f"clean {o} with {r}")
    out += [f"examine {name}" for name in here]
    return out
