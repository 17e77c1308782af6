"""Judgement: the record of one judge's work on one trajectory (or one pair).

A judge's feedback says *what* it concluded; its judgement keeps *how*: the judge and model
that gave it, every model call (prompt and reply), usage and cost, and — when no verdict could
be given — why. A failed judgement is an error of kind ``judge``: it is counted and reported,
never held against the agent, and ``sharpen judge --resume`` tries it again. There is at most
one judgement per (trajectory, other trajectory, judge hash), which is what makes judging
resumable.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from sharpen.core.messages import Message, Usage

JudgementStatus = Literal["ok", "error"]


def _now() -> datetime:
    return datetime.now(UTC)


class JudgeCall(BaseModel):
    """One model call a judge made: the conversation sent and the reply."""

    messages: list[Message]
    """What the judge sent."""
    reply: str
    """The model's reply text."""
    finish_reason: str = "stop"
    """Why generation stopped (``length``: cut at ``max_tokens``)."""


class Judgement(BaseModel):
    """One judge's work on one trajectory, or on a pair (``versus``)."""

    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    """Unique id; the judge's feedback names it as ``call_id``."""
    run_id: str
    """The judged trajectory's run."""
    trajectory_id: str
    """The judged trajectory (the first of a pair)."""
    versus: str = ""
    """The other trajectory of a pairwise judgement; empty otherwise."""
    judge: str
    """The judge's display name (``rubric:helpfulness``)."""
    judge_hash: str
    """Content hash of the judge: its ``{name, args}`` (rubric and prompt included) and model."""
    model: str
    """The judge model's name."""
    status: JudgementStatus
    """``ok``, or ``error`` when no verdict could be given (error kind ``judge``)."""
    error: str | None = None
    """Why there is no verdict (``status == "error"``)."""
    calls: list[JudgeCall] = Field(default_factory=list)
    """Every model call, in order."""
    usage: Usage = Field(default_factory=Usage)
    """Usage summed over the calls (``cost_usd`` ``None`` when unpriced)."""
    seconds: float = 0.0
    """Wall time of the judgement."""
    detail: dict[str, Any] = Field(default_factory=dict)
    """What the judge keeps beyond its feedback (a pairwise judge: the verdict of each order)."""
    created_at: datetime = Field(default_factory=_now)
    """When it was made (UTC)."""
