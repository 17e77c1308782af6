"""TextWorldVerifier: re-scores a stored textworld trajectory offline.

It regenerates the world from ``trajectory.task`` (seed and knobs), replays the stored
actions in order through the same :class:`~sharpen.envs.textworld.episode.Episode` rules the
environment uses, stops where the environment would stop (goal reached or ``max_steps``
turns) and returns the same :class:`Outcome` the environment's ``outcome()`` returned.
"""

from __future__ import annotations

from typing import Any

from sharpen.core.outcome import Outcome
from sharpen.core.registry import register
from sharpen.core.trajectory import Trajectory
from sharpen.envs.base import BaseVerifier
from sharpen.envs.textworld.env import new_episode


@register("verifier", "textworld")
class TextWorldVerifier(BaseVerifier):
    """Takes the same arguments as :class:`~sharpen.envs.textworld.env.TextWorldEnv`, so the
    env's own ``{name, args}`` builds its verifier; only ``max_steps`` matters here."""

    def __init__(
        self, difficulty: str = "easy", knobs: dict[str, Any] | None = None,
        max_steps: int | None = None, show_admissible: bool = False,
    ) -> None:
        self.max_steps = max_steps

    async def score(self, trajectory: Trajectory) -> Outcome:
        """The Outcome of replaying ``trajectory``'s actions (see the module doc)."""
        ep = new_episode(trajectory.task, self.max_steps)
        for step in trajectory.steps:
            if ep.done:
                break
            if step.action is not None:
                ep.apply(step.action)
        return ep.outcome()
