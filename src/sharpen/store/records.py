"""What the store answers about runs and attempts: :class:`RunRecord`, the run status
vocabulary and an attempt's :data:`Verdict`. Typed data only: how a verdict or a rate is
drawn on a screen is the CLI's and the viewer's business."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import BaseModel

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.manifest import RunManifest
from sharpen.store.owner import RunOwner

RunStatus = Literal["running", "finished", "interrupted", "failed"]
"""``running`` from creation (and again on resume); ``finished`` when every (task, epoch) is
saved; ``interrupted`` after Ctrl-C or SIGTERM (written by the runner), or when a reader
finds the owning process gone (SIGKILL, a crash: see :meth:`Store.settle_orphans`);
``failed`` when the run itself (not one episode) broke."""

RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
"""Every valid :data:`RunStatus`."""

Verdict = Literal["pass", "fail", "excluded"]
"""One attempt as a success rate sees it: ``pass`` (it counts and succeeded), ``fail`` (it
counts and did not), ``excluded`` (no outcome, or an error that is not the agent's; see
:data:`sharpen.store.queries.COUNTED`)."""


class RunRecord(BaseModel):
    """One run as stored, with counts, cost and time aggregated from its trajectories (no
    trajectory is loaded to compute them). What :meth:`Store.get_run`,
    :meth:`Store.list_runs` and the viewer's run listing return."""

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
    owner: RunOwner | None = None
    """The process that last set the run ``running`` (``None`` for runs stored before owners
    were recorded)."""
    n_tasks: int = 0
    """Distinct tasks the run was created with (a task listed twice counts once)."""
    n_trajectories: int = 0
    """Trajectories saved so far."""
    n_success: int = 0
    """Of the counted ones, how many succeeded."""
    n_counted: int = 0
    """Of those, how many count toward the success rate: an outcome whose ``error_kind`` is
    ``None`` or ``"agent"`` (env/infra/judge/user_sim failures are excluded)."""
    cost_usd: float | None = 0.0
    """Dollars over the saved trajectories; ``None`` when any of them has an unknown price."""
    first_started_at: datetime | None = None
    """When the earliest saved trajectory started (``None`` without trajectories)."""
    last_ended_at: datetime | None = None
    """When the latest saved trajectory ended (``None`` while none has)."""

    @property
    def id(self) -> str:
        """The run id (``manifest.run_id``)."""
        return self.manifest.run_id

    @property
    def env(self) -> str:
        """The environment's name."""
        return self.manifest.env.name

    @property
    def agent_hash(self) -> str:
        """The evaluated AgentSpec's hash."""
        return self.manifest.agent_hash

    @property
    def agent_name(self) -> str:
        """The evaluated AgentSpec's name."""
        return self.agent.name

    @property
    def model_label(self) -> str:
        """The model as people name it: the ref's name, with its ``model`` arg when it has one
        (``openai:gpt-4o-mini``)."""
        served = self.agent.model.args.get("model")
        return f"{self.agent.model.name}:{served}" if served else self.agent.model.name

    @property
    def epochs(self) -> int:
        """Epochs per task (``manifest.epochs``)."""
        return self.manifest.epochs

    @property
    def n_expected(self) -> int:
        """Trajectories a complete run holds: tasks × epochs."""
        return self.n_tasks * self.manifest.epochs

    @property
    def complete(self) -> bool:
        """Every (task, epoch) has a stored trajectory."""
        return self.n_trajectories >= self.n_expected

    @property
    def n_errors(self) -> int:
        """Saved trajectories that do not count (``n_trajectories - n_counted``)."""
        return self.n_trajectories - self.n_counted

    @property
    def success_rate(self) -> float | None:
        """``n_success / n_counted``; ``None`` when nothing counts yet."""
        return self.n_success / self.n_counted if self.n_counted else None

    @property
    def wall_seconds(self) -> float | None:
        """The run's wall time: the summary's ``wall_seconds`` once the runner wrote it, else
        the span from the first trajectory's start to the last one's end (``None`` when there
        is neither)."""
        wall = (self.summary or {}).get("wall_seconds")
        if wall is not None:
            return float(wall)
        if self.first_started_at is None or self.last_ended_at is None:
            return None
        return (self.last_ended_at - self.first_started_at).total_seconds()
