"""RunSummary: the numbers a person reads at the end of a run."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel
from rich.table import Table

from sharpen.core.trajectory import Trajectory
from sharpen.stats.intervals import wilson_interval
from sharpen.stats.rounding import interval_text


class RunSummary(BaseModel):
    """Aggregate of a run's trajectories. Errored attempts (``infra``, ``env``, ``judge``,
    ``user_sim``) are excluded from the success rate and counted separately."""

    run_id: str
    """Run id."""
    n_tasks: int
    """Distinct tasks attempted."""
    n_trajectories: int
    """Trajectories stored."""
    n_counted: int
    """Trajectories that count toward success (completed, or failed by the agent)."""
    n_success: int
    """Successful trajectories."""
    success_rate: float | None
    """n_success / n_counted (``None`` when nothing counted)."""
    ci_low: float
    """Lower end of the 95% Wilson interval."""
    ci_high: float
    """Upper end of the 95% Wilson interval."""
    errors: dict[str, int]
    """Excluded attempts by error kind."""
    invalid_actions: int
    """Replies that held no valid action."""
    infra_retries: int
    """Model calls retried after infra errors."""
    input_tokens: int
    """Prompt tokens."""
    output_tokens: int
    """Completion tokens."""
    cost_usd: float | None
    """Dollars; ``None`` when any call's price was unknown."""
    wall_seconds: float
    """Wall time of this invocation of the run (a resume reports its own)."""

    @classmethod
    def of(cls, run_id: str, trajectories: Iterable[Trajectory], wall_seconds: float) -> RunSummary:
        """The summary of ``trajectories``."""
        builder = SummaryBuilder()
        for t in trajectories:
            builder.add(t)
        return builder.build(run_id, wall_seconds)

    def table(self, title: str = "Run summary") -> Table:
        """A Rich table for the terminal."""
        table = Table(title=title, show_header=False, title_justify="left")
        table.add_column(style="bold")
        table.add_column()
        if self.success_rate is None:
            rate = "n/a (no attempt completed)"
        else:
            rate = (
                f"{self.n_success}/{self.n_counted} = {self.success_rate:.1%}  "
                "(95% Wilson CI "
                f"{interval_text(self.ci_low, self.ci_high, sep='–', suffix='%', brackets=False)})"
            )
        table.add_row("success", rate)
        table.add_row("tasks × attempts", f"{self.n_tasks} tasks, {self.n_trajectories} trajectories")
        errs = ", ".join(f"{k}: {v}" for k, v in sorted(self.errors.items())) or "none"
        table.add_row("excluded (errors)", errs)
        table.add_row("invalid actions", str(self.invalid_actions))
        table.add_row("infra retries", str(self.infra_retries))
        table.add_row("tokens", f"{self.input_tokens:,} in / {self.output_tokens:,} out")
        table.add_row("cost", "unknown (no price for this model)" if self.cost_usd is None
                      else f"${self.cost_usd:.4f}")
        table.add_row("wall time", f"{self.wall_seconds:.1f} s")
        table.add_row("run id", self.run_id)
        return table


class SummaryBuilder:
    """Accumulates trajectories one at a time (only their counts are kept, never their
    messages) and builds a :class:`RunSummary`."""

    def __init__(self) -> None:
        self.tasks: set[str] = set()
        self.n = self.counted = self.success = self.invalid = self.retries = 0
        self.input_tokens = self.output_tokens = 0
        self.cost: float | None = 0.0
        self.errors: dict[str, int] = {}

    def add(self, t: Trajectory) -> None:
        """Count one trajectory."""
        self.n += 1
        self.tasks.add(t.task.hash())
        self.invalid += t.invalid_actions
        self.retries += t.infra_retries
        self.input_tokens += t.usage.input_tokens
        self.output_tokens += t.usage.output_tokens
        if self.cost is not None:
            self.cost = None if t.usage.cost_usd is None else self.cost + t.usage.cost_usd
        o = t.outcome
        if o is None or not o.counts:
            kind = o.error_kind if o is not None and o.error_kind else "unscored"
            self.errors[kind] = self.errors.get(kind, 0) + 1
            return
        self.counted += 1
        self.success += int(o.success)

    def build(self, run_id: str, wall_seconds: float) -> RunSummary:
        """The summary of everything added so far."""
        lo, hi = wilson_interval(self.success, self.counted)
        return RunSummary(
            run_id=run_id, n_tasks=len(self.tasks), n_trajectories=self.n,
            n_counted=self.counted, n_success=self.success,
            success_rate=self.success / self.counted if self.counted else None,
            ci_low=lo, ci_high=hi, errors=dict(self.errors), invalid_actions=self.invalid,
            infra_retries=self.retries, input_tokens=self.input_tokens,
            output_tokens=self.output_tokens, cost_usd=self.cost, wall_seconds=wall_seconds,
        )
