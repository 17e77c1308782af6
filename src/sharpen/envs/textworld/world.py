"""The textworld data model: a static :class:`World` (rooms, doors, receptacles, objects, the
goal) and the mutable part of it, a :class:`State` (where the agent and each object are,
what is open, what is hot or clean).

Naming follows ALFWorld: every receptacle and object is ``TYPE N``, numbered per type over
the whole world in creation order (``cabinet 1``, ``cabinet 2``, ``apple 1``); doors are
``door N``. Names are lower case and never contain the words ``in``, ``on``, ``from`` or
``with`` (the command parser splits on them).

- A **room** has exits: direction -> ``(room, door or None)``.
- A **receptacle** sits in one room. It is a *surface* (things lie ``on`` it, always
  reachable) or a *container* (things are ``in`` it; reachable only while it is open; every
  container can be opened and closed). ``heats`` / ``cleans`` mark the microwave and sinks.
- An **object** lies in a receptacle or is carried (location ``""``); it may be ``hot`` or
  ``clean``. Its type says whether it can be heated or cleaned.
- The **goal** names a family, an object type, a destination receptacle (none for ``find``)
  and how many objects must be there.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

DIRECTIONS = ("north", "south", "east", "west")
OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east"}
OFFSET = {"north": (0, -1), "south": (0, 1), "east": (1, 0), "west": (-1, 0)}
"""Direction -> (dx, dy) on the room lattice the generator lays rooms out on."""

FAMILIES = ("pick_and_place", "heat", "clean", "find", "put_two")
"""The goal families (ALFWorld's, plus ``find``)."""

CARRIED = ""
"""The location of a carried object."""


@dataclass(frozen=True)
class ObjectType:
    """A kind of portable object."""

    name: str
    heatable: bool = False
    cleanable: bool = False


OBJECT_TYPES: tuple[ObjectType, ...] = (
    ObjectType("apple", heatable=True, cleanable=True),
    ObjectType("potato", heatable=True, cleanable=True),
    ObjectType("egg", heatable=True),
    ObjectType("bread", heatable=True),
    ObjectType("tomato", heatable=True, cleanable=True),
    ObjectType("mug", heatable=True, cleanable=True),
    ObjectType("cup", heatable=True, cleanable=True),
    ObjectType("plate", cleanable=True),
    ObjectType("bowl", heatable=True, cleanable=True),
    ObjectType("fork", cleanable=True),
    ObjectType("spoon", cleanable=True),
    ObjectType("knife", cleanable=True),
    ObjectType("lettuce", cleanable=True),
    ObjectType("book"),
    ObjectType("key"),
    ObjectType("pen"),
    ObjectType("candle"),
    ObjectType("watch"),
    ObjectType("remote control"),
    ObjectType("credit card"),
    ObjectType("soap bar", cleanable=True),
    ObjectType("towel"),
    ObjectType("vase"),
    ObjectType("newspaper"),
    ObjectType("pillow"),
    ObjectType("alarm clock"),
)
TYPE_BY_NAME = {t.name: t for t in OBJECT_TYPES}


@dataclass(frozen=True)
class Fixture:
    """A kind of receptacle: surface or container, and whether it heats or cleans."""

    name: str
    container: bool = False
    heats: bool = False
    cleans: bool = False


_F = {f.name: f for f in (
    Fixture("countertop"), Fixture("table"), Fixture("shelf"), Fixture("desk"),
    Fixture("sofa"), Fixture("bed"), Fixture("dresser"), Fixture("coffee table"),
    Fixture("armchair"), Fixture("side table"), Fixture("workbench"),
    Fixture("cabinet", container=True), Fixture("drawer", container=True),
    Fixture("fridge", container=True), Fixture("box", container=True),
    Fixture("safe", container=True), Fixture("basket", container=True),
    Fixture("washing machine", container=True),
    Fixture("microwave", container=True, heats=True), Fixture("sink", cleans=True),
)}
FIXTURES = _F

ROOM_TYPES: dict[str, tuple[str, ...]] = {
    "kitchen": ("countertop", "countertop", "cabinet", "cabinet", "drawer", "fridge", "microwave",
                "sink"),
    "living room": ("sofa", "coffee table", "shelf", "armchair", "drawer", "box"),
    "bedroom": ("bed", "dresser", "side table", "drawer", "drawer", "safe"),
    "bathroom": ("sink", "shelf", "cabinet", "basket"),
    "study": ("desk", "shelf", "drawer", "drawer", "box"),
    "pantry": ("shelf", "shelf", "cabinet", "box"),
    "dining room": ("table", "side table", "cabinet", "drawer"),
    "garage": ("workbench", "shelf", "box", "cabinet"),
    "laundry room": ("shelf", "washing machine", "basket"),
    "hallway": ("side table", "shelf", "drawer"),
}
"""Room type -> the fixtures it holds (every room has at least one surface and one container)."""


@dataclass(frozen=True)
class Receptacle:
    """One receptacle instance."""

    name: str
    fixture: Fixture
    room: str

    @property
    def container(self) -> bool:
        return self.fixture.container

    @property
    def preposition(self) -> str:
        """``in`` for containers, ``on`` for surfaces."""
        return "in" if self.fixture.container else "on"


@dataclass(frozen=True)
class Door:
    """A door between two rooms; every door starts closed and can be opened."""

    name: str
    rooms: tuple[str, str]


@dataclass(frozen=True)
class Goal:
    """What the agent must achieve."""

    family: str
    """One of :data:`FAMILIES`."""
    object_type: str
    """The object type the goal is about (any object of that type counts)."""
    destination: str | None
    """The receptacle the objects must end up in (``None`` for ``find``)."""
    count: int = 1
    """How many objects of the type must be there (2 for ``put_two``)."""

    def text(self, world: World) -> str:
        """The goal in words, e.g. ``put a hot apple on countertop 1``."""
        t = self.object_type
        if self.family == "find":
            return f"find {article(t)} {t} and take it"
        dest = world.receptacles[self.destination or ""]
        where = f"{dest.preposition} {dest.name}"
        if self.family == "put_two":
            return f"put two {plural(t)} {where}"
        adjective = {"heat": "hot", "clean": "clean"}.get(self.family)
        words = f"{adjective} {t}" if adjective else t
        return f"put {article(words)} {words} {where}"


def article(words: str) -> str:
    """``a`` or ``an`` before ``words``."""
    return "an" if words[:1] in "aeiou" else "a"


def plural(noun: str) -> str:
    """The plural of an object type name (``knife`` -> ``knives``, ``potato`` -> ``potatoes``)."""
    if noun.endswith("fe"):
        return noun[:-2] + "ves"
    if noun.endswith(("ch", "sh", "s", "x", "o")):
        return noun + "es"
    return noun + "s"


@dataclass(frozen=True)
class Room:
    """One room: its name and its exits, direction -> ``(room, door name or None)``."""

    name: str
    exits: tuple[tuple[str, str, str | None], ...]

    def exit(self, direction: str) -> tuple[str, str | None] | None:
        for d, room, door in self.exits:
            if d == direction:
                return room, door
        return None


@dataclass(frozen=True)
class State:
    """The mutable part of a world, as an immutable value (so the solver can hash it)."""

    room: str
    """The room the agent is in."""
    opened: frozenset[str]
    """Names of the open doors and containers."""
    where: tuple[tuple[str, str], ...]
    """``(object, location)`` per object in a fixed order; location is a receptacle name or
    :data:`CARRIED`."""
    hot: frozenset[str] = frozenset()
    """Objects that have been heated."""
    clean: frozenset[str] = frozenset()
    """Objects that have been cleaned."""

    def location(self, obj: str) -> str:
        return dict(self.where)[obj]

    def move(self, obj: str, to: str) -> State:
        return replace(self, where=tuple((o, to if o == obj else loc) for o, loc in self.where))

    def contents(self, receptacle: str) -> list[str]:
        return [o for o, loc in self.where if loc == receptacle]

    @property
    def carried(self) -> list[str]:
        return self.contents(CARRIED)


@dataclass(frozen=True)
class World:
    """One generated world: static layout, start state and goal."""

    rooms: dict[str, Room]
    receptacles: dict[str, Receptacle]
    doors: dict[str, Door]
    objects: dict[str, ObjectType]
    """Object name -> its type."""
    start: State
    goal: Goal
    family_objects: tuple[str, ...] = field(default=())
    """The objects of the goal's type (the only ones a walkthrough needs to move)."""

    def type_of(self, obj: str) -> str:
        return self.objects[obj].name

    def goal_reached(self, state: State) -> bool:
        """Whether ``state`` satisfies the goal."""
        g = self.goal
        if g.family == "find":
            return any(self.type_of(o) == g.object_type for o in state.carried)
        assert g.destination is not None
        inside = [o for o in state.contents(g.destination) if self.type_of(o) == g.object_type]
        if g.family == "heat":
            inside = [o for o in inside if o in state.hot]
        elif g.family == "clean":
            inside = [o for o in inside if o in state.clean]
        return len(inside) >= g.count
