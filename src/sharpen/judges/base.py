"""The Judge contract: a Protocol, a base class, and :data:`JUDGE`, the kind the registry
builds judges under.

A judge reads a finished trajectory and returns feedback about it; it is versioned by its
content (its ``{name, args}`` ref, which holds its rubric and prompt). A judge that cannot give
a verdict (an unparseable reply, a refusal) raises :class:`JudgeError`: that is a ``judge``
error, never the agent's failure.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Protocol, runtime_checkable

from sharpen.core.feedback import Feedback
from sharpen.core.registry import Kind
from sharpen.core.trajectory import Trajectory
from sharpen.models.base import ChatModel


class JudgeError(RuntimeError):
    """The judge could not give a verdict on this trajectory."""


@runtime_checkable
class Judge(Protocol):
    """Scores trajectories with a model."""

    async def judge(self, trajectory: Trajectory, model: ChatModel) -> list[Feedback]:
        """Feedback on ``trajectory`` (``source="judge"``), one record per criterion; the
        caller stores it. Raise :class:`JudgeError` when no verdict can be given."""
        ...


class BaseJudge(ABC):
    """Base class for judges: define :meth:`judge`."""

    @abstractmethod
    async def judge(self, trajectory: Trajectory, model: ChatModel) -> list[Feedback]:
        """Feedback on ``trajectory`` (see :meth:`Judge.judge`)."""


JUDGE: Kind[Judge] = Kind("judge", Judge, "sharpen.judges.base.BaseJudge")
"""The judge plug-in kind."""
