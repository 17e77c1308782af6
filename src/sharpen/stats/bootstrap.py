"""The bootstrap over clusters (tasks, or the clusters tasks share), vectorised.

Used where no closed form fits: paired comparisons of runs with several epochs (the mean of
per-task differences). One replicate draws ``G`` clusters with replacement; a statistic that
is a ratio of per-cluster sums (``Σ num / Σ den``: a mean over the tasks where a value is
defined) is then ``(w @ num) / (w @ den)`` for the replicate's count vector ``w``, so all
``K`` statistics of all replicates come from one matrix product per chunk of replicates.

Intervals are *expanded percentile* intervals (Hesterberg, 2015): the plain percentile
interval is too narrow with few clusters (it ignores the ``(G−1)/G`` bias of the bootstrap
variance and uses normal rather than t tails), so the percentiles are taken at
``α' = 2Φ(−sqrt(G/(G−1)) · t_{G−1, 1−α/2})`` instead of ``α``. The p-value is the matching
inversion: the smallest α whose expanded interval excludes 0, so a verdict's interval and
p-value never disagree.

Randomness comes only from the ``numpy.random.Generator`` passed in: the same seed gives
the same intervals.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from statistics import NormalDist

import numpy as np

from sharpen.stats.intervals import t_quantile

DEFAULT_REPS = 2000
"""Bootstrap replicates unless a caller asks otherwise."""

_CELLS_PER_CHUNK = 2_000_000
"""Replicates are drawn in chunks of at most this many (replicate × cluster) counts."""


def resample_counts(n_clusters: int, n_reps: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Count vectors of ``n_reps`` bootstrap replicates, in chunks of shape ``(b, G)``:
    ``counts[r, g]`` is how often cluster ``g`` was drawn in replicate ``r`` (rows sum to
    ``G``)."""
    g = n_clusters
    per = max(1, min(n_reps, _CELLS_PER_CHUNK // max(g, 1)))
    done = 0
    while done < n_reps:
        b = min(per, n_reps - done)
        idx = rng.integers(0, g, size=(b, g)) + (np.arange(b) * g)[:, None]
        yield np.bincount(idx.ravel(), minlength=b * g).reshape(b, g).astype(float)
        done += b


def bootstrap_ratio(
    num: np.ndarray, den: np.ndarray, n_reps: int, rng: np.random.Generator
) -> np.ndarray:
    """Bootstrap replicates of ``Σ_g num[g, k] / Σ_g den[g, k]`` for each column ``k``.

    ``num`` and ``den`` have shape ``(G, K)`` (per-cluster sums). Returns shape
    ``(n_reps, K)``; a replicate whose denominator is 0 is ``nan``.
    """
    num = np.asarray(num, dtype=float)
    den = np.asarray(den, dtype=float)
    if num.ndim == 1:
        num, den = num[:, None], den[:, None]
    out = np.empty((n_reps, num.shape[1]))
    row = 0
    for w in resample_counts(num.shape[0], n_reps, rng):
        top, bottom = w @ num, w @ den
        with np.errstate(invalid="ignore", divide="ignore"):
            out[row:row + len(w)] = np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1), np.nan)
        row += len(w)
    return out


def _inflation(n_clusters: int) -> float:
    return math.sqrt(n_clusters / (n_clusters - 1)) if n_clusters > 1 else 1.0


def expanded_tail(level: float, n_clusters: int) -> float:
    """The tail probability ``α'/2`` at which the expanded percentile interval of nominal
    ``level`` is read, for ``n_clusters`` resampled clusters."""
    if n_clusters < 2:
        return (1 - level) / 2
    t = t_quantile(0.5 + level / 2, n_clusters - 1)
    return NormalDist().cdf(-_inflation(n_clusters) * t)


def percentile_interval(reps: np.ndarray, level: float = 0.95, n_clusters: int = 0) -> tuple[float, float]:
    """The expanded percentile interval of the (non-nan) replicates at nominal ``level``
    (plain percentile when ``n_clusters < 2``); ``(nan, nan)`` without replicates."""
    r = np.asarray(reps, dtype=float)
    r = r[~np.isnan(r)]
    if len(r) == 0:
        return float("nan"), float("nan")
    a = expanded_tail(level, n_clusters)
    lo, hi = np.quantile(r, [a, 1 - a])
    return float(lo), float(hi)


def percentile_p_value(reps: np.ndarray, n_clusters: int = 0) -> tuple[float, bool]:
    """Two-sided p-value of ``H0: θ = 0`` that inverts :func:`percentile_interval`: the
    smallest nominal α whose expanded interval excludes 0.

    The raw share ``p' = 2·min(#{θ* ≤ 0} + 1, #{θ* ≥ 0} + 1) / (B + 1)`` is the α' at
    which the plain percentile interval touches 0; it is mapped back through the expansion
    (``α = 2·(1 − T_{G−1}(Φ⁻¹(1 − p'/2) / sqrt(G/(G−1))))``). Returns ``(p, at_limit)``:
    ``at_limit`` is true when no replicate fell on the far side of 0, so ``p`` is only an
    upper bound set by the number of replicates.
    """
    r = np.asarray(reps, dtype=float)
    r = r[~np.isnan(r)]
    if len(r) == 0:
        return 1.0, False
    below = np.count_nonzero(r <= 0) + 1
    above = np.count_nonzero(r >= 0) + 1
    at_limit = min(below, above) == 1
    raw = min(1.0, 2 * min(below, above) / (len(r) + 1))
    if n_clusters < 2 or raw >= 1.0:
        return raw, at_limit
    from scipy.special import stdtr

    z = NormalDist().inv_cdf(1 - raw / 2) / _inflation(n_clusters)
    return float(min(1.0, 2 * (1 - stdtr(n_clusters - 1, z)))), at_limit
