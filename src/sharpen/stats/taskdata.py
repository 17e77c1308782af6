"""TaskTable: one run reduced to one row per task — the input of every statistic.

A :class:`TaskTable` is built from a :class:`~sharpen.store.aggregate.RunAggregate`, which
comes either from SQL (:func:`sharpen.store.aggregate.run_aggregate`, what the CLI uses) or
from Trajectory objects (:func:`aggregate_trajectories`, same numbers; tests and callers
holding trajectories in memory use it).

Vocabulary used by every stats module:

- an *attempt* is one trajectory (one epoch of one task);
- a *valid trial* is a counted attempt (``Outcome.counts``: a verdict, or the agent's own
  failure); ``n[t]`` valid trials of task ``t``, ``c[t]`` of them successful;
- a task with ``n[t] == 0`` (every attempt errored) is *unscored*: it is left out of every
  rate and reported;
- a task's *cluster* is ``TaskSpec.metadata["cluster"]`` when the task declares one, else
  the task itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from sharpen.core.trajectory import Trajectory
from sharpen.stats.clustered import cluster_codes
from sharpen.store.aggregate import CalibrationBin, RunAggregate, TaskAggregate, confidence_bin

CLUSTER_KEY = "cluster"
"""The ``TaskSpec.metadata`` key that puts tasks in one cluster."""


@dataclass(frozen=True)
class TaskTable:
    """Per-task arrays of one run (row ``t`` of every array is the same task); the fields
    mirror :class:`~sharpen.store.aggregate.TaskAggregate` / ``RunAggregate``."""

    run_id: str
    """The run."""
    task_hash: list[str]
    """``TaskSpec.hash()`` per task (what paired comparisons match on)."""
    task_id: list[str]
    """Task ids, for people."""
    metadata: list[dict[str, Any]]
    """``TaskSpec.metadata`` per task (cluster, perturbation, base_task, ...)."""
    attempts: np.ndarray
    """Attempts per task, errored ones included."""
    n: np.ndarray
    """Valid trials per task."""
    c: np.ndarray
    """Successful valid trials per task."""
    input_tokens: np.ndarray
    """Prompt tokens per task (all attempts)."""
    output_tokens: np.ndarray
    """Completion tokens per task (all attempts)."""
    cost_usd: np.ndarray
    """Known dollars per task."""
    cost_unknown: np.ndarray
    """Attempts with an unknown price per task."""
    seconds: np.ndarray
    """Summed episode wall time per task."""
    errors: dict[str, int] = field(default_factory=dict)
    """Excluded attempts of the run by error kind."""
    calibration: list[CalibrationBin] = field(default_factory=list)
    """Calibration bins of the run's stated confidences."""
    safety_trajectories: int = 0
    """Attempts with safety feedback."""
    safety_records: int = 0
    """Safety feedback records."""

    @classmethod
    def from_aggregate(cls, agg: RunAggregate) -> TaskTable:
        """The table of ``agg`` (tasks in ``agg.tasks`` order)."""
        ts = agg.tasks

        def arr(name: str, dtype: type) -> np.ndarray:
            return np.array([getattr(t, name) for t in ts], dtype=dtype)

        return cls(
            run_id=agg.run_id, task_hash=[t.task_hash for t in ts], task_id=[t.task_id for t in ts],
            metadata=[t.metadata for t in ts], attempts=arr("attempts", np.int64),
            n=arr("counted", np.int64), c=arr("successes", np.int64),
            input_tokens=arr("input_tokens", np.int64), output_tokens=arr("output_tokens", np.int64),
            cost_usd=arr("cost_usd", float), cost_unknown=arr("cost_unknown", np.int64),
            seconds=arr("episode_seconds", float), errors=dict(agg.errors),
            calibration=sorted(agg.calibration, key=lambda b: b.bin),
            safety_trajectories=agg.safety_trajectories, safety_records=agg.safety_records,
        )

    def __len__(self) -> int:
        return len(self.task_hash)

    @property
    def valid(self) -> np.ndarray:
        """Mask of tasks with at least one valid trial."""
        return self.n > 0

    @property
    def rates(self) -> np.ndarray:
        """Per-task success rate ``c / n`` (0 where ``n == 0``; mask with :attr:`valid`)."""
        return np.where(self.n > 0, self.c / np.maximum(self.n, 1), 0.0)

    def cluster_keys(self) -> list[str]:
        """Each task's cluster key (the task hash when it declares none)."""
        return [str(m[CLUSTER_KEY]) if CLUSTER_KEY in m else f"task:{h}"
                for m, h in zip(self.metadata, self.task_hash, strict=True)]

    @cached_property
    def cluster_index(self) -> np.ndarray:
        """Cluster codes of all tasks (computed once)."""
        return cluster_codes(self.cluster_keys())

    def clusters(self, mask: np.ndarray | None = None) -> np.ndarray:
        """Cluster codes ``0..G-1`` of the tasks selected by ``mask`` (default: all),
        renumbered densely in order of first appearance."""
        codes = self.cluster_index if mask is None else self.cluster_index[np.asarray(mask, dtype=bool)]
        if len(codes) == 0:
            return codes
        _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
        rank = np.argsort(np.argsort(first))
        return rank[inverse.reshape(-1)].astype(np.int64)

    @property
    def declares_clusters(self) -> bool:
        """Whether any task declares a cluster key."""
        return any(CLUSTER_KEY in m for m in self.metadata)

    def perturbations(self) -> list[str | None]:
        """Each task's declared perturbation (``metadata["perturbation"]``), else ``None``."""
        return [None if m.get("perturbation") is None else str(m["perturbation"])
                for m in self.metadata]


def aggregate_trajectories(run_id: str, trajectories: Iterable[Trajectory]) -> RunAggregate:
    """The :class:`RunAggregate` of in-memory trajectories: the same numbers SQL computes
    (tasks ordered by hash; safety feedback read from ``Trajectory.feedback``)."""
    by_task: dict[str, dict[str, Any]] = {}
    agg = RunAggregate(run_id=run_id)
    bins: dict[int, list[float]] = {}
    for t in trajectories:
        h = t.task.hash()
        d = by_task.setdefault(h, {
            "task_hash": h, "task_id": t.task.id, "metadata": dict(t.task.metadata), "attempts": 0,
            "counted": 0, "successes": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0,
            "cost_unknown": 0, "episode_seconds": 0.0,
        })
        d["attempts"] += 1
        d["input_tokens"] += t.usage.input_tokens
        d["output_tokens"] += t.usage.output_tokens
        if t.usage.cost_usd is None:
            d["cost_unknown"] += 1
        else:
            d["cost_usd"] += t.usage.cost_usd
        d["episode_seconds"] += t.wall_seconds
        o = t.outcome
        if o is None or not o.counts:
            kind = o.error_kind if o is not None and o.error_kind else "unscored"
            agg.errors[kind] = agg.errors.get(kind, 0) + 1
        else:
            d["counted"] += 1
            d["successes"] += int(o.success)
            conf = o.components.get("confidence")
            if conf is not None:
                p, y = min(1.0, max(0.0, float(conf))), float(o.success)
                acc = bins.setdefault(confidence_bin(p), [0.0, 0.0, 0.0, 0.0])
                acc[0] += 1
                acc[1] += p
                acc[2] += y
                acc[3] += (p - y) ** 2
        safety = [f for f in t.feedback if f.source == "safety"]
        agg.safety_records += len(safety)
        agg.safety_trajectories += int(bool(safety))
    agg.tasks = [TaskAggregate(**by_task[h]) for h in sorted(by_task)]
    agg.calibration = [CalibrationBin(bin=k, n=int(v[0]), confidence_sum=v[1], successes=int(v[2]),
                                      squared_error_sum=v[3]) for k, v in sorted(bins.items())]
    return agg
