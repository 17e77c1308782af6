"""TextArenaEnv: single-player TextArena games as multi-turn environments.

The agent plays player 0 of one game from :data:`~sharpen.envs.adapters.textarena_games.GAMES`
through one tool, ``act(action)``: its text is the move in the game's own format (e.g.
``[7]``, ``[A C]``); text without a ``[`` is wrapped in brackets, as TextArena's own
``ActionFormattingWrapper`` does. The game's messages (prompt, board, hints, invalid-move
warnings) are the observations. TextArena's rules apply unchanged: a malformed or illegal move
gets one warning, a second in a row ends the game as a loss.

Outcome: ``success`` = the game ended with TextArena reward 1 (a win) and no invalid-move
loss; ``reward`` = TextArena's reward for player 0 (its partial-completion score on a loss,
0 while the game is unfinished).

Determinism. TextArena draws from Python's *global* ``random`` (``random.seed(seed)`` at
reset, then ``random.randint`` ...). Each :class:`Match` therefore keeps its own copy of the
global RNG state and swaps it in around every call into TextArena (:class:`OwnRandom`), so a
game depends only on its task seed, whatever other episodes run in the same process. The
verifier replays the stored moves through the same code and gets the same outcome.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sharpen.core.errors import UserError
from sharpen.core.messages import ToolSpec
from sharpen.core.outcome import Outcome
from sharpen.core.registry import register
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Action, Trajectory
from sharpen.envs import generation
from sharpen.envs.adapters.optional import available, install_hint, require
from sharpen.envs.adapters.textarena_games import DEFAULT_GAME, GAMES, Game
from sharpen.envs.base import BaseEnvironment, BaseVerifier, EnvInfo, Knob, StepResult
from sharpen.envs.generation import DEFAULT_LIMIT, SPLITS

ENV_NAME = "textarena"

ACT = ToolSpec(
    name="act",
    description="Make one move in the game, written in the game's move format, e.g. [7] or [A C].",
    parameters={
        "type": "object",
        "properties": {"action": {"type": "string", "description": "Your move, e.g. [7]."}},
        "required": ["action"],
    },
    text_argument="action",
    text_hint="To move, reply with your move in the game's format (e.g. [7]) in a ``` block",
)
"""The one tool of the textarena environment."""

DESCRIPTION = (
    "Single-player TextArena games (GuessTheNumber, Mastermind, TowerOfHanoi, FrozenLake), "
    "played move by move with act(action); success = the game is won. Args: game, "
    "difficulty, knobs (the game's own arguments)."
)


class OwnRandom:
    """A private state of Python's global RNG, made current only inside :meth:`active`."""

    def __init__(self, seed: int) -> None:
        self._state = random.Random(f"textarena:{seed}").getstate()

    @contextmanager
    def active(self) -> Iterator[None]:
        """Swap this state in for the global one, and back out (keeping what was drawn)."""
        outer = random.getstate()
        random.setstate(self._state)
        try:
            yield
        finally:
            self._state = random.getstate()
            random.setstate(outer)


def game_of(name: str) -> Game:
    """The supported game ``name``; an unknown one is a :class:`UserError`."""
    if name not in GAMES:
        raise UserError(f"unsupported TextArena game {name!r}",
                        f"use one of {', '.join(GAMES)} (see docs/envs/adapters.md for why others "
                        "are left out)")
    return GAMES[name]


def resolve_knobs(name: str, knobs: dict[str, Any] | None = None,
                  difficulty: str | None = None) -> dict[str, Any]:
    """Full, validated knobs of game ``name``: defaults, then the preset, then ``knobs``."""
    game = game_of(name)
    return generation.resolve_knobs(game.knobs, game.presets, knobs, difficulty,
                                    what=f"TextArena game {name}")


def move_text(raw: str) -> str:
    """The move sent to TextArena: ``raw`` stripped, in brackets if it has none."""
    raw = raw.strip().strip("`").strip()
    return raw if "[" in raw else f"[{raw}]"


class Match:
    """One game of one task, live (env) or replayed (verifier)."""

    def __init__(self, task: TaskSpec) -> None:
        ta = require("textarena")
        self.task = task
        knobs = dict(task.knobs)
        self.game = game_of(knobs.pop("game"))
        self.rng = OwnRandom(task.seed)
        with self.rng.active():
            self.env = ta.make(f"{self.game.name}-v0-raw", **knobs)
            self.env.reset(num_players=1, seed=task.seed)
        self.done = False
        self.moves = 0
        self.reward = 0.0
        self.info: dict[str, Any] = {}

    def observation(self) -> str:
        """What player 0 has been told since the last call (its own moves left out)."""
        with self.rng.active():
            _, messages = self.env.get_observation()
        ta = require("textarena")
        return "\n".join(text.strip() for sender, text, kind in messages
                         if kind != ta.ObservationType.PLAYER_ACTION).strip()

    def play(self, raw: str) -> str:
        """Make one move; the observation that follows (with the result if the game ended)."""
        self.moves += 1
        with self.rng.active():
            done, _ = self.env.step(move_text(raw))
        text = self.observation()
        if done:
            with self.rng.active():
                rewards, game_info = self.env.close()
            self.done = True
            self.reward = float((rewards or {}).get(0, 0.0))
            self.info = dict(game_info.get(0, {}))
            text = f"{text}\n\nGame over: {self.info.get('reason', '')}".strip()
        return text

    @property
    def won(self) -> bool:
        return self.done and self.reward >= 1.0 and not self.info.get("invalid_move", False)

    def outcome(self) -> Outcome:
        """The verdict so far (see the module doc)."""
        if self.done:
            evidence = f"game over after {self.moves} moves: {self.info.get('reason', '')}"
        else:
            evidence = f"the game was not finished after {self.moves} moves"
        return Outcome(success=self.won, reward=self.reward if self.done else 0.0,
                       components={"moves": float(self.moves), "finished": float(self.done),
                                   "game_reward": self.reward},
                       evidence=evidence)


def act_error(action: Action) -> str | None:
    """Why ``action`` is not a valid ``act`` call, or ``None`` if it is."""
    if action.tool != ACT.name:
        return (f"Unknown tool {action.tool!r}. The only tool is `act`, with one argument "
                "`action`: your move in the game's format.")
    if not isinstance(action.arguments.get("action"), str):
        return "`act` needs the argument `action`: your move as a string, e.g. [7]."
    return None


class TextArenaGenerator(generation.PresetKnobs):
    """The :class:`~sharpen.envs.base.Generator` of one game. Tasks are ``(game, knobs,
    seed)``; nothing is drawn until reset (a game needs textarena to be built)."""

    def __init__(self, game: str = DEFAULT_GAME) -> None:
        self.game = game_of(game)
        self.KNOB_SCHEMA = self.game.knobs
        self.PRESET_TABLE = self.game.presets

    def sample(self, knobs: dict[str, Any], seed: int, split: str = "test") -> TaskSpec:
        """The ``seed``-th task of ``split`` at ``knobs`` (the game's knobs)."""
        full = resolve_knobs(self.game.name, knobs)
        task_seed = generation.seed_for(split, seed)
        level = generation.difficulty_of(self.game.presets, full)
        return TaskSpec(env=ENV_NAME, id=f"{self.game.name}/{level}/{task_seed}", seed=task_seed,
                        knobs={"game": self.game.name, **full}, split=generation.as_split(split),
                        metadata={"difficulty": level, "game": self.game.name})

    def reference_moves(self, task: TaskSpec) -> list[str]:
        """Winning moves of ``task``, read from its freshly reset game."""
        return self.game.solve(Match(task).env)

    def is_solvable(self, task: TaskSpec) -> bool:
        """Whether the reference moves win the game."""
        match = Match(task)
        for move in self.game.solve(match.env):
            if match.done:
                break
            match.play(move)
        return match.won


@register("env", "textarena")
class TextArenaEnv(BaseEnvironment):
    """The textarena environment. Constructor args are its serialisable ``{name, args}``:

    - ``game``: one of :data:`GAMES` (default ``GuessTheNumber``);
    - ``difficulty``: ``easy``, ``medium`` or ``hard``;
    - ``knobs``: overrides of the game's own arguments (e.g. ``{"max_number": 30}``).
    """

    def __init__(self, game: str = DEFAULT_GAME, difficulty: str = "easy",
                 knobs: dict[str, Any] | None = None) -> None:
        self.game = game_of(game)
        self.difficulty = difficulty
        self.knob_values = resolve_knobs(game, knobs, difficulty)
        self.generator = TextArenaGenerator(game)
        self.tools = [ACT]
        self._match: Match | None = None
        self._steps = 0

    async def reset(self, task: TaskSpec) -> tuple[str, dict[str, Any]]:
        """Start the game of ``task``: its prompt and board, and info ``game``, ``difficulty``."""
        if task.env != ENV_NAME:
            raise UserError(f"task {task.id!r} belongs to env {task.env!r}, not {ENV_NAME!r}",
                            "run it with its own environment")
        self._match = Match(task)
        self._steps = 0
        text = (f"{self._match.observation()}\n\nMake one move per reply with the `act` tool: reply "
                f"with just your move in a code block, e.g.\n```\n{self._match.game.move_example}\n```")
        return text, {"game": self._match.game.name, "difficulty": task.metadata.get("difficulty")}

    async def step(self, action: Action) -> StepResult:
        """Apply one action (see the module doc)."""
        match = self._match
        if match is None:
            raise RuntimeError("TextArenaEnv.step called before reset")
        self._steps += 1
        if match.done:
            return StepResult(observation="The game is over; no more moves are accepted.",
                              terminated=True, info={"invalid": True, "reason": "game over"})
        why = act_error(action)
        if why is not None:
            return StepResult(observation=why, info={"invalid": True, "reason": why})
        text = match.play(action.arguments["action"])
        return StepResult(observation=text, reward=match.reward if match.done else 0.0,
                          terminated=match.done,
                          info={"moves": match.moves, "finished": match.done, "won": match.won})

    async def outcome(self) -> Outcome:
        """The verdict so far; before any reset, a failure."""
        if self._match is None:
            return Outcome(success=False, evidence="no episode")
        return self._match.outcome()

    def reference_actions(self, task: TaskSpec) -> list[Action]:
        """The winning moves of ``task`` as ``act`` actions (the ``reference`` agent's hook)."""
        return [Action(tool=ACT.name, arguments={"action": m})
                for m in self.generator.reference_moves(task)]

    async def close(self) -> None:
        """Drop the game."""
        self._match = None

    def describe(self) -> EnvInfo:
        """Name, the game's knobs, presets, task counts, tools."""
        note = "" if available("textarena") else f" (needs {install_hint('textarena')})"
        knobs = [Knob(name="game", type="choice", default=DEFAULT_GAME, choices=list(GAMES),
                      help="the TextArena game"), *self.generator.knobs()]
        return EnvInfo(name=ENV_NAME, description=DESCRIPTION + note, knobs=knobs,
                       difficulties=list(self.game.presets),
                       task_counts={s: DEFAULT_LIMIT for s in SPLITS},
                       tools=[t.name for t in self.tools])

    def list_tasks(self, split: str | None = None, limit: int | None = None,
                   seed: int = 0) -> list[TaskSpec]:
        """``limit`` (default 50) tasks of the game at the env's knobs; the ``i``-th task of a
        split has the ``i``-th distinct index drawn from ``random.Random(seed)``;
        ``split=None`` takes train, val and test in turn."""
        return generation.list_generated(self.generator, self.knob_values, split, limit, seed)


@register("verifier", "textarena")
class TextArenaVerifier(BaseVerifier):
    """Takes the env's arguments (none matter: the task carries game and knobs) and replays
    the stored valid ``act`` moves through a fresh game with the task's seed."""

    def __init__(self, game: str = DEFAULT_GAME, difficulty: str = "easy",
                 knobs: dict[str, Any] | None = None) -> None:
        self.game = game

    async def score(self, trajectory: Trajectory) -> Outcome:
        """The Outcome the environment gave (see the module doc)."""
        match = Match(trajectory.task)
        for step in trajectory.steps:
            if match.done:
                break
            if step.action is not None and act_error(step.action) is None:
                match.play(step.action.arguments["action"])
        return match.outcome()
