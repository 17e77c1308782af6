"""What the store answers about a run: :class:`RunRecord` and the run status vocabulary."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import BaseModel

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.manifest import RunManifest

RunStatus = Literal["running", "finished", "interrupted", "failed"]
"""``running`` from creation (and again on resume); ``finished`` when every (task, epoch) is
saved; ``interrupted`` after Ctrl-C or a kill the runner noticed; ``failed`` when the run
itself (not one episode) broke."""

RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
"""Every valid :data:`RunStatus`."""


class RunRecord(BaseModel):
    """One run as stored, with counts aggregated from its trajectories (no trajectory is
    loaded to compute them)."""

    manifest: RunManifest
    """The run's manifest, exactly as :meth:`Store.create_run` received it."""
    agent: AgentSpec
    """The AgentSpec the run evaluated (as first saved under its hash)."""
    status: RunStatus
    """Where the run stands."""
    summary: dict[str, Any] | None = None
    """Summary the runner wrote with its last status change (``None`` until then)."""
    created_at: datetime
    """Creation time (UTC); equals ``manifest.created_at``."""
    n_trajectories: int = 0
    """Trajectories saved so far."""
    n_success: int = 0
    """Of those, how many succeeded."""
    n_counted: int = 0
    """Of those, how many count toward the success rate: an outcome whose ``error_kind`` is
    ``None`` or ``"agent"`` (env/infra/judge/user_sim failures are excluded)."""

    @property
    def id(self) -> str:
        """The run id (``manifest.run_id``)."""
        return self.manifest.run_id

    @property
    def success_rate(self) -> float | None:
        """``n_success / n_counted``; ``None`` when nothing counts yet."""
        return self.n_success / self.n_counted if self.n_counted else None
