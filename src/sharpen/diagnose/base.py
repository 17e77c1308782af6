"""The Detector contract: a Protocol, a base class, and :data:`DETECTOR`, the kind the registry
builds detectors under.

A detector is a rule over one stored trajectory: pure, synchronous, no model. It returns its
findings as feedback (``source="detector"``, ``name`` = the detector's registered name,
``value`` ``True`` or a count, ``rationale`` = what was seen), each targeting the step (or
span) it is about; an empty list means nothing was found. It is versioned by its content —
its ``{name, args}`` ref — so :func:`sharpen.diagnose.run.diagnose_run` can give each finding
a deterministic id and a re-run stores nothing twice.

Optional members, with the defaults :class:`BaseDetector` gives (read through
:func:`detector_info`):

- ``title: str`` — a display name (default: the registered name);
- ``description: str`` — one line saying what it looks for (default ``""``);
- ``needs_messages: bool`` — whether :meth:`Detector.detect` reads ``Step.messages`` (default
  ``True``); a detector that reads only actions, observations, info and usage says ``False``,
  and a diagnosis whose detectors all say so never loads the messages, the heaviest part of a
  stored step.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Protocol, runtime_checkable

from pydantic import BaseModel

from sharpen.core.feedback import Feedback, FeedbackTarget, TargetKind
from sharpen.core.registry import Kind
from sharpen.core.trajectory import Trajectory


@runtime_checkable
class Detector(Protocol):
    """Finds one failure mode in trajectories."""

    def detect(self, trajectory: Trajectory) -> list[Feedback]:
        """Findings on ``trajectory`` (``source="detector"``), each targeting the step it is
        about; the caller stores them. Pure: the same trajectory gives the same findings."""
        ...


class BaseDetector(ABC):
    """Base class for detectors: define :meth:`detect`; :meth:`finding` builds a record."""

    name: str = ""
    """The name :meth:`finding` puts on records (the built-ins: their registered name);
    :func:`~sharpen.diagnose.run.diagnose_run` stamps the name the detector was built under
    anyway."""
    title: str = ""
    """Display name; empty means the registered name."""
    description: str = ""
    """One line: what the detector looks for."""
    needs_messages: bool = True
    """Whether :meth:`detect` reads ``Step.messages`` (see the module doc)."""

    @abstractmethod
    def detect(self, trajectory: Trajectory) -> list[Feedback]:
        """Findings on ``trajectory`` (see :meth:`Detector.detect`)."""

    def finding(self, trajectory: Trajectory, step: int | None, rationale: str,
                value: float | bool = True, span: tuple[int, int] | None = None) -> Feedback:
        """A finding of this detector about ``step`` of ``trajectory`` (the whole trajectory
        when ``step`` is ``None``; a span of the step's text with ``span``)."""
        name = self.name or type(self).__name__
        kind: TargetKind = "trajectory" if step is None else ("span" if span is not None else "step")
        return Feedback(
            source="detector", name=name, value=value, rationale=rationale,
            author=f"detector:{name}",
            target=FeedbackTarget(kind=kind, run_id=trajectory.run_id,
                                  trajectory_id=trajectory.id, step_index=step, span=span),
        )


class DetectorInfo(BaseModel):
    """A detector's optional members, defaults filled in (see the module doc)."""

    title: str = ""
    description: str = ""
    needs_messages: bool = True


def detector_info(detector: Detector) -> DetectorInfo:
    """The optional members of ``detector`` (a plug-in need not define them)."""
    return DetectorInfo(**{k: getattr(detector, k) for k in DetectorInfo.model_fields
                           if hasattr(detector, k)})


DETECTOR: Kind[Detector] = Kind("detector", Detector, "sharpen.diagnose.base.BaseDetector")
"""The detector plug-in kind."""
