"""Power: how many tasks × epochs it takes to detect a difference δ between two agents.

The model (documented in docs/evaluation.md, "Power"). Two agents A and B are run on the
same ``T`` tasks, ``E`` epochs each, and compared by the mean over tasks of the per-task
difference of success rates ``d_t = p̂_B,t − p̂_A,t`` (the paired comparison of
:mod:`sharpen.stats.paired`). Each attempt is Bernoulli with per-attempt variance
``σ² = p(1 − p)``; a share ``ρ`` of it (the intra-task correlation, ICC) is between tasks
(some tasks are easy, some hard) and ``1 − ρ`` within a task (epoch-to-epoch noise). ``r``
is the correlation of the two agents' per-task rates (how much pairing on the same tasks
cancels task difficulty). Then::

    Var(d_t) = 2σ² · [ (1 − r)·ρ + (1 − ρ)/E ]
    MDE(T, E) = (z_{1−α/2} + z_{power}) · sqrt(Var(d_t) / T)
    T(δ, E)   = ceil( (z_{1−α/2} + z_{power})² · Var(d_t) / δ² )

Where the numbers come from:

- **conservative** (no pilot): ``p = 0.5`` (largest Bernoulli variance), ``ρ = 1`` (epochs
  buy nothing) and ``r = 0`` (pairing buys nothing): ``Var(d_t) = 0.5``, the classical
  two-proportion sample size. Any real design needs at most this many tasks.
- **pilot run**: ``p`` is the pilot's success rate smoothed as ``(c + 1)/(n + 2)`` (so a
  0% pilot does not claim zero variance); ``ρ`` is estimated from the pilot's epochs
  (between-task variance of the rates less their sampling noise, over the total). With one
  epoch per task ``ρ`` cannot be separated from noise, and from a small pilot (fewer than
  :data:`MIN_PILOT_TASKS` tasks with several epochs, or fewer than
  :data:`MIN_PILOT_OUTCOMES` successes or failures) the estimate is too noisy to lean on —
  a low ``ρ`` credits epochs as if they were new tasks — so ``ρ`` is set to 1 then, and the
  plan says why. ``r`` stays 0: one
  run says nothing about how a second agent's successes line up with it, so the plan is
  conservative about pairing; ``sharpen compare`` then measures the real paired variance.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel

from sharpen.stats.intervals import z_quantile
from sharpen.stats.taskdata import TaskTable

EPOCH_OPTIONS = (1, 2, 3, 5, 10)
"""Epochs per task shown in a plan."""

MIN_PILOT_TASKS = 10
"""Tasks with two or more valid trials a pilot needs before its ICC is used."""
MIN_PILOT_OUTCOMES = 5
"""Successes, and failures, a pilot needs before its ICC is used."""


def z_sum(alpha: float = 0.05, power: float = 0.8) -> float:
    """``z_{1−α/2} + z_{power}`` (≈ 2.80 at α = 0.05, 80% power)."""
    return z_quantile(1 - alpha / 2) + z_quantile(power)


class PowerModel(BaseModel):
    """The variance model behind every power number (see the module doc)."""

    p: float
    """Per-attempt success probability the variance is computed at."""
    icc: float
    """Intra-task correlation ρ: share of the per-attempt variance that is between tasks."""
    agent_correlation: float = 0.0
    """Correlation r of the two agents' per-task rates (0: pairing assumed to buy nothing)."""
    source: str
    """``conservative`` or ``pilot run <id>``."""
    pilot_tasks: int = 0
    """Scored tasks of the pilot (0 for the conservative model)."""
    pilot_epochs: int = 0
    """Most valid trials per task in the pilot."""
    note: str = ""
    """What was assumed because the pilot could not tell."""

    def diff_variance(self, epochs: int) -> float:
        """``Var(d_t)`` of one task's paired difference with ``epochs`` trials per agent."""
        s2 = self.p * (1 - self.p)
        return 2 * s2 * ((1 - self.agent_correlation) * self.icc + (1 - self.icc) / max(epochs, 1))

    def mde(self, tasks: int, epochs: int, alpha: float = 0.05, power: float = 0.8) -> float:
        """Smallest difference (as a rate, 0..1) detectable with ``tasks`` × ``epochs``."""
        if tasks <= 0:
            return 1.0
        return min(1.0, z_sum(alpha, power) * math.sqrt(self.diff_variance(epochs) / tasks))

    def tasks_needed(
        self, effect: float, epochs: int, alpha: float = 0.05, power: float = 0.8
    ) -> int:
        """Tasks needed to detect ``effect`` (a rate, e.g. 0.1 for 10 points)."""
        if effect <= 0:
            raise ValueError("the effect to detect must be positive")
        return max(2, math.ceil(z_sum(alpha, power) ** 2 * self.diff_variance(epochs) / effect**2))


def conservative_model() -> PowerModel:
    """The no-pilot model: ``p = 0.5``, ``ρ = 1``, ``r = 0``."""
    return PowerModel(p=0.5, icc=1.0, source="conservative",
                      note="no pilot run: p = 0.5, epochs and pairing not credited")


def icc_estimate(n: np.ndarray, c: np.ndarray) -> float | None:
    """The intra-task correlation of per-task counts: the between-task variance of the
    rates, less their sampling noise, over between + within (the within-task variance
    estimated by ``c(n−c)/(n(n−1))`` on tasks with two or more trials). ``None`` when no
    task has two trials or nothing varies."""
    multi = n >= 2
    if len(n) < 2 or not multi.any():
        return None
    w = np.where(multi, c * (n - c) / np.maximum(n * (n - 1), 1), 0.0)
    within = float(w[multi].mean())
    w = np.where(multi, w, within)
    between = max(0.0, float((c / n).var(ddof=1)) - float(np.mean(w / n)))
    total = between + within
    return None if total <= 0 else between / total


def pilot_model(table: TaskTable) -> PowerModel:
    """The model estimated from a pilot run's per-task counts (conservative if it has fewer
    than two scored tasks)."""
    mask = table.valid
    n, c = table.n[mask], table.c[mask]
    t = len(n)
    if t < 2:
        return conservative_model()
    p = (float(c.sum()) + 1) / (float(n.sum()) + 2)
    multi = int((n >= 2).sum())
    successes, failures = int(c.sum()), int((n - c).sum())
    estimate = icc_estimate(n, c)
    note = ""
    if multi == 0:
        note = "pilot has one epoch per task: within-task noise unknown, epochs not credited"
    elif multi < MIN_PILOT_TASKS or min(successes, failures) < MIN_PILOT_OUTCOMES:
        note = (f"pilot too small to estimate the ICC ({multi} tasks with epochs, "
                f"{successes} successes, {failures} failures): epochs not credited")
    elif estimate is None:
        note = "pilot tasks show no variation: ICC assumed 1"
    icc = float(estimate) if not note and estimate is not None else 1.0
    return PowerModel(p=p, icc=icc, source=f"pilot run {table.run_id}", pilot_tasks=t,
                      pilot_epochs=int(n.max()), note=note)


class PlanRow(BaseModel):
    """Tasks needed at one number of epochs."""

    epochs: int
    """Epochs per task (per agent)."""
    tasks: int
    """Tasks needed."""
    attempts: int
    """``tasks × epochs`` per agent."""


class PowerPlan(BaseModel):
    """What it takes to detect ``effect``, and what a chosen design can detect."""

    effect: float
    """Difference to detect, as a rate (0.1 = 10 points)."""
    alpha: float
    """Two-sided significance level."""
    power: float
    """Probability of detecting ``effect`` if it is real."""
    model: PowerModel
    """The variance model used."""
    rows: list[PlanRow]
    """Tasks needed per epochs option."""
    tasks: int | None = None
    """The chosen (or current) number of tasks, if any."""
    epochs: int | None = None
    """The chosen (or current) epochs, if any."""
    mde: float | None = None
    """Smallest detectable effect of the chosen design."""
    enough: bool | None = None
    """Whether the chosen design reaches ``power`` for ``effect``."""


def plan(
    model: PowerModel, effect: float, *, alpha: float = 0.05, power: float = 0.8,
    tasks: int | None = None, epochs: int | None = None,
) -> PowerPlan:
    """A :class:`PowerPlan` for ``effect``; with ``tasks``/``epochs`` it also judges that
    design (``enough``)."""
    options = sorted(set(EPOCH_OPTIONS) | ({epochs} if epochs else set()))
    rows = []
    for e in options:
        t = model.tasks_needed(effect, e, alpha, power)
        rows.append(PlanRow(epochs=e, tasks=t, attempts=t * e))
    out = PowerPlan(effect=effect, alpha=alpha, power=power, model=model, rows=rows)
    if tasks is not None:
        e = epochs or 1
        out.tasks, out.epochs = tasks, e
        out.mde = model.mde(tasks, e, alpha, power)
        out.enough = tasks >= model.tasks_needed(effect, e, alpha, power)
    return out
