"""Cost next to accuracy: tokens, dollars and wall time per task and per success, and the
cost–accuracy Pareto frontier across runs.

Definitions (docs/evaluation.md, "Cost"):

- *per task* is per attempt — one epoch of one task — so runs with different epochs
  compare; every attempt counts, errored ones included (they cost money too);
- *per success* is the total over all attempts divided by the successes: what one solved
  task costs, failures paid for;
- dollars are **unknown** (``None``) when any attempt's price was unknown: a partial sum
  would understate the cost, and sharpen never shows an unknown cost as $0;
- time is episode wall time (``ended_at − started_at``), summed over attempts; the run's
  own wall time (with concurrency) is in the run summary.

The frontier's cost axis is dollars per task when every run's dollars are known and at
least one is non-zero, otherwise tokens per task (local models cost $0, which would put
every run at one x).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from sharpen.stats.taskdata import TaskTable


class CostSummary(BaseModel):
    """What a run spent."""

    attempts: int
    """Attempts (trajectories), errored ones included."""
    successes: int
    """Successful valid trials."""
    input_tokens: int
    """Prompt tokens."""
    output_tokens: int
    """Completion tokens."""
    tokens_per_task: float | None
    """(Input + output) tokens per attempt."""
    tokens_per_success: float | None
    """(Input + output) tokens per success; ``None`` without successes."""
    cost_usd: float | None
    """Dollars; ``None`` (unknown) when any attempt's price was unknown."""
    cost_unknown_attempts: int
    """Attempts whose price was unknown."""
    cost_per_task: float | None
    """Dollars per attempt (``None`` when unknown)."""
    cost_per_success: float | None
    """Dollars per success (``None`` when unknown or no success)."""
    episode_seconds: float
    """Summed episode wall time."""
    seconds_per_task: float | None
    """Episode seconds per attempt."""
    seconds_per_success: float | None
    """Episode seconds per success."""


def _div(x: float | None, n: int) -> float | None:
    return None if x is None or n <= 0 else x / n


def cost_summary(table: TaskTable) -> CostSummary:
    """The :class:`CostSummary` of a run."""
    attempts = int(table.attempts.sum())
    successes = int(table.c.sum())
    tokens = int(table.input_tokens.sum() + table.output_tokens.sum())
    unknown = int(table.cost_unknown.sum())
    dollars = None if unknown else float(table.cost_usd.sum())
    seconds = float(table.seconds.sum())
    return CostSummary(
        attempts=attempts, successes=successes, input_tokens=int(table.input_tokens.sum()),
        output_tokens=int(table.output_tokens.sum()), tokens_per_task=_div(tokens, attempts),
        tokens_per_success=_div(tokens, successes), cost_usd=dollars, cost_unknown_attempts=unknown,
        cost_per_task=_div(dollars, attempts), cost_per_success=_div(dollars, successes),
        episode_seconds=seconds, seconds_per_task=_div(seconds, attempts),
        seconds_per_success=_div(seconds, successes),
    )


class FrontierPoint(BaseModel):
    """One run on the cost–accuracy plane."""

    run_id: str
    """Run id."""
    label: str
    """Short label for the plot (A, B, ... or the run id)."""
    accuracy: float
    """Mean success."""
    ci_low: float
    """Lower end of its interval."""
    ci_high: float
    """Upper end of its interval."""
    cost_per_task: float | None
    """Dollars per attempt (``None`` when unknown)."""
    tokens_per_task: float
    """Tokens per attempt."""
    on_frontier: bool = False
    """Not dominated: no other run is at most as costly and at least as accurate (and
    strictly better in one)."""


class Frontier(BaseModel):
    """Runs on the cost–accuracy plane, with the Pareto-optimal ones marked."""

    axis: Literal["cost_usd", "tokens"]
    """What the cost axis measures, per attempt."""
    points: list[FrontierPoint]
    """Every run, in the order given."""


def frontier(points: list[FrontierPoint]) -> Frontier:
    """Mark the Pareto frontier of ``points`` (lower cost, higher accuracy)."""
    known = all(p.cost_per_task is not None for p in points)
    axis: Literal["cost_usd", "tokens"] = (
        "cost_usd" if known and any((p.cost_per_task or 0) > 0 for p in points) else "tokens"
    )

    def x(p: FrontierPoint) -> float:
        if axis == "tokens":
            return p.tokens_per_task
        if p.cost_per_task is None:  # the cost axis is chosen only when every point has a cost
            raise AssertionError(f"run {p.run_id} has no cost on the cost axis")
        return float(p.cost_per_task)

    out = []
    for p in points:
        dominated = any(
            x(q) <= x(p) and q.accuracy >= p.accuracy and (x(q) < x(p) or q.accuracy > p.accuracy)
            for q in points if q is not p
        )
        out.append(p.model_copy(update={"on_frontier": not dominated}))
    return Frontier(axis=axis, points=out)
