"""Feedback: one append-only record from any source about any target."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field

FeedbackSource = Literal[
    "execution", "verifier", "judge", "human", "simulated_user", "safety", "teacher", "critic",
    "detector",
]
TargetKind = Literal["run", "trajectory", "step", "span"]


class FeedbackTarget(BaseModel):
    """What a piece of feedback is about: a run, a trajectory, a step, or a text span in a step."""

    kind: TargetKind
    """Granularity of the target."""
    run_id: str | None = None
    """Run id (always set for run targets)."""
    trajectory_id: str | None = None
    """Trajectory id (trajectory, step and span targets)."""
    step_index: int | None = None
    """Step index (step and span targets)."""
    span: tuple[int, int] | None = None
    """Character range ``[start, end)`` in the step's text (span targets)."""


def _now() -> datetime:
    return datetime.now(UTC)


class Feedback(BaseModel):
    """One feedback record. Records are never updated in place: an edit is a new record whose
    ``supersedes`` names the old one, so history is kept."""

    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    """Unique id."""
    source: FeedbackSource
    """Where it came from."""
    target: FeedbackTarget
    """What it is about."""
    name: str = "note"
    """What is measured, e.g. ``"tests_passed"`` or ``"helpfulness"``."""
    value: float | bool | str | None = None
    """The value: a number, a bool, a label or free text."""
    rationale: str = ""
    """Why (e.g. the failing assertion, the judge's reasoning, the annotator's comment)."""
    author: str = "sharpen"
    """Who gave it: a person, a model ref or a component name."""
    created_at: datetime = Field(default_factory=_now)
    """When it was given (UTC)."""
    supersedes: str | None = None
    """Id of the record this one edits, if any."""
    versus: str | None = None
    """For a pairwise verdict: the other trajectory. ``value`` is then this trajectory's
    share of the preference (1 preferred, 0.5 tie, 0 the other preferred)."""
    call_id: str | None = None
    """The stored model call that produced it (a judge's :class:`~sharpen.core.judgement.
    Judgement`), so a score can be traced to the prompt and reply behind it."""
