"""The decisive steps ``sharpen attribute`` stored for a run, read back by a diagnosis: one
``Feedback(source="detector", name="decisive_step")`` per failed trajectory whose corrected
step flipped it (:mod:`sharpen.diagnose.attribution`), tallied by step index and by the stage
of the action the agent took there."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from pydantic import BaseModel, Field

from sharpen.core.trajectory import Action, Trajectory

NAME = "decisive_step"
"""The feedback name of a decisive step."""


class DecisiveSteps(BaseModel):
    """The decisive steps stored for a run by ``sharpen attribute``."""

    trajectories: int = 0
    """Trajectories with a decisive step."""
    by_step: dict[int, int] = Field(default_factory=dict)
    """Step index -> trajectories, by step."""
    by_stage: dict[str, int] = Field(default_factory=dict)
    """Stage of the agent's action at the decisive step -> trajectories (environments that
    declare stages; ``none`` for an action no stage names), most common first."""


class DecisiveTally:
    """Gathers :class:`DecisiveSteps` one trajectory at a time (next to the detectors)."""

    def __init__(self, stage_of: Callable[[Action], str | None] | None = None) -> None:
        self._stage_of = stage_of
        self._steps: Counter[int] = Counter()
        self._stages: Counter[str] = Counter()
        self._n = 0

    def add(self, trajectory: Trajectory) -> None:
        """Count ``trajectory``'s decisive step, if it has one (the newest record counts)."""
        found = [fb for fb in trajectory.feedback
                 if fb.source == "detector" and fb.name == NAME and fb.target.step_index is not None]
        if not found:
            return
        step = found[-1].target.step_index
        assert step is not None
        self._n += 1
        self._steps[step] += 1
        if self._stage_of is not None:
            action = next((s.action for s in trajectory.steps if s.index == step), None)
            self._stages[(self._stage_of(action) if action is not None else None) or "none"] += 1

    def result(self) -> DecisiveSteps | None:
        """The tally; ``None`` when no trajectory had a decisive step."""
        if not self._n:
            return None
        return DecisiveSteps(trajectories=self._n, by_step=dict(sorted(self._steps.items())),
                             by_stage=dict(self._stages.most_common()))
