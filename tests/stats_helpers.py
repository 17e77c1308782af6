"""Helpers of the stats tests: TaskTables from arrays, and Bernoulli task simulations."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sharpen.stats.taskdata import TaskTable


def make_table(
    n: Sequence[int], c: Sequence[int], *, run_id: str = "run", clusters: Sequence[str] | None = None,
    prefix: str = "t", metadata: Sequence[dict] | None = None,
) -> TaskTable:
    """A TaskTable of tasks ``{prefix}{i}`` with ``n[i]`` valid trials, ``c[i]`` successes
    (tasks with the same ``prefix`` and index match across tables)."""
    t = len(n)
    meta = [dict(m) for m in metadata] if metadata is not None else [{} for _ in range(t)]
    if clusters is not None:
        for m, k in zip(meta, clusters, strict=True):
            m["cluster"] = k
    def z() -> np.ndarray:
        return np.zeros(t, dtype=np.int64)

    return TaskTable(
        run_id=run_id, task_hash=[f"{prefix}{i}" for i in range(t)],
        task_id=[f"{prefix}/{i}" for i in range(t)], metadata=meta,
        attempts=np.asarray(n, dtype=np.int64), n=np.asarray(n, dtype=np.int64),
        c=np.asarray(c, dtype=np.int64), input_tokens=z(), output_tokens=z(), cost_usd=np.zeros(t),
        cost_unknown=z(), seconds=np.zeros(t),
    )


def covered(lo: float, hi: float, truth: float) -> bool:
    """Whether ``[lo, hi]`` contains ``truth``."""
    return lo <= truth <= hi
