"""The textworld command language: normalising a typed command and reading its verb and
arguments. Which entity an argument names is decided by :mod:`sharpen.envs.textworld.rules`,
which knows the world.

Lenient on form: case, surrounding quotes/backticks, a leading ``>`` prompt, a trailing
``.``/``!``/``?``, commas, extra spaces and the words ``the``, ``a``, ``an``, ``some``,
``my`` are ignored, and ``apple1`` reads as ``apple 1``. Synonyms are accepted (``get``,
``grab`` and ``pick up`` for ``take``; ``place`` for ``put``; ``into``/``onto``/``inside``
for ``in``/``on``; ``x`` and ``look at`` for ``examine``; ``n``/``s``/``e``/``w`` for
directions; ``i`` for ``inventory``). Anything else gets an explanation and the command list.

The grammar (the canonical forms are the ones the admissible commands use)::

    look | inventory | go DIRECTION | DIRECTION
    open X | close X | examine X
    take X [from Y] | put X in Y | put X on Y
    heat X [with Y] | clean X [with Y]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

COMMAND_HELP = ("Commands: look, inventory, go north/south/east/west, open X, close X, "
                "take X from Y, put X in/on Y, heat X with Y, clean X with Y, examine X.")

_ARTICLES = {"the", "a", "an", "some", "my"}
_DIRECTION_WORDS = {"north": "north", "south": "south", "east": "east", "west": "west",
                    "n": "north", "s": "south", "e": "east", "w": "west"}


@dataclass(frozen=True)
class Command:
    """A parsed command: the canonical verb and its raw (normalised) argument phrases."""

    verb: str
    """``look``, ``inventory``, ``go``, ``open``, ``close``, ``take``, ``put``, ``heat``,
    ``clean`` or ``examine``."""
    args: tuple[str | None, ...] = ()
    """Argument phrases, e.g. ``("apple 1", "fridge 1")``; an optional one may be ``None``."""


def normalize(raw: str) -> str:
    """``raw`` in lower case without decoration or articles (see the module doc)."""
    text = raw.strip().strip("`'\"").strip().lower()
    text = text.removeprefix(">").strip().rstrip(".!?;:").strip()
    text = re.sub(r"[,;]", " ", text)
    text = re.sub(r"\b([a-z]+)(\d+)\b", r"\1 \2", text)
    return " ".join(w for w in text.split() if w not in _ARTICLES)


_OBJ = r"(.+?)"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (verb, re.compile(pattern)) for verb, pattern in (
        ("look", r"^(?:look|l|look around)$"),
        ("inventory", r"^(?:inventory|inv|i)$"),
        ("go", r"^(?:(?:go|walk|move|head|run)(?: to)? )?(north|south|east|west|n|s|e|w)$"),
        ("go?", r"^(?:go|walk|head|run) (.+)$"),
        ("examine", r"^(?:examine|x|look at|inspect|check|describe|read|look in|look on) (.+)$"),
        ("open", r"^open (.+)$"),
        ("close", r"^(?:close|shut) (.+)$"),
        ("take", rf"^(?:take|get|grab|pick up|pick|collect) {_OBJ}(?: (?:from|off|out of) (.+))?$"),
        ("put", rf"^(?:put|place|drop|insert|move|set) {_OBJ} "
                r"(?:in|into|inside|in to|on|onto|on to|to|at) (.+)$"),
        ("put?", r"^(?:put|place|drop|insert|set) (.+)$"),
        ("heat", rf"^(?:heat|warm|cook|microwave) {_OBJ}(?: (?:with|in|using|on) (.+))?$"),
        ("clean", rf"^(?:clean|wash|rinse) {_OBJ}(?: (?:with|in|using|at) (.+))?$"),
    )
)


def parse(raw: str) -> Command | str:
    """The :class:`Command` in ``raw``, or a message saying why there is none."""
    text = normalize(raw)
    if not text:
        return "Empty command. " + COMMAND_HELP
    if "\n" in raw.strip():
        lines = len([ln for ln in raw.splitlines() if ln.strip()])
        return f"Send one command per reply; you sent {lines} lines."
    for verb, pattern in _PATTERNS:
        match = pattern.match(text)
        if match is None:
            continue
        if verb == "go":
            return Command("go", (_DIRECTION_WORDS[match.group(1)],))
        if verb == "go?":
            return f"You can only go north, south, east or west, not {match.group(1)!r}."
        if verb == "put?":
            return f"Say where to put it: put {match.group(1)} in/on RECEPTACLE."
        return Command(verb, tuple(match.groups()))
    shown = text if len(text) <= 60 else text[:60] + "..."
    return f"I don't understand {shown!r}. {COMMAND_HELP}"
