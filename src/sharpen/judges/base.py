"""The Judge contract: a Protocol, a base class, and :data:`JUDGE`, the kind the registry
builds judges under.

A judge reads a finished trajectory and returns feedback about it (``source="judge"``); it is
versioned by its content — its ``{name, args}`` ref (a rubric judge's rubric is an arg), its
prompt and its model. A judge that cannot give a verdict (an unparseable reply, a refusal, a
transcript that does not fit) raises :class:`JudgeError`: that is a ``judge`` error, counted
and reported, never the agent's failure.

Optional members, with the defaults :class:`BaseJudge` gives (read through :func:`judge_info`):

- ``prompt: str`` — the judge's prompt template, hashed into its version (default ``""``);
- ``title: str`` — a display name (default: the registered name);
- ``pairwise: bool`` — the judge compares two trajectories of the same task through
  ``judge_pair(a, b, model)`` instead of scoring one (default ``False``);
- ``needs_reference: bool`` — the judge reads the environment's reference solution, which the
  caller puts in ``trajectory.task.metadata["reference"]`` (default ``False``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from sharpen.core.feedback import Feedback
from sharpen.core.registry import Kind
from sharpen.core.trajectory import Trajectory
from sharpen.models.base import ChatModel

REFERENCE = "reference"
"""``TaskSpec.metadata`` key under which a judge with ``needs_reference`` finds the
environment's reference solution."""


class JudgeError(RuntimeError):
    """The judge could not give a verdict on this trajectory (error kind ``judge``)."""


class Verdict(BaseModel):
    """What a judge may return instead of a bare feedback list: the feedback and what the
    judge wants kept beside it (stored as the judgement's ``detail``)."""

    feedback: list[Feedback]
    detail: dict[str, Any] = Field(default_factory=dict)


@runtime_checkable
class Judge(Protocol):
    """Scores trajectories with a model."""

    async def judge(self, trajectory: Trajectory, model: ChatModel) -> list[Feedback] | Verdict:
        """Feedback on ``trajectory`` (``source="judge"``), one record per criterion; the
        caller stores it. Raise :class:`JudgeError` when no verdict can be given."""
        ...


class BaseJudge(ABC):
    """Base class for judges: define :meth:`judge` (or, pairwise, :meth:`judge_pair`)."""

    prompt: str = ""
    """The prompt template (part of the judge's version)."""
    title: str = ""
    """Display name; empty means the registered name."""
    pairwise: bool = False
    """Whether the judge compares pairs (:meth:`judge_pair`)."""
    needs_reference: bool = False
    """Whether the judge reads ``trajectory.task.metadata["reference"]``."""

    @abstractmethod
    async def judge(self, trajectory: Trajectory, model: ChatModel) -> list[Feedback] | Verdict:
        """Feedback on ``trajectory`` (see :meth:`Judge.judge`)."""

    async def judge_pair(self, a: Trajectory, b: Trajectory, model: ChatModel) -> Verdict:
        """A pairwise verdict on ``a`` and ``b`` (same task): feedback on ``a`` with
        ``versus=b.id``. Only pairwise judges define it."""
        raise JudgeError(f"{type(self).__name__} is not a pairwise judge")


class JudgeInfo(BaseModel):
    """A judge's optional members, defaults filled in (see the module doc)."""

    prompt: str = ""
    title: str = ""
    pairwise: bool = False
    needs_reference: bool = False


def judge_info(judge: Judge) -> JudgeInfo:
    """The optional members of ``judge`` (a plug-in need not define them)."""
    return JudgeInfo(**{k: getattr(judge, k) for k in JudgeInfo.model_fields
                        if hasattr(judge, k)})


def as_verdict(result: list[Feedback] | Verdict) -> Verdict:
    """A judge's return value as a :class:`Verdict`."""
    return result if isinstance(result, Verdict) else Verdict(feedback=list(result))


JUDGE: Kind[Judge] = Kind("judge", Judge, "sharpen.judges.base.BaseJudge")
"""The judge plug-in kind."""
