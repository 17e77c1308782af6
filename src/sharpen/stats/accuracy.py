"""Accuracy of one run: mean success, pass@k and pass^k for k = 1..n, with intervals.

Reduce per task first, then across tasks: each task with at least one valid trial gets its
success rate ``c/n`` (and its per-task pass@k / pass^k), and the run's number is the
equal-weight mean over tasks. Intervals are over tasks (or clusters of tasks):

- **mean success** — Wilson when every task contributes exactly one valid trial and no task
  shares a cluster (then the tasks are independent Bernoulli trials); otherwise the
  cluster-robust standard error of :mod:`sharpen.stats.clustered`, turned into a Wilson
  interval at the effective sample size it implies (``wilson-deff``), so that epochs of one
  task (and tasks of one cluster) are not counted as independent evidence;
- **pass@k, pass^k for k ≥ 2** — the same ``wilson-deff`` interval over the per-task
  estimates: each task's pass@k is one number in [0, 1], and their mean over tasks has the
  clustered SE like any mean of per-task values. (A percentile bootstrap over tasks was
  tried first and rejected: it covers the truth far less than 95% of the time when
  pass^k is rare — 28% in a simulation with pass^4 ≈ 1%, where ``wilson-deff`` covers 93%;
  docs/evaluation.md has the table.) For k = 1 both equal mean success and reuse its
  interval.

A task with fewer than ``k`` valid trials has no pass@k; it is left out of that k's mean
and counted in ``n_undefined`` — never extrapolated.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel

from sharpen.stats.clustered import cluster_codes, clustered_interval, clustered_mean
from sharpen.stats.intervals import Interval, wilson
from sharpen.stats.passk import per_task_table
from sharpen.stats.taskdata import CLUSTER_KEY, TaskTable


class Metric(BaseModel):
    """One accuracy number over tasks."""

    name: str
    """``success``, ``pass@k`` or ``pass^k``."""
    k: int
    """Trials per task the metric is about (1 for mean success)."""
    value: float | None
    """Mean over the tasks where it is defined; ``None`` when no task is."""
    ci: Interval | None
    """Confidence interval over tasks; ``None`` when ``value`` is."""
    n_tasks: int
    """Tasks included (defined)."""
    n_undefined: int
    """Scored tasks left out because they have fewer than ``k`` valid trials."""


class Accuracy(BaseModel):
    """Mean success and the pass@k / pass^k curves of one run."""

    success: Metric
    """Mean over tasks of the per-task success rate (equals pass@1 and pass^1)."""
    pass_at_k: list[Metric]
    """pass@k for k = 1..max valid trials per task."""
    pass_hat_k: list[Metric]
    """pass^k (all k trials succeed) for the same k."""
    n_tasks: int
    """Scored tasks (at least one valid trial)."""
    n_unscored: int
    """Tasks with attempts but no valid trial (every attempt errored)."""
    n_clusters: int
    """Independent units the intervals are over (clusters, or tasks)."""
    cluster_key: str | None
    """``"cluster"`` when tasks declare ``metadata["cluster"]``, else ``None`` (task = cluster)."""
    trials_min: int
    """Fewest valid trials of a scored task."""
    trials_max: int
    """Most valid trials of a scored task."""


def _empty(name: str, k: int, undefined: int = 0) -> Metric:
    return Metric(name=name, k=k, value=None, ci=None, n_tasks=0, n_undefined=undefined)


def success_metric(table: TaskTable, level: float = 0.95) -> Metric:
    """Mean success over scored tasks with its interval (see the module doc)."""
    mask = table.valid
    t = int(mask.sum())
    if t == 0:
        return _empty("success", 1)
    n, c = table.n[mask], table.c[mask]
    codes = table.clusters(mask)
    g = int(codes.max()) + 1
    if bool(np.all(n == 1)) and g == t:
        ci = wilson(int(c.sum()), t, level)
        value = float(c.sum()) / t
    else:
        est = clustered_mean(c / n, codes)
        ci = clustered_interval(est, level, max_n=float(n.sum()))
        value = est.mean
    return Metric(name="success", k=1, value=value, ci=ci, n_tasks=t, n_undefined=0)


def _curve(table: TaskTable, kind: str, k_max: int, success: Metric, level: float) -> list[Metric]:
    name = "pass@{k}" if kind == "at" else "pass^{k}"
    mask = table.valid
    out = [success.model_copy(update={"name": name.format(k=1)})]
    if k_max < 2:
        return out
    n = table.n[mask]
    values, defined = per_task_table(n, table.c[mask], k_max, kind=kind)
    keys = [k for k, m in zip(table.cluster_keys(), mask, strict=True) if m]
    t = int(mask.sum())
    for k in range(2, k_max + 1):
        d = defined[:, k - 1]
        if not d.any():
            out.append(_empty(name.format(k=k), k, t))
            continue
        est = clustered_mean(values[d, k - 1], cluster_codes([x for x, y in zip(keys, d, strict=True) if y]))
        ci = clustered_interval(est, level, max_n=float(n[d].sum()))
        out.append(Metric(name=name.format(k=k), k=k, value=est.mean, ci=ci, n_tasks=int(d.sum()),
                          n_undefined=t - int(d.sum())))
    return out


def accuracy(table: TaskTable, level: float = 0.95) -> Accuracy:
    """The :class:`Accuracy` of ``table``."""
    mask = table.valid
    t = int(mask.sum())
    success = success_metric(table, level)
    k_max = int(table.n.max()) if t else 0
    codes = table.clusters(mask) if t else np.zeros(0, dtype=np.int64)
    return Accuracy(
        success=success,
        pass_at_k=_curve(table, "at", k_max, success, level) if t else [],
        pass_hat_k=_curve(table, "hat", k_max, success, level) if t else [],
        n_tasks=t,
        n_unscored=int((~mask).sum()),
        n_clusters=int(codes.max()) + 1 if t else 0,
        cluster_key=CLUSTER_KEY if table.declares_clusters else None,
        trials_min=int(table.n[mask].min()) if t else 0,
        trials_max=k_max,
    )
