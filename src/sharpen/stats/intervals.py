"""Confidence intervals: the :class:`Interval` every report carries, Wilson for proportions,
and the normal / Student-t quantiles the other interval methods use.

Quantiles come from :mod:`statistics` (normal) and ``scipy.special`` (Student t), imported
lazily: ``scipy.stats`` alone takes over a second to import, which ``sharpen report`` does
not need to pay.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Literal

from pydantic import BaseModel

Z95 = 1.959963984540054  # the 0.975 quantile of the standard normal

IntervalMethod = Literal[
    "wilson", "wilson-deff", "clustered-t", "bootstrap-percentile", "newcombe", "none"
]
"""How an interval was computed (see docs/evaluation.md, "Intervals")."""


class Interval(BaseModel):
    """A two-sided confidence interval ``[low, high]`` at ``level``."""

    low: float
    """Lower end."""
    high: float
    """Upper end."""
    level: float = 0.95
    """Nominal coverage."""
    method: IntervalMethod
    """Which construction produced it."""


def z_quantile(q: float) -> float:
    """The ``q`` quantile of the standard normal (``z_quantile(0.975) ≈ 1.96``)."""
    return NormalDist().inv_cdf(q)


def t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t with ``df`` degrees of freedom (``df > 0``)."""
    from scipy.special import stdtrit

    return float(stdtrit(df, q))


def wilson_interval(successes: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; ``(0.0, 1.0)`` when ``n == 0``.

    Wilson stays inside [0, 1] and keeps near-nominal coverage at small n and extreme rates,
    where the normal (Wald) interval collapses to zero width. ``n`` may be fractional (an
    effective sample size); ``successes`` then is ``rate * n``.
    """
    if n <= 0:
        return 0.0, 1.0
    if not -1e-9 <= successes <= n + 1e-9:
        raise ValueError(f"successes={successes} must lie in [0, n={n}]")
    p = min(1.0, max(0.0, successes / n))
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def wilson(successes: int, n: int, level: float = 0.95) -> Interval:
    """:func:`wilson_interval` at ``level`` as an :class:`Interval`."""
    lo, hi = wilson_interval(successes, n, z_quantile(0.5 + level / 2))
    return Interval(low=lo, high=hi, level=level, method="wilson")
