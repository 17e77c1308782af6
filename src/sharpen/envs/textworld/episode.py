"""One textworld episode, shared by the env (live) and the verifier (replay).

:class:`Episode` turns actions into commands, applies them with
:func:`sharpen.envs.textworld.rules.apply` and keeps the tally. The env and
:class:`~sharpen.envs.textworld.score.TextWorldVerifier` run the same code on the same
regenerated world, so a replayed trajectory gets exactly the env's outcome.

- An **action** is ``act(command)`` with a string ``command``. Any other tool, a missing,
  non-string, empty or multi-line command, or a command the rules reject is invalid:
  explained precisely, nothing changes, but it uses one of the ``max_steps`` turns.
- Reaching the goal state ends the episode (reward 1); after ``max_steps`` turns without it
  the episode is truncated (reward 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sharpen.core.outcome import Outcome
from sharpen.core.trajectory import Action
from sharpen.envs.textworld import rules
from sharpen.envs.textworld.world import State, World

TOOL = "act"
ARGUMENT = "command"
GOAL_REWARD = 1.0
DONE = "You have completed the task!"


def default_max_steps(walkthrough: int) -> int:
    """Turns allowed when ``max_steps`` is not given: three times the walkthrough plus 10."""
    return 3 * walkthrough + 10


def command_of(action: Action) -> tuple[str | None, str | None]:
    """``(command, None)`` for an ``act`` call with a string command, else ``(None, why)``."""
    if action.tool != TOOL:
        return None, (f"Unknown tool {action.tool!r}. The only tool is `{TOOL}`, with one "
                      f"argument `{ARGUMENT}`: a text command such as 'open drawer 1'.")
    if ARGUMENT not in action.arguments:
        got = ", ".join(sorted(action.arguments)) or "none"
        return None, f"`{TOOL}` needs the argument `{ARGUMENT}`; arguments given: {got}."
    raw = action.arguments[ARGUMENT]
    if not isinstance(raw, str):
        return None, f"`{ARGUMENT}` must be a string such as 'look', not {type(raw).__name__}."
    return raw, None


@dataclass
class Episode:
    """The state of one episode on ``world`` (see the module doc)."""

    world: World
    walkthrough: int
    """Length of the shortest solution (for the outcome's efficiency figures)."""
    max_steps: int
    state: State = field(init=False)
    turns: int = 0
    valid: int = 0
    invalid: int = 0
    solved: bool = False

    def __post_init__(self) -> None:
        self.state = self.world.start

    @property
    def done(self) -> bool:
        return self.solved or self.turns >= self.max_steps

    def apply(self, action: Action) -> dict[str, Any]:
        """Apply one action (episode not done). Returns ``invalid`` (the reason, or
        ``None``), ``message`` (what the agent is told) and ``reward``."""
        self.turns += 1
        command, why = command_of(action)
        if command is not None:
            result = rules.apply(self.world, self.state, command)
            if result.valid:
                self.valid += 1
                self.state = result.state
                if self.world.goal_reached(self.state):
                    self.solved = True
                    return {"invalid": None, "message": f"{result.message}\n{DONE}",
                            "reward": GOAL_REWARD}
                return {"invalid": None, "message": result.message, "reward": 0.0}
            why = result.message
        self.invalid += 1
        return {"invalid": why, "message": why, "reward": 0.0}

    def outcome(self) -> Outcome:
        """Success = the goal state was reached; reward 1 or 0; components ``steps`` (turns
        used), ``valid_commands``, ``invalid_commands`` and ``walkthrough`` (the shortest
        solution's length)."""
        goal = self.world.goal.text(self.world)
        evidence = (f"{'reached' if self.solved else 'did not reach'} the goal ({goal}) after "
                    f"{self.turns} turns ({self.invalid} invalid); the shortest walkthrough "
                    f"has {self.walkthrough} commands")
        return Outcome(
            success=self.solved,
            reward=GOAL_REWARD if self.solved else 0.0,
            components={"steps": float(self.turns), "valid_commands": float(self.valid),
                        "invalid_commands": float(self.invalid),
                        "walkthrough": float(self.walkthrough)},
            evidence=evidence,
        )
