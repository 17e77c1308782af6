"""One statistic with its interval (:class:`Estimate`), and how the agreement modules build them:
BCa bootstrap replicates of several statistics at once, or Wilson's interval for a proportion.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from sharpen.stats.clustered import cluster_codes, clustered_interval, clustered_mean
from sharpen.stats.intervals import wilson
from sharpen.stats.itemboot import Stat, as_columns, bootstrap
from sharpen.stats.rounding import interval_text

EstimateMethod = Literal["bootstrap-bca", "wilson", "wilson-deff", "none"]
"""How an :class:`Estimate`'s interval was computed (``none``: no interval exists)."""


class Estimate(BaseModel):
    """One statistic: its value, its interval and the items behind it."""

    model_config = ConfigDict(frozen=True)

    value: float | None
    """The statistic (``None`` where undefined, e.g. κ when nobody varied)."""
    low: float | None
    """Lower end of the interval (``None`` without one)."""
    high: float | None
    """Upper end."""
    level: float = 0.95
    """Nominal coverage."""
    method: EstimateMethod
    """How the interval was computed."""
    n: int
    """Items the statistic used."""

    def text(self, digits: int = 2) -> str:
        """``0.56 [0.41, 0.69]``, the interval rounded outward (:mod:`sharpen.stats.rounding`)."""
        if self.value is None:
            return "undefined"
        ci = "" if self.low is None or self.high is None else " " + interval_text(
            self.low, self.high, scale=1.0, digits=digits)
        return f"{self.value:.{digits}f}{ci}"




def finite(x: float | None) -> float | None:
    """``x`` as a float, or ``None`` when it is missing or not finite."""
    return None if x is None or not math.isfinite(x) else float(x)


def is_missing(x: object) -> bool:
    """Whether a label is missing: ``None`` or a float ``nan``."""
    return x is None or (isinstance(x, float) and math.isnan(x))


def cluster_array(clusters: Sequence[Hashable] | None, keep: np.ndarray) -> np.ndarray | None:
    """Integer cluster codes of the kept items (``None`` stays ``None``: every item is its own
    cluster)."""
    if clusters is None:
        return None
    if len(clusters) != len(keep):
        raise ValueError(f"clusters has {len(clusters)} keys for {len(keep)} items")
    return cluster_codes([str(c) for c, k in zip(clusters, keep, strict=True) if k])


def stack(*stats: Stat) -> Stat:
    """Several statistics of the same items as one (their columns side by side)."""

    def stat(w: np.ndarray) -> np.ndarray:
        return np.concatenate([as_columns(s(w)) for s in stats], axis=1)

    return stat


def boot_estimates(stat: Stat, n: int, ns: Sequence[int], clusters: np.ndarray | None, *,
                   n_boot: int, seed: int, level: float) -> tuple[list[Estimate], int]:
    """:class:`Estimate` s of the ``K`` statistics ``stat`` computes on ``n`` items (``ns``:
    the items behind each), BCa over items or ``clusters``; and the number of clusters.
    Without items every value is ``None``."""
    if n == 0:
        return [Estimate(value=None, low=None, high=None, level=level, method="none", n=0)
                for _ in ns], 0
    r = bootstrap(stat, n, clusters=clusters, n_boot=n_boot, seed=seed, level=level)
    out = []
    for v, lo, hi, k in zip(r.value, r.low, r.high, ns, strict=True):
        has = finite(v) is not None and finite(lo) is not None and finite(hi) is not None
        out.append(Estimate(value=finite(v), low=finite(lo) if has else None,
                            high=finite(hi) if has else None, level=level,
                            method="bootstrap-bca" if has else "none", n=k))
    return out, r.n_clusters


def proportion(hits: np.ndarray, clusters: np.ndarray | None, level: float = 0.95) -> Estimate:
    """The share of true ``hits`` with Wilson's interval, or with clusters Wilson's at the
    effective sample size (``wilson-deff``, :func:`sharpen.stats.clustered.clustered_interval`)."""
    n = len(hits)
    if n == 0:
        return Estimate(value=None, low=None, high=None, level=level, method="none", n=0)
    h = np.asarray(hits, dtype=float)
    if clusters is None:
        ci = wilson(int(h.sum()), n, level)
        return Estimate(value=float(h.mean()), low=ci.low, high=ci.high, level=level,
                        method="wilson", n=n)
    est = clustered_mean(h, clusters)
    ci = clustered_interval(est, level, max_n=float(n))
    if ci.method != "wilson-deff":
        return Estimate(value=est.mean, low=None, high=None, level=level, method="none", n=n)
    return Estimate(value=est.mean, low=ci.low, high=ci.high, level=level, method="wilson-deff", n=n)
