"""Outcome: how an episode ended and whom to blame."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

ErrorKind = Literal["agent", "env", "infra", "judge", "user_sim"]
"""Who failed. Only ``agent`` failures count against the agent; the others are excluded from
success rates and reported separately."""


class Outcome(BaseModel):
    """The verdict on one trajectory."""

    success: bool
    """Whether the task was solved (always ``False`` when the episode errored)."""
    reward: float = 0.0
    """Scalar reward (for code: the fraction of hidden tests passed)."""
    components: dict[str, float] = Field(default_factory=dict)
    """Named reward components, e.g. ``{"tests_passed": 5, "tests_total": 7}``."""
    error_kind: ErrorKind | None = None
    """``None`` when the episode reached a verdict; otherwise who caused the abnormal end."""
    error: str | None = None
    """Human-readable description of the error, if any."""
    evidence: str = ""
    """Verifier evidence (which tests failed and why), truncated."""

    @property
    def counts(self) -> bool:
        """Whether this attempt counts toward the agent's success rate."""
        return self.error_kind in (None, "agent")
