"""Words for Gymnasium envs: observation renderers, action names, action parsing, a planner.

The toy-text envs that ship with Gymnasium have integer or tuple observations and coloured
``ansi`` renderings; the renderers here describe them in plain text a language model can
read (no colour codes). :func:`discrete_action` reads a ``Discrete`` action from text, and
:func:`tabular_plan` finds the shortest winning action sequence of a deterministic env with a
transition table ``P`` (the toy-text ones), which the ``reference`` agent plays.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from typing import Any

ACTION_NAMES: dict[str, list[str]] = {
    "FrozenLake": ["left", "down", "right", "up"],
    "CliffWalking": ["up", "right", "down", "left"],
    "Taxi": ["south", "north", "east", "west", "pickup", "dropoff"],
    "Blackjack": ["stick", "hit"],
}
"""Built-in names of the toy-text envs' Discrete actions, in index order."""

SUCCESS_RULES: dict[str, str] = {"CliffWalking": "terminated"}
"""Envs whose goal gives no positive reward: reaching it (termination) is the success."""

INTROS: dict[str, str] = {
    "FrozenLake": ("Walk across a frozen lake from the start S to the goal G without falling "
                   "into a hole H. Reaching G gives reward 1."),
    "CliffWalking": ("Walk from the start (bottom left) to the goal T (bottom right) without "
                     "stepping off the cliff C, which costs -100 and sends you back to the start. "
                     "Every step costs -1."),
    "Taxi": ("Drive the taxi T to the passenger, pick them up, drive to the destination and drop "
             "them off (+20). Each step costs -1; an illegal pickup or dropoff costs -10. Walls "
             "are | in the map; ':' is passable."),
    "Blackjack": ("Play one hand of blackjack against the dealer: hit to take a card, stick to "
                  "stop. Get closer to 21 than the dealer without going over (+1 win, -1 loss)."),
}
"""One paragraph introducing each toy-text env."""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _frozen_lake(obs: int, env: Any) -> str:
    desc = env.unwrapped.desc
    ncol = desc.shape[1]
    row, col = divmod(int(obs), ncol)
    lines = []
    for r, line in enumerate(desc):
        cells = [c.decode() for c in line]
        if r == row:
            cells[col] = "A"
        lines.append(" ".join(cells))
    return ("\n".join(lines) + f"\nYou (A) are at row {row}, column {col} (row 0 is the top). "
            "S = start, F = frozen, H = hole, G = goal.")


def _cliff_walking(obs: int, env: Any) -> str:
    nrow, ncol = env.unwrapped.shape
    row, col = divmod(int(obs), ncol)
    cliff = env.unwrapped._cliff
    lines = []
    for r in range(nrow):
        cells = ["A" if (r, c) == (row, col) else "T" if (r, c) == (nrow - 1, ncol - 1)
                 else "C" if cliff[r, c] else "." for c in range(ncol)]
        lines.append(" ".join(cells))
    return ("\n".join(lines) + f"\nYou (A) are at row {row}, column {col} (row 0 is the top). "
            ". = safe, C = cliff, T = goal.")


def _taxi(obs: int, env: Any) -> str:
    u = env.unwrapped
    taxi_row, taxi_col, pass_idx, dest_idx = u.decode(int(obs))
    names = "RGYB"
    rows = [[c.decode() for c in line] for line in u.desc]
    rows[taxi_row + 1][2 * taxi_col + 1] = "T"
    where = ("in the taxi" if pass_idx == 4
             else f"waiting at {names[pass_idx]} {u.locs[pass_idx]}")
    return ("\n".join("".join(r) for r in rows)
            + f"\nTaxi T at (row {taxi_row}, column {taxi_col}). Passenger: {where}. "
              f"Destination: {names[dest_idx]} {u.locs[dest_idx]}.")


def _blackjack(obs: tuple[int, int, int], env: Any) -> str:
    total, dealer, ace = (int(x) for x in obs)
    return (f"Your hand totals {total}{' (with a usable ace)' if ace else ''}. "
            f"The dealer shows {'an ace' if dealer == 1 else dealer}.")


RENDERERS: dict[str, Callable[[Any, Any], str]] = {
    "FrozenLake": _frozen_lake, "CliffWalking": _cliff_walking, "Taxi": _taxi,
    "Blackjack": _blackjack,
}
"""Built-in observation renderers of the toy-text envs, by env name (id without version)."""


def render(base: str, obs: Any, env: Any) -> str:
    """``obs`` of ``env`` in words: a built-in renderer, a ``str`` observation as it is, the
    env's ``ansi`` rendering without colour codes, else ``str(obs)``."""
    if base in RENDERERS:
        return RENDERERS[base](obs, env)
    if isinstance(obs, str):
        return obs
    if getattr(env, "render_mode", None) == "ansi":
        return _ANSI.sub("", str(env.render())).strip("\n")
    return str(obs)


def discrete_action(raw: str, space: Any, names: list[str]) -> tuple[int | None, str | None]:
    """``(index, None)`` for text naming an action of the ``Discrete`` ``space`` (an index in
    range or one of ``names``), else ``(None, why)``."""
    word = raw.strip().strip("`'\"[]().").strip().lower()
    start, n = int(space.start), int(space.n)
    valid = f"one of {', '.join(names)} or an index {start}..{start + n - 1}" if names else \
        f"an index {start}..{start + n - 1}"
    if word in [x.lower() for x in names]:
        return start + [x.lower() for x in names].index(word), None
    if re.fullmatch(r"-?\d+", word) and start <= int(word) < start + n:
        return int(word), None
    shown = raw if len(raw) <= 40 else raw[:40] + "..."
    return None, f"Unknown action {shown!r}. Use {valid}."


def tabular_plan(env: Any, start: Any, rule: str) -> list[int] | None:
    """The shortest action sequence from state ``start`` to a winning termination (reward >
    0, or any termination when ``rule == "terminated"``) in ``env.P``; ``None`` if the env
    has no table, a transition is random, or no such sequence exists."""
    table = getattr(env, "P", None)
    if not isinstance(table, dict) or not str(start).isdigit() or int(start) not in table:
        return None
    start = int(start)
    prev: dict[Any, tuple[Any, int] | None] = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        for action, outcomes in sorted(table[state].items()):
            if len(outcomes) != 1 or outcomes[0][0] != 1.0:
                return None
            _, nxt, reward, terminated = outcomes[0]
            if terminated and (rule == "terminated" or reward > 0):
                plan = [action]
                link = prev[state]
                while link is not None:
                    state, a = link
                    plan.append(a)
                    link = prev[state]
                return plan[::-1]
            if not terminated and nxt not in prev:
                prev[nxt] = (state, action)
                queue.append(nxt)
    return None
