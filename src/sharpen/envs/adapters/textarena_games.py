"""The TextArena games the ``textarena`` env supports: knobs, presets and reference solvers.

Only single-player games that run offline are listed. Checked with textarena 0.7.4:

- supported (each has a reference solver and is tested): ``GuessTheNumber``, ``Mastermind``,
  ``TowerOfHanoi``, ``FrozenLake``;
- not supported: the word games (``Wordle``, ``Hangman``, ``WordLadder``, ...) try to
  download NLTK corpora at reset, which fails offline; the multi-player games need opponents
  (several need an LLM jury over the network) and are left out.

A game is built with ``textarena.make(f"{GAME}-v0-raw", **knobs)``: the ``-raw`` variant has
no wrappers (the env renders observations itself) and the knobs are the game class's own
constructor arguments, so a preset is just a set of them. A reference solver reads the hidden
state of a game freshly reset with the task's seed and returns the moves that win it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sharpen.envs.base import Knob


@dataclass(frozen=True)
class Game:
    """One supported TextArena game."""

    name: str
    """TextArena game name (the id without ``-v0``)."""
    description: str
    """One line for people."""
    knobs: tuple[Knob, ...]
    """The game class's constructor arguments that the env exposes."""
    presets: dict[str, dict[str, Any]]
    """``easy`` / ``medium`` / ``hard`` knob values."""
    solve: Callable[[Any], list[str]]
    """Winning moves, from the unwrapped game just after a seeded reset."""
    move_example: str
    """An example move in the game's format."""


def _guess_the_number(env: Any) -> list[str]:
    return [f"[{env.state.game_state['game_number']}]"]


def _mastermind(env: Any) -> list[str]:
    return ["[" + " ".join(map(str, env.state.game_state["secret_code"])) + "]"]


def _hanoi(env: Any) -> list[str]:
    moves: list[str] = []

    def move(n: int, source: str, target: str, spare: str) -> None:
        if n:
            move(n - 1, source, spare, target)
            moves.append(f"[{source} {target}]")
            move(n - 1, spare, target, source)

    move(env.num_disks, "A", "C", "B")
    return moves


_STEPS = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


def _frozen_lake(env: Any) -> list[str]:
    """BFS from the player to the goal around the holes."""
    gs = env.state.game_state
    grid, start, goal = gs["grid"], tuple(gs["player_pos"]), tuple(gs["goal_pos"])
    prev: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        if cell == goal:
            path = []
            link = prev[cell]
            while link is not None:
                cell, name = link
                path.append(f"[{name}]")
                link = prev[cell]
            return path[::-1]
        for name, (dr, dc) in _STEPS.items():
            nxt = (cell[0] + dr, cell[1] + dc)
            if (0 <= nxt[0] < len(grid) and 0 <= nxt[1] < len(grid) and nxt not in prev
                    and grid[nxt[0]][nxt[1]] != "H"):
                prev[nxt] = (cell, name)
                queue.append(nxt)
    return []


def _int(name: str, default: int, low: int, high: int, help: str) -> Knob:
    return Knob(name=name, type="int", default=default, low=low, high=high, help=help)


GAMES: dict[str, Game] = {g.name: g for g in (
    Game(
        name="GuessTheNumber", move_example="[7]", solve=_guess_the_number,
        description="guess a hidden number; each wrong guess is answered 'higher' or 'lower'",
        knobs=(_int("min_number", 1, 0, 1000, "smallest possible number"),
               _int("max_number", 20, 1, 10000, "largest possible number"),
               _int("max_turns", 10, 1, 100, "guesses allowed")),
        presets={"easy": {"min_number": 1, "max_number": 20, "max_turns": 10},
                 "medium": {"min_number": 1, "max_number": 50, "max_turns": 10},
                 "hard": {"min_number": 1, "max_number": 100, "max_turns": 8}},
    ),
    Game(
        name="Mastermind", move_example="[1 2 3 4]", solve=_mastermind,
        description="find a hidden code from black/white peg feedback",
        knobs=(_int("code_length", 4, 2, 8, "digits in the code"),
               _int("num_numbers", 6, 2, 12, "each digit is from 1 to this"),
               _int("max_turns", 20, 1, 100, "guesses allowed"),
               Knob(name="duplicate_numbers", type="bool", default=False,
                    help="whether the code may repeat a digit")),
        presets={"easy": {"code_length": 4, "num_numbers": 6, "max_turns": 20, "duplicate_numbers": False},
                 "medium": {"code_length": 4, "num_numbers": 8, "max_turns": 30, "duplicate_numbers": False},
                 "hard": {"code_length": 6, "num_numbers": 12, "max_turns": 50, "duplicate_numbers": True}},
    ),
    Game(
        name="TowerOfHanoi", move_example="[A C]", solve=_hanoi,
        description="move a tower of disks from peg A to peg C (no seed-dependent state)",
        knobs=(_int("num_disks", 3, 1, 8, "disks on the tower"),
               _int("max_turns", 14, 1, 600, "moves allowed")),
        presets={"easy": {"num_disks": 3, "max_turns": 14}, "medium": {"num_disks": 4, "max_turns": 30},
                 "hard": {"num_disks": 5, "max_turns": 62}},
    ),
    Game(
        name="FrozenLake", move_example="[down]", solve=_frozen_lake,
        description="walk a frozen lake to the goal without falling into a hole",
        knobs=(_int("size", 4, 3, 10, "side of the square lake"),
               _int("num_holes", 3, 0, 40, "holes in the ice"),
               Knob(name="randomize_start_goal", type="bool", default=False,
                    help="start in a random corner, goal in the opposite one")),
        presets={"easy": {"size": 4, "num_holes": 3, "randomize_start_goal": False},
                 "medium": {"size": 5, "num_holes": 6, "randomize_start_goal": False},
                 "hard": {"size": 6, "num_holes": 10, "randomize_start_goal": True}},
    ),
)}
"""The supported games, by name."""

DEFAULT_GAME = "GuessTheNumber"
