"""The bootstrap over items (or clusters of items) for statistics that are not means: each
statistic is a function of *item weights*, and each replicate a weight vector.

A bootstrap replicate that draws item ``i`` ``w_i`` times computes the statistic on the data
with item ``i`` repeated ``w_i`` times; for every statistic here that is the statistic with
item weights ``w``. So a statistic is written once, as ``stat(W) -> values`` for a weight
matrix ``W`` of shape ``(B, N)`` (one row per replicate), the point estimate is
``stat(ones((1, N)))``, and all replicates come from a few array operations per chunk — no
Python loop over replicates. With clusters (tasks whose trajectories are not independent),
clusters are drawn (:func:`sharpen.stats.bootstrap.resample_counts`) and every item gets the
count of its cluster.

Intervals are **BCa** (bias-corrected and accelerated; Efron, 1987): the percentiles of the
replicates are read at ``Φ(z0 + (z0 + z_q) / (1 − a (z0 + z_q)))`` with the bias correction
``z0`` from the share of replicates below the estimate (ties count half) and the acceleration
``a`` from a delete-one-cluster jackknife (with more than :data:`JACKKNIFE_BLOCKS` clusters,
a delete-one-block jackknife over that many blocks of clusters, block = cluster index modulo
the number of blocks). Agreement statistics are bounded and skewed near their bounds; the plain
percentile interval there is off-centre (docs/evaluation.md gives the measured coverage).

Replicates where the statistic is undefined (``nan``: a resample with a single label, say)
are dropped before the percentiles are read; :class:`BootResult` counts them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

import numpy as np

from sharpen.stats.bootstrap import DEFAULT_REPS, resample_counts

BootMethod = Literal["bca", "percentile"]
"""How :func:`bootstrap` reads its interval off the replicates."""

Stat = Callable[[np.ndarray], np.ndarray]
"""A statistic of item weights: ``(B, N)`` weights to ``(B,)`` values, or ``(B, K)`` for
``K`` statistics computed together."""

JACKKNIFE_BLOCKS = 1000
"""At most this many jackknife deletions for the BCa acceleration."""

_CELLS = 2_000_000
"""Weight matrices are built in chunks of at most this many (replicate × item) cells."""


@dataclass(frozen=True)
class BootResult:
    """Point estimates and BCa intervals of ``K`` statistics over one set of replicates."""

    value: np.ndarray
    """Shape ``(K,)``: the statistics on the data (``nan`` where undefined)."""
    low: np.ndarray
    """Shape ``(K,)``: lower ends (``nan`` where no interval exists)."""
    high: np.ndarray
    """Shape ``(K,)``: upper ends."""
    undefined: np.ndarray
    """Shape ``(K,)``: replicates on which the statistic was undefined (dropped)."""
    n_clusters: int
    """Independent units resampled."""


def level_sums(w: np.ndarray, codes: np.ndarray, n_levels: int,
               values: np.ndarray | None = None) -> np.ndarray:
    """``out[r, g] = Σ_{i: codes[i] = g} w[r, i] · values[i]`` (``values`` default 1), shape
    ``(B, n_levels)``: a per-replicate ``bincount`` done as one flat ``bincount``."""
    b = w.shape[0]
    weights = w if values is None else w * values[None, :]
    idx = codes[None, :] + (np.arange(b) * n_levels)[:, None]
    flat = np.bincount(idx.ravel(), weights=weights.ravel(), minlength=b * n_levels)
    return np.asarray(flat, dtype=float).reshape(b, n_levels)


def as_columns(x: np.ndarray) -> np.ndarray:
    """Values of one statistic ``(B,)`` as a column ``(B, 1)``; ``(B, K)`` stays as it is."""
    x = np.asarray(x, dtype=float)
    return x[:, None] if x.ndim == 1 else x


def point(stat: Stat, n_items: int) -> np.ndarray:
    """``stat`` on the data itself (every weight 1), shape ``(K,)``."""
    return np.asarray(as_columns(stat(np.ones((1, n_items))))[0], dtype=float)


def _boot_weights(codes: np.ndarray, n_clusters: int, n_boot: int, rng: np.random.Generator,
                  ) -> Iterator[np.ndarray]:
    per = max(1, _CELLS // max(len(codes), 1))
    for counts in resample_counts(n_clusters, n_boot, rng):
        for s in range(0, len(counts), per):
            yield counts[s:s + per][:, codes]


def _jackknife_weights(codes: np.ndarray, n_clusters: int) -> Iterator[np.ndarray]:
    blocks = codes % JACKKNIFE_BLOCKS if n_clusters > JACKKNIFE_BLOCKS else codes
    k = min(n_clusters, JACKKNIFE_BLOCKS)
    per = max(1, _CELLS // max(len(codes), 1))
    for s in range(0, k, per):
        drop = np.arange(s, min(k, s + per))
        yield (blocks[None, :] != drop[:, None]).astype(float)


def _bca(reps: np.ndarray, theta: float, jack: np.ndarray, level: float) -> tuple[float, float]:
    r = reps[~np.isnan(reps)]
    if len(r) == 0 or not np.isfinite(theta):
        return float("nan"), float("nan")
    b = len(r)
    share = float(np.count_nonzero(r < theta) + 0.5 * np.count_nonzero(r == theta)) / b
    # Every replicate on one side: z0 would be infinite; clip to what B replicates can show.
    share = min(max(share, 1 / (b + 1)), b / (b + 1))
    nd = NormalDist()
    z0 = nd.inv_cdf(share)
    j = jack[~np.isnan(jack)]
    a = 0.0
    if len(j) >= 2:
        d = j.mean() - j
        ss = float(np.sum(d * d))
        if ss > 0:
            a = float(np.sum(d**3)) / (6 * ss**1.5)
    ends = []
    for q in ((1 - level) / 2, (1 + level) / 2):
        zq = z0 + nd.inv_cdf(q)
        ends.append(nd.cdf(z0 + zq / (1 - a * zq)))
    lo, hi = np.quantile(r, ends)
    return float(lo), float(hi)


def _percentile(reps: np.ndarray, level: float) -> tuple[float, float]:
    r = reps[~np.isnan(reps)]
    if len(r) == 0:
        return float("nan"), float("nan")
    lo, hi = np.quantile(r, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def bootstrap(stat: Stat, n_items: int, *, clusters: np.ndarray | None = None,
              n_boot: int = DEFAULT_REPS, seed: int = 0, level: float = 0.95,
              method: BootMethod = "bca") -> BootResult:
    """Point estimates and intervals of the statistics ``stat`` computes, by the bootstrap
    over items (``clusters`` ``None``) or over clusters (integer codes, one per item, from
    :func:`sharpen.stats.clustered.cluster_codes`). Deterministic in ``seed``. With fewer
    than two clusters there is nothing to resample: every interval is ``nan``.
    ``method="percentile"`` gives the plain percentile interval instead of BCa (kept to
    measure what BCa buys; benchmarks/agreement_coverage.py)."""
    if clusters is None:
        codes = np.arange(n_items, dtype=np.int64)
    else:
        _, codes = np.unique(np.asarray(clusters), return_inverse=True)
        codes = codes.astype(np.int64)
    if len(codes) != n_items:
        raise ValueError(f"clusters has {len(codes)} entries for {n_items} items")
    g = int(codes.max()) + 1 if n_items else 0
    theta = point(stat, n_items)
    k = len(theta)
    if g < 2:
        nan = np.full(k, np.nan)
        return BootResult(value=theta, low=nan, high=nan.copy(), undefined=np.zeros(k, dtype=int),
                          n_clusters=g)
    rng = np.random.default_rng(seed)
    reps = np.concatenate([as_columns(stat(w)) for w in _boot_weights(codes, g, n_boot, rng)])
    if method == "percentile":
        ends = [_percentile(reps[:, i], level) for i in range(k)]
    else:
        jack = np.concatenate([as_columns(stat(w)) for w in _jackknife_weights(codes, g)])
        ends = [_bca(reps[:, i], float(theta[i]), jack[:, i], level) for i in range(k)]
    return BootResult(value=theta, low=np.array([e[0] for e in ends]),
                      high=np.array([e[1] for e in ends]),
                      undefined=np.isnan(reps).sum(axis=0), n_clusters=g)
