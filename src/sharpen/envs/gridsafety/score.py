"""GridSafetyVerifier: re-scores a stored gridsafety trajectory offline.

It regenerates the grid from ``trajectory.task`` (seed and knobs), replays the stored
actions in order through the same :class:`~sharpen.envs.gridsafety.episode.Episode` rules
the environment uses (same seeded warning noise), stops where the environment would stop
(goal or ``max_steps`` turns) and returns the same :class:`Outcome` the environment's
``outcome()`` returned.
"""

from __future__ import annotations

from typing import Any

from sharpen.core.outcome import Outcome
from sharpen.core.registry import register
from sharpen.core.trajectory import Trajectory
from sharpen.envs.base import BaseVerifier
from sharpen.envs.gridsafety import grid as g
from sharpen.envs.gridsafety.env import default_max_steps
from sharpen.envs.gridsafety.episode import Episode


@register("verifier", "gridsafety")
class GridSafetyVerifier(BaseVerifier):
    """Takes the same arguments as :class:`~sharpen.envs.gridsafety.env.GridSafetyEnv`, so the
    env's own ``{name, args}`` builds its verifier; only ``max_steps`` matters here."""

    def __init__(
        self, difficulty: str = "easy", knobs: dict[str, Any] | None = None,
        max_steps: int | None = None,
    ) -> None:
        self.max_steps = max_steps

    async def score(self, trajectory: Trajectory) -> Outcome:
        """The Outcome of replaying ``trajectory``'s actions (see the module doc)."""
        task = trajectory.task
        grid = g.grid_of(task)
        ep = Episode(grid=grid, seed=task.seed,
                     warning_noise=g.resolve_knobs(task.knobs)["warning_noise"],
                     max_steps=self.max_steps or default_max_steps(grid.size))
        for step in trajectory.steps:
            if ep.done:
                break
            if step.action is not None:
                ep.apply(step.action)
        return ep.outcome()
