"""Means of per-task values with cluster-robust standard errors.

sharpen reduces each task to one number first (its success rate over epochs, its pass@k,
a paired difference), then averages over tasks with equal weight. Epochs of one task are
never treated as independent draws: they are already folded into the task's value. Tasks
may further share a *cluster* (``TaskSpec.metadata["cluster"]``: tasks generated from one
template, questions about one document, ...); then the tasks of a cluster are not
independent either, and the standard error is computed over clusters.

The estimator is ``m = (1/T) Σ_t v_t`` over the ``T`` tasks, and its variance the CR1
cluster-robust ("sandwich") variance over ``G`` clusters::

    Var(m) = G/(G-1) · Σ_g (Σ_{t∈g} (v_t − m))² / T²

which is what statsmodels' ``OLS(v, 1).fit(cov_type="cluster")`` computes for an intercept.
With one task per cluster it is the familiar ``s² / T``. The interval is
``m ± t_{G-1, 1-α/2} · SE`` (Student t with ``G − 1`` degrees of freedom, the usual small-G
correction) for differences; proportions get the Wilson interval at the effective sample
size that this SE implies (:func:`clustered_interval`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sharpen.stats.intervals import Interval, t_quantile, wilson_interval, z_quantile


def cluster_codes(keys: Sequence[str]) -> np.ndarray:
    """Integer codes ``0..G-1`` for cluster keys, in order of first appearance."""
    seen: dict[str, int] = {}
    return np.array([seen.setdefault(k, len(seen)) for k in keys], dtype=np.int64)


@dataclass(frozen=True)
class ClusteredMean:
    """An equal-weight mean over items with its cluster-robust standard error."""

    mean: float
    """``(1/T) Σ v_t``."""
    se: float
    """CR1 standard error (0 when fewer than two clusters)."""
    n_items: int
    """``T``."""
    n_clusters: int
    """``G``."""


def clustered_mean(values: np.ndarray, clusters: np.ndarray | None = None) -> ClusteredMean:
    """Mean of ``values`` (one per task) and its CR1 standard error over ``clusters``
    (integer codes from :func:`cluster_codes`; ``None`` means every task is its own
    cluster). Raises ``ValueError`` on an empty input."""
    v = np.asarray(values, dtype=float)
    t = len(v)
    if t == 0:
        raise ValueError("clustered_mean needs at least one value")
    m = float(v.mean())
    if clusters is None:
        g = t
        sums = v - m
    else:
        codes = np.asarray(clusters, dtype=np.int64)
        _, codes = np.unique(codes, return_inverse=True)
        g = int(codes.max()) + 1
        # bincount with weights sums in float64; numpy's stubs type every bincount as intp.
        sums = np.asarray(np.bincount(codes, weights=v - m, minlength=g), dtype=float)
    if g < 2:
        return ClusteredMean(mean=m, se=0.0, n_items=t, n_clusters=g)
    var = g / (g - 1) * float(np.sum(sums * sums)) / (t * t)
    return ClusteredMean(mean=m, se=math.sqrt(max(var, 0.0)), n_items=t, n_clusters=g)


def clustered_interval(
    est: ClusteredMean, level: float = 0.95, *, proportion: bool = True, max_n: float | None = None
) -> Interval:
    """The confidence interval of a clustered mean.

    **Proportions** (per-task success rates, pass@k, pass^k: values in [0, 1]) get a Wilson
    interval at the *effective sample size* ``n_eff = m(1 − m) / SE²`` — the number of
    independent Bernoulli trials that would give the clustered standard error — with the
    Student-t quantile on ``G − 1`` degrees of freedom in place of z (``wilson-deff``; Korn &
    Graubard, 1998). It is the clustered SE expressed on the Wilson scale: it stays inside
    [0, 1] and keeps its coverage for rare outcomes, where ``m ± t·SE`` collapses (at a mean
    near 0 the symmetric interval covers the truth far less than 95% of the time;
    docs/evaluation.md shows the simulation). ``n_eff`` is capped at ``max_n`` (the valid
    trials behind the mean). When the SE is zero because every value is 0 (or every value
    is 1), ``n_eff`` is the number of clusters: a run that failed everything ``E`` times on
    ``G`` tasks has shown ``G`` independent failures, not ``G × E``.

    **Differences** (``proportion=False``) get ``m ± t_{G−1} · SE`` clipped to [-1, 1]
    (``clustered-t``). Fewer than two clusters give ``none`` (the whole range).
    """
    q = 0.5 + level / 2
    g = est.n_clusters
    if not proportion:
        if g < 2:
            return Interval(low=-1.0, high=1.0, level=level, method="none")
        half = t_quantile(q, g - 1) * est.se
        return Interval(low=max(-1.0, est.mean - half), high=min(1.0, est.mean + half), level=level,
                        method="clustered-t")
    m = min(1.0, max(0.0, est.mean))
    z = t_quantile(q, g - 1) if g >= 2 else z_quantile(q)
    cap = max_n if max_n is not None else float("inf")
    if m in (0.0, 1.0) or g < 2:
        n_eff = float(max(g, 1))
    elif est.se == 0.0:
        n_eff = cap if math.isfinite(cap) else float(est.n_items)
    else:
        n_eff = min(cap, m * (1 - m) / est.se**2)
    lo, hi = wilson_interval(m * n_eff, n_eff, z)
    return Interval(low=lo, high=hi, level=level, method="wilson-deff")
